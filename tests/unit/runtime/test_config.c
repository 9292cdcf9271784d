/* test_config.c — src/runtime/config.c: layers, every type, ranges, every documented error
 * message (exactly), key-line mapping, the shipped defaults file and the JSON round trip. */
#include "nf_test.h"
#include "runtime/config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

static char tmpdir[64];
static char cfgpath[128]; /* the file most tests write and load */

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

/* Loads `text` as a file (NULL: no file) plus sets, environment off. */
static int load(const char *text, char *const *sets, unsigned nsets, nf_config_t *cfg, char *err)
{
    if (text)
        write_text(cfgpath, text);
    return nf_config_load(cfg, text ? cfgpath : NULL, sets, nsets, false, err, NF_CONFIG_ERRLEN);
}

/* The error for `text` is exactly cfgpath followed by `suffix`. */
#define EXPECT_FILE_ERR(text, suffix) expect_file_err(__LINE__, text, suffix)
static void expect_file_err(int line, const char *text, const char *suffix)
{
    nf_config_t cfg;
    char err[NF_CONFIG_ERRLEN], want[NF_CONFIG_ERRLEN];
    snprintf(want, sizeof want, "%s%s", cfgpath, suffix);
    if (load(text, NULL, 0, &cfg, err) != -1 || strcmp(err, want) != 0) {
        fprintf(stderr, "%s:%d: for %s\n  got  \"%s\"\n  want \"%s\"\n", __FILE__, line, text, err,
                want);
        nf_test_failed_checks++;
    }
}

/* The error for one --set (no file) is exactly `want`; NULL: it must succeed. */
#define EXPECT_SET(set, want) expect_set(__LINE__, set, want)
static void expect_set(int line, const char *set, const char *want)
{
    nf_config_t cfg;
    char err[NF_CONFIG_ERRLEN];
    char *sets[] = {(char *)set};
    int rc = load(NULL, sets, 1, &cfg, err);
    bool ok = want ? rc == -1 && strcmp(err, want) == 0 : rc == 0;
    if (!ok) {
        fprintf(stderr, "%s:%d: --set %s\n  got  rc %d \"%s\"\n  want \"%s\"\n", __FILE__, line,
                set, rc, err, want ? want : "(success)");
        nf_test_failed_checks++;
    }
}

static void clear_newsflow_env(void)
{
    extern char **environ;
    for (;;) {
        char **e = environ;
        while (e && *e && strncmp(*e, "NEWSFLOW_", 9) != 0)
            e++;
        if (!e || !*e)
            return;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(*e, "="), *e);
        unsetenv(name);
    }
}

static void test_defaults(void)
{
    nf_config_t c;
    nf_config_defaults(&c);
    NF_CHECK_EQ(c.runtime.shards, 0);
    NF_CHECK(!c.runtime.pin);
    NF_CHECK_EQ(c.runtime.ring_capacity, 1024);
    NF_CHECK_EQ(c.runtime.batch, 64);
    NF_CHECK_EQ(c.runtime.budget, 256);
    NF_CHECK_EQ(c.runtime.stop_after_ms, 0);
    NF_CHECK_EQ(c.log.level, NF_LOG_INFO);
    NF_CHECK_EQ(c.log.progress_interval_ms, 5000);
    NF_CHECK(c.admin.enabled);
    NF_CHECK_STR(c.admin.listen, "127.0.0.1");
    NF_CHECK_EQ(c.admin.port, 9464);
    NF_CHECK_EQ(c.shutdown.timeout_ms, 10000);
}

/* config/newsflow.json loads to exactly the defaults, and is byte for byte their JSON. */
static void test_defaults_file(void)
{
    const char *path = NF_SOURCE_DIR "/config/newsflow.json";
    nf_config_t def, c;
    char err[NF_CONFIG_ERRLEN];
    nf_config_defaults(&def);
    memset(&c, 0xa5, sizeof c);
    NF_REQUIRE(nf_config_load(&c, path, NULL, 0, false, err, sizeof err) == 0);
    char *a = nf_config_to_json(&def), *b = nf_config_to_json(&c);
    NF_CHECK_STR(a, b);
    NF_CHECK(nf_config_hash(&def) == nf_config_hash(&c));
    NF_CHECK_STR(c.admin.listen, def.admin.listen);
    NF_CHECK_EQ(c.log.level, def.log.level);

    FILE *f = fopen(path, "rb");
    NF_REQUIRE(f);
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    NF_CHECK_STR(text, a);
    free(a);
    free(b);
}

