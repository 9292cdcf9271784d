/* Tests the trending actors' state (src/actors/reads.c kafka_in, src/actors/analytics.c merger)
 * over a real store and real epochs (nf_epoch_run_once, no Kafka; read events from the memory
 * source):
 *   - state of the per-shard layout of earlier versions ("n", "m", "c" + shard, "p" + shard +
 *     pane_start) is dropped at the first start: deleted in the first epoch, counted in
 *     newsflow_trending_legacy_dropped_total, its last window end kept in the new meta "M";
 *   - counters are stored per read-events partition ("C" + partition), whatever the shard
 *     count: a run with 2 shards, then one with 1 shard over the same state, store one blob per
 *     partition and the merger's meta keeps one watermark per partition;
 *   - a blob of any size is stored in chunks of at most NF_ANALYTICS_CHUNK_BYTES (one changelog
 *     record each: a counter of many open panes once exceeded Kafka's 16 MiB record limit and
 *     stopped the job): sizes around the chunk boundaries read back equal, a shrinking blob
 *     leaves no stale chunk, the one-value layout of earlier versions still reads, a missing
 *     chunk is an error, chunk keys stay in the partition's key group, and a real counter of
 *     ~3 chunks loads back to the same state. */
#include "actors/analytics.h"
#include "actors/reads.h"
#include "algo/bytes.h"
#include "nf_test.h"
#include "state/changelog.h"
#include "support/teststore.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define T0    1767225600000ll /* 2026-01-01T00:00:00Z */
#define NPART 3
#define NEV   3000

static void test_opts(nf_trend_opts_t *o)
{
    nf_trend_opts_default(o);
    o->window_ms = 120000;
    o->slide_ms = 10000;
    o->exact = true;
    o->top_k = 5;
    o->idle_ms = 3600000;
}

static void put(nf_store_batch_t *b, const void *key, size_t klen, const void *blob, size_t len)
{
    NF_CHECK_EQ(nf_analytics_put_blob(b, key, klen, blob, len), 0);
}

static int has_key(nf_store_t *st, const void *key, size_t klen)
{
    void *v = NULL;
    size_t len = 0;
    int rc = nf_store_get(st, NF_KIND_TRENDING, key, klen, &v, &len, NULL, 0);
    free(v);
    return rc;
}

/* The per-shard layout as version 0.x left it: 2 shards, a merger whose last window end is
 * T0 + 300000. */
static void write_legacy(nf_store_t *st)
{
    nf_trend_opts_t o;
    test_opts(&o);
    nf_trend_merger_t *m = nf_trend_merger_new(&o, 2);
    NF_REQUIRE(m);
    NF_CHECK_EQ(nf_trend_merger_set_watermark(m, 0, T0 + 300000), 0);
    NF_CHECK_EQ(nf_trend_merger_set_watermark(m, 1, T0 + 300000), 0);
    NF_CHECK_EQ(nf_trend_merger_emit(m, NULL, NULL, NULL), 0); /* no pane: done moves only */
    void *blob;
    size_t len;
    NF_REQUIRE(nf_trend_merger_save(m, &blob, &len) == 0);
    nf_store_batch_t *b = nf_store_batch_new();
    put(b, "m", 1, blob, len);
    unsigned char n[4];
    nf_put_le32(n, 2);
    put(b, "n", 1, n, sizeof n);
    put(b, "c\0\0", 3, "old counter", 11);
    put(b, "c\0\1", 3, "old counter", 11);
    put(b, "p\0\1\x80\0\0\0\0\0\0\0", 11, "old pane", 8);
    NF_CHECK_EQ(nf_teststore_commit(st, 1, b), 0);
    nf_store_batch_free(b);
    free(blob);
    nf_trend_merger_free(m);
}

typedef struct events {
    char *buf;
    size_t len, cap;
    size_t off[NEV];
    uint32_t lens[NEV];
    uint16_t part[NEV];
} events_t;

static events_t evs;

