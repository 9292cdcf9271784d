"""A restore racing the previous owner's last commit, on Apache Kafka (src/state/epoch.c
nf_epoch_assign_cb; found by the hour-long chaos run, seed 162754619, perf/README.md "Chaos").

A process that is cut off (or stopped) after it produced an epoch and sent its offsets, but
before its EndTxn, loses its group membership; another process is given its partitions and
restores their state from the changelog while that transaction is still open. If the
restore stops short of the open transaction (at the last stable offset) and the group's offsets
are read after the transaction commits, the new owner counts the epoch's input as consumed
without its state updates: the readers' next interest updates repeat versions and skip others.

Two processes A and B of one job (kafka.assignment=group, state.changelog=true, session 10 s,
transaction timeout 40 s), read events arriving:
  1. B runs alone, then A joins and is given read-events partitions;
  2. before its 10th commit of an epoch with input (E), A stalls between its produce (its
     offsets sent) and its commit (NF_FAULT=before_commit_input:+10:until=...) and is frozen
     there (SIGSTOP);
  3. once A's session expires B is assigned A's partitions, reads the group's offsets and
     restores them, then stalls (NF_FAULT=assign_restored:+2:until=...);
  4. A is resumed and let commit E; it exits 1 (fenced, or at its next commit: it lost its
     partitions);
  5. B goes on, consumes everything, stops on SIGTERM (exit 0).
Checked: A never commits E (B's stable offsets waited for the broker to abort it: B read the
changelog after E was decided); every (user, version) of interest-updates exactly once over
1..n; every undecodable record one dead letter. Without the fix (the restore first, to the last
stable offset, then the group's offsets) A commits E after B's restore, B's offsets count E's
input without its state updates, and the interest check fails.

Needs Apache Kafka (NF_TEST_BROKER=kafka:...).

Usage: python3 restore_race.py NEWSFLOW SRCDIR
"""
import os
import signal
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recovery"))
import acclib  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale_out import group_setup  # noqa: E402

FAULT_NTH = 10  # A stalls before its 10th commit of an epoch with input positions
# longer than A stays frozen before B stalls (a session timeout and a rebalance), so that
# without the fix A's transaction is still open when A is resumed
TXN_TIMEOUT_MS = 40000


def body(ctx):
    broker, cfg = group_setup(ctx, "rr", 4, txn_timeout_ms=TXN_TIMEOUT_MS)
    ev = acclib.Events(users=30, prefix="rr")
    prod = acclib.Producer(ctx, broker, ev, per_wave=30, pause=0.1, bad_every=7)
    prod.start()
    go_a, go_b = ctx.path("go-a"), ctx.path("go-b")
    sets = ["state.changelog=true", "kafka.assignment=group", "scale.standby_replicas=0"]

    def job(name, env=None):
        return acclib.Job(ctx, broker, ctx.path("state-" + name), sets=sets, args=["--config", cfg],
                          interval_ms=300, txid_suffix="-" + name, tag=name, env=env)

    # B's second assignment with partitions to restore (its first is every partition, at its
    # start alone) is A's: B stalls right after that restore
    b = job("b", {"NF_FAULT": "assign_restored:+2:until=%s" % go_b})
    ctx.wait_for("B to commit input", lambda: b.last_epoch() >= 3, timeout=180, job=b)
    # A's epoch numbers continue after the group's: its Nth commit with input, so once it owns
    # partitions
    a = job("a", {"NF_FAULT": "before_commit_input:+%d:until=%s" % (FAULT_NTH, go_a)})
    ctx.wait_for("A to stall before its commit #%d" % FAULT_NTH,
                 lambda: a.msgs("fault injection: stalling"), timeout=300, interval=0.05, job=a)
    fault_epoch = a.msgs("fault injection: stalling")[0].get("epoch")
    os.kill(a.pid, signal.SIGSTOP)
    ctx.log("A frozen between its produce and its commit of epoch %d" % fault_epoch)

    # with the group's offsets read first, B waits for the broker to abort A's transaction
    ctx.wait_for("B to take A's partitions and restore them", lambda: b.msgs(
        "fault injection: stalling"), timeout=TXN_TIMEOUT_MS / 1000 + 180, interval=0.05, job=b)
    os.kill(a.pid, signal.SIGCONT)
    open(go_a, "w").close()
    ctx.log("B restored A's partitions; A resumed and let commit epoch %d" % fault_epoch)
    rc = a.wait_exit(180, "A's exit after it lost its partitions")
    ctx.check(rc == 1, "A exited %s after it lost its partitions, want 1" % rc, a)
    ctx.check(a.last_epoch() < fault_epoch,
              "A committed epoch %d after B had restored its partitions: B read the group's "
              "offsets before that epoch was decided" % fault_epoch, a)
    ctx.log("A exited 1 without committing epoch %d" % fault_epoch)
    open(go_b, "w").close()

    acclib.drain_and_check(ctx, prod, b, broker, ev, what="B")


if __name__ == "__main__":
    acclib.main("restore_race", body)
