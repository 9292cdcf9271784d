/* reads.c — the kafka_in and reads actors (reads.h). */
#include "actors/reads.h"
#include "actors/ingest.h"
#include "feed/dates.h"
#include "io/events.h"
#include "runtime/jsonw.h"
#include "runtime/log.h"
#include "state/kstate.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { MSG_READ_BATCH = 1 };
#define BATCH_MAX   64  /* events per cross-shard message */
#define CONSUME_MAX 256 /* records taken from the queue per turn */
#define MAX_DEST    NF_MAX_SHARDS

typedef struct read_item {
    uint16_t kg;
    nf_read_event_t ev;
} read_item_t;

typedef struct read_batch {
    struct read_batch *next; /* kafka_in's held list */
    unsigned dest, n;
    read_item_t items[BATCH_MAX];
} read_batch_t;

/* A message for the crawl actors (sources topic) that a full ring refused. */
typedef struct held_msg {
    struct held_msg *next;
    unsigned dest;
    nf_msg_t m;
} held_msg_t;

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* 128-bit key of a user id: two independent 64-bit FNV-1a passes, each finished with a strong
 * mixer (the ids are routing and state keys, not security tokens). */
static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static nf_id128_t user_key(const char *s)
{
    uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        a = (a ^ *p) * 0x100000001b3ull;
        b = (b ^ *p) * 0x100000001b3ull;
    }
    return (nf_id128_t){mix64(a), mix64(b ^ 0x9e3779b97f4a7c15ull)};
}

/* ================================================================ kafka_in */

typedef struct kin {
    nf_reads_t *r;
    nf_shard_t *sh;
    unsigned me, nshards;
    nf_watch_t *watch;
    read_batch_t *open[MAX_DEST]; /* batches being filled, per destination shard */
    read_batch_t *hhead, *htail;  /* refused by a full ring, in order */
    size_t held_events;
    held_msg_t *shead, *stail; /* source messages refused by a full ring, in order */
    size_t held_msgs;
    bool cut_paused, kafka_paused, warned_sources;
    nf_jw_t jw;
} kin_t;

static bool send_batch(kin_t *k, read_batch_t *b)
{
    nf_msg_t m = {.actor = (uint16_t)k->r->reads_actor, .kind = MSG_READ_BATCH};
    m.body.ptr = b;
    return nf_send(k->sh, b->dest, &m) == 0;
}

static void hold(kin_t *k, read_batch_t *b)
{
    b->next = NULL;
    if (k->htail)
        k->htail->next = b;
    else
        k->hhead = b;
    k->htail = b;
    k->held_events += b->n;
}

static void ship(kin_t *k, read_batch_t *b)
{
    if (k->hhead || !send_batch(k, b))
        hold(k, b);
}

static void drain_held(kin_t *k)
{
    while (k->hhead && send_batch(k, k->hhead)) {
        k->held_events -= k->hhead->n;
        k->hhead = k->hhead->next;
        if (!k->hhead)
            k->htail = NULL;
    }
    while (k->shead && nf_send(k->sh, k->shead->dest, &k->shead->m) == 0) {
        held_msg_t *h = k->shead;
        k->shead = h->next;
        if (!k->shead)
            k->stail = NULL;
        k->held_msgs--;
        free(h);
    }
    nf_gauge_set(k->r->m.held_events, (int64_t)k->held_events);
}

static void flow_control(kin_t *k)
{
    nf_reads_t *r = k->r;
    size_t held = k->held_events + k->held_msgs;
    if (!k->kafka_paused && held > r->pause_high_water) {
        k->kafka_paused = true;
        nf_kafka_pause_shard(r->kafka, k->me, true);
        nf_counter_inc(r->m.pauses);
        nf_gauge_add(r->m.paused_shards, 1);
        nf_log(NF_LOG_INFO, "kafka", "partitions paused: downstream is full", NF_LI("shard", k->me),
               NF_LI("held_events", k->held_events), NF_LI("held_source_messages", k->held_msgs),
               NF_LEND);
    } else if (k->kafka_paused && held < r->pause_low_water) {
        k->kafka_paused = false;
        nf_kafka_pause_shard(r->kafka, k->me, false);
        nf_counter_inc(r->m.resumes);
        nf_gauge_add(r->m.paused_shards, -1);
        nf_log(NF_LOG_INFO, "kafka", "partitions resumed", NF_LI("shard", k->me),
               NF_LI("held_events", k->held_events), NF_LEND);
    }
}

