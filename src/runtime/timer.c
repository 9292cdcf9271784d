/* timer.c — see timer.h. The placement rule and the cascade are the classic ones (Varghese &
 * Lauck; the Linux timer wheel before 4.8): index by the deadline's bits at the level whose
 * range covers the distance from next_tick; when level 0 wraps, the matching slot of level 1
 * is re-placed, and so on up. Bitmaps of non-empty slots let advance() skip empty stretches. */
#include "runtime/timer.h"

#include <assert.h>
#include <string.h>

#define L0_SIZE   (1u << NF_WHEEL_L0_BITS)
#define L0_MASK   (L0_SIZE - 1)
#define LN_SIZE   (1u << NF_WHEEL_LN_BITS)
#define LN_MASK   (LN_SIZE - 1)
#define LN_TOP    (NF_WHEEL_LEVELS - 1) /* number of upper levels */
#define MAX_SPAN  ((1ull << (NF_WHEEL_L0_BITS + LN_TOP * NF_WHEEL_LN_BITS)) - 1)
#define OFF_WHEEL 0xff

/* Shift of upper level k (0-based): its slots span 2^shift ticks. */
static inline unsigned ln_shift(unsigned k)
{
    return NF_WHEEL_L0_BITS + k * NF_WHEEL_LN_BITS;
}

static void list_push(nf_timer_t **head, nf_timer_t *t)
{
    t->next = *head;
    if (t->next)
        t->next->pprev = &t->next;
    *head = t;
    t->pprev = head;
}

/* Unlinks t from whatever list it is on and keeps the occupancy maps true. */
static void unlink_timer(nf_wheel_t *w, nf_timer_t *t)
{
    *t->pprev = t->next;
    if (t->next)
        t->next->pprev = t->pprev;
    t->next = NULL;
    t->pprev = NULL;
    if (t->level == 0) {
        if (!w->l0[t->slot])
            w->l0_map[t->slot >> 6] &= ~(1ull << (t->slot & 63));
    } else if (t->level != OFF_WHEEL) {
        if (!w->ln[t->level - 1][t->slot])
            w->ln_map[t->level - 1] &= ~(1ull << t->slot);
    }
    t->level = OFF_WHEEL;
}

static void push_off_wheel(nf_timer_t **head, nf_timer_t *t)
{
    list_push(head, t);
    t->level = OFF_WHEEL;
}

static uint64_t tick_ceil(uint64_t ns)
{
    return ns / NF_WHEEL_TICK_NS + (ns % NF_WHEEL_TICK_NS != 0);
}

/* Puts an armed timer into the slot for its expires_tick relative to next_tick. */
static void place(nf_wheel_t *w, nf_timer_t *t)
{
    uint64_t expires = t->expires_tick;
    if (expires < w->next_tick)
        expires = w->next_tick; /* overdue: the next processed tick */
    uint64_t delta = expires - w->next_tick;
    if (delta > MAX_SPAN) {
        /* Parked at the far end; re-placed (not fired) when it comes round. */
        delta = MAX_SPAN;
        expires = w->next_tick + MAX_SPAN;
    }
    if (delta < L0_SIZE) {
        unsigned idx = (unsigned)(expires & L0_MASK);
        list_push(&w->l0[idx], t);
        w->l0_map[idx >> 6] |= 1ull << (idx & 63);
        t->level = 0;
        t->slot = (uint16_t)idx;
        return;
    }
    unsigned k = 0;
    while (k < LN_TOP - 1 && delta >= (1ull << ln_shift(k + 1)))
        k++;
    unsigned idx = (unsigned)(expires >> ln_shift(k)) & LN_MASK;
    list_push(&w->ln[k][idx], t);
    w->ln_map[k] |= 1ull << idx;
    t->level = (uint8_t)(k + 1);
    t->slot = (uint16_t)idx;
}

void nf_timer_init(nf_timer_t *t, nf_timer_fn fn, void *arg)
{
    memset(t, 0, sizeof *t);
    t->fn = fn;
    t->arg = arg;
    t->level = OFF_WHEEL;
}

