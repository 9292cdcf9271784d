/* ingest.c — registration of the ingestion actors and their metrics (ingest.h). */
#include "actors/ingest.h"

#include "actors/article_msg.h"

#include <errno.h>
#include <stdio.h>
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
}

static const double lateness_bounds[] = {0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5,
                                         1,     2,     5,    10,   30,  60,   300};

static int reg_metrics(nf_ingest_metrics_t *m)
{
    int r = 0;
    char labels[64];
    for (int e = 1; e <= NF_FETCH_E_OTHER; e++) {
        snprintf(labels, sizeof labels, "result=\"%s\"", nf_fetch_error_name(e));
        r |= nf_metrics_counter("newsflow_fetch_requests_total",
                                "Fetch attempts by result: HTTP status class or fetch error.",
                                labels, 0, &m->fetch_result[e]);
    }
    static const char *const cls[] = {"http_other", "http_1xx", "http_2xx",
                                      "http_3xx",   "http_4xx", "http_5xx"};
    for (int i = 0; i < 6; i++) {
        snprintf(labels, sizeof labels, "result=\"%s\"", cls[i]);
        r |= nf_metrics_counter("newsflow_fetch_requests_total",
                                "Fetch attempts by result: HTTP status class or fetch error.",
                                labels, 0, &m->fetch_http[i]);
    }
    r |= nf_metrics_histogram("newsflow_fetch_duration_seconds", "Fetch duration.", NULL,
                              nf_metrics_latency_bounds, nf_metrics_latency_nbounds,
                              &m->fetch_seconds);
    r |= nf_metrics_counter("newsflow_fetch_body_bytes_total", "Decoded body bytes fetched.", NULL,
                            0, &m->fetch_bytes);
    r |= nf_metrics_histogram(
        "newsflow_crawl_lateness_seconds", "Fetch start minus the source's next_crawl_at.", NULL,
        lateness_bounds, sizeof lateness_bounds / sizeof *lateness_bounds, &m->lateness_seconds);
    r |= nf_metrics_counter("newsflow_crawl_deferred_total", "Due fetches postponed, by reason.",
                            "reason=\"host_politeness\"", 0, &m->deferred_host);
    r |= nf_metrics_counter("newsflow_crawl_deferred_total", "Due fetches postponed, by reason.",
                            "reason=\"breaker_open\"", 0, &m->deferred_breaker);
    r |= nf_metrics_counter("newsflow_crawl_deferred_total", "Due fetches postponed, by reason.",
                            "reason=\"shard_capacity\"", 0, &m->deferred_capacity);
    r |= nf_metrics_counter("newsflow_crawl_breaker_transitions_total",
                            "Per-host circuit breaker transitions.", "to=\"open\"", 0,
                            &m->breaker_open);
    r |= nf_metrics_counter("newsflow_crawl_breaker_transitions_total",
                            "Per-host circuit breaker transitions.", "to=\"half_open\"", 0,
                            &m->breaker_half_open);
    r |= nf_metrics_counter("newsflow_crawl_breaker_transitions_total",
                            "Per-host circuit breaker transitions.", "to=\"closed\"", 0,
                            &m->breaker_closed);
    r |= nf_metrics_counter("newsflow_crawl_sources_dead_total",
                            "Sources that became DEAD after consecutive failures.", NULL, 0,
                            &m->sources_dead);
    static const char *const pres[] = {"ok",        "too_large", "not_a_feed",
                                       "malformed", "too_deep",  "out_of_memory"};
    for (int i = 0; i < 6; i++) {
        snprintf(labels, sizeof labels, "result=\"%s\"", pres[i]);
        r |= nf_metrics_counter("newsflow_parse_documents_total", "Fetched documents parsed.",
                                labels, 0, &m->parse_result[i]);
    }
    r |= nf_metrics_histogram("newsflow_parse_duration_seconds", "Parse+normalize time.", NULL,
                              nf_metrics_latency_bounds, nf_metrics_latency_nbounds,
                              &m->parse_seconds);
    r |= nf_metrics_counter("newsflow_parse_articles_total", "Articles extracted from feeds.", NULL,
                            0, &m->parse_articles);
    r |= nf_metrics_counter("newsflow_parse_items_without_link_total",
                            "Feed items dropped for having no usable link.", NULL, 0,
                            &m->parse_no_link);
    r |= nf_metrics_counter("newsflow_parse_warnings_total",
                            "Recoverable problems in feeds (recovered XML, bad dates, ...).", NULL,
                            0, &m->parse_warnings);
    r |= nf_metrics_counter("newsflow_parse_items_truncated_total",
                            "Items beyond the per-feed item cap.", NULL, 0, &m->parse_truncated);
    r |= nf_metrics_counter("newsflow_dedup_articles_total", "Articles by dedup result.",
                            "result=\"new\"", 0, &m->dedup_new);
    r |= nf_metrics_counter("newsflow_dedup_articles_total", "Articles by dedup result.",
                            "result=\"duplicate\"", 0, &m->dedup_duplicate);
    r |= nf_metrics_counter("newsflow_sink_errors_total", "Failed sink writes (retried).", NULL, 0,
                            &m->sink_errors);
    r |= nf_metrics_counter("newsflow_crawl_articles_ring_full_total",
                            "Articles held back because the dedup shard's ring was full.", NULL, 0,
                            &m->ring_full_articles);
    r |= nf_metrics_gauge("newsflow_crawl_in_flight", "Fetches in flight.", NULL,
                          NF_METRIC_PER_SHARD, &m->in_flight);
    r |= nf_metrics_gauge("newsflow_crawl_pending_articles",
                          "Articles waiting for ring space (backpressure).", NULL,
                          NF_METRIC_PER_SHARD, &m->pending_articles);
    r |= nf_metrics_gauge("newsflow_crawl_sources", "Sources owned.", NULL, NF_METRIC_PER_SHARD,
                          &m->sources);
    r |= nf_metrics_gauge("newsflow_dedup_keys", "Article ids in the dedup set.", NULL,
                          NF_METRIC_PER_SHARD, &m->dedup_keys);
    r |= nf_metrics_gauge("newsflow_dedup_bytes", "Memory of the dedup set.", NULL,
                          NF_METRIC_PER_SHARD, &m->dedup_bytes);
    return r ? -EINVAL : 0;
}

int nf_ingest_register(nf_runtime_t *rt, nf_ingest_t *in)
{
    in->o.fetch.guard = &in->o.guard;
    int r = reg_metrics(&in->m);
    if (r != 0)
        return r;
    in->crawl_actor = nf_runtime_register(rt, &nf_crawl_ops, in);
    if (in->crawl_actor < 0)
        return in->crawl_actor;
    in->dedup_actor = nf_runtime_register(rt, &nf_dedup_ops, in);
    return in->dedup_actor < 0 ? in->dedup_actor : 0;
}
