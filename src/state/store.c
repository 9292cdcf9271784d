/* store.c — the live database on RocksDB (see store.h for the contract, docs/ARCHITECTURE.md §4
 * "Store"): open (creating the column families that are missing, keeping the ones we do not know
 * open so RocksDB accepts the open), point reads, scans, a TTL compaction filter on every state
 * kind's family, and the shards' batches. The epoch protocol's records are store_pending.c's, named
 * checkpoints checkpoint.c's; what the three share is in store_int.h.
 *
 * A shard's batch (nf_store_batch_t) is a plain byte log of puts and deletes, not a RocksDB
 * WriteBatch: a RocksDB batch names column families by handles of an open database, and shards
 * fill their batches without one. nf_store_pending_write turns each into a WriteBatch (with
 * this database's family ids, store_batch_to_rocks) and stores its data; apply replays that data
 * verbatim. */
#include "state/store.h"
#include "algo/bytes.h"
#include "state/store_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <mntent.h>
#include <rocksdb/c.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

static const char *const kind_names[NF_KIND__COUNT] = {
    [NF_KIND_ARTICLE_KEY] = "article_key",
    [NF_KIND_CRAWL_SCHEDULE] = "crawl_schedule",
    [NF_KIND_READS] = "reads",
    [NF_KIND_EVENT_IDS] = "event_ids",
    [NF_KIND_CLUSTER_SIG] = "cluster_sig",
    [NF_KIND_CLUSTER_BUCKET] = "cluster_bucket",
    [NF_KIND_CLUSTER_PARENT] = "cluster_parent",
    [NF_KIND_ARTICLE_TOPICS] = "article_topics",
    [NF_KIND_INTEREST] = "interest",
    [NF_KIND_INTEREST_SEEN] = "interest_seen",
    [NF_KIND_TRENDING] = "trending",
    [NF_KIND_ARTICLE_META] = "article_meta",
    [NF_KIND_TOPIC_RECENT] = "topic_recent",
    [NF_KIND_STORY] = "story",
    [NF_KIND_SEARCH_LOG] = "search_log",
};

const char *nf_state_kind_name(nf_state_kind_t k)
{
    return (unsigned)k < NF_KIND__COUNT ? kind_names[k] : "?";
}

bool nf_state_kind_owner_clock(nf_state_kind_t k)
{
    return k == NF_KIND_CLUSTER_SIG || k == NF_KIND_CLUSTER_BUCKET || k == NF_KIND_CLUSTER_PARENT;
}

/* ---------------------------------------------------------------------------------------------
 * small helpers */

int store_seterr(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* "<what>: <RocksDB's reason>"; frees RocksDB's message. -ENOSPC rather than code when the
 * reason is a full file system: RocksDB's status for ENOSPC (IOStatus::NoSpace) reads "IO error:
 * No space left on device: While appending to file: ...", that subcode's text fixed in English. */
int store_rocks_err(char *rerr, char *err, size_t errlen, int code, const char *what)
{
    store_seterr(err, errlen, code, "%s: %s", what, rerr ? rerr : "unknown RocksDB error");
    if (rerr && strstr(rerr, "No space left on device"))
        code = -ENOSPC;
    rocksdb_free(rerr);
    return code;
}

/* ---------------------------------------------------------------------------------------------
 * the file system under the state */

int nf_store_space(const char *path, nf_store_space_t *out)
{
    memset(out, 0, sizeof *out);
    struct statvfs sv;
    if (statvfs(path, &sv) != 0)
        return -errno;
    out->free_bytes = (uint64_t)sv.f_bavail * sv.f_frsize;
    out->size_bytes = (uint64_t)sv.f_blocks * sv.f_frsize;
    /* The mount point: the longest one that is path or an ancestor of it. */
    char real[PATH_MAX];
    FILE *f = realpath(path, real) ? setmntent("/proc/self/mounts", "r") : NULL;
    if (!f)
        return 0;
    struct mntent me;
    char buf[4 * PATH_MAX];
    size_t best = 0;
    while (getmntent_r(f, &me, buf, sizeof buf)) {
        size_t n = strlen(me.mnt_dir);
        bool under =
            n == 1 ? real[0] == '/' : !strncmp(real, me.mnt_dir, n) && (real[n] == '/' || !real[n]);
        if (under && n >= best) { /* the last of equal ones: mounted over the others */
            best = n;
            snprintf(out->mount, sizeof out->mount, "%s", me.mnt_dir);
            snprintf(out->device, sizeof out->device, "%s", me.mnt_fsname);
            snprintf(out->type, sizeof out->type, "%s", me.mnt_type);
        }
    }
    endmntent(f);
    return 0;
}

/* "12.5 MiB", "300 KiB", "512 B" */
static void human_bytes(char *out, size_t n, uint64_t b)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    unsigned u = 0;
    while (v >= 1024 && u + 1 < sizeof unit / sizeof unit[0]) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(out, n, "%" PRIu64 " B", b);
    else
        snprintf(out, n, "%.1f %s", v, unit[u]);
}

void nf_store_space_text(const nf_store_space_t *sp, char *out, size_t n)
{
    char fr[32], sz[32];
    human_bytes(fr, sizeof fr, sp->free_bytes);
    human_bytes(sz, sizeof sz, sp->size_bytes);
    if (sp->mount[0])
        snprintf(out, n, "file system %s (%s on %s): %s free of %s", sp->mount, sp->type,
                 sp->device, fr, sz);
    else
        snprintf(out, n, "file system: %s free of %s", fr, sz);
}

uint64_t store_realtime_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* snprintf into a PATH_MAX buffer; -ENAMETOOLONG (with err) if it does not fit. */
int store_path_fmt(char *out, char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, PATH_MAX, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= PATH_MAX)
        return store_seterr(err, errlen, -ENAMETOOLONG, "path too long: %.200s...", out);
    return 0;
}

int store_mkdir_p(const char *path)
{
    char buf[PATH_MAX];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof buf)
        return -ENAMETOOLONG;
    memcpy(buf, path, len + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return -errno;
    struct stat sb;
    if (stat(buf, &sb) != 0)
        return -errno;
    return S_ISDIR(sb.st_mode) ? 0 : -ENOTDIR;
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb;
    (void)flag;
    (void)f;
    if (remove(p) != 0 && errno != ENOENT)
        return errno;
    return 0;
}

int store_rm_rf(const char *path)
{
    int r = nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    if (r == 0)
        return 0;
    if (r == -1)
        return errno == ENOENT ? 0 : -errno;
    return -r;
}

int store_fsync_path(const char *path, bool dir)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | (dir ? O_DIRECTORY : 0));
    if (fd < 0)
        return -errno;
    int r = fsync(fd) == 0 ? 0 : -errno;
    close(fd);
    return r;
}

void store_sweep(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    size_t plen = strlen(prefix);
    const struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char p[PATH_MAX];
        if (!strncmp(e->d_name, prefix, plen) &&
            store_path_fmt(p, NULL, 0, "%s/%s", dir, e->d_name) == 0)
            store_rm_rf(p);
    }
    closedir(d);
}

/* ---------------------------------------------------------------------------------------------
 * open / close */

/* The TTL convention (store.h): a value starting with a non-zero u64le expiry in the past is
 * dropped. Stateless, so one filter object serves every family and compaction thread. */
static unsigned char ttl_filter(void *state, int level, const char *key, size_t klen,
                                const char *val, size_t vlen, char **nv, size_t *nvlen,
                                unsigned char *changed)
{
    (void)state, (void)level, (void)key, (void)klen, (void)nv, (void)nvlen;
    *changed = 0;
    if (vlen < 8)
        return 0;
    uint64_t expires = nf_get_le64((const unsigned char *)val);
    return expires != 0 && expires < store_realtime_ms();
}

