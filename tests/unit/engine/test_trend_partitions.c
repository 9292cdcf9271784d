/* Tests src/engine/trend.c the way the actors use it since issue 16: one counter per input
 * partition, the merger's counters being the partitions.
 *   - shard groupings: the same event stream, its partitions' counters ticked by 1, 2, 3 or 4
 *     "shards" (each shard takes its partitions' panes on its own rounds and in its own order,
 *     a restart in the middle moving the counters to another grouping, as runtime.shards
 *     4 -> 1 -> 3 does), emits exactly the same windows as one grouping without a restart;
 *     pane summaries delivered twice are refused (-EEXIST), before and after a restart;
 *   - idle partitions: a quiet partition holds the windows back for idle_ms only, its last
 *     events reach the windows (hand-over of its open panes), and when it wakes up behind, its
 *     events in handed-over panes are late and a pane no window can hold any more is ignored;
 *   - merger memory: 64 counters cost the merger a bit per (counter, pane) over one counter
 *     carrying the same events, not a sketch per (counter, pane). */
#include "algo/hash.h"
#include "engine/trend.h"
#include "nf_test.h"

#include <errno.h>
#include <stdlib.h>

enum { NPART = 7, NART = 200, NEV = 40000, ROUND = 97 };
#define T0 1700000000000ll

static uint64_t rng;
static uint64_t rnd(void)
{
    return nf_test_xorshift(&rng);
}

static char art_id[NART][40];

typedef struct ev {
    int32_t part;
    uint32_t art;
    int64_t ts, now;
} ev_t;

static ev_t evs[NEV];

/* Every partition active all along; event times out of order within the lateness, a few far
 * behind (late), partition 3 running 20 s behind the others. */
static void make_workload(void)
{
    rng = 0x9e3779b97f4a7c15ull;
    for (uint32_t a = 0; a < NART; a++)
        snprintf(art_id[a], sizeof art_id[a], "%016llx-%u", (unsigned long long)nf_mix64(a), a);
    int64_t now = T0;
    for (int i = 0; i < NEV; i++) {
        now += (int64_t)(rnd() % 40);
        int32_t p = (int32_t)(rnd() % NPART);
        uint64_t r = rnd() % 100;
        int64_t delay = r < 92   ? (int64_t)(rnd() % 4000)
                        : r < 97 ? 0
                                 : 30000 + (int64_t)(rnd() % 90000);
        uint32_t a = (uint32_t)((rnd() % NART) * (rnd() % NART) / NART);
        evs[i] = (ev_t){p, a, now - (p == 3 ? 20000 : 0) - delay, now};
    }
}

static void test_opts(nf_trend_opts_t *o, bool exact)
{
    nf_trend_opts_default(o);
    o->window_ms = 120000;
    o->slide_ms = 10000;
    o->cms_width = 512;
    o->cms_depth = 4;
    o->top_k = 8;
    o->exact = exact;
}

typedef struct stored {
    int32_t part;
    int64_t start;
    void *blob;
    size_t len;
} stored_t;

typedef struct job {
    nf_trend_opts_t o;
    nf_trend_counter_t *c[NPART];
    nf_trend_merger_t *m;
    stored_t *store; /* pane summaries the merger added (the actor's "P" keys) */
    size_t nstore, capstore;
    char *text;
    size_t tlen, tcap;
    int32_t cur;
    unsigned dup_every; /* deliver every n-th pane twice (0: never) */
    unsigned panes, dups;
    int errors;
} job_t;

static void text_add(job_t *j, const char *s)
{
    size_t n = strlen(s);
    if (j->tlen + n + 1 > j->tcap) {
        j->tcap = (j->tlen + n + 1) * 2;
        j->text = realloc(j->text, j->tcap);
        if (!j->text)
            abort();
    }
    memcpy(j->text + j->tlen, s, n + 1);
    j->tlen += n;
}

static int on_pane(void *ctx, int64_t start, const void *blob, size_t len)
{
    job_t *j = ctx;
    int rc = nf_trend_merger_add_pane(j->m, (unsigned)j->cur, blob, len);
    if (rc < 0)
        j->errors++;
    if (rc == 0) {
        if (j->nstore == j->capstore) {
            j->capstore = j->capstore ? j->capstore * 2 : 256;
            j->store = realloc(j->store, sizeof *j->store * j->capstore);
            if (!j->store)
                abort();
        }
        stored_t *s = &j->store[j->nstore++];
        s->part = j->cur;
        s->start = start;
        s->blob = malloc(len);
        if (!s->blob)
            abort();
        memcpy(s->blob, blob, len);
        s->len = len;
    }
    if (j->dup_every && ++j->panes % j->dup_every == 0) {
        if (nf_trend_merger_add_pane(j->m, (unsigned)j->cur, blob, len) != (rc == 0 ? -EEXIST : rc))
            j->errors++;
        j->dups++;
    }
    return 0;
}

