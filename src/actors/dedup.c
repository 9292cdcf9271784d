/* dedup.c — the dedup actor (ingest.h): first sighting of an article_id wins.
 *
 * Keyed: an article reaches the shard that owns nf_route(id.hi), so each id lives in exactly one
 * shard's ArticleKey state and "one article per URL" needs no coordination. ArticleKey is keyed
 * state (state/kstate.h, kind NF_KIND_ARTICLE_KEY, key group = id.hi % 256, value = first-seen
 * ms): the insert of a new article and its output belong to the same epoch, so after a crash
 * either both happened or neither (the next crawl then emits it once). Without an epoch (tests
 * of ingestion alone) outputs go straight to the sink, flushed by this actor's timer. */
#include "actors/analytics.h"
#include "actors/article_msg.h"
#include "actors/ingest.h"
#include "actors/ingest_latency.h"
#include "actors/serve_state.h"
#include "runtime/log.h"
#include "state/changelog.h"
#include "state/kstate.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    nf_ingest_t *in;
    nf_shard_t *sh;
    nf_kstate_t *seen;
    nf_kstate_t *topics; /* analytics: article_id -> topic vector (the durable copy) */
    nf_outbox_t ob;      /* topic broadcasts and cluster messages a full ring refused */
    /* The query API's entries of this epoch's new articles (serve_state.h), written into the
     * epoch's batch at the cut; NULL without epochs or analytics. */
    nf_store_batch_t *serve;
    int64_t last_cut_ms; /* the search log's order (serve_state.h): never behind the last cut */
    nf_ingest_latency_t *lat; /* new articles until their epoch commits (with epochs only) */
    nf_timer_t flush;
} dedup_t;

/* The key group of an article's state: the job's global one in a consumer group (the state
 * belongs to the one-partition topic the articles come through: ingest.h), else id.hi % 256. */
static uint16_t key_group(const dedup_t *d, nf_id128_t id)
{
    return d->in->in_partitions ? (uint16_t)NF_CHANGELOG_GLOBAL_KG : (uint16_t)(id.hi % 256);
}

/* A new article's analytics (analytics.h): its topic vector into state and to every shard's
 * interest engine, its signature to the cluster shard. 0, or -ENOMEM (the caller stops the job:
 * the article is emitted in this epoch, its analytics must be too). */
static int analytics_new_article(dedup_t *d, const nf_article_blob_t *b)
{
    nf_analytics_t *an = d->in->an;
    nf_runtime_t *rt = nf_shard_runtime(d->sh);
    unsigned n = nf_runtime_shard_count(rt);
    if (an->interest_actor >= 0) {
        unsigned char enc[NF_TOPICS_ENC_MAX];
        int len = nf_interest_topics_encode(&b->topics, enc, sizeof enc);
        if (len < 0 || nf_kstate_put(d->topics, key_group(d, b->id), b->id, enc, (uint32_t)len,
                                     (uint64_t)b->ingested_ms) != 0)
            return -ENOMEM;
        for (unsigned dst = 0; dst < n; dst++) {
            nf_topics_msg_t *t = malloc(sizeof *t);
            if (!t)
                return -ENOMEM;
            t->id = b->id;
            t->vec = b->topics;
            nf_msg_t m = {.actor = (uint16_t)an->interest_actor, .kind = NF_MSG_TOPICS};
            m.body.ptr = t;
            if (nf_outbox_send(d->sh, &d->ob, dst, &m) != 0) {
                free(t);
                return -ENOMEM;
            }
        }
        nf_counter_inc(an->m.topics_broadcast);
        if (b->topics.n == 0)
            nf_counter_inc(an->m.unclassified);
    }
    if (b->nsig && an->stories_actor >= 0) {
        nf_cluster_msg_t *c = malloc(sizeof *c + b->nsig * sizeof(uint32_t));
        if (!c)
            return -ENOMEM;
        c->id = b->id;
        c->ingested_ms = b->ingested_ms;
        nf_serve_article_story(b, &c->published_ms, &c->source);
        c->trace = b->trace;
        memcpy(c->sig, b->sig, b->nsig * sizeof(uint32_t));
        nf_msg_t m = {.actor = (uint16_t)an->stories_actor, .kind = NF_MSG_CLUSTER};
        m.body.ptr = c;
        if (nf_outbox_send(d->sh, &d->ob, an->cluster_shard % n, &m) != 0) {
            free(c);
            return -ENOMEM;
        }
    } else if (!b->nsig) {
        nf_counter_inc(an->m.unsigned_articles);
    }
    nf_gauge_set(an->m.held_messages, (int64_t)nf_outbox_held(&d->ob));
    return 0;
}

