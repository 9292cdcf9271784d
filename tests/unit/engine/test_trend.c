/* Tests src/engine/trend.c against a batch recomputation: a seeded workload of read events over
 * six partitions and three counters (out of order within the lateness, some far later, idle
 * stretches, a partition that wakes up far behind), replayed through counters and a merger the
 * way the trending actors will drive them. The reference model (below, separate code) classifies
 * every event on time / late by replaying each partition in arrival order and recomputes every
 * window's counts from scratch. Exact mode must match it item for item; sketch mode must stay
 * within the Count-Min bounds and never miss a clear heavy hitter. A run saved and restored
 * half-way (counters, merger meta, re-added pane summaries) must emit exactly what an
 * uninterrupted run emits, and corrupt blobs must be refused. */
#include "algo/hash.h"
#include "engine/trend.h"
#include "nf_test.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

enum { NPART = 6, NCOUNTER = 3, NART = 500, NEV = 60000, ROUND = 400 };
#define T0 1700000000000ll

static uint64_t rng;
static uint64_t rnd(void)
{
    return nf_test_xorshift(&rng);
}

static char art_id[NART][NF_TREND_ID_MAX + 1];

static void make_ids(void)
{
    for (uint32_t a = 0; a < NART; a++) {
        /* Mostly 32-hex ids; every 7th a different length (1..128) to exercise the encoding
         * and the ranking's tie-break on byte order. */
        size_t len = a % 7 == 0 ? 1 + a % NF_TREND_ID_MAX : 32;
        for (size_t i = 0; i < len; i++)
            art_id[a][i] = "0123456789abcdef"[nf_mix64(a * 1000 + i / 16) >> (4 * (i % 16)) & 15];
        art_id[a][len] = '\0';
    }
}

typedef struct ev {
    int32_t part;
    uint32_t art;
    int64_t ts, now;
} ev_t;

static ev_t evs[NEV];

static void make_workload(uint64_t seed)
{
    rng = seed;
    int64_t now = T0;
    for (int i = 0; i < NEV; i++) {
        now += (int64_t)(rnd() % 50);
        int64_t t = now - T0;
        int32_t p;
        for (;;) {
            p = (int32_t)(rnd() % NPART);
            /* Idle stretches (longer than idle_ms) for partitions 4 and 5. */
            if (p == 4 && t > 300000 && t < 420000)
                continue;
            if (p == 5 && t > 600000 && t < 900000)
                continue;
            break;
        }
        int64_t skew = p == 3 ? 20000 : 0;
        if (p == 5 && t >= 900000 && t < 1000000)
            skew = 200000; /* wakes up far behind: its pane is already final */
        uint64_t r = rnd() % 100;
        int64_t delay = r < 90   ? (int64_t)(rnd() % 4000)
                        : r < 97 ? (int64_t)(rnd() % 15000)
                                 : 60000 + (int64_t)(rnd() % 600000);
        double u = (double)(rnd() >> 11) / 9007199254740992.0;
        uint32_t a = (uint32_t)exp(u * log(NART + 1.0)) - 1;
        evs[i] = (ev_t){p, a < NART ? a : NART - 1, now - skew - delay, now};
    }
}

/* Test-only allocation: out of memory ends the test run. */
static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q)
        abort();
    return q;
}

/* ---- text of emitted windows, for exact comparison ---- */

typedef struct text {
    char *p;
    size_t len, cap;
} text_t;

static void text_add(text_t *t, const char *s)
{
    size_t n = strlen(s);
    if (t->len + n + 1 > t->cap) {
        t->cap = (t->len + n + 1) * 2;
        t->p = xrealloc(t->p, t->cap);
    }
    memcpy(t->p + t->len, s, n + 1);
    t->len += n;
}

/* ---- the engine, driven like the actors will ---- */

typedef struct stored {
    unsigned counter;
    int64_t start;
    void *blob;
    size_t len;
} stored_t;

typedef struct win {
    int64_t start, end;
    size_t n;
    uint32_t art[64];
    uint64_t score[64];
} win_t;

typedef struct run {
    nf_trend_opts_t o;
    nf_trend_counter_t *c[NCOUNTER];
    nf_trend_merger_t *m;
    stored_t *store; /* the persisted pane summaries (the integrator's RocksDB copy) */
    size_t nstore, capstore;
    text_t text;
    text_t panes; /* one line per pane summary handed over: counter, start, hash of the bytes */
    win_t *wins;
    size_t nwins;
    unsigned cur;
    int errors;
    size_t max_merger_panes, max_open_panes;
    void *final[NCOUNTER]; /* the counters' saved state at the end */
    size_t final_len[NCOUNTER];
} run_t;

static uint32_t art_of(const char *id)
{
    for (uint32_t a = 0; a < NART; a++)
        if (strcmp(art_id[a], id) == 0)
            return a;
    return UINT32_MAX;
}

