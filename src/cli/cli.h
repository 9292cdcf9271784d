/* cli.h — the newsflow command's subcommands (docs/ARCHITECTURE.md §6 and §7). Each takes the
 * arguments after its name (argv[0] is the subcommand) and returns the process exit code: 0 ok, 1
 * runtime failure, 2 usage or configuration error. */
#ifndef NF_CLI_H
#define NF_CLI_H

#include "job/job.h" /* NF_EXIT_* */
#include "runtime/config.h"

#include <stdbool.h>
#include <stddef.h>

int nf_cli_run(int argc, char **argv);
int nf_cli_config(int argc, char **argv);
int nf_cli_version(int argc, char **argv);
int nf_cli_parse(int argc, char **argv);
int nf_cli_checkpoints(int argc, char **argv);
int nf_cli_mock_kafka(int argc, char **argv);
int nf_cli_topics(int argc, char **argv);
int nf_cli_status(int argc, char **argv);
int nf_cli_sources(int argc, char **argv);
int nf_cli_ingest(int argc, char **argv);
int nf_cli_sink(int argc, char **argv);
int nf_cli_routes(int argc, char **argv);

/* The configuration file named by $NEWSFLOW_CONFIG, NULL when it is unset or empty: where
 * every command that loads the configuration starts before --config. */
const char *nf_cli_config_default(void);

/* The configuration options the commands that load it share: --config FILE (--config=FILE)
 * and --set K=V (--set=K=V), at argv[*i]. 1 if it was one of them (the value stored in
 * *config or appended to sets, which has room for argc entries; *i moved past it), 0 if not,
 * -1 if its value is missing. config NULL: the command has no --config. */
int nf_cli_config_opt(int argc, char **argv, int *i, const char **config, char **sets,
                      unsigned *nsets);

struct cJSON;
/* GET route of the running job's admin server: admin.listen:admin.port of cfg first, then the
 * address a job running on cfg's state.dir wrote to state.dir/admin.json. 1 with *out (the
 * answer's JSON); 0 when nothing answers (where names where it asked); -1 when it answered badly
 * or not in time (the message printed). */
int nf_cli_admin_get(const nf_config_t *cfg, const char *route, struct cJSON **out, char *where,
                     size_t wherelen);
/* The bootstrap address of the embedded Kafka of the job running on state_dir (its
 * admin.json), if that job still holds the state. */
bool nf_cli_embedded_brokers(const char *state_dir, char *out, size_t outlen);
/* `sources add|pause|resume|remove|crawl-now|import|export` (cli_sources.c; argv[0] is the
 * verb). */
int nf_cli_sources_write(int argc, char **argv);

/* A usage error: "newsflow CMD: WHAT 'ARG'" (CMD NULL: "newsflow: ..."; ARG NULL: no quote),
 * a blank line and usage on stderr. Returns NF_EXIT_USAGE. */
int nf_cli_bad_usage(const char *cmd, const char *usage, const char *what, const char *arg);

#endif
