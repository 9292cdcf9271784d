/* Tests src/io/sink.c: several shards (threads) emitting into one JSON-lines file never
 * interleave inside a line and lose nothing; a failing write (/dev/full) reports -ENOSPC and
 * keeps the records for a retry; bad specs are refused with a message. */
#include "io/sink.h"
#include "nf_test.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define PER_SHARD 20000

typedef struct {
    nf_sink_t *s;
    unsigned shard;
} arg_t;

static void *emitter(void *p)
{
    arg_t *a = p;
    char value[256], key[32];
    for (int i = 0; i < PER_SHARD; i++) {
        int n = snprintf(value, sizeof value, "{\"shard\":%u,\"i\":%d,\"pad\":\"%0*d\"}", a->shard,
                         i, 100 + i % 50, 0);
        snprintf(key, sizeof key, "k%u-%d", a->shard, i);
        if (nf_sink_emit(a->s, a->shard, NF_TOPIC_ARTICLES, key, value, (size_t)n) != 0)
            abort();
    }
    nf_sink_flush(a->s, a->shard);
    return NULL;
}

static void test_lines_intact(void)
{
    char path[] = "/tmp/nf-sink-XXXXXX";
    int fd = mkstemp(path);
    NF_REQUIRE(fd >= 0);
    close(fd);
    char spec[64], err[256];
    snprintf(spec, sizeof spec, "jsonl:%s", path);
    nf_sink_t *s = nf_sink_open(spec, 3, err, sizeof err);
    NF_REQUIRE(s);
    pthread_t t[3];
    arg_t a[3];
    for (unsigned i = 0; i < 3; i++) {
        a[i] = (arg_t){s, i};
        pthread_create(&t[i], NULL, emitter, &a[i]);
    }
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    NF_CHECK_EQ(nf_sink_records(s, NF_TOPIC_ARTICLES), 3 * PER_SHARD);
    NF_CHECK_EQ(nf_sink_close(s), 0);

    FILE *f = fopen(path, "r");
    NF_REQUIRE(f);
    char line[1024];
    int next[3] = {0, 0, 0}, lines = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        cJSON *j = cJSON_Parse(line);
        if (!j || strcmp(cJSON_GetObjectItem(j, "topic")->valuestring, "articles") != 0) {
            bad++;
        } else {
            cJSON *v = cJSON_GetObjectItem(j, "value");
            int sh = cJSON_GetObjectItem(v, "shard")->valueint;
            int i = cJSON_GetObjectItem(v, "i")->valueint;
            if (i != next[sh]++) /* per-shard order kept */
                bad++;
        }
        cJSON_Delete(j);
        lines++;
    }
    fclose(f);
    unlink(path);
    NF_CHECK_EQ(bad, 0);
    NF_CHECK_EQ(lines, 3 * PER_SHARD);
}

static void test_write_error_keeps_records(void)
{
    char err[256];
    nf_sink_t *s = nf_sink_open("jsonl:/dev/full", 1, err, sizeof err);
    NF_REQUIRE(s);
    NF_CHECK_EQ(nf_sink_emit(s, 0, NF_TOPIC_FETCH_LOG, "k", "{}", 2), 0);
    NF_CHECK_EQ(nf_sink_flush(s, 0), -ENOSPC);
    NF_CHECK_EQ(nf_sink_flush(s, 0), -ENOSPC); /* still there to retry */
    NF_CHECK_EQ(nf_sink_close(s), -ENOSPC);
}

static void test_specs(void)
{
    char err[256] = "";
    NF_CHECK(nf_sink_open("kafka:x", 1, err, sizeof err) == NULL);
    NF_CHECK(strstr(err, "expected jsonl:PATH") != NULL);
    NF_CHECK(nf_sink_open("jsonl:/nonexistent/dir/x.jsonl", 1, err, sizeof err) == NULL);
    NF_CHECK(strstr(err, "/nonexistent/dir/x.jsonl") != NULL);
    nf_sink_t *s = nf_sink_open("none", 2, err, sizeof err);
    NF_REQUIRE(s);
    NF_CHECK_EQ(nf_sink_emit(s, 1, NF_TOPIC_ARTICLES, "k", "{}", 2), 0);
    NF_CHECK_EQ(nf_sink_records(s, NF_TOPIC_ARTICLES), 1);
    NF_CHECK_EQ(nf_sink_close(s), 0);
    NF_CHECK_STR(nf_topic_name(NF_TOPIC_DEAD_LETTERS), "dead-letters");
}

int main(void)
{
    NF_RUN(test_specs);
    NF_RUN(test_write_error_keeps_records);
    NF_RUN(test_lines_intact);
    return nf_test_report();
}
