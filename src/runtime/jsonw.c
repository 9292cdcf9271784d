/* jsonw.c — see jsonw.h. */
#include "runtime/jsonw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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
    /* Worst case every byte becomes \u00XX; + 8: the tail below stores 8 bytes. */
    if (!reserve(w, n * 6 + 10))
        return;
    char *o = w->buf + w->len;
    *o++ = '"';
    size_t i = 0;
    /* 8 bytes at a time while none needs an escape (a control byte, '"' or '\\'; bytes of
     * UTF-8 sequences pass as they are): ids and names almost never have one. */
    const uint64_t lo = 0x0101010101010101ull, hi = 0x8080808080808080ull;
#define NEEDS_ESCAPE(v)                                                                            \
    ((((v)-lo * 0x20) | (((v) ^ (lo * '"')) - lo) | (((v) ^ (lo * '\\')) - lo)) & ~(v)&hi)
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, s + i, 8);
        if (NEEDS_ESCAPE(v))
            break;
        memcpy(o, &v, 8);
        o += 8;
    }
    /* The last 1..7 bytes in one go as well (a user id is often shorter than 8): the 8 bytes
     * that end at n once 8 are out (what they repeat is clean and already written), else the
     * rest padded with 'a'. Little-endian layout of the padding; elsewhere the byte loop. */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (i < n && i + 8 > n) {
        size_t r = n - i;
        uint64_t v;
        if (n >= 8) {
            memcpy(&v, s + n - 8, 8);
            if (!NEEDS_ESCAPE(v)) {
                memcpy(o - (8 - r), &v, 8);
                o += r;
                i = n;
            }
        } else {
            v = 0x6161616161616161ull;
            memcpy(&v, s, n);
            if (!NEEDS_ESCAPE(v)) {
                memcpy(o, &v, 8);
                o += r;
                i = n;
            }
        }
    }
#endif
#undef NEEDS_ESCAPE
    for (; i < n; i++) {
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
    if (v >= 0) {
        nf_jw_u64(w, (uint64_t)v);
        return;
    }
    nf_jw_raw(w, "-", 1);
    nf_jw_u64(w, 0 - (uint64_t)v); /* INT64_MIN too: its magnitude fits in a uint64_t */
}

