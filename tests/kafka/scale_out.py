"""One job in several processes (docs/ARCHITECTURE.md §4 "Changelog"; src/state/changelog.h,
src/state/epoch.h), on Apache Kafka: the read path's key groups (event ids, interest vectors, seen
keys, trending counters) follow their read-events partitions from process to process through the
changelog topics, and every output stays exactly once.

Processes p1..p4 run one job: one consumer group (kafka.assignment=group, cooperative-sticky,
static members), each its own state directory and transactional id, state.changelog=true,
checkpoint.interval_ms=300. While read events (with poison records) arrive on 6 partitions:

  1. p1, p2, p3 start and each commits epochs with input;
  2. p2 is SIGKILLed and started again on its directory (it gets its partitions back);
  3. p4 joins: partitions move to it (their owners commit and let go; p4 restores them from the
     changelog and takes their positions from the group);
  4. rolling restart: each process in turn SIGTERMed (exit 0) and started again, p1 with
     runtime.shards=1 and p2 with 3 (the others run with the default, one per core);
  5. the process that merges trending is SIGKILLed for good: its partitions (trending-panes
     among them) move to the others once its session expires; the time from the kill to their
     first epoch committed elsewhere is reported.

Then the producer stops, the last events are consumed, every process stops (exit 0), and the
outputs are read back read_committed (and, last, compared with a reference: one process that
never restarted over the same input on topics of its own, whose interest-updates — each user's
state after each read — must be equal record for record): interest-updates hold every (user, version) exactly once
over 1..n (a vector that did not follow its partition would start again at 1, an event taken
twice would exceed n), every poison record has exactly one dead letter, no (writer, epoch,
seq) appears twice, and trending (exact mode; its panes merged by the one process assigned
trending-panes, which moves too) emits every window once, equal to an exact recount of the
events. Feeds too: a feed farm on loopback (farm.py: 8 hosts, 2 feeds each, one item URL on two
hosts) is every process's sources file; the sources topic spreads it by host over the
processes, the articles go to the one process that deduplicates for the job, and every feed
gains an item before the rolling restart and again after the last kill: at the end every item
is in `articles` once and every article in `story-clusters` once, and requests to one host
arrive at least crawl.host_spacing_ms apart whoever sends them (farm.py's kernel times). Prints
{"bench":"scale_out_failover",...}.

NF_TEST_STANDBY_REPLICAS=N runs every process with scale.standby_replicas=N (default 0), for the
failover figure with standbys (perf/README.md); tests/kafka/standby.py checks what they save.

Needs Apache Kafka (NF_TEST_BROKER=kafka:...).

Usage: python3 scale_out.py NEWSFLOW SRCDIR
"""
import datetime
import json
import os
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recovery"))
import acclib  # noqa: E402
from farm import Farm  # noqa: E402

