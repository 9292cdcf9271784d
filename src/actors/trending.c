/* trending.c — the "trending" actor (analytics.h): the merger on shard 0 that sums the read-events
 * partitions' pane summaries (engine/trend.h), emits the top-K of each window and keeps its panes
 * in epochs. */
#include "actors/analytics_int.h"
#include "algo/bytes.h"
#include "feed/dates.h"
#include "runtime/jsonw.h"
#include "runtime/log.h"
#include "runtime/outbox.h"
#include "state/kstate.h"
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ================================================================ trending merger */

/* State keys in NF_KIND_TRENDING: "M" the merger's meta; "B" the stories breaking news announced
 * within the cooldown (engine/breaking.h); "L" the last window emitted (its
 * `trending` record, JSON: what /v1/trending answers, src/serve/query.c); "P" + partition (2
 * bytes BE) + pane_start (8 bytes BE, offset by 2^63 so that order is numeric) one pane summary;
 * "C" + partition (2 bytes BE) a partition's counter (kafka_in.c), and past 1 MiB "C" + partition +
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
    /* The committed view the windows being emitted group their articles by (story_of), taken
     * at the first article grouped (view_taken); NULL: by article. */
    nf_store_view_t *view;
    bool view_taken;
    uint64_t view_clock, view_epoch;
    /* The stories read from the views: article -> root, valid for the view epoch it was read
     * at (a window ranks mostly the articles the one before did); direct-mapped, allocated at
     * the first use. */
    struct story_slot *stories;
    /* Breaking news (engine/breaking.h; NULL: breaking.enabled is off), and the window's
     * entries' topics (their leads' top topics, -1: none) as window_out found them. */
    nf_breaking_t *brk;
    int *topics;
    size_t topics_cap;
    /* an->notify: the window's breaking stories (announce_one adds them), sent to every shard's
     * reads actor (NF_MSG_BREAKING) through ob, which keeps what a full ring refuses */
    nf_notify_window_t *nw;
    size_t nw_cap;
    nf_outbox_t ob;
    /* Keys of the per-shard layout found at start, deleted at the first cut. */
    unsigned char (*legacy)[11];
    unsigned char *legacy_len;
    size_t nlegacy, legacy_cap;
} merger_t;

static int lead_topics(merger_t *g, const nf_trend_ranked_t *items, size_t n, int64_t end);

static int announce(merger_t *g, const nf_trend_ranked_t *items, size_t n, const char *ws,
                    const char *we, int64_t end);

