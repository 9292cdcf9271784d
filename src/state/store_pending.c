/* store_pending.c — the epoch protocol's records in the store's "default" family (store.h,
 * "the epoch protocol"):
 *       "committed"            u64le epoch | header JSON
 *       "pending/header"       u64le epoch | u32le nbatches | u32le noutputs | header JSON
 *       "pending/batch/%08u"   RocksDB WriteBatch data (rocksdb_writebatch_data)
 *       "pending/out/%08u"     an opaque output blob
 * The pending keys all sort inside ["pending/", "pending0"), so one range delete in the same
 * write removes whatever an earlier pending record left, whatever its counts were. */
#include "algo/bytes.h"
#include "state/store.h"
#include "state/store_int.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <rocksdb/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PENDING_LO     "pending/"
#define PENDING_HI     "pending0" /* '0' follows '/': the end of the "pending/" prefix */
#define PENDING_HEADER "pending/header"

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
    if (r == 0)
        store_track_pending(st, epoch, batches, nbatches);
out:
    rocksdb_writebatch_destroy(wb);
    free(hv);
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
static int apply_blobs(nf_store_t *st, const store_pending_head_t *h, char *err, size_t errlen)
{
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

/* "committed" <- the pending header, and the pending record gone, in one (unsynced) write. */
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
    int r = write_batch(st, wb, false, what, err, errlen);
    rocksdb_writebatch_destroy(wb);
    free(cv);
    return r;
}

/* The batches in hand are the pending record's: its epoch, as many of them as it holds. */
static int check_batches(nf_store_t *st, const store_pending_head_t *h, uint64_t epoch,
                         nf_store_batch_t *const *batches, unsigned n, char *err, size_t errlen)
{
    unsigned nb = 0;
    for (unsigned i = 0; i < n; i++)
        nb += batches[i] != NULL;
    if (h->epoch == epoch && nb == h->nbatches)
        return 0;
    return store_seterr(err, errlen, -EINVAL,
                        "%s: the pending record is epoch %" PRIu64 "'s with %u batches, not epoch "
                        "%" PRIu64 "'s with %u (nothing applied)",
                        st->db_dir, h->epoch, (unsigned)h->nbatches, epoch, nb);
}

int nf_store_pending_apply_batches(nf_store_t *st, uint64_t epoch, nf_store_batch_t *const *batches,
                                   unsigned n, size_t *ingested, char *err, size_t errlen)
{
    if (ingested)
        *ingested = 0;
    if (st->read_only)
        return store_seterr(err, errlen, -EROFS, "%s is open read-only", st->db_dir);
    store_pending_head_t h;
    int r = store_pending_head_read(st, &h, err, errlen);
    if (r <= 0)
        return r;
    /* With the batches in hand, the large kinds become table files before any lock is taken
     * (sorting and encoding them is most of the cost); the pending record's copies are read
     * back only after a restart. The ingested files are durable before mark_committed. */
    store_apply_t a;
    memset(&a, 0, sizeof a);
    if (batches && (r = check_batches(st, &h, epoch, batches, n, err, errlen)) == 0)
        r = store_apply_prepare(st, batches, n, &a, err, errlen);
    if (r >= 0) {
        /* Tracked writes (store_track.c) see the whole apply as one write. */
        store_track_begin(st);
        r = batches ? store_apply_run(st, &a, err, errlen) : apply_blobs(st, &h, err, errlen);
        if (r >= 0 && st->fault)
            st->fault("mid_apply");
        if (r >= 0)
            r = mark_committed(st, &h, err, errlen);
        if (r >= 0)
            store_track_end_pending(st, h.epoch);
        else
            store_track_end_unknown(st);
    }
    if (r >= 0 && ingested)
        *ingested = a.ingested;
    store_apply_free(&a);
    free(h.json);
    if (r >= 0)
        give_back();
    return r < 0 ? r : 0;
}

int nf_store_pending_apply(nf_store_t *st, char *err, size_t errlen)
{
    return nf_store_pending_apply_batches(st, 0, NULL, 0, NULL, err, errlen);
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
