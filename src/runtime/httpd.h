/* httpd.h — the public HTTP/1.1 server on the shards' own loops (docs/ARCHITECTURE.md §2,
 * "HTTP on the shards").
 *
 * The admin server (admin.h, libmicrohttpd) binds admin.port at start and answers while the
 * state is restored; once the shards run, it hands its listening socket over
 * (nf_admin_hand_over) and every shard takes connections from it through its io_uring. A
 * shard then reads, parses (http_msg.h), answers and writes each of its connections itself:
 * keep-alive, pipelining (answers in order), no thread per connection and no hop between
 * threads. The same hooks answer as on the admin server (nf_admin_respond), so the routes, the
 * guard and the answers are the same.
 *
 * Which requests a shard answers on its loop: those the hooks' on_loop says neither block nor
 * wait on the shards (the query API's reads of committed views, the page). The others (a POST
 * waiting for the broker's acknowledgement, /healthz calling into every shard, /v1/status,
 * search) go to a few worker threads; the answer comes back to the shard as a message and is
 * written there, in order. A full worker queue is 503 with Retry-After: 1.
 *
 * Queries do not starve the stream: a shard answers at most `budget` requests per loop iteration
 * (the rest wait for the next one, after the actors' messages, timers and I/O have had theirs:
 * newsflow_http_deferred_total); newsflow_http_loop_seconds_total against
 * newsflow_runtime_busy_seconds_total is each side's share of the shards' time.
 *
 * Limits: the request line and headers (max_head: 431), the body (hooks.max_body: 413), a whole
 * request within request_timeout_ms of the connect or of the last answer (else the connection is
 * closed: a slow sender or a silent one), and max_connections over the process (each shard its
 * share; past it the shard's oldest connection not being answered — idle, or still sending its
 * request: a slowloris — is closed for a new one, and past twice it the new one is refused).
 * Malformed input is 400 and the connection closed.
 *
 * Threads: nf_httpd_new, _listen, _quiesce and _free from one thread (main); the actor on the
 * shards; the workers on their own threads. */
#ifndef NF_RUNTIME_HTTPD_H
#define NF_RUNTIME_HTTPD_H

#include "runtime/admin.h"
#include "runtime/runtime.h"

#include <stddef.h>

typedef struct nf_httpd_opts {
    nf_admin_hooks_t hooks;      /* as the admin server's (on_loop, max_body, page...) */
    unsigned max_connections;    /* the process's, admin.max_connections (0: 10000) */
    unsigned request_timeout_ms; /* 0: 10000 */
    size_t max_head;             /* 0: 16384 */
    unsigned budget;             /* requests a shard answers per loop iteration (0: 64) */
    unsigned workers;            /* threads for the requests not answered on a loop (0: 8) */
    unsigned queue;              /* requests waiting for a worker (0: 1024) */
    unsigned drain_ms;           /* nf_httpd_quiesce waits this long for the workers */
} nf_httpd_opts_t;

typedef struct nf_httpd nf_httpd_t;

/* Before the runtime starts: registers the shards' actor and the metrics, starts the workers.
 * NULL with a reason in err. */
nf_httpd_t *nf_httpd_new(nf_runtime_t *rt, const nf_httpd_opts_t *o, char *err, size_t errlen);
/* After the runtime started: every shard takes connections from the listening socket fd (made
 * non-blocking here; the server owns it from now on and closes it in nf_httpd_free). 0 or -1
 * with a reason in err. */
int nf_httpd_listen(nf_httpd_t *h, int fd, char *err, size_t errlen);
/* Before the runtime stops: no new connection is taken, and the requests at the workers are
 * answered (up to drain_ms). Idempotent. */
void nf_httpd_quiesce(nf_httpd_t *h);
/* After the runtime's end: joins the workers, closes the socket. NULL is a no-op. */
void nf_httpd_free(nf_httpd_t *h);

#endif
