/* test_hash.c — src/algo/hash.c: nf_hash128 is exactly two nf_hash64 (state keys are persisted
 * and were made that way), for every length across the 8- and 16-byte steps and odd alignments;
 * and the values are fixed forever (a few pinned). */
#include "algo/hash.h"
#include "nf_test.h"

#include <string.h>

static void test_hash128_is_two_hash64(void)
{
    unsigned char buf[200];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)(i * 131 + 7);
    int bad = 0;
    for (size_t off = 0; off < 8; off++) {
        for (size_t n = 0; n + off <= sizeof buf; n++) {
            uint64_t sa = 0x6e66696e74657231ull + n, sb = 0x9e3779b97f4a7c15ull ^ off;
            nf_id128_t k = nf_hash128(buf + off, n, sa, sb);
            if (k.hi != nf_hash64(buf + off, n, sa) || k.lo != nf_hash64(buf + off, n, sb))
                bad++;
        }
    }
    NF_CHECK_EQ(bad, 0);
}

/* The definition, written plainly (the tail copied into a zeroed block): the library reads the
 * tail with overlapping loads instead and must give the same value for every length. */
static uint64_t ref_hash64(const unsigned char *p, size_t n, uint64_t seed)
{
    const uint64_t k0 = 0xa0761d6478bd642full, k1 = 0xe7037ed1a0b428dbull,
                   k2 = 0x8ebc6af09c88c6e3ull;
    uint64_t h = seed ^ nf_mum64(seed ^ k0, (uint64_t)n ^ k1), x, y;
    size_t i = 0;
    for (; i < n; i += 16) {
        unsigned char blk[16] = {0};
        size_t r = n - i < 16 ? n - i : 16;
        memcpy(blk, p + i, r);
        x = 0;
        y = 0;
        for (int b = 7; b >= 0; b--) {
            x = x << 8 | blk[b];
            y = y << 8 | blk[8 + b];
        }
        if (r == 16)
            h = nf_mum64(x ^ k1 ^ h, y ^ k2);
        else if (r >= 8) { /* the 8-byte step, then the rest as a tail */
            h = nf_mum64(x ^ k1 ^ h, k2 ^ 8);
            if (r > 8)
                h = nf_mum64(y ^ k1 ^ h, k2 ^ (r - 8));
        } else
            h = nf_mum64(x ^ k1 ^ h, k2 ^ r);
    }
    return nf_mum64(h ^ k0, (uint64_t)n ^ k2);
}

static void test_reference(void)
{
    unsigned char buf[80];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)(i * 167 + 3);
    int bad = 0;
    for (size_t off = 0; off < 8; off++)
        for (size_t n = 0; n + off <= sizeof buf; n++)
            if (nf_hash64(buf + off, n, 0x1234 + n) != ref_hash64(buf + off, n, 0x1234 + n))
                bad++;
    NF_CHECK_EQ(bad, 0);
}

/* Values persisted in state stores: a change of the function would orphan them. */
static void test_pinned(void)
{
    NF_CHECK(nf_hash64("user-42", 7, 1) == 0xac887d0a3565872bull);
    nf_id128_t k = nf_hash128("user-42", 7, 1, 2);
    NF_CHECK(k.hi == 0xac887d0a3565872bull && k.lo == nf_hash64("user-42", 7, 2));
}

int main(void)
{
    NF_RUN(test_hash128_is_two_hash64);
    NF_RUN(test_reference);
    NF_RUN(test_pinned);
    return nf_test_report();
}
