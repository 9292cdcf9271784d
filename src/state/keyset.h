/* keyset.h — a durable set of 128-bit keys with a time to live, in memory up to a budget and on
 * disk past it: the read path's two dedup sets, event ids (TTL 2 h) and (user, article, session)
 * triples (TTL 24 h).
 *
 * Why not keyed state (kstate.h): a dedup set meets a new key with almost every event. kstate
 * gives each key a 64-byte record and a slot, writes each key to RocksDB separately at the cut
 * (~4 us a key), and with a store must read RocksDB for every key it does not hold, because a
 * miss in memory proves nothing there. A keyset holds every unexpired key, so a miss is an
 * answer; it writes an epoch's new keys as one blob per key group; and since its keys expire in
 * the order they came, expiry is O(1) a key and exact.
 *
 * Semantics. A key is (kg, key): the key group (input partition) is part of it. nf_keyset_add
 * at now_ms inserts a key with expires_at = now_ms + ttl_ms unless it is present; a key is
 * present from its insertion until the first now_ms >= expires_at (processing time: the caller's
 * clock, which must not go backwards by more than it can afford to keep keys longer).
 *
 * Shape:
 *   ring   the keys in insertion order, {hi, lo, expires_at_ms << 16 | kg}, 24 bytes each,
 *          appended at the head and dropped from the tail once expired. With one TTL and a clock
 *          that does not go back, expiry times never decrease along the ring. (If the wall clock
 *          steps back, a younger key may expire before an older one: it waits for the older one
 *          to leave the tail, and reads as absent meanwhile — lookups check the time.)
 *   slots  open addressing over the ring: {ring position + 1, 32-bit tag}, linear probing, two
 *          slots per ring position (at most half full), so a miss reads one slot cache line in
 *          almost every case and no ring record at all.
 *   Both are runtime/bigmem.h mappings. The ring doubles when it is full of live keys (the live
 *   keys are then copied in order and the slots rebuilt: amortised O(1) a key). Memory: 40 bytes
 *   per ring position, the ring being 50-100 % full: 40-80 bytes a key.
 *
 * Persistence (the kind given at creation, in the store's TTL convention). nf_keyset_snapshot
 * (or nf_keyset_freeze at the cut and nf_keyset_freeze_step after it: the keys are a ring range,
 * marked in O(1) and written later) writes the keys added since the previous snapshot as one
 * value per key group:
 *   key    [kg: 2 bytes BE][epoch: 8 bytes BE][writer: 2 bytes BE]            (12 bytes)
 *   value  [expires_at_ms: 8 LE, the latest in the blob][format = 1: 1 byte][count: 4 LE]
 *          count x [hi: 8 LE][lo: 8 LE][expires_at_ms: 8 LE]
 * so the store's compaction filter drops a blob whole once its last key expired. The writer (the
 * shard index) keeps two shards' blobs of one key group and epoch apart. nf_keyset_load reads
 * every blob of the kind — and the 18-byte per-key records kstate wrote for the kind before
 * ([kg][hi][lo] -> [expires_at][]) — and keeps the unexpired keys its owner accepts (the keys
 * that route to the loading shard), roughly ordered by expiry. Keys added in an epoch that never
 * commits are in no blob: a restart forgets them along with the rest of that epoch (a failed
 * commit stops the job: epoch.h).
 *
 * Memory budget. A keyset cannot evict (a forgotten key would count twice), so with a budget and
 * a spill directory it is bounded by moving keys to disk instead (state/coldset.h):
 *   hot    the ring stops growing at hot_max positions (at most a fifth of the budget: 40
 *          bytes a position, 12 more while a quarter of it spills); when it is full of live
 *          keys its oldest quarter (at most 262,144 keys: a spill pauses the shard ~50 ms),
 *          keys a snapshot wrote already, goes to disk as one sorted run;
 *   cold   the runs, and one cuckoo filter over them (seven tenths of the budget, taken at
 *          the first spill; 3.4 bytes a key): a key the ring does not hold is looked up there,
 *          and read from disk only when the filter names a run (a present key; ~6 in 10,000
 *          absent ones).
 *          Past the filter's room (~budget / 4.9 keys on disk) the keys still go to disk,
 *          unfiltered: memory stays bounded and answers exact, but lookups read a page of
 *          every such run (coldset.h).
 * Exact either way: a key leaves the ring only once it is on disk, and the cold tier answers
 * "present" until it expires. The runs are a cache of the store's blobs, not a second copy of
 * record: a restart loads the blobs again (keys past the ring's room straight into runs). Keys
 * since the last snapshot never spill; a set that cannot spill (an epoch's keys alone exceed
 * the ring, or the disk refuses) grows instead, exact but over budget, and
 * nf_keyset_over_budget() turns true for the owner to report. Without a spill directory the
 * set only reports (size ~ TTL x keys per second x 60 bytes).
 *
 * Threads: one shard owns a keyset; every call is from that shard's thread. nf_keyset_load reads
 * the store (thread-safe). Hot path (add, contains): no allocation but the ring's doubling or a
 * spill, no lock, no syscall but the page read of a key found on disk. */
