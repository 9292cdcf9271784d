/* outbuf.h — an epoch's outputs as one flat byte buffer: what a shard emitted between two cuts,
 * in emission order, ready to be stored in the pending record and produced to Kafka.
 *
 * Record layout: [topic: 1 byte][key length: 4 bytes][value length: 4 bytes][key][value], the
 * lengths in little-endian; the topic byte's high bit marks a tombstone (a null value: a
 * changelog delete, state/changelog.h). A buffer is appended to by one shard, then handed whole to
 * the epoch coordinator at the cut (no locks: ownership moves with the hand-over). */
#ifndef NF_OUTBUF_H
#define NF_OUTBUF_H

#include "io/sink.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nf_outbuf {
    unsigned char *data;
    size_t len, cap;
    uint32_t count;
} nf_outbuf_t;

typedef struct nf_outrec {
    nf_topic_t topic;
    const char *key, *value;
    uint32_t klen, vlen;
    bool tombstone; /* a null value (vlen 0) */
} nf_outrec_t;

/* 0 or -ENOMEM (the buffer is unchanged). */
int nf_outbuf_add(nf_outbuf_t *b, nf_topic_t topic, const char *key, size_t klen, const char *value,
                  size_t vlen);
/* A record with a null value (a tombstone). 0 or -ENOMEM. */
int nf_outbuf_add_tombstone(nf_outbuf_t *b, nf_topic_t topic, const char *key, size_t klen);
/* Empties b for reuse; a capacity beyond four times what it held (and 1 MiB) is given back. */
void nf_outbuf_reset(nf_outbuf_t *b);
void nf_outbuf_free(nf_outbuf_t *b);
/* Iteration over data[0..len): 1 and *r filled, 0 at the end, -EINVAL for a malformed buffer
 * (a stored record that does not decode). Start with *pos = 0. */
int nf_outbuf_next(const void *data, size_t len, size_t *pos, nf_outrec_t *r);

#endif
