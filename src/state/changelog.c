/* changelog.c — see changelog.h. */
#include "state/changelog.h"

#include "algo/bytes.h"
#include "runtime/log.h"
#include "runtime/runtime.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define META_NAME "changelog"
/* Records per store write while restoring. Larger writes cost RocksDB less per record (each is
 * sorted first, so more of the memtable inserts land next to the previous one): 65536 ~250 B
 * records took ~20 % less CPU than 4096 (perf/README.md, "Changelog"), for ~40 MB held at once. */
#define APPLY_BATCH 65536u
#define APPLY_BYTES (64u << 20) /* or fewer records when they are large (trending chunks) */

/* The meta record is read, changed and written back by the coordinator (after each commit, and
 * by the restores of its rebalance callbacks) and by a standby's thread (state/standby.h): each
 * changes only the partitions it is the writer of, under this lock, so that none writes back
 * another's older offsets. One lock for the process: it has one store. */
static pthread_mutex_t g_meta_lock = PTHREAD_MUTEX_INITIALIZER;

/* input: the input whose partition is the kind's key group (what a rebalance moves), or -1.
 * The one-partition trending-panes input stands for the global key group (changelog.h: the
 * articles' state in a consumer group; every key in NF_CHANGELOG_GLOBAL_KG). */
static const struct k_topic {
    nf_state_kind_t kind;
    nf_topic_t topic;
    int input;
} k_topics[] = {
    {NF_KIND_ARTICLE_KEY, NF_TOPIC_CL_ARTICLE_KEY, NF_INPUT_TRENDING_PANES},
    {NF_KIND_CRAWL_SCHEDULE, NF_TOPIC_CL_CRAWL_SCHEDULE, NF_INPUT_SOURCES},
    {NF_KIND_EVENT_IDS, NF_TOPIC_CL_EVENT_IDS, NF_INPUT_READ_EVENTS},
    {NF_KIND_CLUSTER_SIG, NF_TOPIC_CL_CLUSTER_SIG, NF_INPUT_TRENDING_PANES},
    {NF_KIND_CLUSTER_BUCKET, NF_TOPIC_CL_CLUSTER_BUCKET, NF_INPUT_TRENDING_PANES},
    {NF_KIND_CLUSTER_PARENT, NF_TOPIC_CL_CLUSTER_PARENT, NF_INPUT_TRENDING_PANES},
    {NF_KIND_ARTICLE_TOPICS, NF_TOPIC_CL_ARTICLE_TOPICS, NF_INPUT_TRENDING_PANES},
    {NF_KIND_INTEREST, NF_TOPIC_CL_INTEREST, NF_INPUT_READ_EVENTS},
    {NF_KIND_INTEREST_SEEN, NF_TOPIC_CL_INTEREST_SEEN, NF_INPUT_READ_EVENTS},
    {NF_KIND_TRENDING, NF_TOPIC_CL_TRENDING, NF_INPUT_READ_EVENTS},
    {NF_KIND_ARTICLE_META, NF_TOPIC_CL_ARTICLE_META, NF_INPUT_TRENDING_PANES},
    {NF_KIND_TOPIC_RECENT, NF_TOPIC_CL_TOPIC_RECENT, NF_INPUT_TRENDING_PANES},
    {NF_KIND_STORY, NF_TOPIC_CL_STORY, NF_INPUT_TRENDING_PANES},
    {NF_KIND_SEARCH_LOG, NF_TOPIC_CL_SEARCH_LOG, NF_INPUT_TRENDING_PANES},
    {NF_KIND_READS, NF_TOPIC_CL_READS, NF_INPUT_READ_EVENTS},
};
#define NTOPICS (sizeof k_topics / sizeof k_topics[0])
_Static_assert(NTOPICS == NF_TOPIC_CL_END - NF_TOPIC_CL_FIRST, "one changelog topic per kind");
_Static_assert(NTOPICS == NF_KIND__COUNT, "every kind has a changelog topic");

/* Whether changelog partition p (of n) of a kind keyed by `input` is among the input partitions
 * parts names (parts[p] for a partitioned input; the global key group's partition for the
 * one-partition topic, whose partition 0 stands for it). */
static bool part_wanted(int input, const bool *parts, int p, int n)
{
    if (!parts)
        return false;
    if (input == NF_INPUT_TRENDING_PANES)
        return parts[0] && n > 0 && p == (int)(NF_CHANGELOG_GLOBAL_KG % (unsigned)n);
    return parts[p];
}

