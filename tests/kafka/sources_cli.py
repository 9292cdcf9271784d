"""`newsflow sources` on Apache Kafka with two processes of one consumer group (state.changelog,
kafka.assignment=group), feeds served by the loopback farm (farm.py). Once the group has
spread the sources partitions over p1 and p2, the commands run with p1's configuration:

  add         a feed whose host's partition p1 holds: read back from p1 ("applied by the job");
              a feed whose partition p2 holds: the command says so and does not wait, and p2
              then holds and crawls it (its /v1/sources, the farm's log by p2's User-Agent).
  topic       both records are in their hosts' partitions, operator records (no origin).
  pause       the second feed, by URL: p2 shows it paused.
  crawl-now   the first feed (hourly interval): one more request from p1, the command prints
              the outcome it read back.
  remove      the first feed: gone from p1; the topic's last record for it is a tombstone.

Needs Apache Kafka (NF_TEST_BROKER=kafka:...).

Usage: python3 sources_cli.py NEWSFLOW SRCDIR
"""
import json
import os
import sys
import urllib.request

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recovery"))
import acclib  # noqa: E402
from farm import Farm, host_partition  # noqa: E402

PARTITIONS = 4


class Member:
    def __init__(self, ctx, broker, name):
        self.ctx, self.broker, self.name = ctx, broker, name
        self.state = ctx.path("state-%s" % name)
        self.ua = "nft-cli-%s" % name
        self.job = acclib.Job(
            ctx, broker, self.state,
            sets=["state.changelog=true", "kafka.assignment=group", "admin.enabled=true",
                  "admin.port=0", "fetch.allow_private=127.0.0.0/8",
                  "fetch.user_agent=%s" % self.ua, "crawl.interval_s=3600",
                  "crawl.jitter_permille=0"],
            interval_ms=300, txid_suffix="-" + name, tag=name)

    def get(self, route):
        port = self.job.admin_port()
        if not port or not self.job.alive():
            return None
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, route), timeout=10) as r:
                return json.loads(r.read().decode())
        except (OSError, ValueError):
            return None

    def sources_partitions(self):
        s = self.get("/v1/status")
        if not s:
            return None
        t = self.broker.topic("sources")
        return {p["partition"] for p in s.get("partitions", []) if p.get("topic") == t}

    def source(self, url):
        s = self.get("/v1/sources")
        return next((x for x in (s or {}).get("sources", []) if x["url"] == url), None)


