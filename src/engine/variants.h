/* variants.h — ranking experiments (issue 45; docs/ARCHITECTURE.md §4 "Ranking experiments"):
 * named variants of the feed's ranking, readers bucketed among them by a stable hash, and what
 * each variant's readers did.
 *
 * A variant is the feed's score (serve/rank.h) with its own weights:
 *   score = (interest × dot(vector, topics) + follow × Σ topics' weights of followed topics)
 *           × exp(-decay × hours since published) + trending × trending score / 1000
 * The seed's weights are interest 1, follow 0.5, decay 0.5, trending 0.1 (NF_RANK_SEED).
 *
 * Configuration (ranking.variants, one entry per variant, config order):
 *   NAME [share=PERCENT] [interest=X] [trending=X] [decay=X] [follow=X] [shadow]
 * NAME is 1..32 of [a-z0-9_-], starting with a letter or digit, unique, not "none" or "other"
 * (the reads' labels for no variant and an unknown one). A weight left out is the seed's; each is
 * a decimal number in [0, 1000]. A served variant's share is a whole percent (0..100) and the
 * served variants' shares add up to 100; a shadow variant has no share: it is ranked beside the
 * served one for every feed, never shown, and what it would have shown is compared with what was
 * (newsflow_ranking_shadow_overlap). At most NF_VARIANTS_MAX variants, one of them shadow. An
 * empty list is one served variant, "seed", with the seed's weights.
 *
 * Assignment: bucket = nf_hash64(experiment 0x00 user_id, NF_VARIANTS_SEED) % 100 (algo/hash.h:
 * the same on every machine and version), and the reader's variant is the first served one
 * whose cumulative share passes the bucket. It depends on nothing but the experiment's name
 * (ranking.experiment), the user id and the shares, so every process and every restart gives a
 * reader the same variant; a new experiment name reshuffles the readers.
 *
 * Threads: nf_variants_parse at start-up; a parsed nf_variants_t is read-only and any thread may
 * call the rest. */
#ifndef NF_VARIANTS_H
#define NF_VARIANTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NF_VARIANTS_MAX     8
#define NF_VARIANT_NAME_MAX 32
#define NF_VARIANTS_SEED    0x76617269616e7473ull /* "variants" */
#define NF_VARIANTS_BUCKETS 100

typedef struct nf_rank_weights {
    double interest, follow, decay, trending;
} nf_rank_weights_t;

#define NF_RANK_SEED                                                                               \
    ((nf_rank_weights_t){.interest = 1.0, .follow = 0.5, .decay = 0.5, .trending = 0.1})

typedef struct nf_variant {
    char name[NF_VARIANT_NAME_MAX + 1];
    nf_rank_weights_t w;
    unsigned share; /* percent of readers (0 for the shadow) */
    bool shadow;
} nf_variant_t;

typedef struct nf_variants {
    nf_variant_t v[NF_VARIANTS_MAX];
    unsigned n;
    int shadow; /* its index, or -1 */
    char experiment[64];
} nf_variants_t;

/* Parses list ('\n'-separated entries, as config.h keeps a list; "" = the seed alone) under the
 * experiment's name (1..63 bytes). 0, or -EINVAL with one message in err naming the entry, e.g.
 *   ranking.variants: entry 2 ("fresh share=x"): share: "x" is not a whole percent (0..100)
 *   ranking.variants: the served variants' shares add up to 90, not 100 */
int nf_variants_parse(const char *list, const char *experiment, nf_variants_t *out, char *err,
                      size_t errlen);

/* The reader's bucket (0..99) and served variant's index. */
unsigned nf_variants_bucket(const nf_variants_t *v, const char *user, size_t n);
unsigned nf_variants_assign(const nf_variants_t *v, const char *user, size_t n);

/* The index of the variant named name (n bytes), or -1. */
int nf_variants_find(const nf_variants_t *v, const char *name, size_t n);

/* The label value of index i for the reads' metric: the variant's name, "none" (i == n: a read
 * that named none) or "other" (i == n + 1: a name not configured). */
const char *nf_variants_label(const nf_variants_t *v, unsigned i);

#endif
