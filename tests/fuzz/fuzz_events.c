/* fuzz_events.c — libFuzzer target for the Kafka input decoders and the dead-letter writer
 * (src/io/events.c). Every input goes through all of them:
 *   - nf_read_event_decode() and nf_source_record_decode() (key "src-1") on the bytes;
 *   - nf_source_record_decode() with the bytes (up to 200) as the key and no value, which
 *     exercises key validation and the tombstone path;
 *   - nf_dead_letter_json() with the bytes as payload and error.
 * abort()s, so that libFuzzer keeps the input, when the contract in events.h breaks:
 *   - a result is 0 or -NF_EVENT_E_* ; a failure leaves one non-empty NUL-terminated message
 *     in valid UTF-8, and a smaller err receives a prefix of it;
 *   - the same input decodes to the same result twice (no hidden state), and to the same
 *     result, message and struct through nf_read_event_decode_strict (the fast path is exact);
 *   - a decoded read event has non-empty user_id/article_id/event_id of at most 128 bytes of
 *     valid UTF-8, ts in range, and a computed event_id equal to nf_read_event_id();
 *   - re-encoded with the project's JSON writer (ts once as epoch ms, once as nf_date_format()
 *     RFC 3339), it decodes to the same struct: the decoder keeps everything it accepts, and
 *     the strict RFC 3339 parser reads what the project writes;
 *   - nf_read_event_json (the edge's canonical form) decodes back to the same event, its
 *     event_id now given;
 *   - a decoded sources record re-encodes and decodes to the same record;
 *   - the dead-letters value parses with cJSON, is valid UTF-8 and its payload excerpt holds at
 *     most 1024 code points. */
#include "feed/dates.h"
#include "feed/text.h"
#include "io/events.h"
#include "runtime/jsonw.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SMALLERR 11

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *msg)
{
    fprintf(stderr, "fuzz_events: %s\n  message: %s\n", what, msg ? msg : "(none)");
    abort();
}

static void check_failure(int rc, const char *err, size_t errlen)
{
    if (rc >= 0 || rc <= -NF_EVENT_E__COUNT)
        fail("result is not 0 or -NF_EVENT_E_*", NULL);
    if (!memchr(err, '\0', errlen))
        fail("message not NUL-terminated within errlen", NULL);
    if (err[0] == '\0')
        fail("failure with an empty message", NULL);
    if (!nf_utf8_valid(err, strlen(err)))
        fail("message is not valid UTF-8", err);
}

static bool id_ok(const char *s, bool nonempty)
{
    size_t n = strnlen(s, NF_EVENT_FIELD_MAX + 1);
    return n <= NF_EVENT_FIELD_MAX && (!nonempty || n > 0) && nf_utf8_valid(s, n);
}

static bool same_event(const nf_read_event_t *a, const nf_read_event_t *b)
{
    return strcmp(a->user_id, b->user_id) == 0 && strcmp(a->article_id, b->article_id) == 0 &&
           strcmp(a->session_id, b->session_id) == 0 && strcmp(a->event_id, b->event_id) == 0 &&
           a->event_id_given == b->event_id_given && a->ts_ms == b->ts_ms && a->kind == b->kind &&
           a->user_len == b->user_len && a->article_len == b->article_len &&
           a->session_len == b->session_len && a->event_id_len == b->event_id_len &&
           a->user_len == strlen(a->user_id) && a->article_len == strlen(a->article_id) &&
           a->session_len == strlen(a->session_id) && a->event_id_len == strlen(a->event_id) &&
           strcmp(a->variant, b->variant) == 0 && a->variant_len == b->variant_len &&
           a->variant_len == strlen(a->variant);
}