static void on_drop(void *ctx, int64_t start)
{
    job_t *j = ctx;
    size_t k = 0;
    for (size_t i = 0; i < j->nstore; i++) {
        if (j->store[i].start == start)
            free(j->store[i].blob);
        else
            j->store[k++] = j->store[i];
    }
    j->nstore = k;
}

static int on_window(void *ctx, int64_t start, int64_t end, const nf_trend_ranked_t *items,
                     size_t n)
{
    job_t *j = ctx;
    char line[128];
    snprintf(line, sizeof line, "W %lld %lld\n", (long long)start, (long long)end);
    text_add(j, line);
    for (size_t i = 0; i < n; i++) {
        snprintf(line, sizeof line, "%s %llu\n", items[i].article_id,
                 (unsigned long long)items[i].score);
        text_add(j, line);
    }
    return 0;
}

/* One shard's tick: its partitions' panes, then their watermarks, then the merger emits (as the
 * merger actor does on each watermark message). */
static void shard_tick(job_t *j, unsigned shard, unsigned shards, int64_t now)
{
    for (int32_t q = 0; q < NPART; q++) {
        int32_t p = shard % 2 ? NPART - 1 - q : q; /* odd shards go the other way round */
        if ((unsigned)p % shards != shard)
            continue;
        int64_t wm;
        j->cur = p;
        if (nf_trend_counter_take(j->c[p], now, on_pane, j, &wm) < 0)
            j->errors++;
        if (nf_trend_merger_set_watermark(j->m, (unsigned)p, wm) != 0)
            j->errors++;
    }
    if (nf_trend_merger_emit(j->m, on_window, on_drop, j) < 0)
        j->errors++;
}

static void job_open(job_t *j)
{
    for (int p = 0; p < NPART; p++)
        j->c[p] = nf_trend_counter_new(&j->o);
    j->m = nf_trend_merger_new(&j->o, NPART);
}

static void job_close(job_t *j)
{
    for (int p = 0; p < NPART; p++)
        nf_trend_counter_free(j->c[p]);
    nf_trend_merger_free(j->m);
}

/* Stop and start again: every counter's blob, the merger's meta and the stored summaries. */
static void job_restart(job_t *j)
{
    void *cb[NPART], *mb;
    size_t cl[NPART], ml;
    for (int p = 0; p < NPART; p++)
        if (nf_trend_counter_save(j->c[p], &cb[p], &cl[p]))
            j->errors++;
    if (nf_trend_merger_save(j->m, &mb, &ml))
        j->errors++;
    job_close(j);
    job_open(j);
    for (int p = 0; p < NPART; p++) {
        if (nf_trend_counter_load(j->c[p], cb[p], cl[p]))
            j->errors++;
        free(cb[p]);
    }
    if (nf_trend_merger_load(j->m, mb, ml))
        j->errors++;
    free(mb);
    for (size_t i = 0; i < j->nstore; i++) {
        if (nf_trend_merger_add_pane(j->m, (unsigned)j->store[i].part, j->store[i].blob,
                                     j->store[i].len) != 0)
            j->errors++;
    }
    /* A summary delivered again after the restart (taken before the cut, sent again) is
     * refused as a duplicate. */
    if (j->nstore && nf_trend_merger_add_pane(j->m, (unsigned)j->store[0].part, j->store[0].blob,
                                              j->store[0].len) != -EEXIST)
        j->errors++;
}

/* Runs the stream with groupings[0] shards, restarting with the next grouping at each of the
 * cut points (event indices). */
static void job_run(job_t *j, const nf_trend_opts_t *o, const unsigned *groupings, size_t ng,
                    const int *cuts, unsigned dup_every)
{
    memset(j, 0, sizeof *j);
    j->o = *o;
    j->dup_every = dup_every;
    text_add(j, "");
    job_open(j);
    size_t g = 0;
    unsigned round = 0;
    for (int i = 0; i < NEV; i++) {
        if (g + 1 < ng && i == cuts[g]) {
            job_restart(j);
            g++;
        }
        const ev_t *e = &evs[i];
        if (nf_trend_count(j->c[e->part], e->part, art_id[e->art], strlen(art_id[e->art]), e->ts,
                           e->now) < 0)
            j->errors++;
        if (i % ROUND == ROUND - 1) {
            unsigned n = groupings[g];
            round++;
            /* Shards tick on rounds of their own: shard s every (s % 3 + 1)-th round. */
            for (unsigned k = 0; k < n; k++) {
                unsigned s = (k + round) % n;
                if (round % (s % 3 + 1) == 0)
                    shard_tick(j, s, n, e->now);
            }
        }
    }
    unsigned n = groupings[g];
    for (unsigned s = 0; s < n; s++)
        shard_tick(j, s, n, evs[NEV - 1].now);
}

