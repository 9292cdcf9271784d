/* runtime.h — newsflow's thread-per-core runtime: shards, message rings, actors, timers, fds.
 *
 * Shape (docs/ARCHITECTURE.md §2, "Processes and threads"). A runtime owns N shards; each shard is
 * one thread with its own io_uring, timer wheel and one instance of every registered actor type.
 * Shards share nothing mutable: they talk through bounded single-producer/single-consumer rings,
 * one per ordered pair of shards (a shard's ring to itself included), plus one inbox per shard for
 * non-shard threads (the admin server, the main thread), whose producers serialise on a mutex.
 *
 * Messages are 64-byte values copied into ring slots. nf_send() writes the slot at once but
 * *publishes* in batches: at the end of the shard's loop iteration, or when `batch` messages are
 * pending on that ring. A full ring is backpressure: nf_send() returns -EAGAIN, nothing is
 * dropped, the sender keeps the message and its actor's `resume` hook runs once the consumer
 * has freed space. A shard with nothing to do sleeps in io_uring_submit_and_wait(); producers
 * wake it with an eventfd write only when it is asleep, so a busy pipeline makes no syscalls per
 * message.
 *
 * Threads. Functions taking an nf_shard_t * run on that shard's thread only (from actor hooks,
 * timer and fd callbacks). nf_runtime_post/call/request_stop are for other threads.
 *
 * Start. nf_runtime_start() returns once every shard has run every actor's `init` (in
 * registration order). No shard handles a message or fires a timer before all have. If an init
 * fails, no shard enters its loop: each calls `fini` on the actors whose init succeeded there,
 * the threads are joined, whatever was sent or posted goes to the `drop` hooks, and
 * nf_runtime_start() returns -ECANCELED with "actor NAME on shard N: REASON" in
 * nf_runtime_start_error(). Whatever an init registered elsewhere (an epoch participant) then
 * points at a freed instance: its owner must not run (src/job/job.c starts the epoch coordinator
 * only after a successful start, and frees it unstarted otherwise).
 * NEWSFLOW_FAILPOINTS=actor-init:NAME makes NAME's init fail on every shard (failpoint.h).
 *
 * Shutdown. nf_runtime_request_stop() (async-signal-safe) makes every shard call each actor's
 * `stop` hook; from then on an actor must only react to messages it receives (its timers and fd
 * watches cancelled), so in-flight messages drain. When no shard has work and every ring is
 * empty (detected with per-shard sent/received counters read twice), shards call `fini` and
 * exit. If that has not happened within shutdown_timeout_ms, shards exit anyway and undelivered
 * messages are passed to their actor's `drop` hook and counted (nf_runtime_wait returns
 * -ETIMEDOUT).
 */
#ifndef NF_RUNTIME_H
#define NF_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef struct nf_runtime nf_runtime_t;
typedef struct nf_shard nf_shard_t;

#define NF_SHARD_EXTERNAL 0xffffu /* nf_msg_t.src of a message posted by a non-shard thread */
#define NF_MAX_SHARDS     256
#define NF_MAX_ACTORS     32

typedef struct nf_msg {
    uint16_t actor; /* destination actor type (id from nf_runtime_register) */
    uint16_t kind;  /* actor-defined */
    uint16_t src;   /* set by the runtime: sending shard or NF_SHARD_EXTERNAL */
    uint16_t flags; /* actor-defined */
    uint32_t len;   /* actor-defined (e.g. bytes used in body) */
    uint32_t seq;   /* actor-defined */
    uint64_t key;   /* routing key, for nf_route() */
    union {
        void *ptr; /* ownership passes with the message; free it in handle (or drop) */
        uint64_t u64[5];
        unsigned char bytes[40];
    } body;
} nf_msg_t;
_Static_assert(sizeof(nf_msg_t) == 64, "a message is one cache line");

typedef struct nf_actor_ops {
    const char *name;
    /* Optional: on the shard thread before any message (see "Start" above). 0 with the
     * shard's instance in *self (NULL to start with; may stay NULL), or -1 with a one-line
     * reason in err (errlen bytes: what failed and, where it helps, what the operator can do).
     * A failing init frees what it built: the runtime ignores *self and calls no fini for this
     * actor on this shard. Register nowhere the runtime cannot undo (nf_epoch_participant_add)
     * before the last step that can fail. */
    int (*init)(nf_shard_t *sh, void *ctx, void **self, char *err, size_t errlen);
    /* One message. Runs to completion; must not block. */
    void (*handle)(nf_shard_t *sh, void *self, const nf_msg_t *m);
    /* Optional: a turn asked for with nf_actor_schedule(); do a bounded amount of work. */
    void (*run)(nf_shard_t *sh, void *self);
    /* Optional: a ring that refused this shard's nf_send() has space again. */
    void (*resume)(nf_shard_t *sh, void *self);
    /* Optional: stop intake (cancel timers and watches); afterwards only react to messages. */
    void (*stop)(nf_shard_t *sh, void *self);
    /* Optional: after the drain, on the shard thread; free the instance. After a failed start,
     * called without `stop` before it, straight after init. */
    void (*fini)(nf_shard_t *sh, void *self);
    /* Optional: an undelivered message at forced shutdown; free what it owns. Any thread. */
    void (*drop)(void *ctx, const nf_msg_t *m);
    /* Its run hook never sends a message (the HTTP server's deferred connections): like a quiet
     * watch (nf_watch_quiet), its turns do not keep the shard busy for nf_runtime_quiescent. */
    bool quiet_run;
} nf_actor_ops_t;

