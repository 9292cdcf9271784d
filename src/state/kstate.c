/* kstate.c — keyed state over the store: see kstate.h for the contract.
 *
 * Shape:
 *   entries  an array of 64-byte records (one cache line each), one per key in memory, that never
 *            move: everything else refers to a record by its index. Freed records are chained in
 *            a free list and reused before the array grows; records never used yet (from `fresh`
 *            on) join it one at a time, so growing the array touches none of its new pages.
 *            The array and the slot table are runtime/bigmem.h mappings: huge pages, grown by
 *            mremap without copying (page faults had been the read path's largest cost).
 *   slots    an open-addressing table (linear probing, power of two, at most 3/4 full) of
 *            {record index + 1, 32-bit hash}; a probe compares hashes and touches a record only
 *            on a hash match, so a hit costs about one slot line and one record line. Removal
 *            is backward-shift deletion (no tombstone slots, so probe chains never rot).
 *   dirty    a vector of the dirty records' indices; a record knows its position (`link`) so it
 *            can leave in O(1). nf_kstate_snapshot walks only this vector: O(dirty).
 *   inflight one list per snapshot not yet committed: the dirty vector of that snapshot, handed
 *            over whole, tagged with the epoch and a snapshot sequence number. A record that is
 *            re-dirtied and snapshotted again moves to the newer sequence number; an older list
 *            that still names it skips it (its `commit_seq` no longer matches), so stale indices
 *            in old lists are harmless. Vectors are recycled through a small pool, so after
 *            warm-up neither put nor snapshot allocates.
 *
 * Values of at most NF_KS_INLINE bytes live inside the record; longer ones in a block of the
 * table's runtime/slab.h allocator (huge pages: the values of a million keys, read at random,
 * would otherwise cost a TLB miss each) whose capacity is kept, so replacing a value with one of
 * the same (or a somewhat smaller) size does not allocate.
 *
 * Memory: `used` counts what the live keys need (records in use, out-of-line blocks, the slot
 * table — no more of it than a table rebuilt for them would have — the vectors); eviction and
 * nf_kstate_over_budget() compare it with the budget. The record array grows only as far as the
 * budget allows while clean records can be evicted instead, so the memory allocated (stats.bytes:
 * the whole record array and slot table, the slab's free blocks) stays close to it — except in
 * an epoch whose dirty records outgrow the budget (a burst): they cannot be evicted before their
 * epoch commits. The commit that makes them clean evicts down to the budget and then, once the
 * allocation exceeds what is used by more than nf_kstate_slack(used), gives the rest back
 * (shrink): the live records move to the front of the array and its tail is unmapped, the slot
 * table is rebuilt for them, the out-of-line values move into fresh slab chunks and the old
 * chunks are unmapped, and oversized vectors are cut down. Moving records is only done with no
 * snapshot in flight (their lists name records by index); the job commits one epoch at a time.
 *
 * TTL: an expired entry is dropped (by get or the expire sweep) even when dirty, because every
 * older copy of it in the store expired no later: puts stamp now_ms + ttl_ms, and the clock does
 * not go backwards. Tombstones never expire (the store's copy they hide might not have). An
 * expired entry still committing stays until its epoch commits (it is in no store yet).
 *
 * Eviction is CLOCK over the record array: a record's REF bit is set on every access, the hand
 * clears it on its first pass and evicts on the second. Only clean records are candidates:
 * dirty ones are the only copy of their value and committing ones are not in the store yet. */
#include "state/kstate.h"
#include "algo/bytes.h"
#include "runtime/bigmem.h"
#include "runtime/slab.h"
#include "state/probe.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NF_KS_INLINE 24u
#define NONE         UINT32_MAX
#define POOL_MAX     4
#define VEC_MIN      64u /* a vector's first capacity, and the least a shrink leaves */

enum {
    F_USED = 1u << 0,       /* record holds a key (free records have flags == 0) */
    F_DIRTY = 1u << 1,      /* changed since the last snapshot: in the dirty vector */
    F_COMMITTING = 1u << 2, /* written into snapshot commit_seq, not yet committed */
    F_TOMB = 1u << 3,       /* deleted: reads as absent, written as a delete */
    F_REF = 1u << 4,        /* CLOCK reference bit */
    F_OOL = 1u << 5,        /* value in v.ool (else inline in v.inl) */
};

typedef struct entry {
    nf_id128_t id;
    uint64_t expires_at; /* 0 = never */
    uint32_t len;        /* value length (0 for a tombstone) */
    uint32_t link;       /* position in the dirty vector if F_DIRTY; next free record if free */
    uint32_t commit_seq; /* the snapshot it is committing in, if F_COMMITTING */
    uint16_t kg;
    uint8_t flags;
    uint8_t gen; /* if F_DIRTY: the kstate's gen when it became dirty (a frozen one: older) */
    union {
        unsigned char inl[NF_KS_INLINE];
        struct {
            unsigned char *p;
            uint32_t cap;
        } ool;
    } v;
} entry_t;

_Static_assert(sizeof(entry_t) == 64, "a record is one cache line");

typedef nf_probe_slot_t slot_t; /* ref1 = record index + 1 */

typedef struct vec {
    uint32_t *v;
    uint32_t n, cap;
} vec_t;

/* nf_kstate_fetch reads at most this many keys; the gets read the others one by one. */
enum { FETCH_MAX = 64 };

typedef struct inflight {
    uint64_t epoch;
    uint32_t seq;
    vec_t list;
} inflight_t;

struct nf_kstate {
    nf_store_t *st;
    nf_state_kind_t kind;
    uint64_t ttl_ms;
    size_t budget;

    entry_t *ent;
    uint32_t ent_cap;
    uint32_t fresh; /* records [fresh, ent_cap) were never used: the free list's lazy tail */
    uint32_t free_head;
    uint32_t live;    /* records in use */
    uint32_t pinned;  /* records dirty or committing (not evictable) */
    uint32_t ncommit; /* records committing */
    uint32_t hand;    /* CLOCK */
    uint32_t cursor;  /* expire sweep */

    slot_t *slots;
    size_t mask;

    size_t ool_bytes; /* capacity of the live out-of-line blocks */
    nf_slab_t slab;   /* where they come from */

    vec_t dirty;
    inflight_t *infl;
    size_t ninfl, infl_cap;
    vec_t pool[POOL_MAX];
    unsigned npool;
    uint32_t seq;