size_t nf_u64_digits(uint64_t v, char b[24])
{
    size_t n = 24;
    do {
        b[--n] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return n;
}

void nf_jw_u64(nf_jw_t *w, uint64_t v)
{
    char b[24];
    size_t n = nf_u64_digits(v, b);
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

const char nf_jw_pairs[201] = "00010203040506070809101112131415161718192021222324252627282930"
                              "31323334353637383940414243444546474849505152535455565758596061"
                              "62636465666768697071727374757677787980818283848586878889909192"
                              "93949596979899";

#if !defined(__SSE2__) /* nf_jw_unit_put does this in SIMD lanes where it can */
/* The 8 decimal digits of n < 10^8 as ASCII, the first digit in the lowest byte (where a
 * little-endian store puts it first): two halves of four digits in 32-bit lanes, each split
 * into pairs (/100) then digits (/10) by multiplications that never carry across lanes. */
static inline uint64_t ascii8(uint32_t n)
{
    uint64_t v = (uint64_t)(n / 10000) | (uint64_t)(n % 10000) << 32;
    uint64_t h = ((v * 10486) >> 20) & 0x0000007f0000007full; /* per lane: / 100 */
    v = h | (v - h * 100) << 16;                              /* 4 lanes of 2 digits */
    uint64_t t = ((v * 103) >> 10) & 0x000f000f000f000full;   /* per lane: / 10 */
    return (t | (v - t * 10) << 8) | 0x3030303030303030ull;
}
#endif

char *nf_jw_unit_put(char *p, double v)
{
    uint64_t q = (uint64_t)(v * 1e15 + 0.5);
    if (q == 0 || q >= 1000000000000000ull) {
        *p = q ? '1' : '0';
        return p + 1;
    }
    /* "0." and 15 digits: the top 7 (as 8 with a leading zero, which the '.' then covers) and
     * the low 8, each in one go; the trailing zeros dropped by counting '0' bytes from the top
     * (a weight per topic in every interest update: this was 10 % of the read path with a
     * 64-bit division per digit, and through a stack buffer the copy's wide loads stalled on
     * the narrow stores). */
#if defined(__SSE2__)
    /* Both halves at once, ascii8's steps in SIMD lanes: 64-bit lanes {hi, lo} -> / 10^4 ->
     * 32-bit lanes of four digits -> / 100 -> 16-bit lanes of two -> / 10 -> bytes. */
    uint32_t h8 = (uint32_t)(q / 100000000u);
    __m128i x = _mm_set_epi64x((long long)(q - (uint64_t)h8 * 100000000u), (long long)h8);
    __m128i q4 = _mm_srli_epi64(_mm_mul_epu32(x, _mm_set1_epi32((int)0xd1b71759)), 45);
    __m128i d = _mm_or_si128(
        q4, _mm_slli_epi64(_mm_sub_epi32(x, _mm_mul_epu32(q4, _mm_set1_epi32(10000))), 32));
    __m128i q2 = _mm_srli_epi16(_mm_mulhi_epu16(d, _mm_set1_epi16(5243)), 3); /* x / 100 */
    d = _mm_or_si128(
        q2, _mm_slli_epi32(_mm_sub_epi16(d, _mm_mullo_epi16(q2, _mm_set1_epi16(100))), 16));
    __m128i q1 = _mm_mulhi_epu16(d, _mm_set1_epi16(6554)); /* x / 10 for x < 100 */
    d = _mm_or_si128(q1,
                     _mm_slli_epi16(_mm_sub_epi16(d, _mm_mullo_epi16(q1, _mm_set1_epi16(10))), 8));
    d = _mm_add_epi8(d, _mm_set1_epi8('0'));
    _mm_storeu_si128((__m128i *)(p + 1), d);
    p[0] = '0';
    p[1] = '.';
    /* the last byte that is not '0' (there is one: q > 0, and p[1] was a '0' of the 16) */
    unsigned nz = ~(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(d, _mm_set1_epi8('0'))) & 0xffffu;
    return p + 1 + (32 - __builtin_clz(nz));
#else
    uint64_t hi = ascii8((uint32_t)(q / 100000000u)), lo = ascii8((uint32_t)(q % 100000000u));
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p + 1, &hi, 8);
    memcpy(p + 9, &lo, 8);
    p[0] = '0';
    p[1] = '.';
    uint64_t zl = lo ^ 0x3030303030303030ull, zh = hi ^ 0x3030303030303030ull;
    if (zl)
        return p + 17 - __builtin_clzll(zl) / 8;
    return p + 9 - __builtin_clzll(zh) / 8; /* zh has a non-zero digit: q > 0 */
#else
    for (int i = 0; i < 8; i++) {
        p[1 + i] = (char)(hi >> (8 * i));
        p[9 + i] = (char)(lo >> (8 * i));
    }
    p[0] = '0';
    p[1] = '.';
    char *e = p + 17;
    while (e[-1] == '0')
        e--;
    return e;
#endif
#endif
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

void nf_jw_score(nf_jw_t *w, double v)
{
    if (!(v > 1.0 && v < 1e6)) {
        nf_jw_unit(w, v);
        return;
    }
    unsigned d = 1; /* digits before the point */
    for (double p = 10; v >= p; p *= 10)
        d++;
    static const double scale[7] = {1, 1e14, 1e13, 1e12, 1e11, 1e10, 1e9};
    uint64_t q = (uint64_t)(v * scale[d] + 0.5); /* 15 digits, 16 if it rounded up to 10^15 */
    char b[24];
    size_t n = nf_u64_digits(q, b);
    size_t digits = sizeof b - n, frac = 15 - d; /* the fraction's digits, the last ones */
    char *p = nf_jw_reserve(w, digits + 1);
    if (!p)
        return;
    memcpy(p, b + n, digits - frac);
    char *o = p + (digits - frac);
    size_t keep = frac;
    while (keep && b[n + digits - frac + keep - 1] == '0')
        keep--;
    if (keep) {
        *o++ = '.';
        memcpy(o, b + n + digits - frac, keep);
        o += keep;
    }
    nf_jw_commit(w, o);
}

void nf_jw_bool(nf_jw_t *w, bool v)
{
    nf_jw_raw(w, v ? "true" : "false", v ? 4 : 5);
}

void nf_jw_null(nf_jw_t *w)
{
    nf_jw_raw(w, "null", 4);
}

void nf_jw_fixed3(nf_jw_t *w, double v)
{
    char b[40];
    int n = snprintf(b, sizeof b, "%.3f", v);
    nf_jw_raw(w, b, n > 0 ? (size_t)n : 0);
}
