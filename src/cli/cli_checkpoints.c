/* cli_checkpoints.c — `newsflow checkpoints`: list, show, verify and delete the named
 * checkpoints of a state directory (docs/ARCHITECTURE.md §4 "Restore", src/state/checkpoint.h).
 *
 * It works on the directories alone and never opens the live database, so it runs beside a
 * running job: the job holds the database's LOCK, a checkpoint is a database of its own (opened
 * read-only by verify). The state directory comes from the configuration, loaded exactly as
 * `newsflow run` loads it, unless --state-dir names one. */
#include "cli/cli.h"
#include "runtime/config.h"
#include "state/checkpoint.h"
#include "state/store.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char checkpoints_usage[] =
    "Usage: newsflow checkpoints list [--json] [OPTIONS]\n"
    "       newsflow checkpoints show ID [OPTIONS]\n"
    "       newsflow checkpoints verify ID [OPTIONS]\n"
    "       newsflow checkpoints delete ID [--force] [OPTIONS]\n"
    "       newsflow checkpoints export ID DIR [OPTIONS]\n"
    "       newsflow checkpoints import DIR [OPTIONS]\n"
    "\n"
    "A checkpoint is a complete, consistent copy of the job's state (its RocksDB database) as\n"
    "of one committed epoch, kept in STATE_DIR/checkpoints/chk-<epoch>/ with a manifest.json:\n"
    "epoch, creation time, the input offsets the state corresponds to, configuration hash,\n"
    "program version, shard count and the database's files with their sizes. `newsflow run`\n"
    "takes one every checkpoint.retain_every epochs and at a clean stop (checkpoint.on_stop),\n"
    "and keeps the newest checkpoint.retain_count. Its table files are copies (each with its\n"
    "hash in the manifest), shared with other checkpoints but never with the live database,\n"
    "so a damaged live file damages no checkpoint; a checkpoint copies only the table files\n"
    "the previous one lacks.\n"
    "\n"
    "  list        the checkpoints, oldest first: id, epoch, created_at, files, bytes,\n"
    "              shards (the runtime.shards the state was written by; unknown for\n"
    "              checkpoints of older versions) and a note after a restore: \"restored\"\n"
    "              (the base of the live state) or \"newer than the restore\" (kept: the\n"
    "              timeline the restore left); --json prints them as a JSON array\n"
    "  show ID     print the checkpoint's manifest.json\n"
    "  verify ID   check that the checkpoint is intact: every file the manifest lists is there\n"
    "              with its size, and the database opens and reads end to end with every\n"
    "              checksum verified; prints \"ok: ID (N files, M bytes, K keys)\" or the first\n"
    "              problem found (exit 1)\n"
    "  delete ID   remove the checkpoint; while the job runs, deleting the newest one (its\n"
    "              latest restore point) is refused without --force\n"
    "  export ID DIR\n"
    "              verify the checkpoint, then copy it to DIR/chk-<epoch>/ (another volume,\n"
    "              a backup): every file read back and compared by hash; prints the path\n"
    "  import DIR  verify the checkpoint directory DIR (an export) where it is, then copy it\n"
    "              into STATE_DIR/checkpoints/ under its epoch; `newsflow run\n"
    "              --from-checkpoint ID` then restores it. Refused if that epoch's\n"
    "              checkpoint exists\n"
    "\n"
    "ID is latest, chk-000000000042 or 42 (an epoch).\n"
    "\n"
    "Options:\n"
    "  --state-dir DIR  the state directory (default: state.dir of the configuration)\n"
    "  --config FILE    configuration file (default: $NEWSFLOW_CONFIG, else built-in defaults)\n"
    "  --set K=V        override a configuration key, e.g. --set state.dir=/var/lib/newsflow\n"
    "                   (repeatable; NEWSFLOW_<SECTION>_<KEY> variables apply as for run)\n"
    "\n"
    "Exit codes: 0 ok, 1 runtime failure (verify found a problem, I/O error), 2 usage or\n"
    "configuration error, or no such checkpoint.\n";

