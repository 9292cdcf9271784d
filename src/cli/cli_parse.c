/* cli_parse.c — `newsflow parse`: one feed document through the job's own parse and normalize
 * path (nf_feed_parse, exactly as the parse stage calls it), printed as JSON.
 *
 * It is how an operator answers "what does newsflow make of this feed?", and how the
 * conformance and robustness suites drive the parser from outside. So it adds nothing of its
 * own between the bytes and nf_feed_parse: it reads the file (at most max_bytes + 1 of it),
 * passes --base as the feed URL and --fetched-at as the fetch time, and prints what comes back
 * with field names of the articles topic (docs/topics.md). A URL argument is fetched by the job's
 * own fetcher on a one-shard runtime, with the job's fetch.* configuration and address guard, and
 * its final URL (after redirects) is the base unless --base says otherwise. */
#include "cli/cli.h"
#include "engine/classify.h"
#include "io/fetch_config.h"

#include "feed/dates.h"
#include "feed/feed.h"
#include "io/fetch.h"
#include "runtime/config.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

static const char parse_usage[] =
    "Usage: newsflow parse FILE|-|URL [--base URL] [--fetched-at RFC3339|MS] [--compact]\n"
    "                      [--taxonomy FILE|builtin|none]\n"
    "\n"
    "A URL is fetched as the job fetches it: same fetcher, the fetch.* configuration\n"
    "($NEWSFLOW_CONFIG and NEWSFLOW_FETCH_* variables) and the address guard (set\n"
    "NEWSFLOW_FETCH_ALLOW_PRIVATE=127.0.0.0/8 to parse a feed served on this machine).\n"
    "\n"
    "Parses one feed document (RSS 0.9x/2.0, RSS 1.0, Atom 0.3/1.0, JSON Feed 1.0/1.1) the way\n"
    "the job does and prints {\"feed\", \"articles\", \"stats\"} as JSON on stdout.\n"
    "\n"
    "  FILE              the document; - reads standard input\n"
    "  --base URL        the URL the document came from: base for relative links\n"
    "  --fetched-at T    fetch time (RFC 3339 or epoch ms), the date of items without one\n"
    "                    (default: now)\n"
    "  --compact         one line of JSON instead of indented output\n"
    "  --taxonomy T      classify each article as the job does: category_labels and topics\n"
    "                    from taxonomy FILE, the compiled-in one (builtin, the default) or\n"
    "                    none (no classification); try taxonomy edits here before deploying\n"
    "\n"
    "Exit codes: 0 parsed (recovered problems are counted in stats.warnings), 1 not a feed,\n"
    "malformed, too large or too deep, 2 usage error or unreadable FILE.\n";

/* Reads at most max + 1 bytes of path ("-": stdin) into *out. -1 with errno on failure. */
static int parse_read(const char *path, size_t max, char **out, size_t *len)
{
    FILE *in = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!in)
        return -1;
    size_t cap = 64 * 1024, n = 0;
    char *buf = malloc(cap);
    int rc = 0;
    if (!buf) {
        if (in != stdin)
            fclose(in);
        errno = ENOMEM;
        return -1;
    }
    for (;;) {
        if (n == cap) {
            size_t ncap = cap * 2 > max + 1 ? max + 1 : cap * 2;
            if (ncap <= cap)
                break; /* read max + 1: enough to know it is too large */
            char *q = realloc(buf, ncap);
            if (!q) {
                rc = -1;
                errno = ENOMEM;
                break;
            }
            buf = q;
            cap = ncap;
        }
        size_t r = fread(buf + n, 1, cap - n, in);
        n += r;
        if (r == 0) {
            if (ferror(in))
                rc = -1;
            break;
        }
    }
    int saved = errno;
    if (in != stdin)
        fclose(in);
    if (rc) {
        free(buf);
        errno = saved ? saved : EIO;
        return -1;
    }
    *out = buf;
    *len = n;
    return 0;
}

static cJSON *parse_str(const char *s)
{
    return s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

static cJSON *parse_date(int64_t ms)
{
    char buf[40];
    nf_date_format(ms, buf, sizeof buf);
    return cJSON_CreateString(buf);
}

static cJSON *parse_people(const nf_person_t *p, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "name", parse_str(p[i].name));
        cJSON_AddItemToObject(o, "email", parse_str(p[i].email));
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

static cJSON *parse_strings(const char *const *s, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(s[i]));
    return a;
}