/* The k_topics entry of changelog topic `topic`, or NULL (not one). */
static const struct k_topic *k_topic_of(int topic)
{
    for (size_t i = 0; i < NTOPICS; i++)
        if ((int)k_topics[i].topic == topic)
            return &k_topics[i];
    return NULL;
}

int nf_changelog_topic(nf_state_kind_t kind)
{
    for (size_t i = 0; i < NTOPICS; i++)
        if (k_topics[i].kind == kind)
            return (int)k_topics[i].topic;
    return -1;
}

int nf_changelog_kind(nf_topic_t topic)
{
    const struct k_topic *t = k_topic_of((int)topic);
    return t ? (int)t->kind : -1;
}

static uint16_t be16(const unsigned char *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

uint16_t nf_changelog_key_group(nf_state_kind_t kind, const void *key, size_t klen)
{
    const unsigned char *k = key;
    if (kind == NF_KIND_TRENDING) {
        /* "C" + partition: a partition's counter, in that partition's key group; the merger's
         * meta "M", last window "L" and pane summaries "P" + partition + pane start are the
         * merger's (NF_CHANGELOG_MERGER_KG); the keys of the per-shard layout, deleted at start,
         * 0 (analytics.c). */
        if (klen >= 3 && k[0] == 'C')
            return be16(k + 1);
        if (klen >= 1 && (k[0] == 'M' || k[0] == 'L' || k[0] == 'P'))
            return NF_CHANGELOG_MERGER_KG;
        return 0;
    }
    return klen >= 2 ? be16(k) : 0;
}

/* ---------------------------------------------------------------- writing */

typedef struct {
    nf_outbuf_t *out;
    unsigned char *kbuf;
    size_t kcap;
} emit_ctx_t;

static int emit_write(void *arg, bool del, nf_state_kind_t kind, const void *key, size_t klen,
                      const void *val, size_t vlen)
{
    emit_ctx_t *c = arg;
    int t = nf_changelog_topic(kind);
    if (t < 0)
        return 0;
    if (klen + 2 > c->kcap) {
        size_t cap = c->kcap ? c->kcap : 64;
        while (cap < klen + 2)
            cap *= 2;
        unsigned char *nk = realloc(c->kbuf, cap);
        if (!nk)
            return -ENOMEM;
        c->kbuf = nk;
        c->kcap = cap;
    }
    uint16_t kg = nf_changelog_key_group(kind, key, klen);
    c->kbuf[0] = (unsigned char)(kg >> 8);
    c->kbuf[1] = (unsigned char)kg;
    if (klen)
        memcpy(c->kbuf + 2, key, klen);
    if (del)
        return nf_outbuf_add_tombstone(c->out, (nf_topic_t)t, (const char *)c->kbuf, klen + 2);
    return nf_outbuf_add(c->out, (nf_topic_t)t, (const char *)c->kbuf, klen + 2, val, vlen);
}

int nf_changelog_from_batch(nf_outbuf_t *out, const nf_store_batch_t *b)
{
    size_t len0 = out->len;
    uint32_t count0 = out->count;
    emit_ctx_t c = {.out = out};
    int r = nf_store_batch_foreach(b, emit_write, &c);
    free(c.kbuf);
    if (r != 0) {
        out->len = len0;
        out->count = count0;
    }
    return r;
}

/* ---------------------------------------------------------------- synced offsets */

/* The meta record is keyed by the topic's base name ("changelog-interest"), so that it does not
 * depend on kafka.topic_prefix. */
static const char *base_name(const char *full)
{
    const char *b = NULL;
    for (const char *s = full; (s = strstr(s, "changelog-")) != NULL; s++)
        b = s;
    return b;
}

/* The synced offsets of one topic: into from[0..n), -1 where none is recorded. */
static void synced_of(const cJSON *meta, const char *base, int64_t *from, int n)
{
    for (int p = 0; p < n; p++)
        from[p] = -1;
    const cJSON *arr = meta ? cJSON_GetObjectItemCaseSensitive(meta, base) : NULL;
    for (int p = 0; p < n && cJSON_IsArray(arr); p++) {
        const cJSON *v = cJSON_GetArrayItem(arr, p);
        if (cJSON_IsNumber(v) && v->valuedouble >= 0)
            from[p] = (int64_t)v->valuedouble;
    }
}

static int set_item(cJSON *meta, const char *name, cJSON *v)
{
    if (!v)
        return -ENOMEM;
    if (cJSON_GetObjectItemCaseSensitive(meta, name))
        cJSON_ReplaceItemInObjectCaseSensitive(meta, name, v);
    else
        cJSON_AddItemToObject(meta, name, v);
    return 0;
}

static int put_meta(nf_store_t *st, cJSON *meta, char *err, size_t errlen)
{
    char *s = cJSON_PrintUnformatted(meta);
    if (!s) {
        snprintf(err, errlen, "changelog: out of memory");
        return -ENOMEM;
    }
    int r = nf_store_meta_put(st, META_NAME, s, err, errlen);
    free(s);
    return r;
}

/* The meta record (an empty object when there is none or it does not parse), NULL with *rc on a
 * read error. */
static cJSON *get_meta(nf_store_t *st, char *err, size_t errlen, int *rc)
{
    char *s = NULL;
    *rc = nf_store_meta_get(st, META_NAME, &s, err, errlen);
    if (*rc < 0)
        return NULL;
    *rc = 0;
    cJSON *m = s ? cJSON_Parse(s) : NULL;
    if (s && !m)
        nf_log(NF_LOG_WARN, "changelog",
               "the recorded changelog offsets do not parse: every partition is restored from "
               "its first offset",
               NF_LEND);
    free(s);
    if (!m && !(m = cJSON_CreateObject()))
        *rc = -ENOMEM;
    return m;
}

/* get_meta for a reader that writes nothing back. */
static cJSON *get_meta_locked(nf_store_t *st, char *err, size_t errlen, int *rc)
{
    pthread_mutex_lock(&g_meta_lock);
    cJSON *m = get_meta(st, err, errlen, rc);
    pthread_mutex_unlock(&g_meta_lock);
    return m;
}

/* The k_topics entry of a meta name ("changelog-interest"), or -1. */
static int topic_index(const char *base)
{
    for (size_t i = 0; i < NTOPICS; i++)
        if (!strcmp(base, nf_topic_name(k_topics[i].topic)))
            return (int)i;
    return -1;
}

int nf_changelog_save_synced(nf_store_t *st, const char *positions_json, const bool *const *owned,
                             bool merger_owned, char *err, size_t errlen)
{
    cJSON *pos = cJSON_Parse(positions_json);
    if (!pos) {
        snprintf(err, errlen, "changelog: unreadable producer positions");
        return -EINVAL;
    }
    int r;
    pthread_mutex_lock(&g_meta_lock);
    cJSON *meta = get_meta(st, err, errlen, &r);
    const cJSON *t;
    cJSON_ArrayForEach(t, pos)
    {
        const char *base = t->string ? base_name(t->string) : NULL;
        if (!meta || r != 0)
            break;
        int ti = base ? topic_index(base) : -1;
        if (ti < 0 || !cJSON_IsArray(t))
            continue;
        if (!owned) { /* one process: every writer is this one */
            r = set_item(meta, base, cJSON_Duplicate(t, 1));
            continue;
        }
        int in = k_topics[ti].input;
        if (in < 0 || !owned[in])
            continue; /* several writers may share these partitions: only a restore moves them */
        /* Own writes move a partition's synced offset only where this process is its only
         * writer: its input partition is assigned here (and, for the trending partition that
         * also holds the merger's key group, the merger too). */
        int n = cJSON_GetArraySize(t);
        int64_t *cur = calloc(n > 0 ? (size_t)n : 1, sizeof *cur);
        if (!cur) {
            r = -ENOMEM;
            break;
        }
        synced_of(meta, base, cur, n);
        int merger_part = n > 0 ? (int)(NF_CHANGELOG_MERGER_KG % (unsigned)n) : -1;
        cJSON *arr = cJSON_CreateArray();
        for (int p = 0; arr && p < n; p++) {
            const cJSON *v = cJSON_GetArrayItem(t, p);
            bool mine = p < NF_CHANGELOG_MAX_PARTITIONS && part_wanted(in, owned[in], p, n) &&
                        (k_topics[ti].kind != NF_KIND_TRENDING || p != merger_part || merger_owned);
            double x = mine && cJSON_IsNumber(v) ? v->valuedouble : (double)cur[p];
            cJSON_AddItemToArray(arr, cJSON_CreateNumber(x));
        }
        free(cur);
        r = set_item(meta, base, arr);
    }
    if (meta && r == 0)
        r = put_meta(st, meta, err, errlen);
    else if (r == -ENOMEM)
        snprintf(err, errlen, "changelog: out of memory");
    pthread_mutex_unlock(&g_meta_lock);
    cJSON_Delete(meta);
    cJSON_Delete(pos);
    return r;
}

/* Sets entry p of the array `name` of meta to x (padding with -1: none recorded). */
static int set_offset(cJSON *meta, const char *name, int p, int64_t x)
{
    cJSON *arr = cJSON_GetObjectItemCaseSensitive(meta, name);
    if (!cJSON_IsArray(arr)) {
        if (set_item(meta, name, cJSON_CreateArray()) != 0)
            return -ENOMEM;
        arr = cJSON_GetObjectItemCaseSensitive(meta, name);
    }
    while (cJSON_GetArraySize(arr) <= p) {
        cJSON *v = cJSON_CreateNumber(-1);
        if (!v)
            return -ENOMEM;
        cJSON_AddItemToArray(arr, v);
    }
    cJSON *v = cJSON_CreateNumber((double)x);
    if (!v)
        return -ENOMEM;
    cJSON_ReplaceItemInArray(arr, p, v);
    return 0;
}

/* Records offsets[i] (>= 0) for (topics[i], parts[i]) and leaves every other entry as it is now,
 * under the lock. */
static int record_offsets(nf_store_t *st, const int *topics, const int32_t *parts,
                          const int64_t *offsets, size_t n, char *err, size_t errlen)
{
    int r;
    pthread_mutex_lock(&g_meta_lock);
    cJSON *meta = get_meta(st, err, errlen, &r);
    for (size_t i = 0; meta && r == 0 && i < n; i++)
        if (offsets[i] >= 0 && parts[i] >= 0 && parts[i] < NF_CHANGELOG_MAX_PARTITIONS)
            r = set_offset(meta, nf_topic_name((nf_topic_t)topics[i]), parts[i], offsets[i]);
    if (r == -ENOMEM)
        snprintf(err, errlen, "changelog: out of memory");
    else if (meta && r == 0)
        r = put_meta(st, meta, err, errlen);
    pthread_mutex_unlock(&g_meta_lock);
    cJSON_Delete(meta);
    return r;
}

int nf_changelog_synced_get(nf_store_t *st, int topic, int32_t partition, int64_t *offset,
                            char *err, size_t errlen)
{
    *offset = -1;
    if (partition < 0 || partition >= NF_CHANGELOG_MAX_PARTITIONS)
        return -EINVAL;
    int r;
    cJSON *meta = get_meta_locked(st, err, errlen, &r);
    if (!meta)
        return r;
    int64_t *from = calloc((size_t)partition + 1, sizeof *from);
    if (from) {
        synced_of(meta, nf_topic_name((nf_topic_t)topic), from, partition + 1);
        *offset = from[partition];
    } else {
        snprintf(err, errlen, "changelog: out of memory");
        r = -ENOMEM;
    }
    free(from);
    cJSON_Delete(meta);
    return r;
}

int nf_changelog_synced_set(nf_store_t *st, const int *topics, const int32_t *partitions,
                            const int64_t *offsets, size_t n, char *err, size_t errlen)
{
    return record_offsets(st, topics, partitions, offsets, n, err, errlen);
}

int nf_changelog_input_topics(int input, int *topics, int cap)
{
    int n = 0;
    for (size_t i = 0; i < NTOPICS; i++)
        if (k_topics[i].input == input && n < cap)
            topics[n++] = (int)k_topics[i].topic;
    return n;
}

int nf_changelog_topic_input(int topic)
{
    const struct k_topic *t = k_topic_of(topic);
    return t ? t->input : -1;
}

/* ---------------------------------------------------------------- applying */

int nf_changelog_applier_init(nf_changelog_applier_t *a, nf_store_t *st,
                              nf_changelog_progress_t *prog, nf_changelog_stats_t *stats)
{
    *a = (nf_changelog_applier_t){
        .st = st, .prog = prog, .stats = stats, .now_ms = (uint64_t)nf_wall_ms()};
    a->b = nf_store_batch_new();
    return a->b ? 0 : -ENOMEM;
}

static int write_batch(const nf_changelog_applier_t *a, const nf_store_batch_t *b, char *err,
                       size_t errlen)
{
    if (a->bulk && nf_store_batch_count(b) >= NF_CHANGELOG_BULK_MIN)
        return nf_store_ingest(a->st, b, err, errlen);
    return a->unlogged ? nf_store_write_unlogged(a->st, b, err, errlen)
                       : nf_store_write(a->st, b, err, errlen);
}

/* The applier's writer thread: takes one full batch at a time (job), writes it, hands it back
 * cleared. */
struct nf_changelog_writer {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    const nf_changelog_applier_t *a;
    nf_store_batch_t *job;   /* being written; NULL: idle */
    nf_store_batch_t *spare; /* written and cleared, for the caller's next batch */
    bool stop;
    int rc; /* the first failed write; sticky */
    char err[512];
};

static void *writer_main(void *arg)
{
    struct nf_changelog_writer *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->job && !w->stop)
            pthread_cond_wait(&w->cv, &w->mu);
        if (!w->job)
            break;
        nf_store_batch_t *b = w->job;
        pthread_mutex_unlock(&w->mu);
        char err[512] = "";
        int r = w->rc ? 0 : write_batch(w->a, b, err, sizeof err);
        nf_store_batch_clear(b);
        pthread_mutex_lock(&w->mu);
        if (r && !w->rc) {
            w->rc = r;
            snprintf(w->err, sizeof w->err, "%s", err);
        }
        w->spare = b;
        w->job = NULL;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Waits until the writer is idle; its sticky result (err filled on failure). Locked by the
 * caller. */
static int writer_idle_locked(struct nf_changelog_writer *w, char *err, size_t errlen)
{
    while (w->job)
        pthread_cond_wait(&w->cv, &w->mu);
    if (w->rc)
        snprintf(err, errlen, "%s", w->err);
    return w->rc;
}

int nf_changelog_applier_thread(nf_changelog_applier_t *a)
{
    if (a->w)
        return 0;
    struct nf_changelog_writer *w = calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    w->a = a;
    if (!(w->spare = nf_store_batch_new())) {
        free(w);
        return -ENOMEM;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    /* No process signals on this thread (they go to the main thread, as from the shards'). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int r = pthread_create(&w->th, NULL, writer_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r != 0) {
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        nf_store_batch_free(w->spare);
        free(w);
        return -r;
    }
    a->w = w;
    return 0;
}

void nf_changelog_applier_free(nf_changelog_applier_t *a)
{
    struct nf_changelog_writer *w = a->w;
    if (w) {
        pthread_mutex_lock(&w->mu);
        w->stop = true;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->th, NULL);
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        nf_store_batch_free(w->spare);
        free(w);
        a->w = NULL;
    }
    nf_store_batch_free(a->b);
    a->b = NULL;
}

/* A full batch: to the writer (once it is done with the previous one), or written here. */
static int hand_off(nf_changelog_applier_t *a, char *err, size_t errlen)
{
    struct nf_changelog_writer *w = a->w;
    if (!w)
        return nf_changelog_applier_flush(a, err, errlen);
    a->now_ms = (uint64_t)nf_wall_ms();
    pthread_mutex_lock(&w->mu);
    int r = writer_idle_locked(w, err, errlen);
    if (r == 0) {
        w->job = a->b;
        a->b = w->spare;
        w->spare = NULL;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return r;
}

int nf_changelog_applier_flush(nf_changelog_applier_t *a, char *err, size_t errlen)
{
    a->now_ms = (uint64_t)nf_wall_ms();
    if (a->w) { /* what the writer has first: records are applied in their order */
        pthread_mutex_lock(&a->w->mu);
        int r = writer_idle_locked(a->w, err, errlen);
        pthread_mutex_unlock(&a->w->mu);
        if (r)
            return r;
    }
    if (!nf_store_batch_count(a->b))
        return 0;
    int r = write_batch(a, a->b, err, errlen);
    nf_store_batch_clear(a->b);
    return r;
}

size_t nf_changelog_applier_pending(const nf_changelog_applier_t *a)
{
    return nf_store_batch_count(a->b);
}

int nf_changelog_apply(nf_changelog_applier_t *a, int topic, int32_t partition, int64_t offset,
                       const void *key, size_t klen, const void *val, size_t vlen, bool tombstone,
                       char *err, size_t errlen)
{
    const struct k_topic *kt = k_topic_of(topic);
    if (!kt)
        return 0;
    int kind = (int)kt->kind;
    a->stats->records++;
    a->stats->by_input[kt->input]++;
    a->stats->bytes += klen + vlen;
    if (a->prog)
        atomic_fetch_add(&a->prog->applied, 1);
    if (klen < 2 || (!tombstone && vlen < 8)) {
        /* Not a record this code wrote (every value starts with its 8-byte expiry). */
        if (a->stats->skipped++ < 5)
            nf_log(NF_LOG_WARN, "changelog", "malformed changelog record skipped",
                   NF_LS("kind", nf_state_kind_name((nf_state_kind_t)kind)),
                   NF_LI("partition", partition), NF_LI("offset", offset), NF_LI("key_bytes", klen),
                   NF_LI("value_bytes", vlen), NF_LEND);
        return 0;
    }
    const unsigned char *k = (const unsigned char *)key + 2;
    uint64_t exp = tombstone ? 0 : nf_get_le64(val);
    /* By the wall clock only the kinds that expire by it: the cluster index's run on its
     * engine's clock, which the store's filter applies once the engine has set it. */
    if (exp != 0 && exp <= a->now_ms && !nf_state_kind_owner_clock((nf_state_kind_t)kind)) {
        a->stats->expired++; /* the TTL filter would drop it; a later value may follow */
        return 0;
    }
    if (tombstone) {
        nf_store_batch_delete(a->b, (nf_state_kind_t)kind, k, klen - 2);
        a->stats->deletes++;
    } else {
        nf_store_batch_put(a->b, (nf_state_kind_t)kind, k, klen - 2, val, vlen);
        a->stats->puts++;
    }
    return nf_store_batch_count(a->b) >= APPLY_BATCH || nf_store_batch_bytes(a->b) >= APPLY_BYTES
               ? hand_off(a, err, errlen)
               : 0;
}

/* ---------------------------------------------------------------- restore */

typedef struct {
    nf_changelog_applier_t a;
    const int *topics; /* read_topics' topic index -> nf_topic_t */
    char *err;
    size_t errlen;
} restore_ctx_t;

static int restore_rec(void *arg, int topic_index, int32_t partition, int64_t offset,
                       const void *key, size_t klen, const void *val, size_t vlen, bool tombstone)
{
    restore_ctx_t *c = arg;
    return nf_changelog_apply(&c->a, c->topics[topic_index], partition, offset, key, klen, val,
                              vlen, tombstone, c->err, c->errlen);
}

/* only: NULL (every partition of every topic, or of the kinds not keyed by an input partition
 * when skip_by_input) or, per input, the key groups (partitions) to read of the kinds keyed by
 * that input's partition (NULL: none). */
static int restore(nf_store_t *st, const nf_kafka_ops_t *k, const bool *const *only,
                   bool skip_by_input, nf_changelog_progress_t *prog, nf_changelog_stats_t *stats,
                   char *err, size_t errlen)
{
    enum { STRIDE = NF_CHANGELOG_MAX_PARTITIONS };
    nf_changelog_stats_t local;
    if (!stats)
        stats = &local;
    memset(stats, 0, sizeof *stats);
    uint64_t t0 = nf_now_ns();
    int r;
    cJSON *meta = get_meta_locked(st, err, errlen, &r);
    if (!meta)
        return r;
    restore_ctx_t c = {.err = err, .errlen = errlen};
    int64_t *from = calloc(NTOPICS * STRIDE * 2, sizeof *from);
    /* the (topic, partition, offset) triples recorded at the end */
    int *rt = calloc(NTOPICS * STRIDE, sizeof *rt);
    int32_t *rp = calloc(NTOPICS * STRIDE, sizeof *rp);
    int64_t *ro = calloc(NTOPICS * STRIDE, sizeof *ro);
    if (nf_changelog_applier_init(&c.a, st, prog, stats) != 0 || !from || !rt || !rp || !ro) {
        nf_changelog_applier_free(&c.a);
        free(from);
        free(rt);
        free(rp);
        free(ro);
        cJSON_Delete(meta);
        snprintf(err, errlen, "changelog: out of memory");
        return -ENOMEM;
    }
    /* Full batches bulk-loaded (table files linked into the database: no memtable, durable at
     * once), the rest without the WAL (it would write every record a second time): the families
     * are flushed before the offsets are recorded, so a crash in between reads the same records
     * again. */
    c.a.unlogged = true;
    c.a.bulk = true;
    if (nf_changelog_applier_thread(&c.a) != 0) /* then the records are written here */
        nf_log(NF_LOG_WARN, "changelog", "no writer thread for the restore; writing in this one",
               NF_LEND);
    int64_t *end = from + NTOPICS * STRIDE;
    int topics[NTOPICS], nparts[NTOPICS];
    c.topics = topics;
    /* Every partition's start and end first, for the progress total. */
    uint64_t total = 0;
    for (size_t i = 0; i < NTOPICS && r == 0; i++) {
        topics[i] = (int)k_topics[i].topic;
        int n = k->topic_partitions(k->arg, topics[i]);
        nparts[i] = n < 0 ? 0 : n > STRIDE ? STRIDE : n;
        int64_t *f = from + i * STRIDE, *h = end + i * STRIDE;
        synced_of(meta, nf_topic_name(k_topics[i].topic), f, nparts[i]);
        const bool *want = only && k_topics[i].input >= 0 ? only[k_topics[i].input] : NULL;
        if ((only && !want) || (skip_by_input && k_topics[i].input >= 0))
            nparts[i] = 0;
        if (nparts[i] && (r = k->topic_ends(k->arg, topics[i], h, nparts[i], err, errlen)) != 0)
            break;
        for (int p = 0; want && p < nparts[i]; p++)
            if (!part_wanted(k_topics[i].input, want, p, nparts[i]))
                h[p] = -1; /* not asked for: nothing read, its recorded offset stays */
        for (int p = 0; p < nparts[i]; p++)
            if (h[p] >= 0 && f[p] > h[p]) {
                /* Recorded beyond the end: the topic was recreated or truncated. What it holds
                 * now is all there is. */
                nf_log(NF_LOG_WARN, "changelog",
                       "recorded changelog offset beyond the partition's end: reading it from "
                       "the start",
                       NF_LS("topic", nf_topic_name(k_topics[i].topic)), NF_LI("partition", p),
                       NF_LI("recorded", f[p]), NF_LI("end", h[p]), NF_LEND);
                f[p] = -1;
            }
        for (int p = 0; p < nparts[i]; p++) {
            int64_t lo = f[p] < 0 ? 0 : f[p];
            if (h[p] > lo) {
                total += (uint64_t)(h[p] - lo);
                stats->partitions_read++;
            }
        }
    }
    if (prog) {
        atomic_store(&prog->applied, 0);
        atomic_store(&prog->total, total);
        atomic_store(&prog->running, true);
    }
    if (r == 0)
        r = k->read_topics(k->arg, topics, (int)NTOPICS, nparts, STRIDE, from, end, restore_rec, &c,
                           err, errlen);
    if (r == 0)
        r = nf_changelog_applier_flush(&c.a, err, errlen);
    if (r == 0 && stats->puts + stats->deletes > 0)
        r = nf_store_flush(st, err, errlen);
    /* Recorded only once applied (and flushed): a failure reads the same records again next time.
     * Only the partitions read are written: the others may have moved meanwhile (a standby's). */
    size_t nrec = 0;
    for (size_t i = 0; i < NTOPICS && r == 0; i++) {
        const bool *want = only && k_topics[i].input >= 0 ? only[k_topics[i].input] : NULL;
        for (int p = 0; p < nparts[i]; p++)
            if (!want || part_wanted(k_topics[i].input, want, p, nparts[i])) {
                rt[nrec] = topics[i];
                rp[nrec] = p;
                ro[nrec++] = end[i * STRIDE + p];
            }
    }
    if (r == 0 && nrec)
        r = record_offsets(st, rt, rp, ro, nrec, err, errlen);
    if (prog)
        atomic_store(&prog->running, false);
    nf_changelog_applier_free(&c.a);
    free(from);
    free(rt);
    free(rp);
    free(ro);
    cJSON_Delete(meta);
    stats->ns = nf_now_ns() - t0;
    return r;
}

int nf_changelog_restore(nf_store_t *st, const nf_kafka_ops_t *k, bool by_input,
                         nf_changelog_progress_t *prog, nf_changelog_stats_t *stats, char *err,
                         size_t errlen)
{
    return restore(st, k, NULL, !by_input, prog, stats, err, errlen);
}

int nf_changelog_restore_partitions(nf_store_t *st, const nf_kafka_ops_t *k,
                                    const bool *const parts[NF_INPUT__COUNT],
                                    nf_changelog_progress_t *prog, nf_changelog_stats_t *stats,
                                    char *err, size_t errlen)
{
    return restore(st, k, parts, false, prog, stats, err, errlen);
}
