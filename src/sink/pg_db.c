/* pg_db.c — the sink's PostgreSQL statements (pg_db.h; docs/sink.md). */
#include "sink/pg_db.h"

#include "runtime/runtime.h"

#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The migrations, compiled in (CMakeLists.txt: nf_embed of src/sink/migrations/NNNN_*.sql). */
extern const char nf_pg_migration_0001[];
extern const char nf_pg_migration_0002[];
static const struct {
    const char *name;
    const char *sql;
} migrations[] = {
    {"the seed's data model", nf_pg_migration_0001},
    {"trending by story", nf_pg_migration_0002},
};
#define NMIGRATIONS (sizeof migrations / sizeof migrations[0])

static const char *const kind_topics[NF_PG_KINDS] = {"articles", "story-clusters",
                                                     "interest-updates", "trending", "read-events"};

struct nf_pg {
    PGconn *conn;
    uint32_t timeout_ms;
    char where[256];
    bool staged; /* the staging table exists on this connection */
    char *copy;  /* a COPY's text, reused */
    size_t copy_cap;
};

const char *nf_pg_kind_topic(nf_pg_kind_t k)
{
    return k < NF_PG_KINDS ? kind_topics[k] : "?";
}

int nf_pg_schema_latest(void)
{
    return (int)NMIGRATIONS;
}

bool nf_pg_connected(const nf_pg_t *pg)
{
    return pg->conn && PQstatus(pg->conn) == CONNECTION_OK;
}

const char *nf_pg_where(const nf_pg_t *pg)
{
    return pg->where;
}

/* ---- libpq, asynchronously, with a deadline ---- */

static int64_t mono_ms(void)
{
    return (int64_t)(nf_now_ns() / 1000000);
}

static int fail(char *err, size_t errlen, int code, const char *fmt, const char *what)
{
    snprintf(err, errlen, fmt, what);
    size_t l = strlen(err);
    while (l && (err[l - 1] == '\n' || err[l - 1] == ' ')) /* libpq's messages end in '\n' */
        err[--l] = 0;
    return code;
}

/* The connection is no longer usable (lost, or abandoned mid-statement): closed, so the next
 * batch reconnects. */
static int lost(nf_pg_t *pg, char *err, size_t errlen, const char *why)
{
    fail(err, errlen, NF_PG_TRANSIENT, "%s", why);
    if (pg->conn)
        PQfinish(pg->conn);
    pg->conn = NULL;
    pg->staged = false;
    return NF_PG_TRANSIENT;
}

/* Waits until the socket is readable (or writable too when want_write), or the deadline. */
static int wait_sock(nf_pg_t *pg, bool want_write, int64_t deadline, char *err, size_t errlen)
{
    int64_t left = deadline - mono_ms();
    if (left <= 0)
        return lost(pg, err, errlen,
                    "PostgreSQL did not answer within statement_timeout_ms + 10 s");
    struct pollfd p = {.fd = PQsocket(pg->conn), .events = POLLIN | (want_write ? POLLOUT : 0)};
    int r = poll(&p, 1, (int)(left > 1000 ? 1000 : left));
    if (r < 0 && errno != EINTR)
        return lost(pg, err, errlen, "poll on the PostgreSQL connection failed");
    return 0;
}

/* Sends what libpq buffered. */
static int flush_out(nf_pg_t *pg, int64_t deadline, char *err, size_t errlen)
{
    for (;;) {
        int f = PQflush(pg->conn);
        if (f == 0)
            return 0;
        if (f < 0)
            return lost(pg, err, errlen, PQerrorMessage(pg->conn));
        if (wait_sock(pg, true, deadline, err, errlen) != 0)
            return NF_PG_TRANSIENT;
        if (!PQconsumeInput(pg->conn))
            return lost(pg, err, errlen, PQerrorMessage(pg->conn));
    }
}

/* The next result (NULL: the command's results are over). *rc set on a failure to wait. */
static PGresult *next_result(nf_pg_t *pg, int64_t deadline, int *rc, char *err, size_t errlen)
{
    while (PQisBusy(pg->conn)) {
        if ((*rc = wait_sock(pg, false, deadline, err, errlen)) != 0)
            return NULL;
        if (!PQconsumeInput(pg->conn)) {
            *rc = lost(pg, err, errlen, PQerrorMessage(pg->conn));
            return NULL;
        }
    }
    return PQgetResult(pg->conn);
}

