/* follows.h — the topics a reader follows and mutes (issue 45; docs/ARCHITECTURE.md §1, stage
 * "follows"): the settings events of read-events (io/events.h: follow, unfollow, mute, unmute a
 * topic of the taxonomy) applied in the reader's order, as keyed state in epochs, which the
 * feed ranks by (serve/query.h).
 *
 * The rule, per topic t (bit t of two masks; the taxonomy has at most 64 topics):
 *   follow t    follows t and no longer mutes it     unfollow t  no longer follows t
 *   mute t      mutes t and no longer follows it     unmute t    no longer mutes t
 * updated_ms = max(updated_ms, the event's ts). A settings event that changes nothing (a second
 * follow) still moves updated_ms. A reader whose masks are both empty (and who mutes no source)
 * is deleted. No TTL: a
 * reader's choice stands until they change it.
 *
 * State: a kstate of kind NF_KIND_READS — the column family of the reader's history
 * (actors/serve_state.h), whose changelog (changelog-reads) is keyed like interest by the
 * read-events partition, so that a reader's settings follow their partition to another process —
 * key nf_kstate_encode_key(kg, user key) (18 bytes; the history's entries are 34, and each
 * reader's history scan skips what is not one), value [follow u64 LE][mute u64 LE][updated_ms
 * i64 LE] after the store's expiry (0), then, only when the reader muted sources, [n u8] and n
 * times [len u8][source_id: len bytes], oldest first (state format 2, state/identity.h: a build
 * of format 1 refuses the state rather than read such a value as none).
 *
 * Muted sources (mute_source / unmute_source, io/events.h): a reader mutes at most
 * NF_FOLLOWS_SOURCES_MAX sources; muting one more forgets the oldest (counted by the caller:
 * *evicted). Muting a muted source makes it the newest; unmuting one not muted changes nothing
 * but updated_ms. The feed leaves out every article whose source_id is muted (serve/query.h).
 *
 * Threads: an engine belongs to one shard (every call from its thread); the codec and the rule
 * are pure, any thread. */
#ifndef NF_FOLLOWS_H
#define NF_FOLLOWS_H

#include "algo/idset.h"
#include "state/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NF_FOLLOWS_VALUE_LEN   24 /* the value of a reader without muted sources */
#define NF_FOLLOWS_SOURCES_MAX 32
#define NF_FOLLOWS_SOURCE_MAX  128 /* bytes of a source_id (io/events.h NF_EVENT_FIELD_MAX) */
/* The longest value: the topics' part and every muted source at its longest. */
#define NF_FOLLOWS_VALUE_MAX                                                                       \
    (NF_FOLLOWS_VALUE_LEN + 1 + NF_FOLLOWS_SOURCES_MAX * (1 + NF_FOLLOWS_SOURCE_MAX))

typedef struct nf_follows_val {
    uint64_t follow, mute; /* bit t: the taxonomy's topic t */
    int64_t updated_ms;
    unsigned nsrc; /* muted sources, oldest first */
    uint8_t src_len[NF_FOLLOWS_SOURCES_MAX];
    char src[NF_FOLLOWS_SOURCES_MAX][NF_FOLLOWS_SOURCE_MAX + 1]; /* NUL-terminated */
} nf_follows_val_t;

/* The rule above on v (kind: one of io/events.h's settings kinds; topic < 64). Whether the masks
 * changed. */
bool nf_follows_step(nf_follows_val_t *v, int kind, unsigned topic, int64_t ts_ms);
/* The rule for sources on v (kind NF_READ_KIND_MUTE_SOURCE or _UNMUTE_SOURCE; src of 1..
 * NF_FOLLOWS_SOURCE_MAX bytes). Whether the set changed; *evicted: the oldest was forgotten. */
bool nf_follows_step_source(nf_follows_val_t *v, int kind, const char *src, size_t len,
                            int64_t ts_ms, bool *evicted);
/* Whether v mutes nothing, topic or source. */
bool nf_follows_empty(const nf_follows_val_t *v);
/* The value without the store's expiry: 0 or -EINVAL (not one). */
int nf_follows_decode(const void *val, size_t len, nf_follows_val_t *out);
/* Its bytes (NF_FOLLOWS_VALUE_LEN without muted sources), at most NF_FOLLOWS_VALUE_MAX. */
size_t nf_follows_encode(const nf_follows_val_t *v, unsigned char out[NF_FOLLOWS_VALUE_MAX]);

typedef struct nf_follows nf_follows_t;

/* st NULL: memory only. NULL on allocation failure. */
nf_follows_t *nf_follows_new(nf_store_t *st, size_t budget_bytes);
void nf_follows_free(nf_follows_t *f);

/* One settings event of reader `user` (nf_interest_user_key) in key group kg: the reader's
 * settings after it in *out. 1 (the masks changed), 0 (they did not), -EIO (the store could not
 * be read: nf_follows_error), -ENOMEM. */
int nf_follows_apply(nf_follows_t *f, uint16_t kg, nf_id128_t user, int kind, unsigned topic,
                     int64_t ts_ms, nf_follows_val_t *out);
/* The same for a source setting (src: its source_id, 1..NF_FOLLOWS_SOURCE_MAX bytes, else
 * -EINVAL); *evicted as nf_follows_step_source says. */
int nf_follows_apply_source(nf_follows_t *f, uint16_t kg, nf_id128_t user, int kind,
                            const char *src, size_t len, int64_t ts_ms, nf_follows_val_t *out,
                            bool *evicted);

/* The epoch protocol and a rebalance, as the kstate's (state/kstate.h). */
size_t nf_follows_snapshot(nf_follows_t *f, nf_store_batch_t *b, uint64_t epoch);
void nf_follows_committed(nf_follows_t *f, uint64_t epoch);
size_t nf_follows_drop_groups(nf_follows_t *f, bool (*match)(uint16_t kg, void *ctx), void *ctx,
                              size_t *kept);
bool nf_follows_over_budget(const nf_follows_t *f);
size_t nf_follows_entries(const nf_follows_t *f);
const char *nf_follows_error(const nf_follows_t *f);

#endif
