/* reads.c — the interest-update actor (reads.h: "reads", one per shard, owning the
 * users that route to it): applies each batch of counted reads from kafka_in to the interest
 * engine (engine/interest.h), emits interest-updates (one per counted read, or one per user and
 * epoch with interest.coalesce), takes the topic vectors broadcast to it (NF_MSG_TOPICS), and is an
 * epoch participant for the engine's state: snapshot, committed, partitions gained and lost. */
#include "actors/reads.h"
#include "actors/analytics.h"
#include "actors/ingest.h"
#include "actors/reads_batch.h"
#include "actors/serve_state.h"
#include "engine/follows.h"
#include "engine/notify.h"
#include "feed/dates.h"
#include "runtime/jsonw.h"
#include "runtime/log.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rd {
    nf_reads_t *r;
    nf_analytics_t *an;
    nf_shard_t *sh;
    nf_interest_t *eng;
    nf_interest_keys_t keys; /* the topic names as JSON keys, rendered once */
    nf_reads_dedup_seen_t seen_seen;
    nf_jw_t jw;
    nf_timer_t gauges;
    /* interest.coalesce: the users updated since the last flush, user key -> (kg << 48 |
     * name_at << 16 | name_len), their ids in names */
    nf_idset_t pending;
    char *names;
    size_t names_len, names_cap;
    /* the readers' history entries of the events counted since the last cut (serve_state.h:
     * NF_KIND_READS), into the epoch's batch at the cut; NULL: no history (no epochs, no store,
     * or interest.history_ttl_s 0) */
    nf_store_batch_t *history;
    nf_follows_t *follows; /* the readers' followed and muted topics (engine/follows.h) */
    nf_notify_t *notify;   /* their breaking-news subscriptions (engine/notify.h) */
    /* windows of breaking stories being fanned out to the subscribers, oldest first (a slice a
     * turn: fanout) */
    struct run_q *runs, **runs_tail;
} rd_t;

typedef struct run_q {
    nf_notify_run_t *run;
    struct run_q *next;
} run_q_t;

/* The named event interest.updated: at 50k read events a second, 1 in 100 x log.sample_every
 * (docs/slo.md, "Log events"). Read events carry no trace. */
static void log_update(const char *user_id, const nf_interest_out_t *out)
{
    static _Thread_local nf_log_sampler_t sampler;
    if (!nf_log_enabled(NF_LOG_INFO) || !nf_log_sampled(&sampler, 100, false))
        return;
    char key[33];
    nf_id128_t uk = nf_interest_user_key(user_id);
    nf_id128_hex(uk, key);
    nf_log(NF_LOG_INFO, "interest", "interest.updated", NF_LS("user_key", key),
           NF_LI("version", (int64_t)out->version), NF_LI("topics", (int64_t)out->vec.n), NF_LEND);
}

static void emit_update(rd_t *d, const char *user_id, const nf_interest_out_t *out)
{
    nf_jw_t *w = &d->jw;
    nf_jw_reset(w);
    nf_interest_json_keys(out, user_id, &d->keys, w);
    if (w->failed || nf_analytics_emit(d->an, nf_shard_index(d->sh), NF_TOPIC_INTEREST_UPDATES,
                                       user_id, w->buf, w->len) != 0) {
        nf_log(NF_LOG_ERROR, "interest", "out of memory for outputs; stopping the job", NF_LEND);
        nf_runtime_fail(nf_shard_runtime(d->sh));
        return;
    }
    nf_counter_inc(d->r->m.updates);
    log_update(user_id, out);
}

/* One record per waiting user, its state as it is now (the latest of the updates it had since
 * the last flush), then the set is empty. At the cut (reads_snapshot) and when it is full. */
