/* test_ratelimit.c — src/serve/ratelimit.c against a reference model: exact token buckets in a
 * plain array, one per client, on a random sequence of requests (clients, costs, clock steps).
 * While the clients fit the table, every answer and every Retry-After is the model's; past it,
 * memory stays what it was and a forgotten client starts full. */
#include "nf_test.h"
#include "serve/ratelimit.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static uint64_t rng = 88172645463325252ull;
static unsigned below(unsigned n)
{
    return (unsigned)(nf_test_xorshift(&rng) % n);
}

typedef struct {
    double tokens;
    uint64_t last;
    bool seen;
} model_t;

static void test_matches_model(void)
{
    enum { CLIENTS = 300 };
    const double rate = 5, burst = 10;
    nf_ratelimit_t *l = nf_ratelimit_new(rate, burst, 4096);
    NF_REQUIRE(l != NULL);
    static model_t m[CLIENTS];
    uint64_t now = 1000000000ull;
    int bad = 0, denied = 0;
    for (int i = 0; i < 200000 && bad < 5; i++) {
        now += below(4) == 0 ? below(400000000) : below(2000000);
        unsigned c = below(CLIENTS);
        double cost = below(10) == 0 ? 1 + below(12) : 1;
        char key[32];
        int kl = snprintf(key, sizeof key, "client-%u", c);
        model_t *b = &m[c];
        if (!b->seen)
            *b = (model_t){.tokens = burst, .last = now, .seen = true};
        b->tokens = fmin(burst, b->tokens + (double)(now - b->last) / 1e9 * rate);
        b->last = now;
        bool want = b->tokens >= cost;
        unsigned want_ra = 0;
        if (want)
            b->tokens -= cost;
        else {
            double w = (fmin(cost, burst) - b->tokens) / rate;
            want_ra = w < 1 ? 1 : (unsigned)ceil(w);
        }
        unsigned ra = 0;
        bool got = nf_ratelimit_take(l, key, (size_t)kl, cost, now, &ra);
        if (got != want || (!got && ra != want_ra)) {
            bad++;
            fprintf(stderr, "request %d (client %u cost %.0f): got %d ra %u, model %d ra %u\n", i,
                    c, cost, got, ra, want, want_ra);
        }
        denied += !want;
    }
    NF_CHECK_EQ(bad, 0);
    NF_CHECK(denied > 1000); /* the sequence does reach empty buckets */
    nf_ratelimit_free(l);
}

/* Far more clients than the table holds: no growth, no crash, and a client seen again after
 * being forgotten starts with a full bucket (never a worse answer than the model's). */
static void test_bounded(void)
{
    nf_ratelimit_t *l = nf_ratelimit_new(1, 2, 1024);
    NF_REQUIRE(l != NULL);
    char key[32];
    for (int i = 0; i < 200000; i++) {
        int kl = snprintf(key, sizeof key, "addr-%d", i);
        NF_CHECK(nf_ratelimit_take(l, key, (size_t)kl, 1, 1000 + (uint64_t)i, NULL));
    }
    /* one client's burst is still its own */
    NF_CHECK(nf_ratelimit_take(l, "x", 1, 2, 5000000, NULL));
    unsigned ra = 0;
    NF_CHECK(!nf_ratelimit_take(l, "x", 1, 1, 5000001, &ra));
    NF_CHECK_EQ(ra, 1);
    NF_CHECK(!nf_ratelimit_take(l, "x", 1, 5, 5000002, &ra)); /* above the burst: never */
    NF_CHECK_EQ(ra, 2);
    nf_ratelimit_free(l);
    NF_CHECK(nf_ratelimit_new(0, 1, 10) == NULL);
    NF_CHECK(nf_ratelimit_new(1, 0.5, 10) == NULL);
}

int main(void)
{
    NF_RUN(test_matches_model);
    NF_RUN(test_bounded);
    return nf_test_report();
}
