/* bench_interest.c — the interest engine alone (src/engine/interest.h), memory only: events/s
 * of nf_interest_apply on a Zipf workload, and the memory of interest state per million users
 * (users' vectors and the (user, article, session) dedup set, from the engine's kstate stats).
 *
 *   bench_interest [--users N] [--events N]
 * JSON lines:
 *   {"bench":"interest","metric":"apply",...,"events_per_s":R}
 *   {"bench":"interest","metric":"memory","users":N,"user_bytes":B,"mb_per_million_users":M,
 *    "seen_entries":S,"seen_bytes_per_entry":E} */
#include "engine/interest.h"
#include "workload.h"

#include "../bench_clock.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv)
{
    uint32_t users = 1000000, articles = 100000;
    size_t events = 3000000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--users") && i + 1 < argc)
            users = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--events") && i + 1 < argc)
            events = strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: bench_interest [--users N] [--events N]\n");
            return 2;
        }
    }
    nf_interest_t *e = nf_interest_new(NULL, NULL);
    if (!e)
        return 1;
    char(*ids)[33] = malloc(sizeof *ids * articles);
    if (!ids)
        return 1;
    uint64_t rng = 7;
    for (uint32_t a = 0; a < articles; a++) {
        nf_wl_article_id(a, ids[a]);
        nf_id128_t id;
        nf_id128_from_hex(ids[a], &id);
        nf_topic_vec_t v = {.n = 0};
        unsigned n = 1 + (unsigned)(nf_wl_rand(&rng) % 3);
        for (unsigned k = 0; k < n; k++)
            v.t[v.n++] = (nf_topic_weight_t){(uint16_t)(k * 7 + nf_wl_rand(&rng) % 7), 0.5};
        nf_interest_topics_put(e, id, &v, 0);
    }
    nf_zipf_t zu, za;
    if (nf_zipf_init(&zu, users, 1.0) || nf_zipf_init(&za, articles, 1.0))
        return 1;
    /* Every user reads once first (the memory figure counts each of them), then Zipf reads. */
    char user[32], sess[16];
    nf_interest_out_t out;
    for (uint32_t u = 0; u < users; u++) {
        snprintf(user, sizeof user, "u%u", u);
        nf_interest_apply(e, (uint16_t)(u % 16), user, ids[u % articles], "s0", 1767225600000LL + u,
                          1767225600000LL, &out);
    }
    nf_interest_stats_t st;
    nf_interest_stats(e, &st);
    printf("{\"bench\":\"interest\",\"metric\":\"memory\",\"users\":%zu,\"user_bytes\":%zu,"
           "\"bytes_per_user\":%.0f,\"mb_per_million_users\":%.1f,\"seen_entries\":%zu,"
           "\"seen_bytes_per_entry\":%.0f,\"table_articles\":%zu,\"table_bytes\":%zu}\n",
           st.users.entries, st.users.bytes, (double)st.users.bytes / (double)st.users.entries,
           (double)st.users.bytes / (double)st.users.entries * 1e6 / 1048576.0, st.seen.keys,
           (double)st.seen.bytes / (double)st.seen.keys, st.table_entries, st.table_bytes);
    fflush(stdout);
    double t0 = bench_now_s();
    size_t updated = 0;
    for (size_t i = 0; i < events; i++) {
        uint32_t u = nf_zipf_next(&zu, &rng), a = nf_zipf_next(&za, &rng);
        snprintf(user, sizeof user, "u%u", u);
        snprintf(sess, sizeof sess, "s%u", (unsigned)(i % 97));
        int rc =
            nf_interest_apply(e, (uint16_t)(u % 16), user, ids[a], sess,
                              1767225600000LL + (int64_t)users + (int64_t)i, 1767225600000LL, &out);
        updated += rc == NF_INTEREST_UPDATED;
    }
    double secs = bench_now_s() - t0;
    printf("{\"bench\":\"interest\",\"metric\":\"apply\",\"events\":%zu,\"updated\":%zu,"
           "\"seconds\":%.3f,\"events_per_s\":%.0f,\"ns_per_event\":%.0f}\n",
           events, updated, secs, (double)events / secs, secs * 1e9 / (double)events);
    nf_zipf_free(&zu);
    nf_zipf_free(&za);
    free(ids);
    nf_interest_free(e);
    return 0;
}
