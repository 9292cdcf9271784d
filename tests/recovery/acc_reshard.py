"""Changing runtime.shards between runs over the same state (issue 16: key groups are input
partitions; trending counters are kept per read-events partition, src/actors/analytics.h).

One deterministic stream of read events (keyed by user, so the partitioner spreads them over
every partition; event times advancing by a second per event with some disorder within the
allowed lateness, every 97th event a minute behind its partition (late), and a few undecodable
records) is produced to two brokers of their own (two mock clusters; on a real broker,
NF_TEST_BROKER, two topic prefixes):

  A  one state directory, three runs: runtime.shards=4 over the first third of the stream,
     stopped with SIGTERM; runtime.shards=1 over the second third; runtime.shards=3 over the
     rest;
  B  runtime.shards=2 over the whole stream, never restarted (fresh state, its own
     transactional id).

Checked, read_committed: every interest-updates (user, version) and every dead letter exactly
once in each; and A's outputs equal B's: the trending lists by window end (each window end
once), the interest-updates per (user, version), the dead letters by origin (stage, error,
payload). Trending runs in sketch mode (the default), so equality also covers the candidate
sets and the sketches' estimates, which depend on how events were grouped into counters.

Usage: python3 acc_reshard.py NEWSFLOW SRCDIR
"""
import json
import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import acclib  # noqa: E402

PARTITIONS = 4
USERS = 37
EVENTS = 2400
BAD = (150, 900, 1700, 2350)  # undecodable records before these event indices
T0 = 1767225600000  # 2026-01-01T00:00:00Z
SETS = ["trending.window_s=600", "trending.slide_s=30", "trending.lateness_ms=5000",
        # idleness is processing time: no partition may be idle while a run waits
        "trending.idle_ms=3600000", "trending.top_k=20", "log.level=info"]