/* The same by an owner's clock (state: its nf_store.clock slot); 0 = not set yet: keep. */
static unsigned char owner_ttl_filter(void *state, int level, const char *key, size_t klen,
                                      const char *val, size_t vlen, char **nv, size_t *nvlen,
                                      unsigned char *changed)
{
    (void)level, (void)key, (void)klen, (void)nv, (void)nvlen;
    *changed = 0;
    uint64_t clock = atomic_load_explicit((_Atomic uint64_t *)state, memory_order_relaxed);
    if (vlen < 8 || clock == 0)
        return 0;
    uint64_t expires = nf_get_le64((const unsigned char *)val);
    return expires != 0 && expires < clock;
}

static const char *owner_ttl_filter_name(void *state)
{
    (void)state;
    return "newsflow.ttl-owner-clock";
}

void nf_store_set_clock(nf_store_t *st, nf_state_kind_t kind, uint64_t now_ms)
{
    if ((unsigned)kind >= NF_KIND__COUNT)
        return;
    _Atomic uint64_t *c = &st->clock[kind];
    uint64_t cur = atomic_load_explicit(c, memory_order_relaxed);
    while (now_ms > cur && !atomic_compare_exchange_weak_explicit(
                               c, &cur, now_ms, memory_order_relaxed, memory_order_relaxed))
        ;
}

static void ttl_filter_destroy(void *state)
{
    (void)state; /* the C API calls the destructor unconditionally */
}

static const char *ttl_filter_name(void *state)
{
    (void)state;
    return "newsflow.ttl";
}

#define INGEST_TMP                                                                                 \
    "newsflow-ingest-" /* nf_store_ingest's table files, before RocksDB links them in */

static void store_free(nf_store_t *st)
{
    if (!st)
        return;
    store_view_drop(st); /* its snapshot belongs to the database */
    store_pending_forget(st);
    if (st->db) {
        if (st->def)
            rocksdb_column_family_handle_destroy(st->def);
        for (int k = 0; k < NF_KIND__COUNT; k++)
            if (st->kinds[k])
                rocksdb_column_family_handle_destroy(st->kinds[k]);
        for (size_t i = 0; i < st->nothers; i++)
            rocksdb_column_family_handle_destroy(st->others[i]);
        rocksdb_close(st->db);
    }
    free(st->others);
    /* after the close: the families hold raw pointers to the filter */
    if (st->cfopts)
        rocksdb_options_destroy(st->cfopts);
    if (st->dbopts)
        rocksdb_options_destroy(st->dbopts);
    if (st->ttl)
        rocksdb_compactionfilter_destroy(st->ttl);
    for (int k = 0; k < NF_KIND__COUNT; k++) {
        if (st->owner_cfopts[k])
            rocksdb_options_destroy(st->owner_cfopts[k]);
        if (st->owner_ttl[k])
            rocksdb_compactionfilter_destroy(st->owner_ttl[k]);
    }
    if (st->bbto)
        rocksdb_block_based_options_destroy(st->bbto);
    if (st->cache)
        rocksdb_cache_destroy(st->cache);
    if (st->ro)
        rocksdb_readoptions_destroy(st->ro);
    if (st->ro_scan)
        rocksdb_readoptions_destroy(st->ro_scan);
    if (st->wo)
        rocksdb_writeoptions_destroy(st->wo);
    if (st->wo_sync)
        rocksdb_writeoptions_destroy(st->wo_sync);
    if (st->wo_nowal)
        rocksdb_writeoptions_destroy(st->wo_nowal);
    pthread_mutex_destroy(&st->view_mu);
    store_track_free(st);
    free(st->state_dir);
    free(st->db_dir);
    free(st);
}

void nf_store_opts_default(nf_store_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->block_cache_mb = 256;
    o->write_buffer_mb = 64;
    o->bg_threads = 2;
    o->ingest_min_bytes = NF_STORE_INGEST_MIN_BYTES;
}

/* RocksDB's InfoLogLevel (rocksdb/env.h) for nf_store_log_t (store.h). OFF is HEADER_LEVEL,
 * the highest RocksDB accepts: it writes its OPTIONS file, which names the level, and has no
 * name for the one above (NUM_INFO_LOG_LEVELS), so the open would fail. At HEADER_LEVEL only
 * the settings dumped while a database opens are written. */
static int info_log_level(nf_store_log_t log)
{
    enum { DEBUG_LEVEL, INFO_LEVEL, WARN_LEVEL, ERROR_LEVEL, FATAL_LEVEL, HEADER_LEVEL };
    switch (log) {
    case NF_STORE_LOG_INFO:
        return INFO_LEVEL;
    case NF_STORE_LOG_WARN:
        return WARN_LEVEL;
    case NF_STORE_LOG_OFF:
        break;
    }
    return HEADER_LEVEL;
}

static int kind_of(const char *name)
{
    for (int k = 0; k < NF_KIND__COUNT; k++)
        if (!strcmp(name, kind_names[k]))
            return k;
    return -1;
}

