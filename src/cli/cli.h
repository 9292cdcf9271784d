/* cli.h — the newsflow command's subcommands (DESIGN.md §7). Each takes the arguments after
 * its name (argv[0] is the subcommand) and returns the process exit code:
 * 0 ok, 1 runtime failure, 2 usage or configuration error. */
#ifndef NF_CLI_H
#define NF_CLI_H

enum { NF_EXIT_OK = 0, NF_EXIT_RUNTIME = 1, NF_EXIT_USAGE = 2 };

int nf_cli_run(int argc, char **argv);
int nf_cli_config(int argc, char **argv);
int nf_cli_version(int argc, char **argv);
int nf_cli_parse(int argc, char **argv);
int nf_cli_checkpoints(int argc, char **argv);
int nf_cli_mock_kafka(int argc, char **argv);
int nf_cli_topics(int argc, char **argv);
int nf_cli_status(int argc, char **argv);
int nf_cli_sources(int argc, char **argv);

#endif
