/* job_setup.c — the actors' options from the configuration and their registration with the
 * runtime: ingestion (schedule, fetch, parse, dedup, classify: actors/ingest.h), analytics
 * (stories, trending: actors/analytics.h) and the read events (reads, interest:
 * actors/reads.h). Configuration errors found here stop the start with exit 2. */
#include "job/job_priv.h"

#include "algo/hash.h"
#include "io/fetch_config.h"
#include "runtime/log.h"
#include "state/changelog.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Everything the ingestion actors need, from the configuration. 0, or -1 with a message that
 * names the key (a usage/config error). */
static int setup_ingest(const nf_config_t *cfg, nf_ingest_t *in, nf_source_list_t *src, char *err,
                        size_t errlen)
{
    nf_ingest_opts_t *o = &in->o;
    nf_ingest_opts_default(o);
    nf_crawl_policy_t *p = &o->policy;
    p->interval_default_ms = (int64_t)cfg->crawl.interval_s * 1000;
    p->interval_floor_ms = (int64_t)cfg->crawl.interval_floor_s * 1000;
    p->interval_ceiling_ms = (int64_t)cfg->crawl.interval_ceiling_s * 1000;
    p->jitter_permille = cfg->crawl.jitter_permille;
    p->backoff_base_ms = (int64_t)cfg->crawl.backoff_base_s * 1000;
    p->backoff_cap_ms = (int64_t)cfg->crawl.backoff_cap_s * 1000;
    p->dead_after_failures = cfg->crawl.dead_after_failures;
    p->host_max_concurrent = cfg->crawl.host_max_concurrent;
    p->host_spacing_ms = cfg->crawl.host_spacing_ms;
    p->breaker_failures = cfg->crawl.breaker_failures;
    p->breaker_window_ms = (int64_t)cfg->crawl.breaker_window_s * 1000;
    p->breaker_open_ms = (int64_t)cfg->crawl.breaker_open_s * 1000;
    o->max_future_ms = cfg->trending.max_future_ms;
    if (p->breaker_open_max_ms < p->breaker_open_ms)
        p->breaker_open_max_ms = p->breaker_open_ms;
    const char *bad = nf_crawl_policy_validate(p);
    if (bad) {
        snprintf(err, errlen, "crawl: %s", bad);
        return -1;
    }
    if (nf_fetch_opts_from_config(cfg, &o->fetch, &o->guard, err, errlen) != 0)
        return -1;
    o->max_in_flight = cfg->fetch.max_in_flight;
    o->limits.max_bytes = cfg->fetch.body_max_bytes;
    o->limits.max_items = cfg->parse.max_items;
    o->limits.max_body = cfg->parse.max_body_bytes;

    /* The same validation as `config check`: every bad line at once, then refuse the list. */
    nf_sources_init(src);
    nf_sources_report_t rep;
    int lr = nf_sources_load(src, cfg->sources.urls, cfg->sources.file, &rep);
    if (lr != 0) {
        fprintf(stderr, "newsflow: config error: %u bad line%s in the source list:\n%s",
                rep.nerrors, rep.nerrors == 1 ? "" : "s", rep.errors ? rep.errors : "");
        snprintf(err, errlen,
                 "%u bad source line%s (listed above; `newsflow config check` "
                 "lists them too)",
                 rep.nerrors, rep.nerrors == 1 ? "" : "s");
        nf_sources_report_free(&rep);
        return -1;
    }
    for (const char *w = rep.warnings; w && *w;) {
        size_t n = strcspn(w, "\n");
        char line[PATH_MAX + 1024];
        snprintf(line, sizeof line, "%.*s", (int)n, w);
        nf_log(NF_LOG_WARN, "main", "local source file missing: the source fails until it exists",
               NF_LS("detail", line), NF_LEND);
        w += n + (w[n] == '\n');
    }
    nf_sources_report_free(&rep);
    in->sources = src;
    /* One writer: the epoch coordinator writes committed outputs (shard slot 0). */
    in->sink = nf_sink_open(cfg->sink.spec, 1, err, errlen);
    if (!in->sink)
        return -1;
    return 0;
}