/* to_json output loads back to the same configuration, for defaults and for non-defaults. */
static void test_round_trip(void)
{
    char *sets[] = {"runtime.shards=7",
                    "runtime.pin=true",
                    "runtime.ring_capacity=65536",
                    "runtime.batch=1",
                    "runtime.budget=1000000",
                    "runtime.stop_after_ms=9223372036854",
                    "log.level=error",
                    "log.progress_interval_ms=0",
                    "admin.enabled=false",
                    "admin.listen=a \"quoted\\\" \t name",
                    "admin.port=0",
                    "shutdown.timeout_ms=100"};
    for (unsigned nsets = 0; nsets <= 12; nsets += 12) {
        nf_config_t c, back;
        char err[NF_CONFIG_ERRLEN];
        NF_REQUIRE(load(NULL, sets, nsets, &c, err) == 0);
        char *json = nf_config_to_json(&c);
        NF_REQUIRE(json);
        NF_REQUIRE(load(json, NULL, 0, &back, err) == 0);
        char *again = nf_config_to_json(&back);
        NF_CHECK_STR(json, again);
        NF_CHECK(nf_config_hash(&c) == nf_config_hash(&back));
        NF_CHECK_STR(back.admin.listen, c.admin.listen);
        NF_CHECK(back.runtime.stop_after_ms == c.runtime.stop_after_ms);
        free(json);
        free(again);
    }
}

static void test_types(void)
{
    nf_config_t c;
    char err[NF_CONFIG_ERRLEN];
    /* uint64 is parsed from the file's digits, not a double (test_ranges: a value beyond 2^53
     * is quoted exactly in its out-of-range message) */
    NF_REQUIRE(load("{\"runtime\": {\"stop_after_ms\": 9223372036853, \"pin\": true},"
                    " \"log\": {\"level\": \"debug\"}, \"admin\": {\"listen\": \"::1\\u0041\","
                    " \"enabled\": false}}",
                    NULL, 0, &c, err) == 0);
    NF_CHECK(c.runtime.stop_after_ms == UINT64_C(9223372036853));
    NF_CHECK(c.runtime.pin);
    NF_CHECK(!c.admin.enabled);
    NF_CHECK_STR(c.admin.listen, "::1A");
    NF_CHECK_EQ(c.log.level, NF_LOG_DEBUG);
    NF_CHECK_EQ(c.runtime.shards, 0); /* keys a layer does not name keep their value */

    const char *levels[] = {"debug", "info", "warn", "error"};
    for (int i = 0; i < 4; i++) {
        char set[64];
        snprintf(set, sizeof set, "log.level=%s", levels[i]);
        char *sets[] = {set};
        NF_REQUIRE(load(NULL, sets, 1, &c, err) == 0);
        NF_CHECK_EQ(c.log.level, i);
    }
    const char *bools[][2] = {{"true", "1"}, {"1", "1"}, {"false", "0"}, {"0", "0"}};
    for (int i = 0; i < 4; i++) {
        char set[64];
        snprintf(set, sizeof set, "admin.enabled=%s", bools[i][0]);
        char *sets[] = {set};
        NF_REQUIRE(load(NULL, sets, 1, &c, err) == 0);
        NF_CHECK_EQ(c.admin.enabled, bools[i][1][0] == '1');
    }
    char *sets[] = {"admin.listen=0.0.0.0", "admin.listen=::"}; /* later --set wins */
    NF_REQUIRE(load(NULL, sets, 2, &c, err) == 0);
    NF_CHECK_STR(c.admin.listen, "::");

    char max[64 + 16] = "admin.listen=";
    memset(max + strlen(max), 'a', 63);
    EXPECT_SET(max, NULL);
    strcat(max, "a");
    EXPECT_SET(
        max, "--set admin.listen=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:"
             " admin.listen: too long (64 bytes, max 63)");
    EXPECT_SET("admin.listen=", "--set admin.listen=: admin.listen: must not be empty");
}