static bool sqlstate_is(const PGresult *r, const char *prefix)
{
    const char *s = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    return s && !strncmp(s, prefix, strlen(prefix));
}

/* The failure a result stands for: data the server refused, or anything else (transient). */
static int result_fail(nf_pg_t *pg, const PGresult *r, char *err, size_t errlen)
{
    const char *msg = r ? PQresultErrorMessage(r) : PQerrorMessage(pg->conn);
    if (PQstatus(pg->conn) != CONNECTION_OK)
        return lost(pg, err, errlen, msg);
    bool data = sqlstate_is(r, "22") || sqlstate_is(r, "23") || sqlstate_is(r, "54");
    const char *detail = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL) : NULL;
    if (detail) {
        char m[768];
        snprintf(m, sizeof m, "%s (%s)", r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : msg,
                 detail);
        return fail(err, errlen, data ? NF_PG_DATA : NF_PG_TRANSIENT, "%s", m);
    }
    return fail(err, errlen, data ? NF_PG_DATA : NF_PG_TRANSIENT, "%s",
                r && PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY)
                    ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY)
                    : msg);
}

/* Runs sql (with params when nparams) and keeps its last result in *out (PQclear it) when out
 * is not NULL. 0 when every result succeeded. */
static int exec(nf_pg_t *pg, const char *sql, int nparams, const char *const *params,
                PGresult **out, char *err, size_t errlen)
{
    if (out)
        *out = NULL;
    if (!pg->conn)
        return fail(err, errlen, NF_PG_TRANSIENT, "%s", "not connected to PostgreSQL");
    int64_t deadline = mono_ms() + pg->timeout_ms + 10000;
    int ok = nparams || params
                 ? PQsendQueryParams(pg->conn, sql, nparams, NULL, params, NULL, NULL, 0)
                 : PQsendQuery(pg->conn, sql);
    if (!ok)
        return lost(pg, err, errlen, PQerrorMessage(pg->conn));
    int rc = flush_out(pg, deadline, err, errlen);
    /* The first failed result's code; the results after it are read to the end all the same,
     * so that the connection is idle for the next command (ROLLBACK TO SAVEPOINT after a
     * refused record: left busy, libpq refuses it with "another command is already in
     * progress" and the batch could never land). */
    int res = 0;
    PGresult *r;
    while (rc == 0 && pg->conn && (r = next_result(pg, deadline, &rc, err, errlen))) {
        ExecStatusType st = PQresultStatus(r);
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && res == 0)
            res = result_fail(pg, r, err, errlen);
        if (out && res == 0) {
            PQclear(*out);
            *out = r;
        } else {
            PQclear(r);
        }
    }
    if (rc == 0)
        rc = res;
    if (rc != 0 && out) {
        PQclear(*out);
        *out = NULL;
    }
    return rc;
}

static int run(nf_pg_t *pg, const char *sql, char *err, size_t errlen)
{
    return exec(pg, sql, 0, NULL, NULL, err, errlen);
}

/* ---- connection ---- */

static void quiet(void *arg, const char *message)
{
    (void)arg, (void)message;
}

nf_pg_t *nf_pg_connect(const char *dsn, uint32_t statement_timeout_ms, char *err, size_t errlen)
{
    char opts[64];
    snprintf(opts, sizeof opts, "-c statement_timeout=%u", statement_timeout_ms);
    /* Ours first: what dsn names (expand_dbname) overrides them. */
    const char *keys[] = {"connect_timeout",     "application_name", "options", "keepalives_idle",
                          "keepalives_interval", "keepalives_count", "dbname",  NULL};
    const char *vals[] = {"10", "newsflow-sink", opts, "10", "5", "3", dsn ? dsn : "", NULL};
    nf_pg_t *pg = calloc(1, sizeof *pg);
    if (!pg) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pg->timeout_ms = statement_timeout_ms ? statement_timeout_ms : 60000;
    pg->conn = PQconnectdbParams(keys, vals, 1);
    if (!pg->conn || PQstatus(pg->conn) != CONNECTION_OK) {
        fail(err, errlen, NF_PG_TRANSIENT, "%s",
             pg->conn ? PQerrorMessage(pg->conn) : "out of memory");
        nf_pg_close(pg);
        return NULL;
    }
    PQsetNoticeProcessor(pg->conn, quiet, NULL); /* "already exists, skipping" and the like */
    if (PQsetnonblocking(pg->conn, 1) != 0) {
        fail(err, errlen, NF_PG_TRANSIENT, "%s", PQerrorMessage(pg->conn));
        nf_pg_close(pg);
        return NULL;
    }
    snprintf(pg->where, sizeof pg->where, "%s:%s/%s", PQhost(pg->conn), PQport(pg->conn),
             PQdb(pg->conn));
    return pg;
}