#ifndef NF_KEYSET_H
#define NF_KEYSET_H

#include "algo/idset.h"
#include "state/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nf_keyset nf_keyset_t;

typedef struct nf_keyset_opts {
    nf_state_kind_t kind;    /* where snapshots go and loads come from */
    uint64_t ttl_ms;         /* > 0 */
    size_t budget_bytes;     /* 0 = unlimited; only reported (see the top) */
    size_t initial_capacity; /* keys; rounded up to a power of two (default 1024) */
    uint16_t writer;         /* the owner's shard index, part of the blob keys */
    /* 0: blobs under 12-byte keys [kg][epoch][writer], one per key group and epoch. Else (a
     * job of several processes may write one key group in turn): 20-byte keys
     * [kg 2][epoch 8][writer 2][process: its low 48 bits, 6][chunk 2], and a key group's keys
     * of an epoch split in blobs of at most 400,000 (9.6 MB). Both load. */
    uint64_t process;
    /* A directory for keys past the budget (the state directory), or NULL: unbounded, the
     * budget only reported. Needs budget_bytes. */
    const char *spill_dir;
    char *err; /* where nf_keyset_new says why it failed (may be NULL) */
    size_t errlen;
} nf_keyset_opts_t;

/* NULL on allocation failure, ttl_ms == 0, or a spill_dir that takes no files. st may be NULL
 * (memory only: snapshots write nothing, load finds nothing). */
nf_keyset_t *nf_keyset_new(nf_store_t *st, const nf_keyset_opts_t *o);
void nf_keyset_free(nf_keyset_t *ks);

/* 1: (kg, key) was present (nothing changes); 0: added, expiring at now_ms + ttl_ms; -ENOMEM
 * (not added: the ring could not grow) or -EIO (not added: a page of the cold tier could not be
 * read). */
int nf_keyset_add(nf_keyset_t *ks, uint16_t kg, nf_id128_t key, int64_t now_ms);
/* 1 if (kg, key) is present at now_ms, 0 if not, -EIO (the cold tier could not be read);
 * changes nothing but the lookup counters. */
int nf_keyset_contains(nf_keyset_t *ks, uint16_t kg, nf_id128_t key, int64_t now_ms);
/* A hint, no effect: starts loading the slot line an add or contains of (kg, key) reads first,
 * so a caller with a batch of keys can overlap their cache misses. */
void nf_keyset_prefetch(const nf_keyset_t *ks, uint16_t kg, nf_id128_t key);
/* The hint's second step, once that slot line is in: the ring record of a slot whose tag is
 * key's (a key present — a duplicate — is the only common case: its record is then compared);
 * for a key not in the ring, the disk page the cold filter names, if any (readahead). */
