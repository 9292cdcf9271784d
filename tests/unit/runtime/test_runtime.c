/* Tests src/runtime/runtime.c on real threads and io_uring:
 * - per-sender FIFO order and no loss across shards for >= 10M messages (NF_TEST_MESSAGES
 *   overrides the count, never below 10M unless the sanitizer builds ask for fewer);
 * - a full ring pushes back (-EAGAIN, resume) instead of dropping, with bounded in-flight;
 * - 100k timers armed on shards fire in order, none early, none lost;
 * - shutdown with messages in flight drains them (and a forced shutdown hands leftovers to the
 *   drop hook), without leaks (ASan) or races (TSan);
 * - fd watches (level-triggered, modify, remove inside the callback) and cross-thread calls;
 * - quiescence right after a call waits out the shard's spin instead of reporting it busy;
 * - start returns after every init; an init that fails (for real or by the actor-init failpoint)
 *   keeps every shard out of its loop, undoes the inits that ran, drops what was sent. */
#include "nf_test.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 10) : dflt;
}

static void wait_until(_Atomic uint64_t *counter, uint64_t target, int timeout_s)
{
    uint64_t deadline = nf_now_ns() + (uint64_t)timeout_s * 1000000000ull;
    while (atomic_load(counter) < target && nf_now_ns() < deadline)
        usleep(1000);
}

/* ------------------------------------------------------------ FIFO / no loss */

typedef struct {
    unsigned nshards;
    uint64_t per_pair; /* messages from each shard to each shard */
    _Atomic uint64_t delivered;
    _Atomic uint64_t errors;
    int actor;
} pump_ctx_t;

typedef struct {
    pump_ctx_t *ctx;
    uint64_t next_to[NF_MAX_SHARDS];     /* next sequence to send to each shard */
    uint64_t expect_from[NF_MAX_SHARDS]; /* next sequence expected from each shard */
    unsigned cursor;
    uint64_t refused;
} pump_t;

/* An init's failure: reason in err, -1. */
static int init_failed(char *err, size_t errlen, const char *reason)
{
    snprintf(err, errlen, "%s", reason);
    return -1;
}

static int pump_init(nf_shard_t *sh, void *ctx, void **self, char *err, size_t errlen)
{
    pump_t *p = calloc(1, sizeof *p);
    if (!p)
        return init_failed(err, errlen, "out of memory");
    p->ctx = ctx;
    nf_actor_schedule(sh, p->ctx->actor);
    *self = p;
    return 0;
}

/* Sends round-robin to every shard until each pair is done or a ring refuses. */
static void pump_run(nf_shard_t *sh, void *self)
{
    pump_t *p = self;
    pump_ctx_t *c = p->ctx;
    for (unsigned budget = 0; budget < 4096; budget++) {
        unsigned dst = p->cursor;
        unsigned tries = 0;
        while (p->next_to[dst] == c->per_pair && tries < c->nshards) {
            dst = (dst + 1) % c->nshards;
            tries++;
        }
        if (tries == c->nshards)
            return; /* all sent */
        nf_msg_t m = {.actor = (uint16_t)c->actor, .kind = 1};
        m.body.u64[0] = p->next_to[dst];
        m.body.u64[1] = nf_shard_index(sh) * 1000003ull + p->next_to[dst]; /* checksum */
        if (nf_send(sh, dst, &m) == -EAGAIN) {
            p->refused++;
            p->cursor = dst;
            return; /* resume() reschedules us */
        }
        p->next_to[dst]++;
        p->cursor = (dst + 1) % c->nshards;
    }
    nf_actor_schedule(sh, c->actor);
}

static void pump_resume(nf_shard_t *sh, void *self)
{
    pump_t *p = self;
    nf_actor_schedule(sh, p->ctx->actor);
}

static void pump_handle(nf_shard_t *sh, void *self, const nf_msg_t *m)
{
    pump_t *p = self;
    unsigned src = m->src;
    if (src >= p->ctx->nshards || m->body.u64[0] != p->expect_from[src] ||
        m->body.u64[1] != src * 1000003ull + m->body.u64[0]) {
        atomic_fetch_add(&p->ctx->errors, 1);
    } else {
        p->expect_from[src]++;
    }
    atomic_fetch_add_explicit(&p->ctx->delivered, 1, memory_order_relaxed);
    (void)sh;
}

static void pump_fini(nf_shard_t *sh, void *self)
{
    pump_t *p = self;
    for (unsigned s = 0; s < p->ctx->nshards; s++)
        if (p->expect_from[s] != p->ctx->per_pair)
            atomic_fetch_add(&p->ctx->errors, 1);
    free(p);
    (void)sh;
}

static const nf_actor_ops_t pump_ops = {.name = "pump",
                                        .init = pump_init,
                                        .handle = pump_handle,
                                        .run = pump_run,
                                        .resume = pump_resume,
                                        .fini = pump_fini};

