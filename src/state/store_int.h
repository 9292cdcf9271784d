/* store_int.h — what the store's files share (store.c the live database, store_pending.c the
 * epoch protocol's records, checkpoint.c named checkpoints, store_view.c committed views). Not a
 * contract: only those four include it (and tests/unit/state/test_store.c, for store_rocks_err). */
#ifndef NF_STORE_INT_H
#define NF_STORE_INT_H

#include "state/store.h"

#include <pthread.h>
#include <rocksdb/c.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define COMMITTED_KEY "committed" /* "default" family: u64le epoch | header JSON */

typedef struct store_track_table store_track_table_t;

struct nf_store {
    rocksdb_t *db;
    rocksdb_options_t *dbopts; /* the database and "default" (and families we do not know) */
    rocksdb_options_t *cfopts; /* state kinds: dbopts + the TTL filter */
    rocksdb_compactionfilter_t *ttl;
    /* Kinds that expire by their owner's clock (nf_state_kind_owner_clock): their own options
     * and filter, which reads clock[kind] (0 until nf_store_set_clock: nothing dropped). */
    rocksdb_options_t *owner_cfopts[NF_KIND__COUNT];
    rocksdb_compactionfilter_t *owner_ttl[NF_KIND__COUNT];
    _Atomic uint64_t clock[NF_KIND__COUNT];
    rocksdb_cache_t *cache;
    rocksdb_block_based_table_options_t *bbto;
    rocksdb_readoptions_t *ro, *ro_scan;
    rocksdb_writeoptions_t *wo, *wo_sync, *wo_nowal; /* wo_nowal: nf_store_write_unlogged */
    rocksdb_column_family_handle_t *def;
    rocksdb_column_family_handle_t *kinds[NF_KIND__COUNT]; /* NULL: absent (read-only open) */
    rocksdb_column_family_handle_t **others;               /* open families that are none of ours */
    size_t nothers;
    bool read_only;
    size_t ingest_min;                /* nf_store_opts_t.ingest_min_bytes */
    void (*fault)(const char *point); /* nf_store_set_fault_hook */
    /* The pending record's table files, prepared by nf_store_pending_write for the apply that
     * follows (NULL: none, or a restart: the apply reads the record). */
    struct store_apply *prep;
    uint64_t prep_epoch;
    /* The body file of the last pending record written (store_body.c), removed once the next
     * record is (NULL: none). */
    char *body_path;
    char *state_dir; /* NULL when opened by nf_store_open_dir */
    char *db_dir;
    /* The latest committed view (store_view.c), under view_mu; NULL before the first publish. */
    pthread_mutex_t view_mu;
    nf_store_view_t *view;
    /* Tracked writes (store_track.c): every data write and every view's snapshot under
     * track_mu; track_count counts the data writes, track_floor is the count of the last one
     * whose ids were not named; track (NULL: off) has the slots. track_pending: the slots of the
     * pending record written for track_pending_epoch (track_npending of them, SIZE_MAX: not
     * named), touched when it is applied. */
    pthread_mutex_t track_mu;
    uint64_t track_count, track_floor;
    uint32_t track_kinds;
    _Atomic(store_track_table_t *) track;
    uint32_t *track_pending;
    size_t track_npending;
    uint64_t track_pending_epoch;
};

typedef struct open_mode {
    bool read_only;
    bool verify; /* checkpoint verification: open every table file, no caching */
} open_mode_t;

/* ---- store.c ---- */
/* Opens the database in db_dir (state_dir: NULL for a checkpoint's). NULL with err. */
nf_store_t *store_open(const char *db_dir, const char *state_dir, const nf_store_opts_t *o,
                       open_mode_t mode, char *err, size_t errlen);
/* Point read of any family: 1 (found, *val malloc'd), 0 (absent), -EIO with err. */
int store_get_raw(nf_store_t *st, rocksdb_column_family_handle_t *h, const void *key, size_t klen,
                  void **val, size_t *len, char *err, size_t errlen);
/* nf_store_get, nf_store_multi_get and nf_store_scan_prefix with the read options given (a
 * view's: its snapshot). */
