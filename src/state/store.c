/* store.c — the job's durable state on RocksDB (see store.h for the contract, DESIGN.md §3).
 *
 * Three parts:
 *   - the live database: open (creating the column families that are missing, keeping the ones
 *     we do not know open so RocksDB accepts the open), point reads, scans, a TTL compaction
 *     filter on every state kind's family;
 *   - the epoch protocol's records in the "default" family:
 *       "committed"            u64le epoch | header JSON
 *       "pending/header"       u64le epoch | u32le nbatches | u32le noutputs | header JSON
 *       "pending/batch/%08u"   RocksDB WriteBatch data (rocksdb_writebatch_data)
 *       "pending/out/%08u"     an opaque output blob
 *     The pending keys all sort inside ["pending/", "pending0"), so one range delete in the
 *     same write removes whatever an earlier pending record left, whatever its counts were;
 *   - named checkpoints: RocksDB checkpoints under checkpoints/, each with a manifest.json
 *     listing its files and sizes, so a verify can name a truncated file before RocksDB reads
 *     every block with checksums on.
 *
 * A shard's batch (nf_store_batch_t) is a plain byte log of puts and deletes, not a RocksDB
 * WriteBatch: a RocksDB batch names column families by handles of an open database, and shards
 * fill their batches without one. nf_store_pending_write turns each into a WriteBatch (with
 * this database's family ids) and stores its data; apply replays that data verbatim. */
#include "state/store.h"
#include "algo/bytes.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <rocksdb/c.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef NF_VERSION
#define NF_VERSION "unknown"
#endif
#ifndef NF_GIT_COMMIT
#define NF_GIT_COMMIT "unknown"
#endif

#define PENDING_LO      "pending/"
#define PENDING_HI      "pending0" /* '0' follows '/': the end of the "pending/" prefix */
#define PENDING_HEADER  "pending/header"
#define COMMITTED_KEY   "committed"
#define MANIFEST_NAME   "manifest.json"
#define LAST_RESTORE    "last-restore.json"
#define REPLACED_PREFIX "db.replaced-"
#define CHK_DIGITS      12
#define TMP_PREFIX      ".tmp-"
#define COPY_BUF        (64 * 1024)

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
};

const char *nf_state_kind_name(nf_state_kind_t k)
{
    return (unsigned)k < NF_KIND__COUNT ? kind_names[k] : "?";
}

struct nf_store {
    rocksdb_t *db;
    rocksdb_options_t *dbopts; /* the database and "default" (and families we do not know) */
    rocksdb_options_t *cfopts; /* state kinds: dbopts + the TTL filter */
    rocksdb_compactionfilter_t *ttl;
    rocksdb_cache_t *cache;
    rocksdb_block_based_table_options_t *bbto;
    rocksdb_readoptions_t *ro, *ro_scan;
    rocksdb_writeoptions_t *wo, *wo_sync;
    rocksdb_column_family_handle_t *def;
    rocksdb_column_family_handle_t *kinds[NF_KIND__COUNT]; /* NULL: absent (read-only open) */
    rocksdb_column_family_handle_t **others;               /* open families that are none of ours */
    size_t nothers;
    bool read_only;
    char *state_dir; /* NULL when opened by nf_store_open_dir */
    char *db_dir;
};

/* ---------------------------------------------------------------------------------------------
 * small helpers */