static void run_pump(unsigned shards, unsigned capacity, unsigned batch, uint64_t total)
{
    pump_ctx_t ctx = {.nshards = shards, .per_pair = total / (shards * shards)};
    nf_runtime_opts_t o;
    nf_runtime_opts_default(&o);
    o.shards = shards;
    o.ring_capacity = capacity;
    o.batch = batch;
    char err[256];
    nf_runtime_t *rt = nf_runtime_create(&o, err, sizeof err);
    NF_REQUIRE(rt);
    ctx.actor = nf_runtime_register(rt, &pump_ops, &ctx);
    NF_REQUIRE(ctx.actor >= 0);
    uint64_t expected = ctx.per_pair * shards * shards;
    uint64_t t0 = nf_now_ns();
    NF_REQUIRE(nf_runtime_start(rt) == 0);
    wait_until(&ctx.delivered, expected, 240);
    double secs = (double)(nf_now_ns() - t0) / 1e9;
    nf_runtime_request_stop(rt);
    NF_CHECK_EQ(nf_runtime_wait(rt), 0);
    nf_runtime_stats_t st;
    nf_runtime_stats(rt, &st);
    nf_runtime_destroy(rt);
    fprintf(stderr,
            "  %u shards, ring %u, batch %u: %llu messages in %.2f s (%.1f M/s), %llu "
            "refusals, %llu wakeups\n",
            shards, capacity, batch, (unsigned long long)expected, secs,
            (double)expected / secs / 1e6, (unsigned long long)st.ring_full,
            (unsigned long long)st.wakeups);
    NF_CHECK_EQ(atomic_load(&ctx.delivered), expected);
    NF_CHECK_EQ(atomic_load(&ctx.errors), 0);
    NF_CHECK_EQ(st.sent, expected);
    NF_CHECK_EQ(st.received, expected);
    NF_CHECK_EQ(st.dropped_at_shutdown, 0);
}

static void test_fifo_no_loss_10m(void)
{
    uint64_t total = env_u64("NF_TEST_MESSAGES", 10000000);
    run_pump(2, 1024, 64, total);
}

static void test_fifo_no_loss_unbatched_small_rings(void)
{
    /* Tiny rings and batch 1 exercise the full-ring path on every few messages. */
    run_pump(3, 64, 1, env_u64("NF_TEST_MESSAGES_SMALL", 900000));
}

/* ------------------------------------------------------------ backpressure */

typedef struct {
    int actor;
    uint64_t total;
    _Atomic uint64_t consumed;
    _Atomic uint64_t refused;
    _Atomic uint64_t max_inflight;
    _Atomic uint64_t errors;
    unsigned capacity;
} bp_ctx_t;

typedef struct {
    bp_ctx_t *ctx;
    uint64_t sent;
    uint64_t expect;
} bp_t;

static int bp_init(nf_shard_t *sh, void *ctx, void **self, char *err, size_t errlen)
{
    bp_t *b = calloc(1, sizeof *b);
    if (!b)
        return init_failed(err, errlen, "out of memory");
    b->ctx = ctx;
    if (nf_shard_index(sh) == 0)
        nf_actor_schedule(sh, b->ctx->actor);
    *self = b;
    return 0;
}

static void bp_run(nf_shard_t *sh, void *self)
{
    bp_t *b = self;
    bp_ctx_t *c = b->ctx;
    while (b->sent < c->total) {
        nf_msg_t m = {.actor = (uint16_t)c->actor};
        m.body.u64[0] = b->sent;
        if (nf_send(sh, 1, &m) == -EAGAIN) {
            atomic_fetch_add(&c->refused, 1);
            return; /* wait for resume: no busy retry */
        }
        b->sent++;
        uint64_t inflight = b->sent - atomic_load(&c->consumed);
        if (inflight > atomic_load(&c->max_inflight))
            atomic_store(&c->max_inflight, inflight);
    }
}

static void bp_resume(nf_shard_t *sh, void *self)
{
    bp_t *b = self;
    if (nf_shard_index(sh) == 0)
        nf_actor_schedule(sh, b->ctx->actor);
}

static void bp_handle(nf_shard_t *sh, void *self, const nf_msg_t *m)
{
    bp_t *b = self;
    if (m->body.u64[0] != b->expect++)
        atomic_fetch_add(&b->ctx->errors, 1);
    /* A slow consumer: ~2 us of work per message. */
    uint64_t until = nf_now_ns() + 2000;
    while (nf_now_ns() < until)
        ;
    atomic_fetch_add(&b->ctx->consumed, 1);
    (void)sh;
}

static void bp_fini(nf_shard_t *sh, void *self)
{
    free(self);
    (void)sh;
}

static const nf_actor_ops_t bp_ops = {.name = "bp",
                                      .init = bp_init,
                                      .handle = bp_handle,
                                      .run = bp_run,
                                      .resume = bp_resume,
                                      .fini = bp_fini};

