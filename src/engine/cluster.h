/* cluster.h — the story clustering engine (docs/ARCHITECTURE.md §1, stage "cluster"): MinHash
 * signatures in, cluster assignments out, over keyed state so the index survives restarts
 * (docs/ARCHITECTURE.md §4).
 *
 * An article's signature is split into LSH bands; articles sharing a band key are candidates;
 * a candidate whose estimated Jaccard (fraction of equal signature slots) is >= threshold is a
 * match, and every match unions the two articles' clusters (union-find). A cluster's id is the
 * article_id of its earliest article (by ingested_ms, ties by the smaller id): union is by
 * earliest article, so the union-find root is always the cluster id.
 *
 * State, three kstates (TTL ttl_ms, default 7 days, measured on the engine's clock):
 *   NF_KIND_CLUSTER_SIG     article -> [ingested_ms: i64][signature: hashes x u32], key group
 *                           article.hi % 256;
 *   NF_KIND_CLUSTER_BUCKET  (band key, band) as id {hi = key, lo = band} -> [overflow: u32]
 *                           [article ids: 16 bytes each, at most bucket_cap], key group
 *                           key % 256; ids whose signature expired are pruned when the bucket
 *                           is rewritten; a full bucket counts the articles it refused;
 *   NF_KIND_CLUSTER_PARENT  article -> [parent id: 16 bytes][ingested_ms: i64]; a root is its
 *                           own parent. Key group 0xFFFF, id 0 holds the engine clock.
 * The engine clock is the largest ingested_ms seen (so out-of-order input never moves time
 * back); entries are put with it and read against it, and the store's TTL filter drops them by
 * it too (nf_store_set_clock, the clock of the last committed epoch), never by the wall clock. An
 * expired signature, bucket or parent reads as absent: articles older than ttl_ms no longer match
 * anything. Every join re-puts the root, and a path is compressed when walked, so a node's parent
 * never expires before the node (if it did, the walk stops there and that node acts as the root).
 *
 * Actions (nf_cluster_result_t.action):
 *   NEW        no verified match: the article is a cluster of its own, cluster_id = article,
 *              similarity 0 (no match to report);
 *   JOINED     matched one existing cluster whose id stays (the article is not earlier than
 *              its root); similarity = best verified estimate;
 *   MERGED     the article's matches span clusters and at least one cluster id disappeared:
 *              two or more clusters, or one cluster whose earliest article is later than this
 *              article (out-of-order input). merged_from lists the ids that disappeared
 *              (ascending by (earliest ingested_ms, id)), at most NF_CLUSTER_MERGED_MAX, with
 *              merged_more counting the rest;
 *   DUPLICATE  the article is already indexed: nothing changes (the signature given is ignored)
 *              and cluster_id is its current cluster; similarity 1.
 * An empty signature (a document without words, nf_minhash_is_empty) never becomes a candidate
 * and never matches: the article is NEW (indexed as its own cluster, not put in any bucket).
 *
 * Determinism: the same sequence of adds (and expires) gives the same results, whether the
 * state stayed in memory or went through the store (snapshot, commit, new engine on the store).
 *
 * One shard owns the whole index (the integrator routes every article to it); every call is
 * from that shard's thread. Hot path: no allocation once the scratch buffers are warm (the
 * kstates allocate when they grow), no lock, no syscall unless a cold key is read. */
#ifndef NF_CLUSTER_H
#define NF_CLUSTER_H

#include "algo/idset.h"
#include "state/kstate.h"
#include "state/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NF_CLUSTER_MERGED_MAX 8
#define NF_CLUSTER_DAY_MS     86400000ull

typedef struct nf_cluster_opts {
    unsigned hashes;      /* signature length, default 128 (must match the signer) */
    unsigned bands, rows; /* default 16 x 8; bands x rows == hashes */
    double threshold;     /* verified Jaccard estimate, default 0.85 */
    uint64_t ttl_ms;      /* signatures, buckets, parents; default 7 days; 0 = never */
    unsigned bucket_cap;  /* article ids per bucket, default 32 */
    size_t budget_bytes;  /* per kstate memory budget, default 0 = unlimited */
    /* -1 (default): the key groups above; else every key of the index in this one group (a
     * consumer group: the index belongs to the job's one-partition topic, ingest.h) */
    int32_t key_group;
} nf_cluster_opts_t;

