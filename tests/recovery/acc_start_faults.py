"""A job started while partitions have no leader (a broker restarting, a partition moving):
the end-offset queries of its start-up (src/io/kafka.c `watermarks`) meet
NOT_LEADER_FOR_PARTITION / LEADER_NOT_AVAILABLE and are retried, instead of the start failing
with "cannot connect to Kafka" (seen in CI right after a broker restart: broker-faults/
test_broker_faults_shutdown). The mock cluster answers the next ListOffsets requests with those
errors; the job must start, take its input and produce every output exactly once.

Mock only (the mock's fault injection): it starts its own mock whatever NF_TEST_BROKER says.

Usage: python3 acc_start_faults.py NEWSFLOW SRCDIR
"""
import os
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import acclib  # noqa: E402


def body(ctx):
    broker = acclib.mock_broker(ctx, partitions=4)
    ev = acclib.Events(users=20, prefix="sf")
    acclib.kcat_produce(ctx, broker, "read-events", ev.make(200), tag="sf")
    for err in ("NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE"):
        ans = broker.command("errors list_offsets 6 %s" % err)
        ctx.check(ans == "ok", "mock refused 'errors list_offsets': %r" % ans)
    job = acclib.Job(ctx, broker, ctx.path("state"), sets=["admin.port=0"], tag="job")
    ctx.wait_for("the job ready", lambda: job.msgs("ready: /readyz answers 200"), timeout=90,
                 job=job)
    ctx.check(not job.msgs_matching("cannot connect to Kafka"),
              "the start failed on the injected errors", job)
    acclib.wait_all_consumed(ctx, job, broker, sum(ev.counts.values()), timeout=90)
    rc = job.terminate(60)
    ctx.check(rc == 0, "exit %s after SIGTERM" % rc, job)
    recs = acclib.read_outputs(ctx, broker, "interest-updates")
    ctx.log(acclib.check_interest_updates(ctx, recs, ev.counts))
    broker.stop()


if __name__ == "__main__":
    acclib.main("start_faults", body)