/* The classification of a as the crawl actor writes it, merged into o. */
static void parse_classify(const nf_classify_taxonomy_t *t, nf_classify_ctx_t *ctx,
                           const nf_article_t *a, cJSON *o)
{
    nf_classify_result_t r;
    if (nf_classify_text(ctx, a->title, a->body, &r) != 0)
        return;
    nf_jw_t w;
    nf_jw_init(&w);
    nf_jw_obj_open(&w);
    nf_classify_json(t, &r, &w);
    nf_jw_obj_close(&w);
    nf_jw_raw(&w, "", 1);
    cJSON *c = w.failed ? NULL : cJSON_Parse(w.buf);
    nf_jw_free(&w);
    if (!c)
        return;
    cJSON_AddItemToObject(o, "category_labels", cJSON_DetachItemFromObject(c, "category_labels"));
    cJSON_AddItemToObject(o, "topics", cJSON_DetachItemFromObject(c, "topics"));
    cJSON_Delete(c);
}

static cJSON *parse_tags(const nf_tag_t *t, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "term", t[i].term);
        cJSON_AddItemToObject(o, "label", parse_str(t[i].label));
        cJSON_AddItemToObject(o, "scheme", parse_str(t[i].scheme));
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

static cJSON *parse_json(const nf_feed_t *f, const nf_classify_taxonomy_t *t,
                         nf_classify_ctx_t *ctx)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *feed = cJSON_AddObjectToObject(root, "feed");
    cJSON_AddStringToObject(feed, "format", nf_feed_format_name(f->format));
    cJSON_AddStringToObject(feed, "version", f->version ? f->version : "");
    cJSON_AddStringToObject(feed, "title", f->title ? f->title : "");
    cJSON_AddItemToObject(feed, "link", parse_str(f->link));
    cJSON_AddItemToObject(feed, "feed_link", parse_str(f->feed_link));
    cJSON_AddItemToObject(feed, "links", parse_strings(f->links, f->nlinks));
    cJSON_AddStringToObject(feed, "description", f->description ? f->description : "");
    cJSON_AddItemToObject(feed, "language", parse_str(f->language));
    cJSON_AddItemToObject(feed, "published_at",
                          f->published_ms ? parse_date(f->published_ms) : cJSON_CreateNull());
    cJSON_AddItemToObject(feed, "updated_at",
                          f->updated_ms ? parse_date(f->updated_ms) : cJSON_CreateNull());
    cJSON_AddItemToObject(feed, "authors", parse_people(f->authors, f->nauthors));
    cJSON_AddItemToObject(feed, "categories", parse_strings(f->categories, f->ncategories));
    cJSON_AddItemToObject(feed, "tags", parse_tags(f->tags, f->ntags));

    cJSON *arts = cJSON_AddArrayToObject(root, "articles");
    for (size_t i = 0; i < f->nitems; i++) {
        const nf_article_t *a = &f->items[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "article_id", parse_str(*a->article_id ? a->article_id : NULL));
        cJSON_AddItemToObject(o, "url", parse_str(a->url));
        cJSON_AddItemToObject(o, "link", parse_str(a->link));
        cJSON_AddItemToObject(o, "guid", parse_str(a->guid));
        cJSON_AddStringToObject(o, "title", a->title);
        cJSON_AddStringToObject(o, "summary", a->summary);
        cJSON_AddStringToObject(o, "body", a->body);
        cJSON_AddItemToObject(o, "authors", parse_people(a->authors, a->nauthors));
        cJSON_AddItemToObject(o, "categories", parse_strings(a->categories, a->ncategories));
        cJSON_AddItemToObject(o, "tags", parse_tags(a->tags, a->ntags));
        cJSON_AddItemToObject(o, "links", parse_strings(a->links, a->nlinks));
        cJSON_AddItemToObject(o, "language", parse_str(a->language));
        cJSON_AddItemToObject(o, "published_at", parse_date(a->published_ms));
        cJSON_AddItemToObject(o, "updated_at", parse_date(a->updated_ms));
        cJSON_AddBoolToObject(o, "date_fallback", a->date_fallback);
        cJSON_AddStringToObject(o, "content_hash", a->content_hash);
        if (t && ctx)
            parse_classify(t, ctx, a, o);
        cJSON_AddItemToArray(arts, o);
    }

    cJSON *st = cJSON_AddObjectToObject(root, "stats");
    cJSON_AddNumberToObject(st, "items", (double)f->nitems);
    cJSON_AddNumberToObject(st, "truncated_items", (double)f->truncated_items);
    cJSON_AddNumberToObject(st, "skipped_items", (double)f->skipped_items);
    cJSON_AddNumberToObject(st, "warnings", (double)f->warnings);
    cJSON_AddItemToObject(st, "first_warning", parse_str(f->first_warning));
    cJSON_AddItemToObject(st, "encoding", parse_str(f->encoding));
    return root;
}