nf_store_t *store_open(const char *db_dir, const char *state_dir, const nf_store_opts_t *o,
                       open_mode_t mode, char *err, size_t errlen)
{
    nf_store_t *st = calloc(1, sizeof *st);
    char **existing = NULL;
    size_t nexisting = 0;
    const char **names = NULL;
    const rocksdb_options_t **copts = NULL;
    rocksdb_column_family_handle_t **handles = NULL;
    if (!st)
        goto oom;
    pthread_mutex_init(&st->view_mu, NULL);
    store_track_init(st);
    st->read_only = mode.read_only;
    st->ingest_min = o->ingest_min_bytes;
    st->db_dir = strdup(db_dir);
    if (!st->db_dir || (state_dir && !(st->state_dir = strdup(state_dir))))
        goto oom;

    if (!mode.read_only) {
        /* RocksDB writes its LOG, MANIFEST, OPTIONS and WAL while it opens; on a full file system
         * its LOG writes abort the process (store.h nf_store_log_t). */
        nf_store_space_t sp;
        if (nf_store_space(state_dir ? state_dir : db_dir, &sp) == 0 &&
            sp.free_bytes < NF_STORE_OPEN_MIN_FREE) {
            char where[PATH_MAX + 600];
            nf_store_space_text(&sp, where, sizeof where);
            store_seterr(err, errlen, -ENOSPC,
                         "cannot open the state in %s: its %s; opening it needs %u MiB: free "
                         "space there (docs/runbooks.md \"Disk full on state.dir\")",
                         state_dir ? state_dir : db_dir, where, NF_STORE_OPEN_MIN_FREE >> 20);
            goto fail;
        }
    }
    st->dbopts = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(st->dbopts, !mode.read_only);
    rocksdb_options_set_create_missing_column_families(st->dbopts, !mode.read_only);
    rocksdb_options_set_paranoid_checks(st->dbopts, 1);
    unsigned threads = o->bg_threads ? o->bg_threads : 2;
    rocksdb_options_increase_parallelism(st->dbopts, (int)threads);
    rocksdb_options_set_max_background_jobs(st->dbopts, (int)threads);
    if (o->write_buffer_mb)
        rocksdb_options_set_write_buffer_size(st->dbopts, o->write_buffer_mb << 20);
    rocksdb_options_set_keep_log_file_num(st->dbopts, 4);
    rocksdb_options_set_max_log_file_size(st->dbopts, 16u << 20);
    rocksdb_options_set_info_log_level(st->dbopts, info_log_level(o->log));
    if (mode.verify)
        rocksdb_options_set_max_open_files(st->dbopts, -1); /* open (and check) every table */
    st->bbto = rocksdb_block_based_options_create();
    st->cache = rocksdb_cache_create_lru((o->block_cache_mb ? o->block_cache_mb : 8) << 20);
    rocksdb_block_based_options_set_block_cache(st->bbto, st->cache);
    /* Dedup lookups mostly miss (a new article): a bloom filter answers those without I/O. */
    rocksdb_block_based_options_set_filter_policy(st->bbto,
                                                  rocksdb_filterpolicy_create_bloom_full(10));
    rocksdb_options_set_block_based_table_factory(st->dbopts, st->bbto);
    /* ... and the memtable, where a cold kstate lookup goes first: without a filter each miss
     * searches its skip list (64 MB of entries written at the last commits). */
    rocksdb_options_set_memtable_prefix_bloom_size_ratio(st->dbopts, 0.02);
    rocksdb_options_set_memtable_whole_key_filtering(st->dbopts, 1);
    st->ttl =
        rocksdb_compactionfilter_create(NULL, ttl_filter_destroy, ttl_filter, ttl_filter_name);
    st->cfopts = rocksdb_options_create_copy(st->dbopts);
    rocksdb_options_set_compaction_filter(st->cfopts, st->ttl);
    for (int k = 0; k < NF_KIND__COUNT; k++) {
        if (!nf_state_kind_owner_clock((nf_state_kind_t)k))
            continue;
        st->owner_ttl[k] = rocksdb_compactionfilter_create(
            (void *)&st->clock[k], ttl_filter_destroy, owner_ttl_filter, owner_ttl_filter_name);
        st->owner_cfopts[k] = rocksdb_options_create_copy(st->dbopts);
        rocksdb_options_set_compaction_filter(st->owner_cfopts[k], st->owner_ttl[k]);
    }

    st->ro = rocksdb_readoptions_create();
    st->ro_scan = rocksdb_readoptions_create();
    rocksdb_readoptions_set_fill_cache(st->ro_scan, 0); /* a full scan must not evict hot keys */
    if (mode.verify) {
        rocksdb_readoptions_set_verify_checksums(st->ro_scan, 1);
        rocksdb_readoptions_set_fill_cache(st->ro, 0);
    }
    st->wo = rocksdb_writeoptions_create();
    st->wo_sync = rocksdb_writeoptions_create();
    rocksdb_writeoptions_set_sync(st->wo_sync, 1);
    st->wo_nowal = rocksdb_writeoptions_create();
    rocksdb_writeoptions_disable_WAL(st->wo_nowal, 1);

    /* Existing families: RocksDB refuses a read-write open that does not name all of them. */
    char current[PATH_MAX];
    if (store_path_fmt(current, err, errlen, "%s/CURRENT", db_dir) != 0)
        goto fail;
    if (access(current, F_OK) == 0) {
        char *rerr = NULL;
        existing = rocksdb_list_column_families(st->dbopts, db_dir, &nexisting, &rerr);
        if (rerr) {
            char what[PATH_MAX + 64];
            snprintf(what, sizeof what, "cannot list the column families of %s", db_dir);
            store_rocks_err(rerr, err, errlen, -EIO, what);
            if (existing) /* RocksDB allocates the (empty) list even when it fails */
                rocksdb_list_column_families_destroy(existing, nexisting);
            existing = NULL;
            goto fail;
        }
    } else if (mode.read_only) {
        store_seterr(err, errlen, -ENOENT, "no RocksDB database at %s (%s is missing)", db_dir,
                     current);
        goto fail;
    }

    size_t cap = 1 + NF_KIND__COUNT + nexisting, n = 0;
    names = calloc(cap, sizeof *names);
    copts = calloc(cap, sizeof *copts);
    handles = calloc(cap, sizeof *handles);
    if (!names || !copts || !handles)
        goto oom;
    names[n] = "default";
    copts[n++] = st->dbopts;
    for (int k = 0; k < NF_KIND__COUNT; k++) {
        bool present = !mode.read_only; /* read-write: created if missing */
        for (size_t i = 0; i < nexisting && !present; i++)
            present = !strcmp(existing[i], kind_names[k]);
        if (present) {
            names[n] = kind_names[k];
            copts[n++] = st->owner_cfopts[k] ? st->owner_cfopts[k] : st->cfopts;
        }
    }
    for (size_t i = 0; i < nexisting; i++) {
        if (strcmp(existing[i], "default") != 0 && kind_of(existing[i]) < 0) {
            names[n] = existing[i];
            copts[n++] = st->dbopts; /* not ours: no TTL filter, its values are unknown */
        }
    }

    char *rerr = NULL;
    if (mode.read_only)
        st->db = rocksdb_open_for_read_only_column_families(st->dbopts, db_dir, (int)n, names,
                                                            copts, handles, 0, &rerr);
    else
        st->db =
            rocksdb_open_column_families(st->dbopts, db_dir, (int)n, names, copts, handles, &rerr);
    if (rerr || !st->db) {
        const char *hint = rerr && (strstr(rerr, "lock") || strstr(rerr, "LOCK"))
                               ? " (is another newsflow process, or another store in this "
                                 "process, using this state directory?)"
                               : "";
        store_seterr(err, errlen, -EIO, "cannot open state database %s: %s%s", db_dir,
                     rerr ? rerr : "unknown RocksDB error", hint);
        rocksdb_free(rerr);
        st->db = NULL;
        goto fail;
    }
    st->others = calloc(n, sizeof *st->others);
    if (!st->others) {
        /* still take the handles so store_free can close them */
        for (size_t i = 0; i < n; i++)
            rocksdb_column_family_handle_destroy(handles[i]);
        rocksdb_close(st->db);
        st->db = NULL;
        goto oom;
    }
    for (size_t i = 0; i < n; i++) {
        int k = kind_of(names[i]);
        if (i == 0)
            st->def = handles[i];
        else if (k >= 0)
            st->kinds[k] = handles[i];
        else
            st->others[st->nothers++] = handles[i];
    }
    free(names);
    free(copts);
    free(handles);
    if (existing)
        rocksdb_list_column_families_destroy(existing, nexisting);
    if (!mode.read_only) {
        store_sweep(db_dir, INGEST_TMP);
        store_pending_sweep(st);
    }
    return st;

oom:
    store_seterr(err, errlen, -ENOMEM, "opening %s: out of memory", db_dir);
fail:
    free(names);
    free(copts);
    free(handles);
    if (existing)
        rocksdb_list_column_families_destroy(existing, nexisting);
    store_free(st);
    return NULL;
}

/* A read-write open never creates a database where one was: a db directory without CURRENT that
 * holds anything (table files, a MANIFEST, a WAL) is a damaged database, not a new one, and a
 * missing one beside named checkpoints is a lost one. RocksDB would create an empty database
 * over the first (and delete the old table files as obsolete), and the job would start from
 * nothing and emit everything again. 0 (a database is there), 1 (none: create one), or
 * -EUCLEAN with err naming the ways out. */
static int refuse_lost_db(const char *state_dir, const char *db_dir, char *err, size_t errlen)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/CURRENT", db_dir);
    if (access(path, F_OK) == 0)
        return 0;
    size_t n = 0, chk = 0;
    char example[256] = "";
    DIR *d = opendir(db_dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (n++ == 0 || strstr(e->d_name, ".sst"))
            snprintf(example, sizeof example, "%s", e->d_name);
    }
    if (d)
        closedir(d);
    snprintf(path, sizeof path, "%s/checkpoints", state_dir);
    d = opendir(path);
    for (struct dirent *e; d && (e = readdir(d));)
        chk += !strncmp(e->d_name, "chk-", 4);
    if (d)
        closedir(d);
    if (n)
        return store_seterr(err, errlen, -EUCLEAN,
                            "the state database %s is damaged: its CURRENT file is missing but "
                            "it holds %zu files (%s); newsflow never creates a database over "
                            "one. Restore a named checkpoint (%zu in %s: `newsflow checkpoints "
                            "list --state-dir %s`, then `newsflow run --from-checkpoint ID`), or "
                            "the changelog (state.changelog=true, if the job wrote it: move %s "
                            "away first), or move %s away to start over (docs/runbooks.md "
                            "\"Corrupt live store\")",
                            db_dir, n, example, chk, path, state_dir, db_dir, db_dir);
    if (chk)
        return store_seterr(err, errlen, -EUCLEAN,
                            "the state database %s is missing but %zu named checkpoints are in "
                            "%s: the live state was lost. Restore one (`newsflow checkpoints "
                            "list --state-dir %s`, then `newsflow run --from-checkpoint ID`), or "
                            "move %s away to start over (docs/runbooks.md \"Lost disk\")",
                            db_dir, chk, path, state_dir, path);
    return 1;
}

#define DB_CREATING "db.creating" /* a new database until it is whole: then renamed to db */

