/* breaking.h — breaking news (issue 45; docs/ARCHITECTURE.md §1, stage "breaking"): a story read
 * far faster than the other trending stories of its topic, found in each trending window as the
 * merger emits it (actors/trending.c) and announced once per cooldown on `breaking-news`.
 *
 * The rule, for one window (its end E, its ranked entries: one per story, with the story's reads
 * in the window — its velocity over trending.window_s — and its lead article's top topic, or
 * none when the lead has no topic vector):
 *   peers(e)     the window's other entries of e's topic
 *   baseline(e)  the median of the peers' reads (the middle one of an odd count, the mean of the
 *                two middle ones of an even count), when there are at least min_peers of them
 *   e breaks     when it has a topic and a baseline, reads >= min_reads,
 *                reads >= multiple × baseline, and its story did not break at a window ending
 *                within cooldown_ms before E (E - then < cooldown_ms)
 * The windows' entries are the top-K (trending.top_k), so a topic's baseline is what its
 * trending stories are read at now. Times are the windows' ends, never the wall clock: a replay
 * of the same windows decides the same (tests/unit/engine/test_breaking.c holds the rule to a
 * model, across saves and loads).
 *
 * State: the stories that broke within the cooldown (story id -> the end of the window it broke
 * at), forgotten once a window ends cooldown_ms after; saved as one blob whenever it changed,
 * in the same epoch as the records it decided (actors/trending.c): a crash takes back both or
 * neither, so no story is announced twice, nor missed.
 *
 * Threads: one owner (the merger's shard). */
#ifndef NF_BREAKING_H
#define NF_BREAKING_H

#include "algo/idset.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nf_breaking_opts {
    double multiple;    /* breaking.multiple, > 1 */
    uint64_t min_reads; /* breaking.min_reads */
    unsigned min_peers; /* breaking.min_peers, >= 1 */
    int64_t cooldown_ms;
} nf_breaking_opts_t;

typedef struct nf_breaking_entry {
    nf_id128_t story;
    uint64_t reads;
    int topic; /* the lead's top topic, -1: none */
} nf_breaking_entry_t;

typedef struct nf_breaking nf_breaking_t;

/* NULL on out-of-memory. */
nf_breaking_t *nf_breaking_new(const nf_breaking_opts_t *o);
void nf_breaking_free(nf_breaking_t *b);

/* The window ending at end_ms with entries e[0..n) (at most 65536): hit(arg, i, baseline, peers)
 * for each entry that breaks, in order, and the story remembered. Returns how many broke, or
 * the first negative hit() returned (the story is then not remembered: the epoch fails), or
 * -ENOMEM (nothing remembered of this window). */
int nf_breaking_window(nf_breaking_t *b, int64_t end_ms, const nf_breaking_entry_t *e, size_t n,
                       int (*hit)(void *arg, size_t i, double baseline, unsigned peers), void *arg);

/* Whether the state changed since the last nf_breaking_save. */
bool nf_breaking_dirty(const nf_breaking_t *b);
/* The state as one blob (malloc'd into *out, *len bytes): [u8 version 1][u32 n][n × (story hi
 * u64, story lo u64, at i64)], little-endian. 0 or -ENOMEM. Clears dirty. */
int nf_breaking_save(nf_breaking_t *b, void **out, size_t *len);
/* Replaces the state with a saved blob. 0 or -EINVAL (not one: the state is left empty). */
int nf_breaking_load(nf_breaking_t *b, const void *blob, size_t len);
/* Forgets every story (not dirty: what it had is saved). */
void nf_breaking_clear(nf_breaking_t *b);
/* Stories remembered (for a gauge). */
size_t nf_breaking_size(const nf_breaking_t *b);

#endif
