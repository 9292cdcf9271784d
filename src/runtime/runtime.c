/* runtime.c — shards, their loop, actors, fd watches, calls and shutdown (see runtime.h).
 *
 * One loop iteration of a shard:
 *   1. read the clock; on a stop request, call the actors' stop hooks (once);
 *   2. fire due timers;
 *   3. if a ring we were refused on has space, call the actors' resume hooks;
 *   4. take up to `budget` messages from each inbound ring and the inbox, handle them;
 *   5. give scheduled actors their `run` turn;
 *   6. publish everything written to outbound rings (waking sleeping consumers), then release
 *      the inbound slots (waking refused producers);
 *   7. reap io_uring completions (fd readiness, the wake-up eventfd);
 *   8. if nothing happened, sleep in io_uring_submit_and_wait_timeout() until the next timer.
 *
 * Sleeping uses a Dekker handshake so that wake-ups cost a syscall only when the consumer really
 * sleeps: the shard stores sleeping=1 then re-checks its rings; a producer publishes then reads
 * `sleeping` (both with full fences); at least one of them sees the other.
 *
 * Shutdown detection (nf_runtime_wait): once every shard has run its stop hooks, the waiting
 * thread reads every shard's (sent, received) counters and busy flags in two waves; two equal,
 * balanced, idle waves mean no message is in flight and none can appear (actors after stop only
 * react to messages), so the shards are told to exit. `received` is advanced only after the
 * iteration's outputs are published, so a message being handled keeps the totals unbalanced. */
#include "runtime/runtime.h"

#include "runtime/failpoint.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "runtime/ring.h"
#include "runtime/timer.h"

#include <assert.h>
#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define NF_SYS_ACTOR 0xffffu
enum { NF_SYS_CALL = 1 };

/* io_uring user_data tags (low bits; watches are 8-byte aligned pointers). */
#define TAG_WAKE   1ull
#define TAG_IGNORE 2ull

#define URING_ENTRIES 256

struct nf_watch {
    nf_watch_t *next, **pprev; /* the shard's list of watches not yet freed */
    int fd;
    unsigned events;
    nf_watch_fn fn;
    void *arg;
    bool armed;       /* a poll SQE is outstanding */
    bool dead;        /* removed; free when the poll completes */
    bool in_callback; /* free after the callback returns */
    bool quiet;       /* its callback sends no message (nf_watch_quiet) */
};

typedef struct nf_call {
    nf_call_fn fn;
    void *arg;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    _Atomic int refs; /* caller + message */
} nf_call_t;

struct nf_shard {
    nf_runtime_t *rt;
    unsigned index;
    pthread_t thread;
    bool thread_started;
    struct io_uring uring;
    bool uring_ok;
    int efd;
    uint64_t efd_buf;
    nf_wheel_t wheel;
    uint64_t now;
    void *actors[NF_MAX_ACTORS];
    nf_watch_t *watches; /* every watch not yet freed (freed at the thread's end) */
    uint32_t sched_mask;
    bool stop_called;
    uint64_t pending_sent; /* published, not yet added to `sent` */
    uint64_t handled;      /* taken this iteration, added to `received` after publishing */
    /* shared with other threads (atomics) */
    /* Read by every producer on every publish: alone on its line, so the owner's per-iteration
     * writes below do not bounce it between cores (false sharing measured at ~40% of unbatched
     * throughput). */
    _Alignas(64) _Atomic int sleeping;
    _Alignas(64) _Atomic int resume_pending;
    /* 1 from before a hook or callback that may send (a message handled, a timer, a run,
     * resume or stop hook, a watch not quiet) until the end of that iteration, after its
     * messages are published; quiet work (the HTTP server's sockets) leaves it 0. */
    _Atomic int busy;
    bool busy_local; /* this thread's view of busy (it alone stores it) */
    _Atomic uint64_t sent, received, ring_full, wakeups, iterations;
};

struct nf_runtime {
    nf_runtime_opts_t opts;
    unsigned n;
    nf_shard_t *shards;
    nf_ring_t *rings; /* rings[src * n + dst] */
    nf_ring_t *inbox; /* inbox[dst], producers serialised by inbox_lock[dst] */
    pthread_mutex_t *inbox_lock;
    _Atomic uint64_t inbox_posted; /* messages posted to any inbox */
    const nf_actor_ops_t *ops[NF_MAX_ACTORS];
    void *ctx[NF_MAX_ACTORS];
    int nactors;
    bool started;
    int stop_efd;
    _Atomic int stop_requested;
    _Atomic int failed; /* nf_runtime_fail */
    _Atomic int exit_now;
    _Atomic int closed; /* post/call refused */
    _Atomic unsigned stop_called_count;
    _Atomic uint64_t dropped;
    /* The start barrier (nf_runtime_start): each shard runs its inits, reports, and waits for
     * start_go (1 enter the loop, -1 unwind). All under start_lock. */
    pthread_mutex_t start_lock;
    pthread_cond_t start_cond;
    unsigned start_reported;
    int start_go;
    bool start_failed;        /* an init failed */
    unsigned start_err_shard; /* the shard whose failure start_err holds: the lowest */
    char start_err[512];
    int start_rc; /* what a failed nf_runtime_start returned (0: it did not fail) */
    nf_counter_t m_sent, m_received, m_full, m_wakeups, m_dropped;
    nf_gauge_t m_timers, m_inbound;
};

static _Thread_local nf_shard_t *current_shard;

uint64_t nf_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t nf_thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct timespec nf_deadline_after(int clk, unsigned ms)
{
    struct timespec t;
    clock_gettime((clockid_t)clk, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

int64_t nf_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void nf_runtime_opts_default(nf_runtime_opts_t *o)
{
    *o = (nf_runtime_opts_t){.shards = 0,
                             .pin = false,
                             .ring_capacity = 1024,
                             .batch = 64,
                             .budget = 256,
                             .shutdown_timeout_ms = 10000,
                             .spin_ns = 50000};
}

/* Every runtime's shards' busy time, process-wide (a registry function must outlive a runtime). */
static _Atomic uint64_t g_busy_ns;

static double busy_seconds(void *arg)
{
    (void)arg;
    return (double)atomic_load_explicit(&g_busy_ns, memory_order_relaxed) / 1e9;
}

static inline nf_ring_t *ring_of(nf_runtime_t *rt, unsigned src, unsigned dst)
{
    return &rt->rings[(size_t)src * rt->n + dst];
}

static void shard_wake(nf_shard_t *sh)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&sh->sleeping, memory_order_relaxed) &&
        atomic_exchange_explicit(&sh->sleeping, 0, memory_order_acq_rel)) {
        uint64_t one = 1;
        ssize_t w = write(sh->efd, &one, sizeof one);
        (void)w; /* EAGAIN only if the counter is saturated: the shard is awake anyway */
        atomic_fetch_add_explicit(&sh->wakeups, 1, memory_order_relaxed);
    }
}

