"""Restoring an older named checkpoint (docs/ARCHITECTURE.md §4, src/state/store.h): the job runs
with a named checkpoint every 2 epochs while two waves of read events arrive; after wave 1 is
committed and a checkpoint C covering exactly wave 1 exists, wave 2 follows; SIGTERM (exit 0). Then
`checkpoints list / show / verify`, and `run --from-checkpoint C`, which must roll state and input
positions back to C: the job re-consumes from C's offsets, and for every user the first version
emitted after the restore is count_at_C + 1, the last is the user's total, each exactly once, and
the replayed records equal the originals (deterministic). The old database is kept as
db.replaced-*. Then the same for a checkpoint taken while wave 2 was being consumed (run 1's
reads actor is slowed so that there are some), restored in a copy of the state directory: its
state must match its input offsets too.

Broker (NF_TEST_BROKER, see acclib.py): a mock cluster of the test's own, or a real Kafka broker
under a topic prefix of its own; the same checks on both (on a real broker the output offsets
also count transaction markers, which only identify records here).

Usage: python3 acc_restore_checkpoint.py NEWSFLOW SRCDIR
"""
import json
import os
import re
import shutil
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import acclib  # noqa: E402

WAVE1, WAVE2 = 3000, 16000
# Run 1's reads actor is slowed (NF_TEST_SLOW_READS_US) so that wave 2 takes several epochs and
# some named checkpoints are taken while it is being consumed.
SLOW_US = 100


def manifest(ctx, state, cid):
    text = acclib.run_cli(ctx, ["checkpoints", "show", cid, "--state-dir", state])
    try:
        return json.loads(text)
    except ValueError:
        ctx.fail("checkpoints show %s did not print JSON: %r" % (cid, text[:300]))


def list_ids(ctx, state):
    out = acclib.run_cli(ctx, ["checkpoints", "list", "--state-dir", state])
    return [w for w in out.split() if w.startswith("chk-")], out


def offsets_of(m):
    return {int(p): int(o) for p, o in m["header"]["offsets"]["read-events"].items()}


