/* test_log.c — log lines are JSON objects that log pipelines accept: no key twice (a "shard"
 * field names the shard in the header's place), no INT64 sentinels, errno with its name, and
 * the signal handler's line has the same shape and the right time. Each line is parsed back
 * with cJSON and its keys counted. */
#include "runtime/log.h"

#include "nf_test.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

static int g_fd[2];

/* The one line logged since the last call, parsed (NULL if none or not JSON). */
static cJSON *take_line(char *raw, size_t rawlen)
{
    ssize_t n = read(g_fd[0], raw, rawlen - 1);
    if (n <= 0)
        return NULL;
    raw[n] = '\0';
    NF_CHECK(raw[n - 1] == '\n');
    NF_CHECK(memchr(raw, '\n', (size_t)n - 1) == NULL); /* one line */
    return cJSON_Parse(raw);
}

/* How many times key occurs in the raw line's top-level object: cJSON keeps duplicates. */
static int key_count(const cJSON *o, const char *key)
{
    int n = 0;
    for (const cJSON *c = o ? o->child : NULL; c; c = c->next)
        if (c->string && strcmp(c->string, key) == 0)
            n++;
    return n;
}

/* No key of the object appears twice. */
static int duplicate_keys(const cJSON *o)
{
    int dups = 0;
    for (const cJSON *c = o ? o->child : NULL; c; c = c->next)
        if (key_count(o, c->string) > 1)
            dups++;
    return dups;
}

static void test_shard_field_fills_the_header(void)
{
    char raw[4096];
    nf_log(NF_LOG_INFO, "kafka", "partition assigned", NF_LS("topic", "read-events"),
           NF_LI("partition", 3), NF_LI("shard", 1), NF_LEND);
    cJSON *o = take_line(raw, sizeof raw);
    NF_REQUIRE(o != NULL);
    NF_CHECK_EQ(duplicate_keys(o), 0);
    NF_CHECK_EQ(key_count(o, "shard"), 1);
    NF_CHECK_EQ(cJSON_GetObjectItem(o, "shard")->valueint, 1);
    NF_CHECK(cJSON_GetObjectItem(o, "thread_shard") == NULL); /* not a shard thread */
    cJSON_Delete(o);

    /* on shard 2, a line about shard 0 keeps both, under different keys */
    nf_log_set_thread_shard(2);
    nf_log(NF_LOG_INFO, "state", "dedup set loaded", NF_LI("shard", 0), NF_LEND);
    nf_log_set_thread_shard(-1);
    o = take_line(raw, sizeof raw);
    NF_REQUIRE(o != NULL);
    NF_CHECK_EQ(duplicate_keys(o), 0);
    NF_CHECK_EQ(cJSON_GetObjectItem(o, "shard")->valueint, 0);
    NF_CHECK_EQ(cJSON_GetObjectItem(o, "thread_shard")->valueint, 2);
    cJSON_Delete(o);
}

static void test_no_key_twice(void)
{
    char raw[4096];
    nf_log(NF_LOG_WARN, "x", "m", NF_LS("msg", "shadow"), NF_LI("n", 1), NF_LI("n", 2),
           NF_LS("level", "x"), NF_LI("n", 3), NF_LI("n_2", 4), NF_LI("errno", 2),
           NF_LI("errno", 5), NF_LEND);
    cJSON *o = take_line(raw, sizeof raw);
    NF_REQUIRE(o != NULL);
    NF_CHECK_EQ(duplicate_keys(o), 0);
    NF_CHECK_STR(cJSON_GetObjectItem(o, "msg")->valuestring, "m");
    NF_CHECK_STR(cJSON_GetObjectItem(o, "level")->valuestring, "warn");
    NF_CHECK_STR(cJSON_GetObjectItem(o, "msg_2")->valuestring, "shadow");
    NF_CHECK_EQ(cJSON_GetObjectItem(o, "n")->valueint, 1);
    NF_CHECK_EQ(cJSON_GetObjectItem(o, "n_2")->valueint, 2);
    NF_CHECK_STR(cJSON_GetObjectItem(o, "level_2")->valuestring, "x");
    NF_CHECK_EQ(cJSON_GetObjectItem(o, "n_3")->valueint, 3);
    NF_CHECK_EQ(cJSON_GetObjectItem(o, "n_2_2")->valueint, 4); /* n_2 was taken by then */
    NF_CHECK_STR(cJSON_GetObjectItem(o, "errno_name")->valuestring, "ENOENT");
    NF_CHECK_EQ(cJSON_GetObjectItem(o, "errno_2")->valueint, 5);
    NF_CHECK_STR(cJSON_GetObjectItem(o, "errno_name_2")->valuestring, "EIO");
    cJSON_Delete(o);
}

static void test_sentinels_and_errno(void)
{
    char raw[4096];
    nf_log(NF_LOG_ERROR, "trending", "merger restored", NF_LI("done_end", INT64_MIN),
           NF_LI("until", INT64_MAX), NF_LI("errno", 5), NF_LI("zero", 0), NF_LEND);
    cJSON *o = take_line(raw, sizeof raw);
    NF_REQUIRE(o != NULL);
    NF_CHECK(cJSON_IsNull(cJSON_GetObjectItem(o, "done_end")));
    NF_CHECK(cJSON_IsNull(cJSON_GetObjectItem(o, "until")));
    NF_CHECK_EQ(cJSON_GetObjectItem(o, "errno")->valueint, 5);
    NF_CHECK_STR(cJSON_GetObjectItem(o, "errno_name")->valuestring, "EIO");
    NF_CHECK_EQ(cJSON_GetObjectItem(o, "zero")->valueint, 0);
    NF_CHECK_EQ(duplicate_keys(o), 0);
    cJSON_Delete(o);
}

static void test_signal_safe_line(void)
{
    char raw[4096];
    time_t before = time(NULL);
    nf_log_signal_safe(NF_LOG_WARN, "main", "second signal: \"exiting\"");
    time_t after = time(NULL);
    cJSON *o = take_line(raw, sizeof raw);
    NF_REQUIRE(o != NULL);
    NF_CHECK_STR(cJSON_GetObjectItem(o, "level")->valuestring, "warn");
    NF_CHECK_STR(cJSON_GetObjectItem(o, "component")->valuestring, "main");
    NF_CHECK_STR(cJSON_GetObjectItem(o, "msg")->valuestring, "second signal: \"exiting\"");
    NF_CHECK(cJSON_IsNull(cJSON_GetObjectItem(o, "shard")));
    /* the hand-made date equals gmtime's, to the second: one of the seconds from before to
     * after + 1 (time() reads a coarse clock that can lag the log's by a tick, and a loaded
     * machine can take more than a second between the two reads) */
    const char *ts = cJSON_GetObjectItem(o, "ts")->valuestring;
    NF_REQUIRE(ts && strlen(ts) == 24 && ts[23] == 'Z');
    bool matched = false;
    for (time_t t = before; t <= after + 1 && !matched; t++) {
        char want[32];
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(want, sizeof want, "%Y-%m-%dT%H:%M:%S", &tm);
        matched = strncmp(ts, want, 19) == 0;
    }
    NF_CHECK(matched);
    cJSON_Delete(o);
}

int main(void)
{
    if (pipe(g_fd) != 0)
        return 1;
    nf_log_set_fd(g_fd[1]);
    NF_RUN(test_shard_field_fills_the_header);
    NF_RUN(test_no_key_twice);
    NF_RUN(test_sentinels_and_errno);
    NF_RUN(test_signal_safe_line);
    return nf_test_report();
}
