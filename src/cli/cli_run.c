/* cli_run.c — `newsflow run` (being written). */
#include "cli/cli.h"

#include <stdio.h>

int nf_cli_run(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "newsflow run: not built yet\n");
    return NF_EXIT_RUNTIME;
}

int nf_cli_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("newsflow %s (%s)\n", NF_VERSION, NF_GIT_COMMIT);
    return NF_EXIT_OK;
}
