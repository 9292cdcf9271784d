/* trend.c — the trending engine (trend.h): counters of panes (one per input partition in the
 * job), one merger of windows.
 *
 * Layout of the file: byte writer/reader for the blobs, the item table (article -> count, with
 * an optional min-heap that bounds it to the top candidates), panes and their encoding, the
 * counter, the merger. */
#include "engine/trend.h"
#include "algo/bytes.h"
#include "algo/cms.h"
#include "algo/hash.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PANE_MAGIC    0x50544e4eu /* "NNTP" */
#define COUNTER_MAGIC 0x43544e4eu /* "NNTC" */
#define MERGER_MAGIC  0x4d544e4eu /* "NNTM" */
#define BLOB_VERSION  1u
#define CHECK_SEED    0x7472656e64636b31ull
#define TS_LIMIT      ((int64_t)1 << 60)
#define FREE_PANES    8 /* recycled panes kept per counter / merger */

/* ---- blobs ---- */

typedef struct wbuf {
    unsigned char *p;
    size_t len, cap;
    bool oom;
} wbuf_t;

static bool w_reserve(wbuf_t *w, size_t n)
{
    if (w->oom)
        return false;
    if (w->cap - w->len >= n)
        return true;
    size_t cap = w->cap ? w->cap * 2 : 256;
    while (cap - w->len < n)
        cap *= 2;
    unsigned char *p = realloc(w->p, cap);
    if (!p) {
        w->oom = true;
        return false;
    }
    w->p = p;
    w->cap = cap;
    return true;
}

static void w_bytes(wbuf_t *w, const void *b, size_t n)
{
    if (n && w_reserve(w, n)) {
        memcpy(w->p + w->len, b, n);
        w->len += n;
    }
}

static void w_u8(wbuf_t *w, uint8_t v)
{
    w_bytes(w, &v, 1);
}

static void w_u32(wbuf_t *w, uint32_t v)
{
    unsigned char b[4];
    nf_put_le32(b, v);
    w_bytes(w, b, 4);
}

static void w_u64(wbuf_t *w, uint64_t v)
{
    unsigned char b[8];
    nf_put_le64(b, v);
    w_bytes(w, b, 8);
}