static int parse_fetched_at(const char *s, int64_t *ms)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*s && !*end && !errno) {
        *ms = v;
        return 0;
    }
    return nf_date_parse(s, strlen(s), ms);
}

/* ---- URLs: fetched exactly as the job fetches (fetcher on a shard, the job's fetch.* config and
 * address guard), then parsed like a file. */

typedef struct {
    const char *url;
    nf_fetch_opts_t opts;
    nf_fetcher_t *fetcher;
    nf_fetch_result_t res;
    char *body;
    _Atomic int done;
} parse_fetch_t;

static void parse_fetched(nf_shard_t *sh, nf_fetch_result_t *res, void *user)
{
    parse_fetch_t *pf = user;
    (void)sh;
    pf->res = *res;
    pf->body = res->body; /* taken: freed by the caller */
    res->body = NULL;
    atomic_store(&pf->done, 1);
}

static void parse_fetch_start(nf_shard_t *sh, void *arg)
{
    parse_fetch_t *pf = arg;
    pf->fetcher = nf_fetcher_create(sh, &pf->opts);
    if (!pf->fetcher || nf_fetch_start(pf->fetcher, pf->url, NULL, NULL, parse_fetched, pf) != 0) {
        pf->res.error = NF_FETCH_E_OTHER;
        snprintf(pf->res.message, sizeof pf->res.message, "cannot start the transfer");
        atomic_store(&pf->done, 1);
    }
}

static void parse_fetch_stop(nf_shard_t *sh, void *arg)
{
    parse_fetch_t *pf = arg;
    (void)sh;
    nf_fetcher_destroy(pf->fetcher);
    pf->fetcher = NULL;
}

/* 0 and the body (caller frees) with the final URL in effective; or an exit code after printing
 * what failed. */
static int parse_fetch_url(const char *url, char **body, size_t *len, char *effective,
                           size_t efflen)
{
    nf_config_t cfg;
    char err[NF_CONFIG_ERRLEN];
    if (nf_config_load(&cfg, nf_cli_config_default(), NULL, 0, true, err, sizeof err) != 0) {
        fprintf(stderr, "newsflow: config error: %s\n", err);
        return NF_EXIT_USAGE;
    }
    parse_fetch_t pf;
    memset(&pf, 0, sizeof pf);
    pf.url = url;
    static nf_addrguard_t guard;
    if (nf_fetch_opts_from_config(&cfg, &pf.opts, &guard, err, sizeof err) != 0) {
        fprintf(stderr, "newsflow: config error: %s\n", err);
        return NF_EXIT_USAGE;
    }

    nf_fetch_global_init();
    nf_metrics_init(1);
    nf_runtime_opts_t ro;
    nf_runtime_opts_default(&ro);
    ro.shards = 1;
    nf_runtime_t *rt = nf_runtime_create(&ro, err, sizeof err);
    if (!rt || nf_runtime_start(rt) != 0) {
        fprintf(stderr, "newsflow parse: cannot start a shard: %s\n",
                rt ? nf_runtime_start_error(rt) : err);
        nf_runtime_destroy(rt);
        return NF_EXIT_RUNTIME;
    }
    nf_runtime_call(rt, 0, parse_fetch_start, &pf, 5000);
    uint64_t deadline = nf_now_ns() + ((uint64_t)cfg.fetch.total_timeout_ms + 5000) * 1000000ull;
    while (!atomic_load(&pf.done) && nf_now_ns() < deadline) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    nf_runtime_call(rt, 0, parse_fetch_stop, &pf, 5000);
    nf_runtime_request_stop(rt);
    nf_runtime_wait(rt);
    nf_runtime_destroy(rt);
    nf_metrics_shutdown();

    const nf_fetch_result_t *r = &pf.res;
    if (r->error != NF_FETCH_OK || r->http_status / 100 != 2) {
        if (r->error != NF_FETCH_OK)
            fprintf(stderr, "newsflow parse: %s: fetch failed: %s: %s\n", url,
                    nf_fetch_error_name(r->error), r->message);
        else
            fprintf(stderr, "newsflow parse: %s: HTTP %d\n", url, r->http_status);
        free(pf.body);
        return NF_EXIT_RUNTIME;
    }
    *body = pf.body;
    *len = r->body_len;
    snprintf(effective, efflen, "%s", r->effective_url[0] ? r->effective_url : url);
    return 0;
}

