/* Tests src/engine/variants.c: the grammar of ranking.variants (every refusal names its entry and
 * why), the seed's default, and assignment — buckets fixed across versions (golden values, which
 * tests/integration/nfhash.py computes the same way), shares honoured over 100,000 readers, a
 * new experiment name reshuffling readers, and a share moved between two variants moving only
 * readers between those two. */
#include "engine/variants.h"
#include "nf_test.h"

#include <stdio.h>
#include <string.h>

static int parse(const char *list, nf_variants_t *v, char *err, size_t n)
{
    return nf_variants_parse(list, "default", v, err, n);
}

static void test_default_is_seed(void)
{
    nf_variants_t v;
    char err[256] = "";
    NF_REQUIRE(parse("", &v, err, sizeof err) == 0);
    NF_CHECK_EQ(v.n, 1);
    NF_CHECK_STR(v.v[0].name, "seed");
    NF_CHECK_EQ(v.v[0].share, 100);
    NF_CHECK_EQ(v.shadow, -1);
    NF_CHECK(v.v[0].w.interest == 1.0 && v.v[0].w.follow == 0.5 && v.v[0].w.decay == 0.5 &&
             v.v[0].w.trending == 0.1);
    NF_CHECK_EQ(nf_variants_assign(&v, "anyone", 6), 0);
}

