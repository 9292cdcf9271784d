"""The PostgreSQL sink exactly once, on Apache Kafka and PostgreSQL (issue 39's acceptance).

The job runs on real Kafka with the demo feeds and a stream of read events (articles, story
clusters, interest updates and trending windows, committed in its transactions), and
`newsflow sink postgres` lands them in a PostgreSQL of the test's own (scripts/postgres.sh), while:

  group     two sink processes share the partitions as one consumer group: one runs throughout,
            the other is
  kill -9   killed at random instants (each time once it has landed something) and started
            again, so the partitions move between live processes while they land;
  crash     PostgreSQL itself is crashed (immediate shutdown, recovery at start) under the sink;
  outage    PostgreSQL is stopped for 60 s: the job keeps committing epochs, the sink's lag
            (newsflow_pgsink_lag_records) rises; once the database is back the lag falls to 0.

Then, against the topics read with read_committed: every interest update landed once (the rows
of user_interest_version equal the topic's records, versions gapless 1..N per user, and no sink
incarnation counted a duplicate: a replay would hit the primary key), user_interest holds each
reader's last version, every article, story member and trending window is there, the offsets
table equals the partitions' end offsets, and nothing went to dead-letters.

Usage: NF_TEST_BROKER=kafka:HOST:PORT python3 sink_eos.py NEWSFLOW SRCDIR
"""
import json
import os
import random
import re
import socket
import subprocess
import sys
import time
import urllib.request

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recovery"))
import acclib  # noqa: E402

OUTAGE_S = 60
KILLS = 5
SINK_TOPICS = ("articles", "story-clusters", "interest-updates", "trending")


def free_port():
    rng = random.Random()
    for _ in range(200):
        p = rng.randrange(21000, 30999)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
            return p
        except OSError:
            continue
        finally:
            s.close()
    raise RuntimeError("no free port for PostgreSQL")