/* Numbers (doubles) from files and --set, their range checks and the relations between keys. */
static void test_doubles_and_relations(void)
{
    nf_config_t c;
    char err[NF_CONFIG_ERRLEN];
    NF_REQUIRE(load("{\"interest\": {\"alpha\": 0.25, \"gamma\": 1},"
                    " \"cluster\": {\"threshold\": 9e-1}}",
                    NULL, 0, &c, err) == 0);
    NF_CHECK(c.interest.alpha == 0.25);
    NF_CHECK(c.interest.gamma == 1.0);
    NF_CHECK(c.cluster.threshold == 0.9);
    EXPECT_SET("interest.alpha=0.5", NULL);
    EXPECT_SET("edge.max_in_flight=999",
               "edge.max_in_flight (999) must be at least edge.max_batch (1000): a full batch "
               "could never be taken");
    EXPECT_SET("limits.events_per_s=400",
               "2 * limits.events_per_s (800, a client's bucket) must be at least edge.max_batch "
               "(1000): a full batch could never be taken");
    EXPECT_SET("interest.alpha=abc", "--set interest.alpha=abc: interest.alpha: expected a number, "
                                     "got \"abc\"");
    EXPECT_SET("interest.alpha=1.5",
               "--set interest.alpha=1.5: interest.alpha: 1.5 is out of range [0, 1]");
    EXPECT_SET("interest.gamma=nan",
               "--set interest.gamma=nan: interest.gamma: expected a number, got \"nan\"");
    EXPECT_FILE_ERR("{\"cluster\": {\"threshold\": \"high\"}}",
                    ":1: cluster.threshold: expected a number, got a string");
    EXPECT_SET("cluster.rows=4",
               "cluster.hashes (128) must equal cluster.bands (16) * cluster.rows (4)");
    char *ok[] = {"cluster.rows=4", "cluster.hashes=64"};
    NF_CHECK(load(NULL, ok, 2, &c, err) == 0);
    EXPECT_SET("trending.slide_s=7",
               "trending.window_s (3600) must be a multiple of trending.slide_s (7)");
}

/* Every integer key at and beyond both ends of its range, through --set. */
static void test_ranges(void)
{
    static const struct {
        const char *key;
        uint64_t min, max;
    } r[] = {
        {"runtime.shards", 0, 256},
        {"runtime.batch", 1, 4096},
        {"runtime.budget", 1, 1000000},
        {"runtime.stop_after_ms", 0, INT64_MAX / 1000000},
        {"log.progress_interval_ms", 0, 3600000},
        {"admin.port", 0, 65535},
        {"shutdown.timeout_ms", 100, 600000},
        {"runtime.ring_capacity", 64, 1048576},
    };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        char set[128], want[256];
        snprintf(set, sizeof set, "%s=%" PRIu64, r[i].key, r[i].min);
        EXPECT_SET(set, NULL);
        snprintf(set, sizeof set, "%s=%" PRIu64, r[i].key, r[i].max);
        EXPECT_SET(set, NULL);
        snprintf(set, sizeof set, "%s=%" PRIu64, r[i].key, r[i].max + 1);
        snprintf(want, sizeof want,
                 "--set %s: %s: %" PRIu64 " is out of range [%" PRIu64 ", %" PRIu64 "]", set,
                 r[i].key, r[i].max + 1, r[i].min, r[i].max);
        EXPECT_SET(set, want);
        if (r[i].min > 0) {
            snprintf(set, sizeof set, "%s=%" PRIu64, r[i].key, r[i].min - 1);
            snprintf(want, sizeof want,
                     "--set %s: %s: %" PRIu64 " is out of range [%" PRIu64 ", %" PRIu64 "]", set,
                     r[i].key, r[i].min - 1, r[i].min, r[i].max);
            EXPECT_SET(set, want);
        }
    }
    /* text integers: digits only */
    EXPECT_SET("runtime.shards=-1",
               "--set runtime.shards=-1: runtime.shards: -1 is out of range [0, 256]");
    EXPECT_SET("runtime.shards=+1",
               "--set runtime.shards=+1: runtime.shards: expected an unsigned integer, got \"+1\"");
    EXPECT_SET("runtime.shards=1 ",
               "--set runtime.shards=1 : runtime.shards: expected an unsigned integer, got \"1 \"");
    EXPECT_SET("runtime.shards=",
               "--set runtime.shards=: runtime.shards: expected an unsigned integer, got \"\"");
    EXPECT_SET("runtime.stop_after_ms=18446744073709551616",
               "--set runtime.stop_after_ms=18446744073709551616: runtime.stop_after_ms: "
               "18446744073709551616 is out of range [0, 9223372036854]");
    EXPECT_SET("runtime.pin=yes", "--set runtime.pin=yes: runtime.pin: expected a boolean (true, "
                                  "false, 1 or 0), got \"yes\"");
    EXPECT_SET("log.level=loud",
               "--set log.level=loud: log.level: \"loud\" is not one of debug, info, warn, error");
    EXPECT_SET("log.level=INFO",
               "--set log.level=INFO: log.level: \"INFO\" is not one of debug, info, warn, error");
}

static void test_power_of_two(void)
{
    for (uint64_t v = 64; v <= 1048576; v *= 2) {
        char set[64];
        snprintf(set, sizeof set, "runtime.ring_capacity=%" PRIu64, v);
        EXPECT_SET(set, NULL);
    }
    EXPECT_SET(
        "runtime.ring_capacity=1000",
        "--set runtime.ring_capacity=1000: runtime.ring_capacity: 1000 is not a power of two");
    EXPECT_SET("runtime.ring_capacity=65",
               "--set runtime.ring_capacity=65: runtime.ring_capacity: 65 is not a power of two");
    EXPECT_FILE_ERR("{\"runtime\": {\n  \"ring_capacity\": 1000\n}}",
                    ":2: runtime.ring_capacity: 1000 is not a power of two");
}

