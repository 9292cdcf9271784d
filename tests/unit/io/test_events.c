/* Tests src/io/events.c: read-events and sources records decoded (every field form, escapes,
 * surrogate pairs, unknown nested fields, the depth cap), every error class with its exact
 * message, the computed event_id against digests taken with sha256sum, a round trip of random
 * events serialized here, random mutations of valid records (run under ASan: nothing may crash
 * or read outside the input), and the dead-letters value. */
#include "feed/text.h"
#include "io/events.h"
#include "nf_test.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static int decode(const char *json, nf_read_event_t *e, char *err, size_t errlen)
{
    return nf_read_event_decode(json, strlen(json), 65536, e, err, errlen);
}

/* ---------------------------------------------------------------- good events */

static void test_good_string_ts(void)
{
    nf_read_event_t e;
    char err[256] = "untouched";
    const char *j = "{\"event_id\":\"ev-1\",\"user_id\":\"u1\",\"article_id\":\"a1\","
                    "\"session_id\":\"s1\",\"ts\":\"2024-02-29T12:34:56.789Z\"}";
    NF_REQUIRE(decode(j, &e, err, sizeof err) == 0);
    NF_CHECK_STR(err, "");
    NF_CHECK_STR(e.user_id, "u1");
    NF_CHECK_STR(e.article_id, "a1");
    NF_CHECK_STR(e.session_id, "s1");
    NF_CHECK_STR(e.event_id, "ev-1");
    NF_CHECK(e.event_id_given);
    NF_CHECK_EQ(e.ts_ms, 1709210096789LL);
}

static void test_good_epoch_ts(void)
{
    nf_read_event_t e;
    char err[256];
    const char *j = " \r\n\t{ \"ts\" :\t1709210096789 ,\n\"article_id\" : \"a1\" , \"user_id\":"
                    "\"u1\" } \n";
    NF_REQUIRE(decode(j, &e, err, sizeof err) == 0);
    NF_CHECK_EQ(e.ts_ms, 1709210096789LL);
    NF_CHECK_STR(e.session_id, "");
    NF_CHECK(!e.event_id_given);
    /* Both ends of the range. */
    NF_CHECK(decode("{\"user_id\":\"u\",\"article_id\":\"a\",\"ts\":0}", &e, err, sizeof err) == 0);
    NF_CHECK_EQ(e.ts_ms, 0);
    NF_CHECK(decode("{\"user_id\":\"u\",\"article_id\":\"a\",\"ts\":253402300799999}", &e, err,
                    sizeof err) == 0);
    NF_CHECK_EQ(e.ts_ms, NF_EVENT_TS_MAX);
    /* Not NUL-terminated: only len bytes are read. */
    const char *k = "{\"user_id\":\"u\",\"article_id\":\"a\",\"ts\":12}GARBAGE";
    NF_CHECK(nf_read_event_decode(k, strlen(k) - 7, 0, &e, err, sizeof err) == 0);
    NF_CHECK_EQ(e.ts_ms, 12);
}

static void test_event_id_computed(void)
{
    nf_read_event_t e;
    char err[256];
    /* printf 'u1\0a1\0s1\0' | sha256sum */
    NF_REQUIRE(decode("{\"user_id\":\"u1\",\"article_id\":\"a1\",\"session_id\":\"s1\",\"ts\":1}",
                      &e, err, sizeof err) == 0);
    NF_CHECK(!e.event_id_given);
    NF_CHECK_STR(e.event_id, "a53c42e4ccd4d78ad5580561a4c3af676673baccf1c19ccf7f32651065100917");
    /* printf 'u1\0a1\0\0' | sha256sum: absent, null and "" session_id are the same */
    static const char *const nosession[] = {
        "{\"user_id\":\"u1\",\"article_id\":\"a1\",\"ts\":1}",
        "{\"user_id\":\"u1\",\"article_id\":\"a1\",\"session_id\":null,\"ts\":1}",
        "{\"user_id\":\"u1\",\"article_id\":\"a1\",\"session_id\":\"\",\"ts\":1,\"event_id\":null}",
    };
    for (size_t i = 0; i < sizeof nosession / sizeof nosession[0]; i++) {
        NF_REQUIRE(decode(nosession[i], &e, err, sizeof err) == 0);
        NF_CHECK(!e.event_id_given);
        NF_CHECK_STR(e.event_id,
                     "54ebb983e725b56c92c58b9e03742e1a0ac25721444fbb4081e779e7db9cd065");
    }
    /* printf 'user-\xc3\xa9\xf0\x9f\x98\x80\0art-42\0sess\0' | sha256sum: the digest is over
     * the decoded UTF-8, however the JSON spelled it. */
    NF_REQUIRE(decode("{\"user_id\":\"user-\\u00e9\\ud83d\\ude00\",\"article_id\":\"art-42\","
                      "\"session_id\":\"sess\",\"ts\":1}",
                      &e, err, sizeof err) == 0);
    NF_CHECK_STR(e.event_id, "c736d48599b28ee35ee5d0dc3092aa7477a24be291424f0e1850bab0f467368a");
    char id[65];
    nf_read_event_id("user-\xc3\xa9\xf0\x9f\x98\x80", "art-42", "sess", NF_READ_KIND_READ, 0, id);
    NF_CHECK_STR(id, e.event_id);
}

