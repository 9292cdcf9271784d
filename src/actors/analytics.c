/* analytics.c — the stories (cluster) and trending-merger actors, and the analytics wiring
 * (analytics.h). The per-event halves live with their inputs: classify and MinHash in crawl.c,
 * the topic broadcast and cluster hand-off in dedup.c, event-id dedup and the trending counter in
 * reads.c's kafka_in, the interest engine in reads.c's reads actor. */
#include "actors/analytics.h"
#include "algo/bytes.h"
#include "feed/dates.h"
#include "runtime/jsonw.h"
#include "runtime/log.h"
#include "state/kstate.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void free_body(void *ctx, const nf_msg_t *m)
{
    (void)ctx;
    free(m->body.ptr);
}

int nf_analytics_put_blob(nf_store_batch_t *b, const void *key, size_t klen, const void *blob,
                          size_t len)
{
    unsigned char *v = malloc(8 + len);
    if (!v)
        return -ENOMEM;
    memset(v, 0, 8);
    memcpy(v + 8, blob, len);
    nf_store_batch_put(b, NF_KIND_TRENDING, key, klen, v, 8 + len);
    free(v);
    return 0;
}

const void *nf_analytics_blob(const void *val, size_t vlen, size_t *len)
{
    if (vlen < 8)
        return NULL;
    *len = vlen - 8;
    return (const unsigned char *)val + 8;
}

/* KEY + chunk index i (2 bytes BE) into out; its length. */
static size_t chunk_key(unsigned char *out, const void *key, size_t klen, unsigned i)
{
    memcpy(out, key, klen);
    out[klen] = (unsigned char)(i >> 8);
    out[klen + 1] = (unsigned char)i;
    return klen + 2;
}

int nf_analytics_put_chunked(nf_store_batch_t *b, const void *key, size_t klen, const void *blob,
                             size_t len, unsigned prev, unsigned *chunks)
{
    const unsigned char *p = blob;
    size_t n = len <= NF_ANALYTICS_CHUNK_BYTES
                   ? 1
                   : (len + NF_ANALYTICS_CHUNK_BYTES - 1) / NF_ANALYTICS_CHUNK_BYTES;
    if (n > 65535 || klen > NF_ANALYTICS_KEY_MAX)
        return -EFBIG;
    unsigned char ck[NF_ANALYTICS_KEY_MAX + 2];
    int rc = 0;
    if (n == 1) {
        rc = nf_analytics_put_blob(b, key, klen, blob, len);
    } else {
        unsigned char *v = malloc(16 + NF_ANALYTICS_CHUNK_BYTES);
        if (!v)
            return -ENOMEM;
        nf_put_le32(v, NF_ANALYTICS_CHUNKED);
        nf_put_le32(v + 4, (uint32_t)n);
        nf_put_le64(v + 8, (uint64_t)len);
        memcpy(v + 16, p, NF_ANALYTICS_CHUNK_BYTES);
        rc = nf_analytics_put_blob(b, key, klen, v, 16 + NF_ANALYTICS_CHUNK_BYTES);
        free(v);
        for (size_t i = 1; rc == 0 && i < n; i++) {
            size_t at = i * NF_ANALYTICS_CHUNK_BYTES;
            size_t sz = len - at < NF_ANALYTICS_CHUNK_BYTES ? len - at : NF_ANALYTICS_CHUNK_BYTES;
            rc = nf_analytics_put_blob(b, ck, chunk_key(ck, key, klen, (unsigned)i), p + at, sz);
        }
    }
    for (unsigned i = (unsigned)n; rc == 0 && i < prev; i++)
        nf_store_batch_delete(b, NF_KIND_TRENDING, ck, chunk_key(ck, key, klen, i));
    if (rc == 0)
        *chunks = (unsigned)n;
    else
        nf_store_batch_fail(b); /* part of the chunks in the batch: it must not commit */
    return rc;
}

/* get_chunked's scan over KEY and its chunk keys: one iterator, so one consistent view of the
 * head and every chunk (a save in between could not mix two counters). */
typedef struct chunk_scan {
    size_t klen;
    bool head;          /* KEY seen */
    uint32_t n, next;   /* chunks announced by the head; the next index expected */
    uint64_t total;     /* bytes announced */
    unsigned char *out; /* the blob being assembled */
    char *err;
    size_t errlen;
} chunk_scan_t;

static int chunk_scan_fn(const void *k, size_t kl, const void *val, size_t vlen, void *arg)
{
    chunk_scan_t *c = arg;
    size_t blen = 0;
    const unsigned char *h = nf_analytics_blob(val, vlen, &blen);
    if (kl == c->klen) { /* the head comes first: a prefix sorts before its extensions */
        if (!h) {
            snprintf(c->err, c->errlen, "trending: a stored value of %zu bytes (no header)", vlen);
            return -EINVAL;
        }
        c->head = true;
        if (blen < 16 || nf_get_le32(h) != NF_ANALYTICS_CHUNKED) { /* one chunk: the blob */
            c->n = c->next = 1;
            c->total = blen;
            c->out = malloc(blen ? blen : 1);
            if (!c->out)
                return -ENOMEM;
            memcpy(c->out, h, blen);
            return 1; /* done: keys past it are not this blob's */
        }
        c->n = nf_get_le32(h + 4);
        c->total = nf_get_le64(h + 8);
        if (c->n < 2 || c->n > 65535 ||
            c->total <= (uint64_t)(c->n - 1) * NF_ANALYTICS_CHUNK_BYTES ||
            c->total > (uint64_t)c->n * NF_ANALYTICS_CHUNK_BYTES ||
            blen != 16 + NF_ANALYTICS_CHUNK_BYTES) {
            snprintf(c->err, c->errlen,
                     "trending: chunked value with a bad header (%" PRIu32 " chunks, %" PRIu64
                     " bytes, first chunk %zu bytes)",
                     c->n, c->total, blen - 16);
            return -EINVAL;
        }
        if (!(c->out = malloc((size_t)c->total)))
            return -ENOMEM;
        memcpy(c->out, h + 16, NF_ANALYTICS_CHUNK_BYTES);
        c->next = 1;
        return 0;
    }
    if (!c->head || kl != c->klen + 2)
        return 0; /* not a chunk key of this blob */
    const unsigned char *kk = k;
    uint32_t i = (uint32_t)kk[c->klen] << 8 | kk[c->klen + 1];
    if (i >= c->n)
        return 1; /* past the last chunk: done */
    size_t at = (size_t)i * NF_ANALYTICS_CHUNK_BYTES;
    size_t want = c->total - at < NF_ANALYTICS_CHUNK_BYTES ? (size_t)(c->total - at)
                                                           : NF_ANALYTICS_CHUNK_BYTES;
    if (i != c->next || !h || blen != want) {
        snprintf(c->err, c->errlen, "trending: chunk %" PRIu32 " of %" PRIu32 " %s", c->next, c->n,
                 i != c->next ? "is missing" : "has the wrong length");
        return -EINVAL;
    }
    memcpy(c->out + at, h, want);
    c->next++;
    return 0;
}

