/* checkpoint.c — named checkpoints (checkpoint.h): RocksDB checkpoints under checkpoints/, each
 * with a manifest.json listing its files and sizes, so a verify can name a truncated file before
 * RocksDB reads every block with checksums on; pruning, listing, verification, the db/LOCK
 * check, and the restore that makes a checkpoint the live database. */
#include "state/checkpoint.h"
#include "algo/bytes.h"
#include "algo/hash.h"
#include "state/store_int.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <rocksdb/c.h>
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

#define MANIFEST_NAME   "manifest.json"
#define LAST_RESTORE    "last-restore.json"
#define REPLACED_PREFIX "db.replaced-"
#define CHK_DIGITS      12
#define TMP_PREFIX      ".tmp-"
#define COPY_BUF        (64 * 1024)
#define HASH_SEED       0x6e66636b70746873ull /* "nfckpths" */

/* ---------------------------------------------------------------------------------------------
 * files */

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

/* Reads fd in to its end, hashing the bytes (chained nf_hash64 over COPY_BUF pieces, seeded
 * HASH_SEED: what a checkpoint's manifest records as "hash") and writing them to out unless it
 * is -1. 0 or -errno. */
static int stream(int in, int out, uint64_t *hash)
{
    char *buf = malloc(COPY_BUF);
    int r = buf ? 0 : -ENOMEM;
    uint64_t h = HASH_SEED;
    while (r == 0) {
        ssize_t n = read(in, buf, COPY_BUF);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            r = -errno;
        else if (n == 0)
            break;
        else {
            h = nf_hash64(buf, (size_t)n, h);
            if (out >= 0)
                r = write_all(out, buf, (size_t)n);
        }
    }
    free(buf);
    *hash = h;
    return r;
}

/* Copies src into dst (a new file, synced); *hash (may be NULL) is the hash of the bytes read.
 * 0 or -errno. */
static int copy_file_hashed(const char *src, const char *dst, uint64_t *hash)
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
    uint64_t h = 0;
    int r = stream(in, out, &h);
    if (hash)
        *hash = h;
    if (r == 0 && fsync(out) != 0)
        r = -errno;
    if (close(out) != 0 && r == 0)
        r = -errno;
    close(in);
    return r;
}

static int copy_file(const char *src, const char *dst)
{
    return copy_file_hashed(src, dst, NULL);
}

/* The hash of path's bytes (stream's): what verifies a copy against the bytes it was made from,
 * and a checkpoint's table file against its manifest. 0 or -errno. */
static int file_hash(const char *path, uint64_t *hash)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int r = stream(fd, -1, hash);
    close(fd);
    return r;
}

/* copy_file_hashed, then dst read back: 0 when it hashes as the bytes read from src did (*hash),
 * -EIO when it does not, else -errno. */
static int copy_verified(const char *src, const char *dst, uint64_t *hash)
{
    uint64_t back = 0;
    int r = copy_file_hashed(src, dst, hash);
    if (r == 0)
        r = file_hash(dst, &back);
    return r == 0 && back != *hash ? -EIO : r;
}

/* ---- the files of a database directory ---- */

