/* bench_readstages.c — where a read event's time goes: each step of the read path timed alone,
 * on one thread, over the same events bench_readpath sends through the actors (Zipf users and
 * articles, perf/analytics/workload.h). The steps are the ones kafka_in and the reads actor
 * run, called the way they call them (groups of 16 with the event-id slots prefetched, batches
 * of 64 with the interest engine's staged prefetch):
 *   decode     nf_read_event_decode (JSON -> struct)
 *   keys       the event-id key and nf_interest_read_init (user, seen and article keys)
 *   event_ids  the event-id keyset add
 *   trending   nf_trend_count (Count-Min Sketch + candidates)
 *   interest   nf_interest_apply_read
 *   json       nf_interest_json_keys (the interest-updates value)
 * Blocks of 64 events go through every step in turn (the actors' buffers stay in cache), each
 * step timed per block. The processing clock is simulated at 1M events/s. By default the first
 * --warmup events (4M) run untimed with both dedup TTLs at --ttl-s (2 s of that clock), so the
 * sets are at the size they keep when the clock starts (a long-running job's steady state, at a
 * smaller scale); --warmup 0 times them growing from empty. The sum is the work of one event on
 * one shard without the runtime (batches between actors, timers): bench_readpath measures
 * everything together.
 *
 * Partitions (8) by a hash of the user_id, as bench_readpath; --populate reads every user once
 * before the warm-up, as bench_readpath --populate.
 *
 * Interest and JSON alternate block by block between two orders: even blocks stage the batch's
 * prefetches before its applies (interest_ns and json_ns are theirs), odd blocks run the
 * prefetch stages software-pipelined ahead of each apply, as the reads actor does since
 * 2026-11-25. interest_json_staged_ns / _pipelined_ns / pipelined_over_staged compare the two
 * within one process, where this machine's minute-to-minute drift cancels.
 *
 *   bench_readstages [--events N] [--warmup W] [--ttl-s T] [--users U] [--articles A] [--zipf S]
 *                    [--populate]
 * One JSON line: {"bench":"readstages","events":N,"decode_ns":...,"total_ns":...}. */