int nf_analytics_get_chunked(nf_store_t *st, const void *key, size_t klen, void **blob, size_t *len,
                             unsigned *chunks, char *err, size_t errlen)
{
    *blob = NULL;
    *len = 0;
    if (klen > NF_ANALYTICS_KEY_MAX) {
        snprintf(err, errlen, "trending: key of %zu bytes", klen);
        return -EINVAL;
    }
    chunk_scan_t c = {.klen = klen, .err = err, .errlen = errlen};
    int rc = nf_store_scan_prefix(st, NF_KIND_TRENDING, key, klen, chunk_scan_fn, &c);
    if (rc < 0 && rc != -EINVAL && rc != -ENOMEM)
        snprintf(err, errlen, "trending: reading the stored blob failed (%d)", rc);
    if (rc >= 0 && c.head && c.next < c.n) {
        snprintf(err, errlen, "trending: chunk %" PRIu32 " of %" PRIu32 " is missing", c.next, c.n);
        rc = -EINVAL;
    }
    if (rc < 0 || !c.head) {
        free(c.out);
        return rc < 0 ? rc : 0;
    }
    *blob = c.out;
    *len = (size_t)c.total;
    *chunks = c.n;
    return 1;
}

long nf_analytics_legacy_shards(nf_store_t *st)
{
    void *v = NULL;
    size_t len = 0, blen = 0;
    int rc = nf_store_get(st, NF_KIND_TRENDING, "n", 1, &v, &len, NULL, 0);
    if (rc != 1)
        return rc;
    const unsigned char *n = nf_analytics_blob(v, len, &blen);
    long count = n && blen == 4 ? (long)nf_get_le32(n) : -EINVAL;
    free(v);
    return count;
}

void nf_analytics_trend_fixed(void *ctx, nf_trend_fix_t what, int64_t id, int64_t old_v,
                              int64_t new_v)
{
    nf_analytics_t *an = ctx;
    char was[40], now[40];
    nf_date_format(old_v, was, sizeof was);
    if (new_v == INT64_MIN)
        snprintf(now, sizeof now, "dropped");
    else
        nf_date_format(new_v, now, sizeof now);
    nf_counter_inc(an->m.trend_repairs);
    nf_log(NF_LOG_WARN, "trending",
           "trending state dated beyond the wall clock + trending.max_future_ms repaired (saved "
           "before future event times were refused; it stopped trending for its partitions)",
           NF_LS("what", nf_trend_fix_name(what)), NF_LI("id", id), NF_LS("old", was),
           NF_LS("new", now), NF_LI("old_ms", old_v), NF_LI("new_ms", new_v), NF_LEND);
}

void nf_analytics_defaults(nf_analytics_t *an)
{
    memset(an, 0, sizeof *an);
    nf_minhash_opts_default(&an->minhash);
    nf_cluster_opts_default(&an->cluster);
    nf_trend_opts_default(&an->trend);
    nf_interest_opts_default(&an->interest);
    an->event_id_ttl_ms = 2 * 3600 * 1000ull;
    an->max_future_ms = 5 * 60 * 1000;
    an->topics_ttl_ms = 7 * NF_CLUSTER_DAY_MS;
    an->history_ttl_ms = 7 * NF_CLUSTER_DAY_MS; /* feedback only, as interest.history's default */
    an->stories_actor = an->trend_actor = an->interest_actor = -1;
}

/* ================================================================ stories (cluster) */

typedef struct stories {
    nf_analytics_t *an;
    nf_shard_t *sh;
    nf_cluster_t *eng;
    nf_kstate_t *sizes; /* story cluster id -> articles (serve_state.h, NF_KIND_STORY) */
    nf_jw_t jw;
    nf_timer_t tick;
    uint64_t loads, evictions; /* the index's, as last reported */
} stories_t;

static void stories_emit(stories_t *s, nf_id128_t article, const nf_cluster_result_t *r,
                         int64_t ts_ms)
{
    char aid[33], cid[33], ts[40];
    nf_cluster_id_hex(article, aid);
    nf_cluster_id_hex(r->cluster_id, cid);
    nf_date_format(ts_ms, ts, sizeof ts);
    nf_jw_t *w = &s->jw;
    nf_jw_reset(w);
    nf_jw_obj_open(w);
    nf_jw_key(w, "article_id");
    nf_jw_str(w, aid);
    nf_jw_key(w, "cluster_id");
    nf_jw_str(w, cid);
    nf_jw_key(w, "action");
    nf_jw_str(w, nf_cluster_action_name(r->action));
    nf_jw_key(w, "similarity");
    char sim[32];
    int sl = snprintf(sim, sizeof sim, "%.6g", r->action == NF_CLUSTER_NEW ? 1.0 : r->similarity);
    nf_jw_raw(w, sim, (size_t)sl);
    nf_jw_key(w, "merged_from");
    nf_jw_arr_open(w);
    for (unsigned i = 0; i < r->merged_count; i++) {
        char m[33];
        nf_cluster_id_hex(r->merged_from[i], m);
        nf_jw_elem(w);
        nf_jw_str(w, m);
    }
    nf_jw_arr_close(w);
    nf_jw_key(w, "ts");
    nf_jw_str(w, ts);
    nf_jw_obj_close(w);
    if (w->failed || nf_analytics_emit(s->an, nf_shard_index(s->sh), NF_TOPIC_STORY_CLUSTERS, aid,
                                       w->buf, w->len) != 0) {
        nf_log(NF_LOG_ERROR, "cluster", "out of memory for outputs; stopping the job", NF_LEND);
        nf_runtime_fail(nf_shard_runtime(s->sh));
    }
}

static uint16_t story_kg(const stories_t *s, nf_id128_t id)
{
    return s->an->cluster.key_group >= 0 ? (uint16_t)s->an->cluster.key_group
                                         : (uint16_t)(id.hi % 256);
}

