/* httpd_int.h — the parts of the shards' HTTP server (httpd.h) that its two files share: the
 * server, a connection and a request handed to the workers (httpd_workers.c). */
#ifndef NF_RUNTIME_HTTPD_INT_H
#define NF_RUNTIME_HTTPD_INT_H

#include "runtime/admin_req.h"
#include "runtime/http_msg.h"
#include "runtime/httpd.h"
#include "runtime/metrics.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

enum { HTTPD_REPLY = 1 }; /* the message kind of a worker's answer */

enum {
    REFUSED_BAD_REQUEST = 0, /* 400: malformed */
    REFUSED_TOO_LARGE,       /* 413: the body */
    REFUSED_URI_TOO_LONG,    /* 414: the request target */
    REFUSED_HEAD_TOO_LARGE,  /* 431: the request line and headers */
    REFUSED_BUSY,            /* 503: the workers' queue is full */
    REFUSED_CONNECTIONS,     /* a connection closed at once: twice max_connections open */
    REFUSED_DESCRIPTORS,     /* accept failed: no descriptor or memory left */
    REFUSED__N
};

enum { CLOSED_EVICTED = 0, CLOSED_TIMEOUT, CLOSED__N };

typedef struct hshard hshard_t;
typedef struct conn conn_t;

struct conn {
    conn_t *prev, *next; /* the shard's connections, oldest first */
    conn_t *dnext;       /* the shard's deferred list */
    hshard_t *s;
    int fd;
    nf_watch_t *w;
    unsigned events;
    nf_http_parser_t hp;
    char *in; /* bytes read but not yet taken (after a request the shard could not go on from) */
    size_t in_len;
    char *out; /* answers not yet written */
    size_t out_len, out_off, out_cap;
    uint64_t since; /* the connect, or the last answer: a whole request is due within the timeout */
    uint64_t req_ns; /* nf_now_ns when its request was whole (0: none being answered) */
    bool pending;    /* its request is at a worker */
    bool closed;     /* closed while pending: freed when the answer comes back */
    bool close_after, deferred, head;
    bool eof; /* the client has sent all it will (a half-close): answer what came, then close */
};

/* A request at a worker: the message stays in its connection's parser (which takes no more
 * bytes until the answer is back). */
typedef struct httpd_job {
    conn_t *c;
    unsigned shard;
    nf_admin_resp_t resp;
    nf_admin_req_t req;
} httpd_job_t;

struct nf_httpd {
    nf_runtime_t *rt;
    int actor;
    nf_httpd_opts_t o;
    int fd;
    _Atomic int quiescing;
    _Atomic unsigned inflight; /* jobs submitted and not yet handed back */
    /* the workers */
    pthread_t *threads;
    unsigned nthreads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    httpd_job_t **q;
    unsigned qhead, qlen;
    bool stop;
    conn_t *orphans; /* at a worker when their shard ended (linked by next), freed at the end */
    /* metrics */
    nf_counter_t req[NF_ADMIN_NPATHS], worker_req, deferred, refused[REFUSED__N], closed[CLOSED__N];
    nf_gauge_t conns, queued;
};

/* 0, or -1 with a reason in err. */
int httpd_workers_start(nf_httpd_t *h, char *err, size_t errlen);
/* false: the queue is full (the caller answers 503). */
bool httpd_workers_submit(nf_httpd_t *h, httpd_job_t *j);
void httpd_workers_stop(nf_httpd_t *h);

#endif
