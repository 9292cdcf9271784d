/* Tests src/state/store.c on real RocksDB databases in temporary directories: opening and
 * reopening, reads and scans, the epoch protocol (pending write, read back, apply, discard, a
 * crash between pending and apply), the TTL compaction filter, and named checkpoints (create,
 * list, manifest, verify catching truncated and corrupted files, prune, delete, restore); a full
 * file system told apart from other RocksDB errors, and the file system's space in words. */
#include "algo/bytes.h"
#include "nf_test.h"
#include "state/checkpoint.h"
#include "state/store.h"
#include "state/store_int.h" /* store_rocks_err */

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <rocksdb/c.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[PATH_MAX];

/* A fresh empty directory for one test. */
static const char *tmpdir_new(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/nf-store-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        exit(1);
    }
    return g_dir;
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb, (void)flag, (void)f;
    return remove(p);
}

static void tmpdir_free(const char *dir)
{
    nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static nf_store_t *open_store_ingest(const char *dir, size_t ingest_min)
{
    nf_store_opts_t o;
    nf_store_opts_default(&o);
    o.block_cache_mb = 8;
    o.write_buffer_mb = 4;
    o.ingest_min_bytes = ingest_min;
    char err[512];
    nf_store_t *st = nf_store_open(dir, &o, err, sizeof err);
    if (!st)
        fprintf(stderr, "open %s: %s\n", dir, err);
    return st;
}

static nf_store_t *open_store(const char *dir)
{
    return open_store_ingest(dir, NF_STORE_INGEST_MIN_BYTES);
}

/* Commits one epoch holding the given puts (val NULL: delete) of one kind. */
typedef struct kv {
    const char *key, *val;
} kv_t;

static int commit(nf_store_t *st, uint64_t epoch, nf_state_kind_t kind, const kv_t *kvs, size_t n)
{
    nf_store_batch_t *b = nf_store_batch_new();
    for (size_t i = 0; i < n; i++) {
        if (kvs[i].val)
            nf_store_batch_put(b, kind, kvs[i].key, strlen(kvs[i].key), kvs[i].val,
                               strlen(kvs[i].val));
        else
            nf_store_batch_delete(b, kind, kvs[i].key, strlen(kvs[i].key));
    }
    char err[512], header[64];
    snprintf(header, sizeof header, "{\"epoch\":%llu}", (unsigned long long)epoch);
    int r = nf_store_pending_write(st, epoch, header, &b, 1, NULL, 0, err, sizeof err);
    if (r == 0)
        r = nf_store_pending_apply(st, err, sizeof err);
    if (r != 0)
        fprintf(stderr, "commit %llu: %s\n", (unsigned long long)epoch, err);
    nf_store_batch_free(b);
    return r;
}

/* A read's result (r: 1 found, 0 absent, < 0 error) as a string ("" if absent, "ERROR" on a
 * read error); frees v; static buffer. */
static const char *read_str(int r, void *v, size_t len)
{
    static char out[256];
    snprintf(out, sizeof out, "%.*s", r > 0 ? (int)len : 0, r > 0 ? (const char *)v : "");
    free(v);
    return r < 0 ? "ERROR" : out;
}

/* The value of key as read_str gives it. */
static const char *get_str(nf_store_t *st, nf_state_kind_t kind, const char *key)
{
    void *v = NULL;
    size_t len = 0;
    char err[256];
    int r = nf_store_get(st, kind, key, strlen(key), &v, &len, err, sizeof err);
    return read_str(r, v, len);
}

static void test_open_creates_families_and_reopen_persists(void)
{
    const char *dir = tmpdir_new();
    nf_store_t *st = open_store(dir);
    NF_REQUIRE(st);
    NF_CHECK_STR(nf_store_state_dir(st), dir);
    kv_t kvs[] = {{"a", "1"}, {"b", "2"}};
    NF_CHECK_EQ(commit(st, 1, NF_KIND_READS, kvs, 2), 0);
    nf_store_close(st);

    char db[PATH_MAX + 8], *rerr = NULL;
    snprintf(db, sizeof db, "%s/db", dir);
    rocksdb_options_t *o = rocksdb_options_create();
    size_t n = 0;
    char **names = rocksdb_list_column_families(o, db, &n, &rerr);
    NF_CHECK(rerr == NULL);
    NF_CHECK_EQ(n, 1 + NF_KIND__COUNT);
    for (int k = 0; k < NF_KIND__COUNT; k++) {
        bool found = false;
        for (size_t i = 0; i < n; i++)
            found |= !strcmp(names[i], nf_state_kind_name((nf_state_kind_t)k));
        NF_CHECK(found);
    }
    if (names)
        rocksdb_list_column_families_destroy(names, n);
    rocksdb_options_destroy(o);
    NF_CHECK_STR(nf_state_kind_name(NF_KIND_ARTICLE_KEY), "article_key");
    NF_CHECK_STR(nf_state_kind_name(NF_KIND_CRAWL_SCHEDULE), "crawl_schedule");
    NF_CHECK_STR(nf_state_kind_name(NF_KIND_READS), "reads");
    NF_CHECK_STR(nf_state_kind_name(NF_KIND_EVENT_IDS), "event_ids");

    st = open_store(dir);
    NF_REQUIRE(st);
    NF_CHECK_STR(get_str(st, NF_KIND_READS, "a"), "1");
    NF_CHECK_STR(get_str(st, NF_KIND_READS, "b"), "2");
    NF_CHECK_STR(get_str(st, NF_KIND_ARTICLE_KEY, "a"), ""); /* kinds are separate families */
    uint64_t epoch = 0;
    char *header = NULL, err[256];
    NF_CHECK_EQ(nf_store_committed(st, &epoch, &header, err, sizeof err), 0);
    NF_CHECK_EQ(epoch, 1);
    NF_CHECK_STR(header, "{\"epoch\":1}");
    free(header);
    nf_store_close(st);
    tmpdir_free(dir);
}

/* A family this version does not know (written by a newer one) must not stop the open. */
static void test_open_keeps_unknown_families(void)
{
    const char *dir = tmpdir_new();
    char db[PATH_MAX + 8], *rerr = NULL;
    snprintf(db, sizeof db, "%s/db", dir);
    NF_REQUIRE(mkdir(db, 0755) == 0);
    rocksdb_options_t *o = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(o, 1);
    rocksdb_options_set_create_missing_column_families(o, 1);
    const char *names[] = {"default", "from_the_future"};
    const rocksdb_options_t *opts[] = {o, o};
    rocksdb_column_family_handle_t *h[2];
    rocksdb_t *rdb = rocksdb_open_column_families(o, db, 2, names, opts, h, &rerr);
    NF_REQUIRE(rdb && !rerr);
    rocksdb_column_family_handle_destroy(h[0]);
    rocksdb_column_family_handle_destroy(h[1]);
    rocksdb_close(rdb);
    rocksdb_options_destroy(o);

    nf_store_t *st = open_store(dir);
    NF_CHECK(st != NULL);
    nf_store_close(st);
    tmpdir_free(dir);
}

typedef struct scan_acc {
    char keys[256];
    int calls, stop_after;
} scan_acc_t;

static int scan_cb(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
    scan_acc_t *a = arg;
    size_t used = strlen(a->keys);
    snprintf(a->keys + used, sizeof a->keys - used, "%.*s=%.*s;", (int)klen, (const char *)key,
             (int)vlen, (const char *)val);
    return ++a->calls == a->stop_after ? 42 : 0;
}

static void test_get_scan_batch(void)
{
    const char *dir = tmpdir_new();
    nf_store_t *st = open_store(dir);
    NF_REQUIRE(st);
    nf_store_batch_t *b = nf_store_batch_new();
    NF_REQUIRE(b);
    NF_CHECK_EQ(nf_store_batch_count(b), 0);
    NF_CHECK_EQ(nf_store_batch_bytes(b), 0);
    nf_store_batch_put(b, NF_KIND_ARTICLE_KEY, "c", 1, "3", 1);
    nf_store_batch_put(b, NF_KIND_ARTICLE_KEY, "a", 1, "1", 1);
    nf_store_batch_put(b, NF_KIND_ARTICLE_KEY, "b", 1, "x", 1);
    nf_store_batch_put(b, NF_KIND_ARTICLE_KEY, "b", 1, "2", 1); /* later op wins */
    nf_store_batch_put(b, NF_KIND_ARTICLE_KEY, "d", 1, "", 0);  /* empty value */
    nf_store_batch_delete(b, NF_KIND_ARTICLE_KEY, "zz", 2);     /* absent: harmless */
    NF_CHECK_EQ(nf_store_batch_count(b), 6);
    NF_CHECK(nf_store_batch_bytes(b) >= 6 * 2);
    char err[512];
    NF_CHECK_EQ(nf_store_pending_write(st, 1, "{}", &b, 1, NULL, 0, err, sizeof err), 0);
    NF_CHECK_EQ(nf_store_pending_apply(st, err, sizeof err), 0);

    void *v = NULL;
    size_t len = 99;
    NF_CHECK_EQ(nf_store_get(st, NF_KIND_ARTICLE_KEY, "d", 1, &v, &len, err, sizeof err), 1);
    NF_CHECK_EQ(len, 0);
    free(v);
    NF_CHECK_EQ(nf_store_get(st, NF_KIND_ARTICLE_KEY, "zz", 2, &v, &len, err, sizeof err), 0);

    scan_acc_t acc = {.stop_after = -1};
    NF_CHECK_EQ(nf_store_scan(st, NF_KIND_ARTICLE_KEY, scan_cb, &acc), 0);
    NF_CHECK_STR(acc.keys, "a=1;b=2;c=3;d=;");
    scan_acc_t stop = {.stop_after = 2};
    NF_CHECK_EQ(nf_store_scan(st, NF_KIND_ARTICLE_KEY, scan_cb, &stop), 42);
    NF_CHECK_STR(stop.keys, "a=1;b=2;");
    scan_acc_t none = {.stop_after = -1};
    NF_CHECK_EQ(nf_store_scan(st, NF_KIND_READS, scan_cb, &none), 0);
    NF_CHECK_EQ(none.calls, 0);

    /* clear keeps the batch usable; deletes remove committed keys */
    nf_store_batch_clear(b);
    NF_CHECK_EQ(nf_store_batch_count(b), 0);
    NF_CHECK_EQ(nf_store_batch_bytes(b), 0);
    nf_store_batch_delete(b, NF_KIND_ARTICLE_KEY, "a", 1);
    nf_store_batch_put(b, NF_KIND_ARTICLE_KEY, "c", 1, "33", 2);
    NF_CHECK_EQ(nf_store_pending_write(st, 2, "{}", &b, 1, NULL, 0, err, sizeof err), 0);
    NF_CHECK_EQ(nf_store_pending_apply(st, err, sizeof err), 0);
    NF_CHECK_STR(get_str(st, NF_KIND_ARTICLE_KEY, "a"), "");
    NF_CHECK_STR(get_str(st, NF_KIND_ARTICLE_KEY, "c"), "33");
    nf_store_batch_free(b);
    nf_store_batch_free(NULL);
    nf_store_close(st);
    tmpdir_free(dir);
}

/* nf_store_multi_get against nf_store_get, key by key: 150 keys (more than one MultiGet's
 * 64), every other one present, in no order, with an empty value and a repeated key. */
/* RocksDB's perf counters stay off on a thread that reads and writes through the store (their
 * thread-local counting cost ~20 % of an epoch's apply). The perf context is read directly:
 * with the level raised again on purpose the same gets count their comparisons. */
static void *perf_thread(void *arg)
{
    const char *dir = arg;
    nf_store_t *st = open_store(dir);
    if (!st)
        return (void *)1;
    rocksdb_perfcontext_t *pc = rocksdb_perfcontext_create();
    rocksdb_perfcontext_reset(pc);
    nf_store_batch_t *b = nf_store_batch_new();
    char key[16], err[512];
    for (int i = 0; i < 2000; i++) {
        snprintf(key, sizeof key, "k%05d", i * 7919 % 2000);
        nf_store_batch_put(b, NF_KIND_ARTICLE_KEY, key, strlen(key), "v", 1);
    }
    uintptr_t bad = nf_store_pending_write(st, 1, "{}", &b, 1, NULL, 0, err, sizeof err) != 0 ||
                    nf_store_pending_apply(st, err, sizeof err) != 0;
    void *v = NULL;
    size_t len;
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof key, "k%05d", i);
        bad |=
            nf_store_get(st, NF_KIND_ARTICLE_KEY, key, strlen(key), &v, &len, err, sizeof err) != 1;
        free(v);
    }
    uint64_t off = rocksdb_perfcontext_metric(pc, rocksdb_user_key_comparison_count);
    rocksdb_set_perf_level(2); /* kEnableCount, RocksDB's default */
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof key, "k%05d", i);
        bad |=
            nf_store_get(st, NF_KIND_ARTICLE_KEY, key, strlen(key), &v, &len, err, sizeof err) != 1;
        free(v);
    }
    uint64_t on = rocksdb_perfcontext_metric(pc, rocksdb_user_key_comparison_count) - off;
    fprintf(stderr, "  key comparisons counted: %llu with the store's level, %llu with counting\n",
            (unsigned long long)off, (unsigned long long)on);
    bad |= off != 0 || on == 0;
    rocksdb_perfcontext_destroy(pc);
    nf_store_batch_free(b);
    nf_store_close(st);
    return (void *)bad;
}

