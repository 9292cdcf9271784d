/* api.h — the one door of every /v1/ request: the route from the table (routes.h), then the
 * listener's rule (operators' routes apart on admin.operator_port), then the guard (serve/
 * guard.h: the token, the rate), then the part of serve/ that answers it. Its functions are the
 * admin server's api and post hooks (runtime/admin.h) with an nf_api_t as their argument.
 *
 * Answers of its own: 404 naming every route for a path no route has, 405 with Allow for a
 * method the route does not take, 404 saying where a route is served when it is not here (the
 * other listener, or a part this process does not run). */
#ifndef NF_SERVE_API_H
#define NF_SERVE_API_H
#include "runtime/admin.h"
#include "runtime/jsonw.h"
#include "serve/edge.h"
#include "serve/guard.h"
#include "serve/operator.h"
#include "serve/query.h"

#include <stdbool.h>
#include <stddef.h>

typedef enum {
    NF_API_ALL = 0,   /* admin.port without admin.operator_port: every route */
    NF_API_READERS,   /* admin.port with admin.operator_port: the readers' routes */
    NF_API_OPERATORS, /* admin.operator_port: the operators' routes, past no guard */
} nf_api_listener_t;

/* Filled by whoever starts a server; each part NULL when this process does not run it. Lives as
 * long as the server. */
typedef struct nf_api {
    nf_api_listener_t listener;
    nf_guard_t *guard; /* required unless listener is NF_API_OPERATORS */
    nf_query_t *query;
    nf_edge_t *edge;
    nf_operator_t *op;
} nf_api_t;

/* A JSON answer: w's text and a newline into *body (the server frees it), status returned; 500
 * (w freed) if w failed. */
int nf_api_reply(nf_jw_t *w, int status, char **body, size_t *len);
/* {"error": what} with status, answered as nf_api_reply does. */
int nf_api_error(int status, const char *what, char **body, size_t *len);

/* The shards' server's on_loop hook (runtime/httpd.h): a GET of the page or of a query route
 * (search aside: its index takes locks a writer may hold), and a 404 of the table, are answered
 * on a shard's loop; everything else (POSTs, the operators' routes, /healthz, /readyz, /metrics,
 * the demo token) by a worker. */
bool nf_api_on_loop(void *arg, const char *method, const char *url);

/* The servers' observe hook (runtime/admin.h): each answer into the routes' service-level
 * series (routes.h), and a feed's or a search's spans ended and exported (runtime/trace.h:
 * sampled, or a 5xx, or slower than trace.slow_ms). arg: an nf_api_t. */
void nf_api_observe(void *arg, const nf_admin_req_t *req, int route, const char *url, int status,
                    uint64_t ns);

/* GET /v1/ROUTE (the admin server's api hook; arg: an nf_api_t). */
int nf_api_get(void *arg, const char *route, nf_admin_req_t *req, char **body, size_t *len);
/* POST /v1/ROUTE (the admin server's post hook; arg: an nf_api_t). */
int nf_api_post(void *arg, const char *route, nf_admin_req_t *req, const char *body, size_t len,
                char **out, size_t *outlen);

#endif