typedef struct nf_runtime_opts {
    unsigned shards;        /* 0 = online CPUs */
    bool pin;               /* pin shard i to the i-th allowed CPU */
    unsigned ring_capacity; /* slots per ring, power of two */
    unsigned batch;         /* publish after this many pending messages (1 = unbatched) */
    unsigned budget;        /* messages taken from one ring per loop iteration */
    unsigned shutdown_timeout_ms;
    /* A shard that finds no work keeps polling this long after its last work before it sleeps:
     * waking a sleeping shard costs 3-60 us (a halted vCPU on a VM), which a shard exchanging
     * a steady stream with another would otherwise pay again and again. Costs at most this
     * much CPU after each burst of work. 0 = sleep at once. */
    uint64_t spin_ns;
} nf_runtime_opts_t;

/* Defaults: shards 0, pin false, ring_capacity 1024, batch 64, budget 256, timeout 10000,
 * spin 50 us. */
void nf_runtime_opts_default(nf_runtime_opts_t *o);

/* Creates (does not start) a runtime; on failure returns NULL with a message in err. */
nf_runtime_t *nf_runtime_create(const nf_runtime_opts_t *o, char *err, size_t errlen);
/* Before start. Returns the actor id (>= 0) or -errno. ctx is passed to init and drop. */
int nf_runtime_register(nf_runtime_t *rt, const nf_actor_ops_t *ops, void *ctx);
/* Starts the shard threads and waits until every shard has run its inits. 0, or -ECANCELED if
 * an init failed, or another -errno (io_uring or thread creation failed); after a failure no
 * shard runs, nf_runtime_wait returns the same code at once, and destroy still applies. */
int nf_runtime_start(nf_runtime_t *rt);
/* After a failed nf_runtime_start: why, in one line ("actor NAME on shard N: REASON", the lowest
 * shard's when several failed). "" if start did not fail. */
const char *nf_runtime_start_error(const nf_runtime_t *rt);
/* Any thread, async-signal-safe. Idempotent. */
void nf_runtime_request_stop(nf_runtime_t *rt);
/* Any thread: has a stop been requested (by a signal handler, an actor, a failed commit)? */
bool nf_runtime_stop_requested(const nf_runtime_t *rt);
/* Any thread, async-signal-safe, idempotent: the job cannot go on (an input it could not apply,
 * state that did not load or could not be read). A stop, and not a clean one: nothing may
 * commit after it (state/epoch.h checks nf_runtime_failed before every commit and skips the
 * final epoch), so the inputs of the epoch in flight are read again after a restart instead of
 * being committed half-applied, and `newsflow run` exits 1. Set before the stop is requested:
 * whoever sees the stop sees the failure. */
void nf_runtime_fail(nf_runtime_t *rt);
bool nf_runtime_failed(const nf_runtime_t *rt);
/* Blocks until every shard thread has exited. 0 after a clean drain, -ETIMEDOUT if the
 * shutdown timeout forced the exit; after a failed start, its code at once. */
int nf_runtime_wait(nf_runtime_t *rt);
void nf_runtime_destroy(nf_runtime_t *rt);

unsigned nf_runtime_shard_count(const nf_runtime_t *rt);
/* Stable key -> shard mapping (a mixed hash, so sequential keys spread). */
unsigned nf_route(const nf_runtime_t *rt, uint64_t key);

/* From a non-shard thread: enqueue m for shard `shard`. 0, -EAGAIN if its inbox is full,
 * -ESHUTDOWN once the runtime stopped. */
int nf_runtime_post(nf_runtime_t *rt, unsigned shard, const nf_msg_t *m);

/* From a non-shard thread: run fn(sh, arg) on shard `shard` and wait for it to return.
 * 0, -ETIMEDOUT (fn may still run later: arg must stay valid or be owned by fn), -EAGAIN
 * (inbox full), -ESHUTDOWN. */
typedef void (*nf_call_fn)(nf_shard_t *sh, void *arg);
int nf_runtime_call(nf_runtime_t *rt, unsigned shard, nf_call_fn fn, void *arg, int timeout_ms);
/* The same on every shard at once (each runs fn(sh, arg) in parallel with the others): waits for
 * all of them, timeout_ms for the whole. 0, or the first error as above with *failed set to
 * that shard (a shard whose call could not be posted gets none, nor do the shards after it). */
int nf_runtime_call_all(nf_runtime_t *rt, nf_call_fn fn, void *arg, int timeout_ms,
                        unsigned *failed);

/* Counters for tests and metrics; safe from any thread. sent and received include messages
 * posted by other threads; at rest they are equal. */