static void test_perf_counters_off(void)
{
    const char *dir = tmpdir_new();
    pthread_t t;
    void *bad = (void *)1;
    NF_REQUIRE(pthread_create(&t, NULL, perf_thread, (void *)dir) == 0);
    pthread_join(t, &bad);
    NF_CHECK(bad == NULL);
    tmpdir_free(dir);
}

static void test_multi_get(void)
{
    const char *dir = tmpdir_new();
    nf_store_t *st = open_store(dir);
    NF_REQUIRE(st);
    nf_store_batch_t *b = nf_store_batch_new();
    NF_REQUIRE(b);
    enum { N = 150 };
    unsigned char keys[N][4];
    for (unsigned i = 0; i < N; i++) {
        unsigned k = (i * 37u) % N; /* every key once, out of order */
        if (i == 7)
            k = (2 * 37u) % N; /* key 2's key (74: present) again */
        memcpy(keys[i], (unsigned char[4]){'k', (unsigned char)(k >> 8), (unsigned char)k, 0}, 4);
        if (k % 2 == 0) {
            char v[16];
            int n = k == 0 ? 0 : snprintf(v, sizeof v, "v%u", k);
            nf_store_batch_put(b, NF_KIND_CLUSTER_SIG, keys[i], 4, v, (size_t)n);
        }
    }
    char err[512];
    NF_CHECK_EQ(nf_store_pending_write(st, 1, "{}", &b, 1, NULL, 0, err, sizeof err), 0);
    NF_CHECK_EQ(nf_store_pending_apply(st, err, sizeof err), 0);
    void *vals[N];
    size_t lens[N];
    NF_CHECK_EQ(
        nf_store_multi_get(st, NF_KIND_CLUSTER_SIG, N, &keys[0][0], 4, vals, lens, err, sizeof err),
        0);
    size_t found = 0;
    for (unsigned i = 0; i < N; i++) {
        void *one = NULL;
        size_t len = 0;
        int r = nf_store_get(st, NF_KIND_CLUSTER_SIG, keys[i], 4, &one, &len, err, sizeof err);
        NF_CHECK_EQ(r, vals[i] != NULL);
        if (r == 1 && vals[i]) {
            found++;
            NF_CHECK_EQ(lens[i], len);
            NF_CHECK(memcmp(vals[i], one, len) == 0);
        }
        free(one);
        free(vals[i]);
    }
    NF_CHECK_EQ(found, N / 2 + 1); /* 75 even keys present, one of them asked twice */
    nf_store_batch_free(b);
    nf_store_close(st);
    tmpdir_free(dir);
}

static void test_pending_write_read_apply(void)
{
    const char *dir = tmpdir_new();
    nf_store_t *st = open_store(dir);
    NF_REQUIRE(st);
    char err[512];
    nf_store_pending_t p;
    NF_CHECK_EQ(nf_store_pending_read(st, &p, err, sizeof err), 0);
    NF_CHECK_EQ(nf_store_pending_apply(st, err, sizeof err), 0); /* nothing pending: fine */
    uint64_t epoch = 99;
    char *header = (char *)"x";
    NF_CHECK_EQ(nf_store_committed(st, &epoch, &header, err, sizeof err), 0);
    NF_CHECK_EQ(epoch, 0);
    NF_CHECK(header == NULL);

    /* an older pending record, replaced by the next write */
    nf_store_batch_t *old = nf_store_batch_new();
    nf_store_batch_put(old, NF_KIND_READS, "stale", 5, "1", 1);
    nf_blob_t old_out[3] = {{"o1", 2}, {"o2", 2}, {"o3", 2}};
    NF_CHECK_EQ(nf_store_pending_write(st, 6, "{\"old\":1}", &old, 1, old_out, 3, err, sizeof err),
                0);

    nf_store_batch_t *b[3] = {nf_store_batch_new(), NULL, nf_store_batch_new()};
    nf_store_batch_put(b[0], NF_KIND_READS, "u1", 2, "v1", 2);
    nf_store_batch_put(b[2], NF_KIND_EVENT_IDS, "e1", 2, "w1", 2);
    nf_store_batch_put(b[2], NF_KIND_CRAWL_SCHEDULE, "s1", 2, "c1", 2);
    static const char bin[] = {0, 1, 2, 0, (char)0xff};
    nf_blob_t outs[2] = {{"hello", 5}, {bin, sizeof bin}};
    const char *hdr = "{\"offsets\":{\"read_events\":[10,20]}}";
    NF_CHECK_EQ(nf_store_pending_write(st, 7, hdr, b, 3, outs, 2, err, sizeof err), 0);

    NF_REQUIRE(nf_store_pending_read(st, &p, err, sizeof err) == 1);
    NF_CHECK_EQ(p.epoch, 7);
    NF_CHECK_STR(p.header_json, hdr);
    NF_REQUIRE(p.noutputs == 2);
    NF_CHECK(p.outputs[0].len == 5 && !memcmp(p.outputs[0].data, "hello", 5));
    NF_CHECK(p.outputs[1].len == sizeof bin && !memcmp(p.outputs[1].data, bin, sizeof bin));
    nf_store_pending_free(&p);
    /* not applied yet: committed state unchanged */
    NF_CHECK_STR(get_str(st, NF_KIND_READS, "u1"), "");

    NF_CHECK_EQ(nf_store_pending_apply(st, err, sizeof err), 0);
    NF_CHECK_STR(get_str(st, NF_KIND_READS, "u1"), "v1");
    NF_CHECK_STR(get_str(st, NF_KIND_EVENT_IDS, "e1"), "w1");
    NF_CHECK_STR(get_str(st, NF_KIND_CRAWL_SCHEDULE, "s1"), "c1");
    NF_CHECK_STR(get_str(st, NF_KIND_READS, "stale"), ""); /* the replaced record's batch */
    NF_CHECK_EQ(nf_store_committed(st, &epoch, &header, err, sizeof err), 0);
    NF_CHECK_EQ(epoch, 7);
    NF_CHECK_STR(header, hdr);
    free(header);
    NF_CHECK_EQ(nf_store_pending_read(st, &p, err, sizeof err), 0);

    /* applying again is harmless */
    NF_CHECK_EQ(nf_store_pending_apply(st, err, sizeof err), 0);
    NF_CHECK_EQ(nf_store_committed(st, &epoch, NULL, err, sizeof err), 0);
    NF_CHECK_EQ(epoch, 7);
    NF_CHECK_STR(get_str(st, NF_KIND_READS, "u1"), "v1");

    /* a record applied, then written and applied again (the final write lost in a crash) */
    NF_CHECK_EQ(nf_store_pending_write(st, 7, hdr, b, 3, outs, 2, err, sizeof err), 0);
    NF_CHECK_EQ(nf_store_pending_apply(st, err, sizeof err), 0);
    NF_CHECK_STR(get_str(st, NF_KIND_READS, "u1"), "v1");
    scan_acc_t acc = {.stop_after = -1};
    NF_CHECK_EQ(nf_store_scan(st, NF_KIND_READS, scan_cb, &acc), 0);
    NF_CHECK_STR(acc.keys, "u1=v1;");

    nf_store_batch_free(old);
    nf_store_batch_free(b[0]);
    nf_store_batch_free(b[2]);
    nf_store_close(st);
    tmpdir_free(dir);
}

static void test_pending_survives_crash_and_discard(void)
{
    const char *dir = tmpdir_new();
    nf_store_t *st = open_store(dir);
    NF_REQUIRE(st);
    kv_t first[] = {{"k", "committed"}};
    NF_CHECK_EQ(commit(st, 1, NF_KIND_READS, first, 1), 0);
    nf_store_batch_t *b = nf_store_batch_new();
    nf_store_batch_put(b, NF_KIND_READS, "k", 1, "pending", 7);
    nf_blob_t out = {"out", 3};
    char err[512];
    NF_CHECK_EQ(nf_store_pending_write(st, 2, "{\"e\":2}", &b, 1, &out, 1, err, sizeof err), 0);
    nf_store_close(st); /* "crash": never applied */

    st = open_store(dir);
    NF_REQUIRE(st);
    nf_store_pending_t p;
    NF_REQUIRE(nf_store_pending_read(st, &p, err, sizeof err) == 1);
    NF_CHECK_EQ(p.epoch, 2);
    NF_CHECK_STR(p.header_json, "{\"e\":2}");
    NF_CHECK_EQ(p.noutputs, 1);
    nf_store_pending_free(&p);
    NF_CHECK_STR(get_str(st, NF_KIND_READS, "k"), "committed");
    NF_CHECK_EQ(nf_store_pending_apply(st, err, sizeof err), 0);
    NF_CHECK_STR(get_str(st, NF_KIND_READS, "k"), "pending");
    uint64_t epoch = 0;
    NF_CHECK_EQ(nf_store_committed(st, &epoch, NULL, err, sizeof err), 0);
    NF_CHECK_EQ(epoch, 2);

    /* discard: the record goes, state and committed epoch stay */
    nf_store_batch_clear(b);
    nf_store_batch_put(b, NF_KIND_READS, "k", 1, "discarded", 9);
    NF_CHECK_EQ(nf_store_pending_write(st, 3, "{}", &b, 1, NULL, 0, err, sizeof err), 0);
    NF_CHECK_EQ(nf_store_pending_discard(st, err, sizeof err), 0);
    NF_CHECK_EQ(nf_store_pending_read(st, &p, err, sizeof err), 0);
    NF_CHECK_EQ(nf_store_pending_apply(st, err, sizeof err), 0);
    NF_CHECK_STR(get_str(st, NF_KIND_READS, "k"), "pending");
    NF_CHECK_EQ(nf_store_committed(st, &epoch, NULL, err, sizeof err), 0);
    NF_CHECK_EQ(epoch, 2);
    nf_store_close(st);
    st = open_store(dir); /* the discard is durable */
    NF_REQUIRE(st);
    NF_CHECK_EQ(nf_store_pending_read(st, &p, err, sizeof err), 0);
    nf_store_batch_free(b);
    nf_store_close(st);
    tmpdir_free(dir);
}

static void ttl_value(unsigned char *out, uint64_t expires, const char *payload)
{
    for (int i = 0; i < 8; i++)
        out[i] = (unsigned char)(expires >> (8 * i));
    memcpy(out + 8, payload, strlen(payload));
}

static void test_ttl_compaction_filter(void)
{
    const char *dir = tmpdir_new();
    nf_store_t *st = open_store(dir);
    NF_REQUIRE(st);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
    unsigned char expired[10], never[10], future[10];
    ttl_value(expired, now - 60000, "ex");
    ttl_value(never, 0, "nv");
    ttl_value(future, now + 3600000, "fu");
    nf_store_batch_t *b = nf_store_batch_new();
    nf_store_batch_put(b, NF_KIND_EVENT_IDS, "expired", 7, expired, sizeof expired);
    nf_store_batch_put(b, NF_KIND_EVENT_IDS, "never", 5, never, sizeof never);
    nf_store_batch_put(b, NF_KIND_EVENT_IDS, "future", 6, future, sizeof future);
    nf_store_batch_put(b, NF_KIND_EVENT_IDS, "short", 5, "abc", 3);
    nf_store_batch_put(b, NF_KIND_ARTICLE_KEY, "expired", 7, expired, sizeof expired);
    char err[512];
    NF_CHECK_EQ(nf_store_pending_write(st, 1, "{}", &b, 1, NULL, 0, err, sizeof err), 0);
    NF_CHECK_EQ(nf_store_pending_apply(st, err, sizeof err), 0);
    /* compaction is lazy: until it runs, an expired value is still there (readers check) */
    void *v = NULL;
    size_t len = 0;
    NF_CHECK_EQ(nf_store_get(st, NF_KIND_EVENT_IDS, "expired", 7, &v, &len, err, sizeof err), 1);
    free(v);

    NF_CHECK_EQ(nf_store_compact(st, err, sizeof err), 0);
    NF_CHECK_EQ(nf_store_get(st, NF_KIND_EVENT_IDS, "expired", 7, &v, &len, err, sizeof err), 0);
    NF_CHECK_EQ(nf_store_get(st, NF_KIND_ARTICLE_KEY, "expired", 7, &v, &len, err, sizeof err), 0);
    NF_CHECK_EQ(nf_store_get(st, NF_KIND_EVENT_IDS, "never", 5, &v, &len, err, sizeof err), 1);
    NF_CHECK(len == sizeof never && !memcmp(v, never, len));
    free(v);
    NF_CHECK_EQ(nf_store_get(st, NF_KIND_EVENT_IDS, "future", 6, &v, &len, err, sizeof err), 1);
    free(v);
    NF_CHECK_EQ(nf_store_get(st, NF_KIND_EVENT_IDS, "short", 5, &v, &len, err, sizeof err), 1);
    free(v);
    /* the protocol's records in "default" are not TTL values */
    uint64_t epoch = 0;
    NF_CHECK_EQ(nf_store_committed(st, &epoch, NULL, err, sizeof err), 0);
    NF_CHECK_EQ(epoch, 1);
    nf_store_batch_free(b);
    nf_store_close(st);
    tmpdir_free(dir);
}

