/* kafka.c — see kafka.h: producer with epoch headers, recovery scan, consumer group feeding the
 * shards' queues, embedded mock cluster. */
#include "io/kafka.h"
#include "io/outbuf.h"
#include "runtime/jsonw.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <librdkafka/rdkafka_mock.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NF_KAFKA_TIMEOUT_MS 30000
/* A changelog value can be a key group's whole keyset blob of an epoch: the topics take records
 * up to 16 MiB, and the producer requests that size plus room for the batch around it. */
#define NF_KAFKA_CHANGELOG_MAX_BYTES     "16777216"
#define NF_KAFKA_CHANGELOG_REQUEST_BYTES "17825792"
#define NF_KAFKA_CHANGELOG_TTL_MS        "691200000" /* 8 days */

static const char *const input_names[NF_INPUT__COUNT] = {"read-events", "sources",
                                                         "trending-panes"};

const char *nf_input_name(nf_input_t in)
{
    return (unsigned)in < NF_INPUT__COUNT ? input_names[in] : "?";
}

static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf);

/* ---------------------------------------------------------------- mock cluster */

struct nf_kafka_mock {
    rd_kafka_t *rk;
    rd_kafka_mock_cluster_t *mc;
};

static void topic_full_name(char *out, size_t n, const char *prefix, const char *name)
{
    snprintf(out, n, "%s%s", prefix ? prefix : "", name);
}

/* Every topic (docs/ARCHITECTURE.md §5), outputs first (index = nf_topic_t), then the inputs. */
#define NF_KAFKA_TOPICS (NF_TOPIC__COUNT + NF_INPUT__COUNT)
/* The input that is an output topic read back (trending-panes): one topic, listed once. */
#define PANES_INPUT (NF_TOPIC__COUNT + NF_INPUT_TRENDING_PANES)
static const char *topic_base_name(int t)
{
    return t < NF_TOPIC__COUNT ? nf_topic_name((nf_topic_t)t) : input_names[t - NF_TOPIC__COUNT];
}

nf_kafka_mock_t *nf_kafka_mock_new(unsigned brokers, unsigned partitions, const char *prefix,
                                   char *err, size_t errlen)
{
    nf_kafka_mock_t *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    char num[16], rerr[256];
    snprintf(num, sizeof num, "%u", brokers ? brokers : 1);
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(conf, log_cb);
    if (rd_kafka_conf_set(conf, "test.mock.num.brokers", num, rerr, sizeof rerr) != 0 ||
        !(m->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, rerr, sizeof rerr))) {
        snprintf(err, errlen, "embedded Kafka: cannot start the mock cluster: %s", rerr);
        free(m);
        return NULL;
    }
    m->mc = rd_kafka_handle_mock_cluster(m->rk);
    if (!m->mc) {
        snprintf(err, errlen, "embedded Kafka: librdkafka has no mock cluster support");
        nf_kafka_mock_free(m);
        return NULL;
    }
    char name[256];
    for (int t = 0; t < NF_KAFKA_TOPICS; t++) {
        if (t == PANES_INPUT)
            continue; /* the output of the same name */
        topic_full_name(name, sizeof name, prefix, topic_base_name(t));
        rd_kafka_resp_err_t e =
            rd_kafka_mock_topic_create(m->mc, name, (int)(partitions ? partitions : 1), 1);
        if (e) {
            snprintf(err, errlen, "embedded Kafka: cannot create topic %s: %s", name,
                     rd_kafka_err2str(e));
            nf_kafka_mock_free(m);
            return NULL;
        }
    }
    return m;
}

const char *nf_kafka_mock_bootstrap(const nf_kafka_mock_t *m)
{
    return rd_kafka_mock_cluster_bootstraps(m->mc);
}

struct rd_kafka_mock_cluster_s *nf_kafka_mock_cluster(nf_kafka_mock_t *m)
{
    return m->mc;
}

void nf_kafka_mock_free(nf_kafka_mock_t *m)
{
    if (!m)
        return;
    if (m->rk)
        rd_kafka_destroy(m->rk);
    free(m);
}

/* ---------------------------------------------------------------- client */

typedef struct out_topic {
    char name[256];
    int npart;
    int64_t *pos;          /* per partition: offset after our last delivered record */
    rd_kafka_topic_t *rkt; /* the producer's handle, made at the first record (topic_handle) */
} out_topic_t;

typedef struct shard_q {
    rd_kafka_queue_t *q;
    int rfd, wfd;
    bool paused;
    rd_kafka_topic_partition_list_t *assigned; /* guarded by nf_kafka.lock */
} shard_q_t;

struct nf_kafka {
    nf_kafka_opts_t o;
    char brokers[1024], prefix[64], group[128], txid[128];
    char *props;
    rd_kafka_t *prod, *cons;
    rd_kafka_t *adm; /* nf_kafka_members' own client (created at its first call), under adm_mu */
    pthread_mutex_t adm_mu;
    out_topic_t out[NF_TOPIC__COUNT];
    char in_names[NF_INPUT__COUNT][256];
    int in_npart[NF_INPUT__COUNT];
    shard_q_t *sq;
    unsigned nshards;
    pthread_mutex_t lock;
    bool closing;
    bool coop; /* the group's rebalance protocol is COOPERATIVE (rebalance_cb's thread only) */
    _Atomic bool synced; /* an assignment (even an empty one) reached rebalance_cb */
    /* delivery reports (coordinator thread) */
    uint64_t dr_errors;
    char dr_last_error[256];
    _Atomic uint64_t produced, delivery_errors, transactions, aborts, scans, assigned, revoked,
        pauses;
    _Atomic bool fatal_seen;
    _Atomic bool rebalance_oom;   /* partitions left untaken for want of memory: the job stops */
    _Atomic uint64_t deadline_ns; /* nf_kafka_set_deadline; 0: none */
    /* NF_TEST_FAIL_GROUP_OFFSETS=PATH (tests): while PATH exists, the group's committed
     * offsets read as timed out, as from a coordinator too slow to answer ("": off) */
    char fail_committed[256];
    /* The coordinator thread's last sign of life (nf_kafka_poll, each slice of a blocking call)
     * and the start of its current unbroken run of them: nf_kafka_member_lost (nf_now_ns) */
    _Atomic uint64_t alive_ns, alive_since_ns;
    /* The consumer's view of its group, from librdkafka's statistics (stats_cb, every
     * NF_KAFKA_STATS_MS): "state/join_state", the rebalances it went through and the reason of
     * the last one; "" before the first report. Under elock. */
    char group_state[192];
    pthread_mutex_t elock;    /* guards the two below and group_state (error_cb may run anywhere) */
    uint64_t client_error_ns; /* nf_now_ns of the last client error */
    char client_error[256];
    nf_counter_t m_committed, m_aborted, m_commit_retries, m_delivery_errors, m_client_errors,
        m_resets;
    nf_gauge_t m_fenced, m_fatal;
    /* Consumer lag per input partition (nf_kafka_update_lag): -1 = not assigned or not known
     * yet; the gauges are registered when a partition first has a lag. */
    _Atomic int64_t lag[NF_INPUT__COUNT][NF_EPOCH_MAX_PARTITIONS];
    /* assigned and not being revoked: the shards take a record only from these (nf_kafka_owns) */
    _Atomic bool owned[NF_INPUT__COUNT][NF_EPOCH_MAX_PARTITIONS];
    nf_gauge_t m_lag[NF_INPUT__COUNT][NF_EPOCH_MAX_PARTITIONS];
    bool m_lag_reg[NF_INPUT__COUNT][NF_EPOCH_MAX_PARTITIONS];
    bool lag_seen[NF_INPUT__COUNT][NF_EPOCH_MAX_PARTITIONS]; /* nf_kafka_update_lag's scratch */
};

/* How often librdkafka reports the consumer's group state (stats_cb). */
#define NF_KAFKA_STATS_MS "5000"

static const char *json_str(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) ? v->valuestring : "?";
}

/* librdkafka's statistics (consumer only): keeps the group's part, which says where a member
 * waiting for an assignment is in the join protocol (a group that never completes a rebalance
 * shows as a join_state that does not move). */
static int stats_cb(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
    (void)rk;
    (void)len;
    nf_kafka_t *k = opaque;
    cJSON *root = cJSON_Parse(json);
    const cJSON *g = root ? cJSON_GetObjectItemCaseSensitive(root, "cgrp") : NULL;
    if (cJSON_IsObject(g)) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(g, "rebalance_cnt");
        const cJSON *age = cJSON_GetObjectItemCaseSensitive(g, "rebalance_age");
        pthread_mutex_lock(&k->elock);
        snprintf(k->group_state, sizeof k->group_state, "%s/%s rebalances=%d last=%.0fs ago (%s)",
                 json_str(g, "state"), json_str(g, "join_state"),
                 cJSON_IsNumber(n) ? n->valueint : -1,
                 cJSON_IsNumber(age) ? age->valuedouble / 1000.0 : -1.0,
                 json_str(g, "rebalance_reason"));
        pthread_mutex_unlock(&k->elock);
    }
    cJSON_Delete(root);
    return 0; /* librdkafka frees json */
}

void nf_kafka_group_state(nf_kafka_t *k, char *buf, size_t len)
{
    pthread_mutex_lock(&k->elock);
    snprintf(buf, len, "%s", k->group_state);
    pthread_mutex_unlock(&k->elock);
}

static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    nf_log_level_t l = level <= 3   ? NF_LOG_ERROR
                       : level == 4 ? NF_LOG_WARN
                       : level <= 6 ? NF_LOG_INFO
                                    : NF_LOG_DEBUG;
    nf_log(l, "kafka", buf, NF_LS("facility", fac), NF_LEND);
}

/* The timeout of a blocking call: dflt, cut to what is left before the deadline set by
 * nf_kafka_set_deadline (at least 1 ms: a call made past it returns at once, timed out). */
static int tmo(const nf_kafka_t *k, int dflt)
{
    uint64_t d = atomic_load(&k->deadline_ns);
    if (!d)
        return dflt;
    uint64_t now = nf_now_ns();
    uint64_t left_ms = now >= d ? 0 : (d - now) / 1000000ull;
    if (left_ms < 1)
        left_ms = 1;
    return left_ms < (uint64_t)dflt ? (int)left_ms : dflt;
}

/* Blocking transactional calls are made in slices of at most this long (librdkafka resumes a
 * timed-out flush, send_offsets or commit when called again), so that a deadline set while one
 * is waiting (shutdown) is noticed within a slice. */
#define NF_KAFKA_SLICE_MS 500

/* A pause this long between two signs of life of the coordinator thread means the process (or
 * that thread) did not run meanwhile: stopped, starved, a blocking disk. */
#define NF_KAFKA_STALL_NS 1000000000ull

static void note_alive(nf_kafka_t *k)
{
    uint64_t now = nf_now_ns(), prev = atomic_exchange(&k->alive_ns, now);
    if (!prev || now - prev > NF_KAFKA_STALL_NS)
        atomic_store(&k->alive_since_ns, now);
}

/* The timeout of the next slice of a call that may take until end_ns in all. */
static int slice(nf_kafka_t *k, uint64_t end_ns)
{
    note_alive(k);
    uint64_t now = nf_now_ns();
    uint64_t left = end_ns > now ? (end_ns - now) / 1000000ull : 0;
    int t = tmo(k, NF_KAFKA_SLICE_MS);
    return left < (uint64_t)t ? (int)(left ? left : 1) : t;
}

bool nf_kafka_past_deadline(const nf_kafka_t *k)
{
    uint64_t d = atomic_load(&k->deadline_ns);
    return d && nf_now_ns() >= d;
}

/* Whether a watermark query's error is one a moment can cure: no leader yet (a broker restarting,
 * a partition moving), a request that timed out, a connection being set up. */
static bool watermark_retriable(rd_kafka_resp_err_t e)
{
    switch (e) {
    case RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION:
    case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS:
    case RD_KAFKA_RESP_ERR_KAFKA_STORAGE_ERROR:
    case RD_KAFKA_RESP_ERR_FENCED_LEADER_EPOCH:
    case RD_KAFKA_RESP_ERR_UNKNOWN_LEADER_EPOCH:
    case RD_KAFKA_RESP_ERR_OFFSET_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
        return true;
    default:
        return false;
    }
}

/* Asks the cluster for topic's metadata through rk, which updates rk's cache: a watermark query
 * goes to the leader rk has cached, and librdkafka does not refresh it on NOT_LEADER for a
 * client that neither produces nor fetches (the group-less client of adm_client asked a
 * partition's old leader for minutes after a broker kill: the chaos test). */
static void refresh_metadata(const nf_kafka_t *k, rd_kafka_t *rk, const char *topic)
{
    rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    if (t && rd_kafka_metadata(rk, 0, t, &md, tmo(k, 5000)) == RD_KAFKA_RESP_ERR_NO_ERROR && md)
        rd_kafka_metadata_destroy(md);
    if (t)
        rd_kafka_topic_destroy(t);
}

/* rd_kafka_query_watermark_offsets, retried (100 ms, doubling to 1 s) on a retriable error until
 * timeout_ms have passed or the shutdown deadline: a job started right after a broker restart
 * meets partitions without a leader for a few seconds. The leader's metadata is asked again
 * after an answer from a broker that is not (or no longer) the leader. The last error, or 0. */
static rd_kafka_resp_err_t watermarks(const nf_kafka_t *k, rd_kafka_t *rk, const char *topic,
                                      int32_t p, int64_t *lo, int64_t *hi, int timeout_ms)
{
    uint64_t until = nf_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    unsigned pause_ms = 100;
    for (;;) {
        rd_kafka_resp_err_t e =
            rd_kafka_query_watermark_offsets(rk, topic, p, lo, hi, tmo(k, timeout_ms));
        if (!e || !watermark_retriable(e) || nf_now_ns() + pause_ms * 1000000ull >= until ||
            nf_kafka_past_deadline(k))
            return e;
        if (e == RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION ||
            e == RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE ||
            e == RD_KAFKA_RESP_ERR_FENCED_LEADER_EPOCH ||
            e == RD_KAFKA_RESP_ERR_UNKNOWN_LEADER_EPOCH || e == RD_KAFKA_RESP_ERR__TRANSPORT)
            refresh_metadata(k, rk, topic);
        nf_log(NF_LOG_DEBUG, "kafka", "end offset: retrying", NF_LS("topic", topic),
               NF_LI("partition", p), NF_LS("error", rd_kafka_err2str(e)), NF_LEND);
        struct timespec ts = {0, (long)pause_ms * 1000000L};
        nanosleep(&ts, NULL);
        pause_ms = pause_ms * 2 > 1000 ? 1000 : pause_ms * 2;
    }
}

void nf_kafka_set_deadline(nf_kafka_t *k, uint64_t deadline_ns)
{
    atomic_store(&k->deadline_ns, deadline_ns);
}

/* -ETIMEDOUT with err naming what the deadline interrupted. */
static int deadline_error(const char *what, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s: stopped at the shutdown deadline (shutdown.timeout_ms)", what);
    return -ETIMEDOUT;
}