static void test_full_ring_pushes_back(void)
{
    bp_ctx_t ctx = {.total = 200000, .capacity = 256};
    nf_runtime_opts_t o;
    nf_runtime_opts_default(&o);
    o.shards = 2;
    o.ring_capacity = ctx.capacity;
    char err[256];
    nf_runtime_t *rt = nf_runtime_create(&o, err, sizeof err);
    NF_REQUIRE(rt);
    ctx.actor = nf_runtime_register(rt, &bp_ops, &ctx);
    NF_REQUIRE(nf_runtime_start(rt) == 0);
    wait_until(&ctx.consumed, ctx.total, 120);
    nf_runtime_request_stop(rt);
    NF_CHECK_EQ(nf_runtime_wait(rt), 0);
    nf_runtime_stats_t st;
    nf_runtime_stats(rt, &st);
    nf_runtime_destroy(rt);
    fprintf(stderr, "  refused %llu times, max in flight %llu (ring %u)\n",
            (unsigned long long)atomic_load(&ctx.refused),
            (unsigned long long)atomic_load(&ctx.max_inflight), ctx.capacity);
    NF_CHECK_EQ(atomic_load(&ctx.consumed), ctx.total);
    NF_CHECK_EQ(atomic_load(&ctx.errors), 0);
    NF_CHECK(atomic_load(&ctx.refused) > 0);
    NF_CHECK(st.ring_full > 0);
    /* Never more in flight than the ring holds (+1: the consumer's count lags its take). */
    NF_CHECK(atomic_load(&ctx.max_inflight) <= ctx.capacity + o.budget);
    NF_CHECK_EQ(st.dropped_at_shutdown, 0);
}

/* ------------------------------------------------------------ timers on shards */

#define NTIMERS 100000

typedef struct {
    int actor;
    _Atomic uint64_t fired;
    _Atomic uint64_t early;
    _Atomic uint64_t out_of_order;
    _Atomic uint64_t max_late_ns;
} tm_ctx_t;

typedef struct {
    tm_ctx_t *ctx;
    nf_timer_t *timers;
    uint64_t last_deadline, last_seq_at_deadline;
    nf_timer_t cancelled_probe;
} tm_t;

static void tm_fire(nf_shard_t *sh, nf_timer_t *t, void *arg)
{
    tm_t *tm = arg;
    uint64_t now = nf_now_ns();
    uint64_t idx = (uint64_t)(t - tm->timers);
    if (now < t->deadline_ns)
        atomic_fetch_add(&tm->ctx->early, 1);
    else if (now - t->deadline_ns > atomic_load(&tm->ctx->max_late_ns))
        atomic_store(&tm->ctx->max_late_ns, now - t->deadline_ns);
    /* Timers were armed in index order: for equal deadlines, lower index first. */
    if (t->deadline_ns < tm->last_deadline ||
        (t->deadline_ns == tm->last_deadline && idx < tm->last_seq_at_deadline))
        atomic_fetch_add(&tm->ctx->out_of_order, 1);
    tm->last_deadline = t->deadline_ns;
    tm->last_seq_at_deadline = idx;
    atomic_fetch_add(&tm->ctx->fired, 1);
    (void)sh;
}

static void tm_never(nf_shard_t *sh, nf_timer_t *t, void *arg)
{
    tm_t *tm = arg;
    atomic_fetch_add(&tm->ctx->early, 1000000); /* a cancelled timer fired */
    (void)sh;
    (void)t;
}

static int tm_init(nf_shard_t *sh, void *ctx, void **self, char *err, size_t errlen)
{
    tm_t *tm = calloc(1, sizeof *tm);
    if (!tm || !(tm->timers = calloc(NTIMERS, sizeof(nf_timer_t)))) {
        free(tm);
        return init_failed(err, errlen, "out of memory");
    }
    tm->ctx = ctx;
    uint64_t base = nf_now_ns() + 50000000ull, x = 88172645463325252ull + nf_shard_index(sh);
    for (unsigned i = 0; i < NTIMERS; i++) {
        nf_test_xorshift(&x);
        nf_timer_init(&tm->timers[i], tm_fire, tm);
        /* 0-1.5 s ahead, many sharing a millisecond (ties) */
        uint64_t delay = (x % 1500) * 1000000ull + ((x >> 20) % 4 == 0 ? 0 : (x >> 32) % 1000000);
        nf_timer_arm(sh, &tm->timers[i], base + delay, 0);
    }
    nf_timer_init(&tm->cancelled_probe, tm_never, tm);
    nf_timer_arm(sh, &tm->cancelled_probe, base + 100000000ull, 0);
    nf_timer_cancel(sh, &tm->cancelled_probe);
    *self = tm;
    return 0;
}

static void tm_handle(nf_shard_t *sh, void *self, const nf_msg_t *m)
{
    (void)sh;
    (void)self;
    (void)m;
}

static void tm_fini(nf_shard_t *sh, void *self)
{
    tm_t *tm = self;
    free(tm->timers);
    free(tm);
    (void)sh;
}

static const nf_actor_ops_t tm_ops = {
    .name = "timers", .init = tm_init, .handle = tm_handle, .fini = tm_fini};

static void test_100k_timers_in_order(void)
{
    tm_ctx_t ctx = {0};
    nf_runtime_opts_t o;
    nf_runtime_opts_default(&o);
    o.shards = 2;
    char err[256];
    nf_runtime_t *rt = nf_runtime_create(&o, err, sizeof err);
    NF_REQUIRE(rt);
    ctx.actor = nf_runtime_register(rt, &tm_ops, &ctx);
    NF_REQUIRE(nf_runtime_start(rt) == 0);
    wait_until(&ctx.fired, 2 * NTIMERS, 60);
    usleep(200000); /* the cancelled probe's time passes */
    nf_runtime_request_stop(rt);
    NF_CHECK_EQ(nf_runtime_wait(rt), 0);
    nf_runtime_destroy(rt);
    fprintf(stderr, "  fired %llu, max lateness %.2f ms\n",
            (unsigned long long)atomic_load(&ctx.fired),
            (double)atomic_load(&ctx.max_late_ns) / 1e6);
    NF_CHECK_EQ(atomic_load(&ctx.fired), 2 * NTIMERS);
    NF_CHECK_EQ(atomic_load(&ctx.early), 0);
    NF_CHECK_EQ(atomic_load(&ctx.out_of_order), 0);
}