/* A new database is created whole or not at all: RocksDB writes IDENTITY, a MANIFEST and its
 * LOG before CURRENT, and a process killed in between left a db directory that every later
 * start refused as damaged (refuse_lost_db; the crash test, 2026-11-30). So it is created as
 * state_dir/db.creating, closed, and renamed to db; what a crash left of a creation is removed
 * first. Called when refuse_lost_db found no database (1). 0 or -errno. */
static int create_db(const char *state_dir, const char *db_dir, const nf_store_opts_t *o, char *err,
                     size_t errlen)
{
    char tmp[PATH_MAX];
    int r = store_path_fmt(tmp, err, errlen, "%s/" DB_CREATING, state_dir);
    if (r != 0)
        return r;
    store_rm_rf(tmp);
    nf_store_t *st = store_open(tmp, state_dir, o, (open_mode_t){0}, err, errlen);
    if (!st)
        return -EIO;
    store_free(st);
    rmdir(db_dir); /* an empty one (refuse_lost_db refuses one that holds anything) */
    if (rename(tmp, db_dir) != 0)
        return store_seterr(err, errlen, -errno, "cannot rename %s to %s: %s", tmp, db_dir,
                            strerror(errno));
    store_fsync_path(state_dir, true); /* the rename: best effort, the database is whole */
    return 0;
}

nf_store_t *nf_store_open(const char *state_dir, const nf_store_opts_t *o, char *err, size_t errlen)
{
    nf_store_opts_t def;
    if (!o) {
        nf_store_opts_default(&def);
        o = &def;
    }
    char db_dir[PATH_MAX];
    if (store_path_fmt(db_dir, err, errlen, "%s/db", state_dir) != 0)
        return NULL;
    if (!o->read_only) {
        int r = store_mkdir_p(state_dir);
        if (r != 0) {
            store_seterr(err, errlen, r, "cannot create state directory %s: %s", state_dir,
                         strerror(-r));
            return NULL;
        }
    }
    int r = o->read_only ? 0 : refuse_lost_db(state_dir, db_dir, err, errlen);
    if (r == 1)
        r = create_db(state_dir, db_dir, o, err, errlen);
    if (r != 0) {
        errno = -r;
        return NULL;
    }
    return store_open(db_dir, state_dir, o, (open_mode_t){.read_only = o->read_only}, err, errlen);
}

nf_store_t *nf_store_open_dir(const char *db_dir, bool read_only, char *err, size_t errlen)
{
    nf_store_opts_t o;
    nf_store_opts_default(&o);
    o.block_cache_mb = 32;
    o.read_only = read_only;
    return store_open(db_dir, NULL, &o, (open_mode_t){.read_only = read_only}, err, errlen);
}

void nf_store_close(nf_store_t *st)
{
    store_free(st);
}

size_t nf_store_ingest_min(const nf_store_t *st)
{
    return st->ingest_min;
}

void nf_store_set_fault_hook(nf_store_t *st, void (*hook)(const char *point))
{
    st->fault = hook;
}

const char *nf_store_state_dir(const nf_store_t *st)
{
    return st->state_dir ? st->state_dir : st->db_dir;
}

uint64_t nf_store_property_sum(nf_store_t *st, const char *property)
{
    uint64_t sum = 0, v;
    if (st->def && rocksdb_property_int_cf(st->db, st->def, property, &v) == 0)
        sum += v;
    for (int k = 0; k < NF_KIND__COUNT; k++)
        if (st->kinds[k] && rocksdb_property_int_cf(st->db, st->kinds[k], property, &v) == 0)
            sum += v;
    return sum;
}

int nf_store_compact(nf_store_t *st, char *err, size_t errlen)
{
    if (st->read_only)
        return store_seterr(err, errlen, -EROFS, "%s is open read-only", st->db_dir);
    rocksdb_compactoptions_t *co = rocksdb_compactoptions_create();
    /* kForce (2): rewrite the bottommost level too, so the TTL filter sees every value */
    rocksdb_compactoptions_set_bottommost_level_compaction(co, 2);
    rocksdb_compactoptions_set_exclusive_manual_compaction(co, 0);
    rocksdb_compact_range_cf_opt(st->db, st->def, co, NULL, 0, NULL, 0);
    for (int k = 0; k < NF_KIND__COUNT; k++)
        if (st->kinds[k])
            rocksdb_compact_range_cf_opt(st->db, st->kinds[k], co, NULL, 0, NULL, 0);
    rocksdb_compactoptions_destroy(co);
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * reads */

/* A found value, copied out of RocksDB's slice (which is destroyed): *val malloc'd with a NUL
 * after its *len bytes (never malloc(0); text values are strings). 0 or -ENOMEM with err. */
static int take_slice(nf_store_t *st, rocksdb_pinnableslice_t *ps, void **val, size_t *len,
                      char *err, size_t errlen)
{
    size_t n = 0;
    const char *v = rocksdb_pinnableslice_value(ps, &n);
    char *copy = malloc(n + 1);
    if (copy) {
        if (n)
            memcpy(copy, v, n);
        copy[n] = '\0';
    }
    rocksdb_pinnableslice_destroy(ps);
    if (!copy)
        return store_seterr(err, errlen, -ENOMEM, "reading %s: out of memory", st->db_dir);
    *val = copy;
    *len = n;
    return 0;
}

/* RocksDB counts into thread-local perf counters at every key comparison unless the thread's
 * perf level is off: through Debian's shared library each count is a __tls_get_addr call (14 %
 * of an epoch's apply in a profile; off, the commit at 100k keys is a quarter shorter: perf/README
 * "RocksDB's perf counters off"). Nothing reads the counters. */
void store_perf_off(void)
{
    static _Thread_local bool off;
    if (!off) {
        rocksdb_set_perf_level(1); /* rocksdb::PerfLevel::kDisable */
        off = true;
    }
}

static int get_raw_ro(nf_store_t *st, const rocksdb_readoptions_t *ro,
                      rocksdb_column_family_handle_t *h, const void *key, size_t klen, void **val,
                      size_t *len, char *err, size_t errlen)
{
    char *rerr = NULL;
    store_perf_off();
    rocksdb_pinnableslice_t *ps = rocksdb_get_pinned_cf(st->db, ro, h, key, klen, &rerr);
    if (rerr) {
        char what[PATH_MAX + 64];
        snprintf(what, sizeof what, "reading %s", st->db_dir);
        return store_rocks_err(rerr, err, errlen, -EIO, what);
    }
    if (!ps)
        return 0;
    int r = take_slice(st, ps, val, len, err, errlen);
    return r == 0 ? 1 : r;
}

int store_get_raw(nf_store_t *st, rocksdb_column_family_handle_t *h, const void *key, size_t klen,
                  void **val, size_t *len, char *err, size_t errlen)
{
    return get_raw_ro(st, st->ro, h, key, klen, val, len, err, errlen);
}

int store_get_ro(nf_store_t *st, const rocksdb_readoptions_t *ro, nf_state_kind_t kind,
                 const void *key, size_t klen, void **val, size_t *len, char *err, size_t errlen)
{
    if ((unsigned)kind >= NF_KIND__COUNT)
        return store_seterr(err, errlen, -EINVAL, "invalid state kind %d", (int)kind);
    if (!st->kinds[kind])
        return 0;
    return get_raw_ro(st, ro, st->kinds[kind], key, klen, val, len, err, errlen);
}

int nf_store_get(nf_store_t *st, nf_state_kind_t kind, const void *key, size_t klen, void **val,
                 size_t *len, char *err, size_t errlen)
{
    return store_get_ro(st, st->ro, kind, key, klen, val, len, err, errlen);
}

/* The batch nf_store_multi_get reads at once; larger requests go in several. */
enum { MULTI_GET_MAX = 64 };

int nf_store_multi_get(nf_store_t *st, nf_state_kind_t kind, size_t n, const unsigned char *keys,
                       size_t klen, void **vals, size_t *lens, char *err, size_t errlen)
{
    return store_multi_get_ro(st, st->ro, kind, n, keys, klen, vals, lens, err, errlen);
}

int store_multi_get_ro(nf_store_t *st, const rocksdb_readoptions_t *ro, nf_state_kind_t kind,
                       size_t n, const unsigned char *keys, size_t klen, void **vals, size_t *lens,
                       char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++)
        vals[i] = NULL;
    if ((unsigned)kind >= NF_KIND__COUNT)
        return store_seterr(err, errlen, -EINVAL, "invalid state kind %d", (int)kind);
    if (!st->kinds[kind])
        return 0;
    const char *kp[MULTI_GET_MAX];
    size_t ks[MULTI_GET_MAX];
    rocksdb_pinnableslice_t *ps[MULTI_GET_MAX];
    char *errs[MULTI_GET_MAX];
    int r = 0;
    for (size_t at = 0; at < n && r == 0; at += MULTI_GET_MAX) {
        size_t m = n - at < MULTI_GET_MAX ? n - at : MULTI_GET_MAX;
        for (size_t i = 0; i < m; i++) {
            kp[i] = (const char *)keys + (at + i) * klen;
            ks[i] = klen;
        }
        store_perf_off();
        rocksdb_batched_multi_get_cf(st->db, ro, st->kinds[kind], m, kp, ks, ps, errs, false);
        for (size_t i = 0; i < m; i++) {
            if (errs[i]) {
                if (r == 0) {
                    char what[PATH_MAX + 64];
                    snprintf(what, sizeof what, "reading %s", st->db_dir);
                    r = store_rocks_err(errs[i], err, errlen, -EIO, what);
                } else {
                    rocksdb_free(errs[i]);
                }
            } else if (ps[i] && r == 0) {
                r = take_slice(st, ps[i], &vals[at + i], &lens[at + i], err, errlen);
                continue; /* take_slice destroyed it */
            }
            if (ps[i])
                rocksdb_pinnableslice_destroy(ps[i]);
        }
    }
    if (r != 0)
        for (size_t i = 0; i < n; i++) {
            free(vals[i]);
            vals[i] = NULL;
        }
    return r;
}