static void error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    (void)rk;
    nf_kafka_t *k = opaque; /* NULL for the short-lived admin client */
    if (k) {
        nf_counter_inc(k->m_client_errors);
        pthread_mutex_lock(&k->elock);
        k->client_error_ns = nf_now_ns();
        snprintf(k->client_error, sizeof k->client_error, "%s: %s",
                 rd_kafka_err2name((rd_kafka_resp_err_t)err), reason);
        pthread_mutex_unlock(&k->elock);
    }
    nf_log(err == RD_KAFKA_RESP_ERR__FATAL ? NF_LOG_ERROR : NF_LOG_WARN, "kafka", reason,
           NF_LS("error", rd_kafka_err2name((rd_kafka_resp_err_t)err)), NF_LEND);
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    nf_kafka_t *k = opaque;
    if (m->err) {
        k->dr_errors++;
        atomic_fetch_add(&k->delivery_errors, 1);
        nf_counter_inc(k->m_delivery_errors);
        snprintf(k->dr_last_error, sizeof k->dr_last_error, "%s [%d]: %s",
                 rd_kafka_topic_name(m->rkt), m->partition, rd_kafka_err2str(m->err));
        return;
    }
    uintptr_t t = (uintptr_t)m->_private;
    if (t < NF_TOPIC__COUNT && m->partition >= 0 && m->partition < k->out[t].npart &&
        m->offset + 1 > k->out[t].pos[m->partition])
        k->out[t].pos[m->partition] = m->offset + 1;
}

/* Applies bootstrap, the operator's extra properties ("name=value" lines, may be NULL) and the
 * callbacks; opaque is the callbacks' argument. */
static rd_kafka_conf_t *conf_new(const char *brokers, const char *props, void *opaque, char *err,
                                 size_t errlen)
{
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    char rerr[256];
    if (rd_kafka_conf_set(c, "bootstrap.servers", brokers, rerr, sizeof rerr) != 0) {
        snprintf(err, errlen, "kafka.brokers: %s", rerr);
        rd_kafka_conf_destroy(c);
        return NULL;
    }
    rd_kafka_conf_set_log_cb(c, log_cb);
    rd_kafka_conf_set_error_cb(c, error_cb);
    rd_kafka_conf_set_opaque(c, opaque);
    if (props && *props) {
        char *save = NULL, *copy = strdup(props);
        if (!copy) {
            snprintf(err, errlen, "out of memory");
            rd_kafka_conf_destroy(c);
            return NULL;
        }
        for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            char *eq = strchr(line, '=');
            if (!eq) {
                snprintf(err, errlen, "kafka.properties: \"%s\" is not name=value", line);
                free(copy);
                rd_kafka_conf_destroy(c);
                return NULL;
            }
            *eq = 0;
            if (rd_kafka_conf_set(c, line, eq + 1, rerr, sizeof rerr) != RD_KAFKA_CONF_OK) {
                snprintf(err, errlen, "kafka.properties: %s: %s", line, rerr);
                free(copy);
                rd_kafka_conf_destroy(c);
                return NULL;
            }
        }
        free(copy);
    }
    return c;
}

rd_kafka_conf_t *nf_kafka_conf_new(const char *brokers, const char *props, char *err, size_t errlen)
{
    return conf_new(brokers, props, NULL, err, errlen);
}

static rd_kafka_conf_t *base_conf(nf_kafka_t *k, char *err, size_t errlen)
{
    return conf_new(k->brokers, k->props, k, err, errlen);
}

static int conf_set(rd_kafka_conf_t *c, const char *name, const char *value, char *err,
                    size_t errlen)
{
    char rerr[256];
    if (rd_kafka_conf_set(c, name, value, rerr, sizeof rerr) != RD_KAFKA_CONF_OK) {
        snprintf(err, errlen, "librdkafka %s=%s: %s", name, value, rerr);
        return -EINVAL;
    }
    return 0;
}

/* The configuration of a consumer of its own that reads committed records of partitions it
 * assigns itself (recovery scan, changelog restore, standby, follower): group.id
 * "<group>.nf-<purpose>" (never joined; librdkafka wants one), nothing committed. NULL with err. */
static rd_kafka_conf_t *reader_conf(nf_kafka_t *k, const char *purpose, char *err, size_t errlen)
{
    rd_kafka_conf_t *c = base_conf(k, err, errlen);
    if (!c)
        return NULL;
    char group[160];
    snprintf(group, sizeof group, "%s.nf-%s", k->group, purpose);
    if (conf_set(c, "group.id", group, err, errlen) != 0 ||
        conf_set(c, "enable.auto.commit", "false", err, errlen) != 0 ||
        conf_set(c, "isolation.level", "read_committed", err, errlen) != 0) {
        rd_kafka_conf_destroy(c);
        return NULL;
    }
    return c;
}

static bool is_fenced(rd_kafka_resp_err_t c)
{
    return c == RD_KAFKA_RESP_ERR__FENCED || c == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
           c == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH ||
           c == RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID;
}

/* After a failure: 0 if neither client has a fatal error; -ESTALE if this process was fenced
 * (another incarnation with the same transactional.id or group.instance.id took over), with err
 * saying so; -EPIPE for any other fatal error. */
static int fatal_state(nf_kafka_t *k, char *err, size_t errlen)
{
    if (atomic_load(&k->rebalance_oom)) {
        snprintf(err, errlen,
                 "kafka: out of memory in a rebalance: assigned partitions were not "
                 "taken");
        return -ENOMEM;
    }
    char why[256] = "";
    rd_kafka_resp_err_t c = rd_kafka_fatal_error(k->prod, why, sizeof why);
    const char *who = "producer";
    if (!c && k->cons) {
        c = rd_kafka_fatal_error(k->cons, why, sizeof why);
        who = "consumer";
    }
    if (!c)
        return 0;
    if (!atomic_exchange(&k->fatal_seen, true))
        nf_gauge_set(is_fenced(c) ? k->m_fenced : k->m_fatal, 1);
    if (is_fenced(c)) {
        snprintf(err, errlen,
                 "kafka: fenced (%s): another process took over %s %s, or the broker ended this "
                 "process's transaction after transaction.timeout.ms; this one must stop without "
                 "committing",
                 why, who, !strcmp(who, "producer") ? k->txid : "group.instance.id");
        return -ESTALE;
    }
    snprintf(err, errlen, "kafka: fatal %s error: %s (%s)", who, why, rd_kafka_err2name(c));
    return -EPIPE;
}

static int err_from(nf_kafka_t *k, rd_kafka_error_t *e, const char *what, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s: %s", what, rd_kafka_error_string(e));
    bool fatal = rd_kafka_error_is_fatal(e);
    rd_kafka_error_destroy(e);
    if (!fatal)
        return -EIO;
    int r = fatal_state(k, err, errlen);
    return r ? r : -EPIPE;
}

int nf_kafka_fatal(nf_kafka_t *k, char *err, size_t errlen)
{
    return fatal_state(k, err, errlen);
}

/* The producer: transactional (or idempotent), acks=all, delivery reports to dr_cb. */
static rd_kafka_t *producer_new(nf_kafka_t *k, char *err, size_t errlen)
{
    rd_kafka_conf_t *pc = base_conf(k, err, errlen);
    if (!pc)
        return NULL;
    if ((k->o.exactly_once ? conf_set(pc, "transactional.id", k->txid, err, errlen)
                           : conf_set(pc, "enable.idempotence", "true", err, errlen)) != 0 ||
        conf_set(pc, "acks", "all", err, errlen) != 0 ||
        conf_set(pc, "linger.ms", "5", err, errlen) != 0 ||
        (k->o.changelog &&
         conf_set(pc, "message.max.bytes", NF_KAFKA_CHANGELOG_REQUEST_BYTES, err, errlen) != 0) ||
        /* A process that dies mid-transaction holds back the read_committed end of every
         * partition it wrote, the changelogs its successor restores from included, until the
         * broker aborts the transaction: keep that short (Kafka Streams uses 10 s), unless
         * kafka.properties says otherwise. */
        (k->o.changelog && k->o.exactly_once &&
         !(k->props && strstr(k->props, "transaction.timeout.ms")) &&
         conf_set(pc, "transaction.timeout.ms", "15000", err, errlen) != 0)) {
        rd_kafka_conf_destroy(pc);
        return NULL;
    }
    rd_kafka_conf_set_dr_msg_cb(pc, dr_cb);
    char rerr[256];
    rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, pc, rerr, sizeof rerr);
    if (!p)
        snprintf(err, errlen, "kafka: cannot create the producer: %s", rerr);
    return p;
}

/* init_transactions fences every older incarnation of this transactional id and completes or
 * aborts its open transaction before it returns. */
static int init_transactions(nf_kafka_t *k, char *err, size_t errlen)
{
    if (!k->o.exactly_once)
        return 0;
    rd_kafka_error_t *e = rd_kafka_init_transactions(k->prod, tmo(k, NF_KAFKA_TIMEOUT_MS));
    if (!e)
        return 0;
    char what[300];
    snprintf(what, sizeof what, "kafka: init_transactions (transactional.id %s)", k->txid);
    return err_from(k, e, what, err, errlen);
}

/* The producer's topic handles (out_topic_t.rkt), before the producer goes. */
static void drop_topic_handles(nf_kafka_t *k)
{
    for (int t = 0; t < NF_TOPIC__COUNT; t++)
        if (k->out[t].rkt) {
            rd_kafka_topic_destroy(k->out[t].rkt);
            k->out[t].rkt = NULL;
        }
}

int nf_kafka_reset_producer(nf_kafka_t *k, char *err, size_t errlen)
{
    char why[256];
    rd_kafka_resp_err_t c = rd_kafka_fatal_error(k->prod, why, sizeof why);
    if (!c || is_fenced(c)) {
        snprintf(err, errlen, "kafka: the producer %s", c ? "was fenced" : "has no fatal error");
        return -EINVAL;
    }
    rd_kafka_t *old = k->prod;
    if (!(k->prod = producer_new(k, err, errlen))) {
        k->prod = old;
        return -EIO;
    }
    /* The new producer fences the old one: nothing the old one still holds reaches the log. */
    int r = init_transactions(k, err, errlen);
    rd_kafka_purge(old, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    drop_topic_handles(k);
    rd_kafka_destroy(old);
    if (r != 0)
        return r;
    atomic_store(&k->fatal_seen, false);
    nf_gauge_set(k->m_fatal, 0);
    nf_counter_inc(k->m_resets);
    return 0;
}

/* Whether topic t (an output, or NF_TOPIC__COUNT + an input) is one this client needs. */
static bool topic_used(const nf_kafka_t *k, int t)
{
    if (nf_topic_is_changelog(t))
        return k->o.changelog;
    if (t == NF_TOPIC_TRENDING_PANES || t == PANES_INPUT)
        return k->o.trending_panes;
    return true;
}

/* Partition counts of the output topics and the start positions (high watermarks). */
static int load_topics(nf_kafka_t *k, char *err, size_t errlen)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = rd_kafka_metadata(k->prod, 1, NULL, &md, NF_KAFKA_TIMEOUT_MS);
    if (e) {
        snprintf(err, errlen, "kafka: cannot read cluster metadata from %s: %s", k->brokers,
                 rd_kafka_err2str(e));
        return -EIO;
    }
    int r = 0, used = 0;
    char missing[768] = "";
    size_t nmissing = 0, ml = 0;
    for (int t = 0; t < NF_TOPIC__COUNT + NF_INPUT__COUNT; t++)
        used += topic_used(k, t) && t != PANES_INPUT;
    for (int t = 0; t < NF_TOPIC__COUNT + NF_INPUT__COUNT && r == 0; t++) {
        if (!topic_used(k, t))
            continue; /* not written or read: not needed */
        const char *name = t < NF_TOPIC__COUNT ? k->out[t].name : k->in_names[t - NF_TOPIC__COUNT];
        int found = -1;
        for (int i = 0; i < md->topic_cnt; i++)
            if (!strcmp(md->topics[i].topic, name) && !md->topics[i].err)
                found = i;
        if ((found < 0 || md->topics[found].partition_cnt <= 0) && t == PANES_INPUT)
            continue; /* named as the output of the same name */
        if (found < 0 || md->topics[found].partition_cnt <= 0) {
            /* every missing topic is named, not only the first */
            if (ml < sizeof missing)
                ml += (size_t)snprintf(missing + ml, sizeof missing - ml, "%s%s",
                                       nmissing ? ", " : "", name);
            nmissing++;
            continue;
        }
        if (t >= NF_TOPIC__COUNT) {
            k->in_npart[t - NF_TOPIC__COUNT] = md->topics[found].partition_cnt;
            continue;
        }
        out_topic_t *ot = &k->out[t];
        ot->npart = md->topics[found].partition_cnt;
        ot->pos = calloc((size_t)ot->npart, sizeof *ot->pos);
        if (!ot->pos) {
            snprintf(err, errlen, "out of memory");
            r = -ENOMEM;
        }
    }
    if (r == 0 && nmissing) {
        snprintf(err, errlen,
                 "kafka: %zu of the job's %d topics do not exist on %s: %s; create them with "
                 "`newsflow topics create` (kafka.topic_prefix is \"%s\")",
                 nmissing, used, k->brokers, missing, k->prefix);
        r = -ENOENT;
    }
    rd_kafka_metadata_destroy(md);
    /* A changelog partition is a read-events partition's key group (state/changelog.h). */
    for (int t = NF_TOPIC_CL_FIRST; t < NF_TOPIC_CL_END && r == 0 && k->o.changelog; t++)
        if (k->out[t].npart != k->in_npart[NF_INPUT_READ_EVENTS]) {
            snprintf(err, errlen,
                     "kafka: %s has %d partitions and %s %d: a changelog topic needs as many as "
                     "the input (recreate it with `newsflow topics create`)",
                     k->out[t].name, k->out[t].npart, k->in_names[NF_INPUT_READ_EVENTS],
                     k->in_npart[NF_INPUT_READ_EVENTS]);
            r = -EINVAL;
        }
    for (int t = 0; t < NF_TOPIC__COUNT && r == 0; t++) {
        out_topic_t *ot = &k->out[t];
        for (int p = 0; p < ot->npart; p++) {
            int64_t lo = 0, hi = 0;
            e = watermarks(k, k->prod, ot->name, p, &lo, &hi, NF_KAFKA_TIMEOUT_MS);
            if (e) {
                snprintf(err, errlen, "kafka: cannot read the end offset of %s [%d]: %s", ot->name,
                         p, rd_kafka_err2str(e));
                return -EIO;
            }
            ot->pos[p] = hi;
        }
    }
    return r;
}

/* Positions one partition from the job's state and forwards its queue to its shard. Called with
 * k->lock held, before the partition is assigned. */
static void take_partition(nf_kafka_t *k, rd_kafka_topic_partition_t *tp)
{
    int in = nf_kafka_input_of(k, tp->topic);
    int64_t pos =
        in >= 0 && k->o.position ? k->o.position(k->o.arg, (nf_input_t)in, tp->partition) : -1;
    tp->offset = pos >= 0 ? pos : RD_KAFKA_OFFSET_BEGINNING;
    unsigned s = (unsigned)tp->partition % k->nshards;
    rd_kafka_queue_t *pq = rd_kafka_queue_get_partition(k->cons, tp->topic, tp->partition);
    if (pq) {
        rd_kafka_queue_forward(pq, k->sq[s].q);
        rd_kafka_queue_destroy(pq);
    }
    rd_kafka_topic_partition_list_add(k->sq[s].assigned, tp->topic, tp->partition);
    if (in >= 0 && tp->partition >= 0 && tp->partition < NF_EPOCH_MAX_PARTITIONS)
        atomic_store(&k->owned[in][tp->partition], true);
    nf_log(NF_LOG_INFO, "kafka", "partition assigned", NF_LS("topic", tp->topic),
           NF_LI("partition", tp->partition), NF_LI("offset", pos), NF_LI("shard", s), NF_LEND);
}

/* The partitions of a rebalance as (input, partition) pairs (next = -1), malloc'd; NULL when out
 * of memory (logged: the hooks are then skipped; assigned partitions are then not taken and the
 * job stops, rebalance_oom). */