static void read_event(const char *in, size_t size)
{
    static char err[256], again[256], small[SMALLERR];
    nf_read_event_t e, e2;
    int rc = nf_read_event_decode(in, size, 0, &e, err, sizeof err);
    int rc2 = nf_read_event_decode(in, size, 0, &e2, again, sizeof again);
    if (rc != rc2 || strcmp(err, again) != 0)
        fail("the same input decoded twice gave different results", err);
    /* The fast path is invisible: the strict decoder alone gives the same result. */
    rc2 = nf_read_event_decode_strict(in, size, 0, &e2, again, sizeof again);
    if (rc != rc2 || strcmp(err, again) != 0 || (rc == 0 && !same_event(&e, &e2)))
        fail("nf_read_event_decode and nf_read_event_decode_strict differ", err);
    if (rc != 0) {
        check_failure(rc, err, sizeof err);
        if (nf_read_event_decode(in, size, 0, &e2, small, sizeof small) != rc)
            fail("a smaller err changed the result", err);
        if (!memchr(small, '\0', sizeof small) || strncmp(small, err, sizeof small - 1) != 0)
            fail("a smaller err is not a prefix of the message", err);
        return;
    }
    if (!same_event(&e, &e2))
        fail("the same input decoded twice to different events", NULL);
    if (!id_ok(e.user_id, true) || !id_ok(e.article_id, true) || !id_ok(e.session_id, false) ||
        !id_ok(e.event_id, true))
        fail("a decoded id is empty, too long or not UTF-8", NULL);
    if (e.ts_ms < 0 || e.ts_ms > NF_EVENT_TS_MAX)
        fail("ts out of range", NULL);
    if (!e.event_id_given) {
        char id[65];
        nf_read_event_id(e.user_id, e.article_id, e.session_id, e.kind, e.ts_ms, id);
        if (strcmp(id, e.event_id) != 0)
            fail("computed event_id differs from nf_read_event_id()", id);
    }
    /* Round trip through the project's writer, both ts forms. */
    for (int form = 0; form < 2; form++) {
        nf_jw_t w;
        nf_jw_init(&w);
        nf_jw_obj_open(&w);
        nf_jw_key(&w, "user_id");
        nf_jw_str(&w, e.user_id);
        nf_jw_key(&w, "article_id");
        nf_jw_str(&w, e.article_id);
        nf_jw_key(&w, "session_id");
        nf_jw_str(&w, e.session_id);
        if (e.event_id_given) {
            nf_jw_key(&w, "event_id");
            nf_jw_str(&w, e.event_id);
        }
        if (e.kind != NF_READ_KIND_READ) {
            nf_jw_key(&w, "kind");
            nf_jw_str(&w, nf_read_kind_name(e.kind));
        }
        if (e.variant[0]) {
            nf_jw_key(&w, "variant");
            nf_jw_str(&w, e.variant);
        }
        nf_jw_key(&w, "ts");
        if (form == 0) {
            nf_jw_i64(&w, e.ts_ms);
        } else {
            char ts[40];
            nf_date_format(e.ts_ms, ts, sizeof ts);
            nf_jw_str(&w, ts);
        }
        nf_jw_obj_close(&w);
        if (w.failed)
            abort();
        if (nf_read_event_decode(w.buf, w.len, 0, &e2, err, sizeof err) != 0) {
            fprintf(stderr, "re-encoded: %s\n", w.buf);
            fail("a decoded event, re-encoded, does not decode", err);
        }
        if (!same_event(&e, &e2)) {
            fprintf(stderr, "re-encoded: %s\n", w.buf);
            fail("a decoded event, re-encoded, decodes to something else", NULL);
        }
        nf_jw_free(&w);
    }
    nf_jw_t w;
    nf_jw_init(&w);
    nf_read_event_json(&w, &e);
    bool given = e.event_id_given;
    e.event_id_given = true;
    if (w.failed || nf_read_event_decode(w.buf, w.len, 0, &e2, err, sizeof err) != 0 ||
        !same_event(&e, &e2)) {
        fprintf(stderr, "canonical: %.*s\n", (int)w.len, w.buf ? w.buf : "");
        fail("nf_read_event_json does not decode back to its event", err);
    }
    e.event_id_given = given;
    nf_jw_free(&w);
}

