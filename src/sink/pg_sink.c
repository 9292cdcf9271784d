/* pg_sink.c — the sink's loop: consume, batch, land, retry (pg_sink.h; docs/sink.md). */
#include "sink/pg_sink.h"

#include "io/edge_kafka.h"
#include "io/events.h"
#include "io/kafka.h"
#include "runtime/jsonw.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"
#include "sink/pg_db.h"

#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LAG_EVERY_MS 2000
/* A batch is written once its values take this much memory, whatever postgres.batch_rows says
 * (5,000 articles of 64 kB would be 320 MB). */
#define BATCH_MAX_BYTES (32u << 20)
#define PRUNE_EVERY_MS  3600000

typedef struct part {
    char topic[192];
    nf_pg_kind_t kind;
    int32_t partition;
    int64_t db_next; /* what newsflow_sink_offsets holds (-1: not read yet) */
    int64_t lag;     /* in the snapshot: high watermark - db_next (-1: unknown) */
    bool seen;       /* a record of it came since the consumer was assigned db_next: only then
                      * is the consumer's position its own (not one of before the rewind) */
} part_t;

typedef enum {
    REC_STAGED,    /* its value is in the arena, to be loaded */
    REC_TOMBSTONE, /* a null value: dead-lettered, nothing loaded */
    REC_SKIPPED,   /* a read event the sink cannot decode (the job dead-letters it), or a
                    * reader's setting (read_event holds reads and feedback: not landed) */
} rec_state_t;

typedef struct rec {
    nf_pg_kind_t kind;
    rec_state_t state;
    uint32_t part; /* index into parts */
    int64_t off, ts_ms;
    size_t voff, len; /* the value in the batch's arena (REC_STAGED) */
} rec_t;

typedef struct dead {
    uint32_t rec;
    char error[512];
} dead_t;

typedef struct metrics {
    nf_counter_t records[NF_PG_KINDS], duplicates[NF_PG_KINDS], dead[NF_PG_KINDS];
    nf_counter_t skipped, settings, batches, resets, pruned;
    nf_counter_t errors_connect, errors_write, errors_conflict, errors_dead_letter;
    nf_gauge_t lag[NF_PG_KINDS], connected, last_error_ts;
    nf_histogram_t visible, batch_s;
} metrics_t;

struct nf_pgsink {
    nf_pgsink_opts_t o;
    rd_kafka_t *rk;
    nf_edge_kafka_t *dlq;
    char dlq_topic[192];
    nf_pg_t *pg;
    atomic_bool stop;
    /* the group's assignment to this process, and whether the consumer follows it */
    part_t *parts;
    uint32_t nparts;
    bool rewind;
    bool revoked; /* parts were revoked: the loop reads nothing of them, they only remember
                   * their landed offsets for the next assignment */
    uint64_t gen; /* counts assignments and revocations: parts changed shape */
    /* the batch: records, their values in one arena, records Postgres refused */
    rec_t *recs;
    size_t nrecs, cap_recs;
    char *arena;
    size_t arena_len, arena_cap;
    int64_t batch_start_ms;
    dead_t *dead;
    size_t ndead, cap_dead;
    /* retries */
    uint32_t backoff_ms;
    int64_t next_try_ms, next_publish_ms, next_prune_ms;
    metrics_t m;
    /* for the HTTP threads */
    pthread_mutex_t mu;
    bool connected, assigned;
    char last_error[512];
    int64_t last_error_ms;
    /* the partitions as the HTTP threads and the lag thread see them (publish_parts), and the
     * assignment (gen) they are of */
    part_t *snap;
    uint32_t nsnap;
    size_t cap_snap;
    uint64_t snap_gen;
    /* the lag thread: a client of its own asks the high watermarks, so that a slow answer
     * never holds the loop */
    rd_kafka_t *lag_rk;
    pthread_t lag_thread;
    bool lag_started;
    pthread_cond_t lag_cv;
};

static int64_t mono_ms(void)
{
    return (int64_t)(nf_now_ns() / 1000000);
}

/* ---- metrics ---- */

static const double visible_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                        1,     2.5,  5,     10,   30,  60,   300};
static const double batch_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                      0.1,   0.25,   0.5,   1,    2.5,   10};

static void kind_metrics(metrics_t *m, int k)
{
    char l[96];
    snprintf(l, sizeof l, "topic=\"%s\"", nf_pg_kind_topic((nf_pg_kind_t)k));
    nf_metrics_counter("newsflow_pgsink_records_total",
                       "Records landed in PostgreSQL (committed with their offsets)", l, 0,
                       &m->records[k]);
    nf_metrics_counter("newsflow_pgsink_duplicates_total",
                       "Records whose row was already there (a trending snapshot or interest "
                       "version landed before; read-events: an event_id seen before)",
                       l, 0, &m->duplicates[k]);
    nf_metrics_counter("newsflow_pgsink_dead_letters_total",
                       "Records PostgreSQL refused, produced to dead-letters", l, 0, &m->dead[k]);
    nf_metrics_gauge("newsflow_pgsink_lag_records",
                     "Records in the topic's assigned partitions not yet landed (high "
                     "watermark - landed offset), measured every 2 s",
                     l, 0, &m->lag[k]);
}