static void test_second_open_reports_lock(void)
{
    const char *dir = tmpdir_new();
    nf_store_t *st = open_store(dir);
    NF_REQUIRE(st);
    nf_store_opts_t o;
    nf_store_opts_default(&o);
    char err[1024] = "";
    nf_store_t *again = nf_store_open(dir, &o, err, sizeof err);
    NF_CHECK(again == NULL);
    char db[PATH_MAX + 8];
    snprintf(db, sizeof db, "%s/db", dir);
    NF_CHECK(strstr(err, db) != NULL);
    NF_CHECK(strstr(err, "LOCK") != NULL || strstr(err, "lock") != NULL);
    NF_CHECK(strstr(err, "another newsflow process") != NULL);
    nf_store_close(again);
    nf_store_close(st);

    /* read-only opens need an existing database, and say where they looked */
    o.read_only = true;
    char missing[PATH_MAX + 16];
    snprintf(missing, sizeof missing, "%s/nothing", dir);
    NF_CHECK(nf_store_open(missing, &o, err, sizeof err) == NULL);
    NF_CHECK(strstr(err, missing) != NULL);
    tmpdir_free(dir);
}

/* ---- a full file system (issue 36) ---- */

static int rocks_err(const char *reason, char *err, size_t errlen)
{
    return store_rocks_err(reason ? strdup(reason) : NULL, err, errlen, -EIO, "writing");
}

static void test_enospc_classified(void)
{
    char err[512];
    /* RocksDB's words for ENOSPC (IOStatus::NoSpace), as librocksdb 7.8 gives them */
    NF_CHECK_EQ(rocks_err("IO error: No space left on device: While appending to file: "
                          "/s/db/000004.log: No space left on device",
                          err, sizeof err),
                -ENOSPC);
    NF_CHECK(strncmp(err, "writing: IO error: No space left on device", 42) == 0);
    NF_CHECK_EQ(rocks_err("IO error: While fsync: a file: Input/output error", err, sizeof err),
                -EIO);
    NF_CHECK_EQ(rocks_err("Corruption: block checksum mismatch", err, sizeof err), -EIO);
    NF_CHECK_EQ(rocks_err(NULL, err, sizeof err), -EIO);
    NF_CHECK_STR(err, "writing: unknown RocksDB error");
}

static void test_space_text(void)
{
    nf_store_space_t sp = {.free_bytes = 1258291, .size_bytes = 20ull << 30};
    snprintf(sp.mount, sizeof sp.mount, "/srv");
    snprintf(sp.device, sizeof sp.device, "/dev/sdb1");
    snprintf(sp.type, sizeof sp.type, "ext4");
    char out[1400];
    nf_store_space_text(&sp, out, sizeof out);
    NF_CHECK_STR(out, "file system /srv (ext4 on /dev/sdb1): 1.2 MiB free of 20.0 GiB");
    sp.free_bytes = 0;
    sp.mount[0] = '\0'; /* not found in /proc/self/mounts */
    nf_store_space_text(&sp, out, sizeof out);
    NF_CHECK_STR(out, "file system: 0 B free of 20.0 GiB");

    /* a real directory: its file system's size, and a mount point above it */
    const char *dir = tmpdir_new();
    NF_CHECK_EQ(nf_store_space(dir, &sp), 0);
    NF_CHECK(sp.size_bytes > 0 && sp.free_bytes <= sp.size_bytes);
    char real[PATH_MAX];
    NF_REQUIRE(realpath(dir, real));
    NF_CHECK(sp.mount[0] == '/' && strncmp(real, sp.mount, strlen(sp.mount)) == 0);
    NF_CHECK(sp.type[0] != '\0');
    char missing[PATH_MAX + 16];
    snprintf(missing, sizeof missing, "%s/nothing", dir);
    NF_CHECK_EQ(nf_store_space(missing, &sp), -ENOENT);
    tmpdir_free(dir);
}

/* ---- checkpoints ---- */

static char *file_in(const char *dir, const char *sub, const char *suffix, char *out, size_t n)
{
    char d[PATH_MAX];
    snprintf(d, sizeof d, "%s/%s", dir, sub);
    DIR *dd = opendir(d);
    if (!dd)
        return NULL;
    const struct dirent *de;
    char *found = NULL;
    while ((de = readdir(dd)) != NULL) {
        size_t l = strlen(de->d_name), sl = strlen(suffix);
        if (l > sl && !strcmp(de->d_name + l - sl, suffix)) {
            if (snprintf(out, n, "%s/%s", d, de->d_name) >= (int)n)
                break; /* does not fit: not found */
            found = out;
            break;
        }
    }
    closedir(dd);
    return found;
}

static size_t count_checkpoints(const char *dir)
{
    nf_checkpoint_info_t *list = NULL;
    size_t n = 0;
    if (nf_checkpoint_list(dir, &list, &n) != 0)
        return (size_t)-1;
    free(list);
    return n;
}

static void test_checkpoint_create_list_manifest_verify(void)
{
    const char *dir = tmpdir_new();
    nf_store_t *st = open_store(dir);
    NF_REQUIRE(st);
    char err[1024];
    NF_CHECK_EQ(count_checkpoints(dir), 0);
    NF_CHECK(nf_checkpoint_path(dir, "latest", err, sizeof err) == NULL);
    NF_CHECK(strstr(err, "none") != NULL);

    kv_t kvs[] = {{"a", "1"}, {"b", "2"}, {"c", "3"}};
    NF_CHECK_EQ(commit(st, 42, NF_KIND_ARTICLE_KEY, kvs, 3), 0);
    NF_CHECK_EQ(nf_store_checkpoint(st, 42, "cafe0123", 0, err, sizeof err), 0);

    /* no checkpoint while a record is pending */
    nf_store_batch_t *b = nf_store_batch_new();
    NF_CHECK_EQ(nf_store_pending_write(st, 43, "{}", &b, 1, NULL, 0, err, sizeof err), 0);
    NF_CHECK_EQ(nf_store_checkpoint(st, 43, NULL, 0, err, sizeof err), -EBUSY);
    NF_CHECK(strstr(err, "pending") != NULL);
    NF_CHECK_EQ(nf_store_pending_discard(st, err, sizeof err), 0);
    nf_store_batch_free(b);

    nf_checkpoint_info_t *list = NULL;
    size_t n = 0;
    NF_CHECK_EQ(nf_checkpoint_list(dir, &list, &n), 0);
    NF_REQUIRE(n == 1);
    NF_CHECK_STR(list[0].id, "chk-000000000042");
    NF_CHECK_EQ(list[0].epoch, 42);
    NF_CHECK(list[0].files >= 3); /* CURRENT, MANIFEST, OPTIONS, tables */
    NF_CHECK(list[0].bytes > 0);
    NF_CHECK(strlen(list[0].created_at) == 20 && list[0].created_at[10] == 'T');
    free(list);

    const char *ids[] = {"latest", "42", "chk-42", "chk-000000000042", "0042"};
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
        char *p = nf_checkpoint_path(dir, ids[i], err, sizeof err);
        NF_CHECK(p && strstr(p, "/checkpoints/chk-000000000042"));
        free(p);
    }
    NF_CHECK(nf_checkpoint_path(dir, "7", err, sizeof err) == NULL);
    NF_CHECK(strstr(err, "chk-000000000042") != NULL); /* the message lists what exists */
    NF_CHECK(nf_checkpoint_path(dir, "../db", err, sizeof err) == NULL);
    NF_CHECK(strstr(err, "not a checkpoint id") != NULL);

    char *text = nf_checkpoint_manifest(dir, "latest", err, sizeof err);
    NF_REQUIRE(text);
    cJSON *m = cJSON_Parse(text);
    free(text);
    NF_REQUIRE(m);
    NF_CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(m, "id")), "chk-000000000042");
    NF_CHECK_EQ(cJSON_GetNumberValue(cJSON_GetObjectItem(m, "epoch")), 42);
    NF_CHECK_EQ(cJSON_GetNumberValue(cJSON_GetObjectItem(m, "committed_epoch")), 42);
    NF_CHECK(cJSON_IsString(cJSON_GetObjectItem(m, "created_at")));
    NF_CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(m, "config_hash")), "cafe0123");
    NF_CHECK(cJSON_IsString(cJSON_GetObjectItem(m, "version")));
    const cJSON *h = cJSON_GetObjectItem(m, "header");
    NF_CHECK(cJSON_IsObject(h) && cJSON_GetNumberValue(cJSON_GetObjectItem(h, "epoch")) == 42);
    NF_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(m, "files")) >= 3);
    NF_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(m, "bytes")) > 0);
    NF_CHECK_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(m, "file_list")),
                cJSON_GetNumberValue(cJSON_GetObjectItem(m, "files")));
    const cJSON *kinds = cJSON_GetObjectItem(m, "kinds");
    for (int k = 0; k < NF_KIND__COUNT; k++) {
        const cJSON *ko = cJSON_GetObjectItem(kinds, nf_state_kind_name((nf_state_kind_t)k));
        NF_CHECK(cJSON_IsNumber(cJSON_GetObjectItem(ko, "keys_estimate")));
    }
    NF_CHECK_EQ(cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(kinds, "article_key"),
                                                         "keys_estimate")),
                3);
    cJSON_Delete(m);

    nf_checkpoint_stats_t s;
    NF_CHECK_EQ(nf_checkpoint_verify_stats(dir, "42", &s, err, sizeof err), 0);
    NF_CHECK_EQ(s.epoch, 42);
    NF_CHECK_EQ(s.keys, 3 + 1); /* three state keys and "committed" */
    NF_CHECK(s.files >= 3 && s.bytes > 0);
    NF_CHECK_EQ(nf_checkpoint_verify(dir, "latest", err, sizeof err), 0);
    /* verifying twice: the read-only open left nothing that upsets the file check */
    NF_CHECK_EQ(nf_checkpoint_verify(dir, "latest", err, sizeof err), 0);
    NF_CHECK_EQ(nf_checkpoint_verify(dir, "41", err, sizeof err), -ENOENT);

    /* the checkpoint is a database of its own */
    char *p = nf_checkpoint_path(dir, "42", err, sizeof err);
    NF_REQUIRE(p);
    nf_store_t *ro = nf_store_open_dir(p, true, err, sizeof err);
    NF_CHECK(ro != NULL);
    if (ro)
        NF_CHECK_STR(get_str(ro, NF_KIND_ARTICLE_KEY, "b"), "2");
    nf_store_close(ro);
    free(p);

    /* a checkpoint of the same epoch replaces the old one */
    kv_t more[] = {{"d", "4"}};
    NF_CHECK_EQ(commit(st, 43, NF_KIND_ARTICLE_KEY, more, 1), 0);
    NF_CHECK_EQ(nf_store_checkpoint(st, 42, NULL, 0, err, sizeof err), 0);
    NF_CHECK_EQ(count_checkpoints(dir), 1);
    NF_CHECK_EQ(nf_checkpoint_verify_stats(dir, "42", &s, err, sizeof err), 0);
    NF_CHECK_EQ(s.keys, 4 + 1);
    nf_store_close(st);
    tmpdir_free(dir);
}

/* Checkpoints share their table files with each other and the live database (hard links):
 * give the file a private copy before damaging it. */