/* ---- ranking by story (nf_trend_merger_set_group) ---- */

enum { NSTORY = 97 };
static bool grouped; /* run_open sets story_of on the merger */

/* Story of an article: every 5th stands alone (the merger's "own group"), the others fall in
 * one of NSTORY stories whose keys are not article ids (other length, other bytes). */
static int story_index(uint32_t a)
{
    return a % 5 == 0 ? -1 : (int)(nf_mix64(a + 77) % NSTORY);
}

static size_t story_key(uint32_t a, char out[NF_TREND_ID_MAX + 1])
{
    int s = story_index(a);
    if (s < 0)
        return 0;
    return (size_t)snprintf(out, NF_TREND_ID_MAX + 1, "story-%02d", s);
}

static size_t story_of(void *ctx, const char *id, size_t len, char out[NF_TREND_ID_MAX + 1])
{
    (void)ctx;
    (void)len;
    return story_key(art_of(id), out);
}

static int on_pane(void *ctx, int64_t start, const void *blob, size_t len)
{
    run_t *r = ctx;
    if (r->nstore == r->capstore) {
        r->capstore = r->capstore ? r->capstore * 2 : 256;
        r->store = xrealloc(r->store, sizeof *r->store * r->capstore);
    }
    stored_t *s = &r->store[r->nstore++];
    s->counter = r->cur;
    s->start = start;
    s->blob = malloc(len);
    memcpy(s->blob, blob, len);
    s->len = len;
    char line[96];
    snprintf(line, sizeof line, "%u %lld %016llx\n", r->cur, (long long)start,
             (unsigned long long)nf_hash64(blob, len, 1));
    text_add(&r->panes, line);
    if (nf_trend_merger_add_pane(r->m, r->cur, blob, len) != 0)
        r->errors++;
    return 0;
}

static void on_drop(void *ctx, int64_t start)
{
    run_t *r = ctx;
    size_t k = 0;
    for (size_t i = 0; i < r->nstore; i++) {
        if (r->store[i].start == start)
            free(r->store[i].blob);
        else
            r->store[k++] = r->store[i];
    }
    r->nstore = k;
}

static int on_window(void *ctx, int64_t start, int64_t end, const nf_trend_ranked_t *items,
                     size_t n)
{
    run_t *r = ctx;
    char line[256];
    snprintf(line, sizeof line, "W %lld %lld\n", (long long)start, (long long)end);
    text_add(&r->text, line);
    r->wins = xrealloc(r->wins, sizeof *r->wins * (r->nwins + 1));
    win_t *w = &r->wins[r->nwins++];
    w->start = start;
    w->end = end;
    w->n = n;
    if (n > r->o.top_k || n > 64)
        r->errors++;
    for (size_t i = 0; grouped && i < n; i++) {
        snprintf(line, sizeof line, "%s %llu %s %u\n", items[i].article_id,
                 (unsigned long long)items[i].score, items[i].lead, items[i].members);
        text_add(&r->text, line);
        if (strlen(items[i].lead) != items[i].lead_len || art_of(items[i].lead) == UINT32_MAX)
            r->errors++;
    }
    for (size_t i = 0; !grouped && i < n && i < 64; i++) {
        snprintf(line, sizeof line, "%s %llu\n", items[i].article_id,
                 (unsigned long long)items[i].score);
        text_add(&r->text, line);
        w->art[i] = art_of(items[i].article_id);
        w->score[i] = items[i].score;
        if (w->art[i] == UINT32_MAX || strlen(items[i].article_id) != items[i].len)
            r->errors++;
    }
    return 0;
}

static void run_round(run_t *r, int64_t now)
{
    for (unsigned i = 0; i < NCOUNTER; i++) {
        int64_t wm;
        r->cur = i;
        if (nf_trend_counter_take(r->c[i], now, on_pane, r, &wm) < 0)
            r->errors++;
        nf_trend_merger_set_watermark(r->m, i, wm);
        nf_trend_counter_stats_t cs;
        nf_trend_counter_stats(r->c[i], &cs);
        if (cs.open_panes > r->max_open_panes)
            r->max_open_panes = cs.open_panes;
    }
    if (nf_trend_merger_emit(r->m, on_window, on_drop, r) < 0)
        r->errors++;
    nf_trend_merger_stats_t ms;
    nf_trend_merger_stats(r->m, &ms);
    if (ms.panes > r->max_merger_panes)
        r->max_merger_panes = ms.panes;
}

static void run_open(run_t *r)
{
    for (unsigned i = 0; i < NCOUNTER; i++)
        r->c[i] = nf_trend_counter_new(&r->o);
    r->m = nf_trend_merger_new(&r->o, NCOUNTER);
    if (grouped)
        nf_trend_merger_set_group(r->m, story_of, NULL);
}

static void run_close_objects(run_t *r)
{
    for (unsigned i = 0; i < NCOUNTER; i++)
        nf_trend_counter_free(r->c[i]);
    nf_trend_merger_free(r->m);
}

