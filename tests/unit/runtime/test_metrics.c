/* test_metrics.c — tests src/runtime/metrics.c: exact sums under concurrent writers (run it under
 * TSan too: `ctest -L runtime` in the thread-sanitizer build), registration rules, and the
 * rendered exposition checked twice, by the grammar checker below and by `promtool check
 * metrics` when promtool is installed. */
#include "nf_test.h"
#include "runtime/log.h"
#include "runtime/metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- exposition checker -------------------------------------------------------------------- */

/* A small checker for the text format 0.0.4 as we emit it: every sample line is
 * `name{label="value",...} value`, names and label names are valid, values parse as floats,
 * every name has exactly one # TYPE line before its samples and its samples are contiguous,
 * histogram buckets are cumulative and end in le="+Inf" equal to _count. Returns the number of
 * problems, each printed with its line. */

#define CHK_MAX_FAMILIES 256
#define CHK_MAX_SERIES   64

typedef struct {
    char name[128];
    char type[16];
    bool help;
    bool done; /* another family's TYPE came after this one */
} chk_family_t;

typedef struct {
    char key[256]; /* labels without le */
    double last;
    bool inf;
    double inf_value;
} chk_hseries_t;

typedef struct {
    chk_family_t fam[CHK_MAX_FAMILIES];
    int nfam;
    int cur; /* family of the last TYPE line, -1 before any */
    chk_hseries_t hs[CHK_MAX_SERIES];
    int nhs;
    int problems;
} chk_t;

static void chk_fail(chk_t *c, const char *line, size_t len, const char *why)
{
    fprintf(stderr, "exposition: %s: %.*s\n", why, (int)len, line);
    c->problems++;
}

static bool chk_name_start(char ch, bool metric)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' ||
           (metric && ch == ':');
}

static bool chk_name_char(char ch, bool metric)
{
    return chk_name_start(ch, metric) || (ch >= '0' && ch <= '9');
}

/* Length of a valid name at s, 0 if none. */
static size_t chk_name(const char *s, const char *end, bool metric)
{
    if (s >= end || !chk_name_start(*s, metric))
        return 0;
    size_t n = 1;
    while (s + n < end && chk_name_char(s[n], metric))
        n++;
    return n;
}

static int chk_find(chk_t *c, const char *name, size_t n)
{
    for (int i = 0; i < c->nfam; i++)
        if (strlen(c->fam[i].name) == n && memcmp(c->fam[i].name, name, n) == 0)
            return i;
    return -1;
}

static bool chk_value(const char *s, size_t n, double *out)
{
    char buf[64];
    if (n == 0 || n >= sizeof buf)
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (!strcmp(buf, "NaN")) {
        *out = NAN;
        return true;
    }
    if (!strcmp(buf, "+Inf") || !strcmp(buf, "-Inf")) {
        *out = buf[0] == '+' ? INFINITY : -INFINITY;
        return true;
    }
    if (!strcmp(buf, "nan") || !strcmp(buf, "inf") || !strcmp(buf, "-nan"))
        return false; /* printf spellings are not exposition values */
    char *endp;
    *out = strtod(buf, &endp);
    return *endp == '\0';
}

static void chk_comment(chk_t *c, const char *line, size_t len)
{
    const char *end = line + len;
    bool help = len > 7 && !memcmp(line, "# HELP ", 7);
    bool type = len > 7 && !memcmp(line, "# TYPE ", 7);
    if (!help && !type)
        return; /* other comments are allowed */
    const char *p = line + 7;
    size_t n = chk_name(p, end, true);
    if (!n || (p + n < end && p[n] != ' ')) {
        chk_fail(c, line, len, "bad name in comment");
        return;
    }
    int f = chk_find(c, p, n);
    if (f < 0) {
        if (c->nfam == CHK_MAX_FAMILIES)
            return;
        f = c->nfam++;
        memset(&c->fam[f], 0, sizeof c->fam[f]);
        snprintf(c->fam[f].name, sizeof c->fam[f].name, "%.*s", (int)n, p);
    } else if (c->fam[f].done) {
        chk_fail(c, line, len, "family split in two");
    }
    if (help) {
        if (c->fam[f].help)
            chk_fail(c, line, len, "second HELP");
        c->fam[f].help = true;
        for (const char *q = p + n; q < end; q++)
            if (*q == '\\' && (q + 1 >= end || (q[1] != '\\' && q[1] != 'n')))
                chk_fail(c, line, len, "bad escape in HELP");
            else if (*q == '\\')
                q++;
        return;
    }
    if (c->fam[f].type[0])
        chk_fail(c, line, len, "second TYPE");
    const char *t = p + n + 1;
    size_t tn = (size_t)(end - t);
    if (t > end || !((tn == 7 && !memcmp(t, "counter", 7)) || (tn == 5 && !memcmp(t, "gauge", 5)) ||
                     (tn == 9 && !memcmp(t, "histogram", 9)))) {
        chk_fail(c, line, len, "bad TYPE");
        return;
    }
    snprintf(c->fam[f].type, sizeof c->fam[f].type, "%.*s", (int)tn, t);
    if (c->cur >= 0 && c->cur != f)
        c->fam[c->cur].done = true;
    c->cur = f;
    c->nhs = 0;
}

