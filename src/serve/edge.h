/* edge.h — the HTTP edge (docs/ARCHITECTURE.md §4, "The edge"): readers' clicks and feedback come
 * in over HTTP and are produced to read-events, 202 meaning the broker has them.
 *
 * Routes (POST; docs/openapi.json describes them):
 *   POST /v1/events                 a batch: a JSON array of events or NDJSON (io/event_batch.h),
 *                                   at most edge.max_batch events and edge.max_body_bytes
 *   POST /v1/articles/{id}/read     one read of article id: body {"user_id", "session_id"?,
 *                                   "ts"?} (ts defaults to now), or empty with user_id in the
 *                                   query (?user_id=)
 * An event is a read-events record (schemas/read-events.schema.json; io/events.h decodes it:
 * user_id, article_id, session_id, kind — read, save, share, dislike, hide — ts, event_id). Each
 * is checked as the job checks what it consumes (the decoder, then its time against the wall
 * clock and trending.max_future_ms), gets its event_id when it has none (so that a client's
 * retry is the same event) — one it has is made the reader's own, the hex SHA-256 of user_id
 * NUL event_id NUL, so that no reader can post ids that make the job drop another's events —
 * and is produced in its canonical form (nf_read_event_json) keyed by user_id
 * (io/edge_kafka.h); a canonical form over kafka.max_event_bytes is rejected.
 *
 * Answers (JSON):
 *   202 {"accepted":N,"rejected":[{"index":I,"field":F,"error":E},...]} once the broker has
 *       acknowledged all N accepted events; the rejected ones (index in the batch, from 0; field
 *       when one is at fault) were not produced. The single-read route adds "event_id".
 *   400 {"error":E,"rejected":[...]} when no event of the batch is acceptable, or the batch
 *       itself cannot be split (an unterminated array...)
 *   413 a body over edge.max_body_bytes (admin.c) or a batch over edge.max_batch
 *   415 a body not declared application/json or application/x-ndjson (a form or text/plain is
 *       what another site's page may post without asking: never taken)
 *   503 + Retry-After (edge.retry_after_s) {"error":E,"accepted":0} when the producer is over
 *       edge.max_in_flight, or an event was not acknowledged within edge.delivery_timeout_ms (a
 *       broker down): nothing of the request counts as accepted; send it again, the event_ids
 *       make the repeat harmless.
 * Metrics: newsflow_edge_requests_total{code}, newsflow_edge_events_total{result="accepted",
 * "rejected", "refused"} (refused: in a 413 or 503 answer), newsflow_edge_ack_seconds (produce
 * to the last acknowledgement of a request), newsflow_edge_in_flight_events.
 *
 * Threads: nf_edge_new/free from one thread; nf_edge_handle and nf_edge_ready from any number
 * of the HTTP server's threads at once. */
#ifndef NF_SERVE_EDGE_H
#define NF_SERVE_EDGE_H

#include "io/edge_kafka.h"
#include "runtime/admin.h"
#include "runtime/config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nf_edge_opts {
    nf_edge_kafka_t *kafka;   /* owned by the caller, outlives the edge */
    uint32_t max_batch;       /* events in one request (0: 1000) */
    uint32_t max_event_bytes; /* one event (kafka.max_event_bytes; 0: 65536) */
    int64_t max_future_ms;    /* ts ahead of the wall clock refused (trending.max_future_ms) */
    uint32_t retry_after_s;   /* of a 503 (0: 1) */
} nf_edge_opts_t;

typedef struct nf_edge nf_edge_t;

/* The edge's producer options (ko: brokers and topic as given, the rest from kafka.* and edge.*)
 * and its own (eo, from edge.*, kafka.max_event_bytes and trending.max_future_ms; eo->kafka
 * NULL: the caller sets it to the producer). `newsflow run` and `newsflow ingest` alike. */
void nf_edge_opts_from_config(const nf_config_t *cfg, const char *brokers, const char *topic,
                              nf_edge_kafka_opts_t *ko, nf_edge_opts_t *eo);

/* NULL on out-of-memory (its metrics are registered; a failure there is the registry's to
 * report, metrics.h). */
nf_edge_t *nf_edge_new(const nf_edge_opts_t *o);
void nf_edge_free(nf_edge_t *e);

/* POST /v1/ROUTE (route without "/v1/") with its body: the HTTP status and a malloc'ed JSON
 * body in *out; 0 when route is none of the edge's (nothing written). subject: the verified
 * token's subject (serve/guard.h), or NULL or "" without authentication; with one, an event of
 * another user_id is rejected (`field "user_id": ... not the token's subject`), and a request
 * with nothing else is 403. */
int nf_edge_handle(nf_edge_t *e, const char *route, nf_admin_req_t *req, const char *subject,
                   const char *body, size_t len, char **out, size_t *outlen);

/* The events a request to route carries (a batch's, counted up to edge.max_batch + 1 without
 * decoding them; 1 for a single read): the cost the rate limit takes. */
size_t nf_edge_events_in(const nf_edge_t *e, const char *route, const char *body, size_t len);

/* Whether events can be taken: the producer's broker answers and the topic exists. */
bool nf_edge_ready(nf_edge_t *e, char *why, size_t whylen);

#endif
