/* job.h — the stream job as one object: everything `newsflow run` starts — the state (RocksDB),
 * Kafka (or the embedded cluster), the epoch coordinator, the shards and their actors, the HTTP
 * servers, the warm standby, the search index — and stops, with one cleanup path. The command
 * (cli/cli_run.c) parses arguments and signals; docs/ARCHITECTURE.md "The job" says what starts
 * in which order and why.
 *
 * Threads: every function on the process's main thread. */
#ifndef NF_JOB_H
#define NF_JOB_H
#include "runtime/config.h"
#include "state/epoch.h"

#include <signal.h>
#include <stdbool.h>

/* The process's exit codes. */
enum { NF_EXIT_OK = 0, NF_EXIT_RUNTIME = 1, NF_EXIT_USAGE = 2 };

typedef struct nf_job_args {
    const char *config_path;     /* for the start line ("(defaults)" when NULL) */
    const char *from_checkpoint; /* --from-checkpoint ID; NULL: none */
    nf_reset_t reset;            /* --reset */
} nf_job_args_t;

typedef struct nf_job nf_job_t;

/* runtime.shards, or the online CPUs for 0. */
unsigned nf_job_shards(const nf_config_t *cfg);

/* Starts the job on cfg (loaded and valid; the job keeps a copy). NF_EXIT_OK with the job in
 * *out, or an exit code with the reason logged and everything started released. The metrics
 * registry must exist (nf_metrics_init). */
int nf_job_start(const nf_config_t *cfg, const nf_job_args_t *a, nf_job_t **out);

/* Runs until *signals is non-zero, the job stops itself (a failure) or runtime.stop_after_ms has
 * passed; logs every readiness change and a progress line every log.progress_interval_ms. */
void nf_job_wait(nf_job_t *j, volatile sig_atomic_t *signals);

/* Commits a final epoch with input stopped, drains the shards and releases everything, within
 * shutdown.timeout_ms (past it a watchdog exits the process with what is committed). signalled:
 * a signal asked for the stop (said in the log). Returns the exit code; frees j. */
int nf_job_stop(nf_job_t *j, bool signalled);

#endif
