/* events.c — see events.h.
 *
 * One decoder state (dec_t) walks the bytes once. Problems come in two weights: a fatal one
 * (syntax, UTF-8, depth) stops the walk at once; a field problem (wrong type, too long, ...) is
 * recorded — the first one only — and the walk goes on, skipping that value, so that a record
 * which is also broken JSON further on is reported as broken JSON. That is what makes the
 * precedence in events.h hold without a second pass. */
#include "io/events.h"

#include "algo/bytes.h"
#include "algo/sha256.h"
#include "feed/dates.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define EXCERPT_MAX 40 /* bytes of input quoted in a message */

typedef struct dec {
    const unsigned char *start, *p, *end;
    char *err;
    size_t errlen;
    int field_rc; /* first field error (negative), 0 if none */
} dec_t;

const char *nf_event_error_name(int rc)
{
    static const char *const names[NF_EVENT_E__COUNT] = {
        "ok",      "too_big", "syntax", "utf8",     "depth", "not_object", "duplicate",
        "missing", "type",    "empty",  "too_long", "ts",    "value",
    };
    if (rc > 0 || rc <= -NF_EVENT_E__COUNT)
        return "unknown";
    return names[-rc];
}

/* ---------------------------------------------------------------- messages */

__attribute__((format(printf, 3, 0))) static void vput_err(char *err, size_t errlen,
                                                           const char *fmt, va_list ap)
{
    if (err && errlen)
        vsnprintf(err, errlen, fmt, ap);
}

__attribute__((format(printf, 3, 4))) static int fatal(dec_t *d, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vput_err(d->err, d->errlen, fmt, ap);
    va_end(ap);
    return -code;
}

__attribute__((format(printf, 3, 4))) static void field_error(dec_t *d, int code, const char *fmt,
                                                              ...)
{
    if (d->field_rc)
        return;
    d->field_rc = -code;
    va_list ap;
    va_start(ap, fmt);
    vput_err(d->err, d->errlen, fmt, ap);
    va_end(ap);
}

__attribute__((format(printf, 4, 5))) static int plain_error(char *err, size_t errlen, int code,
                                                             const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vput_err(err, errlen, fmt, ap);
    va_end(ap);
    return -code;
}

static size_t at(const dec_t *d)
{
    return (size_t)(d->p - d->start);
}

/* What is at d->p, for "got ...". */
static const char *found(const dec_t *d, char buf[24])
{
    if (d->p >= d->end)
        return "end of input";
    unsigned c = *d->p;
    if (c >= 0x20 && c < 0x7f)
        snprintf(buf, 24, "'%c'", (char)c);
    else
        snprintf(buf, 24, "byte 0x%02x", c);
    return buf;
}

static int syntax(dec_t *d, const char *expected)
{
    char b[24];
    return fatal(d, NF_EVENT_E_SYNTAX, "invalid JSON at byte %zu: expected %s, got %s", at(d),
                 expected, found(d, b));
}

/* A quotable excerpt of valid UTF-8 s: at most EXCERPT_MAX bytes cut on a code point boundary
 * ("..." appended when cut), control characters as '?'. dst has EXCERPT_MAX + 4 bytes. */
