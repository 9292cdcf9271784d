/* article_msg.h — the message from crawl to dedup: one normalized article, already serialized
 * as the articles topic's JSON value, in a single heap block whose ownership travels with the
 * message (nf_msg_t.body.ptr). Internal to src/actors. */
#ifndef NF_ARTICLE_MSG_H
#define NF_ARTICLE_MSG_H

#include "algo/idset.h"
#include "engine/interest.h"
#include "runtime/runtime.h"
#include "runtime/trace.h"

#include <stddef.h>
#include <stdint.h>

enum { NF_MSG_ARTICLE = 1 };

typedef struct nf_article_blob {
    struct nf_article_blob *next; /* crawl's overflow list while a ring is full */
    nf_id128_t id;
    char article_id[33];
    int64_t ingested_ms;
    /* The feed's publication date, 0 when it gave none usable. In this process only: not in the
     * record below (an article through trending-panes has 0: not observed as published). */
    int64_t published_ms;
    /* The fetch's trace (runtime/trace.h; span: the crawl.fetch span), in this process only: an
     * article through trending-panes starts no spans at dedup. */
    nf_trace_ctx_t trace;
    nf_topic_vec_t topics; /* classify's vector, by topic index (empty: unclassified) */
    unsigned nsig;         /* MinHash values at sig (0: no clustering) */
    uint32_t *sig;         /* inside this block, after json */
    size_t len;
    char json[]; /* len bytes + NUL, then the signature */
} nf_article_blob_t;

/* An article as a record of the job's one-partition topic (`trending-panes`), the way crawl hands
 * articles to the one deduplicating process of a consumer group (ingest.h, in_partitions):
 *   ['A'][id: 16 BE][ingested_ms: 8 LE][article_id: 32][topics length: 2 LE][topics:
 *    nf_interest_topics_encode][nsig: 4 LE][signature: nsig x 4 LE][json length: 4 LE][json]
 * nf_article_blob_encode returns the malloc'ed record and its length in *len (NULL: out of
 * memory or an unencodable vector); nf_article_blob_decode returns a blob as crawl builds it
 * (one heap block, next = NULL), or NULL with the reason in err (truncated or inconsistent:
 * the record was not written by this version). */
unsigned char *nf_article_blob_encode(const nf_article_blob_t *b, size_t *len);
nf_article_blob_t *nf_article_blob_decode(const void *rec, size_t len, char *err, size_t errlen);

extern const nf_actor_ops_t nf_crawl_ops; /* crawl.c */
extern const nf_actor_ops_t nf_dedup_ops; /* dedup.c */

#endif