static void register_metrics(metrics_t *m)
{
    for (int k = 0; k < NF_PG_KINDS; k++)
        kind_metrics(m, k);
    nf_metrics_counter("newsflow_pgsink_skipped_total",
                       "read-events records the sink cannot decode (the job dead-letters "
                       "them itself)",
                       NULL, 0, &m->skipped);
    nf_metrics_counter("newsflow_pgsink_settings_skipped_total",
                       "read-events records that are a reader's settings (follow, unfollow, mute, "
                       "unmute: engine/follows.h), not landed: read_event holds reads and feedback",
                       NULL, 0, &m->settings);
    nf_metrics_counter("newsflow_pgsink_batches_total", "Batches committed", NULL, 0, &m->batches);
    nf_metrics_counter("newsflow_pgsink_offset_resets_total",
                       "Partitions whose landed offset Kafka no longer holds (retention "
                       "deleted records before the sink read them): read from the earliest",
                       NULL, 0, &m->resets);
    nf_metrics_counter("newsflow_pgsink_pruned_rows_total",
                       "Interest versions and trending snapshots deleted past "
                       "postgres.retention_days",
                       NULL, 0, &m->pruned);
    static const char *const kinds[] = {"connect", "write", "conflict", "dead_letter"};
    nf_counter_t *ec[] = {&m->errors_connect, &m->errors_write, &m->errors_conflict,
                          &m->errors_dead_letter};
    for (int i = 0; i < 4; i++) {
        char l[48];
        snprintf(l, sizeof l, "kind=\"%s\"", kinds[i]);
        nf_metrics_counter("newsflow_pgsink_errors_total",
                           "Failed attempts: connect (PostgreSQL unreachable), write (a "
                           "batch's transaction failed), conflict (another process wrote "
                           "the partitions), dead_letter (the dead-letters producer failed)",
                           l, 0, ec[i]);
    }
    nf_metrics_gauge("newsflow_pgsink_connected", "1 while connected to PostgreSQL", NULL, 0,
                     &m->connected);
    nf_metrics_gauge("newsflow_pgsink_last_error_timestamp_seconds",
                     "When the last failed attempt was (0: none)", NULL, 0, &m->last_error_ts);
    nf_metrics_histogram("newsflow_pgsink_visible_lag_seconds",
                         "From a record's Kafka timestamp (produced in the job's epoch) to "
                         "its row committed in PostgreSQL",
                         NULL, visible_bounds, sizeof visible_bounds / sizeof visible_bounds[0],
                         &m->visible);
    nf_metrics_histogram("newsflow_pgsink_batch_seconds", "A batch's transaction, begin to commit",
                         NULL, batch_bounds, sizeof batch_bounds / sizeof batch_bounds[0],
                         &m->batch_s);
}

/* ---- the state the HTTP threads read ---- */

static void note_error(nf_pgsink_t *s, nf_counter_t c, const char *what, const char *err)
{
    nf_counter_inc(c);
    int64_t now = nf_wall_ms();
    nf_gauge_set(s->m.last_error_ts, now / 1000);
    pthread_mutex_lock(&s->mu);
    snprintf(s->last_error, sizeof s->last_error, "%.40s: %.400s", what, err);
    s->last_error_ms = now;
    pthread_mutex_unlock(&s->mu);
}

static void set_connected(nf_pgsink_t *s, bool on)
{
    nf_gauge_set(s->m.connected, on);
    pthread_mutex_lock(&s->mu);
    s->connected = on;
    pthread_mutex_unlock(&s->mu);
}

static void set_assigned(nf_pgsink_t *s, bool on)
{
    pthread_mutex_lock(&s->mu);
    s->assigned = on;
    pthread_mutex_unlock(&s->mu);
}

/* ---- the batch ---- */

static void batch_clear(nf_pgsink_t *s)
{
    s->nrecs = 0;
    s->arena_len = 0;
    s->ndead = 0;
}

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 1024;
    while (c < need)
        c *= 2;
    void *n = realloc(*p, c * size);
    if (!n)
        return -ENOMEM;
    *p = n;
    *cap = c;
    return 0;
}

static int add_dead(nf_pgsink_t *s, uint32_t rec, const char *error)
{
    if (grow((void **)&s->dead, &s->cap_dead, s->ndead + 1, sizeof *s->dead) != 0)
        return -ENOMEM;
    dead_t *d = &s->dead[s->ndead++];
    d->rec = rec;
    snprintf(d->error, sizeof d->error, "%.500s", error);
    return 0;
}

static int part_of(const nf_pgsink_t *s, const char *topic, int32_t partition)
{
    for (uint32_t i = 0; i < s->nparts; i++)
        if (s->parts[i].partition == partition && !strcmp(s->parts[i].topic, topic))
            return (int)i;
    return -1;
}

/* The value to stage: read-events in canonical form (event_id computed as the job does), the
 * outputs as they are; r->state says what became of it. 0, or -ENOMEM. */
static int stage_value(nf_pgsink_t *s, nf_pg_kind_t kind, const rd_kafka_message_t *msg, rec_t *r)
{
    const char *v = msg->payload;
    size_t len = msg->len;
    nf_jw_t w;
    nf_jw_init(&w);
    if (kind == NF_PG_READ_EVENTS && v) {
        nf_read_event_t e;
        char err[256];
        if (nf_read_event_decode(v, len, s->o.max_event_bytes, &e, err, sizeof err) != 0) {
            nf_counter_inc(s->m.skipped);
            r->state = REC_SKIPPED;
            return 0;
        }
        if (nf_read_kind_is_setting(e.kind)) {
            nf_counter_inc(s->m.settings);
            r->state = REC_SKIPPED;
            return 0;
        }
        nf_read_event_json(&w, &e);
        if (w.failed) {
            nf_jw_free(&w);
            return -ENOMEM;
        }
        v = w.buf;
        len = w.len;
    }
    r->state = v ? REC_STAGED : REC_TOMBSTONE;
    r->voff = s->arena_len;
    r->len = v ? len : 0;
    int rc = 0;
    if (v && grow((void **)&s->arena, &s->arena_cap, s->arena_len + len + 1, 1) != 0)
        rc = -ENOMEM;
    else if (v) {
        memcpy(s->arena + s->arena_len, v, len);
        s->arena_len += len;
    }
    nf_jw_free(&w);
    return rc;
}