def restore_and_check(ctx, B, state, sets, ev, cid, total, tag, expect_counts=None, soft=False):
    """`run --from-checkpoint cid`; checks the restore (log lines, epoch, input positions,
    db.replaced-*), then that everything after cid's offsets is re-consumed: for every user the
    versions emitted after the restore run from (count at cid's offsets) + 1 to its total,
    each once, equal to the original records. expect_counts: the per-user counts cid must
    correspond to (checked against its offsets). soft: a state/offsets mismatch is returned
    (as a message) instead of failing."""
    mc = manifest(ctx, state, cid)
    c_offs = offsets_of(mc)
    c_epoch = mc["epoch"]
    c_sum = sum(c_offs.values())
    # the state at cid, from the input log: events of each partition below cid's offset
    counts_c = {}
    for p, o, k in acclib.read_input_positions(ctx, B):
        if o < c_offs.get(p, 0):
            counts_c[k] = counts_c.get(k, 0) + 1
    if expect_counts is not None:
        ctx.check(counts_c == expect_counts, "the events below %s's offsets are not the ones "
                  "expected" % cid)
    before = acclib.read_outputs_pos(ctx, B, "interest-updates")
    seen_before = {(p, o) for p, o, _, _, _ in before}
    # Checkpoints newer than cid are kept, and epochs continue after the newest of them, so
    # that the job's own checkpoints never take their numbers.
    kept_ids, _ = list_ids(ctx, state)
    stamps = {i: manifest(ctx, state, i)["created_at_ms"] for i in kept_ids}
    want_epoch = max([c_epoch] + [int(i[4:]) for i in kept_ids])
    j2 = acclib.Job(ctx, B, state, sets=sets, args=["--from-checkpoint", cid], tag=tag)
    ctx.wait_for("'newsflow started' after --from-checkpoint", lambda: j2.msgs("newsflow started"),
                 job=j2)
    rest = j2.msgs("restored a named checkpoint: state and input positions roll back to it")
    ctx.check(rest and rest[0].get("checkpoint") == cid,
              "no 'restored a named checkpoint' line naming %s (got %r)" % (cid, rest), j2)
    # ... and after the replaced state's own epoch (an epoch number is never used twice)
    rp = j2.msgs("the replaced state is kept")
    m = re.search(r"-epoch(\d+)", rp[0].get("path", "")) if rp else None
    ctx.check(m, "no 'the replaced state is kept' line with -epochN in its path: %r" % rp, j2)
    want_epoch = max(want_epoch, int(m.group(1)))
    sr = j2.msgs("state restored")
    ctx.check(sr and sr[0].get("epoch") == want_epoch, "state restored at epoch %r, want %d (%s "
              "is epoch %d; epochs continue after the newest checkpoint kept and the replaced "
              "state's epoch)" %
              (sr[0].get("epoch") if sr else None, want_epoch, cid, c_epoch), j2)
    ctx.check(not j2.msgs("pending epoch found at start: rolling it forward"),
              "a pending epoch was rolled forward after restoring %s" % cid, j2)
    def assigned_now():
        return {o["partition"]: o["offset"] for o in j2.msgs("partition assigned")
                if o.get("topic") == B.topic("read-events")}
    # logged by the consumer once the coordinator has started, after "newsflow started"
    assigned = ctx.wait_for("every read-events partition assigned",
                            lambda: (lambda a: a if len(a) >= len(c_offs) else None)(
                                assigned_now()), timeout=60, job=j2)
    ctx.check(assigned == c_offs, "read-events partitions assigned at %r, want %s's offsets %r" %
              (assigned, cid, c_offs), j2)
    replaced = [n for n in os.listdir(state) if n.startswith("db.replaced-")]
    ctx.check(replaced, "no db.replaced-* kept in %s: %r" % (state, os.listdir(state)))
    kept = j2.msgs("the replaced state is kept")
    ctx.check(kept and os.path.isdir(kept[0].get("path", "")) and
              os.path.basename(kept[0]["path"]) in replaced,
              "the replaced state's path is not logged (%r; in %s: %r)" % (kept, state, replaced),
              j2)
    ctx.log("restored %s (epoch %d, %d of %d events); inputs rewound to %r; kept %s" %
            (cid, c_epoch, c_sum, total, c_offs, replaced))

    replay = total - c_sum
    acclib.wait_all_consumed(ctx, j2, B, len(before) + replay)
    rc = j2.terminate()
    ctx.check(rc == 0, "%s exited %s after SIGTERM, want 0" % (tag, rc), j2)
    gone = [i for i in kept_ids
            if not os.path.isdir(os.path.join(state, "checkpoints", i)) or
            manifest(ctx, state, i)["created_at_ms"] != stamps[i]]
    ctx.check(not gone, "checkpoints from before the restore of %s deleted or replaced: %r" %
              (cid, gone))

    after = acclib.read_outputs_pos(ctx, B, "interest-updates")
    new = [(k, h, v) for p, o, k, h, v in after if (p, o) not in seen_before]
    ctx.check(len(new) == replay, "%d records emitted after the restore, want %d (events after "
              "%s's offsets)" % (len(new), replay, cid))
    by_user = {}
    for k, h, v in new:
        by_user.setdefault(k, []).append(v["version"])
    problems = []
    for u, c in ev.counts.items():
        got = by_user.get(u, [])
        want = list(range(counts_c.get(u, 0) + 1, c + 1))
        if sorted(got) != want:
            problems.append("%s: versions %s..%s (%d), want %d..%d" % (
                u, min(got, default=None), max(got, default=None), len(got),
                counts_c.get(u, 0) + 1, c))
        elif got and (got[0] != counts_c.get(u, 0) + 1 or got[-1] != c):
            problems.append("%s: first %d last %d, want %d and %d" %
                            (u, got[0], got[-1], counts_c.get(u, 0) + 1, c))
    if problems:
        msg = ("after restoring %s (offsets %r) the per-user versions do not continue from the "
               "counts at its offsets, i.e. its state does not match its input positions (%d of "
               "%d users): %s" % (cid, c_offs, len(problems), len(ev.counts),
                                  "; ".join(problems[:4])))
        if soft:
            ctx.log("MISMATCH: " + msg)
            return msg
        ctx.fail(msg, j2)
    # the replay repeats the original records value for value (deterministic)
    orig = {(v["user_id"], v["version"]): v for _, _, _, _, v in before}
    diff = [(v["user_id"], v["version"]) for _, _, v in new
            if orig.get((v["user_id"], v["version"])) != v]
    ctx.check(not diff, "%d replayed records differ from the originals, e.g. %r" %
              (len(diff), [(d, orig.get(d)) for d in diff[:3]]))
    ctx.log("after restoring %s: %d records, every user from its count at the checkpoint + 1 to "
            "its total, each once, equal to the originals" % (cid, len(new)))
    return None


