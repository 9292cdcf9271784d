/* kafka_in.c — the kafka_in actor (reads.h): read events and sources records from Kafka, event-id
 * dedup, trending counters; batches of counted reads to the interest-update actor "reads"
 * (reads.c). */
#include "actors/analytics.h"
#include "actors/article_msg.h"
#include "actors/ingest.h"
#include "actors/reads.h"
#include "actors/reads_batch.h"
#include "algo/bytes.h"
#include "algo/hash.h"
#include "feed/dates.h"
#include "io/events.h"
#include "runtime/jsonw.h"
#include "runtime/log.h"
#include "state/keyset.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SPARE_MAX   32  /* emptied batches a kafka_in keeps */
#define CONSUME_MAX 256 /* records taken from the queue per turn */
#define MAX_DEST    NF_MAX_SHARDS

static uint16_t batch_text(read_batch_t *b, const char *s, size_t len)
{
    size_t n = len + 1, at = b->text_len;
    memcpy(b->text + at, s, n);
    b->text_len += n;
    return (uint16_t)at;
}

/* A message for the crawl actors (sources topic) that a full ring refused. */
typedef struct held_msg {
    struct held_msg *next;
    unsigned dest;
    nf_msg_t m;
} held_msg_t;

/* ================================================================ kafka_in */

/* The trending counter of one read-events partition this shard consumes (analytics.h): created
 * when the partition is first listed or seen, loaded from its own blob, saved at every cut it
 * changed in, and freed at the cut after the partition left this shard. */
typedef struct tpart {
    nf_trend_counter_t *c;
    int64_t reported_wm;
    bool idle_reported; /* the merger was told it is idle (until it reports a watermark) */
    bool dirty;         /* changed since the last cut */
    bool gone;          /* no longer assigned here: saved, then freed, at the next cut */
    unsigned chunks;    /* chunks of its stored blob (nf_analytics_put_chunked), 0: none */
} tpart_t;

/* A decoded read event waiting for its group (take_read_event). */
typedef struct decoded {
    nf_read_event_t ev;
    nf_id128_t key;     /* of the event id */
    uint16_t kg;        /* the partition */
    uint8_t topic;      /* a settings event's topic (its index in the taxonomy) */
    int64_t written_ms; /* rec_t's */
} decoded_t;
#define GROUP 16

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
    /* analytics.h: the event-id dedup set (of this shard's partitions) and trending counter */
    nf_keyset_t *ids;
    nf_reads_dedup_seen_t ids_seen;
    tpart_t **tp; /* by partition id: its trending counter, NULL if none here */
    size_t ntp;
    int32_t tick_part; /* the partition whose panes send_pane is handing over */
    nf_outbox_t ob;    /* panes and watermarks for the merger a full ring refused */
    nf_timer_t tick;
    read_batch_t *spare; /* emptied batches back from the reads actors */
    unsigned nspare;
    decoded_t group[GROUP];
    unsigned ngroup;
    int64_t group_now; /* the processing time the group's events were taken at */
    size_t mem_next;   /* memory source: next record index */
    bool mem_started, mem_done;
} kin_t;

/* 128-bit key of an event id of n bytes (the dedup set). */
static nf_id128_t event_key(const char *event_id, size_t n)
{
    return nf_hash128(event_id, n, 0x6576656e745f6964ull, 0x4556454e545f4944ull);
}

nf_id128_t nf_reads_event_key(const char *event_id)
{
    return event_key(event_id, strlen(event_id));
}

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

/* One input record, from Kafka or from the memory source. */
typedef struct rec {
    const char *topic;
    int32_t partition;
    int64_t offset;
    const void *payload;
    size_t len;
    int64_t written_ms; /* the Kafka record's timestamp; -1: none (librdkafka's; memory source) */
} rec_t;

/* stage: "decode" or "event_time"; counted by stage. */
static void dead_letter(kin_t *k, const rec_t *m, const char *stage, const char *error)
{
    const char *topic = m->topic;
    char key[320];
    size_t kl = nf_dead_letter_key(key, sizeof key, topic, m->partition, m->offset);
    if (kl >= sizeof key)
        kl = sizeof key - 1;
    nf_jw_reset(&k->jw);
    nf_dead_letter_json(&k->jw, topic, m->partition, m->offset, stage, error, m->payload, m->len,
                        nf_wall_ms());
    if (k->jw.failed ||
        nf_analytics_emit(k->r->an, k->me, NF_TOPIC_DEAD_LETTERS, key, k->jw.buf, k->jw.len) != 0) {
        /* Without memory the record cannot be kept: the job stops rather than lose it. */
        nf_log(NF_LOG_ERROR, "kafka", "cannot record a dead letter (out of memory); stopping",
               NF_LS("topic", topic), NF_LI("partition", m->partition), NF_LI("offset", m->offset),
               NF_LEND);
        nf_runtime_fail(nf_shard_runtime(k->sh));
        return;
    }
    nf_counter_inc(strcmp(stage, "event_time") == 0 ? k->r->m.dead_letters_time
                                                    : k->r->m.dead_letters);
    nf_log(NF_LOG_WARN, "kafka", "record sent to dead-letters", NF_LS("topic", topic),
           NF_LI("partition", m->partition), NF_LI("offset", m->offset), NF_LS("stage", stage),
           NF_LS("error", error), NF_LEND);
}

static void stop_job(kin_t *k, const char *what, int rc)
{
    nf_counter_inc(k->r->m.state_errors);
    nf_log(NF_LOG_ERROR, "kafka", what, NF_LI("errno", -rc), NF_LEND);
    nf_runtime_fail(nf_shard_runtime(k->sh));
}

static void count_group(kin_t *k);
static tpart_t *trend_part(kin_t *k, int32_t partition);
static void take_panes_record(kin_t *k, const rd_kafka_message_t *m);
static int restore_counter(kin_t *k, int32_t partition, tpart_t *tp);

/* A settings event's topic (io/events.h: its name in article_id) by its index in the taxonomy:
 * 0, or -EINVAL with the reason (a name the taxonomy lacks is the producer's error: the event is
 * dead-lettered, not applied to nothing). */
static int setting_topic(const nf_analytics_t *an, decoded_t *g, char *err, size_t errlen)
{
    int t = an->taxonomy ? nf_classify_topic_index(an->taxonomy, g->ev.article_id) : -1;
    if (t >= 0 && t < NF_TOPICS_MAX) {
        g->topic = (uint8_t)t;
        return 0;
    }
    snprintf(err, errlen,
             "field \"topic\": \"%.64s\" is not a topic of the taxonomy (GET /v1/topics lists "
             "them)",
             g->ev.article_id);
    return -EINVAL;
}

