/* Tests src/algo/cms.c: the Count-Min guarantees as properties over seeded Zipf-ish streams
 * (never under-counts; the fraction of keys over-counted by more than e/width * N stays below
 * e^-depth), linearity of merge and subtract against sketches of the combined streams, and the
 * encoding (round trip; every corruption and truncation refused without touching the target). */
#include "algo/cms.h"
#include "nf_test.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    return nf_test_xorshift(&rng);
}

/* Zipf-ish (s ~ 1) rank in [0, n): log-uniform. */
static uint32_t zipfish(uint32_t n)
{
    double u = (double)(rnd() >> 11) / 9007199254740992.0;
    uint32_t r = (uint32_t)exp(u * log((double)n + 1)) - 1;
    return r < n ? r : n - 1;
}

static bool same_cells(const nf_cms_t *a, const nf_cms_t *b)
{
    return nf_cms_same_shape(a, b) && a->total == b->total &&
           memcmp(a->cells, b->cells, sizeof *a->cells * a->width * a->depth) == 0;
}

static void test_error_bounds(void)
{
    enum { KEYS = 20000, N = 300000 };
    static uint64_t truth[KEYS];
    const uint32_t shapes[][2] = {{256, 3}, {512, 4}, {2048, 5}, {128, 2}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        for (uint64_t seed = 1; seed <= 3; seed++) {
            nf_cms_t c;
            NF_REQUIRE(nf_cms_init(&c, shapes[s][0], shapes[s][1], seed * 7919) == 0);
            memset(truth, 0, sizeof truth);
            for (int i = 0; i < N; i++) {
                uint32_t k = zipfish(KEYS);
                truth[k]++;
                nf_cms_add(&c, nf_cms_hash(&c, &k, sizeof k), 1);
            }
            NF_CHECK_EQ(c.total, N);
            double eps_n = exp(1.0) / c.width * (double)N;
            size_t over = 0;
            for (uint32_t k = 0; k < KEYS; k++) {
                uint64_t est = nf_cms_estimate(&c, nf_cms_hash(&c, &k, sizeof k));
                NF_CHECK(est >= truth[k]);
                if ((double)(est - truth[k]) > eps_n)
                    over++;
            }
            /* The bound e^-depth is per key (Markov per row); across 20000 keys the observed
             * fraction concentrates well below it. */
            double frac = (double)over / KEYS, bound = exp(-(double)c.depth);
            NF_CHECK(frac <= bound);
            nf_cms_free(&c);
            if (nf_test_failed_checks)
                return;
        }
    }
}

/* The bound must be able to fail: a sketch too narrow for its stream shows big errors. */
static void test_narrow_sketch_overcounts(void)
{
    nf_cms_t c;
    NF_REQUIRE(nf_cms_init(&c, 4, 1, 1) == 0);
    for (uint32_t k = 0; k < 1000; k++)
        nf_cms_add(&c, nf_cms_hash(&c, &k, sizeof k), 1);
    uint32_t k = 5;
    NF_CHECK(nf_cms_estimate(&c, nf_cms_hash(&c, &k, sizeof k)) > 100);
    nf_cms_free(&c);
}

static void test_add_estimate_matches(void)
{
    nf_cms_t a, b;
    NF_REQUIRE(nf_cms_init(&a, 300, 4, 9) == 0);
    NF_REQUIRE(nf_cms_init(&b, 300, 4, 9) == 0);
    for (int i = 0; i < 20000; i++) {
        uint32_t k = zipfish(3000);
        uint64_t h = nf_cms_hash(&a, &k, sizeof k);
        uint64_t e = nf_cms_add_estimate(&a, h, 1 + (uint64_t)(i % 3));
        nf_cms_add(&b, h, 1 + (uint64_t)(i % 3));
        NF_CHECK_EQ(e, nf_cms_estimate(&b, h));
    }
    NF_CHECK(same_cells(&a, &b));
    nf_cms_free(&a);
    nf_cms_free(&b);
}