/* Saves everything, frees the objects, restores into fresh ones (the crash/restart path). */
static void run_restart(run_t *r)
{
    void *cb[NCOUNTER], *mb;
    size_t cl[NCOUNTER], ml;
    for (unsigned i = 0; i < NCOUNTER; i++)
        if (nf_trend_counter_save(r->c[i], &cb[i], &cl[i]))
            r->errors++;
    if (nf_trend_merger_save(r->m, &mb, &ml))
        r->errors++;
    run_close_objects(r);
    run_open(r);
    for (unsigned i = 0; i < NCOUNTER; i++) {
        if (nf_trend_counter_load(r->c[i], cb[i], cl[i]))
            r->errors++;
        free(cb[i]);
    }
    if (nf_trend_merger_load(r->m, mb, ml))
        r->errors++;
    free(mb);
    for (size_t i = 0; i < r->nstore; i++)
        if (nf_trend_merger_add_pane(r->m, r->store[i].counter, r->store[i].blob,
                                     r->store[i].len) != 0)
            r->errors++;
}

static void run_engine(run_t *r, const nf_trend_opts_t *o, int restart_at)
{
    memset(r, 0, sizeof *r);
    r->o = *o;
    text_add(&r->text, "");
    text_add(&r->panes, "");
    run_open(r);
    for (int i = 0; i < NEV; i++) {
        if (i == restart_at)
            run_restart(r);
        const ev_t *e = &evs[i];
        int rc = nf_trend_count(r->c[e->part % NCOUNTER], e->part, art_id[e->art],
                                strlen(art_id[e->art]), e->ts, e->now);
        if (rc < 0)
            r->errors++;
        if (i % ROUND == ROUND - 1)
            run_round(r, e->now);
    }
    run_round(r, evs[NEV - 1].now);
    for (unsigned i = 0; i < NCOUNTER; i++)
        if (nf_trend_counter_save(r->c[i], &r->final[i], &r->final_len[i]))
            r->errors++;
}

static void run_free(run_t *r)
{
    run_close_objects(r);
    for (unsigned i = 0; i < NCOUNTER; i++)
        free(r->final[i]);
    for (size_t i = 0; i < r->nstore; i++)
        free(r->store[i].blob);
    free(r->store);
    free(r->text.p);
    free(r->panes.p);
    free(r->wins);
}

/* ---- the reference model: batch recomputation ---- */

#define MAXPANES 1024
typedef struct model {
    int64_t base; /* pane index 0 starts here */
    uint64_t counts[MAXPANES][NART];
    uint64_t late[NPART];
    int64_t wmax;
    text_t text;
    size_t nwins;
    win_t *wins;
    uint64_t *truth; /* per window: NART true counts */
    uint64_t *total; /* per window: N */
} model_t;