static void test_escapes(void)
{
    nf_read_event_t e;
    char err[256];
    NF_REQUIRE(decode("{\"user_id\":\"q\\\"b\\\\s\\/b\\bf\\fn\\nr\\rt\\t\","
                      "\"article_id\":\"\\u00e9\\u20AC\\uD83D\\uDE00\\u0041\","
                      "\"session_id\":\"raw \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\",\"ts\":1}",
                      &e, err, sizeof err) == 0);
    NF_CHECK_STR(e.user_id, "q\"b\\s/b\bf\fn\nr\rt\t");
    NF_CHECK_STR(e.article_id, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"
                               "A");
    NF_CHECK_STR(e.session_id, "raw \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    /* Escaped keys are the same keys. */
    NF_REQUIRE(decode("{\"\\u0075ser_id\":\"u\",\"article\\u005fid\":\"a\",\"\\u0074s\":5}", &e,
                      err, sizeof err) == 0);
    NF_CHECK_STR(e.user_id, "u");
    NF_CHECK_EQ(e.ts_ms, 5);
    /* U+10FFFF, the last code point, and U+FFFF. */
    NF_REQUIRE(decode("{\"user_id\":\"\\udbff\\udfff\\uffff\",\"article_id\":\"a\",\"ts\":1}", &e,
                      err, sizeof err) == 0);
    NF_CHECK_STR(e.user_id, "\xf4\x8f\xbf\xbf\xef\xbf\xbf");
}

static void test_unknown_fields_skipped(void)
{
    nf_read_event_t e;
    char err[256];
    const char *j =
        "{\"meta\":{\"a\":[1,2,{\"b\":[[],{}]},\"x\\\"y\",-0.5e+10,true,false,null],\"c\":{}},"
        "\"user_id\":\"u\",\"n\":-12.25E-3,\"list\":[],\"t\":true,\"f\":false,\"z\":null,"
        "\"user_idx\":1,\"\\u0000user_id\":2,"
        "\"a-very-long-field-name-that-no-decoder-knows-about\":\"\\u0000\\ud83d\\ude00\","
        "\"article_id\":\"a\",\"ts\":\"2024-02-29T12:34:56.789+02:00\",\"deep\":[[[[[[1]]]]]]}";
    NF_REQUIRE(decode(j, &e, err, sizeof err) == 0);
    NF_CHECK_STR(e.user_id, "u");
    NF_CHECK_STR(e.article_id, "a");
    NF_CHECK_EQ(e.ts_ms, 1709202896789LL);
    /* Duplicates among unknown fields are not looked for. */
    NF_CHECK(decode("{\"x\":1,\"x\":2,\"user_id\":\"u\",\"article_id\":\"a\",\"ts\":1}", &e, err,
                    sizeof err) == 0);
}

static char *nested(int levels, char open, char close)
{
    /* {"user_id":"u","article_id":"a","ts":1,"x":<levels brackets>} */
    static char buf[512];
    int n = snprintf(buf, sizeof buf, "{\"user_id\":\"u\",\"article_id\":\"a\",\"ts\":1,\"x\":");
    for (int i = 0; i < levels; i++)
        buf[n++] = open;
    for (int i = 0; i < levels; i++)
        buf[n++] = close;
    buf[n++] = '}';
    buf[n] = '\0';
    return buf;
}

static void test_depth_cap(void)
{
    nf_read_event_t e;
    char err[256];
    /* The record is level 1, so a field's value may nest NF_EVENT_MAX_DEPTH - 1 levels. */
    NF_CHECK(decode(nested(NF_EVENT_MAX_DEPTH - 1, '[', ']'), &e, err, sizeof err) == 0);
    NF_CHECK_EQ(decode(nested(NF_EVENT_MAX_DEPTH, '[', ']'), &e, err, sizeof err),
                -NF_EVENT_E_DEPTH);
    NF_CHECK_STR(err, "invalid JSON at byte 74: nested deeper than 32 levels");
    /* Far too deep: still refused, no stack growth (the walk stops at the cap). */
    NF_CHECK_EQ(decode(nested(200, '[', ']'), &e, err, sizeof err), -NF_EVENT_E_DEPTH);
    char obj[4096];
    int n = snprintf(obj, sizeof obj, "{\"user_id\":\"u\",\"article_id\":\"a\",\"ts\":1,\"x\":");
    for (int i = 0; i < 100; i++)
        n += snprintf(obj + n, sizeof obj - (size_t)n, "{\"k\":");
    NF_CHECK_EQ(decode(obj, &e, err, sizeof err), -NF_EVENT_E_DEPTH);
}

/* ---------------------------------------------------------------- errors */

typedef struct {
    const char *json;
    int rc;
    const char *msg;
} bad_t;

#define OK_FIELDS "\"user_id\":\"u\",\"article_id\":\"a\",\"ts\":1"

static const bad_t bad_events[] = {
    /* not valid JSON */
    {"{", -NF_EVENT_E_SYNTAX,
     "invalid JSON at byte 1: expected '\"' to start a field name, got end of input"},
    {"   ", -NF_EVENT_E_SYNTAX, "invalid JSON at byte 3: expected a JSON object, got end of input"},
    {"x", -NF_EVENT_E_SYNTAX, "invalid JSON at byte 0: expected '{', got 'x'"},
    {"\xef\xbb\xbf{}", -NF_EVENT_E_SYNTAX, "invalid JSON at byte 0: expected '{', got byte 0xef"},
    {"{" OK_FIELDS "", -NF_EVENT_E_SYNTAX,
     "invalid JSON at byte 38: expected ',' or '}' after a field, got end of input"},
    {"{" OK_FIELDS ",}", -NF_EVENT_E_SYNTAX,
     "invalid JSON at byte 39: expected '\"' to start a field name, got '}'"},
    {"{" OK_FIELDS "} x", -NF_EVENT_E_SYNTAX,
     "invalid JSON at byte 40: expected end of input after the object, got 'x'"},
    {"{" OK_FIELDS "}{}", -NF_EVENT_E_SYNTAX,
     "invalid JSON at byte 39: expected end of input after the object, got '{'"},
    {"{\"user_id\" \"u\"}", -NF_EVENT_E_SYNTAX,
     "invalid JSON at byte 11: expected ':' after the field name, got '\"'"},
    {"{\"user_id\":}", -NF_EVENT_E_SYNTAX, "invalid JSON at byte 11: expected a value, got '}'"},
    {"{\"x\":}", -NF_EVENT_E_SYNTAX, "invalid JSON at byte 5: expected a value, got '}'"},
    {"{'user_id':1}", -NF_EVENT_E_SYNTAX,
     "invalid JSON at byte 1: expected '\"' to start a field name, got '''"},
    {"{\"x\":tru}", -NF_EVENT_E_SYNTAX, "invalid JSON at byte 8: expected 'true', got '}'"},
    {"{\"x\":nul", -NF_EVENT_E_SYNTAX, "invalid JSON at byte 8: expected 'null', got end of input"},
    {"{\"x\":01}", -NF_EVENT_E_SYNTAX,
     "invalid JSON at byte 6: expected ',' or '}' after a field, got '1'"},
    {"{\"x\":1.}", -NF_EVENT_E_SYNTAX,
     "invalid JSON at byte 7: expected a digit after '.', got '}'"},
    {"{\"x\":-}", -NF_EVENT_E_SYNTAX, "invalid JSON at byte 6: expected a digit, got '}'"},
    {"{\"x\":1e}", -NF_EVENT_E_SYNTAX,
     "invalid JSON at byte 7: expected a digit in the exponent, got '}'"},
    {"{\"x\":+1}", -NF_EVENT_E_SYNTAX, "invalid JSON at byte 5: expected a value, got '+'"},
    {"{\"x\":[1,]}", -NF_EVENT_E_SYNTAX, "invalid JSON at byte 8: expected a value, got ']'"},
    {"{\"x\":[1}", -NF_EVENT_E_SYNTAX,
     "invalid JSON at byte 7: expected ',' or ']' after an array element, got '}'"},
    {"{\"x\":\"a\tb\"}", -NF_EVENT_E_SYNTAX,
     "invalid JSON at byte 7: control character 0x09 in a string (must be escaped)"},
    {"{\"x\":\"ab", -NF_EVENT_E_SYNTAX,
     "invalid JSON at byte 8: expected '\"' to end the string, got end of input"},
    {"{\"x\":\"\\q\"}", -NF_EVENT_E_SYNTAX,
     "invalid JSON at byte 7: expected one of \" \\ / b f n r t u after '\\', got 'q'"},
    {"{\"x\":\"\\u12G4\"}", -NF_EVENT_E_SYNTAX,
     "invalid JSON at byte 8: expected 4 hex digits after \\u, got '1'"},
    {"{\"x\":\"\\", -NF_EVENT_E_SYNTAX,
     "invalid JSON at byte 7: expected an escape character after '\\', got end of input"},
    /* invalid UTF-8 */
    {"{\"x\":\"\xc3(\"}", -NF_EVENT_E_UTF8, "invalid UTF-8 at byte 6 (byte 0xc3)"},
    {"{\"x\":\"\xc0\xaf\"}", -NF_EVENT_E_UTF8, "invalid UTF-8 at byte 6 (byte 0xc0)"},
    {"{\"x\":\"\xed\xa0\x80\"}", -NF_EVENT_E_UTF8, "invalid UTF-8 at byte 6 (byte 0xed)"},
    {"{\"x\":\"\xf4\x90\x80\x80\"}", -NF_EVENT_E_UTF8, "invalid UTF-8 at byte 6 (byte 0xf4)"},
    {"{\"user_id\":\"\\ud800\"}", -NF_EVENT_E_UTF8,
     "invalid UTF-8 at byte 12: unpaired surrogate \\ud800"},
    {"{\"user_id\":\"\\ud800\\u0041\"}", -NF_EVENT_E_UTF8,
     "invalid UTF-8 at byte 12: unpaired surrogate \\ud800"},
    {"{\"user_id\":\"a\\udc00\"}", -NF_EVENT_E_UTF8,
     "invalid UTF-8 at byte 13: unpaired surrogate \\udc00"},
    {"{\"\xff\":1}", -NF_EVENT_E_UTF8, "invalid UTF-8 at byte 2 (byte 0xff)"},
    /* top level not an object */
    {"", -NF_EVENT_E_NOT_OBJECT, "empty value; expected a JSON object"},
    {"[1,2]", -NF_EVENT_E_NOT_OBJECT, "top level is an array; expected a JSON object"},
    {" \"u\" ", -NF_EVENT_E_NOT_OBJECT, "top level is a string; expected a JSON object"},
    {"null", -NF_EVENT_E_NOT_OBJECT, "top level is null; expected a JSON object"},
    {"42", -NF_EVENT_E_NOT_OBJECT, "top level is a number; expected a JSON object"},
    {"[1,", -NF_EVENT_E_SYNTAX, "invalid JSON at byte 3: expected a value, got end of input"},
    /* duplicate */
    {"{\"user_id\":\"u\",\"article_id\":\"a\",\"ts\":1,\"user_id\":\"v\"}", -NF_EVENT_E_DUPLICATE,
     "duplicate field \"user_id\" at byte 39 (first at byte 1)"},
    {"{\"ts\":1,\"user_id\":\"u\",\"article_id\":\"a\",\"t\\u0073\":\"x\"}", -NF_EVENT_E_DUPLICATE,
     "duplicate field \"ts\" at byte 39 (first at byte 1)"},
    /* missing */
    {"{}", -NF_EVENT_E_MISSING, "missing required field \"user_id\""},
    {"{\"user_id\":\"u\",\"ts\":1}", -NF_EVENT_E_MISSING, "missing required field \"article_id\""},
    {"{\"user_id\":\"u\",\"article_id\":\"a\"}", -NF_EVENT_E_MISSING,
     "missing required field \"ts\""},
    /* wrong type */
    {"{\"user_id\":42,\"article_id\":\"a\",\"ts\":1}", -NF_EVENT_E_TYPE,
     "field \"user_id\": expected a string, got a number"},
    {"{\"user_id\":null,\"article_id\":\"a\",\"ts\":1}", -NF_EVENT_E_TYPE,
     "field \"user_id\": expected a string, got null"},
    {"{" OK_FIELDS ",\"session_id\":{\"a\":1}}", -NF_EVENT_E_TYPE,
     "field \"session_id\": expected a string, got an object"},
    {"{" OK_FIELDS ",\"event_id\":[]}", -NF_EVENT_E_TYPE,
     "field \"event_id\": expected a string, got an array"},
    {"{\"user_id\":\"u\",\"article_id\":\"a\",\"ts\":true}", -NF_EVENT_E_TYPE,
     "field \"ts\": expected an RFC 3339 date-time string or integer epoch milliseconds, got a "
     "boolean"},
    {"{\"user_id\":\"u\",\"article_id\":\"a\",\"ts\":null}", -NF_EVENT_E_TYPE,
     "field \"ts\": expected an RFC 3339 date-time string or integer epoch milliseconds, got "
     "null"},
    /* empty */
    {"{\"user_id\":\"\",\"article_id\":\"a\",\"ts\":1}", -NF_EVENT_E_EMPTY,
     "field \"user_id\" is empty"},
    {"{\"user_id\":\"u\",\"article_id\":\"\",\"ts\":1}", -NF_EVENT_E_EMPTY,
     "field \"article_id\" is empty"},
    {"{" OK_FIELDS ",\"event_id\":\"\"}", -NF_EVENT_E_EMPTY, "field \"event_id\" is empty"},
    /* U+0000 in an id */
    {"{\"user_id\":\"a\\u0000b\",\"article_id\":\"a\",\"ts\":1}", -NF_EVENT_E_VALUE,
     "field \"user_id\" contains U+0000"},
    /* ts */
    {"{\"user_id\":\"u\",\"article_id\":\"a\",\"ts\":\"2024-13-01T00:00:00Z\"}", -NF_EVENT_E_TS,
     "field \"ts\": \"2024-13-01T00:00:00Z\" is not an RFC 3339 date-time"},
    {"{\"user_id\":\"u\",\"article_id\":\"a\",\"ts\":\"yesterday\\nat noon\"}", -NF_EVENT_E_TS,
     "field \"ts\": \"yesterday?at noon\" is not an RFC 3339 date-time"},
    {"{\"user_id\":\"u\",\"article_id\":\"a\",\"ts\":\"0001-01-01T00:00:00Z\"}", -NF_EVENT_E_TS,
     "field \"ts\": \"0001-01-01T00:00:00Z\" is out of range (years 1970..9999)"},
    {"{\"user_id\":\"u\",\"article_id\":\"a\",\"ts\":1.5e12}", -NF_EVENT_E_TS,
     "field \"ts\": 1.5e12 is not integer epoch milliseconds"},
    {"{\"user_id\":\"u\",\"article_id\":\"a\",\"ts\":1700000000000.0}", -NF_EVENT_E_TS,
     "field \"ts\": 1700000000000.0 is not integer epoch milliseconds"},
    {"{\"user_id\":\"u\",\"article_id\":\"a\",\"ts\":-5}", -NF_EVENT_E_TS,
     "field \"ts\": -5 is out of range (years 1970..9999)"},
    {"{\"user_id\":\"u\",\"article_id\":\"a\",\"ts\":253402300800000}", -NF_EVENT_E_TS,
     "field \"ts\": 253402300800000 is out of range (years 1970..9999)"},
    {"{\"user_id\":\"u\",\"article_id\":\"a\",\"ts\":99999999999999999999999}", -NF_EVENT_E_TS,
     "field \"ts\": 99999999999999999999999 is out of range (years 1970..9999)"},
    /* precedence: syntax beats an earlier field error; the first field error wins */
    {"{\"user_id\":1,\"article_id\":\"a\",\"ts\":1", -NF_EVENT_E_SYNTAX,
     "invalid JSON at byte 36: expected ',' or '}' after a field, got end of input"},
    {"{\"user_id\":\"\",\"article_id\":2,\"ts\":1}", -NF_EVENT_E_EMPTY,
     "field \"user_id\" is empty"},
    {"{\"ts\":true,\"user_id\":\"\"}", -NF_EVENT_E_TYPE,
     "field \"ts\": expected an RFC 3339 date-time string or integer epoch milliseconds, got a "
     "boolean"},
};

static void test_errors(void)
{
    for (size_t i = 0; i < sizeof bad_events / sizeof bad_events[0]; i++) {
        const bad_t *b = &bad_events[i];
        nf_read_event_t e;
        char err[256];
        memset(err, 'X', sizeof err);
        int rc = decode(b->json, &e, err, sizeof err);
        if (rc != b->rc || strcmp(err, b->msg) != 0) {
            fprintf(stderr, "case %zu: %s\n  rc %d (%s), want %d\n  got  %s\n  want %s\n", i,
                    b->json, rc, nf_event_error_name(rc), b->rc, err, b->msg);
            nf_test_failed_checks++;
        }
    }
}

static void test_too_big_and_too_long(void)
{
    nf_read_event_t e;
    char err[256], j[1024];
    snprintf(j, sizeof j, "{" OK_FIELDS "}");
    NF_CHECK_EQ(nf_read_event_decode(j, strlen(j), strlen(j), &e, err, sizeof err), 0);
    NF_CHECK_EQ(nf_read_event_decode(j, strlen(j), strlen(j) - 1, &e, err, sizeof err),
                -NF_EVENT_E_TOO_BIG);
    NF_CHECK_STR(err, "record is 39 bytes, over the limit of 38");
    /* 128 bytes fit, 129 do not; escapes count by what they decode to. */
    char id[NF_EVENT_FIELD_MAX + 2];
    memset(id, 'i', sizeof id);
    id[NF_EVENT_FIELD_MAX] = '\0';
    snprintf(j, sizeof j, "{\"user_id\":\"%s\",\"article_id\":\"a\",\"ts\":1}", id);
    NF_CHECK_EQ(decode(j, &e, err, sizeof err), 0);
    NF_CHECK_STR(e.user_id, id);
    snprintf(j, sizeof j, "{\"user_id\":\"u\",\"article_id\":\"%s\\u00e9\",\"ts\":1}", id + 1);
    NF_CHECK_EQ(decode(j, &e, err, sizeof err), -NF_EVENT_E_TOO_LONG);
    NF_CHECK_STR(err, "field \"article_id\" is too long: 129 bytes, max 128");
    id[NF_EVENT_FIELD_MAX] = 'i';
    id[NF_EVENT_FIELD_MAX + 1] = '\0';
    snprintf(j, sizeof j, "{\"user_id\":\"u\",\"article_id\":\"a\",\"ts\":1,\"session_id\":\"%s\"}",
             id);
    NF_CHECK_EQ(decode(j, &e, err, sizeof err), -NF_EVENT_E_TOO_LONG);
    NF_CHECK_STR(err, "field \"session_id\" is too long: 129 bytes, max 128");
    /* A long bad ts is quoted in part, cut on a code point boundary. */
    snprintf(j, sizeof j, "{\"user_id\":\"u\",\"article_id\":\"a\",\"ts\":\"%s\"}",
             "2024-01-01 is the day \xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
             "\xc3\xa9\xc3\xa9\xc3\xa9 and so on and on and on and on and on and on and on");
    NF_CHECK_EQ(decode(j, &e, err, sizeof err), -NF_EVENT_E_TS);
    NF_CHECK_STR(err, "field \"ts\": \"2024-01-01 is the day "
                      "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
                      "...\" is not an RFC 3339 date-time");
}

static void test_small_err_buffer(void)
{
    nf_read_event_t e;
    char err[8];
    memset(err, 'X', sizeof err);
    NF_CHECK_EQ(decode("{}", &e, err, sizeof err), -NF_EVENT_E_MISSING);
    NF_CHECK_STR(err, "missing");
    NF_CHECK_EQ(decode("{}", &e, NULL, 0), -NF_EVENT_E_MISSING);
    NF_CHECK_EQ(decode("[", &e, NULL, 0), -NF_EVENT_E_SYNTAX);
    NF_CHECK_STR(nf_event_error_name(-NF_EVENT_E_TS), "ts");
    NF_CHECK_STR(nf_event_error_name(0), "ok");
    NF_CHECK_STR(nf_event_error_name(-99), "unknown");
    NF_CHECK_STR(nf_event_error_name(3), "unknown");
}

/* ---------------------------------------------------------------- timestamps */

static void test_ts_forms(void)
{
    static const struct {
        const char *ts;
        int64_t ms; /* -1: not RFC 3339, -2: out of range */
    } cases[] = {
        {"2024-02-29T12:34:56.789Z", 1709210096789LL},
        {"2024-02-29t12:34:56.789z", 1709210096789LL},
        {"2024-02-29T12:34:56.789+02:00", 1709202896789LL},
        {"2024-02-29T12:34:56.7891234Z", 1709210096789LL},
        {"2024-02-29T12:34:56.7Z", 1709210096700LL},
        {"1970-01-01T00:00:00Z", 0},
        {"1969-12-31T23:00:00-01:00", 0},
        {"9999-12-31T23:59:59.999Z", 253402300799999LL},
        {"2000-01-01T00:00:00-05:30", 946704600000LL},
        {"2016-12-31T23:59:60Z", 1483228800000LL}, /* leap second: the next minute's :00 */
        {"1969-12-31T23:59:59.999Z", -2},
        {"9999-12-31T23:59:59-00:01", -2},
        {"0000-01-01T00:00:00Z", -2},
        {"2023-02-29T00:00:00Z", -1},
        {"2024-04-31T00:00:00Z", -1},
        {"2024-01-01T24:00:00Z", -1},
        {"2024-01-01T23:60:00Z", -1},
        {"2024-01-01T23:59:61Z", -1},
        {"2024-01-01T00:00:00", -1},
        {"2024-01-01 00:00:00Z", -1},
        {"2024-01-01T00:00:00.Z", -1},
        {"2024-01-01T00:00:00+0200", -1},
        {"2024-01-01T00:00:00+24:00", -1},
        {"2024-01-01T00:00:00+02:60", -1},
        {"2024-01-01T00:00:00ZZ", -1},
        {"2024-1-01T00:00:00Z", -1},
        {"2024-01-01", -1},
        {"Thu, 29 Feb 2024 12:34:56 GMT", -1},
        {"+2024-01-01T00:00:00Z", -1},
        {"", -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char j[256], err[256];
        nf_read_event_t e;
        snprintf(j, sizeof j, "{\"user_id\":\"u\",\"article_id\":\"a\",\"ts\":\"%s\"}",
                 cases[i].ts);
        int rc = decode(j, &e, err, sizeof err);
        bool ok = cases[i].ms >= 0
                      ? rc == 0 && e.ts_ms == cases[i].ms
                      : rc == -NF_EVENT_E_TS &&
                            strstr(err, cases[i].ms == -1 ? "is not an RFC 3339 date-time"
                                                          : "is out of range") != NULL;
        if (!ok) {
            fprintf(stderr, "ts case \"%s\": rc %d ms %lld err %s\n", cases[i].ts, rc,
                    (long long)e.ts_ms, err);
            nf_test_failed_checks++;
        }
    }
}

/* ---------------------------------------------------------------- sources */

static int src_decode(const char *key, const char *value, nf_source_record_t *r, char *err)
{
    return nf_source_record_decode(key, key ? strlen(key) : 0, value, value ? strlen(value) : 0,
                                   65536, r, err, 256);
}

static void test_sources(void)
{
    nf_source_record_t r;
    char err[256];
    NF_REQUIRE(src_decode("src-1",
                          "{\"url\":\"https://example.com/feed.xml\",\"type\":\"atom\","
                          "\"interval_s\":600,\"status\":\"paused\",\"owner\":{\"team\":[1]}}",
                          &r, err) == 0);
    NF_CHECK_STR(r.source_id, "src-1");
    NF_CHECK(!r.tombstone);
    NF_CHECK_STR(r.url, "https://example.com/feed.xml");
    NF_CHECK_EQ(r.type, NF_SOURCE_ATOM);
    NF_CHECK_EQ(r.interval_s, 600);
    NF_CHECK_EQ(r.status, NF_SOURCE_PAUSED);
    NF_CHECK_STR(nf_source_type_name(r.type), "atom");
    NF_CHECK_STR(nf_source_status_name(r.status), "paused");
    /* defaults, and null as absent */
    NF_REQUIRE(src_decode("s", "{\"url\":\"http://x/\"}", &r, err) == 0);
    NF_CHECK_EQ(r.type, NF_SOURCE_AUTO);
    NF_CHECK_EQ(r.status, NF_SOURCE_ACTIVE);
    NF_CHECK_EQ(r.interval_s, 0);
    NF_REQUIRE(src_decode("s",
                          "{\"url\":\"http://x/\",\"type\":null,\"interval_s\":null,"
                          "\"status\":null}",
                          &r, err) == 0);
    NF_CHECK_EQ(r.type, NF_SOURCE_AUTO);
    NF_REQUIRE(src_decode("s",
                          "{\"url\":\"u\",\"type\":\"json\",\"status\":\"dead\","
                          "\"interval_s\":31536000}",
                          &r, err) == 0);
    NF_CHECK_EQ(r.type, NF_SOURCE_JSON);
    NF_CHECK_EQ(r.status, NF_SOURCE_DEAD);
    NF_CHECK_EQ(r.interval_s, NF_SOURCE_INTERVAL_MAX);
    NF_CHECK_EQ(r.crawl_at_ms, 0);
    NF_REQUIRE(src_decode("s", "{\"url\":\"u\",\"crawl_at_ms\":1790000000000}", &r, err) == 0);
    NF_CHECK_EQ(r.crawl_at_ms, 1790000000000ll);
    /* tombstones */
    NF_REQUIRE(src_decode("gone", NULL, &r, err) == 0);
    NF_CHECK(r.tombstone);
    NF_CHECK_STR(r.source_id, "gone");
    NF_REQUIRE(src_decode("gone", "", &r, err) == 0);
    NF_CHECK(r.tombstone);

    static const struct {
        const char *key, *value;
        int rc;
        const char *msg;
    } bad[] = {
        {NULL, "{\"url\":\"u\"}", -NF_EVENT_E_MISSING,
         "key (source_id) is missing; a sources record needs one"},
        {"", "{\"url\":\"u\"}", -NF_EVENT_E_EMPTY, "key (source_id) is empty"},
        {"a\xc3", "{\"url\":\"u\"}", -NF_EVENT_E_UTF8,
         "invalid UTF-8 in the key (source_id) at byte 1 (byte 0xc3)"},
        {"s", "{}", -NF_EVENT_E_MISSING, "missing required field \"url\""},
        {"s", "{\"url\":\"\"}", -NF_EVENT_E_EMPTY, "field \"url\" is empty"},
        {"s", "{\"url\":null}", -NF_EVENT_E_TYPE, "field \"url\": expected a string, got null"},
        {"s", "{\"url\":\"u\",\"type\":\"xml\"}", -NF_EVENT_E_VALUE,
         "field \"type\": \"xml\" is not one of auto, rss, atom, json"},
        {"s", "{\"url\":\"u\",\"type\":\"RSS\"}", -NF_EVENT_E_VALUE,
         "field \"type\": \"RSS\" is not one of auto, rss, atom, json"},
        {"s", "{\"url\":\"u\",\"type\":\"rss\\u0000\"}", -NF_EVENT_E_VALUE,
         "field \"type\": \"rss?\" is not one of auto, rss, atom, json"},
        {"s",
         "{\"url\":\"u\",\"status\":\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
         "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
         "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"}",
         -NF_EVENT_E_VALUE,
         "field \"status\": \"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
         "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
         "\xc3\xa9\xc3\xa9...\" is not one of active, paused, dead"},
        {"s", "{\"url\":\"u\",\"status\":1}", -NF_EVENT_E_TYPE,
         "field \"status\": expected a string, got a number"},
        {"s", "{\"url\":\"u\",\"interval_s\":\"600\"}", -NF_EVENT_E_TYPE,
         "field \"interval_s\": expected an integer, got a string"},
        {"s", "{\"url\":\"u\",\"interval_s\":-1}", -NF_EVENT_E_VALUE,
         "field \"interval_s\": -1 is out of range [0, 31536000]"},
        {"s", "{\"url\":\"u\",\"interval_s\":31536001}", -NF_EVENT_E_VALUE,
         "field \"interval_s\": 31536001 is out of range [0, 31536000]"},
        {"s", "{\"url\":\"u\",\"interval_s\":1.5}", -NF_EVENT_E_VALUE,
         "field \"interval_s\": 1.5 is not an integer"},
        {"s", "{\"url\":\"u\",\"crawl_at_ms\":\"now\"}", -NF_EVENT_E_TYPE,
         "field \"crawl_at_ms\": expected an integer, got a string"},
        {"s", "{\"url\":\"u\",\"crawl_at_ms\":-1}", -NF_EVENT_E_VALUE,
         "field \"crawl_at_ms\": -1 is not a time in ms in [0, 253402300799999]"},
        {"s", "{\"url\":\"u\",\"crawl_at_ms\":1.5e12}", -NF_EVENT_E_VALUE,
         "field \"crawl_at_ms\": 1.5e12 is not a time in ms in [0, 253402300799999]"},
        {"s", "{\"url\":\"u\",\"url\":\"v\"}", -NF_EVENT_E_DUPLICATE,
         "duplicate field \"url\" at byte 11 (first at byte 1)"},
        {"s", "[]", -NF_EVENT_E_NOT_OBJECT, "top level is an array; expected a JSON object"},
        {"s", " ", -NF_EVENT_E_SYNTAX,
         "invalid JSON at byte 1: expected a JSON object, got end of input"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = src_decode(bad[i].key, bad[i].value, &r, err);
        if (rc != bad[i].rc || strcmp(err, bad[i].msg) != 0) {
            fprintf(stderr, "sources case %zu: rc %d want %d\n  got  %s\n  want %s\n", i, rc,
                    bad[i].rc, err, bad[i].msg);
            nf_test_failed_checks++;
        }
    }
    /* key limits and a NUL byte in the key */
    char key[NF_SOURCE_ID_MAX + 2];
    memset(key, 'k', sizeof key);
    NF_CHECK_EQ(nf_source_record_decode(key, NF_SOURCE_ID_MAX, NULL, 0, 0, &r, err, sizeof err), 0);
    NF_CHECK_EQ(strlen(r.source_id), NF_SOURCE_ID_MAX);
    NF_CHECK_EQ(nf_source_record_decode(key, NF_SOURCE_ID_MAX + 1, NULL, 0, 0, &r, err, sizeof err),
                -NF_EVENT_E_TOO_LONG);
    NF_CHECK_STR(err, "key (source_id) is too long: 129 bytes, max 128");
    NF_CHECK_EQ(nf_source_record_decode("a\0b", 3, NULL, 0, 0, &r, err, sizeof err),
                -NF_EVENT_E_VALUE);
    NF_CHECK_STR(err, "key (source_id) contains U+0000");
    const char *v = "{\"url\":\"http://x/\"}";
    NF_CHECK_EQ(nf_source_record_decode("s", 1, v, strlen(v), 10, &r, err, sizeof err),
                -NF_EVENT_E_TOO_BIG);
    NF_CHECK_STR(err, "record is 19 bytes, over the limit of 10");
    /* URL length limit */
    static char big[NF_SOURCE_URL_MAX + 64];
    int n = snprintf(big, sizeof big, "{\"url\":\"");
    memset(big + n, 'u', NF_SOURCE_URL_MAX + 1);
    snprintf(big + n + NF_SOURCE_URL_MAX + 1, sizeof big - (size_t)n - NF_SOURCE_URL_MAX - 1,
             "\"}");
    NF_CHECK_EQ(src_decode("s", big, &r, err), -NF_EVENT_E_TOO_LONG);
    NF_CHECK_STR(err, "field \"url\" is too long: 1024 bytes, max 1023");
}

/* ---------------------------------------------------------------- property: round trip */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    /* xorshift64*: deterministic, so a failure reproduces. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

static unsigned below(unsigned n)
{
    return (unsigned)(rnd() % n);
}

static size_t utf8_put(uint32_t cp, char *o)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12);
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18);
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

static uint32_t random_cp(void)
{
    switch (below(6)) {
    case 0:
        return 1 + below(0x1f); /* control characters: must be escaped */
    case 1:
        return 0x80 + below(0x780);
    case 2: {
        uint32_t c = 0x800 + below(0xf800);
        return c >= 0xd800 && c <= 0xdfff ? 0xe000 : c;
    }
    case 3:
        return 0x10000 + below(0x100000);
    case 4:
        return "\"\\/"[below(3)];
    default:
        return 0x20 + below(0x5f);
    }
}