void nf_pg_close(nf_pg_t *pg)
{
    if (!pg)
        return;
    if (pg->conn)
        PQfinish(pg->conn);
    free(pg->copy);
    free(pg);
}

/* ---- schema ---- */

int nf_pg_schema_version(nf_pg_t *pg, int *version, char *err, size_t errlen)
{
    PGresult *r;
    *version = 0;
    int rc =
        exec(pg, "SELECT to_regclass('newsflow_schema') IS NOT NULL", 0, NULL, &r, err, errlen);
    if (rc != 0)
        return rc;
    bool exists = PQgetvalue(r, 0, 0)[0] == 't';
    PQclear(r);
    if (!exists)
        return 0;
    rc =
        exec(pg, "SELECT COALESCE(max(version), 0) FROM newsflow_schema", 0, NULL, &r, err, errlen);
    if (rc != 0)
        return rc;
    *version = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    return 0;
}

static int migrate_locked(nf_pg_t *pg, int *from, int *to, char *err, size_t errlen)
{
    int rc = run(pg,
                 "SELECT pg_advisory_xact_lock(7336451289);"
                 "CREATE TABLE IF NOT EXISTS newsflow_schema (version integer PRIMARY KEY, "
                 "description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())",
                 err, errlen);
    if (rc == 0)
        rc = nf_pg_schema_version(pg, from, err, errlen);
    if (rc != 0)
        return rc;
    *to = *from;
    if (*from > (int)NMIGRATIONS)
        return nf_pg_schema_check(pg, err, errlen);
    for (size_t i = *from < 0 ? 0 : (size_t)*from; i < NMIGRATIONS && rc == 0; i++) {
        char num[16]; /* migrations[i] makes version i + 1 */
        snprintf(num, sizeof num, "%zu", i + 1);
        const char *p[] = {num, migrations[i].name};
        rc = run(pg, migrations[i].sql, err, errlen);
        if (rc == 0)
            rc = exec(pg, "INSERT INTO newsflow_schema (version, description) VALUES ($1, $2)", 2,
                      p, NULL, err, errlen);
        if (rc == 0)
            *to = (int)i + 1;
    }
    return rc;
}

int nf_pg_migrate(nf_pg_t *pg, int *from, int *to, char *err, size_t errlen)
{
    int rc = run(pg, "BEGIN", err, errlen);
    if (rc == 0)
        rc = migrate_locked(pg, from, to, err, errlen);
    if (rc == 0)
        return nf_pg_commit(pg, err, errlen);
    nf_pg_rollback(pg);
    return rc;
}

int nf_pg_schema_check(nf_pg_t *pg, char *err, size_t errlen)
{
    int v = 0, rc = nf_pg_schema_version(pg, &v, err, errlen);
    if (rc != 0)
        return rc;
    if (v == (int)NMIGRATIONS)
        return 0;
    if (v == 0)
        snprintf(err, errlen,
                 "the database %s holds no newsflow schema: create it with `newsflow sink "
                 "postgres --migrate` (same --config)",
                 pg->where);
    else if (v < (int)NMIGRATIONS)
        snprintf(err, errlen,
                 "the database %s has schema version %d, older than this binary's %d: bring it "
                 "up with `newsflow sink postgres --migrate` (same --config)",
                 pg->where, v, (int)NMIGRATIONS);
    else
        snprintf(err, errlen,
                 "the database %s has schema version %d, newer than this binary's %d: a newer "
                 "newsflow migrated it; run that version's sink (this one neither writes nor "
                 "downgrades a schema it does not know)",
                 pg->where, v, (int)NMIGRATIONS);
    return NF_PG_SCHEMA;
}

/* ---- offsets ---- */

/* Postgres arrays of n texts, integers and bigints, "{...}", for unnest(). */
static char *text_array(size_t n, const char *const *s)
{
    size_t cap = 3;
    for (size_t i = 0; i < n; i++)
        cap += 2 * strlen(s[i]) + 3;
    char *a = malloc(cap), *p = a;
    if (!a)
        return NULL;
    *p++ = '{';
    for (size_t i = 0; i < n; i++) {
        if (i)
            *p++ = ',';
        *p++ = '"';
        for (const char *c = s[i]; *c; c++) {
            if (*c == '"' || *c == '\\')
                *p++ = '\\';
            *p++ = *c;
        }
        *p++ = '"';
    }
    *p++ = '}';
    *p = 0;
    return a;
}