/* A story's size as stored (a story without a record counts its root alone). 0 or -EIO. */
static int story_size(stories_t *s, nf_id128_t id, uint64_t now, uint32_t *size)
{
    uint32_t len = 0;
    int err = 0;
    const unsigned char *v = nf_kstate_get(s->sizes, story_kg(s, id), id, now, &len, &err);
    *size = v && len == 4 ? nf_get_le32(v) : 1;
    return err;
}

/* The stories' sizes after a clustering result (serve_state.h): 0, -EIO or -ENOMEM. */
static int story_sizes(stories_t *s, nf_id128_t article, const nf_cluster_result_t *r, uint64_t now)
{
    uint32_t size = 1, part;
    int e = 0;
    if (r->action == NF_CLUSTER_DUPLICATE)
        return 0;
    /* The story it joins (or merges into) counts as it was, plus the article; when the article
     * is itself the merged story's earliest (it came late), that story is new: just the
     * article, plus what it merges. */
    bool own = r->cluster_id.hi == article.hi && r->cluster_id.lo == article.lo;
    if (r->action != NF_CLUSTER_NEW && !own) {
        e = story_size(s, r->cluster_id, now, &size);
        size++; /* the article */
    }
    for (unsigned i = 0; e == 0 && r->action == NF_CLUSTER_MERGED && i < r->merged_count; i++) {
        e = story_size(s, r->merged_from[i], now, &part);
        if (e == 0) {
            size += part;
            e = nf_kstate_delete(s->sizes, story_kg(s, r->merged_from[i]), r->merged_from[i]);
        }
    }
    if (r->merged_more)
        nf_counter_add(s->an->m.story_sizes_lost, r->merged_more);
    unsigned char v[4];
    nf_put_le32(v, size);
    nf_id128_t id = r->action == NF_CLUSTER_NEW ? article : r->cluster_id;
    return e ? e : nf_kstate_put(s->sizes, story_kg(s, id), id, v, sizeof v, now);
}

static void stories_handle(nf_shard_t *sh, void *self, const nf_msg_t *m)
{
    stories_t *s = self;
    nf_cluster_msg_t *c = m->body.ptr;
    nf_cluster_result_t r;
    int rc = nf_cluster_add(s->eng, c->id, c->ingested_ms, c->sig, &r);
    if (rc == 0 && s->sizes)
        rc = story_sizes(s, c->id, &r, (uint64_t)c->ingested_ms);
    if (rc != 0) {
        /* The index cannot be read or grown: a wrong assignment would be committed. Stop; the
         * epoch is not committed, so its articles are crawled and clustered again. */
        char aid[33];
        nf_cluster_id_hex(c->id, aid);
        nf_counter_inc(s->an->m.state_errors);
        nf_log(NF_LOG_ERROR, "cluster", "cluster state failed; stopping the job",
               NF_LS("article_id", aid), NF_LI("errno", -rc),
               NF_LS("error", nf_cluster_error(s->eng)), NF_LEND);
        nf_runtime_fail(nf_shard_runtime(sh));
        free(c);
        return;
    }
    nf_counter_inc(s->an->m.clusters[r.action]);
    /* An epoch's new entries cannot be evicted before it commits: over the budget, ask for an
     * early one, whose commit evicts and gives the memory back (kstate.h). */
    if (s->an->epoch &&
        (nf_cluster_over_budget(s->eng) || (s->sizes && nf_kstate_over_budget(s->sizes))))
        nf_epoch_request(s->an->epoch);
    if (r.action != NF_CLUSTER_DUPLICATE)
        stories_emit(s, c->id, &r, nf_wall_ms());
    if (r.merged_more)
        nf_log(NF_LOG_WARN, "cluster", "merge absorbed more clusters than merged_from lists",
               NF_LI("listed", r.merged_count), NF_LI("more", r.merged_more), NF_LEND);
    free(c);
}

static void stories_snapshot(nf_shard_t *sh, void *self, nf_store_batch_t *b, uint64_t epoch)
{
    stories_t *s = self;
    nf_cluster_snapshot(s->eng, b, epoch);
    if (s->sizes)
        nf_kstate_snapshot(s->sizes, b, epoch);
    (void)sh;
}

static void stories_committed(nf_shard_t *sh, void *self, uint64_t epoch)
{
    stories_t *s = self;
    nf_cluster_committed(s->eng, epoch);
    if (s->sizes)
        nf_kstate_committed(s->sizes, epoch);
    (void)sh;
}

/* The index, and the stories' sizes beside it (only with a store: they are for the query API,
 * which reads the store). 0 or -ENOMEM. */
static int stories_engine(stories_t *s)
{
    nf_cluster_opts_t o = s->an->cluster;
    o.budget_bytes = s->an->budget_bytes;
    if (!(s->eng = nf_cluster_new(s->an->store, &o)))
        return -ENOMEM;
    nf_kstate_opts_t k = {.kind = NF_KIND_STORY,
                          .ttl_ms = o.ttl_ms,
                          .budget_bytes = s->an->budget_bytes,
                          .initial_capacity = 1 << 12};
    if (s->an->store && !(s->sizes = nf_kstate_new(s->an->store, &k)))
        return -ENOMEM;
    return 0;
}

/* In a consumer group the index belongs to the one-partition topic (ingest.h): when it comes to
 * or leaves this process, the engine starts again from the store (restored from the changelog
 * on arrival: the clock and every entry are read on demand), so nothing of another owner's
 * time stays in memory. */
static void stories_partitions(nf_shard_t *sh, void *self, nf_input_t in, const int32_t *parts,
                               size_t n, bool gained)
{
    stories_t *s = self;
    bool zero = false;
    for (size_t i = 0; i < n; i++)
        zero |= parts[i] == 0;
    if (in != NF_INPUT_TRENDING_PANES || !s->an->panes_topic || !zero)
        return;
    nf_cluster_free(s->eng);
    nf_kstate_free(s->sizes);
    s->eng = NULL;
    s->sizes = NULL;
    s->loads = s->evictions = 0; /* the new engine counts from 0 */
    if (stories_engine(s) != 0) {
        nf_log(NF_LOG_ERROR, "cluster", "out of memory reopening the story index; stopping",
               NF_LEND);
        nf_runtime_fail(nf_shard_runtime(sh));
        return;
    }
    nf_log(NF_LOG_INFO, "cluster",
           gained ? "this process clusters the job's articles"
                  : "the job's articles are "
                    "clustered elsewhere now",
           NF_LEND);
}

