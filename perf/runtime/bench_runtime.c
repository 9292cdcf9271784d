/* bench_runtime.c — cross-shard message throughput, one-hop latency and timer costs of the
 * runtime (src/runtime/runtime.h); the targets and the measured figures are in perf/README.md.
 *
 * Usage: bench_runtime [throughput|latency|timers|all]... [options]   (--help lists options)
 * Every result is one JSON object per line on stdout, named by its "bench" field; progress and
 * errors go to stderr. Nothing here asserts on timings: the figures are for people to compare.
 *
 * How each figure is taken:
 * - throughput: shard 0 (and, both-ways, shard 1 as well) pumps messages to its peer from an
 *   actor `run` turn until the ring refuses, then waits for `resume` (as real producers do).
 *   Time runs from the first send, read on the sending shard, to the last receive, read on the
 *   receiving shard, both with nf_now_ns(); the main thread sleeps on a semaphore meanwhile.
 *   One-way and both-ways, batched (batch 64) and unbatched (batch 1), plus "spin" runs where
 *   no shard ever sleeps (see tp_variants), to show what sleeping costs a saturated stream.
 * - hop latency: a message is stamped with nf_now_ns() just before nf_send() and the receiver's
 *   handler subtracts the stamp from nf_now_ns(). A hop therefore includes the rest of the
 *   sender's loop iteration (publication happens at its end), the wake-up if the receiver was
 *   asleep, and the receiver's loop up to the handler. Three regimes:
 *     timer_1ms      one message per 1 ms timer tick; both shards sleep in between;
 *     pingpong       the next message leaves when the previous one's ack is back; idle shards
 *                    sleep, so most hops wake a sleeping shard;
 *     pingpong_busy  as pingpong, but each shard keeps a no-op `run` turn scheduled so it never
 *                    sleeps: the ring hop itself, under continuous activity.
 *   Beside them, runtime.platform_wake times the same wake with two plain threads and blocking
 *   eventfds: the machine's floor for waking a sleeping thread, so the hop figures can be
 *   split into "this machine" and "the runtime".
 * - timers, on a shard through nf_runtime_call(): wall time per nf_timer_arm + nf_timer_cancel
 *   pair with 100k other timers live; ns spent in the wheel's advance per fired timer while 100k
 *   timers expire over 1 s (the wheel driven with a simulated 1 ms clock, so nothing sleeps);
 *   the same 100k timers on a real shard, as shard-thread CPU time, against a baseline run (one
 *   periodic 1 ms timer over the same second) that shows what each sleep/wake tick costs on
 *   its own; sizeof(nf_timer_t).
 *
 * Sample arrays are allocated before the runtime starts; the measured paths only store. */
#include "runtime/runtime.h"
#include "runtime/timer.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define MS_NS  1000000ull
#define SEC_NS 1000000000ull

#define TARGET_MSGS_PER_S 5e6
#define TARGET_P99_US     50.0
#define WAIT_LIMIT_S      300 /* a scenario that takes longer is hung: report and exit 1 */

typedef struct {
    bool pin;
    unsigned ring;
    uint64_t messages;     /* throughput: messages delivered per run */
    uint64_t pp_samples;   /* hop latency samples, each ping-pong variant */
    uint64_t tick_samples; /* hop latency samples, timer_1ms variant (one per ms) */
    uint64_t ref_samples;  /* platform reference, spaced (x10 back to back) */
    unsigned live_timers;  /* timers armed while arm+cancel pairs are timed */
    uint64_t timer_ops;    /* arm+cancel pairs */
    unsigned fire_timers;  /* timers fired over fire_window */
    bool run_tp, run_lat, run_timers;
} bench_opts_t;

#define TP_NVARIANTS 6 /* throughput runs, see tp_variants */

/* Key figures for the final summary line; NAN = not measured in this invocation. */
typedef struct {
    double tp[TP_NVARIANTS]; /* per tp_variants entry (first: one-way, batched, as shipped) */
    double p50[3], p99[3];
    double arm_cancel_ns, fire_ns;
} summary_t;

/* ------------------------------------------------------------------ helpers */

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * SEC_NS + (uint64_t)ts.tv_nsec;
}

static uint64_t xorshift64(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* ",key:value" with value printed by fmt, or null when not measured. */
static void put_num(const char *key, double v, const char *fmt)
{
    printf(",\"%s\":", key);
    if (isnan(v))
        fputs("null", stdout);
    else
        printf(fmt, v);
}

static const char *json_bool(bool b)
{
    return b ? "true" : "false";
}

static nf_runtime_t *new_runtime(const bench_opts_t *bo, unsigned shards, unsigned batch)
{
    nf_runtime_opts_t o;
    nf_runtime_opts_default(&o);
    o.shards = shards;
    o.pin = bo->pin;
    o.ring_capacity = bo->ring;
    o.batch = batch;
    char err[256];
    nf_runtime_t *rt = nf_runtime_create(&o, err, sizeof err);
    if (!rt) {
        fprintf(stderr, "bench_runtime: %s\n", err);
        exit(1);
    }
    return rt;
}

static void start_runtime(nf_runtime_t *rt)
{
    int r = nf_runtime_start(rt);
    if (r < 0) {
        fprintf(stderr, "bench_runtime: nf_runtime_start: %s\n", strerror(-r));
        exit(1);
    }
}

/* Waits for `count` posts of s (shards post when a scenario is complete). */
static void wait_done(sem_t *s, unsigned count, const char *what)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += WAIT_LIMIT_S;
    for (unsigned i = 0; i < count; i++) {
        int r;
        while ((r = sem_timedwait(s, &until)) != 0 && errno == EINTR)
            ;
        if (r != 0) {
            fprintf(stderr, "bench_runtime: %s did not complete within %d s\n", what, WAIT_LIMIT_S);
            exit(1);
        }
    }
}

