/* crawl.c — the crawl actor (ingest.h): schedule, fetch and parse for the sources of one shard.
 *
 * Every source has a wheel timer at its next_crawl_at. When it fires, the host's politeness
 * and breaker decide whether the fetch starts now; if not, the timer is simply re-armed at the
 * time they name (a busy host or an open breaker is not a failure of the source). Completion
 * runs the parser inline, updates the schedule from the combined fetch+parse outcome (a feed
 * that is served as HTML forever ends DEAD like one that times out), writes the attempt to
 * fetch-log and sends each article to its dedup shard.
 *
 * Schedules are in wall-clock milliseconds; timers are monotonic, so each arm converts "at wall
 * time T" into "in T - now". Schedules are CrawlSchedule state: a changed one is written at the
 * next epoch cut (NF_KIND_CRAWL_SCHEDULE, key = source_id) and read back at start, so a restart
 * keeps next_crawl_at, backoff, validators and status.
 *
 * Epoch cuts: while a cut is in progress (pause .. resume) nothing new starts and a finished
 * fetch is held unprocessed — its schedule update, fetch-log record and articles must land in
 * the same epoch (a schedule committed with a new ETag but without the articles would lose them
 * on the next conditional GET). */
#include "actors/article_msg.h"
#include "actors/ingest.h"
#include "algo/sha256.h"
#include "feed/dates.h"
#include "runtime/jsonw.h"
#include "runtime/log.h"
#include "state/kstate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct crawl crawl_t;

typedef struct src {
    nf_timer_t timer;
    nf_crawl_schedule_t sched;
    const nf_source_def_t *def;
    crawl_t *c;
    uint32_t host; /* index into crawl_t.hosts */
    bool in_flight, queued, probe, dirty, restored;
    int64_t started_for_ms; /* next_crawl_at the running fetch was due at (fetch_id) */
    int64_t started_ms;
    struct src *qnext;
} src_t;

typedef struct {
    nf_host_t h;
    const char *name;
} host_t;

struct crawl {
    nf_ingest_t *in;
    nf_shard_t *sh;
    nf_fetcher_t *fetcher;
    nf_fetcher_t *file_fetcher; /* file:// allowed: only for operator-listed local sources */
    src_t *srcs;
    size_t nsrcs;
    host_t *hosts;
    size_t nhosts;
    src_t *qhead, *qtail; /* due sources waiting for capacity */
    unsigned in_flight;
    nf_article_blob_t *ohead, *otail; /* articles refused by a full ring, in order */
    size_t opending;
    uint64_t rng;
    nf_jw_t jw;
    bool stopping;
    bool cut_paused;
    struct deferred *dhead, *dtail; /* fetches finished during a cut */
};

typedef struct deferred {
    struct deferred *next;
    src_t *s;
    nf_fetch_result_t res;
} deferred_t;

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void arm_at(crawl_t *c, src_t *s, int64_t at_ms)
{
    int64_t delta = at_ms - wall_ms();
    uint64_t now = nf_now_ns();
    nf_timer_arm(c->sh, &s->timer, delta > 0 ? now + (uint64_t)delta * 1000000ull : now, 0);
}

/* ---------------------------------------------------------------- articles out */

static bool send_blob(crawl_t *c, nf_article_blob_t *b)
{
    nf_msg_t m = {.actor = (uint16_t)c->in->dedup_actor, .kind = NF_MSG_ARTICLE, .key = b->id.hi};
    m.body.ptr = b;
    return nf_send_keyed(c->sh, &m) == 0;
}

static void queue_blob(crawl_t *c, nf_article_blob_t *b)
{
    b->next = NULL;
    if (c->otail)
        c->otail->next = b;
    else
        c->ohead = b;
    c->otail = b;
    c->opending++;
}

static void emit_article(crawl_t *c, nf_article_blob_t *b)
{
    /* Order is kept: nothing overtakes what is already waiting. */
    if (c->ohead || !send_blob(c, b)) {
        if (!c->ohead)
            nf_counter_inc(c->in->m.ring_full_articles);
        queue_blob(c, b);
    }
}