static int window_out(void *ctx, int64_t start, int64_t end, const nf_trend_ranked_t *items,
                      size_t n)
{
    merger_t *g = ctx;
    uint64_t t0 = g->brk ? nf_thread_cpu_ns() : 0;
    if (g->brk && lead_topics(g, items, n, end) != 0)
        return -ENOMEM;
    if (g->brk)
        atomic_fetch_add_explicit(&g->an->breaking_cpu_ns, nf_thread_cpu_ns() - t0,
                                  memory_order_relaxed);
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
        nf_jw_str(w, items[i].lead);
        nf_jw_key(w, "score");
        nf_jw_u64(w, items[i].score);
        nf_jw_key(w, "cluster_id");
        nf_jw_str(w, items[i].article_id);
        nf_jw_key(w, "articles");
        nf_jw_u64(w, items[i].members);
        if (g->brk && g->topics[i] >= 0) { /* what breaking news judged it by */
            nf_jw_key(w, "topic");
            nf_jw_str(w, g->an->topic_names[g->topics[i]]);
        }
        nf_jw_obj_close(w);
        if (items[i].members > 1)
            nf_counter_add(g->an->m.trend_stories_folded, items[i].members - 1);
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
    if (!g->brk)
        return 0;
    t0 = nf_thread_cpu_ns();
    int r = announce(g, items, n, ws, we, end);
    atomic_fetch_add_explicit(&g->an->breaking_cpu_ns, nf_thread_cpu_ns() - t0,
                              memory_order_relaxed);
    return r;
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

#define STORY_SLOTS 16384 /* a power of two: 640 KiB */

typedef struct story_slot {
    nf_id128_t article, root;
    uint64_t epoch; /* the view's; 0: empty */
} story_slot_t;

/* The root of aid as of the view: from the cache, else read (and kept). 0 or < 0 (err). */
static int story_root(merger_t *g, nf_id128_t aid, nf_id128_t *root, char *err, size_t errlen)
{
    if (!g->stories && !(g->stories = calloc(STORY_SLOTS, sizeof *g->stories)))
        return nf_cluster_view_root(g->view, g->an->cluster.key_group, g->view_clock, aid, root,
                                    err, errlen);
    story_slot_t *s = &g->stories[(aid.hi ^ aid.lo) & (STORY_SLOTS - 1)];
    if (s->epoch == g->view_epoch && s->article.hi == aid.hi && s->article.lo == aid.lo) {
        *root = s->root;
        return 0;
    }
    int r = nf_cluster_view_root(g->view, g->an->cluster.key_group, g->view_clock, aid, root, err,
                                 errlen);
    if (r == 0)
        *s = (story_slot_t){aid, *root, g->view_epoch};
    return r;
}

/* The last committed view, taken once per merger_emit and only when a window is ranked; NULL
 * without a store. */
static nf_store_view_t *view_of(merger_t *g)
{
    if (!g->view_taken) {
        g->view_taken = true;
        g->view = g->an->store ? nf_store_view_acquire(g->an->store) : NULL;
        g->view_clock = g->view ? nf_cluster_view_clock(g->view) : 0;
        g->view_epoch = g->view ? nf_store_view_epoch(g->view) + 1 : 0; /* 0: an empty slot */
    }
    return g->view;
}

/* The story of a scored article (nf_trend_group_fn): its cluster's root as of the last committed
 * view (engine/cluster.h), in lower-case hex whatever case the read event spelled the id in (so
 * that a story is one entry); 0 (on its own) when it is no article id. A view that cannot be read
 * leaves the article on its own, counted. */
static size_t story_of(void *ctx, const char *id, size_t len, char out[NF_TREND_ID_MAX + 1])
{
    merger_t *g = ctx;
    nf_id128_t aid, root;
    if (!view_of(g) || len != 32 || nf_id128_from_hex32(id, &aid) != 0)
        return 0;
    char err[160];
    if (story_root(g, aid, &root, err, sizeof err) != 0) {
        static nf_log_gate_t gate;
        uint64_t held;
        nf_counter_inc(g->an->m.trend_story_errors);
        if (nf_log_gate_pass(&gate, 10000000000ull, &held))
            nf_log(NF_LOG_WARN, "trending", "cannot read an article's story; it is ranked alone",
                   NF_LS("error", err), NF_LI("held", held), NF_LEND);
        return 0;
    }
    nf_cluster_id_hex(root, out);
    return 32;
}

/* The top topic of article id (its largest weight; the lower index of a tie) as the view holds
 * its vector at `at`: >= 0, -1 (no vector, none left at `at`, or an id that is none), or -2
 * (the read failed: err). */
static int top_topic(merger_t *g, const char *id, int64_t at, char *err, size_t errlen)
{
    nf_id128_t aid;
    nf_store_view_t *v = view_of(g);
    if (!v || strlen(id) != 32 || nf_id128_from_hex32(id, &aid) != 0)
        return -1;
    int32_t kg = g->an->interest.topics_key_group;
    nf_topic_vec_t vec;
    int best = -1;
    int r = nf_interest_view_topics(v, kg >= 0 ? (uint16_t)kg : (uint16_t)(aid.hi % 256), aid, at,
                                    &vec, NULL, err, errlen);
    if (r == 1)
        for (uint32_t k = 0; k < vec.n; k++)
            if (vec.t[k].weight > 0 &&
                (best < 0 || vec.t[k].weight > vec.t[best].weight ||
                 (vec.t[k].weight == vec.t[best].weight && vec.t[k].topic < vec.t[best].topic)))
                best = (int)k;
    return r < 0 ? -2 : best < 0 ? -1 : vec.t[best].topic;
}

/* Each of the window's entries' lead's top topic into g->topics (breaking news). */
static int lead_topics(merger_t *g, const nf_trend_ranked_t *items, size_t n, int64_t end)
{
    if (n > g->topics_cap) {
        int *t = realloc(g->topics, n * sizeof *t);
        if (!t)
            return -ENOMEM;
        g->topics = t;
        g->topics_cap = n;
    }
    for (size_t i = 0; i < n; i++) {
        char err[160];
        int t = top_topic(g, items[i].lead, end, err, sizeof err);
        if (t == -2) {
            static nf_log_gate_t gate;
            uint64_t held;
            nf_counter_inc(g->an->m.breaking_topic_errors);
            if (nf_log_gate_pass(&gate, 10000000000ull, &held))
                nf_log(NF_LOG_WARN, "trending",
                       "cannot read a trending story's topic; it is left out of breaking news",
                       NF_LS("error", err), NF_LI("held", held), NF_LEND);
        }
        g->topics[i] = t < 0 || !g->an->topic_names[t] ? -1 : t; /* a topic with a name */
    }
    return 0;
}

typedef struct announce_ctx {
    merger_t *g;
    const nf_trend_ranked_t *items;
    const char *ws, *we;
    const nf_breaking_entry_t *e; /* the entries as judged: each story's id parsed */
} announce_ctx_t;

/* One story that broke: its breaking-news record (docs/topics.md), keyed by its story id. */
static int announce_one(void *arg, size_t i, double baseline, unsigned peers)
{
    announce_ctx_t *a = arg;
    merger_t *g = a->g;
    const nf_trend_ranked_t *it = &a->items[i];
    nf_jw_t *w = &g->jw;
    nf_jw_reset(w);
    nf_jw_obj_open(w);
    nf_jw_key(w, "story_id");
    nf_jw_str(w, it->article_id);
    nf_jw_key(w, "article_id");
    nf_jw_str(w, it->lead);
    nf_jw_key(w, "topic");
    nf_jw_str(w, g->an->topic_names[g->topics[i]]);
    nf_jw_key(w, "reads");
    nf_jw_u64(w, it->score);
    nf_jw_key(w, "baseline");
    nf_jw_score(w, baseline);
    nf_jw_key(w, "peers");
    nf_jw_u64(w, peers);
    nf_jw_key(w, "articles");
    nf_jw_u64(w, it->members);
    nf_jw_key(w, "window_start");
    nf_jw_str(w, a->ws);
    nf_jw_key(w, "window_end");
    nf_jw_str(w, a->we);
    nf_jw_obj_close(w);
    if (w->failed || nf_analytics_emit(g->an, nf_shard_index(g->sh), NF_TOPIC_BREAKING_NEWS,
                                       it->article_id, w->buf, w->len) != 0)
        return -ENOMEM;
    nf_counter_inc(g->an->m.breaking_news);
    if (g->nw) { /* a notification's fields (announce made room for every entry) */
        nf_notify_story_t *s = &g->nw->s[g->nw->n++];
        *s = (nf_notify_story_t){
            .story = a->e[i].story, .reads = it->score, .topic = (uint16_t)g->topics[i]};
        if (strlen(it->lead) != 32 || nf_id128_from_hex32(it->lead, &s->lead) != 0)
            g->nw->n--; /* a lead that is not an article's id: nothing to open */
    }
    return 0;
}

/* The window's breaking stories (g->nw, in the order engine/notify.h judges them) to every
 * shard's reads actor, each its own copy. 0 or -ENOMEM. */
static int notify_shards(merger_t *g, int64_t end)
{
    g->nw->end_ms = end;
    nf_notify_window_sort(g->nw);
    size_t size = sizeof *g->nw + g->nw->n * sizeof g->nw->s[0];
    unsigned n = nf_runtime_shard_count(nf_shard_runtime(g->sh));
    for (unsigned dst = 0; dst < n; dst++) {
        nf_notify_window_t *w = malloc(size);
        if (!w)
            return -ENOMEM;
        memcpy(w, g->nw, size);
        nf_msg_t m = {.actor = (uint16_t)g->an->interest_actor, .kind = NF_MSG_BREAKING};
        m.body.ptr = w;
        if (nf_outbox_send(g->sh, &g->ob, dst, &m) != 0) {
            free(w);
            return -ENOMEM;
        }
    }
    return 0;
}

/* Room in g->nw for n stories (notifications on, the reads actor registered). 0 or -ENOMEM. */
static int notify_room(merger_t *g, size_t n)
{
    if (!g->an->notify || g->an->interest_actor < 0)
        return 0;
    if (n > g->nw_cap || !g->nw) {
        nf_notify_window_t *w = realloc(g->nw, sizeof *w + (n + 1) * sizeof w->s[0]);
        if (!w)
            return -ENOMEM;
        g->nw = w;
        g->nw_cap = n + 1;
    }
    g->nw->n = 0;
    return 0;
}

/* Breaking news of the window just emitted (engine/breaking.h): its records, and the stories
 * remembered in g->brk, saved at the next cut with them. */
static int announce(merger_t *g, const nf_trend_ranked_t *items, size_t n, const char *ws,
                    const char *we, int64_t end)
{
    nf_breaking_entry_t *e = malloc((n + 1) * sizeof *e);
    if (!e || notify_room(g, n) != 0) {
        free(e);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        nf_id128_t story = {0, 0};
        if (strlen(items[i].article_id) != 32 ||
            nf_id128_from_hex32(items[i].article_id, &story) != 0)
            g->topics[i] = -1; /* not an article's story: no news */
        e[i] =
            (nf_breaking_entry_t){.story = story, .reads = items[i].score, .topic = g->topics[i]};
    }
    announce_ctx_t a = {g, items, ws, we, e};
    int r = nf_breaking_window(g->brk, end, e, n, announce_one, &a);
    free(e);
    if (r >= 0 && g->nw && g->nw->n)
        r = notify_shards(g, end);
    nf_gauge_set(g->an->m.breaking_cooling, (int64_t)nf_breaking_size(g->brk));
    return r < 0 ? r : 0;
}

/* The engine's merger of g's counters, ranking by story when trending.by_story. */
static nf_trend_merger_t *merger_new(merger_t *g)
{
    nf_trend_merger_t *m = nf_trend_merger_new(&g->an->trend, g->ncounters);
    if (m && g->an->trend_by_story)
        nf_trend_merger_set_group(m, story_of, g);
    return m;
}

static void merger_emit(merger_t *g)
{
    /* Trending by story: the windows emitted now group their articles by the stories of the
     * last committed epoch (docs/ARCHITECTURE.md §1; an article clustered since counts alone
     * until its epoch commits). */
    g->view_taken = false;
    int rc = nf_trend_merger_emit(g->m, window_out, pane_dropped, g);
    nf_store_view_release(g->view);
    g->view = NULL;
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

/* The stories breaking news announced within the cooldown, as "B" (with the records they were
 * announced in: one epoch). */
static void save_breaking(merger_t *g, nf_store_batch_t *b)
{
    void *blob = NULL;
    size_t len = 0;
    int rc = nf_breaking_save(g->brk, &blob, &len);
    if (rc == 0)
        rc = nf_analytics_put_blob(b, "B", 1, blob, len);
    free(blob);
    if (rc != 0)
        merger_fail(g, "cannot save the breaking-news state (out of memory); stopping", rc);
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
    if (g->brk && nf_breaking_dirty(g->brk))
        save_breaking(g, b);
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
    if (!(g->m = merger_new(g)))
        merger_fail(g, "out of memory resetting the trending merger; stopping", -ENOMEM);
    if (g->brk)
        nf_breaking_clear(g->brk); /* what it had is in the store */
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

/* A held window of breaking stories is neither sent nor handled: the cut waits for it (its
 * notifications belong to the epoch of its breaking-news records). */
static bool merger_busy(nf_shard_t *sh, void *self)
{
    return nf_outbox_drain(sh, &((merger_t *)self)->ob) != 0;
}

static const nf_epoch_participant_t merger_part = {
    .snapshot = merger_snapshot, .busy = merger_busy, .partitions = merger_partitions};

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

/* The stories announced within the cooldown ("B"), or none. 0, or -1 (the job stops: a state it
 * cannot read would announce them again). */
static int restore_breaking(merger_t *g)
{
    void *val = NULL;
    size_t vlen = 0, blen = 0;
    int rc = nf_store_get(g->an->store, NF_KIND_TRENDING, "B", 1, &val, &vlen, NULL, 0);
    const void *blob = rc == 1 ? nf_analytics_blob(val, vlen, &blen) : NULL;
    int lr = rc == 1 ? (blob ? nf_breaking_load(g->brk, blob, blen) : -EINVAL) : 0;
    free(val);
    if (rc >= 0 && lr == 0)
        return 0;
    nf_log(NF_LOG_ERROR, "trending",
           rc < 0 ? "cannot read the breaking-news state; stopping"
                  : "the stored breaking-news state does not load (corrupt?): the stories it "
                    "announced would be announced again; run with breaking.enabled=false, or "
                    "restore a checkpoint; stopping",
           NF_LI("errno", rc < 0 ? -rc : -lr), NF_LEND);
    nf_runtime_fail(nf_shard_runtime(g->sh));
    return -1;
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
    if (g->brk && restore_breaking(g) != 0)
        return;
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

static void free_body(void *ctx, const nf_msg_t *m)
{
    (void)ctx;
    free(m->body.ptr);
}

static int merger_init(nf_shard_t *sh, void *ctx, void **self, char *err, size_t errlen)
{
    nf_analytics_t *an = ctx;
    if (nf_shard_index(sh) != 0)
        return 0;
    unsigned ncounters = an->trend_partitions ? an->trend_partitions : 1;
    merger_t *g = calloc(1, sizeof *g);
    if (g) {
        g->an = an;
        g->ncounters = ncounters;
    }
    if (g && an->breaking && !(g->brk = nf_breaking_new(&an->breaking_opts))) {
        free(g);
        g = NULL;
    }
    if (!g || !(g->m = merger_new(g))) {
        if (g)
            nf_breaking_free(g->brk);
        free(g);
        snprintf(err, errlen,
                 "cannot create the trending merger of %u counters: out of memory or trending "
                 "options it cannot use",
                 ncounters);
        return -1;
    }
    g->sh = sh;
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
    free(g->stories);
    nf_breaking_free(g->brk);
    free(g->topics);
    nf_outbox_free(&g->ob, free_body, NULL); /* forced shutdown only: not committed */
    free(g->nw);
    free(g);
}

static void merger_resume(nf_shard_t *sh, void *self)
{
    if (self)
        nf_outbox_drain(sh, &((merger_t *)self)->ob);
}

static void merger_stop(nf_shard_t *sh, void *self)
{
    merger_resume(sh, self);
}

static void merger_drop(void *ctx, const nf_msg_t *m)
{
    (void)ctx;
    if (m->kind == NF_MSG_PANE)
        free(m->body.ptr);
}

const nf_actor_ops_t nf_trending_ops = {.name = "trending",
                                        .init = merger_init,
                                        .handle = merger_handle,
                                        .resume = merger_resume,
                                        .stop = merger_stop,
                                        .fini = merger_fini,
                                        .drop = merger_drop};

/* The metrics of the read events' stages: trending, interest, their keyed state. */
static double breaking_cpu_s(void *arg)
{
    return (double)atomic_load_explicit(&((nf_analytics_t *)arg)->breaking_cpu_ns,
                                        memory_order_relaxed) /
           1e9;
}

static double notify_cpu_s(void *arg)
{
    return (double)atomic_load_explicit(&((nf_analytics_t *)arg)->notify_cpu_ns,
                                        memory_order_relaxed) /
           1e9;
}

void nf_trending_metrics(nf_analytics_t *an)
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
    nf_metrics_counter("newsflow_trending_story_errors_total",
                       "Trending articles whose story could not be read from the committed "
                       "state (each ranked alone in its window).",
                       NULL, 0, &an->m.trend_story_errors);
    nf_metrics_counter("newsflow_trending_articles_folded_total",
                       "Articles folded into another article's story in emitted trending "
                       "windows (one entry per story: its members beyond the lead).",
                       NULL, 0, &an->m.trend_stories_folded);
    nf_metrics_counter("newsflow_breaking_news_total",
                       "Stories announced on breaking-news (engine/breaking.h): read at least "
                       "breaking.multiple times their topic's trending baseline.",
                       NULL, 0, &an->m.breaking_news);
    nf_metrics_counter("newsflow_breaking_topic_errors_total",
                       "Trending stories whose lead's topic vector could not be read from the "
                       "committed state (no topic: neither news nor another's baseline).",
                       NULL, 0, &an->m.breaking_topic_errors);
    nf_metrics_counter_fn("newsflow_breaking_cpu_seconds_total",
                          "CPU the trending merger spent on breaking news: reading each ranked "
                          "entry's lead's topic vector from the committed view and judging the "
                          "window.",
                          NULL, breaking_cpu_s, an);
    static const char *const outcomes[NF_NOTIFY__OUTCOMES] = {"sent", "repeat", "capped"};
    for (int o = 0; o < NF_NOTIFY__OUTCOMES; o++) {
        char labels[32];
        snprintf(labels, sizeof labels, "outcome=\"%s\"", outcomes[o]);
        nf_metrics_counter("newsflow_notifications_total",
                           "Readers subscribed to a breaking story's topic, by outcome "
                           "(engine/notify.h): sent (a notifications record), repeat (the story "
                           "was sent to them before), capped (notifications.daily_cap reached).",
                           labels, 0, &an->m.notify[o]);
    }
    nf_metrics_counter("newsflow_notification_windows_total",
                       "Windows of breaking stories fanned out to the shards' subscribed readers.",
                       NULL, 0, &an->m.notify_windows);
    nf_metrics_counter_fn("newsflow_notification_cpu_seconds_total",
                          "CPU the shards spent fanning breaking stories out to their subscribed "
                          "readers (reading and writing their subscriptions, the records).",
                          NULL, notify_cpu_s, an);
    nf_metrics_gauge("newsflow_notification_subscribers",
                     "Readers subscribed to at least one topic's breaking news (summed over "
                     "shards).",
                     NULL, 0, &an->m.notify_subscribers);
    nf_metrics_gauge("newsflow_breaking_cooling_stories",
                     "Stories announced within breaking.cooldown_s (not announced again).", NULL, 0,
                     &an->m.breaking_cooling);
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
    static const double fresh_bounds[] = {1, 2.5, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600};
    nf_metrics_histogram(
        "newsflow_trending_freshness_seconds",
        "How far behind the wall clock trending's event time is (the lowest watermark of a "
        "shard's active read-events partitions; 0 when all are idle), sampled every 250 ms on "
        "each shard that counts partitions: the trending freshness SLO (docs/slo.md).",
        NULL, fresh_bounds, sizeof fresh_bounds / sizeof fresh_bounds[0], &an->m.trend_freshness);
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
