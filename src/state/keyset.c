/* keyset.c — a durable in-memory set of keys with a TTL: see keyset.h for the contract. */
#include "state/keyset.h"
#include "algo/bytes.h"
#include "algo/hash.h"
#include "runtime/bigmem.h"
#include "state/coldset.h"
#include "state/probe.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXP_MAX    ((1ull << 48) - 1) /* ms: year 10889 */
#define RING_MAX   (1ull << 31)       /* positions + 1 fit the slots' 32 bits */
#define BLOB_HEAD  13                 /* [expires_at 8][format 1][count 4] */
#define BLOB_REC   24                 /* [hi 8][lo 8][expires_at 8] */
#define BLOB_KEY   12                 /* [kg 2][epoch 8][writer 2] */
#define BLOB_KEY2  20                 /* [kg 2][epoch 8][writer 2][process 6][chunk 2] */
#define CHUNK_KEYS 400000u /* keys per blob at most: 9.6 MB, under a changelog record's 16 MiB */
#define LEGACY_KEY 18      /* kstate's [kg 2][hi 8][lo 8] */
#define FORMAT     1
#define POP_STEP   4          /* expired keys an add drops, so expiry keeps pace with insertion */
#define POP_AHEAD  8          /* how far ahead of the tail pop_tail prefetches */
#define SPILL_MAX  (1u << 18) /* keys a spill moves at most */

typedef nf_coldrec_t rec_t; /* {hi, lo, expires_at_ms << 16 | kg} */

typedef nf_probe_slot_t slot_t; /* ref1 = ring position + 1 */

/* A snapshot by reference (nf_keyset_freeze): the ring's [from, to) goes into b as epoch's blobs,
 * a phase at a time; the set's `snap` stays at from until they are all in. */
typedef struct frozen {
    bool on;
    enum { FRZ_COUNT, FRZ_FILL, FRZ_PUT } phase;
    uint64_t from, to, pos;    /* ring sequence numbers; pos: the phase's next key */
    size_t ngroups, group, at; /* FRZ_PUT: the next group and its offset in the blob buffer */
    nf_store_batch_t *b;
    uint64_t epoch;
} frozen_t;

struct nf_keyset {
    nf_store_t *st;
    nf_state_kind_t kind;
    int64_t ttl;
    size_t budget;
    uint16_t writer;
    uint64_t process;

    rec_t *ring;
    uint64_t cap, rmask;
    uint64_t head, tail, snap; /* sequence numbers; position = seq & rmask */
    int64_t next_exp;          /* expires_at of the tail key (INT64_MAX when empty) */

    slot_t *slots;
    uint64_t smask; /* slots: 2 * cap */

    /* snapshot scratch: keys per key group, then one blob per key group */
    uint32_t *kg_count; /* [65536], lazily allocated; only touched entries are non-zero */
    uint16_t *kg_list;
    unsigned char *blob;
    size_t blob_cap;

    /* bounded (a spill directory and a budget): the hot ring stops growing at hot_max and
     * its oldest written keys go to the cold tier, spill_n at a time */
    nf_coldset_t *cold;
    uint64_t hot_max, spill_n;
    uint64_t spill_failures; /* spills the disk refused (the ring grew instead) */
    uint64_t spill_deferred; /* full of keys newer than the last snapshot (the ring grew) */

    frozen_t frz;

    uint64_t added, present, expired, loaded;
};

static void settle(nf_keyset_t *ks);

static inline int64_t rec_exp(const rec_t *r)
{
    return (int64_t)(r->expkg >> 16);
}

static inline uint16_t rec_kg(const rec_t *r)
{
    return (uint16_t)r->expkg;
}

static inline uint64_t rec_pack(int64_t exp, uint16_t kg)
{
    uint64_t e = exp < 0 ? 0 : (uint64_t)exp > EXP_MAX ? EXP_MAX : (uint64_t)exp;
    return e << 16 | kg;
}

/* Keys are hash outputs already (and the seen set's share their hi with every key of the same
 * user, their lo is what tells them apart): one multiply folds both halves and the key group. */
static inline uint32_t key_hash(uint16_t kg, nf_id128_t k)
{
    uint64_t x = (k.lo ^ (k.hi * 0x9e3779b97f4a7c15ull) ^ kg) * 0xd6e8feb86659fd93ull;
    return (uint32_t)(x >> 32) ^ (uint32_t)x;
}

static inline bool rec_is(const rec_t *r, uint16_t kg, nf_id128_t k)
{
    return r->hi == k.hi && r->lo == k.lo && rec_kg(r) == kg;
}

/* The slot holding (kg, k), or -1; *empty gets the empty slot that ended the probe. */
static int64_t find(const nf_keyset_t *ks, uint16_t kg, nf_id128_t k, uint32_t h, uint64_t *empty)
{
    uint64_t i = h & ks->smask;
    for (;;) {
        const slot_t *s = &ks->slots[i];
        if (s->ref1 == 0) {
            *empty = i;
            return -1;
        }
        if (s->h == h && rec_is(&ks->ring[s->ref1 - 1], kg, k))
            return (int64_t)i;
        i = (i + 1) & ks->smask;
    }
}

