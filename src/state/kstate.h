/* kstate.h — keyed state of one state kind on one shard: an in-memory working set over the
 * store (docs/ARCHITECTURE.md §4 "In memory").
 *
 * Keys are 128-bit ids (article ids, hashed user ids, source ids) with a key group (the input
 * partition they came from, or a hash bucket for state not fed by Kafka); the RocksDB key is
 * [key group: 2 bytes big-endian][hi: 8 bytes big-endian][lo: 8 bytes big-endian]. Values are
 * opaque bytes (an actor's struct, encoded by the actor). In RocksDB a value is stored as
 * [expires_at_ms: 8 bytes LE, 0 = never][value] (the store's TTL convention).
 *
 * Life of an entry:
 *   absent --get (cold: point read from the store, expired = absent)--> clean
 *   put/delete --> dirty (a delete is a dirty tombstone until the epoch that writes it commits)
 *   nf_kstate_snapshot(epoch e): every dirty entry is written into the epoch's batch and becomes
 *     "committing in e"; it is not evictable until nf_kstate_committed(e) — until then the store
 *     does not have it and a reload would read an older value.
 *   nf_kstate_freeze(epoch e): the same snapshot by reference, for a cut whose pause must not
 *     grow with the dirty state: O(1) at the cut, the entries written later (freeze_step, or
 *     just before one of them changes).
 *   nf_kstate_committed(e): entries committing in epochs <= e become clean (tombstones vanish).
 * Eviction only takes clean entries (approximately least recently used, CLOCK). When the memory
 * used exceeds the budget and no clean entry is left (or fewer than a 64th of the records: the
 * sweep past the pinned ones to find them would cost more than they free),
 * nf_kstate_over_budget() turns true: the owner asks the epoch coordinator for an early
 * checkpoint (which makes entries clean). The store sorts an epoch's records when it applies
 * them; a snapshot writes them in no particular order.
 *
 * Memory allocated (issue 36): an epoch whose dirty entries outgrow the budget (a burst) grows
 * the record array, the slot table, the value blocks and the vectors past it until it commits;
 * the commit that makes them clean evicts down to the budget and gives back what exceeds it:
 * once nf_kstate_committed has run with no other snapshot in flight, a kstate with a store and a
 * budget holds at most stats.used + nf_kstate_slack(stats.used) bytes (stats.bytes), and
 * stats.used <= budget unless entries dirtied since the last snapshot exceed it. The slab's
 * current chunk maps up to 2 MiB more than it has cut (runtime/slab.h). See docs/ARCHITECTURE.md
 * §4 ("In memory").
 *
 * TTL: with ttl_ms > 0, a put sets expires_at = now_ms + ttl_ms; an expired entry reads as
 * absent, is dropped by nf_kstate_expire() (in memory; the store's compaction filter drops it on
 * disk), and needs no delete.
 *
 * A kstate without a store (st == NULL) is memory only: nothing is cold, nothing is evicted
 * (tests, `newsflow parse`, benchmarks of the hot path).
 *
 * Threads: one shard owns a kstate; every call is from that shard's thread. The store reads it
 * makes are thread-safe. Hot path (hit): no allocation, no lock, no syscall. */
#ifndef NF_KSTATE_H
#define NF_KSTATE_H

#include "algo/idset.h"
#include "state/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nf_kstate nf_kstate_t;

typedef struct nf_kstate_opts {
    nf_state_kind_t kind;
    uint64_t ttl_ms;     /* 0 = entries never expire */
    size_t budget_bytes; /* memory for entries and table; 0 = unlimited */
    size_t initial_capacity;
} nf_kstate_opts_t;

/* NULL on allocation failure. st may be NULL (memory only). */
nf_kstate_t *nf_kstate_new(nf_store_t *st, const nf_kstate_opts_t *o);
void nf_kstate_free(nf_kstate_t *ks);

