"""Sources follow the sources topic's partitions in a consumer group (docs/ARCHITECTURE.md
§3; src/actors/sources_publish.h, ingest.h `in_partitions`), on Apache Kafka.

A feed farm on loopback: 8 hosts (127.0.0.2 .. 127.0.0.9, one HTTP server each), 2 feeds per
host, every feed answering with an ETag and 304 to If-None-Match. Two processes of one job
(state.changelog=true, kafka.assignment=group) are started with the same sources file, each
with its own User-Agent so that the farm knows who asked. Checked:

  publish     the first process publishes the 16 configured sources to the sources topic, each
              to its host's partition (Kafka's murmur2 of the host), value origin "config";
              the second publishes nothing (its list is already there): 16 records in all.
  one owner   from the farm's request log: every host's requests come from one process at a
              time (the User-Agent changes at most at the two rebalances: the second process
              joining, the first one killed) and arrive crawl.host_spacing_ms apart across
              the whole job (kernel arrival times, farm.py: a rebalance, a kill -9 or a busy
              CPU must not bring two closer).
  schedules   the process that owned more sources is SIGKILLed; the survivor gains its sources
              partitions and its first requests for the moved feeds carry If-None-Match: the
              CrawlSchedules (validators included) came with the partitions, from the
              changelog. The survivor then owns every host.
  vectors     readers of the farm's articles, consumed by the process that does not
              deduplicate, get the articles' topic (it follows `articles`: topics_follow.h);
              after a clean restart the follower reads on from the offsets it saved.
  articles    every feed gains an item before the second round (after the second process
              started: only the deduplicating process knows them) and again after the kill; the
              survivor (which took the one-partition topic, and with it article dedup and the
              story index, from the killed one) emits only the newest: every item URL of the
              farm — one of them in the feeds of two hosts in different partitions — is in
              `articles` exactly once, and in `story-clusters` once (read_committed).

Needs Apache Kafka (NF_TEST_BROKER=kafka:...).

Usage: python3 sources_group.py NEWSFLOW SRCDIR
"""
import json
import os
import sys
import time
import urllib.request

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recovery"))
import acclib  # noqa: E402
from farm import Farm, host_partition  # noqa: E402

PARTITIONS = 4
SPACING_MS = 1000
SESSION_MS = 10000


class Member:
    def __init__(self, ctx, broker, name, cfg):
        self.ctx, self.broker, self.name, self.cfg = ctx, broker, name, cfg
        self.state = ctx.path("state-%s" % name)
        self.ua = "nft-farm-%s" % name
        self.job = None

    def start(self):
        self.job = acclib.Job(
            self.ctx, self.broker, self.state,
            sets=["state.changelog=true", "kafka.assignment=group",
                  "kafka.static_membership=true", "admin.enabled=true", "admin.port=0",
                  "fetch.allow_private=127.0.0.0/8", "fetch.user_agent=%s" % self.ua,
                  "crawl.interval_s=60", "crawl.interval_floor_s=60", "crawl.jitter_permille=0",
                  "crawl.host_spacing_ms=%d" % SPACING_MS],
            args=["--config", self.cfg], interval_ms=300, txid_suffix="-" + self.name,
            tag=self.name)
        return self.job

    def ready(self):
        return bool(self.job.msgs("ready: /readyz answers 200"))

    def published(self):
        m = self.job.msgs("configured sources published to the sources topic")
        return m[-1] if m else None

    def sources_held(self):
        """Sources this process crawls now (its /v1/sources); -1 when it does not answer."""
        port = self.job.admin_port()
        if not port or not self.job.alive():
            return -1
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/v1/sources" % port,
                                        timeout=10) as r:
                return len(json.loads(r.read().decode()).get("sources", []))
        except (OSError, ValueError):
            return -1