/* The slot naming ring position pos, or -1 (the record is a replaced copy, or removed). */
static int64_t slot_of(const nf_keyset_t *ks, uint64_t pos)
{
    const rec_t *r = &ks->ring[pos];
    uint32_t h = key_hash(rec_kg(r), (nf_id128_t){r->hi, r->lo});
    for (uint64_t i = h & ks->smask; ks->slots[i].ref1 != 0; i = (i + 1) & ks->smask)
        if (ks->slots[i].ref1 == pos + 1)
            return (int64_t)i;
    return -1;
}

/* Starts loading the slot line of the key at sequence seq: keys leave the ring in order, so the
 * one POP_AHEAD behind does not wait for memory when its turn comes (the ring itself is read in
 * order, which the hardware follows). */
static inline void prefetch_slot_at(const nf_keyset_t *ks, uint64_t seq)
{
    const rec_t *n = &ks->ring[seq & ks->rmask];
    __builtin_prefetch(&ks->slots[key_hash(rec_kg(n), (nf_id128_t){n->hi, n->lo}) & ks->smask]);
}

/* Takes the tail key out of the ring: its slot goes too, unless the slot now names a newer copy
 * of the key (the tail one expired and was added again) or nothing (already removed). */
static void unlink_tail(nf_keyset_t *ks)
{
    if (ks->frz.on && ks->tail >= ks->frz.from) /* a frozen key (expired): write them first */
        settle(ks);
    int64_t i = slot_of(ks, ks->tail & ks->rmask);
    if (i >= 0)
        nf_probe_remove(ks->slots, ks->smask, (size_t)i);
    ks->tail++;
    ks->next_exp = ks->tail < ks->head ? rec_exp(&ks->ring[ks->tail & ks->rmask]) : INT64_MAX;
    if (ks->tail + POP_AHEAD < ks->head)
        prefetch_slot_at(ks, ks->tail + POP_AHEAD);
}

/* Drops the (expired) tail key. */
static void pop_tail(nf_keyset_t *ks)
{
    unlink_tail(ks);
    ks->expired++;
}

static size_t hot_expire(nf_keyset_t *ks, int64_t now_ms, size_t max)
{
    size_t n = 0;
    while (now_ms >= ks->next_exp && (max == 0 || n < max)) {
        pop_tail(ks);
        n++;
    }
    return n;
}

/* Moves the oldest keys of the ring to the cold tier: at most spill_n, and only keys a snapshot
 * wrote already (the ones since must stay for the next). 0; 1: too few such keys to be worth a
 * run (the caller grows the ring instead); or -ENOMEM / -EIO, with nothing moved. */
static int spill(nf_keyset_t *ks, int64_t now_ms)
{
    uint64_t m = ks->snap > ks->tail ? ks->snap - ks->tail : 0;
    m = m < ks->spill_n ? m : ks->spill_n;
    if (m == 0 || m < ks->spill_n / 4)
        return 1;
    rec_t *buf = nf_bigmem_alloc((size_t)m * sizeof *buf);
    if (!buf)
        return -ENOMEM;
    size_t n = 0;
    for (uint64_t s = ks->tail; s < ks->tail + m; s++) {
        const rec_t *r = &ks->ring[s & ks->rmask];
        if (s + POP_AHEAD < ks->tail + m)
            prefetch_slot_at(ks, s + POP_AHEAD);
        if (rec_exp(r) > now_ms && slot_of(ks, s & ks->rmask) >= 0)
            buf[n++] = *r;
    }
    /* Written to disk before the ring lets go of them: a failure loses nothing. */
    int rc = nf_coldset_spill(ks->cold, buf, n);
    nf_bigmem_free(buf, (size_t)m * sizeof *buf);
    if (rc != 0)
        return rc;
    ks->expired += m - n;
    for (uint64_t i = 0; i < m; i++)
        unlink_tail(ks);
    return 0;
}

static int rebuild(nf_keyset_t *ks, uint64_t new_cap, int64_t now_ms);

/* A ring grown past hot_max (no key could spill then: all were newer than the last snapshot,
 * or the disk failed) moves its written keys out and shrinks back, once it can. */
static void back_within(nf_keyset_t *ks, int64_t now_ms)
{
    if (!ks->cold || ks->cap <= ks->hot_max)
        return;
    while (ks->head - ks->tail > ks->hot_max / 2 && spill(ks, now_ms) == 0)
        ;
    if (ks->head - ks->tail <= ks->hot_max / 2)
        (void)rebuild(ks, ks->hot_max, now_ms);
}

size_t nf_keyset_expire(nf_keyset_t *ks, int64_t now_ms, size_t max)
{
    size_t n = hot_expire(ks, now_ms, max);
    back_within(ks, now_ms);
    if (ks->cold) {
        long c = nf_coldset_expire(ks->cold, now_ms);
        n += c > 0 ? (size_t)c : 0;
        ks->expired += c > 0 ? (uint64_t)c : 0;
    }
    return n;
}

static size_t table_bytes(uint64_t cap)
{
    return (size_t)cap * sizeof(rec_t) + (size_t)(2 * cap) * sizeof(slot_t);
}

