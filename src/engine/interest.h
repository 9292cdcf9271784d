/* interest.h — the interest-update engine (docs/ARCHITECTURE.md §1, "Parameters"): per reader, an
 * exponentially decayed, L2-normalised vector over the taxonomy's topics, moved by every article
 * the reader reads.
 *
 * The update, exactly as specified upstream, per counted read event (user, article, session, ts):
 *     days    = max(0, ts_ms - updated_ms) / 86400000.0      (EVENT time, as a double)
 *     decay   = gamma^days
 *     v[t]    = decay * v[t] + (alpha * w) * topics(article)[t]    for every topic t
 *     v       = v / ||v||_2                                   (a zero vector stays zero)
 *     version += 1; updated_ms = max(updated_ms, ts_ms)
 * with alpha = 0.1 and gamma = 0.95 per day by default, and w the weight of the event's kind
 * (opts.weights: a read 1, so a read's update is the upstream formula; explicit feedback issue 38).
 * An event older than the user's last update uses decay = 1 and does not move updated_ms back. A
 * user's first event starts from the zero vector (version 0, so it becomes version 1 and updated_ms
 * = ts_ms).
 *
 * Decisions the upstream formula leaves open:
 *   - An article whose topic vector is known but empty still counts: version += 1, updated_ms
 *     moves, decay applies. Normalisation then gives back the same direction (decay cancels up
 *     to rounding), so the vector is unchanged in effect; a zero vector stays zero. This differs
 *     from an article with no vector anywhere, which is NF_INTEREST_UNKNOWN_ARTICLE.
 *   - An article_id that is not 32 hex digits cannot have a vector: UNKNOWN_ARTICLE.
 *   - Only counted events are marked seen: a duplicate or unknown article changes nothing, so a
 *     read of an article whose vector arrives later counts once it is known.
 *   - Topic vectors are canonicalised when they enter (put, decode): sorted by topic index, zero
 *     weights dropped. Indices >= 64, repeated indices and non-finite weights are refused.
 *
 * State (one engine per shard, owning):
 *   users   kind NF_KIND_INTEREST, key = nf_interest_user_key(user_id) (two nf_hash64 of the
 *           id), key group = the caller's (the input partition); value = [version u64 LE]
 *           [updated_ms i64 LE][topic vector encoding] (doubles as their IEEE bits: bit-exact).
 *   seen    a keyset (state/keyset.h: wholly in memory, so a miss needs no store read) of
 *           kind NF_KIND_INTEREST_SEEN, key = {the user key's hi, a hash of (user key,
 *           article_id, session_id)} (each field hashed with its length, so the encoding is
 *           unambiguous; the user's half lets a restarted shard load just its users' keys:
 *           nf_interest_load), same key group, TTL opts.seen_ttl_ms (default 24 h): a repeat
 *           later than that counts again.
 *   topics  the per-shard article topic table, article id -> vector, filled by broadcasts
 *           (nf_interest_topics_put) and bounded by opts.table_max entries (CLOCK eviction,
 *           approximately least recently used). A miss is read from the store: kind
 *           NF_KIND_ARTICLE_TOPICS, RocksDB key nf_kstate_encode_key(id.hi % 256, id), value
 *           [expires_at_ms 8 bytes LE, 0 = never][nf_interest_topics_encode()] — what the
 *           article's owner writes through its kstate of that kind — and kept in the table. The
 *           table is a cache of broadcasts, not state: it is not snapshotted.
 *
 * Topic vector encoding (nf_interest_topics_encode/decode): [n u8, 0..64] then n times
 * [topic u8][weight f64 LE], topics strictly increasing. At most NF_TOPICS_ENC_MAX bytes.
 *
 * Epochs: nf_interest_snapshot writes both sets of state into the epoch's batch;
 * nf_interest_committed forwards to the users' kstate (kstate.h explains dirty, committing and
 * clean). A restart over the same store with the committed epochs applied, and nf_interest_load
 * called once, continues exactly where the last committed epoch left off.
 *
 * Threads: one shard owns an engine; every call is from that shard's thread. Pure functions
 * (read_init, encode, decode, json, opts_default) from any thread. Hot path (kstate hits, table
 * hit): no allocation, no lock, no syscall; a table miss reads the store (one malloc by RocksDB's
 * get) and a first insert of an article's vector allocates it. */
#ifndef NF_INTEREST_H
#define NF_INTEREST_H

#include "algo/idset.h"
#include "io/events.h"
#include "runtime/jsonw.h"
#include "state/keyset.h"
#include "state/kstate.h"
#include "state/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NF_TOPICS_MAX     64                      /* taxonomy indices 0..63 */
#define NF_TOPICS_ENC_MAX (1 + NF_TOPICS_MAX * 9) /* bytes of the largest encoding */

