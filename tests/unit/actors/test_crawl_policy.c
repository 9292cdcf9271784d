/* Tests src/actors/crawl_policy.c on a fake clock (no sleeps, no timing assertions): tables for
 * every transition the header promises, then long seeded random runs checked against a model —
 * a crawl loop over many sources (never fetched early, delays within their bounds, DEAD exactly
 * at N failure points, Retry-After exact) and a host under random starts/finishes (concurrency,
 * spacing, breaker window, one probe). Seeds are fixed, so a failure reproduces. */
#include "actors/crawl_policy.h"
#include "io/fetch.h"
#include "nf_test.h"

#include <stddef.h>
#include <stdlib.h>

#define SEC  1000ll
#define MIN  (60 * SEC)
#define HOUR (60 * MIN)
#define T0   1700000000000ll /* a wall-clock-like start: nothing may assume now starts at 0 */

static uint64_t test_rng = 0x5eed5eed12345678ull;

static int64_t rnd(int64_t n) /* uniform in [0, n) */
{
    return (int64_t)(nf_crawl_rng_next(&test_rng) % (uint64_t)n);
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* ---- policy ---- */

static void test_policy_default_and_validate(void)
{
    nf_crawl_policy_t d = nf_crawl_policy_default();
    NF_CHECK(nf_crawl_policy_validate(&d) == NULL);
    NF_CHECK_EQ(d.interval_default_ms, 15 * MIN);
    NF_CHECK_EQ(d.interval_floor_ms, 5 * MIN);
    NF_CHECK_EQ(d.interval_ceiling_ms, 24 * HOUR);
    NF_CHECK_EQ(d.jitter_permille, 100);
    NF_CHECK_EQ(d.backoff_base_ms, 1 * MIN);
    NF_CHECK_EQ(d.backoff_cap_ms, 6 * HOUR);
    NF_CHECK_EQ(d.dead_after_failures, 10);
    NF_CHECK_EQ(d.permanent_failure_weight, 2);
    NF_CHECK_EQ(d.host_max_concurrent, 2);
    NF_CHECK_EQ(d.host_spacing_ms, 1000);
    NF_CHECK_EQ(d.breaker_failures, 5);
    NF_CHECK_EQ(d.breaker_window_ms, 60 * SEC);
    NF_CHECK_EQ(d.breaker_open_ms, 60 * SEC);
    NF_CHECK(d.breaker_open_max_ms >= d.breaker_open_ms);

#define F(name) #name, offsetof(nf_crawl_policy_t, name), sizeof(((nf_crawl_policy_t *)0)->name)
    static const struct {
        const char *field; /* the message must name it */
        size_t off, width;
        int64_t value;
    } rows[] = {
        {F(interval_floor_ms), 30 * SEC},             /* under the 1 min minimum */
        {F(interval_floor_ms), 25 * HOUR},            /* floor > ceiling */
        {F(interval_ceiling_ms), 4 * MIN},            /* ceiling < floor */
        {F(interval_ceiling_ms), 31 * 24 * HOUR},     /* over 30 days */
        {F(interval_default_ms), 1 * MIN},            /* below the floor */
        {F(interval_default_ms), 25 * HOUR},          /* above the ceiling */
        {F(jitter_permille), 501},                    /* more than ± 50 % */
        {F(backoff_base_ms), 59 * SEC},               /* under 1 min */
        {F(backoff_base_ms), 7 * HOUR},               /* base > cap */
        {F(backoff_cap_ms), 30 * SEC},                /* cap < base */
        {F(backoff_cap_ms), 25 * HOUR},               /* cap > ceiling */
        {F(dead_after_failures), 0},                  /* */
        {F(dead_after_failures), 1001},               /* */
        {F(permanent_failure_weight), 0},             /* */
        {F(permanent_failure_weight), 11},            /* > dead_after_failures */
        {F(host_max_concurrent), 0},                  /* */
        {F(host_spacing_ms), -1},                     /* */
        {F(breaker_failures), 17},                    /* */
        {F(breaker_window_ms), 0},                    /* */
        {F(breaker_open_ms), 0},                      /* */
        {F(breaker_open_max_ms), 59 * SEC},           /* max < open */
        {F(breaker_open_max_ms), 31 * 24 * HOUR + 1}, /* */
    };
#undef F
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        nf_crawl_policy_t p = nf_crawl_policy_default();
        if (rows[i].width == 8) {
            memcpy((char *)&p + rows[i].off, &rows[i].value, 8);
        } else {
            uint32_t v = (uint32_t)rows[i].value;
            memcpy((char *)&p + rows[i].off, &v, 4);
        }
        const char *err = nf_crawl_policy_validate(&p);
        NF_CHECK(err != NULL);
        if (err && !strstr(err, rows[i].field)) {
            fprintf(stderr, "row %zu: \"%s\" does not name %s\n", i, err, rows[i].field);
            NF_CHECK(0);
        }
    }
    /* breaker off: its other fields do not matter */
    nf_crawl_policy_t off = nf_crawl_policy_default();
    off.breaker_failures = 0;
    off.breaker_window_ms = 0;
    off.breaker_open_ms = 0;
    NF_CHECK(nf_crawl_policy_validate(&off) == NULL);
}

static void test_sizes(void)
{
    fprintf(stderr, "sizeof nf_crawl_schedule_t = %zu, nf_host_t = %zu, nf_crawl_policy_t = %zu\n",
            sizeof(nf_crawl_schedule_t), sizeof(nf_host_t), sizeof(nf_crawl_policy_t));
    NF_CHECK(sizeof(nf_crawl_schedule_t) <= 256); /* 100k sources in memory */
    NF_CHECK(sizeof(nf_host_t) <= 192);
}

/* ---- classification ---- */

static void test_classify_table(void)
{
    static const struct {
        int status, error;
        nf_crawl_outcome_t outcome;
        bool host_ok;
    } rows[] = {
        {200, NF_FETCH_OK, NF_CRAWL_OK, true},
        {203, NF_FETCH_OK, NF_CRAWL_OK, true},
        {204, NF_FETCH_OK, NF_CRAWL_OK, true},
        {299, NF_FETCH_OK, NF_CRAWL_OK, true},
        {304, NF_FETCH_OK, NF_CRAWL_NOT_MODIFIED, true},
        {100, NF_FETCH_OK, NF_CRAWL_FAILED, true},
        {301, NF_FETCH_OK, NF_CRAWL_FAILED, true}, /* a final 3xx: not followed */
        {302, NF_FETCH_OK, NF_CRAWL_FAILED, true},
        {307, NF_FETCH_OK, NF_CRAWL_FAILED, true},
        {400, NF_FETCH_OK, NF_CRAWL_FAILED, true},
        {401, NF_FETCH_OK, NF_CRAWL_FAILED, true},
        {403, NF_FETCH_OK, NF_CRAWL_FAILED, true},
        {404, NF_FETCH_OK, NF_CRAWL_FAILED, true},
        {410, NF_FETCH_OK, NF_CRAWL_FAILED_PERMANENT, true},
        {429, NF_FETCH_OK, NF_CRAWL_THROTTLED, false},
        {451, NF_FETCH_OK, NF_CRAWL_FAILED, true},
        {500, NF_FETCH_OK, NF_CRAWL_FAILED, false},
        {502, NF_FETCH_OK, NF_CRAWL_FAILED, false},
        {503, NF_FETCH_OK, NF_CRAWL_THROTTLED, false},
        {504, NF_FETCH_OK, NF_CRAWL_FAILED, false},
        {599, NF_FETCH_OK, NF_CRAWL_FAILED, false},
        {0, NF_FETCH_OK, NF_CRAWL_FAILED, false}, /* no status: a broken response */
        {999, NF_FETCH_OK, NF_CRAWL_FAILED, false},
        {0, NF_FETCH_E_TIMEOUT, NF_CRAWL_FAILED, false},
        {0, NF_FETCH_E_DNS, NF_CRAWL_FAILED, false},
        {0, NF_FETCH_E_CONNECT, NF_CRAWL_FAILED, false},
        {0, NF_FETCH_E_REFUSED_ADDRESS, NF_CRAWL_FAILED_PERMANENT, true},
        {200, NF_FETCH_E_TOO_LARGE, NF_CRAWL_FAILED_PERMANENT, true}, /* error wins over status */
        {301, NF_FETCH_E_REDIRECTS, NF_CRAWL_FAILED, true},
        {0, NF_FETCH_E_TLS, NF_CRAWL_FAILED, false},
        {200, NF_FETCH_E_PROTOCOL, NF_CRAWL_FAILED, false},
        {0, NF_FETCH_E_CANCELLED, NF_CRAWL_CANCELLED, true},
        {0, NF_FETCH_E_OTHER, NF_CRAWL_FAILED, false},
        {0, 12345, NF_CRAWL_FAILED, false}, /* unknown error code */
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        nf_crawl_outcome_t o = nf_crawl_classify(rows[i].status, rows[i].error);
        bool ok = nf_crawl_host_ok(rows[i].status, rows[i].error);
        if (o != rows[i].outcome || ok != rows[i].host_ok) {
            fprintf(stderr, "row %zu (%d, %s): %s host_ok=%d, want %s host_ok=%d\n", i,
                    rows[i].status, nf_fetch_error_name((nf_fetch_error_t)rows[i].error),
                    nf_crawl_outcome_name(o), ok, nf_crawl_outcome_name(rows[i].outcome),
                    rows[i].host_ok);
            NF_CHECK(0);
        }
    }
    NF_CHECK_STR(nf_crawl_outcome_name(NF_CRAWL_FAILED_PERMANENT), "failed_permanent");
    NF_CHECK_STR(nf_crawl_status_name(NF_CRAWL_DEAD), "dead");
    NF_CHECK_STR(nf_breaker_state_name(NF_BREAKER_HALF_OPEN), "half_open");
}