static char *int_array(size_t n, const int32_t *i32, const int64_t *i64)
{
    char *a = malloc(n * 22 + 3), *p = a;
    if (!a)
        return NULL;
    *p++ = '{';
    for (size_t i = 0; i < n; i++)
        p += sprintf(p, "%s%lld", i ? "," : "", i32 ? (long long)i32[i] : (long long)i64[i]);
    *p++ = '}';
    *p = 0;
    return a;
}

/* Runs sql with $1 = group, $2 = topics[], $3 = parts[] and, when next, $4 = next[]. */
static int offsets_exec(nf_pg_t *pg, const char *sql, const char *group, size_t n,
                        const char *const *topics, const int32_t *parts, const int64_t *next,
                        PGresult **out, char *err, size_t errlen)
{
    char *t = text_array(n, topics), *p = int_array(n, parts, NULL);
    char *o = next ? int_array(n, NULL, next) : NULL;
    int rc;
    if (!t || !p || (next && !o)) {
        rc = fail(err, errlen, NF_PG_TRANSIENT, "%s", "out of memory");
    } else {
        const char *params[] = {group, t, p, o};
        rc = exec(pg, sql, next ? 4 : 3, params, out, err, errlen);
    }
    free(t);
    free(p);
    free(o);
    return rc;
}

/* The value of row i of r (columns topic, partition, next_offset) for topics[k], parts[k]. */
/* next[k] from r's rows (topic, partition, next_offset) for topics[k], parts[k]; absent ones
 * get absent. Returns how many were absent. */
static size_t offsets_read(const PGresult *r, size_t n, const char *const *topics,
                           const int32_t *parts, int64_t absent, int64_t *next)
{
    for (size_t k = 0; k < n; k++)
        next[k] = -1;
    for (int i = 0; i < PQntuples(r); i++)
        for (size_t k = 0; k < n; k++)
            if (!strcmp(PQgetvalue(r, i, 0), topics[k]) && atoi(PQgetvalue(r, i, 1)) == parts[k])
                next[k] = strtoll(PQgetvalue(r, i, 2), NULL, 10);
    size_t missing = 0;
    for (size_t k = 0; k < n; k++)
        if (next[k] < 0) {
            next[k] = absent;
            missing++;
        }
    return missing;
}

int nf_pg_offsets_ensure(nf_pg_t *pg, const char *group, size_t n, const char *const *topics,
                         const int32_t *parts, int64_t *next, char *err, size_t errlen)
{
    PGresult *r;
    int rc = offsets_exec(pg,
                          "WITH ins AS (INSERT INTO newsflow_sink_offsets (group_id, topic, "
                          "partition, next_offset) SELECT $1, t, p, 0 FROM unnest($2::text[], "
                          "$3::int[]) AS u(t, p) ON CONFLICT DO NOTHING) "
                          "SELECT topic, partition, next_offset FROM newsflow_sink_offsets "
                          "WHERE group_id = $1 AND (topic, partition) IN "
                          "(SELECT t, p FROM unnest($2::text[], $3::int[]) AS u(t, p))",
                          group, n, topics, parts, NULL, &r, err, errlen);
    if (rc != 0)
        return rc;
    /* A row inserted by the CTE is not seen by its own SELECT: 0 for those. */
    offsets_read(r, n, topics, parts, 0, next);
    PQclear(r);
    return 0;
}

int nf_pg_offsets_lock(nf_pg_t *pg, const char *group, size_t n, const char *const *topics,
                       const int32_t *parts, const int64_t *expect, char *err, size_t errlen)
{
    PGresult *r;
    int rc = offsets_exec(pg,
                          "SELECT topic, partition, next_offset FROM newsflow_sink_offsets WHERE "
                          "group_id = $1 AND (topic, partition) IN (SELECT t, p FROM "
                          "unnest($2::text[], $3::int[]) AS u(t, p)) FOR UPDATE",
                          group, n, topics, parts, NULL, &r, err, errlen);
    if (rc != 0)
        return rc;
    int64_t *have = malloc((n ? n : 1) * sizeof *have);
    if (!have) {
        PQclear(r);
        return fail(err, errlen, NF_PG_TRANSIENT, "%s", "out of memory");
    }
    size_t missing = offsets_read(r, n, topics, parts, -1, have);
    PQclear(r);
    for (size_t k = 0; k < n && rc == 0; k++)
        if (missing || have[k] != expect[k]) {
            char m[512];
            snprintf(m, sizeof m,
                     "newsflow_sink_offsets holds %lld for %s/%d of group %s, not %lld: another "
                     "sink process wrote this partition",
                     (long long)have[k], topics[k], parts[k], group, (long long)expect[k]);
            rc = fail(err, errlen, NF_PG_CONFLICT, "%s", m);
        }
    free(have);
    return rc;
}

