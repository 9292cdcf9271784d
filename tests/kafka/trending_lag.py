"""newsflow_trending_watermark_lag_seconds once every partition is idle (issue 37): a few read
events dated years ago (acclib's events are dated 2023) make the watermark years old; once the
partitions have been idle for trending.idle_ms they hold no window back, and the gauge must say
0 rather than keep the years (NewsflowTrendingStale fired while trending was current).

Usage: NF_TEST_BROKER=kafka:HOST:PORT python3 trending_lag.py NEWSFLOW SRCDIR
"""
import os
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recovery"))
import acclib  # noqa: E402


def body(ctx):
    broker = acclib.start_broker(ctx, name="trendlag")
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


if __name__ == "__main__":
    acclib.main("trending_lag", body)