static void make_events(void)
{
    for (int i = 0; i < NEV; i++) {
        char line[256];
        int n = snprintf(line, sizeof line,
                         "{\"event_id\":\"e%d\",\"user_id\":\"u%d\",\"article_id\":\"a%d\","
                         "\"session_id\":\"s%d\",\"ts\":%lld}",
                         i, i % 17, (i * 7) % 11, i, (long long)(T0 + 200000 + i * 200ll));
        if (evs.len + (size_t)n > evs.cap) {
            evs.cap = (evs.len + (size_t)n) * 2;
            evs.buf = realloc(evs.buf, evs.cap);
            if (!evs.buf)
                abort();
        }
        memcpy(evs.buf + evs.len, line, (size_t)n);
        evs.off[i] = evs.len;
        evs.lens[i] = (uint32_t)n;
        evs.part[i] = (uint16_t)(i % 17 % NPART);
        evs.len += (size_t)n;
    }
}

static nf_analytics_t an;

/* One run over the first `n` events with `shards` shards, then one epoch. */
static void run(nf_store_t *st, unsigned shards, size_t n)
{
    char err[512];
    nf_runtime_opts_t ro;
    nf_runtime_opts_default(&ro);
    ro.shards = shards;
    nf_epoch_opts_t eo = {.interval_ms = 1000000, .retain_every = 0, .retain_count = 0};
    nf_runtime_t *rt = nf_runtime_create(&ro, err, sizeof err);
    NF_REQUIRE(rt);
    nf_epoch_t *ep = nf_epoch_new(rt, st, NULL, &eo, err, sizeof err);
    NF_REQUIRE(ep && nf_epoch_recover(ep, err, sizeof err) == 0);
    nf_analytics_defaults(&an);
    test_opts(&an.trend);
    an.store = st;
    an.epoch = ep;
    NF_REQUIRE(nf_analytics_register(rt, &an, err, sizeof err) == 0);
    static nf_reads_t r;
    memset(&r, 0, sizeof r);
    r.an = &an;
    r.store = st;
    r.epoch = ep;
    r.max_event_bytes = 65536;
    r.pause_high_water = 1u << 30;
    r.pause_low_water = 1u << 29;
    r.mem.buf = evs.buf;
    r.mem.off = evs.off;
    r.mem.len = evs.lens;
    r.mem.part = evs.part;
    r.mem.n = n;
    r.mem.partitions = NPART;
    NF_REQUIRE(nf_reads_register(rt, &r) == 0);
    NF_CHECK_EQ(an.trend_partitions, NPART);
    NF_REQUIRE(nf_runtime_start(rt) == 0);
    for (unsigned s = 0; s < shards; s++) {
        nf_msg_t m = {.actor = (uint16_t)r.in_actor, .kind = NF_MSG_MEM_START};
        while (nf_runtime_post(rt, s, &m) == -EAGAIN)
            usleep(100);
    }
    for (int i = 0; i < 2000 && atomic_load(&r.mem_shards_done) < shards; i++)
        usleep(5000);
    NF_CHECK_EQ(atomic_load(&r.mem_shards_done), shards);
    usleep(800000); /* a few ticks: panes and watermarks reach the merger */
    NF_CHECK_EQ(nf_epoch_run_once(ep, err, sizeof err), 0);
    nf_runtime_request_stop(rt);
    nf_runtime_wait(rt);
    nf_runtime_destroy(rt);
    nf_epoch_free(ep);
    nf_analytics_free(&an);
}

static int64_t stored_done(nf_store_t *st, unsigned counters)
{
    void *v = NULL;
    size_t len = 0, blen = 0;
    if (nf_store_get(st, NF_KIND_TRENDING, "M", 1, &v, &len, NULL, 0) != 1)
        return INT64_MAX;
    nf_trend_opts_t o;
    test_opts(&o);
    nf_trend_merger_t *m = nf_trend_merger_new(&o, counters);
    const void *b = nf_analytics_blob(v, len, &blen);
    int64_t done = INT64_MAX;
    if (m && b && nf_trend_merger_load(m, b, blen) == 0) {
        nf_trend_merger_stats_t s;
        nf_trend_merger_stats(m, &s);
        done = s.done_end;
    }
    nf_trend_merger_free(m);
    free(v);
    return done;
}