static nf_kafka_offset_t *input_list(nf_kafka_t *k, const rd_kafka_topic_partition_list_t *parts)
{
    nf_kafka_offset_t *l = calloc(parts->cnt > 0 ? (size_t)parts->cnt : 1, sizeof *l);
    if (!l) {
        nf_log(NF_LOG_ERROR, "kafka", "out of memory in a rebalance", NF_LEND);
        return NULL;
    }
    for (int i = 0; i < parts->cnt; i++) {
        int in = nf_kafka_input_of(k, parts->elems[i].topic);
        l[i] = (nf_kafka_offset_t){in < 0 ? NF_INPUT__COUNT : (nf_input_t)in,
                                   parts->elems[i].partition, -1};
    }
    return l;
}

bool nf_kafka_owns(const nf_kafka_t *k, nf_input_t in, int32_t partition)
{
    return (unsigned)in < NF_INPUT__COUNT && partition >= 0 &&
           partition < NF_EPOCH_MAX_PARTITIONS &&
           atomic_load_explicit(&k->owned[in][partition], memory_order_acquire);
}

/* Partitions assigned after the job failed (the assign hook said no): nothing more is
 * committed, so no position and no shard: they are handed to the consumer only (what it fetches
 * of them reaches nf_kafka_poll, which drops it) and go back to the group with the close; their
 * next owner starts from the group's committed offsets. (Not paused: a close waits for paused
 * partitions it was handed.) */
static rd_kafka_error_t *assign_untaken(nf_kafka_t *k, rd_kafka_t *rk,
                                        rd_kafka_topic_partition_list_t *parts)
{
    nf_log(NF_LOG_INFO, "kafka", "partitions assigned after the job failed: not taken",
           NF_LI("partitions", parts->cnt), NF_LEND);
    if (!k->coop) {
        rd_kafka_assign(rk, parts);
        return NULL;
    }
    return rd_kafka_incremental_assign(rk, parts);
}

/* An assignment served by the consumer's close (a rebalance on its way when the job stopped):
 * the close revokes every partition, these included, in a revoke of its own (served before or
 * after this one). Nothing is assigned here: librdkafka 2.0 takes an assign call while it
 * closes as the unassign its revoke waits for, finishes the group, and the revoke's own
 * unassign, served next, then waits forever for a group that is gone. */
static void assign_while_closing(rd_kafka_topic_partition_list_t *parts)
{
    nf_log(NF_LOG_INFO, "kafka", "partitions assigned while leaving the group: not taken",
           NF_LI("partitions", parts->cnt), NF_LEND);
}

static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t e,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    nf_kafka_t *k = opaque;
    /* NULL while the consumer closes: the protocol last seen holds (cooperative-sticky is what
     * nf_kafka_new configures) */
    const char *proto = rd_kafka_rebalance_protocol(rk);
    if (proto)
        k->coop = !strcmp(proto, "COOPERATIVE");
    bool coop = k->coop;
    rd_kafka_error_t *ae = NULL;
    if (e == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS)
        atomic_store(&k->synced, true); /* the assignor's state is set: see destroy_safe */
    bool take = e == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS && !k->closing;
    if (take && k->o.assign) {
        /* The key groups come first (restored from the changelog, loaded by the shards), then
         * the positions, which the `position` hook answers from the restored state. */
        nf_kafka_offset_t *list = input_list(k, parts);
        take = list && k->o.assign(k->o.arg, list, (size_t)parts->cnt);
        if (!list)
            atomic_store(&k->rebalance_oom, true); /* nf_kafka_fatal: the job stops */
        free(list);
    }
    if (e == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS && k->closing) {
        assign_while_closing(parts);
    } else if (e == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS && !take) {
        ae = assign_untaken(k, rk, parts);
    } else if (e == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        pthread_mutex_lock(&k->lock);
        for (int i = 0; i < parts->cnt; i++)
            take_partition(k, &parts->elems[i]);
        pthread_mutex_unlock(&k->lock);
        atomic_fetch_add(&k->assigned, (uint64_t)parts->cnt);
        if (coop)
            ae = rd_kafka_incremental_assign(rk, parts);
        else
            rd_kafka_assign(rk, parts);
        pthread_mutex_lock(&k->lock);
        for (unsigned s = 0; s < k->nshards; s++)
            if (k->sq[s].paused && k->sq[s].assigned->cnt)
                rd_kafka_pause_partitions(rk, k->sq[s].assigned);
        pthread_mutex_unlock(&k->lock);
    } else if (e == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
        /* State and positions must move together: no record of a revoked partition is taken
         * from now on (a shard drops what its queue still holds: the next owner reads it), the
         * epoch in flight commits what was taken, then the key groups are let go. */
        for (int i = 0; i < parts->cnt; i++) {
            int in = nf_kafka_input_of(k, parts->elems[i].topic);
            int32_t p = parts->elems[i].partition;
            if (in >= 0 && p >= 0 && p < NF_EPOCH_MAX_PARTITIONS)
                atomic_store(&k->owned[in][p], false);
        }
        nf_kafka_offset_t *list = input_list(k, parts);
        /* Lost (the group evicted this member): another owner may read them already, and this
         * process's transactions are fenced; the hook must not commit. */
        bool lost = rd_kafka_assignment_lost(rk) != 0;
        if (!k->closing && k->o.revoke && list)
            k->o.revoke(k->o.arg, list, (size_t)parts->cnt, lost);
        free(list);
        pthread_mutex_lock(&k->lock);
        for (int i = 0; i < parts->cnt; i++) {
            unsigned s = (unsigned)parts->elems[i].partition % k->nshards;
            rd_kafka_topic_partition_list_del(k->sq[s].assigned, parts->elems[i].topic,
                                              parts->elems[i].partition);
        }
        pthread_mutex_unlock(&k->lock);
        atomic_fetch_add(&k->revoked, (uint64_t)parts->cnt);
        if (coop)
            ae = rd_kafka_incremental_unassign(rk, parts);
        else
            rd_kafka_assign(rk, NULL);
    } else {
        nf_log(NF_LOG_ERROR, "kafka", "rebalance failed", NF_LS("error", rd_kafka_err2str(e)),
               NF_LEND);
        rd_kafka_assign(rk, NULL);
    }
    if (ae) {
        nf_log(NF_LOG_ERROR, "kafka", "assignment change failed",
               NF_LS("error", rd_kafka_error_string(ae)), NF_LEND);
        rd_kafka_error_destroy(ae);
    }
}

int nf_kafka_input_of(const nf_kafka_t *k, const char *topic)
{
    for (int i = 0; i < NF_INPUT__COUNT; i++)
        if (!strcmp(k->in_names[i], topic))
            return i;
    return -1;
}

nf_kafka_t *nf_kafka_new(const nf_kafka_opts_t *o, char *err, size_t errlen)
{
    nf_kafka_t *k = calloc(1, sizeof *k);
    if (!k) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    k->o = *o;
    k->coop = true; /* partition.assignment.strategy=cooperative-sticky, below */
    const char *fc = getenv("NF_TEST_FAIL_GROUP_OFFSETS");
    snprintf(k->fail_committed, sizeof k->fail_committed, "%s", fc ? fc : "");
    if (k->fail_committed[0])
        nf_log(NF_LOG_WARN, "kafka",
               "test knob NF_TEST_FAIL_GROUP_OFFSETS: the group's committed offsets time out while "
               "this file exists",
               NF_LS("file", k->fail_committed), NF_LEND);
    pthread_mutex_init(&k->lock, NULL);
    pthread_mutex_init(&k->elock, NULL);
    pthread_mutex_init(&k->adm_mu, NULL);
    for (int i = 0; i < NF_INPUT__COUNT; i++)
        for (int p = 0; p < NF_EPOCH_MAX_PARTITIONS; p++)
            atomic_init(&k->lag[i][p], -1);
    snprintf(k->brokers, sizeof k->brokers, "%s", o->brokers);
    snprintf(k->prefix, sizeof k->prefix, "%s", o->topic_prefix ? o->topic_prefix : "");
    snprintf(k->group, sizeof k->group, "%s", o->group_id);
    snprintf(k->txid, sizeof k->txid, "%s", o->transactional_id);
    k->props = o->properties && o->properties[0] ? strdup(o->properties) : NULL;
    k->o.brokers = k->brokers;
    nf_metrics_counter("newsflow_kafka_transactions_total", "Epoch transactions, by outcome.",
                       "result=\"committed\"", 0, &k->m_committed);
    nf_metrics_counter("newsflow_kafka_transactions_total", "Epoch transactions, by outcome.",
                       "result=\"aborted\"", 0, &k->m_aborted);
    nf_metrics_counter("newsflow_kafka_commit_retries_total",
                       "commit_transaction calls retried after a retriable error (coordinator "
                       "moved or unreachable).",
                       NULL, 0, &k->m_commit_retries);
    nf_metrics_counter("newsflow_kafka_delivery_errors_total",
                       "Output records whose delivery failed (their epoch is retried).", NULL, 0,
                       &k->m_delivery_errors);
    nf_metrics_counter("newsflow_kafka_client_errors_total",
                       "Errors librdkafka reported (brokers down or unreachable, timeouts, "
                       "fatal errors); each is also logged.",
                       NULL, 0, &k->m_client_errors);
    nf_metrics_gauge("newsflow_kafka_fenced",
                     "1 once the broker fenced this process (another one took over its "
                     "transactional.id or group.instance.id): it stops without committing.",
                     NULL, 0, &k->m_fenced);
    nf_metrics_gauge("newsflow_kafka_fatal",
                     "1 while a Kafka client is stuck in a fatal error other than fencing.", NULL,
                     0, &k->m_fatal);
    nf_metrics_counter("newsflow_kafka_producer_resets_total",
                       "Transactional producers replaced after a fatal error that was not "
                       "fencing (the epoch then resumes as after a restart).",
                       NULL, 0, &k->m_resets);
    for (int t = 0; t < NF_TOPIC__COUNT; t++)
        topic_full_name(k->out[t].name, sizeof k->out[t].name, k->prefix,
                        nf_topic_name((nf_topic_t)t));
    for (int i = 0; i < NF_INPUT__COUNT; i++)
        topic_full_name(k->in_names[i], sizeof k->in_names[i], k->prefix, input_names[i]);

    char rerr[256];
    int tr = 0;
    if (!(k->prod = producer_new(k, err, errlen)) || (tr = load_topics(k, err, errlen)) != 0 ||
        init_transactions(k, err, errlen) != 0) {
        nf_kafka_free(k);
        errno = tr == -ENOENT ? ENOENT : EIO;
        return NULL;
    }
    if (o->consume) {
        k->nshards = o->shards ? o->shards : 1;
        k->sq = calloc(k->nshards, sizeof *k->sq);
        rd_kafka_conf_t *cc = base_conf(k, err, errlen);
        if (!k->sq || !cc)
            goto fail;
        if (conf_set(cc, "group.id", k->group, err, errlen) != 0 ||
            conf_set(cc, "enable.auto.commit", "false", err, errlen) != 0 ||
            conf_set(cc, "enable.auto.offset.store", "false", err, errlen) != 0 ||
            conf_set(cc, "isolation.level", "read_committed", err, errlen) != 0 ||
            conf_set(cc, "auto.offset.reset", "earliest", err, errlen) != 0 ||
            conf_set(cc, "partition.assignment.strategy", "cooperative-sticky", err, errlen) != 0 ||
            (o->group_instance_id && !o->assign_all &&
             conf_set(cc, "group.instance.id", o->group_instance_id, err, errlen) != 0) ||
            (o->client_id && conf_set(cc, "client.id", o->client_id, err, errlen) != 0) ||
            /* a rebalance callback restores the changelog of gained partitions: give it time
             * (librdkafka evicts a member that polls less often than this) */
            (o->changelog && !(k->props && strstr(k->props, "max.poll.interval.ms")) &&
             conf_set(cc, "max.poll.interval.ms", "1800000", err, errlen) != 0)) {
            rd_kafka_conf_destroy(cc);
            goto fail;
        }
        rd_kafka_conf_set_rebalance_cb(cc, rebalance_cb);
        if (!(k->props && strstr(k->props, "statistics.interval.ms"))) {
            rd_kafka_conf_set_stats_cb(cc, stats_cb);
            if (conf_set(cc, "statistics.interval.ms", NF_KAFKA_STATS_MS, err, errlen) != 0) {
                rd_kafka_conf_destroy(cc);
                goto fail;
            }
        }
        k->cons = rd_kafka_new(RD_KAFKA_CONSUMER, cc, rerr, sizeof rerr);
        if (!k->cons) {
            snprintf(err, errlen, "kafka: cannot create the consumer: %s", rerr);
            goto fail;
        }
        rd_kafka_poll_set_consumer(k->cons);
        for (unsigned s = 0; s < k->nshards; s++) {
            int fds[2];
            if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) {
                snprintf(err, errlen, "kafka: pipe: %s", strerror(errno));
                goto fail;
            }
            k->sq[s].rfd = fds[0];
            k->sq[s].wfd = fds[1];
            k->sq[s].q = rd_kafka_queue_new(k->cons);
            k->sq[s].assigned = rd_kafka_topic_partition_list_new(8);
            rd_kafka_queue_io_event_enable(k->sq[s].q, fds[1], "1", 1);
        }
    }
    return k;
fail:
    nf_kafka_free(k);
    errno = EIO;
    return NULL;
}

int nf_kafka_subscribe(nf_kafka_t *k, char *err, size_t errlen)
{
    if (!k->cons)
        return 0;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(NF_INPUT__COUNT);
    rd_kafka_resp_err_t e;
    if (k->o.assign_all) {
        /* Every partition of the inputs, no group membership: a restarted process resumes at
         * once instead of waiting out its killed predecessor's session. */
        pthread_mutex_lock(&k->lock);
        for (int i = 0; i < NF_INPUT__COUNT; i++)
            for (int p = 0; p < k->in_npart[i]; p++)
                take_partition(k, rd_kafka_topic_partition_list_add(l, k->in_names[i], p));
        pthread_mutex_unlock(&k->lock);
        e = rd_kafka_assign(k->cons, l);
        atomic_fetch_add(&k->assigned, (uint64_t)l->cnt);
    } else {
        for (int i = 0; i < NF_INPUT__COUNT; i++)
            if (topic_used(k, NF_TOPIC__COUNT + i))
                rd_kafka_topic_partition_list_add(l, k->in_names[i], RD_KAFKA_PARTITION_UA);
        e = rd_kafka_subscribe(k->cons, l);
    }
    rd_kafka_topic_partition_list_destroy(l);
    if (e) {
        snprintf(err, errlen, "kafka: %s: %s", k->o.assign_all ? "assign" : "subscribe",
                 rd_kafka_err2str(e));
        return -EIO;
    }
    return 0;
}

