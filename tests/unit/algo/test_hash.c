/* test_hash.c — src/algo/hash.c: nf_hash128 is exactly two nf_hash64 (state keys are persisted
 * and were made that way), for every length across the 8- and 16-byte steps and odd alignments;
 * and the values are fixed forever (a few pinned). */
#include "algo/hash.h"
#include "nf_test.h"

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
    NF_RUN(test_pinned);
    return nf_test_report();
}
