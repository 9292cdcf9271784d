/* readers.h — a reader's inputs to a feed kept from one committed view to the next: the interest
 * vector, the hidden articles (what the reader disliked or hid) and the followed and muted topics
 * and muted sources (engine/follows.h, beside the history) read from a view, valid in a
 * later view for as long as the store's tracked writes (state/store.h, nf_store_track) show no
 * write to the reader's interest or history since, nothing read has expired and the process
 * owns the same read-events partitions. A feed then reads neither RocksDB nor the history for a
 * reader whose state did not change; an answer is still what the view would give
 * (serve/test_readers: kept and read afresh agree over random writes and views).
 * docs/ARCHITECTURE.md §4 "A reader's inputs kept".
 *
 * The table has a fixed number of entries (serve.reader_cache), two ways per set: a reader
 * replaces the older of the two. Threads: any, concurrently (striped locks). */
#ifndef NF_READERS_H
#define NF_READERS_H

#include "algo/idset.h"
#include "engine/follows.h"
#include "engine/interest.h"
#include "state/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NF_READER_HIDDEN_MAX  512 /* the history's newest entries looked at for hidden articles */
#define NF_READER_HIDDEN_KEPT 64  /* readers with more hidden articles are not kept */

typedef struct nf_reader {
    bool found; /* an interest vector (else the feed is the trending window's) */
    uint64_t version;
    int64_t updated_ms;
    nf_topic_vec_t vec;
    size_t nhidden;
    nf_id128_t hidden[NF_READER_HIDDEN_MAX]; /* sorted (nf_id128_cmp) */
    uint64_t follow, mute; /* topics followed and muted (engine/follows.h), bit t: topic t */
    /* sources muted (engine/follows.h), oldest first: their hashes (nf_serve_source_hash) and
     * their ids, each NUL-terminated, one after the other in msrc_text (msrc_text_len bytes) */
    unsigned nmsrc;
    uint64_t msrc[NF_FOLLOWS_SOURCES_MAX];
    size_t msrc_text_len;
    char msrc_text[NF_FOLLOWS_SOURCES_MAX * (NF_FOLLOWS_SOURCE_MAX + 1)];
    int64_t until_ms; /* the earliest expiry of what it was read from (0: none) */
    bool keep;        /* false: not to be kept (its history scan reached its limit) */
} nf_reader_t;

typedef struct nf_readers nf_readers_t;

/* A table of entries readers (0: NULL, nothing kept), or NULL (no memory). */
nf_readers_t *nf_readers_new(size_t entries);
void nf_readers_free(nf_readers_t *c);
/* The kept inputs of user (the reader's interest-key id) into *out, if valid in view v at now
 * for the owned partitions' signature: 1, else 0 (out untouched: read them from v). */
int nf_readers_get(nf_readers_t *c, const nf_store_view_t *v, nf_id128_t user, uint64_t owned,
                   int64_t now, nf_reader_t *out);
/* Keeps r, read from view v for owned (nothing if !r->keep or it has too many hidden). */
void nf_readers_put(nf_readers_t *c, const nf_store_view_t *v, nf_id128_t user, uint64_t owned,
                    const nf_reader_t *r);
/* What was looked up: kept and valid (hit), kept but changed or expired since (changed),
 * not kept (miss). Bytes kept. */
typedef struct nf_readers_stats {
    uint64_t hits, changed, misses;
    size_t bytes;
} nf_readers_stats_t;
void nf_readers_stats(nf_readers_t *c, nf_readers_stats_t *s);

#endif