static const char *excerpt(char *dst, const char *s, size_t n)
{
    size_t k = n;
    if (k > EXCERPT_MAX) {
        k = EXCERPT_MAX;
        while (k > 0 && ((unsigned char)s[k] & 0xc0) == 0x80)
            k--;
    }
    for (size_t i = 0; i < k; i++) {
        unsigned char c = (unsigned char)s[i];
        dst[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    if (k < n)
        memcpy(dst + k, "...", 3), k += 3;
    dst[k] = '\0';
    return dst;
}

/* ---------------------------------------------------------------- lexer */

static inline void ws(dec_t *d)
{
    while (d->p < d->end && (*d->p == ' ' || *d->p == '\n' || *d->p == '\r' || *d->p == '\t'))
        d->p++;
}

/* Length (2..4) of the valid multi-byte UTF-8 sequence at p, 0 if there is none (Unicode
 * Table 3-7: no overlong forms, no surrogates, nothing past U+10FFFF). */
static size_t utf8_seq(const unsigned char *p, const unsigned char *end)
{
    size_t avail = (size_t)(end - p);
    unsigned c = p[0];
    if (c >= 0xc2 && c <= 0xdf)
        return avail >= 2 && (p[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        if (avail < 3 || (p[2] & 0xc0) != 0x80)
            return 0;
        unsigned lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
        return p[1] >= lo && p[1] <= hi ? 3 : 0;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        if (avail < 4 || (p[2] & 0xc0) != 0x80 || (p[3] & 0xc0) != 0x80)
            return 0;
        unsigned lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
        return p[1] >= lo && p[1] <= hi ? 4 : 0;
    }
    return 0;
}

/* Non-zero when one of the 8 bytes in v needs a closer look in a string: a control character,
 * '"', '\\' or a byte >= 0x80 (SWAR, exact for a word of plain bytes: a plain byte neither
 * borrows nor sets its high bit in any of the three differences). */
static inline uint64_t special8(uint64_t v)
{
    const uint64_t lo = 0x0101010101010101ull, hi = 0x8080808080808080ull;
    uint64_t q = v ^ (lo * '"'), b = v ^ (lo * '\\');
    return ((v - lo * 0x20) | (q - lo) | (b - lo) | v) & hi;
}

/* Appends n bytes to a bounded destination: what does not fit in cap is counted, not stored. */
static inline void put(char *out, size_t cap, size_t *len, const void *src, size_t n)
{
    if (*len < cap)
        memcpy(out + *len, src, n <= cap - *len ? n : cap - *len);
    *len += n;
}

static int hex4(const unsigned char *p, const unsigned char *end, unsigned *v)
{
    if (end - p < 4)
        return -1;
    unsigned r = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = p[i], x;
        if (c >= '0' && c <= '9')
            x = c - '0';
        else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
            x = (c | 0x20) - 'a' + 10;
        else
            return -1;
        r = r << 4 | x;
    }
    *v = r;
    return 0;
}

/* Decodes the string whose opening quote is at d->p into out (at most cap bytes stored, no
 * NUL added; out may be NULL with cap 0 to validate only). *n receives the whole decoded
 * length, *nul whether it holds U+0000. d->p ends after the closing quote. 0 or fatal. */
static int str(dec_t *d, char *out, size_t cap, size_t *n, bool *nul)
{
    assert(d->p < d->end && *d->p == '"');
    const unsigned char *p = d->p + 1, *end = d->end;
    size_t len = 0;
    *nul = false;
    for (;;) {
        const unsigned char *run = p;
        while (end - p >= 8) {
            uint64_t v;
            memcpy(&v, p, 8);
            if (special8(v))
                break;
            p += 8;
        }
        while (p < end && *p >= 0x20 && *p != '"' && *p != '\\' && *p < 0x80)
            p++;
        if (p > run)
            put(out, cap, &len, run, (size_t)(p - run));
        if (p >= end) {
            d->p = p;
            return syntax(d, "'\"' to end the string");
        }
        unsigned c = *p;
        if (c == '"') {
            d->p = p + 1;
            *n = len;
            return 0;
        }
        if (c < 0x20) {
            d->p = p;
            return fatal(d, NF_EVENT_E_SYNTAX,
                         "invalid JSON at byte %zu: control character 0x%02x in a string "
                         "(must be escaped)",
                         at(d), c);
        }
        if (c >= 0x80) {
            size_t k = utf8_seq(p, end);
            if (!k) {
                d->p = p;
                return fatal(d, NF_EVENT_E_UTF8, "invalid UTF-8 at byte %zu (byte 0x%02x)", at(d),
                             c);
            }
            put(out, cap, &len, p, k);
            p += k;
            continue;
        }
        /* A backslash. */
        if (end - p < 2) {
            d->p = p + 1;
            return syntax(d, "an escape character after '\\'");
        }
        char ch;
        switch (p[1]) {
        case '"':
            ch = '"';
            break;
        case '\\':
            ch = '\\';
            break;
        case '/':
            ch = '/';
            break;
        case 'b':
            ch = '\b';
            break;
        case 'f':
            ch = '\f';
            break;
        case 'n':
            ch = '\n';
            break;
        case 'r':
            ch = '\r';
            break;
        case 't':
            ch = '\t';
            break;
        case 'u': {
            unsigned cp;
            if (hex4(p + 2, end, &cp) != 0) {
                d->p = p + 2;
                return syntax(d, "4 hex digits after \\u");
            }
            const unsigned char *esc = p;
            p += 6;
            if (cp >= 0xdc00 && cp <= 0xdfff) {
                d->p = esc;
                return fatal(d, NF_EVENT_E_UTF8,
                             "invalid UTF-8 at byte %zu: unpaired surrogate \\u%04x", at(d), cp);
            }
            if (cp >= 0xd800 && cp <= 0xdbff) {
                unsigned lo;
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, end, &lo) != 0 ||
                    lo < 0xdc00 || lo > 0xdfff) {
                    d->p = esc;
                    return fatal(d, NF_EVENT_E_UTF8,
                                 "invalid UTF-8 at byte %zu: unpaired surrogate \\u%04x", at(d),
                                 cp);
                }
                p += 6;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            unsigned char u[4];
            size_t k;
            if (cp < 0x80) {
                u[0] = (unsigned char)cp;
                k = 1;
                if (cp == 0)
                    *nul = true;
            } else if (cp < 0x800) {
                u[0] = (unsigned char)(0xc0 | cp >> 6);
                u[1] = (unsigned char)(0x80 | (cp & 0x3f));
                k = 2;
            } else if (cp < 0x10000) {
                u[0] = (unsigned char)(0xe0 | cp >> 12);
                u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
                u[2] = (unsigned char)(0x80 | (cp & 0x3f));
                k = 3;
            } else {
                u[0] = (unsigned char)(0xf0 | cp >> 18);
                u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
                u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
                u[3] = (unsigned char)(0x80 | (cp & 0x3f));
                k = 4;
            }
            put(out, cap, &len, u, k);
            continue;
        }
        default:
            d->p = p + 1;
            return syntax(d, "one of \" \\ / b f n r t u after '\\'");
        }
        put(out, cap, &len, &ch, 1);
        p += 2;
    }
}

typedef struct num {
    bool is_int;   /* no fraction, no exponent */
    bool overflow; /* is_int but outside int64_t */
    int64_t v;
    const unsigned char *text; /* the token, for messages */
    size_t textlen;
} num_t;

static inline bool digit(const dec_t *d)
{
    return d->p < d->end && *d->p >= '0' && *d->p <= '9';
}

/* The number at d->p (RFC 8259 grammar). 0 or fatal. */
static int number(dec_t *d, num_t *nm)
{
    const unsigned char *s = d->p;
    bool neg = false;
    uint64_t mag = 0;
    *nm = (num_t){.is_int = true};
    if (*d->p == '-') {
        neg = true;
        d->p++;
    }
    if (!digit(d))
        return syntax(d, "a digit");
    if (*d->p == '0') {
        d->p++;
    } else {
        while (digit(d)) {
            unsigned x = (unsigned)(*d->p++ - '0');
            if (mag > (UINT64_MAX - x) / 10)
                nm->overflow = true;
            else
                mag = mag * 10 + x;
        }
    }
    if (d->p < d->end && *d->p == '.') {
        d->p++;
        nm->is_int = false;
        if (!digit(d))
            return syntax(d, "a digit after '.'");
        while (digit(d))
            d->p++;
    }
    if (d->p < d->end && (*d->p == 'e' || *d->p == 'E')) {
        d->p++;
        nm->is_int = false;
        if (d->p < d->end && (*d->p == '+' || *d->p == '-'))
            d->p++;
        if (!digit(d))
            return syntax(d, "a digit in the exponent");
        while (digit(d))
            d->p++;
    }
    if (nm->is_int && !nm->overflow) {
        if (neg ? mag > (uint64_t)INT64_MAX + 1 : mag > (uint64_t)INT64_MAX)
            nm->overflow = true;
        else
            nm->v = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    }
    nm->text = s;
    nm->textlen = (size_t)(d->p - s);
    return 0;
}

static int literal(dec_t *d, const char *word, size_t n)
{
    if ((size_t)(d->end - d->p) < n || memcmp(d->p, word, n) != 0) {
        char e[16];
        snprintf(e, sizeof e, "'%s'", word);
        /* Point at the first byte that differs. */
        size_t i = 0;
        while (d->p + i < d->end && i < n && d->p[i] == (unsigned char)word[i])
            i++;
        d->p += i;
        return syntax(d, e);
    }
    d->p += n;
    return 0;
}

/* Validates and skips the value at d->p; level is the nesting level it has if it is an object
 * or array. Recursion is bounded by NF_EVENT_MAX_DEPTH. 0 or fatal. */
static int skip_value(dec_t *d, unsigned level)
{
    if (d->p >= d->end)
        return syntax(d, "a value");
    size_t n;
    bool nul;
    int rc;
    switch (*d->p) {
    case '"':
        return str(d, NULL, 0, &n, &nul);
    case 't':
        return literal(d, "true", 4);
    case 'f':
        return literal(d, "false", 5);
    case 'n':
        return literal(d, "null", 4);
    case '{':
    case '[': {
        unsigned char close = *d->p == '{' ? '}' : ']';
        if (level > NF_EVENT_MAX_DEPTH)
            return fatal(d, NF_EVENT_E_DEPTH,
                         "invalid JSON at byte %zu: nested deeper than %d levels", at(d),
                         NF_EVENT_MAX_DEPTH);
        d->p++;
        ws(d);
        if (d->p < d->end && *d->p == close) {
            d->p++;
            return 0;
        }
        for (;;) {
            if (close == '}') {
                if (d->p >= d->end || *d->p != '"')
                    return syntax(d, "'\"' to start a field name");
                if ((rc = str(d, NULL, 0, &n, &nul)) != 0)
                    return rc;
                ws(d);
                if (d->p >= d->end || *d->p != ':')
                    return syntax(d, "':' after the field name");
                d->p++;
                ws(d);
            }
            if ((rc = skip_value(d, level + 1)) != 0)
                return rc;
            ws(d);
            if (d->p < d->end && *d->p == ',') {
                d->p++;
                ws(d);
                continue;
            }
            if (d->p < d->end && *d->p == close) {
                d->p++;
                return 0;
            }
            return syntax(d, close == '}' ? "',' or '}' after a field"
                                          : "',' or ']' after an array element");
        }
    }
    default:
        if (*d->p == '-' || (*d->p >= '0' && *d->p <= '9')) {
            num_t nm;
            return number(d, &nm);
        }
        return syntax(d, "a value");
    }
}

/* "a string", "a number", ... for the value starting with c (already known to be valid). */
static const char *type_name(unsigned char c)
{
    switch (c) {
    case '"':
        return "a string";
    case '{':
        return "an object";
    case '[':
        return "an array";
    case 't':
    case 'f':
        return "a boolean";
    case 'n':
        return "null";
    default:
        return "a number";
    }
}

/* A value of the wrong type for a known field: validated, skipped, reported as a field error. */
static int wrong_type(dec_t *d, const char *field, const char *expected)
{
    unsigned char c = *d->p;
    int rc = skip_value(d, 2);
    if (rc == 0)
        field_error(d, NF_EVENT_E_TYPE, "field \"%s\": expected %s, got %s", field, expected,
                    type_name(c));
    return rc;
}

/* ---------------------------------------------------------------- objects */

/* The known fields of a record kind, and what to do with a value of one. */
typedef int (*on_field_fn)(dec_t *d, void *ctx, unsigned idx);

typedef struct field_name {
    const char *name;
    size_t len;
} field_name_t;

#define FIELD(s)                                                                                   \
    {                                                                                              \
        s, sizeof s - 1                                                                            \
    }

typedef struct shape {
    const field_name_t *names;
    unsigned n; /* <= 32 */
    on_field_fn on_field;
} shape_t;

#define KEY_MAX 32 /* longer keys are not ours: validated, not stored */

/* The length of the key whose opening quote is at d->p if it is plain printable ASCII without
 * escapes and shorter than KEY_MAX (every key of ours, and nearly every producer's), so it can
 * be matched in place; KEY_MAX otherwise (str() then decodes it, and reports what is wrong). */
static inline size_t plain_key(const dec_t *d)
{
    const unsigned char *p = d->p + 1;
    size_t lim = (size_t)(d->end - p) < KEY_MAX ? (size_t)(d->end - p) : KEY_MAX;
    for (size_t i = 0; i < lim; i++) {
        unsigned c = p[i];
        if (c == '"')
            return i;
        if (c == '\\' || c < 0x20 || c >= 0x80)
            break;
    }
    return KEY_MAX;
}

/* Field names are short: a loop beats a call to memcmp. */
static inline bool same(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

/* Walks one flat object, calling s->on_field for each known field (first occurrence) and
 * skipping the rest. *seen gets the bit of every known field present. 0 or fatal. */
static int walk_object(dec_t *d, const shape_t *s, void *ctx, uint32_t *seen)
{
    size_t first_at[32];
    *seen = 0;
    ws(d);
    if (d->p >= d->end)
        return syntax(d, "a JSON object");
    if (*d->p != '{') {
        unsigned char c = *d->p;
        if (c != '"' && c != '[' && c != 't' && c != 'f' && c != 'n' && c != '-' &&
            (c < '0' || c > '9'))
            return syntax(d, "'{'");
        /* Some other JSON value: say which, if it is one. */
        int rc = skip_value(d, 1);
        return rc ? rc
                  : fatal(d, NF_EVENT_E_NOT_OBJECT, "top level is %s; expected a JSON object",
                          type_name(c));
    }
    d->p++;
    ws(d);
    if (d->p < d->end && *d->p == '}') {
        d->p++;
    } else {
        for (;;) {
            if (d->p >= d->end || *d->p != '"')
                return syntax(d, "'\"' to start a field name");
            size_t key_at = at(d), klen = plain_key(d);
            const char *key;
            char buf[KEY_MAX];
            bool nul = false;
            if (klen < KEY_MAX) { /* no escape: matched where it is */
                key = (const char *)d->p + 1;
                d->p += klen + 2;
            } else {
                int rc = str(d, buf, sizeof buf, &klen, &nul);
                if (rc != 0)
                    return rc;
                key = buf;
            }
            ws(d);
            if (d->p >= d->end || *d->p != ':')
                return syntax(d, "':' after the field name");
            d->p++;
            ws(d);
            unsigned idx = s->n;
            if (klen < KEY_MAX && !nul) {
                for (unsigned i = 0; i < s->n; i++) {
                    if (s->names[i].len == klen && same(s->names[i].name, key, klen)) {
                        idx = i;
                        break;
                    }
                }
            }
            int rc;
            if (idx == s->n) {
                rc = skip_value(d, 2);
            } else if (*seen & (1u << idx)) {
                field_error(d, NF_EVENT_E_DUPLICATE,
                            "duplicate field \"%s\" at byte %zu (first at byte %zu)",
                            s->names[idx].name, key_at, first_at[idx]);
                rc = skip_value(d, 2);
            } else {
                *seen |= 1u << idx;
                first_at[idx] = key_at;
                rc = d->p < d->end ? s->on_field(d, ctx, idx) : syntax(d, "a value");
            }
            if (rc != 0)
                return rc;
            ws(d);
            if (d->p < d->end && *d->p == ',') {
                d->p++;
                ws(d);
                continue;
            }
            if (d->p < d->end && *d->p == '}') {
                d->p++;
                break;
            }
            return syntax(d, "',' or '}' after a field");
        }
    }
    ws(d);
    if (d->p < d->end)
        return syntax(d, "end of input after the object");
    return 0;
}

/* A string field into buf (max bytes + NUL). null is absent when optional (*present false).
 * Reports wrong type, U+0000, too long and (when nonempty) empty as field errors. */
static int string_field(dec_t *d, const char *name, char *buf, size_t max, bool optional,
                        bool nonempty, bool *present)
{
    if (present)
        *present = false;
    buf[0] = '\0';
    if (*d->p != '"') {
        if (optional && *d->p == 'n')
            return literal(d, "null", 4);
        return wrong_type(d, name, "a string");
    }
    size_t n;
    bool nul;
    int rc = str(d, buf, max, &n, &nul);
    if (rc != 0)
        return rc;
    buf[n <= max ? n : max] = '\0';
    if (present)
        *present = true;
    if (n > max)
        field_error(d, NF_EVENT_E_TOO_LONG, "field \"%s\" is too long: %zu bytes, max %zu", name, n,
                    max);
    else if (nul)
        field_error(d, NF_EVENT_E_VALUE, "field \"%s\" contains U+0000", name);
    else if (n == 0 && nonempty)
        field_error(d, NF_EVENT_E_EMPTY, "field \"%s\" is empty", name);
    return 0;
}

/* ---------------------------------------------------------------- timestamps */

static int64_t days_from_civil(int64_t y, int m, int dd)
{
    /* H. Hinnant's algorithm: proleptic Gregorian, any year. */
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + dd - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static bool digits(const char *s, int n, int *v)
{
    int r = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        r = r * 10 + (s[i] - '0');
    }
    *v = r;
    return true;
}

/* Strict RFC 3339 date-time (§5.6): 0, -1 when not one, -2 when outside 1970..9999 UTC.
 * (nf_date_parse() in feed/dates.h is deliberately lenient, for feeds; inputs here are not.) */
static int rfc3339(const char *s, size_t n, int64_t *out)
{
    int y, mo, dd, h, mi, sec, oh = 0, om = 0, ms = 0, sign = 0;
    if (n < 20 || !digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) || s[7] != '-' ||
        !digits(s + 8, 2, &dd) || (s[10] != 'T' && s[10] != 't') || !digits(s + 11, 2, &h) ||
        s[13] != ':' || !digits(s + 14, 2, &mi) || s[16] != ':' || !digits(s + 17, 2, &sec))
        return -1;
    size_t i = 19;
    if (s[i] == '.') {
        i++;
        size_t f0 = i;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            if (i - f0 < 3)
                ms = ms * 10 + (s[i] - '0');
            i++;
        }
        if (i == f0)
            return -1;
        for (size_t k = i - f0; k < 3; k++)
            ms *= 10;
    }
    if (i < n && (s[i] == 'Z' || s[i] == 'z')) {
        i++;
    } else if (i < n && (s[i] == '+' || s[i] == '-')) {
        sign = s[i] == '+' ? 1 : -1;
        if (n - i < 6 || !digits(s + i + 1, 2, &oh) || s[i + 3] != ':' ||
            !digits(s + i + 4, 2, &om))
            return -1;
        i += 6;
    } else {
        return -1;
    }
    if (i != n)
        return -1;
    static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (mo < 1 || mo > 12 || dd < 1 || h > 23 || mi > 59 || sec > 60 || oh > 23 || om > 59)
        return -1;
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (dd > mdays[mo - 1] + (mo == 2 && leap))
        return -1;
    int64_t t = days_from_civil(y, mo, dd) * 86400 + h * 3600 + mi * 60 + sec;
    t -= (int64_t)sign * (oh * 3600 + om * 60);
    t = t * 1000 + ms;
    if (t < 0 || t > NF_EVENT_TS_MAX)
        return -2;
    *out = t;
    return 0;
}

