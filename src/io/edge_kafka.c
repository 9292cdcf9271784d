/* edge_kafka.c — see edge_kafka.h. */
#include "io/edge_kafka.h"

#include "io/kafka.h"
#include "runtime/log.h"
#include "runtime/timer.h"

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One request's records: the delivery reports count down `left`; the last one wakes the
 * request's thread. Shared by that thread and the poller, under mu. */
typedef struct wait {
    nf_edge_kafka_t *k;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t left, acked;
    char first_err[160];
} wait_t;

struct nf_edge_kafka {
    rd_kafka_t *rk;
    rd_kafka_topic_t *rkt;
    char *topic;
    uint64_t max_in_flight;
    uint32_t delivery_timeout_ms;
    _Atomic uint64_t in_flight;
    /* nf_now_ns of the last acknowledgement and of the last record that was not acknowledged:
     * a broker that just failed a record is not tried again for a delivery timeout (every
     * request would hold an HTTP thread that long, and the readers' routes share them) */
    _Atomic uint64_t last_ok_ns, last_fail_ns;
    pthread_t poller;
    _Atomic bool stopping;
    pthread_mutex_t ready_mu; /* the cached readiness below */
    uint64_t ready_at_ns;
    bool ready;
    char why[256];
};

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk, (void)opaque; /* the client's opaque is for the job's error callback (kafka.c) */
    wait_t *w = m->_private;
    atomic_fetch_sub(&w->k->in_flight, 1);
    atomic_store(m->err ? &w->k->last_fail_ns : &w->k->last_ok_ns, nf_now_ns());
    pthread_mutex_lock(&w->mu);
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR)
        w->acked++;
    else if (!w->first_err[0])
        snprintf(w->first_err, sizeof w->first_err, "%s", rd_kafka_err2str(m->err));
    if (--w->left == 0)
        pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void *poller_main(void *arg)
{
    nf_edge_kafka_t *k = arg;
    while (!atomic_load(&k->stopping))
        rd_kafka_poll(k->rk, 100);
    return NULL;
}

static int set(rd_kafka_conf_t *c, const char *name, const char *value, char *err, size_t errlen)
{
    char rerr[256];
    if (rd_kafka_conf_set(c, name, value, rerr, sizeof rerr) == RD_KAFKA_CONF_OK)
        return 0;
    snprintf(err, errlen, "edge producer: %s=%s: %s", name, value, rerr);
    return -1;
}

static rd_kafka_conf_t *edge_conf(nf_edge_kafka_t *k, const nf_edge_kafka_opts_t *o, char *err,
                                  size_t errlen)
{
    rd_kafka_conf_t *c = nf_kafka_conf_new(o->brokers, o->properties, err, errlen);
    if (!c)
        return NULL;
    char tmo[16], queue[24];
    snprintf(tmo, sizeof tmo, "%u", o->delivery_timeout_ms ? o->delivery_timeout_ms : 10000);
    /* librdkafka's own queue holds at least what the bound lets in, so that QUEUE_FULL means
     * the bound of another client of the same handle, never ours */
    snprintf(queue, sizeof queue, "%llu", (unsigned long long)k->max_in_flight + 1024);
    /* never create the topic by producing to it (with the broker's default partitions) */
    if (set(c, "enable.idempotence", "true", err, errlen) != 0 ||
        set(c, "allow.auto.create.topics", "false", err, errlen) != 0 ||
        set(c, "acks", "all", err, errlen) != 0 ||
        set(c, "message.timeout.ms", tmo, err, errlen) != 0 ||
        set(c, "queue.buffering.max.messages",
            k->max_in_flight + 1024 > 2147483647ull ? "2147483647" : queue, err, errlen) != 0 ||
        set(c, "partitioner", o->partitioner ? o->partitioner : "consistent_random", err, errlen) !=
            0) {
        rd_kafka_conf_destroy(c);
        return NULL;
    }
    rd_kafka_conf_set_dr_msg_cb(c, dr_cb);
    return c;
}

nf_edge_kafka_t *nf_edge_kafka_new(const nf_edge_kafka_opts_t *o, char *err, size_t errlen)
{
    nf_edge_kafka_t *k = calloc(1, sizeof *k);
    if (!k || !(k->topic = strdup(o->topic))) {
        free(k);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    k->max_in_flight = o->max_in_flight ? o->max_in_flight : 100000;
    k->delivery_timeout_ms = o->delivery_timeout_ms ? o->delivery_timeout_ms : 10000;
    pthread_mutex_init(&k->ready_mu, NULL);
    rd_kafka_conf_t *c = edge_conf(k, o, err, errlen);
    char rerr[256];
    if (c && !(k->rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, rerr, sizeof rerr))) {
        snprintf(err, errlen, "edge producer: %s", rerr);
        rd_kafka_conf_destroy(c);
    }
    if (k->rk && !(k->rkt = rd_kafka_topic_new(k->rk, o->topic, NULL)))
        snprintf(err, errlen, "edge producer: topic %s: %s", o->topic,
                 rd_kafka_err2str(rd_kafka_last_error()));
    if (k->rkt && pthread_create(&k->poller, NULL, poller_main, k) != 0) {
        snprintf(err, errlen, "edge producer: cannot start its poller thread");
        rd_kafka_topic_destroy(k->rkt);
        k->rkt = NULL;
    }
    if (!k->rkt) {
        if (k->rk)
            rd_kafka_destroy(k->rk);
        pthread_mutex_destroy(&k->ready_mu);
        free(k->topic);
        free(k);
        return NULL;
    }
    return k;
}