int nf_cli_parse(int argc, char **argv)
{
    const char *file = NULL, *base = NULL, *taxonomy = "builtin";
    bool compact = false;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t fetched_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(parse_usage, stdout);
            return NF_EXIT_OK;
        } else if (!strcmp(a, "--compact")) {
            compact = true;
        } else if (!strcmp(a, "--taxonomy") || !strncmp(a, "--taxonomy=", 11)) {
            if (a[10] == '=')
                taxonomy = a + 11;
            else if (i + 1 == argc)
                return nf_cli_bad_usage("parse", parse_usage, "missing value after", a);
            else
                taxonomy = argv[++i];
            continue;
        } else if (!strcmp(a, "--base") || !strcmp(a, "--fetched-at")) {
            if (i + 1 == argc)
                return nf_cli_bad_usage("parse", parse_usage, "missing value after", a);
            val = argv[++i];
        } else if (!strncmp(a, "--base=", 7) || !strncmp(a, "--fetched-at=", 13)) {
            val = strchr(a, '=') + 1;
        } else if (a[0] == '-' && a[1] != '\0') {
            return nf_cli_bad_usage("parse", parse_usage, "unknown option", a);
        } else if (file) {
            return nf_cli_bad_usage("parse", parse_usage, "parse takes one FILE; extra argument",
                                    a);
        } else {
            file = a;
            continue;
        }
        if (!val)
            continue;
        if (!strncmp(a, "--base", 6)) {
            if (strncasecmp(val, "http://", 7) && strncasecmp(val, "https://", 8))
                return nf_cli_bad_usage("parse", parse_usage,
                                        "--base must be an absolute http(s) URL, not", val);
            base = val;
        } else if (parse_fetched_at(val, &fetched_ms) < 0) {
            return nf_cli_bad_usage("parse", parse_usage,
                                    "--fetched-at must be RFC 3339 or epoch milliseconds, not",
                                    val);
        }
    }
    if (!file)
        return nf_cli_bad_usage("parse", parse_usage, "missing FILE (or - for standard input)",
                                NULL);
    nf_feed_limits_t lim;
    nf_feed_limits_default(&lim);
    char *buf = NULL;
    size_t len = 0;
    static char effective[1024];
    if (!strncasecmp(file, "http://", 7) || !strncasecmp(file, "https://", 8)) {
        int fr = parse_fetch_url(file, &buf, &len, effective, sizeof effective);
        if (fr != 0)
            return fr;
        if (!base)
            base = effective;
    } else if (parse_read(file, lim.max_bytes, &buf, &len) < 0) {
        fprintf(stderr, "newsflow parse: cannot read %s: %s\n", file, strerror(errno));
        return errno == ENOMEM ? NF_EXIT_RUNTIME : NF_EXIT_USAGE;
    }
    const char *name = strcmp(file, "-") ? file : "(stdin)";
    nf_feed_t f;
    char err[512];
    int rc = nf_feed_parse(&f, buf, len, base, fetched_ms, &lim, err, sizeof err);
    free(buf);
    if (rc != NF_FEED_OK) {
        if (rc == NF_FEED_E_TOO_LARGE)
            fprintf(stderr, "newsflow parse: %s: %s: larger than the limit of %zu bytes\n", name,
                    nf_feed_strerror(rc), lim.max_bytes);
        else
            fprintf(stderr, "newsflow parse: %s: %s: %s\n", name, nf_feed_strerror(rc), err);
        nf_feed_free(&f);
        return NF_EXIT_RUNTIME;
    }
    if (f.warnings)
        fprintf(stderr, "newsflow parse: %s: %u recovered problem%s; first: %s\n", name, f.warnings,
                f.warnings == 1 ? "" : "s", f.first_warning ? f.first_warning : "");
    nf_classify_taxonomy_t *t = NULL;
    nf_classify_ctx_t *ctx = NULL;
    if (strcmp(taxonomy, "none") != 0) {
        t = strcmp(taxonomy, "builtin") == 0
                ? nf_classify_load_text("builtin taxonomy", nf_classify_builtin,
                                        nf_classify_builtin_len, err, sizeof err)
                : nf_classify_load(taxonomy, err, sizeof err);
        if (!t || !(ctx = nf_classify_ctx_new(t))) {
            fprintf(stderr, "newsflow parse: %s\n", t ? "out of memory" : err);
            nf_classify_free(t);
            nf_feed_free(&f);
            return NF_EXIT_USAGE;
        }
    }
    cJSON *json = parse_json(&f, t, ctx);
    nf_classify_ctx_free(ctx);
    nf_classify_free(t);
    nf_feed_free(&f);
    char *out = json ? (compact ? cJSON_PrintUnformatted(json) : cJSON_Print(json)) : NULL;
    cJSON_Delete(json);
    if (!out) {
        fputs("newsflow parse: out of memory\n", stderr);
        return NF_EXIT_RUNTIME;
    }
    fputs(out, stdout);
    fputc('\n', stdout);
    free(out);
    return fflush(stdout) == 0 ? NF_EXIT_OK : NF_EXIT_RUNTIME;
}