static chk_hseries_t *chk_hseries(chk_t *c, const char *key)
{
    for (int i = 0; i < c->nhs; i++)
        if (!strcmp(c->hs[i].key, key))
            return &c->hs[i];
    if (c->nhs == CHK_MAX_SERIES)
        return NULL;
    chk_hseries_t *h = &c->hs[c->nhs++];
    memset(h, 0, sizeof *h);
    snprintf(h->key, sizeof h->key, "%s", key);
    return h;
}

static void chk_sample(chk_t *c, const char *line, size_t len)
{
    const char *end = line + len, *p = line;
    size_t n = chk_name(p, end, true);
    if (!n) {
        chk_fail(c, line, len, "bad metric name");
        return;
    }
    const char *name = p;
    p += n;
    char key[256] = ""; /* labels except le */
    size_t klen = 0;
    char le[64] = "";
    if (p < end && *p == '{') {
        p++;
        while (p < end && *p != '}') {
            size_t ln = chk_name(p, end, false);
            if (!ln || p + ln + 1 >= end || p[ln] != '=' || p[ln + 1] != '"') {
                chk_fail(c, line, len, "bad label name");
                return;
            }
            const char *lname = p, *v = p + ln + 2, *q = v;
            while (q < end && *q != '"') {
                if (*q == '\\') {
                    if (q + 1 >= end || (q[1] != '\\' && q[1] != '"' && q[1] != 'n')) {
                        chk_fail(c, line, len, "bad escape in label value");
                        return;
                    }
                    q++;
                }
                q++;
            }
            if (q >= end) {
                chk_fail(c, line, len, "unterminated label value");
                return;
            }
            if (ln == 2 && !memcmp(lname, "le", 2))
                snprintf(le, sizeof le, "%.*s", (int)(q - v), v);
            else
                klen += (size_t)snprintf(key + klen, sizeof key - klen, "%.*s;",
                                         (int)(q + 1 - lname), lname);
            p = q + 1;
            if (p < end && *p == ',')
                p++;
            else if (p < end && *p != '}') {
                chk_fail(c, line, len, "expected , or }");
                return;
            }
        }
        if (p >= end) {
            chk_fail(c, line, len, "unterminated labels");
            return;
        }
        p++;
    }
    double value;
    if (p >= end || *p != ' ' || !chk_value(p + 1, (size_t)(end - p - 1), &value)) {
        chk_fail(c, line, len, "bad value");
        return;
    }

    /* Which family: the exact name, or a histogram's _bucket/_sum/_count. */
    int f = chk_find(c, name, n);
    const char *suffix = NULL;
    if (f < 0 || !c->fam[f].type[0]) {
        static const char *const sfx[] = {"_bucket", "_sum", "_count"};
        for (int i = 0; i < 3 && (f < 0 || !c->fam[f].type[0]); i++) {
            size_t sl = strlen(sfx[i]);
            if (n > sl && !memcmp(name + n - sl, sfx[i], sl)) {
                f = chk_find(c, name, n - sl);
                suffix = sfx[i];
            }
        }
    }
    if (f < 0 || !c->fam[f].type[0]) {
        chk_fail(c, line, len, "sample without TYPE");
        return;
    }
    if (f != c->cur) {
        chk_fail(c, line, len, "sample outside its family's block");
        return;
    }
    bool hist = !strcmp(c->fam[f].type, "histogram");
    if (hist != (suffix != NULL)) {
        chk_fail(c, line, len, "histogram sample without suffix, or suffix on a non-histogram");
        return;
    }
    if (!hist)
        return;
    chk_hseries_t *h = chk_hseries(c, key);
    if (!h)
        return;
    if (!strcmp(suffix, "_bucket")) {
        double bound;
        if (!le[0] || !chk_value(le, strlen(le), &bound))
            chk_fail(c, line, len, "bucket without a valid le");
        if (h->inf)
            chk_fail(c, line, len, "bucket after +Inf");
        if (value < h->last)
            chk_fail(c, line, len, "buckets not cumulative");
        h->last = value;
        if (!strcmp(le, "+Inf")) {
            h->inf = true;
            h->inf_value = value;
        }
    } else if (!strcmp(suffix, "_count")) {
        if (!h->inf || h->inf_value != value)
            chk_fail(c, line, len, "_count differs from the +Inf bucket (or no +Inf)");
    }
}

static int check_exposition(const char *text)
{
    static chk_t c;
    memset(&c, 0, sizeof c);
    c.cur = -1;
    size_t tl = strlen(text);
    if (tl && text[tl - 1] != '\n') {
        fprintf(stderr, "exposition: does not end in a newline\n");
        c.problems++;
    }
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (len == 0)
            chk_fail(&c, line, len, "empty line");
        else if (line[0] == '#')
            chk_comment(&c, line, len);
        else
            chk_sample(&c, line, len);
        line += len + (nl ? 1 : 0);
    }
    return c.problems;
}