typedef struct nf_runtime_stats {
    uint64_t sent, received, ring_full, wakeups, dropped_at_shutdown;
} nf_runtime_stats_t;
void nf_runtime_stats(const nf_runtime_t *rt, nf_runtime_stats_t *out);

/* Any thread: true if two readings of the shards' counters, a moment apart, both found no
 * message in flight, no shard handling one, no producer waiting for ring space and no pending
 * resume, with equal totals (the test nf_runtime_wait uses to end a drain). Meaningful only
 * while every input is paused (the epoch cut): otherwise new work may start right after. */
bool nf_runtime_quiescent(nf_runtime_t *rt);

/* ---- shard side: call only on the shard's own thread ---- */

unsigned nf_shard_index(const nf_shard_t *sh);
nf_runtime_t *nf_shard_runtime(nf_shard_t *sh);
void *nf_shard_actor(nf_shard_t *sh, int actor); /* this shard's instance of an actor type */
/* CLOCK_MONOTONIC ns, read once per loop iteration (cheap, slightly stale). */
uint64_t nf_shard_now(const nf_shard_t *sh);
/* Loop iterations this shard has ended: a new value, a new iteration (a per-iteration budget). */
uint64_t nf_shard_loops(const nf_shard_t *sh);
/* A fresh clock read. */
uint64_t nf_now_ns(void);
/* The calling thread's CPU time, ns (what a stage costs the shard it runs on). */
uint64_t nf_thread_cpu_ns(void);
/* The time ms from now on clock clk, as pthread_cond_timedwait takes it (a condition variable
 * on that clock). */
struct timespec nf_deadline_after(int clk, unsigned ms);
/* CLOCK_REALTIME in ms since the Unix epoch: the wall clock of outputs, TTLs and idle timeouts
 * (never for intervals: it can jump). Any thread. */
int64_t nf_wall_ms(void);

/* 0 or -EAGAIN (ring full: keep the message, retry from `resume`). m->src is overwritten. */
int nf_send(nf_shard_t *sh, unsigned dst, const nf_msg_t *m);
/* nf_send to the shard that owns m->key (nf_route). */
static inline int nf_send_keyed(nf_shard_t *sh, const nf_msg_t *m)
{
    return nf_send(sh, nf_route(nf_shard_runtime(sh), m->key), m);
}
/* Publish pending messages now (normally done at the end of each loop iteration). */
void nf_shard_flush(nf_shard_t *sh);
/* Ask for a `run` turn of actor `actor` on this shard at the next loop iteration. */
void nf_actor_schedule(nf_shard_t *sh, int actor);
/* Is a stop in progress (after the actors' stop hooks were called on this shard)? */
bool nf_shard_stopping(const nf_shard_t *sh);

/* Timers: intrusive, caller-owned, no allocation. 1 ms resolution; timers due in the same
 * millisecond fire in (deadline, arm order) order. Period 0 = one-shot; a periodic timer is
 * re-armed at deadline + k*period (no drift, missed periods are skipped). A callback may arm
 * or cancel any timer, including its own. */
typedef struct nf_timer nf_timer_t;
typedef void (*nf_timer_fn)(nf_shard_t *sh, nf_timer_t *t, void *arg);
struct nf_timer {
    nf_timer_t *next, **pprev; /* wheel slot list (pprev: the link pointing at us) */
    uint64_t deadline_ns;
    uint64_t period_ns;
    uint64_t expires_tick;
    uint64_t seq;
    nf_timer_fn fn;
    void *arg;
    bool armed;
    uint8_t level; /* wheel bookkeeping: level and slot it sits in, level 0xff off-wheel */
    uint16_t slot;
};
void nf_timer_init(nf_timer_t *t, nf_timer_fn fn, void *arg);
void nf_timer_arm(nf_shard_t *sh, nf_timer_t *t, uint64_t deadline_ns, uint64_t period_ns);
void nf_timer_cancel(nf_shard_t *sh, nf_timer_t *t);
static inline bool nf_timer_armed(const nf_timer_t *t)
{
    return t->armed;
}

/* Readiness of foreign fds (curl sockets, librdkafka queue fds) through the shard's io_uring.
 * Level-triggered: while the fd stays ready for the watched events, the callback keeps being
 * called (once per loop iteration). events are POLLIN/POLLOUT; the callback gets revents. */
typedef struct nf_watch nf_watch_t;
typedef void (*nf_watch_fn)(nf_shard_t *sh, int fd, unsigned revents, void *arg);
/* NULL on allocation failure. */
nf_watch_t *nf_watch_add(nf_shard_t *sh, int fd, unsigned events, nf_watch_fn fn, void *arg);
void nf_watch_modify(nf_shard_t *sh, nf_watch_t *w, unsigned events);
/* Declares that w's callback never sends a message (nf_send), directly or through what it
 * calls: its activity then does not keep the shard busy for nf_runtime_quiescent, so a flood of
 * it (the HTTP server's connections) cannot hold an epoch's drain back. */
void nf_watch_quiet(nf_watch_t *w);
/* The callback is not called after this returns; the memory is released later. */
void nf_watch_remove(nf_shard_t *sh, nf_watch_t *w);

#endif