static void test_legacy_then_reshard(void)
{
    char dir[256];
    NF_REQUIRE(nf_teststore_tmpdir("trend-state", dir, sizeof dir));
    nf_store_t *st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    write_legacy(st);
    NF_CHECK_EQ(nf_analytics_legacy_shards(st), 2);

    run(st, 2, NEV / 2);
    NF_CHECK_EQ(nf_counter_value(an.m.trend_legacy_dropped), 5); /* n, m, c0, c1, one p */
    NF_CHECK_EQ(nf_analytics_legacy_shards(st), 0);
    NF_CHECK_EQ(has_key(st, "m", 1), 0);
    NF_CHECK_EQ(has_key(st, "c\0\1", 3), 0);
    NF_CHECK_EQ(has_key(st, "p\0\1\x80\0\0\0\0\0\0\0", 11), 0);
    for (int p = 0; p < NPART; p++) {
        unsigned char key[3] = {'C', 0, (unsigned char)p};
        NF_CHECK_EQ(has_key(st, key, 3), 1);
    }
    int64_t done1 = stored_done(st, NPART);
    /* The old last window end is kept (the new events' windows end after it). */
    NF_CHECK(done1 != INT64_MAX && done1 >= T0 + 300000);

    run(st, 1, NEV); /* the same state with one shard: the counters load by partition */
    int64_t done2 = stored_done(st, NPART);
    NF_CHECK(done2 != INT64_MAX && done2 > done1);
    NF_CHECK_EQ(stored_done(st, NPART - 1), INT64_MAX);          /* a meta of 3 partitions */
    NF_CHECK_EQ(nf_counter_value(an.m.trend_legacy_dropped), 5); /* dropped once */
    nf_store_close(st);
    nf_teststore_rmtree(dir);
}

static int count_key(const void *key, size_t klen, const void *val, size_t vlen, void *ctx)
{
    (void)key, (void)klen, (void)val, (void)vlen;
    (*(size_t *)ctx)++;
    return 0;
}

static size_t trending_keys(nf_store_t *st)
{
    size_t n = 0;
    NF_CHECK_EQ(nf_store_scan(st, NF_KIND_TRENDING, count_key, &n), 0);
    return n;
}

static const unsigned char CKEY[3] = {'C', 0, 1};

/* put_chunked of len bytes (a pattern of seed) in epoch e over *chunks chunks; checks the new
 * chunk count (into *chunks), the read back, and the number of stored keys. */
static void put_get(nf_store_t *st, uint64_t e, size_t len, unsigned *chunks, unsigned seed)
{
    unsigned char *blob = malloc(len ? len : 1);
    NF_REQUIRE(blob);
    for (size_t i = 0; i < len; i++)
        blob[i] = (unsigned char)(i * 31 + seed + i / 4093);
    nf_store_batch_t *b = nf_store_batch_new();
    unsigned prev = *chunks;
    NF_CHECK_EQ(nf_analytics_put_chunked(b, CKEY, 3, blob, len, prev, chunks), 0);
    NF_CHECK_EQ(nf_teststore_commit(st, e, b), 0);
    nf_store_batch_free(b);
    unsigned want =
        len <= NF_ANALYTICS_CHUNK_BYTES
            ? 1
            : (unsigned)((len + NF_ANALYTICS_CHUNK_BYTES - 1) / NF_ANALYTICS_CHUNK_BYTES);
    NF_CHECK_EQ(*chunks, want);
    void *got = NULL;
    size_t glen = 0;
    unsigned gchunks = 0;
    char err[256] = "";
    NF_CHECK_EQ(nf_analytics_get_chunked(st, CKEY, 3, &got, &glen, &gchunks, err, sizeof err), 1);
    NF_CHECK_EQ(glen, len);
    NF_CHECK_EQ(gchunks, want);
    NF_CHECK(got && memcmp(got, blob, len) == 0);
    NF_CHECK_EQ(trending_keys(st), (size_t)want);
    free(got);
    free(blob);
}