/* 1 = promtool accepted, 0 = rejected, -1 = promtool not installed. */
static int promtool_check(const char *text)
{
    if (access("/usr/bin/promtool", X_OK) != 0)
        return -1;
    char path[] = "/tmp/nf_test_metrics_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return 0;
    size_t len = strlen(text);
    bool ok = write(fd, text, len) == (ssize_t)len;
    close(fd);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "/usr/bin/promtool check metrics < %s", path);
    int st = ok ? system(cmd) : -1;
    unlink(path);
    return st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static char *render(void)
{
    char *out = NULL;
    long n = nf_metrics_render(&out);
    if (n < 0 || !out)
        return NULL;
    if ((size_t)n != strlen(out)) {
        free(out);
        return NULL;
    }
    return out;
}

/* Value of the unlabelled sample `name`, NAN if absent. */
static double sample_value(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = text; (p = strstr(p, name)) != NULL; p += n)
        if ((p == text || p[-1] == '\n') && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    return NAN;
}

/* ---- tests --------------------------------------------------------------------------------- */

static void test_init_idempotent(void)
{
    nf_counter_t c;
    NF_CHECK_EQ(nf_metrics_counter("t_early_total", "h", NULL, 0, &c), -ENODEV);
    NF_CHECK_EQ(c.cell, 0);
    NF_CHECK_EQ(nf_metrics_init(2), 0);
    NF_CHECK_EQ(nf_metrics_init(2), 0);
    NF_CHECK_EQ(nf_metrics_init(3), -EBUSY);
    NF_CHECK_EQ(nf_metrics_init(100000), -EINVAL);
    nf_metrics_shutdown();
    nf_metrics_shutdown(); /* harmless twice */
    NF_CHECK_EQ(nf_metrics_init(3), 0);
    nf_metrics_shutdown();
}

#define PER_THREAD 1000000

typedef struct {
    int writer; /* -1: stay unbound (external writer) */
    nf_counter_t c;
    nf_gauge_t g;
    nf_histogram_t h;
} worker_arg_t;

static void *worker(void *p)
{
    const worker_arg_t *a = p;
    if (a->writer >= 0)
        nf_metrics_bind_thread((unsigned)a->writer);
    for (int i = 0; i < PER_THREAD; i++) {
        nf_counter_inc(a->c);
        nf_gauge_add(a->g, (i & 1) ? -1 : 2); /* net +1 per two iterations */
        if (i % 1000 == 0)
            nf_histogram_observe(a->h, 0.25);
    }
    return NULL;
}

static void test_concurrent_writers_sum_exactly(void)
{
    NF_REQUIRE(nf_metrics_init(2) == 0);
    static const double bounds[] = {0.1, 0.5};
    nf_counter_t c;
    nf_gauge_t g;
    nf_histogram_t h;
    NF_REQUIRE(nf_metrics_counter("t_ops_total", "Operations.", NULL, 0, &c) == 0);
    NF_REQUIRE(nf_metrics_gauge("t_level", "Level.", NULL, 0, &g) == 0);
    NF_REQUIRE(nf_metrics_histogram("t_work_seconds", "Work.", NULL, bounds, 2, &h) == 0);

    pthread_t th[3];
    worker_arg_t args[3];
    for (int i = 0; i < 3; i++) {
        args[i] = (worker_arg_t){.writer = i < 2 ? i : -1, .c = c, .g = g, .h = h};
        NF_REQUIRE(pthread_create(&th[i], NULL, worker, &args[i]) == 0);
    }
    /* Scrape while they run: must be race-free, and always well-formed. */
    for (int i = 0; i < 20; i++) {
        char *text = render();
        NF_CHECK(text != NULL);
        NF_CHECK_EQ(check_exposition(text ? text : ""), 0);
        free(text);
    }
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);

    NF_CHECK_EQ(nf_counter_value(c), 3 * PER_THREAD);
    for (unsigned w = 0; w <= 2; w++) /* shard 0, shard 1, the external writer */
        NF_CHECK_EQ(nf_counter_value_of(c, w), PER_THREAD);
    NF_CHECK_EQ(nf_counter_value_of(c, 3), 0);
    NF_CHECK_EQ(nf_gauge_value(g), 3 * PER_THREAD / 2);
    char *text = render();
    NF_REQUIRE(text != NULL);
    NF_CHECK(strstr(text, "\nt_ops_total 3000000\n") != NULL);
    NF_CHECK(strstr(text, "\nt_work_seconds_bucket{le=\"0.5\"} 3000\n") != NULL);
    NF_CHECK(strstr(text, "\nt_work_seconds_sum 750\n") != NULL);
    NF_CHECK(strstr(text, "\nt_work_seconds_count 3000\n") != NULL);
    free(text);
    nf_metrics_shutdown();
}