def body(ctx):
    if acclib.broker_kind(ctx) != "kafka":
        ctx.fail("needs Apache Kafka: set NF_TEST_BROKER=kafka:HOST:PORT (ctest's kafka-real "
                 "tests do)")
    broker = acclib.start_broker(ctx, name="scli", partitions=PARTITIONS)
    farm = Farm(ctx, feeds_per_host=1)
    ms = {n: Member(ctx, broker, n) for n in ("p1", "p2")}
    for n in ms:
        ctx.wait_for("%s ready" % n, lambda n=n: ms[n].job.msgs("ready: /readyz answers 200"),
                     timeout=120, job=ms[n].job)

    def settled():
        a, b = ms["p1"].sources_partitions(), ms["p2"].sources_partitions()
        if a is not None and b is not None and not a & b and len(a | b) == PARTITIONS:
            return a, b
        return None
    held = dict(zip(("p1", "p2"), ctx.wait_for("the group's sources partitions assigned",
                                               settled, timeout=120, interval=0.5)))
    ctx.log("sources partitions: %r" % held)
    # The group balances all its topics at once: one process may hold every sources partition.
    # x holds some; the commands run with x's configuration are read back from x, those run with
    # y's are for a partition y does not hold.
    def feeds_of(n):
        return [(u, h) for u, h in farm.urls() if host_partition(h, PARTITIONS) in held[n]]
    x = max(held, key=lambda n: len(feeds_of(n)))  # 8 hosts: one process has 2 or more
    y = "p2" if x == "p1" else "p1"
    feeds = feeds_of(x)
    ctx.check(len(feeds) >= 2, "fewer than two farm hosts in %s's partitions %r" % (x, held[x]))
    mine, theirs = feeds[0], feeds[-1]

    def cli(who):
        return ["--set", "kafka.brokers=%s" % broker.bootstrap,
                "--set", "kafka.topic_prefix=%s" % broker.prefix,
                "--set", "state.dir=%s" % ms[who].state, "--set", "admin.port=0"]

    ctx.log("---- add: one feed of each process")
    out = acclib.run_cli(ctx, ["sources", "add", mine[0], "--title", "Mine"] + cli(x))
    ctx.check("%s: active (applied by the job at" % mine[0] in out, "add (%s): %r" % (x, out))
    out = acclib.run_cli(ctx, ["sources", "add", theirs[0]] + cli(y))
    ctx.check("%s: written to sources partition %d, which another process of the group holds" %
              (theirs[0], host_partition(theirs[1], PARTITIONS)) in out,
              "add (through %s): %r" % (y, out))
    ctx.wait_for("%s holds and crawls the feed added through %s" % (x, y),
                 lambda: ms[x].source(theirs[0]) and any(
                     r[3] == ms[x].ua and farm.base[r[1]] + r[2] == theirs[0]
                     for r in farm.requests()),
                 timeout=60, job=ms[x].job)
    ctx.check(ms[y].source(theirs[0]) is None, "%s holds %s's feed too" % (y, x))

    recs = acclib.kcat_consume(ctx, broker, "sources", fmt="%p\t%k\t%s\n")
    got = {}
    for line in recs:
        p, k, v = line.split("\t", 2)
        got[json.loads(v)["url"]] = (int(p), json.loads(v))
    for u, h in (mine, theirs):
        ctx.check(u in got and got[u][0] == host_partition(h, PARTITIONS) and
                  "origin" not in got[u][1], "record of %s: %r" % (u, got.get(u)))
    ctx.check(got[mine[0]][1].get("title") == "Mine", "the title is not in the record")

    ctx.log("---- pause, by URL, through the process that does not hold it")
    acclib.run_cli(ctx, ["sources", "pause", theirs[0]] + cli(y))
    ctx.wait_for("%s shows it paused" % x,
                 lambda: (ms[x].source(theirs[0]) or {}).get("state") == "paused",
                 timeout=60, job=ms[x].job)

    ctx.log("---- crawl-now")
    ctx.wait_for("the feed crawled once and idle",
                 lambda: (ms[x].source(mine[0]) or {}).get("last_attempt_at_ms", 0) > 0 and
                 not ms[x].source(mine[0]).get("in_flight"), timeout=60, job=ms[x].job)

    def asked():
        return sum(1 for r in farm.requests()
                   if r[3] == ms[x].ua and farm.base[r[1]] + r[2] == mine[0])
    before = asked()
    out = acclib.run_cli(ctx, ["sources", "crawl-now", mine[0]] + cli(x))
    ctx.check("%s: crawled, outcome " % mine[0] in out, "crawl-now: %r" % out)
    ctx.check(asked() == before + 1, "crawl-now: %d requests, want %d" % (asked(), before + 1))

    ctx.log("---- remove")
    out = acclib.run_cli(ctx, ["sources", "remove", mine[0]] + cli(x))
    ctx.check("removed (applied by the job at" in out, "remove: %r" % out)
    ctx.check(ms[x].source(mine[0]) is None, "%s still holds the removed feed" % x)
    last = {}
    for line in acclib.kcat_consume(ctx, broker, "sources", fmt="%k\t%S\n"):
        k, size = line.rsplit("\t", 1)
        last[k] = int(size)
    ctx.check(any(size <= 0 for size in last.values()), "no tombstone in the topic: %r" % last)
    for n in ms:
        rc, hang = ms[n].job.terminate_or_report(60)
        ctx.check(not hang and rc == 0, "%s: exit %s after SIGTERM %s" % (n, rc, hang or ""),
                  ms[n].job)
    farm.stop()


if __name__ == "__main__":
    acclib.main("sources_cli", body)
