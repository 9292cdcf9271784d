"""The roll-forward rule on Apache Kafka (docs/ARCHITECTURE.md §4; src/state/epoch.h,
src/io/kafka.h): an interrupted epoch's records are invisible to read_committed consumers, and the
restarted job produces them again, exactly once; both ways of deciding what a pending epoch still
needs give the same outputs:
  offsets   the consumer group's committed offsets (every transaction commits them with
            "epoch=N;writer=TXID"): this epoch = committed, an earlier one = not committed;
  scan      NF_TEST_FORCE_SCAN=1: the outputs are read back (read_committed) and counted by
            their nf-writer / nf-epoch / nf-seq headers, as on the mock.

Per (point, method), on topics of its own:
  1. a first run commits a few epochs with input (so that the group has offsets of this writer)
     and stops on SIGTERM;
  2. SIZE events are produced, then a run with checkpoint.interval_ms=5000 dies (NF_FAULT) at
     POINT of its first epoch with records, which holds all of them on a quiet machine and
     fewer on a busy one (what it holds, n_e, is read back at the end: the checks hold for any
     share);
  3. before any restart the output topic is read both ways: read_committed must show none of the
     epoch's records unless POINT is after_commit (then all of them); read_uncommitted shows what
     reached the log (after_pending none, mid_produce some, before_commit and after_commit all);
  4. the restart must decide as the rule says (offsets: "not committed" / "committed"; scan:
     found 0 / all), produce what is missing, and log how long the roll-forward took;
  5. everything is checked exactly once (read_committed), and read_uncommitted must show the
     aborted copy beside the committed one.
One JSON line per case ({"bench":"recovery_rule",...}) carries the roll-forward time: perf/
runs this with larger --sizes to measure the read-back cost (perf/README.md).

Needs Apache Kafka (NF_TEST_BROKER=kafka:...): the mock shows aborted records and keeps no
transactional offsets, which is exactly what this checks.

Then two more cases: a pending epoch that is the first to take some input partitions, which the
group holds no offset for, is decided "not committed" by the offsets (case_first_touch); and the
state directory is put back from a copy taken an epoch earlier (a volume
snapshot restored under the job), so an epoch number comes twice; the second, left pending, must
not pass for committed, by the offsets' nonce nor by the records' nf-nonce in a scan
(case_restore). `--from-checkpoint` itself never numbers an epoch twice: it goes on after the
replaced state's epoch, which the case checks too.

Usage: python3 recovery_rule.py NEWSFLOW SRCDIR [--points P,P] [--methods offsets,scan]
                                [--sizes N,N] [--interval MS] [--no-restore]
  --interval MS   checkpoint.interval_ms of the run that dies (default 5000): long enough for
                  the job to take all SIZE events into that one epoch on a quiet machine
"""
import json
import os
import shutil
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recovery"))
import acclib  # noqa: E402

POINTS = ["after_pending", "mid_produce", "before_commit", "after_commit"]
METHODS = ["offsets", "scan"]
SIZES = [20000]


def epoch_records(ctx, broker, epoch, isolation):
    return sum(1 for k, h, v in acclib.read_outputs(ctx, broker, "interest-updates",
                                                     isolation=isolation)
               if h.get("nf-epoch") == str(epoch))