/* ------------------------------------------------------------ shutdown */

typedef struct {
    int actor;
    /* false: a fixed set of messages circulates after stop, never dropped (fewer than a ring
     * holds), so the runtime can never see a quiet wave and must take the timeout path. With
     * drops the set could die out in a moment when every ring is full of messages taken but not
     * yet released: that is a real quiet moment, and the next tick's messages are then dropped
     * at exit without a timeout (CI saw it once). */
    bool obey_stop;
    _Atomic uint64_t hops;
    _Atomic uint64_t freed_in_handle;
    _Atomic uint64_t dropped;
    _Atomic uint64_t allocated;
    _Atomic int stopped;
} sd_ctx_t;

typedef struct {
    sd_ctx_t *ctx;
    nf_timer_t tick;
    bool stopping;
} sd_t;

#define SD_DISOBEY_SET 96 /* messages circulating when obey_stop is false (< ring 256) */

static void sd_send_new(nf_shard_t *sh, sd_t *s)
{
    for (int i = 0; i < 64; i++) {
        if (!s->ctx->obey_stop && atomic_load(&s->ctx->allocated) >= SD_DISOBEY_SET)
            return;
        nf_msg_t m = {.actor = (uint16_t)s->ctx->actor};
        m.body.ptr = malloc(128); /* owned by the message: ASan sees any loss */
        if (nf_send(sh, (nf_shard_index(sh) + 1) % nf_runtime_shard_count(nf_shard_runtime(sh)),
                    &m) != 0) {
            free(m.body.ptr);
            return;
        }
        atomic_fetch_add(&s->ctx->allocated, 1);
    }
}

static void sd_tick(nf_shard_t *sh, nf_timer_t *t, void *arg)
{
    sd_send_new(sh, arg);
    (void)t;
}

static int sd_init(nf_shard_t *sh, void *ctx, void **self, char *err, size_t errlen)
{
    sd_t *s = calloc(1, sizeof *s);
    if (!s)
        return init_failed(err, errlen, "out of memory");
    s->ctx = ctx;
    nf_timer_init(&s->tick, sd_tick, s);
    nf_timer_arm(sh, &s->tick, nf_now_ns(), 1000000ull);
    *self = s;
    return 0;
}

static void sd_handle(nf_shard_t *sh, void *self, const nf_msg_t *m)
{
    sd_t *s = self;
    atomic_fetch_add(&s->ctx->hops, 1);
    if (s->stopping && s->ctx->obey_stop) {
        free(m->body.ptr);
        atomic_fetch_add(&s->ctx->freed_in_handle, 1);
        return;
    }
    /* Forward: ping-pong keeps messages in flight all the time. */
    nf_msg_t fwd = *m;
    unsigned n = nf_runtime_shard_count(nf_shard_runtime(sh));
    if (nf_send(sh, (nf_shard_index(sh) + 1) % n, &fwd) != 0) {
        free(m->body.ptr);
        atomic_fetch_add(&s->ctx->freed_in_handle, 1);
    }
}

static void sd_stop(nf_shard_t *sh, void *self)
{
    sd_t *s = self;
    s->stopping = true;
    atomic_fetch_add(&s->ctx->stopped, 1);
    if (s->ctx->obey_stop)
        nf_timer_cancel(sh, &s->tick);
}

static void sd_fini(nf_shard_t *sh, void *self)
{
    sd_t *s = self;
    nf_timer_cancel(sh, &s->tick);
    free(s);
}

static void sd_drop(void *ctx, const nf_msg_t *m)
{
    sd_ctx_t *c = ctx;
    free(m->body.ptr);
    atomic_fetch_add(&c->dropped, 1);
}

static const nf_actor_ops_t sd_ops = {.name = "shutdown",
                                      .init = sd_init,
                                      .handle = sd_handle,
                                      .stop = sd_stop,
                                      .fini = sd_fini,
                                      .drop = sd_drop};