static int store_seterr(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int store_seterr(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* "<what>: <RocksDB's reason>"; frees RocksDB's message. */
static int store_rocks_err(char *rerr, char *err, size_t errlen, int code, const char *what)
{
    store_seterr(err, errlen, code, "%s: %s", what, rerr ? rerr : "unknown RocksDB error");
    rocksdb_free(rerr);
    return code;
}

static uint64_t store_realtime_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* snprintf into a PATH_MAX buffer; -ENAMETOOLONG (with err) if it does not fit. */
static int store_path_fmt(char *out, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int store_path_fmt(char *out, char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, PATH_MAX, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= PATH_MAX)
        return store_seterr(err, errlen, -ENAMETOOLONG, "path too long: %.200s...", out);
    return 0;
}

static int store_mkdir_p(const char *path)
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

static int fsync_path(const char *path, bool dir)
{
    int fd = open(path, (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int r = fsync(fd) == 0 ? 0 : -errno;
    close(fd);
    return r;
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

/* rm -rf; a path that is not there is fine. 0 or -errno. */
static int rm_rf(const char *path)
{
    int r = nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    if (r == 0)
        return 0;
    if (r == -1)
        return errno == ENOENT ? 0 : -errno;
    return -r;
}

/* The whole file, NUL-terminated, malloc'd. NULL with errno set. */
static char *read_file(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return NULL;
    }
    size_t cap = (size_t)sb.st_size + 1, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        errno = ENOMEM;
        return NULL;
    }
    for (;;) {
        if (n + 1 == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                close(fd);
                errno = ENOMEM;
                return NULL;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            free(buf);
            close(fd);
            errno = e;
            return NULL;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

static int write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Creates path (which must not exist) with data, fsync'd. 0 or -errno. */
static int write_file_sync(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    int r = write_all(fd, data, len);
    if (r == 0 && fsync(fd) != 0)
        r = -errno;
    if (close(fd) != 0 && r == 0)
        r = -errno;
    return r;
}

static int copy_file(const char *src, const char *dst)
{
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -errno;
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0) {
        int e = errno;
        close(in);
        return -e;
    }
    char *buf = malloc(COPY_BUF);
    int r = buf ? 0 : -ENOMEM;
    while (r == 0) {
        ssize_t n = read(in, buf, COPY_BUF);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            r = -errno;
        else if (n == 0)
            break;
        else
            r = write_all(out, buf, (size_t)n);
    }
    free(buf);
    if (r == 0 && fsync(out) != 0)
        r = -errno;
    if (close(out) != 0 && r == 0)
        r = -errno;
    close(in);
    return r;
}

/* ---- the files of a database directory ---- */

typedef struct dbfile {
    char name[NAME_MAX + 1];
    uint64_t size;
} dbfile_t;

/* RocksDB's info logs ("LOG", "LOG.old.<time>") are not part of a database's state: RocksDB writes
 * one next to a database it opens, read-only included, so a checkpoint's own file list leaves them
 * out (and manifest.json, which is ours). */
static bool is_db_file(const char *name)
{
    if (name[0] == '.')
        return false;
    if (!strcmp(name, MANIFEST_NAME) || !strcmp(name, "LOG") || !strncmp(name, "LOG.old.", 8))
        return false;
    return true;
}

static int cmp_dbfile(const void *a, const void *b)
{
    return strcmp(((const dbfile_t *)a)->name, ((const dbfile_t *)b)->name);
}

/* The regular files of dir that are database files, sorted by name. 0 or -errno. */
static int list_db_files(const char *dir, dbfile_t **out, size_t *n, uint64_t *bytes)
{
    *out = NULL;
    *n = 0;
    *bytes = 0;
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    size_t cap = 0;
    int r = 0;
    const struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!is_db_file(de->d_name))
            continue;
        struct stat sb;
        if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
            r = -errno;
            break;
        }
        if (!S_ISREG(sb.st_mode))
            continue;
        if (*n == cap) {
            size_t ncap = cap ? cap * 2 : 32;
            dbfile_t *nf = realloc(*out, ncap * sizeof *nf);
            if (!nf) {
                r = -ENOMEM;
                break;
            }
            *out = nf;
            cap = ncap;
        }
        dbfile_t *f = &(*out)[(*n)++];
        snprintf(f->name, sizeof f->name, "%s", de->d_name);
        f->size = (uint64_t)sb.st_size;
        *bytes += f->size;
    }
    closedir(d);
    if (r != 0) {
        free(*out);
        *out = NULL;
        *n = 0;
        return r;
    }
    if (*n)
        qsort(*out, *n, sizeof **out, cmp_dbfile);
    return 0;
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

static void ttl_filter_destroy(void *state)
{
    (void)state; /* the C API calls the destructor unconditionally */
}

static const char *ttl_filter_name(void *state)
{
    (void)state;
    return "newsflow.ttl";
}

static void store_free(nf_store_t *st)
{
    if (!st)
        return;
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
}

typedef struct open_mode {
    bool read_only;
    bool verify; /* checkpoint verification: open every table file, no caching */
} open_mode_t;

static int kind_of(const char *name)
{
    for (int k = 0; k < NF_KIND__COUNT; k++)
        if (!strcmp(name, kind_names[k]))
            return k;
    return -1;
}

static nf_store_t *store_open(const char *db_dir, const char *state_dir, const nf_store_opts_t *o,
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
    st->read_only = mode.read_only;
    st->db_dir = strdup(db_dir);
    if (!st->db_dir || (state_dir && !(st->state_dir = strdup(state_dir))))
        goto oom;

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
    if (mode.verify)
        rocksdb_options_set_max_open_files(st->dbopts, -1); /* open (and check) every table */
    st->bbto = rocksdb_block_based_options_create();
    st->cache = rocksdb_cache_create_lru((o->block_cache_mb ? o->block_cache_mb : 8) << 20);
    rocksdb_block_based_options_set_block_cache(st->bbto, st->cache);
    /* Dedup lookups mostly miss (a new article): a bloom filter answers those without I/O. */
    rocksdb_block_based_options_set_filter_policy(st->bbto,
                                                  rocksdb_filterpolicy_create_bloom_full(10));
    rocksdb_options_set_block_based_table_factory(st->dbopts, st->bbto);
    st->ttl =
        rocksdb_compactionfilter_create(NULL, ttl_filter_destroy, ttl_filter, ttl_filter_name);
    st->cfopts = rocksdb_options_create_copy(st->dbopts);
    rocksdb_options_set_compaction_filter(st->cfopts, st->ttl);

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
            copts[n++] = st->cfopts;
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

const char *nf_store_state_dir(const nf_store_t *st)
{
    return st->state_dir ? st->state_dir : st->db_dir;
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

/* A malloc'd copy of a value in the "default" family (or any family h). 1, 0 (absent), -EIO. */
static int store_get_raw(nf_store_t *st, rocksdb_column_family_handle_t *h, const void *key,
                         size_t klen, void **val, size_t *len, char *err, size_t errlen)
{
    char *rerr = NULL;
    rocksdb_pinnableslice_t *ps = rocksdb_get_pinned_cf(st->db, st->ro, h, key, klen, &rerr);
    if (rerr) {
        char what[PATH_MAX + 64];
        snprintf(what, sizeof what, "reading %s", st->db_dir);
        return store_rocks_err(rerr, err, errlen, -EIO, what);
    }
    if (!ps)
        return 0;
    size_t n = 0;
    const char *v = rocksdb_pinnableslice_value(ps, &n);
    char *copy = malloc(n + 1); /* +1: never malloc(0); a NUL makes text values strings */
    if (!copy) {
        rocksdb_pinnableslice_destroy(ps);
        return store_seterr(err, errlen, -ENOMEM, "reading %s: out of memory", st->db_dir);
    }
    if (n)
        memcpy(copy, v, n);
    copy[n] = '\0';
    rocksdb_pinnableslice_destroy(ps);
    *val = copy;
    *len = n;
    return 1;
}

int nf_store_get(nf_store_t *st, nf_state_kind_t kind, const void *key, size_t klen, void **val,
                 size_t *len, char *err, size_t errlen)
{
    if ((unsigned)kind >= NF_KIND__COUNT)
        return store_seterr(err, errlen, -EINVAL, "invalid state kind %d", (int)kind);
    if (!st->kinds[kind])
        return 0;
    return store_get_raw(st, st->kinds[kind], key, klen, val, len, err, errlen);
}

int nf_store_scan(nf_store_t *st, nf_state_kind_t kind, nf_store_scan_fn fn, void *arg)
{
    if ((unsigned)kind >= NF_KIND__COUNT)
        return -EINVAL;
    if (!st->kinds[kind])
        return 0;
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(st->db, st->ro_scan, st->kinds[kind]);
    int r = 0;
    for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
        size_t kl, vl;
        const char *k = rocksdb_iter_key(it, &kl);
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
    rocksdb_iter_destroy(it);
    return r;
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
    if (b->cap - b->len < need) {
        size_t ncap = b->cap ? b->cap : 4096;
        while (ncap - b->len < need)
            ncap *= 2;
        unsigned char *nb = realloc(b->buf, ncap);
        if (!nb) {
            b->failed = true;
            return;
        }
        b->buf = nb;
        b->cap = ncap;
    }
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
    b->len = 0;
    b->count = 0;
    b->failed = false;
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

/* Our log -> a RocksDB WriteBatch naming this database's families, in key order: the memtable
 * is a skip list, and inserting sorted keys lets it reuse its search position (several times
 * faster to apply than hash-table order). Sorting costs the coordinator, not the shards. */
static int store_batch_to_rocks(nf_store_t *st, const nf_store_batch_t *b, rocksdb_writebatch_t *wb,
                                unsigned idx, char *err, size_t errlen)
{
    if (b->failed)
        return store_seterr(err, errlen, -ENOMEM,
                            "state batch %u is incomplete (out of memory or an oversized entry "
                            "while it was filled)",
                            idx);
    size_t *order = malloc((b->count ? b->count : 1) * sizeof *order), n = 0;
    if (!order)
        return store_seterr(err, errlen, -ENOMEM, "out of memory ordering state batch %u", idx);
    size_t off = 0;
    while (off < b->len) {
        const unsigned char *p = b->buf + off;
        /* batch_append wrote whole records; a short one is a bug */
        uint32_t klen = b->len - off >= REC_HEAD ? nf_get_le32(p + 2) : 0;
        uint32_t vlen = b->len - off >= REC_HEAD ? nf_get_le32(p + 6) : 0;
        if (b->len - off < REC_HEAD || b->len - off - REC_HEAD < (size_t)klen + vlen ||
            n == b->count) {
            free(order);
            return store_seterr(err, errlen, -EINVAL, "state batch %u is malformed at byte %zu",
                                idx, off);
        }
        if (p[1] >= NF_KIND__COUNT || !st->kinds[p[1]]) {
            free(order);
            return store_seterr(err, errlen, -EINVAL, "state batch %u names unknown kind %u", idx,
                                (unsigned)p[1]);
        }
        order[n++] = off;
        off += REC_HEAD + (size_t)klen + vlen;
    }
    qsort_r(order, n, sizeof *order, rec_cmp, b->buf);
    for (size_t i = 0; i < n; i++) {
        const unsigned char *p = b->buf + order[i];
        uint32_t klen = nf_get_le32(p + 2), vlen = nf_get_le32(p + 6);
        const char *k = (const char *)p + REC_HEAD;
        if (p[0] == OP_PUT)
            rocksdb_writebatch_put_cf(wb, st->kinds[p[1]], k, klen, k + klen, vlen);
        else
            rocksdb_writebatch_delete_cf(wb, st->kinds[p[1]], k, klen);
    }
    free(order);
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * the epoch protocol */

static void key_batch(char *out, size_t n, unsigned i)
{
    snprintf(out, n, "pending/batch/%08u", i);
}

static void key_out(char *out, size_t n, unsigned i)
{
    snprintf(out, n, "pending/out/%08u", i);
}

static int write_batch(nf_store_t *st, rocksdb_writebatch_t *wb, bool sync, const char *what,
                       char *err, size_t errlen)
{
    char *rerr = NULL;
    rocksdb_write(st->db, sync ? st->wo_sync : st->wo, wb, &rerr);
    if (rerr) {
        char msg[PATH_MAX + 128];
        snprintf(msg, sizeof msg, "%s in %s", what, st->db_dir);
        return store_rocks_err(rerr, err, errlen, -EIO, msg);
    }
    return 0;
}

int nf_store_pending_write(nf_store_t *st, uint64_t epoch, const char *header_json,
                           nf_store_batch_t *const *batches, unsigned nbatches,
                           const nf_blob_t *outputs, unsigned noutputs, char *err, size_t errlen)
{
    if (st->read_only)
        return store_seterr(err, errlen, -EROFS, "%s is open read-only", st->db_dir);
    if (!header_json)
        header_json = "";
    size_t hlen = strlen(header_json);
    unsigned char *hv = malloc(16 + hlen);
    rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
    int r = 0;
    if (!hv) {
        r = store_seterr(err, errlen, -ENOMEM, "pending record of epoch %" PRIu64 ": out of memory",
                         epoch);
        goto out;
    }
    /* Whatever an earlier pending record holds goes first, in the same atomic write. */
    rocksdb_writebatch_delete_range_cf(wb, st->def, PENDING_LO, strlen(PENDING_LO), PENDING_HI,
                                       strlen(PENDING_HI));
    unsigned nb = 0;
    char key[64];
    for (unsigned i = 0; i < nbatches; i++) {
        if (!batches[i])
            continue;
        rocksdb_writebatch_t *sb = rocksdb_writebatch_create();
        r = store_batch_to_rocks(st, batches[i], sb, i, err, errlen);
        if (r == 0) {
            size_t dlen = 0;
            const char *data = rocksdb_writebatch_data(sb, &dlen);
            key_batch(key, sizeof key, nb++);
            rocksdb_writebatch_put_cf(wb, st->def, key, strlen(key), data, dlen);
        }
        rocksdb_writebatch_destroy(sb);
        if (r != 0)
            goto out;
    }
    for (unsigned i = 0; i < noutputs; i++) {
        key_out(key, sizeof key, i);
        rocksdb_writebatch_put_cf(wb, st->def, key, strlen(key), outputs[i].data, outputs[i].len);
    }
    nf_put_le64(hv, epoch);
    nf_put_le32(hv + 8, nb);
    nf_put_le32(hv + 12, noutputs);
    memcpy(hv + 16, header_json, hlen);
    rocksdb_writebatch_put_cf(wb, st->def, PENDING_HEADER, strlen(PENDING_HEADER), (const char *)hv,
                              16 + hlen);
    char what[96];
    snprintf(what, sizeof what, "writing the pending record of epoch %" PRIu64, epoch);
    r = write_batch(st, wb, true, what, err, errlen);
out:
    rocksdb_writebatch_destroy(wb);
    free(hv);
    return r;
}

typedef struct store_pending_head {
    uint64_t epoch;
    uint32_t nbatches, noutputs;
    char *json; /* malloc'd */
} store_pending_head_t;

/* 1 (found), 0, or -errno. */
static int store_pending_head_read(nf_store_t *st, store_pending_head_t *h, char *err,
                                   size_t errlen)
{
    void *v = NULL;
    size_t len = 0;
    int r =
        store_get_raw(st, st->def, PENDING_HEADER, strlen(PENDING_HEADER), &v, &len, err, errlen);
    if (r <= 0)
        return r;
    if (len < 16) {
        free(v);
        return store_seterr(err, errlen, -EIO,
                            "%s: pending record header is %zu bytes, expected >= 16", st->db_dir,
                            len);
    }
    const unsigned char *p = v;
    h->epoch = nf_get_le64(p);
    h->nbatches = nf_get_le32(p + 8);
    h->noutputs = nf_get_le32(p + 12);
    h->json = malloc(len - 16 + 1);
    if (!h->json) {
        free(v);
        return store_seterr(err, errlen, -ENOMEM, "reading the pending record: out of memory");
    }
    memcpy(h->json, p + 16, len - 16);
    h->json[len - 16] = '\0';
    free(v);
    return 1;
}

int nf_store_pending_read(nf_store_t *st, nf_store_pending_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    store_pending_head_t h;
    int r = store_pending_head_read(st, &h, err, errlen);
    if (r <= 0)
        return r;
    out->epoch = h.epoch;
    out->header_json = h.json;
    if (h.noutputs) {
        out->outputs = calloc(h.noutputs, sizeof *out->outputs);
        if (!out->outputs) {
            nf_store_pending_free(out);
            return store_seterr(err, errlen, -ENOMEM, "reading the pending record: out of memory");
        }
    }
    for (unsigned i = 0; i < h.noutputs; i++) {
        char key[64];
        void *v = NULL;
        size_t len = 0;
        key_out(key, sizeof key, i);
        r = store_get_raw(st, st->def, key, strlen(key), &v, &len, err, errlen);
        if (r == 0)
            r = store_seterr(err, errlen, -EIO,
                             "%s: pending record of epoch %" PRIu64 " lacks output %u of %u",
                             st->db_dir, h.epoch, i, (unsigned)h.noutputs);
        if (r < 0) {
            nf_store_pending_free(out);
            return r;
        }
        out->outputs[i].data = v;
        out->outputs[i].len = len;
        out->noutputs = i + 1;
    }
    return 1;
}

void nf_store_pending_free(nf_store_pending_t *p)
{
    if (!p)
        return;
    free(p->header_json);
    for (unsigned i = 0; i < p->noutputs; i++)
        free((void *)p->outputs[i].data);
    free(p->outputs);
    memset(p, 0, sizeof *p);
}

int nf_store_pending_apply(nf_store_t *st, char *err, size_t errlen)
{
    if (st->read_only)
        return store_seterr(err, errlen, -EROFS, "%s is open read-only", st->db_dir);
    store_pending_head_t h;
    int r = store_pending_head_read(st, &h, err, errlen);
    if (r <= 0)
        return r;
    /* Each shard's batch as it was written: absolute puts and deletes, so replaying after a crash
     * half-way through is harmless. Not synced: the WAL keeps order, so if the final write below
     * survives a crash these do too, and if it does not, the pending record is still there to be
     * applied again. */
    for (unsigned i = 0; i < h.nbatches && r >= 0; i++) {
        char key[64], what[96];
        key_batch(key, sizeof key, i);
        char *rerr = NULL;
        rocksdb_pinnableslice_t *ps =
            rocksdb_get_pinned_cf(st->db, st->ro, st->def, key, strlen(key), &rerr);
        if (rerr) {
            snprintf(what, sizeof what, "reading pending batch %u of epoch %" PRIu64, i, h.epoch);
            r = store_rocks_err(rerr, err, errlen, -EIO, what);
            break;
        }
        if (!ps) {
            r = store_seterr(err, errlen, -EIO,
                             "%s: pending record of epoch %" PRIu64 " lacks batch %u of %u",
                             st->db_dir, h.epoch, i, (unsigned)h.nbatches);
            break;
        }
        size_t len = 0;
        const char *data = rocksdb_pinnableslice_value(ps, &len);
        rocksdb_writebatch_t *wb = rocksdb_writebatch_create_from(data, len);
        rocksdb_pinnableslice_destroy(ps);
        snprintf(what, sizeof what, "applying pending batch %u of epoch %" PRIu64, i, h.epoch);
        r = write_batch(st, wb, false, what, err, errlen);
        rocksdb_writebatch_destroy(wb);
    }
    if (r >= 0) {
        size_t jl = strlen(h.json);
        unsigned char *cv = malloc(8 + jl);
        if (!cv) {
            r = store_seterr(err, errlen, -ENOMEM, "applying the pending record: out of memory");
        } else {
            nf_put_le64(cv, h.epoch);
            memcpy(cv + 8, h.json, jl);
            rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
            rocksdb_writebatch_put_cf(wb, st->def, COMMITTED_KEY, strlen(COMMITTED_KEY),
                                      (const char *)cv, 8 + jl);
            rocksdb_writebatch_delete_range_cf(wb, st->def, PENDING_LO, strlen(PENDING_LO),
                                               PENDING_HI, strlen(PENDING_HI));
            char what[96];
            snprintf(what, sizeof what, "marking epoch %" PRIu64 " committed", h.epoch);
            r = write_batch(st, wb, false, what, err, errlen);
            rocksdb_writebatch_destroy(wb);
            free(cv);
        }
    }
    free(h.json);
    return r < 0 ? r : 0;
}

int nf_store_pending_discard(nf_store_t *st, char *err, size_t errlen)
{
    if (st->read_only)
        return store_seterr(err, errlen, -EROFS, "%s is open read-only", st->db_dir);
    rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
    rocksdb_writebatch_delete_range_cf(wb, st->def, PENDING_LO, strlen(PENDING_LO), PENDING_HI,
                                       strlen(PENDING_HI));
    int r = write_batch(st, wb, true, "discarding the pending record", err, errlen);
    rocksdb_writebatch_destroy(wb);
    return r;
}

int nf_store_committed(nf_store_t *st, uint64_t *epoch, char **header_json, char *err,
                       size_t errlen)
{
    void *v = NULL;
    size_t len = 0;
    *epoch = 0;
    if (header_json)
        *header_json = NULL;
    int r = store_get_raw(st, st->def, COMMITTED_KEY, strlen(COMMITTED_KEY), &v, &len, err, errlen);
    if (r <= 0)
        return r;
    if (len < 8) {
        free(v);
        return store_seterr(err, errlen, -EIO, "%s: committed record is %zu bytes, expected >= 8",
                            st->db_dir, len);
    }
    *epoch = nf_get_le64(v);
    if (header_json) {
        /* the value is NUL-terminated by store_get_raw: shift the JSON to the front */
        memmove(v, (char *)v + 8, len - 8 + 1);
        *header_json = v;
    } else {
        free(v);
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * named checkpoints */

static void chk_name(char *out, size_t n, uint64_t epoch)
{
    snprintf(out, n, "chk-%0*" PRIu64, CHK_DIGITS, epoch);
}

/* "chk-<digits>" or "<digits>". */
static bool parse_id(const char *id, uint64_t *epoch)
{
    const char *d = strncmp(id, "chk-", 4) ? id : id + 4;
    if (!*d || strlen(d) > 20 || strspn(d, "0123456789") != strlen(d))
        return false;
    errno = 0;
    unsigned long long v = strtoull(d, NULL, 10);
    if (errno)
        return false;
    *epoch = v;
    return true;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The epochs of the checkpoint directories (canonical names only), ascending. 0 or -errno. */
static int scan_checkpoints(const char *state_dir, uint64_t **epochs, size_t *n)
{
    *epochs = NULL;
    *n = 0;
    char cpdir[PATH_MAX];
    if (store_path_fmt(cpdir, NULL, 0, "%s/checkpoints", state_dir) != 0)
        return -ENAMETOOLONG;
    DIR *d = opendir(cpdir);
    if (!d)
        return errno == ENOENT ? 0 : -errno;
    size_t cap = 0;
    int r = 0;
    const struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        uint64_t e;
        char canon[32];
        if (strncmp(de->d_name, "chk-", 4) != 0 || !parse_id(de->d_name, &e))
            continue;
        chk_name(canon, sizeof canon, e);
        struct stat sb;
        if (strcmp(canon, de->d_name) != 0 || fstatat(dirfd(d), de->d_name, &sb, 0) != 0 ||
            !S_ISDIR(sb.st_mode))
            continue;
        if (*n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            uint64_t *ne = realloc(*epochs, ncap * sizeof *ne);
            if (!ne) {
                r = -ENOMEM;
                break;
            }
            *epochs = ne;
            cap = ncap;
        }
        (*epochs)[(*n)++] = e;
    }
    closedir(d);
    if (r != 0) {
        free(*epochs);
        *epochs = NULL;
        *n = 0;
        return r;
    }
    if (*n)
        qsort(*epochs, *n, sizeof **epochs, cmp_u64);
    return 0;
}

/* "chk-…, chk-…" (the newest last), or "none". */
static void existing_list(char *out, size_t n, const uint64_t *epochs, size_t ne)
{
    size_t used = 0;
    out[0] = '\0';
    if (ne == 0) {
        snprintf(out, n, "none");
        return;
    }
    for (size_t i = 0; i < ne && used + 1 < n; i++) {
        char name[32];
        chk_name(name, sizeof name, epochs[i]);
        int w = snprintf(out + used, n - used, "%s%s", i ? ", " : "", name);
        if (w < 0 || (size_t)w >= n - used) {
            /* no room for the rest: end with an ellipsis if there is space for it */
            if (n > 5)
                snprintf(out + n - 5, 5, "...");
            return;
        }
        used += (size_t)w;
    }
}

/* id -> path (PATH_MAX) and canonical name. 0, -EINVAL (not an id), -ENOENT (no such checkpoint) or
 * -errno, with a message that lists the checkpoints there are. */
/* The newest of epochs[0..ne) that the last restore did not leave behind as "newer than the
 * restore" (another timeline: latest must not roll the job back onto the state it left). */
static uint64_t latest_epoch(const char *state_dir, const uint64_t *epochs, size_t ne)
{
    char path[PATH_MAX];
    cJSON *j = NULL;
    if (store_path_fmt(path, NULL, 0, "%s/checkpoints/" LAST_RESTORE, state_dir) == 0) {
        char *text = read_file(path, NULL);
        j = text ? cJSON_Parse(text) : NULL;
        free(text);
    }
    const cJSON *newer = cJSON_GetObjectItemCaseSensitive(j, "newer_kept");
    uint64_t latest = epochs[ne - 1];
    for (size_t i = ne; i-- > 0;) {
        char name[32];
        chk_name(name, sizeof name, epochs[i]);
        bool left = false;
        const cJSON *k;
        cJSON_ArrayForEach(k, newer)
        {
            left = left || (cJSON_IsString(k) && !strcmp(k->valuestring, name));
        }
        if (!left) {
            latest = epochs[i];
            break;
        }
    }
    cJSON_Delete(j);
    return latest;
}

static int resolve(const char *state_dir, const char *id, char *path, char *name, size_t namelen,
                   char *err, size_t errlen)
{
    uint64_t *epochs = NULL, epoch = 0;
    size_t ne = 0;
    int r = scan_checkpoints(state_dir, &epochs, &ne);
    if (r != 0)
        return store_seterr(err, errlen, r, "cannot list %s/checkpoints: %s", state_dir,
                            strerror(-r));
    char have[512];
    existing_list(have, sizeof have, epochs, ne);
    if (!strcmp(id, "latest")) {
        if (ne == 0)
            r = store_seterr(err, errlen, -ENOENT,
                             "no checkpoint to call latest: %s/checkpoints holds none", state_dir);
        else
            epoch = latest_epoch(state_dir, epochs, ne);
    } else if (!parse_id(id, &epoch)) {
        r = store_seterr(
            err, errlen, -EINVAL,
            "'%s' is not a checkpoint id (latest, chk-<epoch> or <epoch>); checkpoints "
            "in %s/checkpoints: %s",
            id, state_dir, have);
    } else if (ne == 0 || !bsearch(&epoch, epochs, ne, sizeof *epochs, cmp_u64)) {
        r = store_seterr(err, errlen, -ENOENT,
                         "no checkpoint '%s' in %s/checkpoints; checkpoints there: %s", id,
                         state_dir, have);
    }
    free(epochs);
    if (r != 0)
        return r;
    chk_name(name, namelen, epoch);
    return store_path_fmt(path, err, errlen, "%s/checkpoints/%s", state_dir, name);
}

char *nf_checkpoint_path(const char *state_dir, const char *id, char *err, size_t errlen)
{
    char path[PATH_MAX], name[32];
    if (resolve(state_dir, id, path, name, sizeof name, err, errlen) != 0)
        return NULL;
    char *p = strdup(path);
    if (!p)
        store_seterr(err, errlen, -ENOMEM, "out of memory");
    return p;
}

static char *manifest_text(const char *chk_path, const char *name, char *err, size_t errlen)
{
    char mpath[PATH_MAX];
    if (store_path_fmt(mpath, err, errlen, "%s/%s", chk_path, MANIFEST_NAME) != 0)
        return NULL;
    char *text = read_file(mpath, NULL);
    if (!text)
        store_seterr(err, errlen, -errno, "%s: cannot read %s: %s", name, mpath, strerror(errno));
    return text;
}

char *nf_checkpoint_manifest(const char *state_dir, const char *id, char *err, size_t errlen)
{
    char path[PATH_MAX], name[32];
    if (resolve(state_dir, id, path, name, sizeof name, err, errlen) != 0)
        return NULL;
    return manifest_text(path, name, err, errlen);
}

/* The manifest, parsed; NULL with err if missing or not a JSON object. */
static cJSON *manifest_load(const char *chk_path, const char *name, int *rc, char *err,
                            size_t errlen)
{
    char *text = manifest_text(chk_path, name, err, errlen);
    if (!text) {
        *rc = -ENOENT;
        return NULL;
    }
    cJSON *m = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(m)) {
        cJSON_Delete(m);
        *rc = store_seterr(err, errlen, -EBADMSG, "%s: %s/%s is not a JSON object", name, chk_path,
                           MANIFEST_NAME);
        return NULL;
    }
    return m;
}

static bool json_u64(const cJSON *obj, const char *key, uint64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(v) || v->valuedouble < 0)
        return false;
    *out = (uint64_t)v->valuedouble;
    return true;
}

/* Notes on the checkpoints the last restore (LAST_RESTORE) restored and kept. */
static void mark_last_restore(const char *state_dir, nf_checkpoint_info_t *list, size_t n)
{
    char path[PATH_MAX];
    if (store_path_fmt(path, NULL, 0, "%s/checkpoints/" LAST_RESTORE, state_dir) != 0)
        return;
    char *text = read_file(path, NULL);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *base = cJSON_GetObjectItemCaseSensitive(j, "restored");
    const cJSON *newer = cJSON_GetObjectItemCaseSensitive(j, "newer_kept");
    for (size_t i = 0; i < n; i++) {
        if (cJSON_IsString(base) && !strcmp(base->valuestring, list[i].id))
            snprintf(list[i].note, sizeof list[i].note, "restored");
        const cJSON *k;
        cJSON_ArrayForEach(k, newer)
        {
            if (cJSON_IsString(k) && !strcmp(k->valuestring, list[i].id))
                snprintf(list[i].note, sizeof list[i].note, "newer than the restore");
        }
    }
    cJSON_Delete(j);
}

int nf_checkpoint_list(const char *state_dir, nf_checkpoint_info_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    uint64_t *epochs = NULL;
    size_t ne = 0;
    int r = scan_checkpoints(state_dir, &epochs, &ne);
    if (r != 0 || ne == 0) {
        free(epochs);
        return r;
    }
    nf_checkpoint_info_t *list = calloc(ne, sizeof *list);
    if (!list) {
        free(epochs);
        return -ENOMEM;
    }
    for (size_t i = 0; i < ne; i++) {
        char name[32], path[PATH_MAX];
        int rc = 0;
        chk_name(name, sizeof name, epochs[i]);
        if (store_path_fmt(path, NULL, 0, "%s/checkpoints/%s", state_dir, name) != 0)
            continue;
        cJSON *m = manifest_load(path, name, &rc, NULL, 0);
        if (!m)
            continue;
        nf_checkpoint_info_t *ci = &list[*n];
        snprintf(ci->id, sizeof ci->id, "%s", name);
        if (!json_u64(m, "epoch", &ci->epoch))
            ci->epoch = epochs[i];
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "created_at");
        snprintf(ci->created_at, sizeof ci->created_at, "%s",
                 cJSON_IsString(c) ? c->valuestring : "");
        json_u64(m, "files", &ci->files);
        json_u64(m, "bytes", &ci->bytes);
        uint64_t shards = 0;
        if (json_u64(m, "shards", &shards) && shards <= UINT_MAX)
            ci->shards = (unsigned)shards;
        cJSON_Delete(m);
        (*n)++;
    }
    free(epochs);
    mark_last_restore(state_dir, list, *n);
    if (*n == 0) {
        free(list);
        list = NULL;
    }
    *out = list;
    return 0;
}

/* Removes leftovers of checkpoints, deletes and replacements a crash interrupted. */
static void clean_tmp(const char *cpdir)
{
    DIR *d = opendir(cpdir);
    if (!d)
        return;
    const struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char p[PATH_MAX];
        if (!strncmp(de->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) &&
            store_path_fmt(p, NULL, 0, "%s/%s", cpdir, de->d_name) == 0)
            rm_rf(p);
    }
    closedir(d);
}

/* Moves cpdir/name aside (atomically: it is either there whole or not at all) and removes it. */
static int delete_dir(const char *cpdir, const char *name, char *err, size_t errlen)
{
    char from[PATH_MAX], aside[PATH_MAX];
    if (store_path_fmt(from, err, errlen, "%s/%s", cpdir, name) != 0 ||
        store_path_fmt(aside, err, errlen, "%s/" TMP_PREFIX "del-%s-%ld", cpdir, name,
                       (long)getpid()) != 0)
        return -ENAMETOOLONG;
    if (rename(from, aside) != 0)
        return store_seterr(err, errlen, -errno, "cannot delete %s: rename to %s: %s", from, aside,
                            strerror(errno));
    fsync_path(cpdir, true);
    int r = rm_rf(aside);
    if (r != 0)
        return store_seterr(err, errlen, r, "%s: removing its files (now under %s): %s", from,
                            aside, strerror(-r));
    return 0;
}

static cJSON *header_value(const char *json)
{
    if (!json)
        return cJSON_CreateNull();
    cJSON *h = cJSON_Parse(json);
    return h ? h : cJSON_CreateString(json); /* opaque to the store: keep it whatever it is */
}

static char *manifest_build(nf_store_t *st, const char *name, uint64_t epoch,
                            const char *config_hash, unsigned shards, const dbfile_t *files,
                            size_t nfiles, uint64_t bytes, char *err, size_t errlen)
{
    uint64_t committed = 0;
    char *header = NULL;
    if (nf_store_committed(st, &committed, &header, err, errlen) != 0)
        return NULL;
    uint64_t now = store_realtime_ms();
    time_t secs = (time_t)(now / 1000);
    struct tm tm;
    char created[32];
    gmtime_r(&secs, &tm);
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);

    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", name);
    cJSON_AddNumberToObject(m, "epoch", (double)epoch);
    cJSON_AddNumberToObject(m, "committed_epoch", (double)committed);
    cJSON_AddStringToObject(m, "created_at", created);
    cJSON_AddNumberToObject(m, "created_at_ms", (double)now);
    cJSON_AddItemToObject(m, "header", header_value(header));
    if (config_hash)
        cJSON_AddStringToObject(m, "config_hash", config_hash);
    else
        cJSON_AddNullToObject(m, "config_hash");
    cJSON_AddStringToObject(m, "version", NF_VERSION);
    cJSON_AddStringToObject(m, "git_commit", NF_GIT_COMMIT);
    if (shards)
        cJSON_AddNumberToObject(m, "shards", shards);
    else
        cJSON_AddNullToObject(m, "shards");
    cJSON_AddNumberToObject(m, "files", (double)nfiles);
    cJSON_AddNumberToObject(m, "bytes", (double)bytes);
    cJSON *kinds = cJSON_AddObjectToObject(m, "kinds");
    for (int k = 0; k < NF_KIND__COUNT; k++) {
        uint64_t est = 0;
        if (st->kinds[k])
            rocksdb_property_int_cf(st->db, st->kinds[k], "rocksdb.estimate-num-keys", &est);
        cJSON *ko = cJSON_AddObjectToObject(kinds, nf_state_kind_name(k));
        cJSON_AddNumberToObject(ko, "keys_estimate", (double)est);
    }
    cJSON *fl = cJSON_AddArrayToObject(m, "file_list");
    for (size_t i = 0; i < nfiles; i++) {
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "name", files[i].name);
        cJSON_AddNumberToObject(f, "bytes", (double)files[i].size);
        cJSON_AddItemToArray(fl, f);
    }
    char *text = cJSON_Print(m);
    cJSON_Delete(m);
    free(header);
    if (!text)
        store_seterr(err, errlen, -ENOMEM, "%s: building manifest.json: out of memory", name);
    return text;
}

int nf_store_checkpoint(nf_store_t *st, uint64_t epoch, const char *config_hash, unsigned shards,
                        char *err, size_t errlen)
{
    if (!st->state_dir)
        return store_seterr(err, errlen, -EINVAL,
                            "%s was not opened as a state directory; no checkpoints there",
                            st->db_dir);
    if (st->read_only)
        return store_seterr(err, errlen, -EROFS, "%s is open read-only", st->db_dir);
    store_pending_head_t h;
    int r = store_pending_head_read(st, &h, err, errlen);
    if (r < 0)
        return r;
    if (r > 0) {
        free(h.json);
        return store_seterr(err, errlen, -EBUSY,
                            "checkpoint of epoch %" PRIu64 ": epoch %" PRIu64
                            " is pending in %s; a checkpoint is taken between commits",
                            epoch, h.epoch, st->db_dir);
    }
    char cpdir[PATH_MAX], tmp[PATH_MAX], final[PATH_MAX], old[PATH_MAX], mpath[PATH_MAX];
    char name[32];
    chk_name(name, sizeof name, epoch);
    if (store_path_fmt(cpdir, err, errlen, "%s/checkpoints", st->state_dir) != 0 ||
        store_path_fmt(tmp, err, errlen, "%s/" TMP_PREFIX "%s-%ld", cpdir, name, (long)getpid()) !=
            0 ||
        store_path_fmt(final, err, errlen, "%s/%s", cpdir, name) != 0 ||
        store_path_fmt(old, err, errlen, "%s/" TMP_PREFIX "old-%s-%ld", cpdir, name,
                       (long)getpid()) != 0 ||
        store_path_fmt(mpath, err, errlen, "%s/%s", tmp, MANIFEST_NAME) != 0)
        return -ENAMETOOLONG;
    r = store_mkdir_p(cpdir);
    if (r != 0)
        return store_seterr(err, errlen, r, "cannot create %s: %s", cpdir, strerror(-r));
    /* This process holds the database's LOCK, so nobody else makes checkpoints here. */
    clean_tmp(cpdir);

    char *rerr = NULL, what[PATH_MAX + 128];
    rocksdb_checkpoint_t *cp = rocksdb_checkpoint_object_create(st->db, &rerr);
    if (!rerr)
        rocksdb_checkpoint_create(cp, tmp, 0 /* always flush first: no WAL to replay */, &rerr);
    if (cp)
        rocksdb_checkpoint_object_destroy(cp);
    if (rerr) {
        snprintf(what, sizeof what, "checkpoint %s: RocksDB checkpoint into %s", name, tmp);
        store_rocks_err(rerr, err, errlen, -EIO, what);
        rm_rf(tmp);
        return -EIO;
    }

    dbfile_t *files = NULL;
    size_t nfiles = 0;
    uint64_t bytes = 0;
    char *text = NULL;
    r = list_db_files(tmp, &files, &nfiles, &bytes);
    if (r != 0) {
        store_seterr(err, errlen, r, "checkpoint %s: listing %s: %s", name, tmp, strerror(-r));
        goto fail;
    }
    text = manifest_build(st, name, epoch, config_hash, shards, files, nfiles, bytes, err, errlen);
    if (!text) {
        r = -ENOMEM;
        goto fail;
    }
    size_t tl = strlen(text);
    text[tl] = '\n'; /* cJSON_Print's NUL becomes a final newline */
    r = write_file_sync(mpath, text, tl + 1);
    if (r == 0)
        r = fsync_path(tmp, true);
    if (r != 0) {
        store_seterr(err, errlen, r, "checkpoint %s: writing %s: %s", name, mpath, strerror(-r));
        goto fail;
    }
    /* A checkpoint of the same epoch can exist from before a restore rewound the epochs: this one
     * is the state that is live now, so it wins. */
    bool replaced = rename(final, old) == 0;
    if (rename(tmp, final) != 0) {
        r = store_seterr(err, errlen, -errno, "checkpoint %s: rename %s to %s: %s", name, tmp,
                         final, strerror(errno));
        if (replaced)
            rename(old, final);
        goto fail;
    }
    fsync_path(cpdir, true);
    if (replaced)
        rm_rf(old);
    free(files);
    free(text);
    return 0;
fail:
    free(files);
    free(text);
    rm_rf(tmp);
    return r;
}

int nf_store_checkpoint_prune(const char *state_dir, unsigned retain)
{
    uint64_t *epochs = NULL;
    size_t ne = 0;
    int r = scan_checkpoints(state_dir, &epochs, &ne);
    if (r != 0)
        return r;
    char cpdir[PATH_MAX];
    int deleted = 0;
    if (store_path_fmt(cpdir, NULL, 0, "%s/checkpoints", state_dir) != 0)
        r = -ENAMETOOLONG;
    for (size_t i = 0; r == 0 && i + retain < ne; i++) {
        char name[32];
        chk_name(name, sizeof name, epochs[i]);
        r = delete_dir(cpdir, name, NULL, 0);
        if (r == 0)
            deleted++;
    }
    free(epochs);
    return r != 0 ? r : deleted;
}

int nf_checkpoint_delete(const char *state_dir, const char *id, char *err, size_t errlen)
{
    char path[PATH_MAX], name[32], cpdir[PATH_MAX];
    int r = resolve(state_dir, id, path, name, sizeof name, err, errlen);
    if (r != 0)
        return r;
    if (store_path_fmt(cpdir, err, errlen, "%s/checkpoints", state_dir) != 0)
        return -ENAMETOOLONG;
    return delete_dir(cpdir, name, err, errlen);
}

static int cmp_name(const void *key, const void *elem)
{
    return strcmp(key, ((const dbfile_t *)elem)->name);
}

/* The checkpoint's files against its manifest: each listed file present with its size, no file that
 * is not listed, the totals. 0 or -errno with the first problem. */
static int check_files(const char *path, const char *name, const cJSON *m,
                       nf_checkpoint_stats_t *stats, char *err, size_t errlen)
{
    uint64_t want_files, want_bytes;
    if (!json_u64(m, "files", &want_files) || !json_u64(m, "bytes", &want_bytes))
        return store_seterr(err, errlen, -EBADMSG, "%s: manifest.json lacks \"files\" or \"bytes\"",
                            name);
    dbfile_t *files = NULL;
    size_t n = 0;
    uint64_t bytes = 0;
    int r = list_db_files(path, &files, &n, &bytes);
    if (r != 0)
        return store_seterr(err, errlen, r, "%s: listing %s: %s", name, path, strerror(-r));
    const cJSON *fl = cJSON_GetObjectItemCaseSensitive(m, "file_list");
    size_t listed = 0;
    if (cJSON_IsArray(fl)) {
        const cJSON *f;
        cJSON_ArrayForEach(f, fl)
        {
            const cJSON *fn = cJSON_GetObjectItemCaseSensitive(f, "name");
            uint64_t fb = 0;
            if (!cJSON_IsString(fn) || !json_u64(f, "bytes", &fb)) {
                r = store_seterr(err, errlen, -EBADMSG,
                                 "%s: manifest.json: malformed file_list entry", name);
                break;
            }
            const dbfile_t *have =
                n ? bsearch(fn->valuestring, files, n, sizeof *files, cmp_name) : NULL;
            if (!have) {
                r = store_seterr(err, errlen, -ENOENT,
                                 "%s: %s/%s is missing (the manifest lists it, %" PRIu64 " bytes)",
                                 name, path, fn->valuestring, fb);
                break;
            }
            if (have->size != fb) {
                r = store_seterr(err, errlen, -EIO,
                                 "%s: %s/%s is %" PRIu64 " bytes, the manifest says %" PRIu64
                                 " (truncated or overwritten)",
                                 name, path, fn->valuestring, have->size, fb);
                break;
            }
            listed++;
        }
        if (r == 0 && listed != n) {
            /* some file is not in the list: name it */
            for (size_t i = 0; i < n && r == 0; i++) {
                bool found = false;
                cJSON_ArrayForEach(f, fl)
                {
                    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(f, "name");
                    if (cJSON_IsString(fn) && !strcmp(fn->valuestring, files[i].name))
                        found = true;
                }
                if (!found)
                    r = store_seterr(err, errlen, -EIO,
                                     "%s: %s/%s is not in the manifest (a file from elsewhere?)",
                                     name, path, files[i].name);
            }
        }
    }
    if (r == 0 && (n != want_files || bytes != want_bytes))
        r = store_seterr(err, errlen, -EIO,
                         "%s: %zu files, %" PRIu64 " bytes in %s; the manifest says %" PRIu64
                         " files, %" PRIu64 " bytes",
                         name, n, bytes, path, want_files, want_bytes);
    free(files);
    if (r == 0 && stats) {
        stats->files = n;
        stats->bytes = bytes;
    }
    return r;
}

/* Counts the keys of one family, reading every block with its checksum verified. */
static int scan_family(nf_store_t *st, rocksdb_column_family_handle_t *h, const char *family,
                       const char *name, uint64_t *keys, char *err, size_t errlen)
{
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(st->db, st->ro_scan, h);
    for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it); rocksdb_iter_next(it))
        (*keys)++;
    char *rerr = NULL;
    rocksdb_iter_get_error(it, &rerr);
    rocksdb_iter_destroy(it);
    if (rerr) {
        char what[PATH_MAX + 96];
        snprintf(what, sizeof what, "%s: reading column family %s of %s", name, family, st->db_dir);
        return store_rocks_err(rerr, err, errlen, -EIO, what);
    }
    return 0;
}

/* Opens the checkpoint's database read-only and reads it end to end with checksums verified.
 * keep: on success the store is left open there (the caller closes it). */
static int check_db(const char *path, const char *name, const cJSON *m,
                    nf_checkpoint_stats_t *stats, nf_store_t **keep, char *err, size_t errlen)
{
    nf_store_opts_t o;
    nf_store_opts_default(&o);
    o.block_cache_mb = 8;
    o.read_only = true;
    char oerr[1024];
    nf_store_t *st = store_open(path, NULL, &o, (open_mode_t){.read_only = true, .verify = true},
                                oerr, sizeof oerr);
    if (!st)
        return store_seterr(err, errlen, -EIO, "%s: %s", name, oerr);
    uint64_t keys = 0;
    int r = scan_family(st, st->def, "default", name, &keys, err, errlen);
    for (int k = 0; r == 0 && k < NF_KIND__COUNT; k++)
        if (st->kinds[k])
            r = scan_family(st, st->kinds[k], nf_state_kind_name(k), name, &keys, err, errlen);
    for (size_t i = 0; r == 0 && i < st->nothers; i++) {
        char *fam = rocksdb_column_family_handle_get_name(st->others[i], &(size_t){0});
        r = scan_family(st, st->others[i], fam ? fam : "?", name, &keys, err, errlen);
        rocksdb_free(fam);
    }
    uint64_t want, have = 0;
    if (r == 0 && json_u64(m, "committed_epoch", &want)) {
        r = nf_store_committed(st, &have, NULL, err, errlen);
        if (r == 0 && have != want)
            r = store_seterr(err, errlen, -EIO,
                             "%s: the database's committed epoch is %" PRIu64
                             ", the manifest says %" PRIu64,
                             name, have, want);
    }
    if (r == 0 && keep)
        *keep = st;
    else
        nf_store_close(st);
    if (r == 0 && stats)
        stats->keys = keys;
    return r;
}

int nf_checkpoint_verify_stats(const char *state_dir, const char *id, nf_checkpoint_stats_t *stats,
                               char *err, size_t errlen)
{
    char path[PATH_MAX], name[32];
    nf_checkpoint_stats_t s = {0};
    int r = resolve(state_dir, id, path, name, sizeof name, err, errlen);
    if (r != 0)
        return r;
    cJSON *m = manifest_load(path, name, &r, err, errlen);
    if (!m)
        return r;
    json_u64(m, "epoch", &s.epoch);
    r = check_files(path, name, m, &s, err, errlen);
    if (r == 0)
        r = check_db(path, name, m, &s, NULL, err, errlen);
    cJSON_Delete(m);
    if (r == 0 && stats)
        *stats = s;
    return r;
}

int nf_checkpoint_verify(const char *state_dir, const char *id, char *err, size_t errlen)
{
    return nf_checkpoint_verify_stats(state_dir, id, NULL, err, errlen);
}

/* 1 if another process holds db_dir/LOCK (RocksDB locks it with fcntl; *pid its holder), 0 if
 * not (or there is no database), -errno. A store open in this process is not seen. */
static int lock_holder(const char *db_dir, long *pid)
{
    char lock[PATH_MAX];
    if (store_path_fmt(lock, NULL, 0, "%s/LOCK", db_dir) != 0)
        return -ENAMETOOLONG;
    int fd = open(lock, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    int r = 0;
    if (fcntl(fd, F_GETLK, &fl) != 0)
        r = -errno;
    else if (fl.l_type != F_UNLCK) {
        r = 1;
        if (pid)
            *pid = (long)fl.l_pid;
    }
    close(fd);
    return r;
}

int nf_store_in_use(const char *state_dir, long *pid)
{
    char db[PATH_MAX];
    if (store_path_fmt(db, NULL, 0, "%s/db", state_dir) != 0)
        return -ENAMETOOLONG;
    return lock_holder(db, pid);
}

/* -EBUSY (with err) if another process holds db_dir/LOCK. */
static int check_unlocked(const char *db_dir, char *err, size_t errlen)
{
    long pid = 0;
    if (lock_holder(db_dir, &pid) == 1)
        return store_seterr(
            err, errlen, -EBUSY,
            "%s is in use (process %ld holds %s/LOCK); stop the job before restoring", db_dir, pid,
            db_dir);
    return 0;
}

/* Only table and blob files are immutable: those are hard-linked. The rest (MANIFEST, CURRENT,
 * OPTIONS, WAL) is small and RocksDB may write to it, so it is copied and the checkpoint stays
 * untouched by the database it seeded. */
static bool immutable_file(const char *name)
{
    size_t l = strlen(name);
    return (l > 4 && !strcmp(name + l - 4, ".sst")) || (l > 5 && !strcmp(name + l - 5, ".blob"));
}

/* The checks that can refuse a restore, before anything moves: the checkpoint verified in full
 * (nf_checkpoint_verify_stats), then its shard count against the job's. */
static int restore_checks(const char *path, const char *name, const nf_restore_opts_t *o,
                          nf_restore_result_t *res, char *err, size_t errlen)
{
    int r = 0;
    cJSON *m = manifest_load(path, name, &r, err, errlen);
    if (!m)
        return r;
    json_u64(m, "epoch", &res->epoch);
    uint64_t mshards = 0;
    bool has_shards = json_u64(m, "shards", &mshards) && mshards > 0;
    nf_store_t *chk = NULL;
    r = check_files(path, name, m, NULL, err, errlen);
    if (r == 0)
        r = check_db(path, name, m, NULL, &chk, err, errlen);
    cJSON_Delete(m);
    if (r != 0)
        return r;
    long dbs = 0;
    if (!has_shards && o->db_shards) {
        dbs = o->db_shards(chk);
        if (dbs < 0)
            r = store_seterr(err, errlen, (int)dbs,
                             "%s: cannot read the shard count its state was written by: %s", name,
                             strerror((int)-dbs));
    }
    nf_store_close(chk);
    if (r != 0)
        return r;
    res->shards = has_shards ? (unsigned)mshards : (unsigned)dbs;
    if (o->shards && res->shards && res->shards != o->shards)
        return store_seterr(
            err, errlen, -EINVAL,
            "%s was taken with runtime.shards=%u, the job runs with %u (state is kept per "
            "shard); restore it with --set runtime.shards=%u",
            name, res->shards, o->shards, res->shards);
    return 0;
}

/* The committed epoch of the database in dir (opened read-only): 1 (*epoch set), or 0 if it
 * cannot be read (the name of a replaced database then says "unknown"). */
static int db_epoch(const char *dir, uint64_t *epoch)
{
    char e[256];
    nf_store_t *st = nf_store_open_dir(dir, true, e, sizeof e);
    if (!st)
        return 0;
    int ok = nf_store_committed(st, epoch, NULL, e, sizeof e) == 0;
    nf_store_close(st);
    return ok;
}

/* Sets the committed epoch of the (closed) database in dir to epoch, keeping its header: the
 * epochs of the restored state continue after the kept newer checkpoints'. */
static int set_committed_epoch(const char *dir, uint64_t epoch, char *err, size_t errlen)
{
    nf_store_t *st = nf_store_open_dir(dir, false, err, errlen);
    if (!st)
        return -EIO;
    char *header = NULL;
    uint64_t old = 0;
    int r = nf_store_committed(st, &old, &header, err, errlen);
    if (r == 0 && header) { /* nothing committed (no header): nothing to renumber */
        size_t hl = header ? strlen(header) : 0;
        unsigned char *cv = malloc(8 + hl + 1);
        if (!cv) {
            r = store_seterr(err, errlen, -ENOMEM, "out of memory");
        } else {
            nf_put_le64(cv, epoch);
            if (hl)
                memcpy(cv + 8, header, hl);
            char *rerr = NULL;
            rocksdb_put_cf(st->db, st->wo_sync, st->def, COMMITTED_KEY, strlen(COMMITTED_KEY),
                           (const char *)cv, 8 + hl, &rerr);
            if (rerr)
                r = store_rocks_err(rerr, err, errlen, -EIO, "setting the committed epoch");
            free(cv);
        }
    }
    free(header);
    nf_store_close(st);
    return r;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Deletes the oldest <state_dir>/db.replaced-* beyond keep (by name: the new names start with
 * the UTC time, older versions' with Unix seconds, which sort before them until 2033). */
static void prune_replaced(const char *state_dir, unsigned keep, nf_restore_result_t *res)
{
    DIR *d = opendir(state_dir);
    if (!d)
        return;
    char **names = NULL;
    size_t n = 0, cap = 0;
    const struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, REPLACED_PREFIX, strlen(REPLACED_PREFIX)) != 0)
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            char **nn = realloc(names, ncap * sizeof *nn);
            if (!nn)
                break;
            names = nn;
            cap = ncap;
        }
        if (!(names[n] = strdup(de->d_name)))
            break;
        n++;
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, cmp_str);
    size_t used = 0;
    for (size_t i = 0; i + keep < n; i++) {
        char p[PATH_MAX];
        if (store_path_fmt(p, NULL, 0, "%s/%s", state_dir, names[i]) != 0 || rm_rf(p) != 0)
            continue;
        res->pruned++;
        size_t room = sizeof res->pruned_names - used;
        int w = snprintf(res->pruned_names + used, room, "%s%s", used ? ", " : "", names[i]);
        if (w < 0 || (size_t)w >= room)
            snprintf(res->pruned_names + sizeof res->pruned_names - 4, 4, "...");
        else
            used += (size_t)w;
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* checkpoints/last-restore.json: what nf_checkpoint_list marks. Best effort: the restore is done.
 */
static void write_last_restore(const char *state_dir, const nf_restore_result_t *res,
                               const uint64_t *newer, size_t nnewer, const char *at)
{
    char path[PATH_MAX], tmp[PATH_MAX];
    if (store_path_fmt(path, NULL, 0, "%s/checkpoints/" LAST_RESTORE, state_dir) != 0 ||
        store_path_fmt(tmp, NULL, 0, "%s/checkpoints/" TMP_PREFIX "%s-%ld", state_dir, LAST_RESTORE,
                       (long)getpid()) != 0)
        return;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "restored", res->id);
    cJSON_AddNumberToObject(j, "epoch", (double)res->epoch);
    cJSON_AddStringToObject(j, "at", at);
    cJSON_AddNumberToObject(j, "next_epoch", (double)res->next_epoch);
    cJSON_AddStringToObject(j, "replaced", res->replaced);
    cJSON *a = cJSON_AddArrayToObject(j, "newer_kept");
    for (size_t i = 0; i < nnewer; i++) {
        char name[32];
        chk_name(name, sizeof name, newer[i]);
        cJSON_AddItemToArray(a, cJSON_CreateString(name));
    }
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    unlink(tmp);
    if (text && write_file_sync(tmp, text, strlen(text)) == 0 && rename(tmp, path) != 0)
        unlink(tmp);
    free(text);
}

int nf_checkpoint_restore(const char *state_dir, const char *id, const nf_restore_opts_t *opts,
                          nf_restore_result_t *res, char *err, size_t errlen)
{
    static const nf_restore_opts_t no_opts;
    nf_restore_result_t local;
    const nf_restore_opts_t *o = opts ? opts : &no_opts;
    if (!res)
        res = &local;
    memset(res, 0, sizeof *res);
    char path[PATH_MAX], name[32], db[PATH_MAX], tmp[PATH_MAX], replaced[PATH_MAX];
    int r = resolve(state_dir, id, path, name, sizeof name, err, errlen);
    if (r != 0)
        return r;
    res->resolved = true;
    snprintf(res->id, sizeof res->id, "%s", name);
    /* ---- every check that can refuse the restore: nothing has moved yet ---- */
    r = restore_checks(path, name, o, res, err, errlen);
    if (r != 0)
        return r;
    if (store_path_fmt(db, err, errlen, "%s/db", state_dir) != 0 ||
        store_path_fmt(tmp, err, errlen, "%s/.db.restoring-%ld", state_dir, (long)getpid()) != 0)
        return -ENAMETOOLONG;
    r = check_unlocked(db, err, errlen);
    if (r != 0)
        return r;
    uint64_t *epochs = NULL;
    size_t ne = 0, first_newer = 0;
    r = scan_checkpoints(state_dir, &epochs, &ne);
    if (r != 0)
        return store_seterr(err, errlen, r, "cannot list %s/checkpoints: %s", state_dir,
                            strerror(-r));
    while (first_newer < ne && epochs[first_newer] <= res->epoch)
        first_newer++;
    res->kept_newer = (unsigned)(ne - first_newer);
    /* Epoch numbers go on after every one this state directory has used: the kept newer
     * checkpoints' and the replaced database's (its epochs' records are in Kafka under this
     * writer; the nf-nonce header tells them apart too, see kafka.h). */
    struct stat sb;
    bool have_db = stat(db, &sb) == 0;
    uint64_t old_epoch = 0;
    bool old_known = have_db && db_epoch(db, &old_epoch);
    uint64_t last_used = res->kept_newer ? epochs[ne - 1] : res->epoch;
    if (old_known && old_epoch > last_used)
        last_used = old_epoch;
    res->next_epoch = last_used + 1;
    if (res->kept_newer)
        chk_name(res->newest_kept, sizeof res->newest_kept, epochs[ne - 1]);

    /* ---- a fresh database from the checkpoint's files, beside the live one ---- */
    dbfile_t *files = NULL;
    size_t n = 0;
    uint64_t bytes = 0;
    r = list_db_files(path, &files, &n, &bytes);
    if (r != 0) {
        free(epochs);
        return store_seterr(err, errlen, r, "%s: listing %s: %s", name, path, strerror(-r));
    }
    rm_rf(tmp);
    if (mkdir(tmp, 0755) != 0) {
        r = store_seterr(err, errlen, -errno, "restore %s: cannot create %s: %s", name, tmp,
                         strerror(errno));
        free(files);
        free(epochs);
        return r;
    }
    for (size_t i = 0; i < n && r == 0; i++) {
        char src[PATH_MAX], dst[PATH_MAX];
        if (store_path_fmt(src, err, errlen, "%s/%s", path, files[i].name) != 0 ||
            store_path_fmt(dst, err, errlen, "%s/%s", tmp, files[i].name) != 0) {
            r = -ENAMETOOLONG;
            break;
        }
        bool linked = false;
        if (immutable_file(files[i].name)) {
            if (link(src, dst) == 0)
                linked = true;
            else if (errno != EXDEV && errno != EPERM && errno != EMLINK)
                r = store_seterr(err, errlen, -errno, "restore %s: link %s to %s: %s", name, src,
                                 dst, strerror(errno));
        }
        if (r == 0 && !linked) {
            r = copy_file(src, dst);
            if (r != 0)
                store_seterr(err, errlen, r, "restore %s: copy %s to %s: %s", name, src, dst,
                             strerror(-r));
        }
    }
    free(files);
    if (r == 0 && res->next_epoch - 1 > res->epoch)
        r = set_committed_epoch(tmp, res->next_epoch - 1, err, errlen);
    if (r == 0 && (r = fsync_path(tmp, true)) != 0)
        store_seterr(err, errlen, r, "restore %s: fsync %s: %s", name, tmp, strerror(-r));
    if (r != 0) {
        rm_rf(tmp);
        free(epochs);
        return r;
    }

    /* The old database is kept, never deleted here: under db.replaced-<UTC time>-epoch<N> (-<n>
     * if that exists); only the pruning below, beyond keep_replaced, removes old ones. */
    time_t now = time(NULL);
    struct tm tm;
    char stamp[32], at[32], ep[32] = "unknown";
    gmtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H%M%SZ", &tm);
    strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (old_known)
        snprintf(ep, sizeof ep, "%" PRIu64, old_epoch);
    if (store_path_fmt(replaced, err, errlen, "%s/" REPLACED_PREFIX "%s-epoch%s", state_dir, stamp,
                       ep) != 0) {
        rm_rf(tmp);
        free(epochs);
        return -ENAMETOOLONG;
    }
    for (int i = 1; access(replaced, F_OK) == 0 && i < 1000; i++)
        if (store_path_fmt(replaced, err, errlen, "%s/" REPLACED_PREFIX "%s-epoch%s-%d", state_dir,
                           stamp, ep, i) != 0) {
            rm_rf(tmp);
            free(epochs);
            return -ENAMETOOLONG;
        }
    res->moved = true;
    if (have_db) {
        /* Swap in one step where the file system can, so no crash leaves the state directory
         * without a db/ (an open would then create an empty one): the old database is under the
         * temporary name until the second rename. */
        if (renameat2(AT_FDCWD, tmp, AT_FDCWD, db, RENAME_EXCHANGE) == 0) {
            if (rename(tmp, replaced) != 0)
                r = store_seterr(err, errlen, -errno,
                                 "restore %s: the checkpoint is live in %s, but the old database "
                                 "could not be renamed from %s to %s: %s",
                                 name, db, tmp, replaced, strerror(errno));
        } else if (rename(db, replaced) != 0) {
            r = store_seterr(err, errlen, -errno, "restore %s: rename %s to %s: %s", name, db,
                             replaced, strerror(errno));
            rm_rf(tmp);
            res->moved = false;
        } else if (rename(tmp, db) != 0) {
            r = store_seterr(err, errlen, -errno, "restore %s: rename %s to %s: %s", name, tmp, db,
                             strerror(errno));
            if (rename(replaced, db) == 0) { /* put the old one back */
                rm_rf(tmp);
                res->moved = false;
            }
        }
        if (r == 0)
            snprintf(res->replaced, sizeof res->replaced, "%s", replaced);
    } else if (rename(tmp, db) != 0) {
        r = store_seterr(err, errlen, -errno, "restore %s: rename %s to %s: %s", name, tmp, db,
                         strerror(errno));
        rm_rf(tmp);
        res->moved = false;
    }
    fsync_path(state_dir, true);
    if (r == 0) {
        write_last_restore(state_dir, res, epochs + first_newer, ne - first_newer, at);
        if (o->keep_replaced)
            prune_replaced(state_dir, o->keep_replaced, res);
    }
    free(epochs);
    return r;
}