static void flush_sink(dedup_t *d)
{
    if (d->in->epoch || !d->in->sink)
        return; /* with an epoch, outputs leave at commit (the coordinator owns the sink) */
    int r = nf_sink_flush(d->in->sink, nf_shard_index(d->sh));
    if (r != 0) {
        nf_counter_inc(d->in->m.sink_errors);
        nf_log(NF_LOG_ERROR, "sink", "write failed; records kept for the next attempt",
               NF_LI("errno", -r), NF_LEND);
    }
}

static void on_flush(nf_shard_t *sh, nf_timer_t *t, void *arg)
{
    dedup_t *d = arg;
    flush_sink(d);
    nf_kstate_stats_t st, tt;
    nf_kstate_stats(d->seen, &st);
    nf_gauge_set(d->in->m.dedup_keys, (int64_t)st.entries);
    nf_gauge_set(d->in->m.dedup_bytes, (int64_t)st.bytes);
    nf_kstate_gauges_set(&d->in->m.seen_mem, &st);
    if (d->topics)
        nf_kstate_stats(d->topics, &tt);
    nf_kstate_gauges_set(&d->in->m.topics_mem, d->topics ? &tt : NULL);
    (void)sh;
    (void)t;
}

typedef struct {
    nf_store_batch_t *b;
    int64_t cut_ms;
} copy_t;

/* An entry of the epoch's serving batch into the epoch's; each new article's metadata also
 * gets its search log entry (serve_state.h). */
static int copy_entry(void *arg, bool del, nf_state_kind_t kind, const void *key, size_t klen,
                      const void *val, size_t vlen)
{
    copy_t *c = arg;
    if (del) {
        nf_store_batch_delete(c->b, kind, key, klen);
        return 0;
    }
    nf_store_batch_put(c->b, kind, key, klen, val, vlen);
    if (kind == NF_KIND_ARTICLE_META && klen == NF_SERVE_META_KEY_LEN && vlen >= 8)
        nf_serve_put_search(c->b, c->cut_ms, key, val);
    return 0;
}

static void dedup_snapshot(nf_shard_t *sh, void *self, nf_store_batch_t *b, uint64_t epoch)
{
    dedup_t *d = self;
    if (d->lat)
        nf_ingest_latency_cut(d->lat, epoch);
    nf_kstate_snapshot(d->seen, b, epoch);
    if (d->topics)
        nf_kstate_snapshot(d->topics, b, epoch);
    if (d->serve) {
        if (b) {
            int64_t now = nf_wall_ms();
            d->last_cut_ms = now > d->last_cut_ms ? now : d->last_cut_ms;
            copy_t c = {.b = b, .cut_ms = d->last_cut_ms};
            nf_store_batch_foreach(d->serve, copy_entry, &c);
        }
        nf_store_batch_clear(d->serve);
    }
    (void)sh;
}

static void dedup_committed(nf_shard_t *sh, void *self, uint64_t epoch)
{
    dedup_t *d = self;
    if (d->lat)
        nf_ingest_latency_committed(d->lat, epoch, nf_wall_ms());
    nf_kstate_committed(d->seen, epoch);
    if (d->topics)
        nf_kstate_committed(d->topics, epoch);
    (void)sh;
}

/* A held broadcast is neither sent nor handled: the cut waits for it. */
static bool dedup_busy(nf_shard_t *sh, void *self)
{
    return nf_outbox_drain(sh, &((dedup_t *)self)->ob) != 0;
}

static bool is_global(uint16_t kg, void *ctx)
{
    (void)ctx;
    return kg == NF_CHANGELOG_GLOBAL_KG;
}

/* In a consumer group the articles' state follows the one-partition topic (ingest.h): when it
 * leaves this process (its last epoch committed) the memory copy goes; when it comes, the
 * store holds what the changelog restored and gets read it on demand. */
static void dedup_partitions(nf_shard_t *sh, void *self, nf_input_t in, const int32_t *parts,
                             size_t n, bool gained)
{
    dedup_t *d = self;
    (void)sh;
    (void)parts;
    if (in != NF_INPUT_TRENDING_PANES || !d->in->in_partitions || !n || gained)
        return;
    size_t kept = 0, dropped = nf_kstate_drop_groups(d->seen, is_global, NULL, &kept);
    if (d->topics)
        dropped += nf_kstate_drop_groups(d->topics, is_global, NULL, &kept);
    nf_log(kept ? NF_LOG_WARN : NF_LOG_DEBUG, "dedup",
           "article dedup moved to another process: its keys let go", NF_LI("dropped", dropped),
           NF_LI("kept_dirty", kept), NF_LEND);
}