static void run_shutdown(bool obey)
{
    sd_ctx_t ctx = {.obey_stop = obey};
    nf_runtime_opts_t o;
    nf_runtime_opts_default(&o);
    o.shards = 3;
    o.ring_capacity = 256;
    o.shutdown_timeout_ms = 300;
    char err[256];
    nf_runtime_t *rt = nf_runtime_create(&o, err, sizeof err);
    NF_REQUIRE(rt);
    ctx.actor = nf_runtime_register(rt, &sd_ops, &ctx);
    NF_REQUIRE(nf_runtime_start(rt) == 0);
    wait_until(&ctx.hops, 200000, 60);
    nf_runtime_request_stop(rt);
    int r = nf_runtime_wait(rt);
    nf_runtime_stats_t st;
    nf_runtime_stats(rt, &st);
    nf_runtime_destroy(rt);
    fprintf(stderr, "  obey=%d: %llu hops, %llu allocated, %llu freed in handle, %llu dropped\n",
            obey, (unsigned long long)atomic_load(&ctx.hops),
            (unsigned long long)atomic_load(&ctx.allocated),
            (unsigned long long)atomic_load(&ctx.freed_in_handle),
            (unsigned long long)atomic_load(&ctx.dropped));
    NF_CHECK_EQ(atomic_load(&ctx.stopped), 3);
    /* Every allocated payload was freed exactly once, by a handler or the drop hook. */
    NF_CHECK_EQ(atomic_load(&ctx.freed_in_handle) + atomic_load(&ctx.dropped),
                atomic_load(&ctx.allocated));
    if (obey) {
        NF_CHECK_EQ(r, 0);
        NF_CHECK_EQ(atomic_load(&ctx.dropped), 0);
        NF_CHECK_EQ(st.dropped_at_shutdown, 0);
    } else {
        NF_CHECK_EQ(r, -ETIMEDOUT);
        NF_CHECK_EQ(atomic_load(&ctx.freed_in_handle), 0);
        NF_CHECK_EQ(atomic_load(&ctx.dropped), atomic_load(&ctx.allocated));
        NF_CHECK_EQ(st.dropped_at_shutdown, atomic_load(&ctx.dropped));
    }
}

static void test_shutdown_drains_in_flight(void)
{
    run_shutdown(true);
}

static void test_shutdown_timeout_drops_to_hook(void)
{
    run_shutdown(false);
}

/* ------------------------------------------------------------ fd watches and calls */

typedef struct {
    int fds[2];
    _Atomic uint64_t bytes_read;
    _Atomic int writable_seen;
    _Atomic int removed;
    nf_watch_t *w;
} fw_t;

static fw_t fw;

static void fw_cb(nf_shard_t *sh, int fd, unsigned revents, void *arg)
{
    fw_t *f = arg;
    if (revents & POLLIN) {
        char buf[64];
        /* Read one byte per call: level-triggered means we are called again. */
        ssize_t n = read(fd, buf, 1);
        if (n > 0)
            atomic_fetch_add(&f->bytes_read, (uint64_t)n);
        if (atomic_load(&f->bytes_read) == 10) {
            nf_watch_remove(sh, f->w); /* inside the callback */
            atomic_store(&f->removed, 1);
        }
    }
}

static void fw_add(nf_shard_t *sh, void *arg)
{
    fw_t *f = arg;
    f->w = nf_watch_add(sh, f->fds[0], POLLIN, fw_cb, f);
}

static void wr_cb(nf_shard_t *sh, int fd, unsigned revents, void *arg)
{
    fw_t *f = arg;
    if (revents & POLLOUT)
        atomic_store(&f->writable_seen, 1);
    nf_watch_modify(sh, f->w, 0); /* stop watching, then remove from a call */
    (void)fd;
}

static void wr_add(nf_shard_t *sh, void *arg)
{
    fw_t *f = arg;
    f->w = nf_watch_add(sh, f->fds[1], POLLOUT, wr_cb, f);
}

static void wr_remove(nf_shard_t *sh, void *arg)
{
    fw_t *f = arg;
    nf_watch_remove(sh, f->w);
}

static void which_shard(nf_shard_t *sh, void *arg)
{
    *(unsigned *)arg = nf_shard_index(sh);
}

static void test_fd_watch_and_calls(void)
{
    nf_runtime_opts_t o;
    nf_runtime_opts_default(&o);
    o.shards = 2;
    char err[256];
    nf_runtime_t *rt = nf_runtime_create(&o, err, sizeof err);
    NF_REQUIRE(rt);
    NF_REQUIRE(nf_runtime_start(rt) == 0);

    unsigned got = 99;
    NF_CHECK_EQ(nf_runtime_call(rt, 1, which_shard, &got, 5000), 0);
    NF_CHECK_EQ(got, 1);
    NF_CHECK_EQ(nf_runtime_call(rt, 0, which_shard, &got, 5000), 0);
    NF_CHECK_EQ(got, 0);
    NF_CHECK_EQ(nf_runtime_call(rt, 7, which_shard, &got, 5000), -EINVAL);

    NF_REQUIRE(pipe(fw.fds) == 0);
    NF_CHECK_EQ(nf_runtime_call(rt, 1, fw_add, &fw, 5000), 0);
    NF_CHECK(write(fw.fds[1], "0123456789abc", 13) == 13);
    uint64_t deadline = nf_now_ns() + 5000000000ull;
    while (!atomic_load(&fw.removed) && nf_now_ns() < deadline)
        usleep(1000);
    usleep(20000);
    NF_CHECK_EQ(atomic_load(&fw.bytes_read), 10); /* 3 bytes left: removed, not called */

    NF_CHECK_EQ(nf_runtime_call(rt, 0, wr_add, &fw, 5000), 0);
    deadline = nf_now_ns() + 5000000000ull;
    while (!atomic_load(&fw.writable_seen) && nf_now_ns() < deadline)
        usleep(1000);
    NF_CHECK(atomic_load(&fw.writable_seen));
    NF_CHECK_EQ(nf_runtime_call(rt, 0, wr_remove, &fw, 5000), 0);

    nf_runtime_request_stop(rt);
    NF_CHECK_EQ(nf_runtime_wait(rt), 0);
    NF_CHECK_EQ(nf_runtime_call(rt, 0, which_shard, &got, 100), -ESHUTDOWN);
    nf_runtime_destroy(rt);
    close(fw.fds[0]);
    close(fw.fds[1]);
}

