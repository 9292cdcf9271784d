/* An article as a record of the one-partition topic (article_msg.h): every blob crawl can build
 * comes back from its record as it went in, and a damaged record is refused, never misread. */
#include "actors/article_msg.h"
#include "nf_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    return nf_test_xorshift(&g_rng);
}

/* A blob laid out as crawl's article_blob lays it out. */
static nf_article_blob_t *make_blob(size_t jlen, unsigned nsig, unsigned ntopics)
{
    size_t sig_off = (jlen + 1 + 3) & ~(size_t)3;
    nf_article_blob_t *b = calloc(1, sizeof *b + sig_off + (size_t)nsig * sizeof(uint32_t));
    if (!b)
        return NULL;
    b->id.hi = rnd();
    b->id.lo = rnd();
    snprintf(b->article_id, sizeof b->article_id, "%016llx%016llx", (unsigned long long)b->id.hi,
             (unsigned long long)b->id.lo);
    b->ingested_ms = (int64_t)(rnd() >> 20);
    for (unsigned i = 0; i < ntopics; i++) {
        b->topics.t[b->topics.n].topic = (uint16_t)(i * 3);
        b->topics.t[b->topics.n++].weight = (double)(1 + rnd() % 1000) / 1000.0; /* 0 = absent */
    }
    b->nsig = nsig;
    b->sig = nsig ? (uint32_t *)(void *)(b->json + sig_off) : NULL;
    for (unsigned i = 0; i < nsig; i++)
        b->sig[i] = (uint32_t)rnd();
    for (size_t i = 0; i < jlen; i++)
        b->json[i] = (char)(' ' + rnd() % 90);
    b->json[jlen] = '\0';
    b->len = jlen;
    return b;
}

static void test_roundtrip(void)
{
    for (int round = 0; round < 500; round++) {
        nf_article_blob_t *b = make_blob(rnd() % 5000, round % 3 ? 128 : 0, (unsigned)(rnd() % 20));
        NF_REQUIRE(b);
        size_t len = 0;
        unsigned char *rec = nf_article_blob_encode(b, &len);
        NF_REQUIRE(rec);
        NF_CHECK_EQ(rec[0], 'A');
        char err[256];
        nf_article_blob_t *d = nf_article_blob_decode(rec, len, err, sizeof err);
        NF_REQUIRE(d);
        NF_CHECK(d->id.hi == b->id.hi && d->id.lo == b->id.lo);
        NF_CHECK(!strcmp(d->article_id, b->article_id));
        NF_CHECK(d->ingested_ms == b->ingested_ms);
        NF_CHECK(d->topics.n == b->topics.n);
        for (unsigned i = 0; i < d->topics.n && i < b->topics.n; i++)
            NF_CHECK(d->topics.t[i].topic == b->topics.t[i].topic &&
                     d->topics.t[i].weight == b->topics.t[i].weight);
        NF_CHECK(d->nsig == b->nsig);
        NF_CHECK(!d->nsig || !memcmp(d->sig, b->sig, d->nsig * sizeof(uint32_t)));
        NF_CHECK(d->len == b->len && !memcmp(d->json, b->json, b->len) && !d->json[d->len]);
        NF_CHECK(d->next == NULL);
        /* every truncation, and a byte more, is refused */
        for (size_t cut = 0; cut < len; cut += 1 + len / 50) {
            nf_article_blob_t *t = nf_article_blob_decode(rec, cut, err, sizeof err);
            NF_CHECK(t == NULL);
            free(t);
        }
        unsigned char *more = malloc(len + 1);
        NF_REQUIRE(more);
        memcpy(more, rec, len);
        more[len] = 'x';
        nf_article_blob_t *t = nf_article_blob_decode(more, len + 1, err, sizeof err);
        NF_CHECK(t == NULL);
        free(t);
        free(more);
        free(d);
        free(rec);
        free(b);
    }
    char err[256];
    NF_CHECK(nf_article_blob_decode("P", 1, err, sizeof err) == NULL);
    NF_CHECK(nf_article_blob_decode(NULL, 0, err, sizeof err) == NULL);
}

int main(void)
{
    NF_RUN(test_roundtrip);
    return nf_test_report();
}
