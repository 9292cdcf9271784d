"""Backpressure (src/actors/reads.h): a slow reads actor (NF_TEST_SLOW_READS_US) behind small
rings (runtime.ring_capacity=64) and low water marks (kafka.pause_high_water=200,
pause_low_water=50) with 30000 events waiting in read-events. While the job works through them,
/metrics and /proc/PID/status are sampled: the shards must pause their partitions
(newsflow_kafka_pauses_total > 0, "partitions paused" / "partitions resumed" logged), the held
events must stay bounded, RSS must stay under 520 MB (600 MB on a real broker, see below), and
at the end interest-updates must hold every (user, version) exactly once (nothing lost while
paused).

Why runtime.budget=1 and a 2 s epoch: kafka_in and the reads actor share each shard's thread,
so with the default budget (256 messages per ring per loop iteration) a slow reads actor slows
its own shard's consumption just as much and the rings never fill (observed: ring_full 0,
pauses_total 0); with budget=1 the reads actor takes one batch per ring per iteration while
kafka_in ships several, which is a downstream slower than the input. And every cut drains the
rings, so 200 ms epochs would empty them before they fill.

Bound on newsflow_kafka_held_events (a per-process gauge, the sum of the shards' parts): a shard
stops consuming when, after a consume turn, it holds more than the high water mark; one turn takes
at most CONSUME_MAX = 256 records (src/actors/reads.c), so a shard holds at most high + 256 and the
process at most shards * (high + 256). The tighter high + 2 * 64 (two batches) is also reported.

Broker (NF_TEST_BROKER, see acclib.py): a mock cluster of the test's own, or a real Kafka broker
under a topic prefix of its own; the same checks on both, except that on a real broker the job
fetches at most 16 KB per partition (with 1 MB fetches its partitions drift further apart in
event time and the trending state grows) and VmRSS may reach 600 MB (measurements at
RSS_LIMIT_KAFKA_KB and in body()).

Usage: python3 acc_backpressure.py NEWSFLOW SRCDIR
"""
import os
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import acclib  # noqa: E402

EVENTS = 30000
SHARDS = 2
HIGH, LOW = 200, 50
CONSUME_MAX = 256
SLOW_US = 200
INTERVAL_MS = 2000
# 520 MB: the job's own footprint plus the trending state. The events' timestamps are one second
# apart, so the 30000 events span 8 h of event time, and while partitions are paused unevenly
# their event times drift apart: each counter holds the panes (30 s, an 80 KB sketch each) between
# its slowest and fastest partition, and the merger up to a window of panes per shard (measured
# ~80 MB and ~50 MB; logged below from newsflow_trending_shard_bytes / _merger_bytes).
# The footprint has grown since the limit was first set at 450 MB (VmRSS 257-324 MB then): on
# 2026-11-27, 373-385 MB in six quiet runs here (with and without that day's runtime change),
# and 452 MB once in CI with other tests running (the trending state the same ~75 MB: the rest
# is the job's own allocations under load). 520 MB keeps the margin the first limit had; held
# events, not RSS, are the tight check of backpressure.
RSS_LIMIT_KB = 520 * 1024
# On a real broker the job's footprint is larger and varies more: over 9 runs with 16 KB fetches
# (see body()) VmRSS 339-444 MB with 85-155 MB in the trending counters, against 257-324 MB and
# 56-114 MB over 5 runs on the mock (the same machine, shared). Not analysed further; the
# trending state accounts for part of it (the dirty panes presumably also sit in each epoch's
# pending record and in RocksDB's memtables).
RSS_LIMIT_KAFKA_KB = 600 * 1024