static void test_grammar(void)
{
    nf_variants_t v;
    char err[256] = "";
    NF_REQUIRE(parse("seed share=60\nfresh share=40 trending=0.4 decay=1.5 follow=1\n"
                     "slow shadow interest=2 decay=0.25",
                     &v, err, sizeof err) == 0);
    NF_CHECK_EQ(v.n, 3);
    NF_CHECK_EQ(v.shadow, 2);
    NF_CHECK(v.v[1].w.trending == 0.4 && v.v[1].w.decay == 1.5 && v.v[1].w.follow == 1.0 &&
             v.v[1].w.interest == 1.0);
    NF_CHECK(v.v[2].shadow && v.v[2].share == 0 && v.v[2].w.interest == 2.0);
    NF_CHECK_EQ(nf_variants_find(&v, "fresh", 5), 1);
    NF_CHECK_EQ(nf_variants_find(&v, "fres", 4), -1);
    NF_CHECK_STR(nf_variants_label(&v, 3), "none");
    NF_CHECK_STR(nf_variants_label(&v, 4), "other");
    static const struct {
        const char *list, *msg;
    } bad[] = {
        {"seed share=90", "ranking.variants: the served variants' shares add up to 90, not 100"},
        {"seed share=50\nb share=x",
         "ranking.variants: entry 2 (\"b share=x\"): share: \"x\" is not a whole percent "
         "(0..100)"},
        {"seed share=100\nb shadow share=0",
         "ranking.variants: entry 2 (\"b shadow share=0\"): a shadow variant is never served: "
         "it takes no share"},
        {"seed", "ranking.variants: entry 1 (\"seed\"): a served variant needs share=PERCENT"},
        {"Seed share=100", "ranking.variants: entry 1 (\"Seed share=100\"): name \"Seed\": 1..32 "
                           "of a-z, 0-9, '_' and '-', starting with a letter or digit, not none "
                           "or other"},
        {"none share=100", "ranking.variants: entry 1 (\"none share=100\"): name \"none\": 1..32 "
                           "of a-z, 0-9, '_' and '-', starting with a letter or digit, not none "
                           "or other"},
        {"a share=100 decay=-1",
         "ranking.variants: entry 1 (\"a share=100 decay=-1\"): decay: \"-1\" is not a decimal "
         "number in [0, 1000]"},
        {"a share=100 decay=1e3",
         "ranking.variants: entry 1 (\"a share=100 decay=1e3\"): decay: \"1e3\" is not a "
         "decimal number in [0, 1000]"},
        {"a share=100 speed=2",
         "ranking.variants: entry 1 (\"a share=100 speed=2\"): unknown option \"speed\" "
         "(options: share, interest, follow, decay, trending, shadow)"},
        {"a share=100 fast", "ranking.variants: entry 1 (\"a share=100 fast\"): \"fast\" is not "
                             "NAME=VALUE or shadow"},
        {"a share=50\na share=50", "ranking.variants: \"a\" is named twice"},
        {"a shadow", "ranking.variants: no served variant (all are shadow)"},
        {"a share=100\nb shadow\nc shadow",
         "ranking.variants: entry 3 (\"c shadow\"): a second shadow variant (one at most)"},
        {"a share=100\n", "ranking.variants: entry 2 (\"\"): empty; expected NAME "
                          "[share=PERCENT] [WEIGHT=X]... [shadow]"},
        {"a share=10\nb share=10\nc share=10\nd share=10\ne share=10\nf share=10\ng share=10\n"
         "h share=30\ni shadow",
         "ranking.variants: more than 8 variants"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        NF_CHECK_EQ(parse(bad[i].list, &v, err, sizeof err), -22);
        NF_CHECK_STR(err, bad[i].msg);
    }
    NF_CHECK_EQ(nf_variants_parse("", "", &v, err, sizeof err), -22);
    NF_CHECK_STR(err, "ranking.experiment: must be 1..63 bytes");
}

/* Fixed for good: a change here moves every reader to another variant mid-experiment. The same
 * numbers are in tests/integration/nfhash.py's self-test. */
static void test_golden_buckets(void)
{
    nf_variants_t v;
    NF_REQUIRE(parse("", &v, NULL, 0) == 0);
    static const struct {
        const char *user;
        unsigned bucket;
    } golden[] = {{"demo-user-0", 29},
                  {"demo-user-1", 23},
                  {"reader-42", 62},
                  {"", 87},
                  {"a", 7},
                  {"abcdefgh", 70},
                  {"abcdefghijklmnop", 82},
                  {"a-reader-whose-id-is-longer-than-thirty-two-bytes", 43},
                  {"zo\xc3\xab", 9}};
    for (size_t i = 0; i < sizeof golden / sizeof golden[0]; i++)
        NF_CHECK_EQ(nf_variants_bucket(&v, golden[i].user, strlen(golden[i].user)),
                    golden[i].bucket);
}

enum { READERS = 100000 };

static void test_shares(void)
{
    nf_variants_t v, w, x;
    NF_REQUIRE(parse("a share=10\nb share=30\nz shadow\nc share=60", &v, NULL, 0) == 0);
    NF_REQUIRE(nf_variants_parse("a share=10\nb share=30\nz shadow\nc share=60", "other-test", &w,
                                 NULL, 0) == 0);
    NF_REQUIRE(parse("a share=10\nb share=45\nz shadow\nc share=45", &x, NULL, 0) == 0);
    unsigned count[NF_VARIANTS_MAX] = {0}, moved = 0, wrong = 0, changed = 0;
    for (unsigned i = 0; i < READERS; i++) {
        char user[32];
        int n = snprintf(user, sizeof user, "reader-%u", i);
        unsigned a = nf_variants_assign(&v, user, (size_t)n);
        count[a]++;
        moved += a != nf_variants_assign(&w, user, (size_t)n);
        unsigned b = nf_variants_assign(&x, user, (size_t)n);
        /* c gave 15 of its 60 to b: only c's readers may move, and only to b */
        changed += a != b;
        wrong += a != b && !(a == 3 && b == 1);
    }
    NF_CHECK_EQ(count[2], 0); /* the shadow serves no one */
    /* 100,000 draws: a share p is within 4 standard deviations (sqrt(p (1-p) / n) < 0.16 %) */
    NF_CHECK(count[0] > 9360 && count[0] < 10640);
    NF_CHECK(count[1] > 29420 && count[1] < 30580);
    NF_CHECK(count[3] > 59380 && count[3] < 60620);
    /* another experiment: a reader stays with probability 0.1² + 0.3² + 0.6² = 0.46 */
    NF_CHECK(moved > 52000 && moved < 56000);
    NF_CHECK(changed > 14000 && changed < 16000);
    NF_CHECK_EQ(wrong, 0);
}

int main(void)
{
    NF_RUN(test_default_is_seed);
    NF_RUN(test_grammar);
    NF_RUN(test_golden_buckets);
    NF_RUN(test_shares);
    return nf_test_report();
}
