/* hash.c — nf_hash64 (hash.h). */
#include "algo/hash.h"
#include "algo/bytes.h"

#include <string.h>

#define K0 0xa0761d6478bd642full
#define K1 0xe7037ed1a0b428dbull
#define K2 0x8ebc6af09c88c6e3ull

/* The r (1..7) bytes at p as a little-endian number, zero above them: what copying them into
 * a zeroed 8-byte block and loading it gives, without a variable-length copy (two overlapping
 * 4-byte loads, or three single bytes; every id of the read path ends in one of these). */
static inline uint64_t load_tail(const unsigned char *p, size_t r)
{
    if (r >= 4) {
        uint64_t hi = nf_get_le32(p + r - 4); /* bytes r-4 .. r-1: the top 8-r of them wanted */
        return nf_get_le32(p) | (hi >> (8 * (8 - r))) << 32;
    }
    return (uint64_t)p[0] | (uint64_t)p[r / 2] << (8 * (r / 2)) |
           (uint64_t)p[r - 1] << (8 * (r - 1));
}

uint64_t nf_hash64(const void *data, size_t n, uint64_t seed)
{
    const unsigned char *p = data;
    uint64_t h = seed ^ nf_mum64(seed ^ K0, (uint64_t)n ^ K1);
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        h = nf_mum64(nf_get_le64(p + i) ^ K1 ^ h, nf_get_le64(p + i + 8) ^ K2);
    if (i + 8 <= n) {
        h = nf_mum64(nf_get_le64(p + i) ^ K1 ^ h, K2 ^ 8);
        i += 8;
    }
    if (i < n)
        h = nf_mum64(load_tail(p + i, n - i) ^ K1 ^ h, K2 ^ (n - i));
    return nf_mum64(h ^ K0, (uint64_t)n ^ K2);
}

uint64_t nf_hash64_str(const char *s, uint64_t seed)
{
    return nf_hash64(s, strlen(s), seed);
}

nf_id128_t nf_hash128(const void *data, size_t n, uint64_t seed_hi, uint64_t seed_lo)
{
    const unsigned char *p = data;
    uint64_t a = seed_hi ^ nf_mum64(seed_hi ^ K0, (uint64_t)n ^ K1);
    uint64_t b = seed_lo ^ nf_mum64(seed_lo ^ K0, (uint64_t)n ^ K1);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        uint64_t x = nf_get_le64(p + i), y = nf_get_le64(p + i + 8) ^ K2;
        a = nf_mum64(x ^ K1 ^ a, y);
        b = nf_mum64(x ^ K1 ^ b, y);
    }
    if (i + 8 <= n) {
        uint64_t x = nf_get_le64(p + i);
        a = nf_mum64(x ^ K1 ^ a, K2 ^ 8);
        b = nf_mum64(x ^ K1 ^ b, K2 ^ 8);
        i += 8;
    }
    if (i < n) {
        uint64_t x = load_tail(p + i, n - i);
        a = nf_mum64(x ^ K1 ^ a, K2 ^ (n - i));
        b = nf_mum64(x ^ K1 ^ b, K2 ^ (n - i));
    }
    return (nf_id128_t){nf_mum64(a ^ K0, (uint64_t)n ^ K2), nf_mum64(b ^ K0, (uint64_t)n ^ K2)};
}