static int unshare_link(const char *path)
{
    char tmp[PATH_MAX + 8], cmd[3 * PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s' && mv '%s' '%s'", path, tmp, tmp, path);
    return system(cmd);
}

/* Epoch 1: n keys "key%06d" of kind reads with distinct values "value-I-I*7919" (enough of them
 * that the table's data blocks are most of the file). 0 or -1. */
static int fill_reads(nf_store_t *st, int n)
{
    char err[512];
    nf_store_batch_t *b = nf_store_batch_new();
    for (int i = 0; b && i < n; i++) {
        char k[16], v[64];
        snprintf(k, sizeof k, "key%06d", i);
        snprintf(v, sizeof v, "value-%d-%d", i, i * 7919);
        nf_store_batch_put(b, NF_KIND_READS, k, strlen(k), v, strlen(v));
    }
    int r = b && nf_store_pending_write(st, 1, "{}", &b, 1, NULL, 0, err, sizeof err) == 0 &&
                    nf_store_pending_apply(st, err, sizeof err) == 0
                ? 0
                : -1;
    nf_store_batch_free(b);
    return r;
}

static void test_checkpoint_verify_detects_damage(void)
{
    const char *dir = tmpdir_new();
    nf_store_t *st = open_store(dir);
    NF_REQUIRE(st);
    char err[1024];
    /* enough distinct values that the table's data blocks are most of the file */
    NF_CHECK_EQ(fill_reads(st, 2000), 0);
    for (uint64_t e = 1; e <= 4; e++)
        NF_CHECK_EQ(nf_store_checkpoint(st, e, NULL, 0, err, sizeof err), 0);
    nf_store_close(st);
    for (int e = 1; e <= 4; e++) {
        char id[8];
        snprintf(id, sizeof id, "%d", e);
        NF_CHECK_EQ(nf_checkpoint_verify(dir, id, err, sizeof err), 0);
    }

    char sst[PATH_MAX];
    /* 1: a table file truncated */
    NF_REQUIRE(file_in(dir, "checkpoints/chk-000000000001", ".sst", sst, sizeof sst));
    NF_REQUIRE(unshare_link(sst) == 0);
    struct stat sb;
    NF_REQUIRE(stat(sst, &sb) == 0);
    NF_REQUIRE(truncate(sst, sb.st_size - 100) == 0);
    int r = nf_checkpoint_verify(dir, "1", err, sizeof err);
    NF_CHECK(r < 0);
    NF_CHECK(strstr(err, ".sst") != NULL && strstr(err, "truncated") != NULL);

    /* 2: bytes flipped inside a data block, size unchanged: RocksDB's checksums catch it */
    NF_REQUIRE(file_in(dir, "checkpoints/chk-000000000002", ".sst", sst, sizeof sst));
    NF_REQUIRE(unshare_link(sst) == 0);
    int fd = open(sst, O_RDWR);
    NF_REQUIRE(fd >= 0);
    char junk[64];
    memset(junk, 'Z', sizeof junk);
    NF_CHECK(pwrite(fd, junk, sizeof junk, 200) == (ssize_t)sizeof junk);
    close(fd);
    r = nf_checkpoint_verify(dir, "2", err, sizeof err);
    NF_CHECK_EQ(r, -EIO);
    NF_CHECK(strstr(err, "chk-000000000002") != NULL);
    fprintf(stderr, "  (corrupted table reported as: %s)\n", err);

    /* 3: a listed file missing */
    NF_REQUIRE(file_in(dir, "checkpoints/chk-000000000003", ".sst", sst, sizeof sst));
    NF_REQUIRE(unlink(sst) == 0);
    NF_CHECK_EQ(nf_checkpoint_verify(dir, "3", err, sizeof err), -ENOENT);
    NF_CHECK(strstr(err, "missing") != NULL);

    /* 4: the manifest unreadable */
    char mpath[PATH_MAX];
    snprintf(mpath, sizeof mpath, "%s/checkpoints/chk-000000000004/manifest.json", dir);
    FILE *f = fopen(mpath, "w");
    NF_REQUIRE(f);
    fputs("{not json", f);
    fclose(f);
    NF_CHECK_EQ(nf_checkpoint_verify(dir, "4", err, sizeof err), -EBADMSG);
    NF_CHECK(strstr(err, "manifest.json") != NULL);
    /* ... and list leaves it out */
    NF_CHECK_EQ(count_checkpoints(dir), 3);
    tmpdir_free(dir);
}

static void test_checkpoint_prune_delete(void)
{
    const char *dir = tmpdir_new();
    nf_store_t *st = open_store(dir);
    NF_REQUIRE(st);
    char err[1024];
    for (uint64_t e = 1; e <= 5; e++) {
        kv_t kv[] = {{"k", "v"}};
        NF_CHECK_EQ(commit(st, e, NF_KIND_READS, kv, 1), 0);
        NF_CHECK_EQ(nf_store_checkpoint(st, e, NULL, 0, err, sizeof err), 0);
    }
    /* leftovers of a crash mid-checkpoint are neither listed nor kept */
    char stale[PATH_MAX];
    snprintf(stale, sizeof stale, "%s/checkpoints/.tmp-chk-000000000009-1", dir);
    NF_CHECK(mkdir(stale, 0755) == 0);
    NF_CHECK_EQ(count_checkpoints(dir), 5);
    NF_CHECK_EQ(nf_store_checkpoint_prune(dir, 2), 3);
    nf_checkpoint_info_t *list = NULL;
    size_t n = 0;
    NF_CHECK_EQ(nf_checkpoint_list(dir, &list, &n), 0);
    NF_REQUIRE(n == 2);
    NF_CHECK_STR(list[0].id, "chk-000000000004");
    NF_CHECK_STR(list[1].id, "chk-000000000005");
    free(list);
    NF_CHECK_EQ(nf_store_checkpoint_prune(dir, 2), 0);
    NF_CHECK_EQ(nf_store_checkpoint(st, 6, NULL, 0, err, sizeof err), 0);
    NF_CHECK(access(stale, F_OK) != 0);

    NF_CHECK_EQ(nf_checkpoint_delete(dir, "chk-4", err, sizeof err), 0);
    NF_CHECK_EQ(nf_checkpoint_delete(dir, "4", err, sizeof err), -ENOENT);
    NF_CHECK(strstr(err, "chk-000000000005, chk-000000000006") != NULL);
    NF_CHECK_EQ(nf_checkpoint_delete(dir, "latest", err, sizeof err), 0);
    NF_CHECK_EQ(count_checkpoints(dir), 1);
    char *p = nf_checkpoint_path(dir, "latest", err, sizeof err);
    NF_CHECK(p && strstr(p, "chk-000000000005"));
    free(p);
    nf_store_close(st);
    tmpdir_free(dir);
}

static void test_checkpoint_restore(void)
{
    const char *dir = tmpdir_new();
    nf_store_t *st = open_store(dir);
    NF_REQUIRE(st);
    char err[1024];
    kv_t v1[] = {{"k", "one"}, {"gone-later", "x"}};
    NF_CHECK_EQ(commit(st, 1, NF_KIND_READS, v1, 2), 0);
    NF_CHECK_EQ(nf_store_checkpoint(st, 1, NULL, 0, err, sizeof err), 0);
    kv_t v2[] = {{"k", "two"}, {"gone-later", NULL}, {"new", "y"}};
    NF_CHECK_EQ(commit(st, 2, NF_KIND_READS, v2, 3), 0);
    nf_store_close(st);

    NF_CHECK_EQ(nf_checkpoint_restore(dir, "nope", NULL, NULL, err, sizeof err), -EINVAL);
    NF_CHECK_EQ(nf_checkpoint_restore(dir, "1", NULL, NULL, err, sizeof err), 0);
    st = open_store(dir);
    NF_REQUIRE(st);
    NF_CHECK_STR(get_str(st, NF_KIND_READS, "k"), "one");
    NF_CHECK_STR(get_str(st, NF_KIND_READS, "gone-later"), "x");
    NF_CHECK_STR(get_str(st, NF_KIND_READS, "new"), "");
    uint64_t epoch = 0;
    NF_CHECK_EQ(nf_store_committed(st, &epoch, NULL, err, sizeof err), 0);
    /* the state is the checkpoint's, the numbering goes on after the replaced database's
     * epoch 2: epoch numbers are never used twice in a state directory */
    NF_CHECK_EQ(epoch, 2);
    /* the restored database lives on without touching the checkpoint it came from */
    kv_t v3[] = {{"k", "three"}};
    NF_CHECK_EQ(commit(st, 3, NF_KIND_READS, v3, 1), 0);
    NF_CHECK_EQ(nf_store_compact(st, err, sizeof err), 0);
    nf_store_close(st);
    NF_CHECK_EQ(nf_checkpoint_verify(dir, "1", err, sizeof err), 0);

    /* the replaced database is kept, whole */
    DIR *d = opendir(dir);
    NF_REQUIRE(d);
    const struct dirent *de;
    char replaced[PATH_MAX] = "";
    int nreplaced = 0;
    while ((de = readdir(d)) != NULL) {
        if (!strncmp(de->d_name, "db.replaced-", 12)) {
            snprintf(replaced, sizeof replaced, "%s/%s", dir, de->d_name);
            nreplaced++;
        }
        NF_CHECK(strncmp(de->d_name, ".db.restoring", 13) != 0);
    }
    closedir(d);
    NF_CHECK_EQ(nreplaced, 1);
    nf_store_t *old = nf_store_open_dir(replaced, true, err, sizeof err);
    NF_CHECK(old != NULL);
    if (old) {
        NF_CHECK_STR(get_str(old, NF_KIND_READS, "k"), "two");
        NF_CHECK_STR(get_str(old, NF_KIND_READS, "new"), "y");
    }
    nf_store_close(old);

    /* a second restore in the same second does not overwrite the first replaced db */
    NF_CHECK_EQ(nf_checkpoint_restore(dir, "latest", NULL, NULL, err, sizeof err), 0);
    d = opendir(dir);
    NF_REQUIRE(d);
    nreplaced = 0;
    while ((de = readdir(d)) != NULL)
        nreplaced += !strncmp(de->d_name, "db.replaced-", 12);
    closedir(d);
    NF_CHECK_EQ(nreplaced, 2);
    st = open_store(dir);
    NF_REQUIRE(st);
    NF_CHECK_STR(get_str(st, NF_KIND_READS, "k"), "one");
    nf_store_close(st);

    /* restoring into a state directory that has no db/ yet */
    char fresh[PATH_MAX], cp[PATH_MAX * 2 + 32];
    snprintf(fresh, sizeof fresh, "%s/fresh", dir);
    NF_REQUIRE(mkdir(fresh, 0755) == 0);
    snprintf(cp, sizeof cp, "cp -r '%s/checkpoints' '%s/'", dir, fresh);
    NF_REQUIRE(system(cp) == 0);
    NF_CHECK_EQ(nf_checkpoint_restore(fresh, "1", NULL, NULL, err, sizeof err), 0);
    st = open_store(fresh);
    NF_CHECK(st && !strcmp(get_str(st, NF_KIND_READS, "k"), "one"));
    nf_store_close(st);
    tmpdir_free(dir);
}

static int count_replaced(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    const struct dirent *de;
    while (d && (de = readdir(d)) != NULL)
        n += !strncmp(de->d_name, "db.replaced-", 12);
    if (d)
        closedir(d);
    return n;
}

/* A copy of the largest .sst of dir (the original is a hard link shared with the live database)
 * with one byte in its middle flipped: same size, wrong checksum. */
static void corrupt_largest_sst(const char *dir)
{
    DIR *d = opendir(dir);
    NF_REQUIRE(d);
    char best[PATH_MAX * 2] = "";
    off_t best_size = -1;
    const struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        struct stat sb;
        char p[PATH_MAX * 2];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        if (l > 4 && !strcmp(de->d_name + l - 4, ".sst") && stat(p, &sb) == 0 &&
            sb.st_size > best_size) {
            best_size = sb.st_size;
            snprintf(best, sizeof best, "%s", p);
        }
    }
    closedir(d);
    NF_REQUIRE(best_size > 0);
    char *buf = malloc((size_t)best_size);
    NF_REQUIRE(buf);
    FILE *f = fopen(best, "rb");
    NF_REQUIRE(f && fread(buf, 1, (size_t)best_size, f) == (size_t)best_size);
    fclose(f);
    buf[best_size / 2] ^= (char)0xFF;
    char tmp[PATH_MAX * 2 + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", best);
    f = fopen(tmp, "wb");
    NF_REQUIRE(f && fwrite(buf, 1, (size_t)best_size, f) == (size_t)best_size);
    fclose(f);
    free(buf);
    NF_REQUIRE(rename(tmp, best) == 0);
}

/* Every check that can refuse a restore runs before anything moves; newer checkpoints survive a
 * restore of an older one and epochs continue after them; old databases are pruned. */
static void test_checkpoint_restore_checks_first_keeps_newer(void)
{
    const char *dir = tmpdir_new();
    nf_store_t *st = open_store(dir);
    NF_REQUIRE(st);
    char err[1024];
    const char *vals[] = {"one", "two", "three"};
    for (uint64_t e = 1; e <= 3; e++) {
        kv_t v[] = {{"k", vals[e - 1]}};
        NF_CHECK_EQ(commit(st, e, NF_KIND_READS, v, 1), 0);
        NF_CHECK_EQ(nf_store_checkpoint(st, e, NULL, 2, err, sizeof err), 0);
    }
    nf_store_close(st);

    nf_restore_result_t res;
    nf_restore_opts_t o = {.shards = 3, .keep_replaced = 1};
    NF_CHECK_EQ(nf_checkpoint_restore(dir, "1", &o, &res, err, sizeof err), -EINVAL);
    NF_CHECK(res.resolved && !res.moved);
    NF_CHECK(strstr(err, "was taken with runtime.shards=2, the job runs with 3") != NULL);
    NF_CHECK_EQ(count_replaced(dir), 0);

    char chk[PATH_MAX + 64];
    snprintf(chk, sizeof chk, "%s/checkpoints/chk-000000000002", dir);
    corrupt_largest_sst(chk);
    o.shards = 2;
    NF_CHECK(nf_checkpoint_restore(dir, "2", &o, &res, err, sizeof err) != 0);
    NF_CHECK(res.resolved && !res.moved);
    NF_CHECK(strstr(err, "orruption") != NULL || strstr(err, "checksum") != NULL ||
             strstr(err, "does not match the hash") != NULL);
    NF_CHECK_EQ(count_replaced(dir), 0);
    st = open_store(dir);
    NF_REQUIRE(st);
    NF_CHECK_STR(get_str(st, NF_KIND_READS, "k"), "three"); /* the live state as it was */
    nf_store_close(st);

    NF_CHECK_EQ(nf_checkpoint_restore(dir, "1", &o, &res, err, sizeof err), 0);
    NF_CHECK(res.moved);
    NF_CHECK_EQ(res.kept_newer, 2);
    NF_CHECK_EQ(res.next_epoch, 4);
    NF_CHECK_STR(res.newest_kept, "chk-000000000003");
    NF_CHECK(strstr(res.replaced, "-epoch3") != NULL);
    NF_CHECK_EQ(count_replaced(dir), 1);
    st = open_store(dir);
    NF_REQUIRE(st);
    NF_CHECK_STR(get_str(st, NF_KIND_READS, "k"), "one");
    uint64_t epoch = 0;
    NF_CHECK_EQ(nf_store_committed(st, &epoch, NULL, err, sizeof err), 0);
    NF_CHECK_EQ(epoch, 3); /* the next epoch is 4: no new checkpoint takes a kept one's name */
    nf_store_close(st);
    nf_checkpoint_info_t *list = NULL;
    size_t n = 0;
    NF_CHECK_EQ(nf_checkpoint_list(dir, &list, &n), 0);
    NF_CHECK_EQ(n, 3);
    if (n == 3) {
        NF_CHECK_STR(list[0].note, "restored");
        NF_CHECK_STR(list[1].note, "newer than the restore");
        NF_CHECK_STR(list[2].note, "newer than the restore");
        NF_CHECK_EQ(list[2].shards, 2);
    }
    free(list);
    NF_CHECK_EQ(nf_checkpoint_verify(dir, "3", err, sizeof err), 0);

    /* keep_replaced = 1: the second restore's old database replaces the first's */
    NF_CHECK_EQ(nf_checkpoint_restore(dir, "3", &o, &res, err, sizeof err), 0);
    NF_CHECK_EQ(res.pruned, 1);
    NF_CHECK_EQ(res.kept_newer, 0);
    NF_CHECK_EQ(count_replaced(dir), 1);
    tmpdir_free(dir);
}

/* ---- nf_store_ingest against nf_store_write (a reference: the same batches written) ---- */

typedef struct dump {
    char *buf;
    size_t len, cap;
} dump_t;

static int dump_cb(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
    dump_t *d = arg;
    size_t need = klen + vlen + 2;
    if (d->cap - d->len < need + 1) {
        size_t ncap = d->cap ? d->cap * 2 : 4096;
        while (ncap - d->len < need + 1)
            ncap *= 2;
        char *nb = realloc(d->buf, ncap);
        if (!nb)
            return -ENOMEM;
        d->buf = nb;
        d->cap = ncap;
    }
    memcpy(d->buf + d->len, key, klen);
    d->buf[d->len + klen] = '=';
    memcpy(d->buf + d->len + klen + 1, val, vlen);
    d->buf[d->len + klen + 1 + vlen] = ';';
    d->len += need;
    d->buf[d->len] = 0;
    return 0;
}

/* Every family's content as "kind:k=v;...|...": malloc'd. */
static char *dump_all(nf_store_t *st)
{
    dump_t d = {0};
    for (int k = 0; k < NF_KIND__COUNT; k++) {
        char tag[8];
        int tl = snprintf(tag, sizeof tag, "|%d:", k);
        dump_cb(tag, (size_t)tl, "", 0, &d);
        if (nf_store_scan(st, (nf_state_kind_t)k, dump_cb, &d) != 0) {
            free(d.buf);
            return strdup("SCAN ERROR");
        }
    }
    return d.buf;
}

static uint64_t rnd_next(uint64_t *s)
{
    return nf_test_xorshift(s);
}

static int count_prefix(const char *db_dir, const char *prefix)
{
    DIR *d = opendir(db_dir);
    int n = 0;
    const struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (d)
        closedir(d);
    return n;
}

static int count_ingest_tmp(const char *db_dir)
{
    return count_prefix(db_dir, "newsflow-ingest-");
}

/* The pending record's files in db_dir whose names end in ext (".sst", ".body"). */
static int count_pending(const char *db_dir, const char *ext)
{
    DIR *d = opendir(db_dir);
    int n = 0;
    const struct dirent *e;
    size_t el = strlen(ext);
    while (d && (e = readdir(d)) != NULL) {
        size_t nl = strlen(e->d_name);
        n += strncmp(e->d_name, "newsflow-pending-", 17) == 0 && nl > el &&
             strcmp(e->d_name + nl - el, ext) == 0;
    }
    if (d)
        closedir(d);
    return n;
}

/* The one pending file in db_dir whose name ends in ext, its path into out. */
static bool pending_file(const char *db_dir, const char *ext, char *out, size_t n)
{
    DIR *d = opendir(db_dir);
    const struct dirent *e;
    bool found = false;
    size_t el = strlen(ext);
    while (d && !found && (e = readdir(d)) != NULL) {
        size_t nl = strlen(e->d_name);
        if (strncmp(e->d_name, "newsflow-pending-", 17) == 0 && nl > el &&
            strcmp(e->d_name + nl - el, ext) == 0)
            found = snprintf(out, n, "%s/%s", db_dir, e->d_name) < (int)n;
    }
    if (d)
        closedir(d);
    return found;
}

static void test_ingest_equals_write(void)
{
    char dir_a[PATH_MAX], dir_b[PATH_MAX], db_b[PATH_MAX + 8], err[512];
    snprintf(dir_a, sizeof dir_a, "%s", tmpdir_new());
    snprintf(dir_b, sizeof dir_b, "%s", tmpdir_new());
    snprintf(db_b, sizeof db_b, "%s/db", dir_b);
    nf_store_t *a = open_store(dir_a), *b = open_store(dir_b);
    NF_REQUIRE(a && b);
    const nf_state_kind_t kinds[3] = {NF_KIND_INTEREST, NF_KIND_EVENT_IDS, NF_KIND_TRENDING};
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    nf_store_batch_t *batch = nf_store_batch_new();
    NF_REQUIRE(batch);
    for (int round = 0; round < 40; round++) {
        /* 1..600 operations over 64 keys per kind: the same key several times in a batch, keys
         * that are prefixes of others, deletes of keys written before and of absent ones */
        int nops = 1 + (int)(rnd_next(&seed) % 600);
        for (int i = 0; i < nops; i++) {
            uint64_t x = rnd_next(&seed);
            nf_state_kind_t kind = kinds[x % 3];
            char key[16], val[32];
            int kl = snprintf(key, sizeof key, "k%u", (unsigned)((x >> 8) % 64));
            if ((x >> 20) % 4 == 0) {
                nf_store_batch_delete(batch, kind, key, (size_t)kl);
            } else {
                int vl = (x >> 24) % 7 == 0 ? 0 : snprintf(val, sizeof val, "r%d-%d", round, i);
                nf_store_batch_put(batch, kind, key, (size_t)kl, val, (size_t)vl);
            }
        }
        NF_CHECK_EQ(nf_store_write(a, batch, err, sizeof err), 0);
        /* b: every third round through the memtable (so an ingest lands on unflushed writes) */
        int r = round % 3 == 2 ? nf_store_write(b, batch, err, sizeof err)
                               : nf_store_ingest(b, batch, err, sizeof err);
        if (r != 0)
            fprintf(stderr, "round %d: %s\n", round, err);
        NF_CHECK_EQ(r, 0);
        nf_store_batch_clear(batch);
        char *da = dump_all(a), *db = dump_all(b);
        if (strcmp(da, db) != 0)
            fprintf(stderr, "round %d differs:\n write:  %.300s\n ingest: %.300s\n", round, da, db);
        NF_CHECK_STR(da, db);
        free(da);
        free(db);
    }
    NF_CHECK_EQ(count_ingest_tmp(db_b), 0);
    /* an empty batch ingests nothing; an incomplete one is refused */
    NF_CHECK_EQ(nf_store_ingest(b, batch, err, sizeof err), 0);
    nf_store_batch_fail(batch);
    NF_CHECK_EQ(nf_store_ingest(b, batch, err, sizeof err), -ENOMEM);
    nf_store_batch_free(batch);

    /* durable without a flush (b reopened), and a table file an ingest left behind is removed */
    char *before = dump_all(b);
    nf_store_close(b);
    char junk[PATH_MAX + 64];
    snprintf(junk, sizeof junk, "%s/newsflow-ingest-1-1.sst", db_b);
    int fd = open(junk, O_CREAT | O_WRONLY, 0644);
    NF_CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
    NF_CHECK_EQ(count_ingest_tmp(db_b), 1);
    b = open_store(dir_b);
    NF_REQUIRE(b);
    NF_CHECK_EQ(count_ingest_tmp(db_b), 0);
    char *after = dump_all(b);
    NF_CHECK_STR(after, before);
    free(before);
    free(after);
    nf_store_close(a);
    nf_store_close(b);
    tmpdir_free(dir_a);
    tmpdir_free(dir_b);
}

/* One random epoch into two shards' batches over 3 kinds and 96 keys per kind: a key written
 * several times in a batch and by both batches, deletes of present and absent keys, kinds with
 * few records and kinds with many (INGEST_MIN below decides which go in as table files). */
#define INGEST_MIN 600 /* bytes: ~50 of these records */
static void random_epoch(nf_store_batch_t *bs[2], uint64_t *seed, int round)
{
    static const nf_state_kind_t kinds[3] = {NF_KIND_INTEREST, NF_KIND_EVENT_IDS, NF_KIND_TRENDING};
    int sizes[3];
    for (int k = 0; k < 3; k++)
        sizes[k] = (int)(rnd_next(seed) % 120);
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < sizes[k]; i++) {
            uint64_t x = rnd_next(seed);
            nf_store_batch_t *b = bs[x % 2];
            char key[16], val[32];
            int kl = snprintf(key, sizeof key, "k%u", (unsigned)((x >> 8) % 96));
            if ((x >> 20) % 4 == 0) {
                nf_store_batch_delete(b, kinds[k], key, (size_t)kl);
            } else {
                int vl = snprintf(val, sizeof val, "r%d-%d-%d", round, k, i);
                nf_store_batch_put(b, kinds[k], key, (size_t)kl, val, (size_t)vl);
            }
        }
}

