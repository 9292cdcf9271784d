/* store.h — the job's durable state: one RocksDB database under state.dir (docs/ARCHITECTURE.md §4
 * "Store").
 *
 * Layout on disk:
 *   <state.dir>/db/                      the live database
 *   <state.dir>/checkpoints/chk-<epoch>/ named checkpoints (state/checkpoint.h)
 * Column families: "default" holds the epoch protocol's records (pending, committed); every
 * state kind (nf_state_kind_t) has its own family. Keys are opaque bytes to the store; the
 * keyed-state layer prefixes them with a 2-byte big-endian key group. A value of a kind with a
 * TTL starts with an 8-byte little-endian expiry time (ms since the Unix epoch, 0 = never); the
 * store's compaction filter drops expired values, readers must still check (compaction is lazy).
 *
 * The epoch protocol (src/state/epoch.c) drives three calls:
 *   nf_store_pending_write  one synced write: the epoch's header (opaque JSON text), one state
 *                           batch per shard and opaque output blobs — the "pending" record;
 *   nf_store_pending_apply  applies the batches to the live families, records the header as the
 *                           committed epoch and deletes the pending record. Idempotent: a crash
 *                           half-way leaves the pending record, and applying it again is
 *                           harmless (batches hold absolute puts and deletes). Then it gives
 *                           the allocator's free pages back to the system (malloc_trim): the
 *                           epoch's buffers are free by then;
 *   nf_store_pending_read   on start, the pending record left by a crash (if any).
 * At most one pending record exists: the next epoch's is written only after the previous one was
 * applied (or discarded).
 *
 * Files: store.c the live database and batches, store_pending.c the epoch protocol's records,
 * store_body.c the file of a pending record's batches and outputs, checkpoint.c named checkpoints
 * (state/checkpoint.h); store_int.h is what they share.
 *
 * Threads: a store is thread-safe (RocksDB is): shards read cold keys while the epoch thread
 * writes. Batches are single-threaded objects: a shard fills its own at the barrier. */
#ifndef NF_STORE_H
#define NF_STORE_H

#include "io/streams.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    NF_KIND_ARTICLE_KEY = 0, /* dedup: article_id -> first seen (ingest) */
    NF_KIND_CRAWL_SCHEDULE,  /* crawl: source_id -> schedule (ingest) */
    NF_KIND_READS,           /* a reader's history (serve_state.h; the read counter's, long ago) */
    NF_KIND_EVENT_IDS,       /* read-event id dedup (TTL 2 h) */
    NF_KIND_CLUSTER_SIG,     /* cluster: article_id -> MinHash signature, first seen (TTL 7 d) */
    NF_KIND_CLUSTER_BUCKET,  /* cluster: (band, band key) -> article ids (TTL 7 d) */
    NF_KIND_CLUSTER_PARENT,  /* cluster: article_id -> union-find parent (TTL 7 d) */
    NF_KIND_ARTICLE_TOPICS,  /* classify: article_id -> sparse topic vector (interest reads it) */
    NF_KIND_INTEREST,        /* interest: user -> EMA vector, version, last update */
    NF_KIND_INTEREST_SEEN,   /* interest: (user, article, session) dedup */
    NF_KIND_TRENDING,        /* trending: open panes, watermarks, merged window panes */
    NF_KIND_ARTICLE_META,    /* serving: article_id -> title, URL, dates (TTL 7 d) */
    NF_KIND_TOPIC_RECENT,    /* serving: (topic, published, article) -> topic vector (48 h) */
    NF_KIND_STORY,           /* serving: a story's size and sources, members, merges (7 d) */
    NF_KIND_SEARCH_LOG,      /* search: (commit time, article) in commit order (TTL 7 d) */
    NF_KIND__COUNT
} nf_state_kind_t;

/* Column family name of a kind ("article_key", "crawl_schedule", "reads", "event_ids"). */
const char *nf_state_kind_name(nf_state_kind_t k);
/* Whether a kind's values expire by a clock of their owner's (nf_store_set_clock) rather than
 * the wall clock: the story-cluster index, whose TTL runs on the articles' ingest times (which
 * lag the wall clock, by far on a replay). */
bool nf_state_kind_owner_clock(nf_state_kind_t k);

typedef struct nf_store nf_store_t;
typedef struct nf_store_batch nf_store_batch_t;