/* ---- schedule: tables ---- */

static void test_interval_clamp_table(void)
{
    nf_crawl_policy_t p = nf_crawl_policy_default();
    static const struct {
        int64_t interval_s, want_ms;
    } rows[] = {
        {0, 15 * MIN},      {-5, 15 * MIN},         {1, 5 * MIN}, {299, 5 * MIN},
        {300, 5 * MIN},     {301, 301 * SEC},       {3600, HOUR}, {86400, 24 * HOUR},
        {86401, 24 * HOUR}, {INT64_MAX, 24 * HOUR}, /* no overflow */
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        NF_CHECK_EQ(nf_crawl_interval_ms(&p, rows[i].interval_s), rows[i].want_ms);
        nf_crawl_schedule_t s;
        nf_crawl_init(&p, &s, rows[i].interval_s, T0, &test_rng);
        NF_CHECK_EQ(s.interval_ms, rows[i].want_ms);
        NF_CHECK_EQ(s.status, NF_CRAWL_ACTIVE);
        NF_CHECK_EQ(s.failures, 0);
        NF_CHECK_STR(s.etag, "");
        NF_CHECK_STR(s.last_modified, "");
        NF_CHECK(s.next_crawl_at_ms >= T0 && s.next_crawl_at_ms < T0 + rows[i].want_ms);
    }
    nf_crawl_schedule_t s;
    nf_crawl_init(&p, &s, 600, T0, &test_rng);
    int64_t next = s.next_crawl_at_ms;
    nf_crawl_set_interval(&p, &s, 7200);
    NF_CHECK_EQ(s.interval_ms, 2 * HOUR);
    NF_CHECK_EQ(s.next_crawl_at_ms, next); /* takes effect at the next result */
}

/* The first crawl of a fleet is spread uniformly over [now, now + interval): a chi-square over
 * 20 buckets with 19 degrees of freedom (mean 19; 60 is far beyond the 99.99th percentile). */
static void test_first_crawl_spread_uniform(void)
{
    nf_crawl_policy_t p = nf_crawl_policy_default();
    enum { N = 100000, B = 20 };
    long buckets[B] = {0};
    uint64_t rng = 42;
    for (int i = 0; i < N; i++) {
        nf_crawl_schedule_t s;
        nf_crawl_init(&p, &s, 0, T0, &rng);
        int64_t off = s.next_crawl_at_ms - T0;
        NF_REQUIRE(off >= 0 && off < 15 * MIN);
        buckets[off * B / (15 * MIN)]++;
    }
    double chi2 = 0, expect = (double)N / B;
    for (int b = 0; b < B; b++)
        chi2 += ((double)buckets[b] - expect) * ((double)buckets[b] - expect) / expect;
    fprintf(stderr, "first-crawl spread: chi2 = %.1f over %d buckets\n", chi2, B);
    NF_CHECK(chi2 < 60);
}

static void test_success_jitter_bounds(void)
{
    nf_crawl_policy_t p = nf_crawl_policy_default();
    nf_crawl_schedule_t s;
    nf_crawl_init(&p, &s, 0, T0, &test_rng);
    const int64_t iv = 15 * MIN, lo = iv - iv / 10, hi = iv + iv / 10;
    int64_t seen_lo = INT64_MAX, seen_hi = INT64_MIN;
    double sum = 0;
    enum { N = 50000 };
    int64_t now = T0;
    for (int i = 0; i < N; i++) {
        nf_crawl_on_result(&p, &s, i % 2 ? NF_CRAWL_OK : NF_CRAWL_NOT_MODIFIED, -1, now, &test_rng);
        int64_t d = s.next_crawl_at_ms - now;
        NF_REQUIRE(d >= lo && d <= hi);
        seen_lo = min64(seen_lo, d);
        seen_hi = max64(seen_hi, d);
        sum += (double)d;
        now = s.next_crawl_at_ms;
    }
    NF_CHECK(seen_lo < lo + 2 * SEC); /* both ends are reached: the spread is real */
    NF_CHECK(seen_hi > hi - 2 * SEC);
    double mean = sum / N;
    NF_CHECK(mean > (double)iv * 0.995 && mean < (double)iv * 1.005);

    /* At the floor and the ceiling the jittered delay stays inside [floor, ceiling]. */
    static const int64_t at[] = {300, 86400};
    for (size_t k = 0; k < 2; k++) {
        nf_crawl_init(&p, &s, at[k], T0, &test_rng);
        for (int i = 0; i < 5000; i++) {
            nf_crawl_on_result(&p, &s, NF_CRAWL_OK, -1, T0, &test_rng);
            int64_t d = s.next_crawl_at_ms - T0;
            NF_REQUIRE(d >= p.interval_floor_ms && d <= p.interval_ceiling_ms);
            NF_REQUIRE(d >= at[k] * SEC * 9 / 10 && d <= at[k] * SEC * 11 / 10);
        }
    }
}

static void test_not_modified_is_success_keeping_interval(void)
{
    nf_crawl_policy_t p = nf_crawl_policy_default();
    nf_crawl_schedule_t s;
    nf_crawl_init(&p, &s, 1800, T0, &test_rng);
    for (int i = 0; i < 5; i++)
        nf_crawl_on_result(&p, &s, NF_CRAWL_FAILED, -1, T0, &test_rng);
    NF_CHECK_EQ(s.failures, 5);
    nf_crawl_on_result(&p, &s, NF_CRAWL_NOT_MODIFIED, -1, T0, &test_rng);
    NF_CHECK_EQ(s.failures, 0);
    NF_CHECK_EQ(s.interval_ms, 30 * MIN);
    NF_CHECK_EQ(s.last_outcome, NF_CRAWL_NOT_MODIFIED);
    int64_t d = s.next_crawl_at_ms - T0;
    NF_CHECK(d >= 27 * MIN && d <= 33 * MIN);
}

