/* rank.h — a reader's feed ranked over the committed view's lists of recent articles
 * (docs/ARCHITECTURE.md §4 "Queries", "Ranking a feed").
 *
 * An article's score for a reader is  dot(interest, topics) × decay + 0.1 × trending / 1000,
 * decay = exp(-0.5 × hours since published) — the seed's weights; a ranking variant
 * (engine/variants.h) brings its own trending weight and decay rate, and its interest and follow
 * weights in the reader's dense weights. The best m articles are kept in a bounded heap
 * (an article listed under several of the reader's topics once), and a list is read only as far
 * as what is left in it could still enter: the threshold algorithm (Fagin, Lotem and Naor) over
 * two orders of each list — newest first, where suffix maxima of |topics| × decay bound the
 * first term, and by trending score, which bounds the second. The result is exactly the m
 * that scoring every entry gives (tests/unit/serve/test_rank.c compares the two on random lists,
 * and with a model of the formula); only the work differs. */
#pragma once

#include "algo/idset.h"
#include "engine/interest.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The decay rate per hour the lists' decays and bounds are computed at (the seed's). */
#define NF_RANK_LIST_DECAY 0.5

typedef struct nf_rentry {
    nf_id128_t id;
    int64_t published_ms; /* 0: a trending candidate (its time comes from its metadata) */
    int64_t expires_ms;   /* 0 = never */
    uint64_t trend;       /* its score in the view's trending window (0: not in it) */
    double decay;         /* exp(-0.5 * hours from published to the list's loaded_ms) */
    uint32_t off;         /* its topic vector: the list's w[off .. off + n) */
    uint16_t n;
    bool known; /* a trending candidate: it has a vector (expiring at expires_ms) */
} nf_rentry_t;

/* A topic's recent articles, newest first, or the trending window's articles in its order. An
 * expired entry is no candidate (a cold reader's is, without its vector). */
typedef struct nf_rlist {
    bool loaded;
    int64_t loaded_ms; /* a topic's list: the time its entries' decay is computed at (one for
                        * all of a view's lists: an article under two topics scores the same) */
    int err;           /* < 0: the load failed (not cached: the next request tries again) */
    nf_rentry_t *e;
    size_t n;
    nf_topic_weight_t *w;
    size_t nw;
    /* nf_rlist_prepare: per entry i, over the entries from i on, the largest |topics|_1 × decay
     * and |topics|_2 × decay of those published by loaded_ms, and |topics|_1, |topics|_2 of
     * those published after it (bound[4 i .. 4 i + 3]); the entries with a trending score, by
     * it (best first) */
    double *bound;
    uint32_t *by_trend;
    size_t ntrend;
} nf_rlist_t;

/* Appends one entry to l (*cap, *wcap: its arrays' capacities, 0 at first). 0 or -ENOMEM. */
int nf_rlist_add(nf_rlist_t *l, size_t *cap, size_t *wcap, nf_id128_t id, int64_t published,
                 int64_t expires, uint64_t trend, const nf_topic_vec_t *vec);
void nf_rlist_free(nf_rlist_t *l);

/* Once per list, before ranking over it: each entry's trend (trend_of(arg, id)) and decay at
 * at_ms, and the bounds above. 0 or -ENOMEM. */
int nf_rlist_prepare(nf_rlist_t *l, uint64_t (*trend_of)(const void *arg, nf_id128_t id),
                     const void *arg, int64_t at_ms);
/* Bytes l holds (for the view cache's gauge). */
size_t nf_rlist_bytes(const nf_rlist_t *l);

/* exp(-0.5 * hours) of an age in ms; 1 for the future. */
double nf_rank_decay(int64_t age_ms);

typedef struct nf_cand {        /* 32 bytes: the heap moves them */
    const nf_rentry_t *e;       /* its trending score: e->trend */
    const nf_topic_weight_t *w; /* its vector (nw weights) */
    double score;
    uint32_t nw;
} nf_cand_t;

/* Best first: score, then the newer, then the smaller id (a total order but for one article
 * listed under two topics, which compares equal to itself). */
int nf_cand_cmp(const void *a, const void *b);

typedef struct nf_rank {
    /* the reader: its weights by topic (NULL: a cold reader, ranked by trending score alone) */
    const double *dense;
    double maxw, norm; /* the largest |weight| and the Euclidean norm of dense */
    int64_t now;
    bool (*skip)(const void *arg, nf_id128_t id); /* left out (hidden), or NULL */
    const void *skip_arg;
    uint64_t mute; /* topics muted (bit t): an entry whose vector names one is left out */
    nf_cand_t *c;  /* the heap of the best m so far (worst at the root), then the answer */
    size_t n, m;
    /* the trending term's weight and the decay's rate per hour (nf_rank_init: the seed's 0.1 and
     * NF_RANK_LIST_DECAY; a ranking variant's, engine/variants.h, set between init and the
     * lists): a rate below the lists' ranks without pruning, its bounds being the lists' */
    double trend_w, decay;
    bool dropped;  /* a candidate was left out for want of room: the m are not all of them */
    size_t scored; /* entries scored (what the pruning saves shows here) */
} nf_rank_t;

/* r ranks into c (room for m) for a reader with weights dense[NF_TOPICS_MAX] (NULL: cold). */
void nf_rank_init(nf_rank_t *r, const double *dense, int64_t now, nf_cand_t *c, size_t m);
/* Offers l's live entries; prune: read l only as far as an entry could still enter (never for
 * a cold reader, whose list is not in newest-first order). */
void nf_rank_list(nf_rank_t *r, const nf_rlist_t *l, bool prune);
/* Then the candidates kept, best first, one per call (a heap: an answer that needs 20 of the
 * 96 kept does not sort them all): false when none is left. */
void nf_rank_finish(nf_rank_t *r);
bool nf_rank_next(nf_rank_t *r, nf_cand_t *out);