int store_get_ro(nf_store_t *st, const rocksdb_readoptions_t *ro, nf_state_kind_t kind,
                 const void *key, size_t klen, void **val, size_t *len, char *err, size_t errlen);
int store_multi_get_ro(nf_store_t *st, const rocksdb_readoptions_t *ro, nf_state_kind_t kind,
                       size_t n, const unsigned char *keys, size_t klen, void **vals, size_t *lens,
                       char *err, size_t errlen);
/* The keys of a kind with the prefix, from the first >= from (flen bytes; 0: the prefix's first).
 */
int store_scan_from_ro(nf_store_t *st, const rocksdb_readoptions_t *ro, nf_state_kind_t kind,
                       const void *prefix, size_t plen, const void *from, size_t flen,
                       nf_store_scan_fn fn, void *arg);
int store_scan_prefix_ro(nf_store_t *st, const rocksdb_readoptions_t *ro, nf_state_kind_t kind,
                         const void *prefix, size_t plen, nf_store_scan_fn fn, void *arg);
/* Each of n prefixes (plen bytes each, one after the other) scanned in turn with one iterator
 * (creating one is most of a short scan's cost); fn's non-zero ends the scan of that prefix. */
int store_scan_prefixes_ro(nf_store_t *st, const rocksdb_readoptions_t *ro, nf_state_kind_t kind,
                           const unsigned char *prefixes, size_t n, size_t plen,
                           nf_store_scan_fn fn, void *arg);
/* Drops the store's reference to its latest view (at close). */
void store_view_drop(nf_store_t *st);
/* Shard idx's batch as a RocksDB WriteBatch on this database's families, in key order. */
int store_batch_to_rocks(nf_store_t *st, const nf_store_batch_t *b, rocksdb_writebatch_t *wb,
                         unsigned idx, char *err, size_t errlen);