/* State written once: an epoch with a large kind writes it as a table file before the pending
 * record, which names it; the file survives a restart before the apply and is gone after it; a
 * missing file is refused by name with nothing applied; files no record names are removed at
 * open. */
static void test_pending_tables(void)
{
    char dir[PATH_MAX], db[PATH_MAX + 8], err[512], path[PATH_MAX + 300];
    snprintf(dir, sizeof dir, "%s", tmpdir_new());
    snprintf(db, sizeof db, "%s/db", dir);
    nf_store_t *st = open_store_ingest(dir, INGEST_MIN);
    NF_REQUIRE(st);
    nf_store_batch_t *b = nf_store_batch_new();
    char big[400], key[16];
    memset(big, 'v', sizeof big);
    for (int i = 0; i < 4; i++) { /* interest: 1.6 KB, a table file; event ids: a few bytes */
        snprintf(key, sizeof key, "k%d", i);
        nf_store_batch_put(b, NF_KIND_INTEREST, key, strlen(key), big, sizeof big);
    }
    nf_store_batch_put(b, NF_KIND_EVENT_IDS, "e", 1, "1", 1);
    NF_CHECK_EQ(nf_store_pending_write(st, 5, "{}", &b, 1, NULL, 0, err, sizeof err), 0);
    NF_CHECK_EQ(count_pending(db, ".sst"), 1);
    /* A build from before reads the header's batch count raw and applies "pending/batch/%08u"
     * from 0 on: it must find 2^31 or more of them, and the first one missing (nothing applied). */
    void *raw = NULL;
    size_t rl = 0;
    NF_CHECK_EQ(store_get_raw(st, st->def, "pending/header", 14, &raw, &rl, err, sizeof err), 1);
    NF_CHECK(raw && rl >= 16 && nf_get_le32((unsigned char *)raw + 8) >= 0x80000000u);
    free(raw);
    raw = NULL;
    NF_CHECK_EQ(
        store_get_raw(st, st->def, "pending/batch/00000000", 22, &raw, &rl, err, sizeof err), 0);
    free(raw);
    nf_store_close(st); /* a crash before the apply */
    NF_REQUIRE((st = open_store_ingest(dir, INGEST_MIN)));
    NF_CHECK_EQ(count_pending(db, ".sst"), 1); /* named: kept */
    NF_CHECK_EQ(nf_store_pending_apply(st, err, sizeof err), 0);
    NF_CHECK(strlen(get_str(st, NF_KIND_INTEREST, "k3")) > 200); /* get_str cuts at 255 */
    NF_CHECK_STR(get_str(st, NF_KIND_EVENT_IDS, "e"), "1");
    NF_CHECK_EQ(count_pending(db, ".sst"), 0);
    NF_CHECK_EQ(count_ingest_tmp(db), 0);
    /* epoch 6's file lost before its apply: refused by name, nothing applied */
    nf_store_batch_clear(b);
    nf_store_batch_put(b, NF_KIND_EVENT_IDS, "e", 1, "2", 1);
    for (int i = 0; i < 4; i++)
        nf_store_batch_put(b, NF_KIND_INTEREST, "k0", 2, big, sizeof big - 1 - (size_t)i);
    NF_CHECK_EQ(nf_store_pending_write(st, 6, "{}", &b, 1, NULL, 0, err, sizeof err), 0);
    nf_store_close(st);
    NF_REQUIRE(pending_file(db, ".sst", path, sizeof path));
    NF_CHECK_EQ(unlink(path), 0);
    NF_REQUIRE((st = open_store_ingest(dir, INGEST_MIN)));
    NF_CHECK_EQ(nf_store_pending_apply(st, err, sizeof err), -EIO);
    NF_CHECK(strstr(err, "is missing") && strstr(err, path + strlen(db) + 1));
    uint64_t e = 0;
    NF_CHECK_EQ(nf_store_committed(st, &e, NULL, err, sizeof err), 0);
    NF_CHECK_EQ(e, 5);
    NF_CHECK_STR(get_str(st, NF_KIND_EVENT_IDS, "e"), "1");
    nf_store_pending_t p; /* refused before a recovery would produce its outputs */
    NF_CHECK_EQ(nf_store_pending_read(st, &p, err, sizeof err), -EIO);
    NF_CHECK(strstr(err, "is missing") != NULL);
    NF_CHECK_EQ(nf_store_pending_discard(st, err, sizeof err), 0);
    /* a file no record names (a crash before the record was written) goes at open */
    nf_store_close(st);
    snprintf(path, sizeof path, "%s/newsflow-pending-7-1-1.sst", db);
    FILE *f = fopen(path, "w");
    NF_REQUIRE(f);
    fclose(f);
    NF_REQUIRE((st = open_store_ingest(dir, INGEST_MIN)));
    NF_CHECK_EQ(count_prefix(db, "newsflow-pending-"), 0);
    nf_store_batch_free(b);
    nf_store_close(st);
    tmpdir_free(dir);
}