static void drain_overflow(crawl_t *c)
{
    while (c->ohead) {
        nf_article_blob_t *b = c->ohead;
        if (!send_blob(c, b))
            break;
        c->ohead = b->next;
        if (!c->ohead)
            c->otail = NULL;
        c->opending--;
    }
    nf_gauge_set(c->in->m.pending_articles, (int64_t)c->opending);
}

static void json_time(nf_jw_t *w, const char *key, int64_t ms)
{
    char buf[40];
    nf_date_format(ms, buf, sizeof buf);
    nf_jw_key(w, key);
    nf_jw_str(w, buf);
}

static nf_article_blob_t *article_blob(crawl_t *c, const nf_article_t *a, const src_t *s,
                                       int64_t now)
{
    nf_jw_t *w = &c->jw;
    nf_jw_reset(w);
    nf_jw_obj_open(w);
    nf_jw_key(w, "article_id");
    nf_jw_str(w, a->article_id);
    nf_jw_key(w, "url");
    nf_jw_str(w, a->url);
    nf_jw_key(w, "link");
    nf_jw_str(w, a->link);
    nf_jw_key(w, "guid");
    nf_jw_str(w, a->guid);
    nf_jw_key(w, "source_id");
    nf_jw_str(w, s->def->source_id);
    nf_jw_key(w, "feed_url");
    nf_jw_str(w, s->def->url);
    nf_jw_key(w, "title");
    nf_jw_str(w, a->title);
    nf_jw_key(w, "summary");
    nf_jw_str(w, a->summary);
    nf_jw_key(w, "body");
    nf_jw_str(w, a->body);
    nf_jw_key(w, "authors");
    nf_jw_arr_open(w);
    for (size_t i = 0; i < a->nauthors; i++) {
        nf_jw_elem(w);
        nf_jw_obj_open(w);
        nf_jw_key(w, "name");
        nf_jw_str(w, a->authors[i].name);
        nf_jw_key(w, "email");
        nf_jw_str(w, a->authors[i].email);
        nf_jw_obj_close(w);
    }
    nf_jw_arr_close(w);
    nf_jw_key(w, "categories");
    nf_jw_arr_open(w);
    for (size_t i = 0; i < a->ncategories; i++) {
        nf_jw_elem(w);
        nf_jw_str(w, a->categories[i]);
    }
    nf_jw_arr_close(w);
    nf_jw_key(w, "language");
    nf_jw_str(w, a->language);
    json_time(w, "published_at", a->published_ms);
    json_time(w, "updated_at", a->updated_ms);
    nf_jw_key(w, "date_fallback");
    nf_jw_bool(w, a->date_fallback);
    json_time(w, "ingested_at", now);
    nf_jw_key(w, "content_hash");
    nf_jw_str(w, a->content_hash);
    nf_jw_obj_close(w);
    if (w->failed)
        return NULL;
    nf_article_blob_t *b = malloc(sizeof *b + w->len + 1);
    if (!b)
        return NULL;
    if (nf_id128_from_hex(a->article_id, &b->id) != 0) {
        free(b);
        return NULL;
    }
    memcpy(b->article_id, a->article_id, sizeof b->article_id);
    b->ingested_ms = now;
    b->len = w->len;
    memcpy(b->json, w->buf, w->len + 1);
    return b;
}

/* ---------------------------------------------------------------- fetch-log */

static void emit_fetch_log(crawl_t *c, const src_t *s, const nf_fetch_result_t *res,
                           const char *error, int64_t now)
{
    char seed[64], fetch_id[33];
    uint8_t digest[32];
    int n = snprintf(seed, sizeof seed, "%s:%lld", s->def->source_id, (long long)s->started_for_ms);
    nf_sha256(seed, (size_t)n, digest);
    nf_hex(digest, 16, fetch_id);
    nf_jw_t *w = &c->jw;
    nf_jw_reset(w);
    nf_jw_obj_open(w);
    nf_jw_key(w, "fetch_id");
    nf_jw_str(w, fetch_id);
    nf_jw_key(w, "source_id");
    nf_jw_str(w, s->def->source_id);
    nf_jw_key(w, "url");
    nf_jw_str(w, s->def->url);
    nf_jw_key(w, "http_status");
    nf_jw_i64(w, res->http_status);
    nf_jw_key(w, "bytes");
    nf_jw_u64(w, res->bytes);
    nf_jw_key(w, "duration_ms");
    nf_jw_u64(w, res->duration_ns / 1000000ull);
    nf_jw_key(w, "not_modified");
    nf_jw_bool(w, res->not_modified);
    nf_jw_key(w, "error");
    nf_jw_str(w, error);
    json_time(w, "fetched_at", now);
    nf_jw_obj_close(w);
    if (w->failed || nf_ingest_emit(c->in, nf_shard_index(c->sh), NF_TOPIC_FETCH_LOG,
                                    s->def->source_id, w->buf, w->len) != 0)
        nf_counter_inc(c->in->m.sink_errors);
}