/* A ring of new_cap holding the keys of the old one still present at now_ms (expired ones,
 * including any replaced copy, are left behind) and not matched by drop (NULL: none), in order,
 * and slots rebuilt for it. */
static int rebuild_drop(nf_keyset_t *ks, uint64_t new_cap, int64_t now_ms, nf_keyset_owns_fn drop,
                        void *ctx)
{
    if (new_cap > RING_MAX)
        return -ENOMEM;
    settle(ks); /* positions change below: a frozen range is written first */
    rec_t *ring = nf_bigmem_alloc((size_t)new_cap * sizeof *ring);
    slot_t *slots = nf_bigmem_alloc((size_t)(2 * new_cap) * sizeof *slots);
    if (!ring || !slots) {
        nf_bigmem_free(ring, (size_t)new_cap * sizeof *ring);
        nf_bigmem_free(slots, (size_t)(2 * new_cap) * sizeof *slots);
        return -ENOMEM;
    }
    uint64_t n = 0, snap = 0, smask = 2 * new_cap - 1;
    for (uint64_t s = ks->tail; s < ks->head; s++) {
        if (s == ks->snap)
            snap = n;
        const rec_t *r = &ks->ring[s & ks->rmask];
        if (rec_exp(r) <= now_ms || (drop && drop(rec_kg(r), (nf_id128_t){r->hi, r->lo}, ctx)))
            continue;
        assert(n < new_cap);
        ring[n] = *r;
        uint32_t h = key_hash(rec_kg(r), (nf_id128_t){r->hi, r->lo});
        slots[nf_probe_empty(slots, smask, h)] = (slot_t){(uint32_t)(n + 1), h};
        n++;
    }
    if (ks->snap >= ks->head)
        snap = n;
    nf_bigmem_free(ks->ring, (size_t)ks->cap * sizeof(rec_t));
    nf_bigmem_free(ks->slots, (size_t)(ks->smask + 1) * sizeof(slot_t));
    ks->expired += (ks->head - ks->tail) - n;
    ks->ring = ring;
    ks->slots = slots;
    ks->cap = new_cap;
    ks->rmask = new_cap - 1;
    ks->smask = smask;
    ks->tail = 0;
    ks->head = n;
    ks->snap = snap;
    ks->next_exp = n ? rec_exp(&ring[0]) : INT64_MAX;
    return 0;
}

static int rebuild(nf_keyset_t *ks, uint64_t new_cap, int64_t now_ms)
{
    return rebuild_drop(ks, new_cap, now_ms, NULL, NULL);
}

nf_keyset_t *nf_keyset_new(nf_store_t *st, const nf_keyset_opts_t *o)
{
    if (o->ttl_ms == 0 || o->ttl_ms > EXP_MAX)
        return NULL;
    nf_keyset_t *ks = calloc(1, sizeof *ks);
    if (!ks)
        return NULL;
    ks->st = st;
    ks->kind = o->kind;
    ks->ttl = (int64_t)o->ttl_ms;
    ks->budget = o->budget_bytes;
    ks->writer = o->writer;
    ks->process = o->process & 0xFFFFFFFFFFFFull;
    uint64_t cap = 16, want = o->initial_capacity ? o->initial_capacity : 1024;
    while (cap < want && cap < RING_MAX)
        cap <<= 1;
    ks->ring = nf_bigmem_alloc((size_t)cap * sizeof(rec_t));
    ks->slots = nf_bigmem_alloc((size_t)(2 * cap) * sizeof(slot_t));
    ks->cap = cap;
    ks->rmask = cap - 1;
    ks->smask = 2 * cap - 1;
    ks->next_exp = INT64_MAX;
    if (!ks->ring || !ks->slots) {
        nf_keyset_free(ks);
        return NULL;
    }
    if (o->spill_dir && o->budget_bytes) {
        /* A fifth of the budget at most for the hot ring (40 bytes a position, and 12 more
         * while a quarter of it spills: the copy and its sort), seven tenths for the filter
         * (which the keys on disk need most: 3.4 bytes each), the rest for the page index. */
        ks->hot_max = 64;
        while (ks->hot_max * 2 * 52 * 5 <= o->budget_bytes && ks->hot_max * 2 <= RING_MAX)
            ks->hot_max *= 2;
        /* a spill pauses the owner (sort, write, filter): ~200 ns a key, so at most 2^18 keys
         * (~50 ms); smaller runs only mean more of them, told apart by the filter's tags */
        ks->spill_n = ks->hot_max / 4 < SPILL_MAX ? ks->hot_max / 4 : SPILL_MAX;
        nf_coldset_opts_t co = {.dir = o->spill_dir, .filter_max_bytes = o->budget_bytes / 10 * 7};
        char err[256];
        if (!(ks->cold = nf_coldset_new(&co, err, sizeof err))) {
            if (o->err)
                snprintf(o->err, o->errlen, "%s", err);
            nf_keyset_free(ks);
            return NULL;
        }
    }
    return ks;
}

void nf_keyset_free(nf_keyset_t *ks)
{
    if (!ks)
        return;
    nf_bigmem_free(ks->ring, (size_t)ks->cap * sizeof(rec_t));
    nf_bigmem_free(ks->slots, (size_t)(ks->smask + 1) * sizeof(slot_t));
    free(ks->kg_count);
    free(ks->kg_list);
    free(ks->blob);
    nf_coldset_free(ks->cold);
    free(ks);
}

