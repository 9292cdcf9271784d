/* pg_db.h — the sink's PostgreSQL side (libpq): connection, versioned migrations, and the
 * statements of one batch (docs/sink.md).
 *
 * A batch is one transaction: begin, lock the batch's partitions' rows of
 * newsflow_sink_offsets (FOR UPDATE) and compare them with what the caller believes they hold,
 * COPY the records into a temporary staging table (one jsonb value per record), apply them to
 * the model's tables with set-based upserts (the mapping of each topic to its tables is the SQL
 * here), set the offsets, commit. The records of a range that Postgres rejects are found by the
 * caller with savepoints (nf_pg_savepoint/_release/_rollback_to).
 *
 * Every call is bounded in time: statements run with libpq's asynchronous API and a deadline of
 * statement_timeout_ms + 10 s, so a server that stops answering (SIGSTOP, a network partition
 * that keeps the TCP connection) fails the call (the connection is then dropped) instead of
 * hanging the sink.
 *
 * Result codes: 0, or one of NF_PG_* below, with the server's or libpq's message in err.
 * Threads: a nf_pg_t belongs to one thread. */
#ifndef NF_PG_DB_H
#define NF_PG_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    NF_PG_TRANSIENT = -1, /* connection lost, timeout, server shutting down: retry later */
    NF_PG_DATA = -2,      /* Postgres refused the data (SQLSTATE class 22, 23, 54) */
    NF_PG_CONFLICT = -3,  /* newsflow_sink_offsets is not what the caller believed: another
                           * process wrote these partitions; start again from the table */
    NF_PG_SCHEMA = -4,    /* the schema is missing, older or newer than this binary's */
};

/* The record kinds, one per topic the sink reads. */
typedef enum {
    NF_PG_ARTICLES = 0,
    NF_PG_STORY_CLUSTERS,
    NF_PG_INTEREST_UPDATES,
    NF_PG_TRENDING,
    NF_PG_READ_EVENTS,
    NF_PG_KINDS
} nf_pg_kind_t;

/* The topic's name without prefix ("articles", ...). */
const char *nf_pg_kind_topic(nf_pg_kind_t k);

/* The schema version this binary writes (the number of migrations it carries). */
int nf_pg_schema_latest(void);

typedef struct nf_pg nf_pg_t;

/* Connects with libpq's conninfo or URI dsn ("" = libpq's defaults: PGHOST, PGPORT, ...),
 * connect_timeout 10 s unless dsn names one. NULL with the message in err. */
nf_pg_t *nf_pg_connect(const char *dsn, uint32_t statement_timeout_ms, char *err, size_t errlen);
void nf_pg_close(nf_pg_t *pg);
/* false once a call found the connection lost (it is then closed): connect again. */
bool nf_pg_connected(const nf_pg_t *pg);
/* "host:port/dbname" of the connection, for logs. */
const char *nf_pg_where(const nf_pg_t *pg);

/* The version recorded in newsflow_schema (0: no such table). */
int nf_pg_schema_version(nf_pg_t *pg, int *version, char *err, size_t errlen);
/* Applies the migrations the database lacks, in one transaction under an advisory lock (two
 * sinks migrating at once take turns). *from, *to: the versions before and after. A database
 * newer than this binary is NF_PG_SCHEMA, and nothing is changed. */
int nf_pg_migrate(nf_pg_t *pg, int *from, int *to, char *err, size_t errlen);
/* NF_PG_SCHEMA with a message naming the way out unless the version equals this binary's. */
int nf_pg_schema_check(nf_pg_t *pg, char *err, size_t errlen);

/* The partitions' next offsets for group (rows created at 0 when missing, committed at once).
 * n partitions: topics[i], parts[i]; next[i] out. */
int nf_pg_offsets_ensure(nf_pg_t *pg, const char *group, size_t n, const char *const *topics,
                         const int32_t *parts, int64_t *next, char *err, size_t errlen);

/* ---- one batch ---- */
int nf_pg_begin(nf_pg_t *pg, char *err, size_t errlen);
int nf_pg_rollback(nf_pg_t *pg); /* best effort: a broken connection is closed */
int nf_pg_commit(nf_pg_t *pg, char *err, size_t errlen);
/* Locks the n partitions' rows; NF_PG_CONFLICT unless each holds expect[i]. */
int nf_pg_offsets_lock(nf_pg_t *pg, const char *group, size_t n, const char *const *topics,
                       const int32_t *parts, const int64_t *expect, char *err, size_t errlen);
int nf_pg_offsets_set(nf_pg_t *pg, const char *group, size_t n, const char *const *topics,
                      const int32_t *parts, const int64_t *next, char *err, size_t errlen);

typedef struct nf_pg_rec {
    nf_pg_kind_t kind;
    int32_t part;
    int64_t off;
    const char *v; /* the record's JSON value (need not be NUL-terminated) */
    size_t len;
} nf_pg_rec_t;

typedef struct nf_pg_applied {
    uint64_t rows[NF_PG_KINDS];       /* rows written, each record's main table */
    uint64_t duplicates[NF_PG_KINDS]; /* records whose row was already there (a history row
                                       * or snapshot of the same key: 0 unless a record came
                                       * twice) */
} nf_pg_applied_t;

/* COPYs recs[0..n) into the staging table and applies them; the staging table is emptied
 * after, unless whole (the batch's last load: the commit empties it). Adds to *out when it
 * succeeded (nothing on failure). On failure the transaction is aborted: roll back (to a
 * savepoint). */
int nf_pg_load(nf_pg_t *pg, const nf_pg_rec_t *recs, size_t n, bool whole, nf_pg_applied_t *out,
               char *err, size_t errlen);

int nf_pg_savepoint(nf_pg_t *pg, char *err, size_t errlen);
int nf_pg_release(nf_pg_t *pg, char *err, size_t errlen);
int nf_pg_rollback_to(nf_pg_t *pg, char *err, size_t errlen);

/* Deletes interest versions and trending snapshots that landed more than days ago (one
 * transaction of its own); *deleted rows. */
int nf_pg_prune(nf_pg_t *pg, uint32_t days, uint64_t *deleted, char *err, size_t errlen);

/* Text as COPY's text format wants it (backslash, newline, carriage return, tab escaped):
 * appended to *buf (grown with realloc). -ENOMEM. Exposed for the tests. */
int nf_pg_copy_escape(char **buf, size_t *len, size_t *cap, const char *s, size_t n);

#endif