/* ---------------------------------------------------------------- parse */

/* Parses a fetched body and sends its articles; returns the parser's result code. */
static int parse_and_emit(crawl_t *c, src_t *s, nf_fetch_result_t *res, int64_t now, char *err,
                          size_t errlen)
{
    nf_ingest_metrics_t *m = &c->in->m;
    nf_feed_t feed;
    uint64_t t0 = nf_now_ns();
    const char *base = res->effective_url[0] ? res->effective_url : s->def->url;
    int r =
        nf_feed_parse(&feed, res->body, res->body_len, base, now, &c->in->o.limits, err, errlen);
    nf_histogram_observe(m->parse_seconds, (double)(nf_now_ns() - t0) / 1e9);
    unsigned idx = r == 0 ? 0 : (unsigned)-r;
    nf_counter_inc(m->parse_result[idx < 6 ? idx : 2]);
    if (r != 0)
        return r;
    nf_counter_add(m->parse_warnings, feed.warnings);
    nf_counter_add(m->parse_truncated, feed.truncated_items);
    for (size_t i = 0; i < feed.nitems; i++) {
        const nf_article_t *a = &feed.items[i];
        if (!a->url || !a->article_id[0]) {
            nf_counter_inc(m->parse_no_link);
            continue;
        }
        nf_article_blob_t *b = article_blob(c, a, s, now);
        if (!b) {
            nf_log(NF_LOG_ERROR, "parse", "cannot build article (out of memory)",
                   NF_LS("source_id", s->def->source_id), NF_LS("url", a->url), NF_LEND);
            continue;
        }
        nf_counter_inc(m->parse_articles);
        emit_article(c, b);
    }
    nf_feed_free(&feed);
    return 0;
}

/* ---------------------------------------------------------------- scheduling */

static void try_start(crawl_t *c, src_t *s);

static bool has_capacity(const crawl_t *c)
{
    return c->in_flight < c->in->o.max_in_flight && c->opending < c->in->o.max_pending_articles;
}

/* Appends a due source to the queue started by drain_queue(); false if already queued. */
static bool queue_push(crawl_t *c, src_t *s)
{
    if (s->queued)
        return false;
    s->queued = true;
    s->qnext = NULL;
    if (c->qtail)
        c->qtail->qnext = s;
    else
        c->qhead = s;
    c->qtail = s;
    return true;
}

static void enqueue(crawl_t *c, src_t *s)
{
    if (queue_push(c, s))
        nf_counter_inc(c->in->m.deferred_capacity);
}

static void drain_queue(crawl_t *c)
{
    while (c->qhead && has_capacity(c) && !c->stopping && !c->cut_paused) {
        src_t *s = c->qhead;
        c->qhead = s->qnext;
        if (!c->qhead)
            c->qtail = NULL;
        s->queued = false;
        try_start(c, s);
    }
}

static void count_breaker(crawl_t *c, const nf_host_t *before, const nf_host_t *after)
{
    nf_counter_add(c->in->m.breaker_open, after->opened - before->opened);
    nf_counter_add(c->in->m.breaker_half_open, after->half_opened - before->half_opened);
    nf_counter_add(c->in->m.breaker_closed, after->closed - before->closed);
}

static void on_fetched(nf_shard_t *sh, nf_fetch_result_t *res, void *user);

