/* cli_status.c — `newsflow status` and `newsflow sources list`: what a job is doing, for an
 * operator at a shell.
 *
 * Both ask the running job first, through its admin server (admin.listen:admin.port of the same
 * configuration `run` loads, else the address a running job on the same state.dir wrote to
 * state.dir/admin.json: a job on another port, or on any free port): GET /v1/status and
 * /v1/sources[?failing=1] (serve/operator.c).
 * When nothing answers there (the job is stopped, or admin.enabled is false) they read the state
 * directory instead, with RocksDB opened read-only — which works while another process holds the
 * database, so a job whose admin server is unreachable is still shown, with a note naming the
 * process that holds state.dir/db/LOCK. The on-disk view is the last committed epoch: its input
 * offsets and every stored CrawlSchedule (state, failures, next crawl, last outcome); a source's
 * error text lives only in the running job.
 *
 * Both views are one JSON shape ("source": "admin" or "state"); --json prints it, otherwise it
 * is rendered as text. */
#include "cli/cli.h"

#include "actors/ingest.h"
#include "runtime/config.h"
#include "state/store.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char status_usage[] =
    "Usage: newsflow status [--json] [--config FILE] [--set SECTION.KEY=VALUE]...\n"
    "       newsflow sources list [--failing] [--json] [--config FILE] [--set ...]\n"
    "       newsflow sources partition --partitions N URL|HOST...\n"
    "       newsflow sources add|pause|resume|remove|crawl-now|import|export ...\n"
    "                (`newsflow sources add --help`: changing the sources topic)\n"
    "\n"
    "  status        this process's input partitions (position, lag), the last committed epoch\n"
    "                and how long ago, the restore state, the standby (partitions stood by\n"
    "                for, lag), sources by state and the failing ones\n"
    "  sources list  every source: state (ok, backoff, dead, paused), failures, next crawl,\n"
    "                last error; --failing: only those in backoff or dead\n"
    "  sources partition  the sources topic's partition of each feed URL's host (or host)\n"
    "                among N: where a consumer group wants its record (Kafka's default\n"
    "                partitioner for the host as key; `kcat -P -t sources -p P`); prints\n"
    "                URL, host and partition, tab-separated\n"
    "\n"
    "status and list read the running job through its admin server (admin.listen, admin.port of "
    "the\n"
    "configuration, loaded as `newsflow run` loads it); when nothing answers there, the\n"
    "committed state in state.dir (read-only; a job that holds it is named). --json prints the\n"
    "JSON the admin server serves at /v1/status and /v1/sources.\n"
    "\n"
    "Exit codes: 0 ok, 1 neither the job nor its state could be read, 2 usage or config error.\n";

/* ---------------------------------------------------------------- from the admin server */

typedef struct {
    char *buf;
    size_t len;
} body_t;

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    body_t *b = arg;
    char *nb = realloc(b->buf, b->len + size * n + 1);
    if (!nb)
        return 0;
    memcpy(nb + b->len, p, size * n);
    b->len += size * n;
    nb[b->len] = '\0';
    b->buf = nb;
    return size * n;
}

static int from_address(const char *where, const char *route, cJSON **out);
static long lock_holder(const char *state_dir);

/* The string field key of state.dir/admin.json (written by a running job's `run`) into out, if
 * the process that wrote it still holds state.dir/db/LOCK. */
static bool admin_json(const char *state_dir, const char *key, char *out, size_t outlen)
{
    char path[PATH_MAX], buf[1024];
    snprintf(path, sizeof path, "%s/admin.json", state_dir);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    cJSON *j = n ? cJSON_Parse(buf) : NULL;
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(j, "pid");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    bool ok = cJSON_IsNumber(pid) && cJSON_IsString(v) && pid->valuedouble > 0 &&
              lock_holder(state_dir) == (long)pid->valuedouble;
    if (ok)
        snprintf(out, outlen, "%s", v->valuestring);
    cJSON_Delete(j);
    return ok;
}

/* The address a job running on state_dir listens on (a job whose admin.port differs from this
 * configuration's, or is 0). */
static bool admin_file(const char *state_dir, char *where, size_t wherelen)
{
    return admin_json(state_dir, "address", where, wherelen);
}

/* nf_cli_admin_get (cli.h): 1: *out holds the JSON the admin server answered; 0: nothing
 * listens there (fall back to the state); -1: it answered badly or not in time (message
 * printed). The address a running job on this state.dir wrote first, then the configured one
 * (admin.listen: admin.operator_port if set, else admin.port). */
