/* outbuf.c — see outbuf.h. */
#include "io/outbuf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#define TOMBSTONE 0x80u

static int add(nf_outbuf_t *b, unsigned topic_byte, const char *key, size_t klen, const char *value,
               size_t vlen)
{
    if (klen > UINT32_MAX || vlen > UINT32_MAX)
        return -EINVAL;
    size_t need = b->len + 9 + klen + vlen;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < need)
            cap *= 2;
        unsigned char *d = realloc(b->data, cap);
        if (!d)
            return -ENOMEM;
        b->data = d;
        b->cap = cap;
    }
    unsigned char *p = b->data + b->len;
    p[0] = (unsigned char)topic_byte;
    put32(p + 1, (uint32_t)klen);
    put32(p + 5, (uint32_t)vlen);
    if (klen)
        memcpy(p + 9, key, klen);
    if (vlen)
        memcpy(p + 9 + klen, value, vlen);
    b->len = need;
    b->count++;
    return 0;
}

int nf_outbuf_add(nf_outbuf_t *b, nf_topic_t topic, const char *key, size_t klen, const char *value,
                  size_t vlen)
{
    return add(b, (unsigned)topic, key, klen, value, vlen);
}

int nf_outbuf_add_tombstone(nf_outbuf_t *b, nf_topic_t topic, const char *key, size_t klen)
{
    return add(b, (unsigned)topic | TOMBSTONE, key, klen, NULL, 0);
}

/* A buffer keeps its capacity for the next epoch, up to four times what this one held (and
 * KEEP_MIN): a burst's epoch (tens of MB of articles) does not leave its size held for good. */
enum { KEEP_MIN = 1 << 20 };

void nf_outbuf_reset(nf_outbuf_t *b)
{
    size_t keep = 2 * b->len > KEEP_MIN ? 2 * b->len : KEEP_MIN;
    if (b->cap > 2 * keep) {
        unsigned char *d = realloc(b->data, keep);
        if (d) {
            b->data = d;
            b->cap = keep;
        }
    }
    b->len = 0;
    b->count = 0;
}

void nf_outbuf_free(nf_outbuf_t *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

int nf_outbuf_next(const void *data, size_t len, size_t *pos, nf_outrec_t *r)
{
    const unsigned char *d = data;
    size_t p = *pos;
    if (p >= len)
        return 0;
    if (len - p < 9 || (d[p] & ~TOMBSTONE) >= NF_TOPIC__COUNT)
        return -EINVAL;
    uint32_t kl = get32(d + p + 1), vl = get32(d + p + 5);
    if ((uint64_t)kl + vl > len - p - 9 || ((d[p] & TOMBSTONE) && vl))
        return -EINVAL;
    r->topic = (nf_topic_t)(d[p] & ~TOMBSTONE);
    r->tombstone = (d[p] & TOMBSTONE) != 0;
    r->klen = kl;
    r->vlen = vl;
    r->key = (const char *)d + p + 9;
    r->value = (const char *)d + p + 9 + kl;
    *pos = p + 9 + kl + vl;
    return 1;
}
