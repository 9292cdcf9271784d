/* trend.h — the trending engine (docs/ARCHITECTURE.md §1 and §3 "A read event", issue 5):
 * event-time sliding windows of read events, ranked top-K articles per slide. Two objects:
 *
 *   counter  counts some input partitions (int32 ids); the job keeps one per partition (the
 *            actors: one per read-events partition, whichever shard consumes it), so that what
 *            it decides depends on that partition's stream alone. Counts each read event into
 *            its pane (slide_ms wide, aligned to multiples of slide_ms) with a Count-Min Sketch
 *            and a bounded candidate set (or an exact map in exact mode), tracks watermarks,
 *            and hands over each pane once it is final, as a serialized pane summary.
 *   merger   one per job; receives the pane summaries of every counter and the counters'
 *            watermarks (or that a counter is idle), and emits one ranked list per window end.
 *
 * Time. A window is window_ms / slide_ms consecutive panes; it ends at a multiple of slide_ms
 * and covers [end - window_ms, end). Per partition, watermark = max event time seen on it -
 * lateness_ms. A partition with no event for idle_ms of the caller's processing clock (now_ms)
 * is idle and left out until its next event. The counter's watermark is the min over its active
 * partitions (INT64_MIN when none is active). A pane is final, and taken, once its end <= the
 * counter's watermark; the counter remembers the highest watermark it took panes at ("taken
 * watermark", monotonic). A counter whose partitions are all idle (nf_trend_counter_idle) holds
 * nothing back: its open panes are final, and its taken watermark moves to the end of its last
 * pane (the last events of a partition that goes quiet are not kept waiting for its next one).
 * The caller tells the merger (nf_trend_merger_set_idle), which leaves idle counters out of the
 * min watermark until they report one again.
 *
 * Late events. An event is late, counted per partition and mixed into no pane, iff
 *   ts < its own partition's watermark computed from the events before it, or
 *   its pane was already taken (pane end <= the taken watermark).
 * The second case only happens when an idle partition wakes up behind the others (or behind
 * its own idle hand-over), or a new partition starts behind them; it is what keeps "each pane is
 * handed over once" true (Flink drops such events at the window operator the same way). With one
 * partition per counter and no idle hand-over it never applies: every decision is the
 * partition's own. Every event, late or not, advances its partition's max event time and
 * activity. On the merger's side, a pane that can no longer be in a window still to emit (an
 * idle counter woke up behind the others) is ignored.
 *
 * Scores. For a window, score(article) = sum over its panes and over all counters of the pane
 * sketches, estimated at the article (sketches are linear, so this is the sketch of the whole
 * window): true <= score <= true + e/width * N_window with probability 1 - e^-depth. Which
 * articles are scored: the union of the window's panes' candidates (each pane keeps the
 * `candidates` keys with the highest running estimate; ties broken by hash so the set depends
 * only on the stream, not on the heap's layout). Exact mode keeps an exact article -> count
 * map per pane instead and reports exact counts. Ranking: score desc, article_id asc (bytes).
 *
 * Memory: the counter holds only open panes (not yet final), the merger only panes that can
 * still be in a future window, each the sum of the counters' summaries (one sketch and one
 * union of candidates per pane, plus a bit per counter to tell a duplicate delivery): O(panes),
 * not O(counters x panes); freed panes are reused. Once warm the counter's hot path does
 * no allocation (a new pane takes a recycled one; an exact map grows by doubling), no lock, no
 * syscall.
 *
 * Persistence. Counter: nf_trend_counter_save/load, one blob (open panes, partitions, late
 * counts, taken watermark). Merger: nf_trend_merger_save/load hold the meta (last processed
 * window end, counters' watermarks and idle flags); pane summaries are persisted by the caller,
 * once each,
 * keyed by (counter, pane_start), deleted when the merger drops that pane_start (drop
 * callback), and re-added after nf_trend_merger_load. A restored pair emits exactly what an
 * uninterrupted one would have. All blobs are little-endian, versioned and end with an
 * nf_hash64 check word; corrupt input is refused with -EINVAL, never half-applied.
 *
 * Threads: a counter belongs to its shard's thread, the merger to its actor's thread; the only
 * things that cross are the blobs (copy them into the message) and int64 watermarks. */