/* The analytics options from the config (analytics.h), the taxonomy loaded once, and the
 * stories and trending actors registered. 0, or -1 with the reason in err (a config error). */
static int setup_analytics(nf_job_t *j, char *err, size_t errlen)
{
    const nf_config_t *cfg = &j->cfg;
    nf_analytics_t *an = &j->an;
    nf_analytics_defaults(an);
    an->epoch = j->epoch;
    /* several processes may share the job: trending panes through Kafka to one merger */
    an->panes_topic = cfg->state.changelog && cfg->kafka.assignment != 1 && j->kafka;
    an->sink = j->in.sink;
    an->store = j->store;
    an->budget_bytes = (size_t)cfg->state.budget_mb << 20;
    if (cfg->classify.taxonomy[0]) {
        j->taxonomy = strcmp(cfg->classify.taxonomy, "builtin") == 0
                          ? nf_classify_load_text("builtin taxonomy", nf_classify_builtin,
                                                  nf_classify_builtin_len, err, errlen)
                          : nf_classify_load(cfg->classify.taxonomy, err, errlen);
        if (!j->taxonomy)
            return -1;
        if (nf_classify_topic_count(j->taxonomy) > NF_TOPICS_MAX) {
            snprintf(err, errlen, "classify.taxonomy: more than %d topics", NF_TOPICS_MAX);
            return -1;
        }
    }
    an->taxonomy = j->taxonomy;
    an->minhash.shingle_words = cfg->cluster.shingle_words;
    an->minhash.hashes = an->cluster.hashes = cfg->cluster.hashes;
    an->minhash.bands = an->cluster.bands = cfg->cluster.bands;
    an->minhash.rows = an->cluster.rows = cfg->cluster.rows;
    an->cluster.threshold = cfg->cluster.threshold;
    an->cluster.ttl_ms = an->topics_ttl_ms = (uint64_t)cfg->cluster.ttl_s * 1000u;
    an->history_ttl_ms = cfg->interest.history ? (uint64_t)cfg->interest.history_ttl_s * 1000u : 0;
    an->history_reads = cfg->interest.history == 2;
    an->cluster_shard = cfg->cluster.shard;
    if (j->in.in_partitions) { /* the articles' state belongs to the one-partition topic */
        an->cluster.key_group = NF_CHANGELOG_GLOBAL_KG;
        an->interest.topics_key_group = NF_CHANGELOG_GLOBAL_KG;
    }
    an->trend.window_ms = (int64_t)cfg->trending.window_s * 1000;
    an->trend.slide_ms = (int64_t)cfg->trending.slide_s * 1000;
    an->trend.lateness_ms = cfg->trending.lateness_ms;
    an->trend.idle_ms = cfg->trending.idle_ms;
    an->trend.cms_width = cfg->trending.cms_width;
    an->trend.cms_depth = cfg->trending.cms_depth;
    an->trend.top_k = cfg->trending.top_k;
    an->trend.exact = cfg->trending.exact;
    an->trend_by_story = cfg->trending.by_story;
    an->breaking = cfg->breaking.enabled;
    an->breaking_opts =
        (nf_breaking_opts_t){.multiple = cfg->breaking.multiple,
                             .min_reads = cfg->breaking.min_reads,
                             .min_peers = cfg->breaking.min_peers,
                             .cooldown_ms = (int64_t)cfg->breaking.cooldown_s * 1000};
    an->notify = cfg->breaking.enabled && cfg->notifications.enabled && !an->panes_topic;
    an->notify_cap = cfg->notifications.daily_cap;
    if (cfg->breaking.enabled && cfg->notifications.enabled && an->panes_topic)
        nf_log(NF_LOG_WARN, "main",
               "notifications are not sent by a job in several processes yet (the readers are "
               "spread over them): subscriptions are kept; breaking-news is announced",
               NF_LEND);
    an->event_id_ttl_ms = (uint64_t)cfg->trending.event_id_ttl_s * 1000u;
    an->max_future_ms = cfg->trending.max_future_ms;
    an->max_age_ms =
        cfg->trending.backfill ? 0 : an->trend.window_ms + (int64_t)cfg->trending.lateness_ms;
    an->interest.alpha = cfg->interest.alpha;
    an->interest.gamma = cfg->interest.gamma;
    const double weights[NF_READ_KIND__COUNT] = {
        cfg->interest.weight_read, cfg->interest.weight_save, cfg->interest.weight_share,
        cfg->interest.weight_dislike, cfg->interest.weight_hide};
    memcpy(an->interest.weights, weights, sizeof weights);
    an->interest.seen_ttl_ms = (uint64_t)cfg->interest.seen_ttl_s * 1000u;
    an->interest.table_max = cfg->interest.table_max;
    an->interest.unknown_as_empty = cfg->interest.unknown_articles == 1;
    if (cfg->interest.gamma <= 0.0) {
        snprintf(err, errlen, "interest.gamma must be in (0, 1]");
        return -1;
    }
    return nf_analytics_register(j->rt, an, err, errlen) == 0 ? 0 : -1;
}