void nf_keyset_prefetch(const nf_keyset_t *ks, uint16_t kg, nf_id128_t key)
{
    __builtin_prefetch(&ks->slots[key_hash(kg, key) & ks->smask]);
    if (ks->cold)
        nf_coldset_prefetch(ks->cold, kg, key);
}

void nf_keyset_prefetch_record(const nf_keyset_t *ks, uint16_t kg, nf_id128_t key)
{
    uint32_t ref1 = nf_probe_peek(ks->slots, ks->smask, key_hash(kg, key));
    if (ref1)
        __builtin_prefetch(&ks->ring[ref1 - 1]);
    else if (ks->cold)
        nf_coldset_prefetch_page(ks->cold, kg, key);
}

int nf_keyset_contains(nf_keyset_t *ks, uint16_t kg, nf_id128_t key, int64_t now_ms)
{
    uint64_t empty = 0;
    int64_t i = find(ks, kg, key, key_hash(kg, key), &empty);
    if (i >= 0 && rec_exp(&ks->ring[ks->slots[i].ref1 - 1]) > now_ms)
        return 1;
    return ks->cold ? nf_coldset_contains(ks->cold, kg, key, now_ms) : 0;
}

int nf_keyset_add(nf_keyset_t *ks, uint16_t kg, nf_id128_t key, int64_t now_ms)
{
    uint32_t h = key_hash(kg, key);
    uint64_t empty = UINT64_MAX;
    int64_t i = find(ks, kg, key, h, &empty);
    if (i >= 0) {
        if (rec_exp(&ks->ring[ks->slots[i].ref1 - 1]) > now_ms) {
            ks->present++;
            return 1;
        }
        /* Expired but not dropped yet: forget this copy (its ring record stays until the tail
         * reaches it; pop_tail then finds no slot naming it). */
        nf_probe_remove(ks->slots, ks->smask, (size_t)i);
        empty = UINT64_MAX;
    } else if (ks->cold) {
        /* Not in the ring: a key the ring let go of is on disk until it expires. */
        int c = nf_coldset_contains(ks->cold, kg, key, now_ms);
        if (c < 0)
            return c;
        if (c == 1) {
            ks->present++;
            return 1;
        }
    }
    /* Expiry keeps step with insertion: a few expired keys leave the tail with every add. */
    for (int n = 0; n < POP_STEP && now_ms >= ks->next_exp; n++) {
        pop_tail(ks);
        empty = UINT64_MAX; /* slots may have shifted */
    }
    if (ks->head - ks->tail == ks->cap) {
        settle(ks); /* the keys a freeze marked may spill once written: write them now */
        hot_expire(ks, now_ms, 0);
        /* Full of live keys: bounded, the oldest written ones go to disk; else (or when none
         * can: every key is new since the last snapshot, or the disk failed) the ring grows. */
        bool bounded = ks->cold && ks->cap >= ks->hot_max;
        int s = ks->head - ks->tail < ks->cap ? 0 : bounded ? spill(ks, now_ms) : 1;
        if (s != 0 && rebuild(ks, ks->cap * 2, now_ms) != 0)
            return -ENOMEM;
        if (s < 0)
            ks->spill_failures++;
        else if (s == 1 && bounded)
            ks->spill_deferred++;
        if (s == 0)
            back_within(ks, now_ms);
        empty = UINT64_MAX;
    }
    uint64_t pos = ks->head & ks->rmask;
    ks->ring[pos] = (rec_t){key.hi, key.lo, rec_pack(now_ms + ks->ttl, kg)};
    if (empty != UINT64_MAX)
        ks->slots[empty] = (slot_t){(uint32_t)(pos + 1), h};
    else
        ks->slots[nf_probe_empty(ks->slots, ks->smask, h)] = (slot_t){(uint32_t)(pos + 1), h};
    if (ks->head == ks->tail)
        ks->next_exp = rec_exp(&ks->ring[pos]);
    ks->head++;
    ks->added++;
    return 0;
}

/* ---------------------------------------------------------------- snapshot */

static int blob_reserve(nf_keyset_t *ks, size_t n)
{
    if (n <= ks->blob_cap)
        return 0;
    size_t cap = ks->blob_cap ? ks->blob_cap : 4096;
    while (cap < n)
        cap *= 2;
    unsigned char *p = realloc(ks->blob, cap);
    if (!p)
        return -ENOMEM;
    ks->blob = p;
    ks->blob_cap = cap;
    return 0;
}

/* A key group's blob h (count keys) under 20-byte keys that name the process too (two
 * processes' epochs number independently: their blobs of one key group must not collide when
 * the group moves between them), in chunks of at most CHUNK_KEYS keys (each a blob of its own,
 * so that one fits a changelog record). 0 or -ENOMEM. */
