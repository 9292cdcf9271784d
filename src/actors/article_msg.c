/* article_msg.c — an article as a record (article_msg.h). */
#include "actors/article_msg.h"

#include "algo/bytes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEAD (1 + 16 + 8 + 32 + 2)

unsigned char *nf_article_blob_encode(const nf_article_blob_t *b, size_t *len)
{
    unsigned char topics[NF_TOPICS_ENC_MAX];
    int tl = nf_interest_topics_encode(&b->topics, topics, sizeof topics);
    if (tl < 0 || strlen(b->article_id) != 32)
        return NULL;
    size_t n = HEAD + (size_t)tl + 4 + (size_t)b->nsig * 4 + 4 + b->len;
    unsigned char *r = malloc(n), *p = r;
    if (!r)
        return NULL;
    *p++ = 'A';
    for (int i = 0; i < 8; i++) {
        p[i] = (unsigned char)(b->id.hi >> (56 - 8 * i));
        p[8 + i] = (unsigned char)(b->id.lo >> (56 - 8 * i));
    }
    p += 16;
    nf_put_le64(p, (uint64_t)b->ingested_ms);
    p += 8;
    memcpy(p, b->article_id, 32);
    p += 32;
    p[0] = (unsigned char)tl;
    p[1] = (unsigned char)(tl >> 8);
    p += 2;
    memcpy(p, topics, (size_t)tl);
    p += tl;
    nf_put_le32(p, b->nsig);
    p += 4;
    for (unsigned i = 0; i < b->nsig; i++, p += 4)
        nf_put_le32(p, b->sig[i]);
    nf_put_le32(p, (uint32_t)b->len);
    p += 4;
    memcpy(p, b->json, b->len);
    *len = n;
    return r;
}

nf_article_blob_t *nf_article_blob_decode(const void *rec, size_t len, char *err, size_t errlen)
{
    const unsigned char *p = rec, *end = p + len;
    if (len < HEAD || p[0] != 'A') {
        snprintf(err, errlen, "not an article record");
        return NULL;
    }
    size_t tl = (size_t)p[HEAD - 2] | (size_t)p[HEAD - 1] << 8;
    const unsigned char *tp = p + HEAD;
    if ((size_t)(end - tp) < tl + 4) {
        snprintf(err, errlen, "article record truncated in its topics");
        return NULL;
    }
    uint32_t nsig = nf_get_le32(tp + tl);
    const unsigned char *sp = tp + tl + 4;
    if (nsig > 4096 || (size_t)(end - sp) < (size_t)nsig * 4 + 4) {
        snprintf(err, errlen, "article record truncated in its signature");
        return NULL;
    }
    uint32_t jl = nf_get_le32(sp + (size_t)nsig * 4);
    const unsigned char *jp = sp + (size_t)nsig * 4 + 4;
    if ((size_t)(end - jp) != jl) {
        snprintf(err, errlen, "article record: JSON length %u, %zu bytes left", jl,
                 (size_t)(end - jp));
        return NULL;
    }
    size_t sig_off = ((size_t)jl + 1 + 3) & ~(size_t)3;
    nf_article_blob_t *b = malloc(sizeof *b + sig_off + (size_t)nsig * sizeof(uint32_t));
    if (!b) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    memset(b, 0, sizeof *b);
    for (int i = 0; i < 8; i++) {
        b->id.hi = b->id.hi << 8 | p[1 + i];
        b->id.lo = b->id.lo << 8 | p[9 + i];
    }
    b->ingested_ms = (int64_t)nf_get_le64(p + 17);
    memcpy(b->article_id, p + 25, 32);
    b->article_id[32] = '\0';
    nf_id128_t hex;
    bool lower = true;
    for (int i = 0; i < 32 && lower; i++)
        lower = (b->article_id[i] >= '0' && b->article_id[i] <= '9') ||
                (b->article_id[i] >= 'a' && b->article_id[i] <= 'f');
    if (!lower || nf_id128_from_hex(b->article_id, &hex) != 0 || hex.hi != b->id.hi ||
        hex.lo != b->id.lo) {
        snprintf(err, errlen, "article record: its article_id is not the hex of its id");
        free(b);
        return NULL;
    }
    if (nf_interest_topics_decode(tp, tl, &b->topics) != 0) {
        snprintf(err, errlen, "article record: its topic vector does not decode");
        free(b);
        return NULL;
    }
    b->nsig = nsig;
    b->sig = nsig ? (uint32_t *)(void *)(b->json + sig_off) : NULL;
    for (uint32_t i = 0; i < nsig; i++)
        b->sig[i] = nf_get_le32(sp + 4 * (size_t)i);
    b->len = jl;
    memcpy(b->json, jp, jl);
    b->json[jl] = '\0';
    return b;
}
