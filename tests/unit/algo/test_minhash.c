/* Tests src/algo/minhash.c.
 *
 * The core is a property test of the LSH banding against theory: for each Jaccard similarity s,
 * thousands of pairs of random shingle-hash sets with exactly that Jaccard (a common part plus
 * two disjoint parts) are signed, and the fraction of pairs sharing at least one band key must
 * be within 3 percentage points of 1-(1-s^r)^b (with 4000 pairs the binomial standard error is
 * at most 0.8 points, so a correct implementation passes at ~4 sigma and hash functions that
 * are correlated or biased move the curve by more). The same pairs check that the similarity
 * estimate is unbiased. Around it: normalization (case, punctuation, UTF-8), short and empty
 * documents, the title/body word stream, band keys and scratch reuse.
 *
 * Deterministic: one seeded PRNG. */
#include "algo/hash.h"
#include "algo/minhash.h"
#include "nf_test.h"

#include <math.h>
#include <stdlib.h>

static uint64_t rng_state = 0x853c49e6748fea9bull;
static uint64_t rnd(void)
{
    rng_state += 0x9e3779b97f4a7c15ull;
    return nf_mix64(rng_state);
}

static nf_minhash_t *make(void)
{
    nf_minhash_opts_t o;
    nf_minhash_opts_default(&o);
    char err[256];
    nf_minhash_t *mh = nf_minhash_new(&o, err, sizeof err);
    if (!mh)
        fprintf(stderr, "%s\n", err);
    return mh;
}

static void test_defaults_and_validation(void)
{
    nf_minhash_opts_t o;
    nf_minhash_opts_default(&o);
    NF_CHECK_EQ(o.shingle_words, 3);
    NF_CHECK_EQ(o.hashes, 128);
    NF_CHECK_EQ(o.bands, 16);
    NF_CHECK_EQ(o.rows, 8);
    char err[256] = "";
    o.bands = 15;
    NF_CHECK(nf_minhash_new(&o, err, sizeof err) == NULL);
    NF_CHECK(strstr(err, "bands x rows") != NULL);
    nf_minhash_opts_default(&o);
    o.hashes = 100;
    o.bands = 10;
    o.rows = 10;
    NF_CHECK(nf_minhash_new(&o, err, sizeof err) == NULL);
}

/* Expected LSH candidate probability. */
static double lsh_prob(double s, unsigned b, unsigned r)
{
    return 1.0 - pow(1.0 - pow(s, r), b);
}

static void test_lsh_matches_theory(void)
{
    nf_minhash_t *mh = make();
    NF_REQUIRE(mh);
    enum { PAIRS = 4000, UNION = 80 };
    static const double sims[] = {0.3, 0.5, 0.7, 0.8, 0.9, 0.95};
    uint64_t a[UNION], b[UNION];
    uint32_t sa[128], sb[128];
    uint64_t ka[16], kb[16];
    fprintf(stderr, "   s     expected  measured  mean-est\n");
    for (size_t si = 0; si < sizeof sims / sizeof *sims; si++) {
        double s = sims[si];
        size_t common = (size_t)lround(s * UNION);
        size_t d = (UNION - common) / 2;
        NF_REQUIRE(common + 2 * d == UNION); /* exact Jaccard common / UNION */
        unsigned hits = 0;
        double est_sum = 0;
        for (int p = 0; p < PAIRS; p++) {
            size_t na = 0, nb = 0;
            for (size_t i = 0; i < common; i++) {
                uint64_t x = rnd();
                a[na++] = x;
                b[nb++] = x;
            }
            for (size_t i = 0; i < d; i++) {
                a[na++] = rnd();
                b[nb++] = rnd();
            }
            nf_minhash_sign(mh, a, na, sa);
            nf_minhash_sign(mh, b, nb, sb);
            nf_minhash_band_keys(mh, sa, ka);
            nf_minhash_band_keys(mh, sb, kb);
            bool cand = false;
            for (int j = 0; j < 16; j++)
                cand |= ka[j] == kb[j];
            hits += cand;
            est_sum += nf_minhash_similarity(sa, sb, 128);
        }
        double want = lsh_prob(s, 16, 8), got = (double)hits / PAIRS, mean = est_sum / PAIRS;
        fprintf(stderr, "  %.2f   %.4f    %.4f    %.4f\n", s, want, got, mean);
        NF_CHECK(fabs(got - want) <= 0.03);
        /* Standard error of the mean estimate: sqrt(s(1-s)/128/PAIRS) < 0.0007. */
        NF_CHECK(fabs(mean - s) <= 0.004);
    }
    nf_minhash_free(mh);
}

