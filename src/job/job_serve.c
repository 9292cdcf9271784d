/* job_serve.c — what the job's HTTP servers answer with: the guard (auth.*, limits.*), the query
 * API over the committed state (with the search index and, in a consumer group, the owners of
 * other partitions), the edge that takes readers' events into read-events, the history of the
 * page's graphs, and the demo's readers. */
#include "job/job_priv.h"

#include "feed/feed.h"
#include "runtime/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether this process owns read-events partition p now (a consumer group's assignment). */
static bool query_owns(void *arg, unsigned p)
{
    const nf_job_t *j = arg;
    return nf_kafka_owns(j->kafka, NF_INPUT_READ_EVENTS, (int32_t)p);
}

/* Whether this process holds the global key group's state: it owns trending-panes 0, or its
 * standby keeps that changelog applied (serve.global_replica, scale.standby_replicas). */
static bool query_global_here(void *arg)
{
    const nf_job_t *j = arg;
    if (nf_kafka_owns(j->kafka, NF_INPUT_TRENDING_PANES, 0))
        return true;
    nf_standby_status_t s;
    nf_standby_status(j->standby, &s, NULL, NULL);
    return s.global && !s.failed;
}

static int describe_group(void *arg, int timeout_ms,
                          void (*cb)(void *cbarg, const char *client_id, nf_input_t in,
                                     int32_t partition),
                          void *cbarg, char *err, size_t errlen)
{
    return nf_kafka_members(arg, timeout_ms, cb, cbarg, err, errlen);
}

/* The search index's thread (search.enabled, with a state directory); NULL without one, or
 * when it cannot start (logged: search then answers 404). */
static nf_search_t *start_search(nf_job_t *j)
{
    const nf_config_t *cfg = &j->cfg;
    if (!cfg->search.enabled || !j->store)
        return NULL;
    char path[4096], err[256];
    snprintf(path, sizeof path, "%s/search.db", cfg->state.dir);
    uint32_t retention = cfg->search.retention_s;
    if (retention > cfg->cluster.ttl_s) {
        nf_log(NF_LOG_WARN, "main",
               "search.retention_s is longer than cluster.ttl_s, the articles' metadata TTL: "
               "searching the metadata's span only",
               NF_LI("search_retention_s", retention), NF_LI("cluster_ttl_s", cfg->cluster.ttl_s),
               NF_LEND);
        retention = cfg->cluster.ttl_s;
    }
    nf_search_opts_t so = {.store = j->store,
                           .path = path,
                           .retention_ms = (int64_t)retention * 1000,
                           .max_articles = cfg->search.max_articles,
                           .memory_mb = cfg->search.memory_mb,
                           .readers = cfg->search.readers,
                           .scan_max = cfg->search.scan_max};
    nf_search_t *s = nf_search_start(&so, err, sizeof err);
    if (!s)
        nf_log(NF_LOG_ERROR, "main", "search cannot start: GET /v1/search answers 404",
               NF_LS("error", err), NF_LEND);
    return s;
}

static nf_query_t *new_query(nf_job_t *j)
{
    unsigned ntopics = 0;
    while (ntopics < NF_TOPICS_MAX && j->an.topic_names[ntopics])
        ntopics++;
    int parts = j->kafka ? nf_kafka_input_partitions(j->kafka, NF_INPUT_READ_EVENTS) : 0;
    bool group = j->cfg.kafka.assignment != 1 && j->kafka;
    nf_query_opts_t qo = {.store = j->store,
                          .topic_names = j->an.topic_names,
                          .ntopics = ntopics,
                          .read_partitions = parts > 0 ? (unsigned)parts : 1,
                          .owns = group ? query_owns : NULL,
                          .owns_arg = j,
                          .global_articles = j->in.in_partitions,
                          .partitioner = j->cfg.serve.partitioner,
                          .global_here = group && j->in.in_partitions ? query_global_here : NULL,
                          .self_url = j->self_url,
                          .search = j->search = start_search(j),
                          .reader_cache = j->cfg.serve.reader_cache,
                          .variants = &j->variants,
                          .shadow_percent = j->cfg.ranking.shadow_percent};
    if (group && j->self_url[0] && !j->mock) { /* the embedded cluster is one process */
        char err[256];
        nf_owners_opts_t oo = {.describe = describe_group, .arg = j->kafka};
        if (!(j->owners = nf_owners_start(&oo, err, sizeof err)))
            nf_log(NF_LOG_WARN, "main",
                   "the query API cannot find other processes: it answers 503 for keys they own",
                   NF_LS("error", err), NF_LEND);
        qo.owners = j->owners;
    }
    return nf_query_new(&qo);
}