class Postgres:
    """A PostgreSQL of the test's own (scripts/postgres.sh), stopped by its pid at the end."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.dir = ctx.path("pg")
        os.chmod(ctx.tmp, 0o711)  # mkdtemp's 0700: the postgres user must reach its directory
        self.port = free_port()
        self.script = os.path.join(ctx.srcdir, "scripts", "postgres.sh")
        self.sh("start", "--fresh", "--port", str(self.port))
        self.dsn = "host=127.0.0.1 port=%d dbname=newsflow user=postgres" % self.port

    def sh(self, *args):
        out = subprocess.run(["bash", self.script, args[0], "--dir", self.dir, *args[1:]],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        self.ctx.check(out.returncode == 0, "postgres.sh %s: %s" % (
            " ".join(args), out.stdout.decode("utf-8", "replace")[-800:]))
        return out.stdout.decode()

    def query(self, sql):
        out = subprocess.run(["psql", self.dsn, "-AtF", "\t", "-v", "ON_ERROR_STOP=1", "-c", sql],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        self.ctx.check(out.returncode == 0, "psql %r: %s" % (sql, out.stderr.decode()[-500:]))
        return [l.split("\t") for l in out.stdout.decode().split("\n") if l]

    def stop(self):
        subprocess.run(["bash", self.script, "stop", "--dir", self.dir],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)


class Sink:
    """One `newsflow sink postgres` process; its port from its log."""

    def __init__(self, ctx, broker, pg, tag):
        self.ctx, self.tag = ctx, tag
        self.log_path = ctx.path("%s.err" % tag)
        argv = [ctx.nf, "sink", "postgres", "--set", "kafka.brokers=%s" % broker.bootstrap,
                "--set", "kafka.topic_prefix=%s" % broker.prefix,
                "--set", "postgres.group_id=%ssink" % broker.prefix,
                "--set", "postgres.dsn=%s" % pg.dsn, "--set", "postgres.retry_max_ms=1000",
                "--set", "postgres.batch_rows=500", "--set", "admin.port=0",
                # a killed member's partitions move after 6 s, not the default 45
                "--set", "kafka.properties=session.timeout.ms=6000"]
        self._errf = open(self.log_path, "wb")
        self.proc = ctx.spawn(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=self._errf)
        self.port = None
        ctx.log("%s started (pid %d)" % (tag, self.proc.pid))

    def lines(self):
        with open(self.log_path, "rb") as f:
            return [l for l in f.read().decode("utf-8", "replace").split("\n") if l]

    def admin_port(self):
        if not self.port:
            for l in self.lines():
                m = re.search(r'"msg":"landing the job.*"port":(\d+)', l)
                if m:
                    self.port = int(m.group(1))
        return self.port

    def metrics(self):
        """{name: sum over its series} or None."""
        if self.proc.poll() is not None or not self.admin_port():
            return None
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.port,
                                        timeout=5) as r:
                text = r.read().decode()
        except Exception:
            return None
        vals = {}
        for l in text.split("\n"):
            m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)", l)
            if m and not l.startswith("#"):
                vals[m.group(1)] = vals.get(m.group(1), 0.0) + float(m.group(3))
        return vals

    def dump_tail(self, f, n=15):
        print("---- tail of %s" % self.tag, file=f)
        for l in self.lines()[-n:]:
            print(l[:400], file=f)


def wait_metric(ctx, sink, what, pred, timeout=240):
    seen = [None]

    def ok():
        m = sink.metrics()
        seen[0] = m
        return m is not None and pred(m)
    try:
        return ctx.wait_for(what, ok, timeout=timeout, interval=0.3,
                            last=lambda: "%r" % {k: v for k, v in (seen[0] or {}).items()
                                                 if k.startswith("newsflow_pgsink_")})
    except acclib.TestFailure:
        sink.dump_tail(sys.stderr)
        raise


def kills(ctx, broker, pg, rng, dups):
    """The sink killed KILLS times at random instants; PostgreSQL crashed once in between."""
    sink = Sink(ctx, broker, pg, "sink0")
    for i in range(KILLS):
        wait_metric(ctx, sink, "%s landing a batch" % sink.tag,
                    lambda m: m.get("newsflow_pgsink_batches_total", 0) > 0)
        time.sleep(rng.uniform(0.1, 1.5))  # a random instant, not a condition to wait for
        if i == KILLS // 2:
            b0 = (sink.metrics() or {}).get("newsflow_pgsink_errors_total", 0)
            pg.sh("restart", "--immediate")
            ctx.log("PostgreSQL crashed (immediate shutdown) and restarted under %s" % sink.tag)
            wait_metric(ctx, sink, "%s failing on the crashed connection" % sink.tag,
                        lambda m: m.get("newsflow_pgsink_errors_total", 0) > b0)
            b1 = sink.metrics().get("newsflow_pgsink_batches_total", 0)
            wait_metric(ctx, sink, "%s landing after the crash" % sink.tag,
                        lambda m: m.get("newsflow_pgsink_batches_total", 0) > b1)
        m = sink.metrics() or {}
        dups.append(m.get("newsflow_pgsink_duplicates_total", 0))
        sink.proc.kill()
        sink.proc.wait()
        ctx.log("%s killed (-9) after %d records" % (
            sink.tag, m.get("newsflow_pgsink_records_total", 0)))
        sink = Sink(ctx, broker, pg, "sink%d" % (i + 1))
    return sink


def outage(ctx, job, sink, pg):
    """PostgreSQL down OUTAGE_S seconds: the job commits on, the sink's lag rises."""
    wait_metric(ctx, sink, "%s landing a batch" % sink.tag,
                lambda m: m.get("newsflow_pgsink_batches_total", 0) > 0)
    e0 = job.last_epoch()
    pg.stop()
    t0 = time.monotonic()
    ctx.log("PostgreSQL stopped (epoch %d)" % e0)
    wait_metric(ctx, sink, "the sink's lag to rise while PostgreSQL is down",
                lambda m: m.get("newsflow_pgsink_lag_records", 0) > 0 and
                m.get("newsflow_pgsink_connected", 1) == 0)
    ctx.wait_for("the job to commit epochs while PostgreSQL is down",
                 lambda: job.last_epoch() >= e0 + 5, timeout=120, job=job)
    time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - t0)))  # the outage's length, not a wait
    lag = (sink.metrics() or {}).get("newsflow_pgsink_lag_records", 0)
    e1 = job.last_epoch()
    pg.sh("start", "--port", str(pg.port))
    ctx.log("PostgreSQL back after %.0f s; the job committed epochs %d..%d meanwhile; sink lag "
            "%d records" % (time.monotonic() - t0, e0, e1, lag))