static void flush_pending(rd_t *d)
{
    const nf_idset_t *s = &d->pending;
    int64_t now = nf_wall_ms();
    char name[65536];
    for (size_t i = 0; s->slots && i <= s->mask + (s->has_zero ? 1 : 0); i++) {
        nf_id128_t key;
        uint64_t v;
        if (i <= s->mask) {
            key = s->slots[i].id;
            v = s->slots[i].value;
            if (!key.hi && !key.lo)
                continue;
        } else {
            key = (nf_id128_t){0, 0};
            v = s->zero_value;
        }
        uint16_t kg = (uint16_t)(v >> 48), len = (uint16_t)v;
        memcpy(name, d->names + ((v >> 16) & 0xffffffffu), len);
        name[len] = 0;
        nf_interest_out_t out;
        int rc = nf_interest_get_key(d->eng, kg, key, now, &out);
        if (rc != 1) {
            /* The user was updated moments ago: only a store that cannot be read lands here. */
            nf_counter_inc(d->r->m.state_errors);
            nf_log(NF_LOG_ERROR, "interest", "a coalesced user's state cannot be read; stopping",
                   NF_LS("user_id", name), NF_LI("rc", rc),
                   NF_LS("error", nf_interest_error(d->eng)), NF_LEND);
            nf_runtime_fail(nf_shard_runtime(d->sh));
            break;
        }
        emit_update(d, name, &out);
    }
    nf_idset_clear(&d->pending);
    d->names_len = 0;
}

/* Notes a user whose update is to be emitted at the next flush. false: out of memory. */
static bool note_pending(rd_t *d, const nf_interest_read_t *rd, const char *user_id)
{
    size_t len = strlen(user_id);
    if (len > UINT16_MAX)
        len = UINT16_MAX;
    if (!d->pending.slots && nf_idset_init(&d->pending, 4096) != 0)
        return false;
    if (nf_idset_get(&d->pending, rd->user, NULL))
        return true;
    if (d->names_len + len > d->names_cap) {
        size_t cap = d->names_cap ? d->names_cap * 2 : 1 << 16;
        while (cap < d->names_len + len)
            cap *= 2;
        char *n = realloc(d->names, cap);
        if (!n)
            return false;
        d->names = n;
        d->names_cap = cap;
    }
    memcpy(d->names + d->names_len, user_id, len);
    uint64_t v = (uint64_t)rd->kg << 48 | (uint64_t)d->names_len << 16 | len;
    d->names_len += len;
    if (nf_idset_insert(&d->pending, rd->user, v, NULL) < 0)
        return false;
    nf_counter_inc(d->r->m.coalesced);
    if (nf_idset_count(&d->pending) >= d->r->coalesce_max)
        flush_pending(d);
    return true;
}

/* The article's id as the event named it: a hex id travels as its 128 bits (reads_batch.h),
 * written back in lower case into hex; any other id is in the batch's text. */
static const char *article_text(const read_batch_t *b, const read_item_t *it, char hex[33])
{
    if (!it->rd.article_ok)
        return b->text + it->article_at;
    nf_id128_hex(it->rd.article, hex);
    return hex;
}

/* The counted event into the reader's history. */
static void put_history(rd_t *d, const read_batch_t *b, const read_item_t *it, uint64_t now_ms)
{
    char hex[33];
    const char *aid = article_text(b, it, hex);
    nf_serve_history_put(d->history, &it->rd, aid, strlen(aid),
                         (int64_t)now_ms + (int64_t)d->an->history_ttl_ms);
}

/* A settings event (kafka_in put its topic's index in rd.article.hi, or a source's id at
 * article_at): the reader's follows and mutes, or their subscriptions. */