/* A consumed record into the batch. 0, or -ENOMEM. */
static int batch_add(nf_pgsink_t *s, const rd_kafka_message_t *msg)
{
    int pi = s->revoked ? -1 : part_of(s, rd_kafka_topic_name(msg->rkt), msg->partition);
    if (pi < 0)
        return 0; /* not ours any more: a message of a revoked assignment */
    part_t *p = &s->parts[pi];
    p->seen = true;
    if (grow((void **)&s->recs, &s->cap_recs, s->nrecs + 1, sizeof *s->recs) != 0)
        return -ENOMEM;
    rec_t *r = &s->recs[s->nrecs];
    *r = (rec_t){.kind = p->kind, .part = (uint32_t)pi, .off = msg->offset};
    rd_kafka_timestamp_type_t tt;
    r->ts_ms = rd_kafka_message_timestamp(msg, &tt);
    int rc = stage_value(s, p->kind, msg, r);
    if (rc < 0)
        return rc;
    if (!s->nrecs)
        s->batch_start_ms = mono_ms();
    s->nrecs++; /* a skipped record stays in the batch too: its offset counts */
    if (r->state == REC_TOMBSTONE)
        return add_dead(s, (uint32_t)(s->nrecs - 1),
                        "a null value (tombstone) where a record was expected");
    return 0;
}

/* ---- landing a batch ---- */

typedef struct landing {
    nf_pg_rec_t *recs; /* the staged records, */
    uint32_t *idx;     /* and each one's index in s->recs */
    size_t n;
    /* the partitions whose offsets the batch moves */
    const char **topics;
    int32_t *parts;
    int64_t *expect, *next;
    uint32_t *pidx;
    size_t np;
    char err[1024];
} landing_t;

static void landing_free(landing_t *l)
{
    free(l->recs);
    free(l->idx);
    free(l->topics);
    free(l->parts);
    free(l->expect);
    free(l->next);
    free(l->pidx);
}

/* Where each partition will be once the batch lands: past its last record, or past what the
 * consumer skipped after it (transaction markers, aborted records) when that is further. */
static void next_offsets(nf_pgsink_t *s, int64_t *next)
{
    for (uint32_t i = 0; i < s->nparts; i++)
        next[i] = s->parts[i].db_next;
    for (size_t i = 0; i < s->nrecs; i++)
        if (s->recs[i].off + 1 > next[s->recs[i].part])
            next[s->recs[i].part] = s->recs[i].off + 1;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)s->nparts);
    if (!l)
        return;
    for (uint32_t i = 0; i < s->nparts; i++)
        rd_kafka_topic_partition_list_add(l, s->parts[i].topic, s->parts[i].partition);
    if (rd_kafka_position(s->rk, l) == RD_KAFKA_RESP_ERR_NO_ERROR)
        for (int i = 0; i < l->cnt; i++)
            if (s->parts[i].seen && l->elems[i].offset > next[i] && next[i] >= 0)
                next[i] = l->elems[i].offset;
    rd_kafka_topic_partition_list_destroy(l);
}

static int landing_init(nf_pgsink_t *s, landing_t *l)
{
    memset(l, 0, sizeof *l);
    size_t np = s->nparts ? s->nparts : 1, nr = s->nrecs ? s->nrecs : 1;
    l->recs = malloc(nr * sizeof *l->recs);
    l->idx = malloc(nr * sizeof *l->idx);
    l->topics = malloc(np * sizeof *l->topics);
    l->parts = malloc(np * sizeof *l->parts);
    l->expect = malloc(np * sizeof *l->expect);
    l->next = malloc(np * sizeof *l->next);
    l->pidx = malloc(np * sizeof *l->pidx);
    int64_t *all = malloc(np * sizeof *all);
    if (!l->recs || !l->idx || !l->topics || !l->parts || !l->expect || !l->next || !l->pidx ||
        !all) {
        free(all);
        return -ENOMEM;
    }
    next_offsets(s, all);
    for (uint32_t i = 0; i < s->nparts; i++)
        if (s->parts[i].db_next >= 0 && all[i] > s->parts[i].db_next) {
            l->topics[l->np] = s->parts[i].topic;
            l->parts[l->np] = s->parts[i].partition;
            l->expect[l->np] = s->parts[i].db_next;
            l->next[l->np] = all[i];
            l->pidx[l->np++] = i;
        }
    free(all);
    for (size_t i = 0; i < s->nrecs; i++)
        if (s->recs[i].state == REC_STAGED) {
            const rec_t *r = &s->recs[i];
            l->recs[l->n] = (nf_pg_rec_t){.kind = r->kind,
                                          .part = s->parts[r->part].partition,
                                          .off = r->off,
                                          .v = s->arena + r->voff,
                                          .len = r->len};
            l->idx[l->n++] = (uint32_t)i;
        }
    return 0;
}

/* Loads recs[lo..hi) under a savepoint; a range Postgres refuses is halved until the records
 * it refuses are alone, and those go to the dead letters. */
static int load_range(nf_pgsink_t *s, landing_t *l, size_t lo, size_t hi, nf_pg_applied_t *a)
{
    int rc = nf_pg_savepoint(s->pg, l->err, sizeof l->err);
    if (rc == 0)
        rc = nf_pg_load(s->pg, l->recs + lo, hi - lo, lo == 0 && hi == l->n, a, l->err,
                        sizeof l->err);
    if (rc == 0)
        return nf_pg_release(s->pg, l->err, sizeof l->err);
    if (rc != NF_PG_DATA)
        return rc;
    char why[1024];
    snprintf(why, sizeof why, "%s", l->err);
    if ((rc = nf_pg_rollback_to(s->pg, l->err, sizeof l->err)) != 0)
        return rc;
    if (hi - lo == 1)
        return add_dead(s, l->idx[lo], why) ? NF_PG_TRANSIENT : 0;
    size_t mid = lo + (hi - lo) / 2;
    rc = load_range(s, l, lo, mid, a);
    return rc ? rc : load_range(s, l, mid, hi, a);
}

