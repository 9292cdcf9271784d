/* classify.h — the classify stage (docs/ARCHITECTURE.md §1): gives each new article category labels
 * and a sparse, L2-normalized topic vector, from a topic taxonomy loaded once from config.
 *
 * Taxonomy file (config/taxonomy.json), one JSON object; unknown keys are refused:
 *
 *   {
 *     "version": 1,                  required, must be 1
 *     "description": "...",          optional, ignored
 *     "language": "english",         libstemmer algorithm for keywords, phrases and text
 *     "title_weight": 3,             a title occurrence counts this many body ones, (0, 100]
 *     "max_labels": 3,               at most this many category_labels, 0..8
 *     "min_confidence": 0.15,        a label needs this share of the total score, [0, 1]
 *     "min_score": 2,                ... and at least this absolute score, >= 0
 *     "stop_words": ["the", ...],    single words, dropped from text before stemming
 *     "topics": [                    1..64 topics; index in this array = topic index
 *       { "name": "politics",        [a-z0-9_-]{1,63}, unique
 *         "description": "...",      optional, ignored
 *         "keywords": {"election": 3, ...},         one word each, weight in (0, 100]
 *         "phrases": {"prime minister": 4, ...} }   2..8 words each, weight in (0, 100]
 *     ]
 *   }
 *
 * When absent, title_weight, max_labels, min_confidence and min_score default to 3, 3, 0.15
 * and 1, and stop_words to none. Keywords and phrases go through the same pipeline as article
 * text (below), so "elections", "elected" and "election" all match the keyword "election" (stem
 * "elect"). Two keywords (or two phrases) of one topic with the same stems are refused: the weight
 * would be ambiguous. A term may belong to several topics with different weights. Every load error
 * names the file and the key, e.g. `config/taxonomy.json: topics[3].keywords."vote": weight must be
 * a number in (0, 100]`.
 *
 * Text pipeline: the title and the body are tokenized separately (a phrase never spans them).
 * A word is a run of ASCII letters/digits and UTF-8 bytes >= 0x80, ASCII lower-cased (non-ASCII
 * letters are kept as they are); U+00A0, U+00AB, U+00BB and U+2000..U+206F (dashes, curly
 * quotes, ellipsis) separate words. An apostrophe (' or U+2019) inside a word is dropped
 * ("don't" -> "dont"), and a trailing possessive "'s" is removed ("minister's" -> "minister").
 * Words longer than 64 bytes (URLs, junk) are skipped. Stop words are dropped, the rest stemmed.
 * Phrases match consecutive stems after stop-word removal ("House of Commons" = [hous, common]).
 *
 * Scoring. With sat(n) = n ? 1 + ln(n) : 0 (so a repeated word cannot dominate), a term (keyword
 * or phrase) seen tc times in the title and bc times in the body adds to each of its topics
 *     weight * (title_weight * sat(tc) + sat(bc)).
 * Output: topics = every topic with a positive score, weight = score / ||scores||_2 (so the
 * vector has L2 norm 1, or is empty when nothing matched), sorted by weight descending, ties by
 * topic index. confidence(topic) = score / sum of scores, in [0, 1]; labels = the first
 * max_labels topics of that order with confidence >= min_confidence and score >= min_score.
 *
 * Threads: the taxonomy is immutable after nf_classify_load() and may be shared by all shards.
 * libstemmer is not thread-safe, so each shard owns an nf_classify_ctx_t (stemmer + scratch)
 * and may only use its own. nf_classify_text() allocates only while its scratch grows to the
 * largest text seen so far; input beyond NF_CLASSIFY_MAX_TEXT bytes per field is ignored, so
 * the work per article is bounded (the body is capped at 64 KiB upstream anyway). */
#ifndef NF_CLASSIFY_H
#define NF_CLASSIFY_H

#include "runtime/jsonw.h"

#include <stddef.h>
#include <stdint.h>

#define NF_CLASSIFY_MAX_TOPICS 64
#define NF_CLASSIFY_MAX_LABELS 8
#define NF_CLASSIFY_MAX_TEXT   (256u * 1024u) /* bytes per field; the rest is ignored */
#define NF_CLASSIFY_MAX_WORD   64             /* longer words are skipped */

typedef struct nf_classify_taxonomy nf_classify_taxonomy_t;
typedef struct nf_classify_ctx nf_classify_ctx_t;

typedef struct nf_classify_topic {
    uint16_t topic; /* index into the taxonomy's topics */
    double weight;  /* component of the L2-normalized vector, in (0, 1] */
} nf_classify_topic_t;

typedef struct nf_classify_label {
    uint16_t topic;
    double confidence; /* topic's share of the total score, in [0, 1] */
} nf_classify_label_t;

typedef struct nf_classify_result {
    unsigned ntopics;                                   /* 0 when nothing matched */
    nf_classify_topic_t topics[NF_CLASSIFY_MAX_TOPICS]; /* weight descending, then topic index */
    unsigned nlabels;
    nf_classify_label_t labels[NF_CLASSIFY_MAX_LABELS]; /* confidence descending */
    double score[NF_CLASSIFY_MAX_TOPICS]; /* raw score per topic index (diagnostics, tests) */
    unsigned tokens;                      /* words kept after stop-word removal */
    unsigned matches;                     /* keyword + phrase occurrences matched */
} nf_classify_result_t;

/* Any thread, at start-up. NULL on failure, with a message naming path and key in err. */
nf_classify_taxonomy_t *nf_classify_load(const char *path, char *err, size_t errlen);
/* The same from len bytes of JSON text in memory; `name` stands for the file in messages. */
nf_classify_taxonomy_t *nf_classify_load_text(const char *name, const char *data, size_t len,
                                              char *err, size_t errlen);
/* The default taxonomy compiled into the program: config/taxonomy.json as it was at build
 * time (the config's classify.taxonomy = "builtin"). */
extern const char nf_classify_builtin[];
extern const size_t nf_classify_builtin_len;
void nf_classify_free(nf_classify_taxonomy_t *t);

unsigned nf_classify_topic_count(const nf_classify_taxonomy_t *t);
/* NULL when idx is out of range. */
const char *nf_classify_topic_name(const nf_classify_taxonomy_t *t, unsigned idx);
/* -1 when no topic has that name. */
int nf_classify_topic_index(const nf_classify_taxonomy_t *t, const char *name);
/* A hash of everything that affects results (language, thresholds, stop words, topics, terms
 * and weights; not descriptions or formatting), so state can detect a changed taxonomy. */
uint64_t nf_classify_taxonomy_hash(const nf_classify_taxonomy_t *t);

/* One per shard thread; t must outlive it. NULL on -ENOMEM. */
nf_classify_ctx_t *nf_classify_ctx_new(const nf_classify_taxonomy_t *t);
void nf_classify_ctx_free(nf_classify_ctx_t *ctx);

/* Classifies one article; title and body are UTF-8 and may be NULL (empty). Only the thread
 * that owns ctx. 0, or -ENOMEM (out is then empty). Deterministic: the same taxonomy and text
 * give bit-identical results on any shard. */
int nf_classify_text(nf_classify_ctx_t *ctx, const char *title, const char *body,
                     nf_classify_result_t *out);

/* Appends "category_labels":[{"category":..,"confidence":..},...],"topics":{name:weight,...}
 * as two keys of the JSON object w currently has open. Doubles are written with %.9g. */
void nf_classify_json(const nf_classify_taxonomy_t *t, const nf_classify_result_t *r, nf_jw_t *w);

#endif