static void test_route_spreads_and_is_stable(void)
{
    nf_runtime_opts_t o;
    nf_runtime_opts_default(&o);
    o.shards = 4;
    char err[256];
    nf_runtime_t *rt = nf_runtime_create(&o, err, sizeof err);
    NF_REQUIRE(rt);
    unsigned counts[4] = {0};
    for (uint64_t k = 0; k < 100000; k++) {
        unsigned s = nf_route(rt, k);
        NF_REQUIRE(s < 4);
        NF_CHECK(s == nf_route(rt, k));
        counts[s]++;
    }
    for (int i = 0; i < 4; i++)
        NF_CHECK(counts[i] > 23000 && counts[i] < 27000);
    nf_runtime_destroy(rt); /* never started */
}

static void test_bad_options(void)
{
    nf_runtime_opts_t o;
    nf_runtime_opts_default(&o);
    o.ring_capacity = 1000;
    char err[256] = "";
    NF_CHECK(nf_runtime_create(&o, err, sizeof err) == NULL);
    NF_CHECK(strstr(err, "power of two") != NULL);
    o.ring_capacity = 1024;
    o.shards = NF_MAX_SHARDS + 1;
    NF_CHECK(nf_runtime_create(&o, err, sizeof err) == NULL);
    NF_CHECK(strstr(err, "runtime.shards") != NULL);
}

/* The epoch's drain probes the shards with calls and then asks whether the runtime is
 * quiescent. A shard that just ran a call spins (spin_ns) before it says it is idle: the answer
 * must wait that out rather than say "busy" at once, or the probe, repeated, keeps the shard
 * busy and the drain goes round until the timing lets a reading in (epoch pauses of hundreds of
 * ms at 1,000 dirty keys). With a 5 ms spin, the old check was false after every call. */
static void test_quiescent_after_a_call(void)
{
    nf_runtime_opts_t o;
    nf_runtime_opts_default(&o);
    o.shards = 2;
    o.spin_ns = 5000000;
    char err[256];
    nf_runtime_t *rt = nf_runtime_create(&o, err, sizeof err);
    NF_REQUIRE(rt);
    NF_REQUIRE(nf_runtime_start(rt) == 0);
    unsigned got, quiet = 0;
    for (int i = 0; i < 50; i++) {
        NF_REQUIRE(nf_runtime_call(rt, (unsigned)i % 2, which_shard, &got, 5000) == 0);
        quiet += nf_runtime_quiescent(rt);
    }
    /* Without the wait, never (every answer came during the spin). With it, not always: a shard
     * thread a busy machine did not run within the spin is still spinning when the wait ends, so
     * any fixed share would be a bet on the machine's load (it failed at 10 of 20 under ASan
     * beside a chaos test). One in 50 proves the wait; the share is printed. */
    printf("  quiescent after %u of 50 calls\n", quiet);
    NF_CHECK(quiet >= 1);
    nf_runtime_request_stop(rt);
    NF_CHECK_EQ(nf_runtime_wait(rt), 0);
    nf_runtime_destroy(rt);
}

/* nf_runtime_call_all runs the call on every shard at once: each call waits until all of them
 * have started (run one after the other, the first would wait forever; it gives up after 10 s
 * and says so). A call slower than the timeout names its shard; the others still ran. */
typedef struct {
    _Atomic unsigned entered, ran_mask, alone;
    unsigned slow_shard; /* its call sleeps 300 ms (UINT_MAX: none) */
} ca_t;

static void all_at_once(nf_shard_t *sh, void *arg)
{
    ca_t *c = arg;
    unsigned n = nf_runtime_shard_count(nf_shard_runtime(sh));
    atomic_fetch_or(&c->ran_mask, 1u << nf_shard_index(sh));
    atomic_fetch_add(&c->entered, 1);
    uint64_t give_up = nf_now_ns() + 10000000000ull;
    while (atomic_load(&c->entered) < n)
        if (nf_now_ns() > give_up) {
            atomic_fetch_add(&c->alone, 1);
            break;
        }
    if (nf_shard_index(sh) == c->slow_shard)
        usleep(300000);
}

