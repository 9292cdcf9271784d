/* testcluster.c — see testcluster.h. */
#include "testcluster.h"

#include "teststore.h"

#include <stdio.h>

static bool id_eq(nf_id128_t a, nf_id128_t b)
{
    return a.hi == b.hi && a.lo == b.lo;
}

bool nf_testcluster_same(const nf_cluster_result_t *a, const nf_cluster_result_t *b)
{
    if (a->action != b->action || !id_eq(a->cluster_id, b->cluster_id) ||
        a->similarity != b->similarity || a->merged_count != b->merged_count ||
        a->merged_more != b->merged_more || a->candidates != b->candidates)
        return false;
    for (unsigned k = 0; k < a->merged_count; k++)
        if (!id_eq(a->merged_from[k], b->merged_from[k]))
            return false;
    return true;
}

int nf_testcluster_commit(nf_cluster_t *cl, nf_store_t *st, uint64_t epoch)
{
    nf_store_batch_t *b = nf_store_batch_new();
    if (!b) {
        fprintf(stderr, "commit of epoch %llu: out of memory\n", (unsigned long long)epoch);
        return -1;
    }
    nf_cluster_snapshot(cl, b, epoch);
    int r = nf_teststore_commit(st, epoch, b);
    if (r == 0)
        nf_cluster_committed(cl, epoch);
    nf_store_batch_free(b);
    return r;
}
