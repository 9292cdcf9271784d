/* admin.h — the admin HTTP server (libmicrohttpd, its own thread).
 *
 * Serves GET /metrics (Prometheus text 0.0.4 from metrics.h), /healthz (liveness: 200 when the
 * health hook says every shard answers, else 503 with the reason), /readyz (200 once the
 * ready hook says so, else 503; both with the hook's JSON body, which names what readiness
 * waits for) and /v1/... (JSON from the api hook: /v1/status, /v1/sources, the query API's
 * routes) and POST /v1/... (the post hook: the HTTP edge's events, serve/edge.h). Anything else
 * is 404; another method is 405. The server reads shard state only through the
 * hooks, which main wires to nf_runtime_call(), so it never touches shard memory directly (metrics
 * cells are read with atomic loads, see metrics.h).
 *
 * Thread: create/stop from the main thread; hooks run on the server's threads (one per
 * connection, up to max_connections at once: hooks must be thread-safe). */
#ifndef NF_ADMIN_H
#define NF_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nf_admin nf_admin_t;

/* A /v1/ request as the api hook sees it (valid during the hook's call only). */
typedef struct nf_admin_req nf_admin_req_t;
/* The value of the query argument name (URL-decoded; "" when given without a value, the first
 * when given twice), NULL if absent. A value holding a NUL byte reads as "\x7f", which no
 * parameter accepts, rather than as the part before the NUL. */
const char *nf_admin_req_arg(const nf_admin_req_t *r, const char *name);
/* Adds a header to the reply (Retry-After, Location; at most 4 per reply, each copied and cut
 * at 511 bytes; CR and LF are refused). */
void nf_admin_req_header(nf_admin_req_t *r, const char *name, const char *value);
/* The value of the request's header name (case-insensitive), NULL if absent. */
const char *nf_admin_req_header_in(const nf_admin_req_t *r, const char *name);
/* The client's address as text ("127.0.0.1", "::1"; "" if unknown), into buf. */
const char *nf_admin_req_peer(const nf_admin_req_t *r, char *buf, size_t len);
/* Names the route (the hooks' own id, >= 0) the request was matched to, for the observe hook. */
void nf_admin_req_set_route(nf_admin_req_t *r, int route);
/* A span the request keeps until its answer is sent (runtime/trace.h): the first is its trace's
 * root, the hooks' to start; NULL when it has two. nf_admin_req_spans gives them to the observe
 * hook, which ends and exports them; nf_admin_req_trace is the root's context (zero: none). */
#define NF_ADMIN_REQ_SPANS 2
struct nf_span;
struct nf_span *nf_admin_req_span(nf_admin_req_t *r);
struct nf_span *nf_admin_req_spans(const nf_admin_req_t *r, unsigned *n);
struct nf_trace_ctx nf_admin_req_trace(const nf_admin_req_t *r);

