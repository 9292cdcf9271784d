/* store_view.c — committed views of the store (store.h, "committed views"): a RocksDB snapshot
 * and the read options that read through it, named by the epoch they show, shared by reference
 * count between the store (which holds the latest) and the readers that acquired it. */
#include "state/store_int.h"

#include <errno.h>
#include <stdlib.h>

struct nf_store_view {
    _Atomic unsigned refs;
    nf_store_t *st;
    const rocksdb_snapshot_t *snap;
    rocksdb_readoptions_t *ro, *ro_scan;
    uint64_t epoch;
    int64_t published_ms;
    uint64_t wseq, wfloor; /* store_track_view at the snapshot */
};

static void view_free(nf_store_view_t *v)
{
    if (v->ro)
        rocksdb_readoptions_destroy(v->ro);
    if (v->ro_scan)
        rocksdb_readoptions_destroy(v->ro_scan);
    if (v->snap)
        rocksdb_release_snapshot(v->st->db, v->snap);
    free(v);
}

int nf_store_view_publish(nf_store_t *st, uint64_t epoch)
{
    nf_store_view_t *v = calloc(1, sizeof *v);
    if (!v)
        return -ENOMEM;
    v->st = st;
    v->epoch = epoch;
    v->published_ms = (int64_t)store_realtime_ms();
    atomic_init(&v->refs, 1); /* the store's */
    /* no data write half-way (store_track.c): wseq names exactly the writes snap shows */
    pthread_mutex_lock(&st->track_mu);
    v->snap = rocksdb_create_snapshot(st->db);
    store_track_view(st, &v->wseq, &v->wfloor);
    pthread_mutex_unlock(&st->track_mu);
    v->ro = rocksdb_readoptions_create();
    v->ro_scan = rocksdb_readoptions_create();
    if (!v->snap || !v->ro || !v->ro_scan) {
        view_free(v);
        return -ENOMEM;
    }
    rocksdb_readoptions_set_snapshot(v->ro, v->snap);
    rocksdb_readoptions_set_snapshot(v->ro_scan, v->snap);
    rocksdb_readoptions_set_fill_cache(v->ro_scan, 0); /* a query's scan must not evict hot keys */
    pthread_mutex_lock(&st->view_mu);
    nf_store_view_t *old = st->view;
    st->view = v;
    pthread_mutex_unlock(&st->view_mu);
    if (old)
        nf_store_view_release(old);
    return 0;
}

nf_store_view_t *nf_store_view_acquire(nf_store_t *st)
{
    pthread_mutex_lock(&st->view_mu);
    nf_store_view_t *v = st->view;
    if (v)
        atomic_fetch_add(&v->refs, 1);
    pthread_mutex_unlock(&st->view_mu);
    return v;
}

void nf_store_view_release(nf_store_view_t *v)
{
    if (v && atomic_fetch_sub(&v->refs, 1) == 1)
        view_free(v);
}

void store_view_drop(nf_store_t *st)
{
    pthread_mutex_lock(&st->view_mu);
    nf_store_view_t *v = st->view;
    st->view = NULL;
    pthread_mutex_unlock(&st->view_mu);
    nf_store_view_release(v);
}

uint64_t nf_store_view_epoch(const nf_store_view_t *v)
{
    return v->epoch;
}

int64_t nf_store_view_published_ms(const nf_store_view_t *v)
{
    return v->published_ms;
}

uint64_t nf_store_view_wseq(const nf_store_view_t *v)
{
    return v->wseq;
}

bool nf_store_view_unchanged(const nf_store_view_t *v, const unsigned char id[16], uint64_t tag)
{
    return store_track_unchanged(v->st, v->wseq, v->wfloor, id, tag);
}

int nf_store_view_get(nf_store_view_t *v, nf_state_kind_t kind, const void *key, size_t klen,
                      void **val, size_t *len, char *err, size_t errlen)
{
    return store_get_ro(v->st, v->ro, kind, key, klen, val, len, err, errlen);
}

int nf_store_view_multi_get(nf_store_view_t *v, nf_state_kind_t kind, size_t n,
                            const unsigned char *keys, size_t klen, void **vals, size_t *lens,
                            char *err, size_t errlen)
{
    return store_multi_get_ro(v->st, v->ro, kind, n, keys, klen, vals, lens, err, errlen);
}

int nf_store_view_scan_prefix(nf_store_view_t *v, nf_state_kind_t kind, const void *prefix,
                              size_t plen, nf_store_scan_fn fn, void *arg)
{
    return store_scan_prefix_ro(v->st, v->ro_scan, kind, prefix, plen, fn, arg);
}

int nf_store_view_scan_prefixes(nf_store_view_t *v, nf_state_kind_t kind,
                                const unsigned char *prefixes, size_t n, size_t plen,
                                nf_store_scan_fn fn, void *arg)
{
    return store_scan_prefixes_ro(v->st, v->ro, kind, prefixes, n, plen, fn, arg);
}

int nf_store_view_scan_from(nf_store_view_t *v, nf_state_kind_t kind, const void *prefix,
                            size_t plen, const void *from, size_t flen, nf_store_scan_fn fn,
                            void *arg)
{
    return store_scan_from_ro(v->st, v->ro_scan, kind, prefix, plen, from, flen, fn, arg);
}