#include "actors/reads.h"
#include "engine/interest.h"
#include "engine/trend.h"
#include "io/events.h"
#include "state/keyset.h"
#include "workload.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    size_t n = 2000000, warmup = 4000000;
    double ttl_s = 2;
    uint32_t users = 1000000, articles = 100000;
    double zipf = 1.0;
    bool populate = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--events") && i + 1 < argc)
            n = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
            warmup = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--ttl-s") && i + 1 < argc)
            ttl_s = strtod(argv[++i], NULL);
        else if (!strcmp(argv[i], "--users") && i + 1 < argc)
            users = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--articles") && i + 1 < argc)
            articles = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--zipf") && i + 1 < argc)
            zipf = strtod(argv[++i], NULL);
        else if (!strcmp(argv[i], "--populate"))
            populate = true;
        else {
            fprintf(stderr, "usage: bench_readstages [--events N] [--warmup W] [--ttl-s T] "
                            "[--users U] [--articles A] [--zipf S] [--populate]\n");
            return 2;
        }
    }
    nf_wl_events_t ev;
    if (populate)
        warmup += users; /* one read per user first, as bench_readpath --populate */
    /* One block of 64 events at a time through every step, as the actors take them (their
     * buffers stay in cache), each step timed per block. The clock starts at a block boundary:
     * a warm-up ending inside a block never started it, and every figure included the warm-up. */
    enum { B = 64 };
    warmup = (warmup + B - 1) / B * B;
    size_t all = n + warmup;
    int64_t span = (int64_t)(600000.0 * (double)all / (double)n);
    if (nf_wl_read_events(&ev, all, users, articles, zipf, 1767225600000LL, span, 42, populate) !=
        0)
        return 1;
    uint16_t *part = malloc(sizeof *part * all); /* each event's partition, outside the clock */
    if (!part)
        return 1;
    for (size_t i = 0; i < all; i++)
        part[i] = nf_wl_partition_of(ev.user_of[i], 8);
    static nf_read_event_t dec[B];
    static nf_id128_t ekey[B];
    static nf_interest_read_t rd[B];
    static nf_interest_out_t out[B];
    static int rc[B];
    const int64_t clock0 = 1767225600000LL;
    int64_t now = clock0;
    uint64_t ttl_ms = warmup ? (uint64_t)(ttl_s * 1000) : 7200000;
    nf_keyset_opts_t ko = {.kind = NF_KIND_EVENT_IDS, .ttl_ms = ttl_ms, .initial_capacity = 4096};
    nf_keyset_t *ids = nf_keyset_new(NULL, &ko);
    nf_trend_opts_t to;
    nf_trend_opts_default(&to);
    nf_trend_counter_t *tc = nf_trend_counter_new(&to);
    nf_interest_opts_t io;
    nf_interest_opts_default(&io);
    if (warmup)
        io.seen_ttl_ms = ttl_ms;
    nf_interest_t *eng = nf_interest_new(NULL, &io);
    nf_interest_keys_t keys;
    nf_jw_t w;
    nf_jw_init(&w);
    if (!ids || !tc || !eng || nf_interest_keys_init(&keys, NULL) != 0)
        return 1;
    for (uint32_t a = 0; a < articles; a++) { /* as in bench_readpath, before the clock */
        char hex[33];
        nf_topic_vec_t v;
        nf_id128_t id;
        nf_wl_article_id(a, hex);
        nf_id128_from_hex(hex, &id);
        nf_wl_article_topics(a, &v);
        nf_interest_topics_put(eng, id, &v, now);
    }
    double stage[6] = {0};
    /* interest + JSON: staged (even blocks, timed per step in stage[4], stage[5]) against
     * pipelined (odd blocks), alternating block by block so that the machine's drift cancels */
    double piped_ns = 0;
    size_t staged_n = 0, piped_n = 0;
    size_t updated = 0, bytes = 0, dups = 0;
    for (size_t i = 0; i < all; i += B) {
        size_t m = i + B < all ? B : all - i, k;
        now = clock0 + (int64_t)(i / 1000); /* 1M events/s */
        if (i == warmup) {
            memset(stage, 0, sizeof stage);
            updated = bytes = dups = staged_n = piped_n = 0;
            piped_ns = 0;
        }
        double t0 = now_ns();
        for (k = 0; k < m; k++)
            if (nf_read_event_decode(ev.buf + ev.off[i + k], ev.len[i + k], 65536, &dec[k], NULL,
                                     0) != 0)
                return 1;
        double t1 = now_ns();
        for (k = 0; k < m; k++) {
            ekey[k] = nf_reads_event_key(dec[k].event_id);
            nf_interest_read_init(&rd[k], part[i + k], dec[k].user_id, dec[k].article_id,
                                  dec[k].session_id, dec[k].ts_ms);
        }
        double t2 = now_ns();
        for (size_t g = 0; g < m; g += 16) {
            size_t e = g + 16 < m ? g + 16 : m;
            for (k = g; k < e; k++)
                nf_keyset_prefetch(ids, rd[k].kg, ekey[k]);
            for (k = g; k < e; k++)
                dups += nf_keyset_add(ids, rd[k].kg, ekey[k], now) == 1;
        }
        double t3 = now_ns();
        for (k = 0; k < m; k++)
            nf_trend_count(tc, rd[k].kg, dec[k].article_id, strlen(dec[k].article_id), dec[k].ts_ms,
                           now);
        double t4 = now_ns();
        if ((i / B) % 2 == 1) {
            /* Odd blocks: interest and JSON as the reads actor runs them (interest.h, the
             * pipelined schedule), timed together against the even blocks' staged order. */
            for (k = 0; k < m + NF_INTEREST_PIPELINE_LAG; k++) {
                nf_interest_prefetch_step(eng, rd, sizeof rd[0], m, k);
                if (k < NF_INTEREST_PIPELINE_LAG)
                    continue;
                size_t j = k - NF_INTEREST_PIPELINE_LAG;
                if (nf_interest_apply_read(eng, &rd[j], now, &out[j]) != NF_INTEREST_UPDATED)
                    continue;
                nf_jw_reset(&w);
                nf_interest_json_keys(&out[j], dec[j].user_id, &keys, &w);
                bytes += w.len;
                updated++;
            }
            piped_ns += now_ns() - t4;
            piped_n += m;
        } else {
            for (unsigned st = 0; st < NF_INTEREST_PREFETCH_STAGES; st++)
                for (k = 0; k < m; k++)
                    nf_interest_prefetch(eng, &rd[k], st);
            for (k = 0; k < m; k++)
                rc[k] = nf_interest_apply_read(eng, &rd[k], now, &out[k]);
            double t5 = now_ns();
            for (k = 0; k < m; k++) {
                if (rc[k] != NF_INTEREST_UPDATED)
                    continue;
                nf_jw_reset(&w);
                nf_interest_json_keys(&out[k], dec[k].user_id, &keys, &w);
                bytes += w.len;
                updated++;
            }
            double t6 = now_ns();
            stage[4] += t5 - t4;
            stage[5] += t6 - t5;
            staged_n += m;
        }
        stage[0] += t1 - t0;
        stage[1] += t2 - t1;
        stage[2] += t3 - t2;
        stage[3] += t4 - t3;
    }
    double total = 0;
    for (int s = 0; s < 6; s++) {
        stage[s] /= (double)(s >= 4 ? (staged_n ? staged_n : 1) : n);
        total += stage[s];
    }
    nf_keyset_stats_t ks;
    nf_keyset_stats(ids, &ks);
    printf("{\"bench\":\"readstages\",\"events\":%zu,\"warmup\":%zu,\"dedup_ttl_ms\":%llu,"
           "\"populated\":%s,\"event_id_keys\":%zu,\"decode_ns\":%.1f,\"keys_ns\":%.1f,"
           "\"event_ids_ns\":%.1f,\"trending_ns\":%.1f,\"interest_ns\":%.1f,\"json_ns\":%.1f,"
           "\"total_ns\":%.1f,\"one_thread_events_per_s\":%.0f,\"updates\":%zu,"
           "\"event_id_duplicates\":%zu,\"json_bytes_per_update\":%.1f,"
           "\"interest_json_staged_ns\":%.1f,\"interest_json_pipelined_ns\":%.1f,"
           "\"pipelined_over_staged\":%.3f}\n",
           n, warmup, (unsigned long long)ttl_ms, populate ? "true" : "false", ks.keys, stage[0],
           stage[1], stage[2], stage[3], stage[4], stage[5], total, 1e9 / total, updated, dups,
           updated ? (double)bytes / (double)updated : 0.0, stage[4] + stage[5],
           piped_n ? piped_ns / (double)piped_n : 0.0,
           piped_n && stage[4] + stage[5] > 0 ? piped_ns / (double)piped_n / (stage[4] + stage[5])
                                              : 0.0);
    nf_jw_free(&w);
    nf_interest_keys_free(&keys);
    nf_interest_free(eng);
    nf_trend_counter_free(tc);
    nf_keyset_free(ids);
    free(part);
    nf_wl_events_free(&ev);
    return 0;
}