static void test_linearity(void)
{
    for (int round = 0; round < 5; round++) {
        nf_cms_t a, b, ab, x;
        uint32_t w = 64 + (uint32_t)(rnd() % 1000), d = 1 + (uint32_t)(rnd() % 6);
        NF_REQUIRE(nf_cms_init(&a, w, d, 42) == 0);
        NF_REQUIRE(nf_cms_init(&b, w, d, 42) == 0);
        NF_REQUIRE(nf_cms_init(&ab, w, d, 42) == 0);
        for (int i = 0; i < 30000; i++) {
            uint32_t k = zipfish(5000);
            uint64_t h = nf_cms_hash(&a, &k, sizeof k);
            nf_cms_add(rnd() & 1 ? &a : &b, h, 1);
            nf_cms_add(&ab, h, 1);
        }
        NF_REQUIRE(nf_cms_init(&x, w, d, 42) == 0);
        NF_CHECK_EQ(nf_cms_merge(&x, &a), 0);
        NF_CHECK_EQ(nf_cms_merge(&x, &b), 0);
        NF_CHECK(same_cells(&x, &ab));
        NF_CHECK_EQ(nf_cms_subtract(&x, &b), 0);
        NF_CHECK(same_cells(&x, &a));
        /* b is not contained in a (almost surely some cell is larger): refused, unchanged. */
        NF_CHECK_EQ(nf_cms_subtract(&x, &b), -ERANGE);
        NF_CHECK(same_cells(&x, &a));
        nf_cms_t other;
        NF_REQUIRE(nf_cms_init(&other, w, d, 43) == 0);
        NF_CHECK_EQ(nf_cms_merge(&x, &other), -EINVAL);
        NF_CHECK_EQ(nf_cms_subtract(&x, &other), -EINVAL);
        NF_CHECK(same_cells(&x, &a));
        nf_cms_free(&other);
        nf_cms_free(&a);
        nf_cms_free(&b);
        nf_cms_free(&ab);
        nf_cms_free(&x);
    }
}

static void test_encoding(void)
{
    nf_cms_t c, d, e;
    NF_REQUIRE(nf_cms_init(&c, 200, 3, 77) == 0);
    for (int i = 0; i < 5000; i++) {
        uint32_t k = zipfish(100000);
        nf_cms_add(&c, nf_cms_hash(&c, &k, sizeof k), 1 + (rnd() % 1000 == 0 ? 1u << 20 : 0));
    }
    size_t max = nf_cms_encoded_max(&c);
    unsigned char *buf = malloc(max), *bad = malloc(max);
    NF_REQUIRE(buf && bad);
    size_t n = nf_cms_encode(&c, buf, max);
    NF_REQUIRE(n > 0);
    NF_CHECK_EQ(nf_cms_encode(&c, buf, n - 1), 0); /* too small: refused */
    n = nf_cms_encode(&c, buf, max);
    NF_REQUIRE(nf_cms_decode(&d, buf, n) == 0);
    NF_CHECK(same_cells(&c, &d));
    NF_REQUIRE(nf_cms_init(&e, 200, 3, 77) == 0);
    NF_CHECK_EQ(nf_cms_decode_merge(&e, buf, n), 0);
    NF_CHECK_EQ(nf_cms_decode_merge(&e, buf, n), 0);
    NF_CHECK_EQ(nf_cms_subtract(&e, &c), 0);
    NF_CHECK(same_cells(&e, &c));

    /* Every single-byte corruption, a sample of truncations and extensions: refused, and the
     * target of decode_merge is left as it was. */
    size_t refused = 0, tried = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(bad, buf, n);
        bad[i] ^= (unsigned char)(1u << (rnd() % 8));
        nf_cms_t out;
        tried++;
        if (nf_cms_decode(&out, bad, n) == -EINVAL && nf_cms_decode_merge(&e, bad, n) == -EINVAL)
            refused++;
        else if (out.cells)
            nf_cms_free(&out);
    }
    NF_CHECK_EQ(refused, tried);
    NF_CHECK(same_cells(&e, &c));
    for (size_t cut = 0; cut < n; cut += 1 + rnd() % 37) {
        nf_cms_t out;
        NF_CHECK_EQ(nf_cms_decode(&out, buf, cut), -EINVAL);
    }
    memcpy(bad, buf, n);
    nf_cms_t out;
    NF_CHECK_EQ(nf_cms_decode(&out, bad, n + (max > n ? 1 : 0)), max > n ? -EINVAL : 0);
    nf_cms_t shape;
    NF_REQUIRE(nf_cms_init(&shape, 201, 3, 77) == 0);
    NF_CHECK_EQ(nf_cms_decode_merge(&shape, buf, n), -EINVAL); /* other shape */
    nf_cms_free(&shape);
    for (int i = 0; i < 1000; i++) { /* random garbage */
        size_t len = rnd() % 200;
        for (size_t k = 0; k < len; k++)
            bad[k] = (unsigned char)rnd();
        NF_CHECK_EQ(nf_cms_decode(&out, bad, len), -EINVAL);
    }
    NF_CHECK_EQ(nf_cms_init(&out, 0, 3, 1), -EINVAL);
    NF_CHECK_EQ(nf_cms_init(&out, 10, NF_CMS_MAX_DEPTH + 1, 1), -EINVAL);
    free(buf);
    free(bad);
    nf_cms_free(&c);
    nf_cms_free(&d);
    nf_cms_free(&e);
}

int main(void)
{
    NF_RUN(test_error_bounds);
    NF_RUN(test_narrow_sketch_overcounts);
    NF_RUN(test_add_estimate_matches);
    NF_RUN(test_linearity);
    NF_RUN(test_encoding);
    return nf_test_report();
}