/* The refused records to dead-letters, acknowledged by the broker. */
static int send_dead(nf_pgsink_t *s, landing_t *l)
{
    if (!s->ndead)
        return 0;
    nf_edge_rec_t *out = calloc(s->ndead, sizeof *out);
    nf_jw_t *w = calloc(s->ndead, sizeof *w);
    char(*keys)[256] = calloc(s->ndead, sizeof *keys);
    int rc = out && w && keys ? 0 : -ENOMEM;
    for (size_t i = 0; i < s->ndead && rc == 0; i++) {
        const rec_t *r = &s->recs[s->dead[i].rec];
        const part_t *p = &s->parts[r->part];
        nf_jw_init(&w[i]);
        bool has = r->state == REC_STAGED;
        nf_dead_letter_json(&w[i], p->topic, p->partition, r->off, "sink-postgres",
                            s->dead[i].error, has ? s->arena + r->voff : NULL, has ? r->len : 0,
                            nf_wall_ms());
        size_t kl = nf_dead_letter_key(keys[i], sizeof keys[i], p->topic, p->partition, r->off);
        out[i] = (nf_edge_rec_t){.key = keys[i], .keylen = kl, .value = w[i].buf, .len = w[i].len};
        if (w[i].failed)
            rc = -ENOMEM;
    }
    size_t acked = 0;
    if (rc == 0 && nf_edge_kafka_send(s->dlq, out, s->ndead, &acked, l->err, sizeof l->err) != 0)
        rc = -EIO;
    for (size_t i = 0; w && i < s->ndead; i++)
        nf_jw_free(&w[i]);
    free(out);
    free(w);
    free(keys);
    return rc;
}

/* One transaction: the offsets locked and compared, the records, the offsets set, the dead
 * letters acknowledged, commit. */
static int land_tx(nf_pgsink_t *s, landing_t *l, nf_pg_applied_t *a)
{
    int rc = nf_pg_begin(s->pg, l->err, sizeof l->err);
    if (rc == 0)
        rc = nf_pg_offsets_lock(s->pg, s->o.group, l->np, l->topics, l->parts, l->expect, l->err,
                                sizeof l->err);
    if (rc == 0 && l->n)
        rc = load_range(s, l, 0, l->n, a);
    if (rc == 0)
        rc = nf_pg_offsets_set(s->pg, s->o.group, l->np, l->topics, l->parts, l->next, l->err,
                               sizeof l->err);
    if (rc == 0 && send_dead(s, l) != 0) {
        note_error(s, s->m.errors_dead_letter, "dead-letters", l->err);
        rc = NF_PG_TRANSIENT;
    }
    if (rc == 0)
        rc = nf_pg_commit(s->pg, l->err, sizeof l->err);
    if (rc != 0)
        nf_pg_rollback(s->pg);
    return rc;
}

static void landed(nf_pgsink_t *s, const landing_t *l, const nf_pg_applied_t *a, int64_t t0)
{
    for (size_t i = 0; i < l->np; i++)
        s->parts[l->pidx[i]].db_next = l->next[i];
    uint64_t per[NF_PG_KINDS] = {0};
    for (size_t i = 0; i < l->n; i++)
        per[l->recs[i].kind]++;
    for (size_t i = 0; i < s->ndead; i++) {
        nf_pg_kind_t k = s->recs[s->dead[i].rec].kind;
        nf_counter_inc(s->m.dead[k]);
        if (s->recs[s->dead[i].rec].state == REC_STAGED && per[k])
            per[k]--;
        nf_log(NF_LOG_WARN, "sink", "record refused by PostgreSQL: sent to dead-letters",
               NF_LS("topic", s->parts[s->recs[s->dead[i].rec].part].topic),
               NF_LI("offset", s->recs[s->dead[i].rec].off), NF_LS("error", s->dead[i].error),
               NF_LEND);
    }
    for (int k = 0; k < NF_PG_KINDS; k++) {
        nf_counter_add(s->m.records[k], per[k]);
        nf_counter_add(s->m.duplicates[k], a->duplicates[k]);
    }
    int64_t now = nf_wall_ms();
    for (size_t i = 0; i < s->nrecs; i++)
        if (s->recs[i].ts_ms > 0)
            nf_histogram_observe(s->m.visible, (double)(now - s->recs[i].ts_ms) / 1000.0);
    nf_counter_inc(s->m.batches);
    nf_histogram_observe(s->m.batch_s, (double)(mono_ms() - t0) / 1000.0);
}

/* Lands the batch (and offsets past skipped records). 0, or NF_PG_* after which the caller
 * rewinds: the batch is dropped, to be read again from the offsets the table holds. */
static int land(nf_pgsink_t *s)
{
    landing_t l;
    int rc = landing_init(s, &l);
    if (rc == 0 && l.np) {
        int64_t t0 = mono_ms();
        nf_pg_applied_t a = {0};
        rc = land_tx(s, &l, &a);
        if (rc == 0)
            landed(s, &l, &a, t0);
        else if (rc == NF_PG_CONFLICT)
            note_error(s, s->m.errors_conflict, "offsets", l.err);
        else
            note_error(s, s->m.errors_write, "write", l.err);
        if (rc != 0)
            nf_log(NF_LOG_WARN, "sink",
                   "batch not landed: reading it again from the offsets "
                   "in PostgreSQL",
                   NF_LS("error", l.err), NF_LI("records", (long long)s->nrecs), NF_LEND);
    } else if (rc != 0) {
        nf_log(NF_LOG_ERROR, "sink", "out of memory for a batch", NF_LEND);
        rc = NF_PG_TRANSIENT;
    }
    landing_free(&l);
    batch_clear(s);
    return rc;
}

