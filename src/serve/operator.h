/* operator.h — the operators' /v1/ routes: GET /v1/status (what `newsflow status` prints),
 * /v1/sources[?failing=1] (`newsflow sources list`) and /v1/ops/history (the page's graphs).
 * They read the job's parts directly (the runtime, the epoch coordinator, the Kafka client, the
 * standby); the job says through a callback what only it knows (readiness, the start's phase).
 * Served on admin.port, or apart on admin.operator_port (serve/api.h); routes in routes.h.
 *
 * Threads: new/free on the job's main thread; handle from any number of HTTP threads. */
#ifndef NF_SERVE_OPERATOR_H
#define NF_SERVE_OPERATOR_H
#include "actors/ingest.h"
#include "io/kafka.h"
#include "runtime/admin.h"
#include "runtime/config.h"
#include "runtime/history.h"
#include "runtime/runtime.h"
#include "serve/routes.h"
#include "state/epoch.h"
#include "state/standby.h"

#include <stdbool.h>
#include <stddef.h>

/* What the job knows of itself: ready or not, what it waits for ("restore,assignment"; "" when
 * ready, into waiting[len]) and whether its state is still being restored. */
typedef bool (*nf_operator_ready_fn)(void *arg, char *waiting, size_t len, bool *restoring);

typedef struct nf_operator_opts {
    const nf_config_t *cfg; /* state.dir, state.changelog, scale.standby_replicas */
    nf_runtime_t *rt;
    nf_ingest_t *in; /* the sources' listing and health gauges */
    nf_epoch_t *epoch;
    nf_kafka_t *kafka;     /* NULL: no Kafka */
    nf_history_t *history; /* NULL: /v1/ops/history answers 404 */
    const char *from_checkpoint;
    nf_operator_ready_fn ready;
    void *arg;
} nf_operator_opts_t;

typedef struct nf_operator nf_operator_t;

/* NULL when out of memory. */
nf_operator_t *nf_operator_new(const nf_operator_opts_t *o);
void nf_operator_free(nf_operator_t *op);
/* The warm standby once it runs (state/standby.h; NULL: none). Any thread. */
void nf_operator_set_standby(nf_operator_t *op, nf_standby_t *sb);
/* One of the operators' routes (id's route serves NF_SERVED_BY_OPERATOR): the HTTP status with
 * its malloc'ed JSON body in *body. */
int nf_operator_handle(nf_operator_t *op, nf_route_id_t id, nf_admin_req_t *req, char **body,
                       size_t *len);

#endif
