/* notify.h — readers' breaking-news subscriptions and the notifications they are sent (issue 45;
 * docs/ARCHITECTURE.md §1, stage "notify"): the settings events subscribe / unsubscribe (a topic
 * of the taxonomy, io/events.h) applied in the reader's order, and each breaking-news window
 * (engine/breaking.h) fanned out to the subscribed readers of the shard, as keyed state in epochs.
 *
 * The rule. A reader's value: the topics subscribed (bit t: the taxonomy's topic t), the last
 * NF_NOTIFY_REMEMBER stories notified, and the notifications counted on one day (UTC, of the
 * windows' end times: a replay decides the same).
 *   subscribe t / unsubscribe t   sets / clears bit t; updated_ms = max(updated_ms, the event's
 *                                 ts). A reader with no topic left is deleted (their remembered
 *                                 stories with them).
 *   a window of breaking stories (in the order nf_notify_window_sort gives), for each reader
 *   subscribed to at least one of their topics, story by story:
 *     the story is remembered           -> repeat: nothing (once per reader and story);
 *     else the reader's count for the window's day has reached the cap
 *                                       -> capped: nothing, not remembered (a later day may);
 *     else                              -> notified: one notification, remembered (the oldest
 *                                          of a full memory forgotten), counted on the day (a
 *                                          later day than the counted one starts from 0).
 * Readers are visited in no defined order; nothing depends on it: each reader's outcome depends
 * only on their value and the window.
 *
 * State: a kstate of kind NF_KIND_READS (the reader's history and follows' column family, whose
 * changelog is keyed by the read-events partition, so a reader's subscriptions follow their
 * partition) under a key of its own per reader (nf_notify_key: its high 16 bits all ones, so a
 * key group's subscriptions are a prefix scan), value [NF_NOTIFY_MAGIC u32][topics u64]
 * [updated_ms i64][day i32][count u16][stories u8][next u8][user_id length u16][user_id]
 * [stories: 16 bytes each, a ring whose next slot is `next`], all little-endian, after the
 * store's expiry (0). No TTL: a subscription stands until the reader changes it.
 * In memory beside it: the shard's subscribers (key, key group, topics), so that a window visits
 * only them — rebuilt from the store at start (nf_notify_load) and for gained key groups.
 *
 * Threads: an engine belongs to one shard (every call from its thread); the codec, the key and
 * the window's order are pure, any thread. */
#ifndef NF_NOTIFY_H
#define NF_NOTIFY_H

#include "algo/idset.h"
#include "state/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NF_NOTIFY_MAGIC     0x314E464Eu /* "NFN1" little-endian */
#define NF_NOTIFY_REMEMBER  32          /* stories remembered per reader */
#define NF_NOTIFY_CAP_MAX   NF_NOTIFY_REMEMBER
#define NF_NOTIFY_USER_MAX  256 /* bytes of a user id kept (longer ids are refused) */
#define NF_NOTIFY_HEADER    30
#define NF_NOTIFY_VALUE_MAX (NF_NOTIFY_HEADER + NF_NOTIFY_USER_MAX + 16 * NF_NOTIFY_REMEMBER)
#define NF_NOTIFY_DAY_MS    86400000ll

typedef struct nf_notify_val {
    uint64_t topics;
    int64_t updated_ms;
    int32_t day;
    uint16_t count;
    uint8_t nstories, next;
    uint16_t user_len;
    char user[NF_NOTIFY_USER_MAX + 1];
    nf_id128_t stories[NF_NOTIFY_REMEMBER];
} nf_notify_val_t;

/* One story of a window: the breaking-news record's fields a notification repeats. */
typedef struct nf_notify_story {
    nf_id128_t story, lead;
    uint64_t reads;
    uint16_t topic;
} nf_notify_story_t;

/* A window's breaking stories (heap; the message actors/trending.c sends every shard). */
typedef struct nf_notify_window {
    int64_t end_ms;
    size_t n;
    nf_notify_story_t s[];
} nf_notify_window_t;

typedef enum nf_notify_outcome {
    NF_NOTIFY_SENT = 0,
    NF_NOTIFY_REPEAT,
    NF_NOTIFY_CAPPED,
    NF_NOTIFY__OUTCOMES
} nf_notify_outcome_t;

/* The order a window's stories are judged in: reads descending, then story id ascending. */
void nf_notify_window_sort(nf_notify_window_t *w);

/* The rule above for one reader and one story on day `day`: the outcome, v updated. */
nf_notify_outcome_t nf_notify_step(nf_notify_val_t *v, nf_id128_t story, int32_t day, unsigned cap);
/* A subscribe (sub) or unsubscribe of topic (< 64): whether the topics changed. */
bool nf_notify_subscribe(nf_notify_val_t *v, bool sub, unsigned topic, int64_t ts_ms);
/* The day (UTC) of a time in ms since the epoch. */
int32_t nf_notify_day(int64_t ms);