typedef struct dbfile {
    char name[NAME_MAX + 1];
    uint64_t size;
    /* a table file the checkpoint holds a copy of (detach_tables): its hash, and the identity of
     * the live file it copies (device:inode:mtime_ns), "" otherwise */
    uint64_t hash;
    char src[64];
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
        f->hash = 0;
        f->src[0] = '\0';
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
    store_sweep(cpdir, TMP_PREFIX);
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
    store_fsync_path(cpdir, true);
    int r = store_rm_rf(aside);
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

static bool immutable_file(const char *name);

/* The newest checkpoint other than `skip` whose manifest loads, into *m (NULL: none) and its
 * directory into path. */
static void newest_manifest(const char *state_dir, const char *skip, cJSON **m, char path[PATH_MAX])
{
    *m = NULL;
    uint64_t *epochs = NULL;
    size_t ne = 0;
    if (scan_checkpoints(state_dir, &epochs, &ne) != 0)
        return;
    for (size_t i = ne; i-- > 0 && !*m;) {
        char name[32], err[256];
        int rc = 0;
        chk_name(name, sizeof name, epochs[i]);
        if (!strcmp(name, skip) ||
            store_path_fmt(path, NULL, 0, "%s/checkpoints/%s", state_dir, name) != 0)
            continue;
        *m = manifest_load(path, name, &rc, err, sizeof err);
    }
    free(epochs);
}

/* The file_list entry of prev naming `name`, NULL if none. */
static const cJSON *listed(const cJSON *prev, const char *name)
{
    const cJSON *f, *fl = cJSON_GetObjectItemCaseSensitive(prev, "file_list");
    cJSON_ArrayForEach(f, fl)
    {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(f, "name");
        if (cJSON_IsString(fn) && !strcmp(fn->valuestring, name))
            return f;
    }
    return NULL;
}

/* f (in dir, a hard link of the live file) becomes a link to the earlier checkpoint's copy of
 * that same live file, when prev lists one (same name, size and live identity) that is still
 * there: true if so. */
static bool reuse_copy(const char *dir, dbfile_t *f, const cJSON *prev, const char *prev_path)
{
    const cJSON *e = prev ? listed(prev, f->name) : NULL;
    const cJSON *src = e ? cJSON_GetObjectItemCaseSensitive(e, "src") : NULL;
    const cJSON *hash = e ? cJSON_GetObjectItemCaseSensitive(e, "hash") : NULL;
    uint64_t bytes = 0;
    if (!cJSON_IsString(src) || strcmp(src->valuestring, f->src) != 0 || !cJSON_IsString(hash) ||
        !json_u64(e, "bytes", &bytes) || bytes != f->size)
        return false;
    char from[PATH_MAX], to[PATH_MAX + 16], at[PATH_MAX];
    struct stat sb;
    if (store_path_fmt(from, NULL, 0, "%s/%s", prev_path, f->name) != 0 ||
        store_path_fmt(to, NULL, 0, "%s/.link-%s", dir, f->name) != 0 ||
        store_path_fmt(at, NULL, 0, "%s/%s", dir, f->name) != 0 || stat(from, &sb) != 0 ||
        (uint64_t)sb.st_size != f->size || link(from, to) != 0)
        return false;
    if (rename(to, at) != 0) {
        unlink(to);
        return false;
    }
    f->hash = strtoull(hash->valuestring, NULL, 16);
    return true;
}

/* f (in dir, a hard link of the live file) is replaced by a copy of it, read back and compared
 * by hash with the bytes it was made from. 0 or -errno with err. */
static int copy_own(const char *dir, dbfile_t *f, const char *chk, char *err, size_t errlen)
{
    char at[PATH_MAX], to[PATH_MAX + 16];
    if (store_path_fmt(at, err, errlen, "%s/%s", dir, f->name) != 0 ||
        store_path_fmt(to, err, errlen, "%s/.copy-%s", dir, f->name) != 0)
        return -ENAMETOOLONG;
    uint64_t h = 0;
    int r = copy_verified(at, to, &h);
    if (r == -EIO)
        store_seterr(err, errlen, r,
                     "checkpoint %s: the copy of %s reads back differently from the table file "
                     "it was made from (hash %016" PRIx64 ")",
                     chk, f->name, h);
    else if (r != 0)
        store_seterr(err, errlen, r, "checkpoint %s: copying %s: %s", chk, at, strerror(-r));
    if (r == 0 && rename(to, at) != 0)
        r = store_seterr(err, errlen, -errno, "checkpoint %s: rename %s: %s", chk, to,
                         strerror(errno));
    if (r != 0)
        unlink(to);
    f->hash = h;
    return r;
}

/* RocksDB's checkpoint hard-links the live database's table files, so a table file damaged in
 * place (a bad block, a stray write) would be damaged in every checkpoint as well, and none could
 * bring the state back. Each table file of the new checkpoint (in dir) that is still the live
 * file becomes the checkpoint's own: a link to the newest earlier checkpoint's copy of that same
 * live file (checkpoints share their copies with each other, never with the live store), else a
 * copy verified by hash. Its hash and the live file's identity go into the manifest. 0 or
 * -errno with err. */
static int detach_tables(const char *state_dir, const char *chk, const char *dir, dbfile_t *files,
                         size_t n, char *err, size_t errlen)
{
    cJSON *prev = NULL;
    char prev_path[PATH_MAX] = "";
    newest_manifest(state_dir, chk, &prev, prev_path);
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        char at[PATH_MAX];
        struct stat sb;
        if (!immutable_file(files[i].name) ||
            store_path_fmt(at, err, errlen, "%s/%s", dir, files[i].name) != 0 ||
            stat(at, &sb) != 0 || sb.st_nlink < 2)
            continue; /* RocksDB copied it (another file system): already its own */
        snprintf(files[i].src, sizeof files[i].src, "%llu:%llu:%lld", (unsigned long long)sb.st_dev,
                 (unsigned long long)sb.st_ino,
                 (long long)sb.st_mtim.tv_sec * 1000000000ll + sb.st_mtim.tv_nsec);
        if (reuse_copy(dir, &files[i], prev, prev_path))
            continue;
        r = copy_own(dir, &files[i], chk, err, errlen);
    }
    cJSON_Delete(prev);
    return r;
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
        if (files[i].src[0]) { /* a table file of its own (detach_tables) */
            char hx[20];
            snprintf(hx, sizeof hx, "%016" PRIx64, files[i].hash);
            cJSON_AddStringToObject(f, "hash", hx);
            cJSON_AddStringToObject(f, "src", files[i].src);
        }
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
        r = store_rocks_err(rerr, err, errlen, -EIO, what);
        store_rm_rf(tmp);
        return r;
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
    if ((r = detach_tables(st->state_dir, name, tmp, files, nfiles, err, errlen)) != 0)
        goto fail;
    text = manifest_build(st, name, epoch, config_hash, shards, files, nfiles, bytes, err, errlen);
    if (!text) {
        r = -ENOMEM;
        goto fail;
    }
    size_t tl = strlen(text);
    text[tl] = '\n'; /* cJSON_Print's NUL becomes a final newline */
    r = write_file_sync(mpath, text, tl + 1);
    if (r == 0)
        r = store_fsync_path(tmp, true);
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
    store_fsync_path(cpdir, true);
    if (replaced)
        store_rm_rf(old);
    free(files);
    free(text);
    return 0;
fail:
    free(files);
    free(text);
    store_rm_rf(tmp);
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

/* A table file's bytes against the hash its manifest entry f records (entries without one,
 * from before copies or copied by RocksDB itself, pass). 0, -EIO with err naming the file. */
static int check_hash(const char *path, const char *name, const cJSON *f, const char *file,
                      char *err, size_t errlen)
{
    const cJSON *hx = cJSON_GetObjectItemCaseSensitive(f, "hash");
    if (!cJSON_IsString(hx))
        return 0;
    char at[PATH_MAX];
    uint64_t h = 0;
    if (store_path_fmt(at, err, errlen, "%s/%s", path, file) != 0)
        return -ENAMETOOLONG;
    int r = file_hash(at, &h);
    if (r != 0)
        return store_seterr(err, errlen, r, "%s: reading %s: %s", name, at, strerror(-r));
    if (h != strtoull(hx->valuestring, NULL, 16))
        return store_seterr(
            err, errlen, -EIO,
            "%s: %s does not match the hash its manifest records (%s, now %016" PRIx64
            "): damaged since the checkpoint was taken",
            name, at, hx->valuestring, h);
    return 0;
}

/* The checkpoint's files against its manifest: each listed file present with its size (and its
 * hash, check_hash), no file that is not listed, the totals. 0 or -errno with the first problem. */
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
            if ((r = check_hash(path, name, f, fn->valuestring, err, errlen)) != 0)
                break;
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

/* Verifies the checkpoint at path (its manifest named `name`): its files and their hashes, then
 * the database read end to end with checksums; s->epoch from the manifest (need_epoch: a manifest
 * without one is refused, as an import must name the checkpoint by it). 0 or -errno with err. */
static int verify_at(const char *path, const char *name, bool need_epoch, nf_checkpoint_stats_t *s,
                     char *err, size_t errlen)
{
    int r = 0;
    cJSON *m = manifest_load(path, name, &r, err, errlen);
    if (!m)
        return r;
    if (!json_u64(m, "epoch", &s->epoch) && need_epoch)
        r = store_seterr(err, errlen, -EBADMSG, "%s: manifest.json lacks \"epoch\"", name);
    if (r == 0)
        r = check_files(path, name, m, s, err, errlen);
    if (r == 0)
        r = check_db(path, name, m, s, NULL, err, errlen);
    cJSON_Delete(m);
    return r;
}

int nf_checkpoint_verify_stats(const char *state_dir, const char *id, nf_checkpoint_stats_t *stats,
                               char *err, size_t errlen)
{
    char path[PATH_MAX], name[32];
    nf_checkpoint_stats_t s = {0};
    int r = resolve(state_dir, id, path, name, sizeof name, err, errlen);
    if (r == 0)
        r = verify_at(path, name, false, &s, err, errlen);
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

/* Table and blob files are immutable: a checkpoint shares them with other checkpoints
 * (detach_tables), never with the live database. */
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
        if (store_path_fmt(p, NULL, 0, "%s/%s", state_dir, names[i]) != 0 || store_rm_rf(p) != 0)
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
    store_rm_rf(tmp);
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
        /* Copied, never linked: the live database must not share a file with the checkpoint,
         * or damage to the one would be damage to the other. */
        if ((r = copy_file(src, dst)) != 0)
            store_seterr(err, errlen, r, "restore %s: copy %s to %s: %s", name, src, dst,
                         strerror(-r));
    }
    free(files);
    if (r == 0 && res->next_epoch - 1 > res->epoch)
        r = set_committed_epoch(tmp, res->next_epoch - 1, err, errlen);
    if (r == 0 && (r = store_fsync_path(tmp, true)) != 0)
        store_seterr(err, errlen, r, "restore %s: fsync %s: %s", name, tmp, strerror(-r));
    if (r != 0) {
        store_rm_rf(tmp);
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
        store_rm_rf(tmp);
        free(epochs);
        return -ENAMETOOLONG;
    }
    for (int i = 1; access(replaced, F_OK) == 0 && i < 1000; i++)
        if (store_path_fmt(replaced, err, errlen, "%s/" REPLACED_PREFIX "%s-epoch%s-%d", state_dir,
                           stamp, ep, i) != 0) {
            store_rm_rf(tmp);
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
            store_rm_rf(tmp);
            res->moved = false;
        } else if (rename(tmp, db) != 0) {
            r = store_seterr(err, errlen, -errno, "restore %s: rename %s to %s: %s", name, tmp, db,
                             strerror(errno));
            if (rename(replaced, db) == 0) { /* put the old one back */
                store_rm_rf(tmp);
                res->moved = false;
            }
        }
        if (r == 0)
            snprintf(res->replaced, sizeof res->replaced, "%s", replaced);
    } else if (rename(tmp, db) != 0) {
        r = store_seterr(err, errlen, -errno, "restore %s: rename %s to %s: %s", name, tmp, db,
                         strerror(errno));
        store_rm_rf(tmp);
        res->moved = false;
    }
    store_fsync_path(state_dir, true);
    if (r == 0) {
        write_last_restore(state_dir, res, epochs + first_newer, ne - first_newer, at);
        if (o->keep_replaced)
            prune_replaced(state_dir, o->keep_replaced, res);
    }
    free(epochs);
    return r;
}