static void try_start(crawl_t *c, src_t *s)
{
    if (c->stopping || s->in_flight || s->sched.status != NF_CRAWL_ACTIVE)
        return;
    if (c->cut_paused) {
        queue_push(c, s); /* started when the cut ends (not a capacity deferral) */
        return;
    }
    if (!has_capacity(c)) {
        enqueue(c, s);
        return;
    }
    int64_t now = wall_ms(), retry_at = 0;
    host_t *h = &c->hosts[s->host];
    nf_host_t before = h->h;
    if (!nf_host_may_start(&h->h, now, &retry_at)) {
        count_breaker(c, &before, &h->h);
        if (h->h.state == NF_BREAKER_OPEN)
            nf_counter_inc(c->in->m.deferred_breaker);
        else
            nf_counter_inc(c->in->m.deferred_host);
        arm_at(c, s, retry_at > now ? retry_at : now + 1);
        return;
    }
    count_breaker(c, &before, &h->h);
    s->probe = nf_host_started(&h->h, now);
    s->started_for_ms = s->sched.next_crawl_at_ms;
    s->started_ms = now;
    int64_t late = now - s->sched.next_crawl_at_ms;
    nf_histogram_observe(c->in->m.lateness_seconds, late > 0 ? (double)late / 1000.0 : 0.0);
    nf_fetcher_t *f = s->def->is_file ? c->file_fetcher : c->fetcher;
    const char *etag = s->sched.etag[0] ? s->sched.etag : NULL;
    const char *lm = s->sched.last_modified[0] ? s->sched.last_modified : NULL;
    if (nf_fetch_start(f, s->def->url, etag, lm, on_fetched, s) != 0) {
        nf_host_abandoned(&h->h, s->probe);
        nf_log(NF_LOG_ERROR, "fetch", "cannot start fetch; retrying in 1 min",
               NF_LS("source_id", s->def->source_id), NF_LS("url", s->def->url), NF_LEND);
        arm_at(c, s, now + 60000);
        return;
    }
    s->in_flight = true;
    c->in_flight++;
    nf_gauge_set(c->in->m.in_flight, c->in_flight);
}

static void on_due(nf_shard_t *sh, nf_timer_t *t, void *arg)
{
    src_t *s = arg;
    (void)sh;
    (void)t;
    /* The timer is monotonic, the schedule wall-clock: if the wall clock stepped back since the
     * timer was armed, the source is not due yet. Never fetch before next_crawl_at. */
    int64_t now = wall_ms();
    if (s->sched.status == NF_CRAWL_ACTIVE && !nf_crawl_due(&s->sched, now)) {
        arm_at(s->c, s, s->sched.next_crawl_at_ms);
        return;
    }
    try_start(s->c, s);
}

static void process_fetched(crawl_t *c, src_t *s, nf_fetch_result_t *res);

static void on_fetched(nf_shard_t *sh, nf_fetch_result_t *res, void *user)
{
    src_t *s = user;
    crawl_t *c = s->c;
    (void)sh;
    if (c->cut_paused && !c->stopping) {
        deferred_t *d = malloc(sizeof *d);
        if (d) {
            d->s = s;
            d->res = *res;
            res->body = NULL; /* the copy owns the body now */
            d->next = NULL;
            if (c->dtail)
                c->dtail->next = d;
            else
                c->dhead = d;
            c->dtail = d;
            return;
        }
        /* No memory to hold it: process now. The cut may then see this fetch's effects split
         * across epochs, which a crash can turn into a re-crawl — never into a loss, since the
         * articles' dedup entries and outputs still commit together. */
    }
    process_fetched(c, s, res);
}