def check_interest(ctx, pg, recs, dups):
    want = {}
    for k, h, v in recs:
        want.setdefault(v["user_id"], []).append(v["version"])
    rows = pg.query("SELECT user_id, version FROM user_interest_version")
    got = {}
    for u, ver in rows:
        got.setdefault(u, []).append(int(ver))
    if len(rows) != len(recs):
        have = {(u, int(v)) for u, v in rows}
        missing = []
        for line in acclib.kcat_consume(ctx, pg.broker, "interest-updates", fmt="%p\t%o\t%s\n"):
            p, o, v = line.split("\t", 2)
            v = json.loads(v)
            if (v["user_id"], v["version"]) not in have:
                missing.append((int(p), int(o)))
        by = {}
        for p, o in missing:
            by.setdefault(p, []).append(o)
        ctx.fail("user_interest_version holds %d rows, the topic %d records; missing by "
                 "partition: %s" % (len(rows), len(recs), {p: (min(o), max(o), len(o))
                                                           for p, o in by.items()}))
    for u, vs in want.items():
        ctx.check(sorted(got.get(u, [])) == sorted(vs),
                  "user %s: versions %s in PostgreSQL, %s on the topic" % (
                      u, sorted(got.get(u, []))[:10], sorted(vs)[:10]))
        ctx.check(sorted(vs) == list(range(1, len(vs) + 1)),
                  "user %s: versions on the topic are not gapless: %s" % (u, sorted(vs)[:20]))
    latest = dict((u, int(v)) for u, v in pg.query("SELECT user_id, version FROM user_interest"))
    for u, vs in want.items():
        ctx.check(latest.get(u) == max(vs), "user_interest of %s is version %s, want %d" % (
            u, latest.get(u), max(vs)))
    ctx.check(sum(dups) == 0, "sink incarnations counted duplicates: %r" % dups)
    return "%d interest updates of %d readers landed once each, versions gapless" % (
        len(recs), len(want))


def check_others(ctx, broker, pg):
    arts = {v["article_id"] for k, h, v in acclib.read_outputs(ctx, broker, "articles")}
    got = {r[0] for r in pg.query("SELECT article_id FROM article")}
    ctx.check(got == arts, "articles: %d in PostgreSQL, %d on the topic (missing %s, extra %s)"
              % (len(got), len(arts), sorted(arts - got)[:3], sorted(got - arts)[:3]))
    members = {v["article_id"] for k, h, v in acclib.read_outputs(ctx, broker, "story-clusters")}
    got = {r[0] for r in pg.query("SELECT article_id FROM story_member")}
    ctx.check(got == members, "story members: %d in PostgreSQL, %d on the topic" % (
        len(got), len(members)))
    wins = {v["window_end"] for k, h, v in acclib.read_outputs(ctx, broker, "trending")}
    n = int(pg.query("SELECT count(*) FROM trending_snapshot")[0][0])
    ctx.check(n == len(wins), "trending: %d snapshots in PostgreSQL, %d windows on the topic" % (
        n, len(wins)))
    return "%d articles, %d story members, %d trending windows" % (len(arts), len(members), n)


