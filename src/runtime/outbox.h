/* outbox.h — messages a full ring refused, kept in order until the ring has room again.
 *
 * nf_send() never blocks and never drops: on -EAGAIN the sender keeps the message. An actor that
 * sends to several shards and cannot stop its own input at once (dedup fanning an article out to
 * the cluster shard and every interest shard) keeps them here: nf_outbox_send() sends at once
 * when nothing is waiting for that destination, else appends; nf_outbox_drain(), called from the
 * actor's `resume` hook, re-sends in order and stops at the first refusal per destination. Order
 * per destination is therefore the order of nf_outbox_send() calls.
 *
 * Memory: one growable FIFO per destination shard, allocated on first use; its size is the
 * backpressure signal (nf_outbox_held) the owner exports as a gauge and reports as `busy` to the
 * epoch cut (a held message is neither sent nor handled, so a cut must wait for it).
 *
 * One shard owns an outbox; every call on its thread. */
#ifndef NF_OUTBOX_H
#define NF_OUTBOX_H

#include "runtime/runtime.h"

#include <stddef.h>

typedef struct nf_outbox_q {
    nf_msg_t *v;
    size_t head, len, cap; /* a ring over v[cap] */
} nf_outbox_q_t;

typedef struct nf_outbox {
    nf_outbox_q_t q[NF_MAX_SHARDS];
    size_t held;
} nf_outbox_t;

/* Sends m to shard dst now, or keeps it after the ones already waiting for dst. 0, or -ENOMEM
 * (not sent, not kept: the caller still owns m's body). */
int nf_outbox_send(nf_shard_t *sh, nf_outbox_t *ob, unsigned dst, const nf_msg_t *m);

/* Re-sends what waits, in order per destination. Returns how many are still held. */
size_t nf_outbox_drain(nf_shard_t *sh, nf_outbox_t *ob);

static inline size_t nf_outbox_held(const nf_outbox_t *ob)
{
    return ob->held;
}

/* Frees the queues; held messages are handed to drop(ctx, m) first (shutdown timeout). */
void nf_outbox_free(nf_outbox_t *ob, void (*drop)(void *ctx, const nf_msg_t *m), void *ctx);

#endif