static void process_fetched(crawl_t *c, src_t *s, nf_fetch_result_t *res)
{
    nf_ingest_metrics_t *m = &c->in->m;
    int64_t now = wall_ms();
    s->in_flight = false;
    s->dirty = true;
    c->in_flight--;
    nf_gauge_set(m->in_flight, c->in_flight);

    if (res->error == NF_FETCH_OK) {
        unsigned cls = (unsigned)res->http_status / 100;
        nf_counter_inc(m->fetch_http[cls >= 1 && cls <= 5 ? cls : 0]);
    } else {
        nf_counter_inc(m->fetch_result[res->error]);
    }
    nf_histogram_observe(m->fetch_seconds, (double)res->duration_ns / 1e9);
    nf_counter_add(m->fetch_bytes, res->bytes);

    host_t *h = &c->hosts[s->host];
    nf_host_t before = h->h;
    if (res->error == NF_FETCH_E_CANCELLED)
        nf_host_abandoned(&h->h, s->probe);
    else
        nf_host_finished(&h->h, now, s->probe, nf_crawl_host_ok(res->http_status, (int)res->error));
    count_breaker(c, &before, &h->h);

    char perr[256] = "";
    char error[300];
    const char *errtext = NULL;
    nf_crawl_status_t was = s->sched.status;
    if (res->error == NF_FETCH_OK && res->http_status / 100 == 2 && res->body) {
        int pr = parse_and_emit(c, s, res, now, perr, sizeof perr);
        if (pr != 0) {
            snprintf(error, sizeof error, "parse: %s", perr);
            errtext = error;
            nf_log(NF_LOG_WARN, "parse", "feed not parsed", NF_LS("source_id", s->def->source_id),
                   NF_LS("feed_url", s->def->url), NF_LS("error", perr), NF_LEND);
            /* The fetch worked but the document is not a feed: a failure of the source. */
            nf_crawl_set_validators(&s->sched, NULL, NULL);
            nf_crawl_on_result(&c->in->o.policy, &s->sched, NF_CRAWL_FAILED, -1, now, &c->rng);
        } else {
            nf_crawl_on_fetch(&c->in->o.policy, &s->sched, res, now, &c->rng);
        }
    } else {
        if (res->error != NF_FETCH_OK) {
            snprintf(error, sizeof error, "%s: %s", nf_fetch_error_name(res->error), res->message);
            errtext = error;
        } else if (res->http_status >= 400) {
            snprintf(error, sizeof error, "http %d", res->http_status);
            errtext = error;
        }
        nf_crawl_on_fetch(&c->in->o.policy, &s->sched, res, now, &c->rng);
        if (errtext && res->error != NF_FETCH_E_CANCELLED)
            nf_log(NF_LOG_INFO, "fetch", "fetch failed", NF_LS("source_id", s->def->source_id),
                   NF_LS("url", s->def->url), NF_LS("error", errtext),
                   NF_LI("failures", s->sched.failures), NF_LEND);
    }
    emit_fetch_log(c, s, res, errtext, now);
    if (was != NF_CRAWL_DEAD && s->sched.status == NF_CRAWL_DEAD) {
        nf_counter_inc(m->sources_dead);
        nf_log(NF_LOG_WARN, "crawl", "source is dead: not crawled until revived",
               NF_LS("source_id", s->def->source_id), NF_LS("url", s->def->url),
               NF_LS("last_error", errtext ? errtext : ""), NF_LEND);
    }
    if (!c->stopping && s->sched.status == NF_CRAWL_ACTIVE)
        arm_at(c, s, s->sched.next_crawl_at_ms);
    drain_queue(c);
}

/* ---------------------------------------------------------------- epochs and state */

/* Stored schedule: [expires_at_ms = 0: 8 bytes][format: 4 bytes][nf_crawl_schedule_t]. The
 * format word changes with the struct's size, so a build with another layout starts the
 * source afresh instead of misreading it. */
#define SCHED_FORMAT (0x53430000u | (uint32_t)sizeof(nf_crawl_schedule_t))

static void sched_key(const src_t *s, unsigned char key[18])
{
    nf_id128_t id = {0, 0};
    for (const char *p = s->def->source_id; *p; p++) {
        unsigned v = (unsigned)(*p <= '9' ? *p - '0' : (*p | 0x20) - 'a' + 10);
        id.hi = id.hi << 4 | (v & 15);
    }
    nf_kstate_encode_key((uint16_t)(id.hi % 256), id, key);
}