#ifndef NF_TREND_H
#define NF_TREND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NF_TREND_ID_MAX 128 /* article ids longer than this are refused (-EINVAL) */

typedef struct nf_trend_opts {
    int64_t window_ms;   /* 3600000; a multiple of slide_ms */
    int64_t slide_ms;    /* 30000: the pane width and the emission step */
    int64_t lateness_ms; /* 5000 */
    int64_t idle_ms;     /* 60000 */
    uint32_t cms_width;  /* 2048 */
    uint32_t cms_depth;  /* 5 */
    uint32_t top_k;      /* 50 */
    uint32_t candidates; /* per pane; 0 = 4 * top_k */
    bool exact;          /* exact per-pane maps instead of sketches */
    uint64_t seed;       /* hash seed of the sketches (all counters and the merger must agree) */
} nf_trend_opts_t;

void nf_trend_opts_default(nf_trend_opts_t *o);
/* 0, or -EINVAL with the reason in err. */
int nf_trend_opts_check(const nf_trend_opts_t *o, char *err, size_t errlen);

/* ---- counter ---- */

typedef struct nf_trend_counter nf_trend_counter_t;

/* NULL if the options are invalid or on allocation failure. */
nf_trend_counter_t *nf_trend_counter_new(const nf_trend_opts_t *o);
void nf_trend_counter_free(nf_trend_counter_t *c);

/* Counts one read event: 0 counted, 1 late (not counted in a pane), -EINVAL (id empty or longer
 * than NF_TREND_ID_MAX, ts outside +-2^60), -ENOMEM. */
int nf_trend_count(nf_trend_counter_t *c, int32_t partition, const char *article_id, size_t len,
                   int64_t ts_ms, int64_t now_ms);

/* Declares the partitions assigned to this counter (at start and after a rebalance), so that
 * they hold the watermark back from the start rather than from their first event: a partition
 * consumed later than the others would otherwise find its panes already taken. An expected
 * partition without any event is active for idle_ms from its first declaration and meanwhile
 * keeps the counter's watermark at INT64_MIN. Partitions already known are left as they are
 * (calling this on every tick is fine: it never keeps a partition active). 0 or -ENOMEM. */
int nf_trend_counter_expect(nf_trend_counter_t *c, const int32_t *partitions, size_t n,
                            int64_t now_ms);

/* min over active partitions of their watermark; INT64_MIN when none is active, or when an
 * active partition has not seen an event yet (see nf_trend_counter_expect). */
int64_t nf_trend_counter_watermark(const nf_trend_counter_t *c, int64_t now_ms);
/* Whether the counter has partitions and every one of them is idle at now_ms (no event, nor a
 * first declaration, for idle_ms). Such a counter's take hands over all its open panes. */
bool nf_trend_counter_idle(const nf_trend_counter_t *c, int64_t now_ms);

/* Called once per final pane, in pane order; the blob is valid during the call only. Return 0
 * to go on; a negative errno stops the take and the pane stays (it is handed over again next
 * time). */
typedef int (*nf_trend_pane_fn)(void *ctx, int64_t pane_start, const void *blob, size_t len);

/* Takes every pane whose end <= the watermark at now_ms (every pane when the counter is idle:
 * the taken watermark then moves to the last pane's end). *taken_wm (may be NULL) gets the taken
 * watermark to report to the merger (INT64_MIN if none yet). Returns the number of panes taken,
 * or -ENOMEM, or the callback's non-zero value if it stopped. */
int nf_trend_counter_take(nf_trend_counter_t *c, int64_t now_ms, nf_trend_pane_fn fn, void *ctx,
                          int64_t *taken_wm);

typedef struct nf_trend_counter_stats {
    uint64_t counted, late;
    size_t partitions, open_panes, bytes;
    int64_t taken_wm;
} nf_trend_counter_stats_t;
void nf_trend_counter_stats(const nf_trend_counter_t *c, nf_trend_counter_stats_t *out);
/* Late events seen on one partition (0 if unknown). */
uint64_t nf_trend_counter_late(const nf_trend_counter_t *c, int32_t partition);

/* The whole state as one malloc'd blob (*blob, *len; the caller frees). 0 or -ENOMEM. */
int nf_trend_counter_save(const nf_trend_counter_t *c, void **blob, size_t *len);
/* Replaces c's state with a saved one. 0, -EINVAL (corrupt, or saved under other options;
 * c unchanged) or -ENOMEM. */
