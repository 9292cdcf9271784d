"""Warm standbys (scale.standby_replicas; src/state/standby.h, docs/ARCHITECTURE.md §4), on Apache
Kafka.

Two processes p1, p2 of one job (kafka.assignment=group, static members, state.changelog=true,
checkpoint.interval_ms=300, session.timeout.ms 10 s, scale.standby_replicas=1) on 4 read-events
partitions, read events arriving (with poison records), and a feed farm on loopback (farm.py) as
their sources, so that articles, the cluster index and crawl schedules have state too. Each
keeps the changelogs of the other's key groups applied to its own state directory. Once both
have committed input and the farm's articles for a while:
  1. the process that owns trending-panes 0 (the global key group: article keys, the cluster
     index, topic vectors; and the merger) is SIGKILLed; when its session expires the survivor
     is assigned its partitions and restores them from the changelog, starting at the offsets
     its standby recorded;
  2. if it owned no read-events partition (cooperative-sticky balances the count of all the
     group's partitions, and often gives one process all of read-events), it is started again,
     and once it holds partitions the owner of the most read-events partitions is SIGKILLed the
     same way.
Before each kill, `newsflow status` of the survivor says what it stands by for.

Checked, at each failover:
  - the restore (log "gained partitions restored from the changelog", records_read_events and
    records_global) reads less than 10 % of the changelog records of what moved: the 4
    changelog topics keyed by the read-events partition at the moved partitions (and the
    merger's, when it moved), and the 5 of the global key group at its partition when it moved
    (counted read_committed right after) — counts, never a time; without a standby it reads all
    of them (the survivor never owned them);
  - the survivor commits input after the failover;
and in the end every (user, version) of interest-updates exactly once over 1..n, every poison
record one dead letter, the farm's items one article per URL.
Prints {"bench":"standby_failover","phase":...} per failover: kill -> assigned, kill ->
committing, the records restored (and the restore's own seconds) and the moved key groups'
changelog records.

NF_TEST_STANDBY_REPLICAS (default 1) sets scale.standby_replicas: 0 is the negative check (the
restore assertion fails) and the perf/README figure without a standby. NF_TEST_STANDBY_USERS
(80), NF_TEST_STANDBY_PER_WAVE (40 events per 0.1 s wave) and NF_TEST_STANDBY_LOAD_S (25 s
before the kill) set the load, so that perf/README can measure a larger restore.

Needs Apache Kafka (NF_TEST_BROKER=kafka:...).

Usage: python3 standby.py NEWSFLOW SRCDIR
"""
import collections
import json
import os
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recovery"))
import acclib  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from farm import Farm  # noqa: E402
from scale_out import SESSION_MS, PoolEvents, group_setup, log_time  # noqa: E402
from scale_out import owned_reads as owned  # noqa: E402

PARTITIONS = 4
REPLICAS = int(os.environ.get("NF_TEST_STANDBY_REPLICAS", "1"))
# the load (perf/README.md's larger-state figures raise them): users, events per wave of the
# producer (a wave every 0.1 s), seconds of load before the kill
USERS = int(os.environ.get("NF_TEST_STANDBY_USERS", "80"))
PER_WAVE = int(os.environ.get("NF_TEST_STANDBY_PER_WAVE", "40"))
LOAD_S = float(os.environ.get("NF_TEST_STANDBY_LOAD_S", "25"))
# the changelog topics of the kinds keyed by the read-events partition (changelog.c k_topics)
INPUT_CHANGELOGS = ("changelog-event-ids", "changelog-interest", "changelog-interest-seen",
                    "changelog-reads",
                    "changelog-trending")
# those of the global key group (keyed by trending-panes 0), all in partition GLOBAL_KG % P
GLOBAL_CHANGELOGS = ("changelog-article-key", "changelog-cluster-sig", "changelog-cluster-bucket",
                     "changelog-cluster-parent", "changelog-article-topics",
                     "changelog-article-meta", "changelog-topic-recent", "changelog-story",
                     "changelog-search-log")
MERGER_KG = GLOBAL_KG = 0xFFFF


def after(job, msg, t0):
    return [o for o in job.msgs(msg) if (log_time(o) or 0) >= t0]


def owns_panes(job):
    """Whether the job owns trending-panes 0 now (the merger and the global key group)."""
    on = False
    for o in job.lines():
        msg = o.get("msg", "")
        if o.get("trending_panes") and (msg.startswith("partitions assigned: ") or
                                        msg.startswith("partitions revoked: ")):
            on = msg.startswith("partitions assigned")
    return on


def changelog_counts(ctx, broker):
    """{(topic, partition): records} of the changelog topics keyed by the read-events partition
    and of the global key group."""
    out = collections.Counter()
    for t in INPUT_CHANGELOGS + GLOBAL_CHANGELOGS:
        for line in acclib.kcat_consume(ctx, broker, t, fmt="%p\n"):
            out[(t, int(line))] += 1
    return out