/* ---------------------------------------------------------------- creation */

nf_runtime_t *nf_runtime_create(const nf_runtime_opts_t *o, char *err, size_t errlen)
{
    nf_runtime_opts_t opts = *o;
    if (opts.shards == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        opts.shards = cpus > 0 ? (unsigned)cpus : 1;
    }
    if (opts.shards > NF_MAX_SHARDS) {
        snprintf(err, errlen, "runtime.shards: %u is more than the maximum %d", opts.shards,
                 NF_MAX_SHARDS);
        return NULL;
    }
    if (opts.ring_capacity < 2 || (opts.ring_capacity & (opts.ring_capacity - 1))) {
        snprintf(err, errlen, "runtime.ring_capacity: %u is not a power of two >= 2",
                 opts.ring_capacity);
        return NULL;
    }
    if (opts.batch == 0)
        opts.batch = 1;
    if (opts.budget == 0)
        opts.budget = 1;

    nf_runtime_t *rt = calloc(1, sizeof *rt);
    if (!rt)
        goto oom;
    rt->opts = opts;
    rt->n = opts.shards;
    rt->stop_efd = -1;
    rt->shards = aligned_alloc(64, sizeof(nf_shard_t) * rt->n);
    rt->rings = aligned_alloc(64, sizeof(nf_ring_t) * rt->n * rt->n);
    rt->inbox = aligned_alloc(64, sizeof(nf_ring_t) * rt->n);
    rt->inbox_lock = calloc(rt->n, sizeof(pthread_mutex_t));
    if (!rt->shards || !rt->rings || !rt->inbox || !rt->inbox_lock) {
        free(rt->shards);
        free(rt->rings);
        free(rt->inbox);
        free(rt->inbox_lock);
        free(rt);
        goto oom;
    }
    memset(rt->shards, 0, sizeof(nf_shard_t) * rt->n);
    memset(rt->rings, 0, sizeof(nf_ring_t) * rt->n * rt->n);
    memset(rt->inbox, 0, sizeof(nf_ring_t) * rt->n);
    pthread_mutex_init(&rt->start_lock, NULL);
    pthread_cond_init(&rt->start_cond, NULL);
    for (unsigned i = 0; i < rt->n; i++) {
        nf_shard_t *sh = &rt->shards[i];
        sh->rt = rt;
        sh->index = i;
        sh->efd = -1;
        atomic_store(&sh->busy, 1);
        sh->busy_local = true;
        pthread_mutex_init(&rt->inbox_lock[i], NULL);
    }
    bool ok = true;
    for (size_t i = 0; i < (size_t)rt->n * rt->n && ok; i++)
        ok = nf_ring_init(&rt->rings[i], opts.ring_capacity) == 0;
    for (unsigned i = 0; i < rt->n && ok; i++)
        ok = nf_ring_init(&rt->inbox[i], opts.ring_capacity) == 0;
    for (unsigned i = 0; i < rt->n && ok; i++) {
        rt->shards[i].efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        ok = rt->shards[i].efd >= 0;
    }
    if (ok) {
        rt->stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        ok = rt->stop_efd >= 0;
    }
    if (!ok) {
        snprintf(err, errlen, "runtime: cannot allocate %u shards with rings of %u slots: %s",
                 rt->n, opts.ring_capacity, strerror(errno ? errno : ENOMEM));
        nf_runtime_destroy(rt);
        return NULL;
    }

    /* Metrics: a registry already sized for fewer writers (tests making several runtimes)
     * still works; shards beyond it count as the external writer. */
    (void)nf_metrics_init(rt->n);
    nf_metrics_counter_fn("newsflow_runtime_busy_seconds_total",
                          "Time the shards spent in loop iterations that found work (actors, "
                          "timers, I/O and the HTTP server on the loops); with "
                          "newsflow_http_loop_seconds_total, each side's share.",
                          NULL, busy_seconds, NULL);
    nf_metrics_counter("newsflow_runtime_messages_sent_total", "Messages published to shard rings.",
                       NULL, 0, &rt->m_sent);
    nf_metrics_counter("newsflow_runtime_messages_received_total", "Messages handled by shards.",
                       NULL, 0, &rt->m_received);
    nf_metrics_counter("newsflow_runtime_ring_full_total",
                       "Sends refused by a full ring (backpressure).", NULL, 0, &rt->m_full);
    nf_metrics_counter("newsflow_runtime_wakeups_total", "Sleeping shards woken by a producer.",
                       NULL, 0, &rt->m_wakeups);
    nf_metrics_counter("newsflow_runtime_messages_dropped_total",
                       "Messages undelivered at a forced shutdown.", NULL, 0, &rt->m_dropped);
    nf_metrics_gauge("newsflow_runtime_timers", "Armed timers.", NULL, NF_METRIC_PER_SHARD,
                     &rt->m_timers);
    nf_metrics_gauge("newsflow_runtime_inbound_depth",
                     "Messages waiting in a shard's inbound rings.", NULL, NF_METRIC_PER_SHARD,
                     &rt->m_inbound);
    return rt;
oom:
    snprintf(err, errlen, "runtime: out of memory");
    return NULL;
}

int nf_runtime_register(nf_runtime_t *rt, const nf_actor_ops_t *ops, void *ctx)
{
    if (rt->started)
        return -EBUSY;
    if (rt->nactors >= NF_MAX_ACTORS)
        return -ENOSPC;
    if (!ops || !ops->handle)
        return -EINVAL;
    rt->ops[rt->nactors] = ops;
    rt->ctx[rt->nactors] = ctx;
    return rt->nactors++;
}

unsigned nf_runtime_shard_count(const nf_runtime_t *rt)
{
    return rt->n;
}