static void test_gauges(void)
{
    NF_REQUIRE(nf_metrics_init(1) == 0);
    nf_gauge_t g;
    NF_REQUIRE(nf_metrics_gauge("t_temperature_celsius", "Temperature.", NULL, 0, &g) == 0);
    nf_gauge_set(g, -40);
    NF_CHECK_EQ(nf_gauge_value(g), -40);
    nf_gauge_add(g, 50);
    NF_CHECK_EQ(nf_gauge_value(g), 10);
    nf_gauge_set(g, INT64_MIN + 1);
    NF_CHECK(nf_gauge_value(g) == INT64_MIN + 1);
    nf_gauge_set(g, -3);
    char *text = render();
    NF_REQUIRE(text != NULL);
    NF_CHECK(strstr(text, "\nt_temperature_celsius -3\n") != NULL);
    free(text);
    nf_metrics_shutdown();
}

static void test_histogram_exact(void)
{
    NF_REQUIRE(nf_metrics_init(1) == 0);
    static const double bounds[] = {1, 2, 5};
    nf_histogram_t h;
    NF_REQUIRE(nf_metrics_histogram("t_size_bytes", "Sizes.", "src=\"a\"", bounds, 3, &h) == 0);
    const double obs[] = {0.5, 1, 1.5, 2, 3, 10, 100.25};
    for (size_t i = 0; i < sizeof obs / sizeof obs[0]; i++)
        nf_histogram_observe(h, obs[i]);
    char *text = render();
    NF_REQUIRE(text != NULL);
    NF_CHECK(strstr(text, "# TYPE t_size_bytes histogram\n"
                          "t_size_bytes_bucket{src=\"a\",le=\"1\"} 2\n"
                          "t_size_bytes_bucket{src=\"a\",le=\"2\"} 4\n"
                          "t_size_bytes_bucket{src=\"a\",le=\"5\"} 5\n"
                          "t_size_bytes_bucket{src=\"a\",le=\"+Inf\"} 7\n"
                          "t_size_bytes_sum{src=\"a\"} 118.25\n"
                          "t_size_bytes_count{src=\"a\"} 7\n") != NULL);
    NF_CHECK_EQ(check_exposition(text), 0);
    free(text);

    NF_CHECK_EQ(nf_metrics_latency_nbounds, 19);
    NF_CHECK(nf_metrics_latency_bounds[0] == 10e-6);
    NF_CHECK(nf_metrics_latency_bounds[18] == 10);
    nf_histogram_t lat;
    NF_REQUIRE(nf_metrics_histogram("t_latency_seconds", "Latency.", NULL,
                                    nf_metrics_latency_bounds, nf_metrics_latency_nbounds,
                                    &lat) == 0);
    nf_histogram_observe(lat, 0.003);
    text = render();
    NF_REQUIRE(text != NULL);
    NF_CHECK(strstr(text, "t_latency_seconds_bucket{le=\"1e-05\"} 0\n") != NULL);
    NF_CHECK(strstr(text, "t_latency_seconds_bucket{le=\"0.0025\"} 0\n") != NULL);
    NF_CHECK(strstr(text, "t_latency_seconds_bucket{le=\"0.005\"} 1\n") != NULL);
    NF_CHECK(strstr(text, "t_latency_seconds_sum 0.003\n") != NULL);
    free(text);

    static const double bad[] = {1, 1};
    static const double nan_bound[] = {NAN};
    nf_histogram_t x;
    NF_CHECK_EQ(nf_metrics_histogram("t_bad_seconds", "x", NULL, bad, 2, &x), -EINVAL);
    NF_CHECK_EQ(nf_metrics_histogram("t_bad_seconds", "x", NULL, nan_bound, 1, &x), -EINVAL);
    NF_CHECK_EQ(nf_metrics_histogram("t_bad_seconds", "x", NULL, NULL, 1, &x), -EINVAL);
    NF_CHECK_EQ(nf_metrics_histogram("t_size_bytes", "x", "src=\"a\"", bad, 1, &x), -EEXIST);
    nf_histogram_observe(x, 1); /* failed registration left a zero handle: harmless */
    nf_metrics_shutdown();
}