def case(ctx, point, method, size, interval_ms):
    name = "%s-%s-%d-%d" % (point, method, size, interval_ms)
    ctx.log("==== %s ====" % name)
    broker = acclib.start_broker(ctx, name=name)
    ev = acclib.Events(users=50, prefix="r")
    state = ctx.path("state-" + name)
    env = {"NF_TEST_FORCE_SCAN": "1"} if method == "scan" else {}

    acclib.kcat_produce(ctx, broker, "read-events", ev.make(100), tag=name + "-a")
    j1 = acclib.Job(ctx, broker, state, interval_ms=300, tag=name + "-1", env=env)
    acclib.wait_all_consumed(ctx, j1, broker, ev.valid)
    rc = j1.terminate(60)
    ctx.check(rc == 0, "first run: exit %s after SIGTERM" % rc, j1)
    first = j1.last_epoch() + 1

    acclib.kcat_produce(ctx, broker, "read-events", ev.make(size), tag=name + "-b")
    # "~1": the first epoch of run 2 that holds records. Its very first one may hold none when
    # the cut comes before the consumer's first fetch (a short interval on a busy machine).
    env2 = dict(env, NF_FAULT="%s:~1" % point)
    j2 = acclib.Job(ctx, broker, state, interval_ms=interval_ms, tag=name + "-2", env=env2)
    rc = j2.wait_exit(180, "the fault at %s of run 2's first epoch with records" % point)
    died = j2.msgs("fault injection: exiting as if killed")
    ctx.check(rc == 137 and died, "run 2 should have died at %s of its first epoch with records "
              "(exit %s)" % (point, rc), j2)
    e = died[0].get("epoch", 0)
    ctx.check(e >= first, "run 2 died in epoch %s, before its first (%d)" % (e, first), j2)
    # How many of the SIZE events epoch e took depends on how fast run 2 consumed them before
    # its first cut (all of them on a quiet machine, fewer under load): the epoch's own share,
    # n_e, is known once the restart has completed it (read_committed, below); until then the
    # checks hold for any share.
    logged = epoch_records(ctx, broker, e, "read_uncommitted")
    if point == "after_commit":
        # EndTxn returned before the kill, so the epoch is committed; the coordinator writes the
        # commit markers to the partitions after that, and a read_committed reader sees a
        # partition's records once its marker is in. Wait for them rather than look once.
        ctx.wait_for("the commit markers of epoch %d" % e,
                     lambda: epoch_records(ctx, broker, e, "read_committed") == logged,
                     timeout=30, interval=1.0)
    committed = epoch_records(ctx, broker, e, "read_committed")
    ctx.log("before the restart: epoch %d has %d interest-updates visible read_committed, %d in "
            "the log" % (e, committed, logged))
    if point == "after_commit":
        ctx.check(0 < committed == logged <= size,
                  "after_commit: the committed epoch %d should show all its records both ways "
                  "(read_committed %d, log %d, of %d events)" % (e, committed, logged, size))
    else:
        ctx.check(committed == 0, "%s: %d records of the interrupted epoch %d are visible to "
                  "read_committed readers" % (point, committed, e))
        hi = 0 if point == "after_pending" else size
        ctx.check(0 <= logged <= hi, "%s: the log holds %d records of epoch %d, expected 0..%d"
                  % (point, logged, e, hi))

    j3 = acclib.Job(ctx, broker, state, interval_ms=300, tag=name + "-3", env=env)
    ctx.wait_for("the roll-forward", lambda: j3.msgs("pending epoch rolled forward"),
                 timeout=300, job=j3)
    done = j3.msgs("pending epoch rolled forward")[0]
    found = [o for o in j3.msgs("pending epoch: its outputs counted in Kafka") if o.get("epoch") == e]
    outcome = j3.msgs("pending epoch: outcome from the committed offsets")
    ctx.check(done.get("epoch") == e and found, "run 3 rolled forward %r, found %r" %
              (done, found), j3)
    by, nfound, recs = found[0].get("by"), found[0].get("found"), found[0].get("records")
    want_found = recs if point == "after_commit" else 0
    ctx.check(by == ("scan" if method == "scan" else "offsets"),
              "the pending epoch was decided by %r, want %s (outcome logged: %r)" %
              (by, method, outcome), j3)
    ctx.check(nfound == want_found, "%s: the roll-forward found %s of %s records already "
              "committed, want %d" % (point, nfound, recs, want_found), j3)
    print(json.dumps({"bench": "recovery_rule", "point": point, "method": method,
                      "records": recs, "interest_updates": size, "found": nfound,
                      "in_log_before": logged, "rollforward_ms": done.get("ms")}), flush=True)
    ctx.log("roll-forward of epoch %d (%d records, %s): %.1f ms, found %d" %
            (e, recs, method, done.get("ms"), nfound))

    acclib.wait_all_consumed(ctx, j3, broker, ev.valid, timeout=300)
    rc, hang = j3.terminate_or_report(60)
    ctx.check(not hang and rc == 0, "exit %s after SIGTERM %s" % (rc, hang or ""), j3)
    recs_all = acclib.read_outputs(ctx, broker, "interest-updates")
    ctx.log(acclib.check_interest_updates(ctx, recs_all, ev.counts))
    # Every (user, version) is there exactly once, so epoch e's committed records are its whole
    # share of the events: what the pending record held, produced once.
    n_e = sum(1 for k, h, v in recs_all if h.get("nf-epoch") == str(e))
    # ~1 made it an epoch with records; most often some of the SIZE events', though a trending
    # window closing before the first fetch may be all it holds: n_e may then be 0.
    ctx.check(n_e <= size and recs > 0, "epoch %d holds %d interest-updates of %d records, want "
              "0..%d of at least 1" % (e, n_e, recs, size))
    if point == "before_commit":
        ctx.check(logged == n_e, "before_commit: the log held %d records of epoch %d before the "
                  "restart, want all %d of the epoch" % (logged, e, n_e))
    ctx.check(logged <= n_e, "%s: the log held %d records of epoch %d before the restart, more "
              "than the epoch's %d" % (point, logged, e, n_e))
    after = epoch_records(ctx, broker, e, "read_uncommitted")
    want_after = n_e if point == "after_commit" else logged + n_e
    ctx.check(after == want_after, "the log holds %d records of epoch %d, want %d (%s)" %
              (after, e, want_after, "the committed ones" if point == "after_commit" else
               "the aborted %d beside the %d produced again" % (logged, n_e)))
    ctx.log("epoch %d took %d of the %d events" % (e, n_e, size))