/* What RocksDB writes to its own info log, <db>/LOG (state.rocksdb_log). librocksdb 7.8 as
 * Debian 12 builds it keeps its assertions: once a write to the LOG has failed (ENOSPC), the
 * next one aborts the process (WritableFileWriter, "sync_without_flush_called_"), and RocksDB
 * logs from its background threads (flushes, compactions, errors) as well as from our calls.
 *   OFF   only the settings RocksDB records while a database opens (its "header": no level
 *         turns it off), written then and flushed within seconds; nothing follows, so a disk
 *         that fills up later never meets a second LOG write. One full at the open could: a
 *         read-write open refuses a file system with less than NF_STORE_OPEN_MIN_FREE free;
 *   WARN  also its warnings and errors (a full disk makes some: it may abort then);
 *   INFO  also every flush, compaction and checkpoint (RocksDB's default). */
typedef enum { NF_STORE_LOG_OFF = 0, NF_STORE_LOG_WARN, NF_STORE_LOG_INFO } nf_store_log_t;

typedef struct nf_store_opts {
    size_t block_cache_mb;  /* default 256 */
    size_t write_buffer_mb; /* per column family, default 64 */
    unsigned bg_threads;    /* flush + compaction threads, default 2 */
    bool read_only;         /* open for inspection (checkpoints show/verify, state dump) */
    nf_store_log_t log;     /* RocksDB's info log, default NF_STORE_LOG_OFF */
    /* An epoch's kind whose writes come to at least this many bytes (keys and values) is
     * applied as a table file, ingested, instead of through the memtable
     * (nf_store_pending_write); 0: never. Default NF_STORE_INGEST_MIN_BYTES. */
    size_t ingest_min_bytes;
} nf_store_opts_t;

/* perf/README "Epoch cut and commit": a table file costs a fraction of the memtable's time for
 * any size, but a small file every epoch leaves RocksDB's compaction behind (level-0 files pile
 * up, and an ingest then waits for seconds: 100,000 keys an epoch, ~4 MB, over a large state);
 * from about a quarter of a memtable (write_buffer_mb, 64) the files come no faster than the
 * memtable's flushes would. */
#define NF_STORE_INGEST_MIN_BYTES ((size_t)16 << 20)

void nf_store_opts_default(nf_store_opts_t *o);

/* The file system a path is on, for messages about a full one: its space for an unprivileged
 * writer (statvfs f_bavail), and the mount point, device and type from /proc/self/mounts (""
 * when not found). 0 or -errno (statvfs). */
typedef struct nf_store_space {
    uint64_t free_bytes, size_bytes;
    char mount[1024], device[256], type[32];
} nf_store_space_t;
int nf_store_space(const char *path, nf_store_space_t *out);
/* "file system /srv (ext4 on /dev/sdb1): 1.2 MiB free of 20.0 GiB" into out. */
void nf_store_space_text(const nf_store_space_t *sp, char *out, size_t n);

/* Free bytes a read-write open wants on the state's file system: RocksDB writes its LOG header
 * (about 100 KiB), a MANIFEST, an OPTIONS file and a WAL while it opens, and a LOG write that
 * fails there can abort the process (nf_store_log_t). */
#define NF_STORE_OPEN_MIN_FREE (4u << 20)

/* Opens (creating if missing) <state_dir>/db with every kind's column family. NULL with a
 * message naming the directory and RocksDB's reason on failure (e.g. another process holds the
 * LOCK); -ENOSPC's message (a read-write open on a file system with less than
 * NF_STORE_OPEN_MIN_FREE free) names the file system and its space. A read-write open never
 * creates a database where one was: a db directory that lacks CURRENT but holds files, or a
 * missing one beside named checkpoints, is refused with errno EUCLEAN and a message naming the
 * ways out (restore a checkpoint or the changelog, or move it away). */
nf_store_t *nf_store_open(const char *state_dir, const nf_store_opts_t *o, char *err,
                          size_t errlen);
/* Opens the database of a named checkpoint directory read-only (for verify and inspection). */
nf_store_t *nf_store_open_dir(const char *db_dir, bool read_only, char *err, size_t errlen);
void nf_store_close(nf_store_t *st);
/* The state directory (nf_store_open) or the database directory (nf_store_open_dir). */
const char *nf_store_state_dir(const nf_store_t *st);
/* nf_store_opts_t.ingest_min_bytes of this store (0: never). */
size_t nf_store_ingest_min(const nf_store_t *st);
/* Whether nf_store_pending_write would write a table file for any kind of these
 * batches (one whose keys and values come to ingest_min_bytes), i.e. whether keeping them
 * until the apply is worth their memory. */