/* ---- the assignment, from the offsets table ---- */

static void backoff(nf_pgsink_t *s)
{
    s->backoff_ms = s->backoff_ms ? s->backoff_ms * 2 : 100;
    if (s->backoff_ms > s->o.retry_max_ms)
        s->backoff_ms = s->o.retry_max_ms;
    s->next_try_ms = mono_ms() + s->backoff_ms;
}

/* Connected, with the schema checked. 0, NF_PG_TRANSIENT or NF_PG_SCHEMA. */
static int connect_pg(nf_pgsink_t *s)
{
    if (s->pg && nf_pg_connected(s->pg))
        return 0;
    nf_pg_close(s->pg);
    char err[1024];
    s->pg = nf_pg_connect(s->o.dsn, s->o.statement_timeout_ms, err, sizeof err);
    int rc = s->pg ? nf_pg_schema_check(s->pg, err, sizeof err) : NF_PG_TRANSIENT;
    if (rc == 0) {
        set_connected(s, true);
        nf_log(NF_LOG_INFO, "sink", "connected to PostgreSQL", NF_LS("db", nf_pg_where(s->pg)),
               NF_LEND);
        return 0;
    }
    set_connected(s, false);
    note_error(s, s->m.errors_connect, "connect", err);
    nf_log(rc == NF_PG_SCHEMA ? NF_LOG_ERROR : NF_LOG_WARN, "sink",
           rc == NF_PG_SCHEMA ? "the database's schema is not this binary's; stopping"
                              : "PostgreSQL unreachable; retrying",
           NF_LS("error", err), NF_LI("retry_in_ms", s->backoff_ms), NF_LEND);
    nf_pg_close(s->pg);
    s->pg = NULL;
    return rc == NF_PG_SCHEMA ? rc : NF_PG_TRANSIENT;
}

/* The consumer assigned the offsets the table holds for the group's assignment to us. 0, or
 * NF_PG_*: try again after the backoff (the consumer stays unassigned meanwhile: nothing is
 * read that could not be landed). */
static int rewind_parts(nf_pgsink_t *s)
{
    int rc = connect_pg(s);
    if (rc != 0)
        return rc;
    const char **topics = calloc(s->nparts + 1, sizeof *topics);
    int32_t *parts = calloc(s->nparts + 1, sizeof *parts);
    int64_t *next = calloc(s->nparts + 1, sizeof *next);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)s->nparts + 1);
    char err[1024] = "out of memory";
    rc = topics && parts && next && l ? 0 : NF_PG_TRANSIENT;
    for (uint32_t i = 0; rc == 0 && i < s->nparts; i++) {
        topics[i] = s->parts[i].topic;
        parts[i] = s->parts[i].partition;
    }
    if (rc == 0 && s->nparts)
        rc = nf_pg_offsets_ensure(s->pg, s->o.group, s->nparts, topics, parts, next, err,
                                  sizeof err);
    for (uint32_t i = 0; rc == 0 && i < s->nparts; i++) {
        s->parts[i].db_next = next[i];
        s->parts[i].seen = false;
        rd_kafka_topic_partition_list_add(l, topics[i], parts[i])->offset = next[i];
    }
    if (rc == 0) {
        batch_clear(s);
        rd_kafka_assign(s->rk, NULL);
        rd_kafka_resp_err_t e = rd_kafka_assign(s->rk, l);
        if (e) {
            snprintf(err, sizeof err, "assign: %s", rd_kafka_err2str(e));
            rc = NF_PG_TRANSIENT;
        }
    }
    if (rc != 0)
        note_error(s, s->m.errors_connect, "offsets", err);
    free(topics);
    free(parts);
    free(next);
    if (l)
        rd_kafka_topic_partition_list_destroy(l);
    return rc;
}

static nf_pg_kind_t kind_of(const nf_pgsink_t *s, const char *topic)
{
    size_t pl = strlen(s->o.topic_prefix);
    for (int k = 0; k < NF_PG_KINDS; k++)
        if (!strncmp(topic, s->o.topic_prefix, pl) && !strcmp(topic + pl, nf_pg_kind_topic(k)))
            return (nf_pg_kind_t)k;
    return NF_PG_KINDS;
}

/* Eager rebalancing: a revocation takes every partition; the batch in hand is dropped (its
 * records are read again by whoever is assigned them, from the table's offsets). */
static void on_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *list, void *opaque)
{
    nf_pgsink_t *s = opaque;
    rd_kafka_assign(rk, NULL); /* the offsets come from the table: rewind_parts assigns */
    batch_clear(s);
    set_assigned(s, false);
    s->gen++;
    if (err != RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) { /* revoked: kept for their offsets */
        nf_log(NF_LOG_INFO, "sink", "partitions revoked", NF_LI("partitions", list->cnt), NF_LEND);
        s->revoked = true;
        s->rewind = false;
        return;
    }
    part_t *p = list->cnt ? calloc((size_t)list->cnt, sizeof *p) : NULL;
    if (list->cnt && !p) {
        nf_log(NF_LOG_ERROR, "sink", "out of memory for an assignment", NF_LEND);
        return;
    }
    uint32_t n = 0;
    for (int i = 0; i < list->cnt; i++) {
        part_t *q = &p[n];
        snprintf(q->topic, sizeof q->topic, "%s", list->elems[i].topic);
        q->kind = kind_of(s, q->topic);
        q->partition = list->elems[i].partition;
        /* a partition it had before keeps its landed offset for the lag until the table is
         * read (PostgreSQL may be down now) */
        int old = part_of(s, q->topic, q->partition);
        q->db_next = old >= 0 ? s->parts[old].db_next : -1;
        if (q->kind < NF_PG_KINDS)
            n++;
    }
    free(s->parts);
    s->parts = p;
    s->nparts = n;
    s->revoked = false;
    s->rewind = true;
    s->next_try_ms = 0;
    nf_log(NF_LOG_INFO, "sink", "partitions assigned", NF_LI("partitions", s->nparts), NF_LEND);
}