typedef struct nf_topic_weight {
    uint16_t topic; /* 0..NF_TOPICS_MAX-1 */
    double weight;
} nf_topic_weight_t;

/* A sparse topic vector: n entries; canonical form is sorted by topic, no
 * repeats. */
typedef struct nf_topic_vec {
    uint32_t n;
    nf_topic_weight_t t[NF_TOPICS_MAX];
} nf_topic_vec_t;

typedef struct nf_interest_opts {
    double alpha;               /* learning rate, default 0.1 */
    double gamma;               /* decay per day of event time, default 0.95; in (0, 1] */
    uint64_t seen_ttl_ms;       /* dedup horizon, default 24 h */
    size_t table_max;           /* article topic table entries, default 1M (>= 1) */
    size_t users_budget_bytes;  /* kstate budget (kstate.h); 0 = unlimited */
    size_t seen_budget_bytes;   /* keyset budget (keyset.h: enforced with seen_spill_dir) */
    const char *seen_spill_dir; /* the seen set's keys past its budget go here; NULL: none */
    uint16_t writer;            /* the owning shard's index (keyset.h: blob keys) */
    uint64_t process;           /* the process's id in blob keys (keyset.h; 0: none) */
    /* A read of an article without a vector: false (default) = NF_INTEREST_UNKNOWN_ARTICLE,
     * nothing changes; true = applied as an article with an empty vector (counted in
     * stats.unknown too), so every read moves the user's version and decay. */
    bool unknown_as_empty;
    /* How much an event of each kind (io/events.h: read, save, share, dislike, hide) moves the
     * vector: the article's topics are added times alpha * weights[kind]. Defaults 1, 2, 3, -1,
     * -2: explicit signals weigh more than a read, and a dislike or hide pushes the article's
     * topics down. A read's weight 1 leaves the formula at the top bit for bit as it was. */
    double weights[NF_READ_KIND__COUNT];
    /* The key group the articles' topic vectors are stored under (NF_KIND_ARTICLE_TOPICS, read
     * on a table miss): -1 (default) id.hi % 256; in a consumer group the job's global one
     * (dedup.c). */
    int32_t topics_key_group;
    /* Where nf_interest_new says why it failed (may be NULL): options it cannot use, out of
     * memory, or the seen set's reason (keyset.h). Not kept. */
    char *err;
    size_t errlen;
} nf_interest_opts_t;

void nf_interest_opts_default(nf_interest_opts_t *o);

typedef struct nf_interest nf_interest_t;

/* st NULL: memory only (no store reads, table misses are unknown articles). o
 * NULL: defaults. NULL on allocation failure, a seen set that cannot spill (keyset.h) or
 * invalid options (gamma outside (0, 1], alpha not finite, table_max 0), saying which in
 * o->err. */
nf_interest_t *nf_interest_new(nf_store_t *st, const nf_interest_opts_t *o);
void nf_interest_free(nf_interest_t *e);

/* A broadcast of an article's vector (from classify): inserts or replaces the
 * table entry, canonicalising v. now_ms is accepted for symmetry with the store
 * path (broadcast entries do not expire; loaded ones carry their stored
 * expiry). 0, -EINVAL (bad vector), -ENOMEM. */
int nf_interest_topics_put(nf_interest_t *e, nf_id128_t id, const nf_topic_vec_t *v,
                           int64_t now_ms);

typedef enum {
    NF_INTEREST_UPDATED = 0,         /* out filled */
    NF_INTEREST_DUPLICATE = 1,       /* (user, article, session) already counted: no change */
    NF_INTEREST_UNKNOWN_ARTICLE = 2, /* no vector in the table or the store: no change */
} nf_interest_result_t;

typedef struct nf_interest_out {
    uint64_t version;
    int64_t updated_ms;
    nf_topic_vec_t vec; /* the normalised vector, sorted by topic, zero weights left out */
} nf_interest_out_t;

/* One read event with every key the engine needs, computed once from its strings by
 * nf_interest_read_init(): kafka_in does it where the event is decoded, and routes by user.hi,
 * so the interest shard hashes nothing. */
typedef struct nf_interest_read {
    nf_id128_t user;    /* nf_interest_user_key(user_id) */
    nf_id128_t seen;    /* the dedup key: {user.hi, hash of (user, article, session)} */
    nf_id128_t article; /* the article id's 128 bits, when article_ok */
    int64_t ts_ms;      /* event time */
    uint16_t kg;        /* the input partition */
    uint8_t kind;       /* nf_read_kind_t: its weight (opts.weights); read after init */
    bool article_ok;    /* article_id is 32 hex digits (otherwise it has no vector) */
    /* Where the prefetch stages found the user's record and the article's (none after
     * init): hints for the apply, checked there, never trusted. */
    uint32_t user_hint, article_hint;
} nf_interest_read_t;