def case_restore(ctx, method):
    """A state directory put back from a copy of checkpoint L-1 (as a volume snapshot would be)
    numbers epochs again, so epoch L comes a second time while the group's offsets and the output
    topics still hold the first epoch L. The second one, left pending, must not pass for
    committed, neither by the offsets (their nonce) nor by a scan (the records' nf-nonce): its
    records, including the outputs of events the first epoch L never saw, are produced.
    `--from-checkpoint L-1` on the original state, by contrast, goes on after epoch L."""
    ctx.log("==== restore: the same epoch number twice (%s) ====" % method)
    broker = acclib.start_broker(ctx, name="restore-" + method)
    ev = acclib.Events(users=20, prefix="s")
    state = ctx.path("state-restore-" + method)
    acclib.kcat_produce(ctx, broker, "read-events", ev.make(100), tag="restore-a")
    j1 = acclib.Job(ctx, broker, state, interval_ms=300, tag="restore-1",
                    sets=["checkpoint.retain_every=1", "checkpoint.retain_count=50"])
    acclib.wait_all_consumed(ctx, j1, broker, ev.valid)
    ctx.check(j1.terminate(60) == 0, "first run: exit after SIGTERM", j1)
    final = j1.last_epoch()
    # L: the last epoch of the first run with records, so that the output topics hold records
    # of an epoch L that a scan must not take for the second epoch L's
    last = max([o["epoch"] for o in j1.msgs("epoch.committed") if o.get("records", 0) > 0] or
               [final])
    # --from-checkpoint never numbers an epoch twice: on a copy of the state, it goes on after
    # the replaced epoch. The copy is this job's (its identity: the same topics, group and
    # writer), so it dies at its first epoch's cut (NF_FAULT after_cut, before anything is
    # produced or committed): nothing it does reaches this case's topics.
    shutil.copytree(state, state + "-cli")
    jr = acclib.Job(ctx, broker, state + "-cli", interval_ms=300, tag="restore-cli-" + method,
                    args=["--from-checkpoint", str(last - 1)], env={"NF_FAULT": "after_cut:*"})
    jr.expect_exit = True
    ctx.wait_for("the restored run's start", lambda: jr.msgs("state restored"), timeout=120,
                 job=jr)
    jr.kill()
    got = jr.msgs("state restored")[0].get("epoch")
    ctx.check(got == final, "--from-checkpoint %d over a state at epoch %d: epochs go on from "
              "%r, want %d (never a number twice)" % (last - 1, final, got, final), jr)
    # a copy of checkpoint L-1 put in place of the state directory: epoch L comes again. The
    # start refuses a state behind the group (runbooks "Lost disk"); the operator's
    # --reset=earliest says to read on from it, which is what this case needs.
    snap = ctx.path("state-snapshot-" + method)
    os.makedirs(snap)
    shutil.copytree(os.path.join(state, "checkpoints", "chk-%012d" % (last - 1)),
                    os.path.join(snap, "db"))
    acclib.kcat_produce(ctx, broker, "read-events", ev.make(500), tag="restore-b")
    state = snap
    j2 = acclib.Job(ctx, broker, state, interval_ms=3000, tag="restore-2-" + method,
                    env={"NF_FAULT": "after_pending:%d" % last}, args=["--reset=earliest"])
    rc = j2.wait_exit(180, "the fault at after_pending of the second epoch %d" % last)
    ctx.check(rc == 137, "the restored run should have died at after_pending of epoch %d (exit "
              "%s)" % (last, rc), j2)
    j3 = acclib.Job(ctx, broker, state, interval_ms=300, tag="restore-3-" + method,
                    env={"NF_TEST_FORCE_SCAN": "1"} if method == "scan" else None,
                    args=["--reset=earliest"])
    ctx.wait_for("the roll-forward", lambda: j3.msgs("pending epoch rolled forward"),
                 timeout=300, job=j3)
    found = [o for o in j3.msgs("pending epoch: its outputs counted in Kafka") if o.get("epoch") == last]
    ctx.check(found and found[0].get("found") == 0 and found[0].get("records", 0) > 0,
              "the second epoch %d was pending with none of its records in Kafka, yet the "
              "roll-forward found %r (outcome: %r)" %
              (last, found, j3.msgs("pending epoch: outcome from the committed offsets")), j3)
    acclib.wait_all_consumed(ctx, j3, broker, ev.valid, timeout=300)
    ctx.check(j3.terminate(60) == 0, "exit after SIGTERM", j3)
    # A restore replays what followed the checkpoint (the same records again, ARCHITECTURE §4):
    # every (user, version) must be there; repeats of the replayed ones are expected.
    seen = {}
    for k, h, v in acclib.read_outputs(ctx, broker, "interest-updates"):
        seen.setdefault(v["user_id"], set()).add(v["version"])
    missing = [(u, n) for u, c in ev.counts.items() for n in range(1, c + 1)
               if n not in seen.get(u, ())]
    ctx.check(not missing, "%d (user, version) missing after the restore, e.g. %s" %
              (len(missing), missing[:6]))
    ctx.log("every (user, version) of %d events is in interest-updates" % ev.valid)