/* ---------------------------------------------------------------------------------------------
 * export and import: a checkpoint copied whole to or from another directory (another volume) */

/* Copies the checkpoint directory from into to (a new directory): every database file copied,
 * read back and compared by hash, manifest.json last, everything synced. 0 or -errno with err;
 * on failure to is removed. */
static int copy_checkpoint(const char *from, const char *to, const char *name, char *err,
                           size_t errlen)
{
    dbfile_t *files = NULL;
    size_t n = 0;
    uint64_t bytes = 0;
    int r = list_db_files(from, &files, &n, &bytes);
    if (r != 0)
        return store_seterr(err, errlen, r, "%s: listing %s: %s", name, from, strerror(-r));
    if (mkdir(to, 0755) != 0) {
        r = store_seterr(err, errlen, -errno, "%s: cannot create %s: %s", name, to,
                         strerror(errno));
        free(files);
        return r;
    }
    for (size_t i = 0; i <= n && r == 0; i++) {
        const char *fn = i < n ? files[i].name : MANIFEST_NAME;
        char src[PATH_MAX], dst[PATH_MAX];
        uint64_t h = 0;
        if (store_path_fmt(src, err, errlen, "%s/%s", from, fn) != 0 ||
            store_path_fmt(dst, err, errlen, "%s/%s", to, fn) != 0) {
            r = -ENAMETOOLONG;
            break;
        }
        r = copy_verified(src, dst, &h);
        if (r == -EIO)
            store_seterr(err, errlen, r, "%s: the copy %s reads back differently from %s", name,
                         dst, src);
        else if (r != 0)
            store_seterr(err, errlen, r, "%s: copying %s to %s: %s", name, src, dst, strerror(-r));
    }
    free(files);
    if (r == 0 && (r = store_fsync_path(to, true)) != 0)
        store_seterr(err, errlen, r, "%s: fsync %s: %s", name, to, strerror(-r));
    if (r != 0)
        store_rm_rf(to);
    return r;
}

