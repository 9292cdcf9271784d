/* article_msg.h — the message from crawl to dedup: one normalized article, already serialized
 * as the articles topic's JSON value, in a single heap block whose ownership travels with the
 * message (nf_msg_t.body.ptr). Internal to src/actors. */
#ifndef NF_ARTICLE_MSG_H
#define NF_ARTICLE_MSG_H

#include "actors/interest.h"
#include "algo/idset.h"
#include "runtime/runtime.h"

#include <stddef.h>
#include <stdint.h>

enum { NF_MSG_ARTICLE = 1 };

typedef struct nf_article_blob {
    struct nf_article_blob *next; /* crawl's overflow list while a ring is full */
    nf_id128_t id;
    char article_id[33];
    int64_t ingested_ms;
    nf_topic_vec_t topics; /* classify's vector, by topic index (empty: unclassified) */
    unsigned nsig;         /* MinHash values at sig (0: no clustering) */
    uint32_t *sig;         /* inside this block, after json */
    size_t len;
    char json[]; /* len bytes + NUL, then the signature */
} nf_article_blob_t;

extern const nf_actor_ops_t nf_crawl_ops; /* crawl.c */
extern const nf_actor_ops_t nf_dedup_ops; /* dedup.c */

#endif