unsigned nf_route(const nf_runtime_t *rt, uint64_t key)
{
    /* splitmix64 finaliser, then multiply-shift onto [0, n). */
    key ^= key >> 30;
    key *= 0xbf58476d1ce4e5b9ull;
    key ^= key >> 27;
    key *= 0x94d049bb133111ebull;
    key ^= key >> 31;
    return (unsigned)(((unsigned __int128)key * rt->n) >> 64);
}

/* ---------------------------------------------------------------- shard side */

unsigned nf_shard_index(const nf_shard_t *sh)
{
    return sh->index;
}

nf_runtime_t *nf_shard_runtime(nf_shard_t *sh)
{
    return sh->rt;
}

void *nf_shard_actor(nf_shard_t *sh, int actor)
{
    return (actor >= 0 && actor < sh->rt->nactors) ? sh->actors[actor] : NULL;
}

uint64_t nf_shard_loops(const nf_shard_t *sh)
{
    return atomic_load_explicit(&sh->iterations, memory_order_relaxed);
}

uint64_t nf_shard_now(const nf_shard_t *sh)
{
    return sh->now;
}

bool nf_shard_stopping(const nf_shard_t *sh)
{
    return sh->stop_called;
}

void nf_actor_schedule(nf_shard_t *sh, int actor)
{
    if (actor >= 0 && actor < sh->rt->nactors)
        sh->sched_mask |= 1u << actor;
}

static void publish_ring(nf_shard_t *sh, unsigned dst)
{
    nf_ring_t *r = ring_of(sh->rt, sh->index, dst);
    uint64_t n = nf_ring_publish(r);
    if (n) {
        sh->pending_sent += n;
        if (dst != sh->index)
            shard_wake(&sh->rt->shards[dst]);
    }
}

int nf_send(nf_shard_t *sh, unsigned dst, const nf_msg_t *m)
{
    assert(current_shard == sh);
    nf_runtime_t *rt = sh->rt;
    if (dst >= rt->n)
        return -EINVAL;
    nf_ring_t *r = ring_of(rt, sh->index, dst);
    nf_msg_t copy = *m;
    copy.src = (uint16_t)sh->index;
    if (!nf_ring_put(r, &copy)) {
        /* Make what we have visible so the consumer can free space, then register. */
        publish_ring(sh, dst);
        atomic_fetch_add_explicit(&sh->ring_full, 1, memory_order_relaxed);
        nf_counter_inc(rt->m_full);
        if (nf_ring_mark_waiting(r))
            atomic_store_explicit(&sh->resume_pending, 1, memory_order_relaxed);
        return -EAGAIN;
    }
    if (nf_ring_unpublished(r) >= rt->opts.batch)
        publish_ring(sh, dst);
    return 0;
}

void nf_shard_flush(nf_shard_t *sh)
{
    for (unsigned d = 0; d < sh->rt->n; d++)
        publish_ring(sh, d);
}

/* ---------------------------------------------------------------- timers */

void nf_timer_arm(nf_shard_t *sh, nf_timer_t *t, uint64_t deadline_ns, uint64_t period_ns)
{
    nf_wheel_arm(&sh->wheel, t, deadline_ns, period_ns);
}

void nf_timer_cancel(nf_shard_t *sh, nf_timer_t *t)
{
    nf_wheel_cancel(&sh->wheel, t);
}

/* Before anything that may send: nf_runtime_quiescent must not judge the shard idle until the
 * iteration's messages are published (the end of the iteration clears it). */
static inline void mark_busy(nf_shard_t *sh)
{
    if (!sh->busy_local) {
        sh->busy_local = true;
        atomic_store_explicit(&sh->busy, 1, memory_order_seq_cst);
    }
}

/* After the iteration's messages are published. */
static inline void go_idle(nf_shard_t *sh)
{
    if (sh->busy_local) {
        sh->busy_local = false;
        atomic_store_explicit(&sh->busy, 0, memory_order_release);
    }
}

/* The messages published since the last call, added to `sent` (after nf_shard_flush). */
static void count_sent(nf_shard_t *sh)
{
    if (sh->pending_sent) {
        atomic_fetch_add_explicit(&sh->sent, sh->pending_sent, memory_order_release);
        nf_counter_add(sh->rt->m_sent, sh->pending_sent);
        sh->pending_sent = 0;
    }
}

static void fire_timer(void *ctx, nf_timer_t *t)
{
    mark_busy((nf_shard_t *)ctx);
    t->fn((nf_shard_t *)ctx, t, t->arg);
}

/* ---------------------------------------------------------------- io_uring */

static struct io_uring_sqe *get_sqe(nf_shard_t *sh)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&sh->uring);
    if (!sqe) {
        io_uring_submit(&sh->uring);
        sqe = io_uring_get_sqe(&sh->uring);
    }
    return sqe; /* non-NULL: the SQ was just emptied */
}

static void arm_wake_read(nf_shard_t *sh)
{
    struct io_uring_sqe *sqe = get_sqe(sh);
    io_uring_prep_read(sqe, sh->efd, &sh->efd_buf, sizeof sh->efd_buf, 0);
    io_uring_sqe_set_data64(sqe, TAG_WAKE);
}

static void watch_arm(nf_shard_t *sh, nf_watch_t *w)
{
    struct io_uring_sqe *sqe = get_sqe(sh);
    io_uring_prep_poll_add(sqe, w->fd, w->events);
    io_uring_sqe_set_data(sqe, w);
    w->armed = true;
}

static void watch_cancel_poll(nf_shard_t *sh, nf_watch_t *w)
{
    struct io_uring_sqe *sqe = get_sqe(sh);
    io_uring_prep_poll_remove(sqe, (uint64_t)(uintptr_t)w);
    io_uring_sqe_set_data64(sqe, TAG_IGNORE);
}

static void watch_free(nf_watch_t *w)
{
    *w->pprev = w->next;
    if (w->next)
        w->next->pprev = w->pprev;
    free(w);
}

nf_watch_t *nf_watch_add(nf_shard_t *sh, int fd, unsigned events, nf_watch_fn fn, void *arg)
{
    nf_watch_t *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->next = sh->watches;
    w->pprev = &sh->watches;
    if (sh->watches)
        sh->watches->pprev = &w->next;
    sh->watches = w;
    w->fd = fd;
    w->events = events;
    w->fn = fn;
    w->arg = arg;
    if (events)
        watch_arm(sh, w);
    return w;
}

