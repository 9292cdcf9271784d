/* stories.c — the "stories" actor (analytics.h): on the cluster shard, each new article's
 * MinHash signature into the story index (engine/cluster.h), one story-clusters record per
 * assignment, the index's state in epochs. */
#include "actors/analytics_int.h"
#include "actors/serve_state.h"
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

/* ================================================================ stories (cluster) */

typedef struct stories {
    nf_analytics_t *an;
    nf_shard_t *sh;
    nf_cluster_t *eng;
    nf_kstate_t *sizes; /* story cluster id -> its record (serve_state.h, NF_KIND_STORY) */
    /* The stories' members and merges since the last cut (serve_state.h; written at the cut:
     * nothing here reads them back). NULL without epochs. */
    nf_store_batch_t *serve;
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

/* A story's record as stored (a story without one counts its root alone, source unknown). 0 or
 * -EIO. */
static int story_get(stories_t *s, nf_id128_t id, uint64_t now, nf_serve_story_t *st)
{
    uint32_t len = 0;
    int err = 0;
    const unsigned char *v = nf_kstate_get(s->sizes, story_kg(s, id), id, now, &len, &err);
    if (!v || nf_serve_story_decode(v, len, st) != 0)
        nf_serve_story_init(st);
    return err;
}

/* The stories after a clustering result (serve_state.h): the record of the story the article is
 * in now (its size and sources, the merged ones' folded in and deleted), the article as a member
 * and each merge as a link. 0, -EIO or -ENOMEM. */
static int story_update(stories_t *s, const nf_cluster_msg_t *c, const nf_cluster_result_t *r)
{
    if (r->action == NF_CLUSTER_DUPLICATE)
        return 0;
    uint64_t now = (uint64_t)c->ingested_ms;
    uint64_t ttl = s->an->cluster.ttl_ms;
    int64_t expires = ttl ? c->ingested_ms + (int64_t)ttl : 0; /* 0: never (store.h) */
    static _Thread_local nf_serve_story_t st, part;            /* 528 bytes each: off the stack */
    int e = 0;
    /* The story it joins (or merges into) counts as it was, plus the article; when the article
     * is itself the merged story's earliest (it came late), that story is new: just the
     * article, plus what it merges. */
    bool own = r->cluster_id.hi == c->id.hi && r->cluster_id.lo == c->id.lo;
    nf_serve_story_init(&st);
    if (r->action != NF_CLUSTER_NEW && !own) {
        e = story_get(s, r->cluster_id, now, &st);
        st.size++; /* the article */
    }
    nf_serve_story_add_source(&st, c->source);
    nf_id128_t id = r->action == NF_CLUSTER_NEW ? c->id : r->cluster_id;
    for (unsigned i = 0; e == 0 && r->action == NF_CLUSTER_MERGED && i < r->merged_count; i++) {
        nf_id128_t m = r->merged_from[i];
        e = story_get(s, m, now, &part);
        if (e == 0) {
            st.size += part.size;
            nf_serve_story_merge(&st, &part);
            e = nf_kstate_delete(s->sizes, story_kg(s, m), m);
        }
        if (e == 0 && s->serve)
            nf_serve_put_child(s->serve, story_kg(s, id), id, m, expires);
    }
    if (r->merged_more)
        nf_counter_add(s->an->m.story_sizes_lost, r->merged_more);
    if (e == 0 && s->serve)
        nf_serve_put_member(s->serve, story_kg(s, id), id, c->published_ms, c->id, expires);
    unsigned char v[8 + 8 * NF_SERVE_STORY_SOURCES_MAX];
    size_t len = nf_serve_story_encode(&st, v);
    return e ? e : nf_kstate_put(s->sizes, story_kg(s, id), id, v, len, now);
}

/* The named event cluster.assigned (sampled: log.sample_every, or its trace) and, when the
 * article's trace is sampled, its cluster span (a child of the fetch, from t0: before the add). */
static void cluster_assigned(const nf_cluster_msg_t *c, const nf_cluster_result_t *r, int64_t t0)
{
    static const char *const actions[4] = {"new", "joined", "merged", "duplicate"};
    static _Thread_local nf_log_sampler_t sampler;
    bool logged = nf_log_enabled(NF_LOG_INFO) && nf_log_sampled(&sampler, 1, c->trace.sampled);
    if (!c->trace.sampled && !logged)
        return;
    const char *action = (unsigned)r->action < 4 ? actions[r->action] : "?";
    char aid[33], cid[33], tid[33];
    nf_cluster_id_hex(c->id, aid);
    nf_cluster_id_hex(r->cluster_id, cid);
    if (c->trace.sampled) {
        nf_span_t sp;
        nf_span_child(&sp, "cluster", &c->trace, NF_SPAN_INTERNAL);
        sp.start_ns = t0;
        nf_span_str(&sp, "newsflow.article_id", aid);
        nf_span_str(&sp, "newsflow.cluster_id", cid);
        nf_span_str(&sp, "newsflow.action", action);
        nf_span_end(&sp, NULL);
        nf_span_export(&sp, false);
    }
    if (!logged)
        return;
    nf_trace_id_hex(&c->trace, tid);
    nf_log(NF_LOG_INFO, "cluster", "cluster.assigned", NF_LS("article_id", aid),
           NF_LS("cluster_id", cid), NF_LS("action", action), NF_LF("similarity", r->similarity),
           NF_LS("trace_id", tid), NF_LEND);
}

static void stories_handle(nf_shard_t *sh, void *self, const nf_msg_t *m)
{
    stories_t *s = self;
    nf_cluster_msg_t *c = m->body.ptr;
    nf_cluster_result_t r;
    int64_t t0 = c->trace.sampled ? nf_trace_now_ns() : 0;
    int rc = nf_cluster_add(s->eng, c->id, c->ingested_ms, c->sig, &r);
    if (rc == 0 && s->sizes)
        rc = story_update(s, c, &r);
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
    cluster_assigned(c, &r, t0);
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
    if (s->serve)
        nf_store_batch_move(b, s->serve);
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
    if (s->an->store && s->an->epoch && !s->serve && !(s->serve = nf_store_batch_new()))
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
    nf_store_batch_free(s->serve);
    nf_jw_free(&s->jw);
    free(s);
}

const nf_actor_ops_t nf_stories_ops = {.name = "stories",
                                       .init = stories_init,
                                       .handle = stories_handle,
                                       .stop = stories_stop,
                                       .fini = stories_fini,
                                       .drop = free_body};

/* The metrics of the stories stage: cluster assignments, topic vectors, the cluster index. */
void nf_stories_metrics(nf_analytics_t *an)
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