int nf_store_scan(nf_store_t *st, nf_state_kind_t kind, nf_store_scan_fn fn, void *arg)
{
    return nf_store_scan_prefix(st, kind, NULL, 0, fn, arg);
}

int nf_store_scan_prefix(nf_store_t *st, nf_state_kind_t kind, const void *prefix, size_t plen,
                         nf_store_scan_fn fn, void *arg)
{
    return store_scan_prefix_ro(st, st->ro_scan, kind, prefix, plen, fn, arg);
}

int store_scan_prefix_ro(nf_store_t *st, const rocksdb_readoptions_t *ro, nf_state_kind_t kind,
                         const void *prefix, size_t plen, nf_store_scan_fn fn, void *arg)
{
    return store_scan_from_ro(st, ro, kind, prefix, plen, NULL, 0, fn, arg);
}

/* The keys from the first >= from (or the prefix's first) while they have the prefix; fn's
 * non-zero ends it (and is returned); -EIO if the iterator failed (checked here, before a next
 * seek would clear its status). */
static int scan_it(rocksdb_iterator_t *it, const void *prefix, size_t plen, const void *from,
                   size_t flen, nf_store_scan_fn fn, void *arg)
{
    int r = 0;
    if (flen && (!plen || (flen >= plen && memcmp(from, prefix, plen) >= 0)))
        rocksdb_iter_seek(it, from, flen);
    else if (plen)
        rocksdb_iter_seek(it, prefix, plen);
    else
        rocksdb_iter_seek_to_first(it);
    for (; rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
        size_t kl, vl;
        const char *k = rocksdb_iter_key(it, &kl);
        if (plen && (kl < plen || memcmp(k, prefix, plen) != 0))
            break; /* past the prefix: keys are in order */
        const char *v = rocksdb_iter_value(it, &vl);
        r = fn(k, kl, v, vl, arg);
        if (r != 0)
            break;
    }
    char *rerr = NULL;
    rocksdb_iter_get_error(it, &rerr);
    if (rerr) {
        rocksdb_free(rerr);
        r = -EIO;
    }
    return r;
}

int store_scan_from_ro(nf_store_t *st, const rocksdb_readoptions_t *ro, nf_state_kind_t kind,
                       const void *prefix, size_t plen, const void *from, size_t flen,
                       nf_store_scan_fn fn, void *arg)
{
    if ((unsigned)kind >= NF_KIND__COUNT)
        return -EINVAL;
    if (!st->kinds[kind])
        return 0;
    store_perf_off();
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(st->db, ro, st->kinds[kind]);
    int r = scan_it(it, prefix, plen, from, flen, fn, arg);
    rocksdb_iter_destroy(it);
    return r;
}

int store_scan_prefixes_ro(nf_store_t *st, const rocksdb_readoptions_t *ro, nf_state_kind_t kind,
                           const unsigned char *prefixes, size_t n, size_t plen,
                           nf_store_scan_fn fn, void *arg)
{
    if ((unsigned)kind >= NF_KIND__COUNT || !plen)
        return -EINVAL;
    if (!st->kinds[kind] || !n)
        return 0;
    store_perf_off();
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(st->db, ro, st->kinds[kind]);
    int r = 0;
    for (size_t i = 0; i < n && r >= 0; i++)
        r = scan_it(it, prefixes + i * plen, plen, NULL, 0, fn, arg);
    rocksdb_iter_destroy(it);
    return r < 0 ? r : 0;
}

/* ---------------------------------------------------------------------------------------------
 * batches: a log of [op u8][kind u8][klen u32le][vlen u32le][key][value]
 * records */

enum { OP_PUT = 1, OP_DELETE = 2, REC_HEAD = 10 };

struct nf_store_batch {
    unsigned char *buf;
    size_t len, cap, count;
    bool failed; /* an append could not be stored: the batch must not be committed */
};

nf_store_batch_t *nf_store_batch_new(void)
{
    return calloc(1, sizeof(nf_store_batch_t));
}

/* Room for need more bytes; false (and the batch failed) when there is none. */
static bool batch_reserve(nf_store_batch_t *b, size_t need)
{
    if (b->cap - b->len >= need)
        return true;
    size_t ncap = b->cap ? b->cap : 4096;
    while (ncap - b->len < need)
        ncap *= 2;
    unsigned char *nb = realloc(b->buf, ncap);
    if (!nb) {
        b->failed = true;
        return false;
    }
    b->buf = nb;
    b->cap = ncap;
    return true;
}

static void batch_append(nf_store_batch_t *b, int op, nf_state_kind_t kind, const void *key,
                         size_t klen, const void *val, size_t vlen)
{
    if (b->failed)
        return;
    if ((unsigned)kind >= NF_KIND__COUNT || klen > UINT32_MAX || vlen > UINT32_MAX) {
        b->failed = true;
        return;
    }
    size_t need = REC_HEAD + klen + vlen;
    if (!batch_reserve(b, need))
        return;
    unsigned char *p = b->buf + b->len;
    p[0] = (unsigned char)op;
    p[1] = (unsigned char)kind;
    nf_put_le32(p + 2, (uint32_t)klen);
    nf_put_le32(p + 6, (uint32_t)vlen);
    if (klen)
        memcpy(p + REC_HEAD, key, klen);
    if (vlen)
        memcpy(p + REC_HEAD + klen, val, vlen);
    b->len += need;
    b->count++;
}

void nf_store_batch_put(nf_store_batch_t *b, nf_state_kind_t kind, const void *key, size_t klen,
                        const void *val, size_t vlen)
{
    batch_append(b, OP_PUT, kind, key, klen, val, vlen);
}

void nf_store_batch_delete(nf_store_batch_t *b, nf_state_kind_t kind, const void *key, size_t klen)
{
    batch_append(b, OP_DELETE, kind, key, klen, NULL, 0);
}