/* Codec of the value without the store's expiry: decode 0 or -EINVAL (not one); encode the
 * length written (<= NF_NOTIFY_VALUE_MAX). */
int nf_notify_decode(const void *val, size_t len, nf_notify_val_t *out);
size_t nf_notify_encode(const nf_notify_val_t *v, unsigned char out[NF_NOTIFY_VALUE_MAX]);
/* The state key of the reader whose user key (nf_interest_user_key) is user. */
nf_id128_t nf_notify_key(nf_id128_t user);

typedef struct nf_notify nf_notify_t;

/* st NULL: memory only; cap: notifications per reader per day (1..NF_NOTIFY_CAP_MAX). NULL on
 * allocation failure. */
nf_notify_t *nf_notify_new(nf_store_t *st, size_t budget_bytes, unsigned cap);
void nf_notify_free(nf_notify_t *n);

/* A subscribe / unsubscribe of reader user_id (ulen bytes, <= NF_NOTIFY_USER_MAX; user its
 * nf_interest_user_key) in key group kg. 1 (the topics changed), 0 (they did not), -EIO (the
 * store could not be read: nf_notify_error), -ENOMEM, -EINVAL (ulen too long). */
int nf_notify_apply(nf_notify_t *n, uint16_t kg, nf_id128_t user, const char *user_id, size_t ulen,
                    bool sub, unsigned topic, int64_t ts_ms);

/* Called once per notification: the reader and the story. 0, or a negative errno that stops the
 * window (returned; a positive answer stops it too, as -ECANCELED). */
typedef int (*nf_notify_fn)(void *arg, const char *user_id, size_t ulen, const nf_notify_story_t *s,
                            int64_t end_ms);

/* The window (sorted) to this shard's subscribers: fn per notification, the outcomes counted
 * into counts[NF_NOTIFY__OUTCOMES] (added to). 0, fn's non-zero, -EIO or -ENOMEM. */
int nf_notify_window(nf_notify_t *n, const nf_notify_window_t *w, nf_notify_fn fn, void *arg,
                     uint64_t counts[NF_NOTIFY__OUTCOMES]);

/* The same in slices, so that a window to many readers does not hold the shard for its whole
 * fan-out: a run is the window (copied) and the subscribers of its topics when it came; each
 * step judges up to max of them (a reader unsubscribed since, or whose key group left, is
 * skipped). Steps of one run, and runs one after the other, judge every reader's windows in
 * their order; other events may come between steps. new: NULL (no memory); step: 1 (more
 * left), 0 (done), fn's non-zero, -EIO or -ENOMEM. */
typedef struct nf_notify_run nf_notify_run_t;
/* The slice the reads actor judges a turn (actors/reads.c): about 0.3 ms of a shard with the
 * readers' values in memory, 2 ms read from RocksDB (perf/README "Notifications"). */
#define NF_NOTIFY_SLICE 512
nf_notify_run_t *nf_notify_run_new(nf_notify_t *n, const nf_notify_window_t *w);
int nf_notify_run_step(nf_notify_t *n, nf_notify_run_t *r, size_t max, nf_notify_fn fn, void *arg,
                       uint64_t counts[NF_NOTIFY__OUTCOMES]);
size_t nf_notify_run_left(const nf_notify_run_t *r);
void nf_notify_run_free(nf_notify_run_t *r);

/* Rebuilds the subscribers of key groups kgs[0..nkgs) from the store (kgs NULL: every key group
 * below NF_EPOCH_MAX_PARTITIONS) whose user key owns(kg, user, ctx) says this shard has. The
 * subscribers found, or -EIO (err says why) / -ENOMEM. No store: 0. */
long nf_notify_load(nf_notify_t *n, const uint16_t *kgs, size_t nkgs,
                    bool (*owns)(uint16_t kg, nf_id128_t user, void *ctx), void *ctx, char *err,
                    size_t errlen);

/* The epoch protocol and a rebalance, as the kstate's (state/kstate.h); drop_groups also forgets
 * the key groups' subscribers. */
size_t nf_notify_snapshot(nf_notify_t *n, nf_store_batch_t *b, uint64_t epoch);
void nf_notify_committed(nf_notify_t *n, uint64_t epoch);
size_t nf_notify_drop_groups(nf_notify_t *n, bool (*match)(uint16_t kg, void *ctx), void *ctx,
                             size_t *kept);
bool nf_notify_over_budget(const nf_notify_t *n);
/* Readers subscribed to at least one topic on this shard. */
size_t nf_notify_subscribers(const nf_notify_t *n);
const char *nf_notify_error(const nf_notify_t *n);

#endif