int nf_pg_offsets_set(nf_pg_t *pg, const char *group, size_t n, const char *const *topics,
                      const int32_t *parts, const int64_t *next, char *err, size_t errlen)
{
    return offsets_exec(pg,
                        "UPDATE newsflow_sink_offsets o SET next_offset = u.o, updated_at = now() "
                        "FROM unnest($2::text[], $3::int[], $4::bigint[]) AS u(t, p, o) WHERE "
                        "o.group_id = $1 AND o.topic = u.t AND o.partition = u.p",
                        group, n, topics, parts, next, NULL, err, errlen);
}

/* ---- transactions ---- */

int nf_pg_begin(nf_pg_t *pg, char *err, size_t errlen)
{
    if (!pg->staged) {
        int rc = run(pg,
                     /* toast_tuple_target: a value up to a page stays inline and uncompressed (a
                      * 4 kB article compressed on its way in and out cost more than its upsert) */
                     "CREATE TEMP TABLE IF NOT EXISTS nf_stage (kind smallint NOT NULL, part "
                     "integer NOT NULL, off bigint NOT NULL, v jsonb NOT NULL) WITH "
                     "(toast_tuple_target = 8160) ON COMMIT DELETE ROWS",
                     err, errlen);
        if (rc != 0)
            return rc;
        pg->staged = true;
    }
    return run(pg, "BEGIN", err, errlen);
}

int nf_pg_rollback(nf_pg_t *pg)
{
    char err[256];
    return pg->conn ? run(pg, "ROLLBACK", err, sizeof err) : NF_PG_TRANSIENT;
}

int nf_pg_commit(nf_pg_t *pg, char *err, size_t errlen)
{
    return run(pg, "COMMIT", err, errlen);
}

int nf_pg_savepoint(nf_pg_t *pg, char *err, size_t errlen)
{
    return run(pg, "SAVEPOINT nf_range", err, errlen);
}

int nf_pg_release(nf_pg_t *pg, char *err, size_t errlen)
{
    return run(pg, "RELEASE SAVEPOINT nf_range", err, errlen);
}

int nf_pg_rollback_to(nf_pg_t *pg, char *err, size_t errlen)
{
    return run(pg, "ROLLBACK TO SAVEPOINT nf_range; RELEASE SAVEPOINT nf_range", err, errlen);
}

/* ---- a range of records: COPY, then apply ---- */

int nf_pg_copy_escape(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + 2 * n + 64 > *cap) {
        size_t c = (*cap ? *cap : 1 << 16);
        while (c < *len + 2 * n + 64)
            c *= 2;
        char *b = realloc(*buf, c);
        if (!b)
            return -ENOMEM;
        *buf = b;
        *cap = c;
    }
    char *p = *buf + *len;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        switch (c) {
        case '\\':
            *p++ = '\\', *p++ = '\\';
            break;
        case '\n':
            *p++ = '\\', *p++ = 'n';
            break;
        case '\r':
            *p++ = '\\', *p++ = 'r';
            break;
        case '\t':
            *p++ = '\\', *p++ = 't';
            break;
        default:
            *p++ = c;
        }
    }
    *len = (size_t)(p - *buf);
    return 0;
}

/* "KIND\tPART\tOFF\tVALUE\n" per record into pg->copy. */
static int copy_text(nf_pg_t *pg, const nf_pg_rec_t *recs, size_t n, size_t *len)
{
    *len = 0;
    for (size_t i = 0; i < n; i++) {
        char head[64];
        int hl = snprintf(head, sizeof head, "%d\t%d\t%lld\t", (int)recs[i].kind, recs[i].part,
                          (long long)recs[i].off);
        if (nf_pg_copy_escape(&pg->copy, len, &pg->copy_cap, "", 0) != 0)
            return -ENOMEM;
        memcpy(pg->copy + *len, head, (size_t)hl); /* the escape left 64 bytes of room */
        *len += (size_t)hl;
        /* A NUL would end the line early for the server: it cannot be in text anyway */
        size_t vl = strnlen(recs[i].v, recs[i].len);
        if (nf_pg_copy_escape(&pg->copy, len, &pg->copy_cap, recs[i].v, vl) != 0)
            return -ENOMEM;
        if (vl < recs[i].len) /* ... so send it as the JSON escape Postgres refuses in jsonb */
            if (nf_pg_copy_escape(&pg->copy, len, &pg->copy_cap, "\"\\u0000\"", 8) != 0)
                return -ENOMEM;
        pg->copy[(*len)++] = '\n';
    }
    return 0;
}