/* Stops and joins the shards; returns the runtime's counters. */
static nf_runtime_stats_t stop_runtime(nf_runtime_t *rt, const char *what)
{
    nf_runtime_request_stop(rt);
    int r = nf_runtime_wait(rt);
    if (r != 0)
        fprintf(stderr, "bench_runtime: %s: runtime did not drain cleanly (%s)\n", what,
                strerror(-r));
    nf_runtime_stats_t st;
    nf_runtime_stats(rt, &st);
    return st;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

typedef struct {
    double p50, p90, p99, p999, max, mean; /* microseconds */
} pcts_t;

/* Sorts v (nanoseconds) and returns nearest-rank percentiles in microseconds. */
static pcts_t percentiles(uint32_t *v, size_t n)
{
    pcts_t p = {NAN, NAN, NAN, NAN, NAN, NAN};
    if (n == 0)
        return p;
    qsort(v, n, sizeof *v, cmp_u32);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    const double q[4] = {0.50, 0.90, 0.99, 0.999};
    double *out[4] = {&p.p50, &p.p90, &p.p99, &p.p999};
    for (int k = 0; k < 4; k++) {
        size_t rank = (size_t)ceil(q[k] * (double)n);
        *out[k] = v[rank ? rank - 1 : 0] / 1e3;
    }
    p.max = v[n - 1] / 1e3;
    p.mean = sum / (double)n / 1e3;
    return p;
}

static void put_pcts(const pcts_t *p)
{
    put_num("p50_us", p->p50, "%.2f");
    put_num("p90_us", p->p90, "%.2f");
    put_num("p99_us", p->p99, "%.2f");
    put_num("p999_us", p->p999, "%.2f");
    put_num("max_us", p->max, "%.2f");
    put_num("mean_us", p->mean, "%.2f");
}

static uint32_t clamp_u32(uint64_t ns)
{
    return ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
}

/* ------------------------------------------------------------------ throughput */

/* The runs, in order. "sleep" is the runtime as it is: a shard with nothing to do sleeps. In
 * "spin" both shards keep a no-op `run` turn scheduled, so neither ever sleeps: the difference
 * between the two is what sleeping and being woken costs a saturated stream. */
typedef struct {
    const char *name; /* summary key */
    unsigned batch;
    bool both_ways, spin;
} tp_variant_t;

static const tp_variant_t tp_variants[TP_NVARIANTS] = {
    {"batched", 64, false, false},          {"unbatched", 1, false, false},
    {"both_ways_batched", 64, true, false}, {"both_ways_unbatched", 1, true, false},
    {"spin_batched", 64, false, true},      {"spin_unbatched", 1, false, true},
};

typedef struct tp_bench tp_bench_t;

typedef struct {
    _Alignas(64) tp_bench_t *b; /* one cache line set per shard: no false sharing */
    unsigned peer;
    bool blocked; /* refused by a full ring, waiting for resume */
    uint64_t to_send, sent;
    uint64_t to_recv, received, errors;
    uint64_t t_first_send, t_last_recv;
} tp_shard_t;

struct tp_bench {
    int actor;
    bool spin;
    sem_t done;
    tp_shard_t sh[2];
};

static int tp_init(nf_shard_t *sh, void *ctx, void **self, char *err, size_t errlen)
{
    tp_bench_t *b = ctx;
    tp_shard_t *s = &b->sh[nf_shard_index(sh)];
    if (s->to_send || b->spin)
        nf_actor_schedule(sh, b->actor);
    *self = s;
    (void)err;
    (void)errlen;
    return 0;
}

/* Sends until the ring refuses (then `resume` reschedules) or a turn's share is done. */
static void tp_run(nf_shard_t *sh, void *self)
{
    tp_shard_t *s = self;
    bool more = s->sent < s->to_send;
    if (more && !s->blocked) {
        if (!s->t_first_send)
            s->t_first_send = nf_now_ns();
        nf_msg_t m = {.actor = (uint16_t)s->b->actor};
        for (unsigned i = 0; i < 4096 && s->sent < s->to_send; i++) {
            m.body.u64[0] = s->sent;
            if (nf_send(sh, s->peer, &m) == -EAGAIN) {
                s->blocked = true;
                break;
            }
            s->sent++;
        }
        more = s->sent < s->to_send;
    }
    if ((more && !s->blocked) || (s->b->spin && !nf_shard_stopping(sh)))
        nf_actor_schedule(sh, s->b->actor);
}

static void tp_resume(nf_shard_t *sh, void *self)
{
    tp_shard_t *s = self;
    s->blocked = false;
    if (s->sent < s->to_send)
        nf_actor_schedule(sh, s->b->actor);
}

static void tp_handle(nf_shard_t *sh, void *self, const nf_msg_t *m)
{
    tp_shard_t *s = self;
    if (m->body.u64[0] != s->received)
        s->errors++; /* per-sender FIFO broken or a message lost */
    if (++s->received == s->to_recv) {
        s->t_last_recv = nf_now_ns();
        sem_post(&s->b->done);
    }
    (void)sh;
}

static const nf_actor_ops_t tp_ops = {
    .name = "bench_tp", .init = tp_init, .handle = tp_handle, .run = tp_run, .resume = tp_resume};

/* Returns messages per second. */
static double run_throughput(const bench_opts_t *bo, const tp_variant_t *v)
{
    static tp_bench_t b; /* static: over-aligned, and never on a shard's stack */
    memset(&b, 0, sizeof b);
    sem_init(&b.done, 0, 0);
    b.spin = v->spin;
    uint64_t per_dir = v->both_ways ? bo->messages / 2 : bo->messages;
    for (unsigned i = 0; i < 2; i++) {
        b.sh[i].b = &b;
        b.sh[i].peer = 1 - i;
    }
    b.sh[0].to_send = per_dir;
    b.sh[1].to_recv = per_dir;
    if (v->both_ways) {
        b.sh[1].to_send = per_dir;
        b.sh[0].to_recv = per_dir;
    }
    nf_runtime_t *rt = new_runtime(bo, 2, v->batch);
    b.actor = nf_runtime_register(rt, &tp_ops, &b);
    start_runtime(rt);
    wait_done(&b.done, v->both_ways ? 2 : 1, "throughput");
    nf_runtime_stats_t st = stop_runtime(rt, "throughput");
    nf_runtime_destroy(rt);
    sem_destroy(&b.done);

    uint64_t t0 = b.sh[0].t_first_send, t1 = b.sh[1].t_last_recv;
    if (v->both_ways) {
        if (b.sh[1].t_first_send < t0)
            t0 = b.sh[1].t_first_send;
        if (b.sh[0].t_last_recv > t1)
            t1 = b.sh[0].t_last_recv;
    }
    uint64_t total = v->both_ways ? 2 * per_dir : per_dir;
    double secs = (double)(t1 - t0) / 1e9;
    double rate = (double)total / secs;
    printf("{\"bench\":\"runtime.throughput\",\"mode\":\"%s\",\"direction\":\"%s\","
           "\"idle\":\"%s\",\"shards\":2,\"pinned\":%s,\"batch\":%u,\"ring\":%u,"
           "\"messages\":%llu,\"seconds\":%.4f,\"msgs_per_s\":%.0f,\"ns_per_msg\":%.2f,"
           "\"ring_full\":%llu,\"wakeups\":%llu,\"errors\":%llu}\n",
           v->batch > 1 ? "batched" : "unbatched", v->both_ways ? "both_ways" : "one_way",
           v->spin ? "spin" : "sleep", json_bool(bo->pin), v->batch, bo->ring,
           (unsigned long long)total, secs, rate, secs * 1e9 / (double)total,
           (unsigned long long)st.ring_full, (unsigned long long)st.wakeups,
           (unsigned long long)(b.sh[0].errors + b.sh[1].errors));
    fflush(stdout);
    return rate;
}

/* ------------------------------------------------------------------ hop latency */

enum { LAT_TIMER, LAT_PINGPONG, LAT_BUSY };
static const char *const lat_names[] = {"timer_1ms", "pingpong", "pingpong_busy"};
static const char *const lat_notes[] = {
    "1 msg per 1 ms timer tick; receiver asleep, woken by eventfd (wake-from-sleep latency)",
    "next msg on ack; idle shards sleep between hops (wake latency at high message rate)",
    "next msg on ack; both shards spin (no-op run turns), never sleep (pure ring hop)"};
enum { KIND_PING = 1, KIND_ACK = 2 };

typedef struct lat_bench lat_bench_t;

typedef struct {
    _Alignas(64) lat_bench_t *b;
    nf_timer_t tick;
    uint64_t sent, received, errors;
    uint64_t last_deadline, missed_periods; /* timer_1ms: periods the wheel skipped */
} lat_shard_t;

struct lat_bench {
    int actor, mode;
    uint64_t warmup, total; /* total = warmup + recorded samples */
    uint32_t *hop_ns;       /* written by shard 1 */
    uint32_t *late_ns;      /* timer lateness, written by shard 0 (timer_1ms only) */
    uint64_t t_end;
    sem_t done;
    lat_shard_t sh[2];
};

static void lat_send_ping(nf_shard_t *sh, lat_shard_t *s, uint64_t now)
{
    nf_msg_t m = {.actor = (uint16_t)s->b->actor, .kind = KIND_PING, .seq = (uint32_t)s->sent};
    m.body.u64[0] = now;
    if (nf_send(sh, 1, &m) != 0)
        s->errors++; /* cannot happen with one message in flight */
    else
        s->sent++;
}

static void lat_tick(nf_shard_t *sh, nf_timer_t *t, void *arg)
{
    lat_shard_t *s = arg;
    lat_bench_t *b = s->b;
    if (s->sent >= b->total) {
        nf_timer_cancel(sh, t);
        return;
    }
    uint64_t now = nf_now_ns();
    /* t is already re-armed for its next period: the deadline that fired is one period back,
     * and periods missed by a late shard were skipped (so lateness stays under one period;
     * the skips are counted instead). */
    uint64_t fired = t->deadline_ns - t->period_ns;
    if (s->last_deadline && fired - s->last_deadline > t->period_ns)
        s->missed_periods += (fired - s->last_deadline) / t->period_ns - 1;
    s->last_deadline = fired;
    if (s->sent >= b->warmup)
        b->late_ns[s->sent - b->warmup] = clamp_u32(now - fired);
    lat_send_ping(sh, s, now);
}

static int lat_init(nf_shard_t *sh, void *ctx, void **self, char *err, size_t errlen)
{
    lat_bench_t *b = ctx;
    lat_shard_t *s = &b->sh[nf_shard_index(sh)];
    if (nf_shard_index(sh) == 0) {
        if (b->mode == LAT_TIMER) {
            /* Millisecond-aligned deadlines: the wheel fires them on the tick they name, so
             * the measured lateness is the shard's sleep/wake, not the 1 ms rounding. */
            nf_timer_init(&s->tick, lat_tick, s);
            nf_timer_arm(sh, &s->tick, (nf_now_ns() / MS_NS + 10) * MS_NS, MS_NS);
        } else {
            lat_send_ping(sh, s, nf_now_ns());
        }
    }
    if (b->mode == LAT_BUSY)
        nf_actor_schedule(sh, b->actor);
    *self = s;
    (void)err;
    (void)errlen;
    return 0;
}

static void lat_handle(nf_shard_t *sh, void *self, const nf_msg_t *m)
{
    lat_shard_t *s = self;
    lat_bench_t *b = s->b;
    uint64_t now = nf_now_ns();
    if (m->kind == KIND_PING) {
        if (m->seq >= b->warmup)
            b->hop_ns[m->seq - b->warmup] = clamp_u32(now - m->body.u64[0]);
        s->received++;
        if (b->mode != LAT_TIMER) {
            nf_msg_t ack = {.actor = (uint16_t)b->actor, .kind = KIND_ACK, .seq = m->seq};
            if (nf_send(sh, m->src, &ack) != 0)
                s->errors++;
        }
        if (s->received == b->total) {
            b->t_end = now;
            sem_post(&b->done);
        }
    } else if (s->sent < b->total) {
        lat_send_ping(sh, s, now);
    }
}

static void lat_run(nf_shard_t *sh, void *self)
{
    lat_shard_t *s = self;
    if (!nf_shard_stopping(sh))
        nf_actor_schedule(sh, s->b->actor); /* keep the loop hot */
}

static void lat_stop(nf_shard_t *sh, void *self)
{
    lat_shard_t *s = self;
    nf_timer_cancel(sh, &s->tick);
}

static const nf_actor_ops_t lat_ops = {
    .name = "bench_lat", .init = lat_init, .handle = lat_handle, .run = lat_run, .stop = lat_stop};

static void run_latency(const bench_opts_t *bo, int mode, summary_t *sum)
{
    static lat_bench_t b;
    memset(&b, 0, sizeof b);
    uint64_t n = mode == LAT_TIMER ? bo->tick_samples : bo->pp_samples;
    b.mode = mode;
    b.warmup = mode == LAT_TIMER ? 20 : 1000;
    b.total = b.warmup + n;
    b.hop_ns = calloc(n ? n : 1, sizeof *b.hop_ns);
    b.late_ns = calloc(n ? n : 1, sizeof *b.late_ns);
    if (!b.hop_ns || !b.late_ns) {
        fprintf(stderr, "bench_runtime: out of memory for %llu samples\n", (unsigned long long)n);
        exit(1);
    }
    sem_init(&b.done, 0, 0);
    for (unsigned i = 0; i < 2; i++)
        b.sh[i].b = &b;
    nf_runtime_t *rt = new_runtime(bo, 2, 64);
    b.actor = nf_runtime_register(rt, &lat_ops, &b);
    uint64_t t0 = nf_now_ns();
    start_runtime(rt);
    wait_done(&b.done, 1, lat_names[mode]);
    nf_runtime_stats_t st = stop_runtime(rt, lat_names[mode]);
    nf_runtime_destroy(rt);
    sem_destroy(&b.done);

    uint64_t msgs = mode == LAT_TIMER ? b.total : 2 * b.total;
    pcts_t p = percentiles(b.hop_ns, n);
    sum->p50[mode] = p.p50;
    sum->p99[mode] = p.p99;
    printf("{\"bench\":\"runtime.hop_latency\",\"variant\":\"%s\",\"what\":\"%s\",\"shards\":2,"
           "\"pinned\":%s,\"batch\":64,\"samples\":%llu,\"warmup\":%llu,\"seconds\":%.3f",
           lat_names[mode], lat_notes[mode], json_bool(bo->pin), (unsigned long long)n,
           (unsigned long long)b.warmup, (double)(b.t_end - t0) / 1e9);
    put_pcts(&p);
    printf(",\"messages\":%llu,\"wakeups\":%llu,\"wakeups_per_msg\":%.3f,\"errors\":%llu}\n",
           (unsigned long long)msgs, (unsigned long long)st.wakeups,
           (double)st.wakeups / (double)msgs,
           (unsigned long long)(b.sh[0].errors + b.sh[1].errors));
    if (mode == LAT_TIMER) {
        pcts_t l = percentiles(b.late_ns, n);
        printf("{\"bench\":\"runtime.timer_lateness\",\"what\":\"fire time - deadline of a "
               "periodic 1 ms timer on a sleeping shard (below 1 ms by construction: skipped "
               "periods are "
               "counted in missed_periods)\",\"pinned\":%s,\"samples\":%llu",
               json_bool(bo->pin), (unsigned long long)n);
        put_pcts(&l);
        printf(",\"missed_periods\":%llu}\n", (unsigned long long)b.sh[0].missed_periods);
    }
    fflush(stdout);
    free(b.hop_ns);
    free(b.late_ns);
}

/* ------------------------------------------------------------------ platform reference */

/* Not the runtime: two plain threads, pinned like shards 0 and 1, bounce a stamped token over
 * two blocking eventfds (write(2) wakes a read(2)). It is the floor for any design whose idle
 * thread sleeps in the kernel, so hop figures can be split into "this machine's wake-up" and
 * "the runtime's own cost". spaced: the sender sleeps to the next millisecond boundary before
 * each send, as the timer_1ms variant does; else back to back, as pingpong. */
typedef struct {
    int efd_ping, efd_pong;
    bool spaced, pin;
    int cpu[2];
    uint64_t warmup, total;
    uint32_t *hop_ns;
    _Atomic uint64_t stamp;
} ref_bench_t;

static void ref_pin(const ref_bench_t *r, int which)
{
    if (!r->pin || r->cpu[which] < 0)
        return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(r->cpu[which], &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
}

static bool ref_rw(int fd, bool rd)
{
    uint64_t v = 1;
    ssize_t n;
    do
        n = rd ? read(fd, &v, sizeof v) : write(fd, &v, sizeof v);
    while (n < 0 && errno == EINTR);
    return n == (ssize_t)sizeof v;
}

static void *ref_echo(void *arg)
{
    ref_bench_t *r = arg;
    ref_pin(r, 1);
    for (uint64_t i = 0; i < r->total; i++) {
        if (!ref_rw(r->efd_ping, true))
            break;
        uint64_t hop = nf_now_ns() - atomic_load_explicit(&r->stamp, memory_order_acquire);
        if (i >= r->warmup)
            r->hop_ns[i - r->warmup] = clamp_u32(hop);
        if (!ref_rw(r->efd_pong, false))
            break;
    }
    return NULL;
}

static void *ref_send(void *arg)
{
    ref_bench_t *r = arg;
    ref_pin(r, 0);
    for (uint64_t i = 0; i < r->total; i++) {
        if (r->spaced) {
            uint64_t next = (nf_now_ns() / MS_NS + 1) * MS_NS;
            struct timespec ts = {.tv_sec = (time_t)(next / SEC_NS),
                                  .tv_nsec = (long)(next % SEC_NS)};
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
                ;
        }
        atomic_store_explicit(&r->stamp, nf_now_ns(), memory_order_release);
        if (!ref_rw(r->efd_ping, false) || !ref_rw(r->efd_pong, true))
            break;
    }
    return NULL;
}

/* The first two CPUs this process may run on, as nf_runtime pins shards 0 and 1. */
static void allowed_cpus(int cpu[2])
{
    cpu_set_t allowed;
    cpu[0] = cpu[1] = -1;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return;
    int seen = 0;
    for (int c = 0; c < CPU_SETSIZE && seen < 2; c++)
        if (CPU_ISSET(c, &allowed))
            cpu[seen++] = c;
    if (seen == 1)
        cpu[1] = cpu[0];
}

static void run_reference(const bench_opts_t *bo, bool spaced, uint64_t n)
{
    static ref_bench_t r;
    memset(&r, 0, sizeof r);
    r.spaced = spaced;
    r.pin = bo->pin;
    allowed_cpus(r.cpu);
    r.warmup = spaced ? 20 : 1000;
    r.total = r.warmup + n;
    r.hop_ns = calloc(n ? n : 1, sizeof *r.hop_ns);
    r.efd_ping = eventfd(0, EFD_CLOEXEC);
    r.efd_pong = eventfd(0, EFD_CLOEXEC);
    if (!r.hop_ns || r.efd_ping < 0 || r.efd_pong < 0) {
        fprintf(stderr, "bench_runtime: reference setup: %s\n", strerror(errno));
        exit(1);
    }
    pthread_t echo, send;
    if (pthread_create(&echo, NULL, ref_echo, &r) != 0 ||
        pthread_create(&send, NULL, ref_send, &r) != 0) {
        fprintf(stderr, "bench_runtime: reference: cannot start threads\n");
        exit(1);
    }
    pthread_join(send, NULL);
    pthread_join(echo, NULL);
    close(r.efd_ping);
    close(r.efd_pong);
    pcts_t p = percentiles(r.hop_ns, n);
    printf("{\"bench\":\"runtime.platform_wake\",\"variant\":\"%s\",\"what\":\"NOT the runtime: "
           "plain threads, blocking eventfd write->read wake (the floor for a sleeping "
           "receiver)\",\"pinned\":%s,\"samples\":%llu",
           spaced ? "spaced_1ms" : "back_to_back", json_bool(bo->pin), (unsigned long long)n);
    put_pcts(&p);
    printf("}\n");
    fflush(stdout);
    free(r.hop_ns);
}

/* ------------------------------------------------------------------ timers */

static void timer_noop(nf_shard_t *sh, nf_timer_t *t, void *arg)
{
    (void)sh;
    (void)t;
    (void)arg;
}

typedef struct {
    unsigned nlive;
    uint64_t ops;
    nf_timer_t *live;
    nf_timer_t probe;
    double arm_ns, pair_ns, cancel_ns; /* results */
} tm_arm_t;

/* On the shard: arm nlive timers 1 s - 1 h ahead (spread over the wheel's levels), time
 * arm+cancel pairs of one more timer 1 ms - 10 s ahead, then cancel the live ones. The random
 * delays (an xorshift step, ~1 ns) are part of the timed loops. */
static void tm_arm_cancel(nf_shard_t *sh, void *arg)
{
    tm_arm_t *a = arg;
    uint64_t x = 88172645463325252ull;
    for (unsigned i = 0; i < a->nlive; i++)
        nf_timer_init(&a->live[i], timer_noop, NULL);
    nf_timer_init(&a->probe, timer_noop, NULL);
    uint64_t now = nf_now_ns();
    uint64_t t0 = nf_now_ns();
    for (unsigned i = 0; i < a->nlive; i++)
        nf_timer_arm(sh, &a->live[i], now + SEC_NS + xorshift64(&x) % (3600 * SEC_NS), 0);
    uint64_t t1 = nf_now_ns();
    for (uint64_t k = 0; k < a->ops; k++) {
        nf_timer_arm(sh, &a->probe, now + MS_NS + xorshift64(&x) % (10 * SEC_NS), 0);
        nf_timer_cancel(sh, &a->probe);
    }
    uint64_t t2 = nf_now_ns();
    for (unsigned i = 0; i < a->nlive; i++)
        nf_timer_cancel(sh, &a->live[i]);
    uint64_t t3 = nf_now_ns();
    a->arm_ns = a->nlive ? (double)(t1 - t0) / a->nlive : NAN;
    a->pair_ns = a->ops ? (double)(t2 - t1) / (double)a->ops : NAN;
    a->cancel_ns = a->nlive ? (double)(t3 - t2) / a->nlive : NAN;
}

/* Drives a private wheel (the one behind nf_timer_*, runtime/timer.h) with a simulated clock
 * in 1 ms steps, on the shard thread: the time spent in nf_wheel_advance per fired timer,
 * cascades and per-tick sorting included, with no sleeping or waking in the way. */
typedef struct {
    unsigned n;
    nf_timer_t *timers;
    uint64_t fired, ticks;
    double ns_per_fired; /* result */
} tm_wheel_t;

static void tm_wheel_count(nf_shard_t *sh, nf_timer_t *t, void *arg)
{
    tm_wheel_t *f = arg;
    f->fired++;
    (void)sh;
    (void)t;
}

static void tm_wheel_fire_one(void *ctx, nf_timer_t *t)
{
    t->fn(ctx, t, t->arg); /* as the runtime's fire_timer does; ctx is the shard */
}

static void tm_wheel_fire(nf_shard_t *sh, void *arg)
{
    static nf_wheel_t w; /* 6 KB; one call at a time */
    tm_wheel_t *f = arg;
    const uint64_t start = 1000 * SEC_NS;
    uint64_t x = 88172645463325252ull;
    nf_wheel_init(&w, start);
    for (unsigned i = 0; i < f->n; i++) {
        nf_timer_init(&f->timers[i], tm_wheel_count, f);
        nf_wheel_arm(&w, &f->timers[i], start + 2 * MS_NS + xorshift64(&x) % SEC_NS, 0);
    }
    uint64_t t0 = nf_now_ns();
    for (uint64_t now = start + MS_NS; f->fired < f->n && now < start + 2 * SEC_NS; now += MS_NS) {
        nf_wheel_advance(&w, now, tm_wheel_fire_one, sh);
        f->ticks++;
    }
    uint64_t t1 = nf_now_ns();
    f->ns_per_fired = f->fired ? (double)(t1 - t0) / (double)f->fired : NAN;
}

/* The same load on a real shard: n one-shot timers at random points of the next second, or
 * (baseline) one periodic 1 ms timer fired n times. The shard's CPU clock starts once they are
 * armed and stops in the last callback, so it covers the loop's sleeps and wake-ups too. */
typedef struct {
    unsigned n; /* fires to wait for */
    bool baseline;
    nf_timer_t *timers;
    unsigned fired;
    uint64_t cpu_start, cpu_end, wall_start, wall_end;
    sem_t done;
} tm_fire_t;

static void tm_fired(nf_shard_t *sh, nf_timer_t *t, void *arg)
{
    tm_fire_t *f = arg;
    if (++f->fired == f->n) {
        f->cpu_end = thread_cpu_ns();
        f->wall_end = nf_now_ns();
        nf_timer_cancel(sh, t); /* the baseline's periodic timer; a no-op for one-shots */
        sem_post(&f->done);
    }
}

static void tm_fire_setup(nf_shard_t *sh, void *arg)
{
    tm_fire_t *f = arg;
    uint64_t base = (nf_now_ns() / MS_NS + 2) * MS_NS, x = 88172645463325252ull;
    if (f->baseline) {
        nf_timer_init(&f->timers[0], tm_fired, f);
        nf_timer_arm(sh, &f->timers[0], base, MS_NS);
    } else {
        for (unsigned i = 0; i < f->n; i++) {
            nf_timer_init(&f->timers[i], tm_fired, f);
            nf_timer_arm(sh, &f->timers[i], base + xorshift64(&x) % SEC_NS, 0);
        }
    }
    f->cpu_start = thread_cpu_ns();
    f->wall_start = nf_now_ns();
}

static void call_on_shard(nf_runtime_t *rt, nf_call_fn fn, void *arg)
{
    int r = nf_runtime_call(rt, 0, fn, arg, WAIT_LIMIT_S * 1000);
    if (r != 0) {
        fprintf(stderr, "bench_runtime: nf_runtime_call: %s\n", strerror(-r));
        exit(1);
    }
}

/* One fire run on a fresh single-shard runtime; returns shard CPU ns over the run. */
static uint64_t run_fire(const bench_opts_t *bo, unsigned n, bool baseline, double *wall_s)
{
    static tm_fire_t f;
    memset(&f, 0, sizeof f);
    f.n = n;
    f.baseline = baseline;
    f.timers = calloc(baseline ? 1 : n, sizeof *f.timers);
    if (!f.timers) {
        fprintf(stderr, "bench_runtime: out of memory for %u timers\n", n);
        exit(1);
    }
    sem_init(&f.done, 0, 0);
    nf_runtime_t *rt = new_runtime(bo, 1, 64);
    start_runtime(rt);
    call_on_shard(rt, tm_fire_setup, &f);
    wait_done(&f.done, 1, "timer fire");
    stop_runtime(rt, "timer fire");
    nf_runtime_destroy(rt);
    sem_destroy(&f.done);
    free(f.timers);
    *wall_s = (double)(f.wall_end - f.wall_start) / 1e9;
    return f.cpu_end - f.cpu_start;
}

static void run_timers(const bench_opts_t *bo, summary_t *sum)
{
    static tm_arm_t a;
    memset(&a, 0, sizeof a);
    a.nlive = bo->live_timers;
    a.ops = bo->timer_ops;
    static tm_wheel_t wf;
    memset(&wf, 0, sizeof wf);
    wf.n = bo->fire_timers;
    a.live = calloc(a.nlive ? a.nlive : 1, sizeof *a.live);
    wf.timers = calloc(wf.n, sizeof *wf.timers);
    if (!a.live || !wf.timers) {
        fprintf(stderr, "bench_runtime: out of memory for timers\n");
        exit(1);
    }
    nf_runtime_t *rt = new_runtime(bo, 1, 64);
    start_runtime(rt);
    call_on_shard(rt, tm_arm_cancel, &a);
    call_on_shard(rt, tm_wheel_fire, &wf);
    stop_runtime(rt, "timer arm/cancel");
    nf_runtime_destroy(rt);
    free(a.live);
    free(wf.timers);
    sum->arm_cancel_ns = a.pair_ns;
    sum->fire_ns = wf.ns_per_fired;
    printf("{\"bench\":\"runtime.timer_arm_cancel\",\"pinned\":%s,\"live_timers\":%u,"
           "\"ops\":%llu",
           json_bool(bo->pin), a.nlive, (unsigned long long)a.ops);
    put_num("ns_per_arm_cancel_pair", a.pair_ns, "%.2f");
    put_num("ns_per_arm_bulk", a.arm_ns, "%.2f");
    put_num("ns_per_cancel_bulk", a.cancel_ns, "%.2f");
    printf(",\"bytes_per_timer\":%zu}\n", sizeof(nf_timer_t));
    fflush(stdout);

    const unsigned base_n = 1000; /* one periodic 1 ms timer over the same second */
    double base_wall, fire_wall;
    uint64_t base_cpu = run_fire(bo, base_n, true, &base_wall);
    uint64_t fire_cpu = run_fire(bo, bo->fire_timers, false, &fire_wall);
    double marginal = bo->fire_timers >= 10 * base_n ? ((double)fire_cpu - (double)base_cpu) /
                                                           (double)(bo->fire_timers - base_n)
                                                     : NAN;
    printf("{\"bench\":\"runtime.timer_fire\",\"pinned\":%s,\"timers\":%u,\"spread_s\":1,"
           "\"wheel_ticks\":%llu,\"wheel_fired\":%llu",
           json_bool(bo->pin), bo->fire_timers, (unsigned long long)wf.ticks,
           (unsigned long long)wf.fired);
    put_num("advance_ns_per_fired", wf.ns_per_fired, "%.2f");
    printf(",\"shard_window_s\":%.3f,\"shard_cpu_ms\":%.3f,\"baseline_ticks\":%u,"
           "\"baseline_shard_cpu_ms\":%.3f",
           fire_wall, (double)fire_cpu / 1e6, base_n, (double)base_cpu / 1e6);
    put_num("shard_cpu_ns_per_fired", (double)fire_cpu / bo->fire_timers, "%.2f");
    put_num("baseline_cpu_ns_per_tick", (double)base_cpu / base_n, "%.1f");
    put_num("marginal_cpu_ns_per_fired", marginal, "%.2f");
    printf(",\"bytes_per_timer\":%zu}\n", sizeof(nf_timer_t));
    fflush(stdout);
}

/* ------------------------------------------------------------------ main */

/* The 1-minute load average: other work on this shared machine skews every figure. */
static double load_1m(void)
{
    double l[1];
    return getloadavg(l, 1) == 1 ? l[0] : NAN;
}

static void print_env(const bench_opts_t *bo)
{
    struct utsname u;
    if (uname(&u) != 0)
        memset(&u, 0, sizeof u);
#ifdef NDEBUG
    const bool asserts = false;
#else
    const bool asserts = true;
#endif
    printf("{\"bench\":\"runtime.env\",\"version\":\"%s\",\"commit\":\"%s\",\"kernel\":\"%s\","
           "\"machine\":\"%s\",\"online_cpus\":%ld,\"pinned\":%s,\"asserts\":%s,\"ring\":%u",
           NF_VERSION, NF_GIT_COMMIT, u.release, u.machine, sysconf(_SC_NPROCESSORS_ONLN),
           json_bool(bo->pin), json_bool(asserts), bo->ring);
    put_num("loadavg_1m", load_1m(), "%.2f");
    printf("}\n");
    fflush(stdout);
}

static void print_summary(const bench_opts_t *bo, const summary_t *s)
{
    printf("{\"bench\":\"runtime.summary\",\"pinned\":%s", json_bool(bo->pin));
    put_num("loadavg_1m", load_1m(), "%.2f");
    for (size_t i = 0; i < TP_NVARIANTS; i++) {
        char key[64];
        snprintf(key, sizeof key, "msgs_per_s_%s", tp_variants[i].name);
        put_num(key, s->tp[i], "%.0f");
    }
    for (int m = 0; m < 3; m++) {
        char key[64];
        snprintf(key, sizeof key, "hop_p50_us_%s", lat_names[m]);
        put_num(key, s->p50[m], "%.2f");
        snprintf(key, sizeof key, "hop_p99_us_%s", lat_names[m]);
        put_num(key, s->p99[m], "%.2f");
    }
    put_num("timer_arm_cancel_ns", s->arm_cancel_ns, "%.2f");
    put_num("timer_fire_ns", s->fire_ns, "%.2f");
    printf(",\"bytes_per_timer\":%zu,\"target_msgs_per_s\":%.0f,\"target_p99_us\":%.0f",
           sizeof(nf_timer_t), TARGET_MSGS_PER_S, TARGET_P99_US);
    /* Informational only: the "not saturated" regimes are timer_1ms and pingpong. */
    if (!isnan(s->tp[0]))
        printf(",\"msgs_per_s_target_met\":%s", json_bool(s->tp[0] >= TARGET_MSGS_PER_S));
    if (!isnan(s->p99[LAT_TIMER]))
        printf(",\"p99_target_met_timer_1ms\":%s", json_bool(s->p99[LAT_TIMER] < TARGET_P99_US));
    if (!isnan(s->p99[LAT_PINGPONG]))
        printf(",\"p99_target_met_pingpong\":%s", json_bool(s->p99[LAT_PINGPONG] < TARGET_P99_US));
    printf("}\n");
    fflush(stdout);
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: bench_runtime [throughput|latency|timers|all]... [options]\n"
            "  --messages N      messages per throughput run (default 20000000)\n"
            "  --samples N       hop samples per ping-pong variant (default 100000)\n"
            "  --tick-samples N  hop samples of the 1 ms timer variant, 1 per ms (default 5000)\n"
            "  --ref-samples N   platform eventfd reference: N spaced 1 ms, 10N back to back\n"
            "                    (default 2000)\n"
            "  --live-timers N   timers live during arm/cancel (default 100000)\n"
            "  --timer-ops N     arm+cancel pairs (default 1000000)\n"
            "  --fire-timers N   timers fired over 1 s (default 100000)\n"
            "  --ring N          ring capacity, power of two (default 1024)\n"
            "  --no-pin          do not pin shards to CPUs (pinned by default)\n"
            "Prints one JSON object per line on stdout.\n");
}

static uint64_t parse_u64(const char *opt, const char *v)
{
    char *end;
    errno = 0;
    unsigned long long x = v ? strtoull(v, &end, 10) : 0;
    if (!v || errno || *end || end == v) {
        fprintf(stderr, "bench_runtime: %s needs a number\n", opt);
        exit(2);
    }
    return x;
}

int main(int argc, char **argv)
{
    bench_opts_t bo = {.pin = true,
                       .ring = 1024,
                       .messages = 20000000,
                       .pp_samples = 100000,
                       .tick_samples = 5000,
                       .ref_samples = 2000,
                       .live_timers = 100000,
                       .timer_ops = 1000000,
                       .fire_timers = 100000};
    bool any = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "throughput")) {
            bo.run_tp = any = true;
        } else if (!strcmp(a, "latency")) {
            bo.run_lat = any = true;
        } else if (!strcmp(a, "timers")) {
            bo.run_timers = any = true;
        } else if (!strcmp(a, "all")) {
            bo.run_tp = bo.run_lat = bo.run_timers = any = true;
        } else if (!strcmp(a, "--no-pin")) {
            bo.pin = false;
        } else if (!strcmp(a, "--messages")) {
            bo.messages = parse_u64(a, v), i++;
        } else if (!strcmp(a, "--samples")) {
            bo.pp_samples = parse_u64(a, v), i++;
        } else if (!strcmp(a, "--tick-samples")) {
            bo.tick_samples = parse_u64(a, v), i++;
        } else if (!strcmp(a, "--ref-samples")) {
            bo.ref_samples = parse_u64(a, v), i++;
        } else if (!strcmp(a, "--live-timers")) {
            bo.live_timers = (unsigned)parse_u64(a, v), i++;
        } else if (!strcmp(a, "--timer-ops")) {
            bo.timer_ops = parse_u64(a, v), i++;
        } else if (!strcmp(a, "--fire-timers")) {
            bo.fire_timers = (unsigned)parse_u64(a, v), i++;
        } else if (!strcmp(a, "--ring")) {
            bo.ring = (unsigned)parse_u64(a, v), i++;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "bench_runtime: unknown argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!any)
        bo.run_tp = bo.run_lat = bo.run_timers = true;
    if (bo.messages < 2 || bo.fire_timers == 0) {
        fprintf(stderr, "bench_runtime: --messages must be >= 2 and --fire-timers >= 1\n");
        return 2;
    }

    summary_t sum = {.tp = {NAN, NAN, NAN, NAN, NAN, NAN},
                     .p50 = {NAN, NAN, NAN},
                     .p99 = {NAN, NAN, NAN},
                     .arm_cancel_ns = NAN,
                     .fire_ns = NAN};
    print_env(&bo);
    if (bo.run_tp) {
        for (size_t i = 0; i < TP_NVARIANTS; i++)
            sum.tp[i] = run_throughput(&bo, &tp_variants[i]);
    }
    if (bo.run_lat) {
        run_latency(&bo, LAT_TIMER, &sum);
        run_latency(&bo, LAT_PINGPONG, &sum);
        run_latency(&bo, LAT_BUSY, &sum);
        run_reference(&bo, true, bo.ref_samples);
        run_reference(&bo, false, 10 * bo.ref_samples);
    }
    if (bo.run_timers)
        run_timers(&bo, &sum);
    print_summary(&bo, &sum);
    return 0;
}
