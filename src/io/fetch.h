/* fetch.h — HTTP fetching with libcurl's multi interface, driven by a shard's io_uring.
 *
 * One fetcher per shard (create it from an actor's init, use it on that shard only). curl's
 * sockets are watched with nf_watch_* and its timeouts are shard timers (CURLMOPT_SOCKETFUNCTION
 * / CURLMOPT_TIMERFUNCTION), so thousands of transfers run concurrently on the shard's event loop:
 * no thread per request, no polling loop. (Name resolution uses curl's own resolver thread pool
 * when the URL has a host name; IP literals and `localhost` resolve inline.)
 *
 * Every request gets: HTTP/1.1 or HTTP/2 (ALPN), gzip/deflate/br/zstd decoding, conditional GET
 * (If-None-Match / If-Modified-Since), at most max_redirects redirects (http/https only),
 * connect/total/low-speed timeouts, a body cap (enforced while receiving, not just from
 * Content-Length), a configurable User-Agent, and the address guard (addrguard.h) on every
 * connection, redirects included. file:// only when allow_file is set.
 *
 * The result names what happened precisely (nf_fetch_error_t + message); a successful file://
 * read reports http_status 200. The body is handed to
 * the callback, which may take ownership (set res->body = NULL); otherwise it is freed after. */
#ifndef NF_FETCH_H
#define NF_FETCH_H

#include "io/addrguard.h"
#include "runtime/runtime.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nf_fetcher nf_fetcher_t;

typedef struct nf_fetch_opts {
    const char *user_agent;      /* default "newsflow/<version> (+feed crawler)" */
    uint32_t connect_timeout_ms; /* default 10000 */
    uint32_t total_timeout_ms;   /* default 30000 */
    uint32_t low_speed_bytes;    /* abort below this many bytes/s ... (default 64) */
    uint32_t low_speed_time_s;   /* ... for this long (default 10) */
    uint32_t max_redirects;      /* default 5 */
    uint64_t body_max_bytes;     /* default 16 MiB */
    bool allow_file;             /* file:// URLs (default false) */
    const nf_addrguard_t *guard; /* NULL: the default guard (refuse all special ranges) */
    /* curl's CONNECT_TO ("HOST:PORT:CONNECT-HOST:CONNECT-PORT", empty fields match all): send
     * connections for named hosts elsewhere without DNS, e.g. many host names to one loopback
     * test server. The guard still judges the address actually connected to. NULL = off. */
    const char *connect_to;
    /* NULL, or called on the shard for each request of a transfer written to its connection
     * (connected, TLS done), once the curl call that wrote it has returned — so a time taken
     * there is at or after the write: once for the request, once more per redirect followed;
     * user is nf_fetch_start's; always before the transfer's done callback. A transfer whose
     * connection never came up is never "sent" (file:// reads neither). For politeness that
     * counts what a host receives. */
    void (*sent)(void *user);
} nf_fetch_opts_t;

void nf_fetch_opts_default(nf_fetch_opts_t *o);

typedef enum {
    NF_FETCH_OK = 0,            /* a response arrived (any status; see http_status) */
    NF_FETCH_E_TIMEOUT,         /* connect, total or low-speed timeout */
    NF_FETCH_E_DNS,             /* name did not resolve */
    NF_FETCH_E_CONNECT,         /* connection refused/unreachable */
    NF_FETCH_E_REFUSED_ADDRESS, /* the address guard refused the target */
    NF_FETCH_E_TOO_LARGE,       /* body over body_max_bytes */
    NF_FETCH_E_REDIRECTS,       /* more than max_redirects, or a redirect to another scheme */
    NF_FETCH_E_TLS,             /* certificate or handshake failure */
    NF_FETCH_E_PROTOCOL,        /* malformed response, bad encoding, unsupported scheme */
    NF_FETCH_E_CANCELLED,       /* the fetcher was destroyed first */
    NF_FETCH_E_OTHER,
} nf_fetch_error_t;

typedef struct nf_fetch_result {
    nf_fetch_error_t error;
    char message[256]; /* "" when OK; else what failed, e.g. the guard's reason */
    int http_status;   /* 0 when no response */
    bool not_modified; /* 304 */
    char *body;        /* NUL-terminated; may be taken by the callback */
    size_t body_len;
    char content_type[128];
    char etag[256]; /* validators of the response, "" if absent */
    char last_modified[64];
    int64_t retry_after_s;    /* from Retry-After (seconds or HTTP date), -1 if absent */
    char effective_url[1024]; /* after redirects */
    unsigned redirects;
    uint64_t duration_ns;
    uint64_t bytes; /* body bytes received (decoded) */
} nf_fetch_result_t;

typedef void (*nf_fetch_done_fn)(nf_shard_t *sh, nf_fetch_result_t *res, void *user);

/* Once per process, before any thread starts (curl_global_init). */
void nf_fetch_global_init(void);
/* On the shard's thread. NULL on failure (curl_multi_init failed). */
nf_fetcher_t *nf_fetcher_create(nf_shard_t *sh, const nf_fetch_opts_t *o);
/* Cancels in-flight transfers (their callbacks run with NF_FETCH_E_CANCELLED) and frees. */
void nf_fetcher_destroy(nf_fetcher_t *f);

/* Starts a GET; the strings are copied. etag / last_modified may be NULL or "". 0 or -errno
 * (-ENOMEM; -EINVAL for an empty URL; -EIO if curl refused the transfer). On 0 the callback
 * runs exactly once, later, on the shard; on an error it never runs. */
int nf_fetch_start(nf_fetcher_t *f, const char *url, const char *etag, const char *last_modified,
                   nf_fetch_done_fn done, void *user);
unsigned nf_fetcher_active(const nf_fetcher_t *f);

const char *nf_fetch_error_name(nf_fetch_error_t e);

#endif
