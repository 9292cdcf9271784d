/* trace.h — OpenTelemetry spans, exported over OTLP/HTTP in its JSON encoding (docs/slo.md,
 * "Traces").
 *
 * A span is a value the caller fills (nf_span_root / nf_span_child, attributes, nf_span_end)
 * and hands to nf_span_export, which keeps it when its trace is sampled or when the caller forces
 * it (an error, a slow request). Sampling is decided at a trace's root, by the head ratio
 * (trace.sample_ratio), and travels in the context (nf_trace_ctx_t) to the spans of the same
 * work on other threads. An exported span is serialized at once into a bounded queue
 * (trace.queue spans; beyond, it is dropped and counted); one exporter thread posts the queue
 * every trace.flush_ms (or at 512 spans) as one ExportTraceServiceRequest with libcurl, with a
 * 5 s timeout (1 s at the stop, where a failed post drops the rest), and counts what the
 * collector refused. Tracing never blocks the caller on the
 * network, and never stops the job: a collector that is down costs the spans of that time,
 * counted in newsflow_trace_spans_total{result} and logged once a minute.
 *
 * Off (trace.endpoint empty): nf_trace_on() is false, nf_span_root gives unsampled contexts whose
 * ids are still unique (log lines carry them), and nf_span_export does nothing.
 *
 * Threads: nf_trace_start and nf_trace_stop from main (once each); everything else from any
 * thread. Times are wall-clock nanoseconds (CLOCK_REALTIME), as OTLP wants. */
#ifndef NF_RUNTIME_TRACE_H
#define NF_RUNTIME_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nf_trace_ctx {
    uint64_t hi, lo; /* the trace id (16 bytes, hex in OTLP); 0,0: no trace */
    uint64_t span;   /* a span of it: a child's parent */
    bool sampled;
} nf_trace_ctx_t;

enum { NF_SPAN_INTERNAL = 1, NF_SPAN_SERVER = 2, NF_SPAN_CLIENT = 3 };
enum { NF_SPAN_ATTRS = 8, NF_SPAN_ATTR_STR = 96 };

typedef struct nf_span {
    nf_trace_ctx_t ctx; /* the trace, this span's own id, sampled */
    uint64_t parent;    /* the parent's span id, 0 for a root */
    const char *name;   /* static */
    int64_t start_ns, end_ns;
    uint8_t kind;
    bool error;
    const char *status; /* static, the error's message (NULL: none) */
    unsigned nattrs;
    struct {
        const char *key; /* static */
        bool is_int;
        int64_t i;
        char s[NF_SPAN_ATTR_STR];
    } attr[NF_SPAN_ATTRS];
    nf_trace_ctx_t link; /* a span of another trace this one belongs with (hi, lo = 0: none) */
} nf_span_t;

typedef struct nf_trace_opts {
    const char *endpoint;     /* "http://host:4318/v1/traces"; "" or NULL: tracing off */
    double sample_ratio;      /* head sampling, [0, 1] */
    const char *service_name; /* resource service.name */
    const char *instance;     /* resource service.instance.id (the transactional id) */
    unsigned queue;           /* spans waiting for the exporter (0: 4096) */
    unsigned flush_ms;        /* 0: 1000 */
    unsigned slow_ms;         /* nf_trace_slow: 0: 500 */
} nf_trace_opts_t;

/* Registers the metrics and, with an endpoint, starts the exporter. 0, or -1 with err. */
int nf_trace_start(const nf_trace_opts_t *o, char *err, size_t errlen);
/* Posts what is queued (one last time, up to its timeout) and stops the exporter. */
void nf_trace_stop(void);
bool nf_trace_on(void);
/* Whether work that took ns is slow enough to be traced whatever the ratio (trace.slow_ms). */
bool nf_trace_slow(int64_t ns);

/* Wall-clock nanoseconds. */
int64_t nf_trace_now_ns(void);

/* A new trace's first span, started now; sampled by the head ratio (never when off). */
void nf_span_root(nf_span_t *s, const char *name, uint8_t kind);
/* A span of parent's trace, started now, sampled as it is. */
void nf_span_child(nf_span_t *s, const char *name, const nf_trace_ctx_t *parent, uint8_t kind);
/* A span whose ids and start were taken earlier (ctx: its trace and own id, from an
 * nf_span_root or nf_span_child kept as context; parent 0 for a root). */
void nf_span_at(nf_span_t *s, const char *name, const nf_trace_ctx_t *ctx, uint64_t parent,
                int64_t start_ns, uint8_t kind);
/* The context a child of s takes (its trace, s's id, sampled). */
nf_trace_ctx_t nf_span_ctx(const nf_span_t *s);
/* cut at 95 bytes, on a character's start */
void nf_span_str(nf_span_t *s, const char *key, const char *v);
void nf_span_int(nf_span_t *s, const char *key, int64_t v);
/* Ends s now (unless end_ns is set), with an error status when msg is not NULL. */
void nf_span_end(nf_span_t *s, const char *error_msg);
/* Queues s for export when its trace is sampled, or always with force. */
void nf_span_export(const nf_span_t *s, bool force);

/* The trace id as 32 hex digits + NUL ("" for none), for log lines. */
void nf_trace_id_hex(const nf_trace_ctx_t *c, char out[33]);
/* The trace of epoch e of this process: the same ids for the epoch's own spans (state/epoch.c)
 * and for the spans that link to it (an article's commit). Sampled by the head ratio. */
nf_trace_ctx_t nf_trace_epoch(uint64_t e);

#endif