/* [kg 2][epoch 8][writer 2]: the first BLOB_KEY bytes of either layout. */
static void blob_key_head(const nf_keyset_t *ks, uint16_t kg, uint64_t epoch, unsigned char *key)
{
    key[0] = (unsigned char)(kg >> 8);
    key[1] = (unsigned char)kg;
    for (int i = 0; i < 8; i++)
        key[2 + i] = (unsigned char)(epoch >> (56 - 8 * i));
    key[10] = (unsigned char)(ks->writer >> 8);
    key[11] = (unsigned char)ks->writer;
}

/* The latest expiry of count blob records. */
static uint64_t latest_expiry(const unsigned char *recs, uint32_t count)
{
    uint64_t latest = 0;
    for (uint32_t i = 0; i < count; i++) {
        uint64_t e = nf_get_le64(recs + (size_t)i * BLOB_REC + 16);
        latest = e > latest ? e : latest;
    }
    return latest;
}

static int put_chunks(nf_keyset_t *ks, nf_store_batch_t *b, uint16_t kg, uint64_t epoch,
                      const unsigned char *h, uint32_t count)
{
    unsigned char key[BLOB_KEY2];
    blob_key_head(ks, kg, epoch, key);
    for (int i = 0; i < 6; i++)
        key[12 + i] = (unsigned char)(ks->process >> (40 - 8 * i));
    if (count <= CHUNK_KEYS) {
        key[18] = key[19] = 0;
        nf_store_batch_put(b, ks->kind, key, sizeof key, h, BLOB_HEAD + (size_t)count * BLOB_REC);
        return 0;
    }
    unsigned char *tmp = malloc(BLOB_HEAD + (size_t)CHUNK_KEYS * BLOB_REC);
    if (!tmp)
        return -ENOMEM;
    for (uint32_t c = 0, first = 0; first < count; c++, first += CHUNK_KEYS) {
        uint32_t m = count - first < CHUNK_KEYS ? count - first : CHUNK_KEYS;
        const unsigned char *recs = h + BLOB_HEAD + (size_t)first * BLOB_REC;
        nf_put_le64(tmp, latest_expiry(recs, m));
        tmp[8] = FORMAT;
        nf_put_le32(tmp + 9, m);
        memcpy(tmp + BLOB_HEAD, recs, (size_t)m * BLOB_REC);
        key[18] = (unsigned char)(c >> 8);
        key[19] = (unsigned char)c;
        nf_store_batch_put(b, ks->kind, key, sizeof key, tmp, BLOB_HEAD + (size_t)m * BLOB_REC);
    }
    free(tmp);
    return 0;
}

/* A failed snapshot: the groups counted so far forget their counts, b will not commit, the
 * keys stay new (the job stops: epoch.h). */
static long frz_fail(nf_keyset_t *ks)
{
    for (size_t g = ks->frz.group; g < ks->frz.ngroups; g++)
        ks->kg_count[ks->kg_list[g]] = 0;
    nf_store_batch_fail(ks->frz.b);
    ks->frz.on = false;
    return -ENOMEM;
}

/* Counts the keys of each key group; at the end lays the blobs out one after another in the
 * scratch buffer (kg_count then holds each group's next write offset). */
static int frz_count(nf_keyset_t *ks, uint64_t end)
{
    for (; ks->frz.pos < end; ks->frz.pos++) {
        uint16_t kg = rec_kg(&ks->ring[ks->frz.pos & ks->rmask]);
        if (ks->kg_count[kg]++ == 0)
            ks->kg_list[ks->frz.ngroups++] = kg;
    }
    if (ks->frz.pos < ks->frz.to)
        return 0;
    size_t ngroups = ks->frz.ngroups;
    size_t total = ngroups * BLOB_HEAD + (size_t)(ks->frz.to - ks->frz.from) * BLOB_REC;
    if (total > UINT32_MAX || blob_reserve(ks, total) != 0) /* offsets are 32-bit below */
        return -ENOMEM;
    size_t at = 0;
    for (size_t g = 0; g < ngroups; g++) {
        uint16_t kg = ks->kg_list[g];
        uint32_t count = ks->kg_count[kg];
        unsigned char *h = ks->blob + at;
        nf_put_le64(h, 0); /* the latest expiry, filled when put */
        h[8] = FORMAT;
        nf_put_le32(h + 9, count);
        ks->kg_count[kg] = (uint32_t)(at + BLOB_HEAD);
        at += BLOB_HEAD + (size_t)count * BLOB_REC;
    }
    ks->frz.phase = FRZ_FILL;
    ks->frz.pos = ks->frz.from;
    return 0;
}

static void frz_fill(nf_keyset_t *ks, uint64_t end)
{
    for (; ks->frz.pos < end; ks->frz.pos++) {
        const rec_t *r = &ks->ring[ks->frz.pos & ks->rmask];
        unsigned char *p = ks->blob + ks->kg_count[rec_kg(r)];
        nf_put_le64(p, r->hi);
        nf_put_le64(p + 8, r->lo);
        nf_put_le64(p + 16, (uint64_t)rec_exp(r));
        ks->kg_count[rec_kg(r)] += BLOB_REC;
    }
    if (ks->frz.pos == ks->frz.to)
        ks->frz.phase = FRZ_PUT;
}

