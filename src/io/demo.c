/* demo.c — see demo.h. */
#include "io/demo.h"
#include "feed/dates.h"
#include "runtime/log.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TICK_MS   100  /* a batch per tick: the events due since the last one */
#define BATCH_MAX 1000 /* edge.max_batch's default */

struct nf_demo {
    char url[256];
    uint32_t rate, users;
    uint64_t max_events; /* 0 = never stop */
    pthread_t thread;
    atomic_bool stop;
    char (*ids)[33]; /* article ids to read, most read first; NULL: demo-article-N */
    size_t nids;
    uint64_t refused; /* events the edge answered other than 202 for good (said once) */
};

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

/* Appends one event line (NDJSON) to buf; returns the new length. */
static size_t event_line(nf_demo_t *d, uint64_t *rng, uint64_t seq, char *buf, size_t at,
                         size_t cap)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    char ts[40], article[40];
    nf_date_format((int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000, ts, sizeof ts);
    if (d->nids)
        snprintf(article, sizeof article, "%s", d->ids[skewed(rng, (unsigned)d->nids)]);
    else
        snprintf(article, sizeof article, "demo-article-%u", skewed(rng, 50));
    int n = snprintf(buf + at, cap - at,
                     "{\"user_id\":\"demo-user-%u\",\"article_id\":\"%s\",\"session_id\":\"s%u\","
                     "\"ts\":\"%s\"}\n",
                     skewed(rng, d->users), article, (unsigned)(seq / 20), ts);
    return n > 0 && (size_t)n < cap - at ? at + (size_t)n : at;
}

static size_t sink(char *p, size_t size, size_t n, void *arg)
{
    (void)p, (void)arg;
    return size * n;
}

/* POSTs the batch until it is answered: 202 true; 503/429 (the edge cannot take it now) and a
 * server not up yet are tried again, the same bytes (the same event ids: a repeat the job drops);
 * anything else false. */
static bool post(nf_demo_t *d, CURL *c, const char *body, size_t len)
{
    for (unsigned attempt = 0; !atomic_load(&d->stop); attempt++) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
        CURLcode rc = curl_easy_perform(c);
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        if (rc == CURLE_OK && status == 202)
            return true;
        bool again = rc == CURLE_COULDNT_CONNECT || status == 503 || status == 429;
        if (!again || attempt == 100) {
            nf_log(NF_LOG_WARN, "demo", "the HTTP edge did not take a batch of demo reads",
                   NF_LS("url", d->url), NF_LI("status", status),
                   NF_LS("error", rc == CURLE_OK ? "" : curl_easy_strerror(rc)), NF_LEND);
            return false;
        }
        struct timespec pause = {.tv_nsec = 200 * 1000000L};
        nanosleep(&pause, NULL);
    }
    return false;
}

static void *run(void *arg)
{
    nf_demo_t *d = arg;
    uint64_t rng = 0x2545f4914f6cdd1dull ^ (uint64_t)time(NULL);
    CURL *c = curl_easy_init();
    size_t cap = BATCH_MAX * 200;
    char *body = malloc(cap);
    if (!c || !body) {
        nf_log(NF_LOG_WARN, "demo", "demo producer: out of memory", NF_LEND);
        free(body);
        curl_easy_cleanup(c);
        return NULL;
    }
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/x-ndjson");
    curl_easy_setopt(c, CURLOPT_URL, d->url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 30000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    struct timespec start, next;
    clock_gettime(CLOCK_MONOTONIC, &start);
    next = start;
    uint64_t sent = 0;
    while (!atomic_load(&d->stop) && (!d->max_events || sent < d->max_events)) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double elapsed = (double)(now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9;
        uint64_t target = (uint64_t)(elapsed * d->rate) + 1, n = 0;
        uint64_t due = target > sent ? target - sent : 0;
        if (d->max_events && sent + due > d->max_events)
            due = d->max_events - sent;
        size_t len = 0;
        for (; n < due && n < BATCH_MAX; n++)
            len = event_line(d, &rng, sent + n, body, len, cap);
        if (n && !post(d, c, body, len))
            d->refused += n;
        sent += n;
        next.tv_nsec += TICK_MS * 1000000L;
        while (next.tv_nsec >= 1000000000L) {
            next.tv_nsec -= 1000000000L;
            next.tv_sec++;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    }
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    free(body);
    if (d->max_events || d->refused)
        nf_log(d->refused ? NF_LOG_WARN : NF_LOG_INFO, "demo", "demo producer done",
               NF_LI("events", (int64_t)sent), NF_LI("not_taken", (int64_t)d->refused), NF_LEND);
    return NULL;
}

nf_demo_t *nf_demo_start(const char *edge_url, uint32_t per_second, uint32_t users,
                         uint64_t max_events, const char *const *article_ids, size_t nids,
                         char *err, size_t errlen)
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
    snprintf(d->url, sizeof d->url, "%s", edge_url);
    d->rate = per_second ? per_second : 1;
    d->users = users ? users : 1;
    d->max_events = max_events;
    if (pthread_create(&d->thread, NULL, run, d) != 0) {
        snprintf(err, errlen, "demo producer: cannot start its thread");
        free(d->ids);
        free(d);
        return NULL;
    }
    nf_log(NF_LOG_INFO, "demo", "demo reader of articles started: its reads go to the HTTP edge",
           NF_LS("url", edge_url), NF_LI("per_second", d->rate), NF_LI("articles", (int64_t)nids),
           NF_LEND);
    return d;
}

void nf_demo_stop(nf_demo_t *d)
{
    if (!d)
        return;
    atomic_store(&d->stop, true);
    pthread_join(d->thread, NULL);
    free(d->ids);
    free(d);
}