/* The value of key (hot, or loaded from the store), or NULL if absent, deleted or expired.
 * *len gets its length (a present value of length 0 is a non-NULL pointer). The pointer stays
 * valid until the next put/delete/get/expire/committed on this kstate. A store read error
 * returns NULL with *err = -EIO and the reason in nf_kstate_error() (else *err = 0; -ENOMEM if
 * a loaded value could not be kept); err may be NULL. */
const void *nf_kstate_get(nf_kstate_t *ks, uint16_t kg, nf_id128_t key, uint64_t now_ms,
                          uint32_t *len, int *err);
/* Hints, no effect on state, for a caller with a batch of keys that wants their cache misses to
 * overlap: a get of (kg, key) reads the slot, then the record, then (for values longer than
 * 24 bytes) the value's block, each address known only once the one before is loaded. So:
 * nf_kstate_prefetch for every key of the batch, then nf_kstate_prefetch_record for every key
 * (its slot is in cache by then), then nf_kstate_prefetch_value, then the gets. */
void nf_kstate_prefetch(const nf_kstate_t *ks, uint16_t kg, nf_id128_t key);
/* Returns the record whose slot tag matched (not yet known to hold the key: its line is
 * only being loaded), or NF_KSTATE_NO_HINT: the hint for nf_kstate_prefetch_value. */
#define NF_KSTATE_NO_HINT UINT32_MAX
uint32_t nf_kstate_prefetch_record(const nf_kstate_t *ks, uint16_t kg, nf_id128_t key);
/* Starts at the record hint names when it holds (kg, key), else probes. Returns the record it
 * found for (kg, key) — the hint for nf_kstate_get_hint — or NF_KSTATE_NO_HINT. */
uint32_t nf_kstate_prefetch_value(const nf_kstate_t *ks, uint16_t kg, nf_id128_t key,
                                  uint32_t hint);
/* nf_kstate_get starting at the record a hint names, without hashing or probing, if that
 * record still holds (kg, key); any hint (stale, or NF_KSTATE_NO_HINT) is safe: it is checked,
 * never trusted. */
const void *nf_kstate_get_hint(nf_kstate_t *ks, uint16_t kg, nf_id128_t key, uint32_t hint,
                               uint64_t now_ms, uint32_t *len, int *err);
/* For a caller about to get several keys that may be cold: reads those of keys[0, n) (key
 * groups kgs) that are not in memory from the store in one batched read (nf_store_multi_get,
 * at most 64 keys; the others are read by their gets), and keeps each answer, a value or its
 * absence, for the get that follows, which takes it instead of a point read. Answers not taken
 * are dropped by the next fetch, put, delete, snapshot, committed, uncommitted, expire or
 * drop_groups (after which the store or memory may say otherwise). No effect on the state. 0,
 * -EIO (nf_kstate_error says why) or -ENOMEM. */
int nf_kstate_fetch(nf_kstate_t *ks, size_t n, const uint16_t *kgs, const nf_id128_t *keys);
/* Inserts or replaces; the entry becomes dirty. 0 or -ENOMEM (nothing changed). */
int nf_kstate_put(nf_kstate_t *ks, uint16_t kg, nf_id128_t key, const void *val, uint32_t len,
                  uint64_t now_ms);
/* nf_kstate_put without the copy, for a caller that builds the new value where it goes: the
 * entry becomes dirty with len bytes of undefined contents, and the pointer to write them is
 * returned (valid until the next call on this kstate), or NULL on -ENOMEM (nothing changed).
 * The old value may be gone by then: read it before, never from the returned memory. */
void *nf_kstate_put_ref(nf_kstate_t *ks, uint16_t kg, nf_id128_t key, uint32_t len,
                        uint64_t now_ms);
/* Deletes (a dirty tombstone). 0 or -ENOMEM. */
int nf_kstate_delete(nf_kstate_t *ks, uint16_t kg, nf_id128_t key);

/* Barrier: writes every dirty entry (puts and tombstones) into b and marks it committing in
 * `epoch`. Returns the number of entries written. Runs in O(dirty), not O(all). b may be NULL
 * (memory only: the entries are marked but written nowhere). Epochs must increase from one
 * snapshot to the next; several may be in flight (committed in order). */
