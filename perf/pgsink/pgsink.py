#!/usr/bin/env python3
"""Helpers of perf/run_pgsink.sh (`newsflow sink postgres` beside psql COPY; perf/README.md,
"PostgreSQL sink (issue 39)").

  pgsink.py gen KIND N SEED            KEY<TAB>VALUE lines (kcat -K '\\t') on stdout: N records
                                       of one output topic, deterministic for SEED
  pgsink.py copy KIND IN DIR           the same records as the typed tables' rows the sink
                                       writes (COPY text format), DIR/<table>.tsv, and
                                       DIR/load.sql: one \\copy per table, run with psql -1
  pgsink.py trickle RATE SECONDS SEED PROBES
                                       interest updates at RATE/s for SECONDS on stdout
                                       (KEY<TAB>VALUE, flushed every 10 ms); every 10th is of
                                       the user "probe" with versions 1, 2, ...; PROBES gets
                                       "version<TAB>wall ms" of each probe as it is written
  pgsink.py scrape URL                 the sink's /metrics: {"records": {topic: n}, ...} as JSON
  pgsink.py lag URL PROBES WATCH       visible lag p50/p99: from the sink's histogram (linear
                                       inside a bucket) and, directly, from the probes and the
                                       psql \\watch poll of user_interest (WATCH); JSON
  pgsink.py report RESULTS             the markdown table of results.jsonl
"""
import hashlib
import json
import random
import sys
import time
import urllib.request
from datetime import datetime, timedelta, timezone

KINDS = ("articles", "interest-updates", "story-clusters", "trending")
T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)