    /* The snapshot by reference (nf_kstate_freeze) being written: its list (the dirty vector
     * handed over, also its in-flight list), batch, sequence number, the next position to walk
     * and the records still to write. gen counts freezes: a dirty record of an older gen is
     * frozen (its value is the cut's, not written yet). */
    const uint32_t *fv;
    nf_store_batch_t *fb;
    uint32_t fn, fpos, fleft, fseq;
    uint8_t gen;

    uint32_t last;          /* the record the last get found: a put of the same key right after (an
                             * update) starts there instead of probing again; checked, never trusted */
    unsigned char *scratch; /* [expires_at][value] for batch puts */
    size_t scratch_cap;

    /* nf_kstate_fetch's answers, waiting for their gets: keys (and their store keys), values
     * as stored (malloc'd; NULL = absent) and lengths. */
    unsigned nfetch;
    uint16_t fetch_kg[FETCH_MAX];
    nf_id128_t fetch_id[FETCH_MAX];
    void *fetch_val[FETCH_MAX];
    size_t fetch_len[FETCH_MAX];
    unsigned char fetch_key[FETCH_MAX][18];

    uint64_t hits, misses, loads, load_errors, evictions, expired, shrinks;
    char err[256];
};

/* ------------------------------------------------------------------ helpers */

/* Drops nf_kstate_fetch's answers not taken. */
static void fetch_clear(nf_kstate_t *ks)
{
    for (unsigned i = 0; i < ks->nfetch; i++)
        free(ks->fetch_val[i]);
    ks->nfetch = 0;
}

static inline uint32_t hash_key(uint16_t kg, nf_id128_t id)
{
    /* Ids are usually hash prefixes already, but tests and small id spaces are not: mix. */
    uint64_t x = id.hi ^ (id.lo * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)kg << 47);
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    return (uint32_t)x;
}

static inline bool key_eq(const entry_t *e, uint16_t kg, nf_id128_t id)
{
    return e->id.hi == id.hi && e->id.lo == id.lo && e->kg == kg;
}

/* Whether record idx (any value) holds (kg, key): keys are unique in the table, so it is then
 * the key's record (a hint is checked this way, never trusted). */
static inline bool holds(const nf_kstate_t *ks, uint32_t idx, uint16_t kg, nf_id128_t key)
{
    return idx < ks->fresh && (ks->ent[idx].flags & F_USED) && key_eq(&ks->ent[idx], kg, key);
}

static inline bool is_pinned(const entry_t *e)
{
    return (e->flags & (F_DIRTY | F_COMMITTING)) != 0;
}

/* Dirty in a frozen snapshot, its value the cut's and not written yet (nf_kstate_freeze). */
static inline bool is_frozen(const nf_kstate_t *ks, const entry_t *e)
{
    return ks->fleft && (e->flags & F_DIRTY) && e->gen != ks->gen;
}

static inline bool is_expired(const entry_t *e, uint64_t now_ms)
{
    return e->expires_at != 0 && e->expires_at <= now_ms;
}

static inline const unsigned char *val_ptr(const entry_t *e)
{
    return (e->flags & F_OOL) ? e->v.ool.p : e->v.inl;
}

/* Out-of-line blocks are counted at their capacity. */
static inline size_t ool_cost(uint32_t cap)
{
    return cap;
}

static size_t vec_bytes(const nf_kstate_t *ks)
{
    size_t b = (size_t)ks->dirty.cap * sizeof(uint32_t) + ks->infl_cap * sizeof(inflight_t);
    for (size_t i = 0; i < ks->ninfl; i++)
        b += (size_t)ks->infl[i].list.cap * sizeof(uint32_t);
    for (unsigned i = 0; i < ks->npool; i++)
        b += (size_t)ks->pool[i].cap * sizeof(uint32_t);
    return b;
}

/* The slots of a table rebuilt for n keys: a power of two >= 16 at most 3/8 full, so that it
 * grows (at 3/4) only after n has doubled. */
static size_t slots_for(size_t n)
{
    size_t want = (n * 8 + 2) / 3;
    return want <= 16 ? 16 : (size_t)1 << (64 - __builtin_clzll((unsigned long long)want - 1));
}

static size_t slot_bytes(const nf_kstate_t *ks)
{
    return (ks->mask + 1) * sizeof(slot_t);
}

/* The slot table as the live keys need it: as it is, or as a shrink would rebuild it. */
static size_t slot_bytes_used(const nf_kstate_t *ks)
{
    size_t rebuilt = slots_for(ks->live) * sizeof(slot_t);
    return rebuilt < slot_bytes(ks) ? rebuilt : slot_bytes(ks);
}

/* Everything but the records and the slot table. */
static size_t other_bytes(const nf_kstate_t *ks)
{
    return sizeof *ks + ks->ool_bytes + vec_bytes(ks) + ks->scratch_cap;
}

static size_t fixed_bytes(const nf_kstate_t *ks)
{
    return other_bytes(ks) + slot_bytes_used(ks);
}

/* What the live keys need: compared with the budget. */
static size_t used_bytes(const nf_kstate_t *ks)
{
    return fixed_bytes(ks) + (size_t)ks->live * sizeof(entry_t);
}

/* What is allocated: the whole record array and slot table, the slab's free blocks as well. */
static size_t alloc_bytes(const nf_kstate_t *ks)
{
    return other_bytes(ks) - ks->ool_bytes + nf_slab_bytes(&ks->slab) + slot_bytes(ks) +
           (size_t)ks->ent_cap * sizeof(entry_t);
}