void nf_wheel_init(nf_wheel_t *w, uint64_t now_ns)
{
    memset(w, 0, sizeof *w);
    w->next_tick = now_ns / NF_WHEEL_TICK_NS + 1;
}

void nf_wheel_arm(nf_wheel_t *w, nf_timer_t *t, uint64_t deadline_ns, uint64_t period_ns)
{
    if (t->armed)
        nf_wheel_cancel(w, t);
    t->deadline_ns = deadline_ns;
    t->period_ns = period_ns;
    t->expires_tick = tick_ceil(deadline_ns);
    t->seq = w->seq++;
    t->armed = true;
    w->count++;
    if (w->advancing_to && t->expires_tick <= w->advancing_to)
        push_off_wheel(&w->later, t); /* due within this advance: fire on the next one */
    else
        place(w, t);
}

void nf_wheel_cancel(nf_wheel_t *w, nf_timer_t *t)
{
    if (!t->armed)
        return;
    unlink_timer(w, t);
    t->armed = false;
    assert(w->count > 0);
    w->count--;
}

/* Re-places every timer of a higher-level slot; they land in lower levels. */
static void cascade(nf_wheel_t *w, unsigned k, unsigned idx)
{
    nf_timer_t *t = w->ln[k][idx];
    w->ln[k][idx] = NULL;
    w->ln_map[k] &= ~(1ull << idx);
    while (t) {
        nf_timer_t *next = t->next;
        t->next = NULL;
        t->pprev = NULL;
        t->level = OFF_WHEEL;
        place(w, t);
        t = next;
    }
}

/* First set bit of a 64-bit map at a position >= from (cyclically); distance or -1. */
static int next_bit_cyclic(uint64_t map, unsigned from)
{
    if (!map)
        return -1;
    uint64_t rot = (map >> from) | (from ? map << (64 - from) : 0);
    return __builtin_ctzll(rot);
}

/* The first tick >= w->next_tick at which anything happens: a non-empty level-0 slot fires or
 * a non-empty upper slot cascades. Level-0 slots are only searched up to the next wrap, where
 * the cascade of level 1 may refill them. */
static uint64_t next_event_tick(const nf_wheel_t *w)
{
    uint64_t t = w->next_tick;
    uint64_t window_end = (t | L0_MASK) + 1; /* next multiple of 256 */
    uint64_t best = UINT64_MAX;
    for (unsigned i = (unsigned)(t & L0_MASK); i < L0_SIZE;) {
        uint64_t word = w->l0_map[i >> 6] >> (i & 63);
        if (word) {
            best = t + (unsigned)__builtin_ctzll(word) + (i - (unsigned)(t & L0_MASK));
            break;
        }
        i = (i | 63) + 1;
    }
    /* Not an early return: when t is itself a wrap, an upper slot may cascade at t. */
    for (unsigned k = 0; k < LN_TOP; k++) {
        if (!w->ln_map[k])
            continue;
        unsigned s = ln_shift(k);
        uint64_t span = 1ull << s;
        uint64_t boundary = (t + span - 1) & ~(span - 1); /* first multiple of 2^s >= t */
        unsigned idx = (unsigned)(boundary >> s) & LN_MASK;
        int d = next_bit_cyclic(w->ln_map[k], idx);
        uint64_t at = boundary + (uint64_t)d * span;
        if (at < best)
            best = at;
    }
    /* Level-0 timers at indices below t's were placed for the next window: they fire after
     * the wrap, so the wrap itself is the next event (it may also cascade). */
    if (best > window_end && (w->l0_map[0] | w->l0_map[1] | w->l0_map[2] | w->l0_map[3]))
        best = window_end;
    return best;
}

static bool before(const nf_timer_t *a, const nf_timer_t *b)
{
    return a->deadline_ns < b->deadline_ns || (a->deadline_ns == b->deadline_ns && a->seq < b->seq);
}