static const nf_epoch_participant_t stories_part = {
    .snapshot = stories_snapshot, .committed = stories_committed, .partitions = stories_partitions};

static void stories_tick(nf_shard_t *sh, nf_timer_t *t, void *arg)
{
    stories_t *s = arg;
    nf_cluster_expire(s->eng, (uint64_t)nf_wall_ms(), 4096);
    if (s->sizes)
        nf_kstate_expire(s->sizes, (uint64_t)nf_wall_ms(), 4096);
    nf_cluster_stats_t st;
    nf_cluster_stats(s->eng, &st);
    nf_gauge_set(s->an->m.index_bytes, (int64_t)st.bytes);
    nf_gauge_set(s->an->m.index_entries, (int64_t)st.entries);
    nf_kstate_gauges_set(&s->an->m.sig_mem, &st.sig);
    nf_kstate_gauges_set(&s->an->m.bucket_mem, &st.bucket);
    nf_kstate_gauges_set(&s->an->m.parent_mem, &st.parent);
    nf_kstate_stats_t sz;
    if (s->sizes)
        nf_kstate_stats(s->sizes, &sz);
    nf_kstate_gauges_set(&s->an->m.story_mem, s->sizes ? &sz : NULL);
    uint64_t loads = st.sig.loads + st.bucket.loads + st.parent.loads;
    uint64_t evictions = st.sig.evictions + st.bucket.evictions + st.parent.evictions;
    nf_counter_add(s->an->m.index_loads, loads - s->loads);
    nf_counter_add(s->an->m.index_evictions, evictions - s->evictions);
    s->loads = loads;
    s->evictions = evictions;
    (void)sh;
    (void)t;
}

static void stories_fini(nf_shard_t *sh, void *self);

static int stories_init(nf_shard_t *sh, void *ctx, void **self, char *err, size_t errlen)
{
    nf_analytics_t *an = ctx;
    unsigned n = nf_runtime_shard_count(nf_shard_runtime(sh));
    if (nf_shard_index(sh) != an->cluster_shard % n)
        return 0; /* only the cluster shard holds the index */
    stories_t *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory for the story index");
        return -1;
    }
    s->an = an;
    s->sh = sh;
    nf_jw_init(&s->jw);
    nf_timer_init(&s->tick, stories_tick, s);
    int r = stories_engine(s);
    if (r != 0)
        snprintf(err, errlen,
                 "cannot create the story index: out of memory or cluster options "
                 "it cannot use");
    else if (an->epoch && (r = nf_epoch_participant_add(an->epoch, sh, &stories_part, s)) != 0)
        snprintf(err, errlen, "the story index cannot take part in the epochs: %s", strerror(-r));
    if (r != 0) {
        stories_fini(sh, s);
        return -1;
    }
    nf_timer_arm(sh, &s->tick, nf_now_ns() + 1000000000ull, 1000000000ull);
    *self = s;
    return 0;
}

static void stories_stop(nf_shard_t *sh, void *self)
{
    if (self)
        nf_timer_cancel(sh, &((stories_t *)self)->tick);
}

static void stories_fini(nf_shard_t *sh, void *self)
{
    stories_t *s = self;
    if (!s)
        return;
    nf_timer_cancel(sh, &s->tick);
    nf_cluster_free(s->eng);
    nf_kstate_free(s->sizes);
    nf_jw_free(&s->jw);
    free(s);
}

static const nf_actor_ops_t stories_ops = {.name = "stories",
                                           .init = stories_init,
                                           .handle = stories_handle,
                                           .stop = stories_stop,
                                           .fini = stories_fini,
                                           .drop = free_body};

/* ================================================================ trending merger */

/* State keys in NF_KIND_TRENDING: "M" the merger's meta; "L" the last window emitted (its
 * `trending` record, JSON: what /v1/trending answers, src/serve/query.c); "P" + partition (2
 * bytes BE) + pane_start (8 bytes BE, offset by 2^63 so that order is numeric) one pane summary;
 * "C" + partition (2 bytes BE) a partition's counter (reads.c), and past 1 MiB "C" + partition +
 * chunk index (2 bytes BE) its further chunks (nf_analytics_put_chunked). The lower-case keys of
 * the per-shard layout ("m", "p" + shard + pane_start, "c" + shard, "n" the shard count) are
 * dropped at start (legacy_*). */
typedef struct pane_key {
    unsigned char k[11];
} pane_key_t;

static pane_key_t pane_key(unsigned counter, int64_t pane_start)
{
    pane_key_t pk;
    uint64_t u = (uint64_t)pane_start ^ (1ull << 63);
    pk.k[0] = 'P';
    pk.k[1] = (unsigned char)(counter >> 8);
    pk.k[2] = (unsigned char)counter;
    for (int i = 0; i < 8; i++)
        pk.k[3 + i] = (unsigned char)(u >> (56 - 8 * i));
    return pk;
}

typedef struct added_pane {
    unsigned counter;
    int64_t pane_start;
    size_t len;
    unsigned char *blob;
} added_pane_t;

typedef struct merger {
    nf_analytics_t *an;
    nf_shard_t *sh;
    nf_trend_merger_t *m;
    unsigned ncounters;
    /* Since the last cut: panes added (to write) and pane starts dropped (to delete). */
    added_pane_t *added;
    size_t nadded, added_cap;
    int64_t *dropped;
    size_t ndropped, dropped_cap;
    bool meta_dirty;
    bool active; /* merges (panes_topic: only while this process has trending-panes) */
    nf_jw_t jw;
    /* The last window emitted (its trending record's JSON), kept as "L" at the next cut for the
     * query API (/v1/trending): last_len 0 = none since the last cut. */
    char *last;
    size_t last_len, last_cap;
    /* Keys of the per-shard layout found at start, deleted at the first cut. */
    unsigned char (*legacy)[11];
    unsigned char *legacy_len;
    size_t nlegacy, legacy_cap;
} merger_t;