def iso(dt, ms=False):
    if ms:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (dt.microsecond // 1000)
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def hexid(*parts, n=32):
    return hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()[:n]


def vocabulary(rnd, n=3000):
    sy = ["ka", "lo", "ri", "men", "tas", "or", "ve", "sun", "dra", "pe", "li", "com", "na",
          "ter", "gi", "bal", "mo", "the", "in", "str", "ay", "port", "el", "qua", "ne", "xi"]
    words = set()
    while len(words) < n:
        words.add("".join(rnd.choice(sy) for _ in range(rnd.choice((1, 2, 2, 3, 3, 4)))))
    return sorted(words)


TOPICS = ["politics", "economy", "science", "health", "sports", "tech", "climate", "culture",
          "world", "business", "education", "travel", "food", "music", "film", "space",
          "energy", "transport", "law", "crime", "housing", "labour", "markets", "crypto",
          "ai", "oceans", "weather", "elections", "europe", "asia", "africa", "americas",
          "media", "books", "art", "fashion", "gaming", "football", "tennis", "cycling"]
CATEGORIES = ["Economy", "World", "Science", "Health", "Sport", "Technology", "Climate",
              "Culture", "Business", "Politics", "Opinion", "Local", "Travel", "Food & Drink",
              "Arts", "Education", "Media", "Energy", "Law \"and\" Order", "Transport"]


def sparse_vector(rnd, lo, hi):
    ks = rnd.sample(TOPICS, rnd.randint(lo, hi))
    ws = [rnd.random() + 0.05 for _ in ks]
    norm = sum(w * w for w in ws) ** 0.5
    return {k: round(w / norm, 6) for k, w in zip(ks, ws)}


def gen_articles(rnd, n):
    words = vocabulary(rnd)
    sites = ["site%02d.example.com" % i for i in range(60)]
    names = ["Ana Silva", "Priya Anand", "Jon Berg", "Mei Chen", "Ola Nordmann", "Ravi Rao",
             "Lena Koch", "Tom O'Neil", "Sara Haddad", "Ivo Petrov"]
    for i in range(n):
        site = rnd.choice(sites)
        title_w = [rnd.choice(words) for _ in range(rnd.randint(6, 12))]
        title = " ".join(title_w).capitalize()
        body_len = rnd.randint(2000, 3000)
        sent, body = [], 0
        while body < body_len:
            s = " ".join(rnd.choice(words) for _ in range(rnd.randint(8, 20))).capitalize() + "."
            sent.append(s)
            body += len(s) + 1
        if rnd.random() < 0.3:  # paragraphs, a tab and a quote now and then: COPY escaping
            sent.insert(rnd.randrange(len(sent)), "\n\n\"Quoted\"\tsaid one.")
        text = " ".join(sent)
        pub = T0 + timedelta(seconds=i * 7 + rnd.randint(0, 600))
        upd = pub + timedelta(seconds=rnd.choice((0, 0, 0, 900)))
        url = "https://%s/%04d/%s-%d" % (site, 2026, "-".join(title_w[:4]), i)
        cats = rnd.sample(CATEGORIES, rnd.randint(1, 3))
        aid = hexid("article", url)
        yield aid, {
            "article_id": aid,
            "url": url,
            "link": url,
            "guid": None if rnd.random() < 0.2 else "%s-%d" % (site, i),
            "source_id": hexid("source", site, n=16),
            "feed_url": "https://%s/feed.xml" % site,
            "title": title,
            "summary": text[:rnd.randint(150, 300)],
            "body": text,
            "authors": [{"name": rnd.choice(names), "email": None if rnd.random() < 0.5 else
                         "desk@%s" % site} for _ in range(rnd.randint(1, 2))],
            "categories": cats,
            "language": "en",
            "published_at": iso(pub),
            "updated_at": iso(upd),
            "date_fallback": rnd.random() < 0.05,
            "ingested_at": iso(pub + timedelta(seconds=30, milliseconds=rnd.randint(0, 999)), True),
            "content_hash": hexid("content", text, n=64),
            "category_labels": [{"category": c, "confidence": round(rnd.uniform(0.5, 1), 3)}
                                for c in cats[:rnd.randint(0, 2)]],
            "topics": sparse_vector(rnd, 1, 4),
        }


def gen_interest(rnd, n, versions=5):
    users = max(1, n // versions)
    order = list(range(users))
    t = T0
    i = 0
    for v in range(1, versions + 1):  # each round: every user once, in a new order
        rnd.shuffle(order)
        for u in order:
            if i == n:
                return
            i += 1
            t += timedelta(milliseconds=rnd.randint(1, 20))
            uid = "u-%d" % u
            yield uid, {"user_id": uid, "version": v, "vector": sparse_vector(rnd, 4, 10),
                        "updated_at": iso(t, True)}


def gen_clusters(rnd, n):
    roots = []  # live roots, most recent last
    t = T0
    for i in range(n):
        aid = hexid("story-article", i)
        t += timedelta(milliseconds=rnd.randint(5, 200))
        r = rnd.random()
        if not roots or r < 0.4:
            roots.append(aid)
            rec = {"cluster_id": aid, "action": "new", "similarity": 1, "merged_from": []}
        elif r < 0.98 or len(roots) < 10:
            rec = {"cluster_id": rnd.choice(roots[-2000:]), "action": "joined",
                   "similarity": round(rnd.uniform(0.6, 1), 4), "merged_from": []}
        else:  # into a recent root, one or two other recent roots merged
            into = roots[-1 - rnd.randrange(min(len(roots), 500))]
            others = [c for c in rnd.sample(roots[-500:], min(len(roots), 3)) if c != into][:rnd.randint(1, 2)]
            for c in others:
                roots.remove(c)
            rec = {"cluster_id": into, "action": "merged",
                   "similarity": round(rnd.uniform(0.8, 1), 4), "merged_from": others}
        rec = {"article_id": aid, **rec, "ts": iso(t, True)}
        yield aid, rec


def gen_trending(rnd, n, items=20):
    pool = [hexid("trend-article", i) for i in range(5000)]
    for i in range(n):
        end = T0 + timedelta(seconds=3600 + 30 * i)
        arts = rnd.sample(pool, items)
        scores = sorted((round(rnd.uniform(1, 500), 2) for _ in arts), reverse=True)
        yield iso(end), {"window_start": iso(end - timedelta(hours=1)), "window_end": iso(end),
                         "items": [{"article_id": a, "score": s} for a, s in zip(arts, scores)]}


GEN = {"articles": gen_articles, "interest-updates": gen_interest,
       "story-clusters": gen_clusters, "trending": gen_trending}


def cmd_gen(kind, n, seed):
    rnd = random.Random("%s-%s" % (seed, kind))
    out = sys.stdout
    for key, rec in GEN[kind](rnd, int(n)):
        out.write(key + "\t" + json.dumps(rec, separators=(",", ":")) + "\n")


# ---- COPY text format ----

def esc(v):
    if v is None:
        return "\\N"
    if isinstance(v, bool):
        return "t" if v else "f"
    if isinstance(v, (dict, list)):
        v = json.dumps(v, separators=(",", ":"))
    s = str(v)
    return s.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


def pg_array(items):
    return "{" + ",".join('"' + x.replace("\\", "\\\\").replace('"', '\\"') + '"' for x in items) + "}"


def rows_articles(recs):
    art, top = [], []
    for r in recs:  # unique article_ids (the generator's): the last record of one wins anyway
        art.append((r["article_id"], r["url"], r.get("link"), r.get("guid"), r["source_id"],
                    r["feed_url"], r["title"], r["summary"], r["body"], r["authors"],
                    pg_array(r["categories"]), r["category_labels"], r["topics"],
                    r.get("language"), r["published_at"], r["updated_at"], r["date_fallback"],
                    r["ingested_at"], r["content_hash"], None))
        for k, w in r["topics"].items():
            top.append((k, r["article_id"], repr(float(w)), r["published_at"]))
    return [("article", "article_id, url, link, guid, source_id, feed_url, title, summary, body, "
             "authors, categories, category_labels, topics, language, published_at, updated_at, "
             "date_fallback, ingested_at, content_hash, cluster_id", art),
            ("article_topic", "topic, article_id, weight, published_at", top)]


def rows_interest(recs):
    """Every version once; user_interest is a view over them (the highest version)."""
    ver = [(r["user_id"], r["version"], r["updated_at"], r["vector"]) for r in recs]
    return [("user_interest_version", "user_id, version, updated_at, vector", ver)]


def rows_clusters(recs):
    merged_into, members = {}, {}
    seen = []  # every cluster id in order of first mention
    for r in recs:
        for c in [r["cluster_id"]] + r["merged_from"]:
            if c not in merged_into:
                merged_into[c] = None
                seen.append(c)
        for f in r["merged_from"]:  # newsflow_merge_story(into, from), flat
            root = merged_into[r["cluster_id"]] or r["cluster_id"]
            if root == f:
                continue
            merged_into[f] = root
            for c, m in merged_into.items():
                if m == f:
                    merged_into[c] = root
        members[r["article_id"]] = r
    clusters = [(c, merged_into[c]) for c in seen]
    mem = [(a, merged_into[r["cluster_id"]] or r["cluster_id"], r["action"],
            repr(float(r["similarity"])), r["ts"]) for a, r in members.items()]
    return [("story_cluster", "cluster_id, merged_into", clusters),
            ("story_member", "article_id, cluster_id, action, similarity, joined_at", mem)]


def rows_trending(recs):
    snaps, items = [], []
    for r in recs:
        snaps.append((r["window_end"], r["window_start"]))
        for n, it in enumerate(r["items"], 1):
            items.append((r["window_end"], n, it["article_id"], repr(float(it["score"]))))
    return [("trending_snapshot", "window_end, window_start", snaps),
            ("trending_item", "window_end, rank, article_id, score", items)]


ROWS = {"articles": rows_articles, "interest-updates": rows_interest,
        "story-clusters": rows_clusters, "trending": rows_trending}


def cmd_copy(kind, path, outdir):
    recs = [json.loads(line.split("\t", 1)[1]) for line in open(path)]
    script, counts = [], {}
    for table, cols, rows in ROWS[kind](recs):
        f = "%s/%s.tsv" % (outdir, table)
        with open(f, "w") as out:
            for row in rows:
                out.write("\t".join(esc(v) for v in row) + "\n")
        script.append("\\copy %s (%s) FROM '%s'" % (table, cols, f))
        counts[table] = len(rows)
    with open(outdir + "/load.sql", "w") as out:
        out.write("\n".join(script) + "\n")
    print(json.dumps(counts))


# ---- the trickle ----

def cmd_trickle(rate, seconds, seed, probes):
    rate, seconds = float(rate), float(seconds)
    rnd = random.Random("trickle-%s" % seed)
    out, pf = sys.stdout, open(probes, "w")
    n_total = int(rate * seconds)
    start = time.monotonic()
    users, probe_v = 20000, 0
    versions = {}
    i = 0
    while i < n_total:
        due = min(n_total, int((time.monotonic() - start) * rate) + 1)
        while i < due:
            if i % 10 == 0:
                probe_v += 1
                uid, v = "probe", probe_v
            else:
                uid = "u-%d" % rnd.randrange(users)
                v = versions[uid] = versions.get(uid, 0) + 1
            now = time.time()
            rec = {"user_id": uid, "version": v, "vector": sparse_vector(rnd, 4, 10),
                   "updated_at": iso(datetime.fromtimestamp(now, timezone.utc), True)}
            out.write(uid + "\t" + json.dumps(rec, separators=(",", ":")) + "\n")
            if uid == "probe":
                pf.write("%d\t%d\n" % (v, int(now * 1000)))
            i += 1
        out.flush()
        time.sleep(0.01)
    pf.close()


# ---- metrics ----

def scrape(url):
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    recs, buckets = {}, []
    for line in text.splitlines():
        if line.startswith("newsflow_pgsink_records_total{"):
            topic = line.split('topic="', 1)[1].split('"', 1)[0]
            recs[topic] = int(float(line.rsplit(" ", 1)[1]))
        elif line.startswith("newsflow_pgsink_visible_lag_seconds_bucket{"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((float("inf") if le == "+Inf" else float(le),
                            int(float(line.rsplit(" ", 1)[1]))))
    return {"records": recs, "visible_buckets": buckets}


def cmd_scrape(url):
    print(json.dumps(scrape(url)))


def bucket_quantile(buckets, q):
    """Prometheus' histogram_quantile: linear inside the bucket that holds the rank."""
    buckets = sorted(buckets)
    total = buckets[-1][1] if buckets else 0
    if not total:
        return None
    rank, lo, prev = q * total, 0.0, 0
    for le, c in buckets:
        if c >= rank:
            if le == float("inf"):
                return lo
            return lo + (le - lo) * (rank - prev) / max(1, c - prev)
        lo, prev = le, c
    return lo


def cmd_lag(url, probes, watch):
    m = scrape(url)
    b = m["visible_buckets"]
    res = {"histogram_count": b[-1][1] if b else 0,
           "hist_p50_ms": None, "hist_p99_ms": None, "buckets": [[str(le), c] for le, c in b]}
    for q in (0.5, 0.99):
        v = bucket_quantile(b, q)
        res["hist_p%d_ms" % round(q * 100)] = None if v is None else round(v * 1000, 1)
    made = {}
    for line in open(probes):
        v, ms = line.split()
        made[int(v)] = int(ms)
    polls = []  # (wall ms, visible probe version), in time order
    for line in open(watch):
        parts = line.strip().split("|")
        if len(parts) == 2 and parts[0].isdigit():
            polls.append((int(parts[0]), int(parts[1] or 0)))
    lags, j = [], 0
    for v in sorted(made):
        while j < len(polls) and polls[j][1] < v:
            j += 1
        if j == len(polls):
            break
        lags.append(polls[j][0] - made[v])
    lags.sort()
    gaps = [b[0] - a[0] for a, b in zip(polls, polls[1:])]
    res.update({"probes": len(made), "probes_seen": len(lags), "polls": len(polls),
                "poll_interval_ms": round(sum(gaps) / len(gaps), 1) if gaps else None})
    if lags:
        pick = lambda q: lags[min(len(lags) - 1, int(q * len(lags)))]
        res.update({"direct_p50_ms": pick(0.5), "direct_p99_ms": pick(0.99),
                    "direct_max_ms": lags[-1]})
    print(json.dumps(res))


# ---- the report ----

def fmt(x, d=0):
    if x is None:
        return "—"
    return "{:,.{}f}".format(x, d)


def cmd_report(path):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    env = next((r for r in rows if r.get("bench") == "pgsink_env"), {})
    loads = [r for r in rows if r.get("bench") == "pgsink_load"]
    print("PostgreSQL sink beside psql COPY (%s, commit %s, %s CPUs, load %s at start)\n" % (
        env.get("date", "?"), env.get("commit", "?"), env.get("cpus", "?"), env.get("load1", "?")))
    print("| kind | records | rows written | contender | batch | records/s | sink / COPY "
          "| CPU s per 1,000 records: client + postgres | tables equal |")
    print("|---|---|---|---|---|---|---|---|---|")
    copy = {r["kind"]: r for r in loads if r["who"] == "copy"}
    for r in loads:
        c = copy.get(r["kind"])
        ratio = "" if r["who"] == "copy" or not c else "**%.2f×**" % (r["records_per_s"] / c["records_per_s"])
        print("| %s | %s | %s | %s | %s | %s | %s | %.3f + %.3f = %.3f | %s |" % (
            r["kind"], fmt(r["records"]), fmt(r["rows"]), r["who"],
            fmt(r.get("batch_rows")) if r["who"] == "sink" else "one COPY per table, one transaction",
            fmt(r["records_per_s"]), ratio, r["client_cpu_s_per_1k"], r["pg_cpu_s_per_1k"],
            r["client_cpu_s_per_1k"] + r["pg_cpu_s_per_1k"],
            "" if r["who"] == "copy" else ("yes" if r.get("equal") else "**NO**")))
    for r in rows:
        if r.get("bench") == "pgsink_lag":
            print("\nVisible lag, %s interest updates/s for %s s (every 10th of the user `probe`), "
                  "sink batch_rows %s, batch_ms %s:" % (r["rate"], r["seconds"], r["batch_rows"], r["batch_ms"]))
            print("- sink histogram (`newsflow_pgsink_visible_lag_seconds`, %d records, linear inside "
                  "a bucket): p50 %s ms, p99 %s ms" % (r["histogram_count"], fmt(r["hist_p50_ms"], 1),
                                                       fmt(r["hist_p99_ms"], 1)))
            print("- direct (probe written by the producer -> first psql poll that sees it, %d of %d "
                  "probes, polls every %s ms): p50 %s ms, p99 %s ms, max %s ms" % (
                      r["probes_seen"], r["probes"], r["poll_interval_ms"], fmt(r.get("direct_p50_ms")),
                      fmt(r.get("direct_p99_ms")), fmt(r.get("direct_max_ms"))))
            print("- sink CPU %.2f cores, postgres %.2f cores, broker %.2f cores during the trickle" % (
                r["sink_cores"], r["pg_cores"], r["broker_cores"]))
    bad = [r for r in rows if r.get("error")]
    for r in bad:
        print("\nBROKEN: %s" % json.dumps(r))


def main(argv):
    cmds = {"gen": (cmd_gen, 3), "copy": (cmd_copy, 3), "trickle": (cmd_trickle, 4),
            "scrape": (cmd_scrape, 1), "lag": (cmd_lag, 3), "report": (cmd_report, 1)}
    if len(argv) < 2 or argv[1] not in cmds or len(argv) - 2 != cmds[argv[1]][1]:
        sys.stderr.write(__doc__)
        return 2
    cmds[argv[1]][0](*argv[2:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
