/* coldset.h — the cold tier of a keyset (keyset.h): keys moved out of memory into sorted runs on
 * disk, and one filter in memory over all of them that answers "absent" for almost every key
 * that is not there without touching the disk.
 *
 * Why: a dedup set cannot evict — a forgotten key would count twice — yet at the design's volume
 * (a day of (user, article, session) triples at 50,000 reads/s) it outgrows memory 50 times.
 * Most lookups are of new keys; a few are of keys seen minutes ago, which the keyset's hot ring
 * still holds; very few are of keys seen hours ago. So the old keys go to disk, and what must
 * stay in memory is only a way to prove a new key absent cheaply.
 *
 * Shape:
 *   run     the keys of one spill, sorted by a 64-bit mix of (kg, key) ("sk"), in 4 KiB pages of
 *           170 records {hi, lo, expires_at << 16 | kg} (24 bytes); in memory, the sk of each
 *           page's first record (8 bytes per 170 keys) and the run's latest expiry. A run is
 *           read back whole only to be dropped (all its keys expired), and
 *           one page at a time by a lookup.
 *   segment the files runs are appended to, opened unlinked (O_TMPFILE, or created and unlinked
 *           at once): a crash leaves nothing to clean, and a segment's disk space returns when
 *           its last run is dropped. Runs are not durable: the keyset's blobs in the store are.
 *   filter  a cuckoo filter of 24-bit slots, {14-bit fingerprint, 10-bit run tag}, five to a
 *           16-byte bucket, at most 95 % full: a lookup reads two buckets (a cache line each)
 *           and reads a run's page only for a slot whose fingerprint matches, about 6 in 10,000
 *           absent keys; the tag (a run's number mod 1,024) names the one or two live runs to
 *           search, so a present key costs a page read or two however many runs there are.
 *           Keys are removed when their run is dropped (the run is read back for it). The
 *           filter takes filter_max_bytes (any size) at the first spill, whole: growing it
 *           would mean reading every run back. Past its room (95 %), the keys that find none
 *           stay out of it and the run they are in is searched by every lookup of an sk at or
 *           past them ("unfiltered": exact, slow, counted).
 *
 * Cost: a lookup of an absent key, two cache lines; of a present cold key, one pread of 4 KiB
 * (from the page cache when it is warm; nf_coldset_prefetch_page starts it with readahead).
 * Memory: 3.4 bytes per cold key (the filter) + 0.05 (the page index) + ~100 KiB fixed.
 *
 * Threads: one owner (the keyset's shard); every call from its thread. Errors are -errno. */
#ifndef NF_COLDSET_H
#define NF_COLDSET_H

#include "algo/idset.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A key as the keyset's ring holds it. */
typedef struct nf_coldrec {
    uint64_t hi, lo;
    uint64_t expkg; /* expires_at_ms << 16 | kg */
} nf_coldrec_t;

typedef struct nf_coldset nf_coldset_t;

typedef struct nf_coldset_opts {
    const char *dir;         /* where the segment files go (a directory that exists) */
    size_t filter_max_bytes; /* the filter's size, with ~100 KiB of fixed parts (0: none) */
} nf_coldset_opts_t;

/* NULL with the reason in err (the directory cannot hold files, no memory). */
nf_coldset_t *nf_coldset_new(const nf_coldset_opts_t *o, char *err, size_t errlen);
void nf_coldset_free(nf_coldset_t *cs);

/* Moves n records (distinct keys, unexpired) into a new run; recs is reordered. 0, -ENOMEM or
 * -EIO (disk full, ...; nothing was added). Transient memory: n records more. */
int nf_coldset_spill(nf_coldset_t *cs, nf_coldrec_t *recs, size_t n);
/* 1: a copy of (kg, key) unexpired at now_ms is in a run; 0: none; -EIO (a read failed). */
int nf_coldset_contains(nf_coldset_t *cs, uint16_t kg, nf_id128_t key, int64_t now_ms);
/* A hint, no effect: loads the filter's two buckets of (kg, key). */
void nf_coldset_prefetch(const nf_coldset_t *cs, uint16_t kg, nf_id128_t key);
/* The hint's second step: starts reading (readahead) the page of each run the filter names for
 * (kg, key) — a present key, or a rare false match. */
void nf_coldset_prefetch_page(const nf_coldset_t *cs, uint16_t kg, nf_id128_t key);
/* Drops the runs whose every key expired by now_ms. Returns the keys dropped, or -EIO. */
long nf_coldset_expire(nf_coldset_t *cs, int64_t now_ms);

typedef struct nf_coldset_stats {
    size_t keys;       /* in runs (expired ones not dropped yet included) */
    size_t runs;       /* live runs */
    size_t bytes;      /* memory: filter, fences, run records */
    size_t disk_bytes; /* the segments' live runs */
    size_t unfiltered; /* keys left out of the filter (see the top) */
    uint64_t lookups;  /* calls of contains with runs present */
    uint64_t reads;    /* pages read by lookups */
    uint64_t hits;     /* lookups that found the key */
    uint64_t spills, expired_runs;
    uint64_t spill_ns, spill_ns_max; /* time in nf_coldset_spill: the owner's pause */
} nf_coldset_stats_t;
void nf_coldset_stats(const nf_coldset_t *cs, nf_coldset_stats_t *out);

#endif