def body(ctx):
    if acclib.broker_kind(ctx) != "kafka":
        ctx.fail("needs Apache Kafka: set NF_TEST_BROKER=kafka:HOST:PORT (ctest's kafka-real "
                 "tests do)")
    broker = acclib.start_broker(ctx, name="sg", partitions=PARTITIONS)
    farm = Farm(ctx)
    urls = farm.urls()
    srcfile = farm.sources_file(ctx.path("sources.txt"))
    cfg = ctx.path("group.json")
    with open(cfg, "w") as f:
        f.write('{"sources": {"file": "%s"}, "kafka": {"properties": ["session.timeout.ms=%d",'
                ' "heartbeat.interval.ms=1000", "transaction.timeout.ms=6000"]}}' %
                (srcfile, SESSION_MS))
    ms = {n: Member(ctx, broker, n, cfg) for n in ("p1", "p2")}

    ctx.log("---- 1. p1 publishes and crawls everything")
    ms["p1"].start()
    ctx.wait_for("p1 ready", ms["p1"].ready, timeout=120, job=ms["p1"].job)
    pub = ctx.wait_for("p1's publish line", ms["p1"].published, timeout=30, job=ms["p1"].job)
    ctx.check(pub.get("published") == len(urls) and pub.get("configured") == len(urls),
              "p1 should publish all %d sources: %r" % (len(urls), pub), ms["p1"].job)

    def fetched_by(ua):
        return {(r[1], r[2]) for r in farm.requests() if r[3] == ua and r[5] in (200, 304)}

    ctx.wait_for("every feed fetched by p1", lambda: len(fetched_by(ms["p1"].ua)) == len(urls),
                 timeout=60, job=ms["p1"].job)

    ctx.log("---- 2. p2 joins: publishes nothing, takes some sources partitions")
    ms["p2"].start()
    ctx.wait_for("p2 ready", ms["p2"].ready, timeout=120, job=ms["p2"].job)
    pub2 = ctx.wait_for("p2's publish line", ms["p2"].published, timeout=30, job=ms["p2"].job)
    ctx.check(pub2.get("published") == 0 and pub2.get("unchanged") == len(urls),
              "p2 should find every source published already: %r" % pub2, ms["p2"].job)
    recs = acclib.kcat_consume(ctx, broker, "sources", fmt="%p\t%k\t%s\n")
    ctx.check(len(recs) == len(urls), "the sources topic holds %d records, want %d: %r" %
              (len(recs), len(urls), recs[:4]))
    want = {}
    for u, h in urls:
        want[u] = host_partition(h, PARTITIONS)
    for line in recs:
        p, k, v = line.split("\t", 2)
        val = json.loads(v)
        ctx.check(val.get("origin") == "config", "record %s is not marked origin config: %s" %
                  (k, v))
        ctx.check(want.get(val.get("url")) == int(p), "source %s (%s) is in partition %s, its "
                  "host's is %s" % (k, val.get("url"), p, want.get(val.get("url"))))
    ctx.log("sources topic: %d records, each in its host's partition" % len(recs))

    # The second round of crawls (60 s after the first) finds an item more in every feed, which
    # only the process that deduplicates now knows (p2's start restored the first round's).
    farm.version = 2
    t_round = time.monotonic()
    ctx.wait_for("a second round of crawls after p2 joined",
                 lambda: len({(r[1], r[2]) for r in farm.requests() if r[0] > t_round}) ==
                 len(urls), timeout=120, interval=1, job=ms["p2"].job)
    time.sleep(1.5)  # the round's schedules committed (epochs every 300 ms)

    ctx.log("---- 2b. reads of the farm's articles, wherever they are consumed")
    owner = next((n for n in ms if ms[n].job.msgs("this process clusters the job's articles")),
                 None)
    ctx.check(owner, "no process took the article dedup and story index")
    arts = acclib.read_outputs(ctx, broker, "articles")
    ids = sorted({v["article_id"] for _, _, v in arts})
    # the follower hands on a vector per articles record, and an article may have more than one
    # record: waiting for as many vectors as distinct ids could pass before an id's first record
    # was followed (seen beside a CPU hog: a read of it then found no topics)
    ctx.wait_for("every process's interest engines told of every articles record's topics",
                 lambda: all((ms[n].job.metrics() or {}).get(
                     "newsflow_topics_follow_vectors_total", 0) >= len(arts) for n in ms),
                 timeout=60, interval=0.5)
    # and taken by them: the follower posts a vector to every shard's inbox, and a read routed
    # to a shard through another shard's ring can be drained before it (seen beside CI's CPU
    # hog: a read of a sports article then found no topics)
    shards = {n: ms[n].job.msgs("newsflow started")[-1].get("shards") for n in ms}
    ctx.wait_for("every shard's interest engine holding every articles record's topics",
                 lambda: all((ms[n].job.metrics() or {}).get(
                     "newsflow_interest_topics_taken_total", 0) >= shards[n] * len(arts)
                     for n in ms),
                 timeout=60, interval=0.5)
    users = ["fu%d" % i for i in range(8)]
    reads = [(u, json.dumps({"user_id": u, "article_id": ids[(i * 5) % len(ids)],
                             "session_id": "fs-%d" % i, "ts": int(time.time() * 1000)}))
             for i, u in enumerate(users)]
    acclib.kcat_produce(ctx, broker, "read-events", reads, tag="farm-reads")

    def updates():
        got = {}
        for _, h, v in acclib.read_outputs(ctx, broker, "interest-updates"):
            if v.get("user_id") in users:
                got[v["user_id"]] = (h.get("nf-writer", ""), v)
        return got if len(got) == len(users) else None
    got = ctx.wait_for("the readers' interest updates", updates, timeout=60, interval=0.5)
    empty = [u for u, (_, v) in got.items() if not v.get("vector", {}).get("sports")]
    ctx.check(not empty, "readers of sports articles without a sports interest: %r" %
              [(u, got[u]) for u in empty])
    others = [u for u, (w, _) in got.items() if not w.endswith("tx-" + owner)]
    ctx.check(others, "every read was consumed by %s, which deduplicates: the other process's "
              "topic vectors were not exercised" % owner)
    ctx.log("%d readers, %d of them in the process that does not deduplicate: each has the "
            "articles' sports topic" % (len(got), len(others)))

    ctx.log("---- 3. kill -9 the process holding more sources")
    held = {n: ms[n].sources_held() for n in ms}
    victim = max(held, key=lambda n: held[n])
    survivor = "p2" if victim == "p1" else "p1"
    ctx.check(held[victim] > 0, "no process holds sources: %r" % held)
    ctx.log("sources held: %r; killing %s" % (held, victim))
    moved_hosts = {h for (_, h) in urls
                   if any(r[1] == h and r[3] == ms[victim].ua for r in farm.requests()
                          if r[0] > t_round)}
    ms[victim].job.kill()
    t_kill = time.monotonic()
    farm.version = 3  # and every feed gains an item again: the survivor's first fetch gets it
    sj = ms[survivor].job
    ctx.wait_for("%s holding every source" % survivor,
                 lambda: ms[survivor].sources_held() == len(urls), timeout=SESSION_MS / 1000 + 90,
                 job=sj)
    moved = {(h, p) for (h, p) in {(r[1], r[2]) for r in farm.requests()} if h in moved_hosts}
    ctx.wait_for("the moved feeds crawled by %s" % survivor,
                 lambda: moved <= {(r[1], r[2]) for r in farm.requests()
                                   if r[0] > t_kill and r[3] == ms[survivor].ua},
                 timeout=120, interval=1, job=sj)
    firsts = {}
    for r in farm.requests():
        if r[0] > t_kill and r[3] == ms[survivor].ua and (r[1], r[2]) in moved:
            firsts.setdefault((r[1], r[2]), r)
    cold = [k for k, r in firsts.items() if r[4] is None]
    ctx.check(not cold, "%d moved feeds were fetched without their validators (schedule not "
              "restored): %r" % (len(cold), sorted(cold)[:4]), sj)
    ctx.log("%d moved feeds: each fetched first with If-None-Match" % len(firsts))

    ctx.log("---- 3b. the survivor emits only the items new to the job")
    ctx.wait_for("every feed fetched again (200) by %s" % survivor,
                 lambda: len({(r[1], r[2]) for r in farm.requests()
                              if r[0] > t_kill and r[5] == 200}) == len(urls),
                 timeout=120, interval=1, job=sj)
    ctx.wait_for("the new items in articles",
                 lambda: len(acclib.read_outputs(ctx, broker, "articles")) >=
                 len(farm.items()), timeout=60, interval=1, job=sj)

    ctx.log("---- 4. one owner per host at a time, politeness across the job")
    reqs = farm.requests()
    for h in farm.hosts:
        rs = sorted(r for r in reqs if r[1] == h)
        switches = sum(1 for a, b in zip(rs, rs[1:]) if a[3] != b[3])
        ctx.check(switches <= 2, "host %s switched between processes %d times (one owner at a "
                  "time allows 2 moves): %r" % (h, switches, [(round(r[0], 1), r[3]) for r in rs]))
        after = {r[3] for r in rs if r[0] > t_kill}
        ctx.check(after <= {ms[survivor].ua}, "host %s crawled by %r after the kill" % (h, after))

    close, _ = farm.politeness(SPACING_MS)
    ctx.check(not close, "requests to one host arrived closer than crawl.host_spacing_ms "
              "(%d ms): %r" % (SPACING_MS, close))
    ctx.log("politeness: %d requests, every host's at least %d ms apart as they arrived" %
            (len(reqs), SPACING_MS))

    ctx.log("---- 5. every item once in articles")
    rc, hang = sj.terminate_or_report(60)
    ctx.check(not hang and rc == 0, "%s: exit %s after SIGTERM %s" % (survivor, rc, hang or ""),
              sj)
    ctx.log(farm.check_articles(ctx, broker))

    ctx.log("---- 6. %s again: its topic-vector follower reads on where it stopped" % survivor)
    narts = len(farm.items())
    j = ms[survivor].start()
    ctx.wait_for("%s ready" % survivor, ms[survivor].ready, timeout=120, job=j)
    m = ctx.wait_for("%s's follower at the end of articles" % survivor,
                     lambda: (lambda x: x if x and x.get("newsflow_topics_follow_lag_records")
                              == 0 else None)(j.metrics()), timeout=60, interval=0.5, job=j)
    again = m.get("newsflow_topics_follow_records_total", -1)
    ctx.check(0 <= again < narts, "the follower read %s articles records again after a clean "
              "restart (of %d): it did not resume from its saved offsets" % (again, narts), j)
    rc, hang = j.terminate_or_report(60)
    ctx.check(not hang and rc == 0, "%s: exit %s after SIGTERM %s" % (survivor, rc, hang or ""),
              j)
    ctx.log("follower after a restart: %d records read (of %d)" % (again, narts))
    farm.stop()


if __name__ == "__main__":
    acclib.main("sources_group", body)
