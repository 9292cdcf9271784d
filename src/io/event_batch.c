/* event_batch.c — see event_batch.h. */
#include "io/event_batch.h"

#include "io/events.h"

#include <stdarg.h>
#include <stdio.h>

static bool space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

__attribute__((format(printf, 5, 6))) static int fail(nf_event_batch_t *b, int code, char *err,
                                                      size_t errlen, const char *fmt, ...)
{
    b->done = true;
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -code;
}

static void skip_space(nf_event_batch_t *b)
{
    while (b->p < b->end && space(*b->p))
        b->p++;
}

int nf_event_batch_init(nf_event_batch_t *b, const char *body, size_t len, char *err, size_t errlen)
{
    b->body = b->p = body;
    b->end = body + len;
    b->done = b->after_comma = false;
    skip_space(b);
    if (b->p == b->end)
        return fail(b, NF_EVENT_E_NOT_OBJECT, err, errlen,
                    "empty body; expected a JSON array or NDJSON of events");
    b->array = *b->p == '[';
    if (b->array)
        b->p++;
    return 0;
}

/* NDJSON: the next non-blank line, its whitespace trimmed. */
static int next_line(nf_event_batch_t *b, const char **ev, size_t *len)
{
    for (;;) {
        skip_space(b);
        if (b->p == b->end) {
            b->done = true;
            return 0;
        }
        const char *s = b->p;
        while (b->p < b->end && *b->p != '\n')
            b->p++;
        const char *e = b->p;
        while (e > s && space(e[-1]))
            e--;
        *ev = s;
        *len = (size_t)(e - s);
        return 1;
    }
}

/* Moves past one array element (a value) to the ',' or ']' that ends it at depth 0. */
static int skip_element(nf_event_batch_t *b, char *err, size_t errlen)
{
    unsigned depth = 0;
    while (b->p < b->end) {
        char c = *b->p;
        if (c == '"') {
            const char *open = b->p;
            for (b->p++; b->p < b->end && *b->p != '"'; b->p++)
                if (*b->p == '\\' && b->p + 1 < b->end)
                    b->p++;
            if (b->p == b->end)
                return fail(b, NF_EVENT_E_SYNTAX, err, errlen,
                            "invalid JSON array at byte %zu: unterminated string",
                            (size_t)(open - b->body));
        } else if (c == '{' || c == '[') {
            if (++depth > NF_EVENT_BATCH_MAX_DEPTH)
                return fail(b, NF_EVENT_E_DEPTH, err, errlen,
                            "invalid JSON at byte %zu: nested deeper than %d levels",
                            (size_t)(b->p - b->body), NF_EVENT_BATCH_MAX_DEPTH);
        } else if (c == '}' || c == ']') {
            if (depth == 0)
                return c == ']' ? 0
                                : fail(b, NF_EVENT_E_SYNTAX, err, errlen,
                                       "invalid JSON array at byte %zu: unbalanced '}'",
                                       (size_t)(b->p - b->body));
            depth--;
        } else if (c == ',' && depth == 0) {
            return 0;
        }
        b->p++;
    }
    return fail(b, NF_EVENT_E_SYNTAX, err, errlen,
                "invalid JSON array at byte %zu: unterminated array", (size_t)(b->p - b->body));
}

/* After the array's ']': only whitespace may follow. 0, or the error. */
static int close_array(nf_event_batch_t *b, char *err, size_t errlen)
{
    skip_space(b);
    if (b->p != b->end)
        return fail(b, NF_EVENT_E_SYNTAX, err, errlen,
                    "invalid JSON array at byte %zu: text after the array",
                    (size_t)(b->p - b->body));
    b->done = true;
    return 0;
}

static int next_element(nf_event_batch_t *b, const char **ev, size_t *len, char *err, size_t errlen)
{
    skip_space(b);
    size_t at = (size_t)(b->p - b->body);
    if (b->p == b->end)
        return fail(b, NF_EVENT_E_SYNTAX, err, errlen,
                    "invalid JSON array at byte %zu: unterminated array", at);
    if (*b->p == ',' || (*b->p == ']' && b->after_comma))
        return fail(b, NF_EVENT_E_SYNTAX, err, errlen,
                    "invalid JSON array at byte %zu: expected a value%s", at,
                    b->after_comma ? " after ','" : "");
    if (*b->p == ']') { /* "[]" */
        b->p++;
        return close_array(b, err, errlen);
    }
    const char *s = b->p;
    int rc = skip_element(b, err, errlen);
    if (rc < 0)
        return rc;
    const char *e = b->p;
    while (e > s && space(e[-1]))
        e--;
    *ev = s;
    *len = (size_t)(e - s);
    b->after_comma = *b->p++ == ',';
    if (!b->after_comma && (rc = close_array(b, err, errlen)) < 0)
        return rc;
    return 1;
}

int nf_event_batch_next(nf_event_batch_t *b, const char **ev, size_t *len, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (b->done)
        return 0;
    if (!b->array)
        return next_line(b, ev, len);
    return next_element(b, ev, len, err, errlen);
}
