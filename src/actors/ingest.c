/* ingest.c — registration of the ingestion actors and their metrics (ingest.h). */
#include "actors/ingest.h"

#include "actors/article_msg.h"
#include "algo/sha256.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nf_ingest_opts_default(nf_ingest_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->policy = nf_crawl_policy_default();
    nf_fetch_opts_default(&o->fetch);
    nf_addrguard_init(&o->guard);
    nf_feed_limits_default(&o->limits);
    o->max_in_flight = 256;
    o->max_pending_articles = 4096;
    o->sink_flush_ms = 100;
    o->max_future_ms = 5 * 60 * 1000;
}

static const double lateness_bounds[] = {0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5,
                                         1,     2,     5,    10,   30,  60,   300};

/* The metrics of fetching and of the crawl's scheduling. */
static void fetch_metrics(nf_ingest_metrics_t *m)
{
    char labels[64];
    for (int e = 1; e <= NF_FETCH_E_OTHER; e++) {
        snprintf(labels, sizeof labels, "result=\"%s\"", nf_fetch_error_name(e));
        nf_metrics_counter("newsflow_fetch_requests_total",
                           "Fetch attempts by result: HTTP status class or fetch error.", labels, 0,
                           &m->fetch_result[e]);
    }
    static const char *const cls[] = {"http_other", "http_1xx", "http_2xx",
                                      "http_3xx",   "http_4xx", "http_5xx"};
    for (int i = 0; i < 6; i++) {
        snprintf(labels, sizeof labels, "result=\"%s\"", cls[i]);
        nf_metrics_counter("newsflow_fetch_requests_total",
                           "Fetch attempts by result: HTTP status class or fetch error.", labels, 0,
                           &m->fetch_http[i]);
    }
    nf_metrics_histogram("newsflow_fetch_duration_seconds", "Fetch duration.", NULL,
                         nf_metrics_latency_bounds, nf_metrics_latency_nbounds, &m->fetch_seconds);
    nf_metrics_counter("newsflow_fetch_body_bytes_total", "Decoded body bytes fetched.", NULL, 0,
                       &m->fetch_bytes);
    nf_metrics_histogram("newsflow_crawl_lateness_seconds",
                         "Fetch start minus the source's next_crawl_at.", NULL, lateness_bounds,
                         sizeof lateness_bounds / sizeof *lateness_bounds, &m->lateness_seconds);
    nf_metrics_counter("newsflow_crawl_deferred_total", "Due fetches postponed, by reason.",
                       "reason=\"host_politeness\"", 0, &m->deferred_host);
    nf_metrics_counter("newsflow_crawl_deferred_total", "Due fetches postponed, by reason.",
                       "reason=\"breaker_open\"", 0, &m->deferred_breaker);
    nf_metrics_counter("newsflow_crawl_deferred_total", "Due fetches postponed, by reason.",
                       "reason=\"shard_capacity\"", 0, &m->deferred_capacity);
    nf_metrics_counter("newsflow_crawl_deferred_total", "Due fetches postponed, by reason.",
                       "reason=\"membership_lost\"", 0, &m->deferred_membership);
    nf_metrics_counter("newsflow_crawl_breaker_transitions_total",
                       "Per-host circuit breaker transitions.", "to=\"open\"", 0, &m->breaker_open);
    nf_metrics_counter("newsflow_crawl_breaker_transitions_total",
                       "Per-host circuit breaker transitions.", "to=\"half_open\"", 0,
                       &m->breaker_half_open);
    nf_metrics_counter("newsflow_crawl_breaker_transitions_total",
                       "Per-host circuit breaker transitions.", "to=\"closed\"", 0,
                       &m->breaker_closed);
    nf_metrics_counter("newsflow_crawl_sources_dead_total",
                       "Sources that became DEAD after consecutive failures.", NULL, 0,
                       &m->sources_dead);
}