static const nf_epoch_participant_t dedup_part = {.busy = dedup_busy,
                                                  .snapshot = dedup_snapshot,
                                                  .committed = dedup_committed,
                                                  .partitions = dedup_partitions};

/* The keyed state of dedup_init: NULL, or what could not be had. */
static const char *dedup_state(dedup_t *d)
{
    nf_kstate_opts_t o = {.kind = NF_KIND_ARTICLE_KEY,
                          .budget_bytes = d->in->budget_bytes,
                          .initial_capacity = 1 << 16};
    if (!(d->seen = nf_kstate_new(d->in->store, &o)))
        return "out of memory for the ArticleKey state";
    if (!d->in->an)
        return NULL;
    nf_kstate_opts_t t = {.kind = NF_KIND_ARTICLE_TOPICS,
                          .ttl_ms = d->in->an->topics_ttl_ms,
                          .budget_bytes = d->in->budget_bytes,
                          .initial_capacity = 1 << 12};
    if (!(d->topics = nf_kstate_new(d->in->store, &t)))
        return "out of memory for the article topics state";
    if (d->in->epoch && d->in->store && !(d->serve = nf_store_batch_new()))
        return "out of memory for the served articles' batch";
    if (d->in->epoch && !(d->lat = nf_ingest_latency_new(&d->in->m.latency, 1 << 16)))
        return "out of memory for the ingest latency's articles";
    return NULL;
}

static void dedup_fini(nf_shard_t *sh, void *self);

static int dedup_init(nf_shard_t *sh, void *ctx, void **self, char *err, size_t errlen)
{
    dedup_t *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, errlen, "out of memory for the dedup stage");
        return -1;
    }
    d->in = ctx;
    d->sh = sh;
    nf_timer_init(&d->flush, on_flush, d);
    const char *why = dedup_state(d);
    int r = 0;
    if (why)
        snprintf(err, errlen, "%s", why);
    else if (d->in->epoch && (r = nf_epoch_participant_add(d->in->epoch, sh, &dedup_part, d)) != 0)
        snprintf(err, errlen, "dedup cannot take part in the epochs: %s", strerror(-r));
    if (why || r != 0) {
        dedup_fini(sh, d);
        return -1;
    }
    uint64_t period = (uint64_t)d->in->o.sink_flush_ms * 1000000ull;
    nf_timer_arm(sh, &d->flush, nf_now_ns() + period, period);
    *self = d;
    return 0;
}

/* A new article: its dedup span (when its fetch's trace is sampled) waits for the commit's, and
 * the named event article.ingested is logged (sampled: log.sample_every, or its trace). */
static void article_ingested(dedup_t *d, const nf_article_blob_t *b, nf_span_t *sp)
{
    static _Thread_local nf_log_sampler_t sampler;
    if (sp) {
        nf_span_str(sp, "newsflow.result", "new");
        nf_span_end(sp, NULL);
        nf_span_export(sp, false);
        nf_trace_ctx_t ctx = nf_span_ctx(sp);
        if (d->lat)
            nf_ingest_latency_trace(d->lat, &ctx, sp->end_ns, b->article_id);
    }
    if (!nf_log_enabled(NF_LOG_INFO) || !nf_log_sampled(&sampler, 1, b->trace.sampled))
        return;
    char tid[33];
    nf_trace_id_hex(&b->trace, tid);
    nf_log(NF_LOG_INFO, "dedup", "article.ingested", NF_LS("article_id", b->article_id),
           NF_LS("trace_id", tid), NF_LI("fetched_ms", b->ingested_ms),
           NF_LI("published_ms", b->published_ms ? b->published_ms : INT64_MIN), NF_LEND);
}