PARTITIONS = 6
SESSION_MS = 10000
REPLICAS = int(os.environ.get("NF_TEST_STANDBY_REPLICAS", "0"))
T0 = 1767225600000  # 2026-01-01T00:00:00Z: events 100 ms apart from there
WINDOW_MS, SLIDE_MS, LATENESS_MS = 60000, 5000, 1000
TRENDING = ["trending.exact=true", "trending.window_s=%d" % (WINDOW_MS // 1000),
            "trending.slide_s=%d" % (SLIDE_MS // 1000), "trending.lateness_ms=%d" % LATENESS_MS,
            "trending.idle_ms=3600000"]


class PoolEvents(acclib.Events):
    """acclib.Events whose articles come from a pool of 23 (so trending lists have counts), at
    event times 100 ms apart in produce order (so every event is on time on its partition).
    standby.py's load takes other counts and spacing: at thousands of events/s, events 100 ms
    apart would make a trending counter span hours of panes."""

    def __init__(self, users=60, prefix="s", step_ms=100):
        super().__init__(users=users, prefix=prefix)
        self.step_ms = step_ms
        self.sent = []  # (article_id, ts) of every valid event

    def make(self, n):
        out = []
        for _ in range(n):
            i = self.n
            self.n += 1
            u = self.users[(i * 7 + i // len(self.users)) % len(self.users)]
            a = "a%02d" % ((i * i + 3 * i) % 23)
            ts = T0 + i * self.step_ms
            v = {"user_id": u, "article_id": a, "session_id": "s-%d" % i, "ts": ts}
            out.append((u, json.dumps(v, separators=(",", ":"))))
            self.counts[u] = self.counts.get(u, 0) + 1
            self.sent.append((a, ts))
        return out


def model_windows(sent):
    """model(w): the exact ranked list of the window ending at w, a multiple of SLIDE_MS (count
    desc, article_id asc). The events are counted once per slide, a window sums its slides: a
    long run's thousands of windows cost no pass over every event each."""
    slides = {}
    for a, ts in sent:
        c = slides.setdefault(ts // SLIDE_MS, {})
        c[a] = c.get(a, 0) + 1

    def model(w):
        counts = {}
        for s in range((w - WINDOW_MS) // SLIDE_MS, w // SLIDE_MS):
            for a, n in slides.get(s, {}).items():
                counts[a] = counts.get(a, 0) + n
        items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:50]
        # one entry per story: these ids are no article's, each its own story of one
        return [{"article_id": a, "score": c, "cluster_id": a, "articles": 1} for a, c in items]
    return model


def iso_ms(s):
    return int(datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp() * 1000 + 0.5) if "." in s else int(
        datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc).timestamp() * 1000)


def check_trending(ctx, broker, ev):
    """Every window emitted once and equal to the exact recount of the events before its end
    (all events are on time: when a window is emitted every partition is past it); no window
    missing before the last one emitted, and the last one within 3 slides of the end."""
    got = {}
    for k, h, v in acclib.read_outputs(ctx, broker, "trending"):
        w = iso_ms(v["window_end"])
        ctx.check(w not in got, "trending: window %s emitted twice" % v["window_end"])
        # the lead's topic (breaking news judges by it) is no part of the recount
        got[w] = [{k: x for k, x in it.items() if k != "topic"} for it in v["items"]]
    ctx.check(got, "trending: no window emitted")
    first = (min(ts for _, ts in ev.sent) // SLIDE_MS + 1) * SLIDE_MS
    last_ts = max(ts for _, ts in ev.sent)
    want_last = ((last_ts - LATENESS_MS) // SLIDE_MS) * SLIDE_MS
    model = model_windows(ev.sent)
    wrong = [w for w in sorted(got) if got[w] != model(w)]
    ctx.check(not wrong, "trending: %d windows differ from the exact recount, first %d: got %s "
              "want %s" % (len(wrong), wrong[0] if wrong else 0,
                           got.get(wrong[0]) if wrong else None,
                           model(wrong[0]) if wrong else None))
    missing = [w for w in range(first, max(got) + 1, SLIDE_MS) if w not in got]
    ctx.check(not missing, "trending: %d windows missing before the last emitted, e.g. %s" %
              (len(missing), missing[:5]))
    ctx.check(max(got) >= want_last - 3 * SLIDE_MS,
              "trending: the last window emitted ends at %d, the events reach %d" %
              (max(got), want_last))
    return "trending: %d windows, each once, each equal to the exact recount" % len(got)


class Member:
    """One process of the job: its txid suffix, state directory and the runs so far."""

    def __init__(self, ctx, broker, name, cfg):
        self.ctx, self.broker, self.name, self.cfg = ctx, broker, name, cfg
        self.state = ctx.path("state-%s" % name)
        self.runs = 0
        self.job = None

    def start(self, extra=()):
        self.runs += 1
        self.job = acclib.Job(
            self.ctx, self.broker, self.state,
            sets=["state.changelog=true", "kafka.assignment=group",
                  "kafka.static_membership=true", "scale.standby_replicas=%d" % REPLICAS,
                  "fetch.allow_private=127.0.0.0/8",
                  "crawl.interval_s=60", "crawl.interval_floor_s=60",
                  "crawl.jitter_permille=0", *TRENDING, *extra],
            args=["--config", self.cfg], interval_ms=300, txid_suffix="-" + self.name,
            tag="%s-run%d" % (self.name, self.runs))
        return self.job

    def ready(self):
        return bool(self.job.msgs("ready: /readyz answers 200"))


def log_time(o):
    """The wall-clock time of a log line (its "ts": RFC 3339 UTC with milliseconds)."""
    ts = o.get("ts", "")
    try:
        return datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
    except ValueError:
        return None


def owned_reads(job):
    """The read-events partitions a job owns now, from its rebalance log lines."""
    out = set()
    for o in job.lines():
        msg = o.get("msg", "")
        if msg.startswith(("partitions assigned: ", "partitions revoked: ")):
            ps = {int(x) for x in str(o.get("read_events_partitions", "")).split(",") if x}
            out = out | ps if msg.startswith("partitions assigned") else out - ps
    return out


def gained_after(members, t0):
    """(member, time) of the first "partitions assigned" a live member logged after t0, or
    None."""
    best = None
    for m in members:
        for o in m.job.msgs("partitions assigned: their key groups loaded"):
            t = log_time(o)
            if t is not None and t >= t0 and (best is None or t < best[1]):
                best = (m, t)
    return best


def group_setup(ctx, name, partitions, sources_file=None, bootstrap=None, txn_timeout_ms=6000):
    """Apache Kafka's topics for a job of several processes, and their config file (session
    and transaction timeouts, sources.file when given): (broker, config path). Also
    standby.py's and tests/chaos's (bootstrap: a cluster of the test's own, else
    NF_TEST_BROKER's; txn_timeout_ms None: newsflow's own default)."""
    if bootstrap:
        broker = acclib.real_broker(ctx, bootstrap, name=name, partitions=partitions)
    elif acclib.broker_kind(ctx) != "kafka":
        ctx.fail("needs Apache Kafka: set NF_TEST_BROKER=kafka:HOST:PORT (ctest's kafka-real "
                 "tests do)")
    else:
        broker = acclib.start_broker(ctx, name=name, partitions=partitions)
    cfg = ctx.path("group.json")
    # A list value (--set would split it on commas). The transaction timeout bounds how long a
    # killed process's open transaction holds back the read_committed end of what it wrote (the
    # outputs read back at the end included): 6 s, within the session timeout.
    sources = '"sources": {"file": "%s"}, ' % sources_file if sources_file else ""
    txn = ', "transaction.timeout.ms=%d"' % txn_timeout_ms if txn_timeout_ms else ""
    with open(cfg, "w") as f:
        f.write('{%s"kafka": {"properties": ["session.timeout.ms=%d", '
                '"heartbeat.interval.ms=1000"%s]}}' % (sources, SESSION_MS, txn))
    return broker, cfg


def body(ctx):
    # The feed farm (farm.py): every process has its list, the sources topic spreads it by host.
    farm = Farm(ctx)
    srcfile = farm.sources_file(ctx.path("sources.txt"))
    broker, cfg = group_setup(ctx, "so", PARTITIONS, srcfile)
    ev = PoolEvents()
    prod = acclib.Producer(ctx, broker, ev, pause=0.15, bad_every=5)
    prod.start()
    ms = {n: Member(ctx, broker, n, cfg) for n in ("p1", "p2", "p3", "p4")}

    seen = [0]

    def progress(what, job, more=150):
        """The group's interest-updates grow by `more` (whoever owns the partitions)."""
        mark = acclib.count_topic(ctx, broker, "interest-updates")

        def pred():
            seen[0] = acclib.count_topic(ctx, broker, "interest-updates")
            return seen[0] >= mark + more

        ctx.wait_for(what, pred, timeout=180, interval=0.5, job=job,
                     last=lambda: "%d records (from %d)" % (seen[0], mark))

    def start(n, extra=()):
        ms[n].start(extra)
        ctx.wait_for("%s ready" % n, ms[n].ready, timeout=180, job=ms[n].job)

    ctx.log("---- 1. three processes")
    for n in ("p1", "p2", "p3"):
        start(n)
    progress("the group committing input", ms["p1"].job)

    ctx.log("---- 2. kill -9 p2, start it again")
    ms["p2"].job.kill()
    time.sleep(1)
    start("p2")
    progress("the group committing input after p2's restart", ms["p2"].job)

    ctx.log("---- 3. p4 joins")
    start("p4")
    progress("the group committing input with p4", ms["p4"].job)
    revoked = sum(len(ms[n].job.msgs("partitions revoked: their epoch committed, their key "
                                     "groups let go")) for n in ("p1", "p2", "p3"))
    ctx.check(revoked > 0, "p4 joined but no process let partitions go")

    farm.version = 2  # every feed gains an item: crawled by whoever owns it from now on
    ctx.log("---- 4. rolling restart (p1 comes back with 1 shard, p2 with 3)")
    shards = {"p1": ["runtime.shards=1"], "p2": ["runtime.shards=3"]}
    for n in ("p1", "p2", "p3", "p4"):
        rc, hang = ms[n].job.terminate_or_report(60)
        ctx.check(not hang and rc == 0, "%s: exit %s after SIGTERM %s" % (n, rc, hang or ""),
                  ms[n].job)
        start(n, shards.get(n, ()))
        progress("the group committing input after %s's restart" % n, ms[n].job, more=60)

    # the process that merges trending now: its merger must move too
    def merges(m):
        gained = m.job.msgs("this process merges the job's trending panes")
        lost = m.job.msgs("the job's trending panes are merged elsewhere now")
        return len(gained) > len(lost)

    owner = ctx.wait_for("a process merging trending",
                         lambda: next((n for n in ms if merges(ms[n])), None), timeout=60)
    ctx.log("---- 5. kill -9 %s (it merges trending) for good" % owner)
    time.sleep(2)
    t_kill = time.time()
    ms[owner].job.kill()
    live = [ms[n] for n in ms if n != owner]
    got = ctx.wait_for("%s's partitions taken by the others" % owner,
                       lambda: gained_after(live, t_kill), timeout=SESSION_MS / 1000 + 120)
    m, t_gain = got
    def committed_after():
        for o in m.job.msgs("epoch.committed"):
            t = log_time(o)
            if o.get("records", 0) > 0 and t is not None and t > t_gain:
                return t
        return None

    t_commit = ctx.wait_for("%s committing input after the failover" % m.name, committed_after,
                            timeout=120, job=m.job)
    print(json.dumps({"bench": "scale_out_failover", "session_timeout_ms": SESSION_MS,
                      "kill_to_assigned_s": round(t_gain - t_kill, 2),
                      "kill_to_commit_s": round(t_commit - t_kill, 2), "standby": REPLICAS > 0}),
          flush=True)
    ctx.log("failover: kill -> assigned elsewhere %.1f s, -> committing there %.1f s" %
            (t_gain - t_kill, t_commit - t_kill))

    # Every feed gains an item again, crawled (200) by the processes left; then all that is in
    # the feeds must be in articles once.
    t_v3 = time.monotonic()
    farm.version = 3
    ctx.wait_for("every feed fetched after its last change",
                 lambda: len({(r[1], r[2]) for r in farm.requests()
                              if r[0] > t_v3 and r[5] == 200}) == len(farm.urls()),
                 timeout=150, interval=1, job=live[0].job)
    ctx.wait_for("the farm's items in articles",
                 lambda: len(acclib.read_outputs(ctx, broker, "articles")) >= len(farm.items()),
                 timeout=90, interval=1, job=live[0].job)

    prod.stop()
    ctx.check(prod.error is None, "producing read events failed: %r" % prod.error)
    acclib.wait_all_consumed(ctx, live[0].job, broker, ev.valid, timeout=240)
    for m in live:
        rc, hang = m.job.terminate_or_report(60)
        ctx.check(not hang and rc == 0, "%s: exit %s after SIGTERM %s" % (m.name, rc, hang or ""),
                  m.job)
    recs = acclib.read_outputs(ctx, broker, "interest-updates")
    ctx.log(acclib.check_interest_updates(ctx, recs, ev.counts))
    counts, bad_pos = acclib.expected_from_input(ctx, broker)
    ctx.check(counts == ev.counts, "read-events holds other counts than were produced")
    ctx.log(acclib.check_dead_letters(ctx, broker, bad_pos))
    ctx.log(check_trending(ctx, broker, ev))
    merged = [m.name for m in ms.values() if m.job.msgs("this process merges the job's trending "
                                                        "panes")]
    ctx.log("processes that merged trending panes at some point: %s" % merged)
    ctx.check(len(merged) >= 2, "the trending merger did not move when %s was killed" % owner)
    ctx.log(farm.check_articles(ctx, broker))
    close, _ = farm.politeness(1000)  # crawl.host_spacing_ms's default
    ctx.check(not close, "requests to one host arrived closer than crawl.host_spacing_ms, "
              "through joins, kills and restarts: %r" % close)
    farm.stop()
    check_reference(ctx, prod.sent, broker)


def check_reference(ctx, sent, broker):
    """State equal to the reference: every interest-updates record (the user's state after each
    read: version, vector, times) equals the one of a single process that never restarted,
    over the same input (the records the producer sent, in its order, on topics of their own)."""
    ref = acclib.start_broker(ctx, name="so-ref", partitions=PARTITIONS)
    acclib.kcat_produce(ctx, ref, "read-events", sent, tag="ref")
    want, _ = acclib.expected_from_input(ctx, ref)
    job = acclib.Job(ctx, ref, ctx.path("state-ref"), sets=[*TRENDING], interval_ms=300,
                     txid_suffix="-ref", tag="ref")
    acclib.wait_all_consumed(ctx, job, ref, sum(want.values()), timeout=180)
    rc, hang = job.terminate_or_report(60)
    ctx.check(not hang and rc == 0, "reference: exit %s after SIGTERM %s" % (rc, hang or ""), job)
    mine = {(v["user_id"], v["version"]): v
            for k, h, v in acclib.read_outputs(ctx, broker, "interest-updates")}
    theirs = {(v["user_id"], v["version"]): v
              for k, h, v in acclib.read_outputs(ctx, ref, "interest-updates")}
    only_ref = sorted(set(theirs) - set(mine))
    only_job = sorted(set(mine) - set(theirs))
    differ = sorted(k for k in set(mine) & set(theirs) if mine[k] != theirs[k])
    ctx.check(not (only_ref or only_job or differ),
              "interest-updates differ from the single-process reference: %d only there %s, %d "
              "only here %s, %d differ %s%s" %
              (len(only_ref), only_ref[:3], len(only_job), only_job[:3], len(differ), differ[:3],
               " (first: here %s / reference %s)" % (json.dumps(mine[differ[0]])[:300],
                                                      json.dumps(theirs[differ[0]])[:300])
               if differ else ""))
    ctx.log("state equal to the reference: %d interest-updates records equal to a single "
            "process's over the same input" % len(mine))


if __name__ == "__main__":
    acclib.main("scale_out", body)