static void test_registration_rules(void)
{
    NF_REQUIRE(nf_metrics_init(1) == 0);
    nf_counter_t a, b, d;
    NF_CHECK_EQ(nf_metrics_counter("t_req_total", "Requests.", "x=\"1\",y=\"2\"", 0, &a), 0);
    NF_CHECK_EQ(nf_metrics_counter("t_req_total", "Requests.", "x=\"1\",y=\"2\"", 0, &b), 0);
    NF_CHECK_EQ(a.cell, b.cell);
    NF_CHECK_EQ(nf_metrics_counter("t_req_total", "Requests.", "y=\"2\",x=\"1\"", 0, &d), 0);
    NF_CHECK_EQ(a.cell, d.cell); /* label order does not make another series */
    NF_CHECK_EQ(nf_metrics_counter("t_req_total", "Requests.", "x=\"2\"", 0, &d), 0);
    NF_CHECK(a.cell != d.cell);
    NF_CHECK_EQ(nf_metrics_counter("t_req_total", "Requests.", "x=\"2\"", NF_METRIC_PER_SHARD, &d),
                -EEXIST);
    nf_counter_inc(a);
    nf_counter_inc(b);
    NF_CHECK_EQ(nf_counter_value(a), 2);
    nf_counter_t none = {0};
    nf_counter_add(none, 5); /* zero handle: discarded, not rendered */

    static const char *const bad_names[] = {"", "1abc", "a-b", "a b", "é"};
    for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++)
        NF_CHECK_EQ(nf_metrics_counter(bad_names[i], "x", NULL, 0, &d), -EINVAL);
    NF_CHECK_EQ(nf_metrics_counter(NULL, "x", NULL, 0, &d), -EINVAL);
    NF_CHECK_EQ(nf_metrics_counter("ns:ok_total", "x", NULL, 0, &d), 0);

    static const char *const bad_labels[] = {
        "a=1",      "a=\"x",     "a=\"x\",",        "=\"x\"",    "a=\"x\"b=\"y\"", "__a=\"x\"",
        "le=\"1\"", "a=\"\\q\"", "a=\"x\",a=\"y\"", "a.b=\"x\"", "a=\"x\" ",       "a=\"\n\""};
    for (size_t i = 0; i < sizeof bad_labels / sizeof bad_labels[0]; i++) {
        int rc = nf_metrics_counter("t_lbl_total", "x", bad_labels[i], 0, &d);
        if (rc != -EINVAL)
            fprintf(stderr, "labels accepted: %s\n", bad_labels[i]);
        NF_CHECK_EQ(rc, -EINVAL);
    }
    nf_gauge_t g;
    NF_CHECK_EQ(nf_metrics_gauge("t_q", "x", "shard=\"1\"", NF_METRIC_PER_SHARD, &g), -EINVAL);
    NF_CHECK_EQ(nf_metrics_gauge("t_q", "x", "shard=\"1\"", 0, &g), 0);
    NF_CHECK_EQ(nf_metrics_gauge("t_q2", "x", NULL, 4, &g), -EINVAL);

    /* Type clashes, including with the names a histogram renders. */
    NF_CHECK_EQ(nf_metrics_gauge("t_req_total", "x", NULL, 0, &g), -EEXIST);
    NF_CHECK_EQ(g.cell, 0);
    nf_histogram_t h;
    static const double bounds[] = {1};
    NF_CHECK_EQ(nf_metrics_histogram("t_dur_seconds", "x", NULL, bounds, 1, &h), 0);
    NF_CHECK_EQ(nf_metrics_counter("t_dur_seconds_count", "x", NULL, 0, &d), -EEXIST);
    NF_CHECK_EQ(nf_metrics_gauge("t_dur_seconds_bucket", "x", NULL, 0, &g), -EEXIST);
    NF_CHECK_EQ(nf_metrics_gauge("t_hist_sum", "x", NULL, 0, &g), 0);
    NF_CHECK_EQ(nf_metrics_histogram("t_hist", "x", NULL, bounds, 1, &h), -EEXIST);
    NF_CHECK_EQ(nf_metrics_gauge_fn("t_dur_seconds", "x", NULL, NULL, NULL), -EINVAL);

    char *text = render();
    NF_REQUIRE(text != NULL);
    NF_CHECK(strstr(text, "\nt_req_total{x=\"1\",y=\"2\"} 2\n") != NULL);
    NF_CHECK(strstr(text, "\nt_req_total{x=\"2\"} 0\n") != NULL);
    NF_CHECK_EQ(check_exposition(text), 0);
    free(text);
    nf_metrics_shutdown();
}

/* Runs fn with the log going to a file and returns what it wrote (malloc'ed; NULL on failure). */
static char *logged_by(void (*fn)(void))
{
    char path[] = "/tmp/nf_test_metrics_log_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return NULL;
    unlink(path);
    nf_log_set_fd(fd);
    fn();
    nf_log_set_fd(2);
    off_t len = lseek(fd, 0, SEEK_END);
    char *text = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (text && pread(fd, text, (size_t)len, 0) != len) {
        free(text);
        text = NULL;
    }
    if (text)
        text[len] = '\0';
    close(fd);
    return text;
}

static size_t count_lines_with(const char *text, const char *a, const char *b)
{
    size_t n = 0;
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        const char *pa = memmem(line, len, a, strlen(a));
        n += pa && (!b || memmem(line, len, b, strlen(b)));
        line += len + (nl ? 1 : 0);
    }
    return n;
}

static nf_gauge_t g_clash;

/* One failure of each kind a caller can meet at run time: the same name with another type
 * (-EEXIST), bad labels (-EINVAL), a function gauge without its function (-EINVAL). */
