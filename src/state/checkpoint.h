/* checkpoint.h — named checkpoints of the store (docs/ARCHITECTURE.md §4: "The commit" step 4,
 * "Restore"): RocksDB checkpoints of the live database under <state.dir>/checkpoints/chk-<epoch>/
 * whose table files are their own (copies, shared among checkpoints, never with the live database),
 * each with a manifest.json beside the database files; listing, verification, deletion, pruning,
 * and the restore that makes one the live database again (`newsflow run --from-checkpoint`,
 * `newsflow checkpoints`).
 *
 * Threads: nf_store_checkpoint from the epoch coordinator, between commits; the rest work on
 * the state directory's files (the CLI calls them; restore refuses while a job holds db/LOCK). */
#ifndef NF_CHECKPOINT_H
#define NF_CHECKPOINT_H

#include "state/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Takes a RocksDB checkpoint of the live database into
 * <state_dir>/checkpoints/chk-<epoch zero-padded to 12 digits>/ (written under a temporary
 * name and renamed, so a crash never leaves a half checkpoint under the final name) and writes
 * manifest.json: {"id","epoch","created_at" (RFC 3339),"header" (the committed header JSON, i.e.
 * input offsets),"config_hash","version","files","bytes","kinds":{name:{"keys_estimate"}}}
 * and also "committed_epoch", "created_at_ms", "git_commit", "shards" (the shard count the
 * state was written by; null when 0 is passed: unknown) and "file_list" ([{"name","bytes"}],
 * what verify checks file by file; a table file also has "hash", the chained nf_hash64 of its
 * bytes in hex, and "src", the identity device:inode:mtime_ns of the live file it copies).
 * RocksDB links the live table files into the checkpoint; each is then replaced by a link to the
 * newest earlier checkpoint's copy of the same live file (same name, size and src), else by a
 * copy read back and compared by hash: a live table file damaged in place damages no
 * checkpoint. The first checkpoint copies the whole state; later ones only the table files
 * written since (compactions). "files"/"bytes" count the database files: not
 * manifest.json, not RocksDB's info LOG files. An existing checkpoint of the same epoch is
 * replaced (a restore continues the epochs after the newest checkpoint it keeps, so that happens
 * only with checkpoints made by older versions). Leftovers of interrupted checkpoints are
 * removed. Call between commits: -EBUSY if a pending record exists. 0 or -errno with err. */
int nf_store_checkpoint(nf_store_t *st, uint64_t epoch, const char *config_hash, unsigned shards,
                        char *err, size_t errlen);
/* Deletes the oldest checkpoints beyond `retain`. Returns how many were deleted or -errno. */
int nf_store_checkpoint_prune(const char *state_dir, unsigned retain);

typedef struct nf_checkpoint_info {
    char id[32]; /* "chk-000000000042" */
    uint64_t epoch;
    char created_at[32];
    uint64_t bytes, files;
    unsigned shards; /* 0: unknown (taken by a version that did not record it) */
    /* what the last restore (checkpoints/last-restore.json) made of it: "" (nothing), "restored"
     * (the base the live state was restored from) or "newer than the restore" (kept from the
     * timeline the restore left; `newsflow run --from-checkpoint` can go back to it) */
    char note[32];
} nf_checkpoint_info_t;

/* Lists checkpoints, oldest first (from their manifests; a directory without a readable
 * manifest is skipped). *out malloc'd. 0 or -errno. */
int nf_checkpoint_list(const char *state_dir, nf_checkpoint_info_t **out, size_t *n);
/* Resolves "latest", "chk-…" or a bare epoch number to a checkpoint directory path (malloc'd).
 * NULL with a message saying which checkpoints exist. */
char *nf_checkpoint_path(const char *state_dir, const char *id, char *err, size_t errlen);
/* Reads a checkpoint's manifest.json text (malloc'd) or NULL with err. */
char *nf_checkpoint_manifest(const char *state_dir, const char *id, char *err, size_t errlen);
/* Verifies a checkpoint: manifest present and parseable, every file it counts present with the
 * recorded total size, the database opens read-only, every column family scans end to end with
 * checksums verified. 0 or -errno with the first problem in err. */
int nf_checkpoint_verify(const char *state_dir, const char *id, char *err, size_t errlen);
typedef struct nf_checkpoint_stats {
    uint64_t epoch, files, bytes, keys; /* keys: all column families, "default" included */
} nf_checkpoint_stats_t;
/* nf_checkpoint_verify that also reports what it checked (stats may be NULL). Resolving the id
 * fails with -EINVAL (not an id) or -ENOENT (no such checkpoint); problems found in the
 * checkpoint are -ENOENT (a listed file is missing), -EBADMSG (manifest) or -EIO. */