static void test_backoff_sequence(void)
{
    nf_crawl_policy_t p = nf_crawl_policy_default();
    p.jitter_permille = 0;
    p.dead_after_failures = 1000;
    /* k-th consecutive failure → delay (jitter off): doubling from 1 min, capped at 6 h */
    static const int64_t want_min[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 360, 360, 360, 360};
    nf_crawl_schedule_t s;
    nf_crawl_init(&p, &s, 86400, T0, &test_rng); /* backoff may be shorter than the interval */
    for (size_t k = 0; k < sizeof want_min / sizeof want_min[0]; k++) {
        nf_crawl_on_result(&p, &s, NF_CRAWL_FAILED, -1, T0, &test_rng);
        NF_CHECK_EQ(s.failures, k + 1);
        NF_CHECK_EQ(s.next_crawl_at_ms - T0, want_min[k] * MIN);
    }
    /* with jitter: ± 10 % around the same values, never below 1 min nor above the cap */
    p.jitter_permille = 100;
    for (int round = 0; round < 200; round++) {
        nf_crawl_init(&p, &s, 0, T0, &test_rng);
        for (size_t k = 0; k < sizeof want_min / sizeof want_min[0]; k++) {
            nf_crawl_on_result(&p, &s, NF_CRAWL_FAILED, -1, T0, &test_rng);
            int64_t d = s.next_crawl_at_ms - T0, w = want_min[k] * MIN;
            NF_REQUIRE(d >= max64(w - w / 10, NF_CRAWL_MIN_DELAY_MS));
            NF_REQUIRE(d <= min64(w + w / 10, p.backoff_cap_ms));
        }
    }
    /* 2^k never overflows however many failures */
    for (int i = 0; i < 2000; i++)
        nf_crawl_on_result(&p, &s, NF_CRAWL_FAILED, -1, T0, &test_rng);
    NF_CHECK_EQ(s.failures, 1000);
    NF_CHECK(s.next_crawl_at_ms - T0 <= p.backoff_cap_ms);
}

static void test_dead_exactly_after_n(void)
{
    static const uint32_t ns[] = {1, 2, 3, 10, 25};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        nf_crawl_policy_t p = nf_crawl_policy_default();
        p.dead_after_failures = ns[i];
        p.permanent_failure_weight = 1;
        nf_crawl_schedule_t s;
        nf_crawl_init(&p, &s, 0, T0, &test_rng);
        int64_t now = T0;
        for (uint32_t k = 1; k <= ns[i]; k++) {
            now = max64(now, s.next_crawl_at_ms);
            NF_CHECK(nf_crawl_due(&s, now));
            nf_crawl_on_result(&p, &s, k % 2 ? NF_CRAWL_FAILED : NF_CRAWL_THROTTLED, -1, now,
                               &test_rng);
            NF_CHECK_EQ(s.status, k < ns[i] ? NF_CRAWL_ACTIVE : NF_CRAWL_DEAD);
        }
        NF_CHECK(s.next_crawl_at_ms > now);
        NF_CHECK(!nf_crawl_due(&s, now + 365 * 24 * HOUR)); /* DEAD is never scheduled */
        nf_crawl_revive(&s, now, &test_rng);
        NF_CHECK_EQ(s.status, NF_CRAWL_ACTIVE);
        NF_CHECK_EQ(s.failures, 0);
        NF_CHECK(s.next_crawl_at_ms >= now && s.next_crawl_at_ms < now + 15 * MIN);
    }

    /* a success anywhere in the run starts the count again */
    nf_crawl_policy_t p = nf_crawl_policy_default();
    nf_crawl_schedule_t s;
    nf_crawl_init(&p, &s, 0, T0, &test_rng);
    for (int round = 0; round < 50; round++) {
        for (int k = 0; k < 9; k++)
            nf_crawl_on_result(&p, &s, NF_CRAWL_FAILED, -1, T0, &test_rng);
        NF_CHECK_EQ(s.failures, 9);
        nf_crawl_on_result(&p, &s, round % 2 ? NF_CRAWL_OK : NF_CRAWL_NOT_MODIFIED, -1, T0,
                           &test_rng);
        NF_CHECK_EQ(s.failures, 0);
    }
    NF_CHECK_EQ(s.status, NF_CRAWL_ACTIVE);
}

static void test_permanent_failures_count_double(void)
{
    nf_crawl_policy_t p = nf_crawl_policy_default(); /* N = 10, weight 2 */
    nf_crawl_schedule_t s;
    nf_crawl_init(&p, &s, 0, T0, &test_rng);
    for (int k = 1; k <= 4; k++) {
        nf_crawl_on_result(&p, &s, NF_CRAWL_FAILED_PERMANENT, -1, T0, &test_rng);
        NF_CHECK_EQ(s.failures, 2 * k);
        NF_CHECK_EQ(s.status, NF_CRAWL_ACTIVE);
    }
    nf_crawl_on_result(&p, &s, NF_CRAWL_FAILED, -1, T0, &test_rng); /* 9 */
    NF_CHECK_EQ(s.status, NF_CRAWL_ACTIVE);
    nf_crawl_on_result(&p, &s, NF_CRAWL_FAILED_PERMANENT, -1, T0, &test_rng); /* 11 → 10 */
    NF_CHECK_EQ(s.failures, 10);
    NF_CHECK_EQ(s.status, NF_CRAWL_DEAD);

    /* five 410s in a row: DEAD at the fifth, not before */
    nf_crawl_init(&p, &s, 0, T0, &test_rng);
    for (int k = 1; k <= 5; k++) {
        nf_crawl_on_result(&p, &s, nf_crawl_classify(410, NF_FETCH_OK), -1, T0, &test_rng);
        NF_CHECK_EQ(s.status, k < 5 ? NF_CRAWL_ACTIVE : NF_CRAWL_DEAD);
    }
}

static void test_retry_after_table(void)
{
    nf_crawl_policy_t p = nf_crawl_policy_default();
    static const struct {
        nf_crawl_outcome_t outcome;
        int64_t retry_after_s;
        int64_t want_ms;    /* exact delay, or -1: see min_ms */
        int64_t min_ms;     /* lower bound when not exact */
        int failures_after; /* from 3 */
    } rows[] = {
        /* throttled with Retry-After: exactly then, clamped to [1 min, ceiling], not a failure */
        {NF_CRAWL_THROTTLED, 0, 1 * MIN, 0, 3},
        {NF_CRAWL_THROTTLED, 30, 1 * MIN, 0, 3},
        {NF_CRAWL_THROTTLED, 60, 1 * MIN, 0, 3},
        {NF_CRAWL_THROTTLED, 61, 61 * SEC, 0, 3},
        {NF_CRAWL_THROTTLED, 120, 2 * MIN, 0, 3},
        {NF_CRAWL_THROTTLED, 7 * 3600, 7 * HOUR, 0, 3}, /* beyond the backoff cap: honoured */
        {NF_CRAWL_THROTTLED, 86400, 24 * HOUR, 0, 3},
        {NF_CRAWL_THROTTLED, 86401, 24 * HOUR, 0, 3},     /* capped at the ceiling */
        {NF_CRAWL_THROTTLED, INT64_MAX, 24 * HOUR, 0, 3}, /* no overflow */
        /* throttled without Retry-After: a failure with backoff (4th: 8 min ± 10 %) */
        {NF_CRAWL_THROTTLED, -1, -1, 8 * MIN - 48 * SEC, 4},
        /* Retry-After on other outcomes: a lower bound */
        {NF_CRAWL_OK, 2 * 3600, 2 * HOUR, 0, 0},
        {NF_CRAWL_OK, 10, -1, 15 * MIN - 90 * SEC, 0},
        {NF_CRAWL_FAILED, 3600, HOUR, 0, 4},
        {NF_CRAWL_FAILED_PERMANENT, 100000, 24 * HOUR, 0, 5},
        {NF_CRAWL_CANCELLED, -1, 1 * MIN, 0, 3},
        {NF_CRAWL_CANCELLED, 300, 5 * MIN, 0, 3},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        nf_crawl_schedule_t s;
        nf_crawl_init(&p, &s, 0, T0, &test_rng);
        for (int k = 0; k < 3; k++)
            nf_crawl_on_result(&p, &s, NF_CRAWL_FAILED, -1, T0, &test_rng);
        const int64_t now = T0 + 5 * HOUR;
        nf_crawl_on_result(&p, &s, rows[i].outcome, rows[i].retry_after_s, now, &test_rng);
        int64_t d = s.next_crawl_at_ms - now;
        if (rows[i].want_ms >= 0 ? d != rows[i].want_ms : d < rows[i].min_ms) {
            fprintf(stderr, "row %zu: delay %lld\n", i, (long long)d);
            NF_CHECK(0);
        }
        NF_CHECK_EQ(s.failures, rows[i].failures_after);
        NF_CHECK_EQ(s.status, NF_CRAWL_ACTIVE);
    }
}