/* ---- lag ---- */

/* The lag of each partition of the snapshot: high watermark - landed offset, the gauges the
 * sums per topic. Partitions whose landed offset is not known yet are not counted. */
static void measure_lag(nf_pgsink_t *s)
{
    pthread_mutex_lock(&s->mu);
    uint32_t n = s->nsnap;
    uint64_t gen = s->snap_gen;
    part_t *c = n ? malloc(n * sizeof *c) : NULL;
    if (c)
        memcpy(c, s->snap, n * sizeof *c);
    pthread_mutex_unlock(&s->mu);
    int64_t sum[NF_PG_KINDS] = {0};
    for (uint32_t i = 0; c && i < n && !atomic_load(&s->stop); i++) {
        int64_t lo = 0, hi = 0;
        c[i].lag = -1;
        if (c[i].db_next < 0 ||
            rd_kafka_query_watermark_offsets(s->lag_rk, c[i].topic, c[i].partition, &lo, &hi,
                                             2000) != RD_KAFKA_RESP_ERR_NO_ERROR)
            continue;
        int64_t from = c[i].db_next > lo ? c[i].db_next : lo;
        c[i].lag = hi > from ? hi - from : 0;
        sum[c[i].kind] += c[i].lag;
    }
    for (int k = 0; k < NF_PG_KINDS; k++)
        nf_gauge_set(s->m.lag[k], sum[k]);
    pthread_mutex_lock(&s->mu);
    for (uint32_t i = 0; c && i < n && s->snap_gen == gen; i++) /* else: another assignment */
        s->snap[i].lag = c[i].lag;
    pthread_mutex_unlock(&s->mu);
    free(c);
}

