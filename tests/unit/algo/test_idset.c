/* Tests src/algo/idset.c against a reference model (sorted array + bsearch) over random
 * inserts and lookups, with ids that collide in their hash word to exercise probing, the
 * all-zero id, growth from a tiny table, and hex parsing. */
#include "algo/idset.h"
#include "nf_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint64_t rnd(void)
{
    return nf_test_xorshift(&rng);
}

typedef struct {
    nf_id128_t id;
    uint64_t value;
} ref_t;

static int cmp_ref(const void *a, const void *b)
{
    const ref_t *x = a, *y = b;
    if (x->id.hi != y->id.hi)
        return x->id.hi < y->id.hi ? -1 : 1;
    return x->id.lo < y->id.lo ? -1 : x->id.lo > y->id.lo;
}

static void test_matches_model(void)
{
    enum { N = 100000 };
    static ref_t ref[N];
    size_t nref = 0;
    nf_idset_t s;
    NF_REQUIRE(nf_idset_init(&s, 1) == 0);
    for (int step = 0; step < N; step++) {
        nf_id128_t id;
        /* Small id space so repeats happen; some ids share hi (probe chains). */
        id.hi = rnd() % 2000;
        id.lo = rnd() % 3;
        if (step % 1000 == 0)
            id.hi = id.lo = 0;
        uint64_t v = (uint64_t)step, existing = 0;
        ref_t key = {id, 0};
        ref_t *hit = nref ? bsearch(&key, ref, nref, sizeof *ref, cmp_ref) : NULL;
        int r = nf_idset_insert(&s, id, v, &existing);
        if (hit) {
            NF_CHECK_EQ(r, 0);
            NF_CHECK_EQ(existing, hit->value); /* first sighting wins */
        } else {
            NF_CHECK_EQ(r, 1);
            size_t at = nref;
            while (at > 0 && cmp_ref(&ref[at - 1], &key) > 0)
                at--;
            memmove(&ref[at + 1], &ref[at], (nref - at) * sizeof *ref);
            ref[at] = (ref_t){id, v};
            nref++;
        }
        if (nf_test_failed_checks)
            return;
    }
    NF_CHECK_EQ(nf_idset_count(&s), nref);
    for (size_t i = 0; i < nref; i++) {
        uint64_t v;
        NF_CHECK(nf_idset_get(&s, ref[i].id, &v));
        NF_CHECK_EQ(v, ref[i].value);
    }
    NF_CHECK(!nf_idset_get(&s, (nf_id128_t){999999, 9}, NULL));
    NF_CHECK(nf_idset_bytes(&s) >= nref * sizeof(nf_idset_entry_t));
    nf_idset_free(&s);
}

static void test_hex(void)
{
    nf_id128_t id;
    NF_CHECK_EQ(nf_id128_from_hex("0123456789abcdefFEDCBA9876543210", &id), 0);
    NF_CHECK(id.hi == 0x0123456789abcdefull && id.lo == 0xfedcba9876543210ull);
    NF_CHECK_EQ(nf_id128_from_hex("0123456789abcdef", &id), -1);
    NF_CHECK_EQ(nf_id128_from_hex("0123456789abcdefFEDCBA98765432100", &id), -1);
    NF_CHECK_EQ(nf_id128_from_hex("0123456789abcdefFEDCBA987654321g", &id), -1);
}

/* The 32-byte (SSE2) parser agrees with the portable one on random strings of hex digits, of
 * near-misses ('g', '/', ':', '@', '`', 'G', bytes >= 0x80, NUL) and upper case. */
static void test_hex32_matches_hex(void)
{
    static const char alphabet[] = "0123456789abcdefABCDEF/:@`gG\x80\xff";
    uint64_t x = 99;
    int bad = 0, valid = 0;
    for (int n = 0; n < 200000; n++) {
        char s[33];
        for (int i = 0; i < 32; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            bool odd = x % 64 == 0;
            s[i] = alphabet[odd ? 22 + (x >> 8) % 8 : (x >> 8) % 22];
        }
        s[32] = '\0';
        nf_id128_t a = {1, 1}, b = {2, 2};
        int ra = nf_id128_from_hex32(s, &a), rb = nf_id128_from_hex(s, &b);
        if (ra != rb || (ra == 0 && (a.hi != b.hi || a.lo != b.lo)))
            bad++;
        valid += ra == 0;
    }
    NF_CHECK_EQ(bad, 0);
    NF_CHECK(valid > 10000 && valid < 190000);
    nf_id128_t id;
    NF_CHECK_EQ(nf_id128_from_hex32("0123456789abcdefFEDCBA9876543210", &id), 0);
    NF_CHECK(id.hi == 0x0123456789abcdefull && id.lo == 0xfedcba9876543210ull);
}

/* nf_id128_hex writes what printf's "%016llx%016llx" writes, and reads back as the same id. */
static void test_to_hex(void)
{
    uint64_t seed = 128;
    for (int i = 0; i < 100000; i++) {
        nf_id128_t id = {nf_test_rand(&seed), i % 7 ? nf_test_rand(&seed) : (uint64_t)i}, back;
        char got[33], want[33];
        nf_id128_hex(id, got);
        snprintf(want, sizeof want, "%016llx%016llx", (unsigned long long)id.hi,
                 (unsigned long long)id.lo);
        NF_CHECK(strcmp(got, want) == 0);
        NF_CHECK(nf_id128_from_hex(got, &back) == 0 && back.hi == id.hi && back.lo == id.lo);
    }
}

int main(void)
{
    NF_RUN(test_hex32_matches_hex);
    NF_RUN(test_hex);
    NF_RUN(test_to_hex);
    NF_RUN(test_matches_model);
    return nf_test_report();
}