def stream():
    """[(key, value)] of the whole input, deterministic."""
    out = []
    nbad = 0
    for i in range(EVENTS):
        if i in BAD:
            nbad += 1
            out.append(("bad%d" % nbad, '{"user_id":"bad%d","oops":' % nbad))
        u = "u%03d" % ((i * 11 + i // USERS) % USERS)
        ts = T0 + i * 1000 - (i % 7) * 600
        if i % 97 == 50:
            ts -= 60000  # late: beyond trending.lateness_ms on its partition
        art = "art-%d" % (((i * 7919) % 101) * ((i * 31) % 7) // 6)  # a skewed popularity
        v = {"event_id": "e-%d" % i, "user_id": u, "article_id": art, "session_id": "s-%d" % i,
             "ts": ts}
        out.append((u, json.dumps(v, separators=(",", ":"))))
    return out


def counts_of(lines):
    c = {}
    for k, _ in lines:
        if not k.startswith("bad"):
            c[k] = c.get(k, 0) + 1
    return c


def wait_quiet(ctx, job, broker, want_updates):
    """Every update of the input so far is out, and trending has stopped growing (the merger
    emits each window once its partitions' watermarks pass it; nothing is idle)."""
    acclib.wait_all_consumed(ctx, job, broker, want_updates, timeout=180)
    seen = {"n": -1, "stable": 0}

    def settled():
        n = acclib.count_topic(ctx, broker, "trending")
        seen["stable"] = seen["stable"] + 1 if n == seen["n"] and n > 0 else 0
        seen["n"] = n
        return seen["stable"] >= 4

    ctx.wait_for("trending to settle", settled, timeout=120, interval=1.0, job=job,
                 last=lambda: "%d windows" % seen["n"])
    return seen["n"]


def outputs(ctx, broker):
    """(trending by window end, interest-updates by (user, version), dead letters by origin,
    the raw interest-updates records)."""
    trending = {}
    for k, h, v in acclib.read_outputs(ctx, broker, "trending"):
        ctx.check(k not in trending, "%r: window end %s emitted twice" % (broker, k))
        trending[k] = v
    ups = acclib.read_outputs(ctx, broker, "interest-updates")
    interest = {(v["user_id"], v["version"]): v for k, h, v in ups}
    dead = {}
    rtopic = broker.topic("read-events")
    for k, h, v in acclib.read_outputs(ctx, broker, "dead-letters"):
        o = v["origin"]
        ctx.check(o["topic"] == rtopic, "dead letter from another topic: %r" % v)
        dead[(o["partition"], o["offset"])] = (v["stage"], v["error"], v["payload"])
    return trending, interest, dead, ups


def body(ctx):
    lines = stream()
    thirds = [0, len(lines) // 3, 2 * len(lines) // 3, len(lines)]

    # ---- B: two shards, the whole stream, no restart ----
    brk_b = acclib.start_broker(ctx, name="b", partitions=PARTITIONS)
    acclib.kcat_produce(ctx, brk_b, "read-events", lines, tag="b")
    want_b, bad_b = acclib.expected_from_input(ctx, brk_b)
    job = acclib.Job(ctx, brk_b, ctx.path("state-b"), sets=SETS + ["runtime.shards=2"],
                     tag="b", txid_suffix="-b")
    nb = wait_quiet(ctx, job, brk_b, sum(want_b.values()))
    ctx.check(job.terminate() == 0, "B: exit code after SIGTERM", job)
    ctx.log("B: %d trending windows" % nb)

    # ---- A: 4 shards, then 1, then 3, over one state directory ----
    brk_a = acclib.start_broker(ctx, name="a", partitions=PARTITIONS)
    state_a = ctx.path("state-a")
    produced = []
    for n, (lo, hi) in zip((4, 1, 3), zip(thirds, thirds[1:])):
        chunk = lines[lo:hi]
        acclib.kcat_produce(ctx, brk_a, "read-events", chunk, tag="a%d" % n)
        produced += chunk
        job = acclib.Job(ctx, brk_a, state_a, sets=SETS + ["runtime.shards=%d" % n],
                         tag="a%d" % n, txid_suffix="-a")
        wn = wait_quiet(ctx, job, brk_a, sum(counts_of(produced).values()))
        ctx.check(job.terminate() == 0, "A (%d shards): exit code after SIGTERM" % n, job)
        ctx.check(not job.msgs_matching("shard count|another number of shards"),
                  "A (%d shards): a shard-count complaint in the log" % n, job)
        ctx.log("A with %d shards: %d trending windows so far" % (n, wn))
    want_a, bad_a = acclib.expected_from_input(ctx, brk_a)
    ctx.check(want_a == want_b, "the two brokers got other inputs")

    # ---- exactly once in each ----
    ta, ia, da, ups_a = outputs(ctx, brk_a)
    tb, ib, db, ups_b = outputs(ctx, brk_b)
    ctx.log(acclib.check_interest_updates(ctx, ups_a, want_a, "A interest-updates"))
    ctx.log(acclib.check_interest_updates(ctx, ups_b, want_b, "B interest-updates"))
    ctx.log(acclib.check_dead_letters(ctx, brk_a, bad_a))
    ctx.log(acclib.check_dead_letters(ctx, brk_b, bad_b))

    # ---- A equals B ----
    def diff(a, b):
        missing = sorted(set(b) - set(a))
        extra = sorted(set(a) - set(b))
        wrong = sorted(k for k in set(a) & set(b) if a[k] != b[k])
        return missing, extra, wrong

    m, e, w = diff(ta, tb)
    ctx.check(len(tb) > 20 and not (m or e or w),
              "trending: A (4 -> 1 -> 3 shards) differs from B (2 shards): %d windows in B "
              "only %s, %d in A only %s, %d differ %s%s" %
              (len(m), m[:3], len(e), e[:3], len(w), w[:3],
               " (first: A %s / B %s)" % (json.dumps(ta[w[0]])[:300], json.dumps(tb[w[0]])[:300])
               if w else ""))
    m, e, w = diff(ia, ib)
    ctx.check(not (m or e or w),
              "interest-updates: A differs from B: %d only in B %s, %d only in A %s, %d differ %s"
              % (len(m), m[:3], len(e), e[:3], len(w), w[:3]))
    m, e, w = diff(da, db)
    ctx.check(not (m or e or w),
              "dead-letters: A differs from B: %d only in B %s, %d only in A %s, %d differ %s" %
              (len(m), m[:3], len(e), e[:3], len(w), w[:3]))
    ctx.log("A (4 -> 1 -> 3 shards) and B (2 shards) agree: %d trending windows, %d "
            "interest-updates, %d dead letters" % (len(ta), len(ia), len(da)))


if __name__ == "__main__":
    acclib.main("reshard", body)