def end_offsets(ctx, broker):
    args = []
    for t in SINK_TOPICS:
        for p in range(4):
            args += ["-t", "%s:%d:-1" % (broker.topic(t), p)]
    out = subprocess.run(["kcat", "-b", broker.bootstrap, "-Q", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, timeout=60).stdout.decode()
    ends = {}
    for l in out.split("\n"):
        m = re.match(r"^(\S+) \[(\d+)\] offset (-?\d+)", l)
        if m:
            ends[(m.group(1), int(m.group(2)))] = int(m.group(3))
    return ends


def check_offsets(ctx, broker, pg):
    ends = end_offsets(ctx, broker)
    ctx.check(len(ends) == 4 * len(SINK_TOPICS), "kcat -Q gave %d partitions" % len(ends))
    rows = {(t, int(p)): int(o) for t, p, o in pg.query(
        "SELECT topic, partition, next_offset FROM newsflow_sink_offsets WHERE group_id = '%ssink'"
        % broker.prefix)}
    ctx.check(rows == ends, "offsets table %r != end offsets %r" % (
        sorted(rows.items())[:6], sorted(ends.items())[:6]))
    return "the offsets table equals the end offsets of %d partitions" % len(ends)


def body(ctx):
    broker = acclib.start_broker(ctx)
    ctx.check(broker.kind == "kafka", "this test needs Apache Kafka (NF_TEST_BROKER=kafka:...)")
    pg = Postgres(ctx)
    pg.broker = broker
    try:
        run(ctx, broker, pg)
    finally:
        pg.stop()


def run(ctx, broker, pg):
    acclib.run_cli(ctx, ["sink", "postgres", "--migrate", "--set", "postgres.dsn=%s" % pg.dsn])
    feeds = ctx.path("feeds")
    subprocess.run([sys.executable, os.path.join(ctx.srcdir, "scripts", "demo_feeds.py"),
                    os.path.join(ctx.srcdir, "examples", "feeds"), feeds], check=True,
                   stdout=subprocess.DEVNULL)
    job = acclib.Job(ctx, broker, ctx.path("state"), tag="job",
                     sets=["sources.file=%s" % os.path.join(feeds, "sources.txt")])
    ev = acclib.Events(users=30, prefix="pg")
    prod = acclib.Producer(ctx, broker, ev, per_wave=20, pause=0.1, tag="r")
    prod.start()
    rng = random.Random(int(os.environ.get("NF_TEST_SEED", "0")) or None)
    dups = []
    stay = Sink(ctx, broker, pg, "sinkB")
    sink = kills(ctx, broker, pg, rng, dups)
    outage(ctx, job, sink, pg)
    for sk in (sink, stay):
        wait_metric(ctx, sk, "%s connected again" % sk.tag, lambda m: m.get(
            "newsflow_pgsink_connected", 0) == 1)
    prod.stop()
    ctx.check(prod.error is None, "producing read events failed: %r" % prod.error)
    acclib.wait_all_consumed(ctx, job, broker, ev.valid, timeout=240)
    rc, hang = job.terminate_or_report(60)
    ctx.check(not hang and rc == 0, "job: exit %s after SIGTERM %s" % (rc, hang or ""), job)
    recs = acclib.read_outputs(ctx, broker, "interest-updates")
    for sk in (sink, stay):
        wait_metric(ctx, sk, "%s's lag back to 0" % sk.tag,
                    lambda m: m.get("newsflow_pgsink_lag_records", 1) == 0 and
                    m.get("newsflow_pgsink_batches_total", 0) > 0, timeout=300)
    ctx.wait_for("the offsets table at the end offsets",
                 lambda: {(t, int(p)): int(o) for t, p, o in pg.query(
                     "SELECT topic, partition, next_offset FROM newsflow_sink_offsets WHERE "
                     "group_id = '%ssink'" % broker.prefix)} == end_offsets(ctx, broker),
                 timeout=120, interval=0.5)
    for sk in (sink, stay):
        dups.append((sk.metrics() or {}).get("newsflow_pgsink_duplicates_total", 0))
        ctx.check(ctx.stop_child(sk.proc) == 0, "%s's exit after SIGTERM != 0" % sk.tag)
    ctx.log(check_interest(ctx, pg, recs, dups))
    ctx.log(check_others(ctx, broker, pg))
    ctx.log(check_offsets(ctx, broker, pg))
    dead = [v for k, h, v in acclib.read_outputs(ctx, broker, "dead-letters")
            if v.get("stage") == "sink-postgres"]
    ctx.check(not dead, "%d records dead-lettered by the sink, e.g. %r" % (len(dead), dead[:1]))


if __name__ == "__main__":
    acclib.main("sink_eos", body)