static void test_file_errors(void)
{
    EXPECT_FILE_ERR("{\n  \"runtime\": {\n    \"shardz\": 4\n  }\n}",
                    ":3: unknown key \"runtime.shardz\" (keys in \"runtime\": shards, pin, "
                    "ring_capacity, batch, budget, spin_us, stop_after_ms)");
    EXPECT_FILE_ERR(
        "{\n\n  \"runtme\": {}\n}",
        ":3: unknown section \"runtme\" (sections: runtime, log, trace, admin, http, shutdown, "
        "sources, fetch, crawl, parse, sink, state, checkpoint, kafka, scale, serve, "
        "ranking, search, edge, auth, limits, demo, classify, "
        "cluster, trending, breaking, notifications, interest, postgres)");
    EXPECT_FILE_ERR(
        "{\"Runtime\": {}}",
        ":1: unknown section \"Runtime\" (sections: runtime, log, "
        "trace, admin, http, shutdown, sources, fetch, crawl, parse, sink, state, checkpoint, "
        "kafka, scale, serve, ranking, search, edge, auth, limits, demo, classify, cluster, "
        "trending, breaking, notifications, interest, postgres)");
    EXPECT_FILE_ERR(
        "{\"runtime.shards\": 1}",
        ":1: unknown section \"runtime.shards\" (sections: "
        "runtime, log, trace, admin, http, shutdown, sources, fetch, crawl, parse, sink, state, "
        "checkpoint, kafka, scale, serve, ranking, search, edge, auth, limits, demo, classify, "
        "cluster, "
        "trending, breaking, notifications, interest, postgres)");
    EXPECT_FILE_ERR("{\"runtime\":\n {\"shards\": \"4\"}}",
                    ":2: runtime.shards: expected an unsigned integer, got a string");
    EXPECT_FILE_ERR("{\"runtime\": {\"shards\": null}}",
                    ":1: runtime.shards: expected an unsigned integer, got null");
    EXPECT_FILE_ERR("{\"runtime\": {\"shards\": 1.5}}",
                    ":1: runtime.shards: expected an unsigned integer, got 1.5");
    EXPECT_FILE_ERR("{\"runtime\": {\"shards\": 1e2}}",
                    ":1: runtime.shards: expected an unsigned integer, got 1e2");
    EXPECT_FILE_ERR("{\"runtime\": {\"shards\": 5000}}",
                    ":1: runtime.shards: 5000 is out of range [0, 256]");
    EXPECT_FILE_ERR("{\"runtime\": {\"shards\": -1}}",
                    ":1: runtime.shards: -1 is out of range [0, 256]");
    EXPECT_FILE_ERR("{\"runtime\": {\"stop_after_ms\": 9223372036854775809}}",
                    ":1: runtime.stop_after_ms: 9223372036854775809 is out of range [0, "
                    "9223372036854]");
    EXPECT_FILE_ERR("{\"runtime\": {\"pin\": 1}}",
                    ":1: runtime.pin: expected a boolean, got a number");
    EXPECT_FILE_ERR("{\"runtime\": {\"pin\": \"true\"}}",
                    ":1: runtime.pin: expected a boolean, got a string");
    EXPECT_FILE_ERR("{\"admin\": {\"listen\": []}}",
                    ":1: admin.listen: expected a string, got an array");
    EXPECT_FILE_ERR("{\"admin\": {\"listen\": \"\"}}", ":1: admin.listen: must not be empty");
    EXPECT_FILE_ERR("{\"log\": {\"level\": \"loud\"}}",
                    ":1: log.level: \"loud\" is not one of debug, info, warn, error");
    EXPECT_FILE_ERR("{\"log\": {\"level\": 1}}",
                    ":1: log.level: expected a string (one of debug, info, warn, error), got a "
                    "number");
    EXPECT_FILE_ERR("{\"runtime\": 3}", ":1: runtime: expected an object, got a number");
    EXPECT_FILE_ERR("{\"runtime\": {\"shards\": {}}}",
                    ":1: runtime.shards: expected an unsigned integer, got an object");
    EXPECT_FILE_ERR("\n[1, 2]", ":2: expected a JSON object at the top level, got an array");
    EXPECT_FILE_ERR("", ": empty; expected a JSON object");
    EXPECT_FILE_ERR(" \n\t", ": empty; expected a JSON object");
}