static void reads_setting(rd_t *d, const read_batch_t *b, const read_item_t *it)
{
    const char *user_id = b->text + it->user_at;
    unsigned topic = (unsigned)it->rd.article.hi;
    int kind = it->rd.kind, rc;
    bool subs = kind == NF_READ_KIND_SUBSCRIBE || kind == NF_READ_KIND_UNSUBSCRIBE;
    if (subs) {
        rc = nf_notify_apply(d->notify, it->rd.kg, it->rd.user, user_id, strlen(user_id),
                             kind == NF_READ_KIND_SUBSCRIBE, topic, it->rd.ts_ms);
    } else if (nf_read_kind_is_source(kind)) { /* kafka_in put its source_id at article_at */
        _Static_assert(NF_EVENT_FIELD_MAX <= NF_FOLLOWS_SOURCE_MAX,
                       "a source the decoder takes is one the settings keep: never -EINVAL");
        const char *src = b->text + it->article_at;
        nf_follows_val_t v;
        bool evicted = false;
        rc = nf_follows_apply_source(d->follows, it->rd.kg, it->rd.user, kind, src, strlen(src),
                                     it->rd.ts_ms, &v, &evicted);
        if (evicted)
            nf_counter_inc(d->r->m.muted_sources_evicted);
    } else {
        nf_follows_val_t v;
        rc = nf_follows_apply(d->follows, it->rd.kg, it->rd.user, kind, topic, it->rd.ts_ms, &v);
    }
    if (rc < 0) { /* a user id is at most NF_EVENT_FIELD_MAX bytes: never -EINVAL */
        nf_counter_inc(d->r->m.state_errors);
        nf_log(NF_LOG_ERROR, "interest", "reader settings state failed; stopping the job",
               NF_LS("user_id", user_id), NF_LI("errno", -rc),
               NF_LS("error", subs ? nf_notify_error(d->notify) : nf_follows_error(d->follows)),
               NF_LEND);
        nf_runtime_fail(nf_shard_runtime(d->sh));
        return;
    }
    nf_counter_inc(d->r->m.settings[kind - NF_READ_KIND_FOLLOW]);
    if (d->r->epoch && (nf_follows_over_budget(d->follows) || nf_notify_over_budget(d->notify)))
        nf_epoch_request(d->r->epoch);
}

/* One notification (docs/topics.md "notifications"), keyed by the reader. */
static int emit_notification(void *arg, const char *user_id, size_t ulen,
                             const nf_notify_story_t *s, int64_t end_ms)
{
    rd_t *d = arg;
    char story[33], lead[33], we[40];
    nf_id128_hex(s->story, story);
    nf_id128_hex(s->lead, lead);
    nf_date_format(end_ms, we, sizeof we);
    nf_jw_t *w = &d->jw;
    nf_jw_reset(w);
    nf_jw_obj_open(w);
    nf_jw_key(w, "user_id");
    nf_jw_strn(w, user_id, ulen);
    nf_jw_key(w, "story_id");
    nf_jw_str(w, story);
    nf_jw_key(w, "article_id");
    nf_jw_str(w, lead);
    nf_jw_key(w, "topic");
    nf_jw_str(w, d->an->topic_names[s->topic] ? d->an->topic_names[s->topic] : "");
    nf_jw_key(w, "reads");
    nf_jw_u64(w, s->reads);
    nf_jw_key(w, "window_end");
    nf_jw_str(w, we);
    nf_jw_obj_close(w);
    if (w->failed || nf_analytics_emit(d->an, nf_shard_index(d->sh), NF_TOPIC_NOTIFICATIONS,
                                       user_id, w->buf, w->len) != 0)
        return -ENOMEM;
    return 0;
}

/* The oldest queued window let go (judged, or abandoned). */
static void run_pop(rd_t *d)
{
    run_q_t *q = d->runs;
    d->runs = q->next;
    if (!d->runs)
        d->runs_tail = &d->runs;
    nf_notify_run_free(q->run);
    free(q);
}

static void runs_free(rd_t *d)
{
    while (d->runs)
        run_pop(d);
}

/* Up to max subscribers of the queued windows judged, in order. Whether windows remain. */
static bool fanout(rd_t *d, size_t max)
{
    uint64_t t0 = nf_thread_cpu_ns(), counts[NF_NOTIFY__OUTCOMES] = {0};
    int rc = 0;
    while (d->runs && max && rc >= 0) {
        run_q_t *q = d->runs;
        size_t before = nf_notify_run_left(q->run);
        rc = nf_notify_run_step(d->notify, q->run, max, emit_notification, d, counts);
        size_t done = before - nf_notify_run_left(q->run);
        max = done < max ? max - done : 0;
        if (rc == 0) { /* this window is done */
            run_pop(d);
            nf_counter_inc(d->an->m.notify_windows);
        }
    }
    for (int o = 0; o < NF_NOTIFY__OUTCOMES; o++)
        nf_counter_add(d->an->m.notify[o], counts[o]);
    atomic_fetch_add_explicit(&d->an->notify_cpu_ns, nf_thread_cpu_ns() - t0, memory_order_relaxed);
    if (rc < 0) {
        nf_counter_inc(d->r->m.state_errors);
        nf_log(NF_LOG_ERROR, "interest",
               rc == -ENOMEM ? "out of memory notifying readers; stopping the job"
                             : "readers' subscriptions cannot be read; stopping the job",
               NF_LI("errno", -rc), NF_LS("error", nf_notify_error(d->notify)), NF_LEND);
        nf_runtime_fail(nf_shard_runtime(d->sh));
        runs_free(d); /* the job stops: nothing of this epoch commits */
        return false;
    }
    if (d->r->epoch && nf_notify_over_budget(d->notify))
        nf_epoch_request(d->r->epoch);
    return d->runs != NULL;
}

