/* bench_restore.c — how fast a state directory is rebuilt from the changelog topics
 * (state.changelog, src/state/changelog.c) through a real Apache Kafka broker. Figures and
 * commentary: perf/README.md, "Changelog (issue 16)".
 *
 * For each --records N (a fresh topic prefix each):
 *   1. creates every topic of the job under the prefix (nf_kafka_topics, --partitions P);
 *   2. produces N changelog records the way the job does: writes of one state kind (--kind,
 *      default interest) into nf_store_batch_t batches, turned into records by
 *      nf_changelog_from_batch, committed by nf_kafka_produce_epoch in transactions of
 *      --epoch-records records (exactly_once, as the job with state.changelog=true). Keys are the
 *      keyed state's ([key group][16-byte id], key group = id % P, so that record keys are
 *      [kg][kg][id], 20 bytes), ids random and distinct; values --value-min..--value-max bytes
 *      (uniform; interest vectors are ~150-300 B), an 8-byte expiry first, the rest random;
 *   3. "fetch": nf_kafka_read_topics over the same partitions with a callback that does
 *      nothing — Kafka (broker + librdkafka + the consumer loop) alone;
 *   4. "restore": nf_changelog_restore into a fresh store in a temporary directory (deleted at
 *      the end), through nf_kafka_ops: exactly what `newsflow run` does at start on an empty
 *      state directory. Time inside the record callback (batching + the store write, without
 *      the WAL) is measured apart (two clock reads per record), the rest is Kafka;
 *   5. "write": the same records written straight into another fresh store in batches of
 *      --write-batch — RocksDB alone; three times: with the WAL (nf_store_write, "mode":"wal"),
 *      without it plus the final flush (nf_store_write_unlogged + nf_store_flush, "no_wal"),
 *      and bulk-loaded in 65,536-record batches (nf_store_ingest + the flush, what the restore
 *      does with full batches, "bulk").
 * Process CPU (getrusage) and, with --broker-pid, the broker's CPU (/proc/PID/stat) are given
 * for every step. One JSON line per step on stdout ("bench":"changelog_restore" is step 4);
 * progress on stderr. Nothing is judged: no timing assertions. Topics are left on the broker
 * (perf/run_changelog.sh deletes them).
 *
 *   bench_restore --brokers HOST:PORT [--records N[,N...]] [--partitions P] [--prefix P]
 *                 [--epoch-records N] [--value-min B] [--value-max B] [--kind NAME]
 *                 [--dir DIR] [--broker-pid PID] [--no-fetch] [--no-write] [--seed N]
 *                 [--write-batch N] (step 5's batch size)
 *                 [--properties 'name=value\n...'] (kafka.properties: both clients) */
#include "io/kafka.h"
#include "io/outbuf.h"
#include "runtime/log.h"
#include "runtime/runtime.h"
#include "state/changelog.h"
#include "state/kstate.h"
#include "state/store.h"

#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZES 8

typedef struct {
    const char *brokers, *prefix, *dir, *properties;
    size_t records[MAX_SIZES];
    unsigned nsizes;
    unsigned partitions, value_min, value_max;
    size_t epoch_records, write_batch;
    nf_state_kind_t kind;
    int broker_pid;
    bool fetch, write;
    uint64_t seed;
} opts_t;

/* ------------------------------------------------------------------ helpers */