int nf_checkpoint_verify_stats(const char *state_dir, const char *id, nf_checkpoint_stats_t *stats,
                               char *err, size_t errlen);
int nf_checkpoint_delete(const char *state_dir, const char *id, char *err, size_t errlen);
/* Whether a process holds <state_dir>/db's LOCK (a running job): 1 (*pid set when known), 0, or
 * -errno. A store open in this process is not seen. */
int nf_store_in_use(const char *state_dir, long *pid);

typedef struct nf_restore_opts {
    /* The shard count the job will run with: a checkpoint whose state was written by another
     * count is refused (its manifest's "shards", else db_shards). 0: not checked. */
    unsigned shards;
    /* The shard count the checkpoint's own database records (the caller knows where: the
     * trending state), for checkpoints whose manifest does not say: > 0 the count, 0 none
     * recorded (any count fits), < 0 -errno (unreadable: refused). NULL: manifest only. */
    long (*db_shards)(nf_store_t *chk);
    /* Previous databases (db.replaced-*) kept after this restore, the newest; older ones are
     * deleted. 0 = keep every one. */
    unsigned keep_replaced;
} nf_restore_opts_t;

typedef struct nf_restore_result {
    bool resolved;           /* the id named a checkpoint (false: -EINVAL/-ENOENT, a usage error) */
    bool moved;              /* anything was moved: false whenever the restore was refused */
    char id[32];             /* the checkpoint restored */
    uint64_t epoch;          /* its epoch */
    uint64_t next_epoch;     /* the first epoch the job commits after the restore */
    unsigned shards;         /* the checkpoint's shard count (0 unknown or none recorded) */
    char replaced[4096];     /* where the previous database went ("" if there was none) */
    unsigned kept_newer;     /* checkpoints newer than the restored one, kept */
    char newest_kept[32];    /* the newest of them ("" if none) */
    unsigned pruned;         /* older db.replaced-* deleted */
    char pruned_names[1024]; /* their names, comma-separated (truncated with "...") */
} nf_restore_result_t;

/* Makes a checkpoint the live database. Every check that can refuse it runs before anything is
 * moved, and a refusal leaves the live database and every checkpoint untouched:
 *   1. the id resolves to a checkpoint;
 *   2. full verification (nf_checkpoint_verify: files against the manifest, then every block of
 *      every column family read with its checksum verified);
 *   3. compatibility: the shard count (opts->shards, see nf_restore_opts_t);
 *   4. nobody holds db/LOCK (-EBUSY; a store open in this process is not detected).
 * Then the checkpoint's files are copied into a fresh database — never linked: the live database
 * must share no file with a checkpoint, or damage to one would be damage to the other — and it
 * replaces <state_dir>/db, which is moved (never deleted) to
 * <state_dir>/db.replaced-<UTC time YYYY-MM-DDTHHMMSSZ>-epoch<its committed epoch, or
 * "unknown">; beyond opts->keep_replaced the oldest db.replaced-* are deleted. Checkpoints newer
 * than the restored one are kept (another timeline an operator may want back); so that the
 * job's own checkpoints never take their numbers, the restored database's committed epoch is set
 * to the newest of them, and epochs continue after it (the state is the checkpoint's). The
 * restore is recorded in <state_dir>/checkpoints/last-restore.json (nf_checkpoint_list marks the
 * base and the kept ones). res (may be NULL) says what was done. 0 or -errno with err. */
int nf_checkpoint_restore(const char *state_dir, const char *id, const nf_restore_opts_t *opts,
                          nf_restore_result_t *res, char *err, size_t errlen);

/* Copies checkpoint id (verified in full first) into dest/chk-<epoch>/ (dest created if
 * missing; the target must not exist): every file copied, read back and compared by hash,
 * manifest.json last, everything synced — a checkpoint kept on another volume. *out_path gets
 * the new directory. 0 or -errno with err (-EEXIST: the target exists). */
int nf_checkpoint_export(const char *state_dir, const char *id, const char *dest, char *out_path,
                         size_t out_len, char *err, size_t errlen);
/* The reverse: the checkpoint directory src (an export, or a copy from another machine) is
 * verified in full where it is, then copied the same way into
 * <state_dir>/checkpoints/chk-<its manifest's epoch>/ (under a temporary name, renamed when
 * complete). Refused if that checkpoint exists. `newsflow run --from-checkpoint` restores it
 * like any other (the job's identity check refuses another job's state then). *id_out gets its
 * id. 0 or -errno with err. */
int nf_checkpoint_import(const char *state_dir, const char *src, char *id_out, size_t id_len,
                         char *err, size_t errlen);

#endif