void nf_kafka_update_lag(nf_kafka_t *k)
{
    if (!k->cons || k->closing)
        return;
    bool(*seen)[NF_EPOCH_MAX_PARTITIONS] = k->lag_seen; /* coordinator thread only */
    memset(k->lag_seen, 0, sizeof k->lag_seen);
    pthread_mutex_lock(&k->lock);
    for (unsigned s = 0; s < k->nshards; s++) {
        const rd_kafka_topic_partition_list_t *l = k->sq[s].assigned;
        for (int i = 0; i < l->cnt; i++) {
            const char *topic = l->elems[i].topic;
            int32_t part = l->elems[i].partition;
            int in = nf_kafka_input_of(k, topic);
            if (in < 0 || part < 0 || part >= NF_EPOCH_MAX_PARTITIONS)
                continue;
            seen[in][part] = true;
            int64_t low = -1, high = -1;
            /* Cached from the last fetch response: never blocks. Unknown until the first one. */
            if (rd_kafka_get_watermark_offsets(k->cons, topic, part, &low, &high) !=
                    RD_KAFKA_RESP_ERR_NO_ERROR ||
                high < 0)
                continue;
            int64_t pos = k->o.position ? k->o.position(k->o.arg, (nf_input_t)in, part) : -1;
            if (pos < 0) /* never committed: everything from the earliest offset is behind */
                pos = low >= 0 ? low : 0;
            int64_t lag = high > pos ? high - pos : 0;
            atomic_store(&k->lag[in][part], lag);
            if (!k->m_lag_reg[in][part]) {
                char esc[300], labels[400];
                nf_metrics_label_escape(esc, sizeof esc, topic);
                snprintf(labels, sizeof labels, "topic=\"%s\",partition=\"%d\"", esc, (int)part);
                nf_metrics_gauge("newsflow_kafka_consumer_lag",
                                 "Records of an input partition after the job's committed "
                                 "position (high watermark minus committed offset), per "
                                 "partition this process owns; 0 once it is revoked.",
                                 labels, 0, &k->m_lag[in][part]);
                k->m_lag_reg[in][part] = true;
            }
            nf_gauge_set(k->m_lag[in][part], lag);
        }
    }
    pthread_mutex_unlock(&k->lock);
    for (int in = 0; in < NF_INPUT__COUNT; in++)
        for (int p = 0; p < NF_EPOCH_MAX_PARTITIONS; p++)
            if (!seen[in][p] && atomic_load(&k->lag[in][p]) >= 0) {
                atomic_store(&k->lag[in][p], -1);
                nf_gauge_set(k->m_lag[in][p], 0);
            }
}

int64_t nf_kafka_lag(const nf_kafka_t *k, nf_input_t in, int32_t partition)
{
    if (!k || (unsigned)in >= NF_INPUT__COUNT || partition < 0 ||
        partition >= NF_EPOCH_MAX_PARTITIONS)
        return -1;
    return atomic_load(&k->lag[in][partition]);
}

bool nf_kafka_assigned(nf_kafka_t *k, nf_input_t in, int32_t partition)
{
    if (!k || !k->cons || (unsigned)in >= NF_INPUT__COUNT || partition < 0)
        return false;
    bool found = false;
    pthread_mutex_lock(&k->lock);
    const rd_kafka_topic_partition_list_t *l = k->sq[(unsigned)partition % k->nshards].assigned;
    for (int i = 0; l && i < l->cnt && !found; i++)
        found = l->elems[i].partition == partition && !strcmp(l->elems[i].topic, k->in_names[in]);
    pthread_mutex_unlock(&k->lock);
    return found;
}

int nf_kafka_input_partitions(const nf_kafka_t *k, nf_input_t in)
{
    return k && (unsigned)in < NF_INPUT__COUNT ? k->in_npart[in] : 0;
}

void nf_kafka_close_consumer(nf_kafka_t *k)
{
    if (!k->cons || k->closing)
        return;
    k->closing = true;
    /* Undo what assignment did before leaving: resume paused partitions and stop forwarding
     * their queues to the shard queues. librdkafka 2.0.2 otherwise keeps references that make
     * rd_kafka_destroy() wait forever after partitions were paused and resumed. */
    pthread_mutex_lock(&k->lock);
    for (unsigned s = 0; s < k->nshards; s++) {
        rd_kafka_topic_partition_list_t *l = k->sq[s].assigned;
        if (k->sq[s].paused && l->cnt)
            rd_kafka_resume_partitions(k->cons, l);
        k->sq[s].paused = false;
        for (int i = 0; i < l->cnt; i++) {
            rd_kafka_queue_t *pq =
                rd_kafka_queue_get_partition(k->cons, l->elems[i].topic, l->elems[i].partition);
            if (pq) {
                rd_kafka_queue_forward(pq, NULL);
                rd_kafka_queue_destroy(pq);
            }
        }
    }
    pthread_mutex_unlock(&k->lock);
    rd_kafka_consumer_close(k->cons);
}

/* How long nf_kafka_free waits for the consumer's client to end after it left the group. */
#define NF_KAFKA_DESTROY_MS 5000

typedef struct destroyer {
    rd_kafka_t *rk;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
} destroyer_t;

static void *destroy_thread(void *arg)
{
    destroyer_t *d = arg;
    rd_kafka_destroy(d->rk);
    pthread_mutex_lock(&d->mu);
    d->done = true;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

/* rd_kafka_destroy(rk) within ms, or false: the client is then left to the process's exit (its
 * threads, and the callbacks' opaque, must stay valid). librdkafka 2.0 can keep a reference on
 * a broker after partitions were paused and resumed, and then waits for it forever (seen: the
 * consumer's broker thread never ends after a stop under backpressure, tests/recovery/
 * test_backpressure.sh beside a CPU hog). A consumer that left the group holds nothing the job
 * needs: its positions were committed by the producer's transactions. */
static bool destroy_bounded(rd_kafka_t *rk, unsigned ms)
{
    destroyer_t *d = calloc(1, sizeof *d);
    pthread_t t;
    pthread_condattr_t ca;
    if (!d || pthread_condattr_init(&ca) != 0) {
        free(d);
        rd_kafka_destroy(rk);
        return true;
    }
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&d->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&d->mu, NULL);
    d->rk = rk;
    if (pthread_create(&t, NULL, destroy_thread, d) != 0) {
        rd_kafka_destroy(rk);
        d->done = true;
    } else {
        struct timespec until = nf_deadline_after(CLOCK_MONOTONIC, ms);
        pthread_mutex_lock(&d->mu);
        while (!d->done && pthread_cond_timedwait(&d->cv, &d->mu, &until) != ETIMEDOUT)
            ;
        bool done = d->done;
        pthread_mutex_unlock(&d->mu);
        if (!done) {
            pthread_detach(t); /* d stays with it */
            return false;
        }
        pthread_join(t, NULL);
    }
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    free(d);
    return true;
}

/* Whether rd_kafka_destroy of the consumer is safe. A consumer without a group (kafka.assignment
 * "all") always is. librdkafka before 2.3.0 asserts (SIGABRT)
 * when a cooperative-sticky consumer that joined its group is destroyed before its first
 * assignment: the assignor's state is still NULL and its destroy callback asserts it is not
 * (librdkafka issue #4312, fixed in 2.3.0; seen: a SIGTERM while the group formed, tests/chaos).
 * Such a consumer holds nothing the job needs (no partition was ever taken): it is left to the
 * process's exit, like one whose destroy does not end (destroy_bounded). */
static bool destroy_safe(nf_kafka_t *k)
{
    return k->o.assign_all || atomic_load(&k->synced) || rd_kafka_version() >= 0x020300ff;
}

/* Clients left to the process's exit stay reachable (for LeakSanitizer, as for a debugger). */
static nf_kafka_t *g_left_for_exit[8];

static void leave_for_exit(nf_kafka_t *k)
{
    for (size_t i = 0; i < sizeof g_left_for_exit / sizeof *g_left_for_exit; i++)
        if (!g_left_for_exit[i]) {
            g_left_for_exit[i] = k;
            return;
        }
}

void nf_kafka_free(nf_kafka_t *k)
{
    if (!k)
        return;
    bool cons_ended = true;
    if (k->adm)
        rd_kafka_destroy(k->adm);
    pthread_mutex_destroy(&k->adm_mu);
    if (k->cons) {
        nf_kafka_close_consumer(k);
        for (unsigned s = 0; s < k->nshards; s++) {
            if (!k->sq[s].q)
                continue;
            /* Messages still queued hold references on the handle: release them first. */
            rd_kafka_message_t *m[64];
            ssize_t n;
            while ((n = rd_kafka_consume_batch_queue(k->sq[s].q, 0, m, 64)) > 0)
                for (ssize_t i = 0; i < n; i++)
                    rd_kafka_message_destroy(m[i]);
            rd_kafka_queue_destroy(k->sq[s].q);
        }
        if (!destroy_safe(k)) {
            cons_ended = false;
            nf_log(NF_LOG_INFO, "kafka",
                   "the consumer left its group before its first assignment: its client is left "
                   "to the process's exit (librdkafka before 2.3.0 aborts when it is destroyed "
                   "then; nothing was taken, nothing is lost)",
                   NF_LS("librdkafka", rd_kafka_version_str()), NF_LEND);
        } else if (!(cons_ended = destroy_bounded(k->cons, NF_KAFKA_DESTROY_MS)))
            nf_log(NF_LOG_WARN, "kafka",
                   "the consumer's client did not end within 5 s of leaving the group (a "
                   "librdkafka 2.0 reference kept after paused partitions); not waiting for it: "
                   "nothing is lost (input positions are committed with the epochs)",
                   NF_LI("waited_ms", NF_KAFKA_DESTROY_MS), NF_LEND);
    }
    /* A client left running may still signal a shard queue's pipe: its fds stay open (closed,
     * their numbers could be reused by a file a stray byte would then land in). */
    for (unsigned s = 0; k->sq && s < k->nshards && cons_ended; s++) {
        if (k->sq[s].assigned)
            rd_kafka_topic_partition_list_destroy(k->sq[s].assigned);
        if (k->sq[s].rfd > 0)
            close(k->sq[s].rfd);
        if (k->sq[s].wfd > 0)
            close(k->sq[s].wfd);
    }
    if (k->prod) {
        rd_kafka_flush(k->prod, 5000);
        drop_topic_handles(k);
        rd_kafka_destroy(k->prod);
    }
    if (!cons_ended) {
        leave_for_exit(k); /* its threads may still call back with k: k stays till exit */
        return;
    }
    for (int t = 0; t < NF_TOPIC__COUNT; t++)
        free(k->out[t].pos);
    free(k->sq);
    free(k->props);
    pthread_mutex_destroy(&k->lock);
    pthread_mutex_destroy(&k->elock);
    free(k);
}

const char *nf_kafka_output_topic(const nf_kafka_t *k, nf_topic_t t)
{
    return k->out[t].name;
}

const char *nf_kafka_input_topic(const nf_kafka_t *k, nf_input_t in)
{
    return k->in_names[in];
}

/* A client of its own, made on first use, for describing the group and for high watermarks:
 * the consumer's handle is left to the group protocol, and the producer's is replaced after a
 * fatal error. Its isolation.level is read_uncommitted, so that a watermark query answers the
 * high watermark: librdkafka's default (read_committed) sends ListOffsets for the last stable
 * offset, which stops before a transaction still open. NULL with err on failure. */
static rd_kafka_t *adm_client(nf_kafka_t *k, char *err, size_t errlen)
{
    pthread_mutex_lock(&k->adm_mu);
    if (!k->adm) {
        char rerr[256];
        rd_kafka_conf_t *c = conf_new(k->brokers, k->props, NULL, err, errlen);
        if (c && conf_set(c, "isolation.level", "read_uncommitted", err, errlen) != 0) {
            rd_kafka_conf_destroy(c);
            c = NULL;
        }
        /* a consumer without group.id: no group protocol, and isolation.level is its own */
        if (c && !(k->adm = rd_kafka_new(RD_KAFKA_CONSUMER, c, rerr, sizeof rerr)))
            snprintf(err, errlen, "kafka: cannot create the admin client: %s", rerr);
    }
    rd_kafka_t *rk = k->adm;
    pthread_mutex_unlock(&k->adm_mu);
    return rk;
}

int nf_kafka_members(nf_kafka_t *k, int timeout_ms,
                     void (*cb)(void *arg, const char *client_id, nf_input_t in, int32_t partition),
                     void *arg, char *err, size_t errlen)
{
    if (!k->cons) {
        snprintf(err, errlen, "kafka: no consumer group");
        return -ENOTCONN;
    }
    rd_kafka_t *rk = adm_client(k, err, errlen);
    if (!rk)
        return -EIO;
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *opt =
        rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS);
    char rerr[256];
    if (!q || !opt ||
        rd_kafka_AdminOptions_set_request_timeout(opt, timeout_ms, rerr, sizeof rerr) != 0) {
        snprintf(err, errlen, "kafka: describing the group: out of memory");
        if (opt)
            rd_kafka_AdminOptions_destroy(opt);
        if (q)
            rd_kafka_queue_destroy(q);
        return -ENOMEM;
    }
    const char *groups[] = {k->group};
    rd_kafka_DescribeConsumerGroups(rk, groups, 1, opt, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, timeout_ms + 1000);
    int r = 0;
    const rd_kafka_DescribeConsumerGroups_result_t *res =
        ev ? rd_kafka_event_DescribeConsumerGroups_result(ev) : NULL;
    size_t ng = 0;
    const rd_kafka_ConsumerGroupDescription_t **gs =
        res ? rd_kafka_DescribeConsumerGroups_result_groups(res, &ng) : NULL;
    const rd_kafka_error_t *ge = ng == 1 ? rd_kafka_ConsumerGroupDescription_error(gs[0]) : NULL;
    if (!ev) {
        snprintf(err, errlen, "kafka: describing group %s timed out after %d ms", k->group,
                 timeout_ms);
        r = -ETIMEDOUT;
    } else if (rd_kafka_event_error(ev) || ng != 1 || ge) {
        snprintf(err, errlen, "kafka: describing group %s: %s", k->group,
                 ge                         ? rd_kafka_error_string(ge)
                 : rd_kafka_event_error(ev) ? rd_kafka_event_error_string(ev)
                                            : "no description");
        rd_kafka_resp_err_t code = ge ? rd_kafka_error_code(ge) : rd_kafka_event_error(ev);
        r = code == RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE ||
                    code == RD_KAFKA_RESP_ERR_UNSUPPORTED_VERSION
                ? -EOPNOTSUPP
                : -EIO;
    }
    for (size_t m = 0; r == 0 && m < rd_kafka_ConsumerGroupDescription_member_count(gs[0]); m++) {
        const rd_kafka_MemberDescription_t *md = rd_kafka_ConsumerGroupDescription_member(gs[0], m);
        const char *cid = rd_kafka_MemberDescription_client_id(md);
        const rd_kafka_MemberAssignment_t *ma = rd_kafka_MemberDescription_assignment(md);
        const rd_kafka_topic_partition_list_t *tp =
            ma ? rd_kafka_MemberAssignment_partitions(ma) : NULL;
        bool any = false;
        for (int i = 0; tp && i < tp->cnt; i++) {
            int in = nf_kafka_input_of(k, tp->elems[i].topic);
            if (in >= 0) {
                cb(arg, cid ? cid : "", (nf_input_t)in, tp->elems[i].partition);
                any = true;
            }
        }
        if (!any)
            cb(arg, cid ? cid : "", NF_INPUT_READ_EVENTS, -1);
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(opt);
    rd_kafka_queue_destroy(q);
    return r;
}

void nf_kafka_poll(nf_kafka_t *k, int timeout_ms)
{
    note_alive(k);
    rd_kafka_poll(k->prod, 0);
    if (k->cons && !k->closing) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(k->cons, timeout_ms);
        if (m) {
            /* Partition queues are forwarded to shards before assignment; what arrives here is
             * an error event, or a record of a partition not taken (assign_untaken): dropped,
             * its next owner reads it. */
            if (m->err && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                nf_log(NF_LOG_WARN, "kafka", "consumer error",
                       NF_LS("error", rd_kafka_message_errstr(m)), NF_LEND);
            rd_kafka_message_destroy(m);
        }
    } else if (timeout_ms > 0) {
        rd_kafka_poll(k->prod, timeout_ms);
    }
}

void nf_kafka_positions_json(nf_kafka_t *k, nf_jw_t *w)
{
    nf_jw_obj_open(w);
    for (int t = 0; t < NF_TOPIC__COUNT; t++) {
        nf_jw_key(w, k->out[t].name);
        nf_jw_arr_open(w);
        for (int p = 0; p < k->out[t].npart; p++) {
            nf_jw_elem(w);
            nf_jw_i64(w, k->out[t].pos[p]);
        }
        nf_jw_arr_close(w);
    }
    nf_jw_obj_close(w);
}

/* ---------------------------------------------------------------- producing an epoch */

