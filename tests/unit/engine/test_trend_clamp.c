/* Tests the repair of trending state saved before event times were bounded (src/engine/trend.h,
 * nf_trend_counter_clamp / nf_trend_merger_clamp; issue 15, item 2): a counter and a merger that
 * met one event dated 9999-12-31 count every later event as late and emit nothing more, through
 * a save and a load; after the clamp, the same later events are counted, their panes are taken
 * and the merger emits their windows. Sound state is left alone. */
#include "engine/trend.h"
#include "nf_test.h"

#include <stdlib.h>
#include <string.h>

#define NOW    1767225600000ll   /* 2026-01-01T00:00:00Z: the "wall clock" of the test */
#define FUTURE 253402300799999ll /* 9999-12-31T23:59:59.999Z */
#define SKEW   300000ll

typedef struct fixes {
    int n;
    nf_trend_fix_t what[16];
    int64_t old_v[16], new_v[16];
    int drops;
} fixes_t;

static void on_fix(void *ctx, nf_trend_fix_t what, int64_t id, int64_t old_v, int64_t new_v)
{
    fixes_t *f = ctx;
    (void)id;
    if (f->n < 16) {
        f->what[f->n] = what;
        f->old_v[f->n] = old_v;
        f->new_v[f->n] = new_v;
    }
    f->n++;
}

static void on_drop(void *ctx, int64_t pane_start)
{
    (void)pane_start;
    ((fixes_t *)ctx)->drops++;
}

typedef struct relay {
    nf_trend_merger_t *m;
    int panes;
} relay_t;

static int to_merger(void *ctx, int64_t pane_start, const void *blob, size_t len)
{
    relay_t *r = ctx;
    (void)pane_start;
    int rc = nf_trend_merger_add_pane(r->m, 0, blob, len);
    if (rc == 0)
        r->panes++;
    return rc < 0 ? rc : 0;
}

static int count_windows(void *ctx, int64_t ws, int64_t we, const nf_trend_ranked_t *items,
                         size_t n)
{
    (void)ws;
    (void)we;
    (void)items;
    (void)n;
    (*(int *)ctx)++;
    return 0;
}

static void opts(nf_trend_opts_t *o)
{
    nf_trend_opts_default(o);
    o->window_ms = 60000;
    o->slide_ms = 10000;
    o->lateness_ms = 1000;
    o->exact = true;
}

/* The damage as an old version left it: the poisoned counter and merger, saved and loaded. */
static void poisoned(const nf_trend_opts_t *o, nf_trend_counter_t **cp, nf_trend_merger_t **mp)
{
    nf_trend_counter_t *c = nf_trend_counter_new(o);
    nf_trend_merger_t *m = nf_trend_merger_new(o, 1);
    NF_REQUIRE(c && m);
    relay_t r = {m, 0};
    int64_t wm = INT64_MIN;
    NF_CHECK_EQ(nf_trend_count(c, 0, "a", 1, NOW - 30000, NOW), 0);
    NF_CHECK_EQ(nf_trend_count(c, 0, "far", 3, FUTURE, NOW), 0);
    NF_REQUIRE(nf_trend_counter_take(c, NOW, to_merger, &r, &wm) >= 0);
    NF_CHECK(wm == FUTURE - o->lateness_ms);
    nf_trend_merger_set_watermark(m, 0, wm);
    int windows = 0;
    NF_REQUIRE(nf_trend_merger_emit(m, count_windows, NULL, &windows) >= 0);
    /* Stuck: a later on-time event is late. */
    NF_CHECK_EQ(nf_trend_count(c, 0, "b", 1, NOW + 1000, NOW + 1000), 1);

    void *cb = NULL, *mb = NULL;
    size_t cl = 0, ml = 0;
    NF_REQUIRE(nf_trend_counter_save(c, &cb, &cl) == 0);
    NF_REQUIRE(nf_trend_merger_save(m, &mb, &ml) == 0);
    nf_trend_counter_free(c);
    nf_trend_merger_free(m);
    *cp = nf_trend_counter_new(o);
    *mp = nf_trend_merger_new(o, 1);
    NF_REQUIRE(*cp && *mp);
    NF_REQUIRE(nf_trend_counter_load(*cp, cb, cl) == 0);
    NF_REQUIRE(nf_trend_merger_load(*mp, mb, ml) == 0);
    free(cb);
    free(mb);
}

static void test_stuck_without_repair(void)
{
    nf_trend_opts_t o;
    opts(&o);
    nf_trend_counter_t *c;
    nf_trend_merger_t *m;
    poisoned(&o, &c, &m);
    /* The watermark survived the restart: still late. */
    NF_CHECK_EQ(nf_trend_count(c, 0, "b", 1, NOW + 2000, NOW + 2000), 1);
    nf_trend_counter_free(c);
    nf_trend_merger_free(m);
}