int nf_cli_admin_get(const nf_config_t *cfg, const char *route, cJSON **out, char *where,
                     size_t wherelen)
{
    bool v6 = strchr(cfg->admin.listen, ':') != NULL;
    const char *host = cfg->admin.listen;
    if (!strcmp(host, "0.0.0.0"))
        host = "127.0.0.1";
    else if (!strcmp(host, "::"))
        host = "::1";
    /* The operators' routes are on admin.operator_port when it is set (admin.port: 404). */
    unsigned port = cfg->admin.operator_port ? cfg->admin.operator_port : cfg->admin.port;
    bool configured = cfg->admin.enabled && port != 0;
    char conf[300], other[300];
    if (configured)
        snprintf(conf, sizeof conf, "%s%s%s:%u", v6 ? "[" : "", host, v6 ? "]" : "", port);
    else
        snprintf(conf, sizeof conf, "%s",
                 !cfg->admin.enabled ? "(none: admin.enabled is false)"
                                     : "(unknown: admin.port is 0, any free port)");
    /* The job running on this state.dir says where it listens: asked first, so that a
     * configuration with other ports (or none of the operator listener) still finds it. */
    if (admin_file(cfg->state.dir, other, sizeof other) && strcmp(other, conf) != 0) {
        int rc = from_address(other, route, out);
        if (rc != 0 || !configured) {
            snprintf(where, wherelen, "%s", other);
            return rc;
        }
    }
    snprintf(where, wherelen, "%s", conf);
    return configured ? from_address(where, route, out) : 0;
}

bool nf_cli_embedded_brokers(const char *state_dir, char *out, size_t outlen)
{
    return admin_json(state_dir, "embedded_brokers", out, outlen);
}

/* One GET of http://WHERE/ROUTE: as nf_cli_admin_get. */
static int from_address(const char *where, const char *route, cJSON **out)
{
    char url[512];
    snprintf(url, sizeof url, "http://%s%s", where, route);
    CURL *h = curl_easy_init();
    if (!h) {
        fprintf(stderr, "newsflow: cannot create an HTTP client\n");
        return -1;
    }
    body_t b = {0};
    char cerr[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 15000L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROXY, ""); /* the admin server is local: never via a proxy */
    CURLcode cr = curl_easy_perform(h);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(h);
    int rc = -1;
    if (cr == CURLE_COULDNT_CONNECT) {
        rc = 0;
    } else if (cr != CURLE_OK) {
        fprintf(stderr, "newsflow: the admin server at %s did not answer: %s\n", where,
                cerr[0] ? cerr : curl_easy_strerror(cr));
    } else if (code != 200 || !b.buf || !(*out = cJSON_Parse(b.buf))) {
        fprintf(stderr, "newsflow: the admin server at %s answered %ld: %s", where, code,
                b.buf ? b.buf : "(empty)\n");
        if (code == 404)
            fprintf(stderr, "newsflow: (a job of a version without /v1/ on this port?)\n");
    } else {
        rc = 1;
    }
    free(b.buf);
    return rc;
}

/* ---------------------------------------------------------------- from the state directory */

/* The pid holding state_dir/db/LOCK (RocksDB's fcntl lock), 0 if none, -1 if unknown. */
static long lock_holder(const char *state_dir)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/db/LOCK", state_dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    long pid = -1;
    if (fcntl(fd, F_GETLK, &fl) == 0)
        pid = fl.l_type == F_UNLCK ? 0 : (long)fl.l_pid;
    close(fd);
    return pid;
}

typedef struct {
    cJSON *sources; /* array */
    bool failing;
    long counts[NF_CRAWL_HEALTH_N];
    long unreadable;
} scan_t;