typedef enum { SUB_LIST, SUB_SHOW, SUB_VERIFY, SUB_DELETE, SUB_EXPORT, SUB_IMPORT } sub_t;

/* Checkpoint directories that nf_checkpoint_list leaves out (no readable manifest): said on
 * stderr, so a list never hides a damaged checkpoint. */
static void warn_unlisted(const char *state_dir, const nf_checkpoint_info_t *list, size_t n)
{
    char cpdir[4096];
    snprintf(cpdir, sizeof cpdir, "%s/checkpoints", state_dir);
    DIR *d = opendir(cpdir);
    if (!d)
        return;
    const struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, "chk-", 4) != 0)
            continue;
        bool listed = false;
        for (size_t i = 0; i < n && !listed; i++)
            listed = !strcmp(list[i].id, de->d_name);
        if (!listed)
            fprintf(stderr,
                    "newsflow checkpoints: warning: %s/%s has no readable manifest.json "
                    "(damaged or not a checkpoint; `verify` says more, `delete` removes it)\n",
                    cpdir, de->d_name);
    }
    closedir(d);
}

static int ck_list(const char *state_dir, bool json)
{
    struct stat sb;
    if (stat(state_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr,
                "newsflow checkpoints: state directory %s does not exist (state.dir, or "
                "--state-dir)\n",
                state_dir);
        return NF_EXIT_USAGE;
    }
    nf_checkpoint_info_t *list = NULL;
    size_t n = 0;
    int r = nf_checkpoint_list(state_dir, &list, &n);
    if (r != 0) {
        fprintf(stderr, "newsflow checkpoints: cannot list %s/checkpoints: %s\n", state_dir,
                strerror(-r));
        return NF_EXIT_RUNTIME;
    }
    warn_unlisted(state_dir, list, n);
    int rc = NF_EXIT_OK;
    if (json) {
        cJSON *arr = cJSON_CreateArray();
        for (size_t i = 0; arr && i < n; i++) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "id", list[i].id);
            cJSON_AddNumberToObject(o, "epoch", (double)list[i].epoch);
            cJSON_AddStringToObject(o, "created_at", list[i].created_at);
            cJSON_AddNumberToObject(o, "files", (double)list[i].files);
            cJSON_AddNumberToObject(o, "bytes", (double)list[i].bytes);
            if (list[i].shards)
                cJSON_AddNumberToObject(o, "shards", list[i].shards);
            else
                cJSON_AddNullToObject(o, "shards");
            if (list[i].note[0])
                cJSON_AddStringToObject(o, "note", list[i].note);
            cJSON_AddItemToArray(arr, o);
        }
        char *text = arr ? cJSON_Print(arr) : NULL;
        if (text)
            printf("%s\n", text);
        else
            rc = NF_EXIT_RUNTIME;
        free(text);
        cJSON_Delete(arr);
    } else if (n == 0) {
        printf("no checkpoints in %s/checkpoints\n", state_dir);
    } else {
        printf("%-18s %12s  %-20s %7s %14s %7s  NOTE\n", "ID", "EPOCH", "CREATED_AT", "FILES",
               "BYTES", "SHARDS");
        for (size_t i = 0; i < n; i++) {
            char shards[16] = "unknown";
            if (list[i].shards)
                snprintf(shards, sizeof shards, "%u", list[i].shards);
            printf("%-18s %12" PRIu64 "  %-20s %7" PRIu64 " %14" PRIu64 " %7s%s%s\n", list[i].id,
                   list[i].epoch, list[i].created_at, list[i].files, list[i].bytes, shards,
                   list[i].note[0] ? "  " : "", list[i].note);
        }
    }
    free(list);
    return rc;
}

/* Deleting the newest checkpoint while the job runs takes away its latest restore point (and
 * "latest" may name the one it is about to replace): refused without --force. 0 or an exit
 * code. */
