/* log.h — structured JSON-lines logging on stderr.
 *
 * One line per event: {"ts","level","shard","component","msg", <context fields>}. Lines are
 * formatted into a stack buffer and written with one write(2), so lines from different threads
 * never interleave (stderr as a pipe: writes up to PIPE_BUF are atomic; longer lines are cut).
 * Context fields are typed key/value pairs built with NF_LS/NF_LI/NF_LF and closed by NF_LEND:
 *
 *   nf_log(NF_LOG_WARN, "fetch", "host circuit open", NF_LS("host", h), NF_LI("failures", n),
 *          NF_LEND);
 *
 * Any thread may call it. The shard field comes from a thread-local set by the runtime
 * (-1, printed as null, on threads that are not shards); an int field "shard" names the shard
 * the line is about and takes that place (with "thread_shard" when the two differ). No key
 * appears twice: a repeated one is written "<key>_2". An int field equal to INT64_MIN or
 * INT64_MAX (the callers' "none" sentinels) is written null; "errno" gets "errno_name" (EIO).
 * Not for per-message hot paths. */
#ifndef NF_LOG_H
#define NF_LOG_H

#include <stdbool.h>
#include <stdint.h>

typedef enum { NF_LOG_DEBUG = 0, NF_LOG_INFO, NF_LOG_WARN, NF_LOG_ERROR } nf_log_level_t;

enum { NF_LOG_FIELD_END = 0, NF_LOG_FIELD_STR, NF_LOG_FIELD_INT, NF_LOG_FIELD_DBL };

#define NF_LS(k, v) NF_LOG_FIELD_STR, (const char *)(k), (const char *)(v)
#define NF_LI(k, v) NF_LOG_FIELD_INT, (const char *)(k), (long long)(v)
#define NF_LF(k, v) NF_LOG_FIELD_DBL, (const char *)(k), (double)(v)
#define NF_LEND     NF_LOG_FIELD_END

void nf_log(nf_log_level_t level, const char *component, const char *msg, ...);

/* The same line shape with no context fields, from a signal handler: async-signal-safe (no
 * locale, no stdio, one write). */
void nf_log_signal_safe(nf_log_level_t level, const char *component, const char *msg);

/* Threshold below which events are discarded (default INFO). */
void nf_log_set_level(nf_log_level_t level);
bool nf_log_enabled(nf_log_level_t level);
/* "debug", "info", "warn", "error" -> 0; anything else -> -1. */
int nf_log_level_parse(const char *s, nf_log_level_t *out);
const char *nf_log_level_name(nf_log_level_t level);

/* At most one line per every_ns for one kind of event, so that a flood of them (refused
 * connections, a client's errors) does not flood the log: nf_log_gate_pass is true once per
 * every_ns, with *held the events held back since the last line (log it). Zero-initialise;
 * any thread. */
typedef struct nf_log_gate {
    _Atomic uint64_t last_ns, held;
} nf_log_gate_t;
bool nf_log_gate_pass(nf_log_gate_t *g, uint64_t every_ns, uint64_t *held);

/* The named events of high-rate work (docs/slo.md, "Log events"): nf_log_sampled is true for 1
 * in every `every x scale` calls on one sampler (log.sample_every, set at start; default 1000),
 * and always when the work's trace is sampled (pass that as traced). A sampler belongs to one
 * thread (declare it static _Thread_local): a shared counter would bounce between the shards'
 * caches at every event. Zero-initialise. */
typedef struct nf_log_sampler {
    uint64_t n;
} nf_log_sampler_t;
void nf_log_set_sample_every(unsigned every);
bool nf_log_sampled(nf_log_sampler_t *s, unsigned scale, bool traced);

/* Shard index shown in this thread's lines; -1 for non-shard threads. */
void nf_log_set_thread_shard(int shard);
/* Redirect output (tests); default 2. */
void nf_log_set_fd(int fd);

#endif