/* The ts field: RFC 3339 string or integer epoch milliseconds. */
static int ts_field(dec_t *d, int64_t *ts)
{
    static const char range[] = "is out of range (years 1970..9999)";
    char ex[EXCERPT_MAX + 4];
    if (*d->p == '"') {
        char buf[64];
        size_t n;
        bool nul;
        int rc = str(d, buf, sizeof buf, &n, &nul);
        if (rc != 0)
            return rc;
        int r = n <= sizeof buf ? rfc3339(buf, n, ts) : -1;
        if (r == -1)
            field_error(d, NF_EVENT_E_TS, "field \"ts\": \"%s\" is not an RFC 3339 date-time",
                        excerpt(ex, buf, n < sizeof buf ? n : sizeof buf));
        else if (r == -2)
            field_error(d, NF_EVENT_E_TS, "field \"ts\": \"%s\" %s", excerpt(ex, buf, n), range);
        return 0;
    }
    if (*d->p == '-' || (*d->p >= '0' && *d->p <= '9')) {
        num_t nm;
        int rc = number(d, &nm);
        if (rc != 0)
            return rc;
        if (nm.is_int && !nm.overflow && nm.v >= 0 && nm.v <= NF_EVENT_TS_MAX) {
            *ts = nm.v;
            return 0;
        }
        excerpt(ex, (const char *)nm.text, nm.textlen);
        if (!nm.is_int)
            field_error(d, NF_EVENT_E_TS, "field \"ts\": %s is not integer epoch milliseconds", ex);
        else
            field_error(d, NF_EVENT_E_TS, "field \"ts\": %s %s", ex, range);
        return 0;
    }
    return wrong_type(d, "ts", "an RFC 3339 date-time string or integer epoch milliseconds");
}