void nf_watch_modify(nf_shard_t *sh, nf_watch_t *w, unsigned events)
{
    if (w->events == events)
        return;
    w->events = events;
    if (w->armed)
        watch_cancel_poll(sh, w); /* the poll completes with -ECANCELED and is re-armed */
    else if (!w->in_callback && events)
        watch_arm(sh, w);
}

void nf_watch_quiet(nf_watch_t *w)
{
    w->quiet = true;
}

void nf_watch_remove(nf_shard_t *sh, nf_watch_t *w)
{
    w->dead = true;
    if (w->armed)
        watch_cancel_poll(sh, w);
    else if (!w->in_callback)
        watch_free(w);
}

static void watch_complete(nf_shard_t *sh, nf_watch_t *w, int res)
{
    w->armed = false;
    if (w->dead) {
        watch_free(w);
        return;
    }
    if (!w->quiet)
        mark_busy(sh);
    if (res >= 0) {
        w->in_callback = true;
        w->fn(sh, w->fd, (unsigned)res, w->arg);
        w->in_callback = false;
        if (w->dead) {
            watch_free(w);
            return;
        }
    } else if (res != -ECANCELED) {
        /* A poll that fails (bad fd) reports it as an error event, once. */
        w->in_callback = true;
        w->fn(sh, w->fd, POLLERR, w->arg);
        w->in_callback = false;
        if (w->dead)
            watch_free(w);
        return;
    }
    if (w->events && !w->armed)
        watch_arm(sh, w);
}

/* Handles every completion already posted; returns how many. Never blocks. */
static unsigned reap(nf_shard_t *sh)
{
    struct io_uring_cqe *cqe;
    unsigned count = 0;
    while (count < URING_ENTRIES && io_uring_peek_cqe(&sh->uring, &cqe) == 0) {
        uint64_t ud = io_uring_cqe_get_data64(cqe);
        int res = cqe->res;
        /* Seen before the callback runs, which may submit new work. */
        io_uring_cqe_seen(&sh->uring, cqe);
        count++;
        if (ud == TAG_WAKE)
            arm_wake_read(sh);
        else if (ud != TAG_IGNORE)
            watch_complete(sh, (nf_watch_t *)(uintptr_t)ud, res);
    }
    /* Poll (re)arms made by callbacks or actors go to the kernel now, not at the next sleep. */
    if (io_uring_sq_ready(&sh->uring))
        io_uring_submit(&sh->uring);
    return count;
}

/* ---------------------------------------------------------------- the loop */

/* The caller's or the message's reference to a call; the last one frees it. */
static void call_release(nf_call_t *c)
{
    if (atomic_fetch_sub(&c->refs, 1) == 1) {
        pthread_mutex_destroy(&c->lock);
        pthread_cond_destroy(&c->cond);
        free(c);
    }
}

static void handle_sys(nf_shard_t *sh, const nf_msg_t *m)
{
    if (m->kind == NF_SYS_CALL) {
        nf_call_t *c = m->body.ptr;
        c->fn(sh, c->arg);
        pthread_mutex_lock(&c->lock);
        c->done = true;
        pthread_cond_signal(&c->cond);
        pthread_mutex_unlock(&c->lock);
        call_release(c);
    }
}

static void dispatch(nf_shard_t *sh, const nf_msg_t *m)
{
    if (m->actor == NF_SYS_ACTOR) {
        handle_sys(sh, m);
        return;
    }
    if (m->actor < sh->rt->nactors) {
        sh->rt->ops[m->actor]->handle(sh, sh->actors[m->actor], m);
        return;
    }
    nf_log(NF_LOG_ERROR, "runtime", "message for an unknown actor dropped",
           NF_LI("actor", m->actor), NF_LI("src", m->src), NF_LEND);
}

/* Takes up to budget messages from r; returns how many. Releases nothing. */
static unsigned drain(nf_shard_t *sh, nf_ring_t *r)
{
    uint64_t avail = nf_ring_available(r);
    unsigned take = avail < sh->rt->opts.budget ? (unsigned)avail : sh->rt->opts.budget;
    if (take)
        mark_busy(sh);
    for (unsigned i = 0; i < take; i++)
        dispatch(sh, nf_ring_take(r));
    return take;
}

static bool inbound_nonempty(nf_shard_t *sh)
{
    nf_runtime_t *rt = sh->rt;
    for (unsigned s = 0; s < rt->n; s++)
        if (nf_ring_available(ring_of(rt, s, sh->index)))
            return true;
    return nf_ring_available(&rt->inbox[sh->index]) != 0;
}

typedef enum { HOOK_STOP, HOOK_RESUME } hook_t;

static void call_hook(nf_shard_t *sh, hook_t hook)
{
    nf_runtime_t *rt = sh->rt;
    for (int a = 0; a < rt->nactors; a++) {
        const nf_actor_ops_t *ops = rt->ops[a];
        void (*fn)(nf_shard_t *, void *) = hook == HOOK_STOP ? ops->stop : ops->resume;
        if (fn)
            fn(sh, sh->actors[a]);
    }
}

static void pin_thread(nf_shard_t *sh)
{
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return;
    unsigned want = sh->index % (unsigned)CPU_COUNT(&allowed), seen = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed))
            continue;
        if (seen++ == want) {
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) != 0)
                nf_log(NF_LOG_WARN, "runtime", "cannot pin shard", NF_LI("cpu", cpu), NF_LEND);
            return;
        }
    }
}

static int shard_uring_init(nf_shard_t *sh)
{
    /* Created on the main thread and used only by the shard's thread afterwards; plain flags
     * (SINGLE_ISSUER would tie the ring to the creating thread). */
    return io_uring_queue_init(URING_ENTRIES, &sh->uring, 0);
}

/* ---------------------------------------------------------------- start and exit */

static void join_shards(nf_runtime_t *rt)
{
    for (unsigned i = 0; i < rt->n; i++) {
        if (rt->shards[i].thread_started) {
            pthread_join(rt->shards[i].thread, NULL);
            rt->shards[i].thread_started = false;
        }
    }
}

