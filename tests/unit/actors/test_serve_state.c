/* Tests src/actors/serve_state.c's dates (issue 37): an article's published time is its feed's
 * published_at however far in the past (an item dated 1971 is in no "last 48 h" feed), and the
 * ingest time only for a date in the future; an article older than the recent window gets its
 * metadata but no recent (feed) entry. A property over many dates against a reference model. */
#include "actors/article_msg.h"
#include "actors/serve_state.h"
#include "nf_test.h"
#include "state/store.h"

#include <stdio.h>
#include <stdlib.h>

#define MIN_MS (60ll * 1000)
#define DAY_MS (24ll * 3600 * 1000)

static const int64_t NOW = 1800000000000ll; /* 2027-01-15 */

static void test_published_rule(void)
{
    /* far past, recent past, now, the 5-minute allowance, the future */
    NF_CHECK_EQ(nf_serve_published_ms(31536000000ll, true, NOW), 31536000000ll); /* 1971 */
    NF_CHECK_EQ(nf_serve_published_ms(NOW - 400 * DAY_MS, true, NOW), NOW - 400 * DAY_MS);
    NF_CHECK_EQ(nf_serve_published_ms(NOW - MIN_MS, true, NOW), NOW - MIN_MS);
    NF_CHECK_EQ(nf_serve_published_ms(NOW + 5 * MIN_MS, true, NOW), NOW + 5 * MIN_MS);
    NF_CHECK_EQ(nf_serve_published_ms(NOW + 5 * MIN_MS + 1, true, NOW), NOW);
    NF_CHECK_EQ(nf_serve_published_ms(NOW + 365 * DAY_MS, true, NOW), NOW);
    NF_CHECK_EQ(nf_serve_published_ms(12345, false, NOW), NOW);
}

/* The article's batch: how many recent (feed) entries it got. */
static size_t recent_entries(const char *published_at, int64_t ingested_ms)
{
    char json[256];
    int n = snprintf(json, sizeof json,
                     "{\"article_id\":\"a1\",\"url\":\"https://x.test/1\",\"title\":\"t\","
                     "\"published_at\":\"%s\",\"ingested_at\":\"2027-01-15T08:00:00Z\"}",
                     published_at);
    nf_article_blob_t *a = calloc(1, sizeof *a + (size_t)n + 1);
    if (!a)
        return (size_t)-1;
    snprintf(a->article_id, sizeof a->article_id, "a1");
    a->id.hi = 7;
    a->ingested_ms = ingested_ms;
    a->topics.n = 2;
    a->topics.t[0] = (nf_topic_weight_t){3, 0.5};
    a->topics.t[1] = (nf_topic_weight_t){9, 0.5};
    a->len = (size_t)n;
    memcpy(a->json, json, (size_t)n + 1);
    nf_store_batch_t *b = nf_store_batch_new();
    size_t got = (size_t)-1;
    if (b && nf_serve_put_article(b, 1, a, 7 * DAY_MS) == 0)
        got = nf_store_batch_count(b) - 1; /* the metadata entry, then one per topic */
    nf_store_batch_free(b);
    free(a);
    return got;
}

static void test_old_items_get_no_feed_entry(void)
{
    NF_CHECK_EQ(recent_entries("1971-01-01T00:00:00Z", NOW), 0);
    NF_CHECK_EQ(recent_entries("2026-12-01T00:00:00Z", NOW), 0); /* 45 days old */
    NF_CHECK_EQ(recent_entries("2027-01-15T07:00:00Z", NOW), 2); /* an hour old */
    NF_CHECK_EQ(recent_entries("2030-01-01T00:00:00Z", NOW), 2); /* future: taken as now */
}

/* Property: for dates spread over 60 years around NOW, the rule is the reference model's:
 * kept unless after NOW + 5 min. */
static void test_published_property(void)
{
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 100000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int64_t d = (int64_t)(x % (60ull * 365 * 24 * 3600 * 1000)) - 30ll * 365 * DAY_MS;
        int64_t pub = NOW + d;
        int64_t want = pub <= NOW + 5 * MIN_MS ? pub : NOW;
        if (nf_serve_published_ms(pub, true, NOW) != want) {
            NF_CHECK_EQ(nf_serve_published_ms(pub, true, NOW), want);
            return;
        }
    }
}

int main(void)
{
    NF_RUN(test_published_rule);
    NF_RUN(test_old_items_get_no_feed_entry);
    NF_RUN(test_published_property);
    return nf_test_report();
}
