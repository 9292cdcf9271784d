"""Warm standbys (scale.standby_replicas; src/state/standby.h, DESIGN.md §9), on Apache Kafka.

Two processes p1, p2 of one job (kafka.assignment=group, static members, state.changelog=true,
checkpoint.interval_ms=300, session.timeout.ms 10 s, scale.standby_replicas=1) on 4 read-events
partitions, read events arriving (with poison records). Each keeps the changelogs of the other's
partitions applied to its own state directory. Once both have committed input for a while and
the survivor's standby has caught up, the process owning the most read-events partitions is
SIGKILLed; when its session expires the survivor is assigned them and restores them from the
changelog, starting at the offsets its standby recorded.

Checked:
  - the restore on failover (log "gained partitions restored from the changelog", records)
    reads less than 10 % of the changelog records of the moved partitions (the 4 changelog
    topics keyed by the read-events partition, partitions moved; counted read_committed) — a
    count, never a time; without a standby it reads all of them (the survivor never owned
    them);
  - the survivor commits input after the failover, and in the end every (user, version) of
    interest-updates exactly once over 1..n, every poison record one dead letter.
Prints {"bench":"standby_failover",...}: kill -> assigned, kill -> committing, the records
restored (and the restore's own seconds) and the moved partitions' changelog records.

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
from scale_out import SESSION_MS, PoolEvents, group_setup, log_time  # noqa: E402

PARTITIONS = 4
REPLICAS = int(os.environ.get("NF_TEST_STANDBY_REPLICAS", "1"))
# the load (perf/README.md's larger-state figures raise them): users, events per wave of the
# producer (a wave every 0.1 s), seconds of load before the kill
USERS = int(os.environ.get("NF_TEST_STANDBY_USERS", "80"))
PER_WAVE = int(os.environ.get("NF_TEST_STANDBY_PER_WAVE", "40"))
LOAD_S = float(os.environ.get("NF_TEST_STANDBY_LOAD_S", "25"))
# the changelog topics of the kinds keyed by the read-events partition (changelog.c k_topics)
INPUT_CHANGELOGS = ("changelog-event-ids", "changelog-interest", "changelog-interest-seen",
                    "changelog-trending")
MERGER_KG = 0xFFFF


def after(job, msg, t0):
    return [o for o in job.msgs(msg) if (log_time(o) or 0) >= t0]


def owned(job):
    """The read-events partitions a job owns now, from its rebalance log lines."""
    out = set()
    for o in job.lines():
        msg = o.get("msg", "")
        if msg.startswith("partitions assigned: ") or msg.startswith("partitions revoked: "):
            ps = {int(x) for x in str(o.get("read_events_partitions", "")).split(",") if x}
            out = out | ps if msg.startswith("partitions assigned") else out - ps
    return out


def changelog_counts(ctx, broker):
    """{(topic, partition): records} of the changelog topics keyed by the input partition."""
    out = collections.Counter()
    for t in INPUT_CHANGELOGS:
        for line in acclib.kcat_consume(ctx, broker, t, fmt="%p\n"):
            out[(t, int(line))] += 1
    return out


def body(ctx):
    broker, cfg = group_setup(ctx, "sb", PARTITIONS)  # session 10 s, transaction timeout 6 s
    ev = PoolEvents(users=USERS, prefix="sb", step_ms=1)  # event times 1 ms apart
    prod = acclib.Producer(ctx, broker, ev, per_wave=PER_WAVE, pause=0.1, bad_every=5)
    prod.start()
    jobs = {}

    def start(n):
        jobs[n] = acclib.Job(
            ctx, broker, ctx.path("state-%s" % n),
            sets=["state.changelog=true", "kafka.assignment=group",
                  "kafka.static_membership=true", "scale.standby_replicas=%d" % REPLICAS,
                  "admin.enabled=true", "admin.port=0"],
            args=["--config", cfg], interval_ms=300, txid_suffix="-" + n, tag=n)
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
    time.sleep(LOAD_S)
    # The victim owns read-events partitions (cooperative-sticky balances the count of all the
    # group's partitions: one process may hold every read-events partition, the other sources
    # and trending-panes); the survivor stands by for them.
    victim = max(("p1", "p2"), key=lambda n: len(owned(jobs[n])))
    survivor = "p2" if victim == "p1" else "p1"
    p2 = jobs[survivor]
    ctx.log("%s owns read-events partitions %s, %s %s" % (
        victim, sorted(owned(jobs[victim])), survivor, sorted(owned(p2))))
    if REPLICAS:
        last = {}

        def caught_up():
            m = p2.metrics() or {}
            last.update(m)
            return m.get("newsflow_standby_records_total", 0) > 0 and \
                m.get("newsflow_standby_partitions", 0) >= 1 and \
                m.get("newsflow_standby_lag_records", 1e9) < 2000
        ctx.wait_for("the survivor's standby applying the other's partitions", caught_up, timeout=120, job=p2,
                     last=lambda: "standby metrics %r" % {k: v for k, v in last.items()
                                                          if "standby" in k})
        ctx.log("survivor's standby: %r" % {k: v for k, v in last.items() if "standby" in k})
    # what standing by cost the survivor so far (it owned no read-events partition meanwhile)
    cpu = (p2.metrics() or {}).get("newsflow_process_cpu_seconds_total")
    ctx.log("---- kill -9 %s" % victim)
    t_kill = time.time()
    jobs[victim].kill()
    got = ctx.wait_for("the killed process's partitions assigned to the survivor",
                       lambda: after(p2, "partitions assigned: their key groups loaded", t_kill),
                       timeout=SESSION_MS / 1000 + 120, job=p2)
    t_gain = log_time(got[0])

    def committed_after():
        for o in p2.msgs("epoch.committed"):
            t = log_time(o)
            if o.get("records", 0) > 0 and t is not None and t > t_gain:
                return t
        return None

    t_commit = ctx.wait_for("the survivor committing input after the failover", committed_after,
                            timeout=120, job=p2)
    restores = after(p2, "gained partitions restored from the changelog", t_kill)
    restored = sum(o.get("records", 0) for o in restores)
    restore_s = sum(o.get("seconds", 0) for o in restores)
    moved = set()
    merger = False
    for o in got:
        moved |= {int(x) for x in str(o.get("read_events_partitions", "")).split(",") if x}
        merger |= bool(o.get("trending_panes"))
    ctx.check(moved, "the survivor was assigned no read-events partition: %r" % got, p2)

    # Let the load go on a little, then stop it and finish.
    time.sleep(3)
    prod.stop()
    ctx.check(prod.error is None, "producing read events failed: %r" % prod.error)
    acclib.wait_all_consumed(ctx, p2, broker, ev.valid, timeout=240)
    rc, hang = p2.terminate_or_report(60)
    ctx.check(not hang and rc == 0, "survivor: exit %s after SIGTERM %s" % (rc, hang or ""), p2)

    # The moved partitions' changelog records up to the failover are at most what is there now.
    counts = changelog_counts(ctx, broker)
    parts = set(moved)
    if merger:
        parts.add(MERGER_KG % PARTITIONS)
    total = sum(c for (t, p), c in counts.items() if p in parts)
    print(json.dumps({"bench": "standby_failover", "standby_replicas": REPLICAS,
                      "session_timeout_ms": SESSION_MS,
                      "kill_to_assigned_s": round(t_gain - t_kill, 2),
                      "kill_to_commit_s": round(t_commit - t_kill, 2),
                      "restored_records": restored, "restore_s": round(restore_s, 3),
                      "survivor_cpu_s_before_kill": cpu,
                      "moved_partitions": sorted(moved),
                      "changelog_records_of_moved": total}), flush=True)
    ctx.log("failover: kill -> assigned %.2f s, -> committing %.2f s; restored %d of %d "
            "changelog records of partitions %s" % (t_gain - t_kill, t_commit - t_kill,
                                                     restored, total, sorted(parts)))
    ctx.check(total > 1000, "too few changelog records to tell (%d): more load needed" % total)
    ctx.check(restored < total * 0.10,
              "the failover's restore read %d of the moved partitions' %d changelog records "
              "(>= 10 %%): the standby did not keep them applied" % (restored, total), p2)

    recs = acclib.read_outputs(ctx, broker, "interest-updates")
    ctx.log(acclib.check_interest_updates(ctx, recs, ev.counts))
    _, bad_pos = acclib.expected_from_input(ctx, broker)
    ctx.log(acclib.check_dead_letters(ctx, broker, bad_pos))


if __name__ == "__main__":
    acclib.main("standby", body)
