"""Pending-epoch recovery (docs/ARCHITECTURE.md §4, src/state/epoch.h): the job is made to die
(NF_FAULT, _exit(137)) at each commit fault point of one epoch E while read events keep arriving,
then restarted; the restart must roll the pending record forward producing exactly what was missing,
and interest-updates must end up holding every (user, version) exactly once.

  after_pending  pending record durable, nothing produced   -> rolled forward, found = 0, R > 0
  after_commit   transaction committed, not applied         -> rolled forward, found = R
  mid_apply      committed and applied, the mark not written  -> rolled forward, found = R
  mid_produce    part of the outputs sent, txn left open     -> rolled forward
                 mock: 0 <= found <= R (a small epoch: in practice found = 0, nothing left
                 librdkafka's queue); real broker: found = 0 (see below)
  mid_produce_burst  the same in a 20000-record epoch: on the mock often 0 < found < R
  before_commit  every output flushed, txn left open         -> rolled forward
                 mock: found = what kcat saw (the mock shows the open transaction's records:
                 in practice R); real broker: found = 0 (see below)
  after_pending_busy after_pending while a slowed reads actor works through a 20000-event backlog
                 (epochs 4, 5 and 6; on a real broker, whose first records come later, 5, 6, 7)

After every restart: the read-events offsets it resumes from must cover exactly the events whose
outputs are in the log for epochs <= E.
  after_apply    applied, before the named checkpoint        -> clean restart (no pending record)
  mid_checkpoint applied, named checkpoint not taken         -> clean restart, checkpoints verify

Broker (NF_TEST_BROKER, see acclib.py): each scenario attempt runs in a fresh mock cluster, or on
a real Kafka broker under a fresh topic prefix. On a real broker the open transaction a
mid_produce / before_commit death leaves is aborted by the restarted producer's
init_transactions, and aborted records are invisible to read_committed readers (the recovery
scan, kcat): the roll forward finds none of the epoch's records (found = 0) and produces all R
again. That is checked there with read_uncommitted reads as well: the records of E the log held
before the restart (every one of them for before_commit; for mid_produce often none, as the
process dies before librdkafka has registered the partitions with the transaction, sometimes
part of a burst) are still in the log after it, next to the R committed ones, and
read_committed shows exactly the R.

Usage: python3 acc_pending_recovery.py NEWSFLOW SRCDIR [point ...]
"""
import os
import sys
import threading
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import acclib  # noqa: E402

FAULT_EPOCH = 12      # epochs tick every 200 ms; events arrive continuously from before start
RETAIN_EVERY = 4      # FAULT_EPOCH % RETAIN_EVERY == 0: mid_checkpoint fires at E
POINTS = ["after_pending", "after_commit", "mid_apply", "mid_produce", "mid_produce_burst",
          "before_commit", "after_apply", "mid_checkpoint", "after_pending_busy"]
# the points that leave the epoch's transaction open (on a real broker: aborted on restart)
OPEN_TXN = ("mid_produce", "before_commit")
ROLLED_FORWARD = ("after_pending", "after_commit", "mid_apply") + OPEN_TXN
# mid_produce_burst: 20000 events wait in read-events before the job starts, so that the first
# epoch with input (epoch 3 on a quiet machine: the consumer's first fetch lands there; the fault
# is armed for the first epoch that produces) is large and the producer has sent part of it when
# the process dies half-way through the epoch's records.
BURST_EPOCH, BURST_EVENTS = 3, 20000
# after_pending_busy: the same 20000-event backlog worked through by a slowed reads actor
# (NF_TEST_SLOW_READS_US) so that the shards are consuming at every cut of the first epochs, and
# the process dies right after epoch BUSY_EPOCH's pending record was written. The pending
# record's input offsets must cover exactly the inputs whose outputs and state it holds.
# The window (between the cut's resume and the read of the offsets) is short: three epochs are
# tried, each in a fresh cluster (a fresh topic prefix on a real broker).
# The fault is armed with "~N" (the Nth epoch with records: the consumer's first fetch lands in
# epoch 3 to 6 and later on a busy machine), for N = 2, 3, 4: epochs during which the slowed
# reads are still working through the backlog.
BUSY_EPOCHS, BUSY_SLOW_US = (2, 3, 4), 40
BUSY_EPOCHS_KAFKA = BUSY_EPOCHS
ATTEMPTS, ATTEMPTS_KAFKA = 3, 6


