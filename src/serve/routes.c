/* routes.c — the table of every HTTP route (routes.h). */
#include "serve/routes.h"

#include "runtime/metrics.h"

#include <pthread.h>
#include <string.h>

#define R(id, m, p, g, by, s) [id] = {id, m, p, g, by, s}
const nf_route_t nf_routes[NF_ROUTE__COUNT] = {
    R(NF_ROUTE_PAGE, "GET", "/", NF_GUARD_PUBLIC, NF_SERVED_BY_SERVER,
      "The page: trending stories with a topic filter, a reader's feed, a story's view "
      "(`/?story=ID`)"),
    R(NF_ROUTE_METRICS, "GET", "/metrics", NF_GUARD_OPERATOR, NF_SERVED_BY_SERVER,
      "Prometheus metrics (docs/metrics.md)"),
    R(NF_ROUTE_HEALTHZ, "GET", "/healthz", NF_GUARD_OPERATOR, NF_SERVED_BY_SERVER,
      "Liveness: every shard answers within a second"),
    R(NF_ROUTE_READYZ, "GET", "/readyz", NF_GUARD_OPERATOR, NF_SERVED_BY_SERVER,
      "Readiness: state restored, partitions assigned, epochs committing"),
    R(NF_ROUTE_FEED, "GET", "/v1/feed/{user_id}", NF_GUARD_READER, NF_SERVED_BY_QUERY,
      "A reader's personalized feed, ranked by the reader's ranking variant (named in "
      "`variant`)"),
    R(NF_ROUTE_INTEREST, "GET", "/v1/users/{user_id}/interest", NF_GUARD_READER, NF_SERVED_BY_QUERY,
      "A reader's interest vector"),
    R(NF_ROUTE_READS, "GET", "/v1/users/{user_id}/reads", NF_GUARD_READER, NF_SERVED_BY_QUERY,
      "A reader's own history: the events interest counted, newest first"),
    R(NF_ROUTE_TRENDING, "GET", "/v1/trending", NF_GUARD_PUBLIC, NF_SERVED_BY_QUERY,
      "The trending stories of the last window emitted, one entry per story"),
    R(NF_ROUTE_ARTICLE, "GET", "/v1/articles/{article_id}", NF_GUARD_PUBLIC, NF_SERVED_BY_QUERY,
      "An article"),
    R(NF_ROUTE_STORY, "GET", "/v1/stories/{cluster_id}", NF_GUARD_PUBLIC, NF_SERVED_BY_QUERY,
      "A story: its size, sources and articles newest first, paged (`limit`, `after`)"),
    R(NF_ROUTE_TOPICS, "GET", "/v1/topics", NF_GUARD_PUBLIC, NF_SERVED_BY_QUERY,
      "The taxonomy's topic names"),
    R(NF_ROUTE_RECENT, "GET", "/v1/topics/{topic}/recent", NF_GUARD_PUBLIC, NF_SERVED_BY_QUERY,
      "A topic's recent articles, newest first"),
    R(NF_ROUTE_SEARCH, "GET", "/v1/search", NF_GUARD_PUBLIC, NF_SERVED_BY_QUERY,
      "Full-text search of recent articles"),
    R(NF_ROUTE_STATUS, "GET", "/v1/status", NF_GUARD_OPERATOR, NF_SERVED_BY_OPERATOR,
      "The job's status (what `newsflow status` prints)"),
    R(NF_ROUTE_SOURCES, "GET", "/v1/sources", NF_GUARD_OPERATOR, NF_SERVED_BY_OPERATOR,
      "Every source's crawl schedule and health (what `newsflow sources list` prints)"),
    R(NF_ROUTE_HISTORY, "GET", "/v1/ops/history", NF_GUARD_OPERATOR, NF_SERVED_BY_OPERATOR,
      "This process's recent history of key series (the page's graphs)"),
    R(NF_ROUTE_EVENTS, "POST", "/v1/events", NF_GUARD_EVENTS, NF_SERVED_BY_EDGE,
      "Readers' events in, produced to read-events; 202 once the broker has them"),
    R(NF_ROUTE_READ, "POST", "/v1/articles/{article_id}/read", NF_GUARD_EVENTS, NF_SERVED_BY_EDGE,
      "One read of an article by a reader"),
    R(NF_ROUTE_DEMO_TOKEN, "GET", "/v1/auth/demo-token", NF_GUARD_PUBLIC, NF_SERVED_BY_GUARD,
      "A reader's token for a demo (auth.demo_tokens, loopback only)"),
};
#undef R

/* path ("feed/u1", without "/v1/") against pattern ("/v1/feed/{user_id}"). */
static bool pattern_match(const char *pattern, const char *path, const char **param, size_t *plen)
{
    if (strncmp(pattern, "/v1/", 4) != 0)
        return false;
    pattern += 4;
    const char *open = strchr(pattern, '{');
    if (!open) {
        *param = NULL;
        *plen = 0;
        return strcmp(pattern, path) == 0;
    }
    const char *suffix = strchr(open, '}') + 1;
    size_t pl = (size_t)(open - pattern), sl = strlen(suffix), len = strlen(path);
    if (len < pl + sl || strncmp(path, pattern, pl) != 0 || strcmp(path + len - sl, suffix) != 0)
        return false;
    *param = path + pl;
    *plen = len - pl - sl;
    return true;
}