static void source_record(const char *in, size_t size)
{
    static char err[256];
    nf_source_record_t r, r2;
    int rc = nf_source_record_decode("src-1", 5, in, size, 0, &r, err, sizeof err);
    if (rc != 0) {
        check_failure(rc, err, sizeof err);
    } else if (!r.tombstone) {
        if (!id_ok(r.source_id, true) || strcmp(r.source_id, "src-1") != 0)
            fail("source_id is not the key", r.source_id);
        size_t n = strnlen(r.url, NF_SOURCE_URL_MAX + 1);
        if (n == 0 || n > NF_SOURCE_URL_MAX || !nf_utf8_valid(r.url, n))
            fail("url empty, too long or not UTF-8", NULL);
        if (r.interval_s > NF_SOURCE_INTERVAL_MAX || (unsigned)r.type > NF_SOURCE_JSON ||
            (unsigned)r.status > NF_SOURCE_DEAD)
            fail("a field out of its range", NULL);
        nf_jw_t w;
        nf_jw_init(&w);
        nf_jw_obj_open(&w);
        nf_jw_key(&w, "url");
        nf_jw_str(&w, r.url);
        nf_jw_key(&w, "type");
        nf_jw_str(&w, nf_source_type_name(r.type));
        nf_jw_key(&w, "interval_s");
        nf_jw_u64(&w, r.interval_s);
        nf_jw_key(&w, "status");
        nf_jw_str(&w, nf_source_status_name(r.status));
        nf_jw_obj_close(&w);
        if (w.failed)
            abort();
        if (nf_source_record_decode("src-1", 5, w.buf, w.len, 0, &r2, err, sizeof err) != 0)
            fail("a decoded sources record, re-encoded, does not decode", err);
        if (strcmp(r.url, r2.url) != 0 || r.type != r2.type || r.status != r2.status ||
            r.interval_s != r2.interval_s || r2.tombstone)
            fail("a decoded sources record, re-encoded, decodes to something else", NULL);
        nf_jw_free(&w);
    } else if (size != 0) {
        fail("a non-empty value decoded as a tombstone", NULL);
    }

    /* The bytes as a key, no value. */
    size_t klen = size < 200 ? size : 200;
    rc = nf_source_record_decode(in, klen, NULL, 0, 0, &r, err, sizeof err);
    if (rc != 0) {
        check_failure(rc, err, sizeof err);
    } else {
        if (!r.tombstone || strlen(r.source_id) != klen || memcmp(r.source_id, in, klen) != 0 ||
            !nf_utf8_valid(r.source_id, klen))
            fail("a tombstone with a key that is not the key given", NULL);
    }
}

static void dead_letter(const char *in, size_t size)
{
    /* The error is a C string: the bytes up to the first NUL. */
    char *error = malloc(size + 1);
    if (!error)
        abort();
    memcpy(error, in, size);
    error[size] = '\0';
    nf_jw_t w;
    nf_jw_init(&w);
    nf_dead_letter_json(&w, "read-events", 0, 42, "decode", error, in, size, 1709210096789LL);
    if (w.failed)
        abort();
    if (!nf_utf8_valid(w.buf, w.len))
        fail("dead letter is not valid UTF-8", NULL);
    cJSON *j = cJSON_ParseWithLength(w.buf, w.len);
    if (!j)
        fail("dead letter is not JSON", w.buf);
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "payload");
    if (!cJSON_IsString(p))
        fail("dead letter payload is not a string", w.buf);
    /* cJSON stops a string at an escaped NUL; what it kept is still at most the excerpt. */
    size_t cps = 0;
    for (const unsigned char *s = (const unsigned char *)p->valuestring; *s; s++)
        cps += (*s & 0xc0) != 0x80;
    if (cps > NF_DEAD_LETTER_EXCERPT)
        fail("payload excerpt longer than 1024 code points", NULL);
    cJSON_Delete(j);
    nf_jw_free(&w);
    free(error);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536)
        return 0;
    /* An exactly sized copy, so that ASan sees any read past size. */
    char *in = malloc(size ? size : 1);
    if (!in)
        abort();
    memcpy(in, data, size);
    read_event(in, size);
    source_record(in, size);
    dead_letter(in, size);
    free(in);
    return 0;
}