static void w_varint(wbuf_t *w, uint64_t v)
{
    unsigned char b[10];
    size_t n = 0;
    while (v >= 0x80) {
        b[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    b[n++] = (unsigned char)v;
    w_bytes(w, b, n);
}

/* Appends the check word over everything written since `from`. */
static void w_check(wbuf_t *w, size_t from)
{
    if (!w->oom)
        w_u64(w, nf_hash64(w->p + from, w->len - from, CHECK_SEED));
}

typedef struct rbuf {
    const unsigned char *p;
    size_t len, at;
    bool bad;
} rbuf_t;

static const unsigned char *r_bytes(rbuf_t *r, size_t n)
{
    if (r->bad || r->len - r->at < n) {
        r->bad = true;
        return NULL;
    }
    const unsigned char *p = r->p + r->at;
    r->at += n;
    return p;
}

static uint8_t r_u8(rbuf_t *r)
{
    const unsigned char *p = r_bytes(r, 1);
    return p ? p[0] : 0;
}

static uint32_t r_u32(rbuf_t *r)
{
    const unsigned char *p = r_bytes(r, 4);
    return p ? nf_get_le32(p) : 0;
}

static uint64_t r_u64(rbuf_t *r)
{
    const unsigned char *p = r_bytes(r, 8);
    return p ? nf_get_le64(p) : 0;
}

static uint64_t r_varint(rbuf_t *r)
{
    uint64_t v = 0;
    for (int i = 0; i < 10; i++) {
        const unsigned char *p = r_bytes(r, 1);
        if (!p)
            return 0;
        uint64_t b = *p & 0x7f;
        if (i == 9 && b > 1)
            break;
        v |= b << (7 * i);
        if (!(*p & 0x80))
            return v;
    }
    r->bad = true;
    return 0;
}

/* Opens a blob: checks its trailing check word; the reader then covers the body. */
static bool r_open(rbuf_t *r, const void *blob, size_t len)
{
    memset(r, 0, sizeof *r);
    if (!blob || len < 8)
        return false;
    const unsigned char *p = blob;
    uint64_t want = 0;
    for (int i = 0; i < 8; i++)
        want |= (uint64_t)p[len - 8 + i] << (8 * i);
    if (want != nf_hash64(p, len - 8, CHECK_SEED))
        return false;
    r->p = p;
    r->len = len - 8;
    return true;
}

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* ---- item table ----
 * items[] is dense (index = insertion slot); slots[] is an open-addressed index over the items'
 * 64-bit key hashes (value = item index + 1, 0 = empty), linear probing, at most half full.
 * A bounded table (candidates) also keeps heap[], a min-heap of item indices ordered by
 * (count, hash): the weakest candidate is evicted when a stronger key arrives. The order is
 * total, so which keys survive depends only on the stream and not on the heap's layout (a table
 * rebuilt from a checkpoint evolves exactly like the original). */

typedef struct titem {
    uint64_t h, count;
    uint32_t heap_pos;
    uint8_t len;
    char id[NF_TREND_ID_MAX + 1];
} titem_t;

typedef struct itemtab {
    titem_t *items;
    uint32_t n, cap;
    uint32_t *slots;
    uint32_t mask;
    uint32_t *heap; /* bounded tables only */
} itemtab_t;

static uint32_t pow2_at_least(uint64_t n)
{
    uint32_t p = 16;
    while (p < n)
        p *= 2;
    return p;
}

static int tab_init(itemtab_t *t, uint32_t cap, bool bounded)
{
    memset(t, 0, sizeof *t);
    uint32_t nslots = pow2_at_least(2ull * cap);
    t->items = malloc(sizeof *t->items * cap);
    t->slots = calloc(nslots, sizeof *t->slots);
    t->heap = bounded ? malloc(sizeof *t->heap * cap) : NULL;
    if (!t->items || !t->slots || (bounded && !t->heap)) {
        free(t->items);
        free(t->slots);
        free(t->heap);
        return -ENOMEM;
    }
    t->cap = cap;
    t->mask = nslots - 1;
    return 0;
}

static void tab_free(itemtab_t *t)
{
    free(t->items);
    free(t->slots);
    free(t->heap);
    memset(t, 0, sizeof *t);
}

static void tab_reset(itemtab_t *t)
{
    if (t->n)
        memset(t->slots, 0, sizeof *t->slots * ((size_t)t->mask + 1));
    t->n = 0;
}

static size_t tab_bytes(const itemtab_t *t)
{
    return sizeof *t->items * t->cap + sizeof *t->slots * ((size_t)t->mask + 1) +
           (t->heap ? sizeof *t->heap * t->cap : 0);
}

/* Slot holding key (h, id), or the empty slot where it would go. */
static uint32_t tab_probe(const itemtab_t *t, uint64_t h, const char *id, size_t len)
{
    uint32_t i = (uint32_t)h & t->mask;
    for (;;) {
        uint32_t v = t->slots[i];
        if (!v)
            return i;
        const titem_t *it = &t->items[v - 1];
        if (it->h == h && it->len == len && memcmp(it->id, id, len) == 0)
            return i;
        i = (i + 1) & t->mask;
    }
}

/* Unbounded tables: room for `more` items. 0 or -ENOMEM (table unchanged). */
static int tab_reserve(itemtab_t *t, uint32_t more)
{
    assert(!t->heap);
    uint64_t need = (uint64_t)t->n + more;
    if (need > UINT32_MAX / 4)
        return -ENOMEM;
    if (need > t->cap) {
        uint32_t cap = t->cap ? t->cap : 16;
        while (cap < need)
            cap *= 2;
        titem_t *items = realloc(t->items, sizeof *items * cap);
        if (!items)
            return -ENOMEM;
        t->items = items;
        t->cap = cap;
    }
    if (need * 2 > (uint64_t)t->mask + 1) {
        uint32_t nslots = pow2_at_least(need * 2);
        uint32_t *slots = calloc(nslots, sizeof *slots);
        if (!slots)
            return -ENOMEM;
        free(t->slots);
        t->slots = slots;
        t->mask = nslots - 1;
        for (uint32_t k = 0; k < t->n; k++) {
            uint32_t i = (uint32_t)t->items[k].h & t->mask;
            while (t->slots[i])
                i = (i + 1) & t->mask;
            t->slots[i] = k + 1;
        }
    }
    return 0;
}

/* Appends a new item at the empty slot `slot` (from tab_probe); room must exist. */
static uint32_t tab_append(itemtab_t *t, uint32_t slot, uint64_t h, const char *id, size_t len,
                           uint64_t count)
{
    assert(t->n < t->cap && !t->slots[slot] && len <= NF_TREND_ID_MAX);
    uint32_t k = t->n++;
    titem_t *it = &t->items[k];
    it->h = h;
    it->count = count;
    it->len = (uint8_t)len;
    memcpy(it->id, id, len);
    it->id[len] = '\0';
    t->slots[slot] = k + 1;
    return k;
}

/* Removes the index entry at `slot` (backward-shift deletion keeps probe chains unbroken). */
static void tab_unslot(itemtab_t *t, uint32_t slot)
{
    uint32_t i = slot, j = slot;
    for (;;) {
        j = (j + 1) & t->mask;
        if (!t->slots[j])
            break;
        uint32_t home = (uint32_t)t->items[t->slots[j] - 1].h & t->mask;
        bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (stays)
            continue;
        t->slots[i] = t->slots[j];
        i = j;
    }
    t->slots[i] = 0;
}

static bool heap_less(const itemtab_t *t, uint32_t a, uint32_t b)
{
    const titem_t *x = &t->items[a], *y = &t->items[b];
    return x->count != y->count ? x->count < y->count : x->h < y->h;
}

static void heap_set(itemtab_t *t, uint32_t pos, uint32_t k)
{
    t->heap[pos] = k;
    t->items[k].heap_pos = pos;
}

static void heap_up(itemtab_t *t, uint32_t pos)
{
    uint32_t k = t->heap[pos];
    while (pos > 0) {
        uint32_t parent = (pos - 1) / 2;
        if (!heap_less(t, k, t->heap[parent]))
            break;
        heap_set(t, pos, t->heap[parent]);
        pos = parent;
    }
    heap_set(t, pos, k);
}

static void heap_down(itemtab_t *t, uint32_t pos)
{
    uint32_t k = t->heap[pos];
    for (;;) {
        uint32_t c = 2 * pos + 1;
        if (c >= t->n)
            break;
        if (c + 1 < t->n && heap_less(t, t->heap[c + 1], t->heap[c]))
            c++;
        if (!heap_less(t, t->heap[c], k))
            break;
        heap_set(t, pos, t->heap[c]);
        pos = c;
    }
    heap_set(t, pos, k);
}

/* Bounded table: key (h, id) now has estimate est (estimates only grow within a pane). */
static void tab_offer(itemtab_t *t, uint64_t h, const char *id, size_t len, uint64_t est)
{
    uint32_t slot = tab_probe(t, h, id, len);
    if (t->slots[slot]) {
        titem_t *it = &t->items[t->slots[slot] - 1];
        assert(est >= it->count);
        it->count = est;
        heap_down(t, it->heap_pos);
        return;
    }
    if (t->n < t->cap) {
        uint32_t k = tab_append(t, slot, h, id, len, est);
        heap_set(t, k, k);
        heap_up(t, k);
        return;
    }
    uint32_t k = t->heap[0];
    titem_t *min = &t->items[k];
    if (est < min->count || (est == min->count && h <= min->h))
        return;
    tab_unslot(t, tab_probe(t, min->h, min->id, min->len));
    slot = tab_probe(t, h, id, len); /* the deletion may have moved the empty slot */
    min->h = h;
    min->count = est;
    min->len = (uint8_t)len;
    memcpy(min->id, id, len);
    min->id[len] = '\0';
    t->slots[slot] = k + 1;
    heap_down(t, 0);
}

/* ---- panes ---- */

static size_t bitmap_bytes(unsigned n)
{
    return ((size_t)n + 7) / 8;
}

static bool bit_get(const uint8_t *b, unsigned i)
{
    return b[i / 8] >> (i % 8) & 1;
}

static void bit_set(uint8_t *b, unsigned i)
{
    b[i / 8] = (uint8_t)(b[i / 8] | 1u << (i % 8));
}

typedef struct pane {
    int64_t start;
    uint64_t events;
    nf_cms_t cms; /* unused (no cells) in exact mode */
    itemtab_t tab;
    uint8_t *added; /* merger only: bitmap of the counters whose summaries are in */
} pane_t;

static void pane_free(pane_t *p)
{
    if (!p)
        return;
    nf_cms_free(&p->cms);
    tab_free(&p->tab);
    free(p->added);
    free(p);
}

/* bounded: counter panes in sketch mode (candidates); merger panes hold unbounded unions. */
static pane_t *pane_new(const nf_trend_opts_t *o, uint32_t cand, bool bounded, unsigned ncounters)
{
    pane_t *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    bool sketch = !o->exact;
    if ((sketch && nf_cms_init(&p->cms, o->cms_width, o->cms_depth, o->seed)) ||
        tab_init(&p->tab, bounded && sketch ? cand : 64, bounded && sketch) ||
        (ncounters && !(p->added = calloc(bitmap_bytes(ncounters), 1)))) {
        pane_free(p);
        return NULL;
    }
    return p;
}

static void pane_reset(pane_t *p, int64_t start, unsigned ncounters)
{
    p->start = start;
    p->events = 0;
    if (p->cms.cells)
        nf_cms_clear(&p->cms);
    tab_reset(&p->tab);
    if (p->added)
        memset(p->added, 0, bitmap_bytes(ncounters));
}

static size_t pane_bytes(const pane_t *p)
{
    return sizeof *p + (p->cms.cells ? nf_cms_bytes(&p->cms) : 0) + tab_bytes(&p->tab);
}

/* Pane summary:
 *   u32 magic, u32 version, u8 exact, i64 start, i64 slide_ms, u64 events, u32 nitems,
 *   nitems x { u8 len, len bytes, varint count },  [sketch mode: u32 cms_len, cms blob],
 *   u64 check. */
static void pane_encode(const pane_t *p, const nf_trend_opts_t *o, wbuf_t *w)
{
    size_t from = w->len;
    w_u32(w, PANE_MAGIC);
    w_u32(w, BLOB_VERSION);
    w_u8(w, o->exact ? 1 : 0);
    w_u64(w, (uint64_t)p->start);
    w_u64(w, (uint64_t)o->slide_ms);
    w_u64(w, p->events);
    w_u32(w, p->tab.n);
    for (uint32_t k = 0; k < p->tab.n; k++) {
        const titem_t *it = &p->tab.items[k];
        w_u8(w, it->len);
        w_bytes(w, it->id, it->len);
        w_varint(w, it->count);
    }
    if (!o->exact) {
        size_t max = nf_cms_encoded_max(&p->cms);
        if (w_reserve(w, 4 + max)) {
            size_t n = nf_cms_encode(&p->cms, w->p + w->len + 4, max);
            assert(n > 0);
            w_u32(w, (uint32_t)n);
            w->len += n;
        }
    }
    w_check(w, from);
}

typedef struct pane_view {
    int64_t start;
    uint64_t events;
    uint32_t nitems;
    rbuf_t items; /* positioned at the first item */
    const unsigned char *cms;
    size_t cms_len;
} pane_view_t;

/* Validates a pane summary's structure against the options (not the sketch's cells: those are
 * validated by nf_cms_decode*, before anything is applied). */
static int pane_parse(const void *blob, size_t len, const nf_trend_opts_t *o, pane_view_t *v)
{
    rbuf_t r;
    if (!r_open(&r, blob, len))
        return -EINVAL;
    if (r_u32(&r) != PANE_MAGIC || r_u32(&r) != BLOB_VERSION || r_u8(&r) != (o->exact ? 1 : 0))
        return -EINVAL;
    v->start = (int64_t)r_u64(&r);
    int64_t slide = (int64_t)r_u64(&r);
    v->events = r_u64(&r);
    v->nitems = r_u32(&r);
    if (r.bad || slide != o->slide_ms || v->start % o->slide_ms != 0 || v->start <= -TS_LIMIT ||
        v->start >= TS_LIMIT || v->events == 0 || v->nitems > v->events)
        return -EINVAL;
    v->items = r;
    uint64_t sum = 0;
    for (uint32_t k = 0; k < v->nitems; k++) {
        uint8_t n = r_u8(&r);
        r_bytes(&r, n);
        uint64_t count = r_varint(&r);
        if (r.bad || n == 0 || n > NF_TREND_ID_MAX || count == 0)
            return -EINVAL;
        sum += count;
    }
    if (o->exact) {
        if (sum != v->events)
            return -EINVAL;
        v->cms = NULL;
        v->cms_len = 0;
    } else {
        v->cms_len = r_u32(&r);
        v->cms = r_bytes(&r, v->cms_len);
        if (r.bad)
            return -EINVAL;
    }
    return r.at == r.len ? 0 : -EINVAL;
}

static void view_next_item(pane_view_t *v, const char **id, uint8_t *len, uint64_t *count)
{
    *len = r_u8(&v->items);
    *id = (const char *)r_bytes(&v->items, *len);
    *count = r_varint(&v->items);
    assert(!v->items.bad);
}

/* ---- options ---- */

void nf_trend_opts_default(nf_trend_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->window_ms = 3600000;
    o->slide_ms = 30000;
    o->lateness_ms = 5000;
    o->idle_ms = 60000;
    o->cms_width = 2048;
    o->cms_depth = 5;
    o->top_k = 50;
    o->candidates = 0;
    o->exact = false;
    o->seed = 0x6e657773666c6f77ull;
}

int nf_trend_opts_check(const nf_trend_opts_t *o, char *err, size_t errlen)
{
    const char *why = NULL;
    if (o->slide_ms <= 0 || o->slide_ms > ((int64_t)1 << 40))
        why = "slide_ms must be in (0, 2^40]";
    else if (o->window_ms <= 0 || o->window_ms % o->slide_ms != 0 ||
             o->window_ms / o->slide_ms > 100000)
        why = "window_ms must be a positive multiple of slide_ms (at most 100000 panes)";
    else if (o->lateness_ms < 0 || o->lateness_ms > ((int64_t)1 << 40))
        why = "lateness_ms must be in [0, 2^40]";
    else if (o->idle_ms <= 0)
        why = "idle_ms must be positive";
    else if (!o->exact && (o->cms_width == 0 || o->cms_width > NF_CMS_MAX_WIDTH ||
                           o->cms_depth == 0 || o->cms_depth > NF_CMS_MAX_DEPTH))
        why = "cms_width must be in [1, 2^24] and cms_depth in [1, 32]";
    else if (o->top_k == 0 || o->top_k > 100000)
        why = "top_k must be in [1, 100000]";
    else if (o->candidates > 1000000)
        why = "candidates must be at most 1000000";
    if (why && err && errlen)
        snprintf(err, errlen, "trending options: %s", why);
    return why ? -EINVAL : 0;
}

static uint32_t opts_candidates(const nf_trend_opts_t *o)
{
    uint64_t c = o->candidates ? o->candidates : 4ull * o->top_k;
    return (uint32_t)(c < o->top_k ? o->top_k : c);
}

/* The options a blob depends on, written into counter and merger blobs and compared on load. */
static void w_opts(wbuf_t *w, const nf_trend_opts_t *o)
{
    w_u64(w, (uint64_t)o->window_ms);
    w_u64(w, (uint64_t)o->slide_ms);
    w_u64(w, (uint64_t)o->lateness_ms);
    w_u8(w, o->exact ? 1 : 0);
    w_u32(w, o->exact ? 0 : o->cms_width);
    w_u32(w, o->exact ? 0 : o->cms_depth);
    w_u64(w, o->seed);
    w_u32(w, opts_candidates(o));
}

static bool r_opts_match(rbuf_t *r, const nf_trend_opts_t *o)
{
    bool ok = (int64_t)r_u64(r) == o->window_ms;
    ok &= (int64_t)r_u64(r) == o->slide_ms;
    ok &= (int64_t)r_u64(r) == o->lateness_ms;
    ok &= r_u8(r) == (o->exact ? 1 : 0);
    ok &= r_u32(r) == (o->exact ? 0 : o->cms_width);
    ok &= r_u32(r) == (o->exact ? 0 : o->cms_depth);
    ok &= r_u64(r) == o->seed;
    ok &= r_u32(r) == opts_candidates(o);
    return ok && !r->bad;
}

/* ---- pane lists (sorted by start) with a small recycling pool ---- */

typedef struct panelist {
    pane_t **v;
    size_t n, cap;
    pane_t *pool[FREE_PANES];
    size_t npool;
} panelist_t;

static void plist_free(panelist_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        pane_free(l->v[i]);
    for (size_t i = 0; i < l->npool; i++)
        pane_free(l->pool[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* Index of the first pane with start >= s. */
static size_t plist_lower(const panelist_t *l, int64_t s)
{
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (l->v[mid]->start < s)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Inserts a fresh pane for start at index at (the caller found it absent). */
static pane_t *plist_insert(panelist_t *l, size_t at, int64_t start, const nf_trend_opts_t *o,
                            uint32_t cand, bool bounded, unsigned ncounters)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        pane_t **v = realloc(l->v, sizeof *v * cap);
        if (!v)
            return NULL;
        l->v = v;
        l->cap = cap;
    }
    pane_t *p = l->npool ? l->pool[--l->npool] : pane_new(o, cand, bounded, ncounters);
    if (!p)
        return NULL;
    pane_reset(p, start, ncounters);
    memmove(&l->v[at + 1], &l->v[at], sizeof *l->v * (l->n - at));
    l->v[at] = p;
    l->n++;
    return p;
}

/* Removes the first n panes (recycling some). */
static void plist_drop_front(panelist_t *l, size_t n)
{
    assert(n <= l->n);
    for (size_t i = 0; i < n; i++) {
        if (l->npool < FREE_PANES)
            l->pool[l->npool++] = l->v[i];
        else
            pane_free(l->v[i]);
    }
    if (n == 0)
        return; /* l->v may still be NULL: memmove(NULL, ...) is undefined even for 0 bytes */
    memmove(l->v, l->v + n, sizeof *l->v * (l->n - n));
    l->n -= n;
}

static void plist_remove(panelist_t *l, size_t at)
{
    pane_t *p = l->v[at];
    memmove(&l->v[at], &l->v[at + 1], sizeof *l->v * (l->n - at - 1));
    l->n--;
    if (l->npool < FREE_PANES)
        l->pool[l->npool++] = p;
    else
        pane_free(p);
}

/* ---- counter ---- */

typedef struct part {
    int32_t id;
    int64_t max_ts;   /* max event time seen */
    int64_t last_now; /* processing time of its last event */
    uint64_t late;
} part_t;

struct nf_trend_counter {
    nf_trend_opts_t o;
    uint32_t cand;
    part_t *parts;
    size_t nparts, capparts, last;
    panelist_t panes;
    int64_t taken_wm;
    uint64_t counted, late;
    wbuf_t out; /* reused for pane summaries */
};

nf_trend_counter_t *nf_trend_counter_new(const nf_trend_opts_t *o)
{
    if (nf_trend_opts_check(o, NULL, 0))
        return NULL;
    nf_trend_counter_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->o = *o;
    c->cand = opts_candidates(o);
    c->taken_wm = INT64_MIN;
    return c;
}

void nf_trend_counter_free(nf_trend_counter_t *c)
{
    if (!c)
        return;
    plist_free(&c->panes);
    free(c->parts);
    free(c->out.p);
    free(c);
}

static part_t *counter_part(nf_trend_counter_t *c, int32_t id, bool create)
{
    if (c->last < c->nparts && c->parts[c->last].id == id)
        return &c->parts[c->last];
    for (size_t i = 0; i < c->nparts; i++)
        if (c->parts[i].id == id) {
            c->last = i;
            return &c->parts[i];
        }
    if (!create)
        return NULL;
    if (c->nparts == c->capparts) {
        size_t cap = c->capparts ? c->capparts * 2 : 8;
        part_t *v = realloc(c->parts, sizeof *v * cap);
        if (!v)
            return NULL;
        c->parts = v;
        c->capparts = cap;
    }
    c->last = c->nparts++;
    c->parts[c->last] = (part_t){.id = id, .max_ts = INT64_MIN, .last_now = 0, .late = 0};
    return &c->parts[c->last];
}

static pane_t *counter_pane(nf_trend_counter_t *c, int64_t start)
{
    panelist_t *l = &c->panes;
    /* Events mostly land in the newest panes: look from the back. */
    size_t i = l->n;
    while (i > 0 && l->v[i - 1]->start > start)
        i--;
    if (i > 0 && l->v[i - 1]->start == start)
        return l->v[i - 1];
    return plist_insert(l, i, start, &c->o, c->cand, true, 0);
}

int nf_trend_count(nf_trend_counter_t *c, int32_t partition, const char *article_id, size_t len,
                   int64_t ts_ms, int64_t now_ms)
{
    if (len == 0 || len > NF_TREND_ID_MAX || ts_ms <= -TS_LIMIT || ts_ms >= TS_LIMIT)
        return -EINVAL;
    part_t *p = counter_part(c, partition, true);
    if (!p)
        return -ENOMEM;
    int64_t start = floor_div(ts_ms, c->o.slide_ms) * c->o.slide_ms;
    bool late = (p->max_ts != INT64_MIN && ts_ms < p->max_ts - c->o.lateness_ms) ||
                (c->taken_wm != INT64_MIN && start + c->o.slide_ms <= c->taken_wm);
    pane_t *pane = NULL;
    if (!late && !(pane = counter_pane(c, start)))
        return -ENOMEM;
    if (ts_ms > p->max_ts)
        p->max_ts = ts_ms;
    p->last_now = now_ms;
    if (late) {
        p->late++;
        c->late++;
        return 1;
    }
    uint64_t h = nf_hash64(article_id, len, c->o.seed);
    if (c->o.exact) {
        itemtab_t *t = &pane->tab;
        uint32_t slot = tab_probe(t, h, article_id, len);
        if (t->slots[slot]) {
            t->items[t->slots[slot] - 1].count++;
        } else {
            if (t->n == t->cap || (uint64_t)(t->n + 1) * 2 > (uint64_t)t->mask + 1) {
                if (tab_reserve(t, 1))
                    return -ENOMEM;
                slot = tab_probe(t, h, article_id, len);
            }
            tab_append(t, slot, h, article_id, len, 1);
        }
    } else {
        uint64_t est = nf_cms_add_estimate(&pane->cms, h, 1);
        tab_offer(&pane->tab, h, article_id, len, est);
    }
    pane->events++;
    c->counted++;
    return 0;
}

int nf_trend_counter_expect(nf_trend_counter_t *c, const int32_t *partitions, size_t n,
                            int64_t now_ms)
{
    for (size_t i = 0; i < n; i++) {
        if (counter_part(c, partitions[i], false))
            continue;
        part_t *p = counter_part(c, partitions[i], true);
        if (!p)
            return -ENOMEM;
        p->last_now = now_ms; /* max_ts stays INT64_MIN: no event yet */
    }
    return 0;
}

int64_t nf_trend_counter_watermark(const nf_trend_counter_t *c, int64_t now_ms)
{
    int64_t wm = INT64_MAX;
    bool any = false;
    for (size_t i = 0; i < c->nparts; i++) {
        const part_t *p = &c->parts[i];
        if (now_ms - p->last_now >= c->o.idle_ms)
            continue;
        if (p->max_ts == INT64_MIN)
            return INT64_MIN; /* expected, active, nothing seen: no watermark yet */
        int64_t w = p->max_ts - c->o.lateness_ms;
        wm = w < wm ? w : wm;
        any = true;
    }
    return any ? wm : INT64_MIN;
}

bool nf_trend_counter_idle(const nf_trend_counter_t *c, int64_t now_ms)
{
    for (size_t i = 0; i < c->nparts; i++)
        if (now_ms - c->parts[i].last_now < c->o.idle_ms)
            return false;
    return c->nparts > 0;
}

int nf_trend_counter_take(nf_trend_counter_t *c, int64_t now_ms, nf_trend_pane_fn fn, void *ctx,
                          int64_t *taken_wm)
{
    int64_t wm = nf_trend_counter_watermark(c, now_ms);
    if (wm == INT64_MIN && c->panes.n > 0 && nf_trend_counter_idle(c, now_ms))
        wm = c->panes.v[c->panes.n - 1]->start + c->o.slide_ms; /* idle: every pane is final */
    if (wm != INT64_MIN && wm > c->taken_wm)
        c->taken_wm = wm;
    if (taken_wm)
        *taken_wm = c->taken_wm;
    int taken = 0;
    while (c->panes.n > 0 && c->taken_wm != INT64_MIN &&
           c->panes.v[0]->start + c->o.slide_ms <= c->taken_wm) {
        c->out.len = 0;
        c->out.oom = false;
        pane_encode(c->panes.v[0], &c->o, &c->out);
        if (c->out.oom)
            return -ENOMEM;
        int r = fn(ctx, c->panes.v[0]->start, c->out.p, c->out.len);
        if (r)
            return r;
        plist_drop_front(&c->panes, 1);
        taken++;
    }
    return taken;
}

void nf_trend_counter_stats(const nf_trend_counter_t *c, nf_trend_counter_stats_t *out)
{
    memset(out, 0, sizeof *out);
    out->counted = c->counted;
    out->late = c->late;
    out->partitions = c->nparts;
    out->open_panes = c->panes.n;
    out->taken_wm = c->taken_wm;
    out->bytes = sizeof *c + sizeof *c->parts * c->capparts + c->out.cap;
    for (size_t i = 0; i < c->panes.n; i++)
        out->bytes += pane_bytes(c->panes.v[i]);
    for (size_t i = 0; i < c->panes.npool; i++)
        out->bytes += pane_bytes(c->panes.pool[i]);
}

uint64_t nf_trend_counter_late(const nf_trend_counter_t *c, int32_t partition)
{
    for (size_t i = 0; i < c->nparts; i++)
        if (c->parts[i].id == partition)
            return c->parts[i].late;
    return 0;
}

/* Counter blob: u32 magic, u32 version, options, i64 taken_wm, u64 counted, u64 late,
 * u32 nparts x {i32 id, i64 max_ts, i64 last_now, u64 late}, u32 npanes x {u32 len, pane
 * summary (with candidate estimates)}, u64 check. */
int nf_trend_counter_save(const nf_trend_counter_t *c, void **blob, size_t *len)
{
    wbuf_t w = {0};
    w_u32(&w, COUNTER_MAGIC);
    w_u32(&w, BLOB_VERSION);
    w_opts(&w, &c->o);
    w_u64(&w, (uint64_t)c->taken_wm);
    w_u64(&w, c->counted);
    w_u64(&w, c->late);
    w_u32(&w, (uint32_t)c->nparts);
    for (size_t i = 0; i < c->nparts; i++) {
        w_u32(&w, (uint32_t)c->parts[i].id);
        w_u64(&w, (uint64_t)c->parts[i].max_ts);
        w_u64(&w, (uint64_t)c->parts[i].last_now);
        w_u64(&w, c->parts[i].late);
    }
    w_u32(&w, (uint32_t)c->panes.n);
    for (size_t i = 0; i < c->panes.n; i++) {
        size_t at = w.len;
        w_u32(&w, 0);
        pane_encode(c->panes.v[i], &c->o, &w);
        if (!w.oom) {
            uint32_t n = (uint32_t)(w.len - at - 4);
            for (int b = 0; b < 4; b++)
                w.p[at + b] = (unsigned char)(n >> (8 * b));
        }
    }
    w_check(&w, 0);
    if (w.oom) {
        free(w.p);
        return -ENOMEM;
    }
    *blob = w.p;
    *len = w.len;
    return 0;
}

/* Rebuilds a counter pane from its summary (validated by pane_parse). */
static int counter_pane_restore(nf_trend_counter_t *c, const pane_view_t *v)
{
    panelist_t *l = &c->panes;
    if (l->n && l->v[l->n - 1]->start >= v->start)
        return -EINVAL; /* panes are saved in order, once each */
    if (!c->o.exact && v->nitems > c->cand)
        return -EINVAL;
    pane_t *p = plist_insert(l, l->n, v->start, &c->o, c->cand, true, 0);
    if (!p)
        return -ENOMEM;
    p->events = v->events;
    pane_view_t it = *v;
    if (c->o.exact && tab_reserve(&p->tab, v->nitems))
        return -ENOMEM;
    if (!c->o.exact && nf_cms_decode_merge(&p->cms, v->cms, v->cms_len))
        return -EINVAL;
    for (uint32_t k = 0; k < v->nitems; k++) {
        const char *id;
        uint8_t len;
        uint64_t count;
        view_next_item(&it, &id, &len, &count);
        uint64_t h = nf_hash64(id, len, c->o.seed);
        uint32_t slot = tab_probe(&p->tab, h, id, len);
        if (p->tab.slots[slot])
            return -EINVAL; /* duplicate item */
        uint32_t idx = tab_append(&p->tab, slot, h, id, len, count);
        if (!c->o.exact) {
            heap_set(&p->tab, idx, idx);
            heap_up(&p->tab, idx);
        }
    }
    return 0;
}

int nf_trend_counter_load(nf_trend_counter_t *c, const void *blob, size_t len)
{
    rbuf_t r;
    if (!r_open(&r, blob, len))
        return -EINVAL;
    if (r_u32(&r) != COUNTER_MAGIC || r_u32(&r) != BLOB_VERSION || !r_opts_match(&r, &c->o))
        return -EINVAL;
    nf_trend_counter_t *t = nf_trend_counter_new(&c->o);
    if (!t)
        return -ENOMEM;
    int err = -EINVAL;
    t->taken_wm = (int64_t)r_u64(&r);
    t->counted = r_u64(&r);
    t->late = r_u64(&r);
    uint32_t np = r_u32(&r);
    if (r.bad || np > (r.len - r.at) / 28)
        goto fail;
    for (uint32_t i = 0; i < np; i++) {
        int32_t id = (int32_t)r_u32(&r);
        if (counter_part(t, id, false)) /* duplicate partition */
            goto fail;
        part_t *p = counter_part(t, id, true);
        if (!p) {
            err = -ENOMEM;
            goto fail;
        }
        p->max_ts = (int64_t)r_u64(&r);
        p->last_now = (int64_t)r_u64(&r);
        p->late = r_u64(&r);
        if (p->max_ts != INT64_MIN && (p->max_ts <= -TS_LIMIT || p->max_ts >= TS_LIMIT))
            goto fail;
    }
    uint32_t npanes = r_u32(&r);
    for (uint32_t i = 0; i < npanes && !r.bad; i++) {
        uint32_t n = r_u32(&r);
        const unsigned char *p = r_bytes(&r, n);
        pane_view_t v;
        if (!p || pane_parse(p, n, &t->o, &v))
            goto fail;
        if ((err = counter_pane_restore(t, &v)) != 0)
            goto fail;
        err = -EINVAL;
    }
    if (r.bad || r.at != r.len)
        goto fail;
    /* Swap the loaded state in; c keeps its identity (the caller's pointer). */
    nf_trend_counter_t tmp = *c;
    *c = *t;
    *t = tmp;
    nf_trend_counter_free(t);
    return 0;
fail:
    nf_trend_counter_free(t);
    return err;
}

const char *nf_trend_fix_name(nf_trend_fix_t what)
{
    switch (what) {
    case NF_TREND_FIX_PARTITION_MAX_TS:
        return "partition max event time";
    case NF_TREND_FIX_TAKEN_WM:
        return "counter taken watermark";
    case NF_TREND_FIX_COUNTER_PANE:
        return "counter open pane";
    case NF_TREND_FIX_MERGER_WM:
        return "merger watermark of a counter";
    case NF_TREND_FIX_MERGER_DONE:
        return "merger last window end";
    case NF_TREND_FIX_MERGER_PANE:
        return "merger pane";
    }
    return "?";
}

static void fixed(nf_trend_fix_fn fix, void *ctx, nf_trend_fix_t what, int64_t id, int64_t old_v,
                  int64_t new_v, size_t *n)
{
    if (fix)
        fix(ctx, what, id, old_v, new_v);
    (*n)++;
}

size_t nf_trend_counter_clamp(nf_trend_counter_t *c, int64_t limit_ms, int64_t now_ms,
                              nf_trend_fix_fn fix, void *ctx)
{
    size_t n = 0;
    for (size_t i = 0; i < c->nparts; i++) {
        part_t *p = &c->parts[i];
        if (p->max_ts != INT64_MIN && p->max_ts > limit_ms) {
            fixed(fix, ctx, NF_TREND_FIX_PARTITION_MAX_TS, p->id, p->max_ts, now_ms, &n);
            p->max_ts = now_ms;
        }
    }
    int64_t wm = now_ms - c->o.lateness_ms;
    if (c->taken_wm != INT64_MIN && c->taken_wm > limit_ms - c->o.lateness_ms) {
        fixed(fix, ctx, NF_TREND_FIX_TAKEN_WM, 0, c->taken_wm, wm, &n);
        c->taken_wm = wm;
    }
    while (c->panes.n > 0 && c->panes.v[c->panes.n - 1]->start > limit_ms) {
        fixed(fix, ctx, NF_TREND_FIX_COUNTER_PANE, c->panes.v[c->panes.n - 1]->start,
              c->panes.v[c->panes.n - 1]->start, INT64_MIN, &n);
        plist_remove(&c->panes, c->panes.n - 1);
    }
    return n;
}

/* ---- merger ---- */

struct nf_trend_merger {
    nf_trend_opts_t o;
    uint32_t cand;
    unsigned n;
    int64_t *wm;   /* per counter; INT64_MIN = never reported */
    uint8_t *idle; /* per counter: 1 = idle, left out of the min watermark until it reports */
    int64_t done;  /* last processed window end; INT64_MIN = none */
    uint64_t windows;
    panelist_t panes;
    nf_cms_t win;      /* the window's summed sketch (sketch mode) */
    itemtab_t scratch; /* the window's union of items */
    uint32_t *order;
    uint32_t order_cap;
    nf_trend_ranked_t *ranked;
    /* Ranking by group (nf_trend_merger_set_group): the window's groups, per group its lead
     * (an index into scratch) and members, and the groups' order. */
    nf_trend_group_fn group;
    void *group_ctx;
    itemtab_t groups;
    uint32_t *glead, *gmembers, *gorder;
    uint32_t gcap;
};

nf_trend_merger_t *nf_trend_merger_new(const nf_trend_opts_t *o, unsigned ncounters)
{
    if (nf_trend_opts_check(o, NULL, 0) || ncounters == 0 || ncounters > 65536)
        return NULL;
    nf_trend_merger_t *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->o = *o;
    m->cand = opts_candidates(o);
    m->n = ncounters;
    m->done = INT64_MIN;
    m->wm = malloc(sizeof *m->wm * ncounters);
    m->idle = calloc(ncounters, 1);
    m->ranked = malloc(sizeof *m->ranked * o->top_k);
    if (!m->wm || !m->idle || !m->ranked || tab_init(&m->scratch, 256, false) ||
        (!o->exact && nf_cms_init(&m->win, o->cms_width, o->cms_depth, o->seed))) {
        nf_trend_merger_free(m);
        return NULL;
    }
    for (unsigned i = 0; i < ncounters; i++)
        m->wm[i] = INT64_MIN;
    return m;
}

void nf_trend_merger_free(nf_trend_merger_t *m)
{
    if (!m)
        return;
    plist_free(&m->panes);
    nf_cms_free(&m->win);
    tab_free(&m->scratch);
    tab_free(&m->groups);
    free(m->glead);
    free(m->gmembers);
    free(m->gorder);
    free(m->order);
    free(m->ranked);
    free(m->wm);
    free(m->idle);
    free(m);
}

int nf_trend_merger_add_pane(nf_trend_merger_t *m, unsigned counter, const void *blob, size_t len)
{
    pane_view_t v;
    if (counter >= m->n || pane_parse(blob, len, &m->o, &v))
        return -EINVAL;
    if (m->done != INT64_MIN && v.start + m->o.window_ms <= m->done)
        return 1;
    size_t at = plist_lower(&m->panes, v.start);
    pane_t *p = at < m->panes.n && m->panes.v[at]->start == v.start ? m->panes.v[at] : NULL;
    if (p && bit_get(p->added, counter))
        return -EEXIST;
    bool fresh = !p;
    if (fresh && !(p = plist_insert(&m->panes, at, v.start, &m->o, m->cand, false, m->n)))
        return -ENOMEM;
    /* Everything that can fail happens before the pane changes. */
    int err = tab_reserve(&p->tab, v.nitems) ? -ENOMEM : 0;
    if (!err && !m->o.exact)
        err = nf_cms_decode_merge(&p->cms, v.cms, v.cms_len);
    if (err) {
        if (fresh)
            plist_remove(&m->panes, at);
        return err;
    }
    for (uint32_t k = 0; k < v.nitems; k++) {
        const char *id;
        uint8_t n;
        uint64_t count;
        view_next_item(&v, &id, &n, &count);
        uint64_t h = nf_hash64(id, n, m->o.seed);
        uint32_t slot = tab_probe(&p->tab, h, id, n);
        if (p->tab.slots[slot])
            p->tab.items[p->tab.slots[slot] - 1].count += count;
        else
            tab_append(&p->tab, slot, h, id, n, count);
    }
    p->events += v.events;
    bit_set(p->added, counter);
    return 0;
}

int nf_trend_merger_set_watermark(nf_trend_merger_t *m, unsigned counter, int64_t wm)
{
    if (counter >= m->n)
        return -EINVAL;
    if (wm > m->wm[counter])
        m->wm[counter] = wm;
    m->idle[counter] = 0;
    return 0;
}

int nf_trend_merger_set_idle(nf_trend_merger_t *m, unsigned counter, int64_t wm)
{
    if (counter >= m->n)
        return -EINVAL;
    if (wm > m->wm[counter])
        m->wm[counter] = wm;
    m->idle[counter] = 1;
    return 0;
}

/* The watermark windows may be emitted up to: the min over the active counters; with none
 * active, the min over the idle ones that ever reported (each handed over all it had). */
static int64_t merger_watermark(const nf_trend_merger_t *m)
{
    int64_t active = INT64_MAX, idle = INT64_MAX;
    bool any_active = false, any_idle = false;
    for (unsigned i = 0; i < m->n; i++) {
        if (!m->idle[i]) {
            any_active = true;
            active = m->wm[i] < active ? m->wm[i] : active;
        } else if (m->wm[i] != INT64_MIN) {
            any_idle = true;
            idle = m->wm[i] < idle ? m->wm[i] : idle;
        }
    }
    return any_active ? active : any_idle ? idle : INT64_MIN;
}

/* Article ids by bytes, a shorter prefix first. */
static int cmp_ids(const titem_t *x, const titem_t *y)
{
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->id, y->id, n);
    if (c)
        return c;
    return (x->len > y->len) - (x->len < y->len);
}

static int cmp_ranked(const void *a, const void *b, void *arg)
{
    const titem_t *items = arg;
    const titem_t *x = &items[*(const uint32_t *)a], *y = &items[*(const uint32_t *)b];
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return cmp_ids(x, y);
}

void nf_trend_merger_set_group(nf_trend_merger_t *m, nf_trend_group_fn fn, void *ctx)
{
    m->group = fn;
    m->group_ctx = ctx;
}

/* Room for n groups in the per-group arrays. 0 or -ENOMEM. */
static int groups_reserve(nf_trend_merger_t *m, uint32_t n)
{
    if (!m->groups.slots && tab_init(&m->groups, 64, false))
        return -ENOMEM;
    if (tab_reserve(&m->groups, n))
        return -ENOMEM;
    if (m->groups.cap <= m->gcap)
        return 0;
    uint32_t cap = m->groups.cap;
    uint32_t *l = realloc(m->glead, sizeof *l * cap);
    if (l)
        m->glead = l;
    uint32_t *g = realloc(m->gmembers, sizeof *g * cap);
    if (g)
        m->gmembers = g;
    uint32_t *o = realloc(m->gorder, sizeof *o * cap);
    if (o)
        m->gorder = o;
    if (!l || !g || !o)
        return -ENOMEM;
    m->gcap = cap;
    return 0;
}

/* Groups by score desc, then by their leads as cmp_ranked orders articles: a list by story is
 * ordered as a list by article would be if each story were its lead. */
static int cmp_groups(const void *a, const void *b, void *arg)
{
    const nf_trend_merger_t *m = arg;
    const titem_t *g = m->groups.items, *t = m->scratch.items;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (g[x].count != g[y].count)
        return g[x].count > g[y].count ? -1 : 1;
    return cmp_ids(&t[m->glead[x]], &t[m->glead[y]]);
}

/* The window's scored items (m->scratch, ranked in m->order) summed by group into m->ranked:
 * visiting the items in rank order makes each group's first member its lead. */
static int merger_groups(nf_trend_merger_t *m, size_t *nout)
{
    const itemtab_t *t = &m->scratch;
    itemtab_t *g = &m->groups;
    tab_reset(g);
    if (groups_reserve(m, t->n))
        return -ENOMEM;
    for (uint32_t k = 0; k < t->n; k++) {
        const titem_t *it = &t->items[m->order[k]];
        char key[NF_TREND_ID_MAX + 1];
        size_t len = m->group(m->group_ctx, it->id, it->len, key);
        const char *id = len && len <= NF_TREND_ID_MAX ? key : it->id;
        len = id == key ? len : it->len;
        uint64_t h = nf_hash64(id, len, m->o.seed);
        uint32_t slot = tab_probe(g, h, id, len);
        if (g->slots[slot]) {
            uint32_t x = g->slots[slot] - 1;
            g->items[x].count += it->count;
            m->gmembers[x]++;
            continue;
        }
        uint32_t x = tab_append(g, slot, h, id, len, it->count);
        m->glead[x] = m->order[k];
        m->gmembers[x] = 1;
    }
    for (uint32_t k = 0; k < g->n; k++)
        m->gorder[k] = k;
    qsort_r(m->gorder, g->n, sizeof *m->gorder, cmp_groups, m);
    size_t n = g->n < m->o.top_k ? g->n : m->o.top_k;
    for (size_t k = 0; k < n; k++) {
        uint32_t x = m->gorder[k];
        const titem_t *gi = &g->items[x], *lead = &t->items[m->glead[x]];
        m->ranked[k] =
            (nf_trend_ranked_t){gi->id, gi->len, gi->count, lead->id, lead->len, m->gmembers[x]};
    }
    *nout = n;
    return 0;
}

/* Scores and ranks the window ending at W into m->ranked; returns how many. */
static int merger_window(nf_trend_merger_t *m, int64_t W, size_t *nout)
{
    size_t lo = plist_lower(&m->panes, W - m->o.window_ms), hi = plist_lower(&m->panes, W);
    itemtab_t *t = &m->scratch;
    tab_reset(t);
    if (!m->o.exact)
        nf_cms_clear(&m->win);
    for (size_t i = lo; i < hi; i++) {
        const pane_t *p = m->panes.v[i];
        if (!m->o.exact)
            nf_cms_merge(&m->win, &p->cms);
        if (tab_reserve(t, p->tab.n))
            return -ENOMEM;
        for (uint32_t k = 0; k < p->tab.n; k++) {
            const titem_t *it = &p->tab.items[k];
            uint32_t slot = tab_probe(t, it->h, it->id, it->len);
            if (t->slots[slot])
                t->items[t->slots[slot] - 1].count += it->count;
            else
                tab_append(t, slot, it->h, it->id, it->len, it->count);
        }
    }
    if (t->n > m->order_cap) {
        uint32_t *o = realloc(m->order, sizeof *o * t->cap);
        if (!o)
            return -ENOMEM;
        m->order = o;
        m->order_cap = t->cap;
    }
    for (uint32_t k = 0; k < t->n; k++) {
        if (!m->o.exact)
            t->items[k].count = nf_cms_estimate(&m->win, t->items[k].h);
        m->order[k] = k;
    }
    qsort_r(m->order, t->n, sizeof *m->order, cmp_ranked, t->items); /* glibc's qsort_r */
    if (m->group)
        return merger_groups(m, nout);
    size_t n = t->n < m->o.top_k ? t->n : m->o.top_k;
    for (size_t k = 0; k < n; k++) {
        const titem_t *it = &t->items[m->order[k]];
        m->ranked[k] = (nf_trend_ranked_t){it->id, it->len, it->count, it->id, it->len, 1};
    }
    *nout = n;
    return 0;
}

/* Forgets panes that no window after `done` can contain. */
static void merger_drop(nf_trend_merger_t *m, nf_trend_drop_fn drop, void *ctx)
{
    size_t n = 0;
    while (n < m->panes.n && m->panes.v[n]->start + m->o.window_ms <= m->done) {
        if (drop)
            drop(ctx, m->panes.v[n]->start);
        n++;
    }
    plist_drop_front(&m->panes, n);
}

int nf_trend_merger_emit(nf_trend_merger_t *m, nf_trend_window_fn fn, nf_trend_drop_fn drop,
                         void *ctx)
{
    int64_t gwm = merger_watermark(m);
    if (gwm == INT64_MIN)
        return 0;
    int64_t wmax = floor_div(gwm, m->o.slide_ms) * m->o.slide_ms;
    if (m->done != INT64_MIN && wmax <= m->done)
        return 0;
    int emitted = 0;
    int64_t W = m->done == INT64_MIN ? INT64_MIN : m->done + m->o.slide_ms;
    for (;;) {
        /* The next window end holding a pane: skip the empty stretch in one step. */
        size_t first = W == INT64_MIN ? 0 : plist_lower(&m->panes, W - m->o.window_ms);
        if (first == m->panes.n)
            break;
        int64_t next = m->panes.v[first]->start + m->o.slide_ms;
        if (W == INT64_MIN || next > W)
            W = next;
        if (W > wmax)
            break;
        size_t n = 0;
        int r = merger_window(m, W, &n);
        if (r)
            return r;
        assert(n > 0);
        r = fn(ctx, W - m->o.window_ms, W, m->ranked, n);
        if (r)
            return r;
        m->done = W;
        m->windows++;
        emitted++;
        merger_drop(m, drop, ctx);
        W += m->o.slide_ms;
    }
    m->done = wmax;
    merger_drop(m, drop, ctx);
    return emitted;
}

void nf_trend_merger_stats(const nf_trend_merger_t *m, nf_trend_merger_stats_t *out)
{
    memset(out, 0, sizeof *out);
    out->panes = m->panes.n;
    out->done_end = m->done;
    out->windows = m->windows;
    out->bytes = sizeof *m + (sizeof *m->wm + 1) * m->n + tab_bytes(&m->scratch) +
                 tab_bytes(&m->groups) + sizeof(uint32_t) * 3 * m->gcap +
                 sizeof *m->order * m->order_cap + sizeof *m->ranked * m->o.top_k +
                 (m->win.cells ? nf_cms_bytes(&m->win) : 0);
    for (size_t i = 0; i < m->panes.n; i++)
        out->bytes += pane_bytes(m->panes.v[i]) + bitmap_bytes(m->n);
    for (size_t i = 0; i < m->panes.npool; i++)
        out->bytes += pane_bytes(m->panes.pool[i]) + bitmap_bytes(m->n);
}

/* Merger meta: u32 magic, u32 version (2), options, u32 ncounters, i64 done, u64 windows,
 * ncounters x {i64 watermark, u8 idle}, u64 check. Version 1 (no idle byte) was written while
 * counters were per shard; only nf_trend_merger_adopt_done reads it. */
#define MERGER_VERSION 2u
int nf_trend_merger_save(const nf_trend_merger_t *m, void **blob, size_t *len)
{
    wbuf_t w = {0};
    w_u32(&w, MERGER_MAGIC);
    w_u32(&w, MERGER_VERSION);
    w_opts(&w, &m->o);
    w_u32(&w, m->n);
    w_u64(&w, (uint64_t)m->done);
    w_u64(&w, m->windows);
    for (unsigned i = 0; i < m->n; i++) {
        w_u64(&w, (uint64_t)m->wm[i]);
        w_u8(&w, m->idle[i]);
    }
    w_check(&w, 0);
    if (w.oom) {
        free(w.p);
        return -ENOMEM;
    }
    *blob = w.p;
    *len = w.len;
    return 0;
}

long nf_trend_merger_blob_counters(const void *blob, size_t len)
{
    rbuf_t r;
    nf_trend_opts_t any = {0};
    uint32_t version = 0;
    if (!r_open(&r, blob, len) || r_u32(&r) != MERGER_MAGIC ||
        ((version = r_u32(&r)) != MERGER_VERSION && version != 1))
        return -EINVAL;
    (void)r_opts_match(&r, &any); /* reads past the options, whatever they are */
    uint32_t n = r_u32(&r);
    return r.bad ? -EINVAL : (long)n;
}

int nf_trend_merger_adopt_done(nf_trend_merger_t *m, const void *blob, size_t len)
{
    rbuf_t r;
    uint32_t version = 0;
    if (!r_open(&r, blob, len) || r_u32(&r) != MERGER_MAGIC ||
        ((version = r_u32(&r)) != MERGER_VERSION && version != 1) || !r_opts_match(&r, &m->o))
        return -EINVAL;
    (void)r_u32(&r);
    int64_t done = (int64_t)r_u64(&r);
    uint64_t windows = r_u64(&r);
    if (r.bad || (done != INT64_MIN && floor_div(done, m->o.slide_ms) * m->o.slide_ms != done))
        return -EINVAL;
    if (done > m->done)
        m->done = done;
    m->windows = windows > m->windows ? windows : m->windows;
    merger_drop(m, NULL, NULL);
    return 0;
}

int nf_trend_merger_load(nf_trend_merger_t *m, const void *blob, size_t len)
{
    if (m->panes.n)
        return -EBUSY;
    rbuf_t r;
    if (!r_open(&r, blob, len))
        return -EINVAL;
    if (r_u32(&r) != MERGER_MAGIC || r_u32(&r) != MERGER_VERSION || !r_opts_match(&r, &m->o))
        return -EINVAL;
    uint32_t n = r_u32(&r);
    int64_t done = (int64_t)r_u64(&r);
    uint64_t windows = r_u64(&r);
    if (r.bad || r.len - r.at != 9ull * n ||
        (done != INT64_MIN && floor_div(done, m->o.slide_ms) * m->o.slide_ms != done))
        return -EINVAL;
    if (n > m->n)
        return -EXDEV;
    m->done = done;
    m->windows = windows;
    for (unsigned i = 0; i < n; i++) {
        m->wm[i] = (int64_t)r_u64(&r);
        m->idle[i] = r_u8(&r) ? 1 : 0;
    }
    return 0;
}

size_t nf_trend_merger_clamp(nf_trend_merger_t *m, int64_t limit_ms, int64_t now_ms,
                             nf_trend_fix_fn fix, nf_trend_drop_fn drop, void *ctx)
{
    size_t n = 0;
    int64_t bound = limit_ms - m->o.lateness_ms, wm = now_ms - m->o.lateness_ms;
    for (unsigned i = 0; i < m->n; i++) {
        if (m->wm[i] != INT64_MIN && m->wm[i] > bound) {
            fixed(fix, ctx, NF_TREND_FIX_MERGER_WM, i, m->wm[i], wm, &n);
            m->wm[i] = wm;
        }
    }
    if (m->done != INT64_MIN && m->done > bound) {
        int64_t done = floor_div(wm, m->o.slide_ms) * m->o.slide_ms;
        fixed(fix, ctx, NF_TREND_FIX_MERGER_DONE, 0, m->done, done, &n);
        m->done = done;
    }
    while (m->panes.n > 0 && m->panes.v[m->panes.n - 1]->start > limit_ms) {
        int64_t start = m->panes.v[m->panes.n - 1]->start;
        fixed(fix, ctx, NF_TREND_FIX_MERGER_PANE, start, start, INT64_MIN, &n);
        if (drop)
            drop(ctx, start);
        plist_remove(&m->panes, m->panes.n - 1);
    }
    return n;
}