/* A window of breaking stories from the merger (trending.c): queued for this shard's subscribed
 * readers, NF_NOTIFY_SLICE of them a turn; the epoch cut waits for it (reads_busy), so that their
 * notifications commit in the epoch of the window's breaking-news records. */
static void reads_breaking(rd_t *d, const nf_notify_window_t *w)
{
    run_q_t *q = malloc(sizeof *q);
    if (!q || !(q->run = nf_notify_run_new(d->notify, w))) {
        free(q);
        nf_counter_inc(d->r->m.state_errors);
        nf_log(NF_LOG_ERROR, "interest",
               "out of memory queueing a window's notifications; "
               "stopping the job",
               NF_LEND);
        nf_runtime_fail(nf_shard_runtime(d->sh));
        return;
    }
    q->next = NULL;
    *d->runs_tail = q;
    d->runs_tail = &q->next;
    if (fanout(d, NF_NOTIFY_SLICE))
        nf_actor_schedule(d->sh, d->r->reads_actor);
}

static void reads_run(nf_shard_t *sh, void *self)
{
    rd_t *d = self;
    if (fanout(d, NF_NOTIFY_SLICE))
        nf_actor_schedule(sh, d->r->reads_actor);
}

/* The cut waits while windows are being fanned out (a slice each time it asks). */
static bool reads_busy(nf_shard_t *sh, void *self)
{
    (void)sh;
    rd_t *d = self;
    return d->runs && fanout(d, NF_NOTIFY_SLICE);
}

static void reads_event(rd_t *d, const read_batch_t *b, const read_item_t *it, uint64_t now_ms)
{
    nf_reads_t *r = d->r;
    nf_interest_out_t out;
    const char *user_id = b->text + it->user_at;
    if (nf_read_kind_is_setting(it->rd.kind)) {
        reads_setting(d, b, it);
        return;
    }
    int rc = nf_interest_apply_read(d->eng, &it->rd, (int64_t)now_ms, &out);
    if (rc == NF_INTEREST_DUPLICATE) {
        nf_counter_inc(d->an->m.interest_duplicates);
        return;
    }
    if (rc == NF_INTEREST_UNKNOWN_ARTICLE) {
        nf_counter_inc(d->an->m.interest_unknown);
        if (nf_log_enabled(NF_LOG_DEBUG)) {
            char hex[33];
            nf_log(NF_LOG_DEBUG, "interest", "read of an unknown article skipped",
                   NF_LS("article_id", article_text(b, it, hex)), NF_LS("user_id", user_id),
                   NF_LEND);
        }
        return;
    }
    if (rc < 0) {
        /* A store that cannot be read (or no memory): going on would restart this user from
         * zero. Stop; the uncommitted epoch is re-read after a restart. */
        nf_counter_inc(r->m.state_errors);
        nf_log(NF_LOG_ERROR, "interest", "interest state failed; stopping the job",
               NF_LS("user_id", user_id), NF_LI("errno", -rc),
               NF_LS("error", nf_interest_error(d->eng)), NF_LEND);
        nf_runtime_fail(nf_shard_runtime(d->sh));
        return;
    }
    if (d->history && (it->rd.kind != NF_READ_KIND_READ || d->an->history_reads))
        put_history(d, b, it, now_ms);
    if (!r->coalesce_max) {
        emit_update(d, user_id, &out);
    } else if (!note_pending(d, &it->rd, user_id)) {
        nf_log(NF_LOG_ERROR, "interest", "out of memory for coalesced updates; stopping the job",
               NF_LEND);
        nf_runtime_fail(nf_shard_runtime(d->sh));
        return;
    }
    if (r->slow_us) {
        uint64_t until = nf_now_ns() + (uint64_t)r->slow_us * 1000u;
        while (nf_now_ns() < until)
            ;
    }
}