static int on_schedule(const void *k, size_t klen, const void *v, size_t vlen, void *arg)
{
    scan_t *x = arg;
    nf_ingest_stored_source_t st;
    (void)k;
    (void)klen;
    if (!nf_ingest_schedule_decode(v, vlen, &st)) {
        x->unreadable++;
        return 0;
    }
    nf_crawl_health_t h = nf_crawl_health(&st.sched);
    x->counts[h]++;
    if (!x->sources || (x->failing && !nf_crawl_health_failing(h)))
        return 0;
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return -ENOMEM;
    cJSON_AddStringToObject(o, "source_id", st.has_def ? st.source_id : "");
    cJSON_AddStringToObject(o, "url", st.has_def ? st.url : "");
    cJSON_AddStringToObject(o, "state", nf_crawl_health_name(h));
    cJSON_AddNumberToObject(o, "failures", st.sched.failures);
    cJSON_AddNumberToObject(o, "next_crawl_at_ms", (double)st.sched.next_crawl_at_ms);
    cJSON_AddStringToObject(o, "last_outcome",
                            nf_crawl_outcome_name((nf_crawl_outcome_t)st.sched.last_outcome));
    cJSON_AddNullToObject(o, "last_error"); /* the text is not stored, only the outcome */
    cJSON_AddBoolToObject(o, "from_topic", st.from_topic);
    cJSON_AddItemToArray(x->sources, o);
    return 0;
}

/* The JSON of /v1/status (status) or /v1/sources, from the committed state. NULL with a
 * message printed if the state cannot be read. */
