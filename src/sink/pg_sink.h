/* pg_sink.h — `newsflow sink postgres`: the job's committed outputs landed in PostgreSQL, every
 * record once (docs/sink.md).
 *
 * A Kafka consumer of the output topics (articles, story-clusters, interest-updates, trending
 * and, with read_events, read-events), reading committed records only, in a consumer group
 * whose members share the partitions. Its records are written in batches (batch_rows records,
 * or what has come within batch_ms, or less when the topics are drained), each batch one
 * transaction (pg_db.h) that also sets the partitions' next offsets in newsflow_sink_offsets.
 * Positions come from that table, never from the group's Kafka offsets: on an assignment, and
 * after any failure, the consumer is assigned the table's offsets, so a batch either landed with
 * its offsets or not at all. A process that lost its partitions while it wrote (a zombie) finds
 * the table moved on (the rows are locked and compared in each batch) and writes nothing.
 *
 * Failures stall the sink alone: Postgres unreachable, slow or restarting is retried with
 * exponential backoff up to retry_max_ms (the lag and the last error are metrics); the job
 * upstream keeps committing, Kafka keeps the records. A record Postgres refuses (a constraint,
 * a value out of range, JSON it cannot store) is found by halving the batch under savepoints,
 * produced to dead-letters (stage "sink-postgres", the server's message as the error) before
 * the batch commits, and the rest lands: the sink never stalls on one record. The dead-letter
 * record is produced at least once (a crash between its produce and the commit repeats it);
 * its key, TOPIC/PARTITION/OFFSET of the origin, names the repeat.
 *
 * Threads: nf_pgsink_run on one thread; nf_pgsink_stop, _ready and _status from any. */
#ifndef NF_PG_SINK_H
#define NF_PG_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nf_pgsink_opts {
    const char *brokers, *properties; /* kafka.brokers, kafka.properties */
    const char *topic_prefix;         /* kafka.topic_prefix */
    const char *group;                /* postgres.group_id */
    const char *dsn;                  /* postgres.dsn */
    bool read_events;
    uint32_t batch_rows, batch_ms, retry_max_ms, statement_timeout_ms, retention_days;
    uint32_t max_event_bytes; /* kafka.max_event_bytes: read-events values beyond are skipped */
} nf_pgsink_opts_t;

typedef struct nf_pgsink nf_pgsink_t;

/* Registers the metrics, creates the consumer and the dead-letters producer; nothing connects
 * yet. NULL with the message in err. */
nf_pgsink_t *nf_pgsink_new(const nf_pgsink_opts_t *o, char *err, size_t errlen);
void nf_pgsink_free(nf_pgsink_t *s);

/* Consumes and writes until nf_pgsink_stop; then lands what it holds (one try), leaves the
 * group. 0, or NF_PG_SCHEMA (pg_db.h) when the database's schema is not this binary's: the
 * sink stops at once, with the way out logged. */
int nf_pgsink_run(nf_pgsink_t *s);
void nf_pgsink_stop(nf_pgsink_t *s);

/* /readyz: connected to Postgres with the schema checked, and the group's assignment (possibly
 * empty) applied; a one-object JSON body saying why. */
bool nf_pgsink_ready(nf_pgsink_t *s, char *body, size_t len);
/* GET /v1/status: malloc'ed JSON {"connected":..,"schema_version":..,"last_error":..,
 * "last_error_at":..,"partitions":[{"topic":..,"partition":..,"next_offset":..,"lag":..}]}. */
char *nf_pgsink_status(nf_pgsink_t *s, size_t *len);

#endif