static void reads_handle(nf_shard_t *sh, void *self, const nf_msg_t *m)
{
    rd_t *d = self;
    uint64_t now = (uint64_t)nf_wall_ms();
    if (m->kind == NF_MSG_TOPICS) {
        nf_topics_msg_t *t = m->body.ptr;
        if (nf_interest_topics_put(d->eng, t->id, &t->vec, (int64_t)now) == -ENOMEM) {
            nf_log(NF_LOG_ERROR, "interest", "out of memory for the topic table; stopping",
                   NF_LEND);
            nf_runtime_fail(nf_shard_runtime(sh));
        }
        nf_counter_inc(d->r->m.topics_taken);
        free(t);
        return;
    }
    if (m->kind == NF_MSG_BREAKING) {
        reads_breaking(d, m->body.ptr);
        free(m->body.ptr);
        return;
    }
    read_batch_t *b = m->body.ptr;
    /* The prefetch stages run ahead of the applies (interest.h: a burst of the whole batch's
     * prefetches would fill the core's miss buffers while no apply runs). */
    for (size_t i = 0; i < b->n + NF_INTEREST_PIPELINE_LAG; i++) {
        nf_interest_prefetch_step(d->eng, &b->items[0].rd, sizeof b->items[0], b->n, i);
        if (i >= NF_INTEREST_PIPELINE_LAG)
            reads_event(d, b, &b->items[i - NF_INTEREST_PIPELINE_LAG], now);
    }
    nf_msg_t back = {.actor = (uint16_t)d->r->in_actor, .kind = MSG_BATCH_BACK};
    back.body.ptr = b;
    if (nf_send(sh, b->origin, &back) != 0)
        free(b); /* the ring back is full: the sender allocates another */
    if (d->r->epoch && nf_interest_over_budget(d->eng))
        nf_epoch_request(d->r->epoch);
}

static void reads_snapshot(nf_shard_t *sh, void *self, nf_store_batch_t *b, uint64_t epoch)
{
    rd_t *d = self;
    /* The windows that came belong to the epoch being cut, as their breaking-news records do.
     * reads_busy drained them, unless one reached this shard after its last busy round: that
     * one is judged whole here. */
    while (d->runs && fanout(d, SIZE_MAX))
        ;
    if (nf_idset_count(&d->pending)) /* the coalesced updates belong to the epoch being cut */
        flush_pending(d);
    nf_interest_freeze(d->eng, b, epoch); /* the vectors: written by reads_snapshot_more */
    nf_follows_snapshot(d->follows, b, epoch);
    nf_notify_snapshot(d->notify, b, epoch);
    if (d->history)
        nf_store_batch_move(b, d->history);
    (void)sh;
}

static bool reads_snapshot_more(nf_shard_t *sh, void *self, size_t max)
{
    (void)sh;
    return nf_interest_freeze_step(((rd_t *)self)->eng, max) == 0;
}

static void reads_committed(nf_shard_t *sh, void *self, uint64_t epoch)
{
    nf_interest_committed(((rd_t *)self)->eng, epoch);
    nf_follows_committed(((rd_t *)self)->follows, epoch);
    nf_notify_committed(((rd_t *)self)->notify, epoch);
    (void)sh;
}

static bool owns_user(uint16_t kg, nf_id128_t key, void *ctx);

static bool in_set(uint16_t kg, void *ctx)
{
    return ((const bool *)ctx)[kg];
}

/* A rebalance (epoch.h): seen keys of this shard's users in gained partitions come from the
 * store; vectors and seen keys of lost partitions, committed, leave memory. */