static void test_chunked_blob(void)
{
    char dir[256];
    NF_REQUIRE(nf_teststore_tmpdir("trend-chunks", dir, sizeof dir));
    nf_store_t *st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    char err[256] = "";
    void *got = NULL;
    size_t glen = 0;
    unsigned gchunks = 0;
    NF_CHECK_EQ(nf_analytics_get_chunked(st, CKEY, 3, &got, &glen, &gchunks, err, sizeof err), 0);

    const size_t C = NF_ANALYTICS_CHUNK_BYTES;
    const size_t sizes[] = {0, 1, C - 1, C, C + 1, 2 * C, 3 * C + 5, C / 2};
    unsigned chunks = 0;
    uint64_t e = 1;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) /* 4 chunks down to 1: no stale */
        put_get(st, e++, sizes[i], &chunks, (unsigned)i);

    /* The one-value layout of earlier versions (nf_analytics_put_blob) reads as one chunk, even
     * a blob that begins like a chunked head but is too short for one. */
    nf_store_batch_t *b = nf_store_batch_new();
    NF_CHECK_EQ(nf_analytics_put_blob(b, CKEY, 3, "NNCK", 4), 0);
    NF_CHECK_EQ(nf_teststore_commit(st, e++, b), 0);
    nf_store_batch_free(b);
    NF_CHECK_EQ(nf_analytics_get_chunked(st, CKEY, 3, &got, &glen, &gchunks, err, sizeof err), 1);
    NF_CHECK(glen == 4 && gchunks == 1 && memcmp(got, "NNCK", 4) == 0);
    free(got);

    /* A missing chunk: an error that says so, nothing returned. */
    chunks = 1;
    put_get(st, e++, 2 * C + 7, &chunks, 9);
    unsigned char k2[5] = {'C', 0, 1, 0, 2};
    b = nf_store_batch_new();
    nf_store_batch_delete(b, NF_KIND_TRENDING, k2, sizeof k2);
    NF_CHECK_EQ(nf_teststore_commit(st, e++, b), 0);
    nf_store_batch_free(b);
    got = NULL;
    NF_CHECK_EQ(nf_analytics_get_chunked(st, CKEY, 3, &got, &glen, &gchunks, err, sizeof err),
                -EINVAL);
    NF_CHECK(got == NULL && strstr(err, "chunk 2 of 3 is missing") != NULL);

    /* Chunk keys are in the partition's key group, so they move with it. */
    NF_CHECK_EQ(nf_changelog_key_group(NF_KIND_TRENDING, k2, sizeof k2), 1);
    NF_CHECK_EQ(nf_changelog_key_group(NF_KIND_TRENDING, CKEY, 3), 1);

    /* A real counter of ~3 chunks (many articles in open panes) loads back to the same state. */
    nf_trend_opts_t o;
    test_opts(&o);
    nf_trend_counter_t *c = nf_trend_counter_new(&o);
    NF_REQUIRE(c);
    for (int i = 0; i < 150000; i++) {
        char id[48];
        int n = snprintf(id, sizeof id, "article-%07d-of-a-long-id", i);
        NF_CHECK_EQ(nf_trend_count(c, i % 3, id, (size_t)n, T0 + i / 3000 * 1000, T0), 0);
    }
    void *blob = NULL;
    size_t len = 0;
    NF_REQUIRE(nf_trend_counter_save(c, &blob, &len) == 0);
    if (len <= 2 * C)
        fprintf(stderr, "counter blob: %zu bytes\n", len);
    NF_CHECK(len > 2 * C); /* the test is only worth something if the counter spans chunks */
    b = nf_store_batch_new();
    NF_CHECK_EQ(nf_analytics_put_chunked(b, CKEY, 3, blob, len, 3, &chunks), 0);
    NF_CHECK_EQ(nf_teststore_commit(st, e++, b), 0);
    nf_store_batch_free(b);
    NF_CHECK(chunks >= 3);
    NF_CHECK_EQ(nf_analytics_get_chunked(st, CKEY, 3, &got, &glen, &gchunks, err, sizeof err), 1);
    nf_trend_counter_t *c2 = nf_trend_counter_new(&o);
    NF_REQUIRE(c2);
    NF_CHECK_EQ(nf_trend_counter_load(c2, got, glen), 0);
    void *blob2 = NULL;
    size_t len2 = 0;
    NF_REQUIRE(nf_trend_counter_save(c2, &blob2, &len2) == 0);
    NF_CHECK(len2 == len && memcmp(blob, blob2, len) == 0);
    free(blob);
    free(blob2);
    free(got);
    nf_trend_counter_free(c);
    nf_trend_counter_free(c2);
    nf_store_close(st);
    nf_teststore_rmtree(dir);
}

int main(void)
{
    nf_metrics_init(4);
    make_events();
    NF_RUN(test_legacy_then_reshard);
    NF_RUN(test_chunked_blob);
    free(evs.buf);
    return nf_test_report();
}
