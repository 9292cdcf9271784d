"""Broker faults (docs/ARCHITECTURE.md §4, src/io/kafka.h): while read events (valid and
undecodable) arrive in waves, the standalone mock cluster injects
  errors produce 20 NOT_LEADER_FOR_PARTITION
  errors end_txn 3 COORDINATOR_NOT_AVAILABLE
  down 1 (about 3 s), up 1
The job must ride them out with retries (or, if it stops on a fatal error, a restart must
recover; reported either way); at the end interest-updates holds every (user, version) exactly
once and dead-letters every undecodable input record exactly once. The expected counts are taken
from the input topic itself (read back after the run), so a retried input produce cannot skew
them.

Runs twice: against 3 brokers and against 1 (then "down 1" is a whole-cluster outage).

Mock only: the faults are the mock cluster's own fault injection, so this test always starts its
own mock, whatever NF_TEST_BROKER says (its wrapper, test_mock_broker_faults.sh, is registered
for the mock only); broker faults on a real Kafka cluster are tested under tests/kafka/.

Usage: python3 acc_broker_faults.py NEWSFLOW SRCDIR [BROKERS ...]   (default: 3 1)
"""
import json
import os
import sys
import re
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import acclib  # noqa: E402

WAVE_SIZE, BAD_PER_WAVE = 250, 3


def body(ctx):
    """Two clusters: 3 brokers (broker 1 down = some partition leaders and maybe a coordinator
    gone) and 1 broker (broker 1 down = the whole cluster gone)."""
    for brokers in ([int(a) for a in sys.argv[3:]] or [3, 1]):
        scenario(ctx, brokers)