int nf_checkpoint_export(const char *state_dir, const char *id, const char *dest, char *out_path,
                         size_t out_len, char *err, size_t errlen)
{
    char path[PATH_MAX], name[32], to[PATH_MAX];
    int r = resolve(state_dir, id, path, name, sizeof name, err, errlen);
    if (r != 0)
        return r;
    nf_checkpoint_stats_t s = {0};
    if ((r = verify_at(path, name, true, &s, err, errlen)) != 0)
        return r;
    if ((r = store_mkdir_p(dest)) != 0)
        return store_seterr(err, errlen, r, "cannot create %s: %s", dest, strerror(-r));
    if (store_path_fmt(to, err, errlen, "%s/%s", dest, name) != 0)
        return -ENAMETOOLONG;
    if (access(to, F_OK) == 0)
        return store_seterr(err, errlen, -EEXIST,
                            "%s already exists: export into another directory, or remove it", to);
    if ((r = copy_checkpoint(path, to, name, err, errlen)) != 0)
        return r;
    store_fsync_path(dest, true);
    snprintf(out_path, out_len, "%s", to);
    return 0;
}

int nf_checkpoint_import(const char *state_dir, const char *src, char *id_out, size_t id_len,
                         char *err, size_t errlen)
{
    /* the directory's own name does not matter: the manifest's epoch names the checkpoint */
    const char *base = strrchr(src, '/');
    base = base && base[1] ? base + 1 : src;
    nf_checkpoint_stats_t s = {0};
    int r = verify_at(src, base, true, &s, err, errlen);
    if (r != 0)
        return r;
    uint64_t epoch = s.epoch;
    char name[32], cpdir[PATH_MAX], tmp[PATH_MAX], final[PATH_MAX];
    chk_name(name, sizeof name, epoch);
    if (store_path_fmt(cpdir, err, errlen, "%s/checkpoints", state_dir) != 0 ||
        store_path_fmt(tmp, err, errlen, "%s/" TMP_PREFIX "import-%s-%ld", cpdir, name,
                       (long)getpid()) != 0 ||
        store_path_fmt(final, err, errlen, "%s/%s", cpdir, name) != 0)
        return -ENAMETOOLONG;
    if ((r = store_mkdir_p(cpdir)) != 0)
        return store_seterr(err, errlen, r, "cannot create %s: %s", cpdir, strerror(-r));
    if (access(final, F_OK) == 0)
        return store_seterr(err, errlen, -EEXIST,
                            "%s already exists (a checkpoint of epoch %" PRIu64
                            " is there): delete it first (`newsflow checkpoints delete %s`) if "
                            "the imported one is to take its place",
                            final, epoch, name);
    store_rm_rf(tmp);
    if ((r = copy_checkpoint(src, tmp, name, err, errlen)) != 0)
        return r;
    if (rename(tmp, final) != 0) {
        r = store_seterr(err, errlen, -errno, "rename %s to %s: %s", tmp, final, strerror(errno));
        store_rm_rf(tmp);
        return r;
    }
    store_fsync_path(cpdir, true);
    snprintf(id_out, id_len, "%s", name);
    return 0;
}
