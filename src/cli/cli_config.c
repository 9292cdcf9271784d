/* cli_config.c — `newsflow config`: validate a configuration, show the defaults, list the keys.
 *
 * `check` loads exactly what `run` would (the file, then NEWSFLOW_* variables, then --set), so
 * a file that passes here fails at start-up only for reasons outside the configuration. The
 * source list (sources.urls, sources.file) is loaded as `run` loads it (nf_sources_load): every
 * bad line is reported at once, a missing local feed file is a warning (that source will fail and
 * back off; the job runs). The ranking variants (ranking.variants) are parsed as `run` parses
 * them. */
#include "cli/cli.h"

#include "actors/sources.h"
#include "engine/variants.h"
#include "runtime/config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char config_usage[] =
    "Usage: newsflow config check FILE [--set SECTION.KEY=VALUE]... [--print]\n"
    "       newsflow config defaults\n"
    "       newsflow config keys\n"
    "\n"
    "  check FILE   validate FILE with the environment (NEWSFLOW_<SECTION>_<KEY>) and --set\n"
    "               options applied on top, as `newsflow run` would; prints \"FILE: ok\", and\n"
    "               with --print the effective configuration as JSON\n"
    "  defaults     print the built-in defaults as JSON (the content of config/newsflow.json)\n"
    "  keys         this text\n"
    "\n"
    "Exit codes: 0 ok, 2 usage or configuration error.\n"
    "\n"
    "Keys (key, type, default, meaning):\n";

static int config_help(FILE *out, int code)
{
    fputs(config_usage, out);
    nf_config_describe(out);
    return code;
}

static int config_bad_usage(const char *what, const char *arg)
{
    nf_cli_bad_usage("config", "", what, arg);
    return config_help(stderr, NF_EXIT_USAGE);
}

static int config_check(int argc, char **argv)
{
    const char *file = NULL;
    bool print = false;
    char **sets = calloc((size_t)argc, sizeof *sets);
    unsigned nsets = 0;
    int rc = NF_EXIT_USAGE;
    if (!sets) {
        fputs("newsflow: out of memory\n", stderr);
        return NF_EXIT_RUNTIME;
    }
    int co;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--print")) {
            print = true;
        } else if ((co = nf_cli_config_opt(argc, argv, &i, NULL, sets, &nsets)) != 0) {
            if (co < 0) {
                rc = config_bad_usage("--set needs SECTION.KEY=VALUE", NULL);
                goto out;
            }
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            rc = config_help(stdout, NF_EXIT_OK);
            goto out;
        } else if (a[0] == '-' && a[1] != '\0') {
            rc = config_bad_usage("unknown option", a);
            goto out;
        } else if (file) {
            rc = config_bad_usage("check takes one FILE; extra argument", a);
            goto out;
        } else {
            file = a;
        }
    }
    if (!file) {
        rc = config_bad_usage("check needs a FILE", NULL);
        goto out;
    }

    nf_config_t cfg;
    char err[NF_CONFIG_ERRLEN];
    if (nf_config_load(&cfg, file, sets, nsets, true, err, sizeof err) < 0) {
        unsigned lines = 1;
        for (const char *p = err; *p; p++)
            lines += *p == '\n';
        if (lines == 1)
            fprintf(stderr, "newsflow: config error: %s\n", err);
        else
            fprintf(stderr, "newsflow: config errors (%u):\n%s\n", lines, err);
        goto out;
    }
    nf_variants_t variants; /* ranking.variants' entries, as `run` parses them */
    if (nf_variants_parse(cfg.ranking.variants, cfg.ranking.experiment, &variants, err,
                          sizeof err) != 0) {
        fprintf(stderr, "newsflow: config error: %s\n", err);
        goto out;
    }
    /* The source list too, with the loader `run` uses: every bad line, all at once. */
    nf_source_list_t src;
    nf_sources_init(&src);
    nf_sources_report_t rep;
    int lr = nf_sources_load(&src, cfg.sources.urls, cfg.sources.file, &rep);
    if (rep.warnings)
        for (const char *w = rep.warnings; *w;) {
            size_t n = strcspn(w, "\n");
            fprintf(stderr, "newsflow: warning: %.*s\n", (int)n, w);
            w += n + (w[n] == '\n');
        }
    if (lr != 0) {
        fprintf(stderr, "newsflow: config error: %u bad line%s in the source list:\n%s",
                rep.nerrors, rep.nerrors == 1 ? "" : "s", rep.errors ? rep.errors : "");
        nf_sources_report_free(&rep);
        nf_sources_free(&src);
        goto out;
    }
    printf("%s: ok\n", file);
    nf_sources_report_free(&rep);
    nf_sources_free(&src);
    rc = NF_EXIT_OK;
    if (print) {
        char *json = nf_config_to_json(&cfg);
        if (json)
            fputs(json, stdout);
        else
            rc = NF_EXIT_RUNTIME;
        free(json);
    }
out:
    free(sets);
    return rc;
}

const char *nf_cli_config_default(void)
{
    const char *path = getenv("NEWSFLOW_CONFIG");
    return path && *path ? path : NULL;
}

int nf_cli_config_opt(int argc, char **argv, int *i, const char **config, char **sets,
                      unsigned *nsets)
{
    const char *a = argv[*i];
    if (config && !strncmp(a, "--config=", 9)) {
        *config = a + 9;
    } else if (!strncmp(a, "--set=", 6)) {
        sets[(*nsets)++] = argv[*i] + 6;
    } else if ((config && !strcmp(a, "--config")) || !strcmp(a, "--set")) {
        if (*i + 1 >= argc)
            return -1;
        if (a[2] == 'c')
            *config = argv[++*i];
        else
            sets[(*nsets)++] = argv[++*i];
    } else {
        return 0;
    }
    return 1;
}

int nf_cli_config(int argc, char **argv)
{
    if (argc < 2)
        return config_bad_usage("missing subcommand", NULL);
    const char *sub = argv[1];
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h") || !strcmp(sub, "help") ||
        !strcmp(sub, "keys"))
        return argc == 2 ? config_help(stdout, NF_EXIT_OK)
                         : config_bad_usage("unexpected argument", argv[2]);
    if (!strcmp(sub, "check"))
        return config_check(argc - 1, argv + 1);
    if (!strcmp(sub, "defaults")) {
        if (argc != 2)
            return config_bad_usage("unexpected argument", argv[2]);
        nf_config_t cfg;
        nf_config_defaults(&cfg);
        char *json = nf_config_to_json(&cfg);
        if (!json) {
            fputs("newsflow: out of memory\n", stderr);
            return NF_EXIT_RUNTIME;
        }
        fputs(json, stdout);
        free(json);
        return NF_EXIT_OK;
    }
    return config_bad_usage("unknown subcommand", sub);
}

int nf_cli_bad_usage(const char *cmd, const char *usage, const char *what, const char *arg)
{
    fprintf(stderr, "newsflow%s%s: %s%s%s%s\n\n%s", cmd ? " " : "", cmd ? cmd : "", what,
            arg ? " '" : "", arg ? arg : "", arg ? "'" : "", usage);
    return NF_EXIT_USAGE;
}