/* Checks that the pending record of epoch e reads back the two outputs "out-a", "out-bb". */
static void check_outputs(nf_store_t *st, uint64_t e)
{
    char err[512];
    nf_store_pending_t p;
    NF_CHECK_EQ(nf_store_pending_read(st, &p, err, sizeof err), 1);
    NF_CHECK_EQ(p.epoch, e);
    NF_REQUIRE(p.noutputs == 2);
    NF_CHECK(p.outputs[0].len == 5 && !memcmp(p.outputs[0].data, "out-a", 5));
    NF_CHECK(p.outputs[1].len == 6 && !memcmp(p.outputs[1].data, "out-bb", 6));
    nf_store_pending_free(&p);
}

/* Epoch e's record: two shards' batches putting "e" = val, and two outputs. */
static int write_body_epoch(nf_store_t *st, uint64_t e, const char *val, char *err, size_t errlen)
{
    nf_store_batch_t *bs[2] = {nf_store_batch_new(), nf_store_batch_new()};
    nf_store_batch_put(bs[0], NF_KIND_EVENT_IDS, "e", 1, val, strlen(val));
    nf_store_batch_put(bs[1], NF_KIND_INTEREST, "u", 1, val, strlen(val));
    nf_blob_t outs[2] = {{"out-a", 5}, {"out-bb", 6}};
    int r = nf_store_pending_write(st, e, "{}", bs, 2, outs, 2, err, errlen);
    nf_store_batch_free(bs[0]);
    nf_store_batch_free(bs[1]);
    return r;
}

/* The pending record's body (its batches and outputs) in a file of its own: no copy in the
 * record (a build from before refuses it at output 0, before producing anything); it rolls
 * forward after a crash; it stays until the next record; a body lost, cut short or damaged is
 * refused by name with nothing produced or applied; files no record names go at open. */
static void test_pending_body(void)
{
    char dir[PATH_MAX], db[PATH_MAX + 8], err[512], path[PATH_MAX + 300];
    snprintf(dir, sizeof dir, "%s", tmpdir_new());
    snprintf(db, sizeof db, "%s/db", dir);
    nf_store_t *st = open_store(dir);
    NF_REQUIRE(st);
    NF_CHECK_EQ(write_body_epoch(st, 5, "five", err, sizeof err), 0);
    NF_CHECK_EQ(count_pending(db, ".body"), 1);
    void *raw = NULL;
    size_t rl = 0;
    NF_CHECK_EQ(store_get_raw(st, st->def, "pending/header", 14, &raw, &rl, err, sizeof err), 1);
    NF_CHECK(raw && rl >= 16 && (nf_get_le32((unsigned char *)raw + 8) & 0x40000000u) &&
             nf_get_le32((unsigned char *)raw + 12) == 2);
    free(raw);
    raw = NULL;
    NF_CHECK_EQ(store_get_raw(st, st->def, "pending/out/00000000", 20, &raw, &rl, err, sizeof err),
                0);
    NF_CHECK_EQ(
        store_get_raw(st, st->def, "pending/batch/00000000", 22, &raw, &rl, err, sizeof err), 0);
    free(raw);
    check_outputs(st, 5);
    nf_store_close(st); /* a crash before the apply */
    NF_REQUIRE((st = open_store(dir)));
    NF_CHECK_EQ(count_pending(db, ".body"), 1); /* named: kept */
    check_outputs(st, 5);
    NF_CHECK_EQ(nf_store_pending_apply(st, err, sizeof err), 0);
    NF_CHECK_STR(get_str(st, NF_KIND_EVENT_IDS, "e"), "five");
    NF_CHECK_STR(get_str(st, NF_KIND_INTEREST, "u"), "five");
    NF_CHECK_EQ(write_body_epoch(st, 6, "six", err, sizeof err), 0);
    NF_CHECK_EQ(count_pending(db, ".body"), 1); /* epoch 5's went with epoch 6's record */
    NF_CHECK_EQ(nf_store_pending_apply(st, err, sizeof err), 0);
    NF_CHECK_STR(get_str(st, NF_KIND_INTEREST, "u"), "six");
    /* epoch 7's body cut short, then damaged at the same size, then lost: refused by name */
    NF_CHECK_EQ(write_body_epoch(st, 7, "seven", err, sizeof err), 0);
    nf_store_close(st);
    NF_REQUIRE(pending_file(db, ".body", path, sizeof path));
    struct stat sb;
    NF_REQUIRE(stat(path, &sb) == 0 && truncate(path, sb.st_size - 1) == 0);
    NF_REQUIRE((st = open_store(dir)));
    NF_CHECK_EQ(count_pending(db, ".body"), 1); /* not as named: left for the operator */
    nf_store_pending_t p;
    NF_CHECK_EQ(nf_store_pending_read(st, &p, err, sizeof err), -EIO);
    NF_CHECK(strstr(err, "has another size") && strstr(err, path + strlen(db) + 1));
    NF_CHECK_EQ(nf_store_pending_apply(st, err, sizeof err), -EIO);
    NF_REQUIRE(truncate(path, sb.st_size) == 0); /* the right size, its last byte zero */
    NF_CHECK_EQ(nf_store_pending_read(st, &p, err, sizeof err), -EIO);
    NF_CHECK(strstr(err, "is damaged") != NULL);
    FILE *f = fopen(path, "r+");
    NF_REQUIRE(f && fwrite("X", 1, 1, f) == 1 && fclose(f) == 0); /* not a body's head */
    NF_CHECK_EQ(nf_store_pending_read(st, &p, err, sizeof err), -EIO);
    NF_CHECK(strstr(err, "is malformed") != NULL);
    NF_CHECK_EQ(unlink(path), 0);
    NF_CHECK_EQ(nf_store_pending_read(st, &p, err, sizeof err), -EIO);
    NF_CHECK(strstr(err, "is missing") && strstr(err, "runbooks"));
    NF_CHECK_EQ(nf_store_pending_apply(st, err, sizeof err), -EIO);
    uint64_t e = 0;
    NF_CHECK_EQ(nf_store_committed(st, &e, NULL, err, sizeof err), 0);
    NF_CHECK_EQ(e, 6);
    NF_CHECK_STR(get_str(st, NF_KIND_INTEREST, "u"), "six");
    NF_CHECK_EQ(nf_store_pending_discard(st, err, sizeof err), 0);
    /* a body no record names (a crash before its record was written) goes at open */
    nf_store_close(st);
    snprintf(path, sizeof path, "%s/newsflow-pending-8-1-1.body", db);
    f = fopen(path, "w");
    NF_REQUIRE(f);
    fclose(f);
    NF_REQUIRE((st = open_store(dir)));
    NF_CHECK_EQ(count_prefix(db, "newsflow-pending-"), 0);
    nf_store_close(st);
    tmpdir_free(dir);
}

/* An epoch applied with its large kinds as table files (the rest in one write) leaves the store
 * as applying it all through the memtable does, round after round and after a reopen; the
 * records reported ingested are those of the kinds at or over the threshold; no table file is
 * left behind; and a crash before the apply still rolls forward from the record. */
static void test_tables_equal_memtable(void)
{
    char dir_a[PATH_MAX], dir_b[PATH_MAX], db_b[PATH_MAX + 8], err[512];
    snprintf(dir_a, sizeof dir_a, "%s", tmpdir_new());
    snprintf(dir_b, sizeof dir_b, "%s", tmpdir_new());
    snprintf(db_b, sizeof db_b, "%s/db", dir_b);
    nf_store_t *a = open_store(dir_a), *b = open_store_ingest(dir_b, INGEST_MIN);
    NF_REQUIRE(a && b);
    NF_CHECK_EQ(nf_store_ingest_min(b), INGEST_MIN);
    uint64_t seed = 0x5eed0042;
    size_t ingested_total = 0, memtable_rounds = 0;
    for (int round = 1; round <= 60; round++) {
        nf_store_batch_t *bs[2] = {nf_store_batch_new(), nf_store_batch_new()};
        NF_REQUIRE(bs[0] && bs[1]);
        random_epoch(bs, &seed, round);
        size_t n = nf_store_batch_count(bs[0]) + nf_store_batch_count(bs[1]);
        NF_CHECK_EQ(nf_store_pending_write(a, round, "{}", bs, 2, NULL, 0, err, sizeof err), 0);
        NF_CHECK_EQ(nf_store_pending_apply(a, err, sizeof err), 0);
        NF_CHECK_EQ(nf_store_pending_write(b, round, "{}", bs, 2, NULL, 0, err, sizeof err), 0);
        if (round % 10 == 0) { /* a crash before the apply: the copies roll it forward */
            nf_store_close(b);
            b = open_store_ingest(dir_b, INGEST_MIN);
            NF_REQUIRE(b);
            int r = nf_store_pending_apply(b, err, sizeof err);
            if (r != 0)
                fprintf(stderr, "round %d (reopened): %s\n", round, err);
            NF_CHECK_EQ(r, 0);
        } else {
            size_t ingested = 99;
            int r = nf_store_pending_apply_epoch(b, round, &ingested, err, sizeof err);
            if (r != 0)
                fprintf(stderr, "round %d: %s\n", round, err);
            NF_CHECK_EQ(r, 0);
            NF_CHECK(ingested <= n);
            ingested_total += ingested;
            memtable_rounds += ingested < n;
        }
        nf_store_pending_t p;
        NF_CHECK_EQ(nf_store_pending_read(b, &p, err, sizeof err), 0); /* none left */
        uint64_t e = 0;
        NF_CHECK_EQ(nf_store_committed(b, &e, NULL, err, sizeof err), 0);
        NF_CHECK_EQ(e, (uint64_t)round);
        char *da = dump_all(a), *db = dump_all(b);
        if (strcmp(da, db) != 0)
            fprintf(stderr, "round %d differs:\n memtable: %.300s\n tables:   %.300s\n", round, da,
                    db);
        NF_CHECK_STR(da, db);
        free(da);
        free(db);
        nf_store_batch_free(bs[0]);
        nf_store_batch_free(bs[1]);
    }
    NF_CHECK(ingested_total > 0); /* both ways taken */
    NF_CHECK(memtable_rounds > 0);
    NF_CHECK_EQ(count_ingest_tmp(db_b), 0);
    /* durable without a flush */
    char *before = dump_all(b);
    nf_store_close(b);
    b = open_store_ingest(dir_b, INGEST_MIN);
    NF_REQUIRE(b);
    char *after = dump_all(b);
    NF_CHECK_STR(after, before);
    free(before);
    free(after);
    /* an incomplete batch is refused: no record is written */
    nf_store_batch_t *bs[2] = {nf_store_batch_new(), NULL};
    nf_store_batch_put(bs[0], NF_KIND_INTEREST, "x", 1, "y", 1);
    nf_store_batch_fail(bs[0]);
    NF_CHECK_EQ(nf_store_pending_write(b, 61, "{}", bs, 2, NULL, 0, err, sizeof err), -ENOMEM);
    nf_store_pending_t p;
    NF_CHECK_EQ(nf_store_pending_read(b, &p, err, sizeof err), 0);
    nf_store_batch_free(bs[0]);
    /* another epoch's apply is refused, nothing applied */
    nf_store_batch_t *cs[2] = {nf_store_batch_new(), nf_store_batch_new()};
    nf_store_batch_put(cs[0], NF_KIND_INTEREST, "m", 1, "1", 1);
    nf_store_batch_put(cs[1], NF_KIND_INTEREST, "n", 1, "1", 1);
    NF_CHECK_EQ(nf_store_pending_write(b, 62, "{}", cs, 2, NULL, 0, err, sizeof err), 0);
    NF_CHECK_EQ(nf_store_pending_apply_epoch(b, 63, NULL, err, sizeof err), -EINVAL);
    NF_CHECK_STR(get_str(b, NF_KIND_INTEREST, "m"), "");
    NF_CHECK_EQ(nf_store_pending_apply_epoch(b, 62, NULL, err, sizeof err), 0);
    NF_CHECK_STR(get_str(b, NF_KIND_INTEREST, "m"), "1");
    /* worth keeping: only when one kind alone reaches the threshold (600 bytes here) */
    nf_store_batch_clear(cs[0]);
    nf_store_batch_clear(cs[1]);
    char big[400];
    memset(big, 'v', sizeof big);
    nf_store_batch_put(cs[0], NF_KIND_INTEREST, "p", 1, big, sizeof big);
    nf_store_batch_put(cs[1], NF_KIND_EVENT_IDS, "q", 1, big, sizeof big);
    NF_CHECK(!nf_store_batches_ingest(b, cs, 2)); /* 802 bytes, but 401 a kind */
    nf_store_batch_put(cs[1], NF_KIND_INTEREST, "r", 1, big, sizeof big);
    NF_CHECK(nf_store_batches_ingest(b, cs, 2));  /* interest: 802 across the two */
    NF_CHECK(!nf_store_batches_ingest(a, cs, 2)); /* a: 16 MiB */
    nf_store_batch_free(cs[0]);
    nf_store_batch_free(cs[1]);
    nf_store_close(a);
    nf_store_close(b);
    tmpdir_free(dir_a);
    tmpdir_free(dir_b);
}