bool nf_store_batches_ingest(const nf_store_t *st, nf_store_batch_t *const *batches, unsigned n);
/* The crash tests' fault injection (NF_FAULT, state/epoch.h): hook("mid_apply") is called when
 * an epoch's state has been applied and its committed mark is not yet written. */
void nf_store_set_fault_hook(nf_store_t *st, void (*hook)(const char *point));
/* Moves an owner-clocked kind's clock forward to now_ms (never back): its TTL filter drops a
 * value once its expiry is before this clock, and drops none of the kind until the owner has
 * set the clock after the open. Cheap, any thread (compactions read it in RocksDB's). */
void nf_store_set_clock(nf_store_t *st, nf_state_kind_t kind, uint64_t now_ms);

/* Flushes and compacts every column family down to the bottommost level, so the TTL filter
 * sees every value (operators reclaiming space; tests). Blocks until done. 0 or -EROFS. */
int nf_store_compact(nf_store_t *st, char *err, size_t errlen);

/* An integer RocksDB property ("rocksdb.live-sst-files-size", "rocksdb.cur-size-all-mem-tables")
 * summed over the database's column families; 0 when RocksDB has none. Thread-safe. */
uint64_t nf_store_property_sum(nf_store_t *st, const char *property);

/* Point read of committed state. 1 (found: *val and *len set, *val malloc'd, caller frees), 0
 * (absent), or -EIO with a message in err. */
int nf_store_get(nf_store_t *st, nf_state_kind_t kind, const void *key, size_t klen, void **val,
                 size_t *len, char *err, size_t errlen);

/* Point reads of n keys of one kind, all klen bytes long (keys: n x klen), in one batch
 * (RocksDB's MultiGet: the lookups share their filter and index probes and read a block once).
 * For each i, vals[i] is the value (malloc'd, caller frees; lens[i] its length) or NULL
 * (absent). 0, or -EIO / -ENOMEM with a message in err (and every vals[i] NULL). */
int nf_store_multi_get(nf_store_t *st, nf_state_kind_t kind, size_t n, const unsigned char *keys,
                       size_t klen, void **vals, size_t *lens, char *err, size_t errlen);

/* Calls fn for every key of a kind in key order (committed state); stops when fn returns
 * non-zero and returns that value. 0 at the end, -EIO on a read error. */
typedef int (*nf_store_scan_fn)(const void *key, size_t klen, const void *val, size_t vlen,
                                void *arg);
int nf_store_scan(nf_store_t *st, nf_state_kind_t kind, nf_store_scan_fn fn, void *arg);
/* The same over the keys that start with prefix (plen bytes; 0 = every key): a key group's. */
int nf_store_scan_prefix(nf_store_t *st, nf_state_kind_t kind, const void *prefix, size_t plen,
                         nf_store_scan_fn fn, void *arg);

/* ---- committed views: what the query API reads (src/serve/query.h) ----
 * A view is the store as of one committed epoch: a RocksDB snapshot taken right after the
 * epoch's batches were applied (nf_epoch publishes one per commit, and one at start for the
 * epoch the store holds), so a reader on any thread sees whole epochs, never a half-applied one
 * or what a crash could take back. Views are reference-counted: a reader acquires the latest,
 * reads through it for as long as its answer takes, and releases it; publishing a newer one
 * does not disturb readers of the old. A view pins the values it can see (RocksDB keeps them
 * through compactions), so hold one for one request, not longer.
 * Writes made outside the epochs (a rebalance's changelog restore, the standby, the articles
 * follower) are seen from the next published view on.
 * Threads: publish from the epoch thread (or main before the shards start); acquire, release
 * and the reads from any thread. Every view must be released before nf_store_close. */
typedef struct nf_store_view nf_store_view_t;
/* Takes a view of the store as it is now, names it epoch and makes it the latest. 0 or -ENOMEM. */
int nf_store_view_publish(nf_store_t *st, uint64_t epoch);
/* The latest view, referenced (release it); NULL before the first publish. */
nf_store_view_t *nf_store_view_acquire(nf_store_t *st);
void nf_store_view_release(nf_store_view_t *v);
/* The epoch a view shows, and when it was published (ms since the Unix epoch, wall clock). */
uint64_t nf_store_view_epoch(const nf_store_view_t *v);
int64_t nf_store_view_published_ms(const nf_store_view_t *v);
/* nf_store_get / nf_store_multi_get / nf_store_scan_prefix as of the view. */
int nf_store_view_get(nf_store_view_t *v, nf_state_kind_t kind, const void *key, size_t klen,
                      void **val, size_t *len, char *err, size_t errlen);