int store_seterr(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "<what>: <RocksDB's reason>"; frees RocksDB's message. code, or -ENOSPC when the reason is a
 * full file system ("No space left on device"). */
int store_rocks_err(char *rerr, char *err, size_t errlen, int code, const char *what);
uint64_t store_realtime_ms(void);
/* snprintf into a PATH_MAX buffer; -ENAMETOOLONG (with err) if it does not fit. */
int store_path_fmt(char *out, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int store_mkdir_p(const char *path);
/* rm -rf; a path that is not there is fine. 0 or -errno. */
int store_rm_rf(const char *path);
/* Removes (whole trees) every entry of dir whose name starts with prefix: what a crash left of
 * files or directories written aside before being moved in. */
void store_sweep(const char *dir, const char *prefix);
/* fsync of the file (dir: the directory) at path. 0 or -errno. */
int store_fsync_path(const char *path, bool dir);
/* Turns RocksDB's perf counters off for the calling thread (once; before its reads and
 * writes). */
void store_perf_off(void);

/* An epoch's batches made ready for its pending record (store_pending.c): store_apply_prepare
 * joins them, sorts their records, writes each kind with at least st->ingest_min bytes as a
 * table file and puts the others in one WriteBatch, in key order; store_apply_free removes files
 * not ingested. */
typedef struct store_apply {
    nf_store_batch_t *joined; /* the batches one after the other, when more than one has records */
    rocksdb_writebatch_t *wb; /* the kinds below the threshold */
    size_t ingested;
    unsigned nfiles;
    int kinds[NF_KIND__COUNT];
    char *paths[NF_KIND__COUNT];
    uint64_t records[NF_KIND__COUNT], sizes[NF_KIND__COUNT]; /* of each file (sizes: pending) */
} store_apply_t;
/* The table file at path linked into kind's family (moved: path is gone on success; durable on
 * return). The caller brackets it for tracked writes. */
int store_ingest_table(nf_store_t *st, int kind, const char *path, char *err, size_t errlen);
/* A fresh path for a table file to ingest, in the database directory (swept at open). */
int store_ingest_path(nf_store_t *st, char *path, char *err, size_t errlen);
/* At open: removes the pending record's table files that no pending record names (a crash
 * between writing them and the record, or after the apply). */
void store_pending_sweep(nf_store_t *st);
/* At close: the prepared apply freed, its files left for the record's apply at the next open. */
void store_pending_forget(nf_store_t *st);
int store_apply_prepare(nf_store_t *st, nf_store_batch_t *const *batches, unsigned n,
                        store_apply_t *a, char *err, size_t errlen);
/* The same, files only when asked: without, every kind goes into a->wb, in key order. */
int store_apply_sort(nf_store_t *st, nf_store_batch_t *const *batches, unsigned n, bool files,
                     store_apply_t *a, char *err, size_t errlen);
void store_apply_free(store_apply_t *a);

/* ---- store_pending.c ---- */
/* Tracked writes (store_track.c). A data write is bracketed: store_track_begin, the write, then
 * one of the ends (the batch written, ids unknown, or the pending record of epoch applied), which
 * count it and unlock. A view's snapshot is taken under track_mu and store_track_view gives its
 * count and floor. */
void store_track_init(nf_store_t *st);
void store_track_free(nf_store_t *st);
void store_track_begin(nf_store_t *st);
void store_track_end_batch(nf_store_t *st, const nf_store_batch_t *b);
void store_track_end_unknown(nf_store_t *st);
void store_track_end_pending(nf_store_t *st, uint64_t epoch);
/* The slots of the batches of epoch's pending record, kept until it is applied. */
void store_track_pending(nf_store_t *st, uint64_t epoch, nf_store_batch_t *const *batches,
                         unsigned n);
/* The pending record was discarded: its slots are forgotten (an apply then counts as unknown). */
void store_track_discard_pending(nf_store_t *st);
void store_track_view(nf_store_t *st, uint64_t *count, uint64_t *floor);
bool store_track_unchanged(nf_store_t *st, uint64_t count, uint64_t floor, const unsigned char *id,
                           uint64_t tag);

typedef struct store_pending_head {
    uint64_t epoch;
    uint32_t nbatches, noutputs;
    bool tables; /* the record names table files (its one batch: the other kinds) */
    bool body;   /* its batches (unless tables) and outputs are in its body file (store_body.c) */
    char *json;  /* malloc'd */
} store_pending_head_t;
/* The pending record's header: 1 (found), 0, or -errno. */
int store_pending_head_read(nf_store_t *st, store_pending_head_t *h, char *err, size_t errlen);

/* ---- store_body.c: the pending record's body file ---- */
/* The record's files are STORE_PENDING_FILE "<epoch>-<pid>-<n>.<ext>" in the database directory;
 * STORE_PENDING_BODY is the record's key naming its body file. */
#define STORE_PENDING_FILE "newsflow-pending-"
#define STORE_PENDING_BODY "pending/body"
typedef struct store_body {
    char *path; /* NULL: none */
    uint64_t size;
    uint32_t nbatches, noutputs; /* in the file */
    nf_blob_t *parts;            /* store_body_load: the parts read, each malloc'd */
    unsigned nparts;
} store_body_t;
/* parts (nb batches, then no outputs) into a new file, synced with its directory; out names it.
 * 0 or -errno with err (no file left). */
int store_body_write(nf_store_t *st, uint64_t epoch, const nf_blob_t *parts, unsigned nb,
                     unsigned no, store_body_t *out, char *err, size_t errlen);
/* The record's value naming b's file (malloc'd, *len); NULL: out of memory. */
unsigned char *store_body_value(const store_body_t *b, size_t *len);
/* The file h's record names, checked (there, its size, its head and lengths), and its batches
 * or (outputs) its outputs read into b->parts. 0 or -errno with err naming the file. */
int store_body_load(nf_store_t *st, const store_pending_head_t *h, bool outputs, store_body_t *b,
                    char *err, size_t errlen);
/* The path of the file h's record names (*path malloc'd, or NULL); <0: it cannot be told or the
 * file is not as named (*path may still be set). */
int store_body_named(nf_store_t *st, const store_pending_head_t *h, char **path);
/* Frees b; remove: its file too. */
void store_body_free(store_body_t *b, bool remove);

#endif
