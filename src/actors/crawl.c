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
 * next epoch cut (NF_KIND_CRAWL_SCHEDULE, key = nf_ingest_source_key(source_id)) and read back
 * at start, so a restart keeps next_crawl_at, backoff, validators and status. The value also
 * carries the source's definition; for a source of the sources topic that definition is what
 * recreates it at start (the topic's records before the committed position are not re-read).
 *
 * Sources come from the configuration (read-only, shared by every shard) and from the sources
 * topic (NF_MSG_SOURCE_SET / _FORGET, ingest.h), so they come and go: each is its own heap
 * object that never moves (its timer is intrusive, and a running fetch and the deferred list
 * point at it), srcs[] holds pointers (removal swaps the last one in) and bykey finds them by
 * key. A source forgotten while its fetch runs stays allocated, marked removed, until the fetch
 * completes: the attempt still gets its fetch-log record, nothing else. Hosts are only added
 * (a source refers to its host by index into a table that may grow and move).
 *
 * Epoch cuts: while a cut is in progress (pause .. resume) nothing new starts and a finished
 * fetch is held unprocessed — its schedule update, fetch-log record and articles must land in
 * the same epoch (a schedule committed with a new ETag but without the articles would lose them
 * on the next conditional GET). */
#include "actors/analytics.h"
#include "actors/article_msg.h"
#include "actors/ingest.h"
#include "algo/sha256.h"
#include "feed/dates.h"
#include "runtime/jsonw.h"
#include "runtime/log.h"
#include "state/kstate.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct crawl crawl_t;

typedef struct src {
    nf_timer_t timer;
    nf_crawl_schedule_t sched;
    crawl_t *c;
    const char *id, *url;  /* the configured definition's strings, or into own */
    char *own;             /* "id\0url\0" of a definition that came by message, else NULL */
    char *old_own;         /* the strings the running fetch started with, after a URL change */
    const char *fetch_url; /* URL of the running (or last) fetch */
    nf_id128_t key;        /* nf_ingest_source_key(id) */
    int32_t part;          /* in_partitions: the sources partition its record is in, else -1 */
    uint32_t interval_s;   /* 0 = the crawl default */
    uint32_t host, fhost;  /* indexes into crawl_t.hosts: now, and of the running fetch */
    size_t pos;            /* index into crawl_t.srcs */
    uint8_t type, want;    /* the topic's type and status (nf_source_*_t; ACTIVE if none) */
    bool from_topic, is_file;
    bool in_flight, queued, probe, dirty, restored;
    bool sent;              /* the running fetch's request went out (nf_host_sent) */
    bool removed;           /* forgotten while its fetch ran: freed when the fetch completes */
    bool stale_fetch;       /* its URL changed while the fetch ran: that result is not applied */
    int64_t started_for_ms; /* next_crawl_at the running fetch was due at (fetch_id) */
    int64_t started_ms;
    /* crawl-now (memory only: see crawl_now): the last request applied, the one the running
     * fetch answers, the one the last finished fetch answered; a request that came while a
     * fetch ran is answered by another fetch once it ends */
    int64_t crawl_at_ms, crawl_answering, crawl_answered;
    bool crawl_pending;
    struct src *qnext;
    /* For operators (logs, /v1/sources): the last failure, kept while the source is failing. */
    nf_crawl_failure_log_t flog;
    char *last_error;                  /* malloc'ed; NULL once a fetch succeeds */
    int64_t last_error_ms, last_ok_ms; /* wall clock; 0 = none in this run */
    int64_t since_ms;     /* wall clock: when this shard took it (coverage, until it answers) */
    nf_trace_ctx_t trace; /* the running fetch's trace and its crawl.fetch span (trace.h) */
    int64_t trace_start_ns;
} src_t;

typedef struct {
    nf_host_t h;
    char *name;
} host_t;

/* 128-bit key -> pointer; open addressing, linear probing, backward-shift deletion (sources
 * come and go, so nf_idset, which never deletes, does not fit). */
typedef struct {
    nf_id128_t key;
    void *val; /* NULL: empty slot */
} kslot_t;

typedef struct {
    kslot_t *slots;
    size_t mask, count;
} kmap_t;

struct crawl {
    nf_ingest_t *in;
    nf_shard_t *sh;
    nf_fetcher_t *fetcher;
    nf_fetcher_t *file_fetcher; /* file:// allowed: only for operator-listed local sources */
    src_t **srcs;
    size_t nsrcs, srcs_cap;
    kmap_t bykey;   /* source key -> src_t */
    kmap_t deletes; /* keys whose state the next cut deletes (value: del_mark of the key group) */
    host_t *hosts;
    size_t nhosts, hosts_cap;
    nf_idset_t host_index; /* host_key -> index into hosts */
    src_t *qhead, *qtail;  /* due sources waiting for capacity */
    unsigned in_flight;
    nf_article_blob_t *ohead, *otail; /* articles refused by a full ring, in order */
    size_t opending;
    uint64_t rng;
    nf_jw_t jw;
    bool stopping;
    bool cut_paused;
    struct deferred *dhead, *dtail; /* fetches finished during a cut */
    /* analytics.h: classification and MinHash of each article, on this shard */
    nf_classify_ctx_t *cls; /* NULL: no taxonomy */
    nf_classify_result_t cres;
    nf_minhash_scratch_t mhs;
    uint32_t health_n[NF_CRAWL_HEALTH_N]; /* sources by nf_crawl_health(), for the gauge */
    nf_timer_t coverage;                  /* the crawl coverage SLO's gauges, every 5 s */
};

typedef struct deferred {
    struct deferred *next;
    src_t *s;
    nf_fetch_result_t res;
} deferred_t;

static void arm_at(crawl_t *c, src_t *s, int64_t at_ms)
{
    int64_t delta = at_ms - nf_wall_ms();
    uint64_t now = nf_now_ns();
    nf_timer_arm(c->sh, &s->timer, delta > 0 ? now + (uint64_t)delta * 1000000ull : now, 0);
}

static void out_of_memory(crawl_t *c, const char *what, const char *source_id)
{
    /* The change is lost with this run: the job stops before the epoch holding the record's
     * position commits, so the record is read again after the restart. */
    nf_log(NF_LOG_ERROR, "crawl", "out of memory; stopping the job", NF_LS("while", what),
           NF_LS("source_id", source_id), NF_LEND);
    nf_runtime_fail(nf_shard_runtime(c->sh));
}

/* ---------------------------------------------------------------- key map */

static size_t kmap_hash(nf_id128_t k)
{
    uint64_t x = k.hi ^ (k.lo * 0x9e3779b97f4a7c15ull);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x;
}

static bool key_eq(nf_id128_t a, nf_id128_t b)
{
    return a.hi == b.hi && a.lo == b.lo;
}

static void *kmap_get(const kmap_t *m, nf_id128_t k)
{
    if (!m->slots)
        return NULL;
    for (size_t i = kmap_hash(k) & m->mask;; i = (i + 1) & m->mask) {
        if (!m->slots[i].val)
            return NULL;
        if (key_eq(m->slots[i].key, k))
            return m->slots[i].val;
    }
}

static int kmap_grow(kmap_t *m)
{
    size_t cap = m->slots ? (m->mask + 1) * 2 : 64;
    kslot_t *t = calloc(cap, sizeof *t);
    if (!t)
        return -ENOMEM;
    for (size_t i = 0; m->slots && i <= m->mask; i++) {
        if (!m->slots[i].val)
            continue;
        size_t j = kmap_hash(m->slots[i].key) & (cap - 1);
        while (t[j].val)
            j = (j + 1) & (cap - 1);
        t[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = t;
    m->mask = cap - 1;
    return 0;
}

/* Inserts or replaces (val non-NULL). 0 or -ENOMEM. */
static int kmap_put(kmap_t *m, nf_id128_t k, void *val)
{
    assert(val);
    if ((!m->slots || (m->count + 1) * 4 > (m->mask + 1) * 3) && kmap_grow(m) != 0)
        return -ENOMEM;
    size_t i = kmap_hash(k) & m->mask;
    while (m->slots[i].val && !key_eq(m->slots[i].key, k))
        i = (i + 1) & m->mask;
    if (!m->slots[i].val)
        m->count++;
    m->slots[i].key = k;
    m->slots[i].val = val;
    return 0;
}

static void kmap_del(kmap_t *m, nf_id128_t k)
{
    if (!m->slots)
        return;
    size_t i = kmap_hash(k) & m->mask;
    while (m->slots[i].val && !key_eq(m->slots[i].key, k))
        i = (i + 1) & m->mask;
    if (!m->slots[i].val)
        return;
    m->slots[i].val = NULL;
    m->count--;
    /* Close the hole: a later member of the probe run moves into it unless its home slot lies
     * cyclically in (hole, j] (then it is still reachable from home without the hole). */
    for (size_t j = (i + 1) & m->mask; m->slots[j].val; j = (j + 1) & m->mask) {
        size_t home = kmap_hash(m->slots[j].key) & m->mask;
        if (((j - home) & m->mask) >= ((j - i) & m->mask)) {
            m->slots[i] = m->slots[j];
            m->slots[j].val = NULL;
            i = j;
        }
    }
}

/* The key group of a source's state: its sources partition in a consumer group (what a
 * rebalance moves, with the changelog: changelog.h), else id.hi % 256. */
static uint16_t key_group(nf_id128_t id, int32_t part)
{
    return part >= 0 ? (uint16_t)part : (uint16_t)(id.hi % 256);
}

static void state_key(nf_id128_t id, int32_t part, unsigned char key[18])
{
    nf_kstate_encode_key(key_group(id, part), id, key);
}

/* The deletes map's value for a key group (non-NULL, as the map requires), and back. */
static void *del_mark(uint16_t kg)
{
    return (void *)((uintptr_t)kg + 1);
}
static uint16_t del_group(const void *mark)
{
    return (uint16_t)((uintptr_t)mark - 1);
}

static void kmap_free(kmap_t *m)
{
    free(m->slots);
    *m = (kmap_t){0};
}

/* ---------------------------------------------------------------- articles out */

/* In a consumer group (in_partitions) an article goes to the job's one deduplicating process
 * as a record of the one-partition topic, in this epoch's transaction with the schedule that
 * found it (ingest.h); else to the dedup shard that owns its id. false: the ring is full. */
static bool send_blob(crawl_t *c, nf_article_blob_t *b)
{
    if (c->in->in_partitions) {
        size_t len = 0;
        unsigned char *rec = nf_article_blob_encode(b, &len);
        /* key: the article id (the record's bytes 1..16) */
        int r = rec ? nf_epoch_emit(c->in->epoch, nf_shard_index(c->sh), NF_TOPIC_TRENDING_PANES,
                                    (const char *)rec + 1, 16, (const char *)rec, len)
                    : -ENOMEM;
        free(rec);
        if (r != 0)
            out_of_memory(c, "handing an article to the deduplicating process", b->article_id);
        free(b);
        return true;
    }
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
        /* b belongs to the receiver once sent (dedup on another shard may have freed it): its
         * successor is read before. */
        nf_article_blob_t *b = c->ohead, *next = b->next;
        if (!send_blob(c, b))
            break;
        c->ohead = next;
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
    nf_jw_str(w, s->id);
    nf_jw_key(w, "feed_url");
    nf_jw_str(w, s->url);
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
    nf_analytics_t *an = c->in->an;
    nf_classify_result_t *cr = &c->cres;
    cr->ntopics = cr->nlabels = 0;
    if (c->cls) {
        uint64_t t0 = nf_now_ns();
        nf_span_t cs;
        if (s->trace.sampled)
            nf_span_child(&cs, "classify", &s->trace, NF_SPAN_INTERNAL);
        if (nf_classify_text(c->cls, a->title, a->body, cr) != 0)
            return NULL;
        nf_histogram_observe(c->in->m.classify_seconds, (double)(nf_now_ns() - t0) / 1e9);
        if (s->trace.sampled) {
            nf_span_str(&cs, "newsflow.article_id", a->article_id);
            nf_span_int(&cs, "newsflow.topics", (int64_t)cr->ntopics);
            nf_span_end(&cs, NULL);
            nf_span_export(&cs, false);
        }
    }
    if (an && an->taxonomy) {
        nf_classify_json(an->taxonomy, cr, w);
    } else {
        nf_jw_key(w, "category_labels");
        nf_jw_arr_open(w);
        nf_jw_arr_close(w);
        nf_jw_key(w, "topics");
        nf_jw_obj_open(w);
        nf_jw_obj_close(w);
    }
    nf_jw_obj_close(w);
    if (w->failed)
        return NULL;
    /* The signature lives in the same block, after the JSON, 4-byte aligned. */
    unsigned nsig = an && an->mh ? nf_minhash_opts(an->mh)->hashes : 0;
    size_t sig_off = (w->len + 1 + 3) & ~(size_t)3;
    nf_article_blob_t *b = malloc(sizeof *b + sig_off + (size_t)nsig * sizeof(uint32_t));
    if (!b)
        return NULL;
    if (nf_id128_from_hex(a->article_id, &b->id) != 0) {
        free(b);
        return NULL;
    }
    b->nsig = nsig;
    b->sig = nsig ? (uint32_t *)(void *)(b->json + sig_off) : NULL;
    if (nsig && nf_minhash_sign_text(an->mh, &c->mhs, a->title, strlen(a->title), a->body,
                                     strlen(a->body), b->sig) != 0) {
        free(b);
        return NULL;
    }
    /* The topic vector for interest, canonical (by topic index; interest.h). */
    b->topics.n = 0;
    for (unsigned i = 0; i < cr->ntopics && i < NF_TOPICS_MAX; i++) {
        unsigned j = b->topics.n++;
        while (j > 0 && b->topics.t[j - 1].topic > cr->topics[i].topic) {
            b->topics.t[j] = b->topics.t[j - 1];
            j--;
        }
        b->topics.t[j].topic = cr->topics[i].topic;
        b->topics.t[j].weight = cr->topics[i].weight;
    }
    memcpy(b->article_id, a->article_id, sizeof b->article_id);
    b->ingested_ms = now;
    b->published_ms = 0;
    b->len = w->len;
    memcpy(b->json, w->buf, w->len + 1);
    return b;
}

/* ---------------------------------------------------------------- fetch-log */

static void emit_fetch_log(crawl_t *c, const src_t *s, const nf_fetch_result_t *res,
                           const char *error, int64_t now)
{
    char seed[NF_SOURCE_ID_MAX + 32], fetch_id[33];
    uint8_t digest[32];
    int n = snprintf(seed, sizeof seed, "%s:%lld", s->id, (long long)s->started_for_ms);
    nf_sha256(seed, n > 0 && (size_t)n < sizeof seed ? (size_t)n : strlen(seed), digest);
    nf_hex(digest, 16, fetch_id);
    nf_jw_t *w = &c->jw;
    nf_jw_reset(w);
    nf_jw_obj_open(w);
    nf_jw_key(w, "fetch_id");
    nf_jw_str(w, fetch_id);
    nf_jw_key(w, "source_id");
    nf_jw_str(w, s->id);
    nf_jw_key(w, "url");
    nf_jw_str(w, s->fetch_url);
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
    if (w->failed || nf_ingest_emit(c->in, nf_shard_index(c->sh), NF_TOPIC_FETCH_LOG, s->id, w->buf,
                                    w->len) != 0)
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
    nf_span_t ps;
    nf_span_child(&ps, "feed.parse", &s->trace, NF_SPAN_INTERNAL);
    const char *base = res->effective_url[0] ? res->effective_url : s->fetch_url;
    int r =
        nf_feed_parse(&feed, res->body, res->body_len, base, now, &c->in->o.limits, err, errlen);
    nf_histogram_observe(m->parse_seconds, (double)(nf_now_ns() - t0) / 1e9);
    nf_span_int(&ps, "newsflow.items", r == 0 ? (int64_t)feed.nitems : 0);
    nf_span_end(&ps, r != 0 ? "not a feed" : NULL);
    nf_span_export(&ps, r != 0);
    unsigned idx = r == 0 ? 0 : (unsigned)-r;
    nf_counter_inc(m->parse_result[idx < 6 ? idx : 2]);
    if (r != 0)
        return r;
    nf_counter_add(m->parse_warnings, feed.warnings);
    nf_counter_add(m->parse_truncated, feed.truncated_items);
    size_t replaced = 0;
    char first[40] = "";
    for (size_t i = 0; i < feed.nitems; i++) {
        nf_article_t *a = &feed.items[i];
        if (!a->url || !a->article_id[0]) {
            nf_counter_inc(m->parse_no_link);
            continue;
        }
        int64_t pub = a->published_ms, upd = a->updated_ms;
        int n = nf_article_bound_dates(a, now, c->in->o.max_future_ms);
        if (n > 0) {
            nf_counter_add(m->parse_dates_replaced, (uint64_t)n);
            if (!replaced++)
                nf_date_format(a->published_ms != pub ? pub : upd, first, sizeof first);
        }
        nf_article_blob_t *b = article_blob(c, a, s, now);
        if (b && !a->date_fallback && a->published_ms == pub)
            b->published_ms = pub; /* a real date, kept as the feed gave it */
        if (b)
            b->trace = s->trace; /* dedup's span is a child of the fetch */
        if (!b) {
            nf_log(NF_LOG_ERROR, "parse", "cannot build article (out of memory)",
                   NF_LS("source_id", s->id), NF_LS("url", a->url), NF_LEND);
            continue;
        }
        nf_counter_inc(m->parse_articles);
        emit_article(c, b);
    }
    if (replaced) /* one line per fetch: a feed with a wrong zone has it on every item */
        nf_log(NF_LOG_WARN, "parse",
               "article dates after the fetch time + trending.max_future_ms, or at or before "
               "1970, replaced by the other date or the fetch time",
               NF_LS("source_id", s->id), NF_LS("url", s->fetch_url),
               NF_LI("articles", (int64_t)replaced), NF_LS("first_date", first), NF_LEND);
    nf_feed_free(&feed);
    return 0;
}

/* ---------------------------------------------------------------- scheduling */

static void try_start(crawl_t *c, src_t *s);

static bool has_capacity(const crawl_t *c)
{
    return c->in_flight < c->in->o.max_in_flight && c->opending < c->in->o.max_pending_articles;
}

static void queue_append(crawl_t *c, src_t *s)
{
    s->queued = true;
    s->qnext = NULL;
    if (c->qtail)
        c->qtail->qnext = s;
    else
        c->qhead = s;
    c->qtail = s;
}

static void enqueue(crawl_t *c, src_t *s)
{
    if (s->queued)
        return;
    queue_append(c, s);
    nf_counter_inc(c->in->m.deferred_capacity);
}

/* Takes s out of the queue (a removed source; rare, so a walk is fine). */
static void dequeue(crawl_t *c, src_t *s)
{
    src_t *prev = NULL;
    for (src_t *q = c->qhead; q; prev = q, q = q->qnext) {
        if (q != s)
            continue;
        if (prev)
            prev->qnext = s->qnext;
        else
            c->qhead = s->qnext;
        if (c->qtail == s)
            c->qtail = prev;
        break;
    }
    s->queued = false;
    s->qnext = NULL;
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

/* The fetcher writes a request of s's running fetch (fetch.h `sent`): its host's spacing counts
 * from now. */
static void on_sent(void *user)
{
    src_t *s = user;
    nf_host_sent(&s->c->hosts[s->fhost].h, nf_wall_ms(), !s->sent);
    s->sent = true;
}

/* s's running fetch ended: one that never went out counts as sent now (crawl_policy.h). */
static void host_ended(crawl_t *c, src_t *s, int64_t now)
{
    if (!s->sent)
        nf_host_sent(&c->hosts[s->fhost].h, now, true);
    s->sent = true;
}

static void try_start(crawl_t *c, src_t *s)
{
    if (c->stopping || s->in_flight || s->sched.status != NF_CRAWL_ACTIVE)
        return;
    if (c->cut_paused) {
        if (!s->queued)
            queue_append(c, s); /* started when the cut ends (not a capacity deferral) */
        return;
    }
    if (!has_capacity(c)) {
        enqueue(c, s);
        return;
    }
    int64_t now = nf_wall_ms(), retry_at = 0;
    if (c->in->in_partitions && nf_kafka_member_lost(c->in->kafka)) {
        /* Its session expired: the source may be another process's now, and this job stops
         * once its rebalance callback runs. */
        nf_counter_inc(c->in->m.deferred_membership);
        arm_at(c, s, now + 1000);
        return;
    }
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
    s->sent = false;
    s->fhost = s->host;
    s->started_for_ms = s->sched.next_crawl_at_ms;
    s->started_ms = now;
    s->crawl_answering = s->crawl_at_ms;
    int64_t late = now - s->sched.next_crawl_at_ms;
    nf_histogram_observe(c->in->m.lateness_seconds, late > 0 ? (double)late / 1000.0 : 0.0);
    nf_fetcher_t *f = s->is_file ? c->file_fetcher : c->fetcher;
    const char *etag = s->sched.etag[0] ? s->sched.etag : NULL;
    const char *lm = s->sched.last_modified[0] ? s->sched.last_modified : NULL;
    if (nf_fetch_start(f, s->url, etag, lm, on_fetched, s) != 0) {
        host_ended(c, s, now);
        nf_host_abandoned(&h->h, s->probe);
        nf_log(NF_LOG_ERROR, "fetch", "cannot start fetch; retrying in 1 min",
               NF_LS("source_id", s->id), NF_LS("url", s->url), NF_LEND);
        arm_at(c, s, now + 60000);
        return;
    }
    s->in_flight = true;
    s->fetch_url = s->url;
    nf_span_t sp;
    nf_span_root(&sp, "crawl.fetch", NF_SPAN_CLIENT);
    s->trace = sp.ctx;
    s->trace_start_ns = sp.start_ns;
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
    int64_t now = nf_wall_ms();
    if (s->sched.status == NF_CRAWL_ACTIVE && !nf_crawl_due(&s->sched, now)) {
        arm_at(s->c, s, s->sched.next_crawl_at_ms);
        return;
    }
    try_start(s->c, s);
}

/* Arms s at its next_crawl_at if it is crawled at all (a running or queued fetch re-arms or
 * starts it when it is done). */
static void arm_src(crawl_t *c, src_t *s)
{
    if (!c->stopping && !s->in_flight && !s->queued && s->sched.status == NF_CRAWL_ACTIVE)
        arm_at(c, s, s->sched.next_crawl_at_ms);
}

/* First crawls (and crawls overdue after a restart): spread over min(interval, 10 ms per
 * source) — at most ~100 first fetches per second per shard, so a large fleet does not start in
 * one burst while a handful of feeds is crawled at once (the policy's own spread is the whole
 * interval). A restored schedule keeps its time unless it is overdue. */
static void first_crawl_spread(crawl_t *c, src_t *s, bool restored, int64_t now)
{
    int64_t spread = (int64_t)c->nsrcs * 10;
    int64_t own = s->sched.next_crawl_at_ms - now;
    if (restored ? own < 0 && s->sched.status == NF_CRAWL_ACTIVE : own > spread)
        nf_crawl_defer(&s->sched,
                       now + 1 + (int64_t)(nf_crawl_rng_next(&c->rng) % (uint64_t)(spread + 1)),
                       now);
}

static void src_free(src_t *s);
static void process_fetched(crawl_t *c, src_t *s, nf_fetch_result_t *res);
static void health_gauges(crawl_t *c);

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

/* The error text of a fetch result for fetch-log (NULL: none), into buf. */
static const char *fetch_error_text(const nf_fetch_result_t *res, char *buf, size_t len)
{
    if (res->error != NF_FETCH_OK) {
        snprintf(buf, len, "%s: %s", nf_fetch_error_name(res->error), res->message);
        return buf;
    }
    if (res->http_status >= 400) {
        snprintf(buf, len, "http %d", res->http_status);
        return buf;
    }
    return NULL;
}

/* A fetch result as operators see it: the source's health counts, its last error, and the one
 * log policy for failing sources (crawl_policy.h: warn on the first failure and on each change
 * of health, then at most once per 10 minutes per source with the number suppressed; recovery at
 * info). */
static void source_outcome(crawl_t *c, src_t *s, nf_crawl_health_t before,
                           nf_crawl_outcome_t outcome, const char *errtext, int64_t now)
{
    nf_crawl_health_t after = nf_crawl_health(&s->sched);
    if (before != after) {
        c->health_n[before]--;
        c->health_n[after]++;
        health_gauges(c);
    }
    bool failed = outcome == NF_CRAWL_FAILED || outcome == NF_CRAWL_FAILED_PERMANENT;
    if (failed) {
        const char *e = errtext ? errtext : nf_crawl_outcome_name(outcome);
        char *copy = strdup(e);
        if (copy) { /* without memory the previous error stays: status shows an older reason */
            free(s->last_error);
            s->last_error = copy;
        }
        s->last_error_ms = now;
    } else if (outcome == NF_CRAWL_OK || outcome == NF_CRAWL_NOT_MODIFIED) {
        free(s->last_error);
        s->last_error = NULL;
        s->last_ok_ms = now;
    }
    uint32_t suppressed;
    uint32_t unlogged = s->flog.suppressed;
    nf_crawl_log_t d = nf_crawl_failure_log(&s->flog, before, after, failed, now, &suppressed);
    const char *err = errtext ? errtext : "";
    double retry_s = (double)(s->sched.next_crawl_at_ms - now) / 1000.0;
    char tid[33]; /* the failed fetch's trace (always exported): the named event crawl.error */
    nf_trace_id_hex(&s->trace, tid);
    switch (d) {
    case NF_CRAWL_LOG_WARN:
        nf_log(NF_LOG_WARN, "crawl",
               after == NF_CRAWL_HEALTH_DEAD ? "source is dead: not crawled until revived"
                                             : "source failing",
               NF_LS("event", "crawl.error"), NF_LS("trace_id", tid), NF_LS("source_id", s->id),
               NF_LS("url", s->url), NF_LS("error", err),
               NF_LS("state", nf_crawl_health_name(after)), NF_LI("failures", s->sched.failures),
               NF_LF("retry_in_s", after == NF_CRAWL_HEALTH_DEAD ? 0.0 : retry_s),
               NF_LI("suppressed", suppressed), NF_LEND);
        break;
    case NF_CRAWL_LOG_SUPPRESSED:
        nf_counter_inc(c->in->m.failure_logs_suppressed);
        nf_log(NF_LOG_DEBUG, "crawl", "source failing (repeat)", NF_LS("event", "crawl.error"),
               NF_LS("trace_id", tid), NF_LS("source_id", s->id), NF_LS("url", s->url),
               NF_LS("error", err), NF_LI("failures", s->sched.failures), NF_LEND);
        break;
    case NF_CRAWL_LOG_RECOVERED:
        nf_log(NF_LOG_INFO, "crawl", "source recovered", NF_LS("source_id", s->id),
               NF_LS("url", s->url), NF_LS("was", nf_crawl_health_name(before)),
               NF_LI("unlogged_failures", unlogged), NF_LEND);
        break;
    case NF_CRAWL_LOG_QUIET:
        break;
    }
}

/* The fetch's root span (crawl.fetch, from the start to the result applied): exported when its
 * trace is sampled, and always for a failure. */
static void fetch_span(const src_t *s, const nf_fetch_result_t *res, const char *errtext)
{
    if (!nf_trace_on())
        return;
    nf_span_t sp;
    nf_span_at(&sp, "crawl.fetch", &s->trace, 0, s->trace_start_ns, NF_SPAN_CLIENT);
    nf_span_str(&sp, "newsflow.source_id", s->id);
    nf_span_str(&sp, "url.full", s->fetch_url);
    nf_span_int(&sp, "http.response.status_code", res->http_status);
    nf_span_int(&sp, "newsflow.bytes", (int64_t)res->bytes);
    nf_span_end(&sp, errtext);
    /* a fetch cut short by the job's stop is no error of the source's: not forced out */
    nf_span_export(&sp, errtext != NULL && res->error != NF_FETCH_E_CANCELLED);
}

static void process_fetched(crawl_t *c, src_t *s, nf_fetch_result_t *res)
{
    nf_ingest_metrics_t *m = &c->in->m;
    int64_t now = nf_wall_ms();
    s->in_flight = false;
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

    host_t *h = &c->hosts[s->fhost];
    nf_host_t before = h->h;
    host_ended(c, s, now);
    if (res->error == NF_FETCH_E_CANCELLED)
        nf_host_abandoned(&h->h, s->probe);
    else
        nf_host_finished(&h->h, now, s->probe, nf_crawl_host_ok(res->http_status, (int)res->error));
    count_breaker(c, &before, &h->h);

    char perr[256] = "";
    char error[300];
    const char *errtext = NULL;
    if (s->removed || s->stale_fetch) {
        /* The source was forgotten or got another URL meanwhile: the attempt happened and is
         * recorded, but its result belongs to a definition that no longer exists. */
        emit_fetch_log(c, s, res, fetch_error_text(res, error, sizeof error), now);
        if (s->removed) {
            src_free(s);
        } else {
            s->stale_fetch = false;
            free(s->old_own);
            s->old_own = NULL;
            s->fetch_url = s->url;
            arm_src(c, s); /* due since the old fetch started: the new URL is fetched soon */
        }
        drain_queue(c);
        return;
    }
    s->dirty = true;
    nf_crawl_status_t was = s->sched.status;
    nf_crawl_health_t health = nf_crawl_health(&s->sched);
    nf_crawl_outcome_t outcome;
    if (res->error == NF_FETCH_OK && res->http_status / 100 == 2 && res->body) {
        int pr = parse_and_emit(c, s, res, now, perr, sizeof perr);
        if (pr != 0) {
            snprintf(error, sizeof error, "parse: %s", perr);
            errtext = error;
            /* The fetch worked but the document is not a feed: a failure of the source. */
            nf_crawl_set_validators(&s->sched, NULL, NULL);
            outcome = NF_CRAWL_FAILED;
            nf_crawl_on_result(&c->in->o.policy, &s->sched, outcome, -1, now, &c->rng);
        } else {
            outcome = nf_crawl_on_fetch(&c->in->o.policy, &s->sched, res, now, &c->rng);
        }
    } else {
        errtext = fetch_error_text(res, error, sizeof error);
        outcome = nf_crawl_on_fetch(&c->in->o.policy, &s->sched, res, now, &c->rng);
    }
    emit_fetch_log(c, s, res, errtext, now);
    fetch_span(s, res, errtext);
    if (was != NF_CRAWL_DEAD && s->sched.status == NF_CRAWL_DEAD)
        nf_counter_inc(m->sources_dead);
    source_outcome(c, s, health, outcome, errtext, now);
    s->crawl_answered = s->crawl_answering;
    if (s->crawl_pending) { /* a crawl-now that came while this fetch ran: another one now */
        s->crawl_pending = false;
        if (s->sched.status == NF_CRAWL_ACTIVE)
            s->sched.next_crawl_at_ms = now;
    }
    if (!c->stopping && s->sched.status == NF_CRAWL_ACTIVE)
        arm_at(c, s, s->sched.next_crawl_at_ms);
    drain_queue(c);
}

/* ---------------------------------------------------------------- sources and hosts */

/* The index of host_key's entry, created if new; -1 without memory. */
static long host_of(crawl_t *c, uint64_t host_key, const char *name)
{
    uint64_t idx;
    nf_id128_t hid = {host_key, 0};
    if (nf_idset_get(&c->host_index, hid, &idx))
        return (long)idx;
    if (c->nhosts == c->hosts_cap) {
        size_t cap = c->hosts_cap ? c->hosts_cap * 2 : 16;
        host_t *t = realloc(c->hosts, cap * sizeof *t);
        if (!t)
            return -1;
        c->hosts = t;
        c->hosts_cap = cap;
    }
    char *copy = strdup(name);
    if (!copy || nf_idset_insert(&c->host_index, hid, c->nhosts, NULL) < 0) {
        free(copy);
        return -1;
    }
    host_t *h = &c->hosts[c->nhosts];
    nf_host_init(&h->h, &c->in->o.policy);
    nf_host_adopted(&h->h, nf_wall_ms()); /* this process's previous run, or another, may
                                             have just sent it a request */
    h->name = copy;
    return (long)c->nhosts++;
}

/* A new source of this shard (no definition, no schedule yet), indexed under key. */
static src_t *src_new(crawl_t *c, nf_id128_t key, uint64_t host_key, const char *host)
{
    if (c->nsrcs == c->srcs_cap) {
        size_t cap = c->srcs_cap ? c->srcs_cap * 2 : 64;
        src_t **t = realloc(c->srcs, cap * sizeof *t);
        if (!t)
            return NULL;
        c->srcs = t;
        c->srcs_cap = cap;
    }
    long h = host_of(c, host_key, host);
    src_t *s = h < 0 ? NULL : calloc(1, sizeof *s);
    if (!s || kmap_put(&c->bykey, key, s) != 0) {
        free(s);
        return NULL;
    }
    s->c = c;
    s->key = key;
    s->part = -1;
    s->host = s->fhost = (uint32_t)h;
    s->want = NF_SOURCE_ACTIVE;
    s->since_ms = nf_wall_ms();
    nf_timer_init(&s->timer, on_due, s);
    s->pos = c->nsrcs;
    c->srcs[c->nsrcs++] = s;
    return s;
}

static void src_free(src_t *s)
{
    free(s->last_error);
    free(s->own);
    free(s->old_own);
    free(s);
}

/* Takes s out of the shard (timer, queue, index, srcs); frees it unless its fetch runs. */
static void src_drop(crawl_t *c, src_t *s)
{
    nf_timer_cancel(c->sh, &s->timer);
    if (s->queued)
        dequeue(c, s);
    kmap_del(&c->bykey, s->key);
    c->srcs[s->pos] = c->srcs[--c->nsrcs];
    c->srcs[s->pos]->pos = s->pos;
    if (s->in_flight)
        s->removed = true;
    else
        src_free(s);
}

/* s's id and url become an own copy of these. A running fetch keeps reading the URL it started
 * with (fetch-log names it), so those strings live on until it completes. 0 or -ENOMEM. */
static int src_set_url(src_t *s, const char *id, const char *url)
{
    size_t li = strlen(id) + 1, lu = strlen(url) + 1;
    char *own = malloc(li + lu);
    if (!own)
        return -ENOMEM;
    memcpy(own, id, li);
    memcpy(own + li, url, lu);
    if (s->in_flight && !s->stale_fetch) {
        s->old_own = s->own; /* NULL when they are the configuration's, which never go away */
        s->stale_fetch = true;
    } else {
        free(s->own);
    }
    s->own = own;
    s->id = own;
    s->url = own + li;
    return 0;
}

/* The topic's status, applied (see ingest.h). */
static void apply_status(crawl_t *c, src_t *s, uint8_t status, int64_t now)
{
    switch (status) {
    case NF_SOURCE_PAUSED:
        nf_crawl_pause(&s->sched);
        nf_timer_cancel(c->sh, &s->timer);
        break;
    case NF_SOURCE_DEAD:
        s->sched.status = NF_CRAWL_DEAD; /* as if the policy had declared it: never due */
        nf_timer_cancel(c->sh, &s->timer);
        break;
    default:
        if (s->sched.status != NF_CRAWL_ACTIVE) {
            nf_crawl_revive(&s->sched, now, &c->rng);
            s->since_ms = now; /* coverage counts from here, not from before the pause */
            first_crawl_spread(c, s, false, now);
        }
        arm_src(c, s);
        break;
    }
}

static void health_gauges(crawl_t *c)
{
    for (int h = 0; h < NF_CRAWL_HEALTH_N; h++)
        nf_gauge_set(c->in->m.sources_by_health[h], c->health_n[h]);
}

/* After sources came, went or were paused or revived: count them again (rare; a fetch result
 * moves one source between the counts instead). */
static void sources_gauge(crawl_t *c)
{
    nf_gauge_set(c->in->m.sources, (int64_t)c->nsrcs);
    memset(c->health_n, 0, sizeof c->health_n);
    for (size_t i = 0; i < c->nsrcs; i++)
        c->health_n[nf_crawl_health(&c->srcs[i]->sched)]++;
    health_gauges(c);
}

/* An operator's crawl-now request (the record's crawl_at_ms, another than the last one applied:
 * the writer's clock orders nothing): an active source is due now — out of a backoff, or
 * revived if the policy declared it dead; a request that comes while a fetch runs is answered
 * by another fetch once it ends (the running one began before it), a queued source's by the
 * fetch it waits for. /v1/sources shows the request each fetch answered (crawl_answered). The
 * requests are kept in memory only: records are read once per committed epoch, so one applied
 * before a restart is never read again after it (and its next_crawl_at, written with the
 * epoch, still says now). */
static void crawl_now(crawl_t *c, src_t *s, int64_t at_ms, int64_t now)
{
    if (at_ms == s->crawl_at_ms)
        return; /* this request was applied (an identical record republished) */
    s->crawl_at_ms = at_ms;
    if (s->want != NF_SOURCE_ACTIVE || s->queued)
        return;
    if (s->in_flight) {
        s->crawl_pending = true;
        return;
    }
    if (s->sched.status == NF_CRAWL_DEAD)
        nf_crawl_revive(&s->sched, now, &c->rng);
    if (s->sched.status != NF_CRAWL_ACTIVE)
        return;
    s->sched.next_crawl_at_ms = now;
    arm_src(c, s);
    nf_log(NF_LOG_INFO, "crawl", "crawl requested", NF_LS("source_id", s->id), NF_LS("url", s->url),
           NF_LI("requested_at_ms", at_ms), NF_LEND);
}

/* NF_MSG_SOURCE_SET: upsert by key. */
static void source_set(crawl_t *c, const nf_source_set_t *m)
{
    assert(nf_route(nf_shard_runtime(c->sh), m->host_key) == nf_shard_index(c->sh));
    int64_t now = nf_wall_ms();
    kmap_del(&c->deletes, m->key); /* a removal earlier in this epoch is overtaken */
    src_t *s = kmap_get(&c->bykey, m->key);
    bool added = !s, url_changed = false;
    if (added) {
        s = src_new(c, m->key, m->host_key, m->host);
        if (!s || src_set_url(s, m->source_id, m->url) != 0) {
            if (s)
                src_drop(c, s);
            out_of_memory(c, "adding a source", m->source_id);
            return;
        }
        nf_crawl_init(&c->in->o.policy, &s->sched, m->interval_s, now, &c->rng);
        first_crawl_spread(c, s, false, now);
    } else {
        long h = host_of(c, m->host_key, m->host);
        url_changed = strcmp(s->url, m->url) != 0;
        if (h < 0 || (url_changed && src_set_url(s, m->source_id, m->url) != 0)) {
            out_of_memory(c, "updating a source", m->source_id);
            return;
        }
        s->host = (uint32_t)h;
        if (url_changed) {
            /* Another feed as far as scheduling goes: validators, failures and backoff belonged
             * to the old URL. Crawled soon, like a new source. */
            nf_crawl_init(&c->in->o.policy, &s->sched, m->interval_s, now, &c->rng);
            first_crawl_spread(c, s, false, now);
        } else if (m->interval_s != s->interval_s) {
            nf_crawl_set_interval(&c->in->o.policy, &s->sched, m->interval_s);
        }
    }
    if (!added && s->part != m->part && c->in->store && c->in->epoch &&
        kmap_put(&c->deletes, m->key, del_mark(key_group(m->key, s->part))) != 0) {
        /* its record moved to another partition: the old key group's copy goes */
        out_of_memory(c, "moving a source's state", m->source_id);
        return;
    }
    s->part = m->part;
    bool status_changed = m->status != s->want;
    s->interval_s = m->interval_s;
    s->type = m->type;
    s->from_topic = m->from_topic;
    s->is_file = m->is_file;
    s->want = m->status;
    if (added || url_changed || status_changed)
        apply_status(c, s, m->status, now);
    if (m->crawl_at_ms)
        crawl_now(c, s, m->crawl_at_ms, now);
    s->dirty = true;
    nf_counter_inc(added ? c->in->m.sources_added : c->in->m.sources_updated);
    sources_gauge(c);
    nf_log(NF_LOG_DEBUG, "crawl", added ? "source added" : "source updated",
           NF_LS("source_id", s->id), NF_LS("url", s->url),
           NF_LS("status", nf_source_status_name((nf_source_status_t)m->status)),
           NF_LI("interval_s", m->interval_s), NF_LI("from_topic", m->from_topic), NF_LEND);
}

/* NF_MSG_SOURCE_FORGET: drop the source if this shard holds it. */
static void source_forget(crawl_t *c, nf_id128_t key, bool moved)
{
    if (moved) /* the new owner writes the state in this epoch: a delete here would race it */
        kmap_del(&c->deletes, key);
    src_t *s = kmap_get(&c->bykey, key);
    if (!s)
        return;
    if (!moved && c->in->store && c->in->epoch &&
        kmap_put(&c->deletes, key, del_mark(key_group(key, s->part))) != 0) {
        out_of_memory(c, "removing a source", s->id);
        return;
    }
    nf_log(NF_LOG_DEBUG, "crawl", moved ? "source moved to another shard" : "source removed",
           NF_LS("source_id", s->id), NF_LS("url", s->url), NF_LI("in_flight", s->in_flight),
           NF_LEND);
    nf_counter_inc(c->in->m.sources_removed);
    src_drop(c, s);
    sources_gauge(c);
}

bool nf_ingest_source_info(nf_shard_t *sh, const nf_ingest_t *in, const char *source_id,
                           nf_source_info_t *out)
{
    const crawl_t *c = nf_shard_actor(sh, in->crawl_actor);
    const src_t *s = c ? kmap_get(&c->bykey, nf_ingest_source_key(source_id)) : NULL;
    if (!s)
        return false;
    out->sched = s->sched;
    snprintf(out->url, sizeof out->url, "%s", s->url);
    out->interval_s = s->interval_s;
    out->crawl_at_ms = s->crawl_at_ms;
    out->crawl_answered_ms = s->crawl_answered;
    out->type = s->type;
    out->want = s->want;
    out->from_topic = s->from_topic;
    out->in_flight = s->in_flight;
    return true;
}

/* ---------------------------------------------------------------- epochs and state */

/* Stored schedule, format 2 (written):
 *   [expires_at_ms = 0: 8 bytes][format: 4][nf_crawl_schedule_t]
 *   [flags: 1 (1 = from the topic, 2 = local file)][type: 1][want: 1][0: 1][interval_s: 4]
 *   [id length: 2][url length: 2][id][url]
 * Format 1 (read only: values written before the sources topic) is the first three fields.
 * The format word changes with the struct's size, so a build with another layout starts the
 * source afresh instead of misreading it; a topic source whose value cannot be read is lost
 * with it (the same trade: its record is not re-read). Integers are in host order, like the
 * struct. */
#define SCHED_FORMAT   (0x53430000u | (uint32_t)sizeof(nf_crawl_schedule_t))
#define SCHED_FORMAT2  (0x53440000u | (uint32_t)sizeof(nf_crawl_schedule_t))
#define SCHED_V1_LEN   (12 + sizeof(nf_crawl_schedule_t))
#define SCHED_V2_FIXED (SCHED_V1_LEN + 12)
#define SCHED_VAL_MAX  (SCHED_V2_FIXED + NF_SOURCE_ID_MAX + NF_SOURCE_URL_MAX)
#define DEF_FROM_TOPIC 1u
#define DEF_IS_FILE    2u

typedef struct stored {
    nf_crawl_schedule_t sched;
    bool has_def, from_topic, is_file;
    uint8_t type, want;
    uint32_t interval_s;
    char id[NF_SOURCE_ID_MAX + 1];
    char url[NF_SOURCE_URL_MAX + 1];
} stored_t;

static size_t sched_encode(const src_t *s, unsigned char *val)
{
    uint32_t fmt = SCHED_FORMAT2, iv = s->interval_s;
    size_t il = strlen(s->id), ul = strlen(s->url);
    assert(il <= NF_SOURCE_ID_MAX && ul <= NF_SOURCE_URL_MAX);
    uint16_t il16 = (uint16_t)il, ul16 = (uint16_t)ul;
    memset(val, 0, 8);
    memcpy(val + 8, &fmt, 4);
    memcpy(val + 12, &s->sched, sizeof s->sched);
    unsigned char *p = val + SCHED_V1_LEN;
    p[0] = (unsigned char)((s->from_topic ? DEF_FROM_TOPIC : 0) | (s->is_file ? DEF_IS_FILE : 0));
    p[1] = s->type;
    p[2] = s->want;
    p[3] = 0;
    memcpy(p + 4, &iv, 4);
    memcpy(p + 8, &il16, 2);
    memcpy(p + 10, &ul16, 2);
    memcpy(p + 12, s->id, il);
    memcpy(p + 12 + il, s->url, ul);
    return SCHED_V2_FIXED + il + ul;
}

/* Whether a stored value is format 2 with a topic definition (cheap: for the start-up scan). */
static bool stored_from_topic(const unsigned char *v, size_t len)
{
    uint32_t fmt;
    if (len < SCHED_V2_FIXED)
        return false;
    memcpy(&fmt, v + 8, 4);
    return fmt == SCHED_FORMAT2 && (v[SCHED_V1_LEN] & DEF_FROM_TOPIC);
}

static bool sched_decode(const unsigned char *v, size_t len, stored_t *o)
{
    uint32_t fmt;
    if (len < SCHED_V1_LEN)
        return false;
    memcpy(&fmt, v + 8, 4);
    o->has_def = o->from_topic = o->is_file = false;
    o->type = NF_SOURCE_AUTO;
    o->want = NF_SOURCE_ACTIVE;
    o->interval_s = 0;
    o->id[0] = o->url[0] = '\0';
    if (fmt == SCHED_FORMAT2 && len >= SCHED_V2_FIXED) {
        const unsigned char *p = v + SCHED_V1_LEN;
        uint16_t il, ul;
        memcpy(&o->interval_s, p + 4, 4);
        memcpy(&il, p + 8, 2);
        memcpy(&ul, p + 10, 2);
        if (il > NF_SOURCE_ID_MAX || ul > NF_SOURCE_URL_MAX || len != SCHED_V2_FIXED + il + ul ||
            p[1] > NF_SOURCE_JSON || p[2] > NF_SOURCE_DEAD)
            return false;
        memcpy(o->id, p + 12, il);
        o->id[il] = '\0';
        memcpy(o->url, p + 12 + il, ul);
        o->url[ul] = '\0';
        if (strlen(o->id) != il || strlen(o->url) != ul)
            return false;
        o->has_def = true;
        o->from_topic = p[0] & DEF_FROM_TOPIC;
        o->is_file = p[0] & DEF_IS_FILE;
        o->type = p[1];
        o->want = p[2];
    } else if (fmt != SCHED_FORMAT || len != SCHED_V1_LEN) {
        return false;
    }
    memcpy(&o->sched, v + 12, sizeof o->sched);
    o->sched.etag[sizeof o->sched.etag - 1] = 0;
    o->sched.last_modified[sizeof o->sched.last_modified - 1] = 0;
    if (o->sched.status > NF_CRAWL_DEAD)
        return false;
    return true;
}

/* The stored schedule of key: true and *o filled if there is a readable one. */
static bool sched_load(crawl_t *c, nf_id128_t id, const char *source_id, stored_t *o)
{
    if (!c->in->store)
        return false;
    unsigned char key[18];
    state_key(id, -1, key);
    void *v = NULL;
    size_t len = 0;
    char err[256];
    int r = nf_store_get(c->in->store, NF_KIND_CRAWL_SCHEDULE, key, sizeof key, &v, &len, err,
                         sizeof err);
    bool ok = r == 1 && sched_decode(v, len, o);
    if (r < 0)
        nf_log(NF_LOG_ERROR, "crawl", "cannot read the source's schedule; starting it afresh",
               NF_LS("source_id", source_id), NF_LS("error", err), NF_LEND);
    free(v);
    return ok;
}

static void crawl_snapshot(nf_shard_t *sh, void *self, nf_store_batch_t *b, uint64_t epoch)
{
    crawl_t *c = self;
    (void)sh;
    (void)epoch;
    unsigned char key[18];
    /* Deletes first: a source removed and added again within the epoch was taken out of
     * deletes when it came back, and anything else here is gone. */
    for (size_t i = 0; c->deletes.count && i <= c->deletes.mask; i++) {
        if (!c->deletes.slots[i].val)
            continue;
        if (b) {
            nf_kstate_encode_key(del_group(c->deletes.slots[i].val), c->deletes.slots[i].key, key);
            nf_store_batch_delete(b, NF_KIND_CRAWL_SCHEDULE, key, sizeof key);
        }
        c->deletes.slots[i].val = NULL;
        c->deletes.count--;
    }
    unsigned char val[SCHED_VAL_MAX];
    for (size_t i = 0; i < c->nsrcs; i++) {
        src_t *s = c->srcs[i];
        if (!s->dirty)
            continue;
        s->dirty = false;
        if (!b)
            continue;
        state_key(s->key, s->part, key);
        size_t n = sched_encode(s, val);
        nf_store_batch_put(b, NF_KIND_CRAWL_SCHEDULE, key, sizeof key, val, n);
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

static void crawl_partitions(nf_shard_t *sh, void *self, nf_input_t in, const int32_t *parts,
                             size_t n, bool gained);
static const nf_epoch_participant_t crawl_part = {.pause = crawl_cut_pause,
                                                  .busy = crawl_busy,
                                                  .snapshot = crawl_snapshot,
                                                  .resume = crawl_cut_resume,
                                                  .partitions = crawl_partitions};

/* ---------------------------------------------------------------- actor hooks */

typedef struct restore_ctx {
    crawl_t *c;
    unsigned me;
    int32_t part; /* the sources partition whose key group is read, or -1 (every key) */
    size_t restored;
    stored_t st;
} restore_ctx_t;

/* nf_store_scan callback: recreates the topic sources whose host routes to this shard. */
static int restore_topic_source(const void *k, size_t klen, const void *v, size_t vlen, void *arg)
{
    restore_ctx_t *x = arg;
    crawl_t *c = x->c;
    stored_t *st = &x->st;
    if (!stored_from_topic(v, vlen) || !sched_decode(v, vlen, st))
        return 0;
    nf_id128_t id = nf_ingest_source_key(st->id);
    unsigned char key[18];
    state_key(id, x->part, key);
    if (klen != sizeof key || memcmp(k, key, sizeof key) != 0)
        return 0; /* not the key its id maps to: not ours to interpret */
    if (kmap_get(&c->bykey, id))
        return 0; /* held already (its record came first) */
    nf_source_url_t u;
    char err[512];
    if (nf_sources_check_url(st->url, &u, err, sizeof err) != 0) {
        nf_log(NF_LOG_WARN, "crawl", "stored topic source has an invalid URL; not restored",
               NF_LS("source_id", st->id), NF_LS("error", err), NF_LEND);
        return 0;
    }
    if (nf_route(nf_shard_runtime(c->sh), u.host_key) != x->me)
        return 0;
    src_t *s = src_new(c, id, u.host_key, u.host);
    if (!s)
        return -ENOMEM;
    if (src_set_url(s, st->id, u.url) != 0) {
        src_drop(c, s);
        return -ENOMEM;
    }
    s->sched = st->sched;
    s->interval_s = st->interval_s;
    nf_crawl_set_interval(&c->in->o.policy, &s->sched, st->interval_s);
    s->type = st->type;
    s->want = st->want;
    s->from_topic = true;
    s->part = x->part;
    s->restored = true;
    s->dirty = x->part < 0; /* a gained partition's schedule is stored as it is */
    x->restored++;
    return 0;
}

/* With in_partitions: the sources partitions this process gained (their crawl schedules are in
 * the store, restored from the changelog: load this shard's and crawl them on) or lost (their
 * last epoch committed: forget them without deleting their state, which the new owner holds;
 * a fetch in flight completes into fetch-log only). */
static void crawl_partitions(nf_shard_t *sh, void *self, nf_input_t in, const int32_t *parts,
                             size_t n, bool gained)
{
    crawl_t *c = self;
    if (in != NF_INPUT_SOURCES || !c->in->in_partitions)
        return;
    size_t before = c->nsrcs, dropped = 0;
    if (gained) {
        restore_ctx_t *x = calloc(1, sizeof *x);
        if (!x) {
            out_of_memory(c, "loading the sources of gained partitions", "");
            return;
        }
        x->c = c;
        x->me = nf_shard_index(sh);
        for (size_t i = 0; i < n; i++) {
            unsigned char prefix[2] = {(unsigned char)(parts[i] >> 8), (unsigned char)parts[i]};
            x->part = parts[i];
            int r = nf_store_scan_prefix(c->in->store, NF_KIND_CRAWL_SCHEDULE, prefix,
                                         sizeof prefix, restore_topic_source, x);
            if (r < 0) {
                nf_log(NF_LOG_ERROR, "crawl",
                       "cannot read the stored sources of a gained partition; stopping the job",
                       NF_LI("partition", parts[i]), NF_LI("errno", -r), NF_LEND);
                nf_runtime_fail(nf_shard_runtime(sh));
                break;
            }
        }
        free(x);
        int64_t now = nf_wall_ms();
        for (size_t i = before; i < c->nsrcs; i++) {
            /* its previous owner may have sent a request a moment ago, even to a host this
             * process held before */
            nf_host_adopted(&c->hosts[c->srcs[i]->host].h, now);
            first_crawl_spread(c, c->srcs[i], true, now);
            arm_src(c, c->srcs[i]);
        }
    } else {
        for (size_t i = c->nsrcs; i-- > 0;) {
            src_t *s = c->srcs[i];
            bool lost = false;
            for (size_t j = 0; j < n && !lost; j++)
                lost = s->part == parts[j];
            if (!lost)
                continue;
            kmap_del(&c->deletes, s->key);
            src_drop(c, s);
            dropped++;
        }
    }
    sources_gauge(c);
    if (c->nsrcs != before || dropped)
        nf_log(NF_LOG_INFO, "crawl", gained ? "sources of gained partitions" : "sources moved away",
               NF_LI("sources", gained ? c->nsrcs - before : dropped), NF_LI("now_held", c->nsrcs),
               NF_LEND);
}

/* The configured sources of this shard (not those the topic defines, restored before); with
 * schedules from the store when it has them. 0 or -ENOMEM. */
static int configured_sources(crawl_t *c, stored_t *st, size_t *restored, int64_t now)
{
    nf_ingest_t *in = c->in;
    unsigned me = nf_shard_index(c->sh);
    const nf_source_list_t *l = in->sources;
    for (size_t i = 0; l && !in->in_partitions && i < l->n; i++) {
        const nf_source_def_t *d = &l->items[i];
        if (nf_route(nf_shard_runtime(c->sh), d->host_key) != me)
            continue;
        nf_id128_t id = nf_ingest_source_key(d->source_id);
        if (kmap_get(&c->bykey, id))
            continue; /* the topic's definition, restored above */
        bool found = sched_load(c, id, d->source_id, st);
        if (found && st->from_topic) {
            nf_source_url_t u;
            char err[512];
            if (nf_sources_check_url(st->url, &u, err, sizeof err) == 0)
                continue; /* the topic's definition lives on the shard of its own host */
            found = false;
        }
        src_t *s = src_new(c, id, d->host_key, d->host);
        if (!s)
            return -ENOMEM;
        s->id = d->source_id;
        s->url = d->url;
        s->is_file = d->is_file;
        s->interval_s = d->interval_s;
        if (found) {
            s->sched = st->sched;
            nf_crawl_set_interval(&in->o.policy, &s->sched, d->interval_s);
            s->restored = true;
            (*restored)++;
        } else {
            nf_crawl_init(&in->o.policy, &s->sched, d->interval_s, now, &c->rng);
        }
        s->dirty = true;
    }
    return 0;
}

/* This shard's sources at start, the sources topic's first (its definition wins over a
 * configured one), armed. 0, or -1 with why in err. */
static int start_sources(crawl_t *c, char *err, size_t errlen)
{
    nf_ingest_t *in = c->in;
    restore_ctx_t *x = calloc(1, sizeof *x);
    if (!x) {
        snprintf(err, errlen, "out of memory for restoring the stored sources");
        return -1;
    }
    x->c = c;
    x->me = nf_shard_index(c->sh);
    x->part = -1;
    int64_t now = nf_wall_ms();
    /* With in_partitions, sources come with the sources partitions assigned (crawl_partitions)
     * and the configured ones through the topic (published at start: sources_publish.h). */
    int r = in->store && !in->in_partitions
                ? nf_store_scan(in->store, NF_KIND_CRAWL_SCHEDULE, restore_topic_source, x)
                : 0;
    size_t restored = x->restored, from_topic = c->nsrcs;
    if (r < 0) /* going on would silently drop the topic's sources (not read again) */
        snprintf(err, errlen, "cannot read the stored sources (crawl schedules): %s", strerror(-r));
    else if ((r = configured_sources(c, &x->st, &restored, now)) != 0)
        snprintf(err, errlen, "out of memory for the configured sources");
    free(x);
    if (r != 0)
        return -1;
    for (size_t i = 0; i < c->nsrcs; i++) {
        first_crawl_spread(c, c->srcs[i], c->srcs[i]->restored, now);
        arm_src(c, c->srcs[i]);
    }
    sources_gauge(c);
    if (c->nsrcs)
        nf_log(NF_LOG_INFO, "crawl", "sources assigned", NF_LI("sources", c->nsrcs),
               NF_LI("from_topic", from_topic), NF_LI("hosts", c->nhosts),
               NF_LI("schedules_restored", restored), NF_LEND);
    return 0;
}

/* The classifier, fetchers and host index of crawl_init: 0, or -1 with why in err. */
static int crawl_parts(crawl_t *c, char *err, size_t errlen)
{
    nf_ingest_t *in = c->in;
    if (in->an && in->an->taxonomy && !(c->cls = nf_classify_ctx_new(in->an->taxonomy))) {
        snprintf(err, errlen, "out of memory for the classifier");
        return -1;
    }
    nf_fetch_opts_t fo = in->o.fetch;
    fo.sent = on_sent;
    c->fetcher = nf_fetcher_create(c->sh, &fo);
    fo.allow_file = true;
    c->file_fetcher = nf_fetcher_create(c->sh, &fo);
    if (!c->fetcher || !c->file_fetcher) {
        snprintf(err, errlen, "cannot create the HTTP fetcher (curl_multi_init failed)");
        return -1;
    }
    nf_runtime_t *rt = nf_shard_runtime(c->sh);
    const nf_source_list_t *l = in->sources;
    size_t mine = 0;
    for (size_t i = 0; l && i < l->n; i++)
        mine += nf_route(rt, l->items[i].host_key) == nf_shard_index(c->sh);
    if (nf_idset_init(&c->host_index, mine * 2 + 16) != 0) {
        snprintf(err, errlen, "out of memory for the host index of %zu sources", mine);
        return -1;
    }
    return 0;
}

static void crawl_fini(nf_shard_t *sh, void *self);

/* Crawl coverage (docs/slo.md): the sources not paused, covered or not (nf_crawl_uncovered:
 * since_ms is when this shard took a source or it was resumed; one the policy declared dead is
 * uncovered once its last answer is old enough). */
static void on_coverage(nf_shard_t *sh, nf_timer_t *t, void *arg)
{
    crawl_t *c = arg;
    (void)sh;
    (void)t;
    int64_t now = nf_wall_ms(), covered = 0, uncovered = 0;
    for (size_t i = 0; i < c->nsrcs; i++) {
        const src_t *s = c->srcs[i];
        if (s->sched.status == NF_CRAWL_PAUSED)
            continue;
        if (nf_crawl_uncovered(&s->sched, s->last_ok_ms, s->since_ms, now))
            uncovered++;
        else
            covered++;
    }
    nf_gauge_set(c->in->m.coverage[0], covered);
    nf_gauge_set(c->in->m.coverage[1], uncovered);
}

static int crawl_init(nf_shard_t *sh, void *ctx, void **self, char *err, size_t errlen)
{
    nf_ingest_t *in = ctx;
    crawl_t *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory for the crawl stage");
        return -1;
    }
    c->in = in;
    c->sh = sh;
    c->rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)nf_shard_index(sh) << 32) ^ nf_now_ns();
    nf_jw_init(&c->jw);
    int r = crawl_parts(c, err, errlen);
    if (r == 0)
        r = start_sources(c, err, errlen);
    if (r == 0 && in->epoch && (r = nf_epoch_participant_add(in->epoch, sh, &crawl_part, c)))
        snprintf(err, errlen, "crawl cannot take part in the epochs: %s", strerror(-r));
    if (r != 0) {
        crawl_fini(sh, c);
        return -1;
    }
    nf_timer_init(&c->coverage, on_coverage, c);
    nf_timer_arm(sh, &c->coverage, nf_now_ns() + 1000000000ull, 5000000000ull);
    *self = c;
    return 0;
}

static void crawl_handle(nf_shard_t *sh, void *self, const nf_msg_t *m)
{
    crawl_t *c = self;
    (void)sh;
    switch (m->kind) {
    case NF_MSG_SOURCE_SET:
        source_set(c, m->body.ptr);
        free(m->body.ptr);
        break;
    case NF_MSG_SOURCE_FORGET: {
        nf_id128_t key = {m->body.u64[0], m->body.u64[1]};
        source_forget(c, key, m->flags & NF_SOURCE_FORGET_MOVED);
        break;
    }
    default:
        nf_log(NF_LOG_ERROR, "crawl", "unexpected message", NF_LI("kind", m->kind), NF_LEND);
        break;
    }
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
    nf_timer_cancel(sh, &c->coverage);
    for (size_t i = 0; i < c->nsrcs; i++)
        nf_timer_cancel(sh, &c->srcs[i]->timer);
    /* In-flight fetches end now, each recorded as a cancelled attempt (a removed source's
     * completion frees it). */
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
        if (d->s->removed) /* no longer in srcs: the deferred result was its last reference */
            src_free(d->s);
        free(d->res.body);
        free(d);
    }
    while (c->ohead) { /* only after a forced shutdown */
        nf_article_blob_t *b = c->ohead;
        c->ohead = b->next;
        free(b);
    }
    nf_jw_free(&c->jw);
    nf_classify_ctx_free(c->cls);
    nf_minhash_scratch_free(&c->mhs);
    nf_gauge_set(c->in->m.sources, 0); /* this shard's part: it owns none any more */
    for (size_t i = 0; i < c->nsrcs; i++)
        src_free(c->srcs[i]);
    free(c->srcs);
    for (size_t i = 0; i < c->nhosts; i++)
        free(c->hosts[i].name);
    free(c->hosts);
    nf_idset_free(&c->host_index);
    kmap_free(&c->bykey);
    kmap_free(&c->deletes);
    free(c);
}

/* ---------------------------------------------------------------- for operators */

void nf_ingest_sources_json(nf_shard_t *sh, nf_ingest_t *in, bool failing, nf_jw_t *w)
{
    crawl_t *c = nf_shard_actor(sh, in->crawl_actor);
    for (size_t i = 0; c && i < c->nsrcs; i++) {
        const src_t *s = c->srcs[i];
        nf_crawl_health_t h = nf_crawl_health(&s->sched);
        if (failing && !nf_crawl_health_failing(h))
            continue;
        nf_jw_elem(w);
        nf_jw_obj_open(w);
        nf_jw_key(w, "source_id");
        nf_jw_str(w, s->id);
        nf_jw_key(w, "url");
        nf_jw_str(w, s->url);
        nf_jw_key(w, "state");
        nf_jw_str(w, nf_crawl_health_name(h));
        nf_jw_key(w, "failures");
        nf_jw_u64(w, s->sched.failures);
        nf_jw_key(w, "next_crawl_at_ms");
        nf_jw_i64(w, s->sched.next_crawl_at_ms);
        nf_jw_key(w, "last_outcome");
        nf_jw_str(w, nf_crawl_outcome_name((nf_crawl_outcome_t)s->sched.last_outcome));
        nf_jw_key(w, "last_error");
        nf_jw_str(w, s->last_error);
        nf_jw_key(w, "last_error_at_ms");
        nf_jw_i64(w, s->last_error_ms);
        nf_jw_key(w, "last_ok_at_ms");
        nf_jw_i64(w, s->last_ok_ms);
        nf_jw_key(w, "from_topic");
        nf_jw_bool(w, s->from_topic);
        nf_jw_key(w, "interval_s");
        nf_jw_u64(w, s->interval_s);
        nf_jw_key(w, "in_flight");
        nf_jw_bool(w, s->in_flight);
        nf_jw_key(w, "last_attempt_at_ms");
        nf_jw_i64(w, s->started_ms);
        nf_jw_key(w, "crawl_at_ms");
        nf_jw_i64(w, s->crawl_at_ms);
        nf_jw_key(w, "crawl_answered_ms");
        nf_jw_i64(w, s->crawl_answered);
        nf_jw_obj_close(w);
    }
}

bool nf_ingest_schedule_decode(const void *v, size_t len, nf_ingest_stored_source_t *out)
{
    stored_t st;
    if (!sched_decode(v, len, &st))
        return false;
    out->sched = st.sched;
    out->has_def = st.has_def;
    out->from_topic = st.from_topic;
    out->is_file = st.is_file;
    memcpy(out->source_id, st.id, sizeof out->source_id);
    memcpy(out->url, st.url, sizeof out->url);
    return true;
}

static void crawl_drop(void *ctx, const nf_msg_t *m)
{
    (void)ctx;
    if (m->kind == NF_MSG_SOURCE_SET)
        free(m->body.ptr);
}

const nf_actor_ops_t nf_crawl_ops = {.name = "crawl",
                                     .init = crawl_init,
                                     .handle = crawl_handle,
                                     .resume = crawl_resume,
                                     .stop = crawl_stop,
                                     .fini = crawl_fini,
                                     .drop = crawl_drop};
