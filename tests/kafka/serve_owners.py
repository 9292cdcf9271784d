"""The query API of a job in several processes (docs/ARCHITECTURE.md §4; src/serve/owners.h,
src/serve/query.h), on Apache Kafka: each process answers for the readers whose read-events
partition it owns and sends any other reader's request to the owner (307, Location at the URL
the owner advertises in its consumer's client.id, read from the group's description); every
process answers the global routes (trending, articles, stories, topics) from its replica of the
global key group's changelog (serve.global_replica) or as its owner.

Three processes p1, p2, p3 of one job (kafka.assignment=group, static members,
state.changelog=true, checkpoint.interval_ms=300) on 4 read-events partitions, a feed farm on
loopback (farm.py) as their sources; started one after the other, so that cooperative-sticky
spreads the 9 input partitions 3 each and the readers have two owners at least (the first
process often holds none of read-events: it redirects every reader). Once the farm's articles are out, read events for 40 readers ("qoN", each
reading the farm's articles) are produced keyed by user id with kcat's default partitioner
(librdkafka's consistent_random, serve.partitioner's default). Then:

  1. each reader's partition, as kcat placed its events, is CRC-32(user id) % 4 (what the job
     computes);
  2. for every reader, on each process: its owner (by the processes' rebalance log lines)
     answers /v1/users/{u}/interest 200 with the version interest-updates last committed for
     it, and the others answer 307 whose Location is the owner's URL + the same path (the body
     docs/openapi.json's Redirect, naming the owner); followed,
     the answer is the owner's; /v1/feed/{u}?limit=5 likewise (200 at the owner, its items
     ranked by the reader's vector: "source": "interest");
  3. both processes answer /v1/trending and /v1/articles/{id} of every farm article 200 (never a
     redirect), the articles' titles and stories equal on both; and /v1/search (every process
     indexes every article from its replica of the global key group: src/serve/search.h) finds
     each article by the longest word of its title, with the same set of results everywhere;
  4. the process owning most readers stops (SIGTERM); once its partitions are assigned to the
     others (its session expires), step 2 holds again among those two, with the same versions
     (the state followed its partitions through the changelog).

Needs Apache Kafka (NF_TEST_BROKER=kafka:...).

Usage: python3 serve_owners.py NEWSFLOW SRCDIR
"""
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recovery"))
import acclib  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from farm import Farm  # noqa: E402
from scale_out import group_setup  # noqa: E402
from standby import owned  # noqa: E402

PARTITIONS = 4
USERS = ["qo%d" % i for i in range(40)]


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **kw):
        return None


OPENER = urllib.request.build_opener(NoRedirect)


def get(url):
    """(status, headers, parsed JSON body or None), redirects not followed."""
    try:
        with OPENER.open(url, timeout=10) as r:
            return r.status, dict(r.headers), json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        return e.code, dict(e.headers), body