/* Decoded events wait here in groups of GROUP, their event-id slots prefetched, so that the
 * dedup set's cache misses overlap (count_group then takes them in order). */
static void take_read_event(kin_t *k, const rec_t *m, int64_t now_ms)
{
    nf_reads_t *r = k->r;
    char err[256];
    decoded_t *g = &k->group[k->ngroup];
    int rc = nf_read_event_decode(m->payload, m->len, r->max_event_bytes, &g->ev, err, sizeof err);
    if (rc != 0) {
        dead_letter(k, m, "decode", err);
        return;
    }
    /* Before the dedup set: a refused event must not burn its id, nor move a watermark. */
    if (nf_read_event_check_time(g->ev.ts_ms, now_ms, r->an->max_future_ms, err, sizeof err) != 0) {
        dead_letter(k, m, "event_time", err);
        return;
    }
    if (nf_read_kind_is_setting(g->ev.kind) && !nf_read_kind_is_source(g->ev.kind) &&
        setting_topic(r->an, g, err, sizeof err) != 0) {
        dead_letter(k, m, "decode", err);
        return;
    }
    g->kg = (uint16_t)m->partition;
    g->written_ms = m->written_ms;
    g->key = event_key(g->ev.event_id, g->ev.event_id_len);
    nf_keyset_prefetch(k->ids, g->kg, g->key);
    k->group_now = now_ms;
    if (++k->ngroup == GROUP)
        count_group(k);
}

/* Whether a read event was older than window + lateness when it was written to Kafka: one
 * such event on a quiet partition would otherwise open windows dated then (analytics.h). */
static bool too_old(const nf_analytics_t *an, const decoded_t *g)
{
    return an->max_age_ms > 0 && g->written_ms >= 0 && g->ev.ts_ms < g->written_ms - an->max_age_ms;
}

/* The event into its partition's trending counter, unless it was too old when written: then
 * it neither counts nor moves the watermark (interest still takes it). */
static void count_trending(kin_t *k, tpart_t *tp, const decoded_t *g, int64_t now_ms)
{
    nf_analytics_t *an = k->r->an;
    const nf_read_event_t *ev = &g->ev;
    if (too_old(an, g)) {
        nf_counter_inc(an->m.old_events);
        return;
    }
    int rc = nf_trend_count(tp->c, g->kg, ev->article_id, ev->article_len, ev->ts_ms, now_ms);
    tp->dirty = true;
    if (rc == 1)
        nf_counter_inc(an->m.late_events);
    else if (rc == 0)
        nf_counter_inc(an->m.counted_events);
    else if (rc == -ENOMEM)
        stop_job(k, "out of memory in the trending counter; stopping the job", rc);
}

/* An event into newsflow_ranking_reads_total, by the variant it names. */
static void count_variant(nf_reads_t *r, const nf_read_event_t *ev)
{
    const nf_variants_t *v = r->variants;
    int i = ev->variant_len ? nf_variants_find(v, ev->variant, ev->variant_len) : (int)v->n;
    nf_counter_inc(r->m.ranking[i < 0 ? v->n + 1 : (unsigned)i][ev->kind]);
}

/* One decoded event: the event-id dedup set, the trending counter, then to its user's shard. */
static void count_read_event(kin_t *k, const decoded_t *g, int64_t now_ms)
{
    nf_reads_t *r = k->r;
    nf_analytics_t *an = r->an;
    const nf_read_event_t *ev = &g->ev;
    /* A repeat of an event id (a producer's retry, a replayed file) changes nothing. */
    int rc = nf_keyset_add(k->ids, g->kg, g->key, now_ms);
    if (rc == 1) {
        nf_counter_inc(an->m.event_duplicates);
        return;
    }
    if (rc < 0) {
        stop_job(k,
                 rc == -EIO
                     ? "reading the event-id dedup set's keys on disk failed; stopping the job"
                     : "out of memory in the event-id dedup set; stopping the job",
                 rc);
        return;
    }
    tpart_t *tp = trend_part(k, g->kg);
    if (!tp)
        return;                        /* the job is stopping (trend_part said why) */
    if (ev->kind == NF_READ_KIND_READ) /* trending counts reads; feedback moves interest only */
        count_trending(k, tp, g, now_ms);
    if (r->variants && !nf_read_kind_is_setting(ev->kind))
        count_variant(r, ev);
    read_item_t it;
    nf_interest_read_init_n(&it.rd, g->kg, ev->user_id, ev->user_len, ev->article_id,
                            ev->article_len, ev->session_id, ev->session_len, ev->ts_ms);
    nf_interest_read_set_kind(&it.rd, ev->kind);
    if (nf_read_kind_is_source(ev->kind)) { /* to the reader's settings, by its source_id */
        it.rd.kind = ev->kind;
        it.rd.article_ok = false; /* article_at: the source_id, whatever it looks like */
    } else if (nf_read_kind_is_setting(ev->kind)) { /* to the reader's settings, by index */
        it.rd.kind = ev->kind;
        it.rd.article = (nf_id128_t){g->topic, 0};
    }
    unsigned dest = nf_route(nf_shard_runtime(k->sh), it.rd.user.hi);
    read_batch_t *b = k->open[dest];
    if (!b && k->spare) {
        b = k->spare;
        k->spare = b->next;
        k->nspare--;
    } else if (!b) {
        b = malloc(sizeof *b);
        if (!b) {
            nf_log(NF_LOG_ERROR, "kafka", "out of memory batching read events; stopping", NF_LEND);
            nf_runtime_fail(nf_shard_runtime(k->sh));
            return;
        }
    }
    if (!k->open[dest]) {
        b->n = 0;
        b->text_len = 0;
        b->origin = k->me;
        b->dest = dest;
        k->open[dest] = b;
    }
    it.user_at = batch_text(b, ev->user_id, ev->user_len);
    it.article_at = it.rd.article_ok ? 0 : batch_text(b, ev->article_id, ev->article_len);
    b->items[b->n++] = it;
    nf_counter_inc(r->m.events);
    if (b->n == BATCH_MAX) {
        k->open[dest] = NULL;
        ship(k, b);
    }
}