void nf_cluster_opts_default(nf_cluster_opts_t *o);

typedef enum {
    NF_CLUSTER_NEW = 0,
    NF_CLUSTER_JOINED,
    NF_CLUSTER_MERGED,
    NF_CLUSTER_DUPLICATE,
} nf_cluster_action_t;

/* "new", "joined", "merged", "duplicate" (the story-clusters topic's action field). */
const char *nf_cluster_action_name(nf_cluster_action_t a);

typedef struct nf_cluster_result {
    nf_cluster_action_t action;
    nf_id128_t cluster_id;
    double similarity;
    unsigned merged_count; /* entries in merged_from */
    unsigned merged_more;  /* ids that disappeared beyond NF_CLUSTER_MERGED_MAX */
    nf_id128_t merged_from[NF_CLUSTER_MERGED_MAX];
    unsigned candidates; /* distinct live candidates verified (diagnostics) */
} nf_cluster_result_t;

typedef struct nf_cluster nf_cluster_t;

/* st may be NULL (memory only). NULL if the options are inconsistent or on allocation failure. */
nf_cluster_t *nf_cluster_new(nf_store_t *st, const nf_cluster_opts_t *o);
void nf_cluster_free(nf_cluster_t *c);

/* Indexes one article (sig: opts.hashes values) and reports its cluster in *out. 0, -EIO (a
 * state read failed: nf_cluster_error() says which) or -ENOMEM. After an error the state may
 * hold part of the article (bucket entries); adding the same article again completes it. */
int nf_cluster_add(nf_cluster_t *c, nf_id128_t article, int64_t ingested_ms, const uint32_t *sig,
                   nf_cluster_result_t *out);

/* The current cluster of an indexed article: 1 (found), 0 (absent or expired), -EIO. */
int nf_cluster_find(nf_cluster_t *c, nf_id128_t article, nf_id128_t *cluster_id);

/* Barrier and commit, as nf_kstate_snapshot / nf_kstate_committed over the three kstates. */
size_t nf_cluster_snapshot(nf_cluster_t *c, nf_store_batch_t *b, uint64_t epoch);
void nf_cluster_committed(nf_cluster_t *c, uint64_t epoch);
/* Drops entries expired by now_ms and by the engine clock both (the reads go by the engine
 * clock, which lags the wall clock on a replay) from memory, at most max per kstate (0 = all);
 * returns how many. */
size_t nf_cluster_expire(nf_cluster_t *c, uint64_t now_ms, size_t max);

typedef struct nf_cluster_stats {
    nf_kstate_stats_t sig, bucket, parent;
    size_t entries, bytes, used; /* sums over the three (bytes: allocated; kstate.h) */
    uint64_t adds, news, joins, merges, duplicates, empty;
    uint64_t candidates, verified, bucket_overflow;
} nf_cluster_stats_t;
void nf_cluster_stats(const nf_cluster_t *c, nf_cluster_stats_t *out);

/* One of the three kstates is over its budget with nothing left to evict (nf_kstate_over_budget):
 * the owner asks for an early epoch, whose commit lets them evict and give memory back. */
bool nf_cluster_over_budget(const nf_cluster_t *c);

/* Reading the index from a committed view (state/store.h) rather than through an engine, from
 * any thread: the query API and the trending merger, which must not touch the cluster shard's
 * engine. nf_cluster_view_clock: the engine clock as the view's epoch left it (0 before any).
 * nf_cluster_view_root: the story of an article as of the view, the root of its parent links
 * (read, never compressed; at most 64 links followed), or the article itself when it has no
 * live link (never clustered, or expired by clock). key_group as in the options (-1: id.hi %
 * 256). 0, or < 0 on a read error (err). */
uint64_t nf_cluster_view_clock(nf_store_view_t *v);
int nf_cluster_view_root(nf_store_view_t *v, int32_t key_group, uint64_t clock, nf_id128_t id,
                         nf_id128_t *root, char *err, size_t errlen);

/* The last error's message; "" if none. */
const char *nf_cluster_error(const nf_cluster_t *c);

/* 32 lower-case hex digits + NUL (the topic's article_id / cluster_id form). */
void nf_cluster_id_hex(nf_id128_t id, char out[33]);

#endif
