/* bench_classify.c — articles/s through nf_classify_text() on one thread (one shard's context),
 * with articles of a ~12-word title and a ~300-word body drawn from a seeded mix of everyday
 * English (with stop words) and words of the default taxonomy, so that both the miss path
 * (stem, look up, nothing) and the match path (postings, phrases) are exercised.
 *
 * Two scenarios: "small_vocab" (filler from ~90 everyday words: the word cache always hits) and
 * "zipf50k" (filler Zipf-drawn from 50,000 synthetic words: cache misses, the stemmer runs).
 *
 * usage: bench_classify [taxonomy.json] [articles] [rounds]
 * Prints one JSON object per round and a summary line; asserts nothing about timings. */
#include "engine/classify.h"
#include "workload.h"

#include "../bench_clock.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *filler[] = {"the",
                               "a",
                               "of",
                               "and",
                               "to",
                               "in",
                               "said",
                               "on",
                               "for",
                               "with",
                               "was",
                               "that",
                               "by",
                               "people",
                               "after",
                               "new",
                               "over",
                               "about",
                               "more",
                               "than",
                               "their",
                               "would",
                               "could",
                               "which",
                               "city",
                               "country",
                               "time",
                               "years",
                               "week",
                               "group",
                               "report",
                               "plan",
                               "number",
                               "local",
                               "public",
                               "later",
                               "early",
                               "since",
                               "several",
                               "major",
                               "called",
                               "expected",
                               "members",
                               "around",
                               "while",
                               "despite",
                               "recent",
                               "support",
                               "family",
                               "according",
                               "officials",
                               "announced",
                               "decision",
                               "region",
                               "across",
                               "month",
                               "morning",
                               "evening",
                               "statement",
                               "including",
                               "between",
                               "another",
                               "within",
                               "however",
                               "Smith",
                               "London",
                               "Paris",
                               "Tuesday",
                               "\xe2\x80\x94",
                               "2024",
                               "million",
                               "percent",
                               "they're",
                               "company's",
                               "long-term",
                               "\xe2\x80\x9cwe",
                               "agreed\xe2\x80\x9d",
                               "first",
                               "last",
                               "number",
                               "small"};
static const char *topical[] = {"election",
                                "vote",
                                "senator",
                                "parliament",
                                "ceasefire",
                                "diplomats",
                                "embassy",
                                "merger",
                                "earnings",
                                "retailer",
                                "inflation",
                                "tariffs",
                                "recession",
                                "stocks",
                                "bond",
                                "yields",
                                "bitcoin",
                                "software",
                                "smartphone",
                                "chips",
                                "telescope",
                                "fossil",
                                "physicists",
                                "hospital",
                                "vaccine",
                                "patients",
                                "football",
                                "goal",
                                "tournament",
                                "film",
                                "album",
                                "singer",
                                "museum",
                                "novel",
                                "theatre",
                                "climate",
                                "emissions",
                                "wildlife",
                                "teachers",
                                "students",
                                "school",
                                "police",
                                "murder",
                                "court",
                                "airline",
                                "tourists",
                                "hotel",
                                "recipe",
                                "fashion",
                                "yoga",
                                "oil",
                                "electricity",
                                "turbines",
                                "carmaker",
                                "vehicles",
                                "tesla",
                                "church",
                                "pope",
                                "mosque",
                                "prime minister",
                                "interest rates",
                                "wall street",
                                "world cup",
                                "climate change",
                                "artificial intelligence",
                                "box office"};
enum { NFILL = sizeof filler / sizeof *filler, NTOP = sizeof topical / sizeof *topical };

/* "zipf" scenario: filler drawn from a large synthetic vocabulary, Zipf-distributed like real
 * text, so that the word cache misses and the stemmer runs for a share of the words. */
enum { VOCAB = 50000 };
static char (*vocab)[12];
static nf_zipf_t zipf;
static int use_zipf;

static const char *pick(uint64_t *rng)
{
    /* one word in six topical: roughly what a news body looks like to the taxonomy */
    if (nf_wl_rand(rng) % 6 == 0)
        return topical[nf_wl_rand(rng) % NTOP];
    if (use_zipf)
        return vocab[nf_zipf_next(&zipf, rng)];
    return filler[nf_wl_rand(rng) % NFILL];
}

static int make_vocab(void)
{
    vocab = malloc(sizeof *vocab * VOCAB);
    if (!vocab || nf_zipf_init(&zipf, VOCAB, 1.0) < 0)
        return -1;
    uint64_t rng = 7;
    for (int i = 0; i < VOCAB; i++) {
        int len = 3 + (int)(nf_wl_rand(&rng) % 8);
        for (int j = 0; j < len; j++)
            vocab[i][j] = (char)('a' + nf_wl_rand(&rng) % 26);
        /* common English endings, so the stemmer has work to do */
        static const char *const ends[] = {"", "", "s", "ed", "ing", "ly", "tion", "er"};
        snprintf(vocab[i] + len, sizeof vocab[i] - (size_t)len, "%s", ends[i % 8]);
        if (strlen(vocab[i]) > 11)
            vocab[i][11] = '\0';
    }
    return 0;
}

