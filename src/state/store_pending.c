/* store_pending.c — the epoch protocol's records in the store's "default" family (store.h,
 * "the epoch protocol"):
 *       "committed"            u64le epoch | header JSON
 *       "pending/header"       u64le epoch | u32le nbatches | u32le noutputs | header JSON
 *       "pending/batch/%08u"   RocksDB WriteBatch data (rocksdb_writebatch_data)
 *       "pending/out/%08u"     an opaque output blob
 *       "pending/tables"       u32le n | n x [kind: u8][records: u64le][bytes: u64le]
 *                              [name length: u16le][file name in the database directory]
 *       "pending/body"         the file holding the batches and outputs (store_body.c)
 * A record this build writes has a body (BODY_FLAG in the header's batch count) and none of the
 * "pending/batch/" and "pending/out/" keys, which it still reads in a record from before.
 * The pending keys all sort inside ["pending/", "pending0"), so one range delete in the same
 * write removes whatever an earlier pending record left, whatever its counts were.
 *
 * State written once (issue 42). When a kind of the epoch comes to st->ingest_min bytes, the
 * epoch's state is sorted and its large kinds written as table files BEFORE the record
 * (synced, under names of their own: PENDING_TABLE); the record then holds one batch (the other
 * kinds, in key order) and names the files, instead of a copy of every record: the state goes
 * to disk once, not into the WAL and the memtable first. Its header's batch count then carries
 * TABLES_FLAG and the batch is under a key of its own (PENDING_TBATCH): a build from before reads
 * 2^31 batches, finds the first ("pending/batch/00000000") missing and refuses the record
 * ("lacks batch 0") with nothing applied. The apply ingests a copy of each file
 * (copy_table: RocksDB changes what it ingests), writes the committed mark synced, then removes
 * the files; a restart in between ingests them again (the same keys and values: idempotent). A file
 * the record names that is missing or has another size is refused by name: nothing is
 * applied. Files no pending record names are removed at open (store_pending_sweep). */