class Producer(threading.Thread):
    """Produces small waves of events until stopped, so that every epoch around E has input."""

    def __init__(self, ctx, broker, ev, chunk=25, pause=0.04):
        super().__init__(daemon=True)
        self.ctx, self.broker, self.ev = ctx, broker, ev
        self.chunk, self.pause = chunk, pause
        self.stop_flag = threading.Event()
        self.error = None
        self.lock = threading.Lock()

    def run(self):
        try:
            while not self.stop_flag.is_set():
                with self.lock:
                    lines = self.ev.make(self.chunk)
                acclib.kcat_produce(self.ctx, self.broker, "read-events", lines, tag="bg")
                time.sleep(self.pause)
        except BaseException as e:  # reported by stop()
            self.error = e

    def stop(self):
        self.stop_flag.set()
        self.join(60)
        if self.error:
            raise self.error


def epoch_records_in_kafka(ctx, broker, epoch, writer, isolation="read_committed"):
    # trending windows are in the epochs too
    recs = acclib.read_all_outputs(ctx, broker, isolation=isolation)
    return sum(1 for _, h, _ in recs
               if h.get("nf-writer") == writer and h.get("nf-epoch") == str(epoch))


class Retry(Exception):
    pass


def scenario(ctx, point, epoch=None):
    attempts = ATTEMPTS_KAFKA if acclib.broker_kind(ctx) == "kafka" else ATTEMPTS
    for attempt in range(1, attempts + 1):
        try:
            return scenario_attempt(ctx, point, attempt, epoch)
        except Retry as e:
            ctx.log("%s: attempt %d inconclusive (%s); again with a fresh cluster / prefix" %
                    (point, attempt, e))
    ctx.fail("%s: the fault epoch never carried records in %d attempts: the scenario cannot be "
             "set up" % (point, attempts))


