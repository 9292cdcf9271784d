/* bench_trend_redis.c — the seed design's trending store, Redis sorted sets, as a peer for the
 * job's trending stage: same workload (workload.h), same decoder (io/events.h), measured end to
 * end (decode + commands + replies) so that its events/s sit next to ours in the same run.
 *
 * What the peer does, per read event: ZINCRBY trend:<pane_start_ms> 1 <article_id>, panes of
 * 30 s of event time. Every slide (event time crossing a 30 s boundary, one per boundary
 * crossed) closes pane p and appends
 *   ZUNIONSTORE trend:window 120 trend:<p-119*30000> .. trend:<p>     (the 1 h window)
 *   ZREVRANGE trend:window 0 49 WITHSCORES                             (the top 50)
 *   DEL trend:<p-119*30000>                                            (leaves the window)
 * All commands are pipelined (--pipeline commands in flight, default 1000); every reply is read
 * and checked for errors.
 *
 * The benchmark starts its own redis-server (no persistence, a unix socket under /tmp, stdout to
 * /dev/null) and kills it at exit, on failure and on SIGINT/SIGTERM; the server also gets
 * SIGTERM if this process dies (PR_SET_PDEATHSIG). Exit codes: 0 ok, 1 failure (Redis error,
 * --check mismatch), 2 usage or redis-server missing.
 *
 * --no-slides: only the ZINCRBYs (to see what the slides cost); --check still works.
 * --check: after the run, the final window (the last pane and the 119 before it) is unioned once
 * more and its top 50 compared with an exact count of the same events, ties ordered like Redis
 * (score descending, then member descending).
 *
 * Output (stdout, one JSON object per line):
 *   {"bench":"trend_redis","events":N,"seconds":S,"events_per_s":R,"pipeline":P,"slides":K,...}
 *   {"bench":"trend_redis.check","ok":true|false,"top":50,"window_events":W}   (with --check) */
#include "io/events.h"
#include "workload.h"

#include "../bench_clock.h"
#include <errno.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PANE_MS   30000LL
#define WINDOW    120 /* panes: 1 h */
#define TOP       50
#define WINDOWKEY "trend:window"

static pid_t server_pid = -1;
static char sock_path[108];

static void stop_server(void)
{
    if (server_pid > 0) {
        kill(server_pid, SIGTERM);
        waitpid(server_pid, NULL, 0);
        server_pid = -1;
    }
    if (sock_path[0])
        unlink(sock_path);
}

static void on_signal(int sig)
{
    if (server_pid > 0) { /* kill and waitpid are async-signal-safe */
        kill(server_pid, SIGTERM);
        waitpid(server_pid, NULL, 0);
    }
    if (sock_path[0])
        unlink(sock_path);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_trend_redis [--events N] [--users N] [--articles N] [--zipf S]\n"
               "         [--span-hours H] [--pipeline N] [--seed N] [--check] [--no-slides]\n"
               "         [--redis-server PATH]\n"
               "defaults: 2000000 events, 1000000 users, 100000 articles, s = 1.0, 4 h of event\n"
               "time, pipeline 1000 commands, /usr/bin/redis-server\n"
               "--no-slides: ZINCRBY only (what the slides cost is the difference)\n");
}