static void reads_partitions(nf_shard_t *sh, void *self, nf_input_t in, const int32_t *parts,
                             size_t n, bool gained)
{
    rd_t *d = self;
    if (in != NF_INPUT_READ_EVENTS)
        return;
    int64_t now = nf_wall_ms();
    char err[512] = "";
    long r;
    size_t kept = 0;
    if (gained) {
        uint16_t kgs[NF_EPOCH_MAX_PARTITIONS];
        for (size_t i = 0; i < n; i++)
            kgs[i] = (uint16_t)parts[i];
        r = nf_interest_groups_gained(d->eng, kgs, n, owns_user, d, now, err, sizeof err);
        long subs = r < 0 ? 0 : nf_notify_load(d->notify, kgs, n, owns_user, d, err, sizeof err);
        r = subs < 0 ? subs : r + subs;
    } else {
        bool *set = calloc(65536, sizeof *set);
        if (!set) {
            r = -ENOMEM;
        } else {
            for (size_t i = 0; i < n; i++)
                set[(uint16_t)parts[i]] = true;
            r = nf_interest_groups_lost(d->eng, set, now, &kept);
            size_t kept_settings = 0;
            if (r >= 0)
                r += (long)nf_follows_drop_groups(d->follows, in_set, set, &kept_settings);
            kept += kept_settings;
            if (r >= 0)
                r += (long)nf_notify_drop_groups(d->notify, in_set, set, &kept_settings);
            kept += kept_settings;
            free(set);
        }
    }
    if (r < 0) {
        nf_log(NF_LOG_ERROR, "state",
               gained ? "the seen keys of gained partitions do not load; stopping"
                      : "cannot let go of the interest state of revoked partitions; stopping",
               NF_LI("shard", nf_shard_index(sh)),
               NF_LS("error", r == -ENOMEM ? "out of memory" : err), NF_LEND);
        nf_runtime_fail(nf_shard_runtime(sh));
        return;
    }
    if (kept)
        nf_log(NF_LOG_WARN, "state",
               "vectors of revoked partitions still uncommitted: kept in memory",
               NF_LI("shard", nf_shard_index(sh)), NF_LI("entries", kept), NF_LEND);
    if (r > 0)
        nf_log(NF_LOG_INFO, "state", gained ? "seen keys loaded" : "interest state let go",
               NF_LI("shard", nf_shard_index(sh)), NF_LI("entries", r), NF_LEND);
}

static const nf_epoch_participant_t reads_part = {.busy = reads_busy,
                                                  .snapshot = reads_snapshot,
                                                  .snapshot_more = reads_snapshot_more,
                                                  .committed = reads_committed,
                                                  .partitions = reads_partitions};

static void on_gauges(nf_shard_t *sh, nf_timer_t *t, void *arg)
{
    rd_t *d = arg;
    nf_interest_expire(d->eng, nf_wall_ms(), 1u << 16); /* adds expire as they go: idle sets */
    nf_interest_stats_t s;
    nf_interest_stats(d->eng, &s);
    nf_gauge_set(d->r->m.state_bytes, (int64_t)(s.users.bytes + s.seen.bytes + s.table_bytes));
    nf_gauge_set(d->r->m.state_entries, (int64_t)(s.users.entries + s.seen.keys));
    nf_kstate_gauges_set(&d->r->m.users_mem, &s.users);
    nf_gauge_set(d->r->m.settings_readers, (int64_t)nf_follows_entries(d->follows));
    nf_gauge_set(d->an->m.notify_subscribers, (int64_t)nf_notify_subscribers(d->notify));
    nf_reads_dedup_report(&d->r->m.seen_m, &d->seen_seen, nf_interest_seen_over_budget(d->eng),
                          "seen", nf_shard_index(d->sh), &s.seen);
    (void)sh;
    (void)t;
}

/* The seen keys of the users routed to this shard. */
static bool owns_user(uint16_t kg, nf_id128_t key, void *ctx)
{
    const rd_t *d = ctx;
    (void)kg;
    return nf_route(nf_shard_runtime(d->sh), key.hi) == nf_shard_index(d->sh);
}

static void load_seen(rd_t *d)
{
    char err[512];
    int64_t t0 = nf_wall_ms();
    long n = nf_interest_load(d->eng, owns_user, d, t0, err, sizeof err);
    if (n < 0) {
        nf_log(NF_LOG_ERROR, "state",
               "the (user, article, session) dedup set does not load; stopping",
               NF_LI("shard", nf_shard_index(d->sh)),
               NF_LS("error", n == -ENOMEM ? "out of memory" : err), NF_LEND);
        nf_runtime_fail(nf_shard_runtime(d->sh));
        return;
    }
    nf_log(NF_LOG_INFO, "state", "(user, article, session) dedup set loaded",
           NF_LI("shard", nf_shard_index(d->sh)), NF_LI("keys", n), NF_LI("ms", nf_wall_ms() - t0),
           NF_LEND);
}