static int copy_in(nf_pg_t *pg, const nf_pg_rec_t *recs, size_t n, char *err, size_t errlen)
{
    size_t len;
    if (copy_text(pg, recs, n, &len) != 0)
        return fail(err, errlen, NF_PG_TRANSIENT, "%s", "out of memory");
    int64_t deadline = mono_ms() + pg->timeout_ms + 10000;
    if (!PQsendQuery(pg->conn, "COPY nf_stage (kind, part, off, v) FROM STDIN"))
        return lost(pg, err, errlen, PQerrorMessage(pg->conn));
    int rc = 0;
    PGresult *r = next_result(pg, deadline, &rc, err, errlen);
    if (rc != 0)
        return rc;
    if (PQresultStatus(r) != PGRES_COPY_IN) {
        rc = result_fail(pg, r, err, errlen);
        PQclear(r);
        while (pg->conn && (r = next_result(pg, deadline, &rc, err, errlen)))
            PQclear(r);
        return rc ? rc : NF_PG_TRANSIENT;
    }
    PQclear(r);
    for (size_t off = 0; off < len && rc == 0;) {
        size_t chunk = len - off > (1u << 20) ? 1u << 20 : len - off;
        int p = PQputCopyData(pg->conn, pg->copy + off, (int)chunk);
        if (p < 0)
            return lost(pg, err, errlen, PQerrorMessage(pg->conn));
        if (p == 0)
            rc = wait_sock(pg, true, deadline, err, errlen);
        else
            off += chunk;
    }
    int e;
    while (rc == 0 && (e = PQputCopyEnd(pg->conn, NULL)) == 0)
        rc = wait_sock(pg, true, deadline, err, errlen);
    if (rc == 0 && e < 0)
        return lost(pg, err, errlen, PQerrorMessage(pg->conn));
    if (rc == 0)
        rc = flush_out(pg, deadline, err, errlen);
    int res = rc;
    while (rc == 0 && (r = next_result(pg, deadline, &rc, err, errlen))) {
        if (PQresultStatus(r) != PGRES_COMMAND_OK && res == 0)
            res = result_fail(pg, r, err, errlen);
        PQclear(r);
    }
    return rc ? rc : res;
}

/* The statements applying the staged records of one kind; counted: the rows of the first
 * (rows[]), and for the kinds whose first statement skips a row already there, the records it
 * skipped (duplicates[]). */
