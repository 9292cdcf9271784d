/* owners.c — see owners.h. */
#include "serve/owners.h"

#include "runtime/log.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    MAXM = 64, /* members whose URLs are kept; more are known by no URL */
    URL_MAX = 512,
    MAXP = NF_EPOCH_MAX_PARTITIONS,
    DESCRIBE_MS = 2000
};

static const char PREFIX[] = "newsflow serve=";

typedef struct table {
    char url[MAXM][URL_MAX];
    unsigned nm;
    int16_t owner[NF_INPUT__COUNT][MAXP]; /* index into url, -1 unknown */
} table_t;

struct nf_owners {
    nf_owners_opts_t o;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop, kicked, started, start_failed;
    table_t cur;  /* under mu */
    table_t next; /* the thread's */
    nf_counter_t m_describes, m_failures;
    nf_gauge_t m_members;
};

void nf_owners_client_id(const char *url, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s%s", PREFIX, url);
}

static void table_clear(table_t *t)
{
    t->nm = 0;
    memset(t->owner, 0xff, sizeof t->owner);
}

static void on_member(void *arg, const char *client_id, nf_input_t in, int32_t partition)
{
    table_t *t = arg;
    const char *u =
        strncmp(client_id, PREFIX, sizeof PREFIX - 1) == 0 ? client_id + sizeof PREFIX - 1 : "";
    unsigned m = 0;
    while (m < t->nm && strcmp(t->url[m], u) != 0)
        m++;
    if (m == t->nm) {
        if (t->nm == MAXM)
            return;
        snprintf(t->url[t->nm++], URL_MAX, "%s", u);
    }
    if ((unsigned)in < NF_INPUT__COUNT && partition >= 0 && partition < MAXP)
        t->owner[in][partition] = (int16_t)m;
}

static void *owners_main(void *arg)
{
    nf_owners_t *ow = arg;
    unsigned every = ow->o.refresh_ms ? ow->o.refresh_ms : 1000;
    uint64_t last_warn = 0;
    for (;;) {
        table_clear(&ow->next);
        char err[256] = "";
        int r = ow->o.describe(ow->o.arg, DESCRIBE_MS, on_member, &ow->next, err, sizeof err);
        nf_counter_add(ow->m_describes, 1);
        if (r == 0) {
            pthread_mutex_lock(&ow->mu);
            memcpy(&ow->cur, &ow->next, sizeof ow->cur);
            pthread_mutex_unlock(&ow->mu);
            nf_gauge_set(ow->m_members, ow->next.nm);
        } else if (r == -EOPNOTSUPP) {
            nf_counter_add(ow->m_failures, 1);
            nf_log(NF_LOG_WARN, "query",
                   "the Kafka cluster cannot describe consumer groups: keys other processes own "
                   "are answered 503 (no redirect)",
                   NF_LS("error", err), NF_LEND);
            break;
        } else {
            nf_counter_add(ow->m_failures, 1);
            uint64_t now = nf_now_ns();
            if (!last_warn || now - last_warn > 60000000000ull) {
                last_warn = now;
                nf_log(NF_LOG_WARN, "query",
                       "cannot describe the consumer group: redirects to other processes name "
                       "the owners last known (at most one warning a minute)",
                       NF_LS("error", err), NF_LEND);
            }
        }
        pthread_mutex_lock(&ow->mu);
        struct timespec until = nf_deadline_after(CLOCK_REALTIME, every);
        while (!ow->stop && !ow->kicked &&
               pthread_cond_timedwait(&ow->cv, &ow->mu, &until) != ETIMEDOUT)
            ;
        bool stop = ow->stop;
        ow->kicked = false;
        pthread_mutex_unlock(&ow->mu);
        if (stop)
            break;
    }
    return NULL;
}

nf_owners_t *nf_owners_start(const nf_owners_opts_t *o, char *err, size_t errlen)
{
    nf_owners_t *ow = o->describe ? calloc(1, sizeof *ow) : NULL;
    if (!ow) {
        snprintf(err, errlen, "owners: %s", o->describe ? "out of memory" : "no describe hook");
        return NULL;
    }
    ow->o = *o;
    table_clear(&ow->cur);
    pthread_mutex_init(&ow->mu, NULL);
    pthread_cond_init(&ow->cv, NULL);
    nf_metrics_counter("newsflow_query_owner_describes_total",
                       "Descriptions of the consumer group read to find which process owns "
                       "which partition (the query API's redirects).",
                       NULL, 0, &ow->m_describes);
    nf_metrics_counter("newsflow_query_owner_describe_failures_total",
                       "Descriptions of the consumer group that failed (redirects then name the "
                       "owners last known).",
                       NULL, 0, &ow->m_failures);
    nf_metrics_gauge("newsflow_query_owner_members",
                     "Members of the consumer group at the last description.", NULL, 0,
                     &ow->m_members);
    return ow;
}

/* Under mu: the thread, at the first look-up (a process that is never asked for another's key
 * never describes the group). */
static void ensure_started(nf_owners_t *ow)
{
    if (ow->started || ow->start_failed)
        return;
    int r = pthread_create(&ow->thread, NULL, owners_main, ow);
    if (r != 0) {
        ow->start_failed = true;
        nf_log(NF_LOG_WARN, "query",
               "cannot start the thread that finds other processes: keys they own are "
               "answered 503",
               NF_LS("error", strerror(r)), NF_LEND);
        return;
    }
    ow->started = true;
}

void nf_owners_stop(nf_owners_t *ow)
{
    if (!ow)
        return;
    pthread_mutex_lock(&ow->mu);
    ow->stop = true;
    bool started = ow->started;
    pthread_cond_broadcast(&ow->cv);
    pthread_mutex_unlock(&ow->mu);
    if (started)
        pthread_join(ow->thread, NULL);
    pthread_cond_destroy(&ow->cv);
    pthread_mutex_destroy(&ow->mu);
    free(ow);
}

int nf_owners_url(nf_owners_t *ow, nf_input_t in, int32_t partition, char *url, size_t urllen)
{
    if (!ow || (unsigned)in >= NF_INPUT__COUNT || partition < 0 || partition >= MAXP)
        return 0;
    int found = 0;
    pthread_mutex_lock(&ow->mu);
    ensure_started(ow);
    int m = ow->cur.owner[in][partition];
    if (m >= 0 && ow->cur.url[m][0]) {
        snprintf(url, urllen, "%s", ow->cur.url[m]);
        found = 1;
    }
    pthread_mutex_unlock(&ow->mu);
    return found;
}

void nf_owners_kick(nf_owners_t *ow)
{
    if (!ow)
        return;
    pthread_mutex_lock(&ow->mu);
    ensure_started(ow);
    ow->kicked = true;
    pthread_cond_signal(&ow->cv);
    pthread_mutex_unlock(&ow->mu);
}