static cJSON *from_state(const char *state_dir, bool status, bool failing, const char *admin)
{
    char db[PATH_MAX];
    struct stat sb;
    snprintf(db, sizeof db, "%s/db/CURRENT", state_dir);
    if (stat(db, &sb) != 0) {
        fprintf(stderr,
                "newsflow: no job answered at %s and there is no state in %s (has the job run "
                "with this state.dir?)\n",
                admin, state_dir);
        return NULL;
    }
    nf_store_opts_t so;
    nf_store_opts_default(&so);
    so.read_only = true;
    so.block_cache_mb = 8;
    so.bg_threads = 1;
    char err[512] = "";
    long holder = lock_holder(state_dir);
    /* Beside a running job the database moves on while it is opened read-only: an SST file the
     * MANIFEST names can be compacted away before it is opened ("No such file"). The next open
     * reads the newer MANIFEST; opens are cheap, so try a few times before giving up. */
    nf_store_t *st = NULL;
    for (int attempt = 0; !st && attempt < (holder > 0 ? 20 : 1); attempt++) {
        if (attempt)
            usleep(50000);
        st = nf_store_open(state_dir, &so, err, sizeof err);
    }
    if (!st) {
        fprintf(stderr, "newsflow: cannot read the state in %s: %s\n", state_dir, err);
        return NULL;
    }
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "source", "state");
    cJSON_AddStringToObject(root, "state_dir", state_dir);
    if (holder > 0)
        cJSON_AddNumberToObject(root, "held_by_pid", (double)holder);
    else
        cJSON_AddNullToObject(root, "held_by_pid");
    scan_t x = {.failing = failing || status}; /* status lists the failing ones */
    x.sources = cJSON_CreateArray();
    int r = nf_store_scan(st, NF_KIND_CRAWL_SCHEDULE, on_schedule, &x);
    if (status) {
        uint64_t epoch = 0;
        char *hj = NULL;
        if (nf_store_committed(st, &epoch, &hj, err, sizeof err) != 0) {
            fprintf(stderr, "newsflow: cannot read the committed epoch in %s: %s\n", state_dir,
                    err);
            r = r ? r : -EIO;
        }
        cJSON_AddNumberToObject(root, "epoch", (double)epoch);
        cJSON *h = hj ? cJSON_Parse(hj) : NULL;
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(h, "time_ms");
        if (cJSON_IsNumber(t)) {
            cJSON_AddNumberToObject(root, "committed_at_ms", t->valuedouble);
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            double ago = (double)now.tv_sec + (double)now.tv_nsec / 1e9 - t->valuedouble / 1e3;
            cJSON_AddNumberToObject(root, "seconds_since_commit", ago);
        }
        cJSON *parts = cJSON_AddArrayToObject(root, "partitions");
        const cJSON *offs = cJSON_GetObjectItemCaseSensitive(h, "offsets");
        const cJSON *topic;
        cJSON_ArrayForEach(topic, offs)
        {
            const cJSON *p;
            cJSON_ArrayForEach(p, topic)
            {
                cJSON *o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "topic", topic->string);
                cJSON_AddNumberToObject(o, "partition", atoi(p->string));
                cJSON_AddNumberToObject(o, "committed_offset", p->valuedouble);
                cJSON_AddItemToArray(parts, o);
            }
        }
        cJSON_Delete(h);
        free(hj);
        cJSON *counts = cJSON_AddObjectToObject(root, "sources");
        for (int i = 0; i < NF_CRAWL_HEALTH_N; i++)
            cJSON_AddNumberToObject(counts, nf_crawl_health_name(i), (double)x.counts[i]);
        cJSON_AddItemToObject(root, "failing", x.sources);
    } else {
        cJSON_AddItemToObject(root, "sources", x.sources);
    }
    if (x.unreadable)
        cJSON_AddNumberToObject(root, "unreadable_schedules", (double)x.unreadable);
    nf_store_close(st);
    if (r < 0) {
        fprintf(stderr, "newsflow: cannot read the crawl schedules in %s (%s)\n", state_dir,
                strerror(-r));
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

/* ---------------------------------------------------------------- as text */

static const char *str_of(const cJSON *o, const char *key, const char *dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : dflt;
}

static double num_of(const cJSON *o, const char *key, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

/* "in 3m12s" / "4s ago" for a wall-clock time in ms. */
static void when(double at_ms, char *out, size_t n)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    double d = at_ms / 1e3 - ((double)now.tv_sec + (double)now.tv_nsec / 1e9);
    double a = d < 0 ? -d : d;
    char span[32];
    if (a < 60)
        snprintf(span, sizeof span, "%.0fs", a);
    else if (a < 3600)
        snprintf(span, sizeof span, "%.0fm%02.0fs", a / 60 - 0.5 < 0 ? 0 : (double)(long)(a / 60),
                 a - 60 * (double)(long)(a / 60));
    else
        snprintf(span, sizeof span, "%.1fh", a / 3600);
    snprintf(out, n, d < 0 ? "%s ago" : "in %s", span);
}

static void print_sources(const cJSON *arr)
{
    const cJSON *s;
    cJSON_ArrayForEach(s, arr)
    {
        char next[48] = "-";
        double at = num_of(s, "next_crawl_at_ms", 0);
        const char *state = str_of(s, "state", "?");
        if (at > 0 && strcmp(state, "dead") != 0 && strcmp(state, "paused") != 0)
            when(at, next, sizeof next);
        printf("  %-16s %-8s failures=%-3.0f next=%-12s %s\n", str_of(s, "source_id", "?"), state,
               num_of(s, "failures", 0), next, str_of(s, "url", ""));
        const char *e = str_of(s, "last_error", NULL);
        if (e) {
            char ago[48] = "";
            double t = num_of(s, "last_error_at_ms", 0);
            if (t > 0)
                when(t, ago, sizeof ago);
            printf("      last error%s%s: %s\n", ago[0] ? " " : "", ago, e);
        } else if (!strcmp(state, "throttled")) {
            printf("      throttled: the host answered 429/503 with Retry-After until %s\n", next);
        } else if (strcmp(state, "ok") != 0) {
            printf("      last outcome: %s\n", str_of(s, "last_outcome", "?"));
        }
    }
}

static void print_origin(const cJSON *j, const char *admin)
{
    if (!strcmp(str_of(j, "source", ""), "admin")) {
        if (num_of(j, "pid", 0) > 0)
            printf("job: running, pid %.0f, newsflow %s (%s) — from its admin server at %s\n",
                   num_of(j, "pid", 0), str_of(j, "version", "?"), str_of(j, "commit", "?"), admin);
        else /* /v1/sources names no process */
            printf("job: running — from its admin server at %s\n", admin);
        return;
    }
    double pid = num_of(j, "held_by_pid", 0);
    if (pid > 0)
        printf("job: running (pid %.0f holds the state) but its admin server at %s did not "
               "answer — from the committed state in %s\n",
               pid, admin, str_of(j, "state_dir", "?"));
    else
        printf("job: not running — from the committed state in %s\n", str_of(j, "state_dir", "?"));
}

/* A JSON array of partition numbers as "0,2,3" ("none" when empty), cut to fit out. */
static const char *partition_list(const cJSON *arr, char *out, size_t n)
{
    size_t len = 0;
    const cJSON *p;
    out[0] = 0;
    cJSON_ArrayForEach(p, arr)
    {
        if (len < n)
            len += (size_t)snprintf(out + len, n - len, "%s%.0f", len ? "," : "", p->valuedouble);
    }
    return len ? out : "none";
}

/* /v1/status "standby" (scale.standby_replicas): nothing when null. */
static void print_standby(const cJSON *sb)
{
    if (!cJSON_IsObject(sb))
        return;
    char reads[256], sources[256];
    printf("standby: %s; stood by for: read-events partitions %s, sources partitions %s, the "
           "global key group: %s; lag %.0f records; %.0f records applied\n",
           cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sb, "failed")) ? "FAILED" : "on",
           partition_list(cJSON_GetObjectItemCaseSensitive(sb, "partitions"), reads, sizeof reads),
           partition_list(cJSON_GetObjectItemCaseSensitive(sb, "sources_partitions"), sources,
                          sizeof sources),
           cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sb, "global_key_group")) ? "yes" : "no",
           num_of(sb, "lag_records", 0), num_of(sb, "records_applied", 0));
}

