/* test_event_batch.c — src/io/event_batch.c: a batch's spans against the values it was built
 * from (property test: random values with every character that could confuse a splitter, in an
 * array or NDJSON with random whitespace), and the errors that end a batch. */
#include "io/event_batch.h"
#include "io/events.h"
#include "nf_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static unsigned below(unsigned n)
{
    return (unsigned)(nf_test_xorshift(&rng) % n);
}

/* One JSON value that the splitter must keep whole: strings holding ',' ']' '}' '"' and
 * backslashes, nested arrays and objects. No newline outside strings (NDJSON). */
static size_t value(char *out, size_t cap, unsigned depth)
{
    static const char *const atoms[] = {
        "1",          "-2.5e3",   "true",    "null",         "\"a,b]\"",
        "\"q\\\"]\"", "\"\\\\\"", "\"}{[\"", "\"\\\\\\\"\"", "\"\\n,\""};
    unsigned pick = depth > 3 ? 0 : below(4);
    if (pick == 0 || cap < 64)
        return (size_t)snprintf(out, cap, "%s", atoms[below(10)]);
    bool obj = pick == 1;
    size_t at = (size_t)snprintf(out, cap, "%c", obj ? '{' : '[');
    unsigned n = below(4);
    for (unsigned i = 0; i < n && at + 64 < cap; i++) {
        if (i)
            out[at++] = ',';
        if (obj)
            at += (size_t)snprintf(out + at, cap - at, "\"k%u\" : ", i);
        at += value(out + at, cap - at, depth + 1);
    }
    at += (size_t)snprintf(out + at, cap - at, "%c", obj ? '}' : ']');
    return at;
}

static const char *const spaces[] = {"", " ", "\t", "\r\n", "  \n "};

static void test_property_spans(void)
{
    static char body[1 << 16], vals[64][1024];
    size_t vlen[64];
    for (int iter = 0; iter < 3000; iter++) {
        bool array = below(2);
        unsigned n = below(20);
        size_t at = 0;
        at += (size_t)snprintf(body + at, sizeof body - at, "%s%s", spaces[below(5)],
                               array ? "[" : "");
        for (unsigned i = 0; i < n; i++) {
            /* an NDJSON body whose first line were an array would read as an array body:
             * events are objects, so NDJSON lines are too */
            char v[900];
            value(v, sizeof v, below(2));
            vlen[i] = (size_t)snprintf(vals[i], sizeof vals[i], array ? "%s" : "{\"v\":%s}", v);
            const char *sep = array ? (i ? "," : "") : "\n";
            const char *sp = array ? spaces[below(5)] : " \t";
            at += (size_t)snprintf(body + at, sizeof body - at, "%s%s%s%s", sep, spaces[below(2)],
                                   vals[i], below(3) ? "" : sp);
            if (!array && below(4) == 0)
                at += (size_t)snprintf(body + at, sizeof body - at, "\n \n"); /* blank lines */
        }
        at += (size_t)snprintf(body + at, sizeof body - at, "%s%s", array ? "]" : "",
                               spaces[below(5)]);
        nf_event_batch_t b;
        char err[256];
        int rc = nf_event_batch_init(&b, body, at, err, sizeof err);
        if (!array && n == 0) {
            NF_CHECK(rc < 0 || nf_event_batch_next(&b, &(const char *){0}, &(size_t){0}, err,
                                                   sizeof err) == 0);
            continue;
        }
        NF_REQUIRE(rc == 0);
        unsigned got = 0;
        const char *ev;
        size_t len;
        while ((rc = nf_event_batch_next(&b, &ev, &len, err, sizeof err)) == 1) {
            if (got >= n || len != vlen[got] || memcmp(ev, vals[got], len) != 0) {
                fprintf(stderr, "iter %d: span %u differs\n  body: %.*s\n  span: %.*s\n", iter, got,
                        (int)at, body, (int)len, ev);
                nf_test_failed_checks++;
                return;
            }
            got++;
        }
        if (rc != 0 || got != n) {
            fprintf(stderr, "iter %d: rc %d after %u of %u (%s)\n  %.*s\n", iter, rc, got, n, err,
                    (int)at, body);
            nf_test_failed_checks++;
            return;
        }
    }
}