/* Distinct functions must disagree: on random sets, slot i and slot j of a signature pick the
 * same minimizing shingle only ~1/n of the time. */
static void test_functions_independent(void)
{
    nf_minhash_t *mh = make();
    NF_REQUIRE(mh);
    enum { N = 50, DOCS = 400 };
    uint64_t set[N];
    uint32_t sig[128];
    unsigned same = 0, total = 0;
    for (int d = 0; d < DOCS; d++) {
        for (int i = 0; i < N; i++)
            set[i] = rnd();
        nf_minhash_sign(mh, set, N, sig);
        /* Which shingle attains each slot's minimum, via sign of singletons. */
        int arg[128];
        for (int i = 0; i < 128; i++)
            arg[i] = -1;
        for (int k = 0; k < N; k++) {
            uint32_t one[128];
            nf_minhash_sign(mh, &set[k], 1, one);
            for (int i = 0; i < 128; i++)
                if (one[i] == sig[i])
                    arg[i] = k;
        }
        for (int i = 0; i < 127; i++) {
            NF_CHECK(arg[i] >= 0);
            same += arg[i] == arg[i + 1];
            total++;
        }
    }
    double rate = (double)same / total; /* expected 1/N = 0.02, s.e. ~0.0008 */
    fprintf(stderr, "   adjacent functions share the argmin: %.4f (expected %.4f)\n", rate,
            1.0 / N);
    NF_CHECK(fabs(rate - 1.0 / N) < 0.006);
    nf_minhash_free(mh);
}

static uint64_t sh(const char *words)
{
    return nf_hash64(words, strlen(words), NF_MINHASH_SHINGLE_SEED);
}

static long shingles_of(nf_minhash_t *mh, nf_minhash_scratch_t *s, const char *title,
                        const char *body)
{
    return nf_minhash_shingles(mh, s, title, title ? strlen(title) : 0, body,
                               body ? strlen(body) : 0);
}