static void test_duplicate_keys(void)
{
    EXPECT_FILE_ERR("{\n  \"runtime\": {\n    \"shards\": 1,\n    \"pin\": true,\n"
                    "    \"shards\": 2\n  }\n}",
                    ":5: duplicate key \"runtime.shards\" (first at line 3)");
    EXPECT_FILE_ERR("{\"log\": {},\n\"admin\": {},\n\"log\": {}}",
                    ":3: duplicate key \"log\" (first at line 1)");
}

/* `config check` lists every error of a file that parses: each bad key on a line of its own,
 * in the file's order, nested sections included. */
static void test_every_error_listed(void)
{
    const char *text = "{\n  \"runtime\": {\"shards\": 5000},\n  \"log\": {\"level\": \"loud\"},\n"
                       "  \"admin\": {\"port\": \"x\", \"nope\": 1},\n  \"runtme\": {},\n"
                       "  \"log\": {}\n}";
    nf_config_t cfg;
    char err[NF_CONFIG_ERRLEN];
    NF_CHECK_EQ(load(text, NULL, 0, &cfg, err), -1);
    const char *want[] = {":2: runtime.shards: 5000 is out of range [0, 256]",
                          ":3: log.level: \"loud\" is not one of debug, info, warn, error",
                          ":4: admin.port: expected an unsigned integer, got a string",
                          ":4: unknown key \"admin.nope\"",
                          ":5: unknown section \"runtme\"",
                          ":6: duplicate key \"log\" (first at line 3)"};
    int lines = 1;
    for (const char *p = err; *p; p++)
        lines += *p == '\n';
    NF_CHECK_EQ(lines, 6);
    const char *at = err;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const char *hit = strstr(at, want[i]);
        if (!hit)
            fprintf(stderr, "missing, in order: %s\nin: %s\n", want[i], err);
        NF_CHECK(hit != NULL);
        at = hit ? hit : at;
    }
}

static void test_syntax_errors(void)
{
    /* missing comma: cJSON stops at the next key */
    EXPECT_FILE_ERR("{\n  \"runtime\": {\n    \"shards\": 1\n    \"pin\": true\n  }\n}",
                    ":4:5: invalid JSON near '\"pin\": true'");
    /* trailing comma */
    EXPECT_FILE_ERR("{\n  \"runtime\": {\"shards\": 1,}\n}", ":2:27: invalid JSON near '}'");
    /* near shows at most 20 bytes and stops at the line end */
    EXPECT_FILE_ERR("{\"a\": tru_this_is_a_long_token_here\n}",
                    ":1:7: invalid JSON near 'tru_this_is_a_long_t'");
    EXPECT_FILE_ERR("{\"runtime\": {\"shards\": 1}",
                    ":1:26: invalid JSON near '' (unexpected end)");
    EXPECT_FILE_ERR("{} x", ":1:4: invalid JSON near 'x'");
    EXPECT_FILE_ERR("// comment\n{}", ":1:1: invalid JSON near '// comment'");
    /* where cJSON wanted a key: the offending byte itself */
    EXPECT_FILE_ERR("{\n  \"runtime\": {\n    shards: 1}}",
                    ":3:5: invalid JSON near 'shards: 1}}'");
    EXPECT_FILE_ERR("{\"log\": {},,}", ":1:12: invalid JSON near ',}'");
    EXPECT_FILE_ERR("{\"log\": {\"level\" \"info\"}}", ":1:18: invalid JSON near '\"info\"}}'");
    EXPECT_FILE_ERR("{\"log\": {\"level\": inf}}", ":1:19: invalid JSON near 'inf}}'");
    EXPECT_FILE_ERR("{\"log\": {\"level\": \"a\\qb\"}}", ":1:21: invalid JSON near '\\qb\"}}'");

    nf_config_t c;
    char err[NF_CONFIG_ERRLEN];
    char missing[256];
    snprintf(missing, sizeof missing, "%s/does-not-exist.json", tmpdir);
    NF_CHECK(nf_config_load(&c, missing, NULL, 0, false, err, sizeof err) == -1);
    char want[512];
    snprintf(want, sizeof want, "%s: cannot read: No such file or directory", missing);
    NF_CHECK_STR(err, want);
}

/* Fills $0..$9 in tmpl with vals[0..9]. */
static void fill(char *out, size_t n, const char *tmpl, const char *const *vals)
{
    out[0] = '\0';
    for (const char *p = tmpl; *p; p++) {
        size_t len = strlen(out);
        if (p[0] == '$' && p[1] >= '0' && p[1] <= '9')
            snprintf(out + len, n - len, "%s", vals[*++p - '0']);
        else if (len + 1 < n)
            out[len] = *p, out[len + 1] = '\0';
    }
}