/* After the shards exited: every message still in a ring or inbox goes to its actor's drop hook
 * (a call's reference is released), counted and logged. */
static void drop_leftovers(nf_runtime_t *rt)
{
    uint64_t dropped = 0;
    for (size_t i = 0; i < (size_t)rt->n * rt->n + rt->n; i++) {
        nf_ring_t *r =
            i < (size_t)rt->n * rt->n ? &rt->rings[i] : &rt->inbox[i - (size_t)rt->n * rt->n];
        nf_ring_publish(r);
        while (nf_ring_available(r)) {
            const nf_msg_t *m = nf_ring_take(r);
            dropped++;
            if (m->actor == NF_SYS_ACTOR && m->kind == NF_SYS_CALL) {
                call_release(m->body.ptr);
            } else if (m->actor < rt->nactors && rt->ops[m->actor]->drop) {
                rt->ops[m->actor]->drop(rt->ctx[m->actor], m);
            }
        }
        nf_ring_release(r);
    }
    if (dropped) {
        atomic_fetch_add(&rt->dropped, dropped);
        nf_counter_add(rt->m_dropped, dropped);
        nf_log(NF_LOG_ERROR, "runtime", "messages undelivered at shutdown", NF_LI("count", dropped),
               NF_LEND);
    }
}

static void shard_setup(nf_shard_t *sh)
{
    current_shard = sh;
    nf_log_set_thread_shard((int)sh->index);
    nf_metrics_bind_thread(sh->index);
    if (sh->rt->opts.pin)
        pin_thread(sh);
    char name[16];
    snprintf(name, sizeof name, "nf-shard-%u", sh->index);
    pthread_setname_np(pthread_self(), name);
    sh->now = nf_now_ns();
    nf_wheel_init(&sh->wheel, sh->now);
    arm_wake_read(sh);
}

static const char *actor_name(const nf_actor_ops_t *ops)
{
    return ops->name ? ops->name : "(unnamed)";
}

/* Actor a's init on this shard, or the failpoint actor-init:NAME in its place (failpoint.h).
 * 0 with the instance stored, or -1 with the reason in err. */
static int actor_init(nf_shard_t *sh, int a, char *err, size_t errlen)
{
    const nf_actor_ops_t *ops = sh->rt->ops[a];
    char fp[96];
    snprintf(fp, sizeof fp, "actor-init:%s", actor_name(ops));
    sh->actors[a] = NULL;
    err[0] = '\0';
    if (nf_failpoint(fp)) {
        snprintf(err, errlen, "failpoint %s", fp);
        return -1;
    }
    void *self = NULL;
    if (ops->init && ops->init(sh, sh->rt->ctx[a], &self, err, errlen) != 0) {
        if (!err[0])
            snprintf(err, errlen, "init failed without a reason");
        return -1; /* self is discarded: a failing init frees what it built */
    }
    sh->actors[a] = self;
    return 0;
}

/* Keeps the failure of the lowest shard as the start's error (each shard runs its inits until
 * one fails, whatever the others do: a failure every shard has names shard 0). */
static void start_fail(nf_shard_t *sh, int a, const char *reason)
{
    nf_runtime_t *rt = sh->rt;
    pthread_mutex_lock(&rt->start_lock);
    if (!rt->start_failed || sh->index < rt->start_err_shard) {
        snprintf(rt->start_err, sizeof rt->start_err, "actor %s on shard %u: %s",
                 actor_name(rt->ops[a]), sh->index, reason);
        rt->start_err_shard = sh->index;
    }
    rt->start_failed = true;
    pthread_mutex_unlock(&rt->start_lock);
}

/* The inits in registration order, until one fails; returns how many succeeded (the actors
 * whose fini this shard owes). */
static int shard_init_actors(nf_shard_t *sh)
{
    nf_runtime_t *rt = sh->rt;
    char err[384];
    for (int a = 0; a < rt->nactors; a++) {
        if (actor_init(sh, a, err, sizeof err) != 0) {
            start_fail(sh, a, err);
            return a;
        }
    }
    return rt->nactors;
}

/* Reports this shard's inits as done and waits for nf_runtime_start's verdict: true to enter
 * the loop, false to unwind. */
static bool start_barrier(nf_shard_t *sh)
{
    nf_runtime_t *rt = sh->rt;
    pthread_mutex_lock(&rt->start_lock);
    rt->start_reported++;
    pthread_cond_broadcast(&rt->start_cond);
    while (rt->start_go == 0)
        pthread_cond_wait(&rt->start_cond, &rt->start_lock);
    bool go = rt->start_go > 0;
    pthread_mutex_unlock(&rt->start_lock);
    return go;
}