static bool sched_load(crawl_t *c, src_t *s)
{
    if (!c->in->store)
        return false;
    unsigned char key[18];
    sched_key(s, key);
    void *v = NULL;
    size_t len = 0;
    char err[256];
    int r = nf_store_get(c->in->store, NF_KIND_CRAWL_SCHEDULE, key, sizeof key, &v, &len, err,
                         sizeof err);
    bool ok = false;
    uint32_t fmt = 0;
    if (r == 1 && len == 12 + sizeof s->sched) {
        memcpy(&fmt, (char *)v + 8, 4);
        if (fmt == SCHED_FORMAT) {
            memcpy(&s->sched, (char *)v + 12, sizeof s->sched);
            s->sched.etag[sizeof s->sched.etag - 1] = 0;
            s->sched.last_modified[sizeof s->sched.last_modified - 1] = 0;
            ok = true;
        }
    } else if (r < 0) {
        nf_log(NF_LOG_ERROR, "crawl", "cannot read the source's schedule; starting it afresh",
               NF_LS("source_id", s->def->source_id), NF_LS("error", err), NF_LEND);
    }
    free(v);
    return ok;
}

static void crawl_snapshot(nf_shard_t *sh, void *self, nf_store_batch_t *b, uint64_t epoch)
{
    crawl_t *c = self;
    (void)sh;
    (void)epoch;
    unsigned char key[18], val[12 + sizeof(nf_crawl_schedule_t)];
    uint32_t fmt = SCHED_FORMAT;
    memset(val, 0, 8);
    memcpy(val + 8, &fmt, 4);
    for (size_t i = 0; i < c->nsrcs; i++) {
        src_t *s = &c->srcs[i];
        if (!s->dirty)
            continue;
        s->dirty = false;
        if (!b)
            continue;
        sched_key(s, key);
        memcpy(val + 12, &s->sched, sizeof s->sched);
        nf_store_batch_put(b, NF_KIND_CRAWL_SCHEDULE, key, sizeof key, val, sizeof val);
    }
}

static void crawl_cut_pause(nf_shard_t *sh, void *self)
{
    ((crawl_t *)self)->cut_paused = true;
    (void)sh;
}

static bool crawl_busy(nf_shard_t *sh, void *self)
{
    crawl_t *c = self;
    drain_overflow(c);
    (void)sh;
    return c->ohead != NULL;
}

static void crawl_cut_resume(nf_shard_t *sh, void *self)
{
    crawl_t *c = self;
    (void)sh;
    c->cut_paused = false;
    while (c->dhead) {
        deferred_t *d = c->dhead;
        c->dhead = d->next;
        if (!c->dhead)
            c->dtail = NULL;
        process_fetched(c, d->s, &d->res);
        free(d->res.body);
        free(d);
    }
    drain_queue(c);
}

static const nf_epoch_participant_t crawl_part = {.pause = crawl_cut_pause,
                                                  .busy = crawl_busy,
                                                  .snapshot = crawl_snapshot,
                                                  .resume = crawl_cut_resume};

/* ---------------------------------------------------------------- actor hooks */