static int vec_push(vec_t *v, uint32_t x)
{
    if (v->n == v->cap) {
        uint32_t cap = v->cap ? v->cap * 2 : VEC_MIN;
        uint32_t *nv = realloc(v->v, (size_t)cap * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = x;
    return 0;
}

/* ------------------------------------------------------------------ slot table */

/* The record index of (kg, id), or NONE; *pos gets its slot, or the empty slot ending the
 * probe (where it would be inserted). */
static inline uint32_t lookup(const nf_kstate_t *ks, uint16_t kg, nf_id128_t id, uint32_t h,
                              size_t *pos)
{
    size_t i = h & ks->mask;
    for (;;) {
        const slot_t *s = &ks->slots[i];
        if (s->ref1 == 0)
            break;
        if (s->h == h && key_eq(&ks->ent[s->ref1 - 1], kg, id)) {
            *pos = i;
            return s->ref1 - 1;
        }
        i = (i + 1) & ks->mask;
    }
    *pos = i;
    return NONE;
}

static int grow_slots(nf_kstate_t *ks)
{
    size_t cap = (ks->mask + 1) * 2;
    slot_t *ns = nf_bigmem_alloc(cap * sizeof *ns);
    if (!ns)
        return -ENOMEM;
    for (size_t i = 0; i <= ks->mask; i++) {
        slot_t s = ks->slots[i];
        if (s.ref1 == 0)
            continue;
        ns[nf_probe_empty(ns, cap - 1, s.h)] = s;
    }
    nf_bigmem_free(ks->slots, (ks->mask + 1) * sizeof(slot_t));
    ks->slots = ns;
    ks->mask = cap - 1;
    return 0;
}

/* ------------------------------------------------------------------ records */

static void dirty_remove(nf_kstate_t *ks, entry_t *e)
{
    assert(e->flags & F_DIRTY);
    uint32_t pos = e->link;
    assert(pos < ks->dirty.n);
    uint32_t last = ks->dirty.v[--ks->dirty.n];
    if (pos < ks->dirty.n) {
        ks->dirty.v[pos] = last;
        ks->ent[last].link = pos;
    }
    e->flags &= (uint8_t)~F_DIRTY;
}

static void free_value(nf_kstate_t *ks, entry_t *e)
{
    if (e->flags & F_OOL) {
        ks->ool_bytes -= ool_cost(e->v.ool.cap);
        nf_slab_free(&ks->slab, e->v.ool.p, e->v.ool.cap);
        e->flags &= (uint8_t)~F_OOL;
    }
    e->len = 0;
}

/* Removes a record that is not committing from the table and frees it. */
static void drop(nf_kstate_t *ks, uint32_t idx)
{
    entry_t *e = &ks->ent[idx];
    assert((e->flags & F_USED) && !(e->flags & F_COMMITTING));
    size_t pos;
    uint32_t found = lookup(ks, e->kg, e->id, hash_key(e->kg, e->id), &pos);
    assert(found == idx);
    (void)found;
    nf_probe_remove(ks->slots, ks->mask, pos);
    if (is_frozen(ks, e)) {
        /* Expired: as for a dirty one, the store's copy expired no later. The frozen list's
         * walk skips the record (it is no longer dirty). */
        e->flags &= (uint8_t)~F_DIRTY;
        ks->fleft--;
        ks->pinned--;
    } else if (e->flags & F_DIRTY) {
        dirty_remove(ks, e);
        ks->pinned--;
    }
    free_value(ks, e);
    e->flags = 0;
    e->link = ks->free_head;
    ks->free_head = idx;
    ks->live--;
}

/* Evicts one clean record other than `keep` (CLOCK). false if there is none. */
static bool evict_one(nf_kstate_t *ks, uint32_t keep)
{
    if (!ks->st)
        return false;
    uint32_t clean = ks->live - ks->pinned;
    if (keep != NONE && !is_pinned(&ks->ent[keep]))
        clean--;
    /* Without this, an over-budget load would sweep the whole array. And when clean records are
     * rare among pinned ones (an epoch whose changes outgrow the budget), finding one costs a
     * sweep past the pinned ones, twice when the few clean ones were just loaded (their REF
     * bits): a load per sweep made such an epoch crawl (an article a millisecond in
     * bench_cluster --restore). Fewer clean records than a 64th of the array stay, over budget
     * like the pinned ones, until a commit makes the pinned ones clean. */
    if (clean == 0 || clean < ks->fresh / 64)
        return false;
    /* Two sweeps clear every REF bit, so a clean record is found within 2 * fresh steps unless
     * the only clean one is `keep`. Records at or past `fresh` were never used. */
    for (size_t step = 0; step < 2 * (size_t)ks->fresh + 1; step++) {
        uint32_t idx = ks->hand;
        ks->hand = ks->hand + 1 < ks->fresh ? ks->hand + 1 : 0;
        entry_t *e = &ks->ent[idx];
        if (!(e->flags & F_USED) || is_pinned(e) || idx == keep)
            continue;
        if (e->flags & F_REF) {
            e->flags &= (uint8_t)~F_REF;
            continue;
        }
        drop(ks, idx);
        ks->evictions++;
        return true;
    }
    return false;
}

static void enforce_budget(nf_kstate_t *ks, uint32_t keep)
{
    if (!ks->st || ks->budget == 0)
        return;
    while (used_bytes(ks) > ks->budget && evict_one(ks, keep))
        ;
}

/* Growth steps are at least an eighth of the array, so copying stays amortised O(1). */
static size_t growth_step(const nf_kstate_t *ks)
{
    return ks->ent_cap / 8 > 16 ? ks->ent_cap / 8 : 16;
}

/* Records that fit in the budget beside everything else. */
static size_t budget_room(const nf_kstate_t *ks)
{
    size_t fixed = fixed_bytes(ks);
    return ks->budget > fixed ? (ks->budget - fixed) / sizeof(entry_t) : 0;
}

static int grow_entries(nf_kstate_t *ks)
{
    size_t cap = ks->ent_cap;
    size_t ncap = cap ? cap * 2 : 16;
    if (ks->st && ks->budget) {
        /* As far as the budget allows, but never by less than a step (past the budget: only
         * when nothing was evictable). */
        size_t room = budget_room(ks), min = cap + growth_step(ks);
        ncap = ncap < room ? ncap : room;
        ncap = ncap > min ? ncap : min;
    }
    if (ncap > (size_t)NONE - 1)
        ncap = (size_t)NONE - 1;
    if (ncap <= cap)
        return -ENOMEM;
    /* Records never move for the callers (they hold indices), and the new tail is zero: it
     * joins the free list lazily (alloc_record), so growing touches no page of it. */
    entry_t *ne = nf_bigmem_grow(ks->ent, cap * sizeof *ne, ncap * sizeof *ne);
    if (!ne)
        return -ENOMEM;
    ks->ent = ne;
    ks->ent_cap = (uint32_t)ncap;
    return 0;
}

/* A free record for a new key (not yet in the table), making room in the slot table too.
 * NONE on allocation failure. */
static uint32_t alloc_record(nf_kstate_t *ks)
{
    if ((size_t)(ks->live + 1) * 4 > (ks->mask + 1) * 3 && grow_slots(ks) != 0)
        return NONE;
    /* With a budget, reuse an evicted record rather than grow past it (or by a sliver). */
    if (ks->free_head == NONE && ks->fresh == ks->ent_cap && ks->st && ks->budget &&
        budget_room(ks) < (size_t)ks->ent_cap + growth_step(ks))
        evict_one(ks, NONE);
    if (ks->free_head == NONE && ks->fresh == ks->ent_cap && grow_entries(ks) != 0)
        return NONE;
    if (ks->free_head == NONE) {
        ks->ent[ks->fresh].link = NONE;
        ks->free_head = ks->fresh++;
    }
    return ks->free_head;
}

/* Puts a free record (from alloc_record) into the table at the empty slot `pos` that a lookup
 * of its key ended on. */
static entry_t *insert_record(nf_kstate_t *ks, uint32_t idx, size_t pos, uint16_t kg, nf_id128_t id,
                              uint32_t h)
{
    assert(idx == ks->free_head);
    entry_t *e = &ks->ent[idx];
    ks->free_head = e->link;
    *e = (entry_t){.id = id, .kg = kg, .flags = F_USED | F_REF, .link = NONE};
    ks->slots[pos] = (slot_t){idx + 1, h};
    ks->live++;
    return e;
}

/* Sets e's value (val NULL: only makes room for len bytes, contents undefined), reusing its
 * out-of-line block when it fits (and is not more than twice
 * too big). -ENOMEM leaves e unchanged. */
static int set_value(nf_kstate_t *ks, entry_t *e, const void *val, uint32_t len)
{
    if (len <= NF_KS_INLINE) {
        /* val may point into e's own value (a caller putting back what get returned). */
        unsigned char tmp[NF_KS_INLINE];
        if (len && val)
            memcpy(tmp, val, len);
        free_value(ks, e);
        if (len && val)
            memcpy(e->v.inl, tmp, len);
        e->len = len;
        return 0;
    }
    if ((e->flags & F_OOL) && e->v.ool.cap >= len && e->v.ool.cap / 2 <= len) {
        if (val)
            memmove(e->v.ool.p, val, len);
        e->len = len;
        return 0;
    }
    /* Blocks come in the slab's classes, about 1.5x apart (32, 48, 80, 112, 176, 256, ...), so a
     * value that grows a little at a time (an interest vector gains a topic: +9 bytes) moves a
     * few times in its life rather than every other update; the reuse rule above keeps it from
     * shrinking back at once. */
    uint32_t cap = nf_slab_class_size(len);
    unsigned char *p = cap ? nf_slab_alloc(&ks->slab, len) : NULL;
    if (!p)
        return -ENOMEM;
    if (val)
        memcpy(p, val, len);
    free_value(ks, e);
    e->v.ool.p = p;
    e->v.ool.cap = cap;
    e->flags |= F_OOL;
    ks->ool_bytes += ool_cost(cap);
    e->len = len;
    return 0;
}

static void unfreeze(nf_kstate_t *ks, entry_t *e);

static int mark_dirty(nf_kstate_t *ks, uint32_t idx)
{
    entry_t *e = &ks->ent[idx];
    if (e->flags & F_DIRTY)
        return 0;
    if (vec_push(&ks->dirty, idx) != 0)
        return -ENOMEM;
    e->link = ks->dirty.n - 1;
    e->gen = ks->gen;
    if (!is_pinned(e))
        ks->pinned++;
    e->flags |= F_DIRTY;
    return 0;
}

/* ------------------------------------------------------------------ shrinking */

/* Moves the live records to the front of the array (in their order), rebuilds the slot table
 * for them and unmaps the array past them and a sixteenth more. Only with no snapshot in flight
 * (the in-flight lists name records by index; the dirty vector is updated). Nothing changes if
 * the new table cannot be had. */
static void compact_records(nf_kstate_t *ks)
{
    assert(ks->ninfl == 0 && ks->ncommit == 0);
    size_t nslots = slots_for(ks->live);
    slot_t *ns = nf_bigmem_alloc(nslots * sizeof *ns);
    if (!ns)
        return;
    uint32_t to = 0;
    for (uint32_t from = 0; from < ks->fresh; from++) {
        const entry_t *e = &ks->ent[from];
        if (!(e->flags & F_USED))
            continue;
        if (from != to) {
            ks->ent[to] = *e;
            if (e->flags & F_DIRTY)
                ks->dirty.v[e->link] = to;
        }
        uint32_t h = hash_key(ks->ent[to].kg, ks->ent[to].id);
        ns[nf_probe_empty(ns, nslots - 1, h)] = (slot_t){to + 1, h};
        to++;
    }
    nf_bigmem_free(ks->slots, slot_bytes(ks));
    ks->slots = ns;
    ks->mask = nslots - 1;
    ks->fresh = to; /* [to, ent_cap) read as never used: alloc_record writes them whole */
    ks->free_head = NONE;
    ks->hand = ks->cursor = 0;
    ks->last = NONE;
    size_t cap = (size_t)to + (to / 16 > 16 ? to / 16 : 16);
    if (cap < ks->ent_cap &&
        nf_bigmem_shrink(ks->ent, (size_t)ks->ent_cap * sizeof(entry_t), cap * sizeof(entry_t)))
        ks->ent_cap = (uint32_t)cap;
}

static inline bool in_slab(const entry_t *e)
{
    return (e->flags & F_OOL) && e->v.ool.cap <= NF_SLAB_MAX; /* larger ones are malloc'd */
}

/* Moves every out-of-line value from the slab into a fresh one and unmaps the old chunks, which
 * evictions left holding mostly free blocks. Values beyond NF_SLAB_MAX (malloc'd) stay. Nothing
 * changes on -ENOMEM. */
static void compact_values(nf_kstate_t *ks)
{
    size_t n = 0, k = 0;
    for (uint32_t i = 0; i < ks->fresh; i++)
        n += in_slab(&ks->ent[i]);
    unsigned char **blk = malloc((n ? n : 1) * sizeof *blk);
    nf_slab_t fresh;
    nf_slab_init(&fresh);
    for (uint32_t i = 0; blk && i < ks->fresh && k < n; i++) { /* every block first */
        if (!in_slab(&ks->ent[i]))
            continue;
        if (!(blk[k] = nf_slab_alloc(&fresh, ks->ent[i].v.ool.cap)))
            break;
        k++;
    }
    if (!blk || k < n) { /* no half move */
        nf_slab_destroy(&fresh);
        free(blk);
        return;
    }
    k = 0;
    for (uint32_t i = 0; i < ks->fresh; i++) {
        entry_t *e = &ks->ent[i];
        if (!in_slab(e))
            continue;
        memcpy(blk[k], e->v.ool.p, e->len);
        e->v.ool.p = blk[k++];
    }
    nf_slab_replace(&ks->slab, &fresh);
    free(blk);
}

static void vec_shrink(vec_t *v, uint32_t cap)
{
    uint32_t *nv = realloc(v->v, (size_t)cap * sizeof *nv);
    if (nv) {
        v->v = nv;
        v->cap = cap;
    }
}

/* The dirty vector and the pooled ones, grown by a burst (a vector holds an epoch's dirty
 * records): cut down to twice the records dirty now, or freed. */
static void shrink_vectors(nf_kstate_t *ks)
{
    uint32_t keep = ks->dirty.n * 2 > VEC_MIN ? ks->dirty.n * 2 : VEC_MIN;
    if (ks->dirty.cap > 2 * keep)
        vec_shrink(&ks->dirty, keep);
    for (unsigned i = 0; i < ks->npool;) {
        if (ks->pool[i].cap > 2 * keep) {
            free(ks->pool[i].v);
            ks->pool[i] = ks->pool[--ks->npool];
        } else {
            i++;
        }
    }
}

/* After a commit has made the records clean and eviction brought them within the budget: what a
 * burst grew beyond what is used now goes back to the system, past nf_kstate_slack() (the gap
 * keeps an epoch that grows back from shrinking again). O(records) when it does. */
static void shrink(nf_kstate_t *ks)
{
    if (!ks->st || !ks->budget || ks->ninfl)
        return;
    size_t used = used_bytes(ks);
    if (alloc_bytes(ks) - used <= nf_kstate_slack(used))
        return;
    shrink_vectors(ks);
    if ((size_t)(ks->ent_cap - ks->live) * sizeof(entry_t) > NF_KSTATE_SLACK_MIN / 16 ||
        slot_bytes(ks) > slot_bytes_used(ks))
        compact_records(ks);
    if (nf_slab_bytes(&ks->slab) - ks->ool_bytes > NF_KSTATE_SLACK_MIN / 16)
        compact_values(ks);
    ks->shrinks++;
}

/* ------------------------------------------------------------------ API */

nf_kstate_t *nf_kstate_new(nf_store_t *st, const nf_kstate_opts_t *o)
{
    nf_kstate_t *ks = calloc(1, sizeof *ks);
    if (!ks)
        return NULL;
    nf_slab_init(&ks->slab);
    ks->st = st;
    ks->kind = o->kind;
    ks->ttl_ms = o->ttl_ms;
    ks->budget = o->budget_bytes;
    ks->free_head = NONE;
    size_t want = o->initial_capacity ? o->initial_capacity : 16;
    if (st && o->budget_bytes && want > o->budget_bytes / sizeof(entry_t))
        want = o->budget_bytes / sizeof(entry_t) > 16 ? o->budget_bytes / sizeof(entry_t) : 16;
    if (want > (size_t)NONE / 2)
        want = (size_t)NONE / 2;
    size_t nslots = 16;
    while (nslots * 3 < want * 4)
        nslots *= 2;
    ks->slots = nf_bigmem_alloc(nslots * sizeof *ks->slots);
    ks->mask = nslots - 1;
    ks->ent = nf_bigmem_alloc(want * sizeof *ks->ent);
    ks->ent_cap = (uint32_t)want;
    if (!ks->slots || !ks->ent) {
        nf_kstate_free(ks);
        return NULL;
    }
    return ks;
}

void nf_kstate_free(nf_kstate_t *ks)
{
    if (!ks)
        return;
    for (uint32_t i = 0; ks->ent && i < ks->fresh; i++) /* the large ones are malloc'd */
        if ((ks->ent[i].flags & F_OOL) && ks->ent[i].v.ool.cap > NF_SLAB_MAX)
            nf_slab_free(&ks->slab, ks->ent[i].v.ool.p, ks->ent[i].v.ool.cap);
    nf_slab_destroy(&ks->slab);
    nf_bigmem_free(ks->ent, (size_t)ks->ent_cap * sizeof(entry_t));
    nf_bigmem_free(ks->slots, (ks->mask + 1) * sizeof(slot_t));
    free(ks->dirty.v);
    for (size_t i = 0; i < ks->ninfl; i++)
        free(ks->infl[i].list.v);
    free(ks->infl);
    for (unsigned i = 0; i < ks->npool; i++)
        free(ks->pool[i].v);
    free(ks->scratch);
    fetch_clear(ks);
    free(ks);
}

void nf_kstate_encode_key(uint16_t kg, nf_id128_t key, unsigned char out[18])
{
    out[0] = (unsigned char)(kg >> 8);
    out[1] = (unsigned char)kg;
    nf_put_be64(out + 2, key.hi);
    nf_put_be64(out + 10, key.lo);
}

/* Takes the fetched answer for (kg, key), if there is one: 1 (a value: *raw, *rlen) or 0
 * (absent), -1 if none was fetched. */
static int fetch_take(nf_kstate_t *ks, uint16_t kg, nf_id128_t key, void **raw, size_t *rlen)
{
    for (unsigned i = 0; i < ks->nfetch; i++) {
        if (ks->fetch_kg[i] != kg || ks->fetch_id[i].hi != key.hi || ks->fetch_id[i].lo != key.lo)
            continue;
        *raw = ks->fetch_val[i];
        *rlen = ks->fetch_len[i];
        unsigned last = --ks->nfetch; /* the last answer moves into its place */
        ks->fetch_kg[i] = ks->fetch_kg[last];
        ks->fetch_id[i] = ks->fetch_id[last];
        ks->fetch_val[i] = ks->fetch_val[last];
        ks->fetch_len[i] = ks->fetch_len[last];
        return *raw != NULL;
    }
    return -1;
}

int nf_kstate_fetch(nf_kstate_t *ks, size_t n, const uint16_t *kgs, const nf_id128_t *keys)
{
    fetch_clear(ks);
    if (!ks->st)
        return 0;
    for (size_t i = 0; i < n && ks->nfetch < FETCH_MAX; i++) {
        size_t pos;
        if (lookup(ks, kgs[i], keys[i], hash_key(kgs[i], keys[i]), &pos) != NONE)
            continue; /* in memory: its get needs no read */
        bool dup = false;
        for (unsigned j = 0; j < ks->nfetch && !dup; j++)
            dup = ks->fetch_kg[j] == kgs[i] && ks->fetch_id[j].hi == keys[i].hi &&
                  ks->fetch_id[j].lo == keys[i].lo;
        if (dup)
            continue;
        unsigned m = ks->nfetch++;
        ks->fetch_kg[m] = kgs[i];
        ks->fetch_id[m] = keys[i];
        nf_kstate_encode_key(kgs[i], keys[i], ks->fetch_key[m]);
    }
    if (ks->nfetch == 0)
        return 0;
    int r = nf_store_multi_get(ks->st, ks->kind, ks->nfetch, &ks->fetch_key[0][0], 18,
                               ks->fetch_val, ks->fetch_len, ks->err, sizeof ks->err);
    if (r != 0) {
        ks->nfetch = 0; /* nf_store_multi_get freed what it had read */
        ks->load_errors++;
        return r == -ENOMEM ? -ENOMEM : -EIO;
    }
    return 0;
}

/* Miss in memory: the fetched answer, else a point read from the store; on success the key is
 * in memory, clean. */
static const void *load(nf_kstate_t *ks, uint16_t kg, nf_id128_t key, uint32_t h, uint64_t now_ms,
                        uint32_t *len, int *err)
{
    void *raw = NULL;
    size_t rlen = 0;
    int r = fetch_take(ks, kg, key, &raw, &rlen);
    if (r < 0) {
        unsigned char k[18];
        nf_kstate_encode_key(kg, key, k);
        r = nf_store_get(ks->st, ks->kind, k, sizeof k, &raw, &rlen, ks->err, sizeof ks->err);
    }
    if (r < 0) {
        ks->load_errors++;
        *err = -EIO;
        return NULL;
    }
    if (r == 0)
        return NULL;
    if (rlen < 8 || rlen - 8 > UINT32_MAX) {
        snprintf(ks->err, sizeof ks->err,
                 "state %s: stored value of %zu bytes is shorter than its 8-byte expiry header "
                 "(kg %u, key %016llx%016llx)",
                 nf_state_kind_name(ks->kind), rlen, kg, (unsigned long long)key.hi,
                 (unsigned long long)key.lo);
        free(raw);
        ks->load_errors++;
        *err = -EIO;
        return NULL;
    }
    uint64_t exp = nf_get_le64(raw);
    if (exp != 0 && exp <= now_ms) {
        free(raw);
        return NULL;
    }
    uint32_t idx = alloc_record(ks);
    if (idx == NONE) {
        free(raw);
        *err = -ENOMEM;
        return NULL;
    }
    size_t pos;
    uint32_t again = lookup(ks, kg, key, h, &pos);
    assert(again == NONE);
    (void)again;
    entry_t *e = insert_record(ks, idx, pos, kg, key, h);
    if (set_value(ks, e, (unsigned char *)raw + 8, (uint32_t)(rlen - 8)) != 0) {
        free(raw);
        drop(ks, idx);
        *err = -ENOMEM;
        return NULL;
    }
    free(raw);
    e->expires_at = exp;
    ks->loads++;
    enforce_budget(ks, idx);
    *len = e->len;
    return val_ptr(e);
}

/* nf_kstate_get, starting at idx if that record holds (kg, key) (keys are unique in the table:
 * it is then the key's record). */
static const void *get(nf_kstate_t *ks, uint16_t kg, nf_id128_t key, uint32_t idx, uint64_t now_ms,
                       uint32_t *len, int *err)
{
    int dummy;
    if (!err)
        err = &dummy;
    *err = 0;
    *len = 0;
    uint32_t h = 0;
    if (!holds(ks, idx, kg, key)) {
        size_t pos;
        h = hash_key(kg, key);
        idx = lookup(ks, kg, key, h, &pos);
    }
    if (idx != NONE) {
        entry_t *e = &ks->ent[idx];
        ks->hits++;
        ks->last = idx;
        e->flags |= F_REF;
        if (e->flags & F_TOMB)
            return NULL;
        if (is_expired(e, now_ms)) {
            /* The store's copy (if any) is older, so expired too: no reload. */
            if (!(e->flags & F_COMMITTING)) {
                drop(ks, idx);
                ks->expired++;
            }
            return NULL;
        }
        *len = e->len;
        return val_ptr(e);
    }
    ks->misses++;
    if (!ks->st)
        return NULL;
    return load(ks, kg, key, h, now_ms, len, err);
}

const void *nf_kstate_get(nf_kstate_t *ks, uint16_t kg, nf_id128_t key, uint64_t now_ms,
                          uint32_t *len, int *err)
{
    return get(ks, kg, key, NONE, now_ms, len, err);
}

const void *nf_kstate_get_hint(nf_kstate_t *ks, uint16_t kg, nf_id128_t key, uint32_t hint,
                               uint64_t now_ms, uint32_t *len, int *err)
{
    return get(ks, kg, key, hint, now_ms, len, err);
}

void nf_kstate_prefetch(const nf_kstate_t *ks, uint16_t kg, nf_id128_t key)
{
    __builtin_prefetch(&ks->slots[hash_key(kg, key) & ks->mask]);
}

/* The record a get would find, by the slot tags alone (no record is read: a tag match that is
 * not the key only costs a useless prefetch). NONE if no slot matches. */
static uint32_t peek(const nf_kstate_t *ks, uint16_t kg, nf_id128_t key)
{
    uint32_t ref1 = nf_probe_peek(ks->slots, ks->mask, hash_key(kg, key));
    return ref1 ? ref1 - 1 : NONE;
}

uint32_t nf_kstate_prefetch_record(const nf_kstate_t *ks, uint16_t kg, nf_id128_t key)
{
    uint32_t idx = peek(ks, kg, key);
    if (idx != NONE)
        __builtin_prefetch(&ks->ent[idx]);
    return idx;
}

uint32_t nf_kstate_prefetch_value(const nf_kstate_t *ks, uint16_t kg, nf_id128_t key, uint32_t hint)
{
    uint32_t idx = hint;
    if (!holds(ks, idx, kg, key)) {
        idx = peek(ks, kg, key); /* a tag match only: checked below like the hint */
        if (!holds(ks, idx, kg, key))
            return NF_KSTATE_NO_HINT;
    }
    if (ks->ent[idx].flags & F_OOL) {
        const unsigned char *p = ks->ent[idx].v.ool.p;
        uint32_t len = ks->ent[idx].len < 256 ? ks->ent[idx].len : 256; /* the first lines */
        for (uint32_t off = 0; off < len; off += 64)
            __builtin_prefetch(p + off);
    }
    return idx;
}

/* The record of (kg, key), inserted (empty, clean) if absent. NONE on allocation failure. */
static uint32_t find_or_insert(nf_kstate_t *ks, uint16_t kg, nf_id128_t key, bool *inserted)
{
    *inserted = false;
    if (holds(ks, ks->last, kg, key))
        return ks->last;
    uint32_t h = hash_key(kg, key);
    size_t pos;
    uint32_t idx = lookup(ks, kg, key, h, &pos);
    if (idx != NONE)
        return idx;
    idx = alloc_record(ks);
    if (idx == NONE)
        return NONE;
    /* The table may have grown or lost evicted keys: find the insertion slot again. */
    uint32_t again = lookup(ks, kg, key, h, &pos);
    assert(again == NONE);
    (void)again;
    insert_record(ks, idx, pos, kg, key, h);
    *inserted = true;
    return idx;
}

/* put and put_ref: val NULL makes room only. The entry's value, or NULL (nothing changed). */
static void *put(nf_kstate_t *ks, uint16_t kg, nf_id128_t key, const void *val, uint32_t len,
                 uint64_t now_ms)
{
    if (ks->nfetch)
        fetch_clear(ks);
    bool inserted;
    uint32_t idx = find_or_insert(ks, kg, key, &inserted);
    if (idx == NONE)
        return NULL;
    entry_t *e = &ks->ent[idx];
    unfreeze(ks, e); /* its cut value goes to the frozen snapshot before it changes */
    /* Make sure the record can join the dirty vector before changing anything. */
    if (!(e->flags & F_DIRTY) && ks->dirty.n == ks->dirty.cap) {
        if (vec_push(&ks->dirty, 0) != 0)
            goto fail;
        ks->dirty.n--;
    }
    if (set_value(ks, e, val, len) != 0)
        goto fail;
    e->flags = (uint8_t)((e->flags & ~F_TOMB) | F_REF);
    e->expires_at = ks->ttl_ms ? now_ms + ks->ttl_ms : 0;
    int r = mark_dirty(ks, idx);
    assert(r == 0);
    (void)r;
    enforce_budget(ks, idx); /* evicts others only: e stays where it is */
    return (void *)val_ptr(e);
fail:
    if (inserted)
        drop(ks, idx);
    return NULL;
}

int nf_kstate_put(nf_kstate_t *ks, uint16_t kg, nf_id128_t key, const void *val, uint32_t len,
                  uint64_t now_ms)
{
    return put(ks, kg, key, val ? val : "", len, now_ms) ? 0 : -ENOMEM;
}

void *nf_kstate_put_ref(nf_kstate_t *ks, uint16_t kg, nf_id128_t key, uint32_t len, uint64_t now_ms)
{
    return put(ks, kg, key, NULL, len, now_ms);
}

int nf_kstate_delete(nf_kstate_t *ks, uint16_t kg, nf_id128_t key)
{
    fetch_clear(ks);
    bool inserted;
    uint32_t idx = find_or_insert(ks, kg, key, &inserted);
    if (idx == NONE)
        return -ENOMEM;
    entry_t *e = &ks->ent[idx];
    unfreeze(ks, e); /* its cut value goes to the frozen snapshot before the value goes */
    if (mark_dirty(ks, idx) != 0) {
        if (inserted)
            drop(ks, idx);
        return -ENOMEM;
    }
    free_value(ks, e);
    e->flags |= F_TOMB | F_REF;
    e->expires_at = 0;
    enforce_budget(ks, idx);
    return 0;
}

/* Writes record e into batch b: a delete for a tombstone, else [expires_at LE][value]. */
static void write_record(nf_kstate_t *ks, nf_store_batch_t *b, const entry_t *e)
{
    unsigned char k[18];
    nf_kstate_encode_key(e->kg, e->id, k);
    if (e->flags & F_TOMB) {
        nf_store_batch_delete(b, ks->kind, k, sizeof k);
        return;
    }
    size_t need = 8 + (size_t)e->len;
    if (need > ks->scratch_cap) {
        size_t cap = ks->scratch_cap ? ks->scratch_cap : 256;
        while (cap < need)
            cap *= 2;
        unsigned char *p = realloc(ks->scratch, cap);
        if (!p) {
            /* Cannot happen in practice (a few KB); the batch API has no error path, so stop
             * rather than commit an epoch without this value. */
            fprintf(stderr, "kstate: out of memory serialising a %u-byte value\n", e->len);
            abort();
        }
        ks->scratch = p;
        ks->scratch_cap = cap;
    }
    nf_put_le64(ks->scratch, e->expires_at);
    if (e->len)
        memcpy(ks->scratch + 8, val_ptr(e), e->len);
    nf_store_batch_put(b, ks->kind, k, sizeof k, ks->scratch, need);
}

/* Room for one more in-flight snapshot. */
static void infl_reserve(nf_kstate_t *ks, uint64_t epoch)
{
    if (ks->ninfl < ks->infl_cap)
        return;
    size_t cap = ks->infl_cap ? ks->infl_cap * 2 : 4;
    inflight_t *p = realloc(ks->infl, cap * sizeof *p);
    if (!p) {
        fprintf(stderr, "kstate: out of memory at the barrier of epoch %llu\n",
                (unsigned long long)epoch);
        abort();
    }
    ks->infl = p;
    ks->infl_cap = cap;
}

/* A frozen record about to change (or reached by the walk): its cut value goes into the frozen
 * snapshot's batch (NULL: nowhere) and it becomes committing in that snapshot. */
static void unfreeze(nf_kstate_t *ks, entry_t *e)
{
    if (!is_frozen(ks, e))
        return;
    assert((e->flags & (F_USED | F_DIRTY)) == (F_USED | F_DIRTY));
    if (ks->fb)
        write_record(ks, ks->fb, e);
    if (!(e->flags & F_COMMITTING))
        ks->ncommit++;
    e->flags = (uint8_t)((e->flags & ~F_DIRTY) | F_COMMITTING);
    e->commit_seq = ks->fseq;
    e->link = NONE;
    ks->fleft--;
}

/* A freeze written whole at once. The batch is left in the order of the dirty vector: the store
 * sorts an epoch's records (all shards' together) when it applies them, on the coordinator, not
 * on the shards. */
size_t nf_kstate_snapshot(nf_kstate_t *ks, nf_store_batch_t *b, uint64_t epoch)
{
    size_t n = nf_kstate_freeze(ks, b, epoch);
    nf_kstate_freeze_step(ks, 0);
    return n;
}

size_t nf_kstate_freeze(nf_kstate_t *ks, nf_store_batch_t *b, uint64_t epoch)
{
    nf_kstate_freeze_step(ks, 0);
    fetch_clear(ks);
    size_t n = ks->dirty.n;
    if (n == 0)
        return 0;
    /* The dirty vector becomes the snapshot's in-flight list and the frozen list; the records
     * of the list are frozen from here on (dirty of an older gen). */
    infl_reserve(ks, epoch);
    ks->fseq = ++ks->seq;
    ks->infl[ks->ninfl++] = (inflight_t){.epoch = epoch, .seq = ks->fseq, .list = ks->dirty};
    ks->fv = ks->dirty.v;
    ks->fn = ks->fleft = (uint32_t)n;
    ks->fpos = 0;
    ks->fb = b;
    ks->dirty = ks->npool ? ks->pool[--ks->npool] : (vec_t){0};
    ks->gen++;
    return n;
}

size_t nf_kstate_freeze_step(nf_kstate_t *ks, size_t max)
{
    for (size_t steps = 0; ks->fleft && (max == 0 || steps < max); steps++) {
        assert(ks->fpos < ks->fn);
        uint32_t i = ks->fpos++;
        entry_t *e = &ks->ent[ks->fv[i]];
        if (e->link == i) /* else written or dropped already (the record may be reused) */
            unfreeze(ks, e);
    }
    if (ks->fleft == 0 && ks->fv) {
        ks->fv = NULL;
        ks->fb = NULL;
        ks->fn = ks->fpos = 0;
        enforce_budget(ks, NONE);
    }
    return ks->fleft;
}

static void recycle(nf_kstate_t *ks, vec_t v)
{
    v.n = 0;
    if (ks->npool < POOL_MAX) {
        ks->pool[ks->npool++] = v;
        return;
    }
    /* Keep the biggest vectors. */
    unsigned small = 0;
    for (unsigned i = 1; i < ks->npool; i++)
        if (ks->pool[i].cap < ks->pool[small].cap)
            small = i;
    if (ks->pool[small].cap < v.cap) {
        free(ks->pool[small].v);
        ks->pool[small] = v;
    } else {
        free(v.v);
    }
}

/* Ends in-flight snapshots: durable (every epoch <= epoch: committed) or never to be applied
 * (exactly `epoch`: uncommitted). */
static void finish(nf_kstate_t *ks, uint64_t epoch, bool durable)
{
    fetch_clear(ks); /* the store has changed (durable), or the entries are dirty again */
    size_t keep = 0;
    for (size_t q = 0; q < ks->ninfl; q++) {
        inflight_t *f = &ks->infl[q];
        bool hit = durable ? f->epoch <= epoch : f->epoch == epoch;
        if (!hit) {
            ks->infl[keep++] = *f;
            continue;
        }
        for (uint32_t i = 0; i < f->list.n; i++) {
            uint32_t idx = f->list.v[i];
            entry_t *e = &ks->ent[idx];
            if (!(e->flags & F_COMMITTING) || e->commit_seq != f->seq)
                continue; /* snapshotted again later, or freed and reused */
            e->flags &= (uint8_t)~F_COMMITTING;
            ks->ncommit--;
            if (e->flags & F_DIRTY)
                continue; /* changed since: stays pinned (as dirty) */
            ks->pinned--;
            if (!durable) {
                /* Back into the dirty vector for the next snapshot. Only tests get here. */
                if (mark_dirty(ks, idx) != 0) {
                    fprintf(stderr, "kstate: out of memory re-dirtying epoch %llu\n",
                            (unsigned long long)epoch);
                    abort();
                }
            } else if (e->flags & F_TOMB) {
                drop(ks, idx); /* the store has the delete now */
            }
        }
        recycle(ks, f->list);
    }
    ks->ninfl = keep;
}

void nf_kstate_committed(nf_kstate_t *ks, uint64_t epoch)
{
    nf_kstate_freeze_step(ks, 0); /* a commit before its snapshot was written: a caller's bug */
    finish(ks, epoch, true);
    enforce_budget(ks, NONE);
    shrink(ks);
}

void nf_kstate_uncommitted(nf_kstate_t *ks, uint64_t epoch)
{
    nf_kstate_freeze_step(ks, 0);
    finish(ks, epoch, false);
    enforce_budget(ks, NONE);
}

size_t nf_kstate_expire(nf_kstate_t *ks, uint64_t now_ms, size_t max_entries)
{
    fetch_clear(ks);
    if (ks->ttl_ms == 0 || ks->live == 0)
        return 0;
    size_t n = max_entries == 0 || max_entries > ks->fresh ? ks->fresh : max_entries;
    size_t dropped = 0;
    for (size_t k = 0; k < n; k++) {
        if (ks->cursor >= ks->fresh)
            ks->cursor = 0;
        uint32_t idx = ks->cursor++;
        entry_t *e = &ks->ent[idx];
        if (!(e->flags & F_USED) || (e->flags & (F_COMMITTING | F_TOMB)) || !is_expired(e, now_ms))
            continue;
        drop(ks, idx);
        dropped++;
    }
    ks->expired += dropped;
    return dropped;
}

size_t nf_kstate_drop_groups(nf_kstate_t *ks, bool (*match)(uint16_t kg, void *ctx), void *ctx,
                             size_t *kept)
{
    size_t dropped = 0;
    *kept = 0;
    fetch_clear(ks); /* the store's copies of these groups may change (a restore) */
    for (uint32_t idx = 0; idx < ks->fresh; idx++) {
        entry_t *e = &ks->ent[idx];
        if (!(e->flags & F_USED) || !match(e->kg, ctx))
            continue;
        if (e->flags & (F_DIRTY | F_COMMITTING)) {
            (*kept)++; /* not in the store yet: forgetting it would lose it */
            continue;
        }
        drop(ks, idx);
        dropped++;
    }
    return dropped;
}

void nf_kstate_stats(const nf_kstate_t *ks, nf_kstate_stats_t *out)
{
    *out = (nf_kstate_stats_t){
        .entries = ks->live,
        .dirty = ks->dirty.n + ks->fleft,
        .committing = ks->ncommit,
        .bytes = alloc_bytes(ks),
        .used = used_bytes(ks),
        .records = ks->fresh,
        .hits = ks->hits,
        .misses = ks->misses,
        .loads = ks->loads,
        .load_errors = ks->load_errors,
        .evictions = ks->evictions,
        .expired = ks->expired,
        .shrinks = ks->shrinks,
    };
}

bool nf_kstate_over_budget(const nf_kstate_t *ks)
{
    return ks->budget != 0 && used_bytes(ks) > ks->budget;
}

const char *nf_kstate_error(const nf_kstate_t *ks)
{
    return ks->err;
}
