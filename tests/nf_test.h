/* nf_test.h — the project's minimal test harness.
 *
 * A test file defines `static void test_x(void)` functions and calls NF_RUN(test_x) for each
 * from main(), then returns nf_test_report(). A failing NF_CHECK records the failure and goes
 * on; NF_REQUIRE returns from the current test. The exit code is non-zero if anything failed,
 * which is all ctest looks at. */
#ifndef NF_TEST_H
#define NF_TEST_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* xorshift64 (Marsaglia): the tests' reproducible random numbers; *state must not be 0. */
static inline uint64_t nf_test_xorshift(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

static int nf_test_failed_checks;
static int nf_test_failed_tests;
static int nf_test_ran;

#define NF_CHECK(cond)                                                                             \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            nf_test_failed_checks++;                                                               \
        }                                                                                          \
    } while (0)

#define NF_REQUIRE(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: requirement failed: %s\n", __FILE__, __LINE__, #cond);         \
            nf_test_failed_checks++;                                                               \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define NF_CHECK_EQ(a, b)                                                                          \
    do {                                                                                           \
        long long nf_a_ = (long long)(a), nf_b_ = (long long)(b);                                  \
        if (nf_a_ != nf_b_) {                                                                      \
            fprintf(stderr, "%s:%d: check failed: %s == %s (%lld != %lld)\n", __FILE__, __LINE__,  \
                    #a, #b, nf_a_, nf_b_);                                                         \
            nf_test_failed_checks++;                                                               \
        }                                                                                          \
    } while (0)

#define NF_CHECK_STR(a, b)                                                                         \
    do {                                                                                           \
        const char *nf_a_ = (a), *nf_b_ = (b);                                                     \
        if (!nf_a_ || !nf_b_ || strcmp(nf_a_, nf_b_) != 0) {                                       \
            fprintf(stderr, "%s:%d: check failed: %s == %s (\"%s\" != \"%s\")\n", __FILE__,        \
                    __LINE__, #a, #b, nf_a_ ? nf_a_ : "(null)", nf_b_ ? nf_b_ : "(null)");         \
            nf_test_failed_checks++;                                                               \
        }                                                                                          \
    } while (0)

#define NF_RUN(fn)                                                                                 \
    do {                                                                                           \
        int nf_before_ = nf_test_failed_checks;                                                    \
        struct timespec nf_t0_, nf_t1_;                                                            \
        clock_gettime(CLOCK_MONOTONIC, &nf_t0_);                                                   \
        fn();                                                                                      \
        clock_gettime(CLOCK_MONOTONIC, &nf_t1_);                                                   \
        nf_test_ran++;                                                                             \
        double nf_ms_ = (double)(nf_t1_.tv_sec - nf_t0_.tv_sec) * 1e3 +                            \
                        (double)(nf_t1_.tv_nsec - nf_t0_.tv_nsec) / 1e6;                           \
        if (nf_test_failed_checks != nf_before_) {                                                 \
            nf_test_failed_tests++;                                                                \
            fprintf(stderr, "FAIL %s (%.1f ms)\n", #fn, nf_ms_);                                   \
        } else {                                                                                   \
            fprintf(stderr, "ok   %s (%.1f ms)\n", #fn, nf_ms_);                                   \
        }                                                                                          \
    } while (0)

/* splitmix64: a seeded sequence for reference-model tests (the same seed, the same run). */
static inline uint64_t nf_test_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline int nf_test_report(void)
{
    fprintf(stderr, "%d tests, %d failed\n", nf_test_ran, nf_test_failed_tests);
    return nf_test_failed_tests ? 1 : 0;
}

#endif