static void test_call_all_in_parallel(void)
{
    nf_runtime_opts_t o;
    nf_runtime_opts_default(&o);
    o.shards = 3;
    char err[256];
    nf_runtime_t *rt = nf_runtime_create(&o, err, sizeof err);
    NF_REQUIRE(rt);
    NF_REQUIRE(nf_runtime_start(rt) == 0);
    static ca_t c; /* a timed-out call may run after the test returned: static */
    for (int round = 0; round < 20; round++) {
        atomic_store(&c.entered, 0);
        atomic_store(&c.ran_mask, 0);
        c.slow_shard = UINT_MAX;
        unsigned failed = 99;
        NF_CHECK_EQ(nf_runtime_call_all(rt, all_at_once, &c, 30000, &failed), 0);
        NF_CHECK_EQ(atomic_load(&c.ran_mask), 7);
        NF_CHECK_EQ(failed, 99);
    }
    NF_CHECK_EQ(atomic_load(&c.alone), 0);
    atomic_store(&c.entered, 0);
    c.slow_shard = 1;
    unsigned failed = 99;
    NF_CHECK_EQ(nf_runtime_call_all(rt, all_at_once, &c, 100, &failed), -ETIMEDOUT);
    NF_CHECK_EQ(failed, 1);
    nf_runtime_request_stop(rt);
    NF_CHECK_EQ(nf_runtime_wait(rt), 0);
    NF_CHECK_EQ(atomic_load(&c.ran_mask), 7);
    NF_CHECK_EQ(nf_runtime_call_all(rt, all_at_once, &c, 100, &failed), -ESHUTDOWN);
    NF_CHECK_EQ(failed, 0);
    nf_runtime_destroy(rt);
}

/* ------------------------------------------------------------ start and failing inits */

#define IF_SHARDS 3

/* Counts per actor and shard, so a test can tell which inits ran and that each was undone. */
typedef struct {
    int actor;
    int fail_on;     /* shard whose init fails, -1 none */
    bool send_ahead; /* init sends a message owning memory to the next shard */
    _Atomic int inits[IF_SHARDS], finis[IF_SHARDS];
    _Atomic int handled, stopped, dropped;
} if_ctx_t;

typedef struct {
    if_ctx_t *ctx;
    char *buf; /* owned: ASan sees a fini that did not run */
} if_t;

static int if_init(nf_shard_t *sh, void *ctx, void **self, char *err, size_t errlen)
{
    if_ctx_t *c = ctx;
    unsigned i = nf_shard_index(sh);
    if ((int)i == c->fail_on) {
        snprintf(err, errlen, "no widgets on shard %u", i);
        return -1;
    }
    if_t *x = calloc(1, sizeof *x);
    if (!x || !(x->buf = malloc(64))) {
        free(x);
        return init_failed(err, errlen, "out of memory");
    }
    x->ctx = c;
    if (c->send_ahead) {
        nf_msg_t m = {.actor = (uint16_t)c->actor};
        m.body.ptr = malloc(32);
        if (nf_send(sh, (i + 1) % IF_SHARDS, &m) != 0)
            free(m.body.ptr);
    }
    atomic_fetch_add(&c->inits[i], 1);
    *self = x;
    return 0;
}

static void if_handle(nf_shard_t *sh, void *self, const nf_msg_t *m)
{
    if_t *x = self;
    free(m->body.ptr);
    atomic_fetch_add(&x->ctx->handled, 1);
    (void)sh;
}

static void if_stop(nf_shard_t *sh, void *self)
{
    atomic_fetch_add(&((if_t *)self)->ctx->stopped, 1);
    (void)sh;
}

static void if_fini(nf_shard_t *sh, void *self)
{
    if_t *x = self;
    atomic_fetch_add(&x->ctx->finis[nf_shard_index(sh)], 1);
    free(x->buf);
    free(x);
}

static void if_drop(void *ctx, const nf_msg_t *m)
{
    free(m->body.ptr);
    atomic_fetch_add(&((if_ctx_t *)ctx)->dropped, 1);
}

static const nf_actor_ops_t if_ops[] = {
    {.name = "first",
     .init = if_init,
     .handle = if_handle,
     .stop = if_stop,
     .fini = if_fini,
     .drop = if_drop},
    {.name = "flaky",
     .init = if_init,
     .handle = if_handle,
     .stop = if_stop,
     .fini = if_fini,
     .drop = if_drop},
    {.name = "fp_victim",
     .init = if_init,
     .handle = if_handle,
     .stop = if_stop,
     .fini = if_fini,
     .drop = if_drop},
    {.name = "last",
     .init = if_init,
     .handle = if_handle,
     .stop = if_stop,
     .fini = if_fini,
     .drop = if_drop},
};

static nf_runtime_t *if_runtime(if_ctx_t *ctx, const int *which, int n)
{
    nf_runtime_opts_t o;
    nf_runtime_opts_default(&o);
    o.shards = IF_SHARDS;
    char err[256];
    nf_runtime_t *rt = nf_runtime_create(&o, err, sizeof err);
    for (int i = 0; rt && i < n; i++)
        ctx[i].actor = nf_runtime_register(rt, &if_ops[which[i]], &ctx[i]);
    return rt;
}

/* Every init that ran was undone by a fini on its shard; nothing handled, nothing stopped. */
static void check_unwound(if_ctx_t *ctx, int n)
{
    for (int a = 0; a < n; a++) {
        for (int s = 0; s < IF_SHARDS; s++)
            NF_CHECK_EQ(atomic_load(&ctx[a].finis[s]), atomic_load(&ctx[a].inits[s]));
        NF_CHECK_EQ(atomic_load(&ctx[a].handled), 0);
        NF_CHECK_EQ(atomic_load(&ctx[a].stopped), 0);
    }
}