int nf_store_view_multi_get(nf_store_view_t *v, nf_state_kind_t kind, size_t n,
                            const unsigned char *keys, size_t klen, void **vals, size_t *lens,
                            char *err, size_t errlen);
int nf_store_view_scan_prefix(nf_store_view_t *v, nf_state_kind_t kind, const void *prefix,
                              size_t plen, nf_store_scan_fn fn, void *arg);
/* The scans of n prefixes of plen bytes each (one after the other in prefixes), in turn, with
 * one iterator: fn's non-zero ends the scan of that prefix. 0 or < 0. For a request's short
 * scans (a reader's history): unlike nf_store_view_scan_prefix, what it reads is cached. */
int nf_store_view_scan_prefixes(nf_store_view_t *v, nf_state_kind_t kind,
                                const unsigned char *prefixes, size_t n, size_t plen,
                                nf_store_scan_fn fn, void *arg);
/* The same scan starting at the first key >= from (flen bytes; before the prefix or 0 bytes:
 * the prefix's first key). */
int nf_store_view_scan_from(nf_store_view_t *v, nf_state_kind_t kind, const void *prefix,
                            size_t plen, const void *from, size_t flen, nf_store_scan_fn fn,
                            void *arg);

/* ---- tracked writes: what a reader may keep from one view to the next ----
 * nf_store_track(st, kinds, slots): from now on every data write notes which ids it touched in
 * the kinds of the bitmask kinds (1u << kind): the 16 bytes after a key's 2-byte key group (a
 * kstate key's id, a history entry's reader), hashed into a table of slots (rounded up to a
 * power of two; 8 bytes each). Writes whose keys the store cannot name (a restore's ingested
 * files, a pending record applied at start) count as touching every id. Called again (tracking
 * on): kinds are added (nothing read before is then unchanged), the table stays. 0 or -ENOMEM.
 * nf_store_view_wseq(v): the count of data writes v shows; what a reader derives from v is
 * tagged with it.
 * nf_store_view_unchanged(v, id, tag): true only if no write that v shows and a view tagged tag
 * did not touched id (tag <= v's count): reading id's keys of a tracked kind from v gives what
 * they gave at tag. False when tracking is off, tag is newer than v, or tag predates a write
 * of unknown ids. Ids that share a slot can make it false for nothing, never true wrongly.
 * Any thread. docs/ARCHITECTURE.md §4 "A reader's inputs kept". */
int nf_store_track(nf_store_t *st, uint32_t kinds, size_t slots);
uint64_t nf_store_view_wseq(const nf_store_view_t *v);
bool nf_store_view_unchanged(const nf_store_view_t *v, const unsigned char id[16], uint64_t tag);

/* ---- batches (one per shard and epoch) ---- */
nf_store_batch_t *nf_store_batch_new(void);
void nf_store_batch_put(nf_store_batch_t *b, nf_state_kind_t kind, const void *key, size_t klen,
                        const void *val, size_t vlen);
void nf_store_batch_delete(nf_store_batch_t *b, nf_state_kind_t kind, const void *key, size_t klen);
/* Marks b incomplete (a participant could not write its state into it): the epoch's pending
 * write then refuses it, so the epoch does not commit. */
void nf_store_batch_fail(nf_store_batch_t *b);
/* Calls fn for every write of b in the order they were made (del: a delete, val NULL); stops at
 * fn's non-zero return and returns it. -ENOMEM for a batch marked incomplete, -EINVAL for a
 * malformed one. */
typedef int (*nf_store_batch_fn)(void *arg, bool del, nf_state_kind_t kind, const void *key,
                                 size_t klen, const void *val, size_t vlen);
int nf_store_batch_foreach(const nf_store_batch_t *b, nf_store_batch_fn fn, void *arg);
size_t nf_store_batch_count(const nf_store_batch_t *b);
size_t nf_store_batch_bytes(const nf_store_batch_t *b);
/* Empties b for reuse; a capacity beyond four times what it held (and 1 MiB) is given back. */
void nf_store_batch_clear(nf_store_batch_t *b);
/* Appends src's records (puts and deletes, in order) to dst, then clears src; dst NULL: src is
 * only cleared (an epoch's cut without a batch). A failed src fails dst. */