static void *crawl_init(nf_shard_t *sh, void *ctx)
{
    nf_ingest_t *in = ctx;
    crawl_t *c = calloc(1, sizeof *c);
    if (!c)
        abort();
    c->in = in;
    c->sh = sh;
    c->rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)nf_shard_index(sh) << 32) ^ nf_now_ns();
    nf_jw_init(&c->jw);
    c->fetcher = nf_fetcher_create(sh, &in->o.fetch);
    nf_fetch_opts_t fo = in->o.fetch;
    fo.allow_file = true;
    c->file_fetcher = nf_fetcher_create(sh, &fo);
    if (!c->fetcher || !c->file_fetcher)
        abort();

    nf_runtime_t *rt = nf_shard_runtime(sh);
    unsigned me = nf_shard_index(sh);
    const nf_source_list_t *l = in->sources;
    size_t mine = 0;
    for (size_t i = 0; i < l->n; i++)
        mine += nf_route(rt, l->items[i].host_key) == me;
    c->srcs = calloc(mine ? mine : 1, sizeof *c->srcs);
    c->hosts = calloc(mine ? mine : 1, sizeof *c->hosts);
    nf_idset_t host_index;
    if (!c->srcs || !c->hosts || nf_idset_init(&host_index, mine * 2) != 0)
        abort();
    int64_t now = wall_ms();
    size_t restored = 0;
    for (size_t i = 0; i < l->n; i++) {
        const nf_source_def_t *d = &l->items[i];
        if (nf_route(rt, d->host_key) != me)
            continue;
        src_t *s = &c->srcs[c->nsrcs++];
        s->def = d;
        s->c = c;
        uint64_t hidx;
        nf_id128_t hid = {d->host_key, 0};
        if (!nf_idset_get(&host_index, hid, &hidx)) {
            hidx = c->nhosts++;
            nf_idset_insert(&host_index, hid, hidx, NULL);
            nf_host_init(&c->hosts[hidx].h, &in->o.policy);
            c->hosts[hidx].name = d->host;
        }
        s->host = (uint32_t)hidx;
        if (sched_load(c, s)) {
            nf_crawl_set_interval(&in->o.policy, &s->sched, d->interval_s);
            s->restored = true;
            restored++;
        } else {
            nf_crawl_init(&in->o.policy, &s->sched, d->interval_s, now, &c->rng);
        }
        s->dirty = true;
        nf_timer_init(&s->timer, on_due, s);
    }
    /* First crawls (and crawls overdue after a restart): spread over min(interval, 10 ms per
     * source) — at most ~100 first fetches per second per shard, so a large fleet does not
     * start in one burst while a handful of feeds is crawled at once (the policy's own spread
     * is the whole interval). */
    int64_t spread = (int64_t)c->nsrcs * 10;
    for (size_t i = 0; i < c->nsrcs; i++) {
        src_t *s = &c->srcs[i];
        int64_t own = s->sched.next_crawl_at_ms - now;
        if (s->restored ? own < 0 && s->sched.status == NF_CRAWL_ACTIVE : own > spread)
            nf_crawl_defer(&s->sched,
                           now + 1 + (int64_t)(nf_crawl_rng_next(&c->rng) % (uint64_t)(spread + 1)),
                           now);
        arm_at(c, s, s->sched.next_crawl_at_ms);
    }
    nf_idset_free(&host_index);
    nf_gauge_set(in->m.sources, (int64_t)c->nsrcs);
    if (in->epoch && nf_epoch_participant_add(in->epoch, sh, &crawl_part, c) != 0)
        abort();
    if (c->nsrcs)
        nf_log(NF_LOG_INFO, "crawl", "sources assigned", NF_LI("sources", c->nsrcs),
               NF_LI("hosts", c->nhosts), NF_LI("schedules_restored", restored), NF_LEND);
    return c;
}

static void crawl_handle(nf_shard_t *sh, void *self, const nf_msg_t *m)
{
    (void)sh;
    (void)self;
    nf_log(NF_LOG_ERROR, "crawl", "unexpected message", NF_LI("kind", m->kind), NF_LEND);
}

static void crawl_resume(nf_shard_t *sh, void *self)
{
    crawl_t *c = self;
    (void)sh;
    drain_overflow(c);
    drain_queue(c);
}

static void crawl_stop(nf_shard_t *sh, void *self)
{
    crawl_t *c = self;
    c->stopping = true;
    for (size_t i = 0; i < c->nsrcs; i++)
        nf_timer_cancel(sh, &c->srcs[i].timer);
    /* In-flight fetches end now, each recorded as a cancelled attempt. */
    nf_fetcher_destroy(c->fetcher);
    nf_fetcher_destroy(c->file_fetcher);
    c->fetcher = c->file_fetcher = NULL;
    drain_overflow(c);
}

static void crawl_fini(nf_shard_t *sh, void *self)
{
    crawl_t *c = self;
    if (!c->stopping)
        crawl_stop(sh, c);
    while (c->dhead) { /* finished during a final cut: not committed, crawled again */
        deferred_t *d = c->dhead;
        c->dhead = d->next;
        free(d->res.body);
        free(d);
    }
    while (c->ohead) { /* only after a forced shutdown */
        nf_article_blob_t *b = c->ohead;
        c->ohead = b->next;
        free(b);
    }
    nf_jw_free(&c->jw);
    free(c->srcs);
    free(c->hosts);
    free(c);
}

const nf_actor_ops_t nf_crawl_ops = {.name = "crawl",
                                     .init = crawl_init,
                                     .handle = crawl_handle,
                                     .resume = crawl_resume,
                                     .stop = crawl_stop,
                                     .fini = crawl_fini};
