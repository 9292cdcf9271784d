/* timer.h — hierarchical timing wheel behind nf_timer_* (runtime.h).
 *
 * Classic cascading wheel with 1 ms ticks: level 0 has 256 one-tick slots, levels 1-4 have 64
 * slots each covering 2^8, 2^14, 2^20 and 2^26 ticks, so a timer up to ~49 days ahead is placed
 * in O(1); farther deadlines are parked in the last level and re-placed when they come round.
 * Arm and cancel are O(1) (intrusive lists, no allocation). Expiry visits only non-empty slots
 * and the cascades of non-empty higher-level slots (found with occupancy bitmaps). Timers in the
 * slot of one tick are sorted by (deadline_ns, arm sequence) before they fire, so the firing order
 * is exact, not just per tick.
 *
 * A timer never fires early: it is due at tick ceil(deadline_ns / 1 ms), and ticks are processed
 * only once the clock has reached them. A timer armed while the wheel is firing, for a tick
 * already processed, fires on the next nf_wheel_advance() (no unbounded loop inside one call).
 *
 * The wheel is driven by the caller's clock (tests use a fake one). Single-threaded. */
#ifndef NF_TIMER_H
#define NF_TIMER_H

#include "runtime/runtime.h"

#define NF_WHEEL_TICK_NS 1000000ull
#define NF_WHEEL_L0_BITS 8
#define NF_WHEEL_LN_BITS 6
#define NF_WHEEL_LEVELS  5

typedef struct nf_wheel {
    uint64_t next_tick;    /* the first tick not processed yet */
    uint64_t count;        /* armed timers */
    uint64_t seq;          /* arm order, for ties */
    nf_timer_t *firing;    /* timers of the tick being fired, sorted */
    nf_timer_t *later;     /* armed during an advance for a tick it covers: placed at its end */
    uint64_t advancing_to; /* the last tick of the advance in progress, or 0 */
    nf_timer_t *l0[1u << NF_WHEEL_L0_BITS];
    nf_timer_t *ln[NF_WHEEL_LEVELS - 1][1u << NF_WHEEL_LN_BITS];
    /* Occupancy bitmaps: advance() jumps straight to the next non-empty slot or cascade, so a
     * clock jump of days (a stalled process) costs O(timers), not O(ticks). */
    uint64_t l0_map[(1u << NF_WHEEL_L0_BITS) / 64];
    uint64_t ln_map[NF_WHEEL_LEVELS - 1];
} nf_wheel_t;

typedef void (*nf_wheel_fire_fn)(void *ctx, nf_timer_t *t);

void nf_wheel_init(nf_wheel_t *w, uint64_t now_ns);
/* Arms t at deadline_ns/period_ns (re-arms if armed). */
void nf_wheel_arm(nf_wheel_t *w, nf_timer_t *t, uint64_t deadline_ns, uint64_t period_ns);
void nf_wheel_cancel(nf_wheel_t *w, nf_timer_t *t);
/* Fires every timer due at now_ns, in order, calling fire(ctx, t) with t already disarmed (or,
 * for a periodic timer, already re-armed at its next period). Returns the number fired. */
uint64_t nf_wheel_advance(nf_wheel_t *w, uint64_t now_ns, nf_wheel_fire_fn fire, void *ctx);
/* A time by which nf_wheel_advance() must next be called: the next due tick when it is within
 * the current 256-tick window, else the next cascade point. UINT64_MAX if no timer is armed. */
uint64_t nf_wheel_next_ns(const nf_wheel_t *w);

#endif
