/* bench_epoch.c — the cost of an epoch as the job pays it: the processing pause of the cut
 * (pause every shard's input, drain, snapshot the dirty keyed state into per-shard batches,
 * resume) and the commit that follows off the shards (pending record written synced to RocksDB,
 * then applied), against the number of dirty keys.
 *
 * Real pieces: the runtime with its shards, the epoch coordinator (state/epoch.c), keyed state
 * (state/kstate.c) over the RocksDB store (state/store.c) in a temporary directory. No Kafka: its
 * commit is the broker's cost (the mock cluster here would measure itself).
 *
 * Each round: every shard updates its share of N keys (16-byte values, the same key set every
 * round, so the store grows to N keys and stays), then one epoch runs and its pause and commit
 * durations are recorded. Output: one JSON object per size with p50/p99/max of both, and the
 * process's CPU per round (every thread: shards, coordinator, RocksDB's flushes and compactions).
 *   bench_epoch [--sizes 10000,100000,1000000] [--rounds R] [--shards S] [--dir DIR]
 *               [--ingest-min N] [--keyspace K] [--snapshot ref|copy] [--log debug]
 * --ingest-min: state.ingest_min_bytes (default the job's; 0: every kind through the memtable,
 * as before table files).
 * --log debug: the coordinator's line for every epoch, with its steps' times (stderr).
 * --snapshot ref|copy: the participant's snapshot by reference (nf_kstate_freeze: the pause
 * only marks the cut, the shards write the batches after it; the job's default) or written
 * whole in the pause (nf_kstate_snapshot, as before issue 42).
 * --keyspace K: each round's N keys are drawn afresh from K (so the store grows towards K keys
 * and its compactions rewrite more and more of them, as a job's state does); default: the same
 * N keys every round. */
#include "runtime/log.h"
#include "runtime/runtime.h"
#include "state/epoch.h"
#include "state/kstate.h"
#include "state/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static size_t g_ingest_min = NF_STORE_INGEST_MIN_BYTES;
static unsigned g_write_buffer_mb; /* 0: the store's default */
static size_t g_keyspace;          /* 0: every round the same N keys */

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct {
    nf_epoch_t *ep;
    nf_store_t *st;
    nf_kstate_t *ks[NF_MAX_SHARDS];
    unsigned shards;
    size_t keys_per_shard;
    size_t space_per_shard; /* --keyspace: the keys a round's N are drawn from (0: the same N) */
    uint64_t round;
} bench_t;

static bool g_by_copy; /* --snapshot copy: written in the pause (nf_kstate_snapshot) */

static void part_snapshot(nf_shard_t *sh, void *self, nf_store_batch_t *b, uint64_t epoch)
{
    if (g_by_copy)
        nf_kstate_snapshot(self, b, epoch);
    else
        nf_kstate_freeze(self, b, epoch);
    (void)sh;
}

static bool part_snapshot_more(nf_shard_t *sh, void *self, size_t max)
{
    (void)sh;
    return nf_kstate_freeze_step(self, max) == 0;
}

static void part_committed(nf_shard_t *sh, void *self, uint64_t epoch)
{
    nf_kstate_committed(self, epoch);
    (void)sh;
}

static const nf_epoch_participant_t part = {
    .snapshot = part_snapshot, .snapshot_more = part_snapshot_more, .committed = part_committed};

static int actor_init(nf_shard_t *sh, void *ctx, void **self, char *err, size_t errlen)
{
    bench_t *b = ctx;
    unsigned s = nf_shard_index(sh);
    nf_kstate_opts_t o = {.kind = NF_KIND_READS, .initial_capacity = b->keys_per_shard * 2};
    b->ks[s] = nf_kstate_new(b->st, &o);
    if (!b->ks[s] || nf_epoch_participant_add(b->ep, sh, &part, b->ks[s]) != 0) {
        nf_kstate_free(b->ks[s]);
        b->ks[s] = NULL;
        snprintf(err, errlen, "out of memory or too many epoch participants");
        return -1;
    }
    *self = b->ks[s];
    return 0;
}