/* Puts the blobs of up to max keys (at least one group). */
static int frz_put(nf_keyset_t *ks, uint64_t max)
{
    uint64_t keys = 0;
    while (ks->frz.group < ks->frz.ngroups && (keys == 0 || keys < max)) {
        uint16_t kg = ks->kg_list[ks->frz.group];
        unsigned char *h = ks->blob + ks->frz.at;
        uint32_t count = nf_get_le32(h + 9);
        nf_put_le64(h, latest_expiry(h + BLOB_HEAD, count));
        size_t len = BLOB_HEAD + (size_t)count * BLOB_REC;
        if (!ks->process) { /* the original layout: one blob, 12-byte key */
            unsigned char key[BLOB_KEY];
            blob_key_head(ks, kg, ks->frz.epoch, key);
            nf_store_batch_put(ks->frz.b, ks->kind, key, sizeof key, h, len);
        } else if (put_chunks(ks, ks->frz.b, kg, ks->frz.epoch, h, count) != 0) {
            return -ENOMEM;
        }
        ks->kg_count[kg] = 0;
        ks->frz.at += len;
        ks->frz.group++;
        keys += count;
    }
    return 0;
}

/* Writes up to max more keys of the frozen range (0: all); the keys left, or -ENOMEM. */
static long frz_step(nf_keyset_t *ks, uint64_t max)
{
    uint64_t budget = max ? max : UINT64_MAX;
    if (ks->frz.phase == FRZ_COUNT) { /* counting is ~4x cheaper a key than filling */
        uint64_t n = ks->frz.to - ks->frz.pos, want = budget > UINT64_MAX / 4 ? n : budget * 4;
        if (frz_count(ks, ks->frz.pos + (n < want ? n : want)) != 0)
            return frz_fail(ks);
        if (ks->frz.phase == FRZ_COUNT)
            return (long)(ks->frz.to - ks->frz.from);
    }
    if (ks->frz.phase == FRZ_FILL) {
        uint64_t n = ks->frz.to - ks->frz.pos;
        frz_fill(ks, ks->frz.pos + (n < budget ? n : budget));
        if (ks->frz.phase == FRZ_FILL)
            return (long)(ks->frz.to - ks->frz.pos);
        if (max)
            return 1; /* the puts next call */
    }
    if (frz_put(ks, budget) != 0)
        return frz_fail(ks);
    if (ks->frz.group < ks->frz.ngroups)
        return 1;
    ks->snap = ks->frz.to;
    ks->frz.on = false;
    return 0;
}

/* Whatever a freeze left, written now (before anything moves or changes its keys). */
static void settle(nf_keyset_t *ks)
{
    if (ks->frz.on)
        (void)frz_step(ks, 0);
}

long nf_keyset_freeze(nf_keyset_t *ks, nf_store_batch_t *b, uint64_t epoch)
{
    settle(ks);
    uint64_t from = ks->snap > ks->tail ? ks->snap : ks->tail, to = ks->head;
    if (!b || from == to) {
        ks->snap = to;
        return b ? 0 : (long)(to - from);
    }
    if (!ks->kg_count) {
        ks->kg_count = calloc(65536, sizeof *ks->kg_count);
        ks->kg_list = malloc(65536 * sizeof *ks->kg_list);
        if (!ks->kg_count || !ks->kg_list) {
            nf_store_batch_fail(b);
            return -ENOMEM;
        }
    }
    ks->frz = (frozen_t){.on = true,
                         .phase = FRZ_COUNT,
                         .from = from,
                         .to = to,
                         .pos = from,
                         .b = b,
                         .epoch = epoch};
    ks->snap = from;
    return (long)(to - from);
}

long nf_keyset_freeze_step(nf_keyset_t *ks, size_t max)
{
    return ks->frz.on ? frz_step(ks, max) : 0;
}

long nf_keyset_snapshot(nf_keyset_t *ks, nf_store_batch_t *b, uint64_t epoch)
{
    long n = nf_keyset_freeze(ks, b, epoch);
    if (n > 0 && ks->frz.on && frz_step(ks, 0) < 0)
        return -ENOMEM;
    return n;
}

/* ---------------------------------------------------------------- load */

typedef struct loader {
    nf_keyset_t *ks;
    nf_keyset_owns_fn owns;
    void *ctx;
    int64_t now;
    rec_t *v;
    size_t n, cap;
    size_t spill_at; /* bounded: every spill_at keys go to the cold tier (0: never) */
    size_t spilled;
    int rc;
    char *err;
    size_t errlen;
} loader_t;

/* err: keys of the set's kind could not go to disk (rc from nf_coldset_spill). */
static void spill_failed(const nf_keyset_t *ks, int rc, char *err, size_t errlen)
{
    snprintf(err, errlen, "state %s: writing its keys to disk (state.dir) failed: %s",
             nf_state_kind_name(ks->kind), strerror(-rc));
}

static int keep(loader_t *l, uint16_t kg, uint64_t hi, uint64_t lo, int64_t exp)
{
    if (exp <= l->now || (l->owns && !l->owns(kg, (nf_id128_t){hi, lo}, l->ctx)))
        return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4096;
        rec_t *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = (rec_t){hi, lo, rec_pack(exp, kg)};
    if (l->spill_at && l->n == l->spill_at) {
        /* In the store already: straight to disk, the ring stays for new keys. */
        int rc = nf_coldset_spill(l->ks->cold, l->v, l->n);
        if (rc != 0) {
            spill_failed(l->ks, rc, l->err, l->errlen);
            return rc == -ENOMEM ? -ENOMEM : -EIO;
        }
        l->spilled += l->n;
        l->n = 0;
    }
    return 0;
}

