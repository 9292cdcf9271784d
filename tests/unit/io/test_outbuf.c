/* Tests src/io/outbuf.h: records in and out (topic, key, value, tombstones), and a reset that
 * keeps a buffer's capacity for the next epoch up to four times what the last one held (and
 * 1 MiB), so that a burst's epoch does not leave its size allocated for good (issue 36). */
#include "io/outbuf.h"
#include "nf_test.h"

#include <stdio.h>
#include <string.h>

static void fill(nf_outbuf_t *b, size_t bytes)
{
    char v[1000];
    memset(v, 'v', sizeof v);
    while (b->len < bytes)
        NF_REQUIRE(nf_outbuf_add(b, NF_TOPIC_ARTICLES, "key", 3, v, sizeof v) == 0);
}

static void test_records(void)
{
    nf_outbuf_t b = {0};
    NF_CHECK_EQ(nf_outbuf_add(&b, NF_TOPIC_ARTICLES, "k1", 2, "value", 5), 0);
    NF_CHECK_EQ(nf_outbuf_add_tombstone(&b, NF_TOPIC_ARTICLES, "k2", 2), 0);
    NF_CHECK_EQ(b.count, 2);
    size_t pos = 0;
    nf_outrec_t r;
    NF_CHECK_EQ(nf_outbuf_next(b.data, b.len, &pos, &r), 1);
    NF_CHECK(r.topic == NF_TOPIC_ARTICLES && r.klen == 2 && memcmp(r.key, "k1", 2) == 0);
    NF_CHECK(r.vlen == 5 && memcmp(r.value, "value", 5) == 0 && !r.tombstone);
    NF_CHECK_EQ(nf_outbuf_next(b.data, b.len, &pos, &r), 1);
    NF_CHECK(r.tombstone && r.vlen == 0 && memcmp(r.key, "k2", 2) == 0);
    NF_CHECK_EQ(nf_outbuf_next(b.data, b.len, &pos, &r), 0);
    nf_outbuf_free(&b);
}

static void test_reset_gives_back(void)
{
    nf_outbuf_t b = {0};
    fill(&b, (size_t)20 << 20); /* a burst's epoch */
    size_t burst_cap = b.cap;
    nf_outbuf_reset(&b);
    NF_CHECK_EQ(b.len, 0);
    NF_CHECK_EQ(b.count, 0);
    NF_CHECK_EQ(b.cap, burst_cap); /* kept: it was used */
    fill(&b, 100000);              /* the next epoch, small */
    nf_outbuf_reset(&b);
    NF_CHECK_EQ(b.cap, (size_t)1 << 20); /* given back but 1 MiB */
    fill(&b, 3 << 20);                   /* grows again, and holds its records */
    size_t pos = 0, n = 0;
    nf_outrec_t r;
    while (nf_outbuf_next(b.data, b.len, &pos, &r) == 1)
        n += r.vlen == 1000;
    NF_CHECK_EQ(n, b.count);
    nf_outbuf_reset(&b);
    NF_CHECK(b.cap >= (size_t)3 << 20); /* within four times what it held: kept */
    nf_outbuf_free(&b);
}

int main(void)
{
    NF_RUN(test_records);
    NF_RUN(test_reset_gives_back);
    return nf_test_report();
}