static int64_t floordiv(int64_t a, int64_t b)
{
    return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

static int cmp_rank_ctx(const void *a, const void *b, void *arg)
{
    const uint64_t *cnt = arg;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (cnt[x] != cnt[y])
        return cnt[x] > cnt[y] ? -1 : 1;
    return strcmp(art_id[x], art_id[y]);
}

static void model_build(model_t *md, const nf_trend_opts_t *o)
{
    memset(md, 0, sizeof *md);
    text_add(&md->text, "");
    md->base = floordiv(T0 - 2 * 3600000ll, o->slide_ms) * o->slide_ms;
    int64_t max_ts[NPART] = {0}, last_now[NPART] = {0}, taken[NCOUNTER];
    bool seen[NPART] = {false};
    for (int c = 0; c < NCOUNTER; c++)
        taken[c] = INT64_MIN;
    for (int i = 0; i < NEV; i++) {
        const ev_t *e = &evs[i];
        int c = e->part % NCOUNTER;
        int64_t start = floordiv(e->ts, o->slide_ms) * o->slide_ms;
        bool late = (seen[e->part] && e->ts < max_ts[e->part] - o->lateness_ms) ||
                    (taken[c] != INT64_MIN && start + o->slide_ms <= taken[c]);
        if (!seen[e->part] || e->ts > max_ts[e->part])
            max_ts[e->part] = e->ts;
        seen[e->part] = true;
        last_now[e->part] = e->now;
        if (late) {
            md->late[e->part]++;
        } else {
            int64_t k = (start - md->base) / o->slide_ms;
            if (k >= 0 && k < MAXPANES)
                md->counts[k][e->art]++;
        }
        bool round = i % ROUND == ROUND - 1 || i == NEV - 1;
        for (int cc = 0; round && cc < NCOUNTER; cc++) {
            int64_t wm = INT64_MAX;
            bool any = false;
            for (int p = cc; p < NPART; p += NCOUNTER)
                if (seen[p] && e->now - last_now[p] < o->idle_ms) {
                    any = true;
                    wm = max_ts[p] - o->lateness_ms < wm ? max_ts[p] - o->lateness_ms : wm;
                }
            if (any && wm > taken[cc])
                taken[cc] = wm;
        }
    }
    int64_t g = INT64_MAX;
    for (int c = 0; c < NCOUNTER; c++)
        g = taken[c] < g ? taken[c] : g;
    md->wmax = g == INT64_MIN ? INT64_MIN : floordiv(g, o->slide_ms) * o->slide_ms;
    int64_t panes_per_window = o->window_ms / o->slide_ms;
    uint64_t cnt[NART];
    uint32_t order[NART];
    for (int64_t k = 0; k < MAXPANES + panes_per_window; k++) {
        int64_t W = md->base + (k + 1) * o->slide_ms; /* windows whose last pane is k */
        if (md->wmax == INT64_MIN || W > md->wmax)
            break;
        uint64_t n = 0;
        memset(cnt, 0, sizeof cnt);
        for (int64_t j = k - panes_per_window + 1; j <= k; j++)
            for (uint32_t a = 0; j >= 0 && j < MAXPANES && a < NART; a++) {
                cnt[a] += md->counts[j][a];
                n += md->counts[j][a];
            }
        if (!n)
            continue;
        for (uint32_t a = 0; a < NART; a++)
            order[a] = a;
        qsort_r(order, NART, sizeof *order, cmp_rank_ctx, cnt);
        char line[256];
        snprintf(line, sizeof line, "W %lld %lld\n", (long long)(W - o->window_ms), (long long)W);
        text_add(&md->text, line);
        md->wins = xrealloc(md->wins, sizeof *md->wins * (md->nwins + 1));
        md->truth = xrealloc(md->truth, sizeof *md->truth * NART * (md->nwins + 1));
        md->total = xrealloc(md->total, sizeof *md->total * (md->nwins + 1));
        win_t *w = &md->wins[md->nwins];
        memcpy(md->truth + NART * md->nwins, cnt, sizeof cnt);
        md->total[md->nwins] = n;
        md->nwins++;
        w->start = W - o->window_ms;
        w->end = W;
        w->n = 0;
        for (uint32_t i = 0; i < o->top_k && cnt[order[i]] > 0; i++) {
            snprintf(line, sizeof line, "%s %llu\n", art_id[order[i]],
                     (unsigned long long)cnt[order[i]]);
            text_add(&md->text, line);
            w->art[w->n] = order[i];
            w->score[w->n++] = cnt[order[i]];
        }
    }
}

static void model_free(model_t *md)
{
    free(md->text.p);
    free(md->wins);
    free(md->truth);
    free(md->total);
}

static model_t model; /* large: static */

static void test_opts(nf_trend_opts_t *o, bool exact)
{
    nf_trend_opts_default(o);
    o->window_ms = 300000;
    o->slide_ms = 10000;
    o->cms_width = 1024;
    o->cms_depth = 5;
    o->top_k = 10;
    o->exact = exact;
}

static void check_late(const run_t *r)
{
    uint64_t late = 0, want = 0;
    for (int32_t p = 0; p < NPART; p++) {
        NF_CHECK_EQ(nf_trend_counter_late(r->c[p % NCOUNTER], p), model.late[p]);
        want += model.late[p];
    }
    for (unsigned i = 0; i < NCOUNTER; i++) {
        nf_trend_counter_stats_t s;
        nf_trend_counter_stats(r->c[i], &s);
        late += s.late;
    }
    NF_CHECK_EQ(late, want);
    NF_CHECK(want > NEV / 100); /* the workload does exercise lateness */
}

static void test_exact_matches_batch(void)
{
    for (uint64_t seed = 1; seed <= 2; seed++) {
        nf_trend_opts_t o;
        test_opts(&o, true);
        if (seed == 2) { /* other shapes: no lateness allowed, shorter idle, wider panes */
            o.window_ms = 120000;
            o.slide_ms = 20000;
            o.lateness_ms = 0;
            o.idle_ms = 30000;
            o.top_k = 5;
        }
        make_workload(seed * 0x5851f42d4c957f2dull);
        model_build(&model, &o);
        run_t r;
        run_engine(&r, &o, -1);
        NF_CHECK_EQ(r.errors, 0);
        NF_CHECK(model.nwins > 60);
        NF_CHECK_EQ(r.nwins, model.nwins);
        NF_CHECK(strcmp(r.text.p, model.text.p) == 0);
        check_late(&r);
        /* Bounded memory: the merger keeps about one window of panes. */
        NF_CHECK(r.max_merger_panes <= (size_t)(o.window_ms / o.slide_ms) + 40);
        NF_CHECK(r.max_open_panes < 120);
        run_free(&r);
        model_free(&model);
    }
}

static void test_sketch_within_bounds(void)
{
    nf_trend_opts_t o;
    test_opts(&o, false);
    make_workload(0x2545f4914f6cdd1dull);
    model_build(&model, &o);
    run_t r;
    run_engine(&r, &o, -1);
    NF_CHECK_EQ(r.errors, 0);
    NF_REQUIRE(r.nwins == model.nwins);
    check_late(&r);
    size_t items = 0, over = 0, missed = 0;
    for (size_t w = 0; w < r.nwins; w++) {
        const win_t *ew = &r.wins[w], *mw = &model.wins[w];
        const uint64_t *truth = model.truth + NART * w;
        double eps_n = exp(1.0) / o.cms_width * (double)model.total[w];
        NF_CHECK(ew->start == mw->start && ew->end == mw->end);
        NF_CHECK_EQ(ew->n, mw->n);
        for (size_t i = 0; i < ew->n; i++) {
            items++;
            NF_CHECK(ew->score[i] >= truth[ew->art[i]]);
            if ((double)(ew->score[i] - truth[ew->art[i]]) > eps_n)
                over++;
            if (i > 0) /* ranked */
                NF_CHECK(ew->score[i - 1] >= ew->score[i]);
        }
        /* Every clear heavy hitter is reported. */
        uint64_t kth = mw->n == o.top_k ? mw->score[o.top_k - 1] : 0;
        for (uint32_t a = 0; a < NART; a++) {
            if ((double)truth[a] <= (double)kth + eps_n)
                continue;
            bool found = false;
            for (size_t i = 0; i < ew->n; i++)
                found |= ew->art[i] == a;
            missed += !found;
        }
    }
    NF_CHECK(items > 1000);
    NF_CHECK((double)over <= exp(-(double)o.cms_depth) * (double)items + 1);
    NF_CHECK_EQ(missed, 0);
    run_free(&r);
    model_free(&model);
}

typedef struct gsum {
    char key[NF_TREND_ID_MAX + 1];
    uint64_t sum;
    uint32_t lead, members;
} gsum_t;

static int cmp_gsum(const void *a, const void *b)
{
    const gsum_t *x = a, *y = b;
    if (x->sum != y->sum)
        return x->sum > y->sum ? -1 : 1;
    if (!x->members || !y->members)
        return (int)!x->members - (int)!y->members;
    return strcmp(art_id[x->lead], art_id[y->lead]);
}

/* The model's windows ranked by story: each window's true counts (model_build) summed over the
 * articles of each story, recounted here from scratch. */
static void model_by_story(const nf_trend_opts_t *o, text_t *out)
{
    static gsum_t g[NSTORY + NART];
    text_add(out, "");
    for (size_t w = 0; w < model.nwins; w++) {
        const uint64_t *truth = model.truth + NART * w;
        memset(g, 0, sizeof g);
        for (uint32_t a = 0; a < NART; a++) {
            if (!truth[a])
                continue;
            int s = story_index(a);
            gsum_t *x = &g[s < 0 ? NSTORY + a : (uint32_t)s];
            if (s < 0)
                memcpy(x->key, art_id[a], sizeof x->key);
            else
                story_key(a, x->key);
            if (!x->members || truth[a] > truth[x->lead] ||
                (truth[a] == truth[x->lead] && strcmp(art_id[a], art_id[x->lead]) < 0))
                x->lead = a;
            x->sum += truth[a];
            x->members++;
        }
        qsort(g, NSTORY + NART, sizeof *g, cmp_gsum);
        char line[320];
        snprintf(line, sizeof line, "W %lld %lld\n", (long long)model.wins[w].start,
                 (long long)model.wins[w].end);
        text_add(out, line);
        for (size_t i = 0; i < o->top_k && g[i].sum; i++) {
            snprintf(line, sizeof line, "%.128s %llu %.128s %u\n", g[i].key,
                     (unsigned long long)g[i].sum, art_id[g[i].lead], g[i].members);
            text_add(out, line);
        }
    }
}

/* Trending by story equals a recount over each story's members (exact mode), through a restart
 * half-way; sketch mode emits the same windows (its scores are sums of the members' estimates). */
static void test_group_matches_recount(void)
{
    nf_trend_opts_t o;
    test_opts(&o, true);
    make_workload(0x9e3779b97f4a7c15ull);
    model_build(&model, &o);
    text_t want = {0};
    model_by_story(&o, &want);
    grouped = true;
    run_t r;
    run_engine(&r, &o, NEV / 2);
    NF_CHECK_EQ(r.errors, 0);
    NF_CHECK(model.nwins > 60);
    NF_CHECK_EQ(r.nwins, model.nwins);
    NF_CHECK(strcmp(r.text.p, want.p) == 0);
    if (strcmp(r.text.p, want.p) != 0) {
        size_t i = 0;
        while (r.text.p[i] == want.p[i])
            i++;
        while (i > 0 && want.p[i - 1] != '\n')
            i--;
        fprintf(stderr, "got  %.300s\nwant %.300s\n", r.text.p + i, want.p + i);
    }
    /* the workload does put several members of one story in a window */
    NF_CHECK(strstr(want.p, "story-") != NULL);
    run_free(&r);

    test_opts(&o, false);
    run_engine(&r, &o, -1);
    NF_CHECK_EQ(r.errors, 0);
    NF_CHECK_EQ(r.nwins, model.nwins);
    grouped = false;
    run_free(&r);
    free(want.p);
    model_free(&model);
}

static void test_restart_identity(void)
{
    for (int mode = 0; mode < 3; mode++) {
        nf_trend_opts_t o;
        test_opts(&o, mode == 2);
        o.cms_width = 256; /* identity does not depend on the width; a narrow one is faster */
        if (mode == 1)
            o.candidates = 12; /* a tight candidate set: evictions on every pane */
        make_workload(0x853c49e6748fea9bull + (uint64_t)mode);
        run_t a, b;
        run_engine(&a, &o, -1);
        const int at[] = {NEV / 3 + 17, 2 * NEV / 3 + 201};
        for (size_t k = 0; k < sizeof at / sizeof *at; k++) {
            run_engine(&b, &o, at[k]);
            NF_CHECK_EQ(b.errors, 0);
            NF_CHECK(a.nwins > 100 && a.nwins == b.nwins);
            NF_CHECK(strcmp(a.text.p, b.text.p) == 0);
            NF_CHECK(strcmp(a.panes.p, b.panes.p) == 0); /* same summaries, byte for byte */
            /* The counters' whole state (open panes, candidate sets) evolved identically. */
            for (unsigned i = 0; i < NCOUNTER; i++)
                NF_CHECK(a.final_len[i] == b.final_len[i] &&
                         memcmp(a.final[i], b.final[i], a.final_len[i]) == 0);
            run_free(&b);
        }
        run_free(&a);
    }
}

typedef struct grab {
    unsigned char *p;
    size_t len;
} grab_t;

static int grab_pane(void *ctx, int64_t start, const void *blob, size_t len)
{
    grab_t *g = ctx;
    (void)start;
    if (!g->p) { /* keep the first */
        g->p = malloc(len);
        memcpy(g->p, blob, len);
        g->len = len;
    }
    return 0;
}

static int count_windows(void *ctx, int64_t start, int64_t end, const nf_trend_ranked_t *items,
                         size_t n)
{
    (void)ctx;
    return start < end && n > 0 && items[0].score > 0 ? 0 : 1;
}

/* Corrupt blobs are refused and leave the target untouched. */
static void test_corrupt_blobs(void)
{
    nf_trend_opts_t o;
    test_opts(&o, false);
    o.cms_width = 64;
    make_workload(77);
    nf_trend_counter_t *c = nf_trend_counter_new(&o);
    NF_REQUIRE(c);
    for (int i = 0; i < 3000; i++)
        nf_trend_count(c, 0, art_id[evs[i].art], strlen(art_id[evs[i].art]), evs[i].ts, evs[i].now);
    void *blob, *again;
    size_t len, len2;
    NF_REQUIRE(nf_trend_counter_save(c, &blob, &len) == 0);
    unsigned char *bad = malloc(len + 1);
    rng = 99;
    int refused = 0, tried = 0;
    for (size_t i = 0; i < len; i += 1 + rnd() % 13) {
        memcpy(bad, blob, len);
        bad[i] ^= (unsigned char)(1u << (rnd() % 8));
        tried++;
        refused += nf_trend_counter_load(c, bad, len) == -EINVAL;
    }
    NF_CHECK_EQ(refused, tried);
    NF_CHECK_EQ(nf_trend_counter_load(c, blob, len - 1), -EINVAL);
    NF_CHECK_EQ(nf_trend_counter_load(c, blob, 0), -EINVAL);
    NF_REQUIRE(nf_trend_counter_save(c, &again, &len2) == 0);
    NF_CHECK(len2 == len && memcmp(again, blob, len) == 0); /* unchanged */
    NF_CHECK_EQ(nf_trend_counter_load(c, blob, len), 0);
    free(again);

    /* Options must match. */
    nf_trend_opts_t o2 = o;
    o2.lateness_ms++;
    nf_trend_counter_t *c2 = nf_trend_counter_new(&o2);
    NF_CHECK_EQ(nf_trend_counter_load(c2, blob, len), -EINVAL);
    nf_trend_counter_free(c2);

    /* Pane summaries: garbage, corruption, duplicates, other options. */
    nf_trend_merger_t *m = nf_trend_merger_new(&o, 2);
    NF_REQUIRE(m);
    grab_t g = {0};
    int64_t wm;
    NF_CHECK(nf_trend_counter_take(c, evs[2999].now, grab_pane, &g, &wm) > 0);
    NF_REQUIRE(g.p);
    free(bad);
    bad = malloc(g.len + 1);
    NF_REQUIRE(bad);
    for (size_t i = 0; i < g.len; i += 1 + rnd() % 7) {
        memcpy(bad, g.p, g.len);
        bad[i] ^= (unsigned char)(1u << (rnd() % 8));
        NF_CHECK_EQ(nf_trend_merger_add_pane(m, 0, bad, g.len), -EINVAL);
    }
    for (int i = 0; i < 500; i++) {
        size_t n = rnd() % (g.len + 1);
        for (size_t k = 0; k < n; k++)
            bad[k] = (unsigned char)rnd();
        NF_CHECK_EQ(nf_trend_merger_add_pane(m, 1, bad, n), -EINVAL);
    }
    NF_CHECK_EQ(nf_trend_merger_add_pane(m, 0, g.p, g.len - 1), -EINVAL);
    NF_CHECK_EQ(nf_trend_merger_add_pane(m, 2, g.p, g.len), -EINVAL); /* no counter 2 */
    NF_CHECK_EQ(nf_trend_merger_add_pane(m, 0, g.p, g.len), 0);
    NF_CHECK_EQ(nf_trend_merger_add_pane(m, 0, g.p, g.len), -EEXIST);
    NF_CHECK_EQ(nf_trend_merger_add_pane(m, 1, g.p, g.len), 0);
    nf_trend_merger_stats_t ms;
    nf_trend_merger_stats(m, &ms);
    NF_CHECK_EQ(ms.panes, 1);
    o2 = o;
    o2.exact = true;
    nf_trend_merger_t *mx = nf_trend_merger_new(&o2, 2);
    NF_CHECK_EQ(nf_trend_merger_add_pane(mx, 0, g.p, g.len), -EINVAL);
    nf_trend_merger_free(mx);

    /* A counter that never reported holds the merger back; meta blobs are validated. */
    NF_CHECK_EQ(nf_trend_merger_set_watermark(m, 0, wm), 0);
    NF_CHECK_EQ(nf_trend_merger_emit(m, count_windows, NULL, NULL), 0);
    void *meta;
    size_t mlen;
    NF_REQUIRE(nf_trend_merger_save(m, &meta, &mlen) == 0);
    NF_CHECK_EQ(nf_trend_merger_load(m, meta, mlen), -EBUSY);
    nf_trend_merger_t *m2 = nf_trend_merger_new(&o, 2);
    unsigned char *mb = meta;
    for (size_t i = 0; i < mlen; i++) {
        mb[i] ^= 4;
        NF_CHECK_EQ(nf_trend_merger_load(m2, meta, mlen), -EINVAL);
        mb[i] ^= 4;
    }
    NF_CHECK_EQ(nf_trend_merger_load(m2, meta, mlen), 0);
    nf_trend_merger_t *m3 = nf_trend_merger_new(&o, 3);
    NF_CHECK_EQ(nf_trend_merger_load(m3, meta, mlen), 0); /* a partition was added: fits */
    nf_trend_merger_t *m1 = nf_trend_merger_new(&o, 1);
    NF_CHECK_EQ(nf_trend_merger_load(m1, meta, mlen), -EXDEV); /* fewer counters: refused */
    nf_trend_merger_free(m1);
    NF_CHECK_EQ(nf_trend_merger_blob_counters(meta, mlen), 2);
    mb[0] ^= 4;
    NF_CHECK_EQ(nf_trend_merger_blob_counters(meta, mlen), -EINVAL);
    mb[0] ^= 4;
    nf_trend_merger_free(m3);
    nf_trend_merger_free(m2);
    free(meta);
    NF_CHECK_EQ(nf_trend_merger_set_watermark(m, 1, wm), 0);
    int emitted = nf_trend_merger_emit(m, count_windows, NULL, NULL);
    NF_CHECK(emitted > 0);

    /* Bad input to count. */
    NF_CHECK_EQ(nf_trend_count(c, 0, "", 0, T0, T0), -EINVAL);
    NF_CHECK_EQ(nf_trend_count(c, 0, art_id[0], NF_TREND_ID_MAX + 1, T0, T0), -EINVAL);
    free(g.p);
    free(bad);
    free(blob);
    nf_trend_merger_free(m);
    nf_trend_counter_free(c);
}

/* Ranking: score desc, then article_id bytes asc, a prefix before its extensions. */
static void test_ranking_order(void)
{
    nf_trend_opts_t o;
    test_opts(&o, true);
    o.top_k = 4;
    const char *ids[] = {"ab", "a", "abc", "b", "c", "ab", "a", "abc", "b", "ab", "a", "abc"};
    nf_trend_counter_t *c = nf_trend_counter_new(&o);
    nf_trend_merger_t *m = nf_trend_merger_new(&o, 1);
    NF_REQUIRE(c && m);
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++)
        NF_CHECK_EQ(nf_trend_count(c, 7, ids[i], strlen(ids[i]), T0 + (int64_t)i, T0), 0);
    NF_CHECK_EQ(nf_trend_count(c, 7, "z", 1, T0 + 60000, T0), 0);
    NF_CHECK_EQ(nf_trend_count(c, 7, "z", 1, T0 - 6000, T0), 1); /* behind the watermark */
    run_t r;
    memset(&r, 0, sizeof r);
    r.o = o;
    r.m = m;
    text_add(&r.text, "");
    int64_t wm;
    NF_CHECK_EQ(nf_trend_counter_take(c, T0, on_pane, &r, &wm), 1);
    NF_CHECK_EQ(wm, T0 + 55000);
    NF_CHECK_EQ(nf_trend_merger_set_watermark(m, 0, wm), 0);
    NF_CHECK_EQ(nf_trend_merger_emit(m, on_window, NULL, &r), 5); /* W = T0+10s .. T0+50s */
    char want[256];
    snprintf(want, sizeof want, "W %lld %lld\na 3\nab 3\nabc 3\nb 2\n",
             (long long)(T0 + 10000 - o.window_ms), (long long)(T0 + 10000));
    NF_CHECK(strncmp(r.text.p, want, strlen(want)) == 0);
    NF_CHECK_EQ(nf_trend_counter_late(c, 7), 1);
    NF_CHECK_EQ(r.nwins, 5); /* (r.errors counts ids unknown to art_of: all of these) */
    for (size_t i = 0; i < r.nstore; i++)
        free(r.store[i].blob);
    free(r.store);
    free(r.text.p);
    free(r.panes.p);
    free(r.wins);
    nf_trend_merger_free(m);
    nf_trend_counter_free(c);
}