static void fault(nf_kafka_t *k, const char *point)
{
    if (k->o.fault)
        k->o.fault(point);
}

/* The headers every record of an epoch shares, formatted once (produce_one adds nf-seq). */
typedef struct epoch_tag {
    char epoch[24], nonce[24];
    int elen, nlen;
} epoch_tag_t;

static void epoch_tag(epoch_tag_t *t, uint64_t epoch, uint64_t nonce)
{
    t->elen = snprintf(t->epoch, sizeof t->epoch, "%" PRIu64, epoch);
    t->nlen = snprintf(t->nonce, sizeof t->nonce, "%" PRIu64, nonce);
}

/* The producer's handle of output topic t: producev by name looks the topic up under a lock at
 * every record. */
static rd_kafka_topic_t *topic_handle(nf_kafka_t *k, nf_topic_t t)
{
    if (!k->out[t].rkt)
        k->out[t].rkt = rd_kafka_topic_new(k->prod, k->out[t].name, NULL);
    return k->out[t].rkt;
}

static int produce_one(nf_kafka_t *k, const nf_outrec_t *r, const epoch_tag_t *tag, uint64_t seq,
                       char *err, size_t errlen)
{
    char sbuf[24]; /* nf-seq: snprintf cost more than the rest of a record's headers */
    size_t at = nf_u64_digits(seq, sbuf);
    const char *sv = sbuf + at;
    ssize_t sl = (ssize_t)(24 - at);
    rd_kafka_topic_t *rkt = topic_handle(k, r->topic);
    if (!rkt) {
        snprintf(err, errlen, "kafka: no handle for topic %s: %s", k->out[r->topic].name,
                 rd_kafka_err2str(rd_kafka_last_error()));
        return -EIO;
    }
    /* A changelog record goes to the partition of its key group (its first two key bytes,
     * state/changelog.h); outputs to the partitioner's choice by key. */
    int32_t part = RD_KAFKA_PARTITION_UA;
    if (r->topic == NF_TOPIC_TRENDING_PANES)
        part = 0; /* one merger: the owner of partition 0 (a topic made with more has idle ones) */
    if (nf_topic_is_changelog(r->topic)) {
        if (r->klen < 2 || k->out[r->topic].npart <= 0) {
            snprintf(err, errlen, "kafka: changelog record for %s without a key group",
                     k->out[r->topic].name);
            return -EINVAL;
        }
        const unsigned char *kg = (const unsigned char *)r->key;
        part = (int32_t)((unsigned)(kg[0] << 8 | kg[1]) % (unsigned)k->out[r->topic].npart);
    }
    for (;;) {
        rd_kafka_headers_t *h = rd_kafka_headers_new(4);
        rd_kafka_header_add(h, "nf-writer", -1, k->txid, (ssize_t)strlen(k->txid));
        rd_kafka_header_add(h, "nf-epoch", -1, tag->epoch, tag->elen);
        rd_kafka_header_add(h, "nf-nonce", -1, tag->nonce, tag->nlen);
        rd_kafka_header_add(h, "nf-seq", -1, sv, sl);
        rd_kafka_resp_err_t e = rd_kafka_producev(
            k->prod, RD_KAFKA_V_RKT(rkt), RD_KAFKA_V_PARTITION(part),
            RD_KAFKA_V_KEY(r->key, r->klen),
            RD_KAFKA_V_VALUE(r->tombstone ? NULL : (void *)r->value, r->tombstone ? 0 : r->vlen),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(h),
            RD_KAFKA_V_OPAQUE((void *)(uintptr_t)r->topic), RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
            return 0;
        rd_kafka_headers_destroy(h);
        if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            snprintf(err, errlen, "kafka: produce to %s: %s", k->out[r->topic].name,
                     rd_kafka_err2str(e));
            return -EIO;
        }
        if (nf_kafka_past_deadline(k))
            return deadline_error("kafka: produce (local queue full)", err, errlen);
        rd_kafka_poll(k->prod, 50); /* local queue full: wait for deliveries */
    }
}

/* The group metadata sent with a transaction's offsets (KIP-447: the coordinator refuses them
 * from a member fenced by a newer generation). A consumer that has not joined the group yet (the
 * roll-forward of a pending epoch at start) has no member id; with a group.instance.id the
 * coordinator would take it for a fenced static member until the join completes, which it cannot
 * while we wait here. Such a commit, before this process was ever assigned anything, goes
 * without member, generation or instance id, as one from a process without a consumer does (the
 * producer's transactional id fences an older run of this process). Once it has been assigned
 * partitions, a member that lost its id (evicted, rejoining) sends the consumer's own metadata,
 * so that the coordinator refuses its offsets for partitions that moved. */
static rd_kafka_consumer_group_metadata_t *txn_group_metadata(nf_kafka_t *k)
{
    if (!k->cons)
        return rd_kafka_consumer_group_metadata_new(k->group);
    char *member = rd_kafka_memberid(k->cons);
    bool joined = member && *member;
    if (member)
        rd_kafka_mem_free(k->cons, member);
    return joined || atomic_load(&k->assigned) > 0 ? rd_kafka_consumer_group_metadata(k->cons)
                                                   : rd_kafka_consumer_group_metadata_new(k->group);
}

/* Whether the group has moved on without this member: its session expired (the process was
 * stopped, starved or cut off from the coordinator longer than session.timeout.ms), so its
 * member id is unknown and its partitions belong to others. No retry can commit for them.
 * ILLEGAL_GENERATION is not that: a commit that meets a rebalance in progress gets it until
 * librdkafka has joined the new generation, and the epoch's retry then commits. */
static bool member_gone(nf_kafka_t *k, rd_kafka_resp_err_t c)
{
    return c == RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID || c == RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID ||
           (k->cons && rd_kafka_assignment_lost(k->cons));
}

bool nf_kafka_member_lost(nf_kafka_t *k)
{
    if (!k || !k->cons || k->o.assign_all)
        return false;
    if (rd_kafka_assignment_lost(k->cons) == 1)
        return true;
    /* A process that did not run for a while (SIGSTOP, starvation) learns that its session
     * expired only once librdkafka has looked again: until the coordinator thread has run
     * unbroken for two stall lengths, take the membership as lapsed. */
    uint64_t now = nf_now_ns(), alive = atomic_load(&k->alive_ns),
             since = atomic_load(&k->alive_since_ns);
    return !alive || now - alive > NF_KAFKA_STALL_NS || now - since < 2 * NF_KAFKA_STALL_NS;
}

static int member_gone_error(const char *why, char *err, size_t errlen)
{
    snprintf(err, errlen,
             "kafka: this process is no longer a member of its consumer group (%s): its session "
             "expired (stopped, starved or cut off from the brokers longer than "
             "session.timeout.ms) and its partitions went to other processes, which read what "
             "it took since its last epoch again",
             why);
    return -EOWNERDEAD;
}

static int send_offsets(nf_kafka_t *k, uint64_t epoch, uint64_t nonce,
                        const nf_kafka_offset_t *offsets, size_t n, char *err, size_t errlen)
{
    if (!n)
        return 0;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)n);
    char md[64 + sizeof k->txid];
    int mdl = snprintf(md, sizeof md, "epoch=%" PRIu64 ";nonce=%" PRIu64 ";writer=%s", epoch, nonce,
                       k->txid);
    for (size_t i = 0; i < n; i++) {
        rd_kafka_topic_partition_t *tp = rd_kafka_topic_partition_list_add(
            l, k->in_names[offsets[i].input], offsets[i].partition);
        tp->offset = offsets[i].next;
        tp->metadata = malloc((size_t)mdl);
        if (tp->metadata) {
            memcpy(tp->metadata, md, (size_t)mdl);
            tp->metadata_size = (size_t)mdl;
        }
    }
    int r = 0;
    if (k->o.exactly_once) {
        rd_kafka_consumer_group_metadata_t *g = txn_group_metadata(k);
        uint64_t end = nf_now_ns() + NF_KAFKA_TIMEOUT_MS * 1000000ull;
        rd_kafka_error_t *e;
        while ((e = rd_kafka_send_offsets_to_transaction(k->prod, l, g, slice(k, end))) &&
               rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR__TIMED_OUT && nf_now_ns() < end &&
               !nf_kafka_past_deadline(k) && !member_gone(k, RD_KAFKA_RESP_ERR_NO_ERROR))
            rd_kafka_error_destroy(e);
        rd_kafka_consumer_group_metadata_destroy(g);
        if (e && member_gone(k, rd_kafka_error_code(e))) {
            r = member_gone_error(rd_kafka_error_string(e), err, errlen);
            rd_kafka_error_destroy(e);
        } else if (e) {
            r = err_from(k, e, "kafka: send_offsets_to_transaction", err, errlen);
        }
    } else if (k->cons) {
        /* At-least-once: positions live in the job's state; the group's offsets are for
         * monitoring (consumer lag) only. */
        rd_kafka_resp_err_t e = rd_kafka_commit(k->cons, l, 0);
        if (e)
            nf_log(NF_LOG_WARN, "kafka", "offset commit failed (monitoring only)",
                   NF_LS("error", rd_kafka_err2str(e)), NF_LEND);
    }
    rd_kafka_topic_partition_list_destroy(l);
    return r;
}

int nf_kafka_produce_epoch(nf_kafka_t *k, uint64_t epoch, uint64_t nonce, const nf_blob_t *bufs,
                           unsigned nbufs, const uint8_t *present, const nf_kafka_offset_t *offsets,
                           size_t noffsets, char *err, size_t errlen)
{
    rd_kafka_error_t *e;
    if (nf_kafka_past_deadline(k))
        return deadline_error("kafka: epoch transaction not begun", err, errlen);
    if (k->o.exactly_once && (e = rd_kafka_begin_transaction(k->prod)) != NULL)
        return err_from(k, e, "kafka: begin_transaction", err, errlen);
    uint64_t dr_before = k->dr_errors, seq = 0, total = 0, produced = 0;
    for (unsigned b = 0; b < nbufs; b++) {
        size_t pos = 0;
        nf_outrec_t r;
        while (nf_outbuf_next(bufs[b].data, bufs[b].len, &pos, &r) == 1)
            total++;
    }
    int rc = 0;
    epoch_tag_t tag;
    epoch_tag(&tag, epoch, nonce);
    for (unsigned b = 0; b < nbufs && rc == 0; b++) {
        size_t pos = 0;
        nf_outrec_t r;
        int nr;
        while (rc == 0 && (nr = nf_outbuf_next(bufs[b].data, bufs[b].len, &pos, &r)) == 1) {
            if (!present || !(present[seq >> 3] & (1u << (seq & 7)))) {
                rc = produce_one(k, &r, &tag, seq, err, errlen);
                if (++produced == total / 2 + 1)
                    fault(k, "mid_produce");
            }
            seq++;
        }
        if (rc == 0 && nr < 0) {
            snprintf(err, errlen, "epoch %" PRIu64 ": output buffer %u is malformed", epoch, b);
            rc = -EINVAL;
        }
    }
    if (rc == 0) {
        uint64_t end = nf_now_ns() + 2 * NF_KAFKA_TIMEOUT_MS * 1000000ull;
        rd_kafka_resp_err_t fe;
        while ((fe = rd_kafka_flush(k->prod, slice(k, end))) == RD_KAFKA_RESP_ERR__TIMED_OUT &&
               nf_now_ns() < end && !nf_kafka_past_deadline(k))
            ;
        if (fe) {
            snprintf(err, errlen, "kafka: flush: %s", rd_kafka_err2str(fe));
            rc = -ETIMEDOUT;
        } else if (k->dr_errors != dr_before) {
            snprintf(err, errlen, "kafka: %" PRIu64 " records not delivered; last: %s",
                     k->dr_errors - dr_before, k->dr_last_error);
            rc = -EIO;
        }
    }
    if (rc == 0)
        rc = send_offsets(k, epoch, nonce, offsets, noffsets, err, errlen);
    if (rc == 0 && k->o.exactly_once) {
        fault(k, "before_commit");
        if (noffsets > 0) /* an epoch that carries input positions: partitions are owned */
            fault(k, "before_commit_input");
        uint64_t end = nf_now_ns() + 2 * NF_KAFKA_TIMEOUT_MS * 1000000ull;
        for (;;) {
            e = rd_kafka_commit_transaction(k->prod, slice(k, end));
            if (!e)
                break;
            if (rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR__TIMED_OUT && nf_now_ns() < end &&
                !nf_kafka_past_deadline(k)) { /* a slice ran out: call again, quietly */
                rd_kafka_error_destroy(e);
                continue;
            }
            if (nf_kafka_past_deadline(k)) { /* not retried: see the deadline case below */
                snprintf(err, errlen, "kafka: commit_transaction: %s", rd_kafka_error_string(e));
                rd_kafka_error_destroy(e);
                rc = -ETIMEDOUT;
                break;
            }
            if (rd_kafka_error_is_retriable(e) && !rd_kafka_error_txn_requires_abort(e)) {
                nf_counter_inc(k->m_commit_retries);
                nf_log(NF_LOG_WARN, "kafka", "commit_transaction: retrying",
                       NF_LS("error", rd_kafka_error_string(e)), NF_LEND);
                rd_kafka_error_destroy(e);
                end = nf_now_ns() + 2 * NF_KAFKA_TIMEOUT_MS * 1000000ull;
                continue;
            }
            rc = err_from(k, e, "kafka: commit_transaction", err, errlen);
            break;
        }
    }
    if (rc != 0 && rc != -EPIPE && rc != -ESTALE && rc != -EOWNERDEAD) {
        /* A failed produce or flush may stem from a fatal error (a fenced producer's deliveries
         * fail first): name that, not the symptom. */
        int f = fatal_state(k, err, errlen);
        rc = f ? f : rc;
    }
    bool out_of_time = rc != 0 && rc != -ESTALE && nf_kafka_past_deadline(k);
    if (out_of_time) {
        /* Out of time: no abort either (it would wait for the broker too); the next
         * incarnation's init_transactions completes or aborts the transaction. */
        char first[256];
        snprintf(first, sizeof first, "%s", err);
        rc = deadline_error(first, err, errlen);
    }
    if (rc != 0 && rc != -EPIPE && rc != -ESTALE && !out_of_time && k->o.exactly_once) {
        uint64_t end = nf_now_ns() + 2 * NF_KAFKA_TIMEOUT_MS * 1000000ull;
        while ((e = rd_kafka_abort_transaction(k->prod, slice(k, end))) &&
               rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR__TIMED_OUT && nf_now_ns() < end &&
               !nf_kafka_past_deadline(k))
            rd_kafka_error_destroy(e);
        atomic_fetch_add(&k->aborts, 1);
        nf_counter_inc(k->m_aborted);
        if (e) {
            char more[256];
            snprintf(more, sizeof more, "%s", err);
            rc = err_from(k, e, "kafka: abort_transaction", err, errlen);
            nf_log(NF_LOG_ERROR, "kafka", "abort after failed commit also failed",
                   NF_LS("first_error", more), NF_LS("error", err), NF_LEND);
            if (rc != -ESTALE)
                rc = -EPIPE;
        }
    }
    if (rc == 0) {
        atomic_fetch_add(&k->produced, produced);
        atomic_fetch_add(&k->transactions, 1);
        nf_counter_inc(k->m_committed);
    }
    return rc;
}

/* ---------------------------------------------------------------- recovery decision */

/* The epoch (and its nonce) a partition's committed offset metadata names for this writer; -1
 * when there is no offset, no metadata, or another writer's. */