/* Bottom-up merge sort of a singly linked (next) list; O(n log n), no allocation, stable. */
static nf_timer_t *sort_list(nf_timer_t *head)
{
    if (!head || !head->next)
        return head;
    for (size_t width = 1;; width *= 2) {
        nf_timer_t *rest = head, *out = NULL, **tail = &out;
        size_t merges = 0;
        while (rest) {
            merges++;
            nf_timer_t *a = rest, *b = rest;
            size_t na = 0;
            while (b && na < width) {
                b = b->next;
                na++;
            }
            size_t nb = width;
            while (na > 0 || (nb > 0 && b)) {
                nf_timer_t *pick;
                if (na == 0 || (nb > 0 && b && before(b, a))) {
                    pick = b;
                    b = b->next;
                    nb--;
                } else {
                    pick = a;
                    a = a->next;
                    na--;
                }
                *tail = pick;
                tail = &pick->next;
            }
            rest = b;
        }
        *tail = NULL;
        head = out;
        if (merges <= 1)
            return head;
    }
}

static uint64_t fire_tick(nf_wheel_t *w, uint64_t tick, uint64_t now_ns, nf_wheel_fire_fn fire,
                          void *ctx)
{
    unsigned idx = (unsigned)(tick & L0_MASK);
    if (idx == 0) {
        for (unsigned k = 0; k < LN_TOP; k++) {
            unsigned i = (unsigned)(tick >> ln_shift(k)) & LN_MASK;
            if (w->ln[k][i])
                cascade(w, k, i);
            if (i != 0)
                break;
        }
    }
    /* Detach this tick's slot, sort it, and fire from a list that callbacks may edit. */
    nf_timer_t *list = w->l0[idx];
    w->l0[idx] = NULL;
    w->l0_map[idx >> 6] &= ~(1ull << (idx & 63));
    w->next_tick = tick + 1;
    if (!list)
        return 0;
    w->firing = sort_list(list);
    for (nf_timer_t **pp = &w->firing; *pp; pp = &(*pp)->next) {
        (*pp)->pprev = pp;
        (*pp)->level = OFF_WHEEL;
    }
    uint64_t fired = 0;
    while (w->firing) {
        nf_timer_t *t = w->firing;
        unlink_timer(w, t);
        if (t->expires_tick > tick) {
            place(w, t); /* parked beyond the wheel's span: not due yet */
            continue;
        }
        if (t->period_ns) {
            uint64_t missed = (now_ns - t->deadline_ns) / t->period_ns + 1;
            t->deadline_ns += missed * t->period_ns;
            t->expires_tick = tick_ceil(t->deadline_ns);
            t->seq = w->seq++;
            push_off_wheel(&w->later, t);
        } else {
            t->armed = false;
            w->count--;
        }
        fired++;
        fire(ctx, t);
    }
    return fired;
}

uint64_t nf_wheel_advance(nf_wheel_t *w, uint64_t now_ns, nf_wheel_fire_fn fire, void *ctx)
{
    uint64_t now_tick = now_ns / NF_WHEEL_TICK_NS, fired = 0;
    w->advancing_to = now_tick;
    while (w->next_tick <= now_tick) {
        uint64_t at = w->count ? next_event_tick(w) : UINT64_MAX;
        if (at > now_tick) {
            w->next_tick = now_tick + 1;
            break;
        }
        w->next_tick = at; /* cascades place relative to the tick being processed */
        fired += fire_tick(w, at, now_ns, fire, ctx);
    }
    w->advancing_to = 0;
    while (w->later) {
        nf_timer_t *t = w->later;
        unlink_timer(w, t);
        place(w, t);
    }
    return fired;
}

uint64_t nf_wheel_next_ns(const nf_wheel_t *w)
{
    if (w->count == 0)
        return UINT64_MAX;
    uint64_t at = next_event_tick(w);
    if (w->later && w->next_tick < at)
        at = w->next_tick;
    return at == UINT64_MAX ? UINT64_MAX : at * NF_WHEEL_TICK_NS;
}