static size_t gen(char *out, size_t cap, unsigned words, uint64_t *rng)
{
    size_t n = 0;
    for (unsigned i = 0; i < words && n + 64 < cap; i++) {
        const char *w = pick(rng);
        const char *sep = i + 1 == words ? "." : nf_wl_rand(rng) % 12 ? " " : ". ";
        n += (size_t)snprintf(out + n, cap - n, "%s%s", w, sep);
    }
    out[n] = '\0';
    return n;
}

/* One scenario: generates n articles, classifies them rounds+1 times (round 0 warms up the
 * context's scratch and word cache, and is not reported). */
static int run(const nf_classify_taxonomy_t *t, nf_classify_ctx_t *c, size_t n, int rounds,
               const char *scenario)
{
    /* articles back to back: title i at titles + i*TCAP, body i at bodies + i*BCAP */
    enum { TCAP = 256, BCAP = 4096 };
    char *titles = malloc(n * TCAP), *bodies = malloc(n * BCAP);
    if (!titles || !bodies) {
        free(titles);
        free(bodies);
        return -1;
    }
    uint64_t rng = 42;
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        bytes += gen(titles + i * TCAP, TCAP, 12, &rng);
        bytes += gen(bodies + i * BCAP, BCAP, 300, &rng);
    }
    nf_classify_result_t r = {0};
    nf_jw_t w;
    nf_jw_init(&w);
    double best = 0;
    unsigned long long checksum = 0, tokens = 0, labelled = 0;
    for (int round = 0; round <= rounds; round++) {
        checksum = tokens = labelled = 0;
        double s = bench_now_s();
        for (size_t i = 0; i < n; i++) {
            if (nf_classify_text(c, titles + i * TCAP, bodies + i * BCAP, &r) != 0) {
                fprintf(stderr, "nf_classify_text failed\n");
                return -1;
            }
            tokens += r.tokens;
            labelled += r.nlabels > 0;
            checksum += r.ntopics ? r.topics[0].topic + 1u : 0u;
        }
        double el = bench_now_s() - s;
        if (round == 0)
            continue;
        double aps = (double)n / el;
        if (aps > best)
            best = aps;
        printf("{\"bench\":\"classify\",\"scenario\":\"%s\",\"round\":%d,\"articles\":%zu,"
               "\"seconds\":%.4f,\"articles_per_s\":%.0f,\"us_per_article\":%.2f,"
               "\"tokens_per_s\":%.0f,\"mb_per_s\":%.1f,\"labelled_fraction\":%.3f,"
               "\"checksum\":%llu}\n",
               scenario, round, n, el, aps, el * 1e6 / (double)n, (double)tokens / el,
               (double)bytes / el / 1e6, (double)labelled / (double)n, checksum);
    }
    /* the JSON of the last article, as the crawl actor would append it */
    nf_jw_obj_open(&w);
    nf_classify_json(t, &r, &w);
    nf_jw_obj_close(&w);
    printf("{\"bench\":\"classify\",\"scenario\":\"%s\",\"summary\":true,"
           "\"best_articles_per_s\":%.0f,\"avg_tokens_per_article\":%.1f,\"sample\":%s}\n",
           scenario, best, (double)tokens / (double)n, w.buf);
    fflush(stdout);
    nf_jw_free(&w);
    free(titles);
    free(bodies);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : NF_SOURCE_DIR "/config/taxonomy.json";
    size_t n = argc > 2 ? strtoul(argv[2], NULL, 10) : 20000;
    int rounds = argc > 3 ? atoi(argv[3]) : 5;
    if (n == 0 || rounds <= 0) {
        fprintf(stderr, "usage: bench_classify [taxonomy.json] [articles>0] [rounds>0]\n");
        return 2;
    }
    char err[512];
    double t0 = bench_now_s();
    nf_classify_taxonomy_t *t = nf_classify_load(path, err, sizeof err);
    double load_ms = (bench_now_s() - t0) * 1e3;
    if (!t) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    nf_jw_t pw; /* the path, JSON-escaped */
    nf_jw_init(&pw);
    nf_jw_str(&pw, path);
    printf("{\"bench\":\"classify\",\"taxonomy\":%s,\"topics\":%u,\"load_ms\":%.2f}\n", pw.buf,
           nf_classify_topic_count(t), load_ms);
    nf_jw_free(&pw);
    nf_classify_ctx_t *c = nf_classify_ctx_new(t);
    if (!c || make_vocab() < 0) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    int rc = 0;
    for (use_zipf = 0; use_zipf < 2 && rc == 0; use_zipf++)
        rc = run(t, c, n, rounds, use_zipf ? "zipf50k" : "small_vocab");
    nf_zipf_free(&zipf);
    free(vocab);
    nf_classify_ctx_free(c);
    nf_classify_free(t);
    return rc ? 1 : 0;
}
