/* store_body.c — the pending record's body in a file of its own (issue 42).
 *
 * An epoch's pending record (store_pending.c) holds the epoch's state batches and its outputs
 * until the epoch is committed and applied: a second or so. Written into RocksDB as values, they
 * went through the WAL, the memtable and, as an epoch's record is about the size of a memtable,
 * usually a flush and a compaction too, although the next epoch deletes them. They now go into
 * one file, written and synced before the record, which names it:
 *
 *   "pending/body"  [size: u64le][name length: u16le][file name in the database directory]
 *   the file        "NFBODY01" | epoch u64le | nbatches u32le | noutputs u32le |
 *                   (nbatches + noutputs) x [length: u64le][nf_hash64: u64le] |
 *                   the parts one after the other
 *
 * The batches are RocksDB WriteBatch data as before (absent from the file when the record names
 * table files: its one batch stays in the record). A record with a body has BODY_FLAG in its
 * header's batch count and no "pending/batch/" or "pending/out/" keys: a build from before
 * finds output 0 missing and refuses the record before it produces anything.
 *
 * The file stays until the next pending record is written (synced: the committed mark before
 * it is then durable too), a discard, or the sweep at the next open; a record whose file is
 * missing, of another size, malformed or damaged (a part's hash) is refused by name with nothing
 * produced or applied. */
#include "algo/bytes.h"
#include "algo/hash.h"
#include "state/store.h"
#include "state/store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <rocksdb/c.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define BODY_MAGIC "NFBODY01"
#define BODY_HEAD  24 /* magic, epoch, nbatches, noutputs */
#define BODY_ENTRY 16 /* a part's length and hash */
#define BODY_SEED  0x6e66626f6479ull

static atomic_uint body_seq;

void store_body_free(store_body_t *b, bool remove)
{
    if (!b)
        return;
    if (remove && b->path)
        unlink(b->path);
    free(b->path);
    for (unsigned i = 0; i < b->nparts; i++)
        free((void *)b->parts[i].data);
    free(b->parts);
    memset(b, 0, sizeof *b);
}