static void print_status(const cJSON *j, const char *admin)
{
    print_origin(j, admin);
    bool live = !strcmp(str_of(j, "source", ""), "admin");
    if (live) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "ready");
        const cJSON *rs = cJSON_GetObjectItemCaseSensitive(j, "restore");
        printf("ready: %s   shards: %.0f   state: %s\n", cJSON_IsTrue(r) ? "yes" : "no",
               num_of(j, "shards", 0), str_of(j, "state_dir", "?"));
        printf("restore: %s (pending epochs rolled forward at start: %.0f; from checkpoint: %s)\n",
               str_of(rs, "state", "?"), num_of(rs, "pending_epochs_rolled_forward", 0),
               str_of(rs, "from_checkpoint", "none"));
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rs, "changelog")))
            printf("changelog: on; %s restore: %.0f of %.0f records applied\n",
                   cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rs, "changelog_restore_running"))
                       ? "running"
                       : "last",
                   num_of(rs, "changelog_records_applied", 0),
                   num_of(rs, "changelog_records_total", 0));
        print_standby(cJSON_GetObjectItemCaseSensitive(j, "standby"));
    }
    double since = num_of(j, "seconds_since_commit", -1);
    if (since >= 0)
        printf("epoch: %.0f, committed %.1f s ago\n", num_of(j, "epoch", 0), since);
    else
        printf("epoch: %.0f (none committed yet)\n", num_of(j, "epoch", 0));
    const cJSON *parts = cJSON_GetObjectItemCaseSensitive(j, "partitions");
    printf("input partitions%s: %d\n", live ? " assigned to this process" : " (committed offsets)",
           cJSON_GetArraySize(parts));
    const cJSON *p;
    cJSON_ArrayForEach(p, parts)
    {
        const cJSON *lag = cJSON_GetObjectItemCaseSensitive(p, "lag");
        if (live)
            printf("  %s/%.0f  position %.0f  lag %s%.0f\n", str_of(p, "topic", "?"),
                   num_of(p, "partition", 0), num_of(p, "position", -1),
                   cJSON_IsNumber(lag) ? "" : "unknown ",
                   num_of(p, "lag", 0) * !!cJSON_IsNumber(lag));
        else
            printf("  %s/%.0f  committed offset %.0f\n", str_of(p, "topic", "?"),
                   num_of(p, "partition", 0), num_of(p, "committed_offset", -1));
    }
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "sources");
    printf("sources: ok %.0f, backoff %.0f, dead %.0f, paused %.0f\n", num_of(c, "ok", 0),
           num_of(c, "backoff", 0), num_of(c, "dead", 0), num_of(c, "paused", 0));
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "failing");
    if (cJSON_GetArraySize(f) > 0) {
        printf("failing sources: %d\n", cJSON_GetArraySize(f));
        print_sources(f);
    }
}

/* ---------------------------------------------------------------- commands */