/* The i-th key cJSON walks gets the i-th key line the scanner found, across nesting, strings
 * holding quotes, colons, braces and escaped backslashes, several keys on a line, CRLF line
 * ends and a key whose ':' or value is on a later line. Each case breaks one value and checks
 * the line reported (the key's line). */
static void test_key_lines(void)
{
    static const char tmpl[] = "{\r\n"                                                      /* 1 */
                               "  \"runtime\": {\"shards\": $0,\r\n"                        /* 2 */
                               "    \"pin\": $1,\n"                                         /* 3 */
                               "    \"batch\": $2, \"ring_capacity\": $3,\n"                /* 4 */
                               "    \"budget\"\n"                                           /* 5 */
                               "      : $4},\n"                                             /* 6 */
                               "  \"log\": {\"progress_interval_ms\"\n"                     /* 7 */
                               ":\n"                                                        /* 8 */
                               " $5,\n"                                                     /* 9 */
                               "    \"level\": $6},\n"                                      /* 10 */
                               "  \"admin\": {\"listen\": \"a\\\\\\\": {\\\"x\\\": 1,\",\n" /* 11 */
                               "    \"enabled\": $7,\n"                                     /* 12 */
                               "\n\n"                          /* 13, 14 */
                               "    \"port\": $8},\n"          /* 15 */
                               "  \"shutdown\":\n"             /* 16 */
                               "\n"                            /* 17 */
                               "  {\n"                         /* 18 */
                               "    \"timeout_ms\": $9}$T}\n"; /* 19 */
    const char *good[] = {"1", "false", "2", "64", "3", "0", "\"warn\"", "true", "1", "100", ""};
    static const struct {
        int slot;
        const char *bad, *want;
    } cases[] = {
        {0, "\"X\"", ":2: runtime.shards: expected an unsigned integer, got a string"},
        {1, "\"X\"", ":3: runtime.pin: expected a boolean, got a string"},
        {2, "\"X\"", ":4: runtime.batch: expected an unsigned integer, got a string"},
        {3, "\"X\"", ":4: runtime.ring_capacity: expected an unsigned integer, got a string"},
        {4, "\"X\"", ":5: runtime.budget: expected an unsigned integer, got a string"},
        {5, "\"X\"", ":7: log.progress_interval_ms: expected an unsigned integer, got a string"},
        {6, "9",
         ":10: log.level: expected a string (one of debug, info, warn, error), got a "
         "number"},
        {7, "\"X\"", ":12: admin.enabled: expected a boolean, got a string"},
        {8, "\"X\"", ":15: admin.port: expected an unsigned integer, got a string"},
        {9, "1", ":19: shutdown.timeout_ms: 1 is out of range [100, 600000]"},
    };
    char text[2048];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *vals[11];
        memcpy(vals, good, sizeof vals);
        vals[cases[i].slot] = cases[i].bad;
        fill(text, sizeof text, tmpl, vals);
        char *t = strstr(text, "$T");
        memmove(t, t + 2, strlen(t + 2) + 1);
        expect_file_err(__LINE__, text, cases[i].want);
    }

    /* Untouched, it loads: every value went to its key. */
    nf_config_t c;
    char err[NF_CONFIG_ERRLEN];
    fill(text, sizeof text, tmpl, good);
    char *t = strstr(text, "$T");
    memmove(t, t + 2, strlen(t + 2) + 1);
    NF_REQUIRE(load(text, NULL, 0, &c, err) == 0);
    NF_CHECK_STR(c.admin.listen, "a\\\": {\"x\": 1,");
    NF_CHECK_EQ(c.runtime.ring_capacity, 64);
    NF_CHECK_EQ(c.runtime.budget, 3);
    NF_CHECK_EQ(c.log.level, NF_LOG_WARN);
    NF_CHECK_EQ(c.shutdown.timeout_ms, 100);

    /* Keys after the config's own nesting: an unknown section holding nested objects and
     * arrays of objects is reported at its line; a duplicate after it too. */
    fill(text, sizeof text, tmpl, good);
    t = strstr(text, "$T");
    static const char tail[] = ",\n\n  \"zzz\": {\"a\": [{\"b\": {\"c\": 1}}]}";
    memmove(t + strlen(tail), t + 2, strlen(t + 2) + 1);
    memcpy(t, tail, strlen(tail));
    expect_file_err(
        __LINE__, text,
        ":21: unknown section \"zzz\" (sections: runtime, log, trace, admin, http, shutdown, "
        "sources, fetch, crawl, parse, sink, state, checkpoint, kafka, scale, serve, "
        "ranking, search, edge, auth, limits, demo, classify, "
        "cluster, trending, breaking, notifications, interest, postgres)");
    fill(text, sizeof text, tmpl, good);
    t = strstr(text, "$T");
    static const char dup[] = ",\n \"log\"\n: {}";
    memmove(t + strlen(dup), t + 2, strlen(t + 2) + 1);
    memcpy(t, dup, strlen(dup));
    expect_file_err(__LINE__, text, ":20: duplicate key \"log\" (first at line 7)");
}