/* The whole batch is refused, with this message. */
static void refused(const char *body, int code, const char *msg)
{
    nf_event_batch_t b;
    char err[256] = "";
    const char *ev;
    size_t len;
    int rc = nf_event_batch_init(&b, body, strlen(body), err, sizeof err);
    while (rc >= 0 && (rc = nf_event_batch_next(&b, &ev, &len, err, sizeof err)) == 1)
        ;
    NF_CHECK_EQ(rc, -code);
    NF_CHECK_STR(err, msg);
    NF_CHECK_EQ(nf_event_batch_next(&b, &ev, &len, err, sizeof err), 0); /* done for good */
}

static void test_errors(void)
{
    refused("", NF_EVENT_E_NOT_OBJECT, "empty body; expected a JSON array or NDJSON of events");
    refused(" \n\t", NF_EVENT_E_NOT_OBJECT,
            "empty body; expected a JSON array or NDJSON of events");
    refused("[", NF_EVENT_E_SYNTAX, "invalid JSON array at byte 1: unterminated array");
    refused("[{}", NF_EVENT_E_SYNTAX, "invalid JSON array at byte 3: unterminated array");
    refused("[{},", NF_EVENT_E_SYNTAX, "invalid JSON array at byte 4: unterminated array");
    refused("[{},]", NF_EVENT_E_SYNTAX, "invalid JSON array at byte 4: expected a value after ','");
    refused("[,{}]", NF_EVENT_E_SYNTAX, "invalid JSON array at byte 1: expected a value");
    refused("[{\"a\":\"x]", NF_EVENT_E_SYNTAX, "invalid JSON array at byte 6: unterminated string");
    refused("[{}] x", NF_EVENT_E_SYNTAX, "invalid JSON array at byte 5: text after the array");
    refused("[{}]]", NF_EVENT_E_SYNTAX, "invalid JSON array at byte 4: text after the array");
    refused("[{}}]", NF_EVENT_E_SYNTAX, "invalid JSON array at byte 3: unbalanced '}'");
    char deep[128];
    memset(deep, '[', 40);
    deep[40] = 0;
    refused(deep, NF_EVENT_E_DEPTH, "invalid JSON at byte 33: nested deeper than 32 levels");
}

/* An empty array is a batch of none; elements are not judged here (the decoder does that). */
static void test_shapes(void)
{
    nf_event_batch_t b;
    char err[128];
    const char *ev;
    size_t len;
    NF_CHECK_EQ(nf_event_batch_init(&b, " [ ] ", 5, err, sizeof err), 0);
    NF_CHECK_EQ(nf_event_batch_next(&b, &ev, &len, err, sizeof err), 0);
    const char *body = "[1, \"x\" ,{\"user_id\":\"u\"}]";
    NF_CHECK_EQ(nf_event_batch_init(&b, body, strlen(body), err, sizeof err), 0);
    NF_CHECK_EQ(nf_event_batch_next(&b, &ev, &len, err, sizeof err), 1);
    NF_CHECK(len == 1 && ev[0] == '1');
    NF_CHECK_EQ(nf_event_batch_next(&b, &ev, &len, err, sizeof err), 1);
    NF_CHECK(len == 3 && memcmp(ev, "\"x\"", 3) == 0);
    NF_CHECK_EQ(nf_event_batch_next(&b, &ev, &len, err, sizeof err), 1);
    NF_CHECK(len == 15);
    NF_CHECK_EQ(nf_event_batch_next(&b, &ev, &len, err, sizeof err), 0);
    /* NDJSON: a broken line is one bad event, not a broken batch */
    body = "{\"a\":1}\r\n{oops\n\n  {\"b\":2}  ";
    NF_CHECK_EQ(nf_event_batch_init(&b, body, strlen(body), err, sizeof err), 0);
    NF_CHECK_EQ(nf_event_batch_next(&b, &ev, &len, err, sizeof err), 1);
    NF_CHECK(len == 7);
    NF_CHECK_EQ(nf_event_batch_next(&b, &ev, &len, err, sizeof err), 1);
    NF_CHECK(len == 5 && memcmp(ev, "{oops", 5) == 0);
    NF_CHECK_EQ(nf_event_batch_next(&b, &ev, &len, err, sizeof err), 1);
    NF_CHECK(len == 7 && memcmp(ev, "{\"b\":2}", 7) == 0);
    NF_CHECK_EQ(nf_event_batch_next(&b, &ev, &len, err, sizeof err), 0);
}

int main(void)
{
    NF_RUN(test_property_spans);
    NF_RUN(test_errors);
    NF_RUN(test_shapes);
    return nf_test_report();
}
