/* routes.h — every HTTP route the job's servers answer, in one table: method, path pattern, who
 * may ask (the guard class, which is also the rate-limit class), which part of serve/ answers it
 * and a one-line summary. The admin server (runtime/admin.c) answers the first four itself
 * (/, /metrics, /healthz, /readyz); every /v1/ request is matched here (serve/api.h dispatches
 * it), a 404 lists the table, docs/routes.md is generated from it (`newsflow routes`) and a test
 * checks it against docs/openapi.json both ways.
 *
 * A pattern has at most one {parameter}; it matches any non-empty or empty text between the
 * literal prefix and suffix (the request path is URL-decoded, so a parameter may hold '/': the
 * handler validates it and answers 400). */
#ifndef NF_SERVE_ROUTES_H
#define NF_SERVE_ROUTES_H
#include "runtime/jsonw.h"
#include "serve/guard.h"

#include <stddef.h>
#include <stdio.h>

typedef enum {
    /* the admin server's own (runtime/admin.c) */
    NF_ROUTE_PAGE = 0,
    NF_ROUTE_METRICS,
    NF_ROUTE_HEALTHZ,
    NF_ROUTE_READYZ,
    /* the query API (serve/query.h) */
    NF_ROUTE_FEED,
    NF_ROUTE_INTEREST,
    NF_ROUTE_READS,
    NF_ROUTE_TRENDING,
    NF_ROUTE_ARTICLE,
    NF_ROUTE_STORY,
    NF_ROUTE_TOPICS,
    NF_ROUTE_RECENT,
    NF_ROUTE_SEARCH,
    /* the operators' (serve/operator.h) */
    NF_ROUTE_STATUS,
    NF_ROUTE_SOURCES,
    NF_ROUTE_HISTORY,
    /* the edge (serve/edge.h) */
    NF_ROUTE_EVENTS,
    NF_ROUTE_READ,
    /* the guard (serve/guard.h) */
    NF_ROUTE_DEMO_TOKEN,
    NF_ROUTE__COUNT
} nf_route_id_t;

/* Who answers a route. */
typedef enum {
    NF_SERVED_BY_SERVER = 0,
    NF_SERVED_BY_QUERY,
    NF_SERVED_BY_OPERATOR,
    NF_SERVED_BY_EDGE,
    NF_SERVED_BY_GUARD
} nf_served_by_t;

typedef struct nf_route {
    nf_route_id_t id;
    const char *method;     /* "GET" or "POST" */
    const char *path;       /* "/v1/feed/{user_id}" */
    nf_guard_class_t guard; /* who may ask; also the rate limit that counts it */
    nf_served_by_t by;
    const char *summary;
} nf_route_t;

/* The table, indexed by id. */
extern const nf_route_t nf_routes[NF_ROUTE__COUNT];

/* The /v1/ route matching method and path ("feed/u1": the path without "/v1/"), with its
 * parameter (*param, *plen; NULL, 0 when the pattern has none). NULL: no route has that path for
 * any method (*allow "") or none for this method (*allow: the methods that have it, "GET" or
 * "POST"). allow may be NULL. */
const nf_route_t *nf_route_match(const char *method, const char *path, const char **param,
                                 size_t *plen, const char **allow);

/* Writes {"error": what, "routes": ["GET /v1/status", ...]} with every route of the table. */
void nf_route_list_json(nf_jw_t *w, const char *what);

/* The table as a Markdown document (docs/routes.md is this output). */
void nf_route_markdown(FILE *f);

/* The routes' service-level series (docs/slo.md): newsflow_http_request_duration_seconds{route}
 * and newsflow_http_responses_total{route,code} (code "2xx".."5xx"), route the table's path or
 * "other" (a path no route has, a request that could not be parsed). Registers them once, before
 * the servers start; nf_route_observe is the servers' observe hook's body (any thread): the
 * route's id, or -1 to find it from url (NULL: "other"). */
void nf_route_metrics_init(void);
void nf_route_observe(int route, const char *url, int status, double seconds);
/* The bounds of the latency histogram, in seconds (0.5 and 1, the feed's and search's
 * objectives, among them). */
extern const double nf_route_latency_bounds[];
extern const unsigned nf_route_latency_nbounds;

/* "public", "reader", "events", "operator". */
const char *nf_route_guard_name(nf_guard_class_t c);

#endif
