/* fuzz_records.c — libFuzzer target for the records newsflow reads back from its own topics,
 * which anyone with write access to the cluster can also write: the article records of the
 * one-partition topic (nf_article_blob_decode, actors/article_msg.h) and the articles values the
 * topic-vector follower parses (nf_topics_follow_parse, actors/topics_follow.h). abort()s when
 * a contract breaks:
 *   - a decoded article record encodes back to exactly the input bytes (nothing is guessed,
 *     nothing ignored), its JSON NUL-terminated at its length;
 *   - a parsed articles value gives a vector of at most NF_TOPICS_MAX topics, strictly
 *     increasing, each a topic of the taxonomy, finite weights.
 * Leaks are reported by LeakSanitizer. */
#include "actors/article_msg.h"
#include "actors/topics_follow.h"
#include "engine/classify.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static nf_classify_taxonomy_t *g_tax;

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_records: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_tax) {
        char err[256];
        g_tax = nf_classify_load_text("builtin taxonomy", nf_classify_builtin,
                                      nf_classify_builtin_len, err, sizeof err);
        if (!g_tax)
            fail(err);
    }
    char err[256];
    nf_article_blob_t *b = nf_article_blob_decode(data, size, err, sizeof err);
    if (b) {
        size_t len = 0;
        unsigned char *rec = nf_article_blob_encode(b, &len);
        if (!rec || len != size || memcmp(rec, data, size) != 0)
            fail("a decoded article record does not encode back to its bytes");
        if (b->json[b->len] != '\0')
            fail("the JSON of a decoded article is not NUL-terminated");
        free(rec);
        free(b);
    } else if (!err[0]) {
        fail("a refused article record without a reason");
    }
    nf_id128_t id;
    nf_topic_vec_t v;
    if (nf_topics_follow_parse(g_tax, data, size, &id, &v)) {
        if (v.n > NF_TOPICS_MAX)
            fail("too many topics");
        for (uint32_t i = 0; i < v.n; i++) {
            if (v.t[i].topic >= nf_classify_topic_count(g_tax) || !isfinite(v.t[i].weight))
                fail("a topic outside the taxonomy or a weight not finite");
            if (i && v.t[i].topic <= v.t[i - 1].topic)
                fail("topics not strictly increasing");
        }
    }
    return 0;
}