/* ---------------------------------------------------------------- read-events */

enum {
    RE_USER,
    RE_ARTICLE,
    RE_SESSION,
    RE_EVENT,
    RE_TS,
    RE_KIND,
    RE_TOPIC,
    RE_VARIANT,
    RE_SOURCE,
    RE__N
};
static const field_name_t re_names[RE__N] = {
    FIELD("user_id"), FIELD("article_id"), FIELD("session_id"), FIELD("event_id"), FIELD("ts"),
    FIELD("kind"),    FIELD("topic"),      FIELD("variant"),    FIELD("source")};
static const char *const kind_names[NF_EVENT_KIND__COUNT] = {
    "read", "save",   "share",     "dislike",     "hide",        "follow",       "unfollow",
    "mute", "unmute", "subscribe", "unsubscribe", "mute_source", "unmute_source"};
#define KIND_LIST                                                                                  \
    "read, save, share, dislike, hide, follow, unfollow, mute, unmute, subscribe, unsubscribe, "   \
    "mute_source, unmute_source"

const char *nf_read_kind_name(int kind)
{
    return kind >= 0 && kind < NF_EVENT_KIND__COUNT ? kind_names[kind] : "?";
}

/* A setting's topic or source until the kind is known — with what is wrong with it, which is an
 * error only for a setting of that sort (a read ignores both fields). */
typedef struct re_name {
    char s[NF_EVENT_FIELD_MAX + 1];
    int rc;
    char err[160];
} re_name_t;

/* The strict decoder's record: the event, a setting's topic and source. */
typedef struct re_ctx {
    nf_read_event_t *e;
    re_name_t topic, source;
} re_ctx_t;

/* The field `name` into n->s, its field error (not the record's) into n->rc. */
static int name_field(dec_t *d, const char *name, re_name_t *n)
{
    int saved = d->field_rc;
    char *err = d->err;
    size_t errlen = d->errlen;
    d->field_rc = 0;
    d->err = n->err;
    d->errlen = sizeof n->err;
    int r = string_field(d, name, n->s, NF_EVENT_FIELD_MAX, false, true, NULL);
    n->rc = d->field_rc;
    d->field_rc = saved;
    d->err = err;
    d->errlen = errlen;
    return r;
}

static int enum_field(dec_t *d, const char *name, const char *const *names, unsigned n,
                      const char *list, int *v);