int nf_trend_counter_load(nf_trend_counter_t *c, const void *blob, size_t len);

/* Repair of state saved before event times were bounded (issue 15): one read event dated
 * 9999-12-31 set its partition's max event time, and so the taken watermark, past every later
 * event, and that was persisted. The clamp functions bring every event time and watermark
 * beyond limit_ms (the caller's wall clock + its allowed skew) back to now_ms:
 *   counter  a partition's max event time > limit_ms becomes now_ms; a taken watermark
 *            > limit_ms - lateness_ms becomes now_ms - lateness_ms; an open pane starting after
 *            limit_ms (it holds only such events) is dropped;
 *   merger   a counter's watermark > limit_ms - lateness_ms becomes now_ms - lateness_ms; the
 *            last processed window end beyond that becomes the multiple of slide_ms at or below
 *            now_ms - lateness_ms (windows after it are emitted again as their panes arrive:
 *            one emitted partially when the watermark jumped is superseded, its key being the
 *            window end); a pane starting after limit_ms is dropped (drop, if not NULL, is told
 *            its pane_start, to delete its persisted summaries).
 * fix (may be NULL) is told of each change: what, the partition / counter / pane start it
 * concerns, the old value and the new one (INT64_MIN for a dropped pane). Returns the number of
 * changes (0 for sound state). Call right after load, before anything is counted or merged. */
typedef enum nf_trend_fix {
    NF_TREND_FIX_PARTITION_MAX_TS, /* id = partition */
    NF_TREND_FIX_TAKEN_WM,         /* id = 0 */
    NF_TREND_FIX_COUNTER_PANE,     /* id = pane start */
    NF_TREND_FIX_MERGER_WM,        /* id = counter */
    NF_TREND_FIX_MERGER_DONE,      /* id = 0 */
    NF_TREND_FIX_MERGER_PANE,      /* id = pane start */
} nf_trend_fix_t;
typedef void (*nf_trend_fix_fn)(void *ctx, nf_trend_fix_t what, int64_t id, int64_t old_v,
                                int64_t new_v);
/* "partition max event time", "taken watermark", ... for logs. */
const char *nf_trend_fix_name(nf_trend_fix_t what);
size_t nf_trend_counter_clamp(nf_trend_counter_t *c, int64_t limit_ms, int64_t now_ms,
                              nf_trend_fix_fn fix, void *ctx);

/* ---- merger ---- */

typedef struct nf_trend_merger nf_trend_merger_t;

/* One ranked entry. Without grouping, an article: lead is the article itself and members 1.
 * With grouping (nf_trend_merger_set_group), a group (a story): article_id is the group's key,
 * score the sum of its scored members' scores, lead the member with the highest score (ties:
 * the smaller id, as the ranking), members how many of its articles were scored. */
typedef struct nf_trend_ranked {
    const char *article_id; /* NUL-terminated */
    size_t len;
    uint64_t score;
    const char *lead; /* NUL-terminated */
    size_t lead_len;
    uint32_t members;
} nf_trend_ranked_t;

nf_trend_merger_t *nf_trend_merger_new(const nf_trend_opts_t *o, unsigned ncounters);
void nf_trend_merger_free(nf_trend_merger_t *m);

/* Adds counter i's summary of one pane (validated completely before anything changes). 0 added
 * (persist it), 1 ignored (the pane can no longer be in any window still to emit: do not persist
 * it), -EEXIST (this counter's pane is already in: a duplicate delivery, harmless), -EINVAL
 * (garbage, other options, counter out of range), -ENOMEM. Protocol: a counter's panes must
 * reach the merger before the watermark returned by the same take (which the take order gives
 * for free: deliver the panes, then the watermark). */
int nf_trend_merger_add_pane(nf_trend_merger_t *m, unsigned counter, const void *blob, size_t len);
/* Counter i's taken watermark. Watermarks only move forward (a lower one is ignored), and
 * INT64_MIN means "nothing yet". A counter that reports a watermark is active again. -EINVAL if
 * counter is out of range. */
