/* analytics.c — the analytics wiring (analytics.h): options and their defaults, the state's
 * blob helpers the actors share, and the registration of the two actors, "stories" (stories.c)
 * and "trending" (trending.c). The per-event halves live with their inputs: classify and
 * MinHash in crawl.c, the topic broadcast and cluster hand-off in dedup.c, event-id dedup and
 * the trending counter in kafka_in.c, the interest engine in reads.c. */
#include "actors/analytics.h"
#include "actors/analytics_int.h"
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
    an->trend_by_story = true;
    an->breaking_opts = (nf_breaking_opts_t){
        .multiple = 3.0, .min_reads = 20, .min_peers = 2, .cooldown_ms = 6 * 3600 * 1000};
    an->stories_actor = an->trend_actor = an->interest_actor = -1;
}

/* ================================================================ registration */

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
    nf_stories_metrics(an);
    nf_trending_metrics(an);
    an->stories_actor = nf_runtime_register(rt, &nf_stories_ops, an);
    if (an->stories_actor < 0)
        return an->stories_actor;
    an->trend_actor = nf_runtime_register(rt, &nf_trending_ops, an);
    return an->trend_actor < 0 ? an->trend_actor : 0;
}

void nf_analytics_free(nf_analytics_t *an)
{
    nf_minhash_free(an->mh);
    an->mh = NULL;
}