typedef struct nf_admin_hooks {
    /* 0 if healthy; else non-zero with a one-line reason written to why. */
    int (*health)(void *arg, char *why, size_t whylen);
    /* true once the job is ready to serve (main decides: state restored, inputs assigned,
     * epochs committing); writes a one-object JSON body saying why to body (NUL-terminated). */
    bool (*ready)(void *arg, char *body, size_t bodylen);
    void *arg;
    /* GET /v1/ROUTE (route without "/v1/", URL-decoded; its query arguments through req): the
     * HTTP status, with a malloc'ed JSON body in *body (freed by the server; NULL for an empty
     * body). NULL hook: /v1/ is 404. `newsflow status` and `newsflow sources list` read a
     * running job through it, and so does the query API (src/serve/query.h). */
    int (*api)(void *arg, const char *route, nf_admin_req_t *req, char **body, size_t *len);
    void *api_arg;
    /* POST /v1/ROUTE with its whole body (body, len; not NUL-terminated): answered like api.
     * NULL: POST is 405. A body over max_body bytes is refused with 413 before the hook (at
     * once when Content-Length says so, the connection then closed); a body not whole within
     * request_timeout_ms of its first byte is cut (the connection closed): a slow sender
     * holds a thread, so it may not hold it long. */
    int (*post)(void *arg, const char *route, nf_admin_req_t *req, const char *body, size_t len,
                char **out, size_t *outlen);
    size_t max_body; /* 0: 1 MiB */
    /* At stop, the server first stops taking connections and waits up to this long for the
     * requests in progress to be answered (0: it does not wait: their connections are cut). */
    unsigned drain_ms;
    /* GET / (and /index.html): this HTML, served as it is (NULL: 404). */
    const char *page;
    size_t page_len;
    /* Limits (0: the defaults, 256 and 10000). Above max_connections open connections, the
     * oldest one without a request in progress is shut down for each new one (a new connection,
     * a probe's, is always taken); a connection that has not sent a whole request within
     * request_timeout_ms of its connect or its last answer is shut down. */
    unsigned max_connections, request_timeout_ms;
    /* A listener that faces readers while another serves the operators (admin.operator_port):
     * /metrics, /healthz and /readyz answer 404 here; /v1/ goes to the hooks as always. */
    bool readers_only;
    /* NULL: the server's metrics series carry no listener label (the admin server). A name
     * (the probe listener, "probe"): each series carries listener="NAME", so that two servers
     * in one process count apart. */
    const char *listener;
    /* The shards' server (runtime/httpd.h) only: whether a request may be answered on a shard's
     * own loop (its hook neither blocks nor waits on the shards); the others go to its workers.
     * url: the decoded path. NULL: none may. */
    bool (*on_loop)(void *api_arg, const char *method, const char *url);
    /* Optional: every answer the server sends, once it is queued (any server thread): the
     * request (NULL: refused before the hooks; its spans are the hook's to export), the route
     * the api or post hook named (nf_admin_req_set_route; -1: none, a path the server answers
     * itself or a request refused before the hooks), the decoded path (NULL: the request could
     * not be parsed), the status, and the nanoseconds from the whole request to its answer
     * queued (on the shards' server, the time waiting for a worker included). Must be quick. */
    void (*observe)(void *api_arg, const nf_admin_req_t *req, int route, const char *url,
                    int status, uint64_t ns);
} nf_admin_hooks_t;

/* An answer, whichever server sends it (libmicrohttpd here, or the shards' server). */
typedef struct nf_admin_resp {
    int status;
    const char *ctype;
    char *body; /* malloc'ed when owned (the sender frees it), else static */
    size_t len;
    bool owned;
    bool api;          /* from the api or post hook: the request's added headers go with it */
    const char *allow; /* a 405's Allow */
} nf_admin_resp_t;

/* The server's paths, for its request counters: "/metrics", "/healthz", "/readyz", "/v1", "/",
 * "other". */
#define NF_ADMIN_NPATHS 6
int nf_admin_path_of(const char *url);
const char *nf_admin_path_name(int path);

/* A whole request answered by hooks, as either server does: method, the decoded path, and for a
 * POST to /v1/ its whole body (within hooks->max_body: the caller refuses a bigger one). req
 * collects the headers the hooks add. */
void nf_admin_respond(const nf_admin_hooks_t *hooks, nf_admin_req_t *req, const char *method,
                      const char *url, const char *body, size_t len, nf_admin_resp_t *out);
/* {"error": "body over the limit of N bytes"}, 413. */
void nf_admin_resp_413(size_t max_body, nf_admin_resp_t *out);

/* Hands the listening socket over (to the shards' server, runtime/httpd.h) and takes no new
 * connections; those already open are still served. -1 if there is none (already handed over).
 * The socket stays open until nf_admin_stop returns (close it after). */
int nf_admin_hand_over(nf_admin_t *a);

/* Listens on addr:port (IPv4 or IPv6 literal; port 0 = ephemeral). NULL on failure with a
 * message naming the address in err. */
nf_admin_t *nf_admin_start(const char *addr, uint16_t port, const nf_admin_hooks_t *hooks,
                           char *err, size_t errlen);
/* The bound port (useful with port 0). */
uint16_t nf_admin_port(const nf_admin_t *a);
void nf_admin_stop(nf_admin_t *a);

#endif
