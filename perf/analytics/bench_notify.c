/* bench_notify.c — what notifications cost a shard (src/engine/notify.h): N readers subscribed
 * to K of the 19 topics each, then windows of S breaking stories of random topics fanned out to
 * them, each notification rendered as the reads actor renders it (JSON, src/actors/reads.c). Two
 * passes: hot (every subscriber's value in memory) and cold (a new engine on the store the first
 * pass committed: its index rebuilt by the prefix scan, every value read from RocksDB once).
 * The cap is the highest (32 a day): the hot pass's windows all end on one day, so a reader with
 * more than 32 of its stories is capped after that; the cold pass's window is a day later.
 *
 *   bench_notify [--readers N] [--topics K] [--windows W] [--stories S]
 * JSON lines:
 *   {"bench":"notify","metric":"subscribe","readers":N,"ns_per_event":X}
 *   {"bench":"notify","metric":"load","readers":N,"ms":X}              (the index rebuilt)
 *   {"bench":"notify","metric":"fanout","pass":"hot"|"cold","windows":W,"visits":V,
 *    "sent":M,"capped":C,"ns_per_visit":X,"ns_per_sent":Y,"ms_per_window":Z} */
#include "engine/interest.h"
#include "engine/notify.h"
#include "runtime/jsonw.h"
#include "runtime/runtime.h"
#include "teststore.h"
#include "workload.h"

#include "../bench_clock.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TOPICS = 19 };

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
    return nf_wl_rand(&rng);
}

static nf_jw_t jw;

static int render(void *arg, const char *user_id, size_t ulen, const nf_notify_story_t *s,
                  int64_t end_ms)
{
    char story[33];
    nf_id128_hex(s->story, story);
    nf_jw_reset(&jw);
    nf_jw_obj_open(&jw);
    nf_jw_key(&jw, "user_id");
    nf_jw_strn(&jw, user_id, ulen);
    nf_jw_key(&jw, "story_id");
    nf_jw_str(&jw, story);
    nf_jw_key(&jw, "reads");
    nf_jw_u64(&jw, s->reads);
    nf_jw_key(&jw, "window_end");
    nf_jw_i64(&jw, end_ms);
    nf_jw_obj_close(&jw);
    *(size_t *)arg += jw.len;
    return 0;
}

static bool owns_all(uint16_t kg, nf_id128_t u, void *ctx)
{
    (void)kg;
    (void)u;
    (void)ctx;
    return true;
}

/* W windows through e, each in slices of g_slice readers as the reads actor runs them (0: in
 * one go): one JSON line, with the longest slice (how long the shard was held at most). */
static size_t g_slice = NF_NOTIFY_SLICE;

static void fanout(nf_notify_t *e, const char *pass, unsigned windows, unsigned stories,
                   int64_t start_ms)
{
    nf_notify_window_t *w = malloc(sizeof *w + stories * sizeof w->s[0]);
    uint64_t counts[NF_NOTIFY__OUTCOMES] = {0}, visits = 0, slices = 0, longest_ns = 0;
    size_t bytes = 0;
    double t0 = bench_cpu_s();
    for (unsigned i = 0; i < windows; i++) {
        w->end_ms = start_ms + (int64_t)i * 30000;
        w->n = stories;
        for (unsigned k = 0; k < stories; k++)
            w->s[k] = (nf_notify_story_t){
                .story = {next(), (uint64_t)i * stories + k},
                .lead = {1, 2},
                .reads = 100 + next() % 100,
                .topic = (uint16_t)(stories >= TOPICS ? k % TOPICS : next() % TOPICS)};
        nf_notify_window_sort(w);
        uint64_t before = counts[0] + counts[1] + counts[2];
        nf_notify_run_t *run = nf_notify_run_new(e, w);
        int rc = run ? 1 : -1;
        while (rc == 1) {
            uint64_t a = nf_now_ns();
            rc = nf_notify_run_step(e, run, g_slice ? g_slice : SIZE_MAX, render, &bytes, counts);
            uint64_t d = nf_now_ns() - a;
            longest_ns = d > longest_ns ? d : longest_ns;
            slices++;
        }
        nf_notify_run_free(run);
        if (rc != 0) {
            fprintf(stderr, "bench_notify: the window failed: %s\n", nf_notify_error(e));
            exit(1);
        }
        visits += counts[0] + counts[1] + counts[2] - before;
    }
    double s = bench_cpu_s() - t0;
    printf("{\"bench\":\"notify\",\"metric\":\"fanout\",\"pass\":\"%s\",\"windows\":%u,"
           "\"visits\":%llu,\"sent\":%llu,\"capped\":%llu,\"ns_per_visit\":%.1f,"
           "\"ns_per_sent\":%.1f,\"ms_per_window\":%.3f,\"slice\":%zu,\"slices\":%llu,"
           "\"longest_slice_ms\":%.3f}\n",
           pass, windows, (unsigned long long)visits, (unsigned long long)counts[0],
           (unsigned long long)counts[2], visits ? s * 1e9 / (double)visits : 0,
           counts[0] ? s * 1e9 / (double)counts[0] : 0, s * 1e3 / windows, g_slice,
           (unsigned long long)slices, (double)longest_ns / 1e6);
    free(w);
}