static void register_badly(void)
{
    nf_counter_t c;
    NF_CHECK_EQ(nf_metrics_counter("t_clash_total", "A counter.", NULL, 0, &c), 0);
    nf_counter_inc(c);
    NF_CHECK_EQ(nf_metrics_gauge("t_clash_total", "Not a counter.", "k=\"v\"", 0, &g_clash),
                -EEXIST);
    nf_counter_t bad;
    NF_CHECK_EQ(nf_metrics_counter("t_bad_total", "x", "k=v", 0, &bad), -EINVAL);
    NF_CHECK_EQ(nf_metrics_gauge_fn("t_fn", "x", NULL, NULL, NULL), -EINVAL);
}

/* metrics.h's rule: a failed registration is logged once and counted by the registry, and its
 * zero handle discards updates, so callers need not check. */
static void test_failed_registration_logged_and_counted(void)
{
    NF_REQUIRE(nf_metrics_init(1) == 0);
    char *text = render();
    NF_REQUIRE(text != NULL);
    NF_CHECK(sample_value(text, "newsflow_metrics_registration_errors_total") == 0);
    free(text);

    char *log = logged_by(register_badly);
    NF_REQUIRE(log != NULL);
    NF_CHECK_EQ(count_lines_with(log, "\"component\":\"metrics\"", NULL), 3);
    NF_CHECK_EQ(count_lines_with(log, "\"level\":\"error\"", NULL), 3);
    NF_CHECK_EQ(count_lines_with(log,
                                 "\"metric\":\"t_clash_total\",\"type\":\"gauge\","
                                 "\"labels\":\"k=\\\"v\\\"\"",
                                 "\"errno_name\":\"EEXIST\""),
                1);
    NF_CHECK_EQ(
        count_lines_with(log, "\"metric\":\"t_clash_total\"", "registered with another type"), 1);
    NF_CHECK_EQ(count_lines_with(log, "\"metric\":\"t_bad_total\"", "\"errno_name\":\"EINVAL\""),
                1);
    NF_CHECK_EQ(count_lines_with(log, "\"metric\":\"t_fn\"", "\"errno_name\":\"EINVAL\""), 1);
    free(log);

    NF_CHECK_EQ(g_clash.cell, 0);
    nf_gauge_set(g_clash, 42); /* the zero handle: discarded */
    nf_gauge_add(g_clash, 1);
    NF_CHECK_EQ(nf_gauge_value(g_clash), 0);
    text = render();
    NF_REQUIRE(text != NULL);
    NF_CHECK(sample_value(text, "newsflow_metrics_registration_errors_total") == 3);
    NF_CHECK(sample_value(text, "t_clash_total") == 1); /* the counter is untouched */
    NF_CHECK(strstr(text, "# TYPE t_clash_total counter\n") != NULL);
    /* no sample is 42 (the process's CPU seconds may hold those digits: whole values only) */
    NF_CHECK(strstr(text, " 42\n") == NULL && strstr(text, "t_fn") == NULL);
    NF_CHECK(strstr(text, "t_bad_total") == NULL);
    NF_CHECK_EQ(check_exposition(text), 0);
    free(text);
    nf_metrics_shutdown();
}

static void register_before_init(void)
{
    nf_counter_t c;
    NF_CHECK_EQ(nf_metrics_counter("t_early_total", "h", NULL, 0, &c), -ENODEV);
}

/* Before nf_metrics_init there is nothing to count in: the failure is logged all the same. */
static void test_failed_registration_before_init_logged(void)
{
    char *log = logged_by(register_before_init);
    NF_REQUIRE(log != NULL);
    NF_CHECK_EQ(count_lines_with(log, "\"metric\":\"t_early_total\"", "before nf_metrics_init"), 1);
    free(log);
}

static void test_capacity(void)
{
    NF_REQUIRE(nf_metrics_init(0) == 0);
    static double bounds[250];
    for (int i = 0; i < 250; i++)
        bounds[i] = i;
    int rc = 0, n = 0;
    char name[32];
    while (rc == 0 && n < 1000) {
        nf_histogram_t h;
        snprintf(name, sizeof name, "t_big%d_seconds", n++);
        rc = nf_metrics_histogram(name, "x", NULL, bounds, 250, &h);
    }
    NF_CHECK_EQ(rc, -ENOSPC);
    NF_CHECK(n > 50 && n < 100); /* 16384 cells / 252 per histogram */
    nf_metrics_shutdown();
}

typedef struct {
    unsigned writer;
    nf_gauge_t g;
    int64_t v;
} setter_arg_t;

static void *setter(void *p)
{
    const setter_arg_t *a = p;
    nf_metrics_bind_thread(a->writer);
    nf_gauge_set(a->g, a->v);
    return NULL;
}