/* session_id NULL = "". Pure: any thread. */
void nf_interest_read_init(nf_interest_read_t *r, uint16_t kg, const char *user_id,
                           const char *article_id, const char *session_id, int64_t ts_ms);
/* The same with the strings' lengths known (a decoded event has them). */
void nf_interest_read_init_n(nf_interest_read_t *r, uint16_t kg, const char *user_id, size_t ulen,
                             const char *article_id, size_t alen, const char *session_id,
                             size_t slen, int64_t ts_ms);

/* An event of another kind than a read (after init): its weight, and a dedup key of its own
 * (the kind's name hashed into the seen key), so that a save of an article already read counts
 * once more, and a second save of it does not. */
void nf_interest_read_set_kind(nf_interest_read_t *r, int kind);

/* Applies one read event (see the top). kg = the event's input partition.
 * now_ms is the processing clock, used for TTLs (seen entries, stored vectors)
 * only; ts_ms is event time. Returns an nf_interest_result_t, -EIO (a store
 * read failed: nf_interest_error() says what; nothing changed) or -ENOMEM (the
 * caller must stop: the event may be half applied, and the epoch that holds it
 * must not commit). */
int nf_interest_apply(nf_interest_t *e, uint16_t kg, const char *user_id, const char *article_id,
                      const char *session_id, int64_t ts_ms, int64_t now_ms,
                      nf_interest_out_t *out);
/* The same for a keyed read (nf_interest_apply is nf_interest_read_init + this). */
int nf_interest_apply_read(nf_interest_t *e, const nf_interest_read_t *r, int64_t now_ms,
                           nf_interest_out_t *out);

/* Hints, no effect on state: start loading the memory nf_interest_apply_read() of r will touch.
 * Each address is known only once the one before is loaded (slot -> record -> value, for the
 * user and for the article's vector), so a caller with a batch calls stage 0 for every read of
 * it, then stage 1 for every read, then stage 2, then applies them: the batch's cache misses
 * overlap instead of following one another. */
#define NF_INTEREST_PREFETCH_STAGES 3
void nf_interest_prefetch(nf_interest_t *e, nf_interest_read_t *r, unsigned stage);

/* The schedule the reads actor runs a batch by: the stages software-pipelined with the applies,
 * so that the misses overlap the applies rather than come in one burst before them. Step i
 * (0 <= i < n + NF_INTEREST_PIPELINE_LAG) runs stage s for read i - s * NF_INTEREST_PREFETCH_DIST
 * (those in [0, n)); the caller then applies read i - NF_INTEREST_PIPELINE_LAG, if any. The reads
 * lie stride bytes apart from first (they may sit inside larger items). */
#define NF_INTEREST_PREFETCH_DIST 2
#define NF_INTEREST_PIPELINE_LAG  (NF_INTEREST_PREFETCH_STAGES * NF_INTEREST_PREFETCH_DIST)
void nf_interest_prefetch_step(nf_interest_t *e, nf_interest_read_t *first, size_t stride, size_t n,
                               size_t i);

/* The current state of a user (1: found and *out filled; 0: never updated;
 * -EIO). */
int nf_interest_get(nf_interest_t *e, uint16_t kg, const char *user_id, int64_t now_ms,
                    nf_interest_out_t *out);
/* The same by the user's key (nf_interest_user_key). */
int nf_interest_get_key(nf_interest_t *e, uint16_t kg, nf_id128_t user, int64_t now_ms,
                        nf_interest_out_t *out);

/* Barrier: the users' dirty entries and the seen keys added since the last barrier into b (may
 * be NULL: memory only). Returns entries written. Out of memory marks b failed
 * (nf_store_batch_fail). */
size_t nf_interest_snapshot(nf_interest_t *e, nf_store_batch_t *b, uint64_t epoch);
/* The same by reference (kstate.h nf_kstate_freeze, keyset.h nf_keyset_freeze): O(1) now; the
 * vectors and the seen keys are written by nf_interest_freeze_step (up to max of each, 0: all;
 * returns how many are left) or just before one of them changes or moves. */
size_t nf_interest_freeze(nf_interest_t *e, nf_store_batch_t *b, uint64_t epoch);
size_t nf_interest_freeze_step(nf_interest_t *e, size_t max);
void nf_interest_committed(nf_interest_t *e, uint64_t epoch);
/* Once, on an empty engine at start: the seen keys of the store that owns accepts (the users
 * routed to this shard; NULL: all). Keys loaded, or -ENOMEM, or -EIO with err (keyset.h). */
long nf_interest_load(nf_interest_t *e, nf_keyset_owns_fn owns, void *ctx, int64_t now_ms,
                      char *err, size_t errlen);