static void test_layers(void)
{
    nf_config_t c;
    char err[NF_CONFIG_ERRLEN];
    write_text(cfgpath, "{\"runtime\": {\"shards\": 2, \"batch\": 8}}");
    char *sets[] = {"runtime.shards=4"};

    NF_REQUIRE(nf_config_load(&c, cfgpath, NULL, 0, true, err, sizeof err) == 0);
    NF_CHECK_EQ(c.runtime.shards, 2); /* file over defaults */

    setenv("NEWSFLOW_RUNTIME_SHARDS", "3", 1);
    setenv("NEWSFLOW_CONFIG", "/ignored/by/the/module.json", 1);
    NF_REQUIRE(nf_config_load(&c, cfgpath, NULL, 0, true, err, sizeof err) == 0);
    NF_CHECK_EQ(c.runtime.shards, 3); /* environment over file */
    NF_CHECK_EQ(c.runtime.batch, 8);  /* file keys the environment does not name stay */

    NF_REQUIRE(nf_config_load(&c, cfgpath, sets, 1, true, err, sizeof err) == 0);
    NF_CHECK_EQ(c.runtime.shards, 4); /* --set over environment */

    NF_REQUIRE(nf_config_load(&c, cfgpath, NULL, 0, false, err, sizeof err) == 0);
    NF_CHECK_EQ(c.runtime.shards, 2); /* use_env false ignores it */

    setenv("NEWSFLOW_RUNTIME_SHARDS", "x", 1);
    NF_CHECK(nf_config_load(&c, cfgpath, NULL, 0, true, err, sizeof err) == -1);
    NF_CHECK_STR(err, "environment NEWSFLOW_RUNTIME_SHARDS: runtime.shards: expected an unsigned "
                      "integer, got \"x\"");
    setenv("NEWSFLOW_RUNTIME_SHARDS", "300", 1);
    NF_CHECK(nf_config_load(&c, cfgpath, NULL, 0, true, err, sizeof err) == -1);
    NF_CHECK_STR(
        err, "environment NEWSFLOW_RUNTIME_SHARDS: runtime.shards: 300 is out of range [0, 256]");
    unsetenv("NEWSFLOW_RUNTIME_SHARDS");

    setenv("NEWSFLOW_LOG_LEVEL", "debug", 1);
    setenv("NEWSFLOW_RUNTIME_STOP_AFTER_MS", "1500", 1);
    setenv("NEWSFLOW_ADMIN_ENABLED", "0", 1);
    NF_REQUIRE(nf_config_load(&c, NULL, NULL, 0, true, err, sizeof err) == 0);
    NF_CHECK_EQ(c.log.level, NF_LOG_DEBUG);
    NF_CHECK_EQ(c.runtime.stop_after_ms, 1500);
    NF_CHECK(!c.admin.enabled);
    clear_newsflow_env();
}

static void test_unknown_env(void)
{
    nf_config_t c, before;
    char err[NF_CONFIG_ERRLEN];
    nf_config_defaults(&c);
    c.runtime.shards = 42;
    before = c;
    setenv("NEWSFLOW_RUNTIME_SHARD", "1", 1);
    NF_CHECK(nf_config_load(&c, NULL, NULL, 0, true, err, sizeof err) == -1);
    NF_CHECK(strncmp(err,
                     "unknown environment variable NEWSFLOW_RUNTIME_SHARD; known: NEWSFLOW_CONFIG, "
                     "NEWSFLOW_RUNTIME_SHARDS, NEWSFLOW_RUNTIME_PIN, ",
                     110) == 0);
    NF_CHECK(strstr(err, "NEWSFLOW_SHUTDOWN_TIMEOUT_MS") != NULL);
    NF_CHECK(strstr(err, "NEWSFLOW_LOG_PROGRESS_INTERVAL_MS") != NULL);
    NF_CHECK_EQ(c.runtime.shards, before.runtime.shards); /* unchanged on failure */
    NF_CHECK(nf_config_load(&c, NULL, NULL, 0, false, err, sizeof err) == 0);
    clear_newsflow_env();
}

