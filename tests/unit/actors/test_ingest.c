/* End-to-end test of the ingestion actors (src/actors/crawl.c, dedup.c) on real shards, the
 * real fetcher and parser, against the loopback test server, into a JSON-lines sink:
 * - one article per URL: the same URLs from two sources yield one article each (dedup across
 *   sources and shards), and every article_id appears exactly once in the output;
 * - one fetch-log record per attempt, with the documented error for each hostile source
 *   (HTML instead of a feed, stall, redirect loop, redirect to a private address, oversized
 *   body, 429, 500, invalid XML, entity bomb, external entity);
 * - slow and stalled sources do not hold up the others: every good source's record is written
 *   before the stalled one's (ordering, not timing). */
#include "actors/ingest.h"
#include "nf_test.h"
#include "testhttpd.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct {
    const char *path;
    const char *expect_error; /* substring of fetch-log "error"; NULL = no error */
    int articles;             /* distinct articles this source contributes */
} case_t;

static const case_t cases[] = {
    {"/shared/1.xml", NULL, 3},
    {"/shared/2.xml", NULL, 0}, /* same three URLs: duplicates */
    {"/gzip", NULL, 3},
    {"/redirect", NULL, 0}, /* /feed/1.xml again, via a 301: duplicates of feed 1 */
    {"/html", "parse: ", 0},
    {"/stall", "timeout: ", 0},
    {"/loop", "redirects: ", 0},
    {"/to-private", "refused_address: address guard: 10.255.255.1 is private", 0},
    {"/huge-chunked", "too_large: ", 0},
    {"/429", "http 429", 0},
    {"/status/500", "http 500", 0},
    {"/file/invalid.xml", "parse: ", 0},
    {"/file/bomb.xml", NULL, -1}, /* parsed or refused, but bounded; articles not counted */
    {"/file/xxe.xml", NULL, -1},
};
#define NCASES (sizeof cases / sizeof cases[0])
#define NFEEDS 20

