/* dedup.c — the dedup actor (ingest.h): first sighting of an article_id wins.
 *
 * Keyed: an article reaches the shard that owns nf_route(id.hi), so each id lives in exactly one
 * shard's set and "one article per URL" needs no coordination. The set is in memory today; the
 * durable state issue moves it into the keyed-state layer (RocksDB, TTL). This actor also owns
 * the shard's periodic sink flush. */
#include "actors/article_msg.h"
#include "actors/ingest.h"
#include "runtime/log.h"

#include <stdlib.h>

typedef struct {
    nf_ingest_t *in;
    nf_shard_t *sh;
    nf_idset_t seen;
    nf_timer_t flush;
} dedup_t;

static void flush_sink(dedup_t *d)
{
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
    nf_gauge_set(d->in->m.dedup_keys, (int64_t)nf_idset_count(&d->seen));
    nf_gauge_set(d->in->m.dedup_bytes, (int64_t)nf_idset_bytes(&d->seen));
    (void)sh;
    (void)t;
}

static void *dedup_init(nf_shard_t *sh, void *ctx)
{
    dedup_t *d = calloc(1, sizeof *d);
    if (!d)
        abort(); /* start-up: nothing sensible to do without memory */
    d->in = ctx;
    d->sh = sh;
    if (nf_idset_init(&d->seen, 1 << 16) != 0)
        abort();
    nf_timer_init(&d->flush, on_flush, d);
    uint64_t period = (uint64_t)d->in->o.sink_flush_ms * 1000000ull;
    nf_timer_arm(sh, &d->flush, nf_now_ns() + period, period);
    return d;
}

static void dedup_handle(nf_shard_t *sh, void *self, const nf_msg_t *m)
{
    dedup_t *d = self;
    nf_article_blob_t *b = m->body.ptr;
    uint64_t first_seen = 0;
    int r = nf_idset_insert(&d->seen, b->id, (uint64_t)b->ingested_ms, &first_seen);
    if (r == 1) {
        nf_counter_inc(d->in->m.dedup_new);
        if (nf_sink_emit(d->in->sink, nf_shard_index(sh), NF_TOPIC_ARTICLES, b->article_id, b->json,
                         b->len) != 0)
            nf_counter_inc(d->in->m.sink_errors);
    } else if (r == 0) {
        nf_counter_inc(d->in->m.dedup_duplicate);
        if (nf_log_enabled(NF_LOG_DEBUG))
            nf_log(NF_LOG_DEBUG, "dedup", "article.duplicate", NF_LS("article_id", b->article_id),
                   NF_LI("first_seen_ms", (int64_t)first_seen), NF_LEND);
    } else {
        /* Out of memory growing the set: the article is not lost silently. */
        nf_log(NF_LOG_ERROR, "dedup", "cannot record article (out of memory); dropped",
               NF_LS("article_id", b->article_id), NF_LEND);
    }
    free(b);
}

static void dedup_stop(nf_shard_t *sh, void *self)
{
    dedup_t *d = self;
    nf_timer_cancel(sh, &d->flush);
    flush_sink(d);
}

static void dedup_fini(nf_shard_t *sh, void *self)
{
    dedup_t *d = self;
    nf_timer_cancel(sh, &d->flush);
    flush_sink(d);
    nf_idset_free(&d->seen);
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
                                     .fini = dedup_fini,
                                     .drop = dedup_drop};