size_t nf_kstate_snapshot(nf_kstate_t *ks, nf_store_batch_t *b, uint64_t epoch);
/* The snapshot by reference: what nf_kstate_snapshot(ks, b, epoch) would write now, written
 * into b over the calls that follow instead of now. This call only hands the dirty entries over
 * (O(1): the pause of a cut does not grow with them); nf_kstate_freeze_step(ks, max) then writes
 * up to max of them (0: all) and returns how many are left; b holds the whole snapshot once it
 * returns 0. Meanwhile the kstate is used as ever: an entry about to change (put, put_ref,
 * delete) is written first with the value it had at the freeze, and an expired one is dropped
 * (its store copy expired no later: it is then not written at all). b must stay allocated and
 * untouched by others until then. A freeze, snapshot, committed or uncommitted first writes
 * what a freeze before it left. Returns the number of entries handed over (stats.dirty counts
 * those not written yet). */
size_t nf_kstate_freeze(nf_kstate_t *ks, nf_store_batch_t *b, uint64_t epoch);
size_t nf_kstate_freeze_step(nf_kstate_t *ks, size_t max);
/* Epoch `epoch` is durable in the store: its entries become clean and evictable. */
void nf_kstate_committed(nf_kstate_t *ks, uint64_t epoch);
/* Epoch `epoch` will never be applied (a failed commit the job gives up on is fatal, so today
 * only tests call this): its entries become dirty again for the next snapshot. */
void nf_kstate_uncommitted(nf_kstate_t *ks, uint64_t epoch);

/* Drops expired entries (at most max_entries examined per call; 0 = all). Returns how many were
 * dropped. Expired dirty entries are dropped too unless committing (their store copy expires). */
size_t nf_kstate_expire(nf_kstate_t *ks, uint64_t now_ms, size_t max_entries);

/* Forgets the clean entries of the key groups match accepts (a partition revoked from this
 * process, its epoch committed: the store and the changelog hold them; a later get reads them
 * back). Dirty or committing entries are kept and counted in *kept (the caller's protocol
 * should leave none). Returns how many were forgotten. O(entries). */
size_t nf_kstate_drop_groups(nf_kstate_t *ks, bool (*match)(uint16_t kg, void *ctx), void *ctx,
                             size_t *kept);

typedef struct nf_kstate_stats {
    size_t entries, dirty, committing;
    size_t bytes;   /* allocated: the record array, the slot table, the value blocks cut (live or
                     * free), the vectors */
    size_t used;    /* what the live entries need (compared with the budget): their records and
                     * values, the slot table as rebuilt for them, the vectors */
    size_t records; /* records of the array ever used (what an eviction sweep walks) */
    uint64_t hits, misses, loads, load_errors, evictions, expired;
    uint64_t shrinks; /* commits that gave memory back (see the top) */
} nf_kstate_stats_t;
void nf_kstate_stats(const nf_kstate_t *ks, nf_kstate_stats_t *out);
/* Memory in use (stats.used) exceeds the budget and nothing clean is left to evict (or so little
 * that finding it would cost a sweep past the pinned: fewer than records / 64). The owner should
 * ask for an early epoch (nf_epoch_request): until one commits, the allocation grows with every
 * entry dirtied. */
bool nf_kstate_over_budget(const nf_kstate_t *ks);

/* What a kstate with a store and a budget may hold beyond what it uses once a commit has given
 * back what a burst grew (see the top): a quarter of `used`, at least NF_KSTATE_SLACK_MIN. */
#define NF_KSTATE_SLACK_MIN ((size_t)1 << 20)
static inline size_t nf_kstate_slack(size_t used)
{
    return used / 4 > NF_KSTATE_SLACK_MIN ? used / 4 : NF_KSTATE_SLACK_MIN;
}

/* The last store read error's message (which kind, which key, RocksDB's reason); "" if none. */
const char *nf_kstate_error(const nf_kstate_t *ks);

/* The RocksDB key of (kg, key): 18 bytes into out. */
void nf_kstate_encode_key(uint16_t kg, nf_id128_t key, unsigned char out[18]);

#endif