/* fork/exec redis-server on a private unix socket; connects and returns the context. */
static redisContext *start_server(const char *path)
{
    snprintf(sock_path, sizeof sock_path, "/tmp/nf-bench-redis-%d.sock", (int)getpid());
    unlink(sock_path);
    pid_t parent = getpid();
    server_pid = fork();
    if (server_pid < 0) {
        fprintf(stderr, "bench_trend_redis: fork: %s\n", strerror(errno));
        return NULL;
    }
    if (server_pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(1);
        if (!freopen("/dev/null", "w", stdout))
            _exit(127);
        execl(path, path, "--port", "0", "--unixsocket", sock_path, "--save", "", "--appendonly",
              "no", "--daemonize", "no", (char *)NULL);
        fprintf(stderr, "bench_trend_redis: exec %s: %s\n", path, strerror(errno));
        _exit(127);
    }
    /* Wait up to 10 s for the socket to accept. */
    for (int tries = 0; tries < 500; tries++) {
        int status;
        if (waitpid(server_pid, &status, WNOHANG) == server_pid) {
            server_pid = -1;
            fprintf(stderr, "bench_trend_redis: redis-server exited before listening (%s %d)\n",
                    WIFEXITED(status) ? "status" : "signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
            return NULL;
        }
        if (access(sock_path, F_OK) == 0) {
            redisContext *c = redisConnectUnix(sock_path);
            if (c && !c->err)
                return c;
            if (c)
                redisFree(c);
        }
        usleep(20000);
    }
    fprintf(stderr, "bench_trend_redis: redis-server did not open %s within 10 s\n", sock_path);
    return NULL;
}

/* ---------------------------------------------------------------- the pipeline */

typedef struct pipe_state {
    redisContext *c;
    size_t pending, depth;
    uint64_t commands;
    int failed;
} pipe_state_t;

static int drain(pipe_state_t *p)
{
    while (p->pending > 0) {
        redisReply *r = NULL;
        if (redisGetReply(p->c, (void **)&r) != REDIS_OK || !r) {
            fprintf(stderr, "bench_trend_redis: reading a reply: %s\n", p->c->errstr);
            p->failed = 1;
            return -1;
        }
        if (r->type == REDIS_REPLY_ERROR) {
            fprintf(stderr, "bench_trend_redis: redis error: %s\n", r->str);
            p->failed = 1;
        }
        freeReplyObject(r);
        p->pending--;
    }
    return p->failed ? -1 : 0;
}

static int sent(pipe_state_t *p)
{
    p->pending++;
    p->commands++;
    return p->pending >= p->depth ? drain(p) : 0;
}

/* The window ending with pane p: union, top 50, and the pane leaving it dropped. */
static int slide(pipe_state_t *p, long long pane)
{
    static char keys[WINDOW][32];
    const char *argv[3 + WINDOW];
    argv[0] = "ZUNIONSTORE";
    argv[1] = WINDOWKEY;
    argv[2] = "120";
    for (int k = 0; k < WINDOW; k++) {
        snprintf(keys[k], sizeof keys[k], "trend:%lld", pane - (WINDOW - 1 - k) * PANE_MS);
        argv[3 + k] = keys[k];
    }
    if (redisAppendCommandArgv(p->c, 3 + WINDOW, argv, NULL) != REDIS_OK || sent(p))
        return -1;
    if (redisAppendCommand(p->c, "ZREVRANGE " WINDOWKEY " 0 %d WITHSCORES", TOP - 1) != REDIS_OK ||
        sent(p))
        return -1;
    if (redisAppendCommand(p->c, "DEL %s", keys[0]) != REDIS_OK || sent(p))
        return -1;
    return 0;
}

/* ---------------------------------------------------------------- --check */

typedef struct ranked {
    char id[33];
    long long n;
} ranked_t;

static int cmp_ranked(const void *a, const void *b)
{
    const ranked_t *x = a, *y = b;
    if (x->n != y->n)
        return x->n > y->n ? -1 : 1;
    return -strcmp(x->id, y->id); /* Redis: equal scores in reverse lexicographic order */
}

static int check_window(redisContext *c, const nf_wl_events_t *ev, uint32_t articles,
                        long long last_pane)
{
    long long first = last_pane - (WINDOW - 1) * PANE_MS;
    long long *cnt = calloc(articles, sizeof *cnt);
    ranked_t *r = malloc(sizeof *r * articles);
    if (!cnt || !r) {
        free(cnt);
        free(r);
        return -1;
    }
    long long in_window = 0;
    for (size_t i = 0; i < ev->n; i++) {
        long long pane = ev->ts[i] - ev->ts[i] % PANE_MS;
        if (pane >= first && pane <= last_pane) {
            cnt[ev->article_of[i]]++;
            in_window++;
        }
    }
    size_t nr = 0;
    for (uint32_t a = 0; a < articles; a++)
        if (cnt[a]) {
            nf_wl_article_id(a, r[nr].id);
            r[nr++].n = cnt[a];
        }
    qsort(r, nr, sizeof *r, cmp_ranked);

    pipe_state_t p = {.c = c, .depth = 1000000};
    int ok = slide(&p, last_pane) == 0 && drain(&p) == 0;
    /* slide() dropped the oldest pane after its union: the window key still holds the union */
    redisReply *rep =
        ok ? redisCommand(c, "ZREVRANGE " WINDOWKEY " 0 %d WITHSCORES", TOP - 1) : NULL;
    size_t want = nr < TOP ? nr : TOP;
    ok = ok && rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 * want;
    for (size_t k = 0; ok && k < want; k++) {
        const char *id = rep->element[2 * k]->str, *score = rep->element[2 * k + 1]->str;
        if (strcmp(id, r[k].id) != 0 || atoll(score) != r[k].n) {
            fprintf(stderr,
                    "bench_trend_redis: check: rank %zu is %s (%s), exact count says %s (%lld)\n",
                    k, id, score, r[k].id, r[k].n);
            ok = 0;
        }
    }
    if (!rep || rep->type != REDIS_REPLY_ARRAY)
        fprintf(stderr, "bench_trend_redis: check: no reply to ZREVRANGE\n");
    printf("{\"bench\":\"trend_redis.check\",\"ok\":%s,\"top\":%zu,\"window_events\":%lld}\n",
           ok ? "true" : "false", want, in_window);
    if (rep)
        freeReplyObject(rep);
    free(cnt);
    free(r);
    return ok ? 0 : -1;
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    size_t events = 2000000, depth = 1000;
    uint32_t users = 1000000, articles = 100000;
    double zipf = 1.0, span_h = 4.0;
    uint64_t seed = 42;
    int check = 0, no_slides = 0;
    const char *server = "/usr/bin/redis-server";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--check")) {
            check = 1;
            continue;
        }
        if (!strcmp(a, "--no-slides")) {
            no_slides = 1;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!v) {
            usage(stderr);
            return 2;
        }
        i++;
        if (!strcmp(a, "--events"))
            events = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--users"))
            users = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--articles"))
            articles = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--zipf"))
            zipf = strtod(v, NULL);
        else if (!strcmp(a, "--span-hours"))
            span_h = strtod(v, NULL);
        else if (!strcmp(a, "--pipeline"))
            depth = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--seed"))
            seed = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--redis-server"))
            server = v;
        else {
            fprintf(stderr, "bench_trend_redis: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (events == 0 || users == 0 || articles == 0 || depth == 0 || !(span_h > 0) || !(zipf > 0)) {
        fprintf(stderr, "bench_trend_redis: --events, --users, --articles, --pipeline, "
                        "--span-hours and --zipf must be positive\n");
        return 2;
    }
    if (access(server, X_OK) != 0) {
        fprintf(stderr,
                "bench_trend_redis: redis-server not found or not executable at %s (%s); "
                "install it (apt-get install redis-server) or pass --redis-server PATH\n",
                server, strerror(errno));
        return 2;
    }

    nf_wl_events_t ev;
    int64_t t0 = 1700000000000LL; /* 2023-11-14T22:13:20Z: not pane-aligned on purpose */
    int64_t span = (int64_t)(span_h * 3600000.0);
    if (nf_wl_read_events(&ev, events, users, articles, zipf, t0, span, seed, false) != 0) {
        fprintf(stderr, "bench_trend_redis: out of memory generating %zu events\n", events);
        return 1;
    }

    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    atexit(stop_server);
    redisContext *c = start_server(server);
    if (!c) {
        nf_wl_events_free(&ev);
        return 1;
    }

    pipe_state_t p = {.c = c, .depth = depth};
    long long cur = -1;
    uint64_t slides = 0, bad = 0;
    char err[256];
    double t_start = bench_now_s();
    for (size_t i = 0; i < ev.n && !p.failed; i++) {
        nf_read_event_t re;
        if (nf_read_event_decode(ev.buf + ev.off[i], ev.len[i], 0, &re, err, sizeof err) != 0) {
            if (bad++ == 0)
                fprintf(stderr, "bench_trend_redis: event %zu does not decode: %s\n", i, err);
            continue;
        }
        long long pane = re.ts_ms - re.ts_ms % PANE_MS;
        if (cur < 0)
            cur = pane;
        if (no_slides)
            cur = pane;
        while (cur < pane && !p.failed) { /* one slide per boundary crossed */
            if (slide(&p, cur) != 0)
                break;
            slides++;
            cur += PANE_MS;
        }
        if (redisAppendCommand(c, "ZINCRBY trend:%lld 1 %s", pane, re.article_id) != REDIS_OK ||
            sent(&p) != 0)
            break;
    }
    if (!p.failed)
        drain(&p);
    double secs = bench_now_s() - t_start;
    if (p.failed || bad) {
        fprintf(stderr, "bench_trend_redis: run failed (%llu undecodable events)\n",
                (unsigned long long)bad);
        redisFree(c);
        nf_wl_events_free(&ev);
        return 1;
    }
    printf("{\"bench\":\"trend_redis\",\"events\":%zu,\"seconds\":%.3f,\"events_per_s\":%.0f,"
           "\"pipeline\":%zu,\"slides\":%llu,\"commands\":%llu,\"users\":%u,\"articles\":%u,"
           "\"zipf\":%g,\"span_hours\":%g}\n",
           ev.n, secs, (double)ev.n / secs, depth, (unsigned long long)slides,
           (unsigned long long)p.commands, users, articles, zipf, span_h);
    fflush(stdout);

    int rc = 0;
    if (check && check_window(c, &ev, articles, cur) != 0)
        rc = 1;
    redisFree(c);
    nf_wl_events_free(&ev);
    return rc;
}