int nf_store_batch_foreach(const nf_store_batch_t *b, nf_store_batch_fn fn, void *arg)
{
    if (b->failed)
        return -ENOMEM;
    size_t off = 0;
    while (off < b->len) {
        const unsigned char *p = b->buf + off;
        if (b->len - off < REC_HEAD)
            return -EINVAL;
        uint32_t klen = nf_get_le32(p + 2), vlen = nf_get_le32(p + 6);
        if (b->len - off - REC_HEAD < (size_t)klen + vlen || p[1] >= NF_KIND__COUNT)
            return -EINVAL;
        const unsigned char *k = p + REC_HEAD;
        int r = fn(arg, p[0] == OP_DELETE, (nf_state_kind_t)p[1], k, klen, k + klen, vlen);
        if (r != 0)
            return r;
        off += REC_HEAD + (size_t)klen + vlen;
    }
    return 0;
}

size_t nf_store_batch_count(const nf_store_batch_t *b)
{
    return b->count;
}

size_t nf_store_batch_bytes(const nf_store_batch_t *b)
{
    return b->len;
}

void nf_store_batch_fail(nf_store_batch_t *b)
{
    b->failed = true;
}

void nf_store_batch_clear(nf_store_batch_t *b)
{
    /* The capacity stays for the next use, up to four times what this one held (and 1 MiB): a
     * burst's batch does not stay allocated at its size. */
    size_t keep = 2 * b->len > ((size_t)1 << 20) ? 2 * b->len : (size_t)1 << 20;
    if (b->cap > 2 * keep) {
        unsigned char *nb = realloc(b->buf, keep);
        if (nb) {
            b->buf = nb;
            b->cap = keep;
        }
    }
    b->len = 0;
    b->count = 0;
    b->failed = false;
}

void nf_store_batch_move(nf_store_batch_t *dst, nf_store_batch_t *src)
{
    if (dst && !dst->failed && src->failed)
        dst->failed = true;
    else if (dst && !dst->failed && src->len && batch_reserve(dst, src->len)) {
        memcpy(dst->buf + dst->len, src->buf, src->len);
        dst->len += src->len;
        dst->count += src->count;
    }
    nf_store_batch_clear(src);
}

void nf_store_batch_free(nf_store_batch_t *b)
{
    if (!b)
        return;
    free(b->buf);
    free(b);
}

/* Record order for store_batch_to_rocks: by kind, then key bytes, then position (stable, so a key
 * written twice keeps its last write last). */
static int rec_cmp(const void *a, const void *b, void *arg)
{
    const unsigned char *base = arg;
    size_t oa = *(const size_t *)a, ob = *(const size_t *)b;
    const unsigned char *pa = base + oa, *pb = base + ob;
    if (pa[1] != pb[1])
        return pa[1] < pb[1] ? -1 : 1;
    uint32_t la = nf_get_le32(pa + 2), lb = nf_get_le32(pb + 2);
    int c = memcmp(pa + REC_HEAD, pb + REC_HEAD, la < lb ? la : lb);
    if (c)
        return c;
    if (la != lb)
        return la < lb ? -1 : 1;
    return oa < ob ? -1 : oa > ob;
}

/* 8 bytes of a record in rec_cmp order: at depth 0 its kind, then its key's first 7 bytes; at
 * depth d > 0 the key's bytes 8d - 1 to 8d + 6 (zeros past a shorter key). Among records equal
 * in the bytes of the depths before, those whose bytes at this depth differ are in their order. */
static uint64_t rec_prefix(const unsigned char *p, unsigned depth)
{
    uint32_t kl = nf_get_le32(p + 2), from = depth ? 8 * depth - 1 : 0;
    unsigned bytes = depth ? 8 : 7;
    uint64_t x = depth ? 0 : (uint64_t)p[1] << 56;
    for (unsigned i = 0; i < bytes && from + i < kl; i++)
        x |= (uint64_t)p[REC_HEAD + from + i] << (8 * (bytes - 1 - i));
    return x;
}

typedef struct {
    uint64_t pfx;
    size_t off;
} rec_ord_t;

/* Stable LSD radix sort of a[0, n) by pfx (tmp: n more), a byte a pass, skipping the bytes all
 * records share (the kind and key group, often); the histograms of all 8 bytes in one read. */
static void radix_sort(rec_ord_t *a, rec_ord_t *tmp, size_t n)
{
    static _Thread_local size_t count[8][257];
    memset(count, 0, sizeof count);
    for (size_t i = 0; i < n; i++)
        for (unsigned b = 0; b < 8; b++)
            count[b][((a[i].pfx >> (8 * b)) & 0xff) + 1]++;
    rec_ord_t *src = a, *dst = tmp;
    for (unsigned b = 0; b < 8; b++) {
        size_t *c = count[b];
        if (c[((a[0].pfx >> (8 * b)) & 0xff) + 1] == n)
            continue; /* one value of this byte: the pass would change nothing */
        for (unsigned v = 0; v < 256; v++)
            c[v + 1] += c[v];
        for (size_t i = 0; i < n; i++)
            dst[c[(src[i].pfx >> (8 * b)) & 0xff]++] = src[i];
        rec_ord_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != a)
        memcpy(a, src, n * sizeof *a);
}

/* a[0, n) (offsets in buf, equal in the bytes of the depths before) into rec_cmp order: by the
 * bytes of this depth, then each run of equal ones at the next depth; the first 3 depths cover
 * the 18-byte keys of keyed state, what is left (longer keys, a key written twice) goes to
 * rec_cmp. The sorts are stable and the offsets ascend at first: rec_cmp's tie-break holds. */
static void sort_run(const unsigned char *buf, rec_ord_t *a, rec_ord_t *tmp, size_t n,
                     unsigned depth)
{
    if (depth == 3 || n <= 16) {
        size_t *o = (size_t *)tmp; /* n offsets fit in n rec_ord_t */
        for (size_t i = 0; i < n; i++)
            o[i] = a[i].off;
        qsort_r(o, n, sizeof *o, rec_cmp, (void *)buf);
        for (size_t i = 0; i < n; i++)
            a[i].off = o[i];
        return;
    }
    for (size_t i = 0; i < n; i++)
        a[i].pfx = rec_prefix(buf + a[i].off, depth);
    radix_sort(a, tmp, n);
    for (size_t from = 0; from < n;) {
        size_t to = from + 1;
        while (to < n && a[to].pfx == a[from].pfx)
            to++;
        if (to - from > 1)
            sort_run(buf, a + from, tmp, to - from, depth + 1);
        from = to;
    }
}

/* order[0, n) (record offsets in buf, ascending) into rec_cmp order, mostly without comparisons:
 * a comparison sort of a million records cost the coordinator ~0.5 s, most of it cache misses
 * on the records. 0 or -ENOMEM. */
static int sort_records(const unsigned char *buf, size_t *order, size_t n)
{
    if (n < 2)
        return 0;
    rec_ord_t *a = malloc(2 * n * sizeof *a);
    if (!a)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        a[i].off = order[i];
    sort_run(buf, a, a + n, n, 0);
    for (size_t i = 0; i < n; i++)
        order[i] = a[i].off;
    free(a);
    return 0;
}

/* *out: the offsets of b's records in rec_cmp order (malloc'd; *n of them). 0, or -errno with
 * err (idx names the batch in it). */
static int batch_order(nf_store_t *st, const nf_store_batch_t *b, unsigned idx, size_t **out,
                       size_t *n, char *err, size_t errlen)
{
    if (b->failed)
        return store_seterr(err, errlen, -ENOMEM,
                            "state batch %u is incomplete (out of memory or an oversized entry "
                            "while it was filled)",
                            idx);
    size_t *order = malloc((b->count ? b->count : 1) * sizeof *order);
    if (!order)
        return store_seterr(err, errlen, -ENOMEM, "out of memory ordering state batch %u", idx);
    size_t off = 0;
    *n = 0;
    while (off < b->len) {
        const unsigned char *p = b->buf + off;
        /* batch_append wrote whole records; a short one is a bug */
        uint32_t klen = b->len - off >= REC_HEAD ? nf_get_le32(p + 2) : 0;
        uint32_t vlen = b->len - off >= REC_HEAD ? nf_get_le32(p + 6) : 0;
        if (b->len - off < REC_HEAD || b->len - off - REC_HEAD < (size_t)klen + vlen ||
            *n == b->count) {
            free(order);
            return store_seterr(err, errlen, -EINVAL, "state batch %u is malformed at byte %zu",
                                idx, off);
        }
        if (p[1] >= NF_KIND__COUNT || !st->kinds[p[1]]) {
            free(order);
            return store_seterr(err, errlen, -EINVAL, "state batch %u names unknown kind %u", idx,
                                (unsigned)p[1]);
        }
        order[(*n)++] = off;
        off += REC_HEAD + (size_t)klen + vlen;
    }
    int r = sort_records(b->buf, order, *n);
    if (r != 0) {
        free(order);
        return store_seterr(err, errlen, r, "out of memory ordering state batch %u", idx);
    }
    *out = order;
    return 0;
}

