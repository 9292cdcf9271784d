"""A consumer-group member killed with SIGKILL and restarted, on Apache Kafka (docs/ARCHITECTURE.md
§5; src/io/kafka.h; README "Kafka"): with kafka.assignment=group the restarted process must not wait
out its dead predecessor's session before it gets its partitions back. newsflow joins as a
static member (KIP-345: group.instance.id = kafka.transactional_id, kafka.static_membership), so
the group coordinator hands the returning instance its partitions at once.

  static    session.timeout.ms = 60 s; while read events keep arriving the job is SIGKILLed and
            restarted at once. Checked: the restarted process is assigned its partitions and
            commits an epoch with input before the dead member's session could have expired
            (a causal bound, not a performance figure: a dynamic member could not have had the
            partitions earlier); the time from restart to that epoch is reported.
  dynamic   the same with kafka.static_membership=false and session.timeout.ms = 15 s, for
            comparison: the time is reported; it is expected to be about the session timeout.
  static-pending  as static, but the first process dies (NF_FAULT=after_pending:6, an _exit as
            if killed) after it wrote epoch 6 as pending and before Kafka committed it: the
            restarted member must roll that epoch forward, offsets included, before it has joined
            the group. The coordinator refuses transactional offsets that name the static
            instance before its new member id exists (FENCED_INSTANCE_ID), so the roll-forward
            must not name it; it once retried until it gave up, and the job stopped.
All end with interest-updates checked exactly once (read_committed).

Needs Apache Kafka (NF_TEST_BROKER=kafka:...): the group coordinator's sessions and static
membership are what is tested; librdkafka's mock implements neither faithfully.

Usage: python3 group_restart.py NEWSFLOW SRCDIR [static|dynamic ...]
"""
import os
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recovery"))
import acclib  # noqa: E402

MODES = {"static": (True, 60000, None), "dynamic": (False, 15000, None),
         "static-pending": (True, 60000, "after_pending:6")}


def first_commit_with_input(job):
    """Seconds from the job's start to its first epoch.committed with records, or None."""
    for o in job.msgs("epoch.committed"):
        if o.get("records", 0) > 0:
            return o
    return None


def scenario(ctx, mode):
    static, session_ms, fault = MODES[mode]
    ctx.log("==== %s membership, session.timeout.ms=%d ====" % (mode, session_ms))
    broker = acclib.start_broker(ctx, name=mode)
    ev = acclib.Events(users=25, prefix=mode[0])
    state = ctx.path("state-%s" % mode)
    cfg = ctx.path("group-%s.json" % mode)
    with open(cfg, "w") as f:  # a list value: --set would split it on commas
        f.write('{"kafka": {"properties": ["session.timeout.ms=%d", "heartbeat.interval.ms=1000"'
                ']}}' % session_ms)
    sets = ["kafka.assignment=group", "kafka.static_membership=%s" % str(static).lower()]
    prod = acclib.Producer(ctx, broker, ev, tag="g")
    prod.start()
    j1 = acclib.Job(ctx, broker, state, sets=sets, args=["--config", cfg], interval_ms=300,
                    env={"NF_FAULT": fault} if fault else None, tag="%s-1" % mode)
    if fault:
        j1.wait_exit(timeout=180, what="the fault point %s" % fault)
        ctx.check(j1.msgs("fault injection: exiting as if killed"),
                  "%s-1 exited without reaching the fault point %s" % (mode, fault), j1)
        t_kill = time.monotonic()
        ctx.log("%s-1 died at %s" % (mode, fault))
    else:
        ctx.wait_for("the first member's epochs with input", lambda: first_commit_with_input(j1),
                     timeout=180, job=j1)
        time.sleep(2)
        j1.kill()
        t_kill = time.monotonic()
        ctx.log("%s-1 SIGKILLed after epoch %d" % (mode, j1.last_epoch()))
    j2 = acclib.Job(ctx, broker, state, sets=sets, args=["--config", cfg], interval_ms=300,
                    tag="%s-2" % mode)
    t_start = time.monotonic()
    got = ctx.wait_for("the restarted member's first epoch with input",
                       lambda: first_commit_with_input(j2), timeout=session_ms / 1000 + 120,
                       interval=0.1, job=j2)
    t_commit = time.monotonic()
    if fault:
        ctx.check(j2.msgs("pending epoch rolled forward"),
                  "%s-2 did not roll the pending epoch forward" % mode, j2)
    assigned = j2.msgs("partition assigned")
    ctx.log("%s: restart -> first epoch with input (epoch %d): %.1f s; kill -> it: %.1f s; "
            "%d partitions assigned" % (mode, got.get("epoch"), t_commit - t_start,
                                        t_commit - t_kill, len(assigned)))
    print('{"bench":"group_restart","membership":"%s","session_timeout_ms":%d,'
          '"restart_to_first_epoch_s":%.2f,"kill_to_first_epoch_s":%.2f}' %
          (mode, session_ms, t_commit - t_start, t_commit - t_kill), flush=True)
    if static:
        ctx.check(t_commit - t_kill < session_ms / 1000.0,
                  "the restarted static member committed input only %.1f s after the kill: no "
                  "sooner than the dead member's session timeout (%d ms), so it waited it out" %
                  (t_commit - t_kill, session_ms), j2)
    acclib.drain_and_check(ctx, prod, j2, broker, ev, timeout=180, what=j2.tag, dead_letters=False)


def body(ctx):
    if acclib.broker_kind(ctx) != "kafka":
        ctx.fail("needs Apache Kafka: set NF_TEST_BROKER=kafka:HOST:PORT (ctest's kafka-real "
                 "tests do)")
    for mode in (sys.argv[3:] or list(MODES)):
        scenario(ctx, mode)


if __name__ == "__main__":
    acclib.main("group_restart", body)