def body(ctx):
    B = acclib.start_broker(ctx, partitions=4)
    ev = acclib.Events(users=50)
    for _ in range(3):
        acclib.kcat_produce(ctx, B, "read-events", ev.make(EVENTS // 3), tag="bulk")
    ctx.log("%d events waiting in read-events" % ev.valid)
    sets = ["runtime.shards=%d" % SHARDS,
            "runtime.ring_capacity=64", "runtime.budget=1", "kafka.pause_high_water=%d" % HIGH,
            "kafka.pause_low_water=%d" % LOW, "admin.enabled=true", "admin.port=0",
            "admin.listen=127.0.0.1"]
    if B.kind == "mock":
        # on a real broker Broker.job_sets names the transactional id (under the prefix)
        sets.insert(0, "kafka.transactional_id=acc-backpressure")
    if B.kind == "kafka":
        # A real broker answers a fetch with up to max.partition.fetch.bytes (1 MB) per
        # partition: thousands of events, hours of event time, at once, so a shard's partitions
        # run further apart in event time and the trending panes between the slowest and the
        # fastest grow (measured with the default 1 MB: counters ~200-216 MB, VmRSS ~473 MB;
        # with 64 KB up to 151 MB and 451 MB; with 16 KB 85-155 MB and 339-444 MB). 16 KB
        # fetches keep the input closer to the mock's; the limit is RSS_LIMIT_KAFKA_KB.
        sets.append("kafka.properties=max.partition.fetch.bytes=16384")
    rss_limit_kb = RSS_LIMIT_KAFKA_KB if B.kind == "kafka" else RSS_LIMIT_KB
    job = acclib.Job(ctx, B, ctx.path("state"), sets=sets, interval_ms=INTERVAL_MS,
                     env={"NF_TEST_SLOW_READS_US": str(SLOW_US)}, tag="job")
    ctx.wait_for("'newsflow started' with admin_port", job.admin_port, job=job)
    ctx.log("admin on port %d" % job.admin_port())

    samples = []  # (held, pauses, rss_kb, events, updates)
    tsamples = []  # (trending counter bytes, merger bytes)
    last = {}

    def sample():
        m = job.metrics()
        rss = job.rss_kb()
        if m is None:
            return False
        last.update(m)
        tsamples.append((m.get("newsflow_trending_shard_bytes", 0.0),
                         m.get("newsflow_trending_merger_bytes", 0.0)))
        samples.append((m.get("newsflow_kafka_held_events", 0.0),
                        m.get("newsflow_kafka_pauses_total", 0.0), rss or 0,
                        m.get("newsflow_read_events_total", 0.0),
                        m.get("newsflow_interest_updates_total", 0.0)))
        return m.get("newsflow_interest_updates_total", 0) >= EVENTS

    ctx.wait_for("newsflow_interest_updates_total >= %d" % EVENTS, sample, timeout=300,
                 interval=0.1, job=job,
                 last=lambda: "held=%s pauses=%s events=%s updates=%s" % (
                     last.get("newsflow_kafka_held_events"),
                     last.get("newsflow_kafka_pauses_total"),
                     last.get("newsflow_read_events_total"),
                     last.get("newsflow_interest_updates_total")))
    acclib.wait_all_consumed(ctx, job, B, EVENTS)
    sample()
    held_max = max(s[0] for s in samples)
    rss_max = max(s[2] for s in samples)
    pauses = samples[-1][1]
    nonzero = sum(1 for s in samples if s[0] > 0)
    ctx.log("%d samples: max held_events %d (%d samples > 0), pauses_total %d, max VmRSS %.1f MB"
            % (len(samples), held_max, nonzero, pauses, rss_max / 1024.0))
    paused_lines = job.msgs("partitions paused: downstream is full")
    resumed_lines = job.msgs("partitions resumed")
    held_at_pause = max((o.get("held_events", 0) for o in paused_lines), default=0)
    ctx.log("log: %d 'partitions paused' (max held_events at a pause %d), %d 'partitions resumed'"
            % (len(paused_lines), held_at_pause, len(resumed_lines)))

    ctx.check(pauses > 0, "newsflow_kafka_pauses_total is %r: the partitions never paused" %
              pauses, job)
    ctx.check(paused_lines and resumed_lines, "want 'partitions paused' and 'partitions resumed' "
              "log lines (got %d and %d)" % (len(paused_lines), len(resumed_lines)), job)
    ctx.check(last.get("newsflow_kafka_resumes_total", 0) > 0, "newsflow_kafka_resumes_total is "
              "%r after everything was consumed" % last.get("newsflow_kafka_resumes_total"), job)
    bound = SHARDS * (HIGH + CONSUME_MAX)
    ctx.check(held_max <= bound, "newsflow_kafka_held_events reached %d, above the bound "
              "shards*(high+CONSUME_MAX) = %d" % (held_max, bound), job)
    ctx.check(held_at_pause <= HIGH + CONSUME_MAX, "a shard held %d events when it paused, above "
              "high water + one consume turn (%d)" % (held_at_pause, HIGH + CONSUME_MAX), job)
    tight = HIGH + 2 * 64
    ctx.log("held_events max %d vs the tighter high+2*64 = %d: %s" %
            (held_max, tight, "within" if held_max <= tight else "ABOVE (a consume turn overshoots"
             " the high water mark by up to %d records)" % CONSUME_MAX))
    ctx.log("trending state: max %.1f MB in the counters, %.1f MB in the merger" %
            (max(t[0] for t in tsamples) / 2**20, max(t[1] for t in tsamples) / 2**20))
    ctx.check(rss_max < rss_limit_kb, "VmRSS reached %.1f MB (limit %d MB on the %s)" %
              (rss_max / 1024.0, rss_limit_kb // 1024, "real broker" if B.kind == "kafka" else
               "mock"),
              job)
    ctx.check(last.get("newsflow_dead_letters_total", 0) == 0, "dead letters for valid input")
    held_end = last.get("newsflow_kafka_held_events", 0)
    ctx.check(held_end == 0, "newsflow_kafka_held_events is %r after everything was consumed" %
              held_end, job)

    # Everything is committed: SIGTERM must commit a final (empty) epoch and exit 0. A hang is
    # reported after the outputs were checked.
    rc, hang = job.terminate_or_report(20)
    recs = acclib.read_outputs(ctx, B, "interest-updates")
    ctx.log(acclib.check_interest_updates(ctx, recs, ev.counts))
    ctx.check(acclib.count_topic(ctx, B, "dead-letters") == 0, "dead-letters for valid input")
    ctx.check(not hang, "shutdown after backpressure: " + (hang or ""), job)
    ctx.check(rc == 0, "exit %s after SIGTERM, want 0" % rc, job)


if __name__ == "__main__":
    acclib.main("backpressure", body)