static int delete_guard(const char *state_dir, const char *name, bool force)
{
    long pid = 0;
    if (force || nf_store_in_use(state_dir, &pid) != 1)
        return NF_EXIT_OK;
    char err[2048];
    char *newest = nf_checkpoint_path(state_dir, "latest", err, sizeof err);
    const char *slash = newest ? strrchr(newest, '/') : NULL;
    bool is_newest = slash && !strcmp(slash + 1, name);
    free(newest);
    if (!is_newest)
        return NF_EXIT_OK;
    fprintf(stderr,
            "newsflow checkpoints: refusing to delete %s: it is the newest checkpoint and the job "
            "is running (process %ld holds %s/db/LOCK), so it is the only restore point as recent "
            "as the running state; stop the job first, or pass --force\n",
            name, pid, state_dir);
    return NF_EXIT_RUNTIME;
}

/* export ID DIR, import DIR */
static int ck_copy(sub_t sub, const char *state_dir, const char *id, const char *dir)
{
    char err[2048], out[4200];
    int r = sub == SUB_EXPORT
                ? nf_checkpoint_export(state_dir, id, dir, out, sizeof out, err, sizeof err)
                : nf_checkpoint_import(state_dir, id, out, sizeof out, err, sizeof err);
    if (r != 0) {
        fprintf(stderr, "newsflow checkpoints: %s failed: %s\n",
                sub == SUB_EXPORT ? "export" : "import", err);
        return r == -ENOENT || r == -EINVAL || r == -EEXIST ? NF_EXIT_USAGE : NF_EXIT_RUNTIME;
    }
    if (sub == SUB_EXPORT)
        printf("exported %s to %s\n", id, out);
    else
        printf("imported %s from %s (restore it with `newsflow run --from-checkpoint %s`)\n", out,
               id, out);
    return NF_EXIT_OK;
}

static int ck_one(sub_t sub, const char *state_dir, const char *id, bool force)
{
    char err[2048];
    /* Resolve first: an id that names nothing is a usage error (2), whatever the subcommand. */
    char *path = nf_checkpoint_path(state_dir, id, err, sizeof err);
    if (!path) {
        fprintf(stderr, "newsflow checkpoints: %s\n", err);
        return NF_EXIT_USAGE;
    }
    const char *slash = strrchr(path, '/');
    char name[64];
    snprintf(name, sizeof name, "%s", slash ? slash + 1 : path);
    free(path);

    if (sub == SUB_SHOW) {
        char *text = nf_checkpoint_manifest(state_dir, name, err, sizeof err);
        if (!text) {
            fprintf(stderr, "newsflow checkpoints: %s\n", err);
            return NF_EXIT_RUNTIME;
        }
        size_t len = strlen(text);
        fputs(text, stdout);
        if (len == 0 || text[len - 1] != '\n')
            putchar('\n');
        free(text);
        return NF_EXIT_OK;
    }
    if (sub == SUB_VERIFY) {
        nf_checkpoint_stats_t s;
        if (nf_checkpoint_verify_stats(state_dir, name, &s, err, sizeof err) != 0) {
            fprintf(stderr, "newsflow checkpoints: verify failed: %s\n", err);
            return NF_EXIT_RUNTIME;
        }
        printf("ok: %s (%" PRIu64 " files, %" PRIu64 " bytes, %" PRIu64 " keys)\n", name, s.files,
               s.bytes, s.keys);
        return NF_EXIT_OK;
    }
    int guard = delete_guard(state_dir, name, force);
    if (guard != NF_EXIT_OK)
        return guard;
    if (nf_checkpoint_delete(state_dir, name, err, sizeof err) != 0) {
        fprintf(stderr, "newsflow checkpoints: delete failed: %s\n", err);
        return NF_EXIT_RUNTIME;
    }
    printf("deleted %s\n", name);
    return NF_EXIT_OK;
}