static void dedup_handle(nf_shard_t *sh, void *self, const nf_msg_t *m)
{
    dedup_t *d = self;
    nf_article_blob_t *b = m->body.ptr;
    nf_span_t sp;
    bool span = b->trace.sampled;
    if (span) {
        nf_span_child(&sp, "dedup", &b->trace, NF_SPAN_INTERNAL);
        nf_span_str(&sp, "newsflow.article_id", b->article_id);
    }
    uint64_t first_seen = 0;
    uint16_t kg = key_group(d, b->id);
    uint32_t len = 0;
    int err = 0, r;
    const void *v = nf_kstate_get(d->seen, kg, b->id, (uint64_t)b->ingested_ms, &len, &err);
    if (err != 0) {
        r = err;
    } else if (v) {
        if (len == sizeof first_seen)
            memcpy(&first_seen, v, sizeof first_seen);
        r = 0;
    } else {
        first_seen = (uint64_t)b->ingested_ms;
        r = nf_kstate_put(d->seen, kg, b->id, &first_seen, sizeof first_seen,
                          (uint64_t)b->ingested_ms);
        r = r == 0 ? 1 : r;
    }
    if (r == 1) {
        nf_counter_inc(d->in->m.dedup_new);
        if (d->lat)
            nf_ingest_latency_add(d->lat, b->ingested_ms, b->published_ms);
        article_ingested(d, b, span ? &sp : NULL);
        if (nf_ingest_emit(d->in, nf_shard_index(sh), NF_TOPIC_ARTICLES, b->article_id, b->json,
                           b->len) != 0)
            nf_counter_inc(d->in->m.sink_errors);
        if (d->in->an &&
            (analytics_new_article(d, b) != 0 ||
             (d->serve && nf_serve_put_article(d->serve, kg, b, d->in->an->topics_ttl_ms) != 0))) {
            nf_log(NF_LOG_ERROR, "dedup", "out of memory for an article's analytics; stopping",
                   NF_LS("article_id", b->article_id), NF_LEND);
            nf_runtime_fail(nf_shard_runtime(sh));
        }
        if (d->in->epoch &&
            (nf_kstate_over_budget(d->seen) || (d->topics && nf_kstate_over_budget(d->topics))))
            nf_epoch_request(d->in->epoch);
    } else if (r == 0) {
        nf_counter_inc(d->in->m.dedup_duplicate);
        if (span) {
            nf_span_str(&sp, "newsflow.result", "duplicate");
            nf_span_end(&sp, NULL);
            nf_span_export(&sp, false);
        }
        if (nf_log_enabled(NF_LOG_DEBUG)) {
            char tid[33];
            nf_trace_id_hex(&b->trace, tid);
            nf_log(NF_LOG_DEBUG, "dedup", "article.duplicate", NF_LS("article_id", b->article_id),
                   NF_LS("trace_id", tid), NF_LI("first_seen_ms", (int64_t)first_seen), NF_LEND);
        }
    } else {
        /* The state cannot be read or grown: emitting could duplicate, dropping would lose.
         * Stop the job; the epoch is not committed, so the article is crawled again. */
        nf_log(NF_LOG_ERROR, "dedup", "ArticleKey state failed; stopping the job",
               NF_LS("article_id", b->article_id), NF_LI("errno", -r), NF_LEND);
        nf_runtime_fail(nf_shard_runtime(sh));
    }
    free(b);
}

static void dedup_stop(nf_shard_t *sh, void *self)
{
    dedup_t *d = self;
    nf_timer_cancel(sh, &d->flush);
    flush_sink(d);
    nf_outbox_drain(sh, &d->ob);
}

static void dedup_resume(nf_shard_t *sh, void *self)
{
    dedup_t *d = self;
    nf_outbox_drain(sh, &d->ob);
    if (d->in->an)
        nf_gauge_set(d->in->an->m.held_messages, (int64_t)nf_outbox_held(&d->ob));
}

static void free_body(void *ctx, const nf_msg_t *m)
{
    (void)ctx;
    free(m->body.ptr);
}

static void dedup_fini(nf_shard_t *sh, void *self)
{
    dedup_t *d = self;
    nf_timer_cancel(sh, &d->flush);
    flush_sink(d);
    nf_outbox_free(&d->ob, free_body, NULL); /* forced shutdown only: not committed */
    nf_kstate_free(d->seen);
    nf_kstate_free(d->topics);
    nf_store_batch_free(d->serve);
    nf_ingest_latency_free(d->lat);
    free(d);
}

static void dedup_drop(void *ctx, const nf_msg_t *m)
{
    (void)ctx;
    free(m->body.ptr);
}

const nf_actor_ops_t nf_dedup_ops = {.name = "dedup",
                                     .init = dedup_init,
                                     .handle = dedup_handle,
                                     .stop = dedup_stop,
                                     .resume = dedup_resume,
                                     .fini = dedup_fini,
                                     .drop = dedup_drop};