/* The metrics of parsing, classifying and deduplicating articles. */
static void parse_metrics(nf_ingest_metrics_t *m)
{
    char labels[64];
    static const char *const pres[] = {"ok",        "too_large", "not_a_feed",
                                       "malformed", "too_deep",  "out_of_memory"};
    for (int i = 0; i < 6; i++) {
        snprintf(labels, sizeof labels, "result=\"%s\"", pres[i]);
        nf_metrics_counter("newsflow_parse_documents_total", "Fetched documents parsed.", labels, 0,
                           &m->parse_result[i]);
    }
    nf_metrics_histogram("newsflow_parse_duration_seconds", "Parse+normalize time.", NULL,
                         nf_metrics_latency_bounds, nf_metrics_latency_nbounds, &m->parse_seconds);
    nf_metrics_histogram("newsflow_classify_duration_seconds",
                         "Classification time of one article (topic vector and labels).", NULL,
                         nf_metrics_latency_bounds, nf_metrics_latency_nbounds,
                         &m->classify_seconds);
    nf_metrics_counter("newsflow_parse_articles_total", "Articles extracted from feeds.", NULL, 0,
                       &m->parse_articles);
    nf_metrics_counter("newsflow_parse_items_without_link_total",
                       "Feed items dropped for having no usable link.", NULL, 0, &m->parse_no_link);
    nf_metrics_counter("newsflow_parse_warnings_total",
                       "Recoverable problems in feeds (recovered XML, bad dates, ...).", NULL, 0,
                       &m->parse_warnings);
    nf_metrics_counter("newsflow_parse_items_truncated_total",
                       "Items beyond the per-feed item cap.", NULL, 0, &m->parse_truncated);
    nf_metrics_counter("newsflow_parse_dates_replaced_total",
                       "Article dates after the fetch time + trending.max_future_ms, or at or "
                       "before 1970-01-01, replaced (nf_article_bound_dates).",
                       NULL, 0, &m->parse_dates_replaced);
    nf_metrics_counter("newsflow_dedup_articles_total", "Articles by dedup result.",
                       "result=\"new\"", 0, &m->dedup_new);
    nf_metrics_counter("newsflow_dedup_articles_total", "Articles by dedup result.",
                       "result=\"duplicate\"", 0, &m->dedup_duplicate);
    nf_metrics_counter("newsflow_sink_errors_total", "Failed sink writes (retried).", NULL, 0,
                       &m->sink_errors);
    nf_ingest_latency_metrics(&m->latency);
    nf_metrics_counter("newsflow_crawl_articles_ring_full_total",
                       "Articles held back because the dedup shard's ring was full.", NULL, 0,
                       &m->ring_full_articles);
}

/* The metrics of the sources: the sources topic's changes, what each shard holds, by state. */
static void source_metrics(nf_ingest_metrics_t *m)
{
    char labels[64];
    nf_metrics_counter("newsflow_sources_added_total",
                       "Sources added by the sources topic (per applying shard).", NULL, 0,
                       &m->sources_added);
    nf_metrics_counter("newsflow_sources_updated_total",
                       "Sources changed by the sources topic (URL, interval, status, type).", NULL,
                       0, &m->sources_updated);
    nf_metrics_counter("newsflow_sources_removed_total",
                       "Sources dropped by the sources topic (tombstones; moves to another "
                       "shard count here and as added there).",
                       NULL, 0, &m->sources_removed);
    nf_metrics_counter("newsflow_sources_misplaced_total",
                       "Sources records read from a partition other than their host's "
                       "(a consumer group: that host's politeness is split between the "
                       "partitions' owners).",
                       NULL, 0, &m->sources_misplaced);
    nf_metrics_gauge("newsflow_crawl_in_flight", "Fetches in flight.", NULL, NF_METRIC_PER_SHARD,
                     &m->in_flight);
    nf_metrics_gauge("newsflow_crawl_pending_articles",
                     "Articles waiting for ring space (backpressure).", NULL, NF_METRIC_PER_SHARD,
                     &m->pending_articles);
    nf_metrics_gauge("newsflow_crawl_sources", "Sources owned.", NULL, NF_METRIC_PER_SHARD,
                     &m->sources);
    nf_metrics_gauge("newsflow_dedup_keys", "Article ids in the dedup set.", NULL,
                     NF_METRIC_PER_SHARD, &m->dedup_keys);
    nf_metrics_gauge("newsflow_dedup_bytes", "Memory of the dedup set.", NULL, NF_METRIC_PER_SHARD,
                     &m->dedup_bytes);
    nf_kstate_gauges_register(&m->seen_mem, NF_KIND_ARTICLE_KEY);
    nf_kstate_gauges_register(&m->topics_mem, NF_KIND_ARTICLE_TOPICS);
    for (int h = 0; h < NF_CRAWL_HEALTH_N; h++) {
        snprintf(labels, sizeof labels, "state=\"%s\"", nf_crawl_health_name(h));
        nf_metrics_gauge("newsflow_sources",
                         "Sources by state: ok, backoff (failing, retried later), dead "
                         "(not crawled until revived), paused, throttled (its host answered "
                         "429/503 with Retry-After: not crawled before that time).",
                         labels, 0, &m->sources_by_health[h]);
    }
    static const char cov_help[] =
        "Sources not paused, by whether they answered (2xx, 304) within twice their interval "
        "(state=uncovered: not; counting from the later of its last answer and when this "
        "process took or resumed it, so a source that never answered is uncovered, and so is a "
        "dead one): the crawl coverage SLO (docs/slo.md). Counted every 5 s.";
    nf_metrics_gauge("newsflow_crawl_coverage_sources", cov_help, "state=\"covered\"", 0,
                     &m->coverage[0]);
    nf_metrics_gauge("newsflow_crawl_coverage_sources", cov_help, "state=\"uncovered\"", 0,
                     &m->coverage[1]);
    nf_metrics_counter("newsflow_crawl_failure_logs_suppressed_total",
                       "Source failures not logged at warn: the source had been logged "
                       "failing within the repeat period (10 min).",
                       NULL, 0, &m->failure_logs_suppressed);
}