static void dead_letter(kin_t *k, const rd_kafka_message_t *m, const char *stage, const char *error)
{
    const char *topic = rd_kafka_topic_name(m->rkt);
    char key[320];
    size_t kl = nf_dead_letter_key(key, sizeof key, topic, m->partition, m->offset);
    if (kl >= sizeof key)
        kl = sizeof key - 1;
    nf_jw_reset(&k->jw);
    nf_dead_letter_json(&k->jw, topic, m->partition, m->offset, stage, error, m->payload, m->len,
                        wall_ms());
    if (k->jw.failed || nf_epoch_emit(k->r->epoch, k->me, NF_TOPIC_DEAD_LETTERS, key, kl, k->jw.buf,
                                      k->jw.len) != 0) {
        /* Without memory the record cannot be kept: the job stops rather than lose it. */
        nf_log(NF_LOG_ERROR, "kafka", "cannot record a dead letter (out of memory); stopping",
               NF_LS("topic", topic), NF_LI("partition", m->partition), NF_LI("offset", m->offset),
               NF_LEND);
        nf_runtime_request_stop(nf_shard_runtime(k->sh));
        return;
    }
    nf_counter_inc(k->r->m.dead_letters);
    nf_log(NF_LOG_WARN, "kafka", "record sent to dead-letters", NF_LS("topic", topic),
           NF_LI("partition", m->partition), NF_LI("offset", m->offset), NF_LS("error", error),
           NF_LEND);
}

static void take_read_event(kin_t *k, const rd_kafka_message_t *m)
{
    nf_reads_t *r = k->r;
    char err[256];
    unsigned dest;
    read_item_t tmp;
    /* Decode straight into the destination batch when there is one; otherwise into tmp. */
    int rc = nf_read_event_decode(m->payload, m->len, r->max_event_bytes, &tmp.ev, err, sizeof err);
    if (rc != 0) {
        dead_letter(k, m, "decode", err);
        return;
    }
    dest = nf_route(nf_shard_runtime(k->sh), user_key(tmp.ev.user_id).hi);
    read_batch_t *b = k->open[dest];
    if (!b) {
        b = malloc(sizeof *b);
        if (!b) {
            nf_log(NF_LOG_ERROR, "kafka", "out of memory batching read events; stopping", NF_LEND);
            nf_runtime_request_stop(nf_shard_runtime(k->sh));
            return;
        }
        b->n = 0;
        b->dest = dest;
        k->open[dest] = b;
    }
    tmp.kg = (uint16_t)m->partition;
    b->items[b->n++] = tmp;
    nf_counter_inc(r->m.events);
    if (b->n == BATCH_MAX) {
        k->open[dest] = NULL;
        ship(k, b);
    }
}

/* Sends one source message, or holds it behind those already waiting (order per destination is
 * what the crawl actors rely on: a FORGET must not overtake an earlier SET of the same source). */
static void ship_msg(kin_t *k, unsigned dest, const nf_msg_t *m)
{
    if (!k->shead && nf_send(k->sh, dest, m) == 0)
        return;
    held_msg_t *h = malloc(sizeof *h);
    if (!h) {
        if (m->kind == NF_MSG_SOURCE_SET)
            free(m->body.ptr);
        nf_log(NF_LOG_ERROR, "kafka", "out of memory holding a sources message; stopping", NF_LEND);
        nf_runtime_request_stop(nf_shard_runtime(k->sh));
        return;
    }
    h->next = NULL;
    h->dest = dest;
    h->m = *m;
    if (k->stail)
        k->stail->next = h;
    else
        k->shead = h;
    k->stail = h;
    k->held_msgs++;
}