static const char *const apply_sql[NF_PG_KINDS][4] = {
    [NF_PG_ARTICLES] =
        {"INSERT INTO article AS a (article_id, url, link, guid, source_id, feed_url, title, "
         "summary, body, authors, categories, category_labels, topics, language, published_at, "
         "updated_at, date_fallback, ingested_at, content_hash, cluster_id) "
         /* jsonb_to_record reads each staged value once: a value past 2 kB is stored
          * compressed, and every v->>'field' would decompress it again */
         "SELECT DISTINCT ON (r.article_id) r.article_id, r.url, r.link, r.guid, r.source_id, "
         "r.feed_url, r.title, r.summary, r.body, r.authors, "
         "ARRAY(SELECT jsonb_array_elements_text(r.categories)), r.category_labels, r.topics, "
         "r.language, r.published_at, r.updated_at, r.date_fallback, r.ingested_at, "
         "r.content_hash, (SELECT m.cluster_id FROM story_member m WHERE m.article_id = "
         "r.article_id) FROM nf_stage s, jsonb_to_record(s.v) AS r(article_id text, url text, "
         "link text, guid text, source_id text, feed_url text, title text, summary text, "
         "body text, authors jsonb, categories jsonb, category_labels jsonb, topics jsonb, "
         "language text, published_at timestamptz, updated_at timestamptz, date_fallback "
         "boolean, ingested_at timestamptz, content_hash text) WHERE s.kind = 0 "
         "ORDER BY r.article_id, s.part DESC, s.off DESC "
         "ON CONFLICT (article_id) DO UPDATE SET url = EXCLUDED.url, link = EXCLUDED.link, "
         "guid = EXCLUDED.guid, source_id = EXCLUDED.source_id, feed_url = EXCLUDED.feed_url, "
         "title = EXCLUDED.title, summary = EXCLUDED.summary, body = EXCLUDED.body, "
         "authors = EXCLUDED.authors, categories = EXCLUDED.categories, "
         "category_labels = EXCLUDED.category_labels, topics = EXCLUDED.topics, "
         "language = EXCLUDED.language, published_at = EXCLUDED.published_at, "
         "updated_at = EXCLUDED.updated_at, date_fallback = EXCLUDED.date_fallback, "
         "ingested_at = EXCLUDED.ingested_at, content_hash = EXCLUDED.content_hash, "
         "cluster_id = COALESCE(EXCLUDED.cluster_id, a.cluster_id)",
         "DELETE FROM article_topic t USING nf_stage s WHERE s.kind = 0 AND "
         "t.article_id = s.v->>'article_id'",
         "INSERT INTO article_topic (topic, article_id, weight, published_at) "
         "SELECT t.key, a.article_id, t.value::float8, a.published_at FROM article a "
         "JOIN (SELECT DISTINCT v->>'article_id' AS id FROM nf_stage WHERE kind = 0) s "
         "ON a.article_id = s.id, jsonb_each(a.topics) t",
         NULL},
    [NF_PG_STORY_CLUSTERS] =
        {"INSERT INTO story_cluster (cluster_id) SELECT DISTINCT v->>'cluster_id' FROM nf_stage "
         "WHERE kind = 1 ON CONFLICT (cluster_id) DO NOTHING",
         "DO $$DECLARE r record; BEGIN FOR r IN SELECT s.v->>'cluster_id' AS i, m.f "
         "FROM nf_stage s, jsonb_array_elements_text(s.v->'merged_from') WITH ORDINALITY "
         "m(f, n) WHERE s.kind = 1 ORDER BY s.part, s.off, m.n LOOP "
         "PERFORM newsflow_merge_story(r.i, r.f); END LOOP; END$$",
         "INSERT INTO story_member AS m (article_id, cluster_id, action, similarity, joined_at) "
         "SELECT DISTINCT ON (s.v->>'article_id') s.v->>'article_id', "
         "COALESCE(c.merged_into, s.v->>'cluster_id'), s.v->>'action', "
         "(s.v->>'similarity')::float8, (s.v->>'ts')::timestamptz FROM nf_stage s "
         "LEFT JOIN story_cluster c ON c.cluster_id = s.v->>'cluster_id' WHERE s.kind = 1 "
         "ORDER BY s.v->>'article_id', s.part DESC, s.off DESC "
         "ON CONFLICT (article_id) DO UPDATE SET cluster_id = EXCLUDED.cluster_id, "
         "action = EXCLUDED.action, similarity = EXCLUDED.similarity, "
         "joined_at = EXCLUDED.joined_at",
         "UPDATE article a SET cluster_id = m.cluster_id FROM story_member m WHERE "
         "m.article_id = a.article_id AND a.article_id IN (SELECT v->>'article_id' FROM "
         "nf_stage WHERE kind = 1) AND a.cluster_id IS DISTINCT FROM m.cluster_id"},
    [NF_PG_INTEREST_UPDATES] =
        {"INSERT INTO user_interest_version (user_id, version, updated_at, vector) "
         "SELECT v->>'user_id', (v->>'version')::bigint, (v->>'updated_at')::timestamptz, "
         "v->'vector' FROM nf_stage WHERE kind = 2 ON CONFLICT DO NOTHING",
         NULL, NULL, NULL},
    [NF_PG_TRENDING] =
        {"INSERT INTO trending_snapshot (window_end, window_start) "
         "SELECT (v->>'window_end')::timestamptz, (v->>'window_start')::timestamptz "
         "FROM nf_stage WHERE kind = 3 ON CONFLICT DO NOTHING",
         "INSERT INTO trending_item (window_end, rank, article_id, score, cluster_id, articles) "
         "SELECT (s.v->>'window_end')::timestamptz, i.n, i.item->>'article_id', "
         "(i.item->>'score')::float8, i.item->>'cluster_id', (i.item->>'articles')::integer "
         "FROM nf_stage s, "
         "jsonb_array_elements(s.v->'items') WITH ORDINALITY i(item, n) WHERE s.kind = 3 "
         "ON CONFLICT DO NOTHING",
         NULL, NULL},
    [NF_PG_READ_EVENTS] =
        {"INSERT INTO read_event (event_id, user_id, article_id, session_id, kind, ts) "
         "SELECT v->>'event_id', v->>'user_id', v->>'article_id', "
         "COALESCE(v->>'session_id', ''), COALESCE(v->>'kind', 'read'), "
         "to_timestamp((v->>'ts')::bigint / 1000.0) FROM nf_stage WHERE kind = 4 "
         "ON CONFLICT (event_id) DO NOTHING",
         NULL, NULL, NULL},
};
/* Kinds whose first statement skips rows already there (ON CONFLICT DO NOTHING). */
static const bool apply_skips[NF_PG_KINDS] = {
    [NF_PG_INTEREST_UPDATES] = true, [NF_PG_TRENDING] = true, [NF_PG_READ_EVENTS] = true};