static void *lag_main(void *arg)
{
    nf_pgsink_t *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!atomic_load(&s->stop)) {
        pthread_mutex_unlock(&s->mu);
        measure_lag(s);
        pthread_mutex_lock(&s->mu);
        struct timespec ts = nf_deadline_after(CLOCK_REALTIME, LAG_EVERY_MS);
        if (!atomic_load(&s->stop))
            pthread_cond_timedwait(&s->lag_cv, &s->mu, &ts);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- status for the HTTP threads, from the snapshot ---- */

static void parts_json(nf_jw_t *w, const part_t *p, uint32_t n)
{
    nf_jw_arr_open(w);
    for (uint32_t i = 0; i < n; i++) {
        nf_jw_elem(w);
        nf_jw_obj_open(w);
        nf_jw_key(w, "topic");
        nf_jw_str(w, p[i].topic);
        nf_jw_key(w, "partition");
        nf_jw_i64(w, p[i].partition);
        nf_jw_key(w, "next_offset");
        nf_jw_i64(w, p[i].db_next);
        nf_jw_key(w, "lag");
        nf_jw_i64(w, p[i].lag);
        nf_jw_obj_close(w);
    }
    nf_jw_arr_close(w);
}

static char *status_json(nf_pgsink_t *s, size_t *len)
{
    pthread_mutex_lock(&s->mu);
    nf_jw_t w;
    nf_jw_init(&w);
    nf_jw_obj_open(&w);
    nf_jw_key(&w, "connected");
    nf_jw_bool(&w, s->connected);
    nf_jw_key(&w, "schema_version");
    nf_jw_i64(&w, nf_pg_schema_latest());
    nf_jw_key(&w, "group_id");
    nf_jw_str(&w, s->o.group);
    nf_jw_key(&w, "last_error");
    if (s->last_error_ms)
        nf_jw_str(&w, s->last_error);
    else
        nf_jw_null(&w);
    nf_jw_key(&w, "last_error_at_ms");
    nf_jw_i64(&w, s->last_error_ms);
    nf_jw_key(&w, "partitions");
    parts_json(&w, s->snap, s->nsnap);
    nf_jw_obj_close(&w);
    pthread_mutex_unlock(&s->mu);
    if (w.failed) {
        nf_jw_free(&w);
        return NULL;
    }
    *len = w.len;
    return w.buf; /* the writer's buffer, malloc'ed: handed over */
}

/* The loop's partitions into the snapshot: their landed offsets, and for another assignment
 * the partitions themselves (their lag unknown until the lag thread measures it). */
static void publish_parts(nf_pgsink_t *s)
{
    uint32_t n = s->revoked ? 0 : s->nparts;
    pthread_mutex_lock(&s->mu);
    if (s->snap_gen != s->gen || s->nsnap != n) {
        if (grow((void **)&s->snap, &s->cap_snap, n + 1, sizeof *s->snap) != 0)
            n = 0;
        for (uint32_t i = 0; i < n; i++) {
            s->snap[i] = s->parts[i];
            s->snap[i].lag = -1;
        }
        s->nsnap = n;
        s->snap_gen = s->gen;
    }
    for (uint32_t i = 0; i < s->nsnap; i++)
        s->snap[i].db_next = s->parts[i].db_next;
    pthread_mutex_unlock(&s->mu);
}

char *nf_pgsink_status(nf_pgsink_t *s, size_t *len)
{
    return status_json(s, len);
}

bool nf_pgsink_ready(nf_pgsink_t *s, char *body, size_t len)
{
    pthread_mutex_lock(&s->mu);
    bool ok = s->connected && s->assigned;
    const char *why = !s->connected ? "postgres" : !s->assigned ? "assignment" : NULL;
    if (ok)
        snprintf(body, len, "{\"ready\":true}\n");
    else
        snprintf(body, len, "{\"ready\":false,\"waiting_for\":\"%s\"}\n", why);
    pthread_mutex_unlock(&s->mu);
    return ok;
}

/* ---- the loop ---- */

static void on_event(nf_pgsink_t *s, const rd_kafka_message_t *m)
{
    const char *topic = m->rkt ? rd_kafka_topic_name(m->rkt) : "";
    if (m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET) {
        nf_counter_inc(s->m.resets);
        nf_log(NF_LOG_ERROR, "sink",
               "the landed offset is no longer in Kafka (retention deleted records before the "
               "sink read them): reading from the earliest record kept",
               NF_LS("topic", topic), NF_LI("partition", m->partition),
               NF_LS("error", rd_kafka_message_errstr(m)), NF_LEND);
        return;
    }
    nf_log(m->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ? NF_LOG_ERROR : NF_LOG_WARN, "sink",
           m->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART
               ? "a topic the sink reads does not exist: create the job's topics (`newsflow "
                 "topics create`, same kafka.topic_prefix)"
               : "consumer error",
           NF_LS("topic", topic), NF_LS("error", rd_kafka_message_errstr(m)), NF_LEND);
}

/* One poll: a record into the batch, or an event. 1 something came, 0 nothing, -ENOMEM. */
static int poll_once(nf_pgsink_t *s, int timeout_ms)
{
    rd_kafka_message_t *m = rd_kafka_consumer_poll(s->rk, timeout_ms);
    if (!m)
        return 0;
    int rc = 1;
    if (m->err)
        on_event(s, m);
    else if (batch_add(s, m) != 0)
        rc = -ENOMEM;
    rd_kafka_message_destroy(m);
    return rc;
}

/* A partition whose consumer moved past the landed offset with no record in hand (markers of
 * the job's transactions): worth an offsets-only landing. */
static bool moved_past(nf_pgsink_t *s)
{
    if (!s->nparts || s->revoked)
        return false;
    int64_t *next = malloc(s->nparts * sizeof *next);
    bool moved = false;
    if (next) {
        next_offsets(s, next);
        for (uint32_t i = 0; i < s->nparts && !moved; i++)
            moved = s->parts[i].db_next >= 0 && next[i] > s->parts[i].db_next;
    }
    free(next);
    return moved;
}

static void periodic(nf_pgsink_t *s, int64_t now)
{
    if (now >= s->next_publish_ms) {
        publish_parts(s);
        s->next_publish_ms = now + 500;
    }
    if (s->o.retention_days && now >= s->next_prune_ms && s->pg && nf_pg_connected(s->pg)) {
        uint64_t n = 0;
        char err[512];
        if (nf_pg_prune(s->pg, s->o.retention_days, &n, err, sizeof err) == 0)
            nf_counter_add(s->m.pruned, n);
        else
            nf_log(NF_LOG_WARN, "sink", "pruning past postgres.retention_days failed",
                   NF_LS("error", err), NF_LEND);
        s->next_prune_ms = now + PRUNE_EVERY_MS;
    }
}

/* The assignment from the table, when it is due. 1 assigned now, 0 not yet, NF_PG_SCHEMA. */
static int try_rewind(nf_pgsink_t *s, int64_t now)
{
    if (now < s->next_try_ms) { /* serves the group's callbacks; unassigned, nothing comes */
        rd_kafka_message_t *m = rd_kafka_consumer_poll(
            s->rk, (int)(s->next_try_ms - now > 100 ? 100 : s->next_try_ms - now));
        if (m)
            rd_kafka_message_destroy(m);
        return 0;
    }
    int rc = rewind_parts(s);
    if (rc == NF_PG_SCHEMA)
        return rc;
    if (rc != 0) {
        backoff(s);
        return 0;
    }
    s->rewind = false;
    s->backoff_ms = 0;
    set_assigned(s, true);
    return 1;
}

/* One step of the loop. 0, or NF_PG_SCHEMA to stop. */
static int step(nf_pgsink_t *s)
{
    int64_t now = mono_ms();
    periodic(s, now);
    if (s->rewind) {
        int rc = try_rewind(s, now);
        return rc < 0 ? rc : 0;
    }
    int got = poll_once(s, s->nrecs ? 1 : 100);
    if (got < 0) { /* the record is lost to this batch: read it all again */
        nf_log(NF_LOG_ERROR, "sink", "out of memory for a record; reading the batch again",
               NF_LEND);
        batch_clear(s);
        s->rewind = true;
        set_assigned(s, false);
        backoff(s);
        return 0;
    }
    bool full = s->nrecs >= s->o.batch_rows || s->arena_len >= BATCH_MAX_BYTES ||
                (s->nrecs && mono_ms() - s->batch_start_ms >= (int64_t)s->o.batch_ms);
    bool drained = got == 0 && (s->nrecs || moved_past(s));
    if ((full || drained) && land(s) != 0) {
        s->rewind = true;
        set_assigned(s, false);
        backoff(s);
    }
    return 0;
}

int nf_pgsink_run(nf_pgsink_t *s)
{
    int rc = 0;
    s->lag_started = pthread_create(&s->lag_thread, NULL, lag_main, s) == 0;
    while (!atomic_load(&s->stop) && (rc = step(s)) == 0)
        ;
    if (rc == 0 && !s->rewind && s->nrecs)
        land(s); /* what it holds, once; if it fails the next owner reads it again */
    rd_kafka_consumer_close(s->rk);
    nf_pgsink_stop(s);
    if (s->lag_started)
        pthread_join(s->lag_thread, NULL);
    s->lag_started = false;
    return rc;
}

void nf_pgsink_stop(nf_pgsink_t *s)
{
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->stop, true);
    pthread_cond_broadcast(&s->lag_cv);
    pthread_mutex_unlock(&s->mu);
}

