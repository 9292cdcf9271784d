/* history.h — the job's own recent history of a few key series, so that its page can show graphs
 * where no Prometheus or Grafana runs (GET /v1/ops/history; docs/openapi.json).
 *
 * A thread renders the metrics (metrics.h) every interval, sums the series of each entry of a
 * fixed table (new articles, read events, dead letters, failed fetches and epochs per second;
 * consumer lag, seconds since the last commit, CPU and resident memory) and keeps the last
 * NF_HISTORY_SAMPLES in a ring: bounded memory (a few tens of KB), one render per interval. A
 * counter becomes a rate between two samples (the first sample of one has none). The values are
 * the process's own: what /metrics would have shown at those moments. */
#ifndef NF_HISTORY_H
#define NF_HISTORY_H

#include "runtime/jsonw.h"

#define NF_HISTORY_SAMPLES 360 /* an hour at the default 10 s */

typedef struct nf_history nf_history_t;

/* Starts sampling every interval_ms (>= 100); NULL when the thread cannot start (logged). */
nf_history_t *nf_history_start(unsigned interval_ms);
void nf_history_stop(nf_history_t *h);

/* Writes {"interval_s", "samples", "t": [epoch ms...], "series": [{"name", "unit", "help",
 * "values": [number|null...]}...]}, oldest first, into w (an object is open there: the caller
 * adds nothing else). */
void nf_history_json(nf_history_t *h, nf_jw_t *w);

#endif