static void test_per_shard(void)
{
    NF_REQUIRE(nf_metrics_init(2) == 0);
    nf_gauge_t g;
    NF_REQUIRE(nf_metrics_gauge("t_queue_depth", "Queue depth.", "q=\"in\"", NF_METRIC_PER_SHARD,
                                &g) == 0);
    setter_arg_t args[2] = {{0, g, 5}, {1, g, 7}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        NF_REQUIRE(pthread_create(&th[i], NULL, setter, &args[i]) == 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    NF_CHECK_EQ(nf_gauge_value(g), 12);

    char *text = render();
    NF_REQUIRE(text != NULL);
    NF_CHECK(strstr(text, "# TYPE t_queue_depth gauge\n"
                          "t_queue_depth{q=\"in\",shard=\"0\"} 5\n"
                          "t_queue_depth{q=\"in\",shard=\"1\"} 7\n") != NULL);
    NF_CHECK(strstr(text, "external") == NULL); /* zero external part is not shown */
    free(text);

    nf_gauge_add(g, -3); /* this thread is unbound: the external writer */
    text = render();
    NF_REQUIRE(text != NULL);
    NF_CHECK(strstr(text, "t_queue_depth{q=\"in\",shard=\"external\"} -3\n") != NULL);
    NF_CHECK_EQ(check_exposition(text), 0);
    free(text);

    nf_metrics_bind_thread(2); /* out of range: logged, stays external */
    nf_gauge_add(g, 1);
    NF_CHECK_EQ(nf_gauge_value(g), 10);
    nf_metrics_shutdown();
}

static double const_fn(void *arg)
{
    return *(const double *)arg;
}

static void test_grouping_and_escaping(void)
{
    NF_REQUIRE(nf_metrics_init(1) == 0);
    nf_counter_t a1, b, a2;
    NF_REQUIRE(nf_metrics_counter("t_a_total", "First \\ help\nline two.", "k=\"1\"", 0, &a1) == 0);
    NF_REQUIRE(nf_metrics_counter("t_b_total", "B.", NULL, 0, &b) == 0);
    NF_REQUIRE(nf_metrics_counter("t_a_total", "ignored", "k=\"2\"", 0, &a2) == 0);
    char esc[64];
    NF_CHECK_EQ(nf_metrics_label_escape(esc, sizeof esc, "a\"b\\c\nd"), 10);
    NF_CHECK_STR(esc, "a\\\"b\\\\c\\nd");
    NF_CHECK_EQ(nf_metrics_label_escape(esc, 4, "a\"b\\c"), 7);
    NF_CHECK_STR(esc, "a\\\"");
    char labels[96] = "url=\"";
    nf_metrics_label_escape(labels + 5, sizeof labels - 6, "http://x/\"q\"\\");
    strcat(labels, "\"");
    nf_counter_t e;
    NF_REQUIRE(nf_metrics_counter("t_fetch_total", "Fetches.", labels, 0, &e) == 0);
    nf_counter_add(a2, 7);
    nf_counter_add(e, UINT64_MAX);

    static double nanv = NAN, big = 1e300, small = 0.1;
    NF_REQUIRE(nf_metrics_gauge_fn("t_ratio", "Ratio.", "v=\"nan\"", const_fn, &nanv) == 0);
    NF_REQUIRE(nf_metrics_gauge_fn("t_ratio", "Ratio.", "v=\"big\"", const_fn, &big) == 0);
    NF_REQUIRE(nf_metrics_gauge_fn("t_ratio", "Ratio.", "v=\"small\"", const_fn, &small) == 0);
    NF_CHECK_EQ(nf_metrics_gauge_fn("t_ratio", "Ratio.", "v=\"small\"", const_fn, &big), -EEXIST);
    NF_REQUIRE(nf_metrics_gauge_fn("t_ratio", "Ratio.", "v=\"small\"", const_fn, &small) == 0);

    char *text = render();
    NF_REQUIRE(text != NULL);
    NF_CHECK(strstr(text, "# HELP t_a_total First \\\\ help\\nline two.\n"
                          "# TYPE t_a_total counter\n"
                          "t_a_total{k=\"1\"} 0\n"
                          "t_a_total{k=\"2\"} 7\n"
                          "# HELP t_b_total B.\n") != NULL);
    NF_CHECK(strstr(text, "t_fetch_total{url=\"http://x/\\\"q\\\"\\\\\"} 18446744073709551615\n") !=
             NULL);
    NF_CHECK(strstr(text, "t_ratio{v=\"nan\"} NaN\n") != NULL);
    NF_CHECK(strstr(text, "t_ratio{v=\"big\"} 1e+300\n") != NULL);
    NF_CHECK(strstr(text, "t_ratio{v=\"small\"} 0.1\n") != NULL);
    NF_CHECK(strstr(text, "nan\n") == NULL);
    /* Built-in process metrics are there and sane. */
    NF_CHECK(strstr(text, "# TYPE newsflow_process_cpu_seconds_total counter\n") != NULL);
    NF_CHECK(strstr(text, "\nnewsflow_process_resident_memory_bytes ") != NULL);
    double start = sample_value(text, "newsflow_process_start_time_seconds");
    NF_CHECK(start > 1.6e9 && start <= (double)time(NULL) + 1);
    NF_CHECK(sample_value(text, "newsflow_process_open_fds") >= 3);
    NF_CHECK(sample_value(text, "newsflow_process_resident_memory_bytes") > 1e5);
    NF_CHECK(sample_value(text, "newsflow_process_cpu_seconds_total") >= 0);
    NF_CHECK_EQ(check_exposition(text), 0);
    free(text);
    nf_metrics_shutdown();
}

static void test_checker_catches_errors(void)
{
    /* The grammar checker itself must reject what it is there to catch. */
    static const char *const bad[] = {
        "x 1\n",                                           /* no TYPE */
        "# TYPE x gauge\nx nan\n",                         /* printf NaN */
        "# TYPE x gauge\nx{a=1} 1\n",                      /* unquoted */
        "# TYPE x gauge\nx 1\n# TYPE y gauge\ny 1\nx 2\n", /* split family */
        "# TYPE x gauge\n# TYPE x gauge\nx 1\n",           /* two TYPEs */
        "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n",
        "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 3\n",
        "# TYPE x gauge\nx 1", /* no final newline */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        NF_CHECK(check_exposition(bad[i]) > 0);
    fprintf(stderr, "(the exposition complaints above are expected)\n");
    NF_CHECK_EQ(check_exposition("# HELP x X.\n# TYPE x gauge\nx{a=\"\\\"\"} -1.5e-07\n"), 0);
}

static void *registrar(void *p)
{
    char labels[32];
    for (int i = 0; i < 500; i++) {
        nf_counter_t c;
        snprintf(labels, sizeof labels, "i=\"%d\"", i);
        if (nf_metrics_counter("t_dyn_total", "Dynamic.", labels, 0, &c) == 0)
            nf_counter_inc(c);
    }
    return p;
}

static void test_render_during_registration(void)
{
    NF_REQUIRE(nf_metrics_init(1) == 0);
    pthread_t th;
    NF_REQUIRE(pthread_create(&th, NULL, registrar, NULL) == 0);
    for (int i = 0; i < 50; i++) {
        char *text = render();
        NF_CHECK(text != NULL);
        NF_CHECK_EQ(check_exposition(text ? text : ""), 0);
        free(text);
    }
    pthread_join(th, NULL);
    char *text = render();
    NF_REQUIRE(text != NULL);
    NF_CHECK(strstr(text, "t_dyn_total{i=\"499\"} 1\n") != NULL);
    free(text);
    nf_metrics_shutdown();
}

static void test_promtool_accepts_render(void)
{
    NF_REQUIRE(nf_metrics_init(2) == 0);
    nf_counter_t c;
    nf_gauge_t g;
    nf_histogram_t h;
    NF_REQUIRE(nf_metrics_counter("newsflow_test_events_total", "Events seen, by kind.",
                                  "kind=\"a \\\"quoted\\\" \\\\ kind\\n\"", 0, &c) == 0);
    nf_counter_add(c, 42);
    NF_REQUIRE(nf_metrics_counter("newsflow_test_events_total", "Events seen, by kind.",
                                  "kind=\"b\"", NF_METRIC_PER_SHARD, &c) == 0);
    NF_REQUIRE(nf_metrics_gauge("newsflow_test_queue_depth", "Messages queued.\nSecond line \\.",
                                NULL, NF_METRIC_PER_SHARD, &g) == 0);
    nf_gauge_add(g, 3);
    NF_REQUIRE(nf_metrics_histogram("newsflow_test_latency_seconds", "Latency.", "stage=\"x\"",
                                    nf_metrics_latency_bounds, nf_metrics_latency_nbounds,
                                    &h) == 0);
    nf_histogram_observe(h, 0.2);
    nf_histogram_observe(h, 20);
    char *text = render();
    NF_REQUIRE(text != NULL);
    NF_CHECK_EQ(check_exposition(text), 0);
    int pt = promtool_check(text);
    if (pt < 0)
        fprintf(stderr, "promtool not found, skipped\n");
    else
        NF_CHECK_EQ(pt, 1);
    if (pt == 0)
        fprintf(stderr, "rejected exposition:\n%s", text);
    free(text);
    nf_metrics_shutdown();
}

int main(void)
{
    NF_RUN(test_init_idempotent);
    NF_RUN(test_concurrent_writers_sum_exactly);
    NF_RUN(test_gauges);
    NF_RUN(test_histogram_exact);
    NF_RUN(test_registration_rules);
    NF_RUN(test_failed_registration_logged_and_counted);
    NF_RUN(test_failed_registration_before_init_logged);
    NF_RUN(test_capacity);
    NF_RUN(test_per_shard);
    NF_RUN(test_grouping_and_escaping);
    NF_RUN(test_checker_catches_errors);
    NF_RUN(test_render_during_registration);
    NF_RUN(test_promtool_accepts_render);
    return nf_test_report();
}