def case_first_touch(ctx):
    """The pending epoch is the first to take some input partitions: the group holds no offset
    for them at all. Beside a partition committed at an earlier epoch of this writer (which shows
    the broker keeps transactional offsets), that decides "not committed" from the offsets alone:
    a committed epoch would have given every one of its partitions its offset. Run 1 reads
    partition 0 only; run 2 dies at after_pending of its first epoch with records, which are all
    on partitions 1..3 (every reader's events stay on one partition, for the versions' order)."""
    ctx.log("==== first touch: partitions the group holds no offset for ====")
    broker = acclib.start_broker(ctx, name="first-touch")
    state = ctx.path("state-first-touch")
    ev1, ev2 = acclib.Events(users=20, prefix="p0-"), acclib.Events(users=30, prefix="pn-")
    acclib.kcat_produce(ctx, broker, "read-events", ev1.make(100), tag="ft-a", partition=0)
    j1 = acclib.Job(ctx, broker, state, interval_ms=300, tag="first-touch-1")
    acclib.wait_all_consumed(ctx, j1, broker, ev1.valid)
    ctx.check(j1.terminate(60) == 0, "first run: exit after SIGTERM", j1)
    by_part = {}
    for k, v in ev2.make(600):
        by_part.setdefault(1 + ev2.users.index(k) % 3, []).append((k, v))
    for part, lines in sorted(by_part.items()):
        acclib.kcat_produce(ctx, broker, "read-events", lines, tag="ft-b%d" % part,
                            partition=part)
    j2 = acclib.Job(ctx, broker, state, interval_ms=2000, tag="first-touch-2",
                    env={"NF_FAULT": "after_pending:~1"})
    rc = j2.wait_exit(180, "the fault at after_pending of run 2's first epoch with records")
    died = j2.msgs("fault injection: exiting as if killed")
    ctx.check(rc == 137 and died, "run 2 should have died at after_pending (exit %s)" % rc, j2)
    e = died[0].get("epoch")
    j3 = acclib.Job(ctx, broker, state, interval_ms=300, tag="first-touch-3")
    ctx.wait_for("the roll-forward", lambda: j3.msgs("pending epoch rolled forward"),
                 timeout=300, job=j3)
    outcome = j3.msgs("pending epoch: outcome from the committed offsets")
    ctx.check(outcome and outcome[0].get("epoch") == e and
              outcome[0].get("outcome") == "not committed" and "never" in outcome[0].get("why", ""),
              "epoch %s: the offsets should say not committed (partitions never committed beside "
              "one committed earlier); logged %r" % (e, outcome), j3)
    counts = dict(ev1.counts, **ev2.counts)
    acclib.wait_all_consumed(ctx, j3, broker, ev1.valid + ev2.valid, timeout=300)
    rc, hang = j3.terminate_or_report(60)
    ctx.check(not hang and rc == 0, "exit %s after SIGTERM %s" % (rc, hang or ""), j3)
    recs = acclib.read_outputs(ctx, broker, "interest-updates")
    ctx.log(acclib.check_interest_updates(ctx, recs, counts))
    ctx.log("epoch %s decided by the offsets: %s" % (e, outcome[0].get("why")))