def body(ctx):
    B = acclib.start_broker(ctx, partitions=4)
    state = ctx.path("state")
    sets = ["runtime.shards=2",
            "checkpoint.retain_every=2", "checkpoint.retain_count=1000",
            "kafka.properties=fetch.wait.max.ms=10"]
    if B.kind == "mock":
        # on a real broker Broker.job_sets names the transactional id (under the prefix)
        sets.insert(0, "kafka.transactional_id=acc-restore")
    ev = acclib.Events(users=30)

    j1 = acclib.Job(ctx, B, state, sets=sets, env={"NF_TEST_SLOW_READS_US": str(SLOW_US)},
                    tag="run1")
    ctx.wait_for("'newsflow started'", lambda: j1.msgs("newsflow started"), job=j1)

    # ---- wave 1, committed, and a checkpoint taken after it
    acclib.kcat_produce(ctx, B, "read-events", ev.make(WAVE1), tag="w1")
    counts1 = dict(ev.counts)
    acclib.wait_all_consumed(ctx, j1, B, WAVE1)
    chosen = {}

    def wave1_checkpoint():
        for o in j1.msgs("checkpoint.created"):
            cid = "chk-%012d" % o["epoch"]
            if cid in chosen:
                continue
            s = sum(offsets_of(manifest(ctx, state, cid)).values())
            chosen[cid] = s
            if s == WAVE1:
                return cid
        return None
    c_id = ctx.wait_for("a named checkpoint whose offsets cover exactly wave 1 (%d events)" %
                        WAVE1, wave1_checkpoint, timeout=60, job=j1,
                        last=lambda: repr(chosen))
    ctx.log("wave 1 (%d events) committed; checkpoint %s covers it" % (WAVE1, c_id))

    # ---- wave 2, then SIGTERM
    acclib.kcat_produce(ctx, B, "read-events", ev.make(WAVE2), tag="w2")
    total = WAVE1 + WAVE2
    acclib.wait_all_consumed(ctx, j1, B, total)
    rc = j1.terminate()
    ctx.check(rc == 0, "run 1 exited %s after SIGTERM, want 0" % rc, j1)
    before = acclib.read_outputs(ctx, B, "interest-updates")
    ctx.log(acclib.check_interest_updates(ctx, before, ev.counts,
                                          "interest-updates before the restore"))

    # ---- list, show, verify
    ids, listing = list_ids(ctx, state)
    ctx.log("checkpoints list:\n%s" % "\n".join(listing.rstrip().split("\n")[:4] + ["  ..."]))
    ctx.check(len(ids) >= 2, "checkpoints list shows %d checkpoints, want several: %r" %
              (len(ids), listing))
    ctx.check(c_id in ids, "%s is not listed: %r" % (c_id, ids))
    created = ["chk-%012d" % o["epoch"] for o in j1.msgs("checkpoint.created")]
    ctx.check(sorted(created) == sorted(ids), "the listed checkpoints %r differ from the ones the "
              "job logged as created %r" % (ids, created))
    epochs = [int(i[4:]) for i in ids]
    stop_epoch = j1.msgs("newsflow stopped")[0].get("epoch")
    # checkpoint.on_stop: the final epoch of a clean stop gets a checkpoint when outputs were
    # committed after the newest named checkpoint before it
    prev_chk = max([e for e in epochs if e < stop_epoch] or [0])
    outputs_after = sum(o.get("records", 0) for o in j1.msgs("epoch.committed")
                        if o.get("epoch", 0) > prev_chk)
    ctx.check((stop_epoch in epochs) == (outputs_after > 0 or stop_epoch % 2 == 0),
              "checkpoint of the final epoch %r of a clean stop (checkpoint.on_stop): %s, yet "
              "%d outputs were committed after chk %d: %r" %
              (stop_epoch, "taken" if stop_epoch in epochs else "missing", outputs_after,
               prev_chk, epochs))
    ctx.check(all(e % 2 == 0 for e in epochs if e != stop_epoch),
              "retain_every=2 but some checkpoint epochs are odd: %r" % epochs)
    sums = {}
    for cid in ids:
        out = acclib.run_cli(ctx, ["checkpoints", "verify", cid, "--state-dir", state])
        ctx.check(out.startswith("ok: %s" % cid), "verify %s printed %r" % (cid, out))
        m = manifest(ctx, state, cid)
        ctx.check(m.get("id") == cid and m.get("epoch") == int(cid[4:]),
                  "manifest of %s: id/epoch %r/%r" % (cid, m.get("id"), m.get("epoch")))
        sums[cid] = sum(offsets_of(m).values())
    seq = [sums[c] for c in ids]
    ctx.check(seq == sorted(seq), "checkpoint offsets are not monotonic over epochs: %r" % seq)
    ctx.check(sums[ids[-1]] == total, "the newest checkpoint %s covers %d events, want all %d" %
              (ids[-1], sums[ids[-1]], total))
    ctx.log("verify ok for %d checkpoints; %s covers %d of %d events" %
            (len(ids), c_id, sums[c_id], total))
    # Every checkpoint's input offsets must cover exactly the events whose outputs (and state)
    # it holds: the outputs of epochs <= its epoch (one per event, all valid here).
    by_epoch = {}
    for _, h, _ in before:
        e = int(h["nf-epoch"])
        by_epoch[e] = by_epoch.get(e, 0) + 1
    mismatched = []
    for cid in ids:
        e = int(cid[4:])
        outs = sum(n for ep, n in by_epoch.items() if ep <= e)
        if outs != sums[cid]:
            mismatched.append((cid, sums[cid], outs))
    ctx.log("checkpoints whose offsets do not match their outputs (id, events covered by the "
            "offsets, outputs of epochs <= its epoch): %r" % (mismatched,))

    # A copy of the state directory for the second restore below: a restore of the original
    # timeline, not of the one the first restore starts.
    state2 = ctx.path("state-copy")
    shutil.copytree(state, state2, symlinks=True)

    # ---- restore C (covers wave 1 exactly)
    restore_and_check(ctx, B, state, sets, ev, c_id, total, "run2", expect_counts=counts1)

    # ---- restore a checkpoint taken while wave 2 was being consumed (in the copy; a mismatched
    # one if there is one): its state must match its offsets just as well.
    mid = [c for c in ids if WAVE1 < sums[c] < total]
    restore_problem = None
    if mismatched or mid:
        pick = mismatched[0][0] if mismatched else mid[len(mid) // 2]
        restore_problem = restore_and_check(ctx, B, state2, sets, ev, pick, total, "run3-mid",
                                            soft=True)
    else:
        ctx.log("no checkpoint was taken while wave 2 was being consumed: mid-wave restore "
                "skipped")
    ctx.check(not mismatched and not restore_problem,
              "named checkpoints whose input offsets run ahead of their state and outputs "
              "(events after the cut counted as consumed): %s%s" % (
                  ", ".join("%s covers %d events but holds %d outputs" % m for m in mismatched),
                  "; restoring one loses them: " + restore_problem if restore_problem else ""))
    ctx.check(acclib.count_topic(ctx, B, "dead-letters") == 0, "dead-letters for valid input")
    # the checkpoints taken after the restore (numbered after the kept ones) and the kept ones
    # verify
    ids2, _ = list_ids(ctx, state)
    for cid in ids2:
        out = acclib.run_cli(ctx, ["checkpoints", "verify", cid, "--state-dir", state])
        ctx.check(out.startswith("ok: %s" % cid), "verify %s after the restore: %r" % (cid, out))
    ctx.log("%d checkpoints verify ok after the restore" % len(ids2))


if __name__ == "__main__":
    acclib.main("restore_checkpoint", body)
