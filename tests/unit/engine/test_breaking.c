/* Tests src/engine/breaking.c against a model of breaking.h's rule written here another way
 * (each entry's peers collected and sorted on their own, the cooldown as a table of every
 * story's last break): 3,000 random windows of up to 60 entries over 80 stories and 6 topics,
 * reads mostly small with bursts, some leads without a topic. Every 100 windows the state is
 * saved and loaded into a new engine (a restart): the decisions go on equal. A hit() that fails
 * leaves its story unremembered; a blob that is not one is refused. */
#include "engine/breaking.h"
#include "nf_test.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STORIES = 80, TOPICS = 6, WINDOWS = 3000, MAXN = 60 };

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    return nf_test_xorshift(&rng);
}

static const nf_breaking_opts_t opts = {
    .multiple = 3.0, .min_reads = 20, .min_peers = 2, .cooldown_ms = 600000};

static int64_t last_break[STORIES]; /* the model's: 0 = never */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The model's decision for entry i of the window. */
static bool model_breaks(const nf_breaking_entry_t *e, size_t n, size_t i, int64_t end,
                         double *baseline)
{
    if (e[i].topic < 0 || e[i].reads < opts.min_reads)
        return false;
    uint64_t peers[MAXN];
    size_t np = 0;
    for (size_t j = 0; j < n; j++)
        if (j != i && e[j].topic == e[i].topic)
            peers[np++] = e[j].reads;
    if (np < opts.min_peers)
        return false;
    qsort(peers, np, sizeof *peers, cmp_u64);
    *baseline = np % 2 ? (double)peers[np / 2] : ((double)peers[np / 2 - 1] + peers[np / 2]) / 2;
    int64_t last = last_break[e[i].story.lo];
    if (last && end - last < opts.cooldown_ms)
        return false;
    return (double)e[i].reads >= opts.multiple * *baseline;
}

typedef struct got {
    size_t idx[MAXN];
    double base[MAXN];
    size_t n;
    int fail_at; /* hit() fails for this index (-1: never) */
} got_t;

static int hit(void *arg, size_t i, double baseline, unsigned peers)
{
    got_t *g = arg;
    (void)peers;
    if ((int)i == g->fail_at)
        return -EIO;
    g->idx[g->n] = i;
    g->base[g->n++] = baseline;
    return 0;
}

static size_t make_window(nf_breaking_entry_t *e)
{
    size_t n = 1 + rnd() % MAXN;
    bool used[STORIES] = {false};
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned s = (unsigned)(rnd() % STORIES);
        if (used[s])
            continue;
        used[s] = true;
        uint64_t reads = 1 + rnd() % 15;
        if (rnd() % 12 == 0)
            reads *= 3 + rnd() % 8; /* a burst */
        e[k++] = (nf_breaking_entry_t){
            .story = {7, s}, .reads = reads, .topic = rnd() % 10 == 0 ? -1 : (int)(s % TOPICS)};
    }
    return k;
}

static void test_breaking_model(void)
{
    nf_breaking_t *b = nf_breaking_new(&opts);
    NF_REQUIRE(b);
    size_t total = 0, cooled = 0, wrong = 0;
    int64_t end = 1795989326000LL;
    for (int w = 0; w < WINDOWS && !wrong; w++) {
        end += 30000 * (1 + (int64_t)(rnd() % 4));
        nf_breaking_entry_t e[MAXN];
        size_t n = make_window(e);
        got_t g = {.fail_at = -1};
        int rc = nf_breaking_window(b, end, e, n, hit, &g);
        size_t want = 0;
        for (size_t i = 0; i < n; i++) {
            double base = 0;
            bool yes = model_breaks(e, n, i, end, &base);
            int64_t last = last_break[e[i].story.lo];
            cooled += !yes && last && end - last < opts.cooldown_ms && e[i].topic >= 0;
            if (!yes)
                continue;
            if (want >= g.n || g.idx[want] != i || g.base[want] != base) {
                fprintf(stderr, "window %d entry %zu: the model breaks it (baseline %g)\n", w, i,
                        base);
                wrong++;
            }
            want++;
            last_break[e[i].story.lo] = end;
        }
        NF_CHECK_EQ(rc, (int)want);
        NF_CHECK_EQ(g.n, want);
        total += want;
        if (w % 100 == 99) { /* a restart: the state through a blob */
            void *blob;
            size_t len;
            NF_REQUIRE(nf_breaking_save(b, &blob, &len) == 0);
            NF_CHECK(!nf_breaking_dirty(b));
            nf_breaking_free(b);
            NF_REQUIRE((b = nf_breaking_new(&opts)));
            NF_CHECK_EQ(nf_breaking_load(b, blob, len), 0);
            free(blob);
        }
    }
    NF_CHECK_EQ(wrong, 0);
    fprintf(stderr, "%zu stories broke in %d windows, %zu entries held back by the cooldown\n",
            total, WINDOWS, cooled);
    NF_CHECK(total > 100 && cooled > 100); /* both sides of the rule were exercised */
    nf_breaking_free(b);
}

/* A failed announcement is not remembered: the next window announces it again. */
static void test_failed_hit(void)
{
    nf_breaking_t *b = nf_breaking_new(&opts);
    NF_REQUIRE(b);
    nf_breaking_entry_t e[4] = {{{1, 1}, 100, 2}, {{1, 2}, 10, 2}, {{1, 3}, 12, 2}, {{1, 4}, 9, 2}};
    got_t g = {.fail_at = 0};
    NF_CHECK_EQ(nf_breaking_window(b, 1000, e, 4, hit, &g), -EIO);
    NF_CHECK_EQ(nf_breaking_size(b), 0);
    g = (got_t){.fail_at = -1};
    NF_CHECK_EQ(nf_breaking_window(b, 2000, e, 4, hit, &g), 1);
    NF_CHECK(g.n == 1 && g.idx[0] == 0 && g.base[0] == 10.0);
    NF_CHECK_EQ(nf_breaking_window(b, 3000, e, 4, hit, &g), 0); /* cooling down */
    NF_CHECK_EQ(nf_breaking_window(b, 2000 + opts.cooldown_ms, e, 4, hit, &g), 1);
    static const unsigned char bad[][6] = {{2, 0, 0, 0, 0}, {1, 1, 0, 0, 0}};
    NF_CHECK_EQ(nf_breaking_load(b, bad[0], 5), -EINVAL);
    NF_CHECK_EQ(nf_breaking_load(b, bad[1], 5), -EINVAL);
    NF_CHECK_EQ(nf_breaking_load(b, bad[1], 4), -EINVAL);
    NF_CHECK_EQ(nf_breaking_size(b), 0);
    nf_breaking_free(b);
}

int main(void)
{
    NF_RUN(test_breaking_model);
    NF_RUN(test_failed_hit);
    return nf_test_report();
}