def scenario(ctx, brokers):
    ctx.log("==== %d broker(s) ====" % brokers)
    if acclib.broker_kind(ctx) != "mock":
        ctx.log("mock-only test: NF_TEST_BROKER=%s ignored, starting a mock cluster" %
                os.environ.get("NF_TEST_BROKER"))
    B = acclib.mock_broker(ctx, partitions=4, brokers=brokers)
    state = ctx.path("state-%d" % brokers)
    # librdkafka logs its retries at debug level only: the job runs with librdkafka debug
    # contexts (a config file, since --set splits list values on commas) so that the log shows
    # that the injected errors reached the job's own requests and were retried.
    cfg = ctx.path("faults-%d.json" % brokers)
    with open(cfg, "w") as f:
        json.dump({"kafka": {"properties": ["fetch.wait.max.ms=10", "debug=eos,msg,broker"]},
                   "log": {"level": "debug"}}, f)
    sets = ["kafka.transactional_id=acc-faults-%d" % brokers, "runtime.shards=2"]
    ev = acclib.Events(users=30)
    jobs = []
    restarts = []

    def start_job():
        j = acclib.Job(ctx, B, state, sets=sets, args=["--config", cfg],
                       tag="b%d-job%d" % (brokers, len(jobs) + 1))
        jobs.append(j)
        ctx.wait_for("'newsflow started'", lambda: j.msgs("newsflow started") or not j.alive(),
                     timeout=120)
        return j

    def current():
        """The running job; restarts it if it stopped (recording why)."""
        j = jobs[-1]
        if not j.alive():
            rc = j.proc.returncode
            why = [o.get("msg") + (": " + str(o.get("error")) if o.get("error") else "")
                   for o in j.lines() if o.get("level") == "error"][-3:]
            restarts.append((j.tag, rc, why))
            ctx.log("%s exited %s (errors: %r): restarting" % (j.tag, rc, why))
            ctx.check(len(restarts) <= 3, "the job keeps stopping: %r" % restarts)
            j = start_job()
        return j

    wave_no = [0]

    def wave():
        """One wave of events (and undecodable records); returns when kcat has delivered it,
        so that the next produce requests the cluster sees are the job's."""
        wave_no[0] += 1
        lines = ev.make(WAVE_SIZE) + ev.make_bad(BAD_PER_WAVE)
        acclib.kcat_produce(ctx, B, "read-events", lines, tag="w%d" % wave_no[0])

    def wait_outputs(what):
        """Until the job's outputs for every wave so far are committed."""
        n = [0]

        def pred():
            current()
            n[0] = acclib.count_topic(ctx, B, "interest-updates")
            return n[0] >= ev.valid
        ctx.wait_for("%d interest-updates (%s)" % (ev.valid, what), pred, timeout=180,
                     interval=0.3, last=lambda: "%d" % n[0])

    start_job()
    for _ in range(3):
        wave()
    wait_outputs("before any fault")

    def job_saw(needle):
        return sum(1 for jb in jobs for o in jb.lines()
                   if o.get("component") == "kafka" and needle in o.get("msg", "").lower())

    # Produce errors: kcat's own produce requests also draw from the injected errors, so the
    # errors are injected right after a wave was delivered (the job's outputs for it follow);
    # if kcat's next wave still drew them all, the injection is repeated (at most 5 times).
    for attempt in range(1, 6):
        wave()
        ans = B.command("errors produce 20 NOT_LEADER_FOR_PARTITION")
        ctx.check(ans == "ok", "mock refused 'errors produce': %r" % ans)
        wait_outputs("after errors produce")
        wave()
        wait_outputs("after errors produce")
        if job_saw("not leader for partition"):
            break
        ctx.log("the job's produce requests drew none of the injected errors (kcat did): again")
    else:
        ctx.fail("5 injections of 'errors produce 20 NOT_LEADER_FOR_PARTITION' never reached the "
                 "job's producer")

    # EndTxn errors: only the job sends EndTxn.
    wave()
    ans = B.command("errors end_txn 3 COORDINATOR_NOT_AVAILABLE")
    ctx.check(ans == "ok", "mock refused 'errors end_txn': %r" % ans)
    wait_outputs("after errors end_txn")
    for _ in range(2):
        wave()
    wait_outputs("after errors end_txn")

    wave()
    ans = B.command("down 1")
    ctx.check(ans == "ok", "mock refused 'down 1': %r" % ans)
    t_down = time.monotonic()
    while time.monotonic() - t_down < 3.0:
        current()
        time.sleep(0.2)
    ans = B.command("up 1")
    ctx.check(ans == "ok", "mock refused 'up 1': %r" % ans)
    for _ in range(4):
        wave()
    ctx.log("%d waves produced (%d valid, %d undecodable records sent)" %
            (wave_no[0], ev.valid, ev.bad))

    # the expectation, from the input log itself
    counts, bad_pos = acclib.expected_from_input(ctx, B)
    valid = sum(counts.values())
    ctx.log("read-events holds %d valid and %d undecodable records (sent %d and %d)" %
            (valid, len(bad_pos), ev.valid, ev.bad))

    def all_out():
        current()
        return (acclib.count_topic(ctx, B, "interest-updates") >= valid and
                acclib.count_topic(ctx, B, "dead-letters") >= len(bad_pos))
    ctx.wait_for("all outputs (%d interest-updates, %d dead-letters)" % (valid, len(bad_pos)),
                 all_out, timeout=180, interval=0.5)
    j = current()
    rc, hang = j.terminate_or_report(20)

    recs = acclib.read_outputs(ctx, B, "interest-updates")
    ctx.log(acclib.check_interest_updates(ctx, recs, counts))
    ctx.log(acclib.check_dead_letters(ctx, B, bad_pos))

    # what the job logged about the faults
    lines = [o for jb in jobs for o in jb.lines()]

    def count(pred):
        return sum(1 for o in lines if pred(o))
    kafka_msg = lambda o: o.get("component") == "kafka" and o.get("msg", "")  # noqa: E731
    not_leader = count(lambda o: "NOT_LEADER" in (kafka_msg(o) or "") or
                       "not leader for partition" in (kafka_msg(o) or "").lower())
    coord = count(lambda o: "EndTxn returned COORDINATOR_NOT_AVAILABLE" in (kafka_msg(o) or ""))
    down = count(lambda o: "Connection refused" in (kafka_msg(o) or "") or
                 "Disconnected" in (kafka_msg(o) or ""))
    epoch_retries = count(lambda o: o.get("msg") in (
        "epoch commit to Kafka failed; retrying", "commit_transaction: retrying",
        "recovery scan failed; retrying"))
    visible = {}
    for o in lines:
        if o.get("level") in ("warn", "error") and o.get("msg") != "record sent to dead-letters":
            m = o.get("msg", "")
            m = re.sub(r"\d+ms", "Nms", re.sub(r"127\.0\.0\.1:\d+", "HOST", m))[:120]
            visible[m] = visible.get(m, 0) + 1
    ctx.log("warn/error lines (not debug) the job logged, count x message:")
    for m, n in sorted(visible.items(), key=lambda x: -x[1])[:20]:
        ctx.log("  %4d x %s" % (n, m))
    ctx.log("librdkafka debug/warn lines naming NOT_LEADER: %d, COORDINATOR_NOT_AVAILABLE: %d, "
            "connection refused/disconnected: %d; epoch-level retries: %d; restarts: %r" %
            (not_leader, coord, down, epoch_retries, restarts))
    ctx.check(not_leader > 0, "no log line shows the job's produce requests failing with "
              "NOT_LEADER_FOR_PARTITION and being retried (the injected errors did not reach it?)")
    ctx.check(coord > 0 or epoch_retries > 0, "no log line shows EndTxn failing with "
              "COORDINATOR_NOT_AVAILABLE and being retried")
    ctx.check(down > 0, "no log line shows the connection to broker 1 failing while it was down")
    ctx.check(not hang, "shutdown after the faults: " + (hang or ""), j)
    ctx.check(rc == 0, "final exit %s after SIGTERM, want 0" % rc, j)
    ctx.log("%d broker(s): the job %s" % (brokers, "survived every fault without a restart"
                                          if not restarts else
                                          "stopped %d time(s) and recovered on restart: %r" %
                                          (len(restarts), restarts)))
    B.stop()


if __name__ == "__main__":
    acclib.main("broker_faults", body)
