/* ring.h — bounded single-producer/single-consumer ring of 64-byte messages.
 *
 * The unit of cross-shard communication (runtime.h). One thread produces, one consumes; the
 * only shared words are `published` (producer -> consumer) and `consumed` (consumer -> producer),
 * each on its own cache line, and each side caches the other's index so an uncontended
 * operation touches no shared line at all. Writes and reads are split from publication so both
 * sides batch: the producer writes slots with nf_ring_put() and makes them visible with one
 * nf_ring_publish(); the consumer reads with nf_ring_peek()/nf_ring_take() and frees the slots
 * with one nf_ring_release().
 *
 * The `waiting` flag is the backpressure handshake: a producer refused by a full ring sets it
 * (nf_ring_put returns false and the caller calls nf_ring_mark_waiting); a consumer that frees
 * slots and sees it set tells the producer's shard to retry. */
#ifndef NF_RING_H
#define NF_RING_H

#include "runtime/runtime.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct nf_ring {
    /* producer-private */
    _Alignas(64) uint64_t head; /* next slot to write */
    uint64_t cached_consumed;   /* last seen `consumed` */
    uint64_t last_published;    /* head at the last publish */
    /* producer -> consumer */
    _Alignas(64) _Atomic uint64_t published;
    /* consumer -> producer */
    _Alignas(64) _Atomic uint64_t consumed;
    _Atomic int waiting;
    /* consumer-private */
    _Alignas(64) uint64_t tail; /* next slot to read */
    uint64_t cached_published;
    /* constant */
    _Alignas(64) uint64_t mask;
    nf_msg_t *slots;
} nf_ring_t;

/* capacity must be a power of two. 0 or -ENOMEM. */
int nf_ring_init(nf_ring_t *r, uint32_t capacity);
void nf_ring_destroy(nf_ring_t *r);

/* ---- producer ---- */

/* Copies m into the next slot (not yet visible). false if the ring is full. */
static inline bool nf_ring_put(nf_ring_t *r, const nf_msg_t *m)
{
    if (r->head - r->cached_consumed > r->mask) {
        r->cached_consumed = atomic_load_explicit(&r->consumed, memory_order_acquire);
        if (r->head - r->cached_consumed > r->mask)
            return false;
    }
    r->slots[r->head & r->mask] = *m;
    r->head++;
    return true;
}

/* Messages written but not yet published. */
static inline uint64_t nf_ring_unpublished(const nf_ring_t *r)
{
    return r->head - r->last_published;
}

/* Makes every written slot visible; returns how many were newly published. */
static inline uint64_t nf_ring_publish(nf_ring_t *r)
{
    uint64_t n = r->head - r->last_published;
    if (n) {
        atomic_store_explicit(&r->published, r->head, memory_order_release);
        r->last_published = r->head;
    }
    return n;
}

/* After a refused put: set the waiting flag, then re-check for space freed in between
 * (returns true if there is space now, so the caller retries at once instead of waiting).
 * In that case the flag is taken back: the consumer may have drained everything already and
 * would never clear it, and a stale flag would make the ring look busy forever. */
static inline bool nf_ring_mark_waiting(nf_ring_t *r)
{
    atomic_store_explicit(&r->waiting, 1, memory_order_seq_cst);
    r->cached_consumed = atomic_load_explicit(&r->consumed, memory_order_seq_cst);
    if (r->head - r->cached_consumed <= r->mask) {
        atomic_store_explicit(&r->waiting, 0, memory_order_relaxed);
        return true;
    }
    return false;
}

/* ---- consumer ---- */

/* Number of published, unread messages (refreshes the cached index when it runs dry). */
static inline uint64_t nf_ring_available(nf_ring_t *r)
{
    uint64_t n = r->cached_published - r->tail;
    if (n == 0) {
        r->cached_published = atomic_load_explicit(&r->published, memory_order_acquire);
        n = r->cached_published - r->tail;
    }
    return n;
}

/* The next unread message; valid until nf_ring_release(). Call only if available() > 0. */
static inline const nf_msg_t *nf_ring_take(nf_ring_t *r)
{
    return &r->slots[r->tail++ & r->mask];
}

/* Frees every taken slot. Returns true if the producer was waiting for space (the flag is
 * cleared; the caller wakes the producer's shard). */
static inline bool nf_ring_release(nf_ring_t *r)
{
    atomic_store_explicit(&r->consumed, r->tail, memory_order_release);
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&r->waiting, memory_order_relaxed))
        return atomic_exchange_explicit(&r->waiting, 0, memory_order_relaxed) != 0;
    return false;
}

/* Published and not yet consumed, as seen from any thread (approximate while both run). */
static inline uint64_t nf_ring_depth(const nf_ring_t *r)
{
    return atomic_load_explicit(&r->published, memory_order_acquire) -
           atomic_load_explicit(&r->consumed, memory_order_acquire);
}

#endif