static uint64_t xs(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static double cpu_self_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 +
           (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec / 1e6;
}

/* utime + stime of a process in seconds, -1 if unreadable. */
static double cpu_pid_s(int pid)
{
    if (pid <= 0)
        return -1;
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command may hold spaces */
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

typedef struct {
    uint64_t t0;
    double self0, broker0;
} span_t;

static span_t span_start(const opts_t *o)
{
    span_t s = {nf_now_ns(), cpu_self_s(), cpu_pid_s(o->broker_pid)};
    return s;
}

/* ,"seconds":..,"cpu_self_s":..[,"cpu_broker_s":..] */
static double span_end(const opts_t *o, const span_t *s, char *out, size_t len)
{
    double sec = (double)(nf_now_ns() - s->t0) / 1e9;
    double b = cpu_pid_s(o->broker_pid);
    int n =
        snprintf(out, len, "\"seconds\":%.3f,\"cpu_self_s\":%.2f", sec, cpu_self_s() - s->self0);
    if (b >= 0 && s->broker0 >= 0)
        snprintf(out + n, len - (size_t)n, ",\"cpu_broker_s\":%.2f", b - s->broker0);
    return sec;
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static void rm_rf(const char *p)
{
    nftw(p, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* The i-th record of a run, the same in every step: a distinct random 16-byte id, its key group
 * and a value of the configured length. */
typedef struct {
    uint64_t seed;
    unsigned char val[4096];
} gen_t;

static void gen_record(const opts_t *o, gen_t *g, size_t i, unsigned char key[18], size_t *vlen)
{
    uint64_t s = g->seed ^ (0x9e3779b97f4a7c15ull * (i + 1));
    nf_id128_t id = {.hi = xs(&s), .lo = (uint64_t)i}; /* lo = i: distinct */
    nf_kstate_encode_key((uint16_t)(id.hi % o->partitions), id, key);
    size_t span = o->value_max - o->value_min + 1;
    *vlen = o->value_min + (size_t)(xs(&s) % span);
    uint64_t expiry = 0; /* never: interest has no TTL */
    memcpy(g->val, &expiry, 8);
    for (size_t b = 8; b < *vlen; b += 8) {
        uint64_t r = xs(&s);
        memcpy(g->val + b, &r, *vlen - b < 8 ? *vlen - b : 8);
    }
}

static void usage(void)
{
    fprintf(stderr,
            "bench_restore --brokers HOST:PORT [--records N[,N...]] [--partitions P] [--prefix P]\n"
            "              [--epoch-records N] [--value-min B] [--value-max B] [--kind NAME]\n"
            "              [--dir DIR] [--broker-pid PID] [--no-fetch] [--no-write] [--seed N]\n"
            "              [--write-batch N] (step 5's batch size)\n"
            "              [--properties 'name=value\\n...'] (kafka.properties: both clients)\n"
            "defaults: --records 200000 --partitions 4 --epoch-records 250000 --value-min 150\n"
            "          --value-max 300 --kind interest --dir /tmp; see perf/README.md\n");
}

static int parse_kind(const char *s, nf_state_kind_t *k)
{
    for (int i = 0; i < NF_KIND__COUNT; i++)
        if (!strcmp(nf_state_kind_name((nf_state_kind_t)i), s) &&
            nf_changelog_topic((nf_state_kind_t)i) >= 0) {
            *k = (nf_state_kind_t)i;
            return 0;
        }
    return -1;
}

static int parse_opts(int argc, char **argv, opts_t *o)
{
    *o = (opts_t){.dir = "/tmp",
                  .partitions = 4,
                  .value_min = 150,
                  .value_max = 300,
                  .epoch_records = 250000,
                  .write_batch = 4096,
                  .kind = NF_KIND_INTEREST,
                  .fetch = true,
                  .write = true,
                  .seed = 42};
    o->records[0] = 200000;
    o->nsizes = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--no-fetch")) {
            o->fetch = false;
            continue;
        }
        if (!strcmp(a, "--no-write")) {
            o->write = false;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help") || !v) {
            usage();
            return -1;
        }
        i++;
        if (!strcmp(a, "--brokers"))
            o->brokers = v;
        else if (!strcmp(a, "--prefix"))
            o->prefix = v;
        else if (!strcmp(a, "--dir"))
            o->dir = v;
        else if (!strcmp(a, "--properties"))
            o->properties = v;
        else if (!strcmp(a, "--records")) {
            o->nsizes = 0;
            for (const char *p = v; *p && o->nsizes < MAX_SIZES;) {
                char *end;
                o->records[o->nsizes++] = strtoull(p, &end, 10);
                p = *end == ',' ? end + 1 : end + strlen(end);
            }
        } else if (!strcmp(a, "--partitions"))
            o->partitions = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--write-batch"))
            o->write_batch = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--epoch-records"))
            o->epoch_records = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--value-min"))
            o->value_min = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--value-max"))
            o->value_max = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--broker-pid"))
            o->broker_pid = atoi(v);
        else if (!strcmp(a, "--seed"))
            o->seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--kind")) {
            if (parse_kind(v, &o->kind) != 0) {
                fprintf(stderr, "bench_restore: --kind %s: not a state kind with a changelog\n", v);
                return -1;
            }
        } else {
            usage();
            return -1;
        }
    }
    if (!o->brokers || !o->partitions || o->value_min < 8 || o->value_max < o->value_min ||
        o->value_max > 4096 || !o->epoch_records || !o->write_batch) {
        usage();
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ steps */

static void topic_cb(void *arg, const char *topic, const char *outcome, int partitions,
                     const char *error)
{
    (void)arg;
    if (strcmp(outcome, "created") && strcmp(outcome, "exists"))
        fprintf(stderr, "bench_restore: topic %s: %s (%d partitions) %s\n", topic, outcome,
                partitions, error ? error : "");
}

/* Produces n records in transactions of o->epoch_records; the outbuf and batch are reused. */
static int produce(const opts_t *o, nf_kafka_t *k, size_t n, uint64_t *bytes, char *err,
                   size_t errlen)
{
    nf_store_batch_t *b = nf_store_batch_new();
    nf_outbuf_t out = {0};
    gen_t *g = malloc(sizeof *g);
    if (!b || !g) {
        nf_store_batch_free(b);
        free(g);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    g->seed = o->seed;
    int rc = 0;
    uint64_t epoch = 1;
    for (size_t i = 0; i < n && rc == 0; epoch++) {
        size_t stop = i + o->epoch_records < n ? i + o->epoch_records : n;
        nf_store_batch_clear(b);
        nf_outbuf_reset(&out);
        for (; i < stop; i++) {
            unsigned char key[18];
            size_t vlen;
            gen_record(o, g, i, key, &vlen);
            nf_store_batch_put(b, o->kind, key, sizeof key, g->val, vlen);
        }
        if ((rc = nf_changelog_from_batch(&out, b)) != 0) {
            snprintf(err, errlen, "nf_changelog_from_batch: %s", strerror(-rc));
            break;
        }
        *bytes += out.len - 9ull * out.count; /* as newsflow_changelog_bytes_total counts */
        nf_blob_t blob = {out.data, out.len};
        rc = nf_kafka_produce_epoch(k, epoch, epoch * 7919, &blob, 1, NULL, NULL, 0, err, errlen);
        fprintf(stderr, "bench_restore: epoch %" PRIu64 ": %zu records produced\n", epoch, i);
    }
    nf_outbuf_free(&out);
    nf_store_batch_free(b);
    free(g);
    return rc;
}

static int count_rec(void *arg, int topic_index, int32_t partition, int64_t offset, const void *key,
                     size_t klen, const void *val, size_t vlen, bool tombstone)
{
    (void)topic_index;
    (void)partition;
    (void)offset;
    (void)key;
    (void)val;
    (void)tombstone;
    uint64_t *c = arg;
    if (!c[0]++)
        c[2] = nf_now_ns();
    c[1] += klen + vlen;
    return 0;
}

/* Kafka alone: every changelog topic's partitions read whole, records counted. */
static int fetch_only(nf_kafka_t *k, uint64_t counts[3], char *err, size_t errlen)
{
    enum { STRIDE = NF_CHANGELOG_MAX_PARTITIONS };
    int topics[NF_TOPIC__COUNT], nparts[NF_TOPIC__COUNT], nt = 0;
    static int64_t from[NF_TOPIC__COUNT * STRIDE], end[NF_TOPIC__COUNT * STRIDE];
    for (int t = NF_TOPIC_CL_FIRST; t < NF_TOPIC__COUNT; t++) {
        int np = nf_kafka_topic_partitions(k, (nf_topic_t)t);
        if (np <= 0)
            continue;
        topics[nt] = t;
        nparts[nt] = np > STRIDE ? STRIDE : np;
        for (int p = 0; p < nparts[nt]; p++)
            from[nt * STRIDE + p] = -1;
        int r = nf_kafka_topic_ends(k, (nf_topic_t)t, end + nt * STRIDE, nparts[nt], err, errlen);
        if (r != 0)
            return r;
        nt++;
    }
    return nf_kafka_read_topics(k, topics, nt, nparts, STRIDE, from, end, count_rec, counts, err,
                                errlen);
}

/* The restore with the time inside the record callback (changelog.c's apply_rec: batching and
 * nf_store_write) measured apart. */
typedef struct {
    const nf_kafka_ops_t *real;
    nf_kafka_record_fn rec;
    void *rarg;
    uint64_t apply_ns;
} timed_t;

static timed_t g_timed;

static int timed_rec(void *arg, int topic_index, int32_t partition, int64_t offset, const void *key,
                     size_t klen, const void *val, size_t vlen, bool tombstone)
{
    (void)arg;
    uint64_t t0 = nf_now_ns();
    int r =
        g_timed.rec(g_timed.rarg, topic_index, partition, offset, key, klen, val, vlen, tombstone);
    g_timed.apply_ns += nf_now_ns() - t0;
    return r;
}

static int timed_read_topics(void *arg, const int *topics, int ntopics, const int *nparts,
                             int stride, const int64_t *from, int64_t *end, nf_kafka_record_fn rec,
                             void *rarg, char *err, size_t errlen)
{
    g_timed.rec = rec;
    g_timed.rarg = rarg;
    return g_timed.real->read_topics(arg, topics, ntopics, nparts, stride, from, end, timed_rec,
                                     NULL, err, errlen);
}

static nf_store_t *fresh_store(const opts_t *o, const char *tag, char *path, size_t plen, char *err,
                               size_t errlen)
{
    snprintf(path, plen, "%s/nf-bench-restore-%d-%s", o->dir, (int)getpid(), tag);
    rm_rf(path);
    nf_store_opts_t so;
    nf_store_opts_default(&so);
    return nf_store_open(path, &so, err, errlen);
}

/* How step 5 writes: through the memtable with the WAL, without it (+ the final flush), or as
 * table files ingested (nf_store_ingest, what the restore does with full batches). */
typedef enum { W_WAL, W_NO_WAL, W_BULK, W__COUNT } wmode_t;
static const char *const wmode_names[W__COUNT] = {"wal", "no_wal", "bulk"};

/* RocksDB alone: the same records in batches of --write-batch (default 4096), or of the
 * restore's full batch (65,536) when bulk. */
static int write_only(const opts_t *o, nf_store_t *st, size_t n, wmode_t mode, char *err,
                      size_t errlen)
{
    size_t batch = mode == W_BULK ? 65536 : o->write_batch;
    nf_store_batch_t *b = nf_store_batch_new();
    gen_t *g = malloc(sizeof *g);
    int rc = b && g ? 0 : -ENOMEM;
    if (g)
        g->seed = o->seed;
    for (size_t i = 0; i < n && rc == 0; i++) {
        unsigned char key[18];
        size_t vlen;
        gen_record(o, g, i, key, &vlen);
        nf_store_batch_put(b, o->kind, key, sizeof key, g->val, vlen);
        if (nf_store_batch_count(b) >= batch || i + 1 == n) {
            rc = mode == W_WAL      ? nf_store_write(st, b, err, errlen)
                 : mode == W_NO_WAL ? nf_store_write_unlogged(st, b, err, errlen)
                                    : nf_store_ingest(st, b, err, errlen);
            nf_store_batch_clear(b);
        }
    }
    if (rc == 0 && mode != W_WAL) /* as the restore does before it records its offsets */
        rc = nf_store_flush(st, err, errlen);
    nf_store_batch_free(b);
    free(g);
    return rc;
}

static void env_line(const opts_t *o)
{
    double la[3] = {0};
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf %lf %lf", &la[0], &la[1], &la[2]) != 3)
            la[0] = la[1] = la[2] = 0;
        fclose(f);
    }
    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", localtime(&now));
    printf("{\"bench\":\"changelog_restore.env\",\"date\":\"%s\",\"cpus\":%ld,"
           "\"loadavg\":[%.2f,%.2f,%.2f],\"partitions\":%u,\"kind\":\"%s\",\"value_min\":%u,"
           "\"value_max\":%u,\"epoch_records\":%zu}\n",
           date, sysconf(_SC_NPROCESSORS_ONLN), la[0], la[1], la[2], o->partitions,
           nf_state_kind_name(o->kind), o->value_min, o->value_max, o->epoch_records);
    fflush(stdout);
}

static int run_size(const opts_t *o, size_t n)
{
    char err[512] = "", prefix[128], cpu[160];
    if (o->prefix)
        snprintf(prefix, sizeof prefix, "%s%zu.", o->prefix, n);
    else
        snprintf(prefix, sizeof prefix, "clbench-%d-%ld-%zu.", (int)getpid(), (long)time(NULL), n);
    nf_kafka_topics_opts_t to = {
        .brokers = o->brokers, .prefix = prefix, .partitions = o->partitions, .replication = -1};
    if (nf_kafka_topics(&to, true, topic_cb, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "bench_restore: topics %s*: %s\n", prefix, err);
        return 1;
    }
    char txid[160], group[160];
    snprintf(txid, sizeof txid, "%stx", prefix);
    snprintf(group, sizeof group, "%sgroup", prefix);
    nf_kafka_opts_t ko = {.brokers = o->brokers,
                          .exactly_once = true,
                          .topic_prefix = prefix,
                          .group_id = group,
                          .transactional_id = txid,
                          .properties = o->properties,
                          .changelog = true};
    /* Topics created a moment ago can answer "Not leader for partition" for a while. */
    nf_kafka_t *k = NULL;
    for (int attempt = 0; attempt < 60 && !k; attempt++) {
        if (attempt)
            usleep(500000);
        k = nf_kafka_new(&ko, err, sizeof err);
    }
    if (!k) {
        fprintf(stderr, "bench_restore: nf_kafka_new: %s\n", err);
        return 1;
    }
    int rc = 0;
    nf_store_t *st = NULL, *ws = NULL;
    char spath[512] = "", wpath[512] = "";

    /* 2. produce */
    uint64_t bytes = 0;
    span_t s = span_start(o);
    if ((rc = produce(o, k, n, &bytes, err, sizeof err)) != 0) {
        fprintf(stderr, "bench_restore: produce: %s\n", err);
        goto out;
    }
    double sec = span_end(o, &s, cpu, sizeof cpu);
    printf("{\"bench\":\"changelog_restore.produce\",\"records\":%zu,\"bytes\":%" PRIu64 ",%s,"
           "\"records_per_s\":%.0f,\"mb_per_s\":%.1f}\n",
           n, bytes, cpu, (double)n / sec, (double)bytes / 1e6 / sec);
    fflush(stdout);

    /* 3. Kafka alone */
    if (o->fetch) {
        uint64_t c[3] = {0, 0, 0}; /* records, bytes, when the first came */
        s = span_start(o);
        if ((rc = fetch_only(k, c, err, sizeof err)) != 0) {
            fprintf(stderr, "bench_restore: fetch: %s\n", err);
            goto out;
        }
        sec = span_end(o, &s, cpu, sizeof cpu);
        printf("{\"bench\":\"changelog_restore.fetch\",\"records\":%" PRIu64 ",\"bytes\":%" PRIu64
               ",%s,\"records_per_s\":%.0f,\"mb_per_s\":%.1f,\"first_record_s\":%.3f}\n",
               c[0], c[1], cpu, (double)c[0] / sec, (double)c[1] / 1e6 / sec,
               c[0] ? (double)(c[2] - s.t0) / 1e9 : 0.0);
        fflush(stdout);
    }

    /* 4. the restore */
    if (!(st = fresh_store(o, "restore", spath, sizeof spath, err, sizeof err))) {
        fprintf(stderr, "bench_restore: store: %s\n", err);
        rc = 1;
        goto out;
    }
    nf_kafka_ops_t real = nf_kafka_ops(k), ops = real;
    g_timed = (timed_t){.real = &real};
    ops.read_topics = timed_read_topics;
    nf_changelog_stats_t cs;
    s = span_start(o);
    if ((rc = nf_changelog_restore(st, &ops, true, NULL, &cs, err, sizeof err)) != 0) {
        fprintf(stderr, "bench_restore: restore: %s\n", err);
        goto out;
    }
    sec = span_end(o, &s, cpu, sizeof cpu);
    double rs = (double)cs.ns / 1e9, apply = (double)g_timed.apply_ns / 1e9;
    printf("{\"bench\":\"changelog_restore\",\"records\":%" PRIu64 ",\"bytes\":%" PRIu64
           ",\"seconds\":%.3f,\"records_per_s\":%.0f,\"mb_per_s\":%.1f,\"puts\":%" PRIu64
           ",\"skipped\":%" PRIu64 ",\"partitions_read\":%" PRIu64 ",\"apply_s\":%.3f,"
           "\"kafka_s\":%.3f,\"wall\":{%s},\"target_records_per_s\":500000}\n",
           cs.records, cs.bytes, rs, (double)cs.records / rs, (double)cs.bytes / 1e6 / rs, cs.puts,
           cs.skipped, cs.partitions_read, apply, rs - apply, cpu);
    fflush(stdout);
    if (cs.records != n)
        fprintf(stderr, "bench_restore: restored %" PRIu64 " records, produced %zu\n", cs.records,
                n);

    /* 5. RocksDB alone: with the WAL (nf_store_write), without it plus the final flush, and
     * bulk-loaded (nf_store_ingest) */
    for (int mode = 0; o->write && mode < W__COUNT; mode++) {
        if (!(ws = fresh_store(o, "write", wpath, sizeof wpath, err, sizeof err))) {
            fprintf(stderr, "bench_restore: store: %s\n", err);
            rc = 1;
            goto out;
        }
        s = span_start(o);
        if ((rc = write_only(o, ws, n, (wmode_t)mode, err, sizeof err)) != 0) {
            fprintf(stderr, "bench_restore: write: %s\n", err);
            goto out;
        }
        sec = span_end(o, &s, cpu, sizeof cpu);
        printf("{\"bench\":\"changelog_restore.write\",\"records\":%zu,\"batch\":%zu,"
               "\"mode\":\"%s\",%s,\"records_per_s\":%.0f}\n",
               n, mode == W_BULK ? (size_t)65536 : o->write_batch, wmode_names[mode], cpu,
               (double)n / sec);
        fflush(stdout);
        nf_store_close(ws);
        ws = NULL;
        rm_rf(wpath);
        wpath[0] = 0;
    }
out:
    if (st)
        nf_store_close(st);
    if (ws)
        nf_store_close(ws);
    if (spath[0])
        rm_rf(spath);
    if (wpath[0])
        rm_rf(wpath);
    nf_kafka_free(k);
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    opts_t o;
    if (parse_opts(argc, argv, &o) != 0)
        return 2;
    nf_log_set_level(NF_LOG_WARN);
    env_line(&o);
    int rc = 0;
    for (unsigned i = 0; i < o.nsizes && rc == 0; i++) {
        fprintf(stderr, "bench_restore: %zu records\n", o.records[i]);
        rc = run_size(&o, o.records[i]);
    }
    return rc;
}