def body(ctx):
    farm = Farm(ctx)
    srcfile = farm.sources_file(ctx.path("sources.txt"))
    # session 10 s, transaction timeout 6 s
    broker, cfg = group_setup(ctx, "sb", PARTITIONS, srcfile)
    ev = PoolEvents(users=USERS, prefix="sb", step_ms=1)  # event times 1 ms apart
    prod = acclib.Producer(ctx, broker, ev, per_wave=PER_WAVE, pause=0.1, bad_every=5)
    prod.start()
    jobs = {}
    runs = collections.Counter()

    def start(n):
        runs[n] += 1
        jobs[n] = acclib.Job(
            ctx, broker, ctx.path("state-%s" % n),
            sets=["state.changelog=true", "kafka.assignment=group",
                  "kafka.static_membership=true", "scale.standby_replicas=%d" % REPLICAS,
                  # without standbys, no replica of the global key group either (the negative
                  # check and the figure without a standby)
                  "serve.global_replica=%s" % ("true" if REPLICAS else "false"),
                  "fetch.allow_private=127.0.0.0/8", "crawl.interval_s=60",
                  "crawl.interval_floor_s=60", "crawl.jitter_permille=0",
                  "admin.enabled=true", "admin.port=0"],
            args=["--config", cfg], interval_ms=300, txid_suffix="-" + n,
            tag=n if runs[n] == 1 else "%s-run%d" % (n, runs[n]))
        ctx.wait_for("%s ready" % n, lambda: jobs[n].msgs("ready: /readyz answers 200"),
                     timeout=180, job=jobs[n])

    start("p1")
    start("p2")
    ctx.log("replicas=%d; both ready; load for %.0f s" % (REPLICAS, LOAD_S))

    def committing(j):
        return sum(1 for o in j.msgs("epoch.committed") if o.get("records", 0) > 0) >= 5

    # one of them may own no read-events partition (nor emit a trending window yet)
    ctx.wait_for("the job committing input", lambda: committing(jobs["p1"]) or
                 committing(jobs["p2"]), timeout=120, job=jobs["p2"])
    ctx.wait_for("the farm's items in articles",
                 lambda: len(acclib.read_outputs(ctx, broker, "articles")) >= len(farm.items()),
                 timeout=120, job=jobs["p2"])
    time.sleep(LOAD_S)

    def failover(victim, phase):
        """Waits for the survivor's standby to catch up, kills the victim, waits until the
        survivor commits its partitions' input, checks what the restore read. Returns the read-
        events partitions that moved."""
        survivor = "p2" if victim == "p1" else "p1"
        p2 = jobs[survivor]
        ctx.log("%s: %s owns read-events partitions %s%s, %s %s" % (
            phase, victim, sorted(owned(jobs[victim])),
            " and trending-panes 0" if owns_panes(jobs[victim]) else "", survivor,
            sorted(owned(p2))))
        if REPLICAS:
            last = {}

            def caught_up():
                m = p2.metrics() or {}
                last.update(m)
                return m.get("newsflow_standby_records_total", 0) > 0 and \
                    m.get("newsflow_standby_partitions", 0) >= 1 and \
                    m.get("newsflow_standby_lag_records", 1e9) < 2000
            ctx.wait_for("the survivor's standby applying the other's partitions", caught_up,
                         timeout=120, job=p2,
                         last=lambda: "standby metrics %r" % {k: v for k, v in last.items()
                                                              if "standby" in k})
            # what an operator sees: `newsflow status` names what the survivor stands by for
            out = acclib.run_cli(ctx, ["status", "--set", "admin.port=%d" % p2.admin_port(),
                                       "--set", "state.dir=%s" % ctx.path("state-%s" % survivor)])
            line = [l for l in out.split("\n") if l.startswith("standby:")]
            want = "the global key group: %s" % ("yes" if owns_panes(jobs[victim]) else "no")
            ctx.check(line and want in line[0], "`newsflow status` of the survivor: %r, not "
                      "%r: %r" % (line, want, out[-800:]), p2)
            ctx.log(line[0])
        # what standing by cost the survivor so far
        cpu = (p2.metrics() or {}).get("newsflow_process_cpu_seconds_total")
        lost, lost_panes = set(owned(jobs[victim])), owns_panes(jobs[victim])
        ctx.log("---- kill -9 %s" % victim)
        t_kill = time.time()
        jobs[victim].kill()

        def gained():
            """The survivor's assignments since the kill, once one of them holds what the
            victim owned (an assignment of something else can still arrive from the rebalance
            before: under load the restart's takes seconds to settle)."""
            msgs = after(p2, "partitions assigned: their key groups loaded", t_kill)
            for o in msgs:
                parts = {int(x) for x in str(o.get("read_events_partitions", "")).split(",") if x}
                if parts & lost or (lost_panes and o.get("trending_panes")):
                    return msgs
            return None

        got = ctx.wait_for("the killed process's partitions assigned to the survivor", gained,
                           timeout=SESSION_MS / 1000 + 120, job=p2)
        t_gain = min(log_time(o) for o in got
                     if {int(x) for x in str(o.get("read_events_partitions", "")).split(",")
                         if x} & lost or (lost_panes and o.get("trending_panes")))

        def committed_after():
            for o in p2.msgs("epoch.committed"):
                t = log_time(o)
                if o.get("records", 0) > 0 and t is not None and t > t_gain:
                    return t
            return None

        t_commit = ctx.wait_for("the survivor committing input after the failover",
                                committed_after, timeout=120, job=p2)
        restores = after(p2, "gained partitions restored from the changelog", t_kill)
        restored = sum(o.get("records", 0) for o in restores)
        restored_re = sum(o.get("records_read_events", 0) for o in restores)
        restored_global = sum(o.get("records_global", 0) for o in restores)
        restore_s = sum(o.get("seconds", 0) for o in restores)
        moved = set()
        merger = False
        for o in got:  # of what the survivor gained, what the victim had
            moved |= {int(x) for x in str(o.get("read_events_partitions", "")).split(",")
                      if x} & lost
            merger |= lost_panes and bool(o.get("trending_panes"))
        # The moved key groups' changelog records up to the failover are at most what is there
        # now. The read-events partitions' (and, when the merger moved, its partition's), the
        # global key group's when it moved.
        counts = changelog_counts(ctx, broker)
        parts = set(moved) | ({MERGER_KG % PARTITIONS} if merger else set())
        total_re = sum(c for (t, p), c in counts.items() if t in INPUT_CHANGELOGS and p in parts)
        total_global = sum(c for (t, p), c in counts.items()
                           if merger and t in GLOBAL_CHANGELOGS and p == GLOBAL_KG % PARTITIONS)
        print(json.dumps({"bench": "standby_failover", "phase": phase,
                          "standby_replicas": REPLICAS, "session_timeout_ms": SESSION_MS,
                          "kill_to_assigned_s": round(t_gain - t_kill, 2),
                          "kill_to_commit_s": round(t_commit - t_kill, 2),
                          "restored_records": restored, "restore_s": round(restore_s, 3),
                          "restored_read_events": restored_re,
                          "restored_global": restored_global,
                          "survivor_cpu_s_before_kill": cpu,
                          "moved_partitions": sorted(moved), "merger_moved": merger,
                          "changelog_records_of_moved": total_re + total_global,
                          "changelog_records_read_events": total_re,
                          "changelog_records_global": total_global}), flush=True)
        ctx.log("%s failover: kill -> assigned %.2f s, -> committing %.2f s; restored %d of %d "
                "changelog records of read-events partitions %s, %d of %d of the global key "
                "group" % (phase, t_gain - t_kill, t_commit - t_kill, restored_re, total_re,
                           sorted(parts), restored_global, total_global))
        checks = []
        if moved:
            checks.append(("the read-events partitions", restored_re, total_re, 1000))
        if merger:
            checks.append(("the global key group", restored_global, total_global, 200))
        for what, got_n, of, least in checks:
            ctx.check(of > least, "too few changelog records of %s to tell (%d): more load "
                      "needed" % (what, of))
            ctx.check(got_n < of * 0.10,
                      "the failover's restore read %d of %s' %d changelog records (>= 10 %%): "
                      "the standby did not keep them applied" % (got_n, what, of), p2)
        return moved, merger, survivor

    # 1. The owner of trending-panes 0 (the global key group and the merger, whose trending
    # counter lives in read-events partition MERGER_KG % P's changelog) is killed. Cooperative-
    # sticky balances the count of all the group's partitions, so it may own read-events
    # partitions or none.
    ctx.wait_for("one process owning trending-panes 0",
                 lambda: [n for n in jobs if owns_panes(jobs[n])], timeout=60, job=jobs["p2"])
    victim = [n for n in ("p1", "p2") if owns_panes(jobs[n])][0]
    moved, merger, survivor = failover(victim, "global")
    ctx.check(merger, "the survivor was not assigned trending-panes 0", jobs[survivor])
    if not moved:
        # 2. It owned no read-events partition: it comes back, takes some partitions, and the
        # owner of the most read-events partitions is killed (the other stands by for them).
        start(victim)
        ctx.wait_for("partitions assigned to the restarted process",
                     lambda: owned(jobs[victim]) or owns_panes(jobs[victim]) or
                     any(o.get("sources_partitions") for o in
                         jobs[victim].msgs("partitions assigned: their key groups loaded")),
                     timeout=120, job=jobs[victim])
        time.sleep(5)
        victim = max(("p1", "p2"), key=lambda n: len(owned(jobs[n])))
        moved, _, survivor = failover(victim, "read-events")
        ctx.check(moved, "no read-events partition moved", jobs[survivor])

    # Let the load go on a little, then stop it and finish.
    p2 = jobs[survivor]
    time.sleep(3)
    acclib.drain_and_check(ctx, prod, p2, broker, ev, what="survivor")
    ctx.log(farm.check_articles(ctx, broker))
    farm.stop()


if __name__ == "__main__":
    acclib.main("standby", body)