static int window_out(void *ctx, int64_t start, int64_t end, const nf_trend_ranked_t *items,
                      size_t n)
{
    merger_t *g = ctx;
    char ws[40], we[40];
    nf_date_format(start, ws, sizeof ws);
    nf_date_format(end, we, sizeof we);
    nf_jw_t *w = &g->jw;
    nf_jw_reset(w);
    nf_jw_obj_open(w);
    nf_jw_key(w, "window_start");
    nf_jw_str(w, ws);
    nf_jw_key(w, "window_end");
    nf_jw_str(w, we);
    nf_jw_key(w, "items");
    nf_jw_arr_open(w);
    for (size_t i = 0; i < n; i++) {
        nf_jw_elem(w);
        nf_jw_obj_open(w);
        nf_jw_key(w, "article_id");
        nf_jw_str(w, items[i].article_id);
        nf_jw_key(w, "score");
        nf_jw_u64(w, items[i].score);
        nf_jw_obj_close(w);
    }
    nf_jw_arr_close(w);
    nf_jw_obj_close(w);
    if (w->failed ||
        nf_analytics_emit(g->an, nf_shard_index(g->sh), NF_TOPIC_TRENDING, we, w->buf, w->len) != 0)
        return -ENOMEM;
    if (w->len > g->last_cap) {
        char *l = realloc(g->last, w->len);
        if (!l)
            return -ENOMEM;
        g->last = l;
        g->last_cap = w->len;
    }
    memcpy(g->last, w->buf, w->len);
    g->last_len = w->len;
    nf_counter_inc(g->an->m.windows);
    g->meta_dirty = true;
    return 0;
}

static void pane_dropped(void *ctx, int64_t pane_start)
{
    merger_t *g = ctx;
    if (g->ndropped == g->dropped_cap) {
        size_t cap = g->dropped_cap ? g->dropped_cap * 2 : 64;
        int64_t *v = realloc(g->dropped, cap * sizeof *v);
        if (!v)
            return; /* the summary stays on disk until the next drop of a later pane: harmless */
        g->dropped = v;
        g->dropped_cap = cap;
    }
    g->dropped[g->ndropped++] = pane_start;
}

static void merger_fixed(void *ctx, nf_trend_fix_t what, int64_t id, int64_t old_v, int64_t new_v)
{
    nf_analytics_trend_fixed(((merger_t *)ctx)->an, what, id, old_v, new_v);
}

static void merger_fail(merger_t *g, const char *what, int rc)
{
    nf_counter_inc(g->an->m.state_errors);
    nf_log(NF_LOG_ERROR, "trending", what, NF_LI("errno", -rc), NF_LEND);
    nf_runtime_fail(nf_shard_runtime(g->sh));
}

static void merger_emit(merger_t *g)
{
    int rc = nf_trend_merger_emit(g->m, window_out, pane_dropped, g);
    if (rc < 0)
        merger_fail(g, "cannot emit a trending window (out of memory); stopping the job", rc);
    nf_trend_merger_stats_t ms;
    nf_trend_merger_stats(g->m, &ms);
    nf_gauge_set(g->an->m.merger_panes, (int64_t)ms.panes);
    nf_gauge_set(g->an->m.merger_bytes, (int64_t)ms.bytes);
}