static int re_field(dec_t *d, void *ctx, unsigned idx)
{
    re_ctx_t *rc = ctx;
    nf_read_event_t *e = rc->e;
    switch (idx) {
    case RE_TOPIC:
        return name_field(d, "topic", &rc->topic);
    case RE_SOURCE:
        return name_field(d, "source", &rc->source);
    case RE_USER:
        return string_field(d, "user_id", e->user_id, NF_EVENT_FIELD_MAX, false, true, NULL);
    case RE_ARTICLE:
        return string_field(d, "article_id", e->article_id, NF_EVENT_FIELD_MAX, false, true, NULL);
    case RE_SESSION:
        return string_field(d, "session_id", e->session_id, NF_EVENT_FIELD_MAX, true, false, NULL);
    case RE_VARIANT:
        return string_field(d, "variant", e->variant, NF_EVENT_VARIANT_MAX, true, false, NULL);
    case RE_EVENT:
        return string_field(d, "event_id", e->event_id, NF_EVENT_FIELD_MAX, true, true,
                            &e->event_id_given);
    case RE_KIND: {
        int k = NF_READ_KIND_READ;
        int r = enum_field(d, "kind", kind_names, NF_EVENT_KIND__COUNT, KIND_LIST, &k);
        e->kind = (uint8_t)k;
        return r;
    }
    default:
        return ts_field(d, &e->ts_ms);
    }
}

static const shape_t re_shape = {re_names, RE__N, re_field};

void nf_read_event_id(const char *user_id, const char *article_id, const char *session_id, int kind,
                      int64_t ts_ms, char out[65])
{
    nf_sha256_t c;
    uint8_t h[32];
    nf_sha256_init(&c);
    /* Each field with its NUL: the separator is part of the contract (events.h). */
    nf_sha256_update(&c, user_id, strlen(user_id) + 1);
    nf_sha256_update(&c, article_id, strlen(article_id) + 1);
    nf_sha256_update(&c, session_id, strlen(session_id) + 1);
    if (kind != NF_READ_KIND_READ) {
        const char *name = nf_read_kind_name(kind);
        nf_sha256_update(&c, name, strlen(name) + 1);
    }
    if (nf_read_kind_is_setting(kind)) {
        char ts[24];
        int n = snprintf(ts, sizeof ts, "%lld", (long long)ts_ms);
        nf_sha256_update(&c, ts, (size_t)n + 1);
    }
    nf_sha256_final(&c, h);
    nf_hex(h, sizeof h, out);
}

void nf_read_event_json(nf_jw_t *w, const nf_read_event_t *e)
{
    nf_jw_obj_open(w);
    nf_jw_key(w, "event_id");
    nf_jw_str(w, e->event_id);
    nf_jw_key(w, "user_id");
    nf_jw_str(w, e->user_id);
    nf_jw_key(w, nf_read_kind_is_source(e->kind)    ? "source"
                 : nf_read_kind_is_setting(e->kind) ? "topic"
                                                    : "article_id");
    nf_jw_str(w, e->article_id);
    if (e->session_id[0]) {
        nf_jw_key(w, "session_id");
        nf_jw_str(w, e->session_id);
    }
    if (e->kind != NF_READ_KIND_READ) {
        nf_jw_key(w, "kind");
        nf_jw_str(w, nf_read_kind_name(e->kind));
    }
    if (e->variant[0]) {
        nf_jw_key(w, "variant");
        nf_jw_str(w, e->variant);
    }
    nf_jw_key(w, "ts");
    nf_jw_i64(w, e->ts_ms);
    nf_jw_obj_close(w);
}

static int too_big(size_t len, size_t max_bytes, char *err, size_t errlen)
{
    return plain_error(err, errlen, NF_EVENT_E_TOO_BIG,
                       "record is %zu bytes, over the limit of %zu", len, max_bytes);
}

/* ---- the fast path: the shape nearly every producer writes ----
 *
 * One flat object of at most 256 bytes of the known fields only, each once, in any order, with
 * spaces between tokens; ids printable ASCII without escapes (1..128 bytes,
 * session_id 0..128); ts as integer epoch milliseconds in range, without leading zeros. For such
 * a record this fills out exactly as the strict decoder does; anything else (an escape, a
 * non-ASCII byte, null, an unknown or repeated field, an RFC 3339 ts, an error of any kind)
 * returns 1 and the strict decoder takes the record from the start, with its precise messages.
 * The record is classified 16 bytes at a time (quote positions as a bit mask) and walked from
 * quote to quote; the strict decoder would spend ~250 ns a record here, on byte loops. */
#define FAST_MAX 256 /* longer records take the strict decoder */

/* Bit i of q[i / 64] set iff byte i is '"'. false if the record has a byte the fast path leaves
 * to the strict decoder: a backslash, a control byte (whitespace other than ' ' included) or a
 * byte >= 0x80. SSE2 16 bytes at a time (x86-64's baseline), else a byte at a time. */
static bool fast_classify(const unsigned char *p, size_t n, uint64_t q[FAST_MAX / 64])
{
    memset(q, 0, FAST_MAX / 8);
#if defined(__SSE2__)
    unsigned char tail[16];
    for (size_t i = 0; i < n; i += 16) {
        const unsigned char *s = p + i;
        if (n - i < 16) { /* never read past the record: the last piece padded with spaces */
            memset(tail, ' ', sizeof tail);
            memcpy(tail, s, n - i);
            s = tail;
        }
        __m128i v = _mm_loadu_si128((const __m128i *)s);
        /* signed compare: bytes >= 0x80 are negative, so "< 0x20" catches them too */
        __m128i bad = _mm_or_si128(_mm_cmplt_epi8(v, _mm_set1_epi8(0x20)),
                                   _mm_cmpeq_epi8(v, _mm_set1_epi8('\\')));
        if (_mm_movemask_epi8(bad))
            return false;
        uint64_t m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')));
        q[i / 64] |= m << (i % 64);
    }
#else
    for (size_t i = 0; i < n; i++) {
        if (p[i] < 0x20 || p[i] >= 0x80 || p[i] == '\\')
            return false;
        if (p[i] == '"')
            q[i / 64] |= 1ull << (i % 64);
    }
#endif
    return true;
}

/* The first quote at or after from, or n. */
static inline size_t next_quote(const uint64_t q[FAST_MAX / 64], size_t from, size_t n)
{
    size_t w = from / 64;
    if (w >= FAST_MAX / 64)
        return n;
    uint64_t m = q[w] & (~0ull << (from % 64));
    while (!m) {
        if (++w == FAST_MAX / 64)
            return n;
        m = q[w];
    }
    size_t at = w * 64 + (size_t)__builtin_ctzll(m);
    return at < n ? at : n;
}

/* The value of 8 ASCII digits at p, or -1 if one is not a digit. */
static inline int64_t digits8(const unsigned char *p)
{
    uint64_t v = nf_get_le64(p) - 0x3030303030303030ull;
    if (((v + 0x7676767676767676ull) | v) & 0x8080808080808080ull)
        return -1;
    v = (v * 10 + (v >> 8)) & 0x00ff00ff00ff00ffull;     /* pairs */
    v = (v * 100 + (v >> 16)) & 0x0000ffff0000ffffull;   /* quads */
    v = (v * 10000 + (v >> 32)) & 0x00000000ffffffffull; /* eight */
    return (int64_t)v;
}