/* One record of the sources topic: to the crawl actors, as SET for the shard that owns the
 * source's host and FORGET for every other (ingest.h). */
static void take_source(kin_t *k, const rd_kafka_message_t *m)
{
    nf_reads_t *r = k->r;
    char err[512];
    nf_source_record_t rec;
    int rc =
        nf_source_record_decode(m->key, m->key ? m->key_len : 0, m->payload,
                                m->payload ? m->len : 0, r->max_event_bytes, &rec, err, sizeof err);
    if (rc != 0) {
        dead_letter(k, m, "decode", err);
        return;
    }
    if (!r->ingest) {
        if (!k->warned_sources) {
            k->warned_sources = true;
            nf_log(NF_LOG_WARN, "kafka", "sources records skipped: no crawl actor in this job",
                   NF_LEND);
        }
        return;
    }
    nf_source_route_t route;
    rc = nf_ingest_source_route(r->ingest, nf_shard_runtime(k->sh), &rec, &route, err, sizeof err);
    if (rc == -EINVAL) {
        dead_letter(k, m, "decode", err);
        return;
    }
    if (rc != 0) {
        nf_log(NF_LOG_ERROR, "kafka", "out of memory routing a sources record; stopping",
               NF_LS("source_id", rec.source_id), NF_LEND);
        nf_runtime_request_stop(nf_shard_runtime(k->sh));
        return;
    }
    for (unsigned d = 0; d < k->nshards; d++) {
        nf_msg_t msg;
        nf_ingest_source_msg(r->ingest, &route, d, &msg);
        ship_msg(k, d, &msg);
    }
}

static void flush_open(kin_t *k)
{
    for (unsigned d = 0; d < k->nshards; d++)
        if (k->open[d]) {
            read_batch_t *b = k->open[d];
            k->open[d] = NULL;
            ship(k, b);
        }
}

static void consume_turn(kin_t *k)
{
    nf_reads_t *r = k->r;
    if (!r->kafka || k->cut_paused || k->kafka_paused || nf_shard_stopping(k->sh))
        return;
    rd_kafka_message_t *msgs[CONSUME_MAX];
    size_t n = nf_kafka_shard_consume(r->kafka, k->me, msgs, CONSUME_MAX);
    for (size_t i = 0; i < n; i++) {
        rd_kafka_message_t *m = msgs[i];
        if (m->err) {
            if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                nf_log(NF_LOG_WARN, "kafka", "consumer error",
                       NF_LS("error", rd_kafka_message_errstr(m)), NF_LEND);
            rd_kafka_message_destroy(m);
            continue;
        }
        nf_counter_inc(r->m.records);
        int in = nf_kafka_input_of(r->kafka, rd_kafka_topic_name(m->rkt));
        if (in == NF_INPUT_READ_EVENTS)
            take_read_event(k, m);
        else if (in == NF_INPUT_SOURCES)
            take_source(k, m);
        if (in >= 0)
            nf_epoch_set_offset(r->epoch, (nf_input_t)in, m->partition, m->offset + 1);
        rd_kafka_message_destroy(m);
    }
    flush_open(k);
    drain_held(k);
    flow_control(k);
    if (n == CONSUME_MAX && !k->kafka_paused)
        nf_actor_schedule(k->sh, r->in_actor); /* more may wait: the pipe only signals once */
}

static void on_queue(nf_shard_t *sh, int fd, unsigned revents, void *arg)
{
    char buf[64];
    while (read(fd, buf, sizeof buf) > 0)
        ;
    consume_turn(arg);
    (void)sh;
    (void)revents;
}

static void kin_cut_pause(nf_shard_t *sh, void *self)
{
    ((kin_t *)self)->cut_paused = true;
    (void)sh;
}