static int write_all(int fd, struct iovec *iov, int n)
{
    while (n > 0) {
        ssize_t w = writev(fd, iov, n > IOV_MAX ? IOV_MAX : n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

/* The file's contents: its head, the lengths, the parts. */
static int write_body(int fd, uint64_t epoch, const nf_blob_t *parts, unsigned nb, unsigned no)
{
    unsigned n = nb + no;
    size_t hl = BODY_HEAD + BODY_ENTRY * (size_t)n;
    unsigned char *h = malloc(hl);
    struct iovec *iov = calloc((size_t)n + 1, sizeof *iov);
    int r = -ENOMEM;
    if (h && iov) {
        memcpy(h, BODY_MAGIC, 8);
        nf_put_le64(h + 8, epoch);
        nf_put_le32(h + 16, nb);
        nf_put_le32(h + 20, no);
        iov[0] = (struct iovec){h, hl};
        for (unsigned i = 0; i < n; i++) {
            unsigned char *en = h + BODY_HEAD + BODY_ENTRY * (size_t)i;
            nf_put_le64(en, parts[i].len);
            nf_put_le64(en + 8, nf_hash64(parts[i].data, parts[i].len, BODY_SEED));
            iov[i + 1] = (struct iovec){(void *)parts[i].data, parts[i].len};
        }
        r = write_all(fd, iov, (int)n + 1);
    }
    free(h);
    free(iov);
    return r;
}

int store_body_write(nf_store_t *st, uint64_t epoch, const nf_blob_t *parts, unsigned nb,
                     unsigned no, store_body_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    char path[PATH_MAX];
    int r = store_path_fmt(path, err, errlen, "%s/" STORE_PENDING_FILE "%" PRIu64 "-%ld-%u.body",
                           st->db_dir, epoch, (long)getpid(), atomic_fetch_add(&body_seq, 1));
    if (r != 0)
        return r;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        r = -errno;
    if (r == 0 && (r = write_body(fd, epoch, parts, nb, no)) == 0 && fdatasync(fd) != 0)
        r = -errno;
    struct stat sb;
    if (r == 0 && fstat(fd, &sb) != 0)
        r = -errno;
    if (fd >= 0 && close(fd) != 0 && r == 0)
        r = -errno;
    if (r == 0)
        r = store_fsync_path(st->db_dir, true);
    if (r == 0 && !(out->path = strdup(path)))
        r = -ENOMEM;
    if (r != 0) {
        if (fd >= 0)
            unlink(path);
        return store_seterr(err, errlen, r,
                            "writing the body of epoch %" PRIu64 "'s pending "
                            "record to %s: %s",
                            epoch, path, strerror(-r));
    }
    out->size = (uint64_t)sb.st_size;
    out->nbatches = nb;
    out->noutputs = no;
    return 0;
}

/* The "pending/body" value for b (malloc'd, *len). NULL: out of memory. */
unsigned char *store_body_value(const store_body_t *b, size_t *len)
{
    const char *name = strrchr(b->path, '/');
    name = name ? name + 1 : b->path;
    size_t nl = strlen(name);
    unsigned char *v = malloc(10 + nl);
    if (!v)
        return NULL;
    nf_put_le64(v, b->size);
    v[8] = (unsigned char)(nl & 0xff);
    v[9] = (unsigned char)(nl >> 8);
    memcpy(v + 10, name, nl);
    *len = 10 + nl;
    return v;
}

static int lost(nf_store_t *st, uint64_t epoch, const char *path, uint64_t size, const char *how,
                char *err, size_t errlen)
{
    return store_seterr(err, errlen, -EIO,
                        "%s: pending record of epoch %" PRIu64 " names body file %s (%" PRIu64
                        " bytes), which %s: the state directory lost a file this epoch needs; "
                        "nothing produced or applied. Restore the changelog or a named checkpoint "
                        "(docs/runbooks.md \"Corrupt live store\")",
                        st->db_dir, epoch, path, size, how);
}

/* The file the record names, checked there (b->path, b->size). */
static int body_name(nf_store_t *st, const store_pending_head_t *h, store_body_t *b, char *err,
                     size_t errlen)
{
    void *v = NULL;
    size_t len = 0;
    int r = store_get_raw(st, st->def, STORE_PENDING_BODY, strlen(STORE_PENDING_BODY), &v, &len,
                          err, errlen);
    if (r < 0)
        return r;
    const unsigned char *p = v;
    size_t nl = r > 0 && len >= 10 ? (size_t)p[8] | (size_t)p[9] << 8 : 0;
    char path[PATH_MAX];
    if (nl == 0 || len != 10 + nl)
        r = store_seterr(err, errlen, -EIO,
                         "%s: pending record of epoch %" PRIu64 " lacks its body file's name",
                         st->db_dir, h->epoch);
    else
        r = store_path_fmt(path, err, errlen, "%s/%.*s", st->db_dir, (int)nl, (const char *)p + 10);
    b->size = r == 0 ? nf_get_le64(p) : 0;
    free(v);
    if (r != 0)
        return r;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return lost(st, h->epoch, path, b->size, "is missing", err, errlen);
    if ((uint64_t)sb.st_size != b->size)
        return lost(st, h->epoch, path, b->size, "has another size", err, errlen);
    return (b->path = strdup(path)) ? 0 : store_seterr(err, errlen, -ENOMEM, "out of memory");
}

/* The file's lengths and hashes (malloc'd into *ents, two per part), checked against the head
 * and the record. */
static int body_entries(nf_store_t *st, const store_pending_head_t *h, store_body_t *b, int fd,
                        uint64_t **ents, char *err, size_t errlen)
{
    unsigned char head[BODY_HEAD];
    unsigned n = 0;
    bool ok = pread(fd, head, sizeof head, 0) == (ssize_t)sizeof head &&
              !memcmp(head, BODY_MAGIC, 8) && nf_get_le64(head + 8) == h->epoch &&
              nf_get_le32(head + 20) == h->noutputs &&
              nf_get_le32(head + 16) == (h->tables ? 0 : h->nbatches) &&
              (n = nf_get_le32(head + 16) + h->noutputs) < 1u << 20;
    size_t el = BODY_ENTRY * (size_t)n;
    unsigned char *raw = ok ? malloc(el + 1) : NULL;
    *ents = ok ? calloc(2 * (size_t)n + 1, sizeof **ents) : NULL;
    ok = ok && raw && *ents && pread(fd, raw, el, BODY_HEAD) == (ssize_t)el;
    uint64_t total = BODY_HEAD + el;
    for (unsigned i = 0; ok && i < n; i++) {
        uint64_t len = nf_get_le64(raw + BODY_ENTRY * (size_t)i);
        (*ents)[2 * i] = len;
        (*ents)[2 * i + 1] = nf_get_le64(raw + BODY_ENTRY * (size_t)i + 8);
        ok = len <= b->size && total <= b->size - len;
        total += ok ? len : 0;
    }
    free(raw);
    if (ok && total == b->size) {
        b->nbatches = n - h->noutputs;
        b->noutputs = h->noutputs;
        return 0;
    }
    free(*ents);
    *ents = NULL;
    return lost(st, h->epoch, b->path, b->size, "is malformed", err, errlen);
}

/* Parts [from, to) of the file into b->parts (each malloc'd; b->nparts set), each checked
 * against its hash: 0, -EBADMSG (damaged) or -errno. */
static int body_parts(store_body_t *b, int fd, const uint64_t *ents, unsigned from, unsigned to)
{
    off_t off = BODY_HEAD + BODY_ENTRY * (off_t)(b->nbatches + b->noutputs);
    for (unsigned i = 0; i < from; i++)
        off += (off_t)ents[2 * i];
    if (!(b->parts = calloc((size_t)(to - from) + 1, sizeof *b->parts)))
        return -ENOMEM;
    for (unsigned i = from; i < to; i++) {
        size_t len = ents[2 * i];
        void *d = malloc(len ? len : 1);
        if (!d)
            return -ENOMEM;
        b->parts[b->nparts++] = (nf_blob_t){d, len};
        for (size_t done = 0; done < len;) {
            ssize_t got = pread(fd, (char *)d + done, len - done, off + (off_t)done);
            if (got <= 0)
                return got < 0 ? -errno : -EIO;
            done += (size_t)got;
        }
        if (nf_hash64(d, len, BODY_SEED) != ents[2 * i + 1])
            return -EBADMSG;
        off += (off_t)len;
    }
    return 0;
}

int store_body_load(nf_store_t *st, const store_pending_head_t *h, bool outputs, store_body_t *b,
                    char *err, size_t errlen)
{
    memset(b, 0, sizeof *b);
    int r = body_name(st, h, b, err, errlen);
    int fd = r == 0 ? open(b->path, O_RDONLY | O_CLOEXEC) : -1;
    if (r == 0 && fd < 0)
        r = store_seterr(err, errlen, -errno, "opening %s: %s", b->path, strerror(errno));
    uint64_t *ents = NULL;
    if (r == 0)
        r = body_entries(st, h, b, fd, &ents, err, errlen);
    if (r == 0) {
        unsigned from = outputs ? b->nbatches : 0;
        unsigned to = outputs ? b->nbatches + b->noutputs : b->nbatches;
        if ((r = body_parts(b, fd, ents, from, to)) == -EBADMSG)
            r = lost(st, h->epoch, b->path, b->size, "is damaged (a part's hash differs)", err,
                     errlen);
        else if (r != 0)
            store_seterr(err, errlen, r, "reading %s: %s", b->path, strerror(-r));
    }
    free(ents);
    if (fd >= 0)
        close(fd);
    if (r != 0)
        store_body_free(b, false);
    return r;
}

int store_body_named(nf_store_t *st, const store_pending_head_t *h, char **path)
{
    store_body_t b;
    memset(&b, 0, sizeof b);
    char err[256];
    int r = body_name(st, h, &b, err, sizeof err);
    *path = b.path;
    return r;
}