void nf_store_batch_move(nf_store_batch_t *dst, nf_store_batch_t *src);
void nf_store_batch_free(nf_store_batch_t *b);

/* Applies a batch to the live families directly, outside the epoch protocol (a changelog
 * restore, before the job takes input). Not synced: a crash loses at most what the caller
 * records as not yet applied. 0, -EROFS or -EIO with err. */
int nf_store_write(nf_store_t *st, const nf_store_batch_t *b, char *err, size_t errlen);
/* The same without the write-ahead log (a restore into the state, many records): a crash loses
 * any of it not yet flushed, so a caller records what it applied only after nf_store_flush, which
 * writes every family's memtable to its files and waits. 0, -EROFS or -EIO with err. */
int nf_store_write_unlogged(nf_store_t *st, const nf_store_batch_t *b, char *err, size_t errlen);
int nf_store_flush(nf_store_t *st, char *err, size_t errlen);
/* The same as a bulk load: each family's records sorted into a table file (the last write of a
 * key kept, deletes as tombstones) that RocksDB links into the database, newer than everything
 * in it — no memtable, no write-ahead log, durable once it returns (a crash before leaves a
 * file that the next open removes). For many records at once: every call adds a file per family
 * to level 0. 0, -EROFS, -ENOMEM, -EINVAL or -EIO with err. */
int nf_store_ingest(nf_store_t *st, const nf_store_batch_t *b, char *err, size_t errlen);
/* Small named records of the state directory's own bookkeeping (the changelog's synced offsets),
 * kept in the "default" family under "meta/<name>", NUL-terminated text. put: synced write, 0 or
 * -errno; get: 1 (*value malloc'd), 0 (none, *value NULL) or -EIO. */
int nf_store_meta_put(nf_store_t *st, const char *name, const char *value, char *err,
                      size_t errlen);
int nf_store_meta_get(nf_store_t *st, const char *name, char **value, char *err, size_t errlen);

/* ---- the epoch protocol ---- */
/* One synced write replacing any previous pending record. header_json is opaque text (the epoch
 * module's: offsets, output positions). NULL batches are skipped. When a kind's writes come to
 * ingest_min_bytes, the state is sorted and those kinds written as table files first (synced),
 * which the record names instead of holding their records (store_pending.c, "State written
 * once"); the apply that follows in this process ingests them as prepared. The batches and
 * outputs themselves go to a file written and synced before the record, which names it
 * (store_body.c). 0, or -ENOSPC (the state's file system is full) or -EIO with err. */
int nf_store_pending_write(nf_store_t *st, uint64_t epoch, const char *header_json,
                           nf_store_batch_t *const *batches, unsigned nbatches,
                           const nf_blob_t *outputs, unsigned noutputs, char *err, size_t errlen);

typedef struct nf_store_pending {
    uint64_t epoch;
    char *header_json;
    nf_blob_t *outputs; /* noutputs blobs, malloc'd */
    unsigned noutputs;
} nf_store_pending_t;

/* 1 (a pending record exists: *out filled, free with nf_store_pending_free), 0 (none), -EIO. */
int nf_store_pending_read(nf_store_t *st, nf_store_pending_t *out, char *err, size_t errlen);
void nf_store_pending_free(nf_store_pending_t *p);
/* Applies the pending record (see top). 0 (also when there is none), or -ENOSPC (the state's
 * file system is full) or -EIO with err. */
int nf_store_pending_apply(nf_store_t *st, char *err, size_t errlen);
/* The same, for the pending record of epoch only (else -EINVAL, nothing applied), reporting in
 * *ingested (may be NULL) the records that went in as table files. */
int nf_store_pending_apply_epoch(nf_store_t *st, uint64_t epoch, size_t *ingested, char *err,
                                 size_t errlen);
/* Deletes the pending record without applying it. */
int nf_store_pending_discard(nf_store_t *st, char *err, size_t errlen);
/* The last committed epoch (0 = none) and its header (malloc'd, NULL if none). 0 or -EIO. */
int nf_store_committed(nf_store_t *st, uint64_t *epoch, char **header_json, char *err,
                       size_t errlen);

#endif