static void write_hostile_files(const char *dir)
{
    char path[512];
    FILE *f;
    snprintf(path, sizeof path, "%s/invalid.xml", dir);
    f = fopen(path, "w");
    fputs("<<<this is not xml>>> \x01\x02", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/bomb.xml", dir);
    f = fopen(path, "w");
    fputs("<?xml version=\"1.0\"?>\n<!DOCTYPE rss [\n<!ENTITY a \"aaaaaaaaaa\">\n", f);
    for (int i = 1; i < 10; i++)
        fprintf(f, "<!ENTITY %c \"&%c;&%c;&%c;&%c;&%c;&%c;&%c;&%c;&%c;&%c;\">\n", 'a' + i,
                'a' + i - 1, 'a' + i - 1, 'a' + i - 1, 'a' + i - 1, 'a' + i - 1, 'a' + i - 1,
                'a' + i - 1, 'a' + i - 1, 'a' + i - 1, 'a' + i - 1);
    fputs("]>\n<rss version=\"2.0\"><channel><title>&j;</title><item><title>&j;</title>"
          "<link>http://news.example/bomb/1</link></item></channel></rss>\n",
          f);
    fclose(f);
    snprintf(path, sizeof path, "%s/xxe.xml", dir);
    f = fopen(path, "w");
    fputs("<?xml version=\"1.0\"?>\n<!DOCTYPE rss [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>\n"
          "<rss version=\"2.0\"><channel><title>t</title><item><title>&x;</title>"
          "<link>http://news.example/xxe/1</link><description>&x;</description></item>"
          "</channel></rss>\n",
          f);
    fclose(f);
}

/* One test host serves every source: no politeness spacing, no breaker (both are covered by
 * the policy tests), a short low-speed limit for the stall. */
static void loopback_opts(nf_ingest_opts_t *o)
{
    nf_ingest_opts_default(o);
    nf_addrguard_allow(&o->guard, "127.0.0.0/8");
    o->policy.host_max_concurrent = 64;
    o->policy.host_spacing_ms = 0;
    o->policy.breaker_failures = 0;
    o->fetch.low_speed_bytes = 1;
    o->fetch.low_speed_time_s = 1;
}

static void test_ingest_end_to_end(void)
{
    char dir[] = "/tmp/nf-ingest-XXXXXX";
    NF_REQUIRE(mkdtemp(dir));
    write_hostile_files(dir);
    nf_testhttpd_t *srv = nf_testhttpd_start(dir, 0);
    NF_REQUIRE(srv);
    char base[64], out[600], spec[640], err[512];
    snprintf(base, sizeof base, "http://127.0.0.1:%u", nf_testhttpd_port(srv));
    snprintf(out, sizeof out, "%s/out.jsonl", dir);
    snprintf(spec, sizeof spec, "jsonl:%s", out);

    nf_source_list_t sources;
    nf_sources_init(&sources);
    char url[256];
    for (int i = 0; i < NFEEDS; i++) {
        snprintf(url, sizeof url, "%s/feed/%d.xml", base, i + 1);
        NF_REQUIRE(nf_sources_add(&sources, url, "test", err, sizeof err) == 0);
    }
    for (size_t i = 0; i < NCASES; i++) {
        snprintf(url, sizeof url, "%s%s", base, cases[i].path);
        NF_REQUIRE(nf_sources_add(&sources, url, "test", err, sizeof err) == 0);
    }
    NF_CHECK_EQ(sources.n, NFEEDS + NCASES);

    nf_runtime_opts_t ro;
    nf_runtime_opts_default(&ro);
    ro.shards = 2;
    nf_runtime_t *rt = nf_runtime_create(&ro, err, sizeof err);
    NF_REQUIRE(rt);
    nf_ingest_t in = {0};
    loopback_opts(&in.o);
    in.sources = &sources;
    in.sink = nf_sink_open(spec, ro.shards, err, sizeof err);
    NF_REQUIRE(in.sink);
    NF_REQUIRE(nf_ingest_register(rt, &in) == 0);
    NF_REQUIRE(nf_runtime_start(rt) == 0);

    uint64_t deadline = nf_now_ns() + 60000000000ull;
    while (nf_sink_records(in.sink, NF_TOPIC_FETCH_LOG) < sources.n && nf_now_ns() < deadline)
        usleep(10000);
    usleep(300000); /* articles of the last fetch reach their dedup shard */
    nf_runtime_request_stop(rt);
    NF_CHECK_EQ(nf_runtime_wait(rt), 0);
    nf_runtime_destroy(rt);
    NF_CHECK_EQ(nf_sink_close(in.sink), 0);
    nf_testhttpd_stop(srv);

    /* Read back what the job wrote. */
    FILE *f = fopen(out, "r");
    NF_REQUIRE(f);
    static char line[1 << 20];
    int articles = 0, fetchlogs = 0, stall_pos = -1, last_good_pos = -1, pos = 0;
    char ids[256][33];
    int found[NCASES];
    memset(found, 0, sizeof found);
    while (fgets(line, sizeof line, f)) {
        cJSON *j = cJSON_Parse(line);
        NF_REQUIRE(j);
        const char *topic = cJSON_GetObjectItem(j, "topic")->valuestring;
        cJSON *v = cJSON_GetObjectItem(j, "value");
        if (!strcmp(topic, "articles")) {
            const char *id = cJSON_GetObjectItem(v, "article_id")->valuestring;
            for (int k = 0; k < articles && k < 256; k++)
                if (!strcmp(ids[k], id)) {
                    fprintf(stderr, "  duplicate article %s\n", id);
                    nf_test_failed_checks++;
                }
            if (articles < 256)
                snprintf(ids[articles], 33, "%s", id);
            articles++;
            NF_CHECK(strlen(cJSON_GetObjectItem(v, "content_hash")->valuestring) == 64);
            /* The external entity must never have been read, nor the bomb expanded. */
            NF_CHECK(strstr(line, "root:") == NULL);
            NF_CHECK(strlen(line) < 20000);
            NF_CHECK(strstr(cJSON_GetObjectItem(v, "url")->valuestring, "http://news.example/") ==
                     cJSON_GetObjectItem(v, "url")->valuestring);
        } else if (!strcmp(topic, "fetch-log")) {
            fetchlogs++;
            const char *u = cJSON_GetObjectItem(v, "url")->valuestring;
            cJSON *e = cJSON_GetObjectItem(v, "error");
            const char *error = cJSON_IsString(e) ? e->valuestring : NULL;
            bool is_case = false;
            for (size_t i = 0; i < NCASES; i++) {
                if (strcmp(u + strlen(base), cases[i].path) != 0)
                    continue;
                is_case = true;
                found[i]++;
                if (cases[i].expect_error && (!error || !strstr(error, cases[i].expect_error))) {
                    fprintf(stderr, "  %s: error %s, want %s\n", cases[i].path,
                            error ? error : "null", cases[i].expect_error);
                    nf_test_failed_checks++;
                }
                if (!cases[i].expect_error && cases[i].articles >= 0 && error) {
                    fprintf(stderr, "  %s: unexpected error %s\n", cases[i].path, error);
                    nf_test_failed_checks++;
                }
                if (!strcmp(cases[i].path, "/stall"))
                    stall_pos = pos;
            }
            if (!is_case) {
                NF_CHECK(error == NULL);
                last_good_pos = pos;
            }
            pos++;
        }
        cJSON_Delete(j);
    }
    fclose(f);
    NF_CHECK_EQ(fetchlogs, NFEEDS + NCASES);
    for (size_t i = 0; i < NCASES; i++)
        NF_CHECK_EQ(found[i], 1);
    int expected = NFEEDS * 3;
    for (size_t i = 0; i < NCASES; i++)
        expected += cases[i].articles > 0 ? cases[i].articles : 0;
    /* bomb/xxe may contribute their one link each if the parser keeps the item. */
    NF_CHECK(articles >= expected && articles <= expected + 2);
    NF_CHECK(stall_pos > last_good_pos);
    fprintf(stderr, "  %d articles, %d fetch-log records; stall recorded after all good feeds\n",
            articles, fetchlogs);
    nf_sources_free(&sources);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    NF_CHECK(system(cmd) == 0);
}

/* A sources file in /tmp holding text; its path into path (at least 32 bytes). 0 or -1. */
static int sources_file(char *path, const char *text)
{
    strcpy(path, "/tmp/nf-sources-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        return -1;
    }
    int ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static void test_sources_file(void)
{
    char path[32];
    NF_REQUIRE(sources_file(path, "# feeds\n"
                                  "https://Example.com/feed.xml\n"
                                  "  http://example.com:80/feed.xml?utm_source=x   # same feed\n"
                                  "\n"
                                  "https://other.example/rss\n") == 0);
    nf_source_list_t l;
    nf_sources_init(&l);
    char err[512];
    NF_CHECK_EQ(nf_sources_load_file(&l, path, err, sizeof err), 0);
    NF_CHECK_EQ(l.n, 3); /* http and https differ: two feeds on example.com, one elsewhere */
    NF_CHECK_STR(l.items[0].url, "https://example.com/feed.xml");
    NF_CHECK_STR(l.items[0].host, "example.com");
    NF_CHECK_EQ(strlen(l.items[0].source_id), 16);
    NF_CHECK_EQ(l.items[0].host_key, l.items[1].host_key);
    FILE *f = fopen(path, "a");
    fputs("ftp://example.com/x\n", f);
    fclose(f);
    NF_CHECK_EQ(nf_sources_load_file(&l, path, err, sizeof err), -1);
    NF_CHECK(strstr(err, ":6: ") != NULL); /* FILE:LINE */
    /* A missing local file is kept (it fails at fetch time), with a warning naming it. */
    size_t before = l.n;
    NF_CHECK_EQ(nf_sources_add(&l, "/no/such/file.xml", "sources.urls[0]", err, sizeof err), 1);
    NF_CHECK(strstr(err, "sources.urls[0]") != NULL);
    NF_CHECK_EQ(l.n, before + 1);
    NF_CHECK_STR(l.items[before].url, "file:///no/such/file.xml");
    NF_CHECK(l.items[before].is_file && l.items[before].missing);
    nf_sources_free(&l);
    unlink(path);
}

/* Every bad line of the list at once (item 9 of issue 15: 4 runs to find 4 bad lines). */
static void test_sources_load_reports_all(void)
{
    char path[32];
    NF_REQUIRE(sources_file(path, "https://example.com/a.xml\n"
                                  "ftp://example.com/x\n"
                                  "# comment\n"
                                  "http://bad host/\n"
                                  "/no/such/feed.xml\n"
                                  "gopher://example.com/\n") == 0);
    nf_source_list_t l;
    nf_sources_init(&l);
    nf_sources_report_t rep;
    NF_CHECK_EQ(nf_sources_load(&l, "https://example.org/rss\nmailto:x@example.com", path, &rep),
                -1);
    NF_CHECK_EQ(rep.nerrors, 4);
    NF_CHECK_EQ(rep.nwarnings, 1);
    char want[64];
    NF_REQUIRE(rep.errors != NULL);
    NF_CHECK(strstr(rep.errors, "sources.urls[1]: ") != NULL);
    for (int line = 2; line <= 6; line += 2) {
        snprintf(want, sizeof want, "%s:%d: ", path, line);
        NF_CHECK(strstr(rep.errors, want) != NULL);
    }
    snprintf(want, sizeof want, "%s:5: ", path);
    NF_CHECK(rep.warnings && strstr(rep.warnings, want) != NULL);
    NF_CHECK_EQ(l.n, 3); /* two good URLs and the missing file */
    nf_sources_report_free(&rep);
    nf_sources_free(&l);

    nf_sources_init(&l);
    NF_CHECK_EQ(nf_sources_load(&l, NULL, "/no/such/sources.txt", &rep), -1);
    NF_CHECK_EQ(rep.nerrors, 1);
    NF_CHECK(rep.errors && strstr(rep.errors, "cannot open /no/such/sources.txt") != NULL);
    nf_sources_report_free(&rep);
    nf_sources_free(&l);
    unlink(path);
}

/* A file of 10,000 bad lines (a CSV given by mistake): every one counted, the report bounded. */
static void test_sources_report_bounded(void)
{
    char *text = malloc(10000 * 64), path[32];
    NF_REQUIRE(text != NULL);
    size_t len = 0;
    for (int i = 0; i < 10000; i++)
        len += (size_t)sprintf(text + len, "ftp://example.com/%d,column,another column\n", i);
    int r = sources_file(path, text);
    free(text);
    NF_REQUIRE(r == 0);
    nf_source_list_t l;
    nf_sources_init(&l);
    nf_sources_report_t rep;
    NF_CHECK_EQ(nf_sources_load(&l, NULL, path, &rep), -1);
    NF_CHECK_EQ(rep.nerrors, 10000);
    size_t lines = 0;
    for (const char *p = rep.errors; p && *p; p++)
        lines += *p == '\n';
    NF_CHECK_EQ(lines, NF_SOURCES_REPORT_LINES + 1);
    NF_CHECK(rep.errors && strstr(rep.errors, "... and 9950 more errors") != NULL);
    NF_CHECK(rep.errors_len < 64 * 1024);
    nf_sources_report_free(&rep);
    nf_sources_free(&l);
    unlink(path);
}

/* Crawl coverage (docs/slo.md) on the real crawl: a source that never answered (nothing listens
 * on its port) and one whose host never sends a byte are uncovered once twice their interval has
 * passed (a minute is the least a policy allows: this test takes two), while the one that answers
 * stays covered. Waits on the gauges, not on a clock. */
static void test_coverage(void)
{
    char dir[] = "/tmp/nf-coverage-XXXXXX";
    NF_REQUIRE(mkdtemp(dir));
    nf_testhttpd_t *srv = nf_testhttpd_start(dir, 0);
    NF_REQUIRE(srv);
    int fd = socket(AF_INET, SOCK_STREAM, 0); /* a port nobody listens on: bound, never listened */
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    NF_REQUIRE(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
               getsockname(fd, (struct sockaddr *)&sa, &sl) == 0);
    char url[256], err[512];
    nf_source_list_t sources;
    nf_sources_init(&sources);
    snprintf(url, sizeof url, "http://127.0.0.1:%u/feed/1.xml", nf_testhttpd_port(srv));
    NF_REQUIRE(nf_sources_add(&sources, url, "test", err, sizeof err) == 0);
    snprintf(url, sizeof url, "http://127.0.0.1:%u/feed.xml", ntohs(sa.sin_port));
    NF_REQUIRE(nf_sources_add(&sources, url, "test", err, sizeof err) == 0);
    snprintf(url, sizeof url, "http://127.0.0.1:%u/stall", nf_testhttpd_port(srv));
    NF_REQUIRE(nf_sources_add(&sources, url, "test", err, sizeof err) == 0);

    nf_runtime_opts_t ro;
    nf_runtime_opts_default(&ro);
    ro.shards = 1;
    nf_runtime_t *rt = nf_runtime_create(&ro, err, sizeof err);
    NF_REQUIRE(rt);
    nf_ingest_t in = {0};
    loopback_opts(&in.o);
    in.o.policy.interval_floor_ms = 60000; /* the least a policy allows: uncovered after 2 min */
    in.o.policy.interval_default_ms = 60000;
    in.sources = &sources;
    in.sink = nf_sink_open("none", ro.shards, err, sizeof err);
    NF_REQUIRE(in.sink);
    NF_REQUIRE(nf_ingest_register(rt, &in) == 0);
    NF_REQUIRE(nf_runtime_start(rt) == 0);
    uint64_t deadline = nf_now_ns() + 400000000000ull; /* 2 min + the gauges' 5 s, and load */
    while ((nf_gauge_value(in.m.coverage[0]) != 1 || nf_gauge_value(in.m.coverage[1]) != 2) &&
           nf_now_ns() < deadline)
        usleep(20000);
    NF_CHECK_EQ(nf_gauge_value(in.m.coverage[0]), 1);
    NF_CHECK_EQ(nf_gauge_value(in.m.coverage[1]), 2);
    nf_runtime_request_stop(rt);
    NF_CHECK_EQ(nf_runtime_wait(rt), 0);
    nf_runtime_destroy(rt);
    nf_sink_close(in.sink);
    nf_testhttpd_stop(srv);
    nf_sources_free(&sources);
    close(fd);
    rmdir(dir);
}

int main(void)
{
    nf_fetch_global_init();
    nf_feed_global_init();
    nf_metrics_init(2);
    NF_RUN(test_sources_file);
    NF_RUN(test_sources_load_reports_all);
    NF_RUN(test_sources_report_bounded);
    NF_RUN(test_ingest_end_to_end);
    NF_RUN(test_coverage);
    nf_metrics_shutdown();
    return nf_test_report();
}