int nf_trend_merger_set_watermark(nf_trend_merger_t *m, unsigned counter, int64_t wm);
/* Counter i is idle (nf_trend_counter_idle; wm is its taken watermark after the take that handed
 * its panes over, kept as set_watermark would): it is left out of the min watermark until its
 * next set_watermark. With every counter idle, windows go up to the min of the idle counters'
 * watermarks (those that ever reported). Panes it sends after waking up behind are added to the
 * windows still to emit, or ignored (add_pane's 1) if none is left. -EINVAL if out of range. */
int nf_trend_merger_set_idle(nf_trend_merger_t *m, unsigned counter, int64_t wm);

/* The group of a scored article (a story: trending by story, docs/ARCHITECTURE.md §1): its key
 * into out (at most NF_TREND_ID_MAX bytes, NUL-terminated) and the key's length, or 0 for "its
 * own group" (the article's id is the key). Called once per scored article per window, on the
 * merger's thread; it must not call the merger. */
typedef size_t (*nf_trend_group_fn)(void *ctx, const char *article_id, size_t len,
                                    char out[NF_TREND_ID_MAX + 1]);
/* From now on every window is ranked by group: a group's score is the sum over the window's
 * scored articles (the union of its panes' candidates; every article in exact mode) that map to
 * it, so in exact mode it is the group's exact count of reads in the window. Groups rank by
 * score desc, then their leads' ids (as articles rank: a list whose every group has one member
 * is the list by article). fn NULL: by article
 * again. A group function is not persisted: set it after every new / load. */
void nf_trend_merger_set_group(nf_trend_merger_t *m, nf_trend_group_fn fn, void *ctx);

/* items are ranked, at most top_k of them, valid during the call. Return 0 to go on; a
 * negative errno stops emission and that window is emitted again by the next call. */
typedef int (*nf_trend_window_fn)(void *ctx, int64_t window_start, int64_t window_end,
                                  const nf_trend_ranked_t *items, size_t n);
/* A pane_start the merger forgot: delete its persisted summaries (of every counter). */
typedef void (*nf_trend_drop_fn)(void *ctx, int64_t pane_start);

/* Emits every window end W, multiple of slide, with last processed < W <= min of the active
 * counters' watermarks (a counter that never reported and was not declared idle holds it back)
 * whose window holds at least one counted event, in increasing W. Returns the number emitted,
 * -ENOMEM, or the callback's non-zero value. drop may be NULL. */
int nf_trend_merger_emit(nf_trend_merger_t *m, nf_trend_window_fn fn, nf_trend_drop_fn drop,
                         void *ctx);

typedef struct nf_trend_merger_stats {
    size_t panes, bytes;
    int64_t done_end; /* last processed window end (INT64_MIN: none) */
    uint64_t windows;
} nf_trend_merger_stats_t;
void nf_trend_merger_stats(const nf_trend_merger_t *m, nf_trend_merger_stats_t *out);

/* Meta blob (malloc'd; the caller frees). */
int nf_trend_merger_save(const nf_trend_merger_t *m, void **blob, size_t *len);
/* Loads the meta into a merger that holds no pane yet; then re-add the persisted panes. A meta
 * saved with fewer counters loads (counters were added: the new ones have reported nothing).
 * 0, -EINVAL (corrupt or other options; m unchanged), -EXDEV (saved with more counters than m
 * has: nf_trend_merger_blob_counters tells how many; m unchanged), -EBUSY (panes present). */
int nf_trend_merger_load(nf_trend_merger_t *m, const void *blob, size_t len);
/* The counter count a meta blob was saved with, or -EINVAL if it is not one (either version). */
long nf_trend_merger_blob_counters(const void *blob, size_t len);
/* Takes only the last processed window end (and the window count) of a meta blob of either
 * version and any counter count, saved with the same options: windows up to it are not emitted
 * again. For state whose counters cannot be carried over (the per-shard counters of version 1).
 * 0 or -EINVAL (m unchanged). */
int nf_trend_merger_adopt_done(nf_trend_merger_t *m, const void *blob, size_t len);

/* The merger's half of the repair above (nf_trend_counter_clamp); call after the meta is loaded
 * and the persisted panes re-added. */
size_t nf_trend_merger_clamp(nf_trend_merger_t *m, int64_t limit_ms, int64_t now_ms,
                             nf_trend_fix_fn fix, nf_trend_drop_fn drop, void *ctx);

#endif