/* ---- set-up ---- */

static void consumer_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    (void)rk, (void)opaque;
    nf_log(err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN ? NF_LOG_ERROR : NF_LOG_WARN, "kafka", reason,
           NF_LS("error", rd_kafka_err2name((rd_kafka_resp_err_t)err)), NF_LEND);
}

static rd_kafka_t *consumer_new(nf_pgsink_t *s, char *err, size_t errlen)
{
    rd_kafka_conf_t *c = nf_kafka_conf_new(s->o.brokers, s->o.properties, err, errlen);
    if (!c)
        return NULL;
    /* after the operator's properties: the loop relies on each of these */
    const char *kv[][2] = {{"group.id", s->o.group},
                           {"enable.auto.commit", "false"},
                           {"enable.auto.offset.store", "false"},
                           {"isolation.level", "read_committed"},
                           {"auto.offset.reset", "earliest"},
                           {"partition.assignment.strategy", "range,roundrobin"},
                           /* a batch soon after its records are committed (default 500) */
                           {"fetch.wait.max.ms", "100"},
                           /* bounded by bytes (the default 64 MB), not by the 100,000 messages a
                            * fetch of small records crosses, after which librdkafka 2.0 leaves
                            * the partition unfetched for up to a second */
                           {"queued.min.messages", "10000000"}};
    char rerr[256];
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        if (rd_kafka_conf_set(c, kv[i][0], kv[i][1], rerr, sizeof rerr) != RD_KAFKA_CONF_OK) {
            snprintf(err, errlen, "librdkafka %s=%s: %s", kv[i][0], kv[i][1], rerr);
            rd_kafka_conf_destroy(c);
            return NULL;
        }
    rd_kafka_conf_set_error_cb(c, consumer_error); /* kafka.c's reads its own opaque */
    rd_kafka_conf_set_rebalance_cb(c, on_rebalance);
    rd_kafka_conf_set_opaque(c, s);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, rerr, sizeof rerr);
    if (!rk) {
        snprintf(err, errlen, "librdkafka: %s", rerr);
        rd_kafka_conf_destroy(c);
        return NULL;
    }
    rd_kafka_poll_set_consumer(rk);
    return rk;
}

/* The lag thread's client: it only asks watermarks (no group, nothing consumed). */
static rd_kafka_t *lag_client(nf_pgsink_t *s, char *err, size_t errlen)
{
    rd_kafka_conf_t *c = nf_kafka_conf_new(s->o.brokers, s->o.properties, err, errlen);
    if (!c)
        return NULL;
    char rerr[256];
    rd_kafka_conf_set_error_cb(c, consumer_error);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, rerr, sizeof rerr);
    if (!rk) {
        snprintf(err, errlen, "librdkafka: %s", rerr);
        rd_kafka_conf_destroy(c);
    }
    return rk;
}

static int subscribe(nf_pgsink_t *s, char *err, size_t errlen)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(NF_PG_KINDS);
    for (int k = 0; k < NF_PG_KINDS; k++) {
        if (k == NF_PG_READ_EVENTS && !s->o.read_events)
            continue;
        char t[192];
        snprintf(t, sizeof t, "%s%s", s->o.topic_prefix, nf_pg_kind_topic(k));
        rd_kafka_topic_partition_list_add(l, t, RD_KAFKA_PARTITION_UA);
    }
    rd_kafka_resp_err_t e = rd_kafka_subscribe(s->rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    if (e)
        snprintf(err, errlen, "subscribe: %s", rd_kafka_err2str(e));
    return e ? -EINVAL : 0;
}

nf_pgsink_t *nf_pgsink_new(const nf_pgsink_opts_t *o, char *err, size_t errlen)
{
    nf_pgsink_t *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->o = *o;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->lag_cv, NULL);
    register_metrics(&s->m);
    snprintf(s->dlq_topic, sizeof s->dlq_topic, "%sdead-letters", o->topic_prefix);
    nf_edge_kafka_opts_t ko = {.brokers = o->brokers,
                               .properties = o->properties,
                               .topic = s->dlq_topic,
                               .partitioner = "consistent_random",
                               .delivery_timeout_ms = 30000,
                               .max_in_flight = 100000};
    if (!(s->dlq = nf_edge_kafka_new(&ko, err, errlen)) ||
        !(s->rk = consumer_new(s, err, errlen)) || !(s->lag_rk = lag_client(s, err, errlen)) ||
        subscribe(s, err, errlen) != 0) {
        nf_pgsink_free(s);
        return NULL;
    }
    return s;
}

void nf_pgsink_free(nf_pgsink_t *s)
{
    if (!s)
        return;
    if (s->rk)
        rd_kafka_destroy(s->rk);
    if (s->lag_rk)
        rd_kafka_destroy(s->lag_rk);
    nf_edge_kafka_free(s->dlq);
    nf_pg_close(s->pg);
    free(s->parts);
    free(s->recs);
    free(s->arena);
    free(s->dead);
    free(s->snap);
    pthread_cond_destroy(&s->lag_cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