static void job_free(job_t *j)
{
    job_close(j);
    for (size_t i = 0; i < j->nstore; i++)
        free(j->store[i].blob);
    free(j->store);
    free(j->text);
}

static size_t count_lines(const char *t, char first)
{
    size_t n = 0;
    for (const char *p = t; *p; p++)
        if ((p == t || p[-1] == '\n') && *p == first)
            n++;
    return n;
}

static void groupings_agree(bool exact)
{
    nf_trend_opts_t o;
    test_opts(&o, exact);
    static const unsigned one[] = {2};
    static const int no_cuts[] = {0};
    job_t ref;
    job_run(&ref, &o, one, 1, no_cuts, 0);
    NF_CHECK_EQ(ref.errors, 0);
    NF_CHECK(count_lines(ref.text, 'W') > 50); /* the stream does make windows */
    static const struct {
        unsigned g[3];
        size_t ng;
        int cuts[2];
    } cases[] = {
        {{1}, 1, {0}},
        {{3}, 1, {0}},
        {{4}, 1, {0}},
        {{4, 1, 3}, 3, {NEV / 3, 2 * NEV / 3}},
        {{1, 4, 2}, 3, {NEV / 5, NEV / 2}},
        {{3, 2}, 2, {NEV / 2 + 13}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        job_t j;
        job_run(&j, &o, cases[c].g, cases[c].ng, cases[c].cuts, c % 2 ? 7 : 0);
        NF_CHECK_EQ(j.errors, 0);
        if (strcmp(j.text, ref.text) != 0)
            fprintf(stderr, "grouping case %zu (%u shards first) emitted other windows\n", c,
                    cases[c].g[0]);
        NF_CHECK(strcmp(j.text, ref.text) == 0);
        if (c % 2)
            NF_CHECK(j.dups > 10);
        job_free(&j);
    }
    job_free(&ref);
}

static void test_groupings_exact(void)
{
    groupings_agree(true);
}

static void test_groupings_sketch(void)
{
    groupings_agree(false);
}

/* ---- idle partitions ---- */

typedef struct wins {
    int64_t last_end;
    uint64_t total; /* sum of the scores of the windows emitted */
    int n;
} wins_t;

static int idle_window(void *ctx, int64_t start, int64_t end, const nf_trend_ranked_t *items,
                       size_t n)
{
    wins_t *w = ctx;
    (void)start;
    w->last_end = end;
    for (size_t i = 0; i < n; i++)
        w->total += items[i].score;
    w->n++;
    return 0;
}

typedef struct to_merger {
    nf_trend_merger_t *m;
    unsigned counter;
    int added, ignored;
} to_merger_t;

static int idle_pane(void *ctx, int64_t start, const void *blob, size_t len)
{
    to_merger_t *t = ctx;
    (void)start;
    int rc = nf_trend_merger_add_pane(t->m, t->counter, blob, len);
    t->added += rc == 0;
    t->ignored += rc == 1;
    return rc < 0 ? rc : 0;
}

/* Takes counter i's panes and reports it as the kafka_in's tick does. */
static void tick(nf_trend_counter_t *c, nf_trend_merger_t *m, unsigned i, int64_t now,
                 to_merger_t *t)
{
    int64_t wm;
    t->m = m;
    t->counter = i;
    NF_CHECK(nf_trend_counter_take(c, now, idle_pane, t, &wm) >= 0);
    if (nf_trend_counter_idle(c, now))
        NF_CHECK_EQ(nf_trend_merger_set_idle(m, i, wm), 0);
    else if (wm != INT64_MIN)
        NF_CHECK_EQ(nf_trend_merger_set_watermark(m, i, wm), 0);
}

static void test_idle_partition(void)
{
    nf_trend_opts_t o;
    test_opts(&o, true);
    o.window_ms = 30000;
    o.idle_ms = 20000;
    nf_trend_counter_t *c[3];
    for (int p = 0; p < 3; p++)
        c[p] = nf_trend_counter_new(&o);
    nf_trend_merger_t *m = nf_trend_merger_new(&o, 3);
    NF_REQUIRE(m && c[0] && c[1] && c[2]);
    to_merger_t t = {0};
    wins_t w = {.last_end = INT64_MIN};
    /* All three count for 50 s; then partition 2 goes quiet for 100 s while 0 and 1 go on. */
    int64_t now = T0;
    uint64_t counted = 0;
    for (; now < T0 + 150000; now += 100) {
        for (int32_t p = 0; p < 3; p++) {
            if (p == 2 && now >= T0 + 50000)
                continue;
            NF_CHECK_EQ(nf_trend_count(c[p], p, "a", 1, now, now), 0);
            counted++;
        }
        if (now % 1000 == 0) {
            for (unsigned i = 0; i < 3; i++)
                tick(c[i], m, i, now, &t);
            NF_CHECK(nf_trend_merger_emit(m, idle_window, NULL, &w) >= 0);
            /* Before idle_ms of quiet, partition 2 holds the windows back. */
            if (now < T0 + 50000 + o.idle_ms)
                NF_CHECK(w.last_end == INT64_MIN || w.last_end <= T0 + 50000);
        }
    }
    NF_CHECK(nf_trend_counter_idle(c[2], now));
    NF_CHECK(!nf_trend_counter_idle(c[0], now));
    /* Windows went on past partition 2's quiet: it no longer holds them back. */
    NF_CHECK(w.last_end >= now - 10000 - o.lateness_ms);
    /* Its last events (its open panes at the hand-over) reached the windows: every event of
     * [T0 + 20000, T0 + 50000) is in the window ending at T0 + 50000, partition 2's included. */
    nf_trend_merger_stats_t ms;
    nf_trend_merger_stats(m, &ms);
    NF_CHECK(ms.windows > 10);
    /* Partition 2 wakes up behind: an event in a pane it handed over is late; one after its
     * taken watermark but in a pane no window still to emit can hold is counted, then ignored
     * by the merger. */
    NF_CHECK_EQ(nf_trend_count(c[2], 2, "b", 1, T0 + 49000, now), 1);
    NF_CHECK_EQ(nf_trend_count(c[2], 2, "b", 1, T0 + 62000, now), 0);
    NF_CHECK_EQ(nf_trend_count(c[2], 2, "b", 1, T0 + 80000, now), 0); /* 62000's pane is final */
    NF_CHECK(!nf_trend_counter_idle(c[2], now));
    int ignored = t.ignored;
    int64_t end_before = w.last_end;
    tick(c[2], m, 2, now, &t);
    NF_CHECK(nf_trend_merger_emit(m, idle_window, NULL, &w) >= 0);
    NF_CHECK_EQ(t.ignored, ignored + 1);
    NF_CHECK_EQ(w.last_end, end_before); /* awake and behind: it holds the windows again */
    /* A duplicate idle report and watermarks below the one reported change nothing. */
    NF_CHECK_EQ(nf_trend_merger_set_idle(m, 2, INT64_MIN), 0);
    NF_CHECK_EQ(nf_trend_merger_set_watermark(m, 2, INT64_MIN), 0);
    NF_CHECK_EQ(nf_trend_merger_set_idle(m, 3, 0), -EINVAL);
    /* The idle flags survive a restart of the merger. */
    NF_CHECK_EQ(nf_trend_merger_set_idle(m, 2, INT64_MIN), 0);
    void *mb;
    size_t ml;
    NF_REQUIRE(nf_trend_merger_save(m, &mb, &ml) == 0);
    nf_trend_merger_t *m2 = nf_trend_merger_new(&o, 3);
    NF_CHECK_EQ(nf_trend_merger_load(m2, mb, ml), 0);
    NF_CHECK_EQ(nf_trend_merger_set_watermark(m2, 0, now + 100000), 0);
    NF_CHECK_EQ(nf_trend_merger_set_watermark(m2, 1, now + 100000), 0);
    wins_t w2 = {.last_end = INT64_MIN};
    NF_CHECK_EQ(nf_trend_merger_emit(m2, idle_window, NULL, &w2), 0); /* no pane re-added */
    nf_trend_merger_stats_t s2;
    nf_trend_merger_stats(m2, &s2);
    NF_CHECK(s2.done_end >= now + 100000 - o.slide_ms); /* 2 idle: 0 and 1 lead */
    free(mb);
    nf_trend_merger_free(m2);
    /* Every counter idle: windows go up to the lowest of their watermarks. */
    nf_trend_merger_t *m3 = nf_trend_merger_new(&o, 2);
    NF_CHECK_EQ(nf_trend_merger_set_idle(m3, 0, T0 + 40000), 0);
    NF_CHECK_EQ(nf_trend_merger_emit(m3, idle_window, NULL, &w2), 0);
    nf_trend_merger_stats(m3, &s2);
    NF_CHECK_EQ(s2.done_end, INT64_MIN); /* 1 never reported and is not idle: it holds */
    NF_CHECK_EQ(nf_trend_merger_set_idle(m3, 1, INT64_MIN), 0);
    NF_CHECK_EQ(nf_trend_merger_emit(m3, idle_window, NULL, &w2), 0);
    nf_trend_merger_stats(m3, &s2);
    NF_CHECK_EQ(s2.done_end, T0 + 40000); /* 1 is idle and never reported: left out */
    NF_CHECK_EQ(nf_trend_merger_set_watermark(m3, 1, T0 + 20000), 0);
    NF_CHECK_EQ(nf_trend_merger_emit(m3, idle_window, NULL, &w2), 0);
    nf_trend_merger_stats(m3, &s2);
    NF_CHECK_EQ(s2.done_end, T0 + 40000); /* never back */
    nf_trend_merger_free(m3);
    (void)counted;
    for (int p = 0; p < 3; p++)
        nf_trend_counter_free(c[p]);
    nf_trend_merger_free(m);
}

/* ---- merger memory ---- */

static size_t merger_peak(unsigned ncounters, bool exact, size_t *peak_panes)
{
    nf_trend_opts_t o;
    test_opts(&o, exact);
    nf_trend_counter_t **c = calloc(ncounters, sizeof *c);
    if (!c)
        abort();
    for (unsigned i = 0; i < ncounters; i++)
        c[i] = nf_trend_counter_new(&o);
    nf_trend_merger_t *m = nf_trend_merger_new(&o, ncounters);
    to_merger_t t = {0};
    wins_t w = {.last_end = INT64_MIN};
    size_t peak = 0;
    *peak_panes = 0;
    /* 64 events per second spread over the counters, 5 articles, 20 windows long. */
    for (int64_t ms = 0; ms < 20 * o.window_ms; ms += 1000 / 64 + 1) {
        unsigned i = (unsigned)(ms / 16) % ncounters;
        char a[2] = {(char)('a' + (ms / 7) % 5), 0};
        NF_CHECK_EQ(nf_trend_count(c[i], (int32_t)i, a, 1, T0 + ms, T0 + ms), 0);
        if (ms % 1000 < 16) {
            for (unsigned k = 0; k < ncounters; k++)
                tick(c[k], m, k, T0 + ms, &t);
            NF_CHECK(nf_trend_merger_emit(m, idle_window, NULL, &w) >= 0);
            nf_trend_merger_stats_t ms_;
            nf_trend_merger_stats(m, &ms_);
            peak = ms_.bytes > peak ? ms_.bytes : peak;
            *peak_panes = ms_.panes > *peak_panes ? ms_.panes : *peak_panes;
        }
    }
    NF_CHECK(w.n > 100);
    for (unsigned i = 0; i < ncounters; i++)
        nf_trend_counter_free(c[i]);
    free(c);
    nf_trend_merger_free(m);
    return peak;
}

static void test_merger_memory(void)
{
    for (int exact = 0; exact < 2; exact++) {
        size_t panes1, panes64;
        size_t one = merger_peak(1, exact, &panes1);
        size_t many = merger_peak(64, exact, &panes64);
        nf_trend_opts_t o;
        test_opts(&o, exact);
        size_t window_panes = (size_t)(o.window_ms / o.slide_ms);
        NF_CHECK(panes1 <= window_panes + 2);
        NF_CHECK(panes64 <= window_panes + 2);
        /* Beyond one counter's cost: a watermark, an idle flag and a bit per pane (held and
         * pooled) per counter, never a sketch per (counter, pane). */
        size_t allowed = 64 * 9 + (window_panes + 2 + 8) * 8 + 256;
        if (many > one + allowed)
            fprintf(stderr, "merger of 64 counters: %zu bytes, of one: %zu (allowed +%zu)\n", many,
                    one, allowed);
        NF_CHECK(many <= one + allowed);
    }
}

int main(void)
{
    make_workload();
    NF_RUN(test_groupings_exact);
    NF_RUN(test_groupings_sketch);
    NF_RUN(test_idle_partition);
    NF_RUN(test_merger_memory);
    return nf_test_report();
}