static bool kin_busy(nf_shard_t *sh, void *self)
{
    kin_t *k = self;
    drain_held(k);
    (void)sh;
    return k->hhead != NULL || k->shead != NULL;
}

static void kin_snapshot(nf_shard_t *sh, void *self, nf_store_batch_t *b, uint64_t epoch)
{
    /* No state of its own: positions are in the epoch (nf_epoch_set_offset). */
    (void)sh;
    (void)self;
    (void)b;
    (void)epoch;
}

static void kin_cut_resume(nf_shard_t *sh, void *self)
{
    kin_t *k = self;
    k->cut_paused = false;
    nf_actor_schedule(sh, k->r->in_actor);
}

static const nf_epoch_participant_t kin_part = {
    .pause = kin_cut_pause, .busy = kin_busy, .snapshot = kin_snapshot, .resume = kin_cut_resume};

static void *kin_init(nf_shard_t *sh, void *ctx)
{
    kin_t *k = calloc(1, sizeof *k);
    if (!k)
        abort();
    k->r = ctx;
    k->sh = sh;
    k->me = nf_shard_index(sh);
    k->nshards = nf_runtime_shard_count(nf_shard_runtime(sh));
    nf_jw_init(&k->jw);
    if (k->r->epoch && nf_epoch_participant_add(k->r->epoch, sh, &kin_part, k) != 0)
        abort();
    if (k->r->kafka) {
        int fd = nf_kafka_shard_fd(k->r->kafka, k->me);
        if (fd >= 0 && !(k->watch = nf_watch_add(sh, fd, POLLIN, on_queue, k)))
            abort();
    }
    return k;
}

static void kin_handle(nf_shard_t *sh, void *self, const nf_msg_t *m)
{
    (void)sh;
    (void)self;
    nf_log(NF_LOG_ERROR, "kafka", "unexpected message", NF_LI("kind", m->kind), NF_LEND);
}

static void kin_run(nf_shard_t *sh, void *self)
{
    consume_turn(self);
    (void)sh;
}

static void kin_resume(nf_shard_t *sh, void *self)
{
    kin_t *k = self;
    drain_held(k);
    flow_control(k);
    consume_turn(k);
    (void)sh;
}

static void kin_stop(nf_shard_t *sh, void *self)
{
    kin_t *k = self;
    if (k->watch) {
        nf_watch_remove(sh, k->watch);
        k->watch = NULL;
    }
    flush_open(k);
    drain_held(k);
}

static void kin_fini(nf_shard_t *sh, void *self)
{
    kin_t *k = self;
    kin_stop(sh, k);
    while (k->hhead) { /* forced shutdown only: uncommitted, so re-read after restart */
        read_batch_t *b = k->hhead;
        k->hhead = b->next;
        free(b);
    }
    while (k->shead) {
        held_msg_t *h = k->shead;
        k->shead = h->next;
        if (h->m.kind == NF_MSG_SOURCE_SET)
            free(h->m.body.ptr);
        free(h);
    }
    nf_jw_free(&k->jw);
    free(k);
}

static void batch_drop(void *ctx, const nf_msg_t *m)
{
    (void)ctx;
    free(m->body.ptr);
}

static const nf_actor_ops_t kin_ops = {.name = "kafka_in",
                                       .init = kin_init,
                                       .handle = kin_handle,
                                       .run = kin_run,
                                       .resume = kin_resume,
                                       .stop = kin_stop,
                                       .fini = kin_fini,
                                       .drop = batch_drop};

/* ================================================================ reads */

typedef struct reads_state {
    uint64_t count;
    int64_t last_ts_ms;
} reads_state_t;

typedef struct rd {
    nf_reads_t *r;
    nf_shard_t *sh;
    nf_kstate_t *ks;
    nf_jw_t jw;
    nf_timer_t gauges;
} rd_t;

