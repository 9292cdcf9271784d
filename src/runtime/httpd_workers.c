/* httpd_workers.c — the threads that answer what a shard may not answer on its loop (httpd.h):
 * a bounded queue, the hooks' answer, and the answer posted back to the connection's shard. */
#include "runtime/httpd_int.h"
#include "runtime/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Posts j's answer to its shard; frees it when the runtime has stopped (its connection is then
 * an orphan, freed by nf_httpd_free). */
static void hand_back(nf_httpd_t *h, httpd_job_t *j)
{
    nf_msg_t m = {.actor = (uint16_t)h->actor, .kind = HTTPD_REPLY};
    m.body.ptr = j;
    for (;;) {
        int r = nf_runtime_post(h->rt, j->shard, &m);
        if (r == 0)
            break;
        if (r != -EAGAIN) { /* -ESHUTDOWN */
            if (j->resp.owned)
                free(j->resp.body);
            free(j);
            break;
        }
        struct timespec ms = {0, 1000000}; /* the shard's inbox is full: it is draining it */
        nanosleep(&ms, NULL);
    }
    atomic_fetch_sub(&h->inflight, 1);
}

static void *worker(void *arg)
{
    nf_httpd_t *h = arg;
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (!h->qlen && !h->stop)
            pthread_cond_wait(&h->cv, &h->mu);
        if (!h->qlen)
            break;
        httpd_job_t *j = h->q[h->qhead];
        h->qhead = (h->qhead + 1) % h->o.queue;
        h->qlen--;
        nf_gauge_add(h->queued, -1);
        pthread_mutex_unlock(&h->mu);
        const nf_http_msg_t *m = j->req.msg;
        nf_admin_respond(&h->o.hooks, &j->req, m->method, m->path, m->body, m->body_len, &j->resp);
        nf_counter_inc(h->worker_req);
        hand_back(h, j);
        pthread_mutex_lock(&h->mu);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

int httpd_workers_start(nf_httpd_t *h, char *err, size_t errlen)
{
    h->q = calloc(h->o.queue, sizeof *h->q);
    h->threads = calloc(h->o.workers, sizeof *h->threads);
    if (!h->q || !h->threads) {
        snprintf(err, errlen, "http: out of memory");
        return -1;
    }
    for (; h->nthreads < h->o.workers; h->nthreads++) {
        int r = pthread_create(&h->threads[h->nthreads], NULL, worker, h);
        if (r != 0) {
            snprintf(err, errlen, "http: cannot start worker %u: %s", h->nthreads, strerror(r));
            return -1;
        }
    }
    return 0;
}

bool httpd_workers_submit(nf_httpd_t *h, httpd_job_t *j)
{
    pthread_mutex_lock(&h->mu);
    bool ok = h->qlen < h->o.queue && !h->stop;
    if (ok) {
        h->q[(h->qhead + h->qlen) % h->o.queue] = j;
        h->qlen++;
        atomic_fetch_add(&h->inflight, 1);
        nf_gauge_add(h->queued, 1);
        pthread_cond_signal(&h->cv);
    }
    pthread_mutex_unlock(&h->mu);
    return ok;
}

void httpd_workers_stop(nf_httpd_t *h)
{
    pthread_mutex_lock(&h->mu);
    h->stop = true;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    for (unsigned i = 0; i < h->nthreads; i++)
        pthread_join(h->threads[i], NULL);
    h->nthreads = 0;
    free(h->threads);
    h->threads = NULL;
    free(h->q); /* the workers took every job before they ended */
    h->q = NULL;
}