/* nf_runtime_start returns once every shard has run its inits. */
static void test_start_waits_for_inits(void)
{
    if_ctx_t ctx[2] = {{.fail_on = -1}, {.fail_on = -1}};
    nf_runtime_t *rt = if_runtime(ctx, (const int[]){0, 3}, 2);
    NF_REQUIRE(rt && ctx[1].actor == 1);
    NF_REQUIRE(nf_runtime_start(rt) == 0);
    NF_CHECK_STR(nf_runtime_start_error(rt), "");
    for (int a = 0; a < 2; a++)
        for (int s = 0; s < IF_SHARDS; s++)
            NF_CHECK_EQ(atomic_load(&ctx[a].inits[s]), 1);
    nf_runtime_request_stop(rt);
    NF_CHECK_EQ(nf_runtime_wait(rt), 0);
    nf_runtime_destroy(rt);
    for (int a = 0; a < 2; a++)
        for (int s = 0; s < IF_SHARDS; s++)
            NF_CHECK_EQ(atomic_load(&ctx[a].finis[s]), 1);
}

/* An init failing on one shard of three: no shard runs, every init that ran is undone, the
 * messages sent by inits and posted before the start go to the drop hooks, and the start says
 * which actor failed where and why. */
static void test_failing_init_unwinds(void)
{
    if_ctx_t ctx[3] = {{.fail_on = -1, .send_ahead = true}, {.fail_on = 1}, {.fail_on = -1}};
    nf_runtime_t *rt = if_runtime(ctx, (const int[]){0, 1, 3}, 3);
    NF_REQUIRE(rt && ctx[2].actor == 2);
    nf_msg_t m = {.actor = 0};
    m.body.ptr = malloc(16);
    NF_REQUIRE(nf_runtime_post(rt, 2, &m) == 0);
    NF_CHECK_EQ(nf_runtime_start(rt), -ECANCELED);
    NF_CHECK_STR(nf_runtime_start_error(rt), "actor flaky on shard 1: no widgets on shard 1");
    for (int s = 0; s < IF_SHARDS; s++) { /* each shard's inits ran until its own failure */
        NF_CHECK_EQ(atomic_load(&ctx[0].inits[s]), 1);
        NF_CHECK_EQ(atomic_load(&ctx[1].inits[s]), s != 1);
        NF_CHECK_EQ(atomic_load(&ctx[2].inits[s]), s != 1);
    }
    check_unwound(ctx, 3);
    NF_CHECK_EQ(atomic_load(&ctx[0].dropped), IF_SHARDS + 1); /* one sent per init, one posted */
    nf_runtime_stats_t st;
    nf_runtime_stats(rt, &st);
    NF_CHECK_EQ(st.dropped_at_shutdown, IF_SHARDS + 1);
    NF_CHECK_EQ(nf_runtime_wait(rt), -ECANCELED); /* at once: nothing runs */
    NF_CHECK_EQ(nf_runtime_post(rt, 0, &m), -ESHUTDOWN);
    nf_runtime_request_stop(rt);
    nf_runtime_destroy(rt);
}

/* NEWSFLOW_FAILPOINTS=actor-init:fp_victim (set by main): the runtime fails that init on every
 * shard without calling it, and unwinds the real way. */
static void test_init_failpoint(void)
{
    if_ctx_t ctx[3] = {{.fail_on = -1}, {.fail_on = -1}, {.fail_on = -1}};
    nf_runtime_t *rt = if_runtime(ctx, (const int[]){0, 2, 3}, 3);
    NF_REQUIRE(rt && ctx[2].actor == 2);
    NF_CHECK_EQ(nf_runtime_start(rt), -ECANCELED);
    NF_CHECK_STR(nf_runtime_start_error(rt),
                 "actor fp_victim on shard 0: failpoint actor-init:fp_victim");
    for (int s = 0; s < IF_SHARDS; s++) {
        NF_CHECK_EQ(atomic_load(&ctx[0].inits[s]), 1);
        NF_CHECK_EQ(atomic_load(&ctx[1].inits[s]), 0); /* never called */
        NF_CHECK_EQ(atomic_load(&ctx[2].inits[s]), 0);
    }
    check_unwound(ctx, 3);
    nf_runtime_destroy(rt);
}

int main(void)
{
    nf_metrics_init(4); /* one registry for every runtime of this process */
    setenv("NEWSFLOW_FAILPOINTS", "actor-init:nosuch,actor-init:fp_victim", 1); /* read once */
    NF_RUN(test_bad_options);
    NF_RUN(test_route_spreads_and_is_stable);
    NF_RUN(test_fd_watch_and_calls);
    NF_RUN(test_quiescent_after_a_call);
    NF_RUN(test_call_all_in_parallel);
    NF_RUN(test_start_waits_for_inits);
    NF_RUN(test_failing_init_unwinds);
    NF_RUN(test_init_failpoint);
    NF_RUN(test_100k_timers_in_order);
    NF_RUN(test_full_ring_pushes_back);
    NF_RUN(test_shutdown_drains_in_flight);
    NF_RUN(test_shutdown_timeout_drops_to_hook);
    NF_RUN(test_fifo_no_loss_unbatched_small_rings);
    NF_RUN(test_fifo_no_loss_10m);
    nf_metrics_shutdown();
    return nf_test_report();
}