const nf_route_t *nf_route_match(const char *method, const char *path, const char **param,
                                 size_t *plen, const char **allow)
{
    const char *p = NULL;
    size_t pl = 0;
    if (allow)
        *allow = "";
    for (int i = 0; i < NF_ROUTE__COUNT; i++) {
        const nf_route_t *r = &nf_routes[i];
        if (!pattern_match(r->path, path, &p, &pl))
            continue;
        if (strcmp(r->method, method) != 0) {
            if (allow)
                *allow = r->method;
            continue;
        }
        *param = p;
        *plen = pl;
        return r;
    }
    return NULL;
}

void nf_route_list_json(nf_jw_t *w, const char *what)
{
    nf_jw_obj_open(w);
    nf_jw_key(w, "error");
    nf_jw_str(w, what);
    nf_jw_key(w, "routes");
    nf_jw_arr_open(w);
    for (int i = 0; i < NF_ROUTE__COUNT; i++) {
        char line[128];
        snprintf(line, sizeof line, "%s %s", nf_routes[i].method, nf_routes[i].path);
        nf_jw_elem(w);
        nf_jw_str(w, line);
    }
    nf_jw_arr_close(w);
    nf_jw_key(w, "api");
    nf_jw_str(w, "docs/openapi.json");
    nf_jw_obj_close(w);
}

const char *nf_route_guard_name(nf_guard_class_t c)
{
    static const char *const names[NF_GUARD__CLASSES] = {"public", "reader", "events", "operator"};
    return c < NF_GUARD__CLASSES ? names[c] : "?";
}

static const char *served_by_name(nf_served_by_t by)
{
    static const char *const names[] = {"runtime/admin.c", "serve/query.c", "serve/operator.c",
                                        "serve/edge.c", "serve/guard.c"};
    return names[by];
}

void nf_route_markdown(FILE *f)
{
    fputs("# HTTP routes\n\n"
          "Generated by `newsflow routes` from the route table in src/serve/routes.c; a test "
          "checks\nthat this file, the table and docs/openapi.json agree. Who may ask: "
          "public (anyone; on\nloopback only without auth.*), reader (a token whose subject is "
          "the path's user), events (a\ntoken whose subject is each event's user), operator "
          "(on admin.operator_port when it is set).\nThe same class names the rate limit that "
          "counts the request (limits.*; docs/runbooks.md).\n\n"
          "| Method | Path | Who may ask | Answered by | What |\n"
          "|---|---|---|---|---|\n",
          f);
    for (int i = 0; i < NF_ROUTE__COUNT; i++) {
        const nf_route_t *r = &nf_routes[i];
        fprintf(f, "| %s | `%s` | %s | %s | %s |\n", r->method, r->path,
                nf_route_guard_name(r->guard), served_by_name(r->by), r->summary);
    }
}

/* ---- the service-level series ---- */

const double nf_route_latency_bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                          0.1,    0.25,  0.5,    1,     2.5,  5,     10};
const unsigned nf_route_latency_nbounds =
    sizeof nf_route_latency_bounds / sizeof nf_route_latency_bounds[0];

enum { OTHER = NF_ROUTE__COUNT, NCODES = 4 }; /* 2xx, 3xx, 4xx, 5xx */
static nf_histogram_t g_latency[NF_ROUTE__COUNT + 1];
static nf_counter_t g_responses[NF_ROUTE__COUNT + 1][NCODES];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void register_route(int i)
{
    const char *name = i == OTHER ? "other" : nf_routes[i].path;
    char labels[160];
    snprintf(labels, sizeof labels, "route=\"%s\"", name);
    nf_metrics_histogram("newsflow_http_request_duration_seconds",
                         "Time from a whole request to its answer queued, by route (the table's "
                         "path; other: no route, or not parsed): the latency SLOs (docs/slo.md).",
                         labels, nf_route_latency_bounds, nf_route_latency_nbounds, &g_latency[i]);
    for (int c = 0; c < NCODES; c++) {
        char l[192];
        snprintf(l, sizeof l, "%s,code=\"%dxx\"", labels, c + 2);
        nf_metrics_counter("newsflow_http_responses_total",
                           "Answers sent, by route and status class: 5xx over all is the "
                           "availability SLOs' error ratio (docs/slo.md).",
                           l, 0, &g_responses[i][c]);
    }
}

static void register_all(void)
{
    for (int i = 0; i <= OTHER; i++)
        register_route(i);
}

void nf_route_metrics_init(void)
{
    pthread_once(&g_once, register_all);
}

/* A path the server answers itself, or a /v1/ one refused before the hooks (503: busy). */
static int route_of(const char *url)
{
    if (!url)
        return OTHER;
    if (strcmp(url, "/metrics") == 0)
        return NF_ROUTE_METRICS;
    if (strcmp(url, "/healthz") == 0)
        return NF_ROUTE_HEALTHZ;
    if (strcmp(url, "/readyz") == 0)
        return NF_ROUTE_READYZ;
    if (strcmp(url, "/") == 0 || strcmp(url, "/index.html") == 0)
        return NF_ROUTE_PAGE;
    const char *p;
    size_t pl;
    const nf_route_t *r = NULL;
    if (strncmp(url, "/v1/", 4) == 0 && !(r = nf_route_match("GET", url + 4, &p, &pl, NULL)))
        r = nf_route_match("POST", url + 4, &p, &pl, NULL);
    return r ? (int)r->id : OTHER;
}

void nf_route_observe(int route, const char *url, int status, double seconds)
{
    int i = route >= 0 && route < NF_ROUTE__COUNT ? route : route_of(url);
    nf_histogram_observe(g_latency[i], seconds);
    int c = status / 100 - 2;
    if (c >= 0 && c < NCODES)
        nf_counter_inc(g_responses[i][c]);
}