int job_setup_ingest(nf_job_t *j)
{
    char err[NF_CONFIG_ERRLEN];
    if (setup_ingest(&j->cfg, &j->in, &j->sources, err, sizeof err) != 0) {
        fprintf(stderr, "newsflow: config error: %s\n", err);
        return NF_EXIT_USAGE;
    }
    if (j->sources.n == 0)
        nf_log(NF_LOG_WARN, "main", "no sources configured: nothing will be crawled",
               NF_LS("hint", "set sources.file or sources.urls"), NF_LEND);
    return 0;
}

/* The read events' actors (actors/reads.h). */
static void setup_reads(nf_job_t *j)
{
    const nf_config_t *cfg = &j->cfg;
    j->reads = (nf_reads_t){
        .kafka = j->kafka,
        .ingest = &j->in,
        .epoch = j->epoch,
        .an = &j->an,
        .store = j->store,
        /* the transactional id is the process's stable identity in the job */
        .process_id = cfg->state.changelog && cfg->kafka.assignment != 1
                          ? nf_hash64_str(cfg->kafka.transactional_id, 0x6b6579736574ull) | 1
                          : 0,
        .max_event_bytes = cfg->kafka.max_event_bytes,
        .pause_high_water = cfg->kafka.pause_high_water,
        .pause_low_water = cfg->kafka.pause_low_water,
        .budget_bytes = (size_t)cfg->state.budget_mb << 20,
        .coalesce_max = cfg->interest.coalesce ? cfg->interest.coalesce_max_users : 0,
        .variants = &j->variants};
    const char *slow = getenv("NF_TEST_SLOW_READS_US"); /* backpressure test knob */
    if (slow)
        j->reads.slow_us = (uint32_t)strtoul(slow, NULL, 10);
}

int job_setup_actors(nf_job_t *j)
{
    const nf_config_t *cfg = &j->cfg;
    char err[NF_CONFIG_ERRLEN];
    j->in.epoch = j->epoch;
    j->in.store = j->store;
    j->in.budget_bytes = (size_t)cfg->state.budget_mb << 20;
    /* Several processes may share the job: sources follow the sources partitions (ingest.h). */
    j->in.in_partitions = cfg->state.changelog && cfg->kafka.assignment != 1 && j->kafka;
    j->in.kafka = j->kafka;
    int code;
    if (j->in.in_partitions && (code = job_check_shared_sources(&j->sources)) != 0)
        return code;
    if (setup_analytics(j, err, sizeof err) != 0 ||
        nf_variants_parse(cfg->ranking.variants, cfg->ranking.experiment, &j->variants, err,
                          sizeof err) != 0) {
        fprintf(stderr, "newsflow: config error: %s\n", err);
        return NF_EXIT_USAGE;
    }
    j->in.an = &j->an;
    setup_reads(j);
    if (nf_ingest_register(j->rt, &j->in) != 0 || nf_reads_register(j->rt, &j->reads) != 0) {
        nf_log(NF_LOG_ERROR, "main", "cannot register the actors", NF_LEND);
        return NF_EXIT_RUNTIME;
    }
    return 0;
}