static void test_validators(void)
{
    nf_crawl_policy_t p = nf_crawl_policy_default();
    nf_crawl_schedule_t s;
    nf_crawl_init(&p, &s, 0, T0, &test_rng);

    char long_etag[NF_CRAWL_ETAG_MAX + 8];
    memset(long_etag, 'e', sizeof long_etag);
    long_etag[NF_CRAWL_ETAG_MAX - 1] = '\0'; /* 191 chars: fits */
    nf_crawl_set_validators(&s, long_etag, "Wed, 21 Oct 2015 07:28:00 GMT");
    NF_CHECK_EQ(strlen(s.etag), NF_CRAWL_ETAG_MAX - 1);
    NF_CHECK_STR(s.last_modified, "Wed, 21 Oct 2015 07:28:00 GMT");
    long_etag[NF_CRAWL_ETAG_MAX - 1] = 'e';
    long_etag[NF_CRAWL_ETAG_MAX] = '\0'; /* 192 chars: would be truncated → not kept */
    nf_crawl_set_validators(&s, long_etag, "a date far longer than any real Last-Modified value");
    NF_CHECK_STR(s.etag, "");
    NF_CHECK_STR(s.last_modified, "");
    nf_crawl_set_validators(&s, "\"x\"\r\nX-Evil: 1", "Wed\t21");
    NF_CHECK_STR(s.etag, "");
    NF_CHECK_STR(s.last_modified, "");
    nf_crawl_set_validators(&s, "W/\"abc\"", NULL);
    NF_CHECK_STR(s.etag, "W/\"abc\"");
    NF_CHECK_STR(s.last_modified, "");

    /* the whole result path */
    static nf_fetch_result_t r; /* 1.8 KB: off the stack */
    memset(&r, 0, sizeof r);
    r.retry_after_s = -1;
    r.http_status = 200;
    strcpy(r.etag, "\"v1\"");
    strcpy(r.last_modified, "Mon, 01 Jan 2024 00:00:00 GMT");
    NF_CHECK_EQ(nf_crawl_on_fetch(&p, &s, &r, T0, &test_rng), NF_CRAWL_OK);
    NF_CHECK_STR(s.etag, "\"v1\"");
    NF_CHECK_STR(s.last_modified, "Mon, 01 Jan 2024 00:00:00 GMT");

    r.http_status = 304; /* 304 repeating nothing: keep ours */
    r.not_modified = true;
    r.etag[0] = r.last_modified[0] = '\0';
    NF_CHECK_EQ(nf_crawl_on_fetch(&p, &s, &r, T0, &test_rng), NF_CRAWL_NOT_MODIFIED);
    NF_CHECK_STR(s.etag, "\"v1\"");
    NF_CHECK_STR(s.last_modified, "Mon, 01 Jan 2024 00:00:00 GMT");
    strcpy(r.etag, "\"v2\""); /* 304 renewing the ETag */
    nf_crawl_on_fetch(&p, &s, &r, T0, &test_rng);
    NF_CHECK_STR(s.etag, "\"v2\"");
    NF_CHECK_STR(s.last_modified, "Mon, 01 Jan 2024 00:00:00 GMT");

    r.http_status = 500; /* failures keep the validators */
    r.not_modified = false;
    strcpy(r.etag, "\"err\"");
    NF_CHECK_EQ(nf_crawl_on_fetch(&p, &s, &r, T0, &test_rng), NF_CRAWL_FAILED);
    NF_CHECK_STR(s.etag, "\"v2\"");
    NF_CHECK_EQ(s.failures, 1);

    r.http_status = 503; /* throttled with Retry-After, through on_fetch */
    r.retry_after_s = 600;
    NF_CHECK_EQ(nf_crawl_on_fetch(&p, &s, &r, T0, &test_rng), NF_CRAWL_THROTTLED);
    NF_CHECK_EQ(s.next_crawl_at_ms, T0 + 10 * MIN);
    NF_CHECK_EQ(s.failures, 1);

    r.http_status = 200; /* a 200 without validators drops ours: they describe an old body */
    r.retry_after_s = -1;
    r.etag[0] = '\0';
    nf_crawl_on_fetch(&p, &s, &r, T0, &test_rng);
    NF_CHECK_STR(s.etag, "");
    NF_CHECK_STR(s.last_modified, "");
    NF_CHECK_EQ(s.failures, 0);
}

static void test_defer_pause_revive(void)
{
    nf_crawl_policy_t p = nf_crawl_policy_default();
    nf_crawl_schedule_t s;
    nf_crawl_init(&p, &s, 0, T0, &test_rng);
    nf_crawl_on_result(&p, &s, NF_CRAWL_FAILED, -1, T0, &test_rng);
    const int64_t now = s.next_crawl_at_ms;
    NF_CHECK(nf_crawl_due(&s, now));
    NF_CHECK(!nf_crawl_due(&s, now - 1));

    /* a breaker-skipped crawl: moved, nothing counted */
    nf_crawl_defer(&s, now + 45 * SEC, now);
    NF_CHECK_EQ(s.next_crawl_at_ms, now + 45 * SEC);
    NF_CHECK_EQ(s.failures, 1);
    NF_CHECK_EQ(s.status, NF_CRAWL_ACTIVE);
    nf_crawl_defer(&s, now - 5, now); /* a stale hint still moves it past now */
    NF_CHECK_EQ(s.next_crawl_at_ms, now + 1);
    nf_crawl_defer(&s, now, now);
    NF_CHECK_EQ(s.next_crawl_at_ms, now + 1);
    NF_CHECK(!nf_crawl_due(&s, now));

    nf_crawl_pause(&s);
    NF_CHECK_EQ(s.status, NF_CRAWL_PAUSED);
    NF_CHECK(!nf_crawl_due(&s, now + 365 * 24 * HOUR));
    /* a result arriving for a paused source (in flight when paused) keeps it paused */
    for (int i = 0; i < 20; i++)
        nf_crawl_on_result(&p, &s, NF_CRAWL_FAILED, -1, now, &test_rng);
    NF_CHECK_EQ(s.status, NF_CRAWL_PAUSED);
    nf_crawl_revive(&s, now, &test_rng);
    NF_CHECK_EQ(s.status, NF_CRAWL_ACTIVE);
    NF_CHECK_EQ(s.failures, 0);
    NF_CHECK(s.next_crawl_at_ms >= now && s.next_crawl_at_ms < now + 15 * MIN);
    int64_t next = s.next_crawl_at_ms;
    nf_crawl_revive(&s, now + 1, &test_rng); /* ACTIVE: no-op */
    NF_CHECK_EQ(s.next_crawl_at_ms, next);
}

/* ---- schedule: a simulated crawl loop against a model ---- */

typedef struct {
    nf_crawl_schedule_t s;
    int64_t scheduled_at; /* the next_crawl_at the last update produced */
    uint32_t points;      /* model: failure points */
} sim_source_t;