static void test_repair_unsticks(void)
{
    nf_trend_opts_t o;
    opts(&o);
    nf_trend_counter_t *c;
    nf_trend_merger_t *m;
    poisoned(&o, &c, &m);
    int64_t now = NOW + 5000;
    fixes_t f = {0};
    size_t n = nf_trend_counter_clamp(c, now + SKEW, now, on_fix, &f);
    /* the partition's max event time, the taken watermark, the open pane holding the far event */
    NF_CHECK_EQ(n, 3);
    NF_CHECK_EQ(f.n, 3);
    NF_CHECK_EQ(f.what[0], NF_TREND_FIX_PARTITION_MAX_TS);
    NF_CHECK(f.old_v[0] == FUTURE && f.new_v[0] == now);
    NF_CHECK_EQ(f.what[1], NF_TREND_FIX_TAKEN_WM);
    NF_CHECK(f.old_v[1] == FUTURE - o.lateness_ms && f.new_v[1] == now - o.lateness_ms);
    NF_CHECK_EQ(f.what[2], NF_TREND_FIX_COUNTER_PANE);
    NF_CHECK(f.new_v[2] == INT64_MIN);
    nf_trend_counter_stats_t cs;
    nf_trend_counter_stats(c, &cs);
    NF_CHECK_EQ(cs.open_panes, 0);

    fixes_t g = {0};
    n = nf_trend_merger_clamp(m, now + SKEW, now, on_fix, on_drop, &g);
    NF_CHECK_EQ(n, 2); /* the counter's watermark and the last window end */
    NF_CHECK_EQ(g.what[0], NF_TREND_FIX_MERGER_WM);
    NF_CHECK(g.new_v[0] == now - o.lateness_ms);
    NF_CHECK_EQ(g.what[1], NF_TREND_FIX_MERGER_DONE);
    NF_CHECK(g.new_v[1] == (now - o.lateness_ms) / o.slide_ms * o.slide_ms);
    NF_CHECK_EQ(g.drops, 0);

    /* Trending flows again: later events count, their panes are handed over, windows come. */
    int64_t t = now + 1000;
    for (int i = 0; i < 30; i++, t += 1000)
        NF_CHECK_EQ(nf_trend_count(c, 0, "b", 1, t, t), 0);
    relay_t r = {m, 0};
    int64_t wm = INT64_MIN;
    NF_REQUIRE(nf_trend_counter_take(c, t, to_merger, &r, &wm) > 0);
    NF_CHECK(r.panes > 0);
    NF_CHECK(wm == t - 1000 - o.lateness_ms);
    nf_trend_merger_set_watermark(m, 0, wm);
    int windows = 0;
    NF_CHECK(nf_trend_merger_emit(m, count_windows, NULL, &windows) > 0);
    NF_CHECK(windows > 0);

    /* Repaired state is sound: a second clamp changes nothing. */
    NF_CHECK_EQ(nf_trend_counter_clamp(c, t + SKEW, t, on_fix, &f), 0);
    NF_CHECK_EQ(nf_trend_merger_clamp(m, t + SKEW, t, on_fix, on_drop, &g), 0);
    nf_trend_counter_free(c);
    nf_trend_merger_free(m);
}

/* A merger pane beyond the bound (handed over once the far partition's watermark passed it) is
 * dropped and reported, so its persisted summaries can be deleted. */
static void test_merger_drops_future_pane(void)
{
    nf_trend_opts_t o;
    opts(&o);
    nf_trend_counter_t *c = nf_trend_counter_new(&o);
    nf_trend_merger_t *m = nf_trend_merger_new(&o, 1);
    NF_REQUIRE(c && m);
    int64_t far = NOW + 86400000; /* a day ahead: two events, the first pane becomes final */
    NF_CHECK_EQ(nf_trend_count(c, 0, "x", 1, far, NOW), 0);
    NF_CHECK_EQ(nf_trend_count(c, 0, "x", 1, far + 20000, NOW), 0);
    relay_t r = {m, 0};
    int64_t wm;
    NF_REQUIRE(nf_trend_counter_take(c, NOW, to_merger, &r, &wm) == 1);
    fixes_t g = {0};
    NF_CHECK_EQ(nf_trend_merger_clamp(m, NOW + SKEW, NOW, on_fix, on_drop, &g), 1);
    NF_CHECK_EQ(g.what[0], NF_TREND_FIX_MERGER_PANE);
    NF_CHECK_EQ(g.drops, 1);
    nf_trend_merger_stats_t ms;
    nf_trend_merger_stats(m, &ms);
    NF_CHECK_EQ(ms.panes, 0);
    nf_trend_counter_free(c);
    nf_trend_merger_free(m);
}

/* Sound state, with a watermark inside the bound: nothing changes. */
static void test_sound_state_untouched(void)
{
    nf_trend_opts_t o;
    opts(&o);
    nf_trend_counter_t *c = nf_trend_counter_new(&o);
    NF_REQUIRE(c);
    NF_CHECK_EQ(nf_trend_count(c, 0, "a", 1, NOW + SKEW, NOW), 0); /* at the bound: accepted */
    NF_CHECK_EQ(nf_trend_counter_clamp(c, NOW + SKEW, NOW, NULL, NULL), 0);
    nf_trend_counter_free(c);
}

int main(void)
{
    NF_RUN(test_stuck_without_repair);
    NF_RUN(test_repair_unsticks);
    NF_RUN(test_merger_drops_future_pane);
    NF_RUN(test_sound_state_untouched);
    return nf_test_report();
}