def body(ctx):
    if acclib.broker_kind(ctx) != "kafka":
        ctx.fail("needs Apache Kafka: set NF_TEST_BROKER=kafka:HOST:PORT (ctest's kafka-real "
                 "tests do)")
    opts = {"points": POINTS, "methods": METHODS, "sizes": SIZES, "interval": [5000]}
    args = sys.argv[3:]
    while args:
        k = args.pop(0)
        if k == "--no-restore":
            continue
        if k.startswith("--") and k[2:] in opts and args:
            v = args.pop(0).split(",")
            opts[k[2:]] = [int(x) for x in v] if k in ("--sizes", "--interval") else v
        else:
            ctx.fail("unknown argument %r (--points, --methods, --sizes, --interval)" % k)
    if "--no-restore" not in sys.argv:
        for method in opts["methods"]:
            case_restore(ctx, method)
    if len(sys.argv) == 3:
        case_first_touch(ctx)
    for size in opts["sizes"]:
        for point in opts["points"]:
            for method in opts["methods"]:
                case(ctx, point, method, size, opts["interval"][0])
    if len(sys.argv) == 3:
        # An epoch that takes only a share of the events (its cut comes before the job has
        # consumed them all, as on a busy machine): what the pending record holds is what the
        # roll-forward produces, whatever the share.
        case(ctx, "before_commit", "offsets", SIZES[0], 1500)


if __name__ == "__main__":
    acclib.main("recovery_rule", body)