static void reads_event(rd_t *d, const read_item_t *it, uint64_t now_ms)
{
    nf_reads_t *r = d->r;
    nf_id128_t key = user_key(it->ev.user_id);
    uint32_t len = 0;
    int err = 0;
    reads_state_t st = {0, 0};
    const void *v = nf_kstate_get(d->ks, it->kg, key, now_ms, &len, &err);
    if (err == -EIO) {
        /* The store cannot be read: counting on would restart this user at 1. Stop; the
         * uncommitted epoch is re-read after a restart. */
        nf_counter_inc(r->m.state_errors);
        nf_log(NF_LOG_ERROR, "reads", "state read failed; stopping the job",
               NF_LS("user_id", it->ev.user_id), NF_LEND);
        nf_runtime_request_stop(nf_shard_runtime(d->sh));
        return;
    }
    if (v && len == sizeof st)
        memcpy(&st, v, sizeof st);
    st.count++;
    if (it->ev.ts_ms > st.last_ts_ms)
        st.last_ts_ms = it->ev.ts_ms;
    if (nf_kstate_put(d->ks, it->kg, key, &st, sizeof st, now_ms) != 0) {
        nf_counter_inc(r->m.state_errors);
        nf_log(NF_LOG_ERROR, "reads", "out of memory for keyed state; stopping the job", NF_LEND);
        nf_runtime_request_stop(nf_shard_runtime(d->sh));
        return;
    }
    nf_jw_t *w = &d->jw;
    char ts[40];
    nf_date_format(st.last_ts_ms, ts, sizeof ts);
    nf_jw_reset(w);
    nf_jw_obj_open(w);
    nf_jw_key(w, "user_id");
    nf_jw_str(w, it->ev.user_id);
    nf_jw_key(w, "version");
    nf_jw_u64(w, st.count);
    nf_jw_key(w, "vector");
    nf_jw_obj_open(w);
    nf_jw_obj_close(w);
    nf_jw_key(w, "updated_at");
    nf_jw_str(w, ts);
    nf_jw_obj_close(w);
    if (w->failed || nf_epoch_emit(r->epoch, nf_shard_index(d->sh), NF_TOPIC_INTEREST_UPDATES,
                                   it->ev.user_id, strlen(it->ev.user_id), w->buf, w->len) != 0) {
        nf_log(NF_LOG_ERROR, "reads", "out of memory for outputs; stopping the job", NF_LEND);
        nf_runtime_request_stop(nf_shard_runtime(d->sh));
        return;
    }
    nf_counter_inc(r->m.updates);
    if (r->slow_us) {
        uint64_t until = nf_now_ns() + (uint64_t)r->slow_us * 1000u;
        while (nf_now_ns() < until)
            ;
    }
}

static void reads_handle(nf_shard_t *sh, void *self, const nf_msg_t *m)
{
    rd_t *d = self;
    read_batch_t *b = m->body.ptr;
    uint64_t now = (uint64_t)wall_ms();
    for (unsigned i = 0; i < b->n; i++)
        reads_event(d, &b->items[i], now);
    free(b);
    if (d->r->epoch && nf_kstate_over_budget(d->ks))
        nf_epoch_request(d->r->epoch);
    (void)sh;
}

static void reads_snapshot(nf_shard_t *sh, void *self, nf_store_batch_t *b, uint64_t epoch)
{
    nf_kstate_snapshot(((rd_t *)self)->ks, b, epoch);
    (void)sh;
}

static void reads_committed(nf_shard_t *sh, void *self, uint64_t epoch)
{
    nf_kstate_committed(((rd_t *)self)->ks, epoch);
    (void)sh;
}

static const nf_epoch_participant_t reads_part = {.snapshot = reads_snapshot,
                                                  .committed = reads_committed};

static void on_gauges(nf_shard_t *sh, nf_timer_t *t, void *arg)
{
    rd_t *d = arg;
    nf_kstate_stats_t s;
    nf_kstate_stats(d->ks, &s);
    nf_gauge_set(d->r->m.state_bytes, (int64_t)s.bytes);
    nf_gauge_set(d->r->m.state_entries, (int64_t)s.entries);
    (void)sh;
    (void)t;
}