def body(ctx):
    with open(os.path.join(ctx.srcdir, "docs", "openapi.json")) as f:
        redirect_keys = json.load(f)["components"]["schemas"]["Redirect"]["required"]
    farm = Farm(ctx)
    srcfile = farm.sources_file(ctx.path("sources.txt"))
    broker, cfg = group_setup(ctx, "qo", PARTITIONS, srcfile)
    jobs = {}

    def start(n):
        jobs[n] = acclib.Job(
            ctx, broker, ctx.path("state-%s" % n),
            sets=["state.changelog=true", "kafka.assignment=group",
                  "kafka.static_membership=true", "fetch.allow_private=127.0.0.0/8",
                  "crawl.interval_s=60", "crawl.interval_floor_s=60",
                  "crawl.jitter_permille=0", "admin.enabled=true", "admin.port=0"],
            args=["--config", cfg], interval_ms=300, txid_suffix="-" + n, tag=n)
        ctx.wait_for("%s ready" % n, lambda: jobs[n].msgs("ready: /readyz answers 200"),
                     timeout=180, job=jobs[n])

    for n in ("p1", "p2", "p3"):
        start(n)
    url = {n: "http://127.0.0.1:%d" % j.admin_port() for n, j in jobs.items()}
    ctx.wait_for("the farm's articles in articles",
                 lambda: len(acclib.read_outputs(ctx, broker, "articles")) >= len(farm.items()),
                 timeout=120, job=jobs["p2"])
    articles = {k: v for k, _, v in acclib.read_outputs(ctx, broker, "articles")}
    ids = sorted(articles)
    ctx.log("all ready (%s); %d articles; producing reads" % (url, len(ids)))

    lines, counts = [], {}
    for i in range(400):
        u = USERS[i % len(USERS)]
        v = {"user_id": u, "article_id": ids[(i * 7 + i // 40) % len(ids)],
             "session_id": "q-%d" % i, "ts": int(time.time() * 1000)}
        lines.append((u, json.dumps(v, separators=(",", ":"))))
        counts[u] = counts.get(u, 0) + 1
    acclib.kcat_produce(ctx, broker, "read-events", lines, tag="reads")

    # 1. where kcat put each reader is what the job computes
    placed = {}
    for line in acclib.kcat_consume(ctx, broker, "read-events", fmt="%p\t%k\n"):
        p, k = line.split("\t", 1)
        placed.setdefault(k, set()).add(int(p))
    for u in USERS:
        want = zlib.crc32(u.encode()) % PARTITIONS
        ctx.check(placed.get(u) == {want}, "reader %s: events in partitions %r, CRC-32 says %d" %
                  (u, placed.get(u), want))

    def versions():
        last = {}
        for k, _, v in acclib.read_outputs(ctx, broker, "interest-updates"):
            last[k] = max(last.get(k, 0), v["version"])
        return last

    ctx.wait_for("every read in interest-updates",
                 lambda: versions() == counts, timeout=120, interval=0.5, job=jobs["p1"])
    final = versions()

    # 2. owners answer, the others redirect to them
    live = set(jobs)

    def owner_of(u):
        p = zlib.crc32(u.encode()) % PARTITIONS
        mine = [n for n in live if p in owned(jobs[n])]
        return mine[0] if len(mine) == 1 else None

    bad = []

    def all_answered():
        del bad[:]
        for u in USERS:
            o = owner_of(u)
            if o is None:
                bad.append("%s: no single owner yet" % u)
                continue
            for n in sorted(live):
                path = "/v1/users/%s/interest" % u
                s, h, b = get(url[n] + path)
                if n == o:
                    if s != 200 or b.get("version") != final[u]:
                        bad.append("%s at its owner %s: %s %r" % (u, n, s, b))
                    continue
                if s != 307 or h.get("Location") != url[o] + path:
                    bad.append("%s at %s (owner %s): %s Location %r %r" %
                               (u, n, o, s, h.get("Location"), b))
                    continue
                if not isinstance(b, dict) or any(k not in b for k in redirect_keys) or \
                        b["location"] != h["Location"] or b["owner"] != url[o]:
                    bad.append("%s at %s: the 307 body is not docs/openapi.json's Redirect: %r" %
                               (u, n, b))
                    continue
                s2, _, b2 = get(h["Location"])
                if s2 != 200 or b2.get("version") != final[u]:
                    bad.append("%s followed to %s: %s %r" % (u, o, s2, b2))
                fs, fh, fb = get(url[n] + "/v1/feed/%s?limit=5" % u)
                if fs != 307 or fh.get("Location") != url[o] + "/v1/feed/%s?limit=5" % u:
                    bad.append("feed of %s at %s: %s %r" % (u, n, fs, fh.get("Location")))
                    continue
                gs, _, gb = get(fh["Location"])
                if gs != 200 or gb.get("source") != "interest" or not gb.get("items"):
                    bad.append("feed of %s at its owner: %s %r" % (u, gs, gb))
        return not bad

    ctx.wait_for("every reader answered by its owner and redirected by the others",
                 all_answered, timeout=60, interval=1.0, job=jobs["p1"],
                 last=lambda: "%d problems, e.g. %s" % (len(bad), bad[:4]))
    by = {n: sum(1 for u in USERS if owner_of(u) == n) for n in sorted(live)}
    ctx.log("readers per owner %r: each answered there, redirected by the others" % by)
    ctx.check(sum(1 for c in by.values() if c) >= 2, "the readers have one owner only: %r" % by)

    # 3. the global routes on both, from the global key group's owner or replica
    ans = {}

    def global_answers():
        del bad[:]
        for n in sorted(live):
            s, _, b = get(url[n] + "/v1/trending")
            if s != 200:
                bad.append("trending at %s: %s %r" % (n, s, b))
            for a in ids:
                s, _, b = get(url[n] + "/v1/articles/%s" % a)
                if s != 200:
                    bad.append("article %s at %s: %s %r" % (a, n, s, b))
                    continue
                ans[(n, a)] = (b.get("title"), b.get("cluster_id"))
        for a in ids:
            seen = {ans.get((n, a)) for n in live}
            if len(seen) != 1:
                bad.append("article %s answered differently: %r" % (a, seen))
        return not bad

    ctx.wait_for("trending and every article answered by every process, alike", global_answers,
                 timeout=60, interval=1.0, job=jobs["p2"],
                 last=lambda: "%d problems, e.g. %s" % (len(bad), bad[:4]))

    def search_answers():
        del bad[:]
        for a in ids:
            title = ans[(sorted(live)[0], a)][0] or ""
            word = max((w.strip(".,:;!?'\"()") for w in title.split()), key=len, default="")
            if not word:
                continue
            found = {}
            for n in sorted(live):
                s, _, b = get(url[n] + "/v1/search?limit=100&q=" + urllib.parse.quote(word))
                if s != 200:
                    bad.append("search %r at %s: %s %r" % (word, n, s, b))
                    continue
                found[n] = frozenset(r["article_id"] for r in b["results"])
                stories = {r["cluster_id"] for r in b["results"]}
                if a not in found[n] and ans[(n, a)][1] not in stories:  # one per story
                    bad.append("search %r at %s: %s not among %d results" % (
                        word, n, a, len(found[n])))
            if len(set(found.values())) > 1:
                bad.append("search %r answered differently: %r" % (
                    word, {n: len(f) for n, f in found.items()}))
        return not bad

    def indexed():
        return {n: {k: v for k, v in (jobs[n].metrics() or {}).items()
                    if k.startswith("newsflow_search_") and "bucket" not in k}
                for n in sorted(live)}

    ctx.wait_for("every article found by /v1/search on every process, alike", search_answers,
                 timeout=60, interval=1.0, job=jobs["p2"],
                 last=lambda: "%d problems, e.g. %s; search metrics %r" % (
                     len(bad), bad[:4], indexed()))
    for n in sorted(live):
        m = jobs[n].metrics() or {}
        ctx.log("%s: redirects %d, owner describes %d, global replica %s" % (
            n, m.get("newsflow_query_redirects_total", 0),
            m.get("newsflow_query_owner_describes_total", 0),
            "yes" if m.get("newsflow_standby_partitions", 0) else "no"))
        ctx.check(by[n] == len(USERS) or m.get("newsflow_query_redirects_total", 0) > 0,
                  "%s counted no redirect" % n, jobs[n])

    # 4. the owner of most readers leaves: the others answer for its readers, same versions
    gone = max(by, key=lambda n: by[n])
    ctx.log("---- SIGTERM %s (owner of %d readers)" % (gone, by[gone]))
    jobs[gone].terminate()
    live.discard(gone)
    ctx.wait_for("%s's read-events partitions assigned to the others" % gone,
                 lambda: set().union(*(owned(jobs[n]) for n in live)) == set(range(PARTITIONS)),
                 timeout=120, job=jobs["p1"])
    ctx.wait_for("every reader answered by its new owner and redirected by the other",
                 all_answered, timeout=60, interval=1.0, job=jobs["p1"],
                 last=lambda: "%d problems, e.g. %s" % (len(bad), bad[:4]))
    after = {n: sum(1 for u in USERS if owner_of(u) == n) for n in sorted(live)}
    ctx.log("after %s left, readers per owner %r" % (gone, after))
    for n in sorted(live):
        jobs[n].terminate()
    farm.stop()
    print(json.dumps({"bench": "serve_owners", "readers": len(USERS), "per_owner": by, "after_leave": after,
                      "articles": len(ids)}), flush=True)


if __name__ == "__main__":
    acclib.main("serve_owners", body)
