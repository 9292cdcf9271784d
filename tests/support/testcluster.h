/* testcluster.h — what the story-cluster engine's tests and bench_cluster share: equality of two
 * results, and one epoch of an index committed into its store the way the epoch module does it
 * (snapshot, pending record, apply, committed: what makes entries evictable). Test code only. */
#ifndef NF_TESTCLUSTER_H
#define NF_TESTCLUSTER_H

#include "engine/cluster.h"
#include "state/store.h"

#include <stdbool.h>
#include <stdint.h>

/* Same action, cluster id, similarity, merged ids (and counts) and candidates verified. */
bool nf_testcluster_same(const nf_cluster_result_t *a, const nf_cluster_result_t *b);
/* Commits epoch of cl into st. 0, or -1 (message on stderr). */
int nf_testcluster_commit(nf_cluster_t *cl, nf_store_t *st, uint64_t epoch);

#endif