int nf_cli_checkpoints(int argc, char **argv)
{
    if (argc < 2)
        return nf_cli_bad_usage("checkpoints", checkpoints_usage,
                                "missing subcommand (list, show, verify, delete, export or import)",
                                NULL);
    const char *subname = argv[1];
    sub_t sub;
    if (!strcmp(subname, "--help") || !strcmp(subname, "-h") || !strcmp(subname, "help")) {
        fputs(checkpoints_usage, stdout);
        return NF_EXIT_OK;
    } else if (!strcmp(subname, "list")) {
        sub = SUB_LIST;
    } else if (!strcmp(subname, "show")) {
        sub = SUB_SHOW;
    } else if (!strcmp(subname, "verify")) {
        sub = SUB_VERIFY;
    } else if (!strcmp(subname, "delete")) {
        sub = SUB_DELETE;
    } else if (!strcmp(subname, "export")) {
        sub = SUB_EXPORT;
    } else if (!strcmp(subname, "import")) {
        sub = SUB_IMPORT;
    } else {
        return nf_cli_bad_usage("checkpoints", checkpoints_usage, "unknown subcommand", subname);
    }

    const char *config = nf_cli_config_default(), *state_dir = NULL, *id = NULL, *dir = NULL;
    bool json = false, force = false;
    char **sets = calloc((size_t)argc, sizeof *sets);
    unsigned nsets = 0;
    int rc = NF_EXIT_USAGE;
    if (!sets) {
        fputs("newsflow: out of memory\n", stderr);
        return NF_EXIT_RUNTIME;
    }
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(checkpoints_usage, stdout);
            rc = NF_EXIT_OK;
            goto out;
        }
        int co = nf_cli_config_opt(argc, argv, &i, &config, sets, &nsets);
        if (co < 0 || (!strcmp(a, "--state-dir") && i + 1 >= argc)) {
            rc = nf_cli_bad_usage("checkpoints", checkpoints_usage, "option needs a value:", a);
            goto out;
        }
        if (co > 0)
            continue;
        if (!strcmp(a, "--state-dir"))
            state_dir = argv[++i];
        else if (!strncmp(a, "--state-dir=", 12))
            state_dir = a + 12;
        else if (!strcmp(a, "--json") && sub == SUB_LIST)
            json = true;
        else if (!strcmp(a, "--force") && sub == SUB_DELETE)
            force = true;
        else if (a[0] == '-' && a[1] != '\0') {
            rc = nf_cli_bad_usage("checkpoints", checkpoints_usage, "unknown option", a);
            goto out;
        } else if (sub == SUB_EXPORT && id && !dir) {
            dir = a;
        } else if (sub == SUB_LIST || id) {
            rc = nf_cli_bad_usage("checkpoints", checkpoints_usage, "unexpected argument", a);
            goto out;
        } else {
            id = a; /* import: the directory to import */
        }
    }
    if ((sub == SUB_EXPORT && id && !dir) || (sub == SUB_IMPORT && !id)) {
        rc = nf_cli_bad_usage("checkpoints", checkpoints_usage,
                              sub == SUB_EXPORT ? "export needs an ID and a directory"
                                                : "import needs the checkpoint directory to import",
                              NULL);
        goto out;
    }
    if (sub != SUB_LIST && !id) {
        char what[64];
        snprintf(what, sizeof what, "%s needs a checkpoint ID (latest, chk-<epoch> or <epoch>)",
                 subname);
        rc = nf_cli_bad_usage("checkpoints", checkpoints_usage, what, NULL);
        goto out;
    }
    if (state_dir && !*state_dir) {
        rc = nf_cli_bad_usage("checkpoints", checkpoints_usage, "--state-dir needs a directory",
                              NULL);
        goto out;
    }

    /* The configuration is loaded even with --state-dir, exactly as run loads it: a broken
     * file or variable is reported the same way everywhere. */
    nf_config_t cfg;
    char err[NF_CONFIG_ERRLEN];
    if (nf_config_load(&cfg, config, sets, nsets, true, err, sizeof err) != 0) {
        fprintf(stderr, "newsflow: config error: %s\n", err);
        goto out;
    }
    if (!state_dir)
        state_dir = cfg.state.dir;
    if (sub == SUB_LIST)
        rc = ck_list(state_dir, json);
    else if (sub == SUB_EXPORT || sub == SUB_IMPORT)
        rc = ck_copy(sub, state_dir, id, dir);
    else
        rc = ck_one(sub, state_dir, id, force);
out:
    free(sets);
    return rc;
}