/* A new database appears whole or not at all: what a process killed while creating one left
 * (state_dir/db.creating without CURRENT) is removed and the database created afresh, an empty
 * db directory is taken as none, and a db directory that holds files without CURRENT is still
 * refused as damaged. */
static void test_create_is_atomic(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 64], err[512];
    snprintf(dir, sizeof dir, "%s", tmpdir_new());
    snprintf(path, sizeof path, "%s/db.creating", dir);
    NF_REQUIRE(mkdir(path, 0755) == 0);
    snprintf(path, sizeof path, "%s/db.creating/MANIFEST-000001", dir);
    int fd = open(path, O_CREAT | O_WRONLY, 0644);
    NF_REQUIRE(fd >= 0);
    close(fd);
    snprintf(path, sizeof path, "%s/db", dir);
    NF_REQUIRE(mkdir(path, 0755) == 0); /* empty */
    nf_store_t *st = open_store(dir);
    NF_REQUIRE(st);
    kv_t kv = {"k", "v"};
    NF_CHECK_EQ(commit(st, 1, NF_KIND_INTEREST, &kv, 1), 0);
    nf_store_close(st);
    snprintf(path, sizeof path, "%s/db.creating", dir);
    NF_CHECK(access(path, F_OK) != 0);
    snprintf(path, sizeof path, "%s/db/CURRENT", dir);
    NF_CHECK(access(path, F_OK) == 0);
    st = open_store(dir);
    NF_REQUIRE(st);
    NF_CHECK_STR(get_str(st, NF_KIND_INTEREST, "k"), "v");
    nf_store_close(st);
    /* files without CURRENT in db: damaged, refused */
    NF_REQUIRE(unlink(path) == 0);
    nf_store_opts_t o;
    nf_store_opts_default(&o);
    errno = 0;
    NF_CHECK(nf_store_open(dir, &o, err, sizeof err) == NULL);
    NF_CHECK_EQ(errno, EUCLEAN);
    NF_CHECK(strstr(err, "damaged") != NULL);
    tmpdir_free(dir);
}

/* The value of key through view v as read_str gives it. */
static const char *view_str(nf_store_view_t *v, const char *key)
{
    void *val = NULL;
    size_t len = 0;
    char err[256];
    int r = nf_store_view_get(v, NF_KIND_READS, key, strlen(key), &val, &len, err, sizeof err);
    return read_str(r, val, len);
}

static int stop_cb(const void *k, size_t kl, const void *v, size_t vl, void *arg)
{
    (void)k, (void)kl, (void)v, (void)vl;
    ++*(size_t *)arg;
    return 1;
}

static int count_cb(const void *k, size_t kl, const void *v, size_t vl, void *arg)
{
    (void)k, (void)kl, (void)v, (void)vl;
    ++*(size_t *)arg;
    return 0;
}

typedef struct view_reader {
    nf_store_t *st;
    _Atomic int stop;
    size_t reads, torn; /* views whose "a" and "b" disagree (a half-applied epoch) */
} view_reader_t;

/* Every view it acquires shows one whole epoch: "a" and "b" are always written together. */
static void *view_reader_main(void *arg)
{
    view_reader_t *r = arg;
    while (!atomic_load(&r->stop)) {
        nf_store_view_t *v = nf_store_view_acquire(r->st);
        if (!v)
            continue;
        char a[256];
        snprintf(a, sizeof a, "%s", view_str(v, "a"));
        const char *b = view_str(v, "b");
        char want[32];
        snprintf(want, sizeof want, "%llu", (unsigned long long)nf_store_view_epoch(v));
        if (strcmp(a, b) != 0 || (strcmp(a, want) != 0 && nf_store_view_epoch(v) > 1))
            r->torn++;
        r->reads++;
        nf_store_view_release(v);
    }
    return NULL;
}

/* Committed views: a view shows the store as of its publish, whatever is written after, until
 * released; the latest published is what acquire gives; none before the first publish; a reader
 * on another thread sees whole epochs only, while epochs are applied and views published. */
static void test_views(void)
{
    const char *dir = tmpdir_new();
    nf_store_t *st = open_store(dir);
    NF_REQUIRE(st);
    NF_CHECK(nf_store_view_acquire(st) == NULL);
    kv_t e1[] = {{"a", "1"}, {"b", "1"}, {"c", "1"}};
    NF_CHECK_EQ(commit(st, 1, NF_KIND_READS, e1, 3), 0);
    NF_CHECK_EQ(nf_store_view_publish(st, 1), 0);
    nf_store_view_t *v1 = nf_store_view_acquire(st);
    NF_REQUIRE(v1);
    NF_CHECK_EQ(nf_store_view_epoch(v1), 1);
    NF_CHECK(nf_store_view_published_ms(v1) > 1700000000000);
    kv_t e2[] = {{"a", "2"}, {"b", "2"}, {"c", NULL}, {"d", "2"}};
    NF_CHECK_EQ(commit(st, 2, NF_KIND_READS, e2, 4), 0);
    /* Not yet published: v1 and acquire still show epoch 1; the live store shows 2. */
    NF_CHECK_STR(view_str(v1, "a"), "1");
    NF_CHECK_STR(view_str(v1, "c"), "1");
    NF_CHECK_STR(view_str(v1, "d"), "");
    NF_CHECK_STR(get_str(st, NF_KIND_READS, "a"), "2");
    nf_store_view_t *again = nf_store_view_acquire(st);
    NF_CHECK(again == v1);
    nf_store_view_release(again);
    NF_CHECK_EQ(nf_store_view_publish(st, 2), 0);
    nf_store_view_t *v2 = nf_store_view_acquire(st);
    NF_REQUIRE(v2);
    NF_CHECK_EQ(nf_store_view_epoch(v2), 2);
    NF_CHECK_STR(view_str(v2, "a"), "2");
    NF_CHECK_STR(view_str(v2, "c"), "");
    NF_CHECK_STR(view_str(v1, "a"), "1"); /* the old view, still held, is unchanged */
    /* multi-get and scan through a view */
    const unsigned char keys[] = {'a', 'c', 'd'};
    void *vals[3];
    size_t lens[3];
    char err[256];
    NF_CHECK_EQ(nf_store_view_multi_get(v1, NF_KIND_READS, 3, keys, 1, vals, lens, err, sizeof err),
                0);
    NF_CHECK(vals[0] && lens[0] == 1 && ((char *)vals[0])[0] == '1');
    NF_CHECK(vals[1] != NULL && vals[2] == NULL);
    for (int i = 0; i < 3; i++)
        free(vals[i]);
    size_t n1 = 0, n2 = 0;
    NF_CHECK_EQ(nf_store_view_scan_prefix(v1, NF_KIND_READS, NULL, 0, count_cb, &n1), 0);
    NF_CHECK_EQ(nf_store_view_scan_prefix(v2, NF_KIND_READS, NULL, 0, count_cb, &n2), 0);
    NF_CHECK_EQ(n1, 3); /* a b c */
    NF_CHECK_EQ(n2, 3); /* a b d */
    /* several prefixes with one iterator: each scanned, a stop ends only its own */
    size_t n3 = 0, n4 = 0;
    NF_CHECK_EQ(nf_store_view_scan_prefixes(v1, NF_KIND_READS, (const unsigned char *)"azc", 3, 1,
                                            count_cb, &n3),
                0);
    NF_CHECK_EQ(n3, 2); /* a c */
    NF_CHECK_EQ(nf_store_view_scan_prefixes(v2, NF_KIND_READS, (const unsigned char *)"bd", 2, 1,
                                            stop_cb, &n4),
                0);
    NF_CHECK_EQ(n4, 2); /* b, then d */
    nf_store_view_release(v1);
    nf_store_view_release(v2);

    /* A reader on another thread while epochs 3..202 are applied and published. */
    view_reader_t r = {.st = st};
    pthread_t t;
    NF_REQUIRE(pthread_create(&t, NULL, view_reader_main, &r) == 0);
    for (uint64_t e = 3; e <= 202; e++) {
        char val[32];
        snprintf(val, sizeof val, "%llu", (unsigned long long)e);
        kv_t kv[] = {{"a", val}, {"b", val}};
        NF_CHECK_EQ(commit(st, e, NF_KIND_READS, kv, 2), 0);
        NF_CHECK_EQ(nf_store_view_publish(st, e), 0);
    }
    atomic_store(&r.stop, 1);
    pthread_join(t, NULL);
    NF_CHECK(r.reads > 0);
    NF_CHECK_EQ(r.torn, 0);
    nf_store_close(st); /* drops the store's own reference to the last view */
    tmpdir_free(dir);
}

/* The number of table files of `sub` (a database directory under dir) that share their inode
 * with a file of `other` (another one), and how many table files `sub` has. */
static int shared_inodes(const char *dir, const char *sub, const char *other, int *tables)
{
    char d[PATH_MAX], o[PATH_MAX];
    snprintf(d, sizeof d, "%s/%s", dir, sub);
    snprintf(o, sizeof o, "%s/%s", dir, other);
    int shared = 0;
    *tables = 0;
    DIR *dd = opendir(d);
    for (const struct dirent *de; dd && (de = readdir(dd));) {
        size_t l = strlen(de->d_name);
        if (l < 5 || strcmp(de->d_name + l - 4, ".sst") != 0)
            continue;
        char a[PATH_MAX + 300], b[PATH_MAX + 300];
        struct stat sa, sb;
        snprintf(a, sizeof a, "%s/%s", d, de->d_name);
        snprintf(b, sizeof b, "%s/%s", o, de->d_name);
        (*tables)++;
        if (stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_ino == sb.st_ino &&
            sa.st_dev == sb.st_dev)
            shared++;
    }
    if (dd)
        closedir(dd);
    return shared;
}

/* Issue 37 case 3: a live table file damaged in place damaged every checkpoint (they were hard
 * links to it). Checkpoints now hold copies, shared among themselves, never with the live
 * database: a garbled live table leaves them verifiable and restorable. */
/* Tracked writes (store.h, nf_store_track) against a model of which write touched which id:
 * random writes — the epoch's pending record applied, direct batch writes, a restore's ingested
 * files (ids unknown: every id) — to tracked and untracked kinds, views published between them;
 * for every pair of views (older a, newer b) and id, unchanged(b, id, wseq(a)) is never true
 * when a write b shows and a does not touched id in a tracked kind, and exactly that from the
 * latest view; false for a tag newer than the view. 24 ids in 2^20 slots: no two share one (the
 * seed is fixed). */