/* Key groups (input partitions) assigned to this process after it started (a rebalance): their
 * seen keys that owns accepts are read from the store (restored from the changelog before).
 * Keys loaded, or -ENOMEM / -EIO with err. The users' vectors need nothing: a get reads them. */
long nf_interest_groups_gained(nf_interest_t *e, const uint16_t *kgs, size_t n,
                               nf_keyset_owns_fn owns, void *ctx, int64_t now_ms, char *err,
                               size_t errlen);
/* Key groups revoked from this process, their last epoch committed: their users' vectors and
 * seen keys leave memory (groups[kg] true). *kept: vectors still dirty, which stay (there should
 * be none). Entries forgotten, or -ENOMEM. */
long nf_interest_groups_lost(nf_interest_t *e, const bool groups[65536], int64_t now_ms,
                             size_t *kept);
/* Drops up to max_entries expired seen keys (0 = all); returns how many. */
size_t nf_interest_expire(nf_interest_t *e, int64_t now_ms, size_t max_entries);
/* The users' kstate is over its budget with nothing evictable: ask for an early checkpoint. */
bool nf_interest_over_budget(const nf_interest_t *e);
/* The seen set is over its budget (it cannot evict: report it; keyset.h). */
bool nf_interest_seen_over_budget(const nf_interest_t *e);

typedef struct nf_interest_stats {
    nf_kstate_stats_t users;
    nf_keyset_stats_t seen;
    size_t table_entries, table_bytes;
    uint64_t table_hits, table_misses, table_loads, table_evictions;
    uint64_t updated, duplicates, unknown;
} nf_interest_stats_t;
void nf_interest_stats(const nf_interest_t *e, nf_interest_stats_t *out);

/* The last store error's message; "" if none. */
const char *nf_interest_error(const nf_interest_t *e);

/* The 128-bit state key of a user id (users kind), for routing and inspection.
 */
nf_id128_t nf_interest_user_key(const char *user_id);

/* Encodes v canonically (sorted, zero weights dropped) into out (cap bytes;
 * NF_TOPICS_ENC_MAX is always enough). Returns the length, -EINVAL (index >=
 * 64, repeated index, non-finite weight) or -ENOSPC. */
int nf_interest_topics_encode(const nf_topic_vec_t *v, unsigned char *out, size_t cap);
/* Decodes exactly len bytes of the canonical form. 0 or -EINVAL (wrong length, unsorted,
 * index >= 64, non-finite or zero weight: nothing enc_canonical writes). */
int nf_interest_topics_decode(const void *p, size_t len, nf_topic_vec_t *out);

/* An article's topic vector as the committed view v holds it (kind NF_KIND_ARTICLE_TOPICS, key
 * group kg), live at at_ms: 1 (*vec; its expiry in *expires when not NULL, 0 = never), 0 (none,
 * expired, or a value that is not one), < 0 (the read failed: err). For the readers of committed
 * state: the query API and the trending merger (breaking news). */
int nf_interest_view_topics(nf_store_view_t *v, uint16_t kg, nf_id128_t id, int64_t at_ms,
                            nf_topic_vec_t *vec, int64_t *expires, char *err, size_t errlen);

/* A writer's state for nf_interest_json_keys (the reads actor writes one value per event): the
 * topic names rendered once as JSON keys ("name": escaped; NULL array or NULL entry: the
 * decimal index) and the date part of the last day written. One thread uses one. */
typedef struct nf_interest_keys {
    char *text; /* every key, back to back */
    uint32_t at[NF_TOPICS_MAX], len[NF_TOPICS_MAX];
    int64_t day;   /* of date[]: days since the epoch; INT64_MIN = none */
    char date[11]; /* "YYYY-MM-DDT" */
} nf_interest_keys_t;
/* 0 or -ENOMEM. */
int nf_interest_keys_init(nf_interest_keys_t *k, const char *const *topic_names);
void nf_interest_keys_free(nf_interest_keys_t *k);
/* nf_interest_json with the keys rendered beforehand (same bytes). */
void nf_interest_json_keys(const nf_interest_out_t *o, const char *user_id, nf_interest_keys_t *k,
                           nf_jw_t *w);

/* Appends the interest-updates value to w (the caller resets w or writes around
 * it):
 *   {"user_id":U,"version":N,"vector":{name:weight,...},"updated_at":"RFC 3339
 * UTC"} names from topic_names[topic] (NULL array or NULL entry: the decimal
 * index); weights with 15 decimals (nf_jw_unit: absolute error < 6e-16);
 * updated_at by nf_date_format (".mmm" when the milliseconds are not zero). */
void nf_interest_json(const nf_interest_out_t *o, const char *user_id,
                      const char *const *topic_names, nf_jw_t *w);

#endif