void nf_keyset_prefetch_record(const nf_keyset_t *ks, uint16_t kg, nf_id128_t key);

/* Drops expired keys from the tail, at most max (0 = all); returns how many. nf_keyset_add does
 * a little of this itself; call it from a timer so an idle set gives its memory back too. */
size_t nf_keyset_expire(nf_keyset_t *ks, int64_t now_ms, size_t max);

/* Barrier: the keys added since the previous snapshot into b (NULL: memory only, the keys are
 * only marked), one blob per key group (see the top). Returns the number of keys written, or
 * -ENOMEM, having marked b failed (nf_store_batch_fail: the epoch will not commit). */
long nf_keyset_snapshot(nf_keyset_t *ks, nf_store_batch_t *b, uint64_t epoch);
/* The same snapshot by reference, for a cut whose pause must not grow with the keys: this call
 * only marks the keys since the previous snapshot (O(1)) and returns their number;
 * nf_keyset_freeze_step(ks, max) then writes up to about max of them into b (0: all) and returns
 * how many are left (0: b holds the whole snapshot), or -ENOMEM having marked b failed. The set
 * is used as ever meanwhile: whatever would move or change a marked key (the ring growing or
 * shrinking, a marked key leaving the tail, a drop, a load) writes the rest first, as does the
 * next freeze or snapshot. b must stay allocated and untouched by others until then. */
long nf_keyset_freeze(nf_keyset_t *ks, nf_store_batch_t *b, uint64_t epoch);
long nf_keyset_freeze_step(nf_keyset_t *ks, size_t max);

/* Which keys of the store belong to this set's owner (e.g. those routed to its shard). */
typedef bool (*nf_keyset_owns_fn)(uint16_t kg, nf_id128_t key, void *ctx);
/* Fills an empty set from the store's committed state: every unexpired key at now_ms that owns
 * accepts (owns NULL: all). Returns the number of keys loaded, -ENOTEMPTY (the set is not
 * empty), -ENOMEM, or -EIO with the reason (kind, key, what is wrong) in err. */
long nf_keyset_load(nf_keyset_t *ks, nf_keyset_owns_fn owns, void *ctx, int64_t now_ms, char *err,
                    size_t errlen);

/* The keys of some key groups only (a partition this process was assigned), read by prefix, into
 * a set that may hold keys already. Same returns as nf_keyset_load (never -ENOTEMPTY). */
long nf_keyset_load_groups(nf_keyset_t *ks, const uint16_t *kgs, size_t n, nf_keyset_owns_fn owns,
                           void *ctx, int64_t now_ms, char *err, size_t errlen);
/* Forgets every key of the ring match accepts (a partition revoked from this process, once its
 * epoch committed: the keys are in the store and its changelog), and the expired ones. O(keys in
 * memory). Keys on disk stay until they expire (see keyset.c: the owner no longer asks for them).
 * Returns how many keys were forgotten (expired ones included), or -ENOMEM (nothing changed). */
long nf_keyset_drop(nf_keyset_t *ks, nf_keyset_owns_fn match, void *ctx, int64_t now_ms);

typedef struct nf_keyset_stats {
    size_t keys;  /* in the ring and on disk: present, plus expired ones not yet dropped */
    size_t bytes; /* memory: ring, slots, and the cold tier's filter and page index */
    uint64_t added, present, expired, loaded;
    /* the cold tier (all 0 without one): coldset.h */
    size_t cold_keys, cold_runs, cold_bytes, disk_bytes, unfiltered;
    uint64_t cold_lookups, cold_reads, cold_hits, spills, spill_failures;
    uint64_t spill_deferred; /* times the ring was full of keys newer than the last snapshot */
    uint64_t spill_ns, spill_ns_max; /* the time spills took (the owner waits: one at a time) */
} nf_keyset_stats_t;
void nf_keyset_stats(const nf_keyset_t *ks, nf_keyset_stats_t *out);
bool nf_keyset_over_budget(const nf_keyset_t *ks);

#endif