static nf_crawl_outcome_t random_outcome(void)
{
    static const nf_crawl_outcome_t mix[] = {
        NF_CRAWL_OK,     NF_CRAWL_OK,        NF_CRAWL_NOT_MODIFIED,     NF_CRAWL_NOT_MODIFIED,
        NF_CRAWL_FAILED, NF_CRAWL_FAILED,    NF_CRAWL_FAILED,           NF_CRAWL_FAILED,
        NF_CRAWL_FAILED, NF_CRAWL_THROTTLED, NF_CRAWL_FAILED_PERMANENT, NF_CRAWL_CANCELLED,
    };
    return mix[rnd(sizeof mix / sizeof mix[0])];
}

static long sim_crawl(const nf_crawl_policy_t *p, long want_fetches)
{
    enum { NS = 48 };
    static sim_source_t src[NS];
    int64_t now = T0;
    for (int i = 0; i < NS; i++) {
        /* intervals in and out of range */
        int64_t iv_s = i % 4 == 0 ? 0 : i % 4 == 1 ? rnd(400) : i % 4 == 2 ? rnd(100000) : 3600;
        nf_crawl_init(p, &src[i].s, iv_s, now, &test_rng);
        src[i].scheduled_at = src[i].s.next_crawl_at_ms;
        src[i].points = 0;
        NF_CHECK(src[i].s.interval_ms >= p->interval_floor_ms &&
                 src[i].s.interval_ms <= p->interval_ceiling_ms);
    }
    long fetches = 0, deaths = 0, bad = 0;
    const int64_t j = p->jitter_permille;
    while (fetches < want_fetches && bad < 20) {
        /* advance the fake clock: small steps, or straight to the earliest due source */
        if (rnd(2)) {
            now += rnd(3 * MIN);
        } else {
            int64_t earliest = INT64_MAX;
            for (int i = 0; i < NS; i++)
                if (src[i].s.status == NF_CRAWL_ACTIVE)
                    earliest = min64(earliest, src[i].s.next_crawl_at_ms);
            if (earliest != INT64_MAX && earliest > now)
                now = earliest + rnd(2);
        }
        for (int i = 0; i < NS; i++) {
            sim_source_t *x = &src[i];
            nf_crawl_schedule_t *s = &x->s;
            if (s->status != NF_CRAWL_ACTIVE) {
                if (rnd(50) == 0) {
                    nf_crawl_revive(s, now, &test_rng);
                    x->points = 0;
                    x->scheduled_at = s->next_crawl_at_ms;
                    bad += !(s->next_crawl_at_ms >= now &&
                             s->next_crawl_at_ms < now + (int64_t)s->interval_ms);
                }
                continue;
            }
            if (rnd(2000) == 0) {
                nf_crawl_pause(s);
                continue;
            }
            if (!nf_crawl_due(s, now))
                continue;
            /* never fetched before the time the last update set */
            if (now < x->scheduled_at) {
                fprintf(stderr, "source %d fetched %lld ms early\n", i,
                        (long long)(x->scheduled_at - now));
                bad++;
            }
            fetches++;
            nf_crawl_outcome_t o = random_outcome();
            int64_t ra = rnd(3) == 0 ? rnd(4) == 0 ? rnd(200000) : rnd(1000) : -1;
            nf_crawl_on_result(p, s, o, ra, now, &test_rng);
            int64_t d = s->next_crawl_at_ms - now;
            x->scheduled_at = s->next_crawl_at_ms;
            int64_t ra_ms = ra < 0 ? -1 : min64(ra * SEC, p->interval_ceiling_ms);

            /* model */
            int64_t lo, hi;
            if (o == NF_CRAWL_OK || o == NF_CRAWL_NOT_MODIFIED) {
                x->points = 0;
                int64_t iv = s->interval_ms;
                lo = max64(iv - iv * j / 1000, p->interval_floor_ms);
                hi = min64(iv + iv * j / 1000, p->interval_ceiling_ms);
            } else if (o == NF_CRAWL_CANCELLED || (o == NF_CRAWL_THROTTLED && ra >= 0)) {
                lo = hi = o == NF_CRAWL_CANCELLED ? NF_CRAWL_MIN_DELAY_MS
                                                  : max64(ra_ms, NF_CRAWL_MIN_DELAY_MS);
            } else {
                x->points += o == NF_CRAWL_FAILED_PERMANENT ? p->permanent_failure_weight : 1;
                x->points = (uint32_t)min64(x->points, p->dead_after_failures);
                int64_t w = p->backoff_base_ms;
                for (uint32_t k = 1; k < x->points && w < p->backoff_cap_ms; k++)
                    w *= 2;
                w = min64(w, p->backoff_cap_ms);
                lo = max64(w - w * j / 1000, p->backoff_base_ms);
                hi = min64(w + w * j / 1000, p->backoff_cap_ms);
            }
            if (ra_ms >= 0) {
                lo = max64(lo, ra_ms);
                hi = max64(hi, ra_ms);
            }
            bool dead = x->points >= p->dead_after_failures;
            deaths += dead;
            if (!(d >= lo && d <= hi && d >= NF_CRAWL_MIN_DELAY_MS && d <= p->interval_ceiling_ms &&
                  s->next_crawl_at_ms > now && s->failures == x->points &&
                  s->status == (dead ? NF_CRAWL_DEAD : NF_CRAWL_ACTIVE) &&
                  !nf_crawl_due(s, s->next_crawl_at_ms - 1))) {
                fprintf(stderr,
                        "step %ld source %d %s ra=%lld: delay %lld not in [%lld, %lld], "
                        "failures %u (model %u), status %s\n",
                        fetches, i, nf_crawl_outcome_name(o), (long long)ra, (long long)d,
                        (long long)lo, (long long)hi, s->failures, x->points,
                        nf_crawl_status_name((nf_crawl_status_t)s->status));
                bad++;
            }
        }
    }
    NF_CHECK_EQ(bad, 0);
    NF_CHECK(fetches >= want_fetches);
    if (p->dead_after_failures <= 10)
        NF_CHECK(deaths > 0); /* the mix does reach DEAD */
    return fetches;
}

static void test_property_crawl_loop(void)
{
    nf_crawl_policy_t p = nf_crawl_policy_default();
    long n = sim_crawl(&p, 200000);

    /* a tighter, odder policy: fast death, no weight, big jitter, floor = ceiling */
    nf_crawl_policy_t q = nf_crawl_policy_default();
    q.dead_after_failures = 3;
    q.permanent_failure_weight = 1;
    q.jitter_permille = 500;
    q.interval_floor_ms = q.interval_default_ms = q.interval_ceiling_ms = 2 * HOUR;
    q.backoff_cap_ms = 2 * HOUR;
    NF_REQUIRE(nf_crawl_policy_validate(&q) == NULL);
    n += sim_crawl(&q, 100000);

    nf_crawl_policy_t r = nf_crawl_policy_default();
    r.jitter_permille = 0;
    r.dead_after_failures = 1000;
    n += sim_crawl(&r, 100000);
    fprintf(stderr, "crawl loop: %ld simulated fetches\n", n);
}

/* ---- host: politeness ---- */