static void count_group(kin_t *k)
{
    for (unsigned i = 0; i < k->ngroup; i++)
        count_read_event(k, &k->group[i], k->group_now);
    k->ngroup = 0;
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
        nf_runtime_fail(nf_shard_runtime(k->sh));
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
static void take_source(kin_t *k, const rd_kafka_message_t *km, const rec_t *m)
{
    nf_reads_t *r = k->r;
    char err[512];
    nf_source_record_t rec;
    int rc = nf_source_record_decode(km->key, km->key ? km->key_len : 0, km->payload,
                                     km->payload ? km->len : 0, r->max_event_bytes, &rec, err,
                                     sizeof err);
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
        nf_runtime_fail(nf_shard_runtime(k->sh));
        return;
    }
    if (r->ingest->in_partitions && route.set) {
        /* The partition is the source's key group; its host's partition is where it belongs
         * (several partitions for one host split its politeness between processes). */
        route.set->part = km->partition;
        int np = nf_kafka_input_partitions(r->kafka, NF_INPUT_SOURCES);
        if (np > 0 && nf_sources_partition(route.set->host, np) != km->partition) {
            nf_counter_inc(r->ingest->m.sources_misplaced);
            nf_log(NF_LOG_WARN, "kafka",
                   "a sources record is not in its host's partition (Kafka's default "
                   "partitioner for the host as key: murmur2(host) % partitions)",
                   NF_LS("source_id", rec.source_id), NF_LS("host", route.set->host),
                   NF_LI("partition", km->partition),
                   NF_LI("host_partition", nf_sources_partition(route.set->host, np)), NF_LEND);
        }
    }
    for (unsigned d = 0; d < k->nshards; d++) {
        nf_msg_t msg;
        nf_ingest_source_msg(r->ingest, &route, d, &msg);
        ship_msg(k, d, &msg);
    }
}

/* The end of a turn (or the stop): the decoded group, then the open batches, go out. */
static void flush_open(kin_t *k)
{
    count_group(k);
    for (unsigned d = 0; d < k->nshards; d++)
        if (k->open[d]) {
            read_batch_t *b = k->open[d];
            k->open[d] = NULL;
            ship(k, b);
        }
}

/* Records are decoded in order: start loading the one PREFETCH_AHEAD on (its first 256 bytes,
 * all a read event has on the decoder's fast path), so the decoder does not wait for memory. */
#define PREFETCH_AHEAD 4
static inline void prefetch_record(const void *payload, size_t len)
{
    const char *p = payload;
    size_t n = len < 256 ? len : 256;
    for (size_t off = 0; off < n; off += 64)
        __builtin_prefetch(p + off);
    if (n)
        __builtin_prefetch(p + n - 1); /* the line the last byte is on, if the start was not */
}

/* The memory source (reads.h): this shard's records, CONSUME_MAX per turn. */
static void consume_memory(kin_t *k)
{
    nf_reads_t *r = k->r;
    size_t taken = 0, i = k->mem_next;
    int64_t now = nf_wall_ms();
    unsigned parts = r->mem.partitions ? r->mem.partitions : 1;
    for (; i < r->mem.n && taken < CONSUME_MAX; i++) {
        int32_t p = (int32_t)(r->mem.part ? r->mem.part[i] % parts : i % parts);
        if ((unsigned)p % k->nshards != k->me)
            continue;
        if (i + PREFETCH_AHEAD < r->mem.n)
            prefetch_record(r->mem.buf + r->mem.off[i + PREFETCH_AHEAD],
                            r->mem.len[i + PREFETCH_AHEAD]);
        rec_t rc = {"read-events", p, (int64_t)(i / parts), r->mem.buf + r->mem.off[i],
                    r->mem.len[i], -1};
        take_read_event(k, &rc, now);
        taken++;
    }
    k->mem_next = i;
    flush_open(k);
    drain_held(k);
    if (i < r->mem.n) {
        nf_actor_schedule(k->sh, r->in_actor);
    } else if (!k->mem_done) {
        k->mem_done = true;
        atomic_fetch_add(&r->mem_shards_done, 1);
    }
}