static void actor_handle(nf_shard_t *sh, void *self, const nf_msg_t *m)
{
    (void)sh;
    (void)self;
    (void)m;
}

static void actor_fini(nf_shard_t *sh, void *self)
{
    nf_kstate_free(self);
    (void)sh;
}

static const nf_actor_ops_t ops = {
    .name = "bench_epoch", .init = actor_init, .handle = actor_handle, .fini = actor_fini};

static void fill(nf_shard_t *sh, void *arg)
{
    bench_t *b = arg;
    unsigned s = nf_shard_index(sh);
    uint64_t v[2] = {b->round, 0};
    for (size_t j = 0; j < b->keys_per_shard; j++) {
        size_t i = j;
        if (b->space_per_shard) { /* a pseudo-random draw, different every round */
            uint64_t x = (b->round + 1) * 0xd1342543de82ef95ull ^ j * 0x9e3779b97f4a7c15ull;
            x ^= x >> 31;
            i = (size_t)((x * 0xbf58476d1ce4e5b9ull) % b->space_per_shard);
        }
        nf_id128_t k = {((uint64_t)s << 48) | i, i * 0x9e3779b97f4a7c15ull};
        v[1] = i;
        if (nf_kstate_put(b->ks[s], (uint16_t)(i & 255), k, v, sizeof v, 0) != 0)
            abort();
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double pct(uint64_t *v, unsigned n, double p)
{
    qsort(v, n, sizeof *v, cmp_u64);
    unsigned i = (unsigned)(p * (n - 1) + 0.5);
    return (double)v[i] / 1e6;
}

static int run_size(size_t keys, unsigned rounds, unsigned shards, const char *base)
{
    char dir[512], err[512];
    snprintf(dir, sizeof dir, "%s/epoch-%zu", base, keys);
    static bench_t b;
    memset(&b, 0, sizeof b);
    b.shards = shards;
    b.keys_per_shard = keys / shards;
    b.space_per_shard = g_keyspace > keys ? g_keyspace / shards : 0;
    nf_store_opts_t so;
    nf_store_opts_default(&so);
    so.ingest_min_bytes = g_ingest_min;
    if (g_write_buffer_mb)
        so.write_buffer_mb = g_write_buffer_mb;
    b.st = nf_store_open(dir, &so, err, sizeof err);
    if (!b.st) {
        fprintf(stderr, "bench_epoch: %s\n", err);
        return -1;
    }
    nf_runtime_opts_t ro;
    nf_runtime_opts_default(&ro);
    ro.shards = shards;
    nf_runtime_t *rt = nf_runtime_create(&ro, err, sizeof err);
    nf_epoch_opts_t eo = {.interval_ms = 1000000};
    b.ep = rt ? nf_epoch_new(rt, b.st, NULL, &eo, err, sizeof err) : NULL;
    if (!b.ep || nf_epoch_recover(b.ep, err, sizeof err) != 0 ||
        nf_runtime_register(rt, &ops, &b) < 0 || nf_runtime_start(rt) != 0) {
        fprintf(stderr, "bench_epoch: %s\n", err);
        return -1;
    }
    uint64_t *pause = calloc(rounds, sizeof *pause), *commit = calloc(rounds, sizeof *commit);
    double cpu0 = cpu_s();
    for (unsigned r = 0; r < rounds; r++) {
        b.round = r;
        for (unsigned s = 0; s < shards; s++)
            if (nf_runtime_call(rt, s, fill, &b, 600000) != 0)
                abort();
        if (nf_epoch_run_once(b.ep, err, sizeof err) != 0) {
            fprintf(stderr, "bench_epoch: %s\n", err);
            return -1;
        }
        nf_epoch_stats_t es;
        nf_epoch_stats(b.ep, &es);
        pause[r] = es.last_pause_ns;
        commit[r] = es.last_commit_ns;
    }
    double cpu_round = (cpu_s() - cpu0) / rounds;
    /* every round's pause, in order: a slow round is seen with its place (p99 of 30 rounds is
     * the slowest one) */
    char seq[64 * 1024];
    size_t w = 0;
    for (unsigned r = 0; r < rounds && w + 32 < sizeof seq; r++)
        w += (size_t)snprintf(seq + w, sizeof seq - w, "%s%.3f", r ? "," : "",
                              (double)pause[r] / 1e6);
    seq[w] = 0;
    double p50 = pct(pause, rounds, 0.5), p99 = pct(pause, rounds, 0.99),
           pmax = (double)pause[rounds - 1] / 1e6;
    double c50 = pct(commit, rounds, 0.5), c99 = pct(commit, rounds, 0.99),
           cmax = (double)commit[rounds - 1] / 1e6;
    printf("{\"bench\":\"epoch\",\"dirty_keys\":%zu,\"shards\":%u,\"rounds\":%u,"
           "\"pause_ms_p50\":%.3f,\"pause_ms_p99\":%.3f,\"pause_ms_max\":%.3f,"
           "\"commit_ms_p50\":%.3f,\"commit_ms_p99\":%.3f,\"commit_ms_max\":%.3f,"
           "\"cpu_s_per_round\":%.3f,\"ingest_min\":%zu,\"keyspace\":%zu,\"snapshot\":\"%s\","
           "\"pause_ms_rounds\":[%s]}\n",
           keys, shards, rounds, p50, p99, pmax, c50, c99, cmax, cpu_round, g_ingest_min,
           g_keyspace > keys ? g_keyspace : keys, g_by_copy ? "copy" : "ref", seq);
    fflush(stdout);
    free(pause);
    free(commit);
    nf_runtime_request_stop(rt);
    nf_runtime_wait(rt);
    nf_runtime_destroy(rt);
    nf_epoch_free(b.ep);
    nf_store_close(b.st);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    const char *sizes = "10000,100000,1000000";
    unsigned rounds = 20, shards = 2;
    const char *dir = NULL;
    nf_log_level_t lvl;
    bool usage = false;
    for (int i = 1; i < argc && !usage; i += 2) {
        if (i + 1 == argc || !strcmp(argv[i], "--help"))
            usage = true;
        else if (!strcmp(argv[i], "--sizes"))
            sizes = argv[i + 1];
        else if (!strcmp(argv[i], "--rounds"))
            rounds = (unsigned)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--shards"))
            shards = (unsigned)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--dir"))
            dir = argv[i + 1];
        else if (!strcmp(argv[i], "--ingest-min"))
            g_ingest_min = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--write-buffer-mb"))
            g_write_buffer_mb = (unsigned)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--keyspace"))
            g_keyspace = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--snapshot"))
            g_by_copy = !strcmp(argv[i + 1], "copy");
        else if (!strcmp(argv[i], "--log") && nf_log_level_parse(argv[i + 1], &lvl) == 0)
            nf_log_set_level(lvl); /* debug: every epoch's steps (write, pending, apply) */
        else
            usage = true;
    }
    if (usage || !rounds || !shards || shards > NF_MAX_SHARDS) {
        fprintf(stderr,
                "usage: bench_epoch [--sizes N,...] [--rounds R] [--shards S] [--dir D] "
                "[--ingest-min N] [--keyspace K] [--write-buffer-mb M] [--snapshot ref|copy] "
                "[--log debug]\n");
        return argc == 2 && !strcmp(argv[1], "--help") ? 0 : 2;
    }
    char tmpl[] = "/tmp/nf_bench_epoch_XXXXXX";
    if (!dir && !(dir = mkdtemp(tmpl))) {
        perror("mkdtemp");
        return 1;
    }
    char *list = strdup(sizes);
    int rc = 0;
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t && rc == 0;
         t = strtok_r(NULL, ",", &save)) {
        size_t n = strtoull(t, NULL, 10);
        unsigned r = n >= 1000000 && rounds > 5 ? 5 : rounds;
        rc = run_size(n, r, shards, dir);
    }
    free(list);
    if (dir == tmpl)
        rmdir(tmpl);
    return rc ? 1 : 0;
}