static int status_main(int argc, char **argv, bool sources, int first)
{
    const char *config = nf_cli_config_default();
    bool json = false, failing = false;
    char **sets = calloc((size_t)argc + 1, sizeof *sets);
    unsigned nsets = 0;
    int rc = NF_EXIT_USAGE;
    if (!sets) {
        fputs("newsflow: out of memory\n", stderr);
        return NF_EXIT_RUNTIME;
    }
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(status_usage, stdout);
            rc = NF_EXIT_OK;
            goto out;
        }
        int co = nf_cli_config_opt(argc, argv, &i, &config, sets, &nsets);
        if (co < 0) {
            rc = nf_cli_bad_usage(NULL, status_usage, "option needs a value:", a);
            goto out;
        }
        if (co > 0)
            continue;
        if (!strcmp(a, "--json"))
            json = true;
        else if (!strcmp(a, "--failing") && sources)
            failing = true;
        else {
            rc = nf_cli_bad_usage(NULL, status_usage,
                                  a[0] == '-' ? "unknown option" : "unexpected argument", a);
            goto out;
        }
    }
    nf_config_t cfg;
    char err[NF_CONFIG_ERRLEN];
    if (nf_config_load(&cfg, config, sets, nsets, true, err, sizeof err) != 0) {
        fprintf(stderr, "newsflow: config error: %s\n", err);
        goto out;
    }
    rc = NF_EXIT_RUNTIME;
    cJSON *j = NULL;
    char admin[300];
    const char *route = !sources ? "/v1/status" : failing ? "/v1/sources?failing=1" : "/v1/sources";
    int a = nf_cli_admin_get(&cfg, route, &j, admin, sizeof admin);
    if (a < 0)
        goto out;
    if (a == 0 && !(j = from_state(cfg.state.dir, !sources, failing, admin)))
        goto out;
    if (a == 1 && !cJSON_GetObjectItemCaseSensitive(j, "source"))
        cJSON_AddStringToObject(j, "source", "admin"); /* /v1/sources does not say */
    if (json) {
        char *text = cJSON_PrintUnformatted(j);
        if (text)
            puts(text);
        free(text);
    } else if (sources) {
        print_origin(j, admin);
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "sources");
        printf("%s: %d\n", failing ? "failing sources" : "sources", cJSON_GetArraySize(arr));
        print_sources(arr);
    } else {
        print_status(j, admin);
    }
    cJSON_Delete(j);
    rc = NF_EXIT_OK;
out:
    free(sets);
    return rc;
}

int nf_cli_status(int argc, char **argv)
{
    return status_main(argc, argv, false, 1);
}

/* `sources partition --partitions N URL|HOST...` (argv[0] = "partition"). */
static int sources_partition(int argc, char **argv)
{
    long parts = 0;
    int first = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--partitions") && i + 1 < argc) {
            char *end;
            parts = strtol(argv[++i], &end, 10);
            if (*end || parts < 1 || parts > 100000)
                return nf_cli_bad_usage(NULL, status_usage, "--partitions wants 1..100000, not",
                                        argv[i]);
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return nf_cli_bad_usage(NULL, status_usage, "unknown option", argv[i]);
        } else if (!first) {
            first = i;
        }
    }
    if (!parts || !first)
        return nf_cli_bad_usage(NULL, status_usage,
                                "sources partition needs --partitions N and a URL or host", NULL);
    int rc = NF_EXIT_OK;
    for (int i = first; i < argc; i++) {
        if (!strcmp(argv[i], "--partitions")) {
            i++;
            continue;
        }
        nf_source_url_t u;
        char err[512];
        if (strstr(argv[i], "://")) {
            if (nf_sources_check_url(argv[i], &u, err, sizeof err) != 0) {
                fprintf(stderr, "newsflow: %s\n", err);
                rc = NF_EXIT_USAGE;
                continue;
            }
        } else {
            /* a host: checked as the URL http://HOST/ would be */
            char url[600];
            snprintf(url, sizeof url, "http://%s/", argv[i]);
            if (strlen(argv[i]) > 255 || nf_sources_check_url(url, &u, err, sizeof err) != 0) {
                fprintf(stderr, "newsflow: host \"%s\": not a host name\n", argv[i]);
                rc = NF_EXIT_USAGE;
                continue;
            }
        }
        printf("%s\t%s\t%d\n", argv[i], u.host, nf_sources_partition(u.host, (int32_t)parts));
    }
    return rc;
}

int nf_cli_sources(int argc, char **argv)
{
    if (argc < 2)
        return nf_cli_bad_usage(NULL, status_usage,
                                "sources needs a subcommand: list, add, pause, resume, remove, "
                                "crawl-now, import, export, partition",
                                NULL);
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(status_usage, stdout);
        return NF_EXIT_OK;
    }
    if (!strcmp(argv[1], "partition"))
        return sources_partition(argc - 1, argv + 1);
    static const char *const writers[] = {"add",       "pause",  "resume", "remove",
                                          "crawl-now", "import", "export"};
    for (size_t i = 0; i < sizeof writers / sizeof *writers; i++)
        if (!strcmp(argv[1], writers[i]))
            return nf_cli_sources_write(argc - 1, argv + 1);
    if (strcmp(argv[1], "list") != 0)
        return nf_cli_bad_usage(NULL, status_usage, "unknown sources subcommand", argv[1]);
    return status_main(argc, argv, true, 2);
}
