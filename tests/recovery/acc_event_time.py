"""Event time against the wall clock (issue 15, item 2; src/io/events.h
nf_read_event_check_time, src/engine/trend.h nf_trend_counter_clamp).

One partition, so every event meets the same watermark.
  A  default bound (trending.max_future_ms=300000): on-time reads, then reads dated
     9999-12-31, now + 1 h, 0 and epoch seconds (1970-01-21), then more on-time reads. The four
     go to dead-letters with stage event_time and a reason naming the bound; no event is late;
     trending emits a window holding the reads that came after them.
  B  repair: a job with trending.max_future_ms=86400000 accepts a read dated now + 12 h, and the
     on-time reads after it are late (the stuck watermark, as an older version left it); after
     a restart with the default bound, the repair is logged and counted, and reads produced
     then are counted again and reach a trending window.

Both runs use the broker NF_TEST_BROKER names (the mock, or topics of their own on Kafka).

Usage: python3 acc_event_time.py NEWSFLOW SRCDIR
"""
import json
import os
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import acclib  # noqa: E402

TREND = ["trending.slide_s=1", "trending.window_s=2", "trending.lateness_ms=0",
         "trending.exact=true", "trending.idle_ms=600000", "admin.port=0",
         "runtime.shards=1"]  # one counter: a shard without partitions would hold trending back


def ev(user, article, ts, eid):
    return (user, json.dumps({"user_id": user, "article_id": article, "ts": ts, "event_id": eid}))


def on_time(prefix, article, n, t0):
    return [ev("u%d" % i, article, t0 + i * 100, "%s-%d" % (prefix, i)) for i in range(n)]


def windows_with(ctx, broker, article):
    return [v for k, h, v in acclib.read_outputs(ctx, broker, "trending")
            if any(it["article_id"] == article for it in v["items"])]


def wait_window(ctx, broker, job, article):
    ctx.wait_for("a trending window holding %s" % article,
                 lambda: windows_with(ctx, broker, article), timeout=90, interval=0.5, job=job)


def metric(ctx, job, name):
    m = job.metrics()
    ctx.check(m is not None, "%s: /metrics answers" % job.tag, job)
    return m.get(name, 0.0)


def run_a(ctx):
    broker = acclib.start_broker(ctx, name="a", partitions=1)
    now = int(time.time() * 1000)
    bad = [ev("u-far", "x", 253402300799999, "far"), ev("u-hour", "x", now + 3600000, "hour"),
           ev("u-zero", "x", 0, "zero"), ev("u-secs", "x", now // 1000, "secs")]
    lines = on_time("a", "before", 10, now - 8000) + bad + on_time("b", "after", 30, now - 6000)
    acclib.kcat_produce(ctx, broker, "read-events", lines, tag="a")
    job = acclib.Job(ctx, broker, ctx.path("state-a"), sets=TREND, tag="a")
    ctx.wait_for("4 dead letters", lambda: acclib.count_topic(ctx, broker, "dead-letters") >= 4,
                 timeout=60, interval=0.5, job=job)
    dl = [v for k, h, v in acclib.read_outputs(ctx, broker, "dead-letters")]
    ctx.check(len(dl) == 4, "4 dead letters, got %d: %r" % (len(dl), dl), job)
    ctx.check(all(d["stage"] == "event_time" for d in dl), "stage event_time: %r" % dl, job)
    ahead = [d for d in dl if "ahead of the wall clock" in d["error"] and
             "trending.max_future_ms" in d["error"]]
    before = [d for d in dl if "is before 2000-01-01T00:00:00Z" in d["error"]]
    ctx.check(len(ahead) == 2 and len(before) == 2, "reasons: %r" % [d["error"] for d in dl], job)
    wait_window(ctx, broker, job, "after")
    ctx.check(metric(ctx, job, "newsflow_trending_late_events_total") == 0,
              "no read counted late after the refused ones", job)
    ctx.check(metric(ctx, job, "newsflow_trending_counted_events_total") == 40,
              "the 40 on-time reads counted", job)
    ctx.check(job.terminate(60) == 0, "A: exit 0 after SIGTERM", job)
    broker.stop()


def run_b(ctx):
    broker = acclib.start_broker(ctx, name="b", partitions=1)
    state = ctx.path("state-b")
    now = int(time.time() * 1000)
    lines = [ev("u-ahead", "x", now + 12 * 3600000, "ahead")] + on_time("c", "stuck", 10, now)
    acclib.kcat_produce(ctx, broker, "read-events", lines, tag="b1")
    old = acclib.Job(ctx, broker, state, sets=TREND + ["trending.max_future_ms=86400000"],
                     tag="b1")
    ctx.wait_for("the stuck reads counted late",
                 lambda: (old.metrics() or {}).get("newsflow_trending_late_events_total") == 10,
                 timeout=60, interval=0.5, job=old)
    ctx.check(old.terminate(60) == 0, "B1: exit 0 after SIGTERM", old)
    job = acclib.Job(ctx, broker, state, sets=TREND, tag="b2")
    ctx.wait_for("the repair logged", lambda: job.msgs_matching("repaired"), timeout=60,
                 interval=0.3, job=job)
    ctx.wait_for("the start line", lambda: job.admin_port(), timeout=60, interval=0.3, job=job)
    # The partition's counter is repaired when it is first loaded (the first tick after its
    # partition is assigned): its max event time and the open pane of the read 12 h ahead, both
    # saved by B1 whatever the timing. The merger is repaired at start only if B1's last
    # checkpoint came after the counter handed it the watermark (a tick later): not awaited.
    seen = [None]

    def repaired():
        seen[0] = metric(ctx, job, "newsflow_trending_state_repairs_total")
        what = set(w.get("what") for w in job.msgs_matching("repaired"))
        return (seen[0] or 0) >= 2 and {"partition max event time", "counter open pane"} <= what

    ctx.wait_for("the counter's repairs counted (max event time, open pane)", repaired,
                 timeout=60, interval=0.3, job=job,
                 last=lambda: "%r; %r" % (seen[0], [w.get("what")
                                                  for w in job.msgs_matching("repaired")]))
    warn = job.msgs_matching("repaired")
    ctx.check(all(w.get("level") == "warn" and "old" in w and "new" in w for w in warn),
              "repair lines at warn with old and new values: %r" % warn, job)
    ctx.check(metric(ctx, job, "newsflow_trending_state_repairs_total") == len(warn),
              "one repair counted per repair line: %r" % [w.get("what") for w in warn], job)
    # after the repair's clock: the repaired watermark is the restart's wall clock
    now = int(time.time() * 1000)
    acclib.kcat_produce(ctx, broker, "read-events", on_time("d", "unstuck", 30, now + 500),
                        tag="b2")
    wait_window(ctx, broker, job, "unstuck")
    ctx.check(metric(ctx, job, "newsflow_trending_late_events_total") == 0,
              "after the repair no read is late", job)
    ctx.check(job.terminate(60) == 0, "B2: exit 0 after SIGTERM", job)
    broker.stop()


def body(ctx):
    run_a(ctx)
    run_b(ctx)


if __name__ == "__main__":
    acclib.main("event_time", body)