/* The HTTP edge on the job's own server: readers' events into read-events (serve/edge.h). One
 * that cannot start is logged: the job runs without (POST answers 404). */
static void start_edge(nf_job_t *j)
{
    char err[512];
    nf_edge_kafka_opts_t ko;
    nf_edge_opts_t eo;
    nf_edge_opts_from_config(&j->cfg, j->brokers,
                             nf_kafka_input_topic(j->kafka, NF_INPUT_READ_EVENTS), &ko, &eo);
    j->edge_kafka = nf_edge_kafka_new(&ko, err, sizeof err);
    eo.kafka = j->edge_kafka;
    if (j->edge_kafka && !(j->edge = nf_edge_new(&eo)))
        snprintf(err, sizeof err, "out of memory");
    if (!j->edge) {
        nf_log(NF_LOG_WARN, "main", "the HTTP edge (POST /v1/events) is not taking events",
               NF_LS("error", err), NF_LEND);
        nf_edge_kafka_free(j->edge_kafka);
        j->edge_kafka = NULL;
    }
}

/* The guard, the edge, the query API and the history, before the servers start. 0 or an exit
 * code (logged). */
int job_serve_setup(nf_job_t *j)
{
    const nf_config_t *cfg = &j->cfg;
    char err[512];
    if (j->kafka && cfg->edge.enabled)
        start_edge(j);
    nf_guard_opts_t go;
    nf_guard_opts_from_config(cfg, &go);
    if (!(j->guard = nf_guard_new(&go, err, sizeof err))) {
        nf_log(NF_LOG_ERROR, "main", "cannot set up the readers' authentication",
               NF_LS("error", err), NF_LEND);
        return NF_EXIT_USAGE;
    }
    if (!(j->query = new_query(j))) {
        nf_log(NF_LOG_ERROR, "main", "out of memory", NF_LEND);
        return NF_EXIT_RUNTIME;
    }
    if (cfg->admin.history_interval_ms)
        j->history = nf_history_start(cfg->admin.history_interval_ms);
    return 0;
}

/* The article ids of the configured local feed files (the demo's example feeds), parsed with
 * the job's own parser, so the demo's read events name articles the job will crawl. At most
 * 200; a file that does not read or parse is skipped (the crawl reports it). */
static size_t demo_article_ids(const nf_source_list_t *l, char ***out)
{
    size_t n = 0, cap = 200;
    char **ids = calloc(cap, sizeof *ids);
    if (!ids)
        return 0;
    for (size_t i = 0; i < l->n && n < cap; i++) {
        if (!l->items[i].is_file || strncmp(l->items[i].url, "file://", 7) != 0)
            continue;
        FILE *f = fopen(l->items[i].url + 7, "rb");
        if (!f)
            continue;
        static char buf[1 << 20];
        size_t len = fread(buf, 1, sizeof buf, f);
        fclose(f);
        nf_feed_t feed;
        if (nf_feed_parse(&feed, buf, len, l->items[i].url, 0, NULL, NULL, 0) != NF_FEED_OK)
            continue;
        for (size_t k = 0; k < feed.nitems && n < cap; k++)
            if (feed.items[k].article_id[0] && (ids[n] = strdup(feed.items[k].article_id)))
                n++;
        nf_feed_free(&feed);
    }
    *out = ids;
    return n;
}

/* The demo's readers (demo.read_events_per_s, the embedded cluster only: a demo needs no real
 * broker): they post to this job's own edge, as a reader's browser would. */
void job_start_demo(nf_job_t *j)
{
    const nf_config_t *cfg = &j->cfg;
    if (!j->kafka || !j->mock || !cfg->demo.read_events_per_s)
        return;
    if (!j->edge) {
        nf_log(NF_LOG_WARN, "main",
               "demo readers not started: they post to the HTTP edge, which is off (edge.enabled, "
               "admin.enabled)",
               NF_LEND);
        return;
    }
    char addr[96], url[128], err[256];
    job_local_address(cfg, nf_admin_port(j->admin), addr, sizeof addr);
    snprintf(url, sizeof url, "http://%s/v1/events", addr);
    char **ids = NULL;
    size_t nids = demo_article_ids(&j->sources, &ids);
    j->demo = nf_demo_start(url, cfg->demo.read_events_per_s, cfg->demo.users, cfg->demo.events,
                            (const char *const *)ids, nids, err, sizeof err);
    for (size_t i = 0; i < nids; i++)
        free(ids[i]);
    free(ids);
    if (!j->demo)
        nf_log(NF_LOG_WARN, "main", "demo readers not started", NF_LS("error", err), NF_LEND);
}