/* A random string of at most max bytes of UTF-8 (at least min): raw in *raw, JSON-escaped
 * (each character written raw or as an escape, at random) appended to json. */
static void random_string(char *raw, size_t min, size_t max, char *json, size_t *jn)
{
    size_t len = 0, want = min + below((unsigned)(max - min + 1));
    json[(*jn)++] = '"';
    while (len < want) {
        uint32_t cp = random_cp();
        char u[4];
        size_t k = utf8_put(cp, u);
        if (len + k > want) {
            if (len >= min)
                break;
            continue;
        }
        memcpy(raw + len, u, k);
        len += k;
        bool esc = cp < 0x20 || cp == '"' || cp == '\\' || below(4) == 0;
        if (!esc) {
            memcpy(json + *jn, u, k);
            *jn += k;
        } else if (cp == '"' || cp == '\\' || (cp == '/' && below(2))) {
            json[(*jn)++] = '\\';
            json[(*jn)++] = (char)cp;
        } else if (cp == '\n' && below(2)) {
            memcpy(json + *jn, "\\n", 2);
            *jn += 2;
        } else if (cp >= 0x10000) {
            uint32_t v = cp - 0x10000;
            *jn += (size_t)sprintf(json + *jn, below(2) ? "\\u%04x\\u%04x" : "\\u%04X\\u%04X",
                                   0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
        } else {
            *jn += (size_t)sprintf(json + *jn, "\\u%04x", cp);
        }
    }
    raw[len] = '\0';
    json[(*jn)++] = '"';
}

static void ws_put(char *json, size_t *jn)
{
    for (unsigned i = below(3); i > 0; i--)
        json[(*jn)++] = " \t\r\n"[below(4)];
}

static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    return era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468;
}