/* The read-events field a plain key names, by its length and first letter; RE__N if none. */
static inline unsigned fast_key(const unsigned char *k, size_t n)
{
    switch (n) {
    case 2:
        return memcmp(k, "ts", 2) == 0 ? RE_TS : RE__N;
    case 4:
        return memcmp(k, "kind", 4) == 0 ? RE_KIND : RE__N;
    case 7:
        if (k[0] == 'u')
            return memcmp(k, "user_id", 7) == 0 ? RE_USER : RE__N;
        return memcmp(k, "variant", 7) == 0 ? RE_VARIANT : RE__N;
    case 8:
        return memcmp(k, "event_id", 8) == 0 ? RE_EVENT : RE__N;
    case 10:
        if (k[0] == 'a')
            return memcmp(k, "article_id", 10) == 0 ? RE_ARTICLE : RE__N;
        return memcmp(k, "session_id", 10) == 0 ? RE_SESSION : RE__N;
    default:
        return RE__N;
    }
}

/* The kind a plain string names, or -1 (the strict decoder then writes the error). */
static inline int fast_kind(const unsigned char *v, size_t n)
{
    for (int k = 0; k < NF_READ_KIND__COUNT; k++)
        if (n == strlen(kind_names[k]) && memcmp(v, kind_names[k], n) == 0)
            return k;
    return -1;
}

/* memcpy of an id (< 256 bytes) in 16-, 8-, 4-byte pieces, the last one overlapping: a
 * variable-length memcpy of this size became `rep movsq`, whose start-up cost is most of it. */
static inline void copy_id(char *dst, const unsigned char *src, size_t len)
{
    if (len >= 16) {
        for (size_t i = 0; i + 16 < len; i += 16)
            memcpy(dst + i, src + i, 16);
        memcpy(dst + len - 16, src + len - 16, 16);
    } else if (len >= 8) {
        memcpy(dst, src, 8);
        memcpy(dst + len - 8, src + len - 8, 8);
    } else if (len >= 4) {
        memcpy(dst, src, 4);
        memcpy(dst + len - 4, src + len - 4, 4);
    } else {
        for (size_t i = 0; i < len; i++)
            dst[i] = (char)src[i];
    }
}

static int fast_read_event(const unsigned char *p, const unsigned char *end, nf_read_event_t *out)
{
    size_t n = (size_t)(end - p), i = 0;
    uint64_t q[FAST_MAX / 64];
    if (n > FAST_MAX || !fast_classify(p, n, q))
        return 1;
        /* Between tokens there is only ' ' now (any other whitespace sent the record away). */
#define SPACES()                                                                                   \
    while (i < n && p[i] == ' ')                                                                   \
    i++
    uint32_t seen = 0;
    uint8_t lens[RE__N] = {0};
    SPACES();
    if (i >= n || p[i++] != '{')
        return 1;
    for (;;) {
        SPACES();
        if (i >= n || p[i] != '"')
            return 1;
        size_t ke = next_quote(q, i + 1, n);
        if (ke >= n)
            return 1;
        unsigned idx = fast_key(p + i + 1, ke - i - 1);
        if (idx == RE__N || (seen & (1u << idx)))
            return 1;
        seen |= 1u << idx;
        i = ke + 1;
        SPACES();
        if (i >= n || p[i++] != ':')
            return 1;
        SPACES();
        if (idx == RE_TS) {
            if (i >= n || p[i] < '0' || p[i] > '9' ||
                (p[i] == '0' && i + 1 < n && p[i + 1] >= '0' && p[i + 1] <= '9'))
                return 1;
            int64_t v = 0, d8;
            int nd = 0;
            if (n - i >= 8 && (d8 = digits8(p + i)) >= 0) { /* epoch ms have 13 digits */
                v = d8;
                nd = 8;
                i += 8;
            }
            for (; i < n && p[i] >= '0' && p[i] <= '9'; i++, nd++) {
                if (nd == 15)
                    return 1;
                v = v * 10 + (p[i] - '0');
            }
            if ((i < n && (p[i] == '.' || p[i] == 'e' || p[i] == 'E')) || v > NF_EVENT_TS_MAX)
                return 1;
            out->ts_ms = v;
        } else if (idx == RE_KIND) {
            size_t ve;
            if (i >= n || p[i] != '"' || (ve = next_quote(q, i + 1, n)) >= n)
                return 1;
            int k = fast_kind(p + i + 1, ve - i - 1);
            if (k < 0)
                return 1; /* the strict decoder says what is wrong */
            out->kind = (uint8_t)k;
            i = ve + 1;
        } else {
            if (i >= n || p[i] != '"')
                return 1;
            size_t ve = next_quote(q, i + 1, n), len = ve - i - 1;
            bool may_be_empty = idx == RE_SESSION || idx == RE_VARIANT;
            if (ve >= n || len > (idx == RE_VARIANT ? NF_EVENT_VARIANT_MAX : NF_EVENT_FIELD_MAX) ||
                (len == 0 && !may_be_empty))
                return 1;
            char *dst = idx == RE_USER      ? out->user_id
                        : idx == RE_ARTICLE ? out->article_id
                        : idx == RE_SESSION ? out->session_id
                        : idx == RE_VARIANT ? out->variant
                                            : out->event_id;
            copy_id(dst, p + i + 1, len);
            dst[len] = '\0';
            lens[idx] = (uint8_t)len;
            i = ve + 1;
        }
        SPACES();
        if (i < n && p[i] == ',') {
            i++;
            continue;
        }
        if (i < n && p[i] == '}')
            break;
        return 1;
    }
    i++;
    SPACES();
#undef SPACES
    if (i != n)
        return 1;
    const uint32_t required = 1u << RE_USER | 1u << RE_ARTICLE | 1u << RE_TS;
    if ((seen & required) != required)
        return 1;
    out->event_id_given = (seen & (1u << RE_EVENT)) != 0;
    out->user_len = lens[RE_USER];
    out->article_len = lens[RE_ARTICLE];
    out->session_len = lens[RE_SESSION];
    out->event_id_len = lens[RE_EVENT];
    out->variant_len = lens[RE_VARIANT];
    if (!out->event_id_given) {
        nf_read_event_id(out->user_id, out->article_id, out->session_id, out->kind, out->ts_ms,
                         out->event_id);
        out->event_id_len = 64;
    }
    return 0;
}

static void read_event_clear(nf_read_event_t *out)
{
    out->user_id[0] = out->article_id[0] = out->session_id[0] = out->event_id[0] = '\0';
    out->variant[0] = '\0';
    out->event_id_given = false;
    out->user_len = out->article_len = out->session_len = out->event_id_len = 0;
    out->variant_len = 0;
    out->kind = NF_READ_KIND_READ;
    out->ts_ms = 0;
}

