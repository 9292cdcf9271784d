/* idset.c — see idset.h. */
#include "algo/idset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static inline bool is_zero(nf_id128_t id)
{
    return (id.hi | id.lo) == 0;
}

static inline bool same(nf_id128_t a, nf_id128_t b)
{
    return a.hi == b.hi && a.lo == b.lo;
}

int nf_idset_init(nf_idset_t *s, size_t initial_capacity)
{
    size_t cap = 16;
    while (cap < initial_capacity)
        cap *= 2;
    *s = (nf_idset_t){0};
    s->slots = calloc(cap, sizeof *s->slots);
    if (!s->slots)
        return -ENOMEM;
    s->mask = cap - 1;
    return 0;
}

void nf_idset_free(nf_idset_t *s)
{
    free(s->slots);
    *s = (nf_idset_t){0};
}

static nf_idset_entry_t *find_slot(nf_idset_entry_t *slots, size_t mask, nf_id128_t id)
{
    size_t i = (size_t)id.hi & mask;
    while (!is_zero(slots[i].id) && !same(slots[i].id, id))
        i = (i + 1) & mask;
    return &slots[i];
}

static int grow(nf_idset_t *s)
{
    size_t cap = (s->mask + 1) * 2;
    nf_idset_entry_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -ENOMEM;
    for (size_t i = 0; i <= s->mask; i++)
        if (!is_zero(s->slots[i].id))
            *find_slot(slots, cap - 1, s->slots[i].id) = s->slots[i];
    free(s->slots);
    s->slots = slots;
    s->mask = cap - 1;
    return 0;
}

int nf_idset_insert(nf_idset_t *s, nf_id128_t id, uint64_t value, uint64_t *existing)
{
    if (is_zero(id)) {
        if (s->has_zero) {
            if (existing)
                *existing = s->zero_value;
            return 0;
        }
        s->has_zero = true;
        s->zero_value = value;
        return 1;
    }
    if ((s->count + 1) * 4 > (s->mask + 1) * 3 && grow(s) != 0)
        return -ENOMEM;
    nf_idset_entry_t *e = find_slot(s->slots, s->mask, id);
    if (!is_zero(e->id)) {
        if (existing)
            *existing = e->value;
        return 0;
    }
    e->id = id;
    e->value = value;
    s->count++;
    return 1;
}

bool nf_idset_get(const nf_idset_t *s, nf_id128_t id, uint64_t *value)
{
    if (is_zero(id)) {
        if (s->has_zero && value)
            *value = s->zero_value;
        return s->has_zero;
    }
    const nf_idset_entry_t *e = find_slot(s->slots, s->mask, id);
    if (is_zero(e->id))
        return false;
    if (value)
        *value = e->value;
    return true;
}

void nf_idset_clear(nf_idset_t *s)
{
    if (s->slots)
        memset(s->slots, 0, (s->mask + 1) * sizeof *s->slots);
    s->count = 0;
    s->has_zero = false;
    s->zero_value = 0;
}

size_t nf_idset_bytes(const nf_idset_t *s)
{
    return (s->mask + 1) * sizeof *s->slots;
}

/* The values of the hex digits; is_hex says which bytes are digits (NUL is not, so a short
 * string stops the parse before its end). */
static const uint8_t hexval[256] = {
    ['0'] = 0,  ['1'] = 1,  ['2'] = 2,  ['3'] = 3,  ['4'] = 4,  ['5'] = 5,  ['6'] = 6,  ['7'] = 7,
    ['8'] = 8,  ['9'] = 9,  ['a'] = 10, ['b'] = 11, ['c'] = 12, ['d'] = 13, ['e'] = 14, ['f'] = 15,
    ['A'] = 10, ['B'] = 11, ['C'] = 12, ['D'] = 13, ['E'] = 14, ['F'] = 15,
};
static const uint8_t is_hex[256] = {
    ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1,
    ['8'] = 1, ['9'] = 1, ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1,
    ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1,
};

#if defined(__SSE2__)
#include <emmintrin.h>

/* 16 hex digits at p -> their 64-bit value; false if one is not a digit. */
static inline bool hex16(const unsigned char *p, uint64_t *out)
{
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    __m128i l = _mm_or_si128(v, _mm_set1_epi8(0x20)); /* 'A'-'F' -> 'a'-'f' */
    __m128i dig = _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8('0' - 1)),
                                _mm_cmplt_epi8(v, _mm_set1_epi8('9' + 1)));
    __m128i af = _mm_and_si128(_mm_cmpgt_epi8(l, _mm_set1_epi8('a' - 1)),
                               _mm_cmplt_epi8(l, _mm_set1_epi8('f' + 1)));
    if (_mm_movemask_epi8(_mm_or_si128(dig, af)) != 0xffff)
        return false;
    __m128i nib = _mm_or_si128(_mm_and_si128(dig, _mm_sub_epi8(v, _mm_set1_epi8('0'))),
                               _mm_and_si128(af, _mm_sub_epi8(l, _mm_set1_epi8('a' - 10))));
    /* Each 16-bit lane holds two digits, the first in its low byte: first << 4 | second. */
    __m128i pair = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(nib, _mm_set1_epi16(0xff)), 4),
                                _mm_srli_epi16(nib, 8));
    uint64_t b = (uint64_t)_mm_cvtsi128_si64(_mm_packus_epi16(pair, pair));
    *out = __builtin_bswap64(b); /* the first digits are the most significant */
    return true;
}

int nf_id128_from_hex32(const char *hex, nf_id128_t *out)
{
    const unsigned char *p = (const unsigned char *)hex;
    nf_id128_t id;
    if (!hex16(p, &id.hi) || !hex16(p + 16, &id.lo))
        return -1;
    *out = id;
    return 0;
}
#else
int nf_id128_from_hex32(const char *hex, nf_id128_t *out)
{
    char s[33];
    memcpy(s, hex, 32);
    s[32] = '\0';
    return nf_id128_from_hex(s, out);
}
#endif

/* Every article id of the read path goes through here: a table per digit, no data-dependent
 * branch but the (predictable) stop at the first non-digit. */
void nf_id128_hex(nf_id128_t id, char out[33])
{
    static const char digit[] = "0123456789abcdef"; /* printf's "%016llx%016llx", per answer */
    for (int i = 0; i < 16; i++) {
        out[i] = digit[id.hi >> (60 - 4 * i) & 15];
        out[16 + i] = digit[id.lo >> (60 - 4 * i) & 15];
    }
    out[32] = '\0';
}

int nf_id128_from_hex(const char *hex, nf_id128_t *out)
{
    const unsigned char *p = (const unsigned char *)hex;
    uint64_t w[2] = {0, 0};
    for (int i = 0; i < 32; i++) {
        if (!is_hex[p[i]])
            return -1;
        w[i >> 4] = (w[i >> 4] << 4) | (uint64_t)hexval[p[i]];
    }
    if (p[32] != '\0')
        return -1;
    out->hi = w[0];
    out->lo = w[1];
    return 0;
}
