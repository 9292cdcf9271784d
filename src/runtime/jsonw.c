/* jsonw.c — see jsonw.h. */
#include "runtime/jsonw.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nf_jw_init(nf_jw_t *w)
{
    *w = (nf_jw_t){.first = true};
}

void nf_jw_free(nf_jw_t *w)
{
    free(w->buf);
    *w = (nf_jw_t){.first = true};
}

void nf_jw_reset(nf_jw_t *w)
{
    w->len = 0;
    w->first = true;
    w->failed = false;
}

static bool reserve(nf_jw_t *w, size_t n)
{
    if (w->len + n + 1 <= w->cap)
        return true;
    size_t cap = w->cap ? w->cap : 1024;
    while (cap < w->len + n + 1)
        cap *= 2;
    char *b = realloc(w->buf, cap);
    if (!b) {
        w->failed = true;
        return false;
    }
    w->buf = b;
    w->cap = cap;
    return true;
}

void nf_jw_raw(nf_jw_t *w, const char *s, size_t n)
{
    if (!reserve(w, n))
        return;
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = '\0';
}

void nf_jw_obj_open(nf_jw_t *w)
{
    nf_jw_raw(w, "{", 1);
    w->first = true;
}

void nf_jw_obj_close(nf_jw_t *w)
{
    nf_jw_raw(w, "}", 1);
    w->first = false;
}

void nf_jw_arr_open(nf_jw_t *w)
{
    nf_jw_raw(w, "[", 1);
    w->first = true;
}

void nf_jw_arr_close(nf_jw_t *w)
{
    nf_jw_raw(w, "]", 1);
    w->first = false;
}

void nf_jw_elem(nf_jw_t *w)
{
    if (!w->first)
        nf_jw_raw(w, ",", 1);
    w->first = false;
}

void nf_jw_key(nf_jw_t *w, const char *key)
{
    nf_jw_elem(w);
    nf_jw_str(w, key);
    nf_jw_raw(w, ":", 1);
}

void nf_jw_strn(nf_jw_t *w, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    /* Worst case every byte becomes \u00XX. */
    if (!reserve(w, n * 6 + 2))
        return;
    char *o = w->buf + w->len;
    *o++ = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *o++ = (char)c;
            continue;
        }
        *o++ = '\\';
        switch (c) {
        case '"':
            *o++ = '"';
            break;
        case '\\':
            *o++ = '\\';
            break;
        case '\n':
            *o++ = 'n';
            break;
        case '\r':
            *o++ = 'r';
            break;
        case '\t':
            *o++ = 't';
            break;
        case '\b':
            *o++ = 'b';
            break;
        case '\f':
            *o++ = 'f';
            break;
        default:
            *o++ = 'u';
            *o++ = '0';
            *o++ = '0';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
    }
    *o++ = '"';
    *o = '\0';
    w->len = (size_t)(o - w->buf);
}

void nf_jw_str(nf_jw_t *w, const char *s)
{
    if (!s)
        nf_jw_null(w);
    else
        nf_jw_strn(w, s, strlen(s));
}

void nf_jw_i64(nf_jw_t *w, int64_t v)
{
    char b[24];
    int n = snprintf(b, sizeof b, "%" PRId64, v);
    nf_jw_raw(w, b, (size_t)n);
}

void nf_jw_u64(nf_jw_t *w, uint64_t v)
{
    char b[24];
    size_t n = sizeof b;
    do {
        b[--n] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    nf_jw_raw(w, b + n, sizeof b - n);
}

/* Integer arithmetic instead of printf's exact binary-to-decimal conversion, which costs
 * ~1 us per number: this is the interest-updates hot path (tens of weights per event). */
char *nf_jw_reserve(nf_jw_t *w, size_t n)
{
    return reserve(w, n) ? w->buf + w->len : NULL;
}

void nf_jw_commit(nf_jw_t *w, char *end)
{
    w->len = (size_t)(end - w->buf);
    w->buf[w->len] = '\0';
}

/* Two decimal digits of x < 100 at p. */
static inline void put2(char *p, uint32_t x)
{
    static const char pairs[201] = "00010203040506070809101112131415161718192021222324252627282930"
                                   "31323334353637383940414243444546474849505152535455565758596061"
                                   "62636465666768697071727374757677787980818283848586878889909192"
                                   "93949596979899";
    memcpy(p, pairs + 2 * x, 2);
}

/* Four decimal digits of x < 10000 at p. */
static inline void put4(char *p, uint32_t x)
{
    put2(p, x / 100);
    put2(p + 2, x % 100);
}

char *nf_jw_unit_put(char *p, double v)
{
    uint64_t q = (uint64_t)(v * 1e15 + 0.5);
    if (q == 0 || q >= 1000000000000000ull) {
        *p = q ? '1' : '0';
        return p + 1;
    }
    /* "0." and 15 digits, written where they go: four groups of at most four digits, each two
     * table look-ups, so the divisions form short independent chains (a weight per topic in
     * every interest update: this was 10 % of the read path with a 64-bit division per
     * digit, and through a stack buffer the copy's wide loads stalled on the narrow stores). */
    uint32_t hi = (uint32_t)(q / 100000000u), lo = (uint32_t)(q % 100000000u);
    p[0] = '0';
    p[1] = '.';
    p[2] = (char)('0' + hi / 1000000);
    put2(p + 3, hi / 10000 % 100);
    put4(p + 5, hi % 10000);
    put4(p + 9, lo / 10000);
    put4(p + 13, lo % 10000);
    char *e = p + 17;
    while (e[-1] == '0')
        e--;
    return e;
}

void nf_jw_unit(nf_jw_t *w, double v)
{
    if (!(v >= 0.0 && v <= 1.0)) {
        char b[40];
        int n = snprintf(b, sizeof b, "%.17g", v);
        if (n > 0 && (v == v) && v - v == 0) /* finite */
            nf_jw_raw(w, b, (size_t)n);
        else
            nf_jw_raw(w, "null", 4);
        return;
    }
    char *p = nf_jw_reserve(w, 17);
    if (p)
        nf_jw_commit(w, nf_jw_unit_put(p, v));
}

void nf_jw_bool(nf_jw_t *w, bool v)
{
    nf_jw_raw(w, v ? "true" : "false", v ? 4 : 5);
}

void nf_jw_null(nf_jw_t *w)
{
    nf_jw_raw(w, "null", 4);
}