int nf_read_event_decode(const char *json, size_t len, size_t max_bytes, nf_read_event_t *out,
                         char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (max_bytes && len > max_bytes)
        return too_big(len, max_bytes, err, errlen);
    if (json && len) {
        read_event_clear(out);
        if (fast_read_event((const unsigned char *)json, (const unsigned char *)json + len, out) ==
            0)
            return 0;
    }
    return nf_read_event_decode_strict(json, len, max_bytes, out, err, errlen);
}

int nf_read_event_decode_strict(const char *json, size_t len, size_t max_bytes,
                                nf_read_event_t *out, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (max_bytes && len > max_bytes)
        return too_big(len, max_bytes, err, errlen);
    if (!json || len == 0)
        return plain_error(err, errlen, NF_EVENT_E_NOT_OBJECT,
                           "empty value; expected a JSON object");
    read_event_clear(out);
    dec_t d = {(const unsigned char *)json,
               (const unsigned char *)json,
               (const unsigned char *)json + len,
               err,
               errlen,
               0};
    uint32_t seen;
    re_ctx_t ctx = {.e = out};
    int rc = walk_object(&d, &re_shape, &ctx, &seen);
    if (rc != 0)
        return rc;
    if (d.field_rc != 0)
        return d.field_rc;
    bool setting = nf_read_kind_is_setting(out->kind), source = nf_read_kind_is_source(out->kind);
    const char *names = source ? "source" : "topic";
    if (setting && (seen & (1u << RE_ARTICLE)))
        return plain_error(err, errlen, NF_EVENT_E_VALUE,
                           "field \"article_id\": a %s names a %s, not an article",
                           nf_read_kind_name(out->kind), names);
    if (source && (seen & (1u << RE_TOPIC)))
        return plain_error(err, errlen, NF_EVENT_E_VALUE,
                           "field \"topic\": a %s names a source, not a topic",
                           nf_read_kind_name(out->kind));
    if (setting && !source && (seen & (1u << RE_SOURCE)) && !(seen & (1u << RE_TOPIC)))
        return plain_error(err, errlen, NF_EVENT_E_VALUE,
                           "field \"source\": a %s names a topic (mute_source and unmute_source "
                           "name a source)",
                           nf_read_kind_name(out->kind));
    unsigned what = source ? RE_SOURCE : setting ? RE_TOPIC : RE_ARTICLE;
    const unsigned required[] = {RE_USER, what, RE_TS};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (!(seen & (1u << required[i])))
            return plain_error(err, errlen, NF_EVENT_E_MISSING, "missing required field \"%s\"",
                               re_names[required[i]].name);
    const re_name_t *nm = source ? &ctx.source : &ctx.topic;
    if (setting && nm->rc)
        return plain_error(err, errlen, -nm->rc, "%s", nm->err);
    if (setting)
        memcpy(out->article_id, nm->s, sizeof nm->s);
    if (!out->event_id_given)
        nf_read_event_id(out->user_id, out->article_id, out->session_id, out->kind, out->ts_ms,
                         out->event_id);
    out->user_len = (uint8_t)strlen(out->user_id);
    out->article_len = (uint8_t)strlen(out->article_id);
    out->session_len = (uint8_t)strlen(out->session_id);
    out->event_id_len = (uint8_t)strlen(out->event_id);
    out->variant_len = (uint8_t)strlen(out->variant);
    return 0;
}

int nf_read_event_check_time(int64_t ts_ms, int64_t now_ms, int64_t max_future_ms, char *err,
                             size_t errlen)
{
    char ts[40], clock[40];
    if (ts_ms < NF_EVENT_TS_FLOOR) {
        nf_date_format(ts_ms, ts, sizeof ts);
        return plain_error(err, errlen, NF_EVENT_E_TS,
                           "field \"ts\": %s is before 2000-01-01T00:00:00Z (a clock that was not "
                           "set, or epoch seconds sent as milliseconds?)",
                           ts);
    }
    int64_t ahead;
    if (__builtin_sub_overflow(ts_ms, now_ms, &ahead))
        ahead = INT64_MAX;
    if (max_future_ms > 0 && ahead > max_future_ms) {
        nf_date_format(ts_ms, ts, sizeof ts);
        nf_date_format(now_ms, clock, sizeof clock);
        return plain_error(err, errlen, NF_EVENT_E_TS,
                           "field \"ts\": %s is %lld ms ahead of the wall clock (%s), more than "
                           "the %lld allowed (trending.max_future_ms)",
                           ts, (long long)ahead, clock, (long long)max_future_ms);
    }
    return 0;
}

/* ---------------------------------------------------------------- sources */

enum { SR_URL, SR_TYPE, SR_INTERVAL, SR_STATUS, SR_CRAWL_AT, SR__N };
static const field_name_t sr_names[SR__N] = {FIELD("url"), FIELD("type"), FIELD("interval_s"),
                                             FIELD("status"), FIELD("crawl_at_ms")};
static const char *const type_names[] = {"auto", "rss", "atom", "json"};
static const char *const status_names[] = {"active", "paused", "dead"};

const char *nf_source_type_name(nf_source_type_t t)
{
    return (unsigned)t < 4 ? type_names[t] : "?";
}

const char *nf_source_status_name(nf_source_status_t s)
{
    return (unsigned)s < 3 ? status_names[s] : "?";
}

/* An optional string that must be one of names[0..n); *v unchanged when null. */
static int enum_field(dec_t *d, const char *name, const char *const *names, unsigned n,
                      const char *list, int *v)
{
    /* A few bytes more than an excerpt shows, so that excerpt() finds the code point boundary
     * to cut at within what was stored. */
    char buf[EXCERPT_MAX + 4], ex[EXCERPT_MAX + 4];
    if (*d->p == 'n')
        return literal(d, "null", 4);
    if (*d->p != '"')
        return wrong_type(d, name, "a string");
    size_t len;
    bool nul;
    int rc = str(d, buf, sizeof buf, &len, &nul);
    if (rc != 0)
        return rc;
    for (unsigned i = 0; i < n; i++) {
        if (!nul && len == strlen(names[i]) && memcmp(buf, names[i], len) == 0) {
            *v = (int)i;
            return 0;
        }
    }
    field_error(d, NF_EVENT_E_VALUE, "field \"%s\": \"%s\" is not one of %s", name,
                excerpt(ex, buf, len < sizeof buf ? len : sizeof buf), list);
    return 0;
}

/* "crawl_at_ms": the wall-clock time (ms since 1970) of an operator's crawl-now request. */
static int crawl_at_field(dec_t *d, nf_source_record_t *r)
{
    if (*d->p == 'n')
        return literal(d, "null", 4);
    if (*d->p != '-' && (*d->p < '0' || *d->p > '9'))
        return wrong_type(d, "crawl_at_ms", "an integer");
    num_t nm;
    char ex[EXCERPT_MAX + 4];
    int rc = number(d, &nm);
    if (rc != 0)
        return rc;
    if (nm.is_int && !nm.overflow && nm.v >= 0 && nm.v <= NF_SOURCE_CRAWL_AT_MAX) {
        r->crawl_at_ms = (int64_t)nm.v;
        return 0;
    }
    excerpt(ex, (const char *)nm.text, nm.textlen);
    field_error(d, NF_EVENT_E_VALUE, "field \"crawl_at_ms\": %s is not a time in ms in [0, %lld]",
                ex, (long long)NF_SOURCE_CRAWL_AT_MAX);
    return 0;
}