static int64_t metadata_epoch(const nf_kafka_t *k, const rd_kafka_topic_partition_t *tp,
                              uint64_t *nonce)
{
    char buf[64 + sizeof k->txid];
    if (tp->err || tp->offset < 0 || !tp->metadata || !tp->metadata_size ||
        tp->metadata_size >= sizeof buf)
        return -1;
    memcpy(buf, tp->metadata, tp->metadata_size);
    buf[tp->metadata_size] = 0;
    unsigned long long e, n;
    int used = 0;
    if (sscanf(buf, "epoch=%llu;nonce=%llu;writer=%n", &e, &n, &used) != 2 || used == 0 ||
        strcmp(buf + used, k->txid) != 0)
        return -1;
    *nonce = n;
    return (int64_t)e;
}

/* Whether an answer about the group's committed offsets is one a moment can cure: the group's
 * coordinator moving or loading (a broker restarting, a busy cluster), a transaction still
 * deciding the offsets, a connection or a request lost. */
static bool committed_retriable(rd_kafka_resp_err_t e)
{
    switch (e) {
    case RD_KAFKA_RESP_ERR_NOT_COORDINATOR:
    case RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS:
    case RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_UNSTABLE_OFFSET_COMMIT:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__WAIT_COORD:
        return true;
    default:
        return false;
    }
}

/* rd_kafka_committed over l, retried (100 ms, doubling to 1 s) while its answer, or one
 * partition's, is retriable, for at most NF_KAFKA_TIMEOUT_MS in all and never past the shutdown
 * deadline. The call's error, else the first partition's retriable one, else 0. */
static rd_kafka_resp_err_t committed(nf_kafka_t *k, rd_kafka_topic_partition_list_t *l)
{
    if (k->fail_committed[0] && access(k->fail_committed, F_OK) == 0)
        return RD_KAFKA_RESP_ERR__TIMED_OUT;
    uint64_t until = nf_now_ns() + (uint64_t)NF_KAFKA_TIMEOUT_MS * 1000000ull;
    unsigned pause_ms = 100;
    for (;;) {
        uint64_t now = nf_now_ns();
        int left = now < until ? (int)((until - now) / 1000000ull) + 1 : 1;
        rd_kafka_resp_err_t e = rd_kafka_committed(k->cons, l, tmo(k, left));
        for (int i = 0; !e && i < l->cnt; i++)
            if (committed_retriable(l->elems[i].err))
                e = l->elems[i].err;
        if (!e || !committed_retriable(e) || nf_now_ns() + pause_ms * 1000000ull >= until ||
            nf_kafka_past_deadline(k))
            return e;
        nf_log(NF_LOG_INFO, "kafka", "the group's committed offsets: retrying",
               NF_LS("error", rd_kafka_err2str(e)), NF_LI("retry_ms", pause_ms), NF_LEND);
        struct timespec ts = {0, (long)pause_ms * 1000000L};
        nanosleep(&ts, NULL);
        pause_ms = pause_ms * 2 > 1000 ? 1000 : pause_ms * 2;
    }
}

nf_kafka_outcome_t nf_kafka_epoch_outcome(nf_kafka_t *k, uint64_t epoch, uint64_t nonce,
                                          const nf_kafka_offset_t *offsets, size_t n, char *why,
                                          size_t whylen)
{
    snprintf(why, whylen, "no input offsets in the epoch");
    if (!k->o.exactly_once || !k->cons || n == 0)
        return NF_KAFKA_UNKNOWN;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)n);
    for (size_t i = 0; i < n; i++)
        rd_kafka_topic_partition_list_add(l, k->in_names[offsets[i].input], offsets[i].partition);
    /* read_committed: the group coordinator answers with stable (transaction-decided) offsets. */
    rd_kafka_resp_err_t e = committed(k, l);
    nf_kafka_outcome_t out = NF_KAFKA_UNKNOWN;
    if (e) {
        snprintf(why, whylen, "committed offsets not readable: %s", rd_kafka_err2str(e));
    } else {
        int ours_now = 0, ours_before = 0, never = 0;
        for (int i = 0; i < l->cnt; i++) {
            uint64_t mn = 0;
            int64_t me = metadata_epoch(k, &l->elems[i], &mn);
            if (me == (int64_t)epoch && nonce && mn == nonce)
                ours_now++; /* this very transaction (not an older one of the same number) */
            else if (me >= 0 && me < (int64_t)epoch)
                ours_before++;
            else if (l->elems[i].offset == RD_KAFKA_OFFSET_INVALID && !l->elems[i].err)
                never++; /* the group holds no offset for it at all */
        }
        /* The group's offsets are committed atomically with the epoch's records: one partition
         * naming this writer's epoch means the transaction committed. Every partition still
         * naming an earlier epoch of this writer means it did not (init_transactions has
         * aborted it by now); so do the ones the group holds no offset for at all, beside at
         * least one such (a committed epoch would have given them its offset, and that one shows
         * the broker keeps transactional offsets: a partition the job took for the first time
         * in the pending epoch). Anything else (no metadata: a broker that keeps no
         * transactional offsets, like librdkafka's mock; another writer's) decides nothing. */
        if (ours_now > 0) {
            out = NF_KAFKA_COMMITTED;
            snprintf(why, whylen, "%d of %d input partitions committed at this epoch", ours_now,
                     l->cnt);
        } else if (ours_before == l->cnt) {
            out = NF_KAFKA_NOT_COMMITTED;
            snprintf(why, whylen, "all %d input partitions committed at an earlier epoch", l->cnt);
        } else if (ours_before > 0 && ours_before + never == l->cnt) {
            out = NF_KAFKA_NOT_COMMITTED;
            snprintf(why, whylen,
                     "%d of %d input partitions committed at an earlier epoch, the other %d "
                     "never (first taken in this epoch)",
                     ours_before, l->cnt, never);
        } else {
            snprintf(why, whylen,
                     "%d of %d input partitions carry no offset of this writer's earlier epochs",
                     l->cnt - ours_before, l->cnt);
        }
    }
    rd_kafka_topic_partition_list_destroy(l);
    return out;
}

/* ---------------------------------------------------------------- recovery scan */

static bool header_u64(rd_kafka_headers_t *h, const char *name, uint64_t *out)
{
    const void *v;
    size_t n;
    if (rd_kafka_header_get_last(h, name, &v, &n) != RD_KAFKA_RESP_ERR_NO_ERROR || n == 0 || n > 20)
        return false;
    char buf[24];
    memcpy(buf, v, n);
    buf[n] = 0;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(buf, &end, 10);
    if (errno || *end)
        return false;
    *out = x;
    return true;
}

/* How many partitions of l (each with its target offset in opaque) the consumer's position has
 * not reached yet; l->cnt when the positions are not known. The position moves past transaction
 * markers and aborted records, and waits at another writer's open transaction until it ends. */
static int scan_remaining(rd_kafka_t *rk, const rd_kafka_topic_partition_list_t *l)
{
    rd_kafka_topic_partition_list_t *c = rd_kafka_topic_partition_list_copy(l);
    int n = 0;
    if (rd_kafka_position(rk, c) != RD_KAFKA_RESP_ERR_NO_ERROR)
        n = c->cnt;
    else
        for (int j = 0; j < c->cnt; j++)
            if (c->elems[j].offset < (int64_t)(intptr_t)l->elems[j].opaque)
                n++;
    rd_kafka_topic_partition_list_destroy(c);
    return n;
}

long nf_kafka_scan_epoch(nf_kafka_t *k, uint64_t epoch, uint64_t nonce, const char *positions_json,
                         uint8_t *present, size_t nrecords, char *err, size_t errlen)
{
    cJSON *pj = positions_json ? cJSON_Parse(positions_json) : NULL;
    rd_kafka_conf_t *c = reader_conf(k, "scan", err, errlen);
    if (!c) {
        cJSON_Delete(pj);
        return -EINVAL;
    }
    char rerr[256];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, rerr, sizeof rerr);
    if (!rk) {
        snprintf(err, errlen, "kafka: recovery scan consumer: %s", rerr);
        cJSON_Delete(pj);
        return -EIO;
    }
    /* the high watermarks (adm_client): the last stable offset stops before another writer's
     * open transaction, and this epoch's records may lie after it */
    rd_kafka_t *ark = adm_client(k, err, errlen);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(16);
    long found = 0;
    int rc = ark ? 0 : -EIO;
    for (int t = 0; t < NF_TOPIC__COUNT && rc == 0; t++) {
        const cJSON *arr = pj ? cJSON_GetObjectItemCaseSensitive(pj, k->out[t].name) : NULL;
        for (int p = 0; p < k->out[t].npart; p++) {
            const cJSON *v = cJSON_IsArray(arr) ? cJSON_GetArrayItem(arr, p) : NULL;
            int64_t start = cJSON_IsNumber(v) && v->valuedouble >= 0 ? (int64_t)v->valuedouble : 0;
            int64_t lo = 0, hi = 0;
            rd_kafka_resp_err_t e =
                watermarks(k, ark, k->out[t].name, p, &lo, &hi, NF_KAFKA_TIMEOUT_MS);
            if (e) {
                snprintf(err, errlen, "kafka: recovery scan: end offset of %s [%d]: %s",
                         k->out[t].name, p, rd_kafka_err2str(e));
                rc = -EIO;
                break;
            }
            if (start < lo)
                start = lo;
            if (start >= hi)
                continue;
            rd_kafka_topic_partition_t *tp =
                rd_kafka_topic_partition_list_add(l, k->out[t].name, p);
            tp->offset = start;
            tp->opaque = (void *)(intptr_t)hi; /* the target */
        }
    }
    int remaining = l->cnt;
    if (rc == 0 && remaining > 0) {
        rd_kafka_assign(rk, l);
        uint64_t deadline = (uint64_t)time(NULL) + 120;
        uint64_t next_check = 0;
        while (remaining > 0) {
            if (nf_kafka_past_deadline(k)) {
                rc = deadline_error("kafka: recovery scan", err, errlen);
                break;
            }
            if ((uint64_t)time(NULL) > deadline) {
                snprintf(err, errlen,
                         "kafka: recovery scan of epoch %" PRIu64 " timed out with %d partitions "
                         "unread",
                         epoch, remaining);
                rc = -ETIMEDOUT;
                break;
            }
            rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
            if (nf_now_ns() >= next_check) { /* done where the position reached the target */
                next_check = nf_now_ns() + 50000000ull;
                remaining = scan_remaining(rk, l);
            }
            if (!m)
                continue;
            if (m->err) {
                nf_log(NF_LOG_WARN, "kafka", "recovery scan: consumer error",
                       NF_LS("error", rd_kafka_message_errstr(m)), NF_LEND);
            } else {
                rd_kafka_headers_t *h = NULL;
                const void *wv;
                size_t wn;
                uint64_t e = 0, s = 0, rn = 0;
                /* The nonce tells this epoch from an earlier one of the same number (after a
                 * restored checkpoint, or a state directory started afresh); records written
                 * before the nf-nonce header existed match on epoch and seq alone. */
                if (rd_kafka_message_headers(m, &h) == RD_KAFKA_RESP_ERR_NO_ERROR &&
                    rd_kafka_header_get_last(h, "nf-writer", &wv, &wn) == 0 &&
                    wn == strlen(k->txid) && !memcmp(wv, k->txid, wn) &&
                    header_u64(h, "nf-epoch", &e) && e == epoch &&
                    (!header_u64(h, "nf-nonce", &rn) || !nonce || rn == nonce) &&
                    header_u64(h, "nf-seq", &s) && s < nrecords &&
                    !(present[s >> 3] & (1u << (s & 7)))) {
                    present[s >> 3] |= (uint8_t)(1u << (s & 7));
                    found++;
                }
            }
            rd_kafka_message_destroy(m);
        }
    }
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    cJSON_Delete(pj);
    atomic_fetch_add(&k->scans, 1);
    return rc ? rc : found;
}

/* ---------------------------------------------------------------- reading a topic whole */

int nf_kafka_topic_partitions(const nf_kafka_t *k, nf_topic_t t)
{
    return k && (unsigned)t < NF_TOPIC__COUNT ? k->out[t].npart : 0;
}

/* The high watermarks of the first n partitions of the topic named name into hi: a reader
 * (read_committed) that reads up to them waits out a transaction still open there, rather than
 * stopping before it as at the last stable offset. A restore that stopped there missed the last
 * epoch of a process whose commit completed during the restore, while the group's offsets, read
 * after it, already counted that epoch's input (found by the chaos test, seed 162754619). */
static int ends_of(nf_kafka_t *k, const char *name, int64_t *hi, int n, char *err, size_t errlen)
{
    rd_kafka_t *rk = adm_client(k, err, errlen);
    if (!rk)
        return -EIO;
    for (int p = 0; p < n; p++) {
        int64_t lo = 0;
        rd_kafka_resp_err_t e = watermarks(k, rk, name, p, &lo, &hi[p], NF_KAFKA_TIMEOUT_MS);
        if (e) {
            snprintf(err, errlen, "kafka: end offset of %s [%d]: %s", name, p, rd_kafka_err2str(e));
            return -EIO;
        }
    }
    return 0;
}

int nf_kafka_topic_ends(nf_kafka_t *k, nf_topic_t t, int64_t *hi, int n, char *err, size_t errlen)
{
    return ends_of(k, k->out[t].name, hi, n, err, errlen);
}