static void shard_loop(nf_shard_t *sh)
{
    nf_runtime_t *rt = sh->rt;
    uint64_t last_gauges = 0, last_work = 0, prev_start = 0;
    bool prev_worked = false;
    for (;;) {
        sh->now = nf_now_ns();
        if (prev_worked) /* the last iteration's time, counted as busy */
            atomic_fetch_add_explicit(&g_busy_ns, sh->now - prev_start, memory_order_relaxed);
        prev_start = sh->now;
        unsigned work = 0;
        if (!sh->stop_called && atomic_load_explicit(&rt->stop_requested, memory_order_acquire)) {
            mark_busy(sh);
            sh->stop_called = true;
            call_hook(sh, HOOK_STOP);
            atomic_fetch_add(&rt->stop_called_count, 1);
            work++;
        }
        work += (unsigned)nf_wheel_advance(&sh->wheel, sh->now, fire_timer, sh);
        if (atomic_load_explicit(&sh->resume_pending, memory_order_relaxed) &&
            atomic_exchange_explicit(&sh->resume_pending, 0, memory_order_acquire)) {
            mark_busy(sh);
            call_hook(sh, HOOK_RESUME);
            work++;
        }

        unsigned handled = 0;
        for (unsigned s = 0; s < rt->n; s++)
            handled += drain(sh, ring_of(rt, s, sh->index));
        handled += drain(sh, &rt->inbox[sh->index]);

        if (sh->sched_mask) {
            /* One turn each; an actor that schedules itself again runs next iteration, after
             * I/O and the other rings have had theirs. */
            uint32_t mask = sh->sched_mask;
            sh->sched_mask = 0;
            for (int a = 0; a < rt->nactors; a++)
                if ((mask & (1u << a)) && rt->ops[a]->run) {
                    if (!rt->ops[a]->quiet_run)
                        mark_busy(sh);
                    rt->ops[a]->run(sh, sh->actors[a]);
                }
            work++;
        }

        nf_shard_flush(sh);
        if (handled) {
            for (unsigned s = 0; s < rt->n; s++) {
                nf_ring_t *r = ring_of(rt, s, sh->index);
                if (r->tail != atomic_load_explicit(&r->consumed, memory_order_relaxed) &&
                    nf_ring_release(r)) {
                    atomic_store_explicit(&rt->shards[s].resume_pending, 1, memory_order_release);
                    shard_wake(&rt->shards[s]);
                }
            }
            nf_ring_release(&rt->inbox[sh->index]);
        }
        count_sent(sh);
        if (handled) {
            atomic_fetch_add_explicit(&sh->received, handled, memory_order_release);
            nf_counter_add(rt->m_received, handled);
        }
        work += handled;
        go_idle(sh); /* published: quiet work (the HTTP server's sockets) comes next */
        work += reap(sh);
        if (sh->busy_local) { /* a watch's callback may have sent: publish, then idle again */
            nf_shard_flush(sh);
            count_sent(sh);
            go_idle(sh);
        }
        atomic_fetch_add_explicit(&sh->iterations, 1, memory_order_relaxed);

        if (sh->now - last_gauges > 100000000ull) { /* gauges at most every 100 ms */
            last_gauges = sh->now;
            nf_gauge_set(rt->m_timers, (int64_t)sh->wheel.count);
            uint64_t depth = nf_ring_depth(&rt->inbox[sh->index]);
            for (unsigned s = 0; s < rt->n; s++)
                depth += nf_ring_depth(ring_of(rt, s, sh->index));
            nf_gauge_set(rt->m_inbound, (int64_t)depth);
        }

        if (atomic_load_explicit(&rt->exit_now, memory_order_acquire))
            break;
        prev_worked = work || sh->sched_mask;
        if (work || sh->sched_mask) {
            last_work = sh->now;
            continue;
        }
        if (sh->now - last_work < rt->opts.spin_ns) { /* more work is likely soon: poll */
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
            continue;
        }

        /* Nothing to do: publish idleness, then sleep unless something raced in. */
        atomic_store_explicit(&sh->sleeping, 1, memory_order_seq_cst);
        atomic_thread_fence(memory_order_seq_cst); /* pairs with the fence in shard_wake() */
        if (inbound_nonempty(sh) || atomic_load(&sh->resume_pending) ||
            atomic_load(&rt->exit_now) || (!sh->stop_called && atomic_load(&rt->stop_requested))) {
            atomic_store_explicit(&sh->sleeping, 0, memory_order_relaxed);
            continue;
        }
        uint64_t next = nf_wheel_next_ns(&sh->wheel);
        struct io_uring_cqe *cqe;
        if (next == UINT64_MAX) {
            io_uring_submit_and_wait(&sh->uring, 1);
        } else {
            uint64_t now = nf_now_ns();
            uint64_t wait = next > now ? next - now : 0;
            struct __kernel_timespec ts = {.tv_sec = (long long)(wait / 1000000000ull),
                                           .tv_nsec = (long long)(wait % 1000000000ull)};
            io_uring_submit_and_wait_timeout(&sh->uring, &cqe, 1, &ts, NULL);
        }
        atomic_store_explicit(&sh->sleeping, 0, memory_order_relaxed);
    }
}

/* fini for the first ninit actors (all of them after the loop; those whose init ran after a
 * failed start), in registration order. Then the watches left over: removed ones whose poll
 * completion the loop did not reap (the loop is over: nothing reads this io_uring again). */
static void shard_exit(nf_shard_t *sh, int ninit)
{
    nf_runtime_t *rt = sh->rt;
    for (int a = 0; a < ninit; a++)
        if (rt->ops[a]->fini)
            rt->ops[a]->fini(sh, sh->actors[a]);
    while (sh->watches)
        watch_free(sh->watches);
    nf_gauge_set(rt->m_timers, 0);
    nf_gauge_set(rt->m_inbound, 0);
    current_shard = NULL;
}

static void *shard_main(void *arg)
{
    nf_shard_t *sh = arg;
    shard_setup(sh);
    int ninit = shard_init_actors(sh);
    if (start_barrier(sh))
        shard_loop(sh);
    shard_exit(sh, ninit);
    return NULL;
}

/* What an io_uring_setup failure most likely means, for the operator. */
static const char *uring_hint(int err)
{
    switch (err) {
    case EPERM:
    case ENOSYS:
        return "io_uring is blocked: a seccomp profile that does not allow io_uring_setup, "
               "io_uring_enter and io_uring_register (Docker 25+, containerd's and Podman's "
               "defaults; use deploy/seccomp/newsflow.json, README \"Containers\"), or the "
               "sysctl kernel.io_uring_disabled, or a kernel before 5.1";
    case ENOMEM:
        return "the locked-memory limit (ulimit -l, RLIMIT_MEMLOCK) is too low for the rings on "
               "a kernel before 5.12: raise it";
    case EMFILE:
    case ENFILE:
        return "out of file descriptors: raise ulimit -n";
    default:
        return "";
    }
}

static int start_urings(nf_runtime_t *rt)
{
    for (unsigned i = 0; i < rt->n; i++) {
        nf_shard_t *sh = &rt->shards[i];
        int r = shard_uring_init(sh);
        if (r < 0) {
            const char *hint = uring_hint(-r);
            nf_log(NF_LOG_ERROR, "runtime", "io_uring_queue_init failed", NF_LI("shard", i),
                   NF_LS("error", strerror(-r)), NF_LS("hint", hint), NF_LEND);
            snprintf(rt->start_err, sizeof rt->start_err,
                     "io_uring_queue_init failed on shard %u: %s%s%s", i, strerror(-r),
                     hint[0] ? ": " : "", hint);
            return -EIO;
        }
        sh->uring_ok = true;
    }
    return 0;
}

