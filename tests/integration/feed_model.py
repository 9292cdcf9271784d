"""feed_model.py — an independent reference model of /v1/feed (docs/ARCHITECTURE.md §4 "Queries"),
for test_query_feed.sh.

  python3 feed_model.py gen DIR N_ARTICLES      writes DIR/feed-*.rss and DIR/sources.txt
  python3 feed_model.py check BASE JOB_STDOUT TAXONOMY READERS [SETTINGS [VARIANTS]]

`gen` writes RSS feeds of generated articles whose texts use the taxonomy's keywords (so the
job's classifier gives them topic vectors), published over the last 60 hours (none within ten
minutes of the 48-hour edge), with near-duplicate pairs under other URLs on other feeds (so
story clusters have several members).

`check` ranks the feed of READERS readers (nine in ten demo readers, demo-user-0 .., nearly all
with interest vectors; one in ten readers that never read: cold) from the job's committed output records alone — `articles` (topics,
dates), `story-clusters` (union-find over new/joined/merged), `interest-updates` (each
reader's latest vector), `trending` (the last window) — and compares the top 20 with
GET /v1/feed/{user}. The ranking, as the design gives it:
  candidates: articles published in the last 48 h in the reader's top-5 topics (by weight);
  score = dot(interest, topics) * exp(-0.5 * hours since published) + 0.1 * trending / 1000;
  best first (score, then the newer, then the smaller id), one article per story cluster;
  a reader without a vector gets the trending window's articles in its order;
  with VARIANTS (ranking.variants' entries, comma-separated), each reader's variant is the one
  nfhash.py assigns from their id, and its weights replace the seed's in the score.
The job's state must be quiescent (no more read events or articles): the records are read
once, and every answer's epoch must show that same state (checked: the answers' `window_end`
and the record counts do not move while the readers are compared).
"""
import json
import math
import os
import random
import sys
import time
import urllib.parse
import urllib.request
from datetime import datetime, timezone

import jobout
import nfhash
from jobapi import get, post_events



def rfc822(ms):
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%a, %d %b %Y %H:%M:%S GMT")


def gen(out_dir, n, taxonomy_path):
    tax = json.load(open(taxonomy_path))
    topics = [(t["name"], sorted(t.get("keywords", {}))) for t in tax["topics"]]
    rng = random.Random(20261126)
    now = int(time.time() * 1000)
    feeds = [[] for _ in range(4)]
    edge = 48 * 3600 * 1000
    for i in range(n):
        while True:
            age = rng.randint(5 * 60 * 1000, 60 * 3600 * 1000)
            if abs(age - edge) > 10 * 60 * 1000:
                break
        ts = rng.sample(range(len(topics)), rng.choice([1, 2]))
        words = []
        for t in ts:
            words += rng.sample(topics[t][1], min(4, len(topics[t][1])))
        rng.shuffle(words)
        title = " ".join(words[:5]).capitalize() + f" report {i}"
        desc = " ".join(words) + f" in depth, story number {i}, with details {rng.random():.6f}"
        item = (f"https://gen{i % 4}.example.com/a/{i}", title, desc, now - age)
        feeds[i % 4].append(item)
        if i % 10 == 0:  # the same story by another source, under another URL
            dup = (f"https://gen{(i + 1) % 4}.example.com/copy/{i}", title, desc + " (syndicated)",
                   now - age + 60000)
            feeds[(i + 1) % 4].append(dup)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "sources.txt"), "w") as src:
        for f, items in enumerate(feeds):
            name = f"feed-{f}.rss"
            src.write(name + "\n")
            with open(os.path.join(out_dir, name), "w") as x:
                x.write('<?xml version="1.0" encoding="UTF-8"?>\n<rss version="2.0"><channel>'
                        f"<title>Generated {f}</title><link>https://gen{f}.example.com/</link>"
                        "<description>generated</description>\n")
                for url, title, desc, ms in items:
                    x.write(f"<item><title>{title}</title><link>{url}</link>"
                            f"<pubDate>{rfc822(ms)}</pubDate><description>{desc}</description></item>\n")
                x.write("</channel></rss>\n")


def parse_date(s):
    s = s.replace("Z", "+00:00")
    return int(datetime.fromisoformat(s).timestamp() * 1000 + 0.5)