/* Expected partitions hold the watermark back until their first event or until idle. */
static void test_expected_partitions(void)
{
    nf_trend_opts_t o;
    test_opts(&o, true);
    nf_trend_counter_t *c = nf_trend_counter_new(&o);
    NF_REQUIRE(c);
    const int32_t parts[] = {0, 1, 2};
    NF_CHECK_EQ(nf_trend_counter_expect(c, parts, 3, T0), 0);
    NF_CHECK_EQ(nf_trend_counter_watermark(c, T0), INT64_MIN);
    for (int64_t t = 0; t < 50000; t += 100) {
        NF_CHECK_EQ(nf_trend_count(c, 0, "x", 1, T0 + t, T0 + t), 0);
        NF_CHECK_EQ(nf_trend_count(c, 2, "y", 1, T0 + t, T0 + t), 0);
        NF_CHECK_EQ(nf_trend_counter_expect(c, parts, 3, T0 + t), 0); /* every tick: harmless */
    }
    int64_t wm;
    NF_CHECK_EQ(nf_trend_counter_take(c, T0 + 50000, NULL, NULL, &wm), 0); /* 1 holds it back */
    NF_CHECK_EQ(wm, INT64_MIN);
    /* Partition 1 starts late and far behind: nothing of it is late yet. */
    NF_CHECK_EQ(nf_trend_count(c, 1, "z", 1, T0 + 100, T0 + 50000), 0);
    NF_CHECK_EQ(nf_trend_counter_watermark(c, T0 + 50000), T0 + 100 - o.lateness_ms);
    /* Saved and loaded, a never-seen expected partition stays pending. */
    nf_trend_counter_t *d = nf_trend_counter_new(&o);
    const int32_t more[] = {9};
    NF_CHECK_EQ(nf_trend_counter_expect(c, more, 1, T0 + 50000), 0);
    void *blob;
    size_t len;
    NF_REQUIRE(nf_trend_counter_save(c, &blob, &len) == 0);
    NF_CHECK_EQ(nf_trend_counter_load(d, blob, len), 0);
    NF_CHECK_EQ(nf_trend_counter_watermark(d, T0 + 50001), INT64_MIN);
    /* Idle after idle_ms from its declaration: excluded. */
    NF_CHECK_EQ(nf_trend_counter_watermark(d, T0 + 50000 + o.idle_ms),
                INT64_MIN); /* 0..2 idle too */
    NF_CHECK_EQ(nf_trend_count(d, 0, "x", 1, T0 + 60000, T0 + 50000 + o.idle_ms), 0);
    NF_CHECK_EQ(nf_trend_counter_watermark(d, T0 + 50000 + o.idle_ms), T0 + 60000 - o.lateness_ms);
    free(blob);
    nf_trend_counter_free(d);
    nf_trend_counter_free(c);
}

int main(void)
{
    make_ids();
    NF_RUN(test_exact_matches_batch);
    NF_RUN(test_sketch_within_bounds);
    NF_RUN(test_restart_identity);
    NF_RUN(test_group_matches_recount);
    NF_RUN(test_corrupt_blobs);
    NF_RUN(test_ranking_order);
    NF_RUN(test_expected_partitions);
    return nf_test_report();
}