/* Creates the shard threads; returns 0 or -errno with *created the number running. */
static int start_threads(nf_runtime_t *rt, unsigned *created)
{
    /* Shard threads take no process signals: they go to the main thread, and io_uring waits
     * are never interrupted. The mask is inherited from this thread, so set it around create. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int r = 0;
    unsigned i;
    for (i = 0; i < rt->n; i++) {
        nf_shard_t *sh = &rt->shards[i];
        r = pthread_create(&sh->thread, NULL, shard_main, sh);
        if (r != 0) {
            nf_log(NF_LOG_ERROR, "runtime", "cannot start shard thread", NF_LI("shard", i),
                   NF_LS("error", strerror(r)), NF_LEND);
            pthread_mutex_lock(&rt->start_lock); /* the shards started may fail an init */
            snprintf(rt->start_err, sizeof rt->start_err, "cannot start shard thread %u: %s", i,
                     strerror(r));
            rt->start_failed = true;
            rt->start_err_shard = 0; /* no init failure replaces it */
            pthread_mutex_unlock(&rt->start_lock);
            break;
        }
        sh->thread_started = true;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    *created = i;
    return -r;
}

/* Waits until the first `created` shards have reported their inits, then lets them all go, or
 * unwind if an init failed or `fail`. True for go. */
static bool start_verdict(nf_runtime_t *rt, unsigned created, bool fail)
{
    pthread_mutex_lock(&rt->start_lock);
    while (rt->start_reported < created)
        pthread_cond_wait(&rt->start_cond, &rt->start_lock);
    rt->start_go = fail || rt->start_failed ? -1 : 1;
    pthread_cond_broadcast(&rt->start_cond);
    bool go = rt->start_go > 0;
    pthread_mutex_unlock(&rt->start_lock);
    return go;
}

int nf_runtime_start(nf_runtime_t *rt)
{
    if (rt->started)
        return -EALREADY;
    rt->started = true;
    unsigned created = 0;
    int r = start_urings(rt);
    if (r == 0)
        r = start_threads(rt, &created);
    if (start_verdict(rt, created, r != 0))
        return 0;
    /* The shards unwind (fini of what they initialised) and exit; posts are refused from now
     * on and what was sent or posted goes to the drop hooks. */
    atomic_store(&rt->closed, 1);
    join_shards(rt);
    drop_leftovers(rt);
    rt->start_rc = r != 0 ? r : -ECANCELED;
    return rt->start_rc;
}

const char *nf_runtime_start_error(const nf_runtime_t *rt)
{
    return rt->start_rc ? rt->start_err : "";
}

void nf_runtime_request_stop(nf_runtime_t *rt)
{
    /* Async-signal-safe: atomics and write(2) only. */
    if (atomic_exchange(&rt->stop_requested, 1))
        return;
    uint64_t one = 1;
    ssize_t w = write(rt->stop_efd, &one, sizeof one);
    (void)w;
    for (unsigned i = 0; i < rt->n; i++) {
        nf_shard_t *sh = &rt->shards[i];
        atomic_store(&sh->sleeping, 0);
        w = write(sh->efd, &one, sizeof one);
        (void)w;
    }
}

typedef struct {
    uint64_t sent, received;
    bool idle;
} wave_t;

/* One reading of the termination counters; true if balanced and idle. */
static bool read_wave(nf_runtime_t *rt, wave_t *w)
{
    w->sent = atomic_load_explicit(&rt->inbox_posted, memory_order_acquire);
    w->received = 0;
    for (unsigned i = 0; i < rt->n; i++) {
        w->sent += atomic_load_explicit(&rt->shards[i].sent, memory_order_acquire);
        w->received += atomic_load_explicit(&rt->shards[i].received, memory_order_acquire);
    }
    w->idle = true;
    for (unsigned i = 0; i < rt->n && w->idle; i++) {
        nf_shard_t *sh = &rt->shards[i];
        w->idle = !atomic_load_explicit(&sh->busy, memory_order_acquire) &&
                  !atomic_load_explicit(&sh->resume_pending, memory_order_acquire);
        for (unsigned d = 0; d < rt->n && w->idle; d++)
            w->idle = !atomic_load_explicit(&ring_of(rt, i, d)->waiting, memory_order_acquire);
    }
    return w->idle && w->sent == w->received;
}

bool nf_runtime_stop_requested(const nf_runtime_t *rt)
{
    return atomic_load(&rt->stop_requested);
}

void nf_runtime_fail(nf_runtime_t *rt)
{
    atomic_store(&rt->failed, 1);
    nf_runtime_request_stop(rt);
}

bool nf_runtime_failed(const nf_runtime_t *rt)
{
    return atomic_load(&rt->failed);
}

bool nf_runtime_quiescent(nf_runtime_t *rt)
{
    wave_t a, b;
    struct timespec ts = {0, 20000};
    /* A shard that just ran a call (the epoch's drain probes are calls) spins for spin_ns before
     * it publishes that it is idle: judging at once found it busy, and the next probe made it
     * busy again, so a drain could go round for hundreds of ms until the timing happened to
     * let a reading in. Give the shards their spin (and a little more) to settle first. */
    uint64_t until = nf_now_ns() + rt->opts.spin_ns + 200000;
    while (!read_wave(rt, &a)) {
        if (nf_now_ns() >= until)
            return false;
        nanosleep(&ts, NULL);
    }
    nanosleep(&ts, NULL);
    return read_wave(rt, &b) && a.sent == b.sent && a.received == b.received;
}

