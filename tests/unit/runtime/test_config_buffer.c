/* test_config_buffer.c — src/runtime/config.c through nf_config_load_buffer(): messages name
 * the given name and line, the buffer need not be NUL-terminated, the environment is not read,
 * the file loader gives the same answers, and the inputs tests/fuzz/fuzz_config.c found. */
#include "nf_test.h"
#include "runtime/config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

/* The buffer loader's message for text[0..len) is exactly `want`. */
#define EXPECT_ERR(text, len, want) expect_err(__LINE__, text, len, want)
static void expect_err(int line, const char *text, size_t len, const char *want)
{
    nf_config_t cfg;
    char err[NF_CONFIG_ERRLEN];
    int rc = nf_config_load_buffer(&cfg, "mem.json", text, len, err, sizeof err);
    if (rc != -1 || strcmp(err, want) != 0) {
        fprintf(stderr, "%s:%d:\n  got  rc %d \"%s\"\n  want \"%s\"\n", __FILE__, line, rc, err,
                want);
        nf_test_failed_checks++;
    }
}

static void test_error_names_name_and_line(void)
{
    const char *text = "{\n  \"runtime\": {\n    \"shardz\": 1\n  }\n}\n";
    EXPECT_ERR(text, strlen(text),
               "mem.json:3: unknown key \"runtime.shardz\" (keys in \"runtime\": shards, pin, "
               "ring_capacity, batch, budget, spin_us, stop_after_ms)");
    text = "{\n\n  \"log\": {\"level\": \"loud\"}}";
    EXPECT_ERR(text, strlen(text),
               "mem.json:3: log.level: \"loud\" is not one of debug, info, warn, error");
    text = "{\"runtime\": {\"shards\": 4,}}";
    EXPECT_ERR(text, strlen(text), "mem.json:1:26: invalid JSON near '}}'");
}

static void test_not_nul_terminated(void)
{
    const char text[] = "{\"log\": {\"level\": \"debug\"}}garbage";
    nf_config_t cfg;
    char err[NF_CONFIG_ERRLEN];
    NF_REQUIRE(nf_config_load_buffer(&cfg, "mem.json", text, strlen(text) - 7, err, sizeof err) ==
               0);
    NF_CHECK_EQ(cfg.log.level, NF_LOG_DEBUG);
    NF_CHECK_EQ(cfg.runtime.ring_capacity, 1024); /* a default */
    EXPECT_ERR(text, strlen(text), "mem.json:1:28: invalid JSON near 'garbage'");
    EXPECT_ERR(text, 0, "mem.json: empty; expected a JSON object");
}

static void test_failure_leaves_cfg(void)
{
    nf_config_t cfg, before;
    memset(&cfg, 0x5a, sizeof cfg);
    before = cfg;
    char err[NF_CONFIG_ERRLEN];
    NF_CHECK_EQ(
        nf_config_load_buffer(&cfg, "m", "{\"admin\": {\"port\": 70000}}", 26, err, sizeof err),
        -1);
    NF_CHECK_STR(err, "m:1: admin.port: 70000 is out of range [0, 65535]");
    NF_CHECK(memcmp(&cfg, &before, sizeof cfg) == 0);
}

static void test_environment_not_read(void)
{
    setenv("NEWSFLOW_RUNTIME_SHARDS", "7", 1);
    setenv("NEWSFLOW_NO_SUCH_KEY", "1", 1); /* an error for the environment layer */
    nf_config_t cfg;
    char err[NF_CONFIG_ERRLEN];
    NF_CHECK_EQ(nf_config_load_buffer(&cfg, "m", "{}", 2, err, sizeof err), 0);
    NF_CHECK_EQ(cfg.runtime.shards, 0);
    unsetenv("NEWSFLOW_RUNTIME_SHARDS");
    unsetenv("NEWSFLOW_NO_SUCH_KEY");
}

static void test_too_large(void)
{
    size_t len = (1u << 20) + 1;
    char *big = malloc(len);
    NF_REQUIRE(big);
    memset(big, ' ', len);
    EXPECT_ERR(big, len, "mem.json: larger than 1048576 bytes");
    EXPECT_ERR(big, len - 1, "mem.json: empty; expected a JSON object");
    free(big);
}

/* The file loader runs the same code on the file's bytes: same result, same message. */
static void test_same_as_file(void)
{
    char path[] = "/tmp/nf_test_config_buffer_XXXXXX";
    int fd = mkstemp(path);
    NF_REQUIRE(fd >= 0);
    close(fd);
    const char *texts[] = {
        "{\"runtime\": {\"pin\": true}}",
        "{\n  \"runtime\": {\"shards\": 1,\n    \"shards\": 2}}",
        "\n\n[1]",
        "{\"a\"\x15: 1}",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        FILE *f = fopen(path, "wb");
        NF_REQUIRE(f);
        fputs(texts[i], f);
        fclose(f);
        nf_config_t a, b;
        memset(&a, 0, sizeof a);
        memset(&b, 0, sizeof b);
        char ea[NF_CONFIG_ERRLEN], eb[NF_CONFIG_ERRLEN];
        int ra = nf_config_load(&a, path, NULL, 0, false, ea, sizeof ea);
        int rb = nf_config_load_buffer(&b, path, texts[i], strlen(texts[i]), eb, sizeof eb);
        NF_CHECK_EQ(ra, rb);
        if (ra == 0)
            NF_CHECK_EQ(nf_config_hash(&a), nf_config_hash(&b));
        else
            NF_CHECK_STR(ea, eb);
    }
    unlink(path);
}

