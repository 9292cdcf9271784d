/* cli_config.c — `newsflow config` (being written). */
#include "cli/cli.h"

#include <stdio.h>

int nf_cli_config(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "newsflow config: not built yet\n");
    return NF_EXIT_RUNTIME;
}