int nf_runtime_wait(nf_runtime_t *rt)
{
    if (!rt->started)
        return -EINVAL;
    if (rt->start_rc)
        return rt->start_rc; /* the failed start joined the shards already */
    struct pollfd pfd = {.fd = rt->stop_efd, .events = POLLIN};
    while (!atomic_load(&rt->stop_requested))
        poll(&pfd, 1, 1000);

    int result = 0;
    uint64_t deadline = nf_now_ns() + (uint64_t)rt->opts.shutdown_timeout_ms * 1000000ull;
    wave_t prev = {0};
    bool have_prev = false;
    for (;;) {
        wave_t cur;
        bool quiet = atomic_load(&rt->stop_called_count) == rt->n && read_wave(rt, &cur);
        if (quiet && have_prev && cur.sent == prev.sent && cur.received == prev.received)
            break;
        have_prev = quiet;
        if (quiet)
            prev = cur;
        if (nf_now_ns() > deadline) {
            result = -ETIMEDOUT;
            nf_log(NF_LOG_ERROR, "runtime", "shutdown timed out; forcing exit",
                   NF_LI("timeout_ms", rt->opts.shutdown_timeout_ms), NF_LEND);
            break;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    atomic_store(&rt->closed, 1);
    atomic_store(&rt->exit_now, 1);
    uint64_t one = 1;
    for (unsigned i = 0; i < rt->n; i++) {
        ssize_t w = write(rt->shards[i].efd, &one, sizeof one);
        (void)w;
    }
    join_shards(rt);
    /* Whatever is left (only after a forced exit) goes to the actors' drop hooks. */
    drop_leftovers(rt);
    return result;
}

void nf_runtime_destroy(nf_runtime_t *rt)
{
    if (!rt)
        return;
    if (rt->started) {
        bool running = false;
        for (unsigned i = 0; i < rt->n; i++)
            running |= rt->shards[i].thread_started;
        if (running) {
            nf_runtime_request_stop(rt);
            nf_runtime_wait(rt);
        }
    }
    for (unsigned i = 0; i < rt->n; i++) {
        nf_shard_t *sh = &rt->shards[i];
        if (sh->uring_ok)
            io_uring_queue_exit(&sh->uring);
        if (sh->efd >= 0)
            close(sh->efd);
        pthread_mutex_destroy(&rt->inbox_lock[i]);
        nf_ring_destroy(&rt->inbox[i]);
    }
    for (size_t i = 0; i < (size_t)rt->n * rt->n; i++)
        nf_ring_destroy(&rt->rings[i]);
    if (rt->stop_efd >= 0)
        close(rt->stop_efd);
    pthread_mutex_destroy(&rt->start_lock);
    pthread_cond_destroy(&rt->start_cond);
    free(rt->shards);
    free(rt->rings);
    free(rt->inbox);
    free(rt->inbox_lock);
    free(rt);
}

/* ---------------------------------------------------------------- other threads */

int nf_runtime_post(nf_runtime_t *rt, unsigned shard, const nf_msg_t *m)
{
    if (shard >= rt->n)
        return -EINVAL;
    if (atomic_load(&rt->closed))
        return -ESHUTDOWN;
    nf_msg_t copy = *m;
    copy.src = NF_SHARD_EXTERNAL;
    pthread_mutex_lock(&rt->inbox_lock[shard]);
    bool ok = nf_ring_put(&rt->inbox[shard], &copy);
    if (ok) {
        /* Count before publishing so a wave never sees the message received but not sent. */
        atomic_fetch_add(&rt->inbox_posted, 1);
        nf_counter_inc(rt->m_sent);
        nf_ring_publish(&rt->inbox[shard]);
    }
    pthread_mutex_unlock(&rt->inbox_lock[shard]);
    if (!ok)
        return -EAGAIN;
    shard_wake(&rt->shards[shard]);
    return 0;
}

/* A call of fn(arg) posted to shard: *out, or -ENOMEM / nf_runtime_post's error. */
static int call_post(nf_runtime_t *rt, unsigned shard, nf_call_fn fn, void *arg, nf_call_t **out)
{
    nf_call_t *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->fn = fn;
    c->arg = arg;
    pthread_mutex_init(&c->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cond, &ca);
    pthread_condattr_destroy(&ca);
    atomic_store(&c->refs, 2);
    nf_msg_t m = {.actor = NF_SYS_ACTOR, .kind = NF_SYS_CALL};
    m.body.ptr = c;
    int r = nf_runtime_post(rt, shard, &m);
    if (r < 0) {
        pthread_mutex_destroy(&c->lock);
        pthread_cond_destroy(&c->cond);
        free(c);
        return r;
    }
    *out = c;
    return 0;
}

/* Waits until the call ran or until (CLOCK_MONOTONIC), then lets go of it: 0 or -ETIMEDOUT. */
static int call_wait(nf_call_t *c, const struct timespec *until)
{
    int r = 0;
    pthread_mutex_lock(&c->lock);
    while (!c->done && r == 0)
        r = pthread_cond_timedwait(&c->cond, &c->lock, until) == ETIMEDOUT ? -ETIMEDOUT : 0;
    if (c->done)
        r = 0;
    pthread_mutex_unlock(&c->lock);
    call_release(c);
    return r;
}

int nf_runtime_call(nf_runtime_t *rt, unsigned shard, nf_call_fn fn, void *arg, int timeout_ms)
{
    nf_call_t *c;
    int r = call_post(rt, shard, fn, arg, &c);
    if (r < 0)
        return r;
    struct timespec until = nf_deadline_after(CLOCK_MONOTONIC, (unsigned)timeout_ms);
    return call_wait(c, &until);
}

int nf_runtime_call_all(nf_runtime_t *rt, nf_call_fn fn, void *arg, int timeout_ms,
                        unsigned *failed)
{
    nf_call_t *calls[NF_MAX_SHARDS];
    int first = 0;
    unsigned posted = 0;
    for (; posted < rt->n; posted++) {
        first = call_post(rt, posted, fn, arg, &calls[posted]);
        if (first < 0) {
            *failed = posted;
            break;
        }
    }
    struct timespec until = nf_deadline_after(CLOCK_MONOTONIC, (unsigned)timeout_ms);
    for (unsigned s = 0; s < posted; s++) { /* every posted call is waited for (or let go of) */
        int r = call_wait(calls[s], &until);
        if (r < 0 && first == 0) {
            first = r;
            *failed = s;
        }
    }
    return first;
}

void nf_runtime_stats(const nf_runtime_t *rt, nf_runtime_stats_t *out)
{
    memset(out, 0, sizeof *out);
    out->sent = atomic_load_explicit(&rt->inbox_posted, memory_order_relaxed);
    for (unsigned i = 0; i < rt->n; i++) {
        const nf_shard_t *sh = &rt->shards[i];
        out->sent += atomic_load_explicit(&sh->sent, memory_order_relaxed);
        out->received += atomic_load_explicit(&sh->received, memory_order_relaxed);
        out->ring_full += atomic_load_explicit(&sh->ring_full, memory_order_relaxed);
        out->wakeups += atomic_load_explicit(&sh->wakeups, memory_order_relaxed);
    }
    out->dropped_at_shutdown = atomic_load_explicit(&rt->dropped, memory_order_relaxed);
}