def check(base, out_path, taxonomy_path, nreaders, settings_path=None, variants_spec=""):
    tax = [t["name"] for t in json.load(open(taxonomy_path))["topics"]]
    index = {name: i for i, name in enumerate(tax)}
    recs = jobout.records(out_path)
    counts = {k: len(v) for k, v in recs.items()}

    # Articles: id -> (published_ms by the job's rule, topic vector)
    articles = {}
    source_of = {a["article_id"]: a.get("source_id") for a in recs.get("articles", [])}
    for a in recs.get("articles", []):
        ingested = parse_date(a["ingested_at"])
        pub = ingested
        if a.get("published_at"):
            p = parse_date(a["published_at"])
            if ingested - 30 * 86400000 <= p <= ingested + 5 * 60000:
                pub = p
        articles[a["article_id"]] = (pub, {k: float(v) for k, v in (a.get("topics") or {}).items()})

    # Story clusters: union-find over the committed records, the root being the cluster id.
    find = jobout.story_find(recs)

    # A story's size: the articles the records put in it; its sources: theirs, once each.
    sizes, sources = {}, {}
    for c in recs.get("story-clusters", []):
        sizes[find(c["article_id"])] = sizes.get(find(c["article_id"]), 0) + 1
        sources.setdefault(find(c["article_id"]), set()).add(source_of.get(c["article_id"]))

    # Each reader's latest vector (the highest version).
    interest = {}
    for u in recs.get("interest-updates", []):
        if u["user_id"] not in interest or u["version"] > interest[u["user_id"]]["version"]:
            interest[u["user_id"]] = u
    windows = recs.get("trending", [])
    last = windows[-1] if windows else {"items": [], "window_end": None}
    trend = {i["article_id"]: i["score"] for i in last["items"]}

    def top5(vec):
        ranked = sorted(((w, -index.get(t, 99), t) for t, w in vec.items() if w > 0), reverse=True)
        return [t for _, _, t in ranked[:5]]

    chosen = json.load(open(settings_path)) if settings_path else {}

    def muted(vec, mute):
        return any(vec.get(t, 0) > 0 for t in mute)

    # Ranking variants (src/engine/variants.h): the reader's by the bucket of their id, its weights.
    variants = nfhash.parse_spec(variants_spec)

    def model(user, now):
        vname, wt = nfhash.assign(variants, "default", user)
        source, items = ranked(user, now, wt)
        return vname, source, items

    def ranked(user, now, wt, with_msrc=True):
        u = interest.get(user)
        st = chosen.get(user, {"follow": [], "mute": []})
        follow, mute = set(st["follow"]), set(st["mute"])
        # muted sources: their articles are left out, each story then shown by its next best
        msrc = set(st.get("msrc", [])) if with_msrc else set()
        uvec = u["vector"] if u else {}
        tops = top5({t: w for t, w in uvec.items() if t not in mute})
        drawn = tops + sorted((t for t in follow if t not in tops), key=lambda t: index[t])
        if not drawn:
            items, seen = [], set()
            for i in last["items"]:
                aid = i["article_id"]
                if len(aid) != 32 or find(aid) in seen:
                    continue
                if aid in articles and muted(articles[aid][1], mute):
                    continue
                if source_of.get(aid) in msrc:
                    continue
                seen.add(find(aid))
                items.append((aid, float(i["score"])))
            return "trending", items[:20]
        cands = []
        for aid, (pub, vec) in articles.items():
            if pub + 48 * 3600000 <= now or not any(vec.get(t, 0) > 0 for t in drawn):
                continue
            if muted(vec, mute) or source_of.get(aid) in msrc:
                continue
            dot = wt["interest"] * sum(uvec.get(t, 0.0) * w for t, w in vec.items()) if tops else 0.0
            dot += wt["follow"] * sum(vec.get(t, 0.0) for t in follow)
            hours = max(0, now - pub) / 3600000.0
            score = dot * math.exp(-wt["decay"] * hours) + wt["trending"] * trend.get(aid, 0) / 1000.0
            cands.append((-score, -pub, aid, score))
        cands.sort()
        items, seen = [], set()
        for _, _, aid, score in cands:
            if find(aid) in seen:
                continue
            seen.add(find(aid))
            items.append((aid, score))
        return "interest" if tops else "follows", items[:20]

    failures, compared, cold, nonempty, follows, mutes = [], 0, 0, 0, 0, 0
    src_muted, src_changed = 0, 0  # readers with muted sources; those whose feed it changed
    by_variant = {}
    # Nine in ten are demo readers (nearly all with vectors), one in ten never read anything.
    users = [f"demo-user-{i}" for i in range(nreaders - nreaders // 10)]
    users += [f"cold-reader-{i}" for i in range(nreaders // 10)]
    users += [u for u in chosen if u not in users]  # readers who only follow or mute
    for user in users:
        status, feed = get(base, "/v1/feed/" + urllib.parse.quote(user) + "?limit=20")
        if status != 200:
            failures.append(f"{user}: {status} {feed}")
            continue
        if feed.get("window_end") != last.get("window_end"):
            failures.append(f"{user}: the answer's trending window {feed.get('window_end')} is not "
                            f"the last committed one {last.get('window_end')}: state not quiescent")
            continue
        vname, source, want = model(user, feed["ranked_at_ms"])
        got = [(i["article_id"], i["score"]) for i in feed["items"]]
        compared += 1
        if feed.get("variant") != vname:
            failures.append(f"{user}: variant {feed.get('variant')}, model {vname}")
            continue
        by_variant[vname] = by_variant.get(vname, 0) + (source != "trending")
        cold += source == "trending"
        nonempty += bool(got)
        if feed["source"] != source:
            failures.append(f"{user}: source {feed['source']}, model {source}")
            continue
        st = chosen.get(user, {"follow": [], "mute": []})
        for key, names in (("followed_topics", st["follow"]), ("muted_topics", st["mute"])):
            if feed.get(key) != sorted(names, key=lambda t: index[t]):
                failures.append(f"{user}: {key} {feed.get(key)}, the events left {names}")
        if feed.get("muted_sources") != st.get("msrc", []):
            failures.append(f"{user}: muted_sources {feed.get('muted_sources')}, the events left "
                            f"{st.get('msrc', [])}")
        follows += source == "follows"
        mutes += bool(st["mute"])
        if st.get("msrc"):
            src_muted += 1
            src_changed += ranked(user, feed["ranked_at_ms"], nfhash.assign(
                variants, "default", user)[1], with_msrc=False)[1] != want
        if [a for a, _ in got] != [a for a, _ in want]:
            failures.append(f"{user}: ids {[a[:8] for a, _ in got]} != model {[a[:8] for a, _ in want]}")
            continue
        for (a, s1), (_, s2) in zip(got, want):
            if abs(s1 - s2) > 1e-9 * max(1.0, abs(s2)):
                failures.append(f"{user}: {a} score {s1} != model {s2}")
                break
        for i in feed["items"]:
            root = find(i["article_id"])
            if root != i["cluster_id"]:
                failures.append(f"{user}: {i['article_id']} cluster {i['cluster_id']} != "
                                f"the records' {root}")
                break
            if i["cluster_size"] != sizes.get(root, 1):
                failures.append(f"{user}: story {root} of {i['cluster_size']} articles, the "
                                f"records say {sizes.get(root, 1)}")
                break
            if i["cluster_sources"] != len(sources.get(root, ())):
                failures.append(f"{user}: story {root} of {i['cluster_sources']} sources, the "
                                f"records say {len(sources.get(root, ()))}")
                break
    story_failures, nstories = check_stories(base, recs, articles, find, sources, last)
    failures += story_failures
    after = {k: len(v) for k, v in jobout.records(out_path).items()}
    if after != counts:
        failures.append(f"the job emitted records during the comparison: {counts} -> {after}")
    clusters = {}
    for aid in articles:
        clusters.setdefault(find(aid), []).append(aid)
    multi = sum(1 for m in clusters.values() if len(m) > 1)
    print(f"feed_model: {nstories} stories paged through, equal to the records' unions")
    print(f"feed_model: {compared} readers compared ({cold} cold, {nonempty} with items), "
          f"{len(articles)} articles, {multi} story clusters with several members, "
          f"{len(interest)} readers with vectors, {len(last['items'])} trending items")
    for f in failures[:20]:
        print("FAIL: " + f, file=sys.stderr)
    print(f"feed_model: {follows} feeds from follows alone, {mutes} readers with muted topics, "
          f"{src_muted} with muted sources ({src_changed} feeds changed by them)")
    print(f"feed_model: readers ranked by interest or follows, by variant: {by_variant}")
    served = [name for name, share, _, shadow in variants if share and not shadow]
    if any(by_variant.get(name, 0) < 50 for name in served):
        failures.append("a served variant ranked fewer than 50 readers (see the counts)")
    if chosen and (follows < 30 or mutes < 100 or src_muted < 100 or src_changed < 50):
        failures.append("the run did not exercise follows and mutes (see the counts)")
    if compared < nreaders or nonempty < nreaders // 2 or multi == 0 or cold == 0 or cold == compared:
        failures.append("the run did not exercise the model (see the counts)")
        print("FAIL: the run did not exercise the model", file=sys.stderr)
    return 1 if failures else 0


def check_stories(base, recs, articles, find, sources, last):
    """Full coverage: every story with several articles (and as many single ones), paged one
    article at a time from a member's id (the merged stories' ids answer as the story), lists exactly the articles the story-clusters records
    put in it, newest first (published, then id), with its distinct sources; the last trending
    window has one entry per story, named as the records name it."""
    failures = []
    members = {}
    for c in recs.get("story-clusters", []):
        members.setdefault(find(c["article_id"]), set()).add(c["article_id"])
    multi = [r for r, m in members.items() if len(m) > 1]
    paged = [0]
    singles = [r for r, m in members.items() if len(m) == 1][:len(multi)]
    for root in sorted(multi + singles):
        want = sorted(members[root], key=lambda a: (-articles[a][0], a))
        got, after, pages = [], "", 0
        while pages <= len(want):
            status, st = get(base, f"/v1/stories/{max(members[root])}?limit=1{after}")
            pages += 1
            if status != 200:
                failures.append(f"story {root}: {status} {st}")
                break
            got += [(i["article_id"], i["published_ms"]) for i in st["articles"]]
            if st["cluster_id"] != root or st["size"] != len(want) or \
                    st["sources"] != len(sources.get(root, ())):
                failures.append(f"story {root}: answered as {st['cluster_id']} of {st['size']} "
                                f"articles, {st['sources']} sources; the records say {len(want)}, "
                                f"{len(sources.get(root, ()))}")
                break
            if not st["next"]:
                break
            after = "&after=" + st["next"]
        paged[0] += pages > 1
        if [a for a, _ in got] != want:
            failures.append(f"story {root}: articles {[a[:8] for a, _ in got]} != the records' "
                            f"{[a[:8] for a in want]}")
        elif any(p != articles[a][0] for a, p in got):
            failures.append(f"story {root}: published_ms {got} != the articles' dates")
    seen = set()
    for i in last["items"]:
        root = find(i["article_id"])
        if i["cluster_id"] != root or root in seen:
            failures.append(f"trending: {i['article_id']} as story {i['cluster_id']}, the records "
                            f"say {root}{' (listed twice)' if root in seen else ''}")
        seen.add(root)
    if not paged[0]:
        failures.append("no story took more than one page")
    return failures, len(multi) + len(singles)


def warm(base, nreaders):
    """One pass over the demo readers' feeds, answers not looked at: their inputs are kept
    (serve/readers.h) for the check to find changed or not."""
    for i in range(nreaders - nreaders // 10):
        urllib.request.urlopen(f"{base}/v1/feed/demo-user-{i}?limit=20", timeout=30).read()


def settings(base, out_path, taxonomy_path, path):
    """Follows and mutes through the edge (read-events kinds follow, unfollow, mute, unmute), and
    what they leave per reader into path (JSON {user: {"follow": [...], "mute": [...]}}), for
    the check: one in nine demo readers mutes their top topic and follows another (some also
    follow and unfollow, mute and unmute, follow their muted topic and mute it again: in order,
    nothing of these stays); 40 readers who never read follow two topics (one in four mutes a
    third); one reader only mutes. Sources (mute_source, unmute_source; "msrc", oldest first):
    one in six demo readers mutes a source (some a second, some mute and unmute a third, some
    mute the first again, which makes it the newest), one in three cold readers and one in five
    of those who follow mute one. Prints how many events it posted."""
    tax = [t["name"] for t in json.load(open(taxonomy_path))["topics"]]
    index = {name: i for i, name in enumerate(tax)}
    latest = {}
    for u in jobout.records(out_path).get("interest-updates", []):
        if u["user_id"] not in latest or u["version"] > latest[u["user_id"]]["version"]:
            latest[u["user_id"]] = u
    rng = random.Random(45)
    ts = int(time.time() * 1000)
    events, want = [], {}

    def ev(user, kind, topic):
        nonlocal ts
        ts += 1  # one order per reader: the events' order is the edge's, ts only tells repeats apart
        events.append({"user_id": user, "kind": kind, "topic": topic, "ts": ts})

    for i in range(0, 900, 9):
        user = f"demo-user-{i}"
        vec = latest.get(user, {}).get("vector", {})
        ranked = sorted(((w, -index.get(t, 99), t) for t, w in vec.items() if w > 0), reverse=True)
        top = ranked[0][2] if ranked else rng.choice(tax)
        other = rng.choice([t for t in tax if t != top])
        ev(user, "mute", top)
        ev(user, "follow", other)
        if i % 27 == 0:
            extra = rng.choice([t for t in tax if t not in (top, other)])
            ev(user, "follow", extra)
            ev(user, "unfollow", extra)
            ev(user, "mute", extra)
            ev(user, "unmute", extra)
            ev(user, "follow", top)
            ev(user, "mute", top)
        want[user] = {"follow": [other], "mute": [top]}
    for i in range(40):
        user = f"follow-reader-{i}"
        a, b, c = rng.sample(tax, 3)
        ev(user, "follow", a)
        ev(user, "follow", b)
        want[user] = {"follow": [a, b], "mute": []}
        if i % 4 == 0:
            ev(user, "mute", c)
            want[user]["mute"] = [c]
    ev("mute-only-reader", "mute", tax[0])
    want["mute-only-reader"] = {"follow": [], "mute": [tax[0]]}

    srcs = sorted({a["source_id"] for a in jobout.records(out_path).get("articles", [])
                   if a.get("source_id")})

    def mute_src(user, first, more=()):
        msrc = want.setdefault(user, {"follow": [], "mute": []}).setdefault("msrc", [])
        for kind, src in [("mute_source", first)] + list(more):
            nonlocal ts
            ts += 1
            events.append({"user_id": user, "kind": kind, "source": src, "ts": ts})
            if src in msrc:
                msrc.remove(src)
            if kind == "mute_source":
                msrc.append(src)

    for i in range(3, 900, 6):
        a, b, c = rng.sample(srcs, 3)
        more = []
        if i % 12 == 3:
            more.append(("mute_source", b))
        if i % 24 == 3:
            more += [("mute_source", c), ("unmute_source", c), ("mute_source", a)]
        mute_src(f"demo-user-{i}", a, more)
    for i in range(0, 100, 3):
        mute_src(f"cold-reader-{i}", rng.choice(srcs))
    for i in range(0, 40, 5):
        mute_src(f"follow-reader-{i}", rng.choice(srcs))
    for k in range(0, len(events), 500):
        post_events(base, events[k:k + 500])
    json.dump(want, open(path, "w"))
    print(len(events))


def touch(base, out_path, n):
    """Posts one read event for each of demo-user-0 .. n-1 (a committed article each) through the
    job's HTTP edge: their interest and history change after their inputs were kept."""
    ids = sorted(a["article_id"] for a in jobout.records(out_path).get("articles", []))
    rng = random.Random(7)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    post_events(base, [{"user_id": f"demo-user-{i}", "article_id": rng.choice(ids),
                        "session_id": "touch", "ts": now} for i in range(n)])


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif sys.argv[1] == "warm":
        warm(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "touch":
        touch(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif sys.argv[1] == "settings":
        settings(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
    else:
        sys.exit(check(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]),
                       sys.argv[6] if len(sys.argv) > 6 else None,
                       sys.argv[7] if len(sys.argv) > 7 else ""))
