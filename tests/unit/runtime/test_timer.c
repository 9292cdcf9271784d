/* Tests src/runtime/timer.c against a reference model: random arms, re-arms, cancels and clock
 * jumps (ms to months) on a fake clock; after every advance, the timers fired must be exactly
 * the model's due ones, in (deadline, arm order) order, none early and none lost. */
#include "nf_test.h"
#include "runtime/timer.h"

#include <stdlib.h>

#define MS 1000000ull

typedef struct {
    nf_timer_t t;
    bool armed; /* model */
    uint64_t deadline, period, seq;
} model_timer_t;

static uint64_t fired_log[200000];
static size_t fired_n;

static void on_fire(void *ctx, nf_timer_t *t)
{
    (void)ctx;
    fired_log[fired_n++] = (uint64_t)(uintptr_t)t->arg;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void)
{
    return nf_test_xorshift(&rng);
}

static int cmp_due(const void *a, const void *b)
{
    const model_timer_t *x = *(model_timer_t *const *)a, *y = *(model_timer_t *const *)b;
    if (x->deadline != y->deadline)
        return x->deadline < y->deadline ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static uint64_t random_delay(void)
{
    switch (next_rand() % 6) {
    case 0:
        return next_rand() % (2 * MS); /* same or next tick */
    case 1:
        return next_rand() % (300 * MS); /* level 0/1 */
    case 2:
        return next_rand() % (20000 * MS); /* level 1/2 */
    case 3:
        return next_rand() % (3600000 * MS); /* an hour */
    case 4:
        return next_rand() % (60ull * 86400000 * MS); /* beyond the 49-day span */
    default:
        return (next_rand() % 5) * MS; /* exact ms: many ties */
    }
}

/* Reference: every armed timer whose deadline <= now fires; periodic ones may fire several
 * times in one advance only once (missed periods are skipped), so the model mirrors that. */
static void model_check(model_timer_t *ts, size_t n, uint64_t now, nf_wheel_t *w)
{
    static model_timer_t *due[200000];
    size_t nd = 0;
    for (size_t i = 0; i < n; i++)
        /* The wheel's rule: due at tick ceil(deadline), processed once floor(now) reaches it. */
        if (ts[i].armed && (ts[i].deadline + MS - 1) / MS <= now / MS)
            due[nd++] = &ts[i];
    qsort(due, nd, sizeof due[0], cmp_due);
    fired_n = 0;
    nf_wheel_advance(w, now, on_fire, NULL);
    NF_CHECK_EQ(fired_n, nd);
    size_t m = fired_n < nd ? fired_n : nd;
    for (size_t i = 0; i < m; i++) {
        if (fired_log[i] != (uint64_t)(due[i] - ts)) {
            fprintf(stderr, "order differs at %zu: fired %llu, model %zu\n", i,
                    (unsigned long long)fired_log[i], (size_t)(due[i] - ts));
            nf_test_failed_checks++;
            break;
        }
    }
    for (size_t i = 0; i < nd; i++) {
        model_timer_t *x = due[i];
        if (x->period) {
            uint64_t missed = (now - x->deadline) / x->period + 1;
            x->deadline += missed * x->period;
            NF_CHECK(x->t.deadline_ns == x->deadline);
        } else {
            x->armed = false;
            NF_CHECK(!x->t.armed);
        }
    }
}

static void test_wheel_matches_model(void)
{
    enum { N = 2000 };
    static model_timer_t ts[N];
    nf_wheel_t w;
    uint64_t now = 1700000000123ull * MS / 1000; /* arbitrary, not tick aligned */
    nf_wheel_init(&w, now);
    uint64_t seq = 0;
    for (size_t i = 0; i < N; i++) {
        nf_timer_init(&ts[i].t, NULL, (void *)(uintptr_t)i);
        ts[i].armed = false;
    }
    for (int step = 0; step < 200000; step++) {
        unsigned op = next_rand() % 10;
        model_timer_t *x = &ts[next_rand() % N];
        if (op < 5) {
            x->deadline = now + random_delay();
            x->period = (next_rand() % 8 == 0) ? (1 + next_rand() % 5000) * MS : 0;
            nf_wheel_arm(&w, &x->t, x->deadline, x->period);
            x->armed = true;
            x->seq = seq++;
        } else if (op < 6) {
            nf_wheel_cancel(&w, &x->t);
            x->armed = false;
        } else {
            uint64_t jump;
            switch (next_rand() % 4) {
            case 0:
                jump = next_rand() % MS;
                break;
            case 1:
                jump = next_rand() % (50 * MS);
                break;
            case 2:
                jump = next_rand() % (5000 * MS);
                break;
            default:
                jump = next_rand() % (3ull * 86400000 * MS);
                break;
            }
            now += jump;
            model_check(ts, N, now, &w);
            /* The periodic re-arm re-sequences the timer: mirror the wheel's seq. */
            for (size_t i = 0; i < N; i++)
                if (ts[i].armed)
                    ts[i].seq = ts[i].t.seq;
            seq = w.seq;
        }
        size_t armed = 0;
        for (size_t i = 0; i < N; i++)
            armed += ts[i].armed;
        if (armed != w.count) {
            NF_CHECK_EQ(armed, w.count);
            return;
        }
    }
}

static void test_never_early_and_next_ns(void)
{
    nf_wheel_t w;
    nf_wheel_init(&w, 0);
    nf_timer_t t;
    nf_timer_init(&t, NULL, (void *)(uintptr_t)7);
    NF_CHECK(nf_wheel_next_ns(&w) == UINT64_MAX);
    nf_wheel_arm(&w, &t, 5 * MS + 1, 0); /* due at 5.000001 ms: tick 6 */
    uint64_t next = nf_wheel_next_ns(&w);
    NF_CHECK(next >= 5 * MS + 1 && next <= 6 * MS);
    fired_n = 0;
    nf_wheel_advance(&w, 5 * MS + 999999, on_fire, NULL);
    NF_CHECK_EQ(fired_n, 0);
    nf_wheel_advance(&w, 6 * MS, on_fire, NULL);
    NF_CHECK_EQ(fired_n, 1);
    NF_CHECK(nf_wheel_next_ns(&w) == UINT64_MAX);
}

/* A timer far out: next_ns never asks to sleep past a cascade point, and following its advice
 * step by step fires the timer exactly once, on time. */
static void test_follow_next_ns(void)
{
    nf_wheel_t w;
    nf_wheel_init(&w, 0);
    nf_timer_t t;
    nf_timer_init(&t, NULL, (void *)(uintptr_t)1);
    uint64_t deadline = 987654 * MS + 321;
    nf_wheel_arm(&w, &t, deadline, 0);
    uint64_t now = 0, wakes = 0;
    fired_n = 0;
    while (fired_n == 0 && wakes < 100000) {
        uint64_t next = nf_wheel_next_ns(&w);
        NF_REQUIRE(next != UINT64_MAX);
        NF_REQUIRE(next > now || next == now);
        now = next;
        nf_wheel_advance(&w, now, on_fire, NULL);
        wakes++;
    }
    NF_CHECK_EQ(fired_n, 1);
    NF_CHECK(now >= deadline && now < deadline + MS);
    NF_CHECK(wakes <= 987654 / 256 + 3); /* at most one wake per 256 ms window */
}

static nf_wheel_t *cb_wheel;
static nf_timer_t cb_timers[3];
static void on_fire_edit(void *ctx, nf_timer_t *t)
{
    (void)ctx;
    fired_log[fired_n++] = (uint64_t)(uintptr_t)t->arg;
    if (t == &cb_timers[0]) {
        nf_wheel_cancel(cb_wheel, &cb_timers[1]);    /* same tick, not yet fired */
        nf_wheel_arm(cb_wheel, &cb_timers[0], 0, 0); /* overdue: next advance */
    }
}

static void test_callbacks_edit_the_wheel(void)
{
    nf_wheel_t w;
    cb_wheel = &w;
    nf_wheel_init(&w, 0);
    for (int i = 0; i < 3; i++) {
        nf_timer_init(&cb_timers[i], NULL, (void *)(uintptr_t)i);
        nf_wheel_arm(&w, &cb_timers[i], 10 * MS + (uint64_t)i, 0);
    }
    fired_n = 0;
    nf_wheel_advance(&w, 20 * MS, on_fire_edit, NULL);
    NF_CHECK_EQ(fired_n, 2);
    NF_CHECK_EQ(fired_log[0], 0);
    NF_CHECK_EQ(fired_log[1], 2);
    NF_CHECK(cb_timers[0].armed);
    fired_n = 0;
    nf_wheel_advance(&w, 21 * MS, on_fire_edit, NULL);
    NF_CHECK_EQ(fired_n, 1); /* re-armed itself again: stays armed, no loop */
    nf_wheel_cancel(&w, &cb_timers[0]);
    NF_CHECK_EQ(w.count, 0);
}

int main(void)
{
    NF_RUN(test_never_early_and_next_ns);
    NF_RUN(test_follow_next_ns);
    NF_RUN(test_callbacks_edit_the_wheel);
    NF_RUN(test_wheel_matches_model);
    return nf_test_report();
}