/* The interest engine and buffers of reads_init: 0, or -1 with what could not be had in err. */
static int reads_state(rd_t *d, char *err, size_t errlen)
{
    char why[256];
    nf_interest_opts_t o = d->an->interest;
    o.users_budget_bytes = o.seen_budget_bytes = d->r->budget_bytes;
    o.seen_spill_dir = d->r->store ? nf_store_state_dir(d->r->store) : NULL;
    o.writer = (uint16_t)nf_shard_index(d->sh);
    o.process = d->r->process_id;
    o.err = why;
    o.errlen = sizeof why;
    if (!(d->eng = nf_interest_new(d->r->store, &o))) {
        snprintf(err, errlen, "cannot create the interest engine: %s", why);
        return -1;
    }
    if (!(d->follows = nf_follows_new(d->r->store, d->r->budget_bytes)) ||
        !(d->notify = nf_notify_new(d->r->store, d->r->budget_bytes, d->an->notify_cap))) {
        snprintf(err, errlen, "out of memory for the readers' settings");
        return -1;
    }
    if (d->r->store)
        load_seen(d);
    long subs = nf_notify_load(d->notify, NULL, 0, owns_user, d, why, sizeof why);
    if (subs < 0) {
        snprintf(err, errlen, "the readers' subscriptions do not load: %s",
                 subs == -ENOMEM ? "out of memory" : why);
        return -1;
    }
    if (nf_interest_keys_init(&d->keys, d->an->topic_names) != 0) {
        snprintf(err, errlen, "out of memory for the interest record keys");
        return -1;
    }
    if (d->r->epoch && d->r->store && d->an->history_ttl_ms &&
        !(d->history = nf_store_batch_new())) {
        snprintf(err, errlen, "out of memory for the reader history batch");
        return -1;
    }
    return 0;
}

static void reads_fini(nf_shard_t *sh, void *self);

static int reads_init(nf_shard_t *sh, void *ctx, void **self, char *err, size_t errlen)
{
    rd_t *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, errlen, "out of memory for the reads stage");
        return -1;
    }
    d->r = ctx;
    d->an = d->r->an;
    d->sh = sh;
    d->runs_tail = &d->runs;
    nf_jw_init(&d->jw);
    nf_timer_init(&d->gauges, on_gauges, d);
    int r = reads_state(d, err, errlen);
    if (r == 0 && d->r->epoch && (r = nf_epoch_participant_add(d->r->epoch, sh, &reads_part, d)))
        snprintf(err, errlen, "reads cannot take part in the epochs: %s", strerror(-r));
    if (r != 0) {
        reads_fini(sh, d);
        return -1;
    }
    nf_timer_arm(sh, &d->gauges, nf_now_ns() + 1000000000ull, 1000000000ull);
    *self = d;
    return 0;
}

static void reads_stop(nf_shard_t *sh, void *self)
{
    nf_timer_cancel(sh, &((rd_t *)self)->gauges);
}

static void reads_fini(nf_shard_t *sh, void *self)
{
    rd_t *d = self;
    nf_timer_cancel(sh, &d->gauges);
    runs_free(d); /* a forced shutdown: nothing of them was committed */
    nf_interest_free(d->eng);
    nf_follows_free(d->follows);
    nf_notify_free(d->notify);
    nf_interest_keys_free(&d->keys);
    nf_jw_free(&d->jw);
    nf_idset_free(&d->pending);
    nf_store_batch_free(d->history);
    free(d->names);
    free(d);
}

const nf_actor_ops_t nf_interest_update_ops = {.name = "reads",
                                               .init = reads_init,
                                               .handle = reads_handle,
                                               .run = reads_run,
                                               .stop = reads_stop,
                                               .fini = reads_fini,
                                               .drop = nf_reads_batch_drop};
