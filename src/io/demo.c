/* demo.c — see demo.h. */
#include "io/demo.h"
#include "feed/dates.h"
#include "runtime/log.h"

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct nf_demo {
    rd_kafka_t *rk;
    char topic[256];
    uint32_t rate, users;
    uint64_t max_events; /* 0 = never stop */
    pthread_t thread;
    atomic_bool stop;
    char (*ids)[33]; /* article ids to read, most read first; NULL: demo-article-N */
    size_t nids;
    atomic_uint_fast64_t failed; /* events the broker never took (delivery reports) */
};

/* Delivery reports (from rd_kafka_poll, on the demo's thread): an event the broker did not take
 * is one the demo promised and the job will never see — said, not dropped in silence. */
static void delivered(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    nf_demo_t *d = opaque;
    if (!m->err)
        return;
    if (atomic_fetch_add(&d->failed, 1) == 0)
        nf_log(NF_LOG_WARN, "demo", "a demo read event was not delivered",
               NF_LS("error", rd_kafka_err2str(m->err)), NF_LEND);
}

/* A skewed pick in [0, n): the minimum of two uniform draws favours small indices. */
static unsigned skewed(uint64_t *rng, unsigned n)
{
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    unsigned a = (unsigned)(*rng % n);
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    unsigned b = (unsigned)(*rng % n);
    return a < b ? a : b;
}

static void *run(void *arg)
{
    nf_demo_t *d = arg;
    uint64_t rng = 0x2545f4914f6cdd1dull ^ (uint64_t)time(NULL);
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    uint64_t sent = 0;
    while (!atomic_load(&d->stop) && (!d->max_events || sent < d->max_events)) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        char user[32], value[256], ts[40];
        snprintf(user, sizeof user, "demo-user-%u", skewed(&rng, d->users));
        nf_date_format((int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000, ts, sizeof ts);
        char article[40];
        if (d->nids)
            snprintf(article, sizeof article, "%s", d->ids[skewed(&rng, (unsigned)d->nids)]);
        else
            snprintf(article, sizeof article, "demo-article-%u", skewed(&rng, 50));
        int n = snprintf(value, sizeof value,
                         "{\"user_id\":\"%s\",\"article_id\":\"%s\","
                         "\"session_id\":\"s%u\",\"ts\":\"%s\"}",
                         user, article, (unsigned)(sent / 20), ts);
        rd_kafka_resp_err_t e;
        while ((e = rd_kafka_producev(
                    d->rk, RD_KAFKA_V_TOPIC(d->topic), RD_KAFKA_V_KEY(user, strlen(user)),
                    RD_KAFKA_V_VALUE(value, (size_t)n), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                    RD_KAFKA_V_END)) == RD_KAFKA_RESP_ERR__QUEUE_FULL &&
               !atomic_load(&d->stop))
            rd_kafka_poll(d->rk, 100); /* the local queue drains as the broker acknowledges */
        if (e) {
            if (atomic_fetch_add(&d->failed, 1) == 0)
                nf_log(NF_LOG_WARN, "demo", "a demo read event could not be produced",
                       NF_LS("error", rd_kafka_err2str(e)), NF_LEND);
        }
        sent++;
        rd_kafka_poll(d->rk, 0);
        long step = 1000000000L / (long)d->rate;
        next.tv_nsec += step;
        while (next.tv_nsec >= 1000000000L) {
            next.tv_nsec -= 1000000000L;
            next.tv_sec++;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    }
    if (rd_kafka_flush(d->rk, 2000) != RD_KAFKA_RESP_ERR_NO_ERROR)
        nf_log(NF_LOG_WARN, "demo", "demo read events still undelivered at the end",
               NF_LI("outstanding", rd_kafka_outq_len(d->rk)), NF_LEND);
    uint64_t failed = atomic_load(&d->failed);
    if (d->max_events || failed)
        nf_log(failed ? NF_LOG_WARN : NF_LOG_INFO, "demo", "demo producer done",
               NF_LI("events", (int64_t)sent), NF_LI("not_delivered", (int64_t)failed), NF_LEND);
    return NULL;
}

nf_demo_t *nf_demo_start(const char *brokers, const char *topic, const char *partitioner,
                         uint32_t per_second, uint32_t users, uint64_t max_events,
                         const char *const *article_ids, size_t nids, char *err, size_t errlen)
{
    nf_demo_t *d = calloc(1, sizeof *d);
    if (!d || (nids && !(d->ids = calloc(nids, sizeof *d->ids)))) {
        free(d);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < nids; i++)
        snprintf(d->ids[i], sizeof d->ids[i], "%s", article_ids[i]);
    d->nids = nids;
    snprintf(d->topic, sizeof d->topic, "%s", topic);
    d->rate = per_second ? per_second : 1;
    d->users = users ? users : 1;
    d->max_events = max_events;
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    char rerr[256];
    if (rd_kafka_conf_set(c, "bootstrap.servers", brokers, rerr, sizeof rerr) != 0 ||
        rd_kafka_conf_set(c, "partitioner", partitioner, rerr, sizeof rerr) != 0 ||
        rd_kafka_conf_set(c, "enable.idempotence", "true", rerr, sizeof rerr) != 0 ||
        (rd_kafka_conf_set_dr_msg_cb(c, delivered), rd_kafka_conf_set_opaque(c, d), false) ||
        !(d->rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, rerr, sizeof rerr))) {
        snprintf(err, errlen, "demo producer: %s", rerr);
        free(d->ids);
        free(d);
        return NULL;
    }
    if (pthread_create(&d->thread, NULL, run, d) != 0) {
        snprintf(err, errlen, "demo producer: cannot start its thread");
        rd_kafka_destroy(d->rk);
        free(d->ids);
        free(d);
        return NULL;
    }
    nf_log(NF_LOG_INFO, "demo", "demo producer of read events started", NF_LS("topic", topic),
           NF_LI("per_second", d->rate), NF_LI("articles", (int64_t)nids), NF_LEND);
    return d;
}

void nf_demo_stop(nf_demo_t *d)
{
    if (!d)
        return;
    atomic_store(&d->stop, true);
    pthread_join(d->thread, NULL);
    rd_kafka_destroy(d->rk);
    free(d->ids);
    free(d);
}
