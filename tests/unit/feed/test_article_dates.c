/* Tests nf_article_bound_dates (src/feed/feed.h; issue 15, item 2): the job's rule for article
 * dates far in the future or at/before 1970, applied to what nf_feed_parse read. */
#include "feed/feed.h"
#include "nf_test.h"

#include <string.h>

#define FETCHED 1795633554764ll /* 2026-11-25T19:05:54.764Z */
#define SKEW    300000ll
#define FUTURE  253402300799000ll /* 9999-12-31T23:59:59Z */

static nf_article_t art(int64_t pub, int64_t upd)
{
    nf_article_t a;
    memset(&a, 0, sizeof a);
    a.published_ms = pub;
    a.updated_ms = upd;
    return a;
}

static void test_usable_dates_kept(void)
{
    nf_article_t a = art(FETCHED - 3600000, FETCHED + SKEW);
    NF_CHECK_EQ(nf_article_bound_dates(&a, FETCHED, SKEW), 0);
    NF_CHECK(a.published_ms == FETCHED - 3600000 && a.updated_ms == FETCHED + SKEW);
    NF_CHECK(!a.date_fallback);
    /* old but after 1970: kept (archives) */
    a = art(86400000, 86400000);
    NF_CHECK_EQ(nf_article_bound_dates(&a, FETCHED, SKEW), 0);
    /* no upper bound with max_future_ms 0 */
    a = art(FUTURE, FUTURE);
    NF_CHECK_EQ(nf_article_bound_dates(&a, FETCHED, 0), 0);
}

static void test_future_published_takes_updated(void)
{
    nf_article_t a = art(FUTURE, FETCHED - 1000);
    NF_CHECK_EQ(nf_article_bound_dates(&a, FETCHED, SKEW), 1);
    NF_CHECK(a.published_ms == FETCHED - 1000 && a.updated_ms == FETCHED - 1000);
    NF_CHECK(!a.date_fallback);
    a = art(FETCHED - 1000, FETCHED + SKEW + 1);
    NF_CHECK_EQ(nf_article_bound_dates(&a, FETCHED, SKEW), 1);
    NF_CHECK(a.published_ms == FETCHED - 1000 && a.updated_ms == FETCHED - 1000);
}

static void test_no_usable_date_falls_back(void)
{
    static const int64_t bad[] = {FUTURE, 0, -2208988800000ll /* 1900 */, INT64_MIN, INT64_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        nf_article_t a = art(bad[i], bad[i]);
        NF_CHECK_EQ(nf_article_bound_dates(&a, FETCHED, SKEW), 2);
        NF_CHECK(a.published_ms == FETCHED && a.updated_ms == FETCHED);
        NF_CHECK(a.date_fallback);
    }
    nf_article_t a = art(0, FUTURE);
    NF_CHECK_EQ(nf_article_bound_dates(&a, FETCHED, SKEW), 2);
    NF_CHECK(a.published_ms == FETCHED && a.date_fallback);
}

int main(void)
{
    NF_RUN(test_usable_dates_kept);
    NF_RUN(test_future_published_takes_updated);
    NF_RUN(test_no_usable_date_falls_back);
    return nf_test_report();
}
