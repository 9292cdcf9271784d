/* ring.c — allocation of nf_ring_t; the operations are inline in ring.h. */
#include "runtime/ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int nf_ring_init(nf_ring_t *r, uint32_t capacity)
{
    memset(r, 0, sizeof *r);
    if (capacity < 2 || (capacity & (capacity - 1)))
        return -EINVAL;
    r->slots = aligned_alloc(64, (size_t)capacity * sizeof(nf_msg_t));
    if (!r->slots)
        return -ENOMEM;
    r->mask = capacity - 1;
    return 0;
}

void nf_ring_destroy(nf_ring_t *r)
{
    free(r->slots);
    r->slots = NULL;
}