static int sr_field(dec_t *d, void *ctx, unsigned idx)
{
    nf_source_record_t *r = ctx;
    int v, rc;
    switch (idx) {
    case SR_URL:
        return string_field(d, "url", r->url, NF_SOURCE_URL_MAX, false, true, NULL);
    case SR_TYPE:
        v = (int)r->type;
        rc = enum_field(d, "type", type_names, 4, "auto, rss, atom, json", &v);
        r->type = (nf_source_type_t)v;
        return rc;
    case SR_STATUS:
        v = (int)r->status;
        rc = enum_field(d, "status", status_names, 3, "active, paused, dead", &v);
        r->status = (nf_source_status_t)v;
        return rc;
    case SR_CRAWL_AT:
        return crawl_at_field(d, r);
    default: {
        if (*d->p == 'n')
            return literal(d, "null", 4);
        if (*d->p != '-' && (*d->p < '0' || *d->p > '9'))
            return wrong_type(d, "interval_s", "an integer");
        num_t nm;
        char ex[EXCERPT_MAX + 4];
        if ((rc = number(d, &nm)) != 0)
            return rc;
        if (nm.is_int && !nm.overflow && nm.v >= 0 && nm.v <= NF_SOURCE_INTERVAL_MAX) {
            r->interval_s = (uint32_t)nm.v;
            return 0;
        }
        excerpt(ex, (const char *)nm.text, nm.textlen);
        if (!nm.is_int)
            field_error(d, NF_EVENT_E_VALUE, "field \"interval_s\": %s is not an integer", ex);
        else
            field_error(d, NF_EVENT_E_VALUE, "field \"interval_s\": %s is out of range [0, %u]", ex,
                        NF_SOURCE_INTERVAL_MAX);
        return 0;
    }
    }
}

static const shape_t sr_shape = {sr_names, SR__N, sr_field};

int nf_source_record_decode(const char *key, size_t keylen, const char *value, size_t len,
                            size_t max_bytes, nf_source_record_t *out, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    *out = (nf_source_record_t){.type = NF_SOURCE_AUTO, .status = NF_SOURCE_ACTIVE};
    if (!key)
        return plain_error(err, errlen, NF_EVENT_E_MISSING,
                           "key (source_id) is missing; a sources record needs one");
    if (keylen == 0)
        return plain_error(err, errlen, NF_EVENT_E_EMPTY, "key (source_id) is empty");
    if (keylen > NF_SOURCE_ID_MAX)
        return plain_error(err, errlen, NF_EVENT_E_TOO_LONG,
                           "key (source_id) is too long: %zu bytes, max %d", keylen,
                           NF_SOURCE_ID_MAX);
    const unsigned char *k = (const unsigned char *)key, *kend = k + keylen;
    for (const unsigned char *p = k; p < kend;) {
        if (*p == 0)
            return plain_error(err, errlen, NF_EVENT_E_VALUE, "key (source_id) contains U+0000");
        if (*p < 0x80) {
            p++;
            continue;
        }
        size_t n = utf8_seq(p, kend);
        if (!n)
            return plain_error(err, errlen, NF_EVENT_E_UTF8,
                               "invalid UTF-8 in the key (source_id) at byte %zu (byte 0x%02x)",
                               (size_t)(p - k), *p);
        p += n;
    }
    memcpy(out->source_id, key, keylen);
    out->source_id[keylen] = '\0';
    if (!value || len == 0) {
        out->tombstone = true;
        return 0;
    }
    if (max_bytes && len > max_bytes)
        return too_big(len, max_bytes, err, errlen);
    dec_t d = {(const unsigned char *)value,
               (const unsigned char *)value,
               (const unsigned char *)value + len,
               err,
               errlen,
               0};
    uint32_t seen;
    int rc = walk_object(&d, &sr_shape, out, &seen);
    if (rc != 0)
        return rc;
    if (d.field_rc != 0)
        return d.field_rc;
    if (!(seen & (1u << SR_URL)))
        return plain_error(err, errlen, NF_EVENT_E_MISSING, "missing required field \"url\"");
    return 0;
}

/* ---------------------------------------------------------------- dead-letters */

/* The first maxin bytes of in at most, cut before a valid sequence that would cross maxin,
 * bytes of invalid UTF-8 as U+FFFD each. out needs 3 * maxin bytes; returns its length. */
static size_t repair_utf8(const unsigned char *in, size_t n, size_t maxin, char *out)
{
    size_t i = 0, o = 0;
    while (i < n) {
        if (in[i] < 0x80) {
            if (i + 1 > maxin)
                break;
            out[o++] = (char)in[i++];
            continue;
        }
        size_t k = utf8_seq(in + i, in + n);
        if (k) {
            if (i + k > maxin)
                break;
            memcpy(out + o, in + i, k);
            o += k;
            i += k;
        } else {
            if (i + 1 > maxin)
                break;
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    return o;
}

void nf_dead_letter_json(nf_jw_t *w, const char *topic, int32_t partition, int64_t offset,
                         const char *stage, const char *error, const void *payload,
                         size_t payload_len, int64_t now_ms)
{
    char buf[3 * NF_DEAD_LETTER_EXCERPT], ts[40];
    nf_jw_obj_open(w);
    nf_jw_key(w, "origin");
    nf_jw_obj_open(w);
    nf_jw_key(w, "topic");
    nf_jw_str(w, topic ? topic : "");
    nf_jw_key(w, "partition");
    nf_jw_i64(w, partition);
    nf_jw_key(w, "offset");
    nf_jw_i64(w, offset);
    nf_jw_obj_close(w);
    nf_jw_key(w, "stage");
    nf_jw_str(w, stage ? stage : "");
    nf_jw_key(w, "error");
    const char *e = error ? error : "";
    nf_jw_strn(w, buf,
               repair_utf8((const unsigned char *)e, strlen(e), NF_DEAD_LETTER_EXCERPT, buf));
    nf_jw_key(w, "payload");
    if (payload)
        nf_jw_strn(w, buf, repair_utf8(payload, payload_len, NF_DEAD_LETTER_EXCERPT, buf));
    else
        nf_jw_null(w);
    nf_date_format(now_ms, ts, sizeof ts);
    nf_jw_key(w, "ts");
    nf_jw_str(w, ts);
    nf_jw_obj_close(w);
}

size_t nf_dead_letter_key(char *out, size_t cap, const char *topic, int32_t partition,
                          int64_t offset)
{
    int n = snprintf(out, cap, "%s/%d/%lld", topic ? topic : "", (int)partition, (long long)offset);
    return n < 0 ? 0 : (size_t)n;
}
