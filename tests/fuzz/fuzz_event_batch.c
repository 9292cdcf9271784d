/* fuzz_event_batch.c — libFuzzer target for the HTTP edge's batch splitter
 * (src/io/event_batch.c), each span then decoded as the edge does (nf_read_event_decode).
 * abort()s when the contract in event_batch.h breaks:
 *   - a result is 1, 0 or -NF_EVENT_E_*; a failure leaves a non-empty message and ends the batch;
 *   - every span lies inside the body, after the previous one, without surrounding whitespace;
 *   - for a body cJSON parses as a whole JSON array (without control characters, which cJSON
 *     takes for whitespace) (nested no deeper than the splitter's cap),
 *     the splitter finds exactly its elements, each span printing to what cJSON parsed there. */
#include "io/event_batch.h"
#include "io/events.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *msg)
{
    fprintf(stderr, "fuzz_event_batch: %s\n  message: %s\n", what, msg ? msg : "(none)");
    abort();
}

static bool space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Splits the body; returns the number of spans, -1 on a batch error (depth: -2). */
static int split(const char *body, size_t size, const char **spans, size_t *lens, int cap)
{
    nf_event_batch_t b;
    char err[256];
    int rc = nf_event_batch_init(&b, body, size, err, sizeof err), n = 0;
    if (rc < 0)
        return err[0] ? -1 : (fail("init failed without a message", NULL), -1);
    const char *ev, *prev_end = body;
    size_t len;
    while ((rc = nf_event_batch_next(&b, &ev, &len, err, sizeof err)) == 1) {
        if (ev < prev_end || ev + len > body + size || len == 0)
            fail("a span lies outside the body or before the previous one", NULL);
        if (space(ev[0]) || space(ev[len - 1]))
            fail("a span is not trimmed", NULL);
        nf_read_event_t e;
        char derr[256];
        (void)nf_read_event_decode(ev, len, 65536, &e, derr, sizeof derr);
        if (n < cap) {
            spans[n] = ev;
            lens[n] = len;
        }
        n++;
        prev_end = ev + len;
    }
    if (rc < 0) {
        if (!err[0] || rc < -NF_EVENT_E__COUNT)
            fail("a batch error without a message, or of no known code", err);
        if (nf_event_batch_next(&b, &ev, &len, err, sizeof err) != 0)
            fail("the batch goes on after an error", NULL);
        return rc == -NF_EVENT_E_DEPTH ? -2 : -1;
    }
    if (rc != 0)
        fail("nf_event_batch_next returned neither 1, 0 nor an error", NULL);
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *spans[4096];
    static size_t lens[4096];
    const char *body = (const char *)data;
    int n = split(body, size, spans, lens, 4096);
    /* cJSON reads C strings and takes any control character for whitespace (JSON: 4 of them) */
    for (size_t i = 0; i < size; i++)
        if (data[i] < 0x20 && !space((char)data[i]))
            return 0;
    char *copy = malloc(size + 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    copy[size] = 0;
    cJSON *j = cJSON_ParseWithOpts(copy, NULL, 1);
    if (j && cJSON_IsArray(j) && n != -2) {
        if (n < 0)
            fail("a JSON array cJSON parses is refused by the splitter", copy);
        if (n != cJSON_GetArraySize(j))
            fail("the splitter and cJSON count different elements", copy);
        for (int i = 0; i < n && i < 4096; i++) {
            char *span = strndup(spans[i], lens[i]);
            /* printed, not cJSON_Compare: that looks a duplicate key up as its first */
            cJSON *a = cJSON_Parse(span);
            char *pa = a ? cJSON_PrintUnformatted(a) : NULL;
            char *pb = cJSON_PrintUnformatted(cJSON_GetArrayItem(j, i));
            if (!pa || !pb || strcmp(pa, pb) != 0)
                fail("a span is not the element cJSON parsed there", span);
            free(pa);
            free(pb);
            cJSON_Delete(a);
            free(span);
        }
    }
    cJSON_Delete(j);
    free(copy);
    return 0;
}