static int remember_pane(merger_t *g, unsigned counter, const nf_pane_msg_t *p)
{
    if (!g->an->store)
        return 0;
    if (g->nadded == g->added_cap) {
        size_t cap = g->added_cap ? g->added_cap * 2 : 16;
        added_pane_t *v = realloc(g->added, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        g->added = v;
        g->added_cap = cap;
    }
    unsigned char *copy = malloc(p->len ? p->len : 1);
    if (!copy)
        return -ENOMEM;
    memcpy(copy, p->blob, p->len);
    added_pane_t *a = &g->added[g->nadded++];
    a->counter = counter;
    a->pane_start = p->pane_start;
    a->len = p->len;
    a->blob = copy;
    return 0;
}

/* A partition beyond the merger's counters: the topic grew while the job ran. */
static void partition_out_of_range(merger_t *g, unsigned partition)
{
    nf_counter_inc(g->an->m.state_errors);
    nf_log(NF_LOG_ERROR, "trending",
           "a read-events partition beyond the partition count the trending merger started with "
           "(partitions were added to the topic); restart the job to count them; stopping",
           NF_LI("partition", partition), NF_LI("partitions", g->ncounters), NF_LEND);
    nf_runtime_fail(nf_shard_runtime(g->sh));
}

static void merger_handle(nf_shard_t *sh, void *self, const nf_msg_t *m)
{
    merger_t *g = self;
    if (!g->active) { /* a record read while the partition was being revoked: its next owner's */
        if (m->kind == NF_MSG_PANE)
            free(m->body.ptr);
        return;
    }
    unsigned counter = m->kind == NF_MSG_PANE ? (unsigned)((nf_pane_msg_t *)m->body.ptr)->partition
                                              : (unsigned)m->body.u64[1];
    if (counter >= g->ncounters) {
        if (m->kind == NF_MSG_PANE)
            free(m->body.ptr);
        partition_out_of_range(g, counter);
        return;
    }
    if (m->kind == NF_MSG_PANE) {
        nf_pane_msg_t *p = m->body.ptr;
        int rc = nf_trend_merger_add_pane(g->m, counter, p->blob, p->len);
        if (rc == 0) {
            nf_counter_inc(g->an->m.panes);
            if (remember_pane(g, counter, p) != 0)
                rc = -ENOMEM;
        }
        free(p);
        if (rc < 0 && rc != -EEXIST)
            merger_fail(g, "a trending pane could not be merged; stopping the job", rc);
        return;
    }
    if (m->kind == NF_MSG_WATERMARK || m->kind == NF_MSG_IDLE) {
        if (m->kind == NF_MSG_WATERMARK)
            nf_trend_merger_set_watermark(g->m, counter, (int64_t)m->body.u64[0]);
        else
            nf_trend_merger_set_idle(g->m, counter, (int64_t)m->body.u64[0]);
        g->meta_dirty = true;
        merger_emit(g);
    }
    (void)sh;
}

static void merger_snapshot(nf_shard_t *sh, void *self, nf_store_batch_t *b, uint64_t epoch)
{
    merger_t *g = self;
    (void)sh;
    (void)epoch;
    if (!g->active)
        return; /* not the merger of the job (panes_topic): its state is another process's */
    if (!b) {
        g->nadded = g->ndropped = g->nlegacy = 0;
        g->last_len = 0;
        return;
    }
    if (g->last_len) {
        if (nf_analytics_put_blob(b, "L", 1, g->last, g->last_len) != 0) {
            merger_fail(g, "cannot save the last trending window (out of memory); stopping",
                        -ENOMEM);
            return;
        }
        g->last_len = 0;
    }
    for (size_t i = 0; i < g->nlegacy; i++)
        nf_store_batch_delete(b, NF_KIND_TRENDING, g->legacy[i], g->legacy_len[i]);
    g->nlegacy = 0;
    for (size_t i = 0; i < g->ndropped; i++)
        for (unsigned c = 0; c < g->ncounters; c++) {
            pane_key_t k = pane_key(c, g->dropped[i]);
            nf_store_batch_delete(b, NF_KIND_TRENDING, k.k, sizeof k.k);
        }
    g->ndropped = 0;
    for (size_t i = 0; i < g->nadded; i++) {
        added_pane_t *a = &g->added[i];
        pane_key_t k = pane_key(a->counter, a->pane_start);
        int rc = nf_analytics_put_blob(b, k.k, sizeof k.k, a->blob, a->len);
        free(a->blob);
        a->blob = NULL;
        if (rc != 0) {
            merger_fail(g, "cannot save a trending pane (out of memory); stopping", rc);
            return;
        }
    }
    g->nadded = 0;
    if (g->meta_dirty) {
        void *blob = NULL;
        size_t len = 0;
        if (nf_trend_merger_save(g->m, &blob, &len) != 0) {
            merger_fail(g, "cannot save the trending merger (out of memory); stopping", -ENOMEM);
            return;
        }
        int rc = nf_analytics_put_blob(b, "M", 1, blob, len);
        free(blob);
        if (rc != 0) {
            merger_fail(g, "cannot save the trending merger (out of memory); stopping", rc);
            return;
        }
        g->meta_dirty = false;
    }
}

static void merger_restore(merger_t *g);

/* An empty merger (panes_topic: the trending-panes partition left this process, or is about to
 * be restored); what it had is in the store, committed. */
static void merger_reset(merger_t *g)
{
    for (size_t i = 0; i < g->nadded; i++)
        free(g->added[i].blob);
    g->nadded = g->ndropped = g->nlegacy = 0;
    g->last_len = 0;
    g->meta_dirty = false;
    nf_trend_merger_free(g->m);
    if (!(g->m = nf_trend_merger_new(&g->an->trend, g->ncounters)))
        merger_fail(g, "out of memory resetting the trending merger; stopping", -ENOMEM);
}

/* panes_topic: the merger follows the trending-panes partition (epoch.h `partitions`). */
static void merger_partitions(nf_shard_t *sh, void *self, nf_input_t in, const int32_t *parts,
                              size_t n, bool gained)
{
    merger_t *g = self;
    (void)sh;
    bool zero = false; /* the panes go to partition 0 only */
    for (size_t i = 0; i < n; i++)
        zero |= parts[i] == 0;
    if (in != NF_INPUT_TRENDING_PANES || !g->an->panes_topic || !zero)
        return;
    merger_reset(g);
    g->active = gained;
    if (gained && g->an->store)
        merger_restore(g);
    nf_log(NF_LOG_INFO, "trending",
           gained ? "this process merges the job's trending panes"
                  : "the job's trending panes are merged elsewhere now",
           NF_LEND);
}

static const nf_epoch_participant_t merger_part = {.snapshot = merger_snapshot,
                                                   .partitions = merger_partitions};

typedef struct restore_ctx {
    merger_t *g;
    int err;
    size_t panes, scanned;
} restore_ctx_t;

/* A key of the per-shard layout: "m", "n", "c" + shard, "p" + shard + pane_start. */
static bool legacy_key(const unsigned char *key, size_t klen)
{
    return (klen == 1 && (key[0] == 'm' || key[0] == 'n')) || (klen == 3 && key[0] == 'c') ||
           (klen == 11 && key[0] == 'p');
}

static int legacy_note(merger_t *g, const unsigned char *key, size_t klen)
{
    if (g->nlegacy == g->legacy_cap) {
        size_t cap = g->legacy_cap ? g->legacy_cap * 2 : 64;
        unsigned char(*v)[11] = realloc(g->legacy, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        g->legacy = v;
        unsigned char *l = realloc(g->legacy_len, cap);
        if (!l)
            return -ENOMEM;
        g->legacy_len = l;
        g->legacy_cap = cap;
    }
    memcpy(g->legacy[g->nlegacy], key, klen);
    g->legacy_len[g->nlegacy++] = (unsigned char)klen;
    return 0;
}

static int restore_pane(const void *k, size_t klen, const void *v, size_t vlen, void *arg)
{
    restore_ctx_t *x = arg;
    const unsigned char *key = k;
    x->scanned++;
    if (legacy_key(key, klen)) {
        if ((x->err = legacy_note(x->g, key, klen)) != 0)
            return 1;
        return 0;
    }
    if (klen != sizeof(pane_key_t) || key[0] != 'P')
        return 0;
    unsigned counter = (unsigned)key[1] << 8 | key[2];
    size_t blen = 0;
    const void *blob = nf_analytics_blob(v, vlen, &blen);
    int rc = blob ? nf_trend_merger_add_pane(x->g->m, counter, blob, blen) : -EINVAL;
    if (rc < 0 && rc != -EEXIST) {
        x->err = rc;
        return 1;
    }
    x->panes += rc == 0;
    return 0;
}

/* Legacy (per-shard) state: its last window end is kept, so that no window is emitted twice;
 * the rest cannot be split by partition and is dropped (deleted at the first cut). */
static void legacy_drop(merger_t *g, long shards)
{
    void *meta = NULL;
    size_t mlen = 0, blen = 0;
    int64_t done = INT64_MIN;
    if (nf_store_get(g->an->store, NF_KIND_TRENDING, "m", 1, &meta, &mlen, NULL, 0) == 1) {
        const void *blob = nf_analytics_blob(meta, mlen, &blen);
        if (blob && nf_trend_merger_adopt_done(g->m, blob, blen) == 0) {
            nf_trend_merger_stats_t ms;
            nf_trend_merger_stats(g->m, &ms);
            done = ms.done_end;
        }
        free(meta);
    }
    g->meta_dirty = true;
    for (size_t i = 0; i < g->nlegacy; i++)
        nf_counter_inc(g->an->m.trend_legacy_dropped);
    char last[40] = "none";
    if (done != INT64_MIN)
        nf_date_format(done, last, sizeof last);
    nf_log(NF_LOG_WARN, "trending",
           "trending state of the per-shard layout (before trending counters were kept per "
           "partition) cannot be split by partition and is dropped: events counted before this "
           "start in panes not yet merged, and the pane summaries of windows not yet complete, "
           "are lost, so for one trending.window_s the lists count only events read from now "
           "on; windows up to the last one emitted are not emitted again",
           NF_LI("stored_shards", shards), NF_LI("blobs", (int64_t)g->nlegacy),
           NF_LS("last_window_end", last), NF_LEND);
}

static void merger_restore(merger_t *g)
{
    nf_store_t *st = g->an->store;
    void *meta = NULL;
    size_t mlen = 0;
    long legacy = nf_analytics_legacy_shards(st);
    int rc = legacy < 0 ? (int)legacy
                        : nf_store_get(st, NF_KIND_TRENDING, "M", 1, &meta, &mlen, NULL, 0);
    if (rc < 0) {
        nf_log(NF_LOG_ERROR, "trending", "cannot read the trending merger's state; stopping",
               NF_LI("errno", -rc), NF_LEND);
        nf_runtime_fail(nf_shard_runtime(g->sh));
        return;
    }
    if (rc == 1) {
        size_t blen = 0;
        const void *blob = nf_analytics_blob(meta, mlen, &blen);
        int lr = blob ? nf_trend_merger_load(g->m, blob, blen) : -EINVAL;
        long saved = lr == -EXDEV ? nf_trend_merger_blob_counters(blob, blen) : 0;
        free(meta);
        if (lr == -EXDEV) {
            nf_log(NF_LOG_ERROR, "trending",
                   "the stored trending state has more read-events partitions than the topic "
                   "has now (a topic was recreated?); run with another state.dir; stopping",
                   NF_LI("stored_partitions", saved), NF_LI("partitions", g->ncounters), NF_LEND);
            nf_runtime_fail(nf_shard_runtime(g->sh));
            return;
        }
        if (lr != 0) {
            nf_log(NF_LOG_ERROR, "trending",
                   "the stored trending merger does not load (corrupt, or saved with other "
                   "trending options); stopping",
                   NF_LI("errno", -lr), NF_LEND);
            nf_runtime_fail(nf_shard_runtime(g->sh));
            return;
        }
    }
    restore_ctx_t x = {.g = g};
    rc = nf_store_scan(st, NF_KIND_TRENDING, restore_pane, &x);
    if (rc < 0 || x.err) {
        nf_log(NF_LOG_ERROR, "trending", "cannot restore the trending panes; stopping",
               NF_LI("errno", rc < 0 ? -rc : -x.err), NF_LEND);
        nf_runtime_fail(nf_shard_runtime(g->sh));
        return;
    }
    if (g->nlegacy)
        legacy_drop(g, legacy);
    if (g->an->max_future_ms > 0) {
        int64_t now = nf_wall_ms();
        if (nf_trend_merger_clamp(g->m, now + g->an->max_future_ms, now, merger_fixed, pane_dropped,
                                  g) > 0)
            g->meta_dirty = true;
    }
    nf_trend_merger_stats_t ms;
    nf_trend_merger_stats(g->m, &ms);
    nf_log(NF_LOG_INFO, "trending", "merger restored", NF_LI("panes", (int64_t)x.panes),
           NF_LI("scanned", (int64_t)x.scanned), NF_LI("done_end", ms.done_end), NF_LEND);
}

static void merger_fini(nf_shard_t *sh, void *self);

static int merger_init(nf_shard_t *sh, void *ctx, void **self, char *err, size_t errlen)
{
    nf_analytics_t *an = ctx;
    if (nf_shard_index(sh) != 0)
        return 0;
    unsigned ncounters = an->trend_partitions ? an->trend_partitions : 1;
    merger_t *g = calloc(1, sizeof *g);
    if (!g || !(g->m = nf_trend_merger_new(&an->trend, ncounters))) {
        free(g);
        snprintf(err, errlen,
                 "cannot create the trending merger of %u counters: out of memory or trending "
                 "options it cannot use",
                 ncounters);
        return -1;
    }
    g->an = an;
    g->sh = sh;
    g->ncounters = ncounters;
    nf_jw_init(&g->jw);
    g->active = !an->panes_topic; /* panes_topic: once trending-panes is assigned here */
    if (an->store && g->active)
        merger_restore(g);
    int r = an->epoch ? nf_epoch_participant_add(an->epoch, sh, &merger_part, g) : 0;
    if (r != 0) {
        snprintf(err, errlen, "the trending merger cannot take part in the epochs: %s",
                 strerror(-r));
        merger_fini(sh, g);
        return -1;
    }
    *self = g;
    return 0;
}

static void merger_fini(nf_shard_t *sh, void *self)
{
    merger_t *g = self;
    (void)sh;
    if (!g)
        return;
    for (size_t i = 0; i < g->nadded; i++)
        free(g->added[i].blob);
    free(g->added);
    free(g->dropped);
    free(g->legacy);
    free(g->legacy_len);
    nf_trend_merger_free(g->m);
    nf_jw_free(&g->jw);
    free(g->last);
    free(g);
}

static void merger_drop(void *ctx, const nf_msg_t *m)
{
    (void)ctx;
    if (m->kind == NF_MSG_PANE)
        free(m->body.ptr);
}

static const nf_actor_ops_t merger_ops = {.name = "trending",
                                          .init = merger_init,
                                          .handle = merger_handle,
                                          .fini = merger_fini,
                                          .drop = merger_drop};

/* ================================================================ registration */

/* The metrics of the stories stage: cluster assignments, topic vectors, the cluster index. */
static void story_metrics(nf_analytics_t *an)
{
    static const char *const actions[4] = {"new", "joined", "merged", "duplicate"};
    for (int i = 0; i < 4; i++) {
        char labels[32];
        snprintf(labels, sizeof labels, "action=\"%s\"", actions[i]);
        nf_metrics_counter("newsflow_cluster_assignments_total",
                           "Articles assigned to story clusters, by action.", labels, 0,
                           &an->m.clusters[i]);
    }
    nf_metrics_counter("newsflow_topic_broadcasts_total",
                       "New articles' topic vectors sent to every shard.", NULL, 0,
                       &an->m.topics_broadcast);
    nf_metrics_counter("newsflow_articles_unclassified_total",
                       "New articles no taxonomy topic matched (empty topic vector).", NULL, 0,
                       &an->m.unclassified);
    nf_metrics_counter("newsflow_articles_unsigned_total",
                       "New articles not clustered (no MinHash signature).", NULL, 0,
                       &an->m.unsigned_articles);
    nf_metrics_gauge("newsflow_analytics_held_messages",
                     "Topic broadcasts and cluster hand-offs waiting for ring space.", NULL, 0,
                     &an->m.held_messages);
    nf_metrics_gauge("newsflow_cluster_index_bytes",
                     "Memory the story-cluster index holds (signatures, buckets, parents: "
                     "newsflow_state_allocated_bytes of their three kinds).",
                     NULL, 0, &an->m.index_bytes);
    nf_kstate_gauges_register(&an->m.sig_mem, NF_KIND_CLUSTER_SIG);
    nf_kstate_gauges_register(&an->m.bucket_mem, NF_KIND_CLUSTER_BUCKET);
    nf_kstate_gauges_register(&an->m.parent_mem, NF_KIND_CLUSTER_PARENT);
    nf_kstate_gauges_register(&an->m.story_mem, NF_KIND_STORY);
    nf_metrics_gauge("newsflow_cluster_index_entries",
                     "Entries of the story-cluster index in memory.", NULL, 0,
                     &an->m.index_entries);
    nf_metrics_counter("newsflow_cluster_index_loads_total",
                       "Entries of the story-cluster index read back from the store (cold).", NULL,
                       0, &an->m.index_loads);
    nf_metrics_counter("newsflow_story_sizes_lost_total",
                       "Story clusters merged beyond the ones a result lists (more than 8 "
                       "at once): their sizes are missing from the merged story's.",
                       NULL, 0, &an->m.story_sizes_lost);
    nf_metrics_counter("newsflow_cluster_index_evictions_total",
                       "Entries of the story-cluster index evicted from memory to keep "
                       "within state.budget_mb (they stay on the store).",
                       NULL, 0, &an->m.index_evictions);
}

/* The metrics of the read events' stages: trending, interest, their keyed state. */
static void trend_metrics(nf_analytics_t *an)
{
    nf_metrics_counter("newsflow_read_event_duplicates_total",
                       "Read events whose event_id was seen within the TTL (dropped).", NULL, 0,
                       &an->m.event_duplicates);
    nf_metrics_counter("newsflow_trending_late_events_total",
                       "Read events behind their partition's watermark (not in any window).", NULL,
                       0, &an->m.late_events);
    nf_metrics_counter("newsflow_trending_old_events_total",
                       "Read events older than trending.window_s + lateness_ms when they "
                       "were written to Kafka: left out of trending (interest takes them; "
                       "trending.backfill counts them).",
                       NULL, 0, &an->m.old_events);
    nf_metrics_counter("newsflow_trending_state_repairs_total",
                       "Trending event times and watermarks restored beyond the wall clock + "
                       "trending.max_future_ms (saved by an older version) and repaired.",
                       NULL, 0, &an->m.trend_repairs);
    nf_metrics_counter("newsflow_trending_legacy_dropped_total",
                       "Trending blobs of the per-shard layout of earlier versions dropped "
                       "at start (they cannot be split by partition).",
                       NULL, 0, &an->m.trend_legacy_dropped);
    nf_metrics_counter("newsflow_trending_counted_events_total",
                       "Read events counted into a trending pane.", NULL, 0, &an->m.counted_events);
    nf_metrics_counter("newsflow_trending_windows_total", "Ranked trending lists emitted.", NULL, 0,
                       &an->m.windows);
    nf_metrics_counter("newsflow_trending_panes_total",
                       "Final panes merged by the trending merger.", NULL, 0, &an->m.panes);
    nf_metrics_counter("newsflow_interest_duplicates_total",
                       "Reads of an article already counted for (user, session).", NULL, 0,
                       &an->m.interest_duplicates);
    nf_metrics_counter("newsflow_interest_unknown_articles_total",
                       "Reads of articles without a known topic vector (skipped).", NULL, 0,
                       &an->m.interest_unknown);
    nf_metrics_counter("newsflow_state_errors_total", "Keyed state reads or writes that failed.",
                       "kind=\"analytics\"", 0, &an->m.state_errors);
    nf_metrics_gauge(
        "newsflow_trending_watermark_lag_seconds",
        "Wall clock minus the lowest trending watermark of each shard's active partitions, "
        "seconds, summed over shards.",
        NULL, 0, &an->m.trend_watermark_lag);
    nf_metrics_gauge("newsflow_trending_open_panes",
                     "Panes the shards' trending counters hold (not final yet): grows with the "
                     "event-time skew between partitions.",
                     NULL, 0, &an->m.trend_open_panes);
    nf_metrics_gauge("newsflow_trending_shard_bytes", "Memory of the shards' trending counters.",
                     NULL, 0, &an->m.trend_bytes);
    nf_metrics_gauge(
        "newsflow_trending_merger_panes",
        "Panes the trending merger holds, each the sum of the partitions' summaries (at most "
        "window/slide + a few).",
        NULL, 0, &an->m.merger_panes);
    nf_metrics_gauge("newsflow_trending_merger_bytes", "Memory of the trending merger.", NULL, 0,
                     &an->m.merger_bytes);
}

int nf_analytics_register(nf_runtime_t *rt, nf_analytics_t *an, char *err, size_t errlen)
{
    if (an->minhash.hashes != an->cluster.hashes || an->minhash.bands != an->cluster.bands ||
        an->minhash.rows != an->cluster.rows) {
        snprintf(err, errlen, "MinHash and cluster options disagree on hashes/bands/rows");
        return -EINVAL;
    }
    if (nf_trend_opts_check(&an->trend, err, errlen) != 0)
        return -EINVAL;
    if (!(an->mh = nf_minhash_new(&an->minhash, err, errlen)))
        return -EINVAL;
    for (unsigned i = 0; i <= NF_TOPICS_MAX; i++)
        an->topic_names[i] = an->taxonomy ? nf_classify_topic_name(an->taxonomy, i) : NULL;
    story_metrics(an);
    trend_metrics(an);
    an->stories_actor = nf_runtime_register(rt, &stories_ops, an);
    if (an->stories_actor < 0)
        return an->stories_actor;
    an->trend_actor = nf_runtime_register(rt, &merger_ops, an);
    return an->trend_actor < 0 ? an->trend_actor : 0;
}

void nf_analytics_free(nf_analytics_t *an)
{
    nf_minhash_free(an->mh);
    an->mh = NULL;
}