static void test_set_errors(void)
{
    EXPECT_SET("runtime.shards", "--set runtime.shards: expected SECTION.KEY=VALUE");
    EXPECT_SET(
        "runtime.shards=abc",
        "--set runtime.shards=abc: runtime.shards: expected an unsigned integer, got \"abc\"");
    EXPECT_SET("runtime.shardz=1",
               "--set runtime.shardz=1: unknown key \"runtime.shardz\" (keys in "
               "\"runtime\": shards, pin, ring_capacity, batch, budget, "
               "spin_us, stop_after_ms)");
    EXPECT_SET("runtme.shards=1",
               "--set runtme.shards=1: unknown section \"runtme\" (sections: "
               "runtime, log, trace, admin, http, shutdown, sources, fetch, crawl, parse, "
               "sink, state, checkpoint, kafka, scale, serve, ranking, search, edge, auth, limits, "
               "demo, classify, "
               "cluster, trending, breaking, notifications, interest, postgres)");
    EXPECT_SET(
        "=1",
        "--set =1: unknown section \"\" (sections: runtime, log, trace, admin, http, shutdown, "
        "sources, fetch, crawl, parse, sink, state, checkpoint, kafka, scale, serve, "
        "ranking, search, edge, auth, limits, demo, "
        "classify, cluster, trending, breaking, notifications, interest, postgres)");
    EXPECT_SET("log=1", "--set log=1: \"log\" is a section, not a key (keys in it: level, "
                        "progress_interval_ms, sample_every)");
    EXPECT_SET("log.level.x=1",
               "--set log.level.x=1: unknown key \"log.level.x\" (keys in \"log\": "
               "level, progress_interval_ms, sample_every)");
    EXPECT_SET("admin.listen=a=b", NULL); /* the value may hold '=' */

    /* a failed load leaves cfg as it was; a short err buffer is cut, not overrun */
    nf_config_t c, before;
    nf_config_defaults(&c);
    c.runtime.batch = 7;
    before = c;
    char small[16];
    memset(small, 'x', sizeof small);
    char *sets[] = {"runtime.shards=9", "runtime.shards=abc"};
    NF_CHECK(nf_config_load(&c, NULL, sets, 2, false, small, 8) == -1);
    NF_CHECK_EQ(strlen(small), 7);
    NF_CHECK_EQ(small[8], 'x');
    NF_CHECK_EQ(c.runtime.shards, before.runtime.shards);
    NF_CHECK_EQ(c.runtime.batch, 7);
    NF_CHECK(nf_config_load(&c, NULL, sets, 2, false, NULL, 0) == -1);
}

static void test_hash_and_describe(void)
{
    nf_config_t a, b;
    nf_config_defaults(&a);
    nf_config_defaults(&b);
    NF_CHECK(nf_config_hash(&a) == nf_config_hash(&b));
    b.admin.port = 9465;
    NF_CHECK(nf_config_hash(&a) != nf_config_hash(&b));

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    NF_REQUIRE(f);
    nf_config_describe(f);
    fclose(f);
    int lines = 0;
    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    NF_CHECK_EQ(lines, 164); /* one line per key in the table */
    NF_CHECK(strstr(text, "runtime.shards ") == text);
    NF_CHECK(strstr(text, "\nlog.level ") != NULL);
    NF_CHECK(strstr(text, "debug|info|warn|error") != NULL);
    /* state.rocksdb_log says why it is off by default */
    const char *rl = strstr(text, "\nstate.rocksdb_log ");
    NF_CHECK(rl && strstr(rl, "off|warn|info") && strstr(rl, "\"off\"") &&
             strstr(rl, "aborts the whole process"));
    NF_CHECK(strstr(text, "\"127.0.0.1\"") != NULL);
    NF_CHECK(strstr(text, "[64, 1048576], power of two") != NULL);
    free(text);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/nf_test_config_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(cfgpath, sizeof cfgpath, "%s/newsflow.json", tmpdir);
    clear_newsflow_env();

    NF_RUN(test_defaults);
    NF_RUN(test_defaults_file);
    NF_RUN(test_round_trip);
    NF_RUN(test_types);
    NF_RUN(test_doubles_and_relations);
    NF_RUN(test_ranges);
    NF_RUN(test_power_of_two);
    NF_RUN(test_file_errors);
    NF_RUN(test_duplicate_keys);
    NF_RUN(test_every_error_listed);
    NF_RUN(test_syntax_errors);
    NF_RUN(test_key_lines);
    NF_RUN(test_layers);
    NF_RUN(test_unknown_env);
    NF_RUN(test_set_errors);
    NF_RUN(test_hash_and_describe);

    unlink(cfgpath);
    rmdir(tmpdir);
    return nf_test_report();
}