static void consume_turn(kin_t *k)
{
    nf_reads_t *r = k->r;
    if (k->cut_paused || k->kafka_paused || nf_shard_stopping(k->sh))
        return;
    if (!r->kafka) {
        if (r->mem.n && k->mem_started && !k->hhead)
            consume_memory(k);
        return;
    }
    rd_kafka_message_t *msgs[CONSUME_MAX];
    size_t n = nf_kafka_shard_consume(r->kafka, k->me, msgs, CONSUME_MAX);
    int64_t now = nf_wall_ms();
    for (size_t i = 0; i < n; i++) {
        rd_kafka_message_t *m = msgs[i];
        if (i + PREFETCH_AHEAD < n && !msgs[i + PREFETCH_AHEAD]->err)
            prefetch_record(msgs[i + PREFETCH_AHEAD]->payload, msgs[i + PREFETCH_AHEAD]->len);
        if (m->err) {
            if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                nf_log(NF_LOG_WARN, "kafka", "consumer error",
                       NF_LS("error", rd_kafka_message_errstr(m)), NF_LEND);
            rd_kafka_message_destroy(m);
            continue;
        }
        int in = nf_kafka_input_of(r->kafka, rd_kafka_topic_name(m->rkt));
        if (in >= 0 && !nf_kafka_owns(r->kafka, (nf_input_t)in, m->partition)) {
            /* revoked (or being revoked): its next owner reads it from the committed position */
            nf_counter_inc(r->m.revoked_dropped);
            rd_kafka_message_destroy(m);
            continue;
        }
        nf_counter_inc(r->m.records);
        rec_t rc = {rd_kafka_topic_name(m->rkt),        m->partition, m->offset, m->payload, m->len,
                    rd_kafka_message_timestamp(m, NULL)};
        if (in == NF_INPUT_READ_EVENTS)
            take_read_event(k, &rc, now);
        else if (in == NF_INPUT_SOURCES)
            take_source(k, m, &rc);
        else if (in == NF_INPUT_TRENDING_PANES)
            take_panes_record(k, m);
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
    return k->hhead != NULL || k->shead != NULL || nf_outbox_drain(sh, &k->ob) != 0;
}

/* NF_KIND_TRENDING key of a partition's counter: "C" + partition (2 bytes BE, the key group). */
static void counter_key(int32_t partition, unsigned char key[3])
{
    key[0] = 'C';
    key[1] = (unsigned char)((uint32_t)partition >> 8);
    key[2] = (unsigned char)partition;
}

/* Positions are in the epoch (nf_epoch_set_offset); the state is the event-id set and the
 * trending counters that changed since the last cut (one blob per partition). A counter whose
 * partition left this shard is saved a last time and freed. */
static void kin_snapshot(nf_shard_t *sh, void *self, nf_store_batch_t *b, uint64_t epoch)
{
    kin_t *k = self;
    (void)sh;
    /* By reference: the keys go into b after the resume (kin_snapshot_more). */
    if (nf_keyset_freeze(k->ids, b, epoch) < 0) /* b is marked failed: no commit */
        stop_job(k, "out of memory writing the event-id set into the epoch; stopping", -ENOMEM);
    for (size_t p = 0; p < k->ntp; p++) {
        tpart_t *tp = k->tp[p];
        if (!tp || !(tp->dirty || tp->gone))
            continue;
        if (b && tp->dirty) {
            void *blob = NULL;
            size_t len = 0;
            unsigned char key[3];
            counter_key((int32_t)p, key);
            int rc = nf_trend_counter_save(tp->c, &blob, &len);
            if (rc == 0)
                rc = nf_analytics_put_chunked(b, key, sizeof key, blob, len, tp->chunks,
                                              &tp->chunks);
            free(blob);
            if (rc != 0) {
                stop_job(k,
                         "cannot save a trending counter (out of memory, or over 64 GiB); stopping",
                         rc);
                return;
            }
        }
        tp->dirty = false;
        if (tp->gone) {
            nf_trend_counter_free(tp->c);
            free(tp);
            k->tp[p] = NULL;
        }
    }
}

static void held_drop(void *ctx, const nf_msg_t *m)
{
    (void)ctx;
    if (m->kind == NF_MSG_PANE)
        free(m->body.ptr);
}

/* panes_topic (analytics.h): a pane, watermark or idle mark is a record of trending-panes in
 * this shard's epoch outputs (with the counter's state of the same epoch), key = the partition
 * (2 bytes BE), value = [type: 'P' pane, 'W' watermark, 'I' idle][int64 LE: pane start or
 * watermark][the pane's summary]. The process that merges reads them back (take_panes_record). */
enum { PANES_REC_HEAD = 9 };

static int emit_panes_record(kin_t *k, int32_t part, char type, int64_t v, const void *blob,
                             size_t len)
{
    unsigned char *buf = malloc(PANES_REC_HEAD + len);
    if (!buf)
        return -ENOMEM;
    buf[0] = (unsigned char)type;
    nf_put_le64(buf + 1, (uint64_t)v);
    if (len)
        memcpy(buf + PANES_REC_HEAD, blob, len);
    char key[2] = {(char)(part >> 8), (char)part};
    int rc = nf_epoch_emit(k->r->epoch, k->me, NF_TOPIC_TRENDING_PANES, key, sizeof key,
                           (const char *)buf, PANES_REC_HEAD + len);
    free(buf);
    return rc;
}

static int send_pane(void *ctx, int64_t pane_start, const void *blob, size_t len)
{
    kin_t *k = ctx;
    if (k->r->an->panes_topic)
        return emit_panes_record(k, k->tick_part, 'P', pane_start, blob, len);
    nf_pane_msg_t *p = malloc(sizeof *p + len);
    if (!p)
        return -ENOMEM;
    p->partition = k->tick_part;
    p->pane_start = pane_start;
    p->len = len;
    memcpy(p->blob, blob, len);
    nf_msg_t m = {.actor = (uint16_t)k->r->an->trend_actor, .kind = NF_MSG_PANE};
    m.body.ptr = p;
    if (nf_outbox_send(k->sh, &k->ob, 0, &m) != 0) {
        free(p);
        return -ENOMEM;
    }
    return 0;
}

/* The event ids of the partitions this shard consumes (kafka.c: partition p goes to shard
 * p % shards, as does the memory source's). */
static bool owns_partition(uint16_t kg, nf_id128_t key, void *ctx)
{
    const kin_t *k = ctx;
    (void)key;
    return kg % k->nshards == k->me;
}

static void load_ids(kin_t *k)
{
    char err[512];
    int64_t t0 = nf_wall_ms();
    long n = nf_keyset_load(k->ids, owns_partition, k, t0, err, sizeof err);
    if (n < 0) {
        nf_log(NF_LOG_ERROR, "state", "the event-id dedup set does not load; stopping",
               NF_LI("shard", k->me), NF_LS("error", n == -ENOMEM ? "out of memory" : err),
               NF_LEND);
        nf_runtime_fail(nf_shard_runtime(k->sh));
        return;
    }
    nf_log(NF_LOG_INFO, "state", "event-id dedup set loaded", NF_LI("shard", k->me),
           NF_LI("keys", n), NF_LI("ms", nf_wall_ms() - t0), NF_LEND);
}

void nf_reads_dedup_report(const nf_reads_dedup_m_t *m, nf_reads_dedup_seen_t *seen, bool over,
                           const char *set, unsigned shard, const nf_keyset_stats_t *st)
{
    nf_gauge_set(m->keys, (int64_t)st->keys);
    nf_gauge_set(m->bytes, (int64_t)st->bytes);
    nf_gauge_set(m->disk_keys, (int64_t)st->cold_keys);
    nf_gauge_set(m->disk_bytes, (int64_t)st->disk_bytes);
    nf_gauge_set(m->unfiltered, (int64_t)st->unfiltered);
    nf_keyset_stats_t *r = &seen->reported;
    nf_counter_add(m->disk_lookups, st->cold_lookups - r->cold_lookups);
    nf_counter_add(m->disk_reads, st->cold_reads - r->cold_reads);
    nf_counter_add(m->disk_hits, st->cold_hits - r->cold_hits);
    nf_counter_add(m->spill_failures, st->spill_failures - r->spill_failures);
    *r = *st;
    if (over && !seen->over)
        nf_log(
            NF_LOG_WARN, "state",
            st->spill_failures
                ? "a dedup set is over state.budget_mb: its keys could not be written to disk "
                  "(see newsflow_read_dedup_spill_failures_total; is state.dir full?)"
            : st->spill_deferred
                ? "a dedup set is over state.budget_mb: one epoch's new keys alone fill its ring "
                  "(a fifth of the budget, 40 bytes a key), and keys move to disk only once an "
                  "epoch wrote them; raise the budget or shorten checkpoint.interval_ms"
                : "a dedup set is over state.budget_mb: it cannot evict, and without a state.dir "
                  "it cannot move keys to disk; set state.dir, lower its TTL or raise the budget",
            NF_LS("set", set), NF_LI("shard", shard), NF_LI("keys", (int64_t)st->keys),
            NF_LI("bytes", (int64_t)st->bytes), NF_LEND);
    seen->over = over;
}

/* A dedup set's series (nf_reads_dedup_m_t) under {set="<set>"}. */
static void dedup_metrics(nf_reads_dedup_m_t *m, const char *set)
{
    char l[64];
    snprintf(l, sizeof l, "set=\"%s\"", set);
    nf_metrics_gauge("newsflow_read_dedup_keys",
                     "Keys in a read-path dedup set, in memory and on disk, until they expire.", l,
                     0, &m->keys);
    nf_metrics_gauge("newsflow_read_dedup_bytes",
                     "Memory of a read-path dedup set (its ring, and the filter and page index "
                     "of its keys on disk).",
                     l, 0, &m->bytes);
    nf_metrics_gauge("newsflow_read_dedup_disk_keys",
                     "Keys of a read-path dedup set moved to disk (state.dir) past its budget.", l,
                     0, &m->disk_keys);
    nf_metrics_gauge("newsflow_read_dedup_disk_bytes",
                     "Disk used by a read-path dedup set's keys past its budget.", l, 0,
                     &m->disk_bytes);
    nf_metrics_gauge("newsflow_read_dedup_unfiltered_keys",
                     "Keys on disk past the room of the set's filter: every lookup reads a "
                     "page of their runs (raise state.budget_mb).",
                     l, 0, &m->unfiltered);
    nf_metrics_counter("newsflow_read_dedup_disk_lookups_total",
                       "Lookups of a dedup set that missed its ring and asked the disk tier "
                       "(most are answered by its filter without a read).",
                       l, 0, &m->disk_lookups);
    nf_metrics_counter("newsflow_read_dedup_disk_reads_total",
                       "Pages a dedup set read from disk for its lookups.", l, 0, &m->disk_reads);
    nf_metrics_counter("newsflow_read_dedup_disk_hits_total",
                       "Lookups of a dedup set answered present from disk.", l, 0, &m->disk_hits);
    nf_metrics_counter("newsflow_read_dedup_spill_failures_total",
                       "Moves of a dedup set's keys to disk that failed (the set grew past its "
                       "budget instead; nothing is lost).",
                       l, 0, &m->spill_failures);
}

/* The counter of a partition, created (and loaded from its blob, wherever it was saved) on
 * first sight. NULL: the job is stopping (out of memory, unreadable state, or a partition id
 * the key group cannot hold). */
static tpart_t *trend_part(kin_t *k, int32_t partition)
{
    if ((size_t)partition < k->ntp && k->tp[partition]) {
        k->tp[partition]->gone = false; /* listed or seen again before the cut freed it */
        return k->tp[partition];
    }
    if (partition < 0 || partition > UINT16_MAX) {
        stop_job(k, "a read-events partition id does not fit a key group (0..65535); stopping",
                 -ERANGE);
        return NULL;
    }
    if ((size_t)partition >= k->ntp) {
        size_t n = k->ntp ? k->ntp : 16;
        while (n <= (size_t)partition)
            n *= 2;
        tpart_t **v = realloc(k->tp, n * sizeof *v);
        if (!v) {
            stop_job(k, "out of memory in the trending counters; stopping the job", -ENOMEM);
            return NULL;
        }
        memset(v + k->ntp, 0, (n - k->ntp) * sizeof *v);
        k->tp = v;
        k->ntp = n;
    }
    tpart_t *tp = calloc(1, sizeof *tp);
    if (!tp || !(tp->c = nf_trend_counter_new(&k->r->an->trend))) {
        free(tp);
        stop_job(k, "out of memory in the trending counters; stopping the job", -ENOMEM);
        return NULL;
    }
    tp->reported_wm = INT64_MIN;
    k->tp[partition] = tp;
    if (k->r->store && restore_counter(k, partition, tp) != 0) {
        k->tp[partition] = NULL;
        nf_trend_counter_free(tp->c);
        free(tp);
        return NULL;
    }
    return tp;
}

/* The read-events partitions this shard consumes now, sorted (up to 1024). */
static size_t shard_partitions(kin_t *k, int32_t *parts, size_t cap)
{
    size_t np = 0;
    if (k->r->kafka) {
        np = nf_kafka_shard_partitions(k->r->kafka, k->me, NF_INPUT_READ_EVENTS, parts, cap);
        np = np > cap ? cap : np;
        /* not one being revoked: its counter was saved by the revoke's epoch and let go */
        size_t kept = 0;
        for (size_t i = 0; i < np; i++)
            if (nf_kafka_owns(k->r->kafka, NF_INPUT_READ_EVENTS, parts[i]))
                parts[kept++] = parts[i];
        return kept;
    }
    for (uint32_t p = 0; p < k->r->mem.partitions && np < cap; p++)
        if (p % k->nshards == k->me)
            parts[np++] = (int32_t)p;
    return np;
}

/* One partition's turn of the tick: its final panes, then its watermark (or that it is idle),
 * to the merger. 0, or -errno (the job stops). */
static int tick_partition(kin_t *k, int32_t part, tpart_t *tp, int64_t now)
{
    int64_t wm = INT64_MIN;
    k->tick_part = part;
    int rc = nf_trend_counter_take(tp->c, now, send_pane, k, &wm);
    if (rc < 0)
        return rc;
    if (rc > 0)
        tp->dirty = true;
    bool idle = nf_trend_counter_idle(tp->c, now);
    nf_msg_t m = {.actor = (uint16_t)k->r->an->trend_actor};
    m.body.u64[0] = (uint64_t)wm;
    m.body.u64[1] = (uint64_t)(uint32_t)part;
    if (idle && (!tp->idle_reported || rc > 0)) {
        m.kind = NF_MSG_IDLE;
    } else if (!idle && wm != INT64_MIN && (wm != tp->reported_wm || rc > 0 || tp->idle_reported)) {
        m.kind = NF_MSG_WATERMARK;
    } else {
        return 0;
    }
    if (k->r->an->panes_topic) {
        int er = emit_panes_record(k, part, m.kind == NF_MSG_IDLE ? 'I' : 'W', wm, NULL, 0);
        if (er != 0)
            return er;
    } else if (nf_outbox_send(k->sh, &k->ob, 0, &m) != 0) {
        return -ENOMEM;
    }
    tp->idle_reported = idle;
    tp->reported_wm = wm;
    return 0;
}

/* A record of trending-panes (panes_topic; this process merges): to the merger on shard 0 as
 * the message the counter would have sent it in one process. A record that does not decode is
 * not ours to drop silently: the job stops (only this code writes the topic). */
/* An article record of the one-partition topic (crawl's send_blob in a consumer group): to the
 * dedup actor of the shard that owns its id, as crawl sends it in one process. */
static void take_article_record(kin_t *k, const rd_kafka_message_t *m)
{
    char err[256];
    nf_article_blob_t *b =
        k->r->ingest ? nf_article_blob_decode(m->payload, m->len, err, sizeof err) : NULL;
    if (!b) {
        nf_log(NF_LOG_ERROR, "dedup", "an article record does not decode; stopping",
               NF_LS("error", k->r->ingest ? err : "no dedup actor in this job"),
               NF_LI("partition", m->partition), NF_LI("offset", m->offset), NF_LEND);
        nf_runtime_fail(nf_shard_runtime(k->sh));
        return;
    }
    nf_msg_t msg = {
        .actor = (uint16_t)k->r->ingest->dedup_actor, .kind = NF_MSG_ARTICLE, .key = b->id.hi};
    msg.body.ptr = b;
    unsigned dst = nf_route(nf_shard_runtime(k->sh), b->id.hi);
    if (nf_outbox_send(k->sh, &k->ob, dst, &msg) != 0) {
        free(b);
        stop_job(k, "out of memory handing an article to dedup; stopping the job", -ENOMEM);
    }
}

static void take_panes_record(kin_t *k, const rd_kafka_message_t *m)
{
    const unsigned char *v = m->payload;
    const unsigned char *key = m->key;
    if (v && m->len > 0 && v[0] == 'A') {
        take_article_record(k, m);
        return;
    }
    if (!v || m->len < PANES_REC_HEAD || !key || m->key_len != 2 ||
        (v[0] != 'P' && v[0] != 'W' && v[0] != 'I')) {
        nf_log(NF_LOG_ERROR, "trending", "a trending-panes record does not decode; stopping",
               NF_LI("partition", m->partition), NF_LI("offset", m->offset), NF_LI("bytes", m->len),
               NF_LEND);
        nf_runtime_fail(nf_shard_runtime(k->sh));
        return;
    }
    int32_t part = (int32_t)(key[0] << 8 | key[1]);
    int64_t x = (int64_t)nf_get_le64(v + 1);
    nf_msg_t msg = {.actor = (uint16_t)k->r->an->trend_actor};
    if (v[0] == 'P') {
        size_t len = m->len - PANES_REC_HEAD;
        nf_pane_msg_t *p = malloc(sizeof *p + len);
        if (!p) {
            stop_job(k, "out of memory reading a trending pane; stopping the job", -ENOMEM);
            return;
        }
        p->partition = part;
        p->pane_start = x;
        p->len = len;
        memcpy(p->blob, v + PANES_REC_HEAD, len);
        msg.kind = NF_MSG_PANE;
        msg.body.ptr = p;
    } else {
        msg.kind = v[0] == 'W' ? NF_MSG_WATERMARK : NF_MSG_IDLE;
        msg.body.u64[0] = (uint64_t)x;
        msg.body.u64[1] = (uint64_t)(uint32_t)part;
    }
    if (nf_outbox_send(k->sh, &k->ob, 0, &msg) != 0) {
        if (msg.kind == NF_MSG_PANE)
            free(msg.body.ptr);
        stop_job(k, "out of memory handing a trending pane over; stopping the job", -ENOMEM);
    }
}

/* Every 250 ms, for each partition's counter: its final panes, then its watermark, to the merger
 * (shard 0). Not during a cut: a pane taken after this shard's snapshot but merged before the
 * merger's would be in both. */
static void on_tick(nf_shard_t *sh, nf_timer_t *t, void *arg)
{
    kin_t *k = arg;
    (void)t;
    (void)sh;
    if (k->cut_paused)
        return;
    int64_t now = nf_wall_ms();
    /* Assigned partitions hold the watermark back from the start, not from their first event:
     * otherwise a partition consumed later than the others would find its panes taken. A
     * counter whose partition is no longer listed is saved and freed at the next cut. */
    int32_t parts[1024];
    size_t np = shard_partitions(k, parts, 1024);
    for (size_t p = 0; p < k->ntp; p++)
        if (k->tp[p])
            k->tp[p]->gone = true;
    for (size_t i = 0; i < np; i++) {
        tpart_t *tp = trend_part(k, parts[i]);
        if (!tp)
            return;
        if (nf_trend_counter_expect(tp->c, &parts[i], 1, now) != 0) {
            stop_job(k, "out of memory in the trending counter; stopping the job", -ENOMEM);
            return;
        }
    }
    nf_trend_counter_stats_t sum = {0};
    int64_t lag_wm = INT64_MAX;
    for (size_t p = 0; p < k->ntp; p++) {
        tpart_t *tp = k->tp[p];
        if (!tp)
            continue;
        if (!tp->gone) {
            int rc = tick_partition(k, (int32_t)p, tp, now);
            if (rc < 0) {
                stop_job(k, "out of memory handing trending panes over; stopping the job", rc);
                return;
            }
            if (!tp->idle_reported && tp->reported_wm != INT64_MIN && tp->reported_wm < lag_wm)
                lag_wm = tp->reported_wm;
        }
        nf_trend_counter_stats_t cs;
        nf_trend_counter_stats(tp->c, &cs);
        sum.open_panes += cs.open_panes;
        sum.bytes += cs.bytes;
    }
    nf_keyset_expire(k->ids, now, 1u << 16); /* adds expire as they go; this is for idle sets */
    nf_keyset_stats_t ks;
    nf_keyset_stats(k->ids, &ks);
    nf_reads_dedup_report(&k->r->m.ids_m, &k->ids_seen, nf_keyset_over_budget(k->ids), "event_ids",
                          k->me, &ks);
    nf_gauge_set(k->r->an->m.trend_open_panes, (int64_t)sum.open_panes);
    nf_gauge_set(k->r->an->m.trend_bytes, (int64_t)sum.bytes);
    /* A shard whose partitions are all idle holds no window back: 0, not the lag of the last
     * watermark it reported (one old event on an otherwise idle partition kept the gauge at a
     * week, and NewsflowTrendingStale firing, while trending was current). */
    nf_gauge_set(k->r->an->m.trend_watermark_lag, lag_wm != INT64_MAX ? (now - lag_wm) / 1000 : 0);
    /* The trending SLO's sample: every tick of a shard that counts read-events partitions. */
    if (np)
        nf_histogram_observe(k->r->an->m.trend_freshness, lag_wm != INT64_MAX && now > lag_wm
                                                              ? (double)(now - lag_wm) / 1000
                                                              : 0);
}

/* Loads a partition's counter from its blob, if it has one. 0, or -errno (the job stops). */
static int restore_counter(kin_t *k, int32_t partition, tpart_t *tp)
{
    unsigned char key[3];
    counter_key(partition, key);
    void *blob = NULL;
    size_t len = 0;
    char err[256] = "";
    int rc = nf_analytics_get_chunked(k->r->store, key, sizeof key, &blob, &len, &tp->chunks, err,
                                      sizeof err);
    if (rc == 1) {
        rc = nf_trend_counter_load(tp->c, blob, len);
        free(blob);
        if (rc == 0 && k->r->an->max_future_ms > 0) {
            int64_t now = nf_wall_ms();
            if (nf_trend_counter_clamp(tp->c, now + k->r->an->max_future_ms, now,
                                       nf_analytics_trend_fixed, k->r->an) > 0)
                tp->dirty = true;
        }
        if (rc == 0) {
            nf_trend_counter_stats_t cs;
            nf_trend_counter_stats(tp->c, &cs);
            nf_log(NF_LOG_DEBUG, "trending", "counter restored", NF_LI("shard", k->me),
                   NF_LI("partition", partition), NF_LI("bytes", (int64_t)len),
                   NF_LI("open_panes", (int64_t)cs.open_panes), NF_LEND);
        }
    }
    if (rc < 0) {
        nf_log(NF_LOG_ERROR, "trending",
               "the stored trending counter does not load (unreadable, corrupt, or saved with "
               "other trending options); stopping",
               NF_LI("shard", k->me), NF_LI("partition", partition), NF_LI("errno", -rc),
               NF_LS("error", err), NF_LEND);
        nf_counter_inc(k->r->m.state_errors);
        nf_runtime_fail(nf_shard_runtime(k->sh));
        return rc;
    }
    return 0;
}

static void kin_cut_resume(nf_shard_t *sh, void *self)
{
    kin_t *k = self;
    k->cut_paused = false;
    nf_actor_schedule(sh, k->r->in_actor);
}

/* Key groups (read-events partitions) as a set, for the keysets' and kstates' group calls. */
typedef struct kg_set {
    bool in[65536];
} kg_set_t;

static bool kg_match(uint16_t kg, nf_id128_t key, void *ctx)
{
    (void)key;
    return ((const kg_set_t *)ctx)->in[kg];
}

/* A rebalance (epoch.h): this shard's event ids of gained partitions come from the store (where
 * the changelog restore put them); those of lost ones, committed, leave memory. */
static void kin_partitions(nf_shard_t *sh, void *self, nf_input_t in, const int32_t *parts,
                           size_t n, bool gained)
{
    kin_t *k = self;
    if (in != NF_INPUT_READ_EVENTS)
        return;
    int64_t now = nf_wall_ms();
    char err[512] = "";
    long r;
    if (gained) {
        uint16_t kgs[NF_EPOCH_MAX_PARTITIONS];
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if ((unsigned)parts[i] % k->nshards == k->me)
                kgs[m++] = (uint16_t)parts[i];
        r = m ? nf_keyset_load_groups(k->ids, kgs, m, owns_partition, k, now, err, sizeof err) : 0;
    } else {
        kg_set_t *set = calloc(1, sizeof *set);
        if (!set) {
            r = -ENOMEM;
        } else {
            for (size_t i = 0; i < n; i++)
                set->in[(uint16_t)parts[i]] = true;
            r = nf_keyset_drop(k->ids, kg_match, set, now);
            free(set);
        }
        /* The revoke's epoch saved each counter as it stood; whatever a tick took from it since
         * is its next owner's to take again from that state. */
        for (size_t i = 0; i < n; i++) {
            size_t p = (size_t)parts[i];
            if (p < k->ntp && k->tp[p]) {
                nf_trend_counter_free(k->tp[p]->c);
                free(k->tp[p]);
                k->tp[p] = NULL;
            }
        }
    }
    if (r < 0) {
        nf_log(NF_LOG_ERROR, "state",
               gained ? "the event ids of gained partitions do not load; stopping"
                      : "cannot let go of the event ids of revoked partitions; stopping",
               NF_LI("shard", k->me), NF_LS("error", r == -ENOMEM ? "out of memory" : err),
               NF_LEND);
        nf_runtime_fail(nf_shard_runtime(sh));
        return;
    }
    if (r > 0)
        nf_log(NF_LOG_INFO, "state", gained ? "event ids loaded" : "event ids let go",
               NF_LI("shard", k->me), NF_LI("keys", r), NF_LEND);
}

/* The event ids of the cut, a slice at a time between the shard's messages. */
static bool kin_snapshot_more(nf_shard_t *sh, void *self, size_t max)
{
    kin_t *k = self;
    (void)sh;
    long left = nf_keyset_freeze_step(k->ids, max);
    if (left < 0) /* the batch is marked failed: no commit */
        stop_job(k, "out of memory writing the event-id set into the epoch; stopping", -ENOMEM);
    return left <= 0;
}

static const nf_epoch_participant_t kin_part = {.pause = kin_cut_pause,
                                                .busy = kin_busy,
                                                .snapshot = kin_snapshot,
                                                .snapshot_more = kin_snapshot_more,
                                                .resume = kin_cut_resume,
                                                .partitions = kin_partitions};

static void kin_fini(nf_shard_t *sh, void *self);

/* The event-id dedup set and the Kafka queue's watch of kin_init: 0, or -1 with why in err. */
static int kin_state(kin_t *k, char *err, size_t errlen)
{
    nf_keyset_opts_t io = {.kind = NF_KIND_EVENT_IDS,
                           .ttl_ms = k->r->an->event_id_ttl_ms,
                           .budget_bytes = k->r->budget_bytes,
                           .initial_capacity = 1 << 12,
                           .writer = (uint16_t)k->me,
                           .process = k->r->process_id,
                           .spill_dir = k->r->store ? nf_store_state_dir(k->r->store) : NULL};
    char why[256] = "out of memory";
    io.err = why;
    io.errlen = sizeof why;
    if (!(k->ids = nf_keyset_new(k->r->store, &io))) {
        snprintf(err, errlen, "cannot create the event-id dedup set: %s", why);
        return -1;
    }
    if (k->r->store)
        load_ids(k);
    int fd = k->r->kafka ? nf_kafka_shard_fd(k->r->kafka, k->me) : -1;
    if (fd >= 0 && !(k->watch = nf_watch_add(k->sh, fd, POLLIN, on_queue, k))) {
        snprintf(err, errlen, "out of memory for the watch of the Kafka queue");
        return -1;
    }
    return 0;
}

static int kin_init(nf_shard_t *sh, void *ctx, void **self, char *err, size_t errlen)
{
    kin_t *k = calloc(1, sizeof *k);
    if (!k) {
        snprintf(err, errlen, "out of memory for the Kafka reader (kafka_in)");
        return -1;
    }
    k->r = ctx;
    k->sh = sh;
    k->me = nf_shard_index(sh);
    k->nshards = nf_runtime_shard_count(nf_shard_runtime(sh));
    nf_jw_init(&k->jw);
    nf_timer_init(&k->tick, on_tick, k);
    int r = kin_state(k, err, errlen);
    if (r == 0 && k->r->epoch && (r = nf_epoch_participant_add(k->r->epoch, sh, &kin_part, k)))
        snprintf(err, errlen, "kafka_in cannot take part in the epochs: %s", strerror(-r));
    if (r != 0) {
        kin_fini(sh, k);
        return -1;
    }
    nf_timer_arm(sh, &k->tick, nf_now_ns() + 250000000ull, 250000000ull);
    *self = k;
    return 0;
}

static void kin_handle(nf_shard_t *sh, void *self, const nf_msg_t *m)
{
    kin_t *k = self;
    if (m->kind == NF_MSG_MEM_START) {
        k->mem_started = true;
        consume_turn(k);
        return;
    }
    if (m->kind == MSG_BATCH_BACK) {
        read_batch_t *b = m->body.ptr;
        if (k->nspare < SPARE_MAX) {
            b->next = k->spare;
            k->spare = b;
            k->nspare++;
        } else {
            free(b);
        }
        return;
    }
    (void)sh;
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
    nf_outbox_drain(sh, &k->ob);
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
    nf_timer_cancel(sh, &k->tick);
    flush_open(k);
    drain_held(k);
    nf_outbox_drain(sh, &k->ob);
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
    while (k->spare) {
        read_batch_t *b = k->spare;
        k->spare = b->next;
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
    nf_outbox_free(&k->ob, held_drop, NULL); /* forced shutdown only: uncommitted */
    nf_keyset_free(k->ids);
    for (size_t p = 0; p < k->ntp; p++)
        if (k->tp[p]) {
            nf_trend_counter_free(k->tp[p]->c);
            free(k->tp[p]);
        }
    free(k->tp);
    free(k);
}

void nf_reads_batch_drop(void *ctx, const nf_msg_t *m)
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
                                       .drop = nf_reads_batch_drop};

/* ================================================================ registration */

/* The metrics of the read-events input (kafka_in) and the interest updates. */
static void reads_metrics(nf_reads_t *r)
{
    nf_metrics_counter("newsflow_kafka_records_total", "Input records consumed.",
                       "stage=\"kafka_in\"", 0, &r->m.records);
    nf_metrics_counter("newsflow_read_events_total",
                       "Valid read events decoded and counted once (a repeat of an event_id "
                       "within its TTL counts in newsflow_read_event_duplicates_total instead).",
                       NULL, 0, &r->m.events);
    nf_metrics_counter("newsflow_kafka_records_revoked_total",
                       "Records of a partition being revoked from this process, dropped "
                       "unprocessed: its next owner reads them from the committed position.",
                       NULL, 0, &r->m.revoked_dropped);
    nf_metrics_counter("newsflow_dead_letters_total",
                       "Input records sent to dead-letters (undecodable or invalid).",
                       "stage=\"decode\"", 0, &r->m.dead_letters);
    nf_metrics_counter("newsflow_dead_letters_total",
                       "Input records sent to dead-letters (undecodable or invalid).",
                       "stage=\"event_time\"", 0, &r->m.dead_letters_time);
    nf_metrics_counter("newsflow_interest_updates_total",
                       "Per-user updates emitted (interest-updates).", NULL, 0, &r->m.updates);
    for (int i = 0; i < NF_EVENT_KIND__COUNT - NF_READ_KIND_FOLLOW; i++) {
        char labels[32];
        snprintf(labels, sizeof labels, "kind=\"%s\"", nf_read_kind_name(NF_READ_KIND_FOLLOW + i));
        nf_metrics_counter(
            "newsflow_reader_settings_total",
            "Readers' settings events applied (engine/follows.h, engine/notify.h), by kind.",
            labels, 0, &r->m.settings[i]);
    }
    nf_metrics_counter("newsflow_muted_sources_evicted_total",
                       "Muted sources forgotten because a reader muted one more than "
                       "engine/follows.h keeps (NF_FOLLOWS_SOURCES_MAX): the oldest goes.",
                       NULL, 0, &r->m.muted_sources_evicted);
    for (unsigned i = 0; r->variants && i < r->variants->n + 2; i++)
        for (int k = 0; k < NF_READ_KIND__COUNT; k++) {
            char labels[96];
            snprintf(labels, sizeof labels, "variant=\"%s\",kind=\"%s\"",
                     nf_variants_label(r->variants, i), nf_read_kind_name(k));
            nf_metrics_counter("newsflow_ranking_reads_total",
                               "Readers' events counted once (reads and feedback), by the ranking "
                               "variant of the feed they came from (their `variant` field; none: "
                               "no variant named, other: a name not configured) and kind. Divided "
                               "by newsflow_ranking_feeds_total: reads per feed served.",
                               labels, 0, &r->m.ranking[i][k]);
        }
    nf_metrics_gauge("newsflow_reader_settings_readers",
                     "Readers with followed or muted topics held in memory (summed over shards).",
                     NULL, 0, &r->m.settings_readers);
    nf_metrics_counter("newsflow_interest_topics_taken_total",
                       "Article topic vectors taken by the shards' interest engines (one per "
                       "shard per vector: dedup's broadcasts and the articles topic's follower).",
                       NULL, 0, &r->m.topics_taken);
    nf_metrics_counter("newsflow_interest_updates_coalesced_total",
                       "Users noted for an update at the epoch's end (interest.coalesce): "
                       "each becomes one interest-updates record however many reads it had.",
                       NULL, 0, &r->m.coalesced);
    nf_metrics_counter("newsflow_kafka_pauses_total",
                       "Times a shard paused its partitions (downstream full).", NULL, 0,
                       &r->m.pauses);
    nf_metrics_counter("newsflow_kafka_resumes_total", "Times a shard resumed its partitions.",
                       NULL, 0, &r->m.resumes);
    nf_metrics_counter("newsflow_state_errors_total", "Keyed state reads or writes that failed.",
                       "kind=\"reads\"", 0, &r->m.state_errors);
    nf_metrics_gauge("newsflow_kafka_held_events",
                     "Decoded events waiting for ring space (per process).", NULL, 0,
                     &r->m.held_events);
    nf_metrics_gauge("newsflow_kafka_paused_shards", "Shards with paused partitions.", NULL, 0,
                     &r->m.paused_shards);
    nf_metrics_gauge("newsflow_state_bytes", "Keyed state held in memory.", "kind=\"reads\"", 0,
                     &r->m.state_bytes);
    nf_metrics_gauge("newsflow_state_entries", "Keyed state entries held in memory.",
                     "kind=\"reads\"", 0, &r->m.state_entries);
    nf_kstate_gauges_register(&r->m.users_mem, NF_KIND_INTEREST);
    dedup_metrics(&r->m.ids_m, "event_ids");
    dedup_metrics(&r->m.seen_m, "seen");
}

int nf_reads_register(nf_runtime_t *rt, nf_reads_t *r)
{
    reads_metrics(r);
    if (!r->an->trend_partitions) { /* the merger's counters: one per read-events partition */
        int np = r->kafka ? nf_kafka_input_partitions(r->kafka, NF_INPUT_READ_EVENTS)
                          : (int)r->mem.partitions;
        r->an->trend_partitions = np > 0 ? (unsigned)np : 1;
    }
    r->in_actor = nf_runtime_register(rt, &kin_ops, r);
    if (r->in_actor < 0)
        return r->in_actor;
    r->reads_actor = nf_runtime_register(rt, &nf_interest_update_ops, r);
    if (r->reads_actor < 0)
        return r->reads_actor;
    r->an->interest_actor = r->reads_actor;
    return 0;
}