static void test_host_concurrency_and_spacing(void)
{
    nf_crawl_policy_t p = nf_crawl_policy_default(); /* 2 concurrent, 1000 ms apart */
    nf_host_t h;
    nf_host_init(&h, &p);
    int64_t at = 0;
    NF_CHECK(nf_host_may_start(&h, T0, &at));
    NF_CHECK(!nf_host_started(&h, T0));
    nf_host_sent(&h, T0, true);
    NF_CHECK(!nf_host_may_start(&h, T0 + 500, &at)); /* spacing */
    NF_CHECK_EQ(at, T0 + 1000);
    NF_CHECK(!nf_host_may_start(&h, T0 + 999, &at));
    NF_CHECK_EQ(at, T0 + 1000);
    NF_CHECK(nf_host_may_start(&h, T0 + 1000, &at));
    nf_host_started(&h, T0 + 1000);
    nf_host_sent(&h, T0 + 1000, true);
    NF_CHECK_EQ(h.in_flight, 2);
    NF_CHECK(!nf_host_may_start(&h, T0 + 5000, &at)); /* full */
    NF_CHECK_EQ(at, T0 + 6000);
    nf_host_finished(&h, T0 + 5000, false, true);
    NF_CHECK(nf_host_may_start(&h, T0 + 5000, &at));
    nf_host_started(&h, T0 + 5000);
    nf_host_sent(&h, T0 + 5000, true); /* never went out: counted as sent when it ended */
    nf_host_abandoned(&h, false);      /* cancelled: the slot is free again */
    NF_CHECK_EQ(h.in_flight, 1);

    /* The spacing counts from when a request goes out: one started at T0 + 10 s but written
     * 300 ms late (a busy event loop) holds the next back until 1 s after it went out, and
     * nothing starts while it has not gone out at all. */
    nf_host_finished(&h, T0 + 10000, false, true);
    NF_CHECK(nf_host_may_start(&h, T0 + 10000, &at));
    nf_host_started(&h, T0 + 10000);
    NF_CHECK(!nf_host_may_start(&h, T0 + 10200, &at)); /* not sent yet: unknown */
    NF_CHECK(at > T0 + 10200);
    nf_host_sent(&h, T0 + 10300, true);
    NF_CHECK(!nf_host_may_start(&h, T0 + 11000, &at)); /* 1 s after the start, 0.7 after out */
    NF_CHECK_EQ(at, T0 + 11300);
    NF_CHECK(nf_host_may_start(&h, T0 + 11300, &at));
    nf_host_sent(&h, T0 + 11400, false); /* a redirect of the same transfer goes out */
    NF_CHECK(!nf_host_may_start(&h, T0 + 11500, &at));
    NF_CHECK_EQ(at, T0 + 12400);
    nf_host_finished(&h, T0 + 11500, false, true);

    /* A host this process takes over: whoever had it may have sent a request just now. */
    nf_host_init(&h, &p);
    nf_host_adopted(&h, T0);
    NF_CHECK(!nf_host_may_start(&h, T0 + 999, &at));
    NF_CHECK_EQ(at, T0 + 1000);
    NF_CHECK(nf_host_may_start(&h, T0 + 1000, &at));
    nf_host_adopted(&h, T0 - 5000); /* never moves the last request back */
    NF_CHECK(nf_host_may_start(&h, T0 + 1000, &at));

    /* no spacing: only the concurrency limit, and the busy hint is never "now" */
    p.host_spacing_ms = 0;
    p.host_max_concurrent = 3;
    nf_host_init(&h, &p);
    for (int i = 0; i < 3; i++) { /* without spacing, requests not sent yet hold nothing back */
        NF_CHECK(nf_host_may_start(&h, T0, &at));
        nf_host_started(&h, T0);
    }
    NF_CHECK(!nf_host_may_start(&h, T0, &at));
    NF_CHECK_EQ(at, T0 + NF_HOST_BUSY_RECHECK_MS);
}

/* ---- host: circuit breaker ---- */

/* Starts a transfer whose request goes out at once (nf_host_sent), as the crawler reports it. */
static bool host_started(nf_host_t *h, int64_t now)
{
    bool probe = nf_host_started(h, now);
    nf_host_sent(h, now, true);
    return probe;
}

static void host_fail(nf_host_t *h, int64_t now)
{
    int64_t at;
    NF_CHECK(nf_host_may_start(h, now, &at));
    bool probe = host_started(h, now);
    nf_host_finished(h, now, probe, false);
}

static void host_ok(nf_host_t *h, int64_t now)
{
    int64_t at;
    NF_CHECK(nf_host_may_start(h, now, &at));
    bool probe = host_started(h, now);
    nf_host_finished(h, now, probe, true);
}

static void test_breaker_window(void)
{
    nf_crawl_policy_t p = nf_crawl_policy_default();
    p.host_spacing_ms = 0;
    nf_host_t h;
    int64_t at;

    /* 5 failures, the 5th exactly 60 s after the 1st: opens on the 5th, not before */
    nf_host_init(&h, &p);
    for (int i = 0; i < 5; i++) {
        NF_CHECK_EQ(h.state, NF_BREAKER_CLOSED);
        host_fail(&h, T0 + i * 15 * SEC);
    }
    NF_CHECK_EQ(h.state, NF_BREAKER_OPEN);
    NF_CHECK_EQ(h.opened, 1);
    NF_CHECK(!nf_host_may_start(&h, T0 + 60 * SEC, &at));
    NF_CHECK_EQ(at, T0 + 120 * SEC); /* reopen time */
    NF_CHECK(!nf_host_may_start(&h, T0 + 120 * SEC - 1, &at));
    NF_CHECK_EQ(at, T0 + 120 * SEC);

    /* 5 failures over 60.001 s: stays closed; the window slides, so a 6th 46 s later opens */
    nf_host_init(&h, &p);
    for (int i = 0; i < 4; i++)
        host_fail(&h, T0 + i * 15 * SEC);
    host_fail(&h, T0 + 60 * SEC + 1);
    NF_CHECK_EQ(h.state, NF_BREAKER_CLOSED);
    host_fail(&h, T0 + 61 * SEC);
    NF_CHECK_EQ(h.state, NF_BREAKER_OPEN);

    /* failures spaced 20 s forever: 5 of them always span 80 s, never opens */
    nf_host_init(&h, &p);
    for (int i = 0; i < 1000; i++)
        host_fail(&h, T0 + i * 20 * SEC);
    NF_CHECK_EQ(h.state, NF_BREAKER_CLOSED);
    NF_CHECK_EQ(h.opened, 0);

    /* a success clears the run: 4 + ok + 4 within a second stays closed */
    nf_host_init(&h, &p);
    for (int i = 0; i < 4; i++)
        host_fail(&h, T0 + i);
    host_ok(&h, T0 + 5);
    for (int i = 0; i < 4; i++)
        host_fail(&h, T0 + 10 + i);
    NF_CHECK_EQ(h.state, NF_BREAKER_CLOSED);
    host_fail(&h, T0 + 20);
    NF_CHECK_EQ(h.state, NF_BREAKER_OPEN);

    /* breaker off */
    p.breaker_failures = 0;
    nf_host_init(&h, &p);
    for (int i = 0; i < 100; i++)
        host_fail(&h, T0 + i);
    NF_CHECK_EQ(h.state, NF_BREAKER_CLOSED);
}

