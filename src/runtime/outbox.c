/* outbox.c — see outbox.h. */
#include "runtime/outbox.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int q_push(nf_outbox_q_t *q, const nf_msg_t *m)
{
    if (q->len == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 64;
        nf_msg_t *v = malloc(cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        for (size_t i = 0; i < q->len; i++)
            v[i] = q->v[(q->head + i) % q->cap];
        free(q->v);
        q->v = v;
        q->cap = cap;
        q->head = 0;
    }
    q->v[(q->head + q->len) % q->cap] = *m;
    q->len++;
    return 0;
}

int nf_outbox_send(nf_shard_t *sh, nf_outbox_t *ob, unsigned dst, const nf_msg_t *m)
{
    nf_outbox_q_t *q = &ob->q[dst];
    if (q->len == 0 && nf_send(sh, dst, m) == 0)
        return 0;
    if (q_push(q, m) != 0)
        return -ENOMEM;
    ob->held++;
    return 0;
}

size_t nf_outbox_drain(nf_shard_t *sh, nf_outbox_t *ob)
{
    if (ob->held == 0)
        return 0;
    unsigned n = nf_runtime_shard_count(nf_shard_runtime(sh));
    for (unsigned d = 0; d < n; d++) {
        nf_outbox_q_t *q = &ob->q[d];
        while (q->len && nf_send(sh, d, &q->v[q->head]) == 0) {
            q->head = (q->head + 1) % q->cap;
            q->len--;
            ob->held--;
        }
    }
    return ob->held;
}

void nf_outbox_free(nf_outbox_t *ob, void (*drop)(void *ctx, const nf_msg_t *m), void *ctx)
{
    for (unsigned d = 0; d < NF_MAX_SHARDS; d++) {
        nf_outbox_q_t *q = &ob->q[d];
        for (size_t i = 0; drop && i < q->len; i++)
            drop(ctx, &q->v[(q->head + i) % q->cap]);
        free(q->v);
    }
    memset(ob, 0, sizeof *ob);
}