static int apply(nf_pg_t *pg, const size_t staged[NF_PG_KINDS], nf_pg_applied_t *out, char *err,
                 size_t errlen)
{
    for (int k = 0; k < NF_PG_KINDS; k++) {
        if (!staged[k])
            continue;
        for (int s = 0; s < 4 && apply_sql[k][s]; s++) {
            PGresult *r;
            int rc = exec(pg, apply_sql[k][s], 0, NULL, &r, err, errlen);
            if (rc != 0)
                return rc;
            if (s == 0) {
                uint64_t rows = strtoull(PQcmdTuples(r), NULL, 10);
                out->rows[k] += rows;
                if (apply_skips[k] && rows < staged[k])
                    out->duplicates[k] += staged[k] - rows;
            }
            PQclear(r);
        }
    }
    return 0;
}

int nf_pg_load(nf_pg_t *pg, const nf_pg_rec_t *recs, size_t n, bool whole, nf_pg_applied_t *out,
               char *err, size_t errlen)
{
    if (!pg->conn)
        return fail(err, errlen, NF_PG_TRANSIENT, "%s", "not connected to PostgreSQL");
    size_t staged[NF_PG_KINDS] = {0};
    for (size_t i = 0; i < n; i++)
        if (recs[i].kind < NF_PG_KINDS)
            staged[recs[i].kind]++;
    /* Counted apart and added only when the whole range applied: a range refused half-way is
     * rolled back and applied again in halves, and its first statements' counts with it. */
    nf_pg_applied_t got = {0};
    int rc = copy_in(pg, recs, n, err, errlen);
    if (rc == 0)
        rc = apply(pg, staged, &got, err, errlen);
    if (rc == 0 && !whole) /* else the commit empties it (ON COMMIT DELETE ROWS) */
        rc = run(pg, "DELETE FROM nf_stage", err, errlen);
    for (int k = 0; rc == 0 && k < NF_PG_KINDS; k++) {
        out->rows[k] += got.rows[k];
        out->duplicates[k] += got.duplicates[k];
    }
    return rc;
}

int nf_pg_prune(nf_pg_t *pg, uint32_t days, uint64_t *deleted, char *err, size_t errlen)
{
    char d[16];
    snprintf(d, sizeof d, "%u", days);
    const char *p[] = {d};
    static const char *const sql[] = {
        /* never a reader's latest version: it is their interest now */
        "DELETE FROM user_interest_version o WHERE landed_at < now() - make_interval(days => $1) "
        "AND EXISTS (SELECT 1 FROM user_interest_version n WHERE n.user_id = o.user_id AND "
        "n.version > o.version)",
        "WITH old AS (DELETE FROM trending_snapshot WHERE landed_at < now() - "
        "make_interval(days => $1) RETURNING window_end) DELETE FROM trending_item i USING old "
        "WHERE i.window_end = old.window_end"};
    *deleted = 0;
    int rc = run(pg, "BEGIN", err, errlen);
    for (size_t i = 0; i < 2 && rc == 0; i++) {
        PGresult *r;
        rc = exec(pg, sql[i], 1, p, &r, err, errlen);
        if (rc == 0) {
            *deleted += strtoull(PQcmdTuples(r), NULL, 10);
            PQclear(r);
        }
    }
    if (rc == 0)
        return nf_pg_commit(pg, err, errlen);
    nf_pg_rollback(pg);
    return rc;
}
