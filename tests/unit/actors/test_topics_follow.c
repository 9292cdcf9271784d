/* The articles' topic vectors read back from the articles topic (topics_follow.h): a value as
 * the job writes it gives the vector classify made, by topic index; anything else names no
 * article or only the topics the taxonomy knows. */
#include "actors/topics_follow.h"
#include "engine/classify.h"
#include "nf_test.h"

#include <string.h>

static void test_parse(void)
{
    char err[256];
    nf_classify_taxonomy_t *tax = nf_classify_load_text("builtin taxonomy", nf_classify_builtin,
                                                        nf_classify_builtin_len, err, sizeof err);
    NF_REQUIRE(tax);
    int politics = -1, sports = -1;
    for (unsigned i = 0; i < nf_classify_topic_count(tax); i++) {
        if (!strcmp(nf_classify_topic_name(tax, i), "politics"))
            politics = (int)i;
        if (!strcmp(nf_classify_topic_name(tax, i), "sports"))
            sports = (int)i;
    }
    NF_REQUIRE(politics >= 0 && sports > politics);
    nf_id128_t id;
    nf_topic_vec_t v;
    const char *ok = "{\"article_id\":\"6f09fce05af7d21c280b5d2ef1713fb4\",\"url\":\"http://a/1\","
                     "\"topics\":{\"sports\":0.8,\"nosuchtopic\":0.5,\"politics\":0.6,"
                     "\"world\":\"x\"},\"category_labels\":[\"sports\"]}";
    NF_CHECK(nf_topics_follow_parse(tax, ok, strlen(ok), &id, &v));
    NF_CHECK(id.hi == 0x6f09fce05af7d21cull && id.lo == 0x280b5d2ef1713fb4ull);
    NF_CHECK_EQ(v.n, 2u); /* unknown names and non-numbers skipped */
    NF_CHECK(v.t[0].topic == politics && v.t[0].weight == 0.6);
    NF_CHECK(v.t[1].topic == sports && v.t[1].weight == 0.8);
    const char *none = "{\"article_id\":\"6f09fce05af7d21c280b5d2ef1713fb4\",\"topics\":{}}";
    NF_CHECK(nf_topics_follow_parse(tax, none, strlen(none), &id, &v) && v.n == 0);
    const char *dup = "{\"article_id\":\"6f09fce05af7d21c280b5d2ef1713fb4\",\"topics\":"
                      "{\"sports\":0.5,\"sports\":0.9,\"politics\":1e999}}";
    NF_CHECK(nf_topics_follow_parse(tax, dup, strlen(dup), &id, &v));
    NF_CHECK(v.n == 1 && v.t[0].topic == sports && v.t[0].weight == 0.5);
    const char *bad[] = {"",
                         "{",
                         "[]",
                         "{\"topics\":{\"sports\":1}}",
                         "{\"article_id\":\"xyz\"}",
                         "{\"article_id\":17}",
                         "null"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        NF_CHECK(!nf_topics_follow_parse(tax, bad[i], strlen(bad[i]), &id, &v));
    NF_CHECK(!nf_topics_follow_parse(tax, NULL, 0, &id, &v));
    nf_classify_free(tax);
}

int main(void)
{
    NF_RUN(test_parse);
    return nf_test_report();
}