#include "algo/bytes.h"
#include "state/store.h"
#include "state/store_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/fs.h>
#include <malloc.h>
#include <rocksdb/c.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define PENDING_LO     "pending/"
#define PENDING_HI     "pending0" /* '0' follows '/': the end of the "pending/" prefix */
#define PENDING_HEADER "pending/header"
#define PENDING_TABLES "pending/tables"
#define PENDING_TBATCH "pending/tables/batch" /* the other kinds' batch of such a record */
#define PENDING_TABLE  STORE_PENDING_FILE     /* + "<epoch>-<pid>-<n>.sst" */
#define TABLES_FLAG    0x80000000u            /* in the header's batch count: see the top */
#define BODY_FLAG      0x40000000u            /* the same: store_body.c */

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
    store_perf_off();
    rocksdb_write(st->db, sync ? st->wo_sync : st->wo, wb, &rerr);
    if (rerr) {
        char msg[PATH_MAX + 128];
        snprintf(msg, sizeof msg, "%s in %s", what, st->db_dir);
        return store_rocks_err(rerr, err, errlen, -EIO, msg);
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * the pending record's table files (see the top) */

/* Frees a prepared apply. remove: its files too (no pending record names them, or the epoch is
 * marked committed); else they stay for the record's apply after a restart. */
static void prep_free(store_apply_t *a, bool remove)
{
    if (!a)
        return;
    for (unsigned i = 0; !remove && i < a->nfiles; i++) {
        free(a->paths[i]);
        a->paths[i] = NULL;
    }
    if (!remove)
        a->nfiles = 0;
    store_apply_free(a);
    free(a);
}

static atomic_uint pending_seq;

/* The file at a->paths[i] renamed to its pending name, synced, its size noted. */
static int keep_table(nf_store_t *st, store_apply_t *a, unsigned i, uint64_t epoch, char *err,
                      size_t errlen)
{
    char path[PATH_MAX];
    int r = store_path_fmt(path, err, errlen, "%s/" PENDING_TABLE "%" PRIu64 "-%ld-%u.sst",
                           st->db_dir, epoch, (long)getpid(), atomic_fetch_add(&pending_seq, 1));
    if (r != 0)
        return r;
    struct stat sb;
    char *dup = strdup(path);
    if (!dup)
        return store_seterr(err, errlen, -ENOMEM, "out of memory");
    if (rename(a->paths[i], path) != 0) {
        r = -errno;
        free(dup);
    } else {
        free(a->paths[i]);
        a->paths[i] = dup; /* removed under its new name if what follows fails */
        if ((r = store_fsync_path(path, false)) == 0 && stat(path, &sb) != 0)
            r = -errno;
    }
    if (r != 0)
        return store_seterr(err, errlen, r, "keeping table file %s of epoch %" PRIu64 ": %s", path,
                            epoch, strerror(-r));
    a->sizes[i] = (uint64_t)sb.st_size;
    return 0;
}

/* The epoch's state sorted: its large kinds as table files under their pending names, synced
 * (and the directory), the others in (*out)->wb. */
static int prepare_tables(nf_store_t *st, uint64_t epoch, nf_store_batch_t *const *batches,
                          unsigned n, store_apply_t **out, char *err, size_t errlen)
{
    store_apply_t *a = calloc(1, sizeof *a);
    if (!a)
        return store_seterr(err, errlen, -ENOMEM, "out of memory");
    int r = store_apply_prepare(st, batches, n, a, err, errlen);
    for (unsigned i = 0; r == 0 && i < a->nfiles; i++)
        r = keep_table(st, a, i, epoch, err, errlen);
    if (r == 0 && (r = store_fsync_path(st->db_dir, true)) != 0)
        store_seterr(err, errlen, r, "syncing %s: %s", st->db_dir, strerror(-r));
    if (r != 0) {
        prep_free(a, true);
        return r;
    }
    *out = a;
    return 0;
}

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

/* The "pending/tables" value of a (malloc'd, *len). NULL: out of memory. */
static unsigned char *tables_value(const store_apply_t *a, size_t *len)
{
    size_t n = 4;
    for (unsigned i = 0; i < a->nfiles; i++)
        n += 1 + 8 + 8 + 2 + strlen(base_name(a->paths[i]));
    unsigned char *v = malloc(n), *p = v;
    if (!v)
        return NULL;
    nf_put_le32(p, a->nfiles);
    p += 4;
    for (unsigned i = 0; i < a->nfiles; i++) {
        const char *name = base_name(a->paths[i]);
        size_t nl = strlen(name);
        *p++ = (unsigned char)a->kinds[i];
        nf_put_le64(p, a->records[i]);
        nf_put_le64(p + 8, a->sizes[i]);
        p[16] = (unsigned char)(nl & 0xff);
        p[17] = (unsigned char)(nl >> 8);
        memcpy(p + 18, name, nl);
        p += 18 + nl;
    }
    *len = n;
    return v;
}

/* The record's batch (the kinds below the threshold, when there are any) and its file list. */
static int put_tables(nf_store_t *st, const store_apply_t *a, rocksdb_writebatch_t *wb,
                      unsigned *nb, char *err, size_t errlen)
{
    if (rocksdb_writebatch_count(a->wb) > 0) {
        size_t dlen = 0;
        const char *data = rocksdb_writebatch_data(a->wb, &dlen);
        rocksdb_writebatch_put_cf(wb, st->def, PENDING_TBATCH, strlen(PENDING_TBATCH), data, dlen);
        (*nb)++;
    }
    size_t tl = 0;
    unsigned char *tv = tables_value(a, &tl);
    if (!tv)
        return store_seterr(err, errlen, -ENOMEM, "out of memory");
    rocksdb_writebatch_put_cf(wb, st->def, PENDING_TABLES, strlen(PENDING_TABLES), (const char *)tv,
                              tl);
    free(tv);
    return 0;
}

/* The parts of the record's body: the epoch's state as one WriteBatch in key order (none when
 * the record names table files, or there is no state), then the outputs. parts has room for
 * 1 + noutputs; sorted holds the batch they point into (freed by the caller). */
static int body_parts(nf_store_t *st, nf_store_batch_t *const *batches, unsigned nbatches,
                      const nf_blob_t *outputs, unsigned noutputs, nf_blob_t *parts,
                      store_apply_t *sorted, unsigned *nb, char *err, size_t errlen)
{
    *nb = 0;
    if (nbatches) {
        int r = store_apply_sort(st, batches, nbatches, false, sorted, err, errlen);
        if (r != 0)
            return r;
        size_t dlen = 0;
        const char *data = rocksdb_writebatch_data(sorted->wb, &dlen);
        if (rocksdb_writebatch_count(sorted->wb) > 0)
            parts[(*nb)++] = (nf_blob_t){data, dlen};
    }
    for (unsigned i = 0; i < noutputs; i++)
        parts[*nb + i] = outputs[i];
    return 0;
}

/* The record: the earlier one deleted, then the table list (a), the body file's name, the header,
 * in one synced write. */
static int write_record(nf_store_t *st, uint64_t epoch, const char *header_json,
                        const store_apply_t *a, const store_body_t *body, char *err, size_t errlen)
{
    rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
    /* Whatever an earlier pending record holds goes first, in the same atomic write. */
    rocksdb_writebatch_delete_range_cf(wb, st->def, PENDING_LO, strlen(PENDING_LO), PENDING_HI,
                                       strlen(PENDING_HI));
    unsigned nb = body->nbatches;
    int r = a ? put_tables(st, a, wb, &nb, err, errlen) : 0;
    size_t hlen = strlen(header_json), bl = 0;
    unsigned char *hv = malloc(16 + hlen), *bv = store_body_value(body, &bl);
    if (r == 0 && (!hv || !bv))
        r = store_seterr(err, errlen, -ENOMEM, "pending record of epoch %" PRIu64 ": out of memory",
                         epoch);
    if (r == 0) {
        rocksdb_writebatch_put_cf(wb, st->def, STORE_PENDING_BODY, strlen(STORE_PENDING_BODY),
                                  (const char *)bv, bl);
        nf_put_le64(hv, epoch);
        nf_put_le32(hv + 8, nb | BODY_FLAG | (a ? TABLES_FLAG : 0));
        nf_put_le32(hv + 12, body->noutputs);
        memcpy(hv + 16, header_json, hlen);
        rocksdb_writebatch_put_cf(wb, st->def, PENDING_HEADER, strlen(PENDING_HEADER),
                                  (const char *)hv, 16 + hlen);
        char what[96];
        snprintf(what, sizeof what, "writing the pending record of epoch %" PRIu64, epoch);
        r = write_batch(st, wb, true, what, err, errlen);
    }
    free(hv);
    free(bv);
    rocksdb_writebatch_destroy(wb);
    return r;
}

int nf_store_pending_write(nf_store_t *st, uint64_t epoch, const char *header_json,
                           nf_store_batch_t *const *batches, unsigned nbatches,
                           const nf_blob_t *outputs, unsigned noutputs, char *err, size_t errlen)
{
    if (st->read_only)
        return store_seterr(err, errlen, -EROFS, "%s is open read-only", st->db_dir);
    if (!header_json)
        header_json = "";
    store_apply_t *a = NULL; /* the epoch's table files, if any kind is large */
    store_body_t body;
    memset(&body, 0, sizeof body);
    unsigned nb_given = nbatches, nb = 0;
    nf_blob_t *parts = calloc((size_t)noutputs + 1, sizeof *parts);
    store_apply_t sorted;
    memset(&sorted, 0, sizeof sorted);
    int r = 0;
    if (!parts) {
        r = store_seterr(err, errlen, -ENOMEM, "pending record of epoch %" PRIu64 ": out of memory",
                         epoch);
        goto out;
    }
    if (batches && st->ingest_min && nf_store_batches_ingest(st, batches, nbatches)) {
        if ((r = prepare_tables(st, epoch, batches, nbatches, &a, err, errlen)) != 0)
            goto out;
        nbatches = 0; /* the record's batch and files hold them */
    }
    if ((r = body_parts(st, batches, batches ? nbatches : 0, outputs, noutputs, parts, &sorted, &nb,
                        err, errlen)) != 0 ||
        (r = store_body_write(st, epoch, parts, nb, noutputs, &body, err, errlen)) != 0)
        goto out;
    r = write_record(st, epoch, header_json, a, &body, err, errlen);
    if (r != 0) { /* the record may have reached the disk all the same: its files stay (the
                   * sweep at the next open removes them if no record names them) */
        prep_free(a, false);
        a = NULL;
        store_body_free(&body, false);
    }
    if (r == 0) {
        store_track_pending(st, epoch, batches, nb_given);
        prep_free(st->prep, true); /* an earlier record's files, never applied: named no more */
        st->prep = a;
        st->prep_epoch = epoch;
        a = NULL;
        /* The earlier record's body: named no more, and its epoch's committed mark (if it was
         * applied) is durable now, this write being synced. */
        if (st->body_path)
            unlink(st->body_path);
        free(st->body_path);
        st->body_path = body.path;
        body.path = NULL;
    }
out:
    prep_free(a, true);           /* no record names them */
    store_body_free(&body, true); /* likewise */
    store_apply_free(&sorted);
    free(parts);
    return r;
}

/* 1 (found), 0, or -errno. */
int store_pending_head_read(nf_store_t *st, store_pending_head_t *h, char *err, size_t errlen)
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
    h->tables = (h->nbatches & TABLES_FLAG) != 0;
    h->body = (h->nbatches & BODY_FLAG) != 0;
    h->nbatches &= ~(TABLES_FLAG | BODY_FLAG);
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

static int load_tables(nf_store_t *st, const store_pending_head_t *h, store_apply_t **out,
                       char *err, size_t errlen);

/* The outputs of a record with a body file, into out (which then owns them). 1 or -errno. */
static int outputs_of_body(nf_store_t *st, const store_pending_head_t *h, nf_store_pending_t *out,
                           char *err, size_t errlen)
{
    store_body_t b;
    int r = store_body_load(st, h, true, &b, err, errlen);
    if (r != 0) {
        nf_store_pending_free(out);
        return r;
    }
    out->outputs = b.parts;
    out->noutputs = b.nparts;
    b.parts = NULL;
    b.nparts = 0;
    store_body_free(&b, false);
    return 1;
}

int nf_store_pending_read(nf_store_t *st, nf_store_pending_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    store_pending_head_t h;
    int r = store_pending_head_read(st, &h, err, errlen);
    if (r <= 0)
        return r;
    if (h.tables) { /* its files are there, or nothing of it goes to Kafka either */
        store_apply_t *a = NULL;
        if ((r = load_tables(st, &h, &a, err, errlen)) != 0) {
            free(h.json);
            return r;
        }
        prep_free(a, false);
    }
    out->epoch = h.epoch;
    out->header_json = h.json;
    if (h.body)
        return outputs_of_body(st, &h, out, err, errlen);
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

/* The epoch's buffers (its state batches and outputs, copied into this record, RocksDB's
 * batches, Kafka's queue) are free once it is applied, but the allocator keeps their pages:
 * malloc_trim gives them back (issue 36: 678 MB of RSS left after a burst of 50,000 articles in
 * one epoch, 331 MB with it). About a millisecond after an epoch of a few MB; 0.3 s after that
 * burst's, the arenas' locks held meanwhile. */
static void give_back(void)
{
    malloc_trim(0);
}

/* Each shard's batch as the pending record holds it: absolute puts and deletes, so replaying
 * after a crash half-way through is harmless. Not synced: the WAL keeps order, so if the final
 * write (mark_committed) survives a crash these do too, and if it does not, the pending record is
 * still there to be applied again. */
static int apply_body(nf_store_t *st, const store_pending_head_t *h, char *err, size_t errlen)
{
    store_body_t b;
    int r = store_body_load(st, h, false, &b, err, errlen);
    for (unsigned i = 0; r == 0 && i < b.nparts; i++) {
        char what[96];
        snprintf(what, sizeof what, "applying pending batch %u of epoch %" PRIu64, i, h->epoch);
        rocksdb_writebatch_t *wb = rocksdb_writebatch_create_from(b.parts[i].data, b.parts[i].len);
        r = write_batch(st, wb, false, what, err, errlen);
        rocksdb_writebatch_destroy(wb);
    }
    store_body_free(&b, false);
    return r;
}

static int apply_blobs(nf_store_t *st, const store_pending_head_t *h, char *err, size_t errlen)
{
    if (h->body)
        return apply_body(st, h, err, errlen);
    int r = 0;
    for (unsigned i = 0; i < h->nbatches && r >= 0; i++) {
        char key[64], what[96];
        key_batch(key, sizeof key, i);
        char *rerr = NULL;
        rocksdb_pinnableslice_t *ps =
            rocksdb_get_pinned_cf(st->db, st->ro, st->def, key, strlen(key), &rerr);
        if (rerr) {
            snprintf(what, sizeof what, "reading pending batch %u of epoch %" PRIu64, i, h->epoch);
            return store_rocks_err(rerr, err, errlen, -EIO, what);
        }
        if (!ps)
            return store_seterr(err, errlen, -EIO,
                                "%s: pending record of epoch %" PRIu64 " lacks batch %u of %u",
                                st->db_dir, h->epoch, i, (unsigned)h->nbatches);
        size_t len = 0;
        const char *data = rocksdb_pinnableslice_value(ps, &len);
        rocksdb_writebatch_t *wb = rocksdb_writebatch_create_from(data, len);
        rocksdb_pinnableslice_destroy(ps);
        snprintf(what, sizeof what, "applying pending batch %u of epoch %" PRIu64, i, h->epoch);
        r = write_batch(st, wb, false, what, err, errlen);
        rocksdb_writebatch_destroy(wb);
    }
    return r;
}

/* "committed" <- the pending header, and the pending record gone, in one write: unsynced, but
 * synced when the record names table files (they are removed right after it). */
static int mark_committed(nf_store_t *st, const store_pending_head_t *h, char *err, size_t errlen)
{
    size_t jl = strlen(h->json);
    unsigned char *cv = malloc(8 + jl);
    if (!cv)
        return store_seterr(err, errlen, -ENOMEM, "applying the pending record: out of memory");
    nf_put_le64(cv, h->epoch);
    memcpy(cv + 8, h->json, jl);
    rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
    rocksdb_writebatch_put_cf(wb, st->def, COMMITTED_KEY, strlen(COMMITTED_KEY), (const char *)cv,
                              8 + jl);
    rocksdb_writebatch_delete_range_cf(wb, st->def, PENDING_LO, strlen(PENDING_LO), PENDING_HI,
                                       strlen(PENDING_HI));
    char what[96];
    snprintf(what, sizeof what, "marking epoch %" PRIu64 " committed", h->epoch);
    int r = write_batch(st, wb, h->tables, what, err, errlen);
    rocksdb_writebatch_destroy(wb);
    free(cv);
    return r;
}

/* The record's batch, read back into a->wb (a restart: the batch in hand is gone). */
static int load_batch(nf_store_t *st, const store_pending_head_t *h, store_apply_t *a, char *err,
                      size_t errlen)
{
    if (h->nbatches == 0)
        return (a->wb = rocksdb_writebatch_create()) ? 0 : -ENOMEM;
    char *rerr = NULL;
    rocksdb_pinnableslice_t *ps = rocksdb_get_pinned_cf(st->db, st->ro, st->def, PENDING_TBATCH,
                                                        strlen(PENDING_TBATCH), &rerr);
    if (rerr)
        return store_rocks_err(rerr, err, errlen, -EIO, "reading the pending record's batch");
    if (!ps)
        return store_seterr(err, errlen, -EIO,
                            "%s: pending record of epoch %" PRIu64 " lacks its batch", st->db_dir,
                            h->epoch);
    size_t len = 0;
    const char *data = rocksdb_pinnableslice_value(ps, &len);
    a->wb = rocksdb_writebatch_create_from(data, len);
    rocksdb_pinnableslice_destroy(ps);
    return 0;
}

/* File i of the record's list at p (n bytes left) into a: its kind known here, the file there
 * with the size recorded. Returns the bytes read, or -errno with err. */
static long load_table(nf_store_t *st, const store_pending_head_t *h, const unsigned char *p,
                       size_t n, store_apply_t *a, char *err, size_t errlen)
{
    size_t nl = n >= 19 ? (size_t)p[17] | (size_t)p[18] << 8 : 0;
    if (n < 19 || n - 19 < nl || nl == 0 || a->nfiles == NF_KIND__COUNT)
        return store_seterr(err, errlen, -EIO,
                            "%s: pending record of epoch %" PRIu64 ": its file list is malformed",
                            st->db_dir, h->epoch);
    unsigned kind = p[0];
    uint64_t size = nf_get_le64(p + 9);
    char path[PATH_MAX];
    int r = store_path_fmt(path, err, errlen, "%s/%.*s", st->db_dir, (int)nl, (const char *)p + 19);
    if (r != 0)
        return r;
    if (kind >= NF_KIND__COUNT || !st->kinds[kind])
        return store_seterr(err, errlen, -EIO,
                            "%s: pending record of epoch %" PRIu64 " names table file %s of "
                            "unknown kind %u",
                            st->db_dir, h->epoch, path, kind);
    struct stat sb;
    int missing = stat(path, &sb) != 0;
    if (missing || (uint64_t)sb.st_size != size)
        return store_seterr(
            err, errlen, -EIO,
            "%s: pending record of epoch %" PRIu64 " names table file %s (%" PRIu64 " bytes of "
            "%s), which %s: the state directory lost a file this epoch needs; nothing applied. "
            "Restore the changelog or a named checkpoint (docs/runbooks.md \"Corrupt live "
            "store\")",
            st->db_dir, h->epoch, path, size, nf_state_kind_name((nf_state_kind_t)kind),
            missing ? "is missing" : "has another size");
    if (!(a->paths[a->nfiles] = strdup(path)))
        return store_seterr(err, errlen, -ENOMEM, "out of memory");
    a->kinds[a->nfiles] = (int)kind;
    a->records[a->nfiles] = nf_get_le64(p + 1);
    a->sizes[a->nfiles] = size;
    a->ingested += a->records[a->nfiles++];
    return (long)(19 + nl);
}

/* The record's file list into a (*a allocated), each file checked there; not its batch
 * (load_batch: only the apply needs it). */
static int load_tables(nf_store_t *st, const store_pending_head_t *h, store_apply_t **out,
                       char *err, size_t errlen)
{
    store_apply_t *a = calloc(1, sizeof *a);
    if (!a)
        return store_seterr(err, errlen, -ENOMEM, "out of memory");
    void *v = NULL;
    size_t len = 0;
    int r =
        store_get_raw(st, st->def, PENDING_TABLES, strlen(PENDING_TABLES), &v, &len, err, errlen);
    if (r == 0 || (r > 0 && len < 4))
        r = store_seterr(err, errlen, -EIO,
                         "%s: pending record of epoch %" PRIu64 " lacks its file list", st->db_dir,
                         h->epoch);
    const unsigned char *p = v;
    size_t off = 4;
    for (uint32_t i = 0, n = r > 0 ? nf_get_le32(p) : 0; r > 0 && i < n; i++) {
        long got = load_table(st, h, p + off, len - off, a, err, errlen);
        r = got < 0 ? (int)got : r;
        off += got > 0 ? (size_t)got : 0;
    }
    free(v);
    if (r < 0) {
        prep_free(a, false);
        return r;
    }
    *out = a;
    return 0;
}

/* size bytes of in to out: copy_file_range, or read and write where the file system or the
 * kernel has no copy_file_range. 0 or -errno. */
static int copy_bytes(int in, int out, off_t size)
{
    bool plain = false;
    static _Thread_local char buf[1 << 16];
    for (off_t done = 0; done < size;) {
        ssize_t n = -1;
        if (!plain) {
            n = copy_file_range(in, NULL, out, NULL, (size_t)(size - done), 0);
            if (n < 0 && done == 0 &&
                (errno == ENOSYS || errno == EOPNOTSUPP || errno == EXDEV || errno == EINVAL)) {
                plain = true;
                continue;
            }
        } else if ((n = pread(in, buf, sizeof buf, done)) > 0) {
            ssize_t w = write(out, buf, (size_t)n);
            if (w != n)
                return w < 0 ? -errno : -EIO;
        }
        if (n <= 0)
            return n == 0 ? -EIO : -errno;
        done += n;
    }
    return 0;
}

/* A copy of src at dst (new): a reflink where the file system has them, else copy_file_range
 * (in the kernel, from the page cache the file was just written through). Not a hard link:
 * RocksDB writes the ingested file's global sequence number into it, and a file so changed
 * cannot be ingested again (a restart between the ingest and the committed mark must). */
static int copy_table(const char *src, const char *dst, char *err, size_t errlen)
{
    int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, r = 0;
    struct stat sb;
    if (in < 0 || fstat(in, &sb) != 0 ||
        (out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0)
        r = -errno;
    if (r == 0 && ioctl(out, FICLONE, in) != 0)
        r = copy_bytes(in, out, sb.st_size);
    if (in >= 0)
        close(in);
    if (out >= 0 && close(out) != 0 && r == 0)
        r = -errno;
    if (r != 0) {
        unlink(dst);
        return store_seterr(err, errlen, r, "copying table file %s to %s: %s", src, dst,
                            strerror(-r));
    }
    return 0;
}

/* a's batch written, then a copy of each file ingested (RocksDB moves what it ingests: the
 * pending file stays as written until the epoch is marked committed). */
static int run_tables(nf_store_t *st, store_apply_t *a, char *err, size_t errlen)
{
    if (rocksdb_writebatch_count(a->wb) > 0) {
        int r = write_batch(st, a->wb, false, "applying the epoch's batch", err, errlen);
        if (r != 0)
            return r;
    }
    for (unsigned i = 0; i < a->nfiles; i++) {
        char tmp[PATH_MAX];
        int r = store_ingest_path(st, tmp, err, errlen);
        if (r == 0)
            r = copy_table(a->paths[i], tmp, err, errlen);
        if (r == 0 && (r = store_ingest_table(st, a->kinds[i], tmp, err, errlen)) != 0)
            unlink(tmp);
        if (r != 0)
            return r;
    }
    return 0;
}

/* What the apply of a record that names table files needs: the files and batch prepared by the
 * pending write in this process, or those the record names (a restart). */
static int tables_in_hand(nf_store_t *st, const store_pending_head_t *h, store_apply_t **out,
                          char *err, size_t errlen)
{
    store_apply_t *a = NULL;
    int r = 0;
    if (st->prep && st->prep_epoch == h->epoch) {
        a = st->prep;
        st->prep = NULL;
    } else if ((r = load_tables(st, h, &a, err, errlen)) == 0 &&
               (r = load_batch(st, h, a, err, errlen)) != 0) {
        prep_free(a, false);
        a = NULL;
    }
    *out = a; /* NULL on failure */
    return r;
}

void store_pending_forget(nf_store_t *st)
{
    prep_free(st->prep, false);
    st->prep = NULL;
    free(st->body_path); /* the sweep at the next open removes it once no record names it */
    st->body_path = NULL;
}

void store_pending_sweep(nf_store_t *st)
{
    store_pending_head_t h;
    char err[256];
    store_apply_t *a = NULL;
    char *body = NULL; /* the record's body file */
    int hr = store_pending_head_read(st, &h, err, sizeof err);
    if (hr < 0)
        return; /* cannot tell which files a record names: none is removed */
    if (hr > 0) {
        bool known = true; /* else its apply says why; another record's file may stay till then */
        if (h.tables && load_tables(st, &h, &a, err, sizeof err) != 0)
            known = false;
        if (h.body && store_body_named(st, &h, &body) != 0)
            known = false;
        free(h.json);
        if (!known) {
            prep_free(a, false);
            free(body);
            return;
        }
    }
    DIR *d = opendir(st->db_dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strncmp(e->d_name, PENDING_TABLE, strlen(PENDING_TABLE)) != 0)
            continue;
        bool named = body && !strcmp(base_name(body), e->d_name);
        for (unsigned i = 0; a && i < a->nfiles && !named; i++)
            named = !strcmp(base_name(a->paths[i]), e->d_name);
        if (!named)
            unlinkat(dirfd(d), e->d_name, 0);
    }
    if (d)
        closedir(d);
    prep_free(a, false);
    free(body);
}

/* The pending record applied (any epoch's when epoch is 0). */
static int apply_record(nf_store_t *st, uint64_t epoch, size_t *ingested, char *err, size_t errlen)
{
    if (ingested)
        *ingested = 0;
    if (st->read_only)
        return store_seterr(err, errlen, -EROFS, "%s is open read-only", st->db_dir);
    store_pending_head_t h;
    int r = store_pending_head_read(st, &h, err, errlen);
    if (r <= 0)
        return r;
    if (epoch && h.epoch != epoch) {
        r = store_seterr(err, errlen, -EINVAL,
                         "%s: the pending record is epoch %" PRIu64 "'s, not epoch %" PRIu64
                         "'s (nothing applied)",
                         st->db_dir, h.epoch, epoch);
        free(h.json);
        return r;
    }
    /* A record that names table files: as the pending write prepared them, or from the record
     * (a restart). The ingested files are durable before mark_committed. */
    store_apply_t *a = NULL;
    if (h.tables)
        r = tables_in_hand(st, &h, &a, err, errlen);
    if (r >= 0) {
        /* Tracked writes (store_track.c) see the whole apply as one write. */
        store_track_begin(st);
        r = h.tables ? run_tables(st, a, err, errlen) : apply_blobs(st, &h, err, errlen);
        if (r >= 0 && st->fault)
            st->fault("mid_apply");
        char *body = NULL; /* after a restart: removed with the next record, as in store_body.c */
        if (r >= 0 && h.body && !st->body_path)
            store_body_named(st, &h, &body);
        if (r >= 0)
            r = mark_committed(st, &h, err, errlen);
        if (r >= 0 && body) {
            st->body_path = body;
            body = NULL;
        }
        free(body);
        if (r >= 0)
            store_track_end_pending(st, h.epoch);
        else
            store_track_end_unknown(st);
    }
    if (r >= 0 && ingested && a)
        *ingested = a->ingested;
    if (a)
        prep_free(a, r >= 0); /* committed (the mark synced): the files are named no more */
    free(h.json);
    if (r >= 0)
        give_back();
    return r < 0 ? r : 0;
}

int nf_store_pending_apply_epoch(nf_store_t *st, uint64_t epoch, size_t *ingested, char *err,
                                 size_t errlen)
{
    return apply_record(st, epoch ? epoch : UINT64_MAX, ingested, err, errlen);
}

int nf_store_pending_apply(nf_store_t *st, char *err, size_t errlen)
{
    return apply_record(st, 0, NULL, err, errlen);
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
    store_track_discard_pending(st);
    if (r == 0) { /* its files are named no more */
        prep_free(st->prep, true);
        st->prep = NULL;
        free(st->body_path);
        st->body_path = NULL;
        store_pending_sweep(st);
    }
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