static void test_property_round_trip(void)
{
    static char json[8192];
    for (int iter = 0; iter < 20000; iter++) {
        char want[4][NF_EVENT_FIELD_MAX + 1];
        bool has[4] = {true, true, below(2) == 0, below(2) == 0};
        size_t jn = 0;
        ws_put(json, &jn);
        json[jn++] = '{';
        /* Fields in random order, unknown ones in between. */
        unsigned order[5] = {0, 1, 2, 3, 4};
        for (unsigned i = 4; i > 0; i--) {
            unsigned k = below(i + 1), t = order[i];
            order[i] = order[k];
            order[k] = t;
        }
        static const char *const names[5] = {"user_id", "article_id", "session_id", "event_id",
                                             "ts"};
        int64_t ts = 0;
        bool first = true;
        for (unsigned i = 0; i < 5; i++) {
            unsigned f = order[i];
            if (f < 4 && !has[f])
                continue;
            if (!first)
                json[jn++] = ',';
            first = false;
            if (below(3) == 0) {
                jn += (size_t)sprintf(json + jn, "\"x%u\":{\"a\":[1,-2.5e3,\"\\u00e9\",null]},",
                                      below(100));
            }
            ws_put(json, &jn);
            jn += (size_t)sprintf(json + jn, "\"%s\"", names[f]);
            ws_put(json, &jn);
            json[jn++] = ':';
            ws_put(json, &jn);
            if (f < 4) {
                random_string(want[f], f == 2 ? 0 : 1, NF_EVENT_FIELD_MAX, json, &jn);
            } else {
                int y = 1970 + (int)below(8030), mo = 1 + (int)below(12), d = 1 + (int)below(28);
                int h = (int)below(24), mi = (int)below(60), s = (int)below(60),
                    ms = (int)below(1000);
                ts = ((days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60000 + s * 1000 + ms;
                if (below(2)) {
                    jn += (size_t)sprintf(json + jn, "%lld", (long long)ts);
                } else {
                    /* Local time at a random offset that keeps the instant in range. */
                    int off = (int)below(24 * 60) - 12 * 60;
                    if (ts - (int64_t)off * 60000 < 0 ||
                        ts - (int64_t)off * 60000 > NF_EVENT_TS_MAX)
                        off = 0;
                    char zone[16];
                    if (off == 0 && below(2))
                        snprintf(zone, sizeof zone, "Z");
                    else
                        snprintf(zone, sizeof zone, "%c%02d:%02d", off < 0 ? '-' : '+',
                                 abs(off) / 60, abs(off) % 60);
                    jn += (size_t)sprintf(json + jn, "\"%04d-%02d-%02dT%02d:%02d:%02d.%03d%s\"", y,
                                          mo, d, h, mi, s, ms, zone);
                    ts -= (int64_t)off * 60000;
                }
            }
            ws_put(json, &jn);
        }
        json[jn++] = '}';
        ws_put(json, &jn);
        nf_read_event_t e;
        char err[256];
        int rc = nf_read_event_decode(json, jn, 0, &e, err, sizeof err);
        if (rc != 0) {
            fprintf(stderr, "round trip %d: %s\n  %.*s\n", iter, err, (int)jn, json);
            nf_test_failed_checks++;
            return;
        }
        bool ok = strcmp(e.user_id, want[0]) == 0 && strcmp(e.article_id, want[1]) == 0 &&
                  strcmp(e.session_id, has[2] ? want[2] : "") == 0 && e.ts_ms == ts &&
                  e.event_id_given == has[3];
        if (has[3]) {
            ok = ok && strcmp(e.event_id, want[3]) == 0;
        } else {
            char id[65];
            nf_read_event_id(want[0], want[1], has[2] ? want[2] : "", NF_READ_KIND_READ, 0, id);
            ok = ok && strcmp(e.event_id, id) == 0;
        }
        if (!ok) {
            fprintf(stderr, "round trip %d: fields differ\n  %.*s\n", iter, (int)jn, json);
            nf_test_failed_checks++;
            return;
        }
    }
}

/* ---------------------------------------------------------------- property: mutations */

static void check_result(int rc, const char *err, const char *what, const char *in, size_t n)
{
    bool ok = rc == 0 || (rc < 0 && rc > -NF_EVENT_E__COUNT && err[0] != '\0' &&
                          memchr(err, '\0', 256) != NULL && nf_utf8_valid(err, strlen(err)));
    if (!ok) {
        fprintf(stderr, "%s: rc %d err '%s' for %.*s\n", what, rc, err, (int)n, in);
        nf_test_failed_checks++;
    }
}

static void test_random_mutations(void)
{
    static const char *const seeds[] = {
        "{\"user_id\":\"u\\u00e9\",\"article_id\":\"a\",\"session_id\":\"s\",\"event_id\":"
        "\"e\",\"ts\":\"2024-02-29T12:34:56.789+02:00\",\"x\":{\"y\":[1,2.5e3,true,null]}}",
        "{\"user_id\":\"\\ud83d\\ude00\",\"article_id\":\"a\",\"ts\":1709210096789}",
        "{\"url\":\"https://example.com/feed\",\"type\":\"rss\",\"interval_s\":900,"
        "\"status\":\"active\",\"extra\":[[[]]]}",
    };
    char buf[512], err[256];
    for (int iter = 0; iter < 200000; iter++) {
        const char *s = seeds[below(3)];
        size_t n = strlen(s);
        memcpy(buf, s, n);
        for (unsigned m = 1 + below(4); m > 0; m--) {
            unsigned op = below(4), at = below((unsigned)n + 1);
            if (op == 0 && at < n) {
                buf[at] = (char)rnd(); /* replace */
            } else if (op == 1 && n < sizeof buf - 1) {
                memmove(buf + at + 1, buf + at, n - at);
                buf[at] = "{}[]\",:\\u0\xc3\xed\xf0 9e-."[below(18)];
                n++;
            } else if (op == 2 && at < n) {
                memmove(buf + at, buf + at + 1, n - at - 1); /* delete */
                n--;
            } else {
                n = at; /* truncate */
            }
        }
        /* An exactly sized copy so that ASan catches any read past len. */
        char *in = malloc(n ? n : 1);
        NF_REQUIRE(in);
        memcpy(in, buf, n);
        nf_read_event_t e;
        err[0] = 'X';
        int rc = nf_read_event_decode(in, n, 4096, &e, err, sizeof err);
        check_result(rc, err, "read event", in, n);
        if (rc == 0) {
            NF_CHECK(e.user_id[0] && strlen(e.user_id) <= NF_EVENT_FIELD_MAX);
            NF_CHECK(nf_utf8_valid(e.user_id, strlen(e.user_id)));
            NF_CHECK(nf_utf8_valid(e.article_id, strlen(e.article_id)));
            NF_CHECK(e.ts_ms >= 0 && e.ts_ms <= NF_EVENT_TS_MAX);
        }
        nf_source_record_t r;
        rc = nf_source_record_decode("k", 1, in, n, 4096, &r, err, sizeof err);
        check_result(rc, err, "source record", in, n);
        if (rc == 0 && !r.tombstone)
            NF_CHECK(r.url[0] && nf_utf8_valid(r.url, strlen(r.url)));
        free(in);
    }
}

/* ---------------------------------------------------------------- schema examples */

/* The decoders and schemas/ agree: every good example of read-events and sources decodes, and
 * every bad one is refused, except those the decoders accept on purpose (null is an absent
 * optional field) while the schema, a producer contract, does not. Unknown fields are allowed
 * by both (forward compatible). */
static void check_examples(const char *topic, const char *kind, const char *const *lenient)
{
    char path[512], line[4096], err[256];
    snprintf(path, sizeof path, "%s/schemas/examples/%s.%s.jsonl", NF_SOURCE_DIR, topic, kind);
    FILE *f = fopen(path, "r");
    NF_REQUIRE(f);
    int n = 0, lines = 0;
    while (fgets(line, sizeof line, f)) {
        n++;
        size_t len = strcspn(line, "\n");
        if (len == 0)
            continue;
        lines++;
        int rc;
        if (strcmp(topic, "sources") == 0) {
            nf_source_record_t r;
            rc = nf_source_record_decode("k", 1, line, len, 65536, &r, err, sizeof err);
        } else {
            nf_read_event_t e;
            rc = nf_read_event_decode(line, len, 65536, &e, err, sizeof err);
            if (rc == 0) /* and the job's bounds against its clock, as kafka_in applies them */
                rc = nf_read_event_check_time(e.ts_ms, (int64_t)time(NULL) * 1000, 300000, err,
                                              sizeof err);
        }
        bool want_ok = strcmp(kind, "good") == 0;
        for (size_t i = 0; !want_ok && lenient[i]; i++)
            want_ok = strstr(line, lenient[i]) != NULL;
        if ((rc == 0) != want_ok) {
            fprintf(stderr, "%s:%d: rc %d (%s) %s\n", path, n, rc, err, want_ok ? "" : "accepted");
            nf_test_failed_checks++;
        }
    }
    fclose(f);
    NF_CHECK(lines > 0);
}

/* ---------------------------------------------------------------- the fast path */

static uint64_t fp_rng = 0x6661737470617468ull;
static unsigned fp_below(unsigned n)
{
    fp_rng ^= fp_rng << 13, fp_rng ^= fp_rng >> 7, fp_rng ^= fp_rng << 17;
    return (unsigned)(fp_rng % n);
}

/* A random id value: mostly plain, sometimes at the length limits or with what the fast path
 * leaves to the strict decoder (escapes, UTF-8, control bytes, DEL, quotes). */
static void fp_value(char *out, size_t cap, size_t limit)
{
    static const char *const odd[] = {"\\\"", "\\u0041", "\xc3\xa9", "\x7f", "\\n", "\x01", "\\/"};
    size_t n = fp_below(10) == 0 ? limit + fp_below(2) : 1 + fp_below(20);
    if (fp_below(12) == 0)
        n = 0;
    size_t at = 0;
    for (size_t i = 0; i < n && at + 8 < cap; i++) {
        if (fp_below(60) == 0) {
            const char *o = odd[fp_below(sizeof odd / sizeof odd[0])];
            memcpy(out + at, o, strlen(o));
            at += strlen(o);
        } else {
            out[at++] = (char)(' ' + 1 + fp_below(94)); /* printable, not space */
            if (out[at - 1] == '"' || out[at - 1] == '\\')
                out[at - 1] = 'q';
        }
    }
    out[at] = '\0';
}

/* Records around the fast path's shape, through both entry points: the same result, the same
 * message and the same struct, always. */
static void test_fast_path_is_the_strict_decoder(void)
{
    static const char *const keys[] = {"user_id", "article_id", "session_id", "event_id",
                                       "ts",      "kind",       "variant"};
    static const char *const kinds[] = {"\"read\"",    "\"save\"", "\"share\"",
                                        "\"dislike\"", "\"hide\"", "\"like\"",
                                        "null",        "\"Save\"", "3"};
    static const char *const ws[] = {"", "", "", " ", "\n\t ", "\r"};
    static const char *const tss[] = {"1700000000000",
                                      "0",
                                      "00",
                                      "01",
                                      "253402300799999",
                                      "253402300800000",
                                      "1e3",
                                      "1.5",
                                      "-1",
                                      "1700000000000.0",
                                      "\"2024-02-29T12:34:56Z\"",
                                      "null",
                                      "true",
                                      "999999999999999999999"};
    char buf[2048], v[1200];
    int fast_ok = 0, differ = 0;
    for (int n = 0; n < 200000 && differ < 5; n++) {
        size_t at = 0;
        at += (size_t)snprintf(buf + at, sizeof buf - at, "%s{", ws[fp_below(6)]);
        unsigned order[7] = {0, 1, 2, 3, 4, 5, 6};
        for (unsigned i = 6; i > 0; i--) {
            unsigned j = fp_below(i + 1), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        unsigned nf = 7 - fp_below(3), fields = 0;
        for (unsigned i = 0; i < 7 && fields < nf; i++) {
            unsigned f = order[i];
            if (f < 2 || f == 4 || fp_below(3) != 0) {
                const char *key = keys[f];
                if (fp_below(80) == 0)
                    key = fp_below(2) ? "user_ld" : "extra";
                at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%s\"%s\"%s:%s",
                                       fields ? "," : "", ws[fp_below(6)], key, ws[fp_below(6)],
                                       ws[fp_below(6)]);
                if (f == 4) {
                    at += (size_t)snprintf(buf + at, sizeof buf - at, "%s",
                                           fp_below(4) ? tss[0] : tss[fp_below(14)]);
                } else if (f == 5) {
                    at += (size_t)snprintf(buf + at, sizeof buf - at, "%s",
                                           kinds[fp_below(4) ? fp_below(5) : fp_below(9)]);
                } else if (fp_below(40) == 0) {
                    at += (size_t)snprintf(buf + at, sizeof buf - at, "null");
                } else {
                    fp_value(v, sizeof v, f == 6 ? NF_EVENT_VARIANT_MAX : NF_EVENT_FIELD_MAX);
                    at += (size_t)snprintf(buf + at, sizeof buf - at, "\"%s\"", v);
                }
                fields++;
                if (fp_below(100) == 0) /* the same field twice */
                    at += (size_t)snprintf(buf + at, sizeof buf - at, ",\"%s\":\"x\"", key);
            }
        }
        at += (size_t)snprintf(buf + at, sizeof buf - at, "%s}%s", ws[fp_below(6)],
                               fp_below(50) == 0 ? "x" : ws[fp_below(6)]);
        if (at >= sizeof buf)
            continue;
        size_t len = fp_below(30) == 0 ? fp_below((unsigned)at + 1) : at; /* truncated too */
        nf_read_event_t a, b;
        char ea[256], eb[256];
        int ra = nf_read_event_decode(buf, len, 65536, &a, ea, sizeof ea);
        int rb = nf_read_event_decode_strict(buf, len, 65536, &b, eb, sizeof eb);
        bool same =
            ra == rb && strcmp(ea, eb) == 0 &&
            (ra != 0 ||
             (strcmp(a.user_id, b.user_id) == 0 && strcmp(a.article_id, b.article_id) == 0 &&
              strcmp(a.session_id, b.session_id) == 0 && strcmp(a.event_id, b.event_id) == 0 &&
              a.event_id_given == b.event_id_given && a.ts_ms == b.ts_ms && a.kind == b.kind &&
              strcmp(a.variant, b.variant) == 0 && a.variant_len == strlen(a.variant) &&
              b.variant_len == a.variant_len && a.user_len == strlen(a.user_id) &&
              a.article_len == strlen(a.article_id) && a.session_len == strlen(a.session_id) &&
              a.event_id_len == strlen(a.event_id) && b.user_len == a.user_len &&
              b.article_len == a.article_len && b.session_len == a.session_len &&
              b.event_id_len == a.event_id_len));
        if (!same) {
            differ++;
            fprintf(stderr, "fast %d / strict %d on %.*s\n  %s\n  %s\n", ra, rb, (int)len, buf, ea,
                    eb);
        }
        fast_ok += ra == 0;
    }
    NF_CHECK_EQ(differ, 0);
    NF_CHECK(fast_ok > 50000); /* the generator mostly makes decodable records */
}

/* Feedback kinds (issue 38): decoded, named in the computed id unless a read, refused when
 * unknown, and written back by nf_read_event_json in a form the fast path takes. */
static void test_kinds(void)
{
    nf_read_event_t e, back;
    char err[256];
    const char *base = "{\"user_id\":\"u1\",\"article_id\":\"a1\",\"session_id\":\"s1\",\"ts\":5";
    char json[256];
    snprintf(json, sizeof json, "%s}", base);
    NF_CHECK(nf_read_event_decode(json, strlen(json), 0, &e, err, sizeof err) == 0);
    NF_CHECK_EQ(e.kind, NF_READ_KIND_READ);
    /* the id a read had before kinds existed */
    NF_CHECK_STR(e.event_id, "a53c42e4ccd4d78ad5580561a4c3af676673baccf1c19ccf7f32651065100917");
    snprintf(json, sizeof json, "%s,\"kind\":\"save\"}", base);
    NF_CHECK(nf_read_event_decode(json, strlen(json), 0, &e, err, sizeof err) == 0);
    NF_CHECK_EQ(e.kind, NF_READ_KIND_SAVE);
    NF_CHECK_STR(e.event_id, "0cde06f8aa77e86b004cf9bbedd89f0d688204274349dc04396f90f279d55702");
    snprintf(json, sizeof json, "%s,\"kind\":null}", base);
    NF_CHECK(nf_read_event_decode(json, strlen(json), 0, &e, err, sizeof err) == 0);
    NF_CHECK_EQ(e.kind, NF_READ_KIND_READ);
    const char *hide = "{\"kind\":\"hide\",\"user_id\":\"u1\",\"article_id\":\"a1\",\"ts\":5}";
    NF_CHECK(nf_read_event_decode(hide, strlen(hide), 0, &e, err, sizeof err) == 0);
    NF_CHECK_STR(e.event_id, "b4adc104aabe33ebe927de634842a22236d620c5ac86f1ece6845f5141936f0a");
    snprintf(json, sizeof json, "%s,\"kind\":\"like\"}", base);
    NF_CHECK_EQ(nf_read_event_decode(json, strlen(json), 0, &e, err, sizeof err),
                -NF_EVENT_E_VALUE);
    NF_CHECK_STR(err, "field \"kind\": \"like\" is not one of read, save, share, dislike, hide, "
                      "follow, unfollow, mute, unmute, subscribe, unsubscribe, mute_source, "
                      "unmute_source");
    snprintf(json, sizeof json, "%s,\"kind\":7}", base);
    NF_CHECK_EQ(nf_read_event_decode(json, strlen(json), 0, &e, err, sizeof err), -NF_EVENT_E_TYPE);
    for (int k = 0; k < NF_READ_KIND__COUNT; k++) {
        snprintf(json, sizeof json, "%s,\"kind\":\"%s\"}", base, nf_read_kind_name(k));
        NF_CHECK(nf_read_event_decode(json, strlen(json), 0, &e, err, sizeof err) == 0);
        nf_jw_t w;
        nf_jw_init(&w);
        nf_read_event_json(&w, &e);
        NF_CHECK(nf_read_event_decode_strict(w.buf, w.len, 0, &back, err, sizeof err) == 0);
        NF_CHECK(back.kind == e.kind && back.ts_ms == e.ts_ms && back.event_id_given);
        NF_CHECK_STR(back.event_id, e.event_id);
        NF_CHECK_STR(back.session_id, "s1");
        nf_jw_free(&w);
    }
    NF_CHECK_STR(nf_read_kind_name(NF_EVENT_KIND__COUNT), "?");
}

/* A reader's settings (issue 45): follow, unfollow, mute, unmute a topic, named by `topic`
 * (carried in article_id) instead of an article; their ids hash the ts in, so that follow,
 * unfollow, follow are three events; they decode back from what the edge writes. */
/* A read's ranking variant (issue 45): optional, up to 32 bytes, not part of the event id,
 * written back by nf_read_event_json in a form the fast path takes. */
static void test_variant(void)
{
    nf_read_event_t e, back;
    char err[256];
    const char *r = "{\"user_id\":\"u1\",\"article_id\":\"a1\",\"variant\":\"fresh\",\"ts\":5}";
    NF_REQUIRE(decode(r, &e, err, sizeof err) == 0);
    NF_CHECK_STR(e.variant, "fresh");
    NF_CHECK_EQ(e.variant_len, 5);
    const char *plain = "{\"user_id\":\"u1\",\"article_id\":\"a1\",\"ts\":5}";
    NF_REQUIRE(decode(plain, &back, err, sizeof err) == 0);
    NF_CHECK_STR(back.event_id, e.event_id); /* the same read, whichever feed it came from */
    NF_CHECK_STR(back.variant, "");
    nf_jw_t w;
    nf_jw_init(&w);
    nf_read_event_json(&w, &e);
    NF_CHECK(strstr(w.buf, "\"variant\":\"fresh\"") != NULL);
    NF_CHECK(nf_read_event_decode(w.buf, w.len, 0, &back, err, sizeof err) == 0);
    NF_CHECK_STR(back.variant, "fresh");
    nf_jw_free(&w);
    nf_jw_init(&w);
    nf_read_event_json(&w, &back);
    w.len = 0;
    nf_read_event_json(&w, &(nf_read_event_t){.user_id = "u", .article_id = "a", .ts_ms = 1});
    NF_CHECK(strstr(w.buf, "variant") == NULL); /* absent when empty */
    nf_jw_free(&w);
    char long_one[128];
    snprintf(long_one, sizeof long_one,
             "{\"user_id\":\"u1\",\"article_id\":\"a1\",\"variant\":\"%033d\",\"ts\":5}", 0);
    NF_CHECK_EQ(decode(long_one, &e, err, sizeof err), -NF_EVENT_E_TOO_LONG);
    NF_CHECK_STR(err, "field \"variant\" is too long: 33 bytes, max 32");
    const char *number = "{\"user_id\":\"u1\",\"article_id\":\"a1\",\"variant\":2,\"ts\":5}";
    NF_CHECK_EQ(decode(number, &e, err, sizeof err), -NF_EVENT_E_TYPE);
    NF_CHECK_STR(err, "field \"variant\": expected a string, got a number");
    const char *null = "{\"user_id\":\"u1\",\"article_id\":\"a1\",\"variant\":null,\"ts\":5}";
    NF_CHECK(decode(null, &e, err, sizeof err) == 0 && e.variant[0] == '\0');
}

static void test_settings(void)
{
    nf_read_event_t e, back;
    char err[256];
    const char *f = "{\"user_id\":\"u1\",\"kind\":\"follow\",\"topic\":\"science\",\"ts\":5}";
    NF_REQUIRE(decode(f, &e, err, sizeof err) == 0);
    NF_CHECK_EQ(e.kind, NF_READ_KIND_FOLLOW);
    NF_CHECK(nf_read_kind_is_setting(e.kind) && !nf_read_kind_is_setting(NF_READ_KIND_HIDE));
    NF_CHECK_STR(e.article_id, "science");
    NF_CHECK_EQ(e.article_len, 7);
    /* printf 'u1\0science\0\0follow\0005\0' | sha256sum */
    NF_CHECK_STR(e.event_id, "7a7e8d33603d3f131d410d522a0b69fd3cd6d78c90be2053b626bf656862bd71");
    const char *later = "{\"user_id\":\"u1\",\"kind\":\"follow\",\"topic\":\"science\",\"ts\":6}";
    NF_REQUIRE(decode(later, &back, err, sizeof err) == 0);
    NF_CHECK(strcmp(back.event_id, e.event_id) != 0);
    nf_jw_t w;
    nf_jw_init(&w);
    nf_read_event_json(&w, &e);
    NF_CHECK(strstr(w.buf, "\"topic\":\"science\"") && !strstr(w.buf, "article_id"));
    NF_CHECK(nf_read_event_decode(w.buf, w.len, 0, &back, err, sizeof err) == 0);
    NF_CHECK(back.kind == e.kind && back.ts_ms == 5 && back.event_id_given);
    NF_CHECK_STR(back.article_id, "science");
    nf_jw_free(&w);
    const char *none = "{\"user_id\":\"u1\",\"kind\":\"mute\",\"ts\":5}";
    NF_CHECK_EQ(decode(none, &e, err, sizeof err), -NF_EVENT_E_MISSING);
    NF_CHECK_STR(err, "missing required field \"topic\"");
    const char *both =
        "{\"user_id\":\"u1\",\"kind\":\"unmute\",\"topic\":\"x\",\"article_id\":\"a\",\"ts\":5}";
    NF_CHECK_EQ(decode(both, &e, err, sizeof err), -NF_EVENT_E_VALUE);
    NF_CHECK_STR(err, "field \"article_id\": a unmute names a topic, not an article");
    const char *empty = "{\"user_id\":\"u1\",\"kind\":\"unfollow\",\"topic\":\"\",\"ts\":5}";
    NF_CHECK_EQ(decode(empty, &e, err, sizeof err), -NF_EVENT_E_EMPTY);
    /* a read's topic field is no setting's: ignored, whatever its value, as an unknown field was */
    static const char *const ignored[] = {"null", "7", "\"\"", "{\"a\":[1]}"};
    for (size_t i = 0; i < sizeof ignored / sizeof *ignored; i++) {
        char json[160];
        snprintf(json, sizeof json,
                 "{\"user_id\":\"u1\",\"article_id\":\"a1\",\"topic\":%s,\"ts\":5}", ignored[i]);
        NF_CHECK(decode(json, &e, err, sizeof err) == 0);
        NF_CHECK(nf_read_event_decode_strict(json, strlen(json), 0, &e, err, sizeof err) == 0);
    }
    const char *num = "{\"user_id\":\"u1\",\"kind\":\"follow\",\"topic\":7,\"ts\":5}";
    NF_CHECK_EQ(decode(num, &e, err, sizeof err), -NF_EVENT_E_TYPE);
    NF_CHECK_STR(err, "field \"topic\": expected a string, got a number");
    const char *rd = "{\"user_id\":\"u1\",\"article_id\":\"a1\",\"topic\":\"science\",\"ts\":5}";
    NF_REQUIRE(decode(rd, &e, err, sizeof err) == 0);
    NF_CHECK_STR(e.article_id, "a1");
    NF_CHECK_EQ(e.kind, NF_READ_KIND_READ);
    /* the fast path gives every setting to the strict decoder: the same answer */
    NF_CHECK(nf_read_event_decode_strict(f, strlen(f), 0, &back, err, sizeof err) == 0);
    NF_CHECK(nf_read_event_decode(f, strlen(f), 0, &e, err, sizeof err) == 0);
    NF_CHECK(e.kind == back.kind && e.ts_ms == back.ts_ms && e.article_len == back.article_len);
    NF_CHECK_STR(e.article_id, back.article_id);
    NF_CHECK_STR(e.event_id, back.event_id);
}

/* mute_source / unmute_source name a source (its `source` field, carried in article_id): the
 * same rules as a topic's setting, and a clear word when a setting names the wrong one. */
static void test_source_settings(void)
{
    nf_read_event_t e, back;
    char err[256];
    const char *m = "{\"user_id\":\"u1\",\"kind\":\"mute_source\",\"source\":\"wire-a\",\"ts\":5}";
    NF_REQUIRE(decode(m, &e, err, sizeof err) == 0);
    NF_CHECK_EQ(e.kind, NF_READ_KIND_MUTE_SOURCE);
    NF_CHECK(nf_read_kind_is_setting(e.kind) && nf_read_kind_is_source(e.kind));
    NF_CHECK(!nf_read_kind_is_source(NF_READ_KIND_MUTE) && !nf_read_kind_is_source(0));
    NF_CHECK_STR(e.article_id, "wire-a");
    /* printf 'u1\0wire-a\0\0mute_source\0005\0' | sha256sum */
    NF_CHECK_STR(e.event_id, "b4844a6847111f5115958f26f033b204345f3de3dd8844ae09209f4ea9a9d6a7");
    nf_jw_t w;
    nf_jw_init(&w);
    nf_read_event_json(&w, &e);
    NF_CHECK(strstr(w.buf, "\"source\":\"wire-a\"") && !strstr(w.buf, "topic") &&
             !strstr(w.buf, "article_id"));
    NF_CHECK(nf_read_event_decode(w.buf, w.len, 0, &back, err, sizeof err) == 0);
    NF_CHECK(back.kind == e.kind && back.ts_ms == 5);
    NF_CHECK_STR(back.article_id, "wire-a");
    NF_CHECK_STR(back.event_id, e.event_id);
    nf_jw_free(&w);
    const char *none = "{\"user_id\":\"u1\",\"kind\":\"unmute_source\",\"ts\":5}";
    NF_CHECK_EQ(decode(none, &e, err, sizeof err), -NF_EVENT_E_MISSING);
    NF_CHECK_STR(err, "missing required field \"source\"");
    const char *topic =
        "{\"user_id\":\"u1\",\"kind\":\"mute_source\",\"topic\":\"science\",\"ts\":5}";
    NF_CHECK_EQ(decode(topic, &e, err, sizeof err), -NF_EVENT_E_VALUE);
    NF_CHECK_STR(err, "field \"topic\": a mute_source names a source, not a topic");
    const char *art = "{\"user_id\":\"u1\",\"kind\":\"mute_source\",\"source\":\"s\",\"article_"
                      "id\":\"a\",\"ts\":5}";
    NF_CHECK_EQ(decode(art, &e, err, sizeof err), -NF_EVENT_E_VALUE);
    NF_CHECK_STR(err, "field \"article_id\": a mute_source names a source, not an article");
    const char *wrong = "{\"user_id\":\"u1\",\"kind\":\"mute\",\"source\":\"wire-a\",\"ts\":5}";
    NF_CHECK_EQ(decode(wrong, &e, err, sizeof err), -NF_EVENT_E_VALUE);
    NF_CHECK_STR(err, "field \"source\": a mute names a topic (mute_source and unmute_source name "
                      "a source)");
    const char *empty = "{\"user_id\":\"u1\",\"kind\":\"mute_source\",\"source\":\"\",\"ts\":5}";
    NF_CHECK_EQ(decode(empty, &e, err, sizeof err), -NF_EVENT_E_EMPTY);
    /* a topic setting's source field beside its topic, and a read's: ignored */
    const char *both =
        "{\"user_id\":\"u1\",\"kind\":\"mute\",\"topic\":\"science\",\"source\":7,\"ts\":5}";
    NF_REQUIRE(decode(both, &e, err, sizeof err) == 0);
    NF_CHECK_STR(e.article_id, "science");
    const char *rd = "{\"user_id\":\"u1\",\"article_id\":\"a1\",\"source\":\"x\",\"ts\":5}";
    NF_REQUIRE(decode(rd, &e, err, sizeof err) == 0);
    NF_CHECK_STR(e.article_id, "a1");
}

static void test_schema_examples(void)
{
    static const char *const none[] = {NULL};
    static const char *const re_lenient[] = {"\"session_id\": null", NULL};
    static const char *const sr_lenient[] = {NULL};
    check_examples("read-events", "good", none);
    check_examples("read-events", "bad", re_lenient);
    check_examples("sources", "good", none);
    check_examples("sources", "bad", sr_lenient);
}

/* ---------------------------------------------------------------- dead-letters */

static cJSON *dead_letter(nf_jw_t *w, const char *error, const void *payload, size_t len)
{
    nf_jw_reset(w);
    nf_dead_letter_json(w, "read-events", 3, 12345, "decode", error, payload, len, 1709210096789LL);
    if (w->failed)
        return NULL;
    return cJSON_ParseWithLength(w->buf, w->len);
}

static void test_dead_letter(void)
{
    nf_jw_t w;
    nf_jw_init(&w);
    const char *p = "{\"user_id\":1}";
    cJSON *j = dead_letter(&w, "field \"user_id\": expected a string, got a number", p, strlen(p));
    NF_REQUIRE(j);
    NF_CHECK_STR(w.buf, "{\"origin\":{\"topic\":\"read-events\",\"partition\":3,\"offset\":12345},"
                        "\"stage\":\"decode\",\"error\":\"field \\\"user_id\\\": expected a "
                        "string, got a number\",\"payload\":\"{\\\"user_id\\\":1}\","
                        "\"ts\":\"2024-02-29T12:34:56.789Z\"}");
    NF_CHECK_STR(cJSON_GetObjectItem(j, "payload")->valuestring, p);
    NF_CHECK_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "origin"), "offset")->valuedouble,
                12345);
    cJSON_Delete(j);

    /* Cut at 1024 bytes: a 2-byte sequence straddling the limit is left out whole. */
    static char big[4096];
    memset(big, 'a', sizeof big);
    memcpy(big + 1023, "\xc3\xa9", 2);
    j = dead_letter(&w, "e", big, sizeof big);
    NF_REQUIRE(j);
    const char *x = cJSON_GetObjectItem(j, "payload")->valuestring;
    NF_CHECK_EQ(strlen(x), 1023);
    cJSON_Delete(j);
    memcpy(big + 1022, "\xc3\xa9", 2);
    j = dead_letter(&w, "e", big, sizeof big);
    NF_REQUIRE(j);
    x = cJSON_GetObjectItem(j, "payload")->valuestring;
    NF_CHECK_EQ(strlen(x), 1024);
    NF_CHECK(memcmp(x + 1022, "\xc3\xa9", 2) == 0);
    cJSON_Delete(j);

    /* Invalid bytes become U+FFFD each; a sequence cut by the payload's end is invalid too;
     * NUL and control characters are escaped, not dropped. */
    const char bad[] = "a\xff"
                       "b\xc3("
                       "\xed\xa0\x80"
                       "\x00\n\x01"
                       "\xe2\x82";
    j = dead_letter(&w, "bad \xc3 error", bad, sizeof bad - 1);
    NF_REQUIRE(j);
    NF_CHECK(strstr(w.buf, "\"payload\":\"a\xef\xbf\xbd"
                           "b\xef\xbf\xbd(\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\\u0000\\n\\u0001"
                           "\xef\xbf\xbd\xef\xbf\xbd\"") != NULL);
    NF_CHECK_STR(cJSON_GetObjectItem(j, "error")->valuestring, "bad \xef\xbf\xbd error");
    NF_CHECK(nf_utf8_valid(w.buf, w.len));
    cJSON_Delete(j);

    /* 1024 invalid bytes: 1024 replacement characters. */
    memset(big, 0xff, sizeof big);
    j = dead_letter(&w, "e", big, sizeof big);
    NF_REQUIRE(j);
    NF_CHECK_EQ(strlen(cJSON_GetObjectItem(j, "payload")->valuestring), 3 * 1024);
    cJSON_Delete(j);

    /* A tombstone has no payload. */
    j = dead_letter(&w, "e", NULL, 0);
    NF_REQUIRE(j);
    NF_CHECK(cJSON_IsNull(cJSON_GetObjectItem(j, "payload")));
    cJSON_Delete(j);
    j = dead_letter(&w, "e", "", 0);
    NF_REQUIRE(j);
    NF_CHECK_STR(cJSON_GetObjectItem(j, "payload")->valuestring, "");
    cJSON_Delete(j);

    /* Every mutated payload still gives valid JSON in valid UTF-8. */
    for (int i = 0; i < 2000; i++) {
        unsigned char r[1500];
        size_t n = below(sizeof r);
        for (size_t k = 0; k < n; k++)
            r[k] = (unsigned char)rnd();
        j = dead_letter(&w, (const char *)"err", r, n);
        NF_CHECK(j != NULL);
        NF_CHECK(nf_utf8_valid(w.buf, w.len));
        cJSON_Delete(j);
    }
    nf_jw_free(&w);

    char key[64];
    NF_CHECK_EQ(nf_dead_letter_key(key, sizeof key, "read-events", 3, 12345), 19);
    NF_CHECK_STR(key, "read-events/3/12345");
    NF_CHECK_EQ(nf_dead_letter_key(key, 8, "read-events", 3, 12345), 19);
    NF_CHECK_STR(key, "read-ev");
    NF_CHECK_EQ(nf_dead_letter_key(key, sizeof key, "crawl", -1, -1), 11);
    NF_CHECK_STR(key, "crawl/-1/-1");
}

int main(void)
{
    NF_RUN(test_good_string_ts);
    NF_RUN(test_good_epoch_ts);
    NF_RUN(test_event_id_computed);
    NF_RUN(test_escapes);
    NF_RUN(test_unknown_fields_skipped);
    NF_RUN(test_depth_cap);
    NF_RUN(test_errors);
    NF_RUN(test_too_big_and_too_long);
    NF_RUN(test_small_err_buffer);
    NF_RUN(test_ts_forms);
    NF_RUN(test_sources);
    NF_RUN(test_property_round_trip);
    NF_RUN(test_random_mutations);
    NF_RUN(test_fast_path_is_the_strict_decoder);
    NF_RUN(test_kinds);
    NF_RUN(test_settings);
    NF_RUN(test_source_settings);
    NF_RUN(test_variant);
    NF_RUN(test_schema_examples);
    NF_RUN(test_dead_letter);
    return nf_test_report();
}
