"""State follows Kafka: the changelog topics (docs/ARCHITECTURE.md §4; src/state/changelog.h), on
Apache Kafka.

With state.changelog=true every epoch's state writes are also records of the compacted
changelog-<kind> topics, committed in the epoch's transaction. Scenarios:

  lost_disk   while read events arrive the job (checkpoint.interval_ms=300) is SIGKILLed and its
              whole state directory deleted, as when a machine is lost; a new process on an
              empty directory must restore every key group from the changelog topics and take
              the input positions from the consumer group (committed in the same transactions),
              then carry on. After it, copies of events from before the loss are produced again
              (same event ids): the restored event-id set must drop them all. Checked, read
              back read_committed: every (user, version) of interest-updates exactly once over
              1..n (n = distinct events of the user: a user whose vector was not restored would
              start again at version 1, a replay counted again would exceed n), and one more
              event for a few users gives version n + 1 after another clean restart.
  clean       a clean stop and a restart on the same directory restores nothing (0 records):
              the directory recorded the changelog offsets its own writes reached.

Prints {"bench":"changelog_restore",...} with the restore's records, bytes and rate.

Needs Apache Kafka (NF_TEST_BROKER=kafka:...): the mock keeps no transactional offsets.

Usage: python3 changelog.py NEWSFLOW SRCDIR [lost_disk|clean ...]
"""
import json
import os
import shutil
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recovery"))
import acclib  # noqa: E402

SETS = ["state.changelog=true"]


def restored(job):
    m = job.msgs("state restored from the changelog topics")
    return m[-1] if m else None


def committed_with_input(job):
    return any(o.get("records", 0) > 0 for o in job.msgs("epoch.committed"))


def lost_disk(ctx, broker, ev):
    state = ctx.path("state")
    prod = acclib.Producer(ctx, broker, ev, per_wave=40)
    prod.start()
    j1 = acclib.Job(ctx, broker, state, sets=SETS, interval_ms=300, tag="before-loss")
    ctx.wait_for("epochs with input", lambda: committed_with_input(j1) and prod.waves > 20,
                 timeout=180, job=j1)
    time.sleep(1.5)
    j1.kill()
    ctx.log("before-loss SIGKILLed after epoch %d; deleting %s" % (j1.last_epoch(), state))
    shutil.rmtree(state)
    j2 = acclib.Job(ctx, broker, state, sets=SETS + ["admin.enabled=true", "admin.port=0"],
                    interval_ms=300, tag="new-disk")
    got = ctx.wait_for("the restore from the changelog", lambda: restored(j2), timeout=180,
                       job=j2)
    ctx.check(got.get("records", 0) > 0,
              "the new process restored nothing from the changelog: %r" % got, j2)
    secs = got.get("seconds", 0) or 1e-9
    print(json.dumps({"bench": "changelog_restore", "records": got.get("records"),
                      "bytes": got.get("bytes"), "seconds": round(secs, 3),
                      "records_per_s": round(got.get("records", 0) / secs),
                      "mb_per_s": round(got.get("bytes", 0) / secs / 1e6, 1)}), flush=True)
    # The positions are taken when the group assigns the partitions, which may come after the
    # restore has finished: wait for it rather than look once.
    ctx.wait_for("input positions taken from the consumer group",
                 lambda: j2.msgs("input position taken from the consumer group"), timeout=120,
                 job=j2)
    ctx.wait_for("epochs with input after the restore", lambda: committed_with_input(j2),
                 timeout=120, job=j2)
    time.sleep(1)
    prod.stop()
    ctx.check(prod.error is None, "producing read events failed: %r" % prod.error)
    # Replays of events from before the loss: same event ids, to be dropped by the restored set.
    replay = prod.sent[: len(prod.sent) // 2: 7]
    acclib.kcat_produce(ctx, broker, "read-events", replay, tag="replay")
    ctx.log("replayed %d events from before the loss" % len(replay))
    acclib.wait_all_consumed(ctx, j2, broker, ev.valid, timeout=180)
    time.sleep(2)  # the replays come after the last counted event: let them be read too
    rc, hang = j2.terminate_or_report(60)
    ctx.check(not hang and rc == 0, "exit %s after SIGTERM %s" % (rc, hang or ""), j2)
    recs = acclib.read_outputs(ctx, broker, "interest-updates")
    ctx.log(acclib.check_interest_updates(ctx, recs, ev.counts))
    return state


def clean(ctx, broker, ev, state):
    """A clean restart reads nothing; one more event for a few users continues their versions."""
    few = sorted(ev.counts, key=lambda u: -ev.counts[u])[:3]
    j3 = acclib.Job(ctx, broker, state, sets=SETS, interval_ms=300, tag="clean-restart")
    got = ctx.wait_for("the restore at a clean restart", lambda: restored(j3), timeout=120,
                       job=j3)
    ctx.check(got.get("records") == 0,
              "a clean restart on the same directory restored %s records (expected 0)" %
              got.get("records"), j3)
    more = []
    for u in few:
        i = ev.n
        ev.n += 1
        v = {"user_id": u, "article_id": "art-x%d" % i, "session_id": "s-x%d" % i,
             "ts": 1700000000000 + i * 1000}
        more.append((u, json.dumps(v, separators=(",", ":"))))
        ev.counts[u] += 1
    acclib.kcat_produce(ctx, broker, "read-events", more, tag="more")
    acclib.wait_all_consumed(ctx, j3, broker, ev.valid, timeout=120)
    rc, hang = j3.terminate_or_report(60)
    ctx.check(not hang and rc == 0, "exit %s after SIGTERM %s" % (rc, hang or ""), j3)
    recs = acclib.read_outputs(ctx, broker, "interest-updates")
    ctx.log(acclib.check_interest_updates(ctx, recs, ev.counts))


def body(ctx):
    if acclib.broker_kind(ctx) != "kafka":
        ctx.fail("needs Apache Kafka: set NF_TEST_BROKER=kafka:HOST:PORT (ctest's kafka-real "
                 "tests do)")
    broker = acclib.start_broker(ctx, name="cl")
    ev = acclib.Events(users=30, prefix="c")
    state = lost_disk(ctx, broker, ev)
    clean(ctx, broker, ev, state)


if __name__ == "__main__":
    acclib.main("changelog", body)