static int corrupt(loader_t *l, const unsigned char *k, size_t klen, const char *what)
{
    char hex[2 * LEGACY_KEY + 1];
    size_t n = klen < LEGACY_KEY ? klen : LEGACY_KEY;
    for (size_t i = 0; i < n; i++)
        snprintf(hex + 2 * i, 3, "%02x", k[i]);
    hex[2 * n] = '\0';
    snprintf(l->err, l->errlen, "state %s: key %s%s: %s", nf_state_kind_name(l->ks->kind), hex,
             klen > n ? "..." : "", what);
    return -EIO;
}

static int load_one(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
    loader_t *l = arg;
    const unsigned char *k = key, *v = val;
    uint16_t kg = (uint16_t)(k[0] << 8 | k[1]);
    if (klen == LEGACY_KEY) {
        if (vlen < 8)
            return corrupt(l, k, klen, "per-key record shorter than its 8-byte expiry");
        int64_t exp = (int64_t)nf_get_le64(v);
        if (exp == 0) /* never written so by a TTL kind; keep it one TTL rather than forever */
            exp = l->now + l->ks->ttl;
        return keep(l, kg, nf_get_be64(k + 2), nf_get_be64(k + 10), exp);
    }
    if (klen != BLOB_KEY && klen != BLOB_KEY2)
        return corrupt(l, k, klen,
                       "neither a keyset blob (12- or 20-byte key) nor a per-key record");
    if (vlen < BLOB_HEAD || v[8] != FORMAT)
        return corrupt(l, k, klen, "blob header is short or of an unknown format");
    uint32_t count = nf_get_le32(v + 9);
    if (vlen != BLOB_HEAD + (size_t)count * BLOB_REC)
        return corrupt(l, k, klen, "blob length does not match its key count");
    if ((int64_t)nf_get_le64(v) <= l->now)
        return 0; /* every key in it expired (compaction has not dropped it yet) */
    for (uint32_t i = 0; i < count; i++) {
        const unsigned char *r = v + BLOB_HEAD + (size_t)i * BLOB_REC;
        int rc = keep(l, kg, nf_get_le64(r), nf_get_le64(r + 8), (int64_t)nf_get_le64(r + 16));
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Loads into the set, which may hold keys already (kgs != NULL: only those key groups are read,
 * by prefix; NULL: every key of the kind, into an empty set). */
static long load(nf_keyset_t *ks, const uint16_t *kgs, size_t nkgs, nf_keyset_owns_fn owns,
                 void *ctx, int64_t now_ms, char *err, size_t errlen)
{
    settle(ks); /* a loaded key may extend a ring record's expiry */
    char dummy[8];
    if (!err || errlen == 0) {
        err = dummy;
        errlen = sizeof dummy;
    }
    err[0] = '\0';
    if (!kgs && ks->head != ks->tail)
        return -ENOTEMPTY;
    if (!ks->st)
        return 0;
    loader_t l = {.ks = ks,
                  .owns = owns,
                  .ctx = ctx,
                  .now = now_ms,
                  .err = err,
                  .errlen = errlen,
                  .spill_at = ks->cold ? (size_t)ks->spill_n : 0};
    int rc = 0;
    if (!kgs) {
        rc = nf_store_scan(ks->st, ks->kind, load_one, &l);
    } else {
        for (size_t i = 0; i < nkgs && rc == 0; i++) {
            unsigned char prefix[2] = {(unsigned char)(kgs[i] >> 8), (unsigned char)kgs[i]};
            rc = nf_store_scan_prefix(ks->st, ks->kind, prefix, sizeof prefix, load_one, &l);
        }
    }
    if (rc == 0 && ks->cold && (l.spilled || (ks->head - ks->tail) + l.n > ks->hot_max / 2)) {
        rc = nf_coldset_spill(ks->cold, l.v, l.n);
        if (rc == 0) {
            l.spilled += l.n;
            l.n = 0;
        } else {
            spill_failed(ks, rc, err, errlen);
        }
    }
    if (rc == -EIO && !err[0])
        snprintf(err, errlen, "state %s: reading the store failed", nf_state_kind_name(ks->kind));
    if (rc != 0) {
        free(l.v);
        return rc == -ENOMEM ? -ENOMEM : -EIO;
    }
    ks->loaded += l.spilled;
    /* Blobs come in key-group order, not time order: put the keys roughly in expiry order
     * (4096 buckets over the TTL) so the tail can drop them as they expire. */
    enum { BUCKETS = 4096 };
    size_t *start = calloc(BUCKETS + 1, sizeof *start);
    rec_t *sorted = l.n ? malloc(l.n * sizeof *sorted) : NULL;
    if (!start || (l.n && !sorted)) {
        free(start);
        free(sorted);
        free(l.v);
        return -ENOMEM;
    }
    uint64_t span = (uint64_t)ks->ttl + 1;
    for (size_t i = 0; i < l.n; i++) {
        uint64_t d = (uint64_t)(rec_exp(&l.v[i]) - now_ms);
        start[(d >= span ? span - 1 : d) * BUCKETS / span + 1]++;
    }
    for (size_t b = 1; b <= BUCKETS; b++)
        start[b] += start[b - 1];
    for (size_t i = 0; i < l.n; i++) {
        uint64_t d = (uint64_t)(rec_exp(&l.v[i]) - now_ms);
        sorted[start[(d >= span ? span - 1 : d) * BUCKETS / span]++] = l.v[i];
    }
    free(start);
    free(l.v);
    uint64_t live = ks->head - ks->tail, cap = ks->cap;
    while (cap < RING_MAX && cap < live + l.n + (live + l.n) / 4 + 16)
        cap <<= 1;
    if (cap != ks->cap && rebuild(ks, cap, now_ms) != 0) {
        free(sorted);
        return -ENOMEM;
    }
    /* Keys added since the last snapshot stay marked new; the loaded ones, in the store
     * already, are marked written only if nothing new precedes them (a set loaded into while it
     * holds new keys writes the loaded ones again with them: harmless, keys dedup on load). */
    bool all_written = ks->snap >= ks->head;
    size_t loaded = 0;
    for (size_t i = 0; i < l.n && ks->head - ks->tail < ks->cap; i++) {
        const rec_t *r = &sorted[i];
        nf_id128_t k = {r->hi, r->lo};
        uint32_t h = key_hash(rec_kg(r), k);
        uint64_t empty = 0;
        int64_t at = find(ks, rec_kg(r), k, h, &empty);
        if (at >= 0) {
            /* The same key twice (re-added after it expired, under a clock that stepped
             * back; or held already): one copy, the later expiry. */
            rec_t *old = &ks->ring[ks->slots[at].ref1 - 1];
            if (rec_exp(r) > rec_exp(old))
                old->expkg = r->expkg;
            continue;
        }
        uint64_t pos = ks->head & ks->rmask;
        ks->ring[pos] = *r;
        ks->slots[empty] = (slot_t){(uint32_t)(pos + 1), h};
        ks->head++;
        loaded++;
    }
    free(sorted);
    ks->next_exp = ks->head > ks->tail ? rec_exp(&ks->ring[ks->tail & ks->rmask]) : INT64_MAX;
    if (all_written)
        ks->snap = ks->head; /* in the store already */
    ks->loaded += loaded;
    return (long)(loaded + l.spilled);
}

long nf_keyset_load(nf_keyset_t *ks, nf_keyset_owns_fn owns, void *ctx, int64_t now_ms, char *err,
                    size_t errlen)
{
    return load(ks, NULL, 0, owns, ctx, now_ms, err, errlen);
}

long nf_keyset_load_groups(nf_keyset_t *ks, const uint16_t *kgs, size_t n, nf_keyset_owns_fn owns,
                           void *ctx, int64_t now_ms, char *err, size_t errlen)
{
    return load(ks, kgs, n, owns, ctx, now_ms, err, errlen);
}

long nf_keyset_drop(nf_keyset_t *ks, nf_keyset_owns_fn match, void *ctx, int64_t now_ms)
{
    uint64_t before = ks->head - ks->tail, expired0 = ks->expired;
    if (rebuild_drop(ks, ks->cap, now_ms, match, ctx) != 0)
        return -ENOMEM;
    ks->expired = expired0; /* rebuild counts every key it left behind as expired */
    /* Keys on disk stay until they expire: reading every run back would pause the shard for
     * seconds a gigabyte, and they are harmless — no lookup asks for a group this process no
     * longer owns, and should the group come back they are still true (committed, unexpired). */
    return (long)(before - (ks->head - ks->tail));
}

/* ---------------------------------------------------------------- stats */

void nf_keyset_stats(const nf_keyset_t *ks, nf_keyset_stats_t *out)
{
    nf_coldset_stats_t c = {0};
    if (ks->cold)
        nf_coldset_stats(ks->cold, &c);
    *out = (nf_keyset_stats_t){.keys = (size_t)(ks->head - ks->tail) + c.keys,
                               .bytes = table_bytes(ks->cap) + c.bytes,
                               .added = ks->added,
                               .present = ks->present,
                               .expired = ks->expired,
                               .loaded = ks->loaded,
                               .cold_keys = c.keys,
                               .cold_runs = c.runs,
                               .cold_bytes = c.bytes,
                               .disk_bytes = c.disk_bytes,
                               .unfiltered = c.unfiltered,
                               .cold_lookups = c.lookups,
                               .cold_reads = c.reads,
                               .cold_hits = c.hits,
                               .spills = c.spills,
                               .spill_failures = ks->spill_failures,
                               .spill_deferred = ks->spill_deferred,
                               .spill_ns = c.spill_ns,
                               .spill_ns_max = c.spill_ns_max};
}

bool nf_keyset_over_budget(const nf_keyset_t *ks)
{
    nf_keyset_stats_t st;
    nf_keyset_stats(ks, &st);
    return ks->budget != 0 && st.bytes > ks->budget;
}