/* nf_kafka_read_topics over topics named names[0..ntopics). */
static int read_named(nf_kafka_t *k, const char *const *names, int ntopics, const int *nparts,
                      int stride, const int64_t *from, int64_t *end, nf_kafka_record_fn rec,
                      void *arg, char *err, size_t errlen)
{
    rd_kafka_conf_t *c = reader_conf(k, "restore", err, errlen);
    if (!c)
        return -EINVAL;
    if (conf_set(c, "enable.partition.eof", "true", err, errlen) != 0 ||
        conf_set(c, "fetch.max.bytes", "52428800", err, errlen) != 0 ||
        conf_set(c, "max.partition.fetch.bytes", "16777216", err, errlen) != 0 ||
        conf_set(c, "queued.max.messages.kbytes", "262144", err, errlen) != 0 ||
        /* a recorded offset below the log start (compacted away) reads from the start */
        conf_set(c, "auto.offset.reset", "earliest", err, errlen) != 0 ||
        /* Bounded by the kbytes above instead: at the default (100,000) one 16 MB fetch of small
         * records crosses it, and librdkafka 2.0 then leaves the partition unfetched for up to a
         * second (a 1M-record restore sat idle more than half the time, perf/README.md). */
        conf_set(c, "queued.min.messages", "10000000", err, errlen) != 0) {
        rd_kafka_conf_destroy(c);
        return -EINVAL;
    }
    char rerr[256];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, rerr, sizeof rerr);
    if (!rk) {
        snprintf(err, errlen, "kafka: restore consumer: %s", rerr);
        return -EIO;
    }
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(16);
    for (int i = 0; i < ntopics; i++)
        for (int p = 0; p < nparts[i] && p < stride; p++) {
            size_t x = (size_t)i * (size_t)stride + (size_t)p;
            int64_t start = from[x] < 0 ? 0 : from[x];
            if (start >= end[x]) { /* at the high watermark already: nothing to read */
                end[x] = start;
                continue;
            }
            rd_kafka_topic_partition_t *tp = rd_kafka_topic_partition_list_add(l, names[i], p);
            tp->offset = from[x] < 0 ? RD_KAFKA_OFFSET_BEGINNING : start;
            tp->opaque = (void *)(intptr_t)end[x]; /* the high watermark: the target */
            end[x] = start;
        }
    /* A partition is done once the consumer's position reaches the high watermark it had when
     * the read began (end[] on entry, kept in target[]): records written after that belong to
     * epochs the reader does not need to wait for, and read_committed never reports an end
     * (EOF) while another process keeps a transaction open on the partition. The position
     * moves past transaction markers and aborted records, which are never delivered. */
    int64_t *target = calloc(l->cnt > 0 ? (size_t)l->cnt : 1, sizeof *target);
    int *tix = calloc(l->cnt > 0 ? (size_t)l->cnt : 1, sizeof *tix);
    int remaining = l->cnt, rc = 0;
    if (!target || !tix) {
        snprintf(err, errlen, "out of memory");
        rc = -ENOMEM;
    }
    for (int j = 0; rc == 0 && j < l->cnt; j++) {
        for (int i = 0; i < ntopics; i++)
            if (!strcmp(l->elems[j].topic, names[i]))
                tix[j] = i;
        target[j] = (int64_t)(intptr_t)l->elems[j].opaque;
    }
    if (rc == 0 && remaining > 0)
        rd_kafka_assign(rk, l);
    uint64_t next_check = 0;
    /* No overall time limit: a large restore takes as long as it takes, and its progress is
     * visible (/readyz, newsflow_restore_*). A broker that stops answering shows up as
     * librdkafka's errors (logged); shutdown's deadline ends it. */
    while (remaining > 0 && rc == 0) {
        if (nf_kafka_past_deadline(k)) {
            rc = deadline_error("kafka: changelog restore", err, errlen);
            break;
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (m) {
            const char *tn = m->rkt ? rd_kafka_topic_name(m->rkt) : "";
            int ti = -1;
            for (int i = 0; i < ntopics && ti < 0; i++)
                if (!strcmp(tn, names[i]))
                    ti = i;
            size_t x = ti >= 0 && m->partition >= 0 && m->partition < stride
                           ? (size_t)ti * (size_t)stride + (size_t)m->partition
                           : SIZE_MAX;
            if (m->err && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                nf_log(NF_LOG_WARN, "kafka", "changelog restore: consumer error",
                       NF_LS("topic", tn), NF_LS("error", rd_kafka_message_errstr(m)), NF_LEND);
                if (m->err == RD_KAFKA_RESP_ERR__FATAL ||
                    m->err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED) {
                    snprintf(err, errlen, "kafka: changelog restore of %s: %s", tn,
                             rd_kafka_message_errstr(m));
                    rc = -EIO;
                }
            } else if (!m->err && x != SIZE_MAX) {
                rc = rec(arg, ti, m->partition, m->offset, m->key, m->key_len, m->payload, m->len,
                         m->payload == NULL);
                if (m->offset + 1 > end[x])
                    end[x] = m->offset + 1;
            }
            rd_kafka_message_destroy(m);
        }
        uint64_t now = nf_now_ns();
        if (rc != 0 || (m && now < next_check))
            continue;
        next_check = now + 50000000ull; /* positions are local: cheap, but not per record */
        if (rd_kafka_position(rk, l) != RD_KAFKA_RESP_ERR_NO_ERROR)
            continue;
        remaining = 0;
        for (int j = 0; j < l->cnt; j++) {
            size_t x = (size_t)tix[j] * (size_t)stride + (size_t)l->elems[j].partition;
            int64_t pos = l->elems[j].offset;
            if (pos >= 0 && pos > end[x])
                end[x] = pos;
            if (end[x] < target[j])
                remaining++;
        }
    }
    free(target);
    free(tix);
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return rc;
}

int nf_kafka_read_topics(nf_kafka_t *k, const int *topics, int ntopics, const int *nparts,
                         int stride, const int64_t *from, int64_t *end, nf_kafka_record_fn rec,
                         void *arg, char *err, size_t errlen)
{
    const char *names[NF_TOPIC__COUNT];
    if (ntopics > NF_TOPIC__COUNT) {
        snprintf(err, errlen, "kafka: too many topics to read");
        return -EINVAL;
    }
    for (int i = 0; i < ntopics; i++)
        names[i] = k->out[topics[i]].name;
    return read_named(k, names, ntopics, nparts, stride, from, end, rec, arg, err, errlen);
}

int nf_kafka_read_input(nf_kafka_t *k, nf_input_t in, nf_kafka_record_fn rec, void *arg, char *err,
                        size_t errlen)
{
    int n = (unsigned)in < NF_INPUT__COUNT ? k->in_npart[in] : 0;
    if (n <= 0) {
        snprintf(err, errlen, "kafka: the %s topic's partitions are not known", nf_input_name(in));
        return -EINVAL;
    }
    int64_t *from = calloc((size_t)n * 2, sizeof *from);
    if (!from) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    int64_t *end = from + n;
    const char *name = k->in_names[in];
    for (int p = 0; p < n; p++)
        from[p] = -1;
    int rc = ends_of(k, name, end, n, err, errlen);
    if (rc == 0)
        rc = read_named(k, &name, 1, &n, n, from, end, rec, arg, err, errlen);
    free(from);
    return rc;
}

typedef struct {
    _Atomic uint64_t delivered, failed;
    char first_error[256];
    _Atomic bool have_error;
} publish_ctx_t;

static void publish_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    publish_ctx_t *x = opaque;
    (void)rk;
    if (!m->err) {
        atomic_fetch_add(&x->delivered, 1);
        return;
    }
    atomic_fetch_add(&x->failed, 1);
    if (!atomic_exchange(&x->have_error, true))
        snprintf(x->first_error, sizeof x->first_error, "%s", rd_kafka_err2str(m->err));
}

int nf_kafka_publish(nf_kafka_t *k, nf_input_t in, const nf_kafka_pub_t *recs, size_t n, char *err,
                     size_t errlen)
{
    if (!n)
        return 0;
    if ((unsigned)in >= NF_INPUT__COUNT || k->in_npart[in] <= 0) {
        snprintf(err, errlen, "kafka: the %s topic's partitions are not known", nf_input_name(in));
        return -EINVAL;
    }
    publish_ctx_t *x = calloc(1, sizeof *x);
    rd_kafka_conf_t *c = x ? base_conf(k, err, errlen) : NULL;
    if (!c) {
        if (!x)
            snprintf(err, errlen, "out of memory");
        free(x);
        return x ? -EINVAL : -ENOMEM;
    }
    /* Its own idempotent producer: these records are not an epoch's (the transactional one
     * produces only inside transactions), and a retry must not write one twice. */
    if (conf_set(c, "enable.idempotence", "true", err, errlen) != 0) {
        rd_kafka_conf_destroy(c);
        free(x);
        return -EINVAL;
    }
    rd_kafka_conf_set_opaque(c, x);
    rd_kafka_conf_set_dr_msg_cb(c, publish_dr);
    char rerr[256];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, rerr, sizeof rerr);
    if (!rk) {
        snprintf(err, errlen, "kafka: publishing producer: %s", rerr);
        free(x);
        return -EIO;
    }
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        rd_kafka_resp_err_t e;
        while ((e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(k->in_names[in]),
                                      RD_KAFKA_V_PARTITION(recs[i].partition),
                                      RD_KAFKA_V_KEY(recs[i].key, recs[i].klen),
                                      RD_KAFKA_V_VALUE((void *)recs[i].value, recs[i].vlen),
                                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END)) ==
               RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(rk, 100);
        if (e) {
            snprintf(err, errlen, "kafka: publishing to %s [%d]: %s", k->in_names[in],
                     recs[i].partition, rd_kafka_err2str(e));
            rc = -EIO;
        }
    }
    rd_kafka_resp_err_t fe = rd_kafka_flush(rk, tmo(k, NF_KAFKA_TIMEOUT_MS));
    if (rc == 0 && fe) {
        snprintf(err, errlen, "kafka: publishing to %s: %s", k->in_names[in], rd_kafka_err2str(fe));
        rc = -EIO;
    }
    if (rc == 0 && atomic_load(&x->failed)) {
        snprintf(err, errlen, "kafka: publishing to %s: %llu records not delivered: %s",
                 k->in_names[in], (unsigned long long)atomic_load(&x->failed), x->first_error);
        rc = -EIO;
    }
    rd_kafka_destroy(rk);
    free(x);
    return rc;
}

struct nf_kafka_follower {
    rd_kafka_t *rk;
    rd_kafka_topic_partition_list_t *parts;
    nf_kafka_record_fn rec;
    void *arg;
    pthread_t thread;
    _Atomic bool stop;
    _Atomic uint64_t records;
    _Atomic int64_t lag;
    _Atomic bool has_gauge;
    nf_gauge_t gauge;
};

void nf_kafka_follow_gauge(nf_kafka_follower_t *f, nf_gauge_t g)
{
    f->gauge = g;
    atomic_store(&f->has_gauge, true);
}

static void *follow_main(void *a)
{
    nf_kafka_follower_t *f = a;
    uint64_t next_lag = 0;
    while (!atomic_load(&f->stop)) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(f->rk, 200);
        if (m) {
            if (m->err && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                nf_log(NF_LOG_WARN, "kafka", "following a topic: consumer error",
                       NF_LS("error", rd_kafka_message_errstr(m)), NF_LEND);
            else if (!m->err) {
                f->rec(f->arg, 0, m->partition, m->offset, m->key, m->key_len, m->payload, m->len,
                       m->payload == NULL);
                atomic_fetch_add(&f->records, 1);
            }
            rd_kafka_message_destroy(m);
        }
        uint64_t now = nf_now_ns();
        if (now < next_lag)
            continue;
        next_lag = now + 1000000000ull;
        /* lag: cached high watermarks (no request) minus the positions */
        if (rd_kafka_position(f->rk, f->parts) != RD_KAFKA_RESP_ERR_NO_ERROR)
            continue;
        int64_t lag = 0;
        for (int i = 0; i < f->parts->cnt && lag >= 0; i++) {
            int64_t lo = -1, hi = -1, pos = f->parts->elems[i].offset;
            if (rd_kafka_get_watermark_offsets(f->rk, f->parts->elems[i].topic,
                                               f->parts->elems[i].partition, &lo, &hi) ||
                hi < 0)
                lag = -1;
            else
                lag += hi - (pos < 0 ? lo : pos) > 0 ? hi - (pos < 0 ? lo : pos) : 0;
        }
        atomic_store(&f->lag, lag);
        if (atomic_load(&f->has_gauge))
            nf_gauge_set(f->gauge, lag);
    }
    return NULL;
}

nf_kafka_follower_t *nf_kafka_follow(nf_kafka_t *k, nf_topic_t t, const int64_t *from, int nfrom,
                                     nf_kafka_record_fn rec, void *arg, char *err, size_t errlen)
{
    if ((unsigned)t >= NF_TOPIC__COUNT || k->out[t].npart <= 0) {
        snprintf(err, errlen, "kafka: the topic to follow has no known partitions");
        return NULL;
    }
    nf_kafka_follower_t *f = calloc(1, sizeof *f);
    rd_kafka_conf_t *c = f ? reader_conf(k, "follow", err, errlen) : NULL;
    if (!c) {
        if (!f)
            snprintf(err, errlen, "out of memory");
        free(f);
        return NULL;
    }
    if (conf_set(c, "auto.offset.reset", "earliest", err, errlen) != 0) {
        rd_kafka_conf_destroy(c);
        free(f);
        return NULL;
    }
    char rerr[256];
    if (!(f->rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, rerr, sizeof rerr))) {
        snprintf(err, errlen, "kafka: follower: %s", rerr);
        free(f);
        return NULL;
    }
    f->rec = rec;
    f->arg = arg;
    atomic_init(&f->lag, -1);
    f->parts = rd_kafka_topic_partition_list_new(k->out[t].npart);
    for (int p = 0; p < k->out[t].npart; p++)
        rd_kafka_topic_partition_list_add(f->parts, k->out[t].name, p)->offset =
            from && p < nfrom && from[p] >= 0 ? from[p] : RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_resp_err_t e = rd_kafka_assign(f->rk, f->parts);
    int r = e ? EIO : pthread_create(&f->thread, NULL, follow_main, f);
    if (r != 0) {
        snprintf(err, errlen, "kafka: follower: %s", e ? rd_kafka_err2str(e) : strerror(r));
        rd_kafka_topic_partition_list_destroy(f->parts);
        rd_kafka_destroy(f->rk);
        free(f);
        return NULL;
    }
    return f;
}

uint64_t nf_kafka_follow_records(const nf_kafka_follower_t *f)
{
    return f ? atomic_load(&f->records) : 0;
}

int64_t nf_kafka_follow_lag(const nf_kafka_follower_t *f)
{
    return f ? atomic_load(&f->lag) : -1;
}

void nf_kafka_follow_stop(nf_kafka_follower_t *f)
{
    if (!f)
        return;
    atomic_store(&f->stop, true);
    pthread_join(f->thread, NULL);
    rd_kafka_consumer_close(f->rk);
    rd_kafka_topic_partition_list_destroy(f->parts);
    rd_kafka_destroy(f->rk);
    free(f);
}

/* ---------------------------------------------------------------- tailing topics (standbys) */

struct nf_kafka_tail {
    nf_kafka_t *k;
    rd_kafka_t *rk;
};

nf_kafka_tail_t *nf_kafka_tail_new(nf_kafka_t *k, char *err, size_t errlen)
{
    rd_kafka_conf_t *c = reader_conf(k, "standby", err, errlen);
    if (!c)
        return NULL;
    if (conf_set(c, "enable.auto.offset.store", "false", err, errlen) != 0 ||
        conf_set(c, "max.partition.fetch.bytes", "16777216", err, errlen) != 0 ||
        conf_set(c, "queued.max.messages.kbytes", "65536", err, errlen) != 0 ||
        /* an offset below the log start (compacted away) reads from the start */
        conf_set(c, "auto.offset.reset", "earliest", err, errlen) != 0) {
        rd_kafka_conf_destroy(c);
        return NULL;
    }
    nf_kafka_tail_t *t = calloc(1, sizeof *t);
    char rerr[256];
    if (!t || !(t->rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, rerr, sizeof rerr))) {
        if (t)
            snprintf(err, errlen, "kafka: standby consumer: %s", rerr);
        else {
            rd_kafka_conf_destroy(c);
            snprintf(err, errlen, "out of memory");
        }
        free(t);
        return NULL;
    }
    rd_kafka_poll_set_consumer(t->rk);
    t->k = k;
    return t;
}

int nf_kafka_tail_set(nf_kafka_tail_t *t, nf_topic_t topic, int32_t partition, int64_t from,
                      char *err, size_t errlen)
{
    if ((unsigned)topic >= NF_TOPIC__COUNT || !t->k->out[topic].name[0]) {
        snprintf(err, errlen, "kafka: standby: topic %d is not loaded", (int)topic);
        return -EINVAL;
    }
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_t *tp =
        rd_kafka_topic_partition_list_add(l, t->k->out[topic].name, partition);
    tp->offset = from < 0 ? RD_KAFKA_OFFSET_BEGINNING : from;
    rd_kafka_error_t *e = from == NF_KAFKA_TAIL_STOP ? rd_kafka_incremental_unassign(t->rk, l)
                                                     : rd_kafka_incremental_assign(t->rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    if (e) {
        snprintf(err, errlen, "kafka: standby: %s %s [%d]: %s",
                 from == NF_KAFKA_TAIL_STOP ? "unassign" : "assign", t->k->out[topic].name,
                 partition, rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
        return -EIO;
    }
    return 0;
}

int nf_kafka_tail_poll(nf_kafka_tail_t *t, int timeout_ms, int max, nf_kafka_record_fn rec,
                       void *arg, char *err, size_t errlen)
{
    int n = 0, rc = 0;
    while (n < max && rc == 0) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(t->rk, n ? 0 : timeout_ms);
        if (!m)
            break;
        const char *tn = m->rkt ? rd_kafka_topic_name(m->rkt) : "";
        int topic = -1;
        for (int i = 0; i < NF_TOPIC__COUNT && topic < 0; i++)
            if (t->k->out[i].name[0] && !strcmp(tn, t->k->out[i].name))
                topic = i;
        if (m->err) {
            if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                nf_log(NF_LOG_WARN, "kafka", "standby: consumer error", NF_LS("topic", tn),
                       NF_LS("error", rd_kafka_message_errstr(m)), NF_LEND);
            if (m->err == RD_KAFKA_RESP_ERR__FATAL) {
                snprintf(err, errlen, "kafka: standby consumer: %s", rd_kafka_message_errstr(m));
                rc = -EIO;
            }
        } else if (topic >= 0) {
            n++;
            rc = rec(arg, topic, m->partition, m->offset, m->key, m->key_len, m->payload, m->len,
                     m->payload == NULL);
        }
        rd_kafka_message_destroy(m);
    }
    return rc ? rc : n;
}

int nf_kafka_tail_position(nf_kafka_tail_t *t, nf_topic_t topic, int32_t partition, int64_t *pos,
                           int64_t *hi)
{
    *pos = *hi = -1;
    if ((unsigned)topic >= NF_TOPIC__COUNT)
        return -EINVAL;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, t->k->out[topic].name, partition);
    if (rd_kafka_position(t->rk, l) == RD_KAFKA_RESP_ERR_NO_ERROR && !l->elems[0].err &&
        l->elems[0].offset >= 0)
        *pos = l->elems[0].offset;
    rd_kafka_topic_partition_list_destroy(l);
    int64_t lo = -1;
    /* cached from the fetches: no request */
    if (rd_kafka_get_watermark_offsets(t->rk, t->k->out[topic].name, partition, &lo, hi) !=
        RD_KAFKA_RESP_ERR_NO_ERROR)
        *hi = -1;
    return 0;
}

