"""Old read events and trending (issue 37), on Apache Kafka.

  lag   newsflow_trending_watermark_lag_seconds once every partition is idle: read events dated
        years ago (acclib's events are dated 2023; trending.backfill counts them) make the
        watermark years old; once the partitions have been idle for trending.idle_ms they hold
        no window back, and the gauge must say 0 rather than keep the years
        (NewsflowTrendingStale fired while trending was current).
  old   by default (trending.backfill=false) a read event older than window + lateness when it
        was written to Kafka opens no trending window: one event dated 2005 beside current ones
        made the job emit 120 windows dated 2005. It is counted in
        newsflow_trending_old_events_total and still reaches interest; the current events are
        counted into trending as before.

Usage: NF_TEST_BROKER=kafka:HOST:PORT python3 trending_lag.py NEWSFLOW SRCDIR
"""
import json
import os
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recovery"))
import acclib  # noqa: E402


def lag_scenario(ctx, broker):
    ev = acclib.Events(users=5, prefix="tl")
    acclib.kcat_produce(ctx, broker, "read-events", ev.make(40), tag="old")
    j = acclib.Job(ctx, broker, ctx.path("state"), tag="lag",
                   sets=["admin.enabled=true", "admin.port=0", "trending.idle_ms=1000"])
    acclib.wait_all_consumed(ctx, j, broker, ev.valid)
    seen = [None]

    def lag(pred):
        m = j.metrics()
        seen[0] = m.get("newsflow_trending_watermark_lag_seconds") if m else None
        return seen[0] is not None and pred(seen[0])
    # while the partitions are active the lag is the events' age (years); it may already be over
    ctx.wait_for("the watermark lag back to 0 once every partition is idle",
                 lambda: lag(lambda v: v == 0), timeout=120, interval=0.5, job=j,
                 last=lambda: "gauge %r" % seen[0])
    ctx.check(j.terminate() == 0, "exit after SIGTERM != 0", j)
    ctx.log("the lag gauge went to 0 once the partitions of the old events were idle")


def old_scenario(ctx, broker):
    now = int(time.time() * 1000)
    fresh = [("fr%d" % i, json.dumps({"user_id": "fr%d" % i, "article_id": "art-now-%d" % i,
                                      "session_id": "s-now-%d" % i, "ts": now - 20000 + 1000 * i}))
             for i in range(20)]
    stray = ("old2005", json.dumps({"user_id": "old2005", "article_id": "art-2005",
                                    "session_id": "s-2005", "ts": "2005-01-01T00:00:00Z"}))
    acclib.kcat_produce(ctx, broker, "read-events", fresh[:10] + [stray] + fresh[10:],
                        tag="old2005")
    j = acclib.Job(ctx, broker, ctx.path("state-old"), tag="old",
                   sets=["admin.enabled=true", "admin.port=0", "trending.idle_ms=1000",
                         "trending.slide_s=1", "trending.window_s=60", "trending.exact=true",
                         "trending.backfill=false"])
    seen = {}

    def done():
        m = j.metrics() or {}
        seen.update(m)
        return (m.get("newsflow_trending_old_events_total") == 1 and
                m.get("newsflow_trending_counted_events_total") == len(fresh) and
                acclib.count_topic(ctx, broker, "trending") > 0)
    ctx.wait_for("the 2005 event left out of trending, the current ones counted", done,
                 timeout=120, interval=0.5, job=j,
                 last=lambda: "old %r counted %r" % (
                     seen.get("newsflow_trending_old_events_total"),
                     seen.get("newsflow_trending_counted_events_total")))
    acclib.wait_all_consumed(ctx, j, broker, len(fresh) + 1)  # interest takes all 21
    users = {k for k, h, v in acclib.read_outputs(ctx, broker, "interest-updates")}
    ctx.check("old2005" in users, "no interest update for the user of the 2005 event", j)
    ctx.check(j.terminate() == 0, "exit after SIGTERM != 0", j)
    windows = acclib.read_outputs(ctx, broker, "trending")
    early = [v["window_end"] for k, h, v in windows if v["window_end"] < "2020"]
    ctx.check(not early, "%d trending windows dated before 2020, e.g. %s" % (
        len(early), early[:3]), j)
    ctx.log("%d trending windows, none dated 2005; the 2005 event reached interest" %
            len(windows))


def body(ctx):
    broker = acclib.start_broker(ctx, name="trendlag")
    lag_scenario(ctx, broker)
    broker = acclib.start_broker(ctx, name="trendold")
    old_scenario(ctx, broker)


if __name__ == "__main__":
    acclib.main("trending_lag", body)
