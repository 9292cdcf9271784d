"""Coalesced interest updates (interest.coalesce; src/actors/reads.h): one interest-updates
record per user per epoch, the user's latest state, instead of one per counted read (as Kafka
Streams' record cache does).

The same read events (40 users, ~60 reads each, arriving in waves) go through two jobs, each on
topics of its own:
  R  reference: one record per read, run without interruption;
  C  coalescing: interest.coalesce=true, SIGKILLed twice while the waves arrive and restarted.
Checked from the read_committed topics:
  - C never emits a (user, version) twice, and every record of C is the record R emitted for
    that (user, version), field for field (version, vector, updated_at): coalescing drops
    records, it never changes one;
  - for every user, C's last record is R's last record (version = the user's reads), so no read
    was lost and the state is the reference's;
  - within one epoch of C (headers nf-writer, nf-epoch) a user has at most one record;
  - C emitted fewer records than R (the coalescing took place).

Usage: python3 acc_coalesce.py NEWSFLOW SRCDIR
"""
import json
import os
import random
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import acclib  # noqa: E402

USERS, WAVES, WAVE = 40, 24, 100


def run_reference(ctx, lines):
    broker = acclib.start_broker(ctx, name="ref", partitions=4)
    acclib.kcat_produce(ctx, broker, "read-events", lines, tag="ref")
    job = acclib.Job(ctx, broker, ctx.path("state-ref"), interval_ms=300, tag="ref",
                     txid_suffix="ref")
    acclib.wait_all_consumed(ctx, job, broker, len(lines), timeout=180)
    ctx.check(job.terminate(60) == 0, "reference: exit after SIGTERM", job)
    return acclib.read_outputs(ctx, broker, "interest-updates")


def run_coalescing(ctx, waves, counts):
    broker = acclib.start_broker(ctx, name="coalesce", partitions=4)
    state = ctx.path("state-coalesce")
    sets = ["interest.coalesce=true"]
    jobs = [acclib.Job(ctx, broker, state, sets=sets, interval_ms=300, tag="coalesce-1",
                       txid_suffix="co")]
    kill_after = sorted(random.sample(range(4, len(waves) - 4), 2))
    for i, w in enumerate(waves):
        acclib.kcat_produce(ctx, broker, "read-events", w, tag="co%d" % i)
        time.sleep(0.15)
        if i in kill_after:
            time.sleep(random.uniform(0.0, 0.6))
            jobs[-1].kill()
            ctx.log("coalesce-%d SIGKILLed after wave %d (last committed epoch %d)" %
                    (len(jobs), i, jobs[-1].last_epoch()))
            jobs.append(acclib.Job(ctx, broker, state, sets=sets, interval_ms=300,
                                   tag="coalesce-%d" % (len(jobs) + 1), txid_suffix="co"))
    job = jobs[-1]
    users = len(counts)
    # every user's last version must arrive; the count of records is not known in advance
    want = {u: c for u, c in counts.items()}
    last = [{}]

    def done():
        last[0] = {}
        for k, h, v in acclib.read_outputs(ctx, broker, "interest-updates"):
            last[0][v["user_id"]] = max(last[0].get(v["user_id"], 0), v["version"])
        return all(last[0].get(u) == c for u, c in want.items())
    ctx.wait_for("every user's last version in the coalesced output", done, timeout=240,
                 interval=1.0, job=job,
                 last=lambda: "%d of %d users at their last version" %
                 (sum(1 for u, c in want.items() if last[0].get(u) == c), users))
    ctx.check(job.terminate(60) == 0, "coalescing run: exit after SIGTERM", job)
    return acclib.read_outputs(ctx, broker, "interest-updates"), job.txid


def body(ctx):
    seed = int(os.environ.get("NF_TEST_SEED", str(int(time.time()))))
    random.seed(seed)
    ctx.log("seed %d" % seed)
    ev = acclib.Events(users=USERS, prefix="c")
    waves = [ev.make(WAVE) for _ in range(WAVES)]
    lines = [l for w in waves for l in w]
    ref = run_reference(ctx, lines)
    ctx.log(acclib.check_interest_updates(ctx, ref, ev.counts, what="reference"))
    by_version = {(v["user_id"], v["version"]): v for k, h, v in ref}
    co, writer = run_coalescing(ctx, waves, ev.counts)

    seen, per_epoch, mismatch = {}, {}, []
    for k, h, v in co:
        uv = (v["user_id"], v["version"])
        seen[uv] = seen.get(uv, 0) + 1
        if by_version.get(uv) != v:
            mismatch.append((uv, v, by_version.get(uv)))
        ep = (h.get("nf-writer"), h.get("nf-epoch"), v["user_id"])
        per_epoch[ep] = per_epoch.get(ep, 0) + 1
    dup = sorted(uv for uv, n in seen.items() if n > 1)
    ctx.check(not dup, "coalesced output: %d (user, version) twice, e.g. %s" % (len(dup), dup[:5]))
    ctx.check(not mismatch, "coalesced output: %d records differ from the reference's for the "
              "same (user, version), e.g. %s" % (len(mismatch), json.dumps(mismatch[:2])))
    multi = sorted(e for e, n in per_epoch.items() if n > 1)
    ctx.check(not multi, "coalesced output: %d (epoch, user) with more than one record, e.g. %s" %
              (len(multi), multi[:5]))
    ctx.check(all(h.get("nf-writer") == writer for k, h, v in co),
              "coalesced output: a record of another writer than %s" % writer)
    final = {}
    for k, h, v in co:
        if v["version"] > final.get(v["user_id"], {}).get("version", 0):
            final[v["user_id"]] = v
    wrong = [u for u, c in ev.counts.items()
             if final.get(u) != by_version.get((u, c))]
    ctx.check(not wrong, "coalesced output: %d users whose last record is not the reference's "
              "last one (reads lost or state differs), e.g. %s" % (len(wrong), wrong[:5]))
    ctx.check(len(co) < len(ref), "coalesced output has %d records, the reference %d: nothing "
              "was coalesced" % (len(co), len(ref)))
    ctx.log("coalesced: %d records for %d reads of %d users (the reference: %d); every one equal "
            "to the reference's record of its (user, version), last versions equal" %
            (len(co), ev.valid, USERS, len(ref)))


if __name__ == "__main__":
    acclib.main("coalesce", body)