void nf_kafka_tail_free(nf_kafka_tail_t *t)
{
    if (!t)
        return;
    rd_kafka_consumer_close(t->rk);
    rd_kafka_destroy(t->rk);
    free(t);
}

int nf_kafka_group_offsets(nf_kafka_t *k, const nf_kafka_offset_t *only, size_t nonly,
                           nf_kafka_offset_t *out, size_t cap, size_t *n, uint64_t *max_epoch,
                           char *err, size_t errlen)
{
    *n = 0;
    *max_epoch = 0;
    if (!k->cons) {
        snprintf(err, errlen, "kafka: no consumer to read the group's offsets with");
        return -EINVAL;
    }
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(16);
    for (size_t j = 0; only && j < nonly; j++)
        if ((unsigned)only[j].input < NF_INPUT__COUNT)
            rd_kafka_topic_partition_list_add(l, k->in_names[only[j].input], only[j].partition);
    for (int i = 0; !only && i < NF_INPUT__COUNT; i++)
        for (int p = 0; p < k->in_npart[i]; p++)
            rd_kafka_topic_partition_list_add(l, k->in_names[i], p);
    if (l->cnt == 0) {
        rd_kafka_topic_partition_list_destroy(l);
        return 0;
    }
    rd_kafka_resp_err_t e = committed(k, l);
    int rc = 0;
    if (e) {
        snprintf(err, errlen, "kafka: the group's committed offsets are not readable: %s",
                 rd_kafka_err2str(e));
        rc = -EIO;
    }
    for (int i = 0; rc == 0 && i < l->cnt; i++) {
        const rd_kafka_topic_partition_t *tp = &l->elems[i];
        if (tp->err || tp->offset < 0 || *n >= cap)
            continue;
        int in = nf_kafka_input_of(k, tp->topic);
        if (in < 0)
            continue;
        out[(*n)++] = (nf_kafka_offset_t){(nf_input_t)in, tp->partition, tp->offset};
        uint64_t nonce = 0;
        int64_t me = metadata_epoch(k, tp, &nonce);
        if (me > 0 && (uint64_t)me > *max_epoch)
            *max_epoch = (uint64_t)me;
    }
    rd_kafka_topic_partition_list_destroy(l);
    return rc;
}

/* ---------------------------------------------------------------- shard side */

int nf_kafka_shard_fd(const nf_kafka_t *k, unsigned shard)
{
    return k->sq && shard < k->nshards ? k->sq[shard].rfd : -1;
}

size_t nf_kafka_shard_consume(nf_kafka_t *k, unsigned shard, rd_kafka_message_t **msgs, size_t n)
{
    if (!k->sq || shard >= k->nshards)
        return 0;
    ssize_t got = rd_kafka_consume_batch_queue(k->sq[shard].q, 0, msgs, n);
    return got > 0 ? (size_t)got : 0;
}

void nf_kafka_pause_shard(nf_kafka_t *k, unsigned shard, bool pause)
{
    if (!k->sq || shard >= k->nshards)
        return;
    pthread_mutex_lock(&k->lock);
    shard_q_t *q = &k->sq[shard];
    if (q->paused != pause) {
        q->paused = pause;
        if (q->assigned->cnt) {
            if (pause)
                rd_kafka_pause_partitions(k->cons, q->assigned);
            else
                rd_kafka_resume_partitions(k->cons, q->assigned);
        }
        if (pause)
            atomic_fetch_add(&k->pauses, 1);
    }
    pthread_mutex_unlock(&k->lock);
}

size_t nf_kafka_shard_partitions(nf_kafka_t *k, unsigned shard, nf_input_t in, int32_t *out,
                                 size_t n)
{
    if (!k->sq || shard >= k->nshards || (unsigned)in >= NF_INPUT__COUNT)
        return 0;
    size_t count = 0;
    pthread_mutex_lock(&k->lock);
    const rd_kafka_topic_partition_list_t *l = k->sq[shard].assigned;
    for (int i = 0; l && i < l->cnt; i++) {
        if (strcmp(l->elems[i].topic, k->in_names[in]) != 0)
            continue;
        int32_t p = l->elems[i].partition;
        if (count < n) {
            size_t j = count;
            for (; j > 0 && out[j - 1] > p; j--)
                out[j] = out[j - 1];
            out[j] = p;
        }
        count++;
    }
    pthread_mutex_unlock(&k->lock);
    return count;
}

uint64_t nf_kafka_last_client_error(nf_kafka_t *k, char *buf, size_t len)
{
    pthread_mutex_lock(&k->elock);
    uint64_t at = k->client_error_ns;
    snprintf(buf, len, "%s", at ? k->client_error : "");
    pthread_mutex_unlock(&k->elock);
    return at ? nf_now_ns() - at : UINT64_MAX;
}

void nf_kafka_stats(const nf_kafka_t *k, nf_kafka_stats_t *out)
{
    out->produced = atomic_load(&k->produced);
    out->delivery_errors = atomic_load(&k->delivery_errors);
    out->transactions = atomic_load(&k->transactions);
    out->aborts = atomic_load(&k->aborts);
    out->scans = atomic_load(&k->scans);
    out->assigned = atomic_load(&k->assigned);
    out->revoked = atomic_load(&k->revoked);
    out->pauses = atomic_load(&k->pauses);
}

/* ---------------------------------------------------------------- topic administration */

/* CreateTopics for every topic; per-topic outcomes into outcome[] ("created", "exists" or
 * "failed" with why[]). 0 or -errno with err when the request as a whole failed. */
static int create_topics(rd_kafka_t *rk, const nf_kafka_topics_opts_t *o, char names[][256],
                         const char **outcome, char why[][256], char *err, size_t errlen)
{
    rd_kafka_NewTopic_t *nt[NF_KAFKA_TOPICS] = {0};
    char rerr[256];
    int r = 0, nreq = 0;
    for (int t = 0; t < NF_KAFKA_TOPICS && r == 0; t++) {
        if (t == PANES_INPUT)
            continue; /* the output of the same name is the topic */
        /* trending-panes: one partition, so that one process merges (analytics.h) */
        int np = t == NF_TOPIC_TRENDING_PANES ? 1 : (int)o->partitions;
        nt[t] = rd_kafka_NewTopic_new(names[t], np, o->replication, rerr, sizeof rerr);
        if (!nt[t]) {
            snprintf(err, errlen, "topic %s: %s", names[t], rerr);
            r = -EINVAL;
        } else if (t == NF_TOPIC__COUNT + NF_INPUT_SOURCES) {
            /* The latest definition of each source is what counts (docs/topics.md). */
            rd_kafka_NewTopic_set_config(nt[t], "cleanup.policy", "compact");
        } else if (nf_topic_is_changelog(t)) {
            /* State: the latest value of each key is what counts (docs/ARCHITECTURE.md §4
             * "Changelog"); one value can be a whole epoch's keyset blob of a key group. */
            /* Kinds whose values expire (event ids 2 h, seen keys 24 h, the recent-by-topic
             * index 48 h, topic vectors, article metadata, story sizes, the search log and the
             * cluster index 7 days by default) are never deleted by the job: their records also
             * leave by age, after 8 days, longer than any of those TTLs by default. */
            bool ttl = t == NF_TOPIC_CL_EVENT_IDS || t == NF_TOPIC_CL_INTEREST_SEEN ||
                       t == NF_TOPIC_CL_ARTICLE_TOPICS || t == NF_TOPIC_CL_CLUSTER_SIG ||
                       t == NF_TOPIC_CL_CLUSTER_BUCKET || t == NF_TOPIC_CL_CLUSTER_PARENT ||
                       t == NF_TOPIC_CL_ARTICLE_META || t == NF_TOPIC_CL_TOPIC_RECENT ||
                       t == NF_TOPIC_CL_STORY || t == NF_TOPIC_CL_SEARCH_LOG;
            rd_kafka_NewTopic_set_config(nt[t], "cleanup.policy",
                                         ttl ? "compact,delete" : "compact");
            if (ttl)
                rd_kafka_NewTopic_set_config(nt[t], "retention.ms", NF_KAFKA_CHANGELOG_TTL_MS);
            rd_kafka_NewTopic_set_config(nt[t], "max.message.bytes", NF_KAFKA_CHANGELOG_MAX_BYTES);
        }
    }
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *ao = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    if (r == 0) {
        rd_kafka_AdminOptions_set_request_timeout(ao, o->timeout_ms, rerr, sizeof rerr);
        rd_kafka_AdminOptions_set_operation_timeout(ao, o->timeout_ms, rerr, sizeof rerr);
        rd_kafka_NewTopic_t *req[NF_KAFKA_TOPICS];
        for (int t = 0; t < NF_KAFKA_TOPICS; t++)
            if (nt[t])
                req[nreq++] = nt[t];
        rd_kafka_CreateTopics(rk, req, (size_t)nreq, ao, q);
        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, o->timeout_ms + 5000);
        const rd_kafka_CreateTopics_result_t *res =
            ev ? rd_kafka_event_CreateTopics_result(ev) : NULL;
        if (!res) {
            snprintf(err, errlen, "kafka: no answer to CreateTopics from %s within %d ms",
                     o->brokers, o->timeout_ms);
            r = -ETIMEDOUT;
        } else if (rd_kafka_event_error(ev)) {
            snprintf(err, errlen, "kafka: CreateTopics on %s: %s", o->brokers,
                     rd_kafka_event_error_string(ev));
            r = -EIO;
        } else {
            size_t n = 0;
            const rd_kafka_topic_result_t **tr = rd_kafka_CreateTopics_result_topics(res, &n);
            for (size_t i = 0; i < n; i++)
                for (int t = 0; t < NF_KAFKA_TOPICS; t++) {
                    if (strcmp(rd_kafka_topic_result_name(tr[i]), names[t]) != 0)
                        continue;
                    rd_kafka_resp_err_t e = rd_kafka_topic_result_error(tr[i]);
                    const char *es = rd_kafka_topic_result_error_string(tr[i]);
                    outcome[t] = e == RD_KAFKA_RESP_ERR_NO_ERROR               ? "created"
                                 : e == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS ? "exists"
                                                                               : "failed";
                    if (e && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
                        snprintf(why[t], sizeof why[t], "%s", es ? es : rd_kafka_err2str(e));
                }
        }
        if (ev)
            rd_kafka_event_destroy(ev);
    }
    rd_kafka_AdminOptions_destroy(ao);
    rd_kafka_queue_destroy(q);
    for (int t = 0; t < NF_KAFKA_TOPICS; t++)
        if (nt[t])
            rd_kafka_NewTopic_destroy(nt[t]);
    return r;
}

int nf_kafka_topics(const nf_kafka_topics_opts_t *opts, bool create, nf_kafka_topic_cb cb,
                    void *arg, char *err, size_t errlen)
{
    nf_kafka_topics_opts_t oo = *opts;
    if (oo.timeout_ms <= 0)
        oo.timeout_ms = NF_KAFKA_TIMEOUT_MS;
    const nf_kafka_topics_opts_t *o = &oo;
    rd_kafka_conf_t *c = conf_new(o->brokers, o->properties, NULL, err, errlen);
    if (!c)
        return -EINVAL;
    char rerr[256];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, rerr, sizeof rerr);
    if (!rk) {
        snprintf(err, errlen, "kafka: cannot create a client: %s", rerr);
        return -EIO;
    }
    char names[NF_KAFKA_TOPICS][256], why[NF_KAFKA_TOPICS][256];
    const char *outcome[NF_KAFKA_TOPICS];
    for (int t = 0; t < NF_KAFKA_TOPICS; t++) {
        topic_full_name(names[t], sizeof names[t], o->prefix, topic_base_name(t));
        outcome[t] = NULL;
        why[t][0] = 0;
    }
    int r = create ? create_topics(rk, o, names, outcome, why, err, errlen) : 0;
    const struct rd_kafka_metadata *md = NULL;
    int parts[NF_KAFKA_TOPICS];
    /* A topic just created reaches every broker's metadata a moment later (seconds on a busy
     * cluster): wait for it, up to NF_KAFKA_TIMEOUT_MS. */
    uint64_t settle_end = nf_now_ns() + (uint64_t)NF_KAFKA_TIMEOUT_MS * 1000000ull;
    while (r == 0) {
        if (md)
            rd_kafka_metadata_destroy(md);
        md = NULL;
        rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 1, NULL, &md, o->timeout_ms);
        if (e) {
            snprintf(err, errlen,
                     "kafka: no cluster metadata from %s within %d ms: %s (is a broker listening "
                     "there? see kafka.brokers)",
                     o->brokers, o->timeout_ms, rd_kafka_err2str(e));
            r = -EIO;
            break;
        }
        bool settled = true;
        for (int t = 0; t < NF_KAFKA_TOPICS; t++) {
            parts[t] = 0;
            for (int i = 0; i < md->topic_cnt; i++)
                if (!strcmp(md->topics[i].topic, names[t]) && !md->topics[i].err)
                    parts[t] = md->topics[i].partition_cnt;
            if (outcome[t] && strcmp(outcome[t], "failed") != 0 && parts[t] == 0)
                settled = false;
        }
        if (settled || nf_now_ns() >= settle_end)
            break;
        usleep(200000);
    }
    for (int t = 0; t < NF_KAFKA_TOPICS && r == 0; t++) {
        if (t == PANES_INPUT)
            continue; /* reported as the output of the same name */
        if (parts[t] == 0 && outcome[t] && strcmp(outcome[t], "failed") != 0)
            outcome[t] = NULL; /* created, yet not in the metadata after 30 s */
        if (!outcome[t])
            outcome[t] = parts[t] > 0 ? "exists" : "missing";
        cb(arg, names[t], outcome[t], parts[t], why[t][0] ? why[t] : NULL);
    }
    for (int t = 0; t < NF_KAFKA_TOPICS && r == 0; t++)
        if (t == PANES_INPUT) {
            continue;
        } else if (!strcmp(outcome[t], "failed")) {
            snprintf(err, errlen, "topic %s: %s", names[t], why[t]);
            r = -EIO;
        } else if (!strcmp(outcome[t], "missing")) {
            snprintf(err, errlen, "topic %s does not exist on %s", names[t], o->brokers);
            r = -ENOENT;
        }
    if (md)
        rd_kafka_metadata_destroy(md);
    rd_kafka_destroy(rk);
    return r;
}
