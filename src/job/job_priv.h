/* job_priv.h — the job's parts, shared by the files of src/job/ only (job.h is the interface). */
#ifndef NF_JOB_PRIV_H
#define NF_JOB_PRIV_H
#include "actors/analytics.h"
#include "actors/ingest.h"
#include "actors/reads.h"
#include "actors/topics_follow.h"
#include "io/demo.h"
#include "io/edge_kafka.h"
#include "io/kafka.h"
#include "job/job.h"
#include "runtime/admin.h"
#include "runtime/history.h"
#include "runtime/httpd.h"
#include "runtime/runtime.h"
#include "serve/api.h"
#include "serve/edge.h"
#include "serve/guard.h"
#include "serve/operator.h"
#include "serve/owners.h"
#include "serve/query.h"
#include "serve/search.h"
#include "state/standby.h"
#include "state/store.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

enum { PHASE_STARTING = 0, PHASE_RUNNING, PHASE_STOPPING };

struct nf_job {
    nf_config_t cfg;
    nf_job_args_t args;
    _Atomic int phase;
    /* set once their part has started, for readiness (the HTTP threads read them) */
    nf_kafka_t *_Atomic kafka_ready;
    nf_epoch_t *_Atomic epoch_ready;
    bool admin_file; /* this process wrote state.dir/admin.json (job_http.c) */
    nf_ingest_t in;
    nf_source_list_t sources;
    nf_topics_follow_t *follow; /* in a consumer group: the articles' topic vectors */
    nf_reads_t reads;
    nf_analytics_t an;
    nf_variants_t variants; /* ranking.variants (engine/variants.h) */
    nf_classify_taxonomy_t *taxonomy;
    nf_store_t *store;
    nf_kafka_mock_t *mock;
    nf_kafka_t *kafka;
    const char *brokers; /* kafka.brokers, or the embedded cluster's bootstrap */
    nf_epoch_t *epoch;
    nf_standby_t *standby; /* scale.standby_replicas */
    nf_demo_t *demo;
    nf_edge_kafka_t *edge_kafka; /* the HTTP edge (serve/edge.h): edge.enabled with Kafka */
    nf_edge_t *edge;
    nf_guard_t *guard; /* authentication and rate limits of readers' routes (serve/guard.h) */
    nf_runtime_t *rt;
    unsigned shards;
    nf_query_t *query;     /* the query API's routes */
    nf_owners_t *owners;   /* in a consumer group: who owns which partition (serve/owners.h) */
    nf_search_t *search;   /* GET /v1/search: its index follows the committed views */
    nf_operator_t *op;     /* the operators' routes (serve/operator.h) */
    nf_api_t api;          /* admin.port's routes (serve/api.h) */
    nf_api_t api_op;       /* admin.operator_port's */
    char self_url[512];    /* this process's query API as the others name it; "" = none */
    nf_admin_t *admin;     /* admin.port (until the shards take it over: httpd) */
    nf_httpd_t *httpd;     /* admin.port on the shards' loops (http.shards; NULL: off) */
    nf_admin_t *operator;  /* admin.operator_port: the operators' routes apart from readers */
    nf_admin_t *probe;     /* admin.probe_port's listener (NULL: none) */
    nf_history_t *history; /* GET /v1/ops/history: the page's graphs */
    uint64_t started_ns;
};

/* job_setup.c: the actors and their options from the configuration. 0 or an exit code. */
int job_setup_ingest(nf_job_t *j);
int job_setup_actors(nf_job_t *j);

/* job_state.c: state, Kafka and the epoch coordinator before any actor runs; the standby; the
 * sources topic. 0 or an exit code (logged). */
int job_setup_durability(nf_job_t *j);
int job_publish_sources(nf_job_t *j);
void job_start_standby(nf_job_t *j);

/* job_http.c: the HTTP servers and what they serve. 0 or an exit code (logged). */
int job_start_http(nf_job_t *j);
void job_stop_http(nf_job_t *j);
/* Once the shards run: admin.port's listening socket moves from the admin server to them. */
void job_http_to_shards(nf_job_t *j);
/* Readiness: what the job waits for, as bits (WAIT_*); /readyz, /v1/status and the main loop's
 * log lines all ask job_readiness. */
enum {
    WAIT_RESTORE = 1,    /* recovering state before the shards start */
    WAIT_ASSIGNMENT = 2, /* no input partition assigned by the consumer group yet */
    WAIT_COMMIT = 4,     /* no epoch committed for 3 checkpoint intervals (at least 5 s) */
    WAIT_BROKER = 8,     /* a recent Kafka client error while one of the above holds */
    WAIT_SHUTDOWN = 16,  /* stopping */
};
typedef struct job_readiness {
    int waiting; /* WAIT_* bits; 0 = ready */
    double since_commit_s, overdue_after_s, kafka_error_age_s;
    uint64_t epoch, partitions;
    char kafka_error[256];
} job_readiness_t;
void job_readiness(nf_job_t *j, job_readiness_t *r);
/* "restore,commit_overdue" of the WAIT_* bits into buf. */
const char *job_wait_list(int waiting, char *buf, size_t len);
/* "HOST:PORT" where a client on this machine reaches port. */
void job_local_address(const nf_config_t *cfg, uint16_t port, char *out, size_t outlen);

/* job_serve.c: the guard, the edge, the query API and the history before the servers start (0
 * or an exit code, logged); the demo's readers once the admin server listens. */
int job_serve_setup(nf_job_t *j);
void job_start_demo(nf_job_t *j);
int job_check_shared_sources(const nf_source_list_t *l);

/* job.c: releases everything started (any stage of the start); the sink's close result. */
int job_release(nf_job_t *j);

#endif