static void *reads_init(nf_shard_t *sh, void *ctx)
{
    rd_t *d = calloc(1, sizeof *d);
    if (!d)
        abort();
    d->r = ctx;
    d->sh = sh;
    nf_kstate_opts_t o = {
        .kind = NF_KIND_READS, .budget_bytes = d->r->budget_bytes, .initial_capacity = 1024};
    d->ks = nf_kstate_new(d->r->store, &o);
    if (!d->ks)
        abort();
    nf_jw_init(&d->jw);
    if (d->r->epoch && nf_epoch_participant_add(d->r->epoch, sh, &reads_part, d) != 0)
        abort();
    nf_timer_init(&d->gauges, on_gauges, d);
    nf_timer_arm(sh, &d->gauges, nf_now_ns() + 1000000000ull, 1000000000ull);
    return d;
}

static void reads_stop(nf_shard_t *sh, void *self)
{
    nf_timer_cancel(sh, &((rd_t *)self)->gauges);
}

static void reads_fini(nf_shard_t *sh, void *self)
{
    rd_t *d = self;
    nf_timer_cancel(sh, &d->gauges);
    nf_kstate_free(d->ks);
    nf_jw_free(&d->jw);
    free(d);
}

static const nf_actor_ops_t reads_ops = {.name = "reads",
                                         .init = reads_init,
                                         .handle = reads_handle,
                                         .stop = reads_stop,
                                         .fini = reads_fini,
                                         .drop = batch_drop};

/* ================================================================ registration */

int nf_reads_register(nf_runtime_t *rt, nf_reads_t *r)
{
    int e = 0;
    e |= nf_metrics_counter("newsflow_kafka_records_total", "Input records consumed.",
                            "stage=\"kafka_in\"", 0, &r->m.records);
    e |= nf_metrics_counter("newsflow_read_events_total", "Valid read events decoded.", NULL, 0,
                            &r->m.events);
    e |= nf_metrics_counter("newsflow_dead_letters_total",
                            "Input records sent to dead-letters (undecodable or invalid).",
                            "stage=\"decode\"", 0, &r->m.dead_letters);
    e |= nf_metrics_counter("newsflow_interest_updates_total",
                            "Per-user updates emitted (interest-updates).", NULL, 0, &r->m.updates);
    e |= nf_metrics_counter("newsflow_kafka_pauses_total",
                            "Times a shard paused its partitions (downstream full).", NULL, 0,
                            &r->m.pauses);
    e |= nf_metrics_counter("newsflow_kafka_resumes_total", "Times a shard resumed its partitions.",
                            NULL, 0, &r->m.resumes);
    e |= nf_metrics_counter("newsflow_state_errors_total",
                            "Keyed state reads or writes that failed.", "kind=\"reads\"", 0,
                            &r->m.state_errors);
    e |= nf_metrics_gauge("newsflow_kafka_held_events",
                          "Decoded events waiting for ring space (per process).", NULL, 0,
                          &r->m.held_events);
    e |= nf_metrics_gauge("newsflow_kafka_paused_shards", "Shards with paused partitions.", NULL, 0,
                          &r->m.paused_shards);
    e |= nf_metrics_gauge("newsflow_state_bytes", "Keyed state held in memory.", "kind=\"reads\"",
                          0, &r->m.state_bytes);
    e |= nf_metrics_gauge("newsflow_state_entries", "Keyed state entries held in memory.",
                          "kind=\"reads\"", 0, &r->m.state_entries);
    if (e)
        return -EINVAL;
    r->in_actor = nf_runtime_register(rt, &kin_ops, r);
    if (r->in_actor < 0)
        return r->in_actor;
    r->reads_actor = nf_runtime_register(rt, &reads_ops, r);
    return r->reads_actor < 0 ? r->reads_actor : 0;
}