void nf_edge_kafka_free(nf_edge_kafka_t *k)
{
    if (!k)
        return;
    /* every request still waiting gets its delivery reports (the poller keeps serving them;
     * librdkafka fails what it has not delivered within the delivery timeout) */
    rd_kafka_flush(k->rk, (int)k->delivery_timeout_ms + 5000);
    atomic_store(&k->stopping, true);
    pthread_join(k->poller, NULL);
    rd_kafka_topic_destroy(k->rkt);
    rd_kafka_destroy(k->rk);
    pthread_mutex_destroy(&k->ready_mu);
    free(k->topic);
    free(k);
}

/* Takes n records of the in-flight bound, or none. */
static bool take(nf_edge_kafka_t *k, size_t n)
{
    uint64_t cur = atomic_load(&k->in_flight);
    do {
        if (cur + n > k->max_in_flight)
            return false;
    } while (!atomic_compare_exchange_weak(&k->in_flight, &cur, cur + n));
    return true;
}

int nf_edge_kafka_send(nf_edge_kafka_t *k, const nf_edge_rec_t *recs, size_t n, size_t *acked,
                       char *err, size_t errlen)
{
    *acked = 0;
    if (n == 0)
        return NF_EDGE_OK;
    uint64_t now = nf_now_ns(), failed = atomic_load(&k->last_fail_ns);
    if (failed > atomic_load(&k->last_ok_ns) &&
        now - failed < (uint64_t)k->delivery_timeout_ms * 1000000ull) {
        snprintf(err, errlen,
                 "the broker did not acknowledge the last events (%llu ms ago): not tried again "
                 "for edge.delivery_timeout_ms",
                 (unsigned long long)((now - failed) / 1000000ull));
        return NF_EDGE_FAILED;
    }
    if (!take(k, n)) {
        snprintf(err, errlen, "%llu records are waiting for the broker (edge.max_in_flight)",
                 (unsigned long long)atomic_load(&k->in_flight));
        return NF_EDGE_BUSY;
    }
    wait_t w = {.k = k, .left = n};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    size_t produced = 0;
    rd_kafka_resp_err_t perr = RD_KAFKA_RESP_ERR_NO_ERROR;
    for (; produced < n; produced++) {
        const nf_edge_rec_t *r = &recs[produced];
        if (rd_kafka_produce(k->rkt, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY, (void *)r->value,
                             r->len, r->key, r->keylen, &w) != 0) {
            perr = rd_kafka_last_error();
            break;
        }
    }
    pthread_mutex_lock(&w.mu);
    if (produced < n) { /* the rest never reaches the poller: count it off here */
        atomic_fetch_sub(&k->in_flight, n - produced);
        w.left -= n - produced;
        snprintf(w.first_err, sizeof w.first_err, "%s", rd_kafka_err2str(perr));
    }
    while (w.left > 0) /* bounded: every record gets a report within message.timeout.ms */
        pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    *acked = w.acked;
    if (w.acked == n)
        return NF_EDGE_OK;
    snprintf(err, errlen, "%s", w.first_err);
    return produced == 0 && perr == RD_KAFKA_RESP_ERR__QUEUE_FULL ? NF_EDGE_BUSY : NF_EDGE_FAILED;
}

static void check_ready(nf_edge_kafka_t *k)
{
    const struct rd_kafka_metadata *md = NULL;
    char fatal[200];
    k->ready = false;
    if (rd_kafka_fatal_error(k->rk, fatal, sizeof fatal) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        /* an idempotent producer's fatal error: every send fails from now on (restart it) */
        snprintf(k->why, sizeof k->why, "the producer failed for good: %s", fatal);
        return;
    }
    rd_kafka_resp_err_t e = rd_kafka_metadata(k->rk, 0, k->rkt, &md, 2000);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
        snprintf(k->why, sizeof k->why, "no broker answers: %s", rd_kafka_err2str(e));
    else if (md->topic_cnt != 1 || md->topics[0].err != RD_KAFKA_RESP_ERR_NO_ERROR)
        snprintf(k->why, sizeof k->why, "topic %s: %s", k->topic,
                 md->topic_cnt ? rd_kafka_err2str(md->topics[0].err) : "not in the metadata");
    else
        k->ready = true;
    if (md)
        rd_kafka_metadata_destroy(md);
}

bool nf_edge_kafka_ready(nf_edge_kafka_t *k, char *why, size_t whylen)
{
    pthread_mutex_lock(&k->ready_mu);
    uint64_t now = nf_now_ns();
    if (!k->ready_at_ns || now - k->ready_at_ns > 1000000000ull) {
        check_ready(k);
        k->ready_at_ns = nf_now_ns();
    }
    bool ok = k->ready;
    snprintf(why, whylen, "%s", ok ? "" : k->why);
    pthread_mutex_unlock(&k->ready_mu);
    return ok;
}

uint64_t nf_edge_kafka_in_flight(const nf_edge_kafka_t *k)
{
    return atomic_load(&((nf_edge_kafka_t *)k)->in_flight);
}