static void test_normalization(void)
{
    nf_minhash_t *mh = make();
    NF_REQUIRE(mh);
    nf_minhash_scratch_t s = {0};

    NF_CHECK_EQ(shingles_of(mh, &s, NULL, "The quick brown fox"), 2);
    NF_CHECK(s.shingles[0] == sh("the quick brown"));
    NF_CHECK(s.shingles[1] == sh("quick brown fox"));

    /* Case and punctuation do not matter; digits are word characters. */
    NF_CHECK_EQ(shingles_of(mh, &s, NULL, "  THE, Quick--brown!!\n\tFOX... "), 2);
    NF_CHECK(s.shingles[0] == sh("the quick brown"));
    NF_CHECK(s.shingles[1] == sh("quick brown fox"));
    NF_CHECK_EQ(shingles_of(mh, &s, NULL, "G7 summit's 2026"), 2);
    NF_CHECK(s.shingles[0] == sh("g7 summit s"));
    NF_CHECK(s.shingles[1] == sh("summit s 2026"));

    /* UTF-8 bytes stay as they are (no case folding outside ASCII). */
    NF_CHECK_EQ(shingles_of(mh, &s, NULL, "Caf\xc3\xa9 AU lait, \xc3\x89t\xc3\xa9"), 2);
    NF_CHECK(s.shingles[0] == sh("caf\xc3\xa9 au lait"));
    NF_CHECK(s.shingles[1] == sh("au lait \xc3\x89t\xc3\xa9"));

    /* Title and body are one word stream. */
    NF_CHECK_EQ(shingles_of(mh, &s, "Alpha beta", "gamma. Delta"), 2);
    NF_CHECK(s.shingles[0] == sh("alpha beta gamma"));
    NF_CHECK(s.shingles[1] == sh("beta gamma delta"));

    /* Fewer than k words: one shingle of them all. */
    NF_CHECK_EQ(shingles_of(mh, &s, "Breaking:", "NEWS"), 1);
    NF_CHECK(s.shingles[0] == sh("breaking news"));
    NF_CHECK_EQ(shingles_of(mh, &s, NULL, "!word!"), 1);
    NF_CHECK(s.shingles[0] == sh("word"));

    /* No words: no shingle, the empty signature, never similar to anything. */
    uint32_t e1[128], e2[128], x[128];
    NF_CHECK_EQ(shingles_of(mh, &s, "", " ,.;-- \t"), 0);
    NF_CHECK_EQ(nf_minhash_sign_text(mh, &s, NULL, 0, "?!", 2, e1), 0);
    NF_CHECK_EQ(nf_minhash_sign_text(mh, &s, NULL, 0, NULL, 0, e2), 0);
    NF_CHECK(nf_minhash_is_empty(e1, 128));
    NF_CHECK(nf_minhash_is_empty(e2, 128));
    NF_CHECK(nf_minhash_similarity(e1, e2, 128) == 0.0);
    NF_CHECK_EQ(nf_minhash_sign_text(mh, &s, "one", 3, NULL, 0, x), 0);
    NF_CHECK(!nf_minhash_is_empty(x, 128));
    NF_CHECK(nf_minhash_similarity(x, x, 128) == 1.0);
    NF_CHECK(nf_minhash_similarity(x, e1, 128) == 0.0);

    nf_minhash_scratch_free(&s);
    nf_minhash_free(mh);
}

/* sign_text == sign over the shingles, whatever the scratch saw before; band keys agree. */
static void test_sign_text_and_bands(void)
{
    nf_minhash_t *mh = make();
    NF_REQUIRE(mh);
    nf_minhash_scratch_t s = {0};
    static const char *vocab[] = {"storm", "Senate", "vote", "market", "rally", "ÉLAN",
                                  "7",     "goal",   "team", "river",  "flood", "über"};
    char doc[4096];
    for (int d = 0; d < 200; d++) {
        size_t n = 0;
        int words = (int)(rnd() % 300);
        for (int w = 0; w < words && n < sizeof doc - 32; w++)
            n += (size_t)snprintf(doc + n, sizeof doc - n, "%s%s", vocab[rnd() % 12],
                                  rnd() % 4 ? " " : ", ");
        uint32_t a[128], b[128];
        NF_REQUIRE(nf_minhash_sign_text(mh, &s, NULL, 0, doc, n, a) == 0);
        size_t ns = s.nshingles;
        NF_CHECK_EQ(ns, words == 0 ? 0 : words < 3 ? 1 : words - 2);
        nf_minhash_sign(mh, s.shingles, ns, b);
        NF_CHECK(memcmp(a, b, sizeof a) == 0);
        uint64_t keys[16];
        nf_minhash_band_keys(mh, a, keys);
        for (unsigned j = 0; j < 16; j++)
            NF_CHECK(keys[j] == nf_minhash_band_key(a, j, 8));
        /* A band key depends on its band's values and index only. */
        uint32_t c[128];
        memcpy(c, a, sizeof c);
        c[3] ^= 1;
        NF_CHECK(nf_minhash_band_key(c, 0, 8) != keys[0]);
        NF_CHECK(nf_minhash_band_key(c, 1, 8) == keys[1]);
    }
    nf_minhash_scratch_free(&s);
    nf_minhash_free(mh);
}

int main(void)
{
    NF_RUN(test_defaults_and_validation);
    NF_RUN(test_normalization);
    NF_RUN(test_sign_text_and_bands);
    NF_RUN(test_functions_independent);
    NF_RUN(test_lsh_matches_theory);
    return nf_test_report();
}