int nf_ingest_register(nf_runtime_t *rt, nf_ingest_t *in)
{
    in->o.fetch.guard = &in->o.guard;
    fetch_metrics(&in->m);
    parse_metrics(&in->m);
    source_metrics(&in->m);
    in->crawl_actor = nf_runtime_register(rt, &nf_crawl_ops, in);
    if (in->crawl_actor < 0)
        return in->crawl_actor;
    in->dedup_actor = nf_runtime_register(rt, &nf_dedup_ops, in);
    return in->dedup_actor < 0 ? in->dedup_actor : 0;
}

/* ---------------------------------------------------------------- the sources topic */

nf_id128_t nf_ingest_source_key(const char *source_id)
{
    nf_id128_t id = {0, 0};
    size_t n = 0;
    for (const char *p = source_id; *p; p++, n++) {
        char ch = *p;
        int v = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (v < 0 || n == 16)
            break;
        id.hi = id.hi << 4 | (uint64_t)v;
    }
    if (n == 16 && source_id[16] == '\0')
        return id; /* a configured source_id (sources.h) */
    uint8_t d[32];
    nf_sha256(source_id, strlen(source_id), d);
    id.hi = id.lo = 0;
    for (int i = 0; i < 8; i++) {
        id.hi = id.hi << 8 | d[i];
        id.lo = id.lo << 8 | d[8 + i];
    }
    id.lo |= 1;
    return id;
}

static nf_source_set_t *source_set_new(const char *source_id, const char *url, const char *host)
{
    size_t li = strlen(source_id) + 1, lu = strlen(url) + 1, lh = strlen(host) + 1;
    nf_source_set_t *s = malloc(sizeof *s + li + lu + lh);
    if (!s)
        return NULL;
    memset(s, 0, sizeof *s);
    char *p = s->text;
    memcpy(p, source_id, li);
    s->source_id = p;
    memcpy(p += li, url, lu);
    s->url = p;
    memcpy(p += lu, host, lh);
    s->host = p;
    s->key = nf_ingest_source_key(source_id);
    s->part = -1;
    return s;
}

int nf_ingest_source_route(const nf_ingest_t *in, nf_runtime_t *rt, const nf_source_record_t *rec,
                           nf_source_route_t *out, char *err, size_t errlen)
{
    out->key = nf_ingest_source_key(rec->source_id);
    out->owner = -1;
    out->set = NULL;
    nf_source_set_t *s;
    if (rec->tombstone) {
        const nf_source_def_t *d =
            in->sources && !in->in_partitions ? nf_sources_find(in->sources, rec->source_id) : NULL;
        if (!d)
            return 0; /* removed everywhere */
        if (!(s = source_set_new(rec->source_id, d->url, d->host)))
            return -ENOMEM;
        s->host_key = d->host_key;
        s->interval_s = d->interval_s;
        s->type = NF_SOURCE_AUTO;
        s->status = NF_SOURCE_ACTIVE;
        s->is_file = d->is_file;
    } else {
        nf_source_url_t u;
        if (nf_sources_check_url(rec->url, &u, err, errlen) != 0)
            return -EINVAL;
        if (!(s = source_set_new(rec->source_id, u.url, u.host)))
            return -ENOMEM;
        s->host_key = u.host_key;
        s->interval_s = rec->interval_s;
        s->type = (uint8_t)rec->type;
        s->status = (uint8_t)rec->status;
        s->crawl_at_ms = rec->crawl_at_ms;
        s->from_topic = true;
    }
    out->owner = (int)nf_route(rt, s->host_key);
    out->set = s;
    return 0;
}

void nf_ingest_source_msg(const nf_ingest_t *in, nf_source_route_t *r, unsigned shard, nf_msg_t *m)
{
    memset(m, 0, sizeof *m);
    m->actor = (uint16_t)in->crawl_actor;
    if (r->owner >= 0 && (unsigned)r->owner == shard && r->set) {
        m->kind = NF_MSG_SOURCE_SET;
        m->key = r->set->host_key;
        m->body.ptr = r->set;
        r->set = NULL;
        return;
    }
    m->kind = NF_MSG_SOURCE_FORGET;
    m->flags = r->owner >= 0 ? NF_SOURCE_FORGET_MOVED : 0;
    m->key = r->key.hi;
    m->body.u64[0] = r->key.hi;
    m->body.u64[1] = r->key.lo;
}