def scenario_attempt(ctx, tname, attempt, epoch=None):
    point = {"mid_produce_burst": "mid_produce", "after_pending_busy": "after_pending"}.get(
        tname, tname)
    FAULT_EPOCH = epoch or {"mid_produce_burst": BURST_EPOCH}.get(tname, globals()["FAULT_EPOCH"])
    backlog = tname in ("mid_produce_burst", "after_pending_busy")
    ctx.log("==== scenario %s:%d (attempt %d) ====" % (tname, FAULT_EPOCH, attempt))
    B = acclib.start_broker(ctx, name="%s-e%d-%d" % (tname, FAULT_EPOCH, attempt), partitions=4)
    state = ctx.path("state-%s-e%d-%d" % (tname, FAULT_EPOCH, attempt))
    # fetch.wait.max.ms: the mock answers an empty fetch only after the wait (500 ms by
    # default), which would leave 2 of every 3 epochs empty; with 10 ms every epoch has input.
    # state.ingest_min_bytes=4096: an epoch's larger kinds go in as table files, its smaller
    # ones through the memtable, as both would in a busier job
    sets = ["runtime.shards=2",
            "checkpoint.retain_every=%d" % RETAIN_EVERY, "checkpoint.retain_count=20",
            "kafka.properties=fetch.wait.max.ms=10", "state.ingest_min_bytes=4096"]
    if B.kind == "mock":
        # on a real broker Broker.job_sets names the transactional id (under the prefix)
        sets.insert(0, "kafka.transactional_id=acc-pending-%s-e%d" % (tname, FAULT_EPOCH))
    ev = acclib.Events(users=40)
    acclib.kcat_produce(ctx, B, "read-events",
                        ev.make(BURST_EVENTS if backlog else 300), tag="pre")
    prod = Producer(ctx, B, ev)
    prod.start()

    # ---- run 1: dies at the fault point of epoch E
    # The burst's first epoch with input is whichever the consumer's first fetch lands in (epoch
    # 3 on a quiet machine, later on a busy one): "*" is the point's first time, and
    # mid_produce is reached only by an epoch with outputs. Its number comes from the log.
    # after_pending_busy: "~N", the Nth epoch with records (the backlog still being worked
    # through by the slowed reads), whatever its number.
    star = tname in ("mid_produce_burst", "after_pending_busy")
    spec = {"mid_produce_burst": "*", "after_pending_busy": "~%d" % FAULT_EPOCH}.get(tname)
    env1 = {"NF_FAULT": "%s:%s" % (point, spec or FAULT_EPOCH)}
    if tname == "after_pending_busy":
        env1["NF_TEST_SLOW_READS_US"] = str(BUSY_SLOW_US)
    j1 = acclib.Job(ctx, B, state, sets=sets, env=env1,
                    tag="%s-e%d-run1-%d" % (tname, FAULT_EPOCH, attempt))
    writer = j1.txid  # the nf-writer header of the job's records

    def died_or_passed():
        if not j1.alive():
            return "exited"
        if not star and any(o.get("epoch", 0) > FAULT_EPOCH for o in j1.msgs("epoch.committed")):
            return "passed"  # mid_produce fires only in an epoch with outputs
        return None
    j1.expect_exit = True
    how = ctx.wait_for("the NF_FAULT exit at %s:%d" % (point, FAULT_EPOCH), died_or_passed,
                       timeout=90, job=j1)
    prod.stop()
    if how == "passed":
        j1.kill()
        B.stop()
        if point != "mid_produce":
            ctx.fail("%s: the job went past epoch %d without the fault firing" %
                     (point, FAULT_EPOCH), j1)
        raise Retry("epoch %d had no outputs, so mid_produce could not fire" % FAULT_EPOCH)
    rc = j1.proc.returncode
    ctx.check(rc == 137, "%s: run 1 exited %s, want 137 (fault injection)" % (point, rc), j1)
    fired = j1.msgs("fault injection: exiting as if killed")
    if star and fired:
        FAULT_EPOCH = fired[-1].get("epoch")
    ctx.check(fired and fired[-1].get("point") == point and fired[-1].get("epoch") == FAULT_EPOCH,
              "%s: run 1 did not log the fault injection at %s:%d (got %r)" %
              (point, point, FAULT_EPOCH, fired), j1)
    before = j1.committed_records()
    ctx.log("run 1: died at %s:%d; %d outputs committed before (last logged epoch %d); "
            "%d events produced so far" % (point, FAULT_EPOCH, before, j1.last_epoch(), ev.valid))
    # read_committed; on a real broker an open transaction (mid_produce, before_commit) hides
    # its records and everything after it until the restart aborts it
    in_kafka = epoch_records_in_kafka(ctx, B, FAULT_EPOCH, writer)
    if point in ("after_commit", "mid_apply") and B.kind == "kafka":
        # The commit was acknowledged, but the broker writes its markers into the partitions
        # just after: read_committed shows the records once they are there. Read until two
        # reads half a second apart agree on a number above 0.
        seen = [in_kafka]

        def settled():
            time.sleep(0.5)
            seen.append(epoch_records_in_kafka(ctx, B, FAULT_EPOCH, writer))
            return seen[-1] > 0 and seen[-1] == seen[-2]

        ctx.wait_for("epoch %d's committed records visible in Kafka" % FAULT_EPOCH, settled,
                     timeout=60, interval=0)
        in_kafka = seen[-1]
    ctx.log("records of epoch %d in Kafka before the restart: %d" % (FAULT_EPOCH, in_kafka))
    u_before = None
    if B.kind == "kafka" and point in OPEN_TXN:
        # what the dead producer really wrote into the log (its transaction still open)
        u_before = epoch_records_in_kafka(ctx, B, FAULT_EPOCH, writer,
                                          isolation="read_uncommitted")
        ctx.log("records of epoch %d in the log before the restart (read_uncommitted, the "
                "transaction still open): %d" % (FAULT_EPOCH, u_before))
    if point == "after_pending":
        ctx.check(in_kafka == 0, "after_pending: %d records of epoch %d reached Kafka before the "
                  "restart, want 0 (the fault is before the produce)" % (in_kafka, FAULT_EPOCH))

    # more input after the crash: the restarted job must move on from E
    acclib.kcat_produce(ctx, B, "read-events", ev.make(400), tag="post")

    # ---- run 2: recovery
    j2 = acclib.Job(ctx, B, state, sets=sets, tag="%s-e%d-run2-%d" % (tname, FAULT_EPOCH, attempt))
    ctx.wait_for("'newsflow started' after the restart", lambda: j2.msgs("newsflow started"),
                 timeout=60, job=j2)
    pend = j2.msgs("pending epoch found at start: rolling it forward")
    scans = j2.msgs("pending epoch: its outputs counted in Kafka")
    restored = j2.msgs("state restored")
    ctx.check(restored, "%s: no 'state restored' line after the restart" % point, j2)
    if point in ROLLED_FORWARD:
        ctx.check(len(pend) == 1 and pend[0].get("epoch") == FAULT_EPOCH,
                  "%s: want exactly one 'pending epoch found at start: rolling it forward' for "
                  "epoch %d, got %r" % (point, FAULT_EPOCH, pend), j2)
        R = pend[0].get("records")
        if R == 0:
            j2.kill()
            B.stop()
            raise Retry("epoch %d had no records" % FAULT_EPOCH)
        ctx.check(isinstance(R, int) and R > 0,
                  "%s: the pending epoch %d has records=%r, want > 0 (events were arriving)" %
                  (point, FAULT_EPOCH, R), j2)
        ctx.check(scans and scans[-1].get("epoch") == FAULT_EPOCH,
                  "%s: no 'pending epoch: its outputs counted in Kafka' for epoch %d after rolling forward "
                  "(got %r)" % (point, FAULT_EPOCH, scans), j2)
        found, srec = scans[-1].get("found"), scans[-1].get("records")
        ctx.check(srec == R, "%s: scan says records=%r, pending record says %r" % (point, srec, R),
                  j2)
        ctx.log("restart rolled epoch %d forward: records=%d found=%d (scan before restart saw "
                "%d)" % (FAULT_EPOCH, R, found, in_kafka))
        if point == "after_pending":
            ctx.check(found == 0, "after_pending: found=%r, want 0 (nothing was produced)" % found,
                      j2)
        elif point in ("after_commit", "mid_apply"):
            ctx.check(found == R, "%s: found=%r, want found == records == %d (the "
                      "transaction had committed: producing again would duplicate)"
                      % (point, found, R), j2)
            ctx.check(in_kafka == R, "%s: %d records of epoch %d in Kafka before the "
                      "restart, want all %d" % (point, in_kafka, FAULT_EPOCH, R))
        elif B.kind == "kafka":
            # mid_produce / before_commit on a real broker: the restarted producer's
            # init_transactions aborted the open transaction and read_committed hides aborted
            # records, so the scan finds none and the roll forward produces all R again (the
            # mock, which shows them, finds what was sent: the branch below)
            ctx.check(found == 0, "%s on a real broker: found=%r, want 0 (the open transaction "
                      "was aborted on restart: its records are invisible to read_committed)" %
                      (tname, found), j2)
            ctx.check(in_kafka == 0, "%s on a real broker: kcat (read_committed) saw %d records of "
                      "epoch %d before the restart, want 0 (the transaction was open)" %
                      (tname, in_kafka, FAULT_EPOCH), j2)
            ctx.check(0 <= u_before <= R, "%s: %d records of epoch %d in the log before the "
                      "restart, more than the epoch's %d" % (tname, u_before, FAULT_EPOCH, R), j2)
            if point == "before_commit":
                ctx.check(u_before == R, "before_commit on a real broker: %d records of epoch %d "
                          "in the log (read_uncommitted) before the restart, want all %d (they "
                          "were flushed before the commit point)" % (u_before, FAULT_EPOCH, R), j2)
            ctx.log("%s: found=0 of %d: the open transaction (%d of its records in the log) was "
                    "aborted, the roll forward produced all %d again" % (tname, R, u_before, R))
        else:
            ctx.check(isinstance(found, int) and 0 <= found <= R,
                      "%s: found=%r not within [0, %d]" % (point, found, R), j2)
            ctx.check(found == in_kafka, "%s: the recovery scan found %d records of epoch "
                      "%d, kcat saw %d before the restart" % (point, found, FAULT_EPOCH, in_kafka),
                      j2)
            ctx.log("%s: %s" % (tname, "partial epoch in Kafka (0 < found < records): the roll "
                                "forward produced only the missing %d" % (R - found)
                                if 0 < found < R else
                                "found=%d of %d (%s)" % (found, R, "the process died before "
                                                         "librdkafka sent any of the epoch's "
                                                         "records" if found == 0 else
                                                         "the mock shows the open transaction's "
                                                         "records: nothing produced again")))
        ctx.check(restored[-1].get("epoch") == FAULT_EPOCH,
                  "%s: state restored at epoch %r, want %d" %
                  (point, restored[-1].get("epoch"), FAULT_EPOCH), j2)
    else:
        ctx.check(not pend, "%s: restart found a pending record (%r); the epoch had been applied" %
                  (point, pend), j2)
        ctx.check(not scans, "%s: restart scanned Kafka for epoch outputs (%r); nothing was "
                  "pending" % (point, scans), j2)
        ctx.check(restored[-1].get("epoch") == FAULT_EPOCH,
                  "%s: state restored at epoch %r, want %d (the applied epoch)" %
                  (point, restored[-1].get("epoch"), FAULT_EPOCH), j2)
        ctx.log("clean restart at epoch %d" % FAULT_EPOCH)

    # Invariant of a committed epoch (ARCHITECTURE §4: state, outputs and input positions move
    # together): the input positions the restarted job resumes from cover exactly the events
    # whose outputs are in the log for epochs <= E (every event here is valid: one output each).
    def assigned_now():
        return {o["partition"]: o["offset"] for o in j2.msgs("partition assigned")
                if o.get("topic") == B.topic("read-events")}
    # logged by the consumer once the coordinator has started, after "newsflow started"
    assigned = ctx.wait_for("the 4 read-events partitions assigned after the restart",
                            lambda: (lambda a: a if len(a) == 4 else None)(assigned_now()),
                            timeout=60, job=j2)
    covered = sum(v for v in assigned.values() if v > 0)

    def outputs_upto_e():
        return sum(1 for _, h, _ in acclib.read_outputs(ctx, B, "interest-updates")
                   if h.get("nf-writer") == writer and int(h.get("nf-epoch", 0)) <= FAULT_EPOCH)
    # Read until the count reaches what the offsets cover (or 60 s pass): on Apache Kafka a
    # commit returns once the coordinator has logged its decision, and the markers that make
    # the records visible to read_committed readers follow; a read right after the roll
    # forward saw 1536 of its 2304 records once (the CI's suite, three tests at a time). More
    # than covered fails at once; fewer, after the wait, is a loss.
    deadline = time.monotonic() + 60
    upto_e = outputs_upto_e()
    while upto_e < covered and time.monotonic() < deadline:
        time.sleep(1.0)
        upto_e = outputs_upto_e()
    ctx.log("restart resumes read-events at %s: %d events covered; %d outputs of epochs <= %d "
            "in the log" % (assigned, covered, upto_e, FAULT_EPOCH))
    ctx.check(covered == upto_e,
              "%s: epoch %d's committed input offsets %r cover %d events, but the log holds %d "
              "outputs of epochs <= %d: %d events %s (offsets collected for the epoch do not "
              "match its state and outputs)" %
              (tname, FAULT_EPOCH, assigned, covered, upto_e, FAULT_EPOCH, abs(covered - upto_e),
               "are skipped by the restart and LOST" if covered > upto_e else
               "will be processed twice"), j2)

    acclib.wait_all_consumed(ctx, j2, B, ev.valid, timeout=120)
    if point == "mid_checkpoint":
        # the restarted job must reach the next named checkpoint's epoch before it stops (real
        # brokers commit slower: the events can all be out a few epochs before it)
        ctx.wait_for("a named checkpoint after epoch %d" % FAULT_EPOCH,
                     lambda: [o for o in j2.msgs("checkpoint.created")
                              if o.get("epoch", 0) > FAULT_EPOCH], timeout=120, job=j2)
    # one more epoch past the last output, then SIGTERM (final epoch, exit 0)
    rc = j2.terminate()
    ctx.check(rc == 0, "%s: run 2 exited %s after SIGTERM, want 0" % (point, rc), j2)
    ctx.check(not j2.msgs_matching("commit failed|cannot recover"),
              "%s: run 2 logged commit failures: %r" %
              (point, j2.msgs_matching("commit failed|cannot recover")[:3]), j2)

    recs = acclib.read_outputs(ctx, B, "interest-updates")
    ctx.log(acclib.check_interest_updates(ctx, recs, ev.counts))
    if point in ROLLED_FORWARD:
        # the roll forward wrote the missing records under the same writer and epoch: epoch E
        # now has exactly R records in the log (read_committed), with seqs 0..R-1
        seqs = sorted(int(h["nf-seq"]) for _, h, _ in acclib.read_all_outputs(ctx, B)
                      if h.get("nf-writer") == writer and h.get("nf-epoch") == str(FAULT_EPOCH))
        ctx.check(seqs == list(range(R)), "%s: epoch %d has %d records in the log (seqs %s...), "
                  "want exactly seqs 0..%d" % (point, FAULT_EPOCH, len(seqs), seqs[:5], R - 1))
        ctx.log("epoch %d holds exactly its %d records (seqs 0..%d) after the roll forward" %
                (FAULT_EPOCH, R, R - 1))
        if u_before is not None:
            # a real broker: the aborted records are still in the log, hidden from
            # read_committed (the records were produced, then aborted, not lost)
            u_after = epoch_records_in_kafka(ctx, B, FAULT_EPOCH, writer,
                                             isolation="read_uncommitted")
            ctx.check(u_after == R + u_before, "%s: the log holds %d records of epoch %d "
                      "(read_uncommitted) after the roll forward, want the %d committed plus "
                      "the %d aborted ones" % (tname, u_after, FAULT_EPOCH, R, u_before))
            ctx.log("read_uncommitted: epoch %d has %d records in the log, %d of them aborted "
                    "and hidden from read_committed" % (FAULT_EPOCH, u_after, u_before))
    dl = acclib.count_topic(ctx, B, "dead-letters")
    ctx.check(dl == 0, "%s: %d dead-letters for valid input" % (point, dl))

    if point == "mid_checkpoint":
        chk = "chk-%012d" % FAULT_EPOCH
        out = acclib.run_cli(ctx, ["checkpoints", "list", "--state-dir", state])
        ctx.log("checkpoints list after mid_checkpoint:\n" + out.rstrip())
        ctx.check(chk not in out, "mid_checkpoint: %s exists although the process died before "
                  "taking it" % chk)
        ids = [w for w in out.split() if w.startswith("chk-")]
        later = [i for i in ids if int(i[4:]) > FAULT_EPOCH]
        ctx.check(later, "mid_checkpoint: no named checkpoint after epoch %d was taken by the "
                  "restarted job (list: %r)" % (FAULT_EPOCH, ids))
        for i in ids:
            acclib.run_cli(ctx, ["checkpoints", "verify", i, "--state-dir", state])
        leftovers = [n for n in os.listdir(os.path.join(state, "checkpoints"))
                     if not n.startswith("chk-") or not n[4:].isdigit()]
        ctx.check(not leftovers, "mid_checkpoint: leftovers in checkpoints/: %r" % leftovers)
        ctx.log("checkpoints verify ok: %s" % " ".join(ids))
    B.stop()
    ctx.log("scenario %s: ok" % tname)


def body(ctx):
    points = sys.argv[3:] or POINTS
    for p in points:
        if p not in POINTS:
            ctx.fail("unknown fault point %s" % p)
        if p == "after_pending_busy":
            for e in (BUSY_EPOCHS_KAFKA if acclib.broker_kind(ctx) == "kafka" else BUSY_EPOCHS):
                scenario(ctx, p, e)
        else:
            scenario(ctx, p)


if __name__ == "__main__":
    acclib.main("pending_recovery", body)