/* Found by fuzz_config: cJSON takes any byte up to ' ' for a blank, the key scanner only the
 * four JSON blanks, so a control character between a key and its ':' made the two disagree
 * on the number of keys (an assertion in debug builds; messages without a line in release).
 * JSON allows control characters nowhere but tab, LF and CR between tokens. */
static void test_fuzz_control_characters(void)
{
    const char text[] = "{\n  \n \"rr\nqme\"\x15\x15\x15: {}\n}\n"; /* the input, shortened */
    EXPECT_ERR(text, strlen(text),
               "mem.json:4:5: invalid JSON near '' (a control character, 0x15)");
    EXPECT_ERR("{\"a\"\f: 1}", 9, "mem.json:1:5: invalid JSON near '' (a control character, 0x0c)");
    EXPECT_ERR("{\"admin\": {\"listen\": \"::\x01\"}}", 28,
               "mem.json:1:25: invalid JSON near '' (a control character, 0x01)");
    EXPECT_ERR("{\"a\": 1\0}", 9, "mem.json:1:8: invalid JSON near '' (a NUL byte)");
}

/* cJSON skips a UTF-8 byte order mark; the line of a top-level error counts from after it. */
static void test_bom_line(void)
{
    EXPECT_ERR("\xEF\xBB\xBF\n\n[1]", 8,
               "mem.json:3: expected a JSON object at the top level, got an array");
    EXPECT_ERR("\xEF\xBB\xBF\n", 4, "mem.json: empty; expected a JSON object");
    nf_config_t cfg;
    char err[NF_CONFIG_ERRLEN];
    NF_CHECK_EQ(nf_config_load_buffer(&cfg, "m", "\xEF\xBB\xBF{}", 5, err, sizeof err), 0);
}

/* cJSON decodes "\u0000" into a NUL that ends the C string: "runtime\u0000x" was taken for
 * the section "runtime", "info\u0000x" for the level "info". An escaped backslash before "u0000"
 * is not an escape of NUL. */
static void test_nul_escape(void)
{
    const char *text = "{\n  \"runtime\\u0000x\": {\"shards\": 2}}";
    EXPECT_ERR(text, strlen(text),
               "mem.json:2:11: invalid JSON near '\\u0000x\": {\"shards\":' (\\u0000: strings "
               "cannot hold a NUL)");
    text = "{\"log\": {\"level\": \"info\\u0000x\"}}";
    EXPECT_ERR(text, strlen(text),
               "mem.json:1:24: invalid JSON near '\\u0000x\"}}' (\\u0000: strings cannot hold a "
               "NUL)");
    text = "{\"admin\": {\"listen\": \"a\\\\u0000\"}}";
    nf_config_t cfg;
    char err[NF_CONFIG_ERRLEN];
    NF_CHECK_EQ(nf_config_load_buffer(&cfg, "m", text, strlen(text), err, sizeof err), 0);
    NF_CHECK_STR(cfg.admin.listen, "a\\u0000");
}

/* Found by fuzz_config (struct round trip): the canonical JSON cut list entries to 1023 bytes,
 * so a longer URL in sources.urls came back shortened from `newsflow config` output. */
static void test_long_list_entry_round_trip(void)
{
    char text[1200], url[1101];
    memset(url, 'a', sizeof url - 1);
    url[sizeof url - 1] = '\0';
    memcpy(url, "http://x/", 9);
    snprintf(text, sizeof text, "{\"sources\": {\"urls\": [\"%s\", \"b\"]}}", url);
    nf_config_t a, b;
    char err[NF_CONFIG_ERRLEN];
    NF_REQUIRE(nf_config_load_buffer(&a, "m", text, strlen(text), err, sizeof err) == 0);
    char *json = nf_config_to_json(&a);
    NF_REQUIRE(json);
    NF_CHECK(strstr(json, url) != NULL);
    NF_CHECK_EQ(nf_config_load_buffer(&b, "m", json, strlen(json), err, sizeof err), 0);
    NF_CHECK_STR(b.sources.urls, a.sources.urls);
    free(json);
}

int main(void)
{
    NF_RUN(test_error_names_name_and_line);
    NF_RUN(test_not_nul_terminated);
    NF_RUN(test_failure_leaves_cfg);
    NF_RUN(test_environment_not_read);
    NF_RUN(test_too_large);
    NF_RUN(test_same_as_file);
    NF_RUN(test_fuzz_control_characters);
    NF_RUN(test_bom_line);
    NF_RUN(test_nul_escape);
    NF_RUN(test_long_list_entry_round_trip);
    return nf_test_report();
}