static void test_breaker_half_open_probe(void)
{
    nf_crawl_policy_t p = nf_crawl_policy_default();
    p.host_spacing_ms = 0;
    p.host_max_concurrent = 4; /* room for two stale requests, the failures and the probe */
    nf_host_t h;
    nf_host_init(&h, &p);
    int64_t at, now = T0;

    /* two requests started before the breaker opens; they finish late */
    for (int i = 0; i < 2; i++) {
        NF_CHECK(nf_host_may_start(&h, now, &at));
        NF_CHECK(!host_started(&h, now));
    }
    for (int i = 0; i < 5; i++)
        host_fail(&h, now + i);
    NF_CHECK_EQ(h.state, NF_BREAKER_OPEN);
    const int64_t opened_at = now + 4;
    nf_host_finished(&h, opened_at + 10, false, true); /* stale success while open: ignored */
    NF_CHECK_EQ(h.state, NF_BREAKER_OPEN);

    /* re-opening doubles up to the cap: 60 s → 120 → 240 → 480 → 600 → 600 */
    static const int64_t open_s[] = {60, 120, 240, 480, 600, 600};
    int64_t t = opened_at;
    for (size_t k = 0; k < sizeof open_s / sizeof open_s[0]; k++) {
        NF_CHECK(!nf_host_may_start(&h, t + open_s[k] * SEC - 1, &at));
        NF_CHECK_EQ(at, t + open_s[k] * SEC);
        NF_CHECK_EQ(h.state, NF_BREAKER_OPEN);
        t += open_s[k] * SEC;
        NF_CHECK(nf_host_may_start(&h, t, &at)); /* half-open */
        NF_CHECK_EQ(h.state, NF_BREAKER_HALF_OPEN);
        NF_CHECK_EQ(h.half_opened, k + 1);
        NF_CHECK(host_started(&h, t));            /* the probe */
        NF_CHECK(!nf_host_may_start(&h, t, &at)); /* exactly one */
        NF_CHECK(at > t);
        NF_CHECK(!nf_host_may_start(&h, t + 10 * SEC, &at));
        if (k == 0) { /* the other stale request fails during half-open: not the probe */
            nf_host_finished(&h, t + 5 * SEC, false, false);
            NF_CHECK_EQ(h.state, NF_BREAKER_HALF_OPEN);
        }
        t += 10 * SEC;
        nf_host_finished(&h, t, true, false); /* the probe fails */
        NF_CHECK_EQ(h.state, NF_BREAKER_OPEN);
        NF_CHECK_EQ(h.opened, k + 2);
        NF_CHECK_EQ(h.closed, 0);
    }
    /* an abandoned (cancelled) probe lets another one go */
    t += 600 * SEC;
    NF_CHECK(nf_host_may_start(&h, t, &at));
    NF_CHECK(host_started(&h, t));
    nf_host_abandoned(&h, true);
    NF_CHECK_EQ(h.state, NF_BREAKER_HALF_OPEN);
    NF_CHECK(nf_host_may_start(&h, t, &at));
    NF_CHECK(host_started(&h, t));
    nf_host_finished(&h, t + 1, true, true); /* the probe succeeds: closed */
    NF_CHECK_EQ(h.state, NF_BREAKER_CLOSED);
    NF_CHECK_EQ(h.closed, 1);
    NF_CHECK_EQ(h.in_flight, 0);
    NF_CHECK(nf_host_may_start(&h, t + 1, &at)); /* closed: full concurrency again */
    NF_CHECK(!host_started(&h, t + 1));
    NF_CHECK(nf_host_may_start(&h, t + 1, &at));
    nf_host_abandoned(&h, false);
    /* closing resets the doubling: the next opening lasts 60 s again */
    for (int i = 0; i < 5; i++)
        host_fail(&h, t + 100 + i);
    NF_CHECK(!nf_host_may_start(&h, t + 104, &at));
    NF_CHECK_EQ(at, t + 104 + 60 * SEC);
}

/* Random starts, finishes and clock jumps against a reference model of the breaker. */
/* A request goes out at now: what the host sees must be host_spacing_ms apart. */
static void host_goes_out(nf_host_t *h, int64_t now, int64_t *last_sent, long *bad)
{
    if (*last_sent != INT64_MIN && now - *last_sent < h->policy->host_spacing_ms) {
        (*bad)++;
        fprintf(stderr, "requests went out %lld ms apart\n", (long long)(now - *last_sent));
    }
    nf_host_sent(h, now, true);
    *last_sent = now;
}

static void test_property_host(void)
{
    nf_crawl_policy_t p = nf_crawl_policy_default();
    p.host_max_concurrent = 3;
    p.host_spacing_ms = 700;
    nf_host_t h;
    nf_host_init(&h, &p);
    enum { MAXQ = 8 };
    struct {
        bool probe, sent;
    } q[MAXQ];
    int nq = 0, probes_in_flight = 0, max_seen = 0;
    int64_t now = T0, last_start = INT64_MIN, last_sent = INT64_MIN;
    long late_sends = 0;
    /* model: failure times of the current closed run (consecutive, non-probe) */
    int64_t run[4096];
    int nrun = 0;
    long bad = 0, starts = 0, opens = 0, closes = 0, first_opens = 0, probe_fail = 0;
    for (long step = 0; step < 300000 && bad < 20; step++) {
        switch (rnd(8)) {
        case 0:
            now += rnd(50);
            break;
        case 1:
            now += rnd(20 * SEC);
            break;
        case 2:
            now += rnd(15 * MIN);
            break;
        default:
            break;
        }
        if (rnd(2) == 0) { /* try to start */
            int64_t at;
            uint8_t before = h.state;
            int64_t until = h.open_until_ms;
            bool ok = nf_host_may_start(&h, now, &at);
            if (before == NF_BREAKER_OPEN && now < until && ok)
                bad++, fprintf(stderr, "started while open\n");
            if (!ok && at <= now)
                bad++, fprintf(stderr, "retry_at %lld not after now\n", (long long)(at - now));
            if (ok) {
                if (last_start != INT64_MIN && now - last_start < p.host_spacing_ms)
                    bad++, fprintf(stderr, "spacing %lld\n", (long long)(now - last_start));
                bool probe = nf_host_started(&h, now);
                last_start = now;
                starts++;
                q[nq].sent = false;
                q[nq++].probe = probe;
                probes_in_flight += probe;
                if (nq > (int)p.host_max_concurrent || probes_in_flight > 1)
                    bad++, fprintf(stderr, "in flight %d, probes %d\n", nq, probes_in_flight);
                if (probe && before == NF_BREAKER_CLOSED)
                    bad++, fprintf(stderr, "probe while closed\n");
                max_seen = nq > max_seen ? nq : max_seen;
            }
        } else if (nq > 0 && rnd(3) == 0) { /* one goes out, maybe long after it started */
            int i = (int)rnd(nq);
            if (!q[i].sent) {
                host_goes_out(&h, now, &last_sent, &bad);
                q[i].sent = true;
                late_sends += now > last_start;
            }
        } else if (nq > 0) { /* finish a random one (the actor: not out yet = out now) */
            int i = (int)rnd(nq);
            if (!q[i].sent)
                host_goes_out(&h, now, &last_sent, &bad);
            bool probe = q[i].probe, success = rnd(3) == 0;
            q[i] = q[--nq];
            probes_in_flight -= probe;
            uint8_t before = h.state;
            if (rnd(50) == 0) {
                nf_host_abandoned(&h, probe);
                continue;
            }
            nf_host_finished(&h, now, probe, success);
            bool model_opens = false;
            if (before == NF_BREAKER_CLOSED) {
                if (success) {
                    nrun = 0;
                } else {
                    run[nrun++] = now;
                    int k = (int)p.breaker_failures;
                    model_opens = nrun >= k && now - run[nrun - k] <= p.breaker_window_ms;
                    if (model_opens) {
                        nrun = 0;
                    } else if (nrun == 4096) { /* only the last k matter */
                        memmove(run, run + nrun - k, (size_t)k * sizeof run[0]);
                        nrun = k;
                    }
                }
                first_opens += model_opens;
            } else if (probe) {
                model_opens = !success;
                probe_fail += !success;
                closes += success;
                if (success)
                    nrun = 0;
            }
            bool opened_now = before != NF_BREAKER_OPEN && h.state == NF_BREAKER_OPEN;
            opens += opened_now;
            if (opened_now != model_opens)
                bad++, fprintf(stderr, "step %ld: breaker opened=%d, model %d\n", step, opened_now,
                               model_opens);
            if (before != NF_BREAKER_CLOSED && !probe && h.state != before)
                bad++, fprintf(stderr, "a non-probe result moved the breaker\n");
        }
        if (h.in_flight != nq)
            bad++, fprintf(stderr, "in_flight %u, model %d\n", h.in_flight, nq);
    }
    NF_CHECK_EQ(bad, 0);
    NF_CHECK_EQ(h.opened, opens);
    NF_CHECK_EQ(h.opened, first_opens + probe_fail);
    NF_CHECK_EQ(h.closed, closes);
    NF_CHECK_EQ(h.half_opened, closes + probe_fail + (h.state == NF_BREAKER_HALF_OPEN));
    NF_CHECK_EQ(max_seen, p.host_max_concurrent);
    NF_CHECK(first_opens > 10 && closes > 10 && probe_fail > 10);
    NF_CHECK(late_sends > 1000); /* the property was tried with sends after later starts */
    fprintf(stderr, "host: %ld starts, %ld opens (%ld on a failure run), %ld closes\n", starts,
            opens, first_opens, closes);
}