int main(int argc, char **argv)
{
    unsigned readers = 100000, topics = 3, windows = 100, stories = 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--slice") && i + 1 < argc) {
            g_slice = (size_t)strtoul(argv[++i], NULL, 10);
            continue;
        }
        unsigned *v = !strcmp(argv[i], "--readers")   ? &readers
                      : !strcmp(argv[i], "--topics")  ? &topics
                      : !strcmp(argv[i], "--windows") ? &windows
                      : !strcmp(argv[i], "--stories") ? &stories
                                                      : NULL;
        if (!v || i + 1 >= argc) {
            fprintf(stderr, "usage: bench_notify [--readers N] [--topics K] [--windows W] "
                            "[--stories S] [--slice N: readers a step, 0 = whole windows]\n");
            return 2;
        }
        *v = (unsigned)strtoul(argv[++i], NULL, 10);
    }
    char dir[128];
    nf_store_t *st =
        nf_teststore_tmpdir("bench-notify", dir, sizeof dir) ? nf_teststore_open(dir) : NULL;
    nf_notify_t *e = st ? nf_notify_new(st, 0, NF_NOTIFY_CAP_MAX) : NULL;
    if (!e)
        return 1;
    nf_jw_init(&jw);
    double t0 = bench_cpu_s();
    char user[32];
    for (unsigned r = 0; r < readers; r++) {
        snprintf(user, sizeof user, "reader-%u", r);
        nf_id128_t u = nf_interest_user_key(user);
        for (unsigned k = 0; k < topics; k++)
            if (nf_notify_apply(e, (uint16_t)(r % 16), u, user, strlen(user), true,
                                (unsigned)(next() % TOPICS), 1) < 0)
                return 1;
    }
    printf("{\"bench\":\"notify\",\"metric\":\"subscribe\",\"readers\":%u,\"ns_per_event\":%.1f}\n",
           readers, (bench_cpu_s() - t0) * 1e9 / ((double)readers * topics));
    fanout(e, "hot", windows, stories, 1767225600000ll);
    nf_store_batch_t *b = nf_store_batch_new();
    nf_notify_snapshot(e, b, 1);
    if (nf_teststore_commit(st, 1, b) != 0)
        return 1;
    nf_store_batch_free(b);
    nf_notify_committed(e, 1);
    nf_notify_free(e);
    e = nf_notify_new(st, 0, NF_NOTIFY_CAP_MAX);
    char err[256];
    double l0 = bench_now_s();
    long n = e ? nf_notify_load(e, NULL, 0, owns_all, NULL, err, sizeof err) : -1;
    if (n < 0)
        return 1;
    printf("{\"bench\":\"notify\",\"metric\":\"load\",\"readers\":%ld,\"ms\":%.1f}\n", n,
           (bench_now_s() - l0) * 1e3);
    /* one window of every topic, a day later (nobody capped): each reader read once */
    fanout(e, "cold", 1, TOPICS, 1767225600000ll + 86400000ll);
    nf_notify_free(e);
    nf_jw_free(&jw);
    nf_store_close(st);
    nf_teststore_rmtree(dir);
    return 0;
}
