/* store_track.c — which ids the writes since a view touched (store.h, "tracked writes"): a
 * count of the store's data writes and a table of slots, one per hash of an id, each holding the
 * count of the last write that touched an id of that hash. A data write and a view's snapshot
 * exclude each other (track_mu), so a view's count names exactly the writes it shows: a write
 * counted c is in every view counted >= c and in none counted < c. A slot can only overstate
 * (ids that share it), never understate, what was written: a reader that trusts "unchanged"
 * reads what the view would have given it. Writes whose ids the store cannot name (a restore's
 * ingested files, a pending record applied at start) raise the floor: nothing kept from before
 * them is unchanged. docs/ARCHITECTURE.md §4 "A reader's inputs kept". */
#include "state/store_int.h"

#include "algo/bytes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define ID_OFF 2 /* a key's id follows its 2-byte key group (kstate.h, serve_state.h) */
#define ID_LEN 16

struct store_track_table {
    size_t mask;
    uint64_t since; /* the write count tracking began at: nothing tagged before is unchanged */
    _Atomic uint64_t slot[];
};

static size_t slot_of(const store_track_table_t *t, const unsigned char *id)
{
    uint64_t hi = nf_get_be64(id), lo = nf_get_be64(id + 8);
    return (size_t)((hi ^ lo * 0x9e3779b97f4a7c15ull) >> 11) & t->mask;
}

void store_track_init(nf_store_t *st)
{
    pthread_mutex_init(&st->track_mu, NULL);
}

void store_track_free(nf_store_t *st)
{
    free(atomic_load(&st->track));
    free(st->track_pending);
    pthread_mutex_destroy(&st->track_mu);
}

int nf_store_track(nf_store_t *st, uint32_t kinds, size_t slots)
{
    size_t n = 1;
    while (n < slots && n < ((size_t)1 << 32))
        n *= 2;
    store_track_table_t *t = calloc(1, sizeof *t + n * sizeof t->slot[0]);
    if (!t)
        return -ENOMEM;
    t->mask = n - 1;
    pthread_mutex_lock(&st->track_mu);
    bool on = atomic_load_explicit(&st->track, memory_order_relaxed) != NULL;
    if (!on || (kinds & ~st->track_kinds)) {
        /* nothing read before is known unchanged: not from before tracking, nor of kinds whose
         * writes were not tracked until now */
        st->track_kinds |= kinds;
        st->track_floor = ++st->track_count;
    }
    if (!on) {
        t->since = st->track_floor;
        atomic_store_explicit(&st->track, t, memory_order_release);
    }
    pthread_mutex_unlock(&st->track_mu);
    if (on)
        free(t); /* the table there is kept: its slots hold what was written since */
    return 0;
}

typedef struct collect {
    const nf_store_t *st;
    const store_track_table_t *t;
    uint32_t *slots;
    size_t n, cap;
    bool failed;
} collect_t;

static int collect_one(void *arg, bool del, nf_state_kind_t kind, const void *key, size_t klen,
                       const void *val, size_t vlen)
{
    (void)del, (void)val, (void)vlen;
    collect_t *c = arg;
    if (!(c->st->track_kinds & (1u << kind)))
        return 0;
    if (klen < ID_OFF + ID_LEN) { /* no id where ids are: every id, to be safe */
        c->failed = true;
        return 1;
    }
    if (c->n == c->cap) {
        size_t nc = c->cap ? 2 * c->cap : 256;
        uint32_t *s = realloc(c->slots, nc * sizeof *s);
        if (!s) {
            c->failed = true;
            return 1;
        }
        c->slots = s;
        c->cap = nc;
    }
    c->slots[c->n++] = (uint32_t)slot_of(c->t, (const unsigned char *)key + ID_OFF);
    return 0;
}

/* Under track_mu, with tracking on: the slots of the tracked ids in b appended to *c (failed:
 * they could not be named). */
static void collect(const nf_store_t *st, const nf_store_batch_t *b, collect_t *c)
{
    c->st = st;
    c->t = atomic_load_explicit(&st->track, memory_order_relaxed);
    if (!c->failed && nf_store_batch_foreach(b, collect_one, c) < 0)
        c->failed = true;
}

/* Under track_mu: counts a data write that has just been made, touching c's slots (or every
 * id). */
static void count_write(nf_store_t *st, collect_t *c)
{
    uint64_t w = ++st->track_count;
    if (c->failed)
        st->track_floor = w;
    store_track_table_t *t = atomic_load_explicit(&st->track, memory_order_relaxed);
    for (size_t i = 0; t && !c->failed && i < c->n; i++)
        atomic_store_explicit(&t->slot[c->slots[i]], w, memory_order_relaxed);
    free(c->slots);
    memset(c, 0, sizeof *c);
}

void store_track_begin(nf_store_t *st)
{
    pthread_mutex_lock(&st->track_mu);
}

void store_track_end_batch(nf_store_t *st, const nf_store_batch_t *b)
{
    collect_t c = {0};
    if (atomic_load_explicit(&st->track, memory_order_relaxed))
        collect(st, b, &c);
    count_write(st, &c);
    pthread_mutex_unlock(&st->track_mu);
}

void store_track_end_unknown(nf_store_t *st)
{
    collect_t c = {.failed = true};
    count_write(st, &c);
    pthread_mutex_unlock(&st->track_mu);
}

void store_track_pending(nf_store_t *st, uint64_t epoch, nf_store_batch_t *const *batches,
                         unsigned n)
{
    pthread_mutex_lock(&st->track_mu);
    collect_t c = {0};
    bool on = atomic_load_explicit(&st->track, memory_order_relaxed) != NULL;
    for (unsigned i = 0; on && i < n; i++)
        if (batches[i])
            collect(st, batches[i], &c);
    free(st->track_pending);
    st->track_pending = c.slots;
    st->track_npending = c.failed ? SIZE_MAX : c.n;
    st->track_pending_epoch = on ? epoch : 0;
    pthread_mutex_unlock(&st->track_mu);
}

void store_track_end_pending(nf_store_t *st, uint64_t epoch)
{
    collect_t c = {.failed = true};
    if (st->track_pending_epoch == epoch && epoch && st->track_npending != SIZE_MAX) {
        c = (collect_t){.slots = st->track_pending, .n = st->track_npending};
        st->track_pending = NULL;
    }
    st->track_pending_epoch = 0;
    count_write(st, &c);
    pthread_mutex_unlock(&st->track_mu);
}

void store_track_discard_pending(nf_store_t *st)
{
    pthread_mutex_lock(&st->track_mu);
    free(st->track_pending);
    st->track_pending = NULL;
    st->track_pending_epoch = 0;
    pthread_mutex_unlock(&st->track_mu);
}

void store_track_view(nf_store_t *st, uint64_t *count, uint64_t *floor)
{
    *count = st->track_count;
    *floor = st->track_floor;
}

bool store_track_unchanged(nf_store_t *st, uint64_t count, uint64_t floor, const unsigned char *id,
                           uint64_t tag)
{
    const store_track_table_t *t = atomic_load_explicit(&st->track, memory_order_acquire);
    if (!t || tag > count || tag < floor || tag < t->since)
        return false;
    return atomic_load_explicit(&t->slot[slot_of(t, id)], memory_order_relaxed) <= tag;
}
