/* test_routes.c — the route table (src/serve/routes.c) is the one list of HTTP routes: every
 * route in it is an operation of docs/openapi.json and every operation is in it; docs/routes.md
 * is its generated form; each pattern matches its own paths for its own method only (405's
 * Allow otherwise); and the guard's classes are the table's. */
#include "nf_test.h"
#include "serve/guard.h"
#include "serve/routes.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdlib.h>

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf)
        buf[n] = '\0';
    if (len)
        *len = (size_t)n;
    return buf;
}

static const nf_route_t *in_table(const char *method, const char *path)
{
    for (int i = 0; i < NF_ROUTE__COUNT; i++)
        if (!strcasecmp(nf_routes[i].method, method) && !strcmp(nf_routes[i].path, path))
            return &nf_routes[i];
    return NULL;
}

static void test_openapi_both_ways(void)
{
    char *doc = slurp(NF_SOURCE_DIR "/docs/openapi.json", NULL);
    NF_REQUIRE(doc != NULL);
    cJSON *root = cJSON_Parse(doc);
    free(doc);
    NF_REQUIRE(root != NULL);
    cJSON *paths = cJSON_GetObjectItemCaseSensitive(root, "paths");
    NF_REQUIRE(cJSON_IsObject(paths));
    int ops = 0;
    const cJSON *path, *op;
    cJSON_ArrayForEach(path, paths)
    {
        cJSON_ArrayForEach(op, path)
        {
            ops++;
            if (!in_table(op->string, path->string)) {
                fprintf(stderr, "docs/openapi.json has %s %s, the route table does not\n",
                        op->string, path->string);
                nf_test_failed_checks++;
            }
        }
    }
    for (int i = 0; i < NF_ROUTE__COUNT; i++) {
        char method[8];
        size_t k = 0;
        for (; k < sizeof method - 1 && nf_routes[i].method[k]; k++)
            method[k] = (char)tolower((unsigned char)nf_routes[i].method[k]);
        method[k] = '\0';
        cJSON *p = cJSON_GetObjectItemCaseSensitive(paths, nf_routes[i].path);
        if (!cJSON_GetObjectItemCaseSensitive(p, method)) {
            fprintf(stderr, "the route table has %s %s, docs/openapi.json does not\n",
                    nf_routes[i].method, nf_routes[i].path);
            nf_test_failed_checks++;
        }
        NF_CHECK_EQ(nf_routes[i].id, i); /* the table is indexed by id */
    }
    NF_CHECK_EQ(ops, NF_ROUTE__COUNT);
    cJSON_Delete(root);
}

static void test_routes_md_is_generated(void)
{
    char *want = NULL;
    size_t wlen = 0;
    FILE *f = open_memstream(&want, &wlen);
    NF_REQUIRE(f != NULL);
    nf_route_markdown(f);
    fclose(f);
    size_t hlen = 0;
    char *have = slurp(NF_SOURCE_DIR "/docs/routes.md", &hlen);
    NF_CHECK(have != NULL);
    if (have && (hlen != wlen || memcmp(have, want, wlen) != 0)) {
        fprintf(stderr, "docs/routes.md differs from the table: regenerate it with "
                        "`newsflow routes > docs/routes.md`\n");
        nf_test_failed_checks++;
    }
    free(have);
    free(want);
}

/* The pattern with its parameter replaced by value. */
static void instantiate(const char *pattern, const char *value, char *out, size_t len)
{
    const char *open = strchr(pattern, '{');
    if (!open) {
        snprintf(out, len, "%s", pattern + 4);
        return;
    }
    snprintf(out, len, "%.*s%s%s", (int)(open - pattern - 4), pattern + 4, value,
             strchr(open, '}') + 1);
}

static void test_each_pattern_matches_itself(void)
{
    static const char *const values[] = {"u1", "a/b", "0123456789abcdef0123456789abcdef", ""};
    for (int i = 0; i < NF_ROUTE__COUNT; i++) {
        const nf_route_t *r = &nf_routes[i];
        if (strncmp(r->path, "/v1/", 4) != 0)
            continue; /* the server's own: never through the table's matcher */
        for (size_t v = 0; v < sizeof values / sizeof *values; v++) {
            char path[128];
            instantiate(r->path, values[v], path, sizeof path);
            const char *p = NULL, *allow = NULL;
            size_t pl = 0;
            const nf_route_t *m = nf_route_match(r->method, path, &p, &pl, &allow);
            NF_CHECK(m == r || (m && strchr(values[v], '/'))); /* "a/b" may reach a longer one */
            if (m == r && strchr(r->path, '{'))
                NF_CHECK(pl == strlen(values[v]) && !strncmp(p, values[v], pl));
            const char *other = strcmp(r->method, "GET") ? "GET" : "POST";
            const nf_route_t *o = nf_route_match(other, path, &p, &pl, &allow);
            if (!o) /* the same path for the other method: 405 with this one allowed */
                NF_CHECK_STR(allow, r->method);
        }
    }
    const char *p, *allow;
    size_t pl;
    NF_CHECK(nf_route_match("GET", "nothing/here", &p, &pl, &allow) == NULL);
    NF_CHECK_STR(allow, "");
    NF_CHECK(nf_route_match("GET", "events", &p, &pl, &allow) == NULL);
    NF_CHECK_STR(allow, "POST");
    NF_CHECK(nf_route_match("POST", "trending", &p, &pl, &allow) == NULL);
    NF_CHECK_STR(allow, "GET");
}

static void test_guard_classes_are_the_tables(void)
{
    for (int i = 0; i < NF_ROUTE__COUNT; i++) {
        const nf_route_t *r = &nf_routes[i];
        if (strncmp(r->path, "/v1/", 4) != 0)
            continue;
        char path[128];
        instantiate(r->path, "u1", path, sizeof path);
        const char *user;
        size_t ulen;
        NF_CHECK_EQ(nf_guard_classify(r->method, path, &user, &ulen), r->guard);
        if (r->guard == NF_GUARD_READER)
            NF_CHECK(ulen == 2 && !strncmp(user, "u1", 2));
    }
}

static void test_404_lists_every_route(void)
{
    nf_jw_t w;
    nf_jw_init(&w);
    nf_route_list_json(&w, "unknown route");
    NF_REQUIRE(!w.failed);
    cJSON *j = cJSON_ParseWithLength(w.buf, w.len);
    nf_jw_free(&w);
    NF_REQUIRE(j != NULL);
    cJSON *routes = cJSON_GetObjectItemCaseSensitive(j, "routes");
    NF_CHECK_EQ(cJSON_GetArraySize(routes), NF_ROUTE__COUNT);
    NF_CHECK_STR(cJSON_GetStringValue(cJSON_GetArrayItem(routes, NF_ROUTE_STATUS)),
                 "GET /v1/status");
    cJSON_Delete(j);
}

int main(void)
{
    NF_RUN(test_openapi_both_ways);
    NF_RUN(test_routes_md_is_generated);
    NF_RUN(test_each_pattern_matches_itself);
    NF_RUN(test_guard_classes_are_the_tables);
    NF_RUN(test_404_lists_every_route);
    return nf_test_report();
}