#define TRK_IDS   24
#define TRK_VIEWS 40
static void trk_key(unsigned id, unsigned kg, unsigned char key[34], size_t *klen, bool history)
{
    memset(key, 0, 34);
    key[0] = (unsigned char)(kg >> 8);
    key[1] = (unsigned char)kg;
    key[2] = 0xA5;
    key[17] = (unsigned char)id; /* bytes 2..17: the id */
    *klen = history ? 34 : 18;
    if (history)
        key[20] = (unsigned char)(kg * 7 + id);
}

static void test_tracked_writes(void)
{
    const char *dir = tmpdir_new();
    nf_store_t *st = open_store_ingest(dir, 36); /* 2 or 3 writes of a kind: a file */
    NF_REQUIRE(st);
    uint32_t kinds = 1u << NF_KIND_INTEREST | 1u << NF_KIND_READS;
    NF_CHECK_EQ(nf_store_track(st, kinds, 1u << 20), 0);
    NF_CHECK_EQ(nf_store_track(st, kinds, 1u << 20), 0); /* again: the same table */
    nf_store_view_t *views[TRK_VIEWS];
    /* the model: touched[w][id], writes counted w = 1..; a view shows writes <= shown[v] */
    static bool touched[4 * TRK_VIEWS + 1][TRK_IDS];
    static bool unknown[4 * TRK_VIEWS + 1];
    unsigned shown[TRK_VIEWS], nw = 0;
    uint64_t rng = 0x5eed;
    for (unsigned v = 0; v < TRK_VIEWS; v++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        unsigned writes = (unsigned)(rng >> 62);
        for (unsigned k = 0; k < writes; k++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            unsigned how = (unsigned)(rng >> 60) % 4;
            nf_store_batch_t *b = nf_store_batch_new();
            nw++;
            for (unsigned j = 0; j < 1 + (unsigned)(rng >> 40) % 3; j++) {
                unsigned id = (unsigned)(rng >> (8 * j + 8)) % TRK_IDS;
                unsigned kind = (unsigned)(rng >> (8 * j + 16)) % 3; /* 2: untracked */
                unsigned char key[34];
                size_t klen;
                trk_key(id, j, key, &klen, kind == 1);
                nf_state_kind_t sk = kind == 0   ? NF_KIND_INTEREST
                                     : kind == 1 ? NF_KIND_READS
                                                 : NF_KIND_ARTICLE_META;
                if ((rng >> 30) % 5 == 0)
                    nf_store_batch_delete(b, sk, key, klen);
                else
                    nf_store_batch_put(b, sk, key, klen, "v", 1);
                touched[nw][id] |= kind != 2;
            }
            char err[256];
            if (how == 0) {
                NF_CHECK_EQ(nf_store_write(st, b, err, sizeof err), 0);
            } else if (how == 1) {
                NF_CHECK_EQ(nf_store_ingest(st, b, err, sizeof err), 0);
                unknown[nw] = true;
            } else {
                nf_store_batch_t *bs[1] = {b};
                NF_CHECK_EQ(
                    nf_store_pending_write(st, 100 + nw, "{}", bs, 1, NULL, 0, err, sizeof err), 0);
                if (how == 2)
                    NF_CHECK_EQ(nf_store_pending_apply(st, err, sizeof err), 0);
                else
                    NF_CHECK_EQ(nf_store_pending_apply_epoch(st, 100 + nw, NULL, err, sizeof err),
                                0);
            }
            nf_store_batch_free(b);
        }
        NF_REQUIRE(nf_store_view_publish(st, v + 1) == 0);
        views[v] = nf_store_view_acquire(st);
        shown[v] = nw;
    }
    /* Never true wrongly; exact from the latest view (a slot holds the last write only: from
     * an older view, a later write of the id makes it false for nothing). */
    unsigned wrong = 0, exact = 0, trues = 0;
    for (unsigned a = 0; a < TRK_VIEWS; a++)
        for (unsigned b = a; b < TRK_VIEWS; b++)
            for (unsigned id = 0; id < TRK_IDS; id++) {
                bool model = true;
                for (unsigned w = shown[a] + 1; w <= shown[b]; w++)
                    model = model && !touched[w][id] && !unknown[w];
                unsigned char key[34];
                size_t klen;
                trk_key(id, 0, key, &klen, false);
                bool got = nf_store_view_unchanged(views[b], key + 2, nf_store_view_wseq(views[a]));
                wrong += got && !model;
                exact += b == TRK_VIEWS - 1 && got == model;
                trues += got;
                if (nf_store_view_wseq(views[b]) > nf_store_view_wseq(views[a]))
                    NF_CHECK(
                        !nf_store_view_unchanged(views[a], key + 2, nf_store_view_wseq(views[b])));
            }
    NF_CHECK_EQ(wrong, 0);
    NF_CHECK_EQ(exact, TRK_VIEWS * TRK_IDS);
    NF_CHECK(trues > TRK_IDS * TRK_VIEWS); /* not only a view against itself */
    for (unsigned v = 0; v < TRK_VIEWS; v++)
        nf_store_view_release(views[v]);
    nf_store_close(st);
    tmpdir_free(dir);
}

static void test_checkpoint_survives_live_damage(void)
{
    const char *dir = tmpdir_new();
    nf_store_t *st = open_store(dir);
    NF_REQUIRE(st);
    char err[1024];
    NF_CHECK_EQ(fill_reads(st, 2000), 0);
    NF_CHECK_EQ(nf_store_checkpoint(st, 1, NULL, 0, err, sizeof err), 0);
    kv_t v2[] = {{"later", "two"}};
    NF_CHECK_EQ(commit(st, 2, NF_KIND_READS, v2, 1), 0);
    NF_CHECK_EQ(nf_store_checkpoint(st, 2, NULL, 0, err, sizeof err), 0);
    nf_store_close(st);
    int tables = 0;
    /* no checkpoint shares a file with the live database; the second reuses the first's copies */
    NF_CHECK_EQ(shared_inodes(dir, "checkpoints/chk-000000000001", "db", &tables), 0);
    NF_CHECK(tables > 0);
    NF_CHECK_EQ(shared_inodes(dir, "checkpoints/chk-000000000002", "db", &tables), 0);
    int t1 = 0;
    NF_CHECK(shared_inodes(dir, "checkpoints/chk-000000000002", "checkpoints/chk-000000000001",
                           &t1) > 0);
    char *m = nf_checkpoint_manifest(dir, "1", err, sizeof err);
    NF_CHECK(m && strstr(m, "\"hash\"") && strstr(m, "\"src\""));
    free(m);

    /* every live table file garbled in place */
    char d[PATH_MAX];
    snprintf(d, sizeof d, "%s/db", dir);
    DIR *dd = opendir(d);
    int garbled = 0;
    for (const struct dirent *de; dd && (de = readdir(dd));) {
        size_t l = strlen(de->d_name);
        if (l < 5 || strcmp(de->d_name + l - 4, ".sst") != 0)
            continue;
        char p[PATH_MAX + 300], junk[64];
        snprintf(p, sizeof p, "%s/%s", d, de->d_name);
        memset(junk, 'Z', sizeof junk);
        int fd = open(p, O_RDWR);
        garbled += fd >= 0 && pwrite(fd, junk, sizeof junk, 200) == (ssize_t)sizeof junk;
        if (fd >= 0)
            close(fd);
    }
    if (dd)
        closedir(dd);
    NF_CHECK(garbled > 0);
    NF_CHECK_EQ(nf_checkpoint_verify(dir, "1", err, sizeof err), 0);
    NF_CHECK_EQ(nf_checkpoint_verify(dir, "2", err, sizeof err), 0);
    NF_CHECK_EQ(nf_checkpoint_restore(dir, "2", NULL, NULL, err, sizeof err), 0);
    st = open_store(dir);
    NF_REQUIRE(st);
    NF_CHECK_STR(get_str(st, NF_KIND_READS, "key001234"), "value-1234-9772046");
    NF_CHECK_STR(get_str(st, NF_KIND_READS, "later"), "two");
    nf_store_close(st);
    /* the restored database is a copy too: the checkpoint shares nothing with it */
    NF_CHECK_EQ(shared_inodes(dir, "checkpoints/chk-000000000002", "db", &tables), 0);

    /* a copy damaged after the fact is named by its hash */
    char sst[PATH_MAX];
    NF_REQUIRE(file_in(dir, "checkpoints/chk-000000000001", ".sst", sst, sizeof sst));
    int fd = open(sst, O_RDWR);
    NF_REQUIRE(fd >= 0);
    NF_CHECK(pwrite(fd, "Q", 1, 300) == 1);
    close(fd);
    NF_CHECK_EQ(nf_checkpoint_verify(dir, "1", err, sizeof err), -EIO);
    NF_CHECK(strstr(err, "does not match the hash") != NULL);
    tmpdir_free(dir);
}

/* checkpoints export / import: a verified copy elsewhere and back into another state
 * directory, restorable there; a damaged export is refused on import; nothing overwritten. */
static void test_checkpoint_export_import(void)
{
    const char *dir = tmpdir_new();
    char src[PATH_MAX], dst[PATH_MAX], backup[PATH_MAX], err[1024], out[PATH_MAX + 64];
    snprintf(src, sizeof src, "%s/a", dir);
    snprintf(dst, sizeof dst, "%s/b", dir);
    snprintf(backup, sizeof backup, "%s/backup", dir);
    nf_store_t *st = open_store(src);
    NF_REQUIRE(st);
    kv_t v[] = {{"k", "exported"}};
    NF_CHECK_EQ(commit(st, 1, NF_KIND_READS, v, 1), 0);
    NF_CHECK_EQ(nf_store_checkpoint(st, 1, NULL, 0, err, sizeof err), 0);
    nf_store_close(st);
    NF_CHECK_EQ(nf_checkpoint_export(src, "latest", backup, out, sizeof out, err, sizeof err), 0);
    NF_CHECK(strstr(out, "/backup/chk-000000000001") != NULL);
    NF_CHECK_EQ(nf_checkpoint_export(src, "1", backup, out, sizeof out, err, sizeof err), -EEXIST);
    char id[64], exported[PATH_MAX + 32];
    snprintf(exported, sizeof exported, "%s/chk-000000000001", backup);
    NF_CHECK_EQ(nf_checkpoint_import(dst, exported, id, sizeof id, err, sizeof err), 0);
    NF_CHECK_STR(id, "chk-000000000001");
    NF_CHECK_EQ(nf_checkpoint_import(dst, exported, id, sizeof id, err, sizeof err), -EEXIST);
    NF_CHECK_EQ(nf_checkpoint_restore(dst, "1", NULL, NULL, err, sizeof err), 0);
    st = open_store(dst);
    NF_REQUIRE(st);
    NF_CHECK_STR(get_str(st, NF_KIND_READS, "k"), "exported");
    nf_store_close(st);
    /* a damaged export: refused, nothing imported */
    char sst[PATH_MAX], third[PATH_MAX + 8];
    NF_REQUIRE(file_in(backup, "chk-000000000001", ".sst", sst, sizeof sst));
    int fd = open(sst, O_RDWR);
    NF_REQUIRE(fd >= 0);
    NF_CHECK(pwrite(fd, "Q", 1, 100) == 1);
    close(fd);
    snprintf(third, sizeof third, "%s/c", dir);
    NF_CHECK(nf_checkpoint_import(third, exported, id, sizeof id, err, sizeof err) < 0);
    NF_CHECK_EQ(count_checkpoints(third), 0);
    tmpdir_free(dir);
}

int main(void)
{
    NF_RUN(test_open_creates_families_and_reopen_persists);
    NF_RUN(test_open_keeps_unknown_families);
    NF_RUN(test_get_scan_batch);
    NF_RUN(test_multi_get);
    NF_RUN(test_perf_counters_off);
    NF_RUN(test_views);
    NF_RUN(test_tracked_writes);
    NF_RUN(test_ingest_equals_write);
    NF_RUN(test_tables_equal_memtable);
    NF_RUN(test_pending_tables);
    NF_RUN(test_pending_body);
    NF_RUN(test_create_is_atomic);
    NF_RUN(test_pending_write_read_apply);
    NF_RUN(test_pending_survives_crash_and_discard);
    NF_RUN(test_ttl_compaction_filter);
    NF_RUN(test_second_open_reports_lock);
    NF_RUN(test_enospc_classified);
    NF_RUN(test_space_text);
    NF_RUN(test_checkpoint_create_list_manifest_verify);
    NF_RUN(test_checkpoint_verify_detects_damage);
    NF_RUN(test_checkpoint_prune_delete);
    NF_RUN(test_checkpoint_restore);
    NF_RUN(test_checkpoint_restore_checks_first_keeps_newer);
    NF_RUN(test_checkpoint_survives_live_damage);
    NF_RUN(test_checkpoint_export_import);
    return nf_test_report();
}