/* Our log -> a RocksDB WriteBatch naming this database's families, in key order: the memtable
 * is a skip list, and inserting sorted keys lets it reuse its search position (several times
 * faster to apply than hash-table order). Sorting costs the coordinator, not the shards. */
/* Records order[from..to) of buf appended to wb, on this database's families. */
static void records_to_rocks(nf_store_t *st, const unsigned char *buf, const size_t *order,
                             size_t from, size_t to, rocksdb_writebatch_t *wb)
{
    for (size_t i = from; i < to; i++) {
        const unsigned char *p = buf + order[i];
        uint32_t klen = nf_get_le32(p + 2), vlen = nf_get_le32(p + 6);
        const char *k = (const char *)p + REC_HEAD;
        if (p[0] == OP_PUT)
            rocksdb_writebatch_put_cf(wb, st->kinds[p[1]], k, klen, k + klen, vlen);
        else
            rocksdb_writebatch_delete_cf(wb, st->kinds[p[1]], k, klen);
    }
}

int store_batch_to_rocks(nf_store_t *st, const nf_store_batch_t *b, rocksdb_writebatch_t *wb,
                         unsigned idx, char *err, size_t errlen)
{
    size_t n = 0, *order = NULL;
    int r = batch_order(st, b, idx, &order, &n, err, errlen);
    if (r != 0)
        return r;
    records_to_rocks(st, b->buf, order, 0, n, wb);
    free(order);
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * writes outside the epoch protocol: a changelog restore, the bookkeeping records */

static int store_write(nf_store_t *st, const rocksdb_writeoptions_t *wo, const nf_store_batch_t *b,
                       char *err, size_t errlen)
{
    if (st->read_only)
        return store_seterr(err, errlen, -EROFS, "%s is open read-only", st->db_dir);
    rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
    int r = store_batch_to_rocks(st, b, wb, 0, err, errlen);
    if (r == 0) {
        char *rerr = NULL;
        store_track_begin(st);
        store_perf_off();
        rocksdb_write(st->db, wo, wb, &rerr);
        store_track_end_batch(st, b); /* counted even when it failed: part may be in */
        if (rerr) {
            char msg[PATH_MAX + 64];
            snprintf(msg, sizeof msg, "state write in %s", st->db_dir);
            r = store_rocks_err(rerr, err, errlen, -EIO, msg);
        }
    }
    rocksdb_writebatch_destroy(wb);
    return r;
}

int nf_store_write(nf_store_t *st, const nf_store_batch_t *b, char *err, size_t errlen)
{
    return store_write(st, st->wo, b, err, errlen);
}

int nf_store_write_unlogged(nf_store_t *st, const nf_store_batch_t *b, char *err, size_t errlen)
{
    return store_write(st, st->wo_nowal, b, err, errlen);
}

int nf_store_flush(nf_store_t *st, char *err, size_t errlen)
{
    if (st->read_only)
        return 0;
    rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
    rocksdb_flushoptions_set_wait(fo, 1);
    int r = 0;
    for (int k = 0; k < NF_KIND__COUNT && r == 0; k++) {
        if (!st->kinds[k])
            continue;
        char *rerr = NULL;
        rocksdb_flush_cf(st->db, fo, st->kinds[k], &rerr);
        if (rerr) {
            char msg[PATH_MAX + 64];
            snprintf(msg, sizeof msg, "flushing %s in %s", nf_state_kind_name((nf_state_kind_t)k),
                     st->db_dir);
            r = store_rocks_err(rerr, err, errlen, -EIO, msg);
        }
    }
    rocksdb_flushoptions_destroy(fo);
    return r;
}

/* ---------------------------------------------------------------------------------------------
 * bulk load: a batch as table files, ingested */

/* One family's records order[from..to) of buf (one kind, key order, a key's writes in their
 * order) as a table file at path, the last write of each key only. */
static int write_table(nf_store_t *st, const unsigned char *buf, const size_t *order, size_t from,
                       size_t to, const char *path, char *err, size_t errlen)
{
    int kind = buf[order[from] + 1];
    char what[PATH_MAX + 96];
    snprintf(what, sizeof what, "writing table file %s (%s) in %s", path,
             nf_state_kind_name((nf_state_kind_t)kind), st->db_dir);
    rocksdb_envoptions_t *eo = rocksdb_envoptions_create();
    /* the kind's own options (its table format and compression; the TTL filter plays no part) */
    const rocksdb_options_t *opts = st->owner_cfopts[kind] ? st->owner_cfopts[kind] : st->cfopts;
    rocksdb_sstfilewriter_t *w = rocksdb_sstfilewriter_create(eo, opts);
    char *rerr = NULL;
    rocksdb_sstfilewriter_open(w, path, &rerr);
    for (size_t i = from; i < to && !rerr; i++) {
        const unsigned char *p = buf + order[i];
        uint32_t klen = nf_get_le32(p + 2), vlen = nf_get_le32(p + 6);
        const char *k = (const char *)p + REC_HEAD;
        if (i + 1 < to) { /* a later write of the same key wins: this one is not written */
            const unsigned char *q = buf + order[i + 1];
            if (nf_get_le32(q + 2) == klen && !memcmp(q + REC_HEAD, k, klen))
                continue;
        }
        if (p[0] == OP_PUT)
            rocksdb_sstfilewriter_put(w, k, klen, k + klen, vlen, &rerr);
        else
            rocksdb_sstfilewriter_delete(w, k, klen, &rerr);
    }
    if (!rerr)
        rocksdb_sstfilewriter_finish(w, &rerr);
    rocksdb_sstfilewriter_destroy(w);
    rocksdb_envoptions_destroy(eo);
    return rerr ? store_rocks_err(rerr, err, errlen, -EIO, what) : 0;
}

/* The table file at path linked into kind's family (durable on return). The caller brackets it
 * for tracked writes. */
int store_ingest_table(nf_store_t *st, int kind, const char *path, char *err, size_t errlen)
{
    char *rerr = NULL;
    rocksdb_ingestexternalfileoptions_t *io = rocksdb_ingestexternalfileoptions_create();
    rocksdb_ingestexternalfileoptions_set_move_files(io, 1);
    const char *files[1] = {path};
    rocksdb_ingest_external_file_cf(st->db, st->kinds[kind], files, 1, io, &rerr);
    rocksdb_ingestexternalfileoptions_destroy(io);
    if (!rerr)
        return 0;
    char what[PATH_MAX + 96];
    snprintf(what, sizeof what, "bulk load of %s into %s (table file %s)",
             nf_state_kind_name((nf_state_kind_t)kind), st->db_dir, path);
    return store_rocks_err(rerr, err, errlen, -EIO, what);
}

static int ingest_kind(nf_store_t *st, const nf_store_batch_t *b, const size_t *order, size_t from,
                       size_t to, const char *path, char *err, size_t errlen)
{
    int r = write_table(st, b->buf, order, from, to, path, err, errlen);
    if (r == 0) {
        store_track_begin(st); /* tracked writes: the file's keys are not named */
        r = store_ingest_table(st, b->buf[order[from] + 1], path, err, errlen);
        store_track_end_unknown(st);
    }
    unlink(path); /* moved (linked into the database) when ingested; ours to remove otherwise */
    return r;
}

static atomic_uint ingest_seq;

int store_ingest_path(nf_store_t *st, char *path, char *err, size_t errlen)
{
    return store_path_fmt(path, err, errlen, "%s/" INGEST_TMP "%ld-%u.sst", st->db_dir,
                          (long)getpid(), atomic_fetch_add(&ingest_seq, 1));
}

int nf_store_ingest(nf_store_t *st, const nf_store_batch_t *b, char *err, size_t errlen)
{
    if (st->read_only)
        return store_seterr(err, errlen, -EROFS, "%s is open read-only", st->db_dir);
    size_t n = 0, *order = NULL;
    int r = batch_order(st, b, 0, &order, &n, err, errlen);
    for (size_t from = 0; r == 0 && from < n;) {
        unsigned char kind = b->buf[order[from] + 1];
        size_t to = from + 1;
        while (to < n && b->buf[order[to] + 1] == kind)
            to++;
        char path[PATH_MAX];
        r = store_ingest_path(st, path, err, errlen);
        if (r == 0)
            r = ingest_kind(st, b, order, from, to, path, err, errlen);
        from = to;
    }
    free(order);
    return r;
}

/* ---------------------------------------------------------------------------------------------
 * an epoch's batches applied (store_int.h, store_apply_t) */

/* The batches with records, one after the other, so that one sort orders them all and a key
 * written by two keeps the later batch's write, as applying them in turn would. *single: the
 * one batch with records, when there is one (nothing joined). */
static int join_batches(nf_store_batch_t *const *batches, unsigned n, store_apply_t *a,
                        const nf_store_batch_t **single, char *err, size_t errlen)
{
    size_t len = 0, count = 0;
    unsigned with = 0;
    *single = NULL;
    for (unsigned i = 0; i < n; i++) {
        if (!batches[i] || (!batches[i]->count && !batches[i]->failed))
            continue;
        if (batches[i]->failed)
            return store_seterr(err, errlen, -ENOMEM, "state batch %u is incomplete", i);
        len += batches[i]->len;
        count += batches[i]->count;
        *single = batches[i];
        with++;
    }
    if (with <= 1)
        return 0;
    nf_store_batch_t *j = nf_store_batch_new();
    if (!j || !(j->buf = malloc(len))) {
        free(j);
        return store_seterr(err, errlen, -ENOMEM, "out of memory joining the epoch's batches");
    }
    for (unsigned i = 0; i < n; i++)
        if (batches[i] && batches[i]->count) {
            memcpy(j->buf + j->len, batches[i]->buf, batches[i]->len);
            j->len += batches[i]->len;
        }
    j->cap = len;
    j->count = count;
    a->joined = j;
    *single = j;
    return 0;
}

/* Keys and values of records order[from..to) of buf. */
static size_t kv_bytes(const unsigned char *buf, const size_t *order, size_t from, size_t to)
{
    size_t bytes = 0;
    for (size_t i = from; i < to; i++)
        bytes += nf_get_le32(buf + order[i] + 2) + (size_t)nf_get_le32(buf + order[i] + 6);
    return bytes;
}

typedef struct kind_bytes {
    size_t min, bytes[NF_KIND__COUNT];
} kind_bytes_t;

/* nf_store_batch_foreach: 1 (stop) once a kind's keys and values reach min */
static int add_kind_bytes(void *arg, bool del, nf_state_kind_t kind, const void *key, size_t klen,
                          const void *val, size_t vlen)
{
    kind_bytes_t *kb = arg;
    (void)del, (void)key, (void)val;
    return (kb->bytes[kind] += klen + vlen) >= kb->min;
}

bool nf_store_batches_ingest(const nf_store_t *st, nf_store_batch_t *const *batches, unsigned n)
{
    kind_bytes_t kb = {.min = st->ingest_min};
    size_t total = 0;
    for (unsigned i = 0; i < n; i++)
        total += batches[i] ? batches[i]->len : 0;
    if (!kb.min || total < kb.min)
        return false; /* no kind can reach it: no walk over the records */
    for (unsigned i = 0; i < n; i++)
        if (batches[i] && nf_store_batch_foreach(batches[i], add_kind_bytes, &kb) == 1)
            return true;
    return false;
}

/* Records order[from..to) of b (one kind): a table file when their keys and values come to
 * st->ingest_min bytes, else into a->wb. */
static int prepare_kind(nf_store_t *st, const nf_store_batch_t *b, const size_t *order, size_t from,
                        size_t to, bool files, store_apply_t *a, char *err, size_t errlen)
{
    int kind = b->buf[order[from] + 1];
    if (files && st->ingest_min && kv_bytes(b->buf, order, from, to) >= st->ingest_min) {
        char path[PATH_MAX];
        int r = store_ingest_path(st, path, err, errlen);
        if (r == 0 && !(a->paths[a->nfiles] = strdup(path)))
            r = store_seterr(err, errlen, -ENOMEM, "out of memory");
        if (r != 0)
            return r;
        a->kinds[a->nfiles] = kind;
        a->records[a->nfiles++] = to - from;
        a->ingested += to - from;
        return write_table(st, b->buf, order, from, to, path, err, errlen);
    }
    records_to_rocks(st, b->buf, order, from, to, a->wb);
    return 0;
}

int store_apply_prepare(nf_store_t *st, nf_store_batch_t *const *batches, unsigned n,
                        store_apply_t *a, char *err, size_t errlen)
{
    return store_apply_sort(st, batches, n, true, a, err, errlen);
}

int store_apply_sort(nf_store_t *st, nf_store_batch_t *const *batches, unsigned n, bool files,
                     store_apply_t *a, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    const nf_store_batch_t *b = NULL;
    int r = join_batches(batches, n, a, &b, err, errlen);
    if (r != 0)
        return r;
    if (!(a->wb = rocksdb_writebatch_create()))
        return store_seterr(err, errlen, -ENOMEM, "out of memory");
    if (!b)
        return 0;
    size_t cnt = 0, *order = NULL;
    r = batch_order(st, b, 0, &order, &cnt, err, errlen);
    for (size_t from = 0; r == 0 && from < cnt;) {
        unsigned char kind = b->buf[order[from] + 1];
        size_t to = from + 1;
        while (to < cnt && b->buf[order[to] + 1] == kind)
            to++;
        r = prepare_kind(st, b, order, from, to, files, a, err, errlen);
        from = to;
    }
    free(order);
    return r;
}

void store_apply_free(store_apply_t *a)
{
    for (unsigned i = 0; i < a->nfiles; i++) {
        unlink(a->paths[i]); /* linked into the database when ingested; a leftover otherwise */
        free(a->paths[i]);
    }
    if (a->wb)
        rocksdb_writebatch_destroy(a->wb);
    nf_store_batch_free(a->joined);
    memset(a, 0, sizeof *a);
}

#define META_PREFIX "meta/"

int nf_store_meta_put(nf_store_t *st, const char *name, const char *value, char *err, size_t errlen)
{
    if (st->read_only)
        return store_seterr(err, errlen, -EROFS, "%s is open read-only", st->db_dir);
    char key[128];
    snprintf(key, sizeof key, META_PREFIX "%s", name);
    char *rerr = NULL;
    rocksdb_put_cf(st->db, st->wo_sync, st->def, key, strlen(key), value, strlen(value), &rerr);
    if (rerr) {
        char msg[PATH_MAX + 160];
        snprintf(msg, sizeof msg, "writing %s in %s", key, st->db_dir);
        return store_rocks_err(rerr, err, errlen, -EIO, msg);
    }
    return 0;
}

int nf_store_meta_get(nf_store_t *st, const char *name, char **value, char *err, size_t errlen)
{
    char key[128];
    snprintf(key, sizeof key, META_PREFIX "%s", name);
    void *v = NULL;
    size_t len = 0;
    *value = NULL;
    int r = store_get_raw(st, st->def, key, strlen(key), &v, &len, err, errlen);
    if (r <= 0)
        return r;
    *value = v; /* NUL-terminated by store_get_raw */
    return 1;
}