/* Issue 15 item 8: one warning per change of health, then at most one per repeat period with
 * the number suppressed; recovery at info. A fake clock: a failure every minute for an hour. */
static void test_failure_log_policy(void)
{
    nf_crawl_failure_log_t l = {0};
    uint32_t sup = 99;
    const int64_t min = 60000, t0 = 1700000000000ll;
    const nf_crawl_health_t OK = NF_CRAWL_HEALTH_OK, BO = NF_CRAWL_HEALTH_BACKOFF,
                            DEAD = NF_CRAWL_HEALTH_DEAD;
    NF_CHECK_EQ(nf_crawl_failure_log(&l, OK, OK, false, t0, &sup), NF_CRAWL_LOG_QUIET);
    NF_CHECK_EQ(nf_crawl_failure_log(&l, OK, BO, true, t0, &sup), NF_CRAWL_LOG_WARN);
    NF_CHECK_EQ(sup, 0);
    int warns = 0, suppressed = 0;
    uint32_t reported = 0;
    for (int i = 1; i <= 60; i++) {
        nf_crawl_log_t d = nf_crawl_failure_log(&l, BO, BO, true, t0 + i * min, &sup);
        warns += d == NF_CRAWL_LOG_WARN;
        suppressed += d == NF_CRAWL_LOG_SUPPRESSED;
        if (d == NF_CRAWL_LOG_WARN)
            reported += sup;
    }
    /* 60 failures over an hour: a warning every 10 minutes, the 54 others suppressed and
     * reported in those warnings. */
    NF_CHECK_EQ(warns, 60 / (NF_CRAWL_FAILURE_LOG_REPEAT_MS / min));
    NF_CHECK_EQ(suppressed, 60 - warns);
    NF_CHECK_EQ(reported, (uint32_t)suppressed);
    /* A change of health is always logged, even within the period. */
    NF_CHECK_EQ(nf_crawl_failure_log(&l, BO, DEAD, true, t0 + 60 * min + 1, &sup),
                NF_CRAWL_LOG_WARN);
    /* Recovery: info, and the next failure warns at once. */
    NF_CHECK_EQ(nf_crawl_failure_log(&l, DEAD, OK, false, t0 + 61 * min, &sup),
                NF_CRAWL_LOG_RECOVERED);
    NF_CHECK_EQ(nf_crawl_failure_log(&l, OK, OK, false, t0 + 62 * min, &sup), NF_CRAWL_LOG_QUIET);
    NF_CHECK_EQ(nf_crawl_failure_log(&l, OK, BO, true, t0 + 62 * min + 5, &sup), NF_CRAWL_LOG_WARN);
    /* A throttle (not a failure) of a backing-off source says nothing. */
    NF_CHECK_EQ(nf_crawl_failure_log(&l, BO, BO, false, t0 + 63 * min, &sup), NF_CRAWL_LOG_QUIET);
    nf_crawl_schedule_t s = {.status = NF_CRAWL_ACTIVE};
    NF_CHECK_STR(nf_crawl_health_name(nf_crawl_health(&s)), "ok");
    s.failures = 2;
    NF_CHECK_STR(nf_crawl_health_name(nf_crawl_health(&s)), "backoff");
    s.status = NF_CRAWL_DEAD;
    NF_CHECK_STR(nf_crawl_health_name(nf_crawl_health(&s)), "dead");
    /* Issue 37: a host that answered 429/503 with Retry-After is "throttled" (not ok), listed by
     * --failing, until a fetch succeeds; a throttle without Retry-After is a failure. */
    nf_crawl_policy_t p = nf_crawl_policy_default();
    uint64_t rng = 7;
    nf_crawl_schedule_t t;
    nf_crawl_init(&p, &t, 0, t0, &rng);
    nf_crawl_on_result(&p, &t, NF_CRAWL_THROTTLED, 120, t0, &rng);
    NF_CHECK_STR(nf_crawl_health_name(nf_crawl_health(&t)), "throttled");
    NF_CHECK(nf_crawl_health_failing(nf_crawl_health(&t)));
    NF_CHECK_EQ(t.failures, 0);
    NF_CHECK_EQ(t.next_crawl_at_ms, t0 + 120 * 1000);
    nf_crawl_on_result(&p, &t, NF_CRAWL_OK, -1, t0 + 121 * 1000, &rng);
    NF_CHECK_STR(nf_crawl_health_name(nf_crawl_health(&t)), "ok");
    NF_CHECK(!nf_crawl_health_failing(nf_crawl_health(&t)));
    nf_crawl_on_result(&p, &t, NF_CRAWL_THROTTLED, -1, t0 + 200 * 1000, &rng);
    NF_CHECK_STR(nf_crawl_health_name(nf_crawl_health(&t)), "backoff");
}

/* Crawl coverage against its definition, over random times: uncovered exactly when neither the
 * last answer nor the arrival (or resumption) is within twice the interval, never when paused;
 * a source that never answered is uncovered twice its interval after it came, not before. */
static void test_coverage_rule(void)
{
    uint64_t seed = 44;
    for (int i = 0; i < 100000; i++) {
        nf_crawl_schedule_t s = {.interval_ms = (uint32_t)(60000 + nf_test_rand(&seed) % 86400000),
                                 .status = (uint8_t)(nf_test_rand(&seed) % 3)};
        int64_t now = 1800000000000 + (int64_t)(nf_test_rand(&seed) % 1000000000);
        int64_t since = now - (int64_t)(nf_test_rand(&seed) % (4ull * s.interval_ms));
        int64_t ok = nf_test_rand(&seed) % 3
                         ? now - (int64_t)(nf_test_rand(&seed) % (4ull * s.interval_ms))
                         : 0;
        bool fresh = now - since <= 2 * (int64_t)s.interval_ms ||
                     (ok && now - ok <= 2 * (int64_t)s.interval_ms);
        bool want = s.status != NF_CRAWL_PAUSED && !fresh;
        NF_CHECK_EQ(nf_crawl_uncovered(&s, ok, since, now), want);
    }
    nf_crawl_schedule_t s = {.interval_ms = 60000, .status = NF_CRAWL_ACTIVE};
    NF_CHECK(!nf_crawl_uncovered(&s, 0, 1000, 1000 + 120000)); /* never answered: not yet */
    NF_CHECK(nf_crawl_uncovered(&s, 0, 1000, 1000 + 120001));  /* ... now */
    s.status = NF_CRAWL_DEAD;
    NF_CHECK(nf_crawl_uncovered(&s, 5000, 1000, 5000 + 120001)); /* dead: uncovered */
    s.status = NF_CRAWL_PAUSED;
    NF_CHECK(!nf_crawl_uncovered(&s, 0, 1000, 1000 + 999999999));
}

int main(void)
{
    NF_RUN(test_policy_default_and_validate);
    NF_RUN(test_sizes);
    NF_RUN(test_classify_table);
    NF_RUN(test_interval_clamp_table);
    NF_RUN(test_first_crawl_spread_uniform);
    NF_RUN(test_success_jitter_bounds);
    NF_RUN(test_not_modified_is_success_keeping_interval);
    NF_RUN(test_backoff_sequence);
    NF_RUN(test_dead_exactly_after_n);
    NF_RUN(test_permanent_failures_count_double);
    NF_RUN(test_retry_after_table);
    NF_RUN(test_validators);
    NF_RUN(test_defer_pause_revive);
    NF_RUN(test_property_crawl_loop);
    NF_RUN(test_host_concurrency_and_spacing);
    NF_RUN(test_breaker_window);
    NF_RUN(test_breaker_half_open_probe);
    NF_RUN(test_property_host);
    NF_RUN(test_failure_log_policy);
    NF_RUN(test_coverage_rule);
    return nf_test_report();
}
