/* bench_auth — what verifying a reader's token costs (src/serve/auth.h, issue 38), in process.
 *
 *   bench_auth [--seconds S] [--threads LIST] [--algs LIST] [--quick]
 *
 * Keys are made here by OpenSSL and written to a temporary directory as an operator would give
 * them: an HS256 secret file (48 random bytes), an RSA-2048 public key PEM (RS256) and an EC
 * P-256 public key PEM (ES256); one nf_auth_t per algorithm. Tokens are signed here by OpenSSL
 * with the private keys (HMAC-SHA256, RSASSA-PKCS1-v1_5 SHA-256, ECDSA P-256 SHA-256 with its
 * (r, s) as 64 bytes), all before any timing: {"alg", "typ":"JWT"} and {"sub", "iat", "exp" an
 * hour ahead, "jti" a counter}, so no two tokens have the same text.
 *
 * For each algorithm and each thread count, nf_auth_verify("Bearer <token>") as the guard
 * calls it (sub wanted, an error buffer), in three cases:
 *   miss    a token never seen before on every call (the cache of verified tokens misses:
 *           the whole check, then the token is remembered);
 *   hit     one token, verified once untimed, then again and again (a hash and a lookup);
 *   forged  one token whose signature's first base64url character is changed (refused,
 *           NF_AUTH_ESIGNATURE, never remembered: the whole check up to the signature).
 * --threads: thread counts (default 1,2); --algs: of hs256, rs256, es256 (default all three).
 * Each case runs S seconds per thread (default 2; --quick 0.5), or until its tokens run out
 * (miss: pools made beforehand, sized for the case). Every answer is checked (the subject, or
 * the refusal's code); a wrong one is counted and makes the exit status 1.
 *
 * One JSON line per figure ("bench":"auth_verify"): alg, case, threads, verifies, seconds (wall),
 * verifies_per_s (all threads), us_per_verify (the mean time of one call in its thread),
 * p50_us / p99_us (each call timed, read back from 2 %-wide buckets), cpu_us_per_verify (the
 * process's CPU over the case / verifies); and one "auth_env" line first. Progress goes to stderr.
 * Nothing is judged. */
#include "serve/auth.h"
#include "testb64.h"

#include "../bench_clock.h"
#include <errno.h>
#include <math.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS  16
#define HIST_BUCKETS 1400 /* 2 % wide from 10 ns: up to ~10 s */

/* A call's time in ns to its bucket: 2 % wide, so a percentile read back is within 2 %. */
static size_t hist_bucket(double ns)
{
    if (ns <= 10)
        return 0;
    size_t b = (size_t)(log(ns / 10) / log(1.02)) + 1;
    return b < HIST_BUCKETS ? b : HIST_BUCKETS - 1;
}

/* The bucket's upper bound in us. */
static double hist_us(size_t b)
{
    return 10 * pow(1.02, (double)b) / 1e3;
}

static void die(const char *what)
{
    fprintf(stderr, "bench_auth: %s\n", what);
    exit(1);
}

/* ---- keys, files, tokens ---- */

static char dir[64];
static unsigned char secret[48];
static EVP_PKEY *rsa, *ec;

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0)
        die("cannot write a key file");
}

static void write_pub(const char *path, EVP_PKEY *pk)
{
    FILE *f = fopen(path, "w");
    if (!f || PEM_write_PUBKEY(f, pk) != 1 || fclose(f) != 0)
        die("cannot write a PEM public key");
}

typedef enum { HS256, RS256, ES256, NALGS } alg_t;
static const char *const alg_names[NALGS] = {"hs256", "rs256", "es256"};
static const char *const alg_jose[NALGS] = {"HS256", "RS256", "ES256"};

/* The signature of msg[0..n) by alg, raw (JWS form), into sig; its length. */
static size_t sign_raw(alg_t alg, const char *msg, size_t n, unsigned char *sig)
{
    if (alg == HS256) {
        unsigned len = 0;
        if (!HMAC(EVP_sha256(), secret, sizeof secret, (const unsigned char *)msg, n, sig, &len))
            die("HMAC failed");
        return len;
    }
    unsigned char der[512];
    size_t dlen = sizeof der;
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    if (!c || EVP_DigestSignInit(c, NULL, EVP_sha256(), NULL, alg == RS256 ? rsa : ec) != 1 ||
        EVP_DigestSign(c, der, &dlen, (const unsigned char *)msg, n) != 1)
        die("EVP_DigestSign failed");
    EVP_MD_CTX_free(c);
    if (alg == RS256) {
        memcpy(sig, der, dlen);
        return dlen;
    }
    const unsigned char *p = der; /* ECDSA: DER (r, s) to r || s, 32 bytes each */
    ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &p, (long)dlen);
    if (!es || BN_bn2binpad(ECDSA_SIG_get0_r(es), sig, 32) != 32 ||
        BN_bn2binpad(ECDSA_SIG_get0_s(es), sig + 32, 32) != 32)
        die("ECDSA signature conversion failed");
    ECDSA_SIG_free(es);
    return 64;
}

/* "Bearer <token>" for sub with jti, malloc'd. */
static char *make_token(alg_t alg, const char *sub, uint64_t jti, int64_t now)
{
    char head[64], body[256], buf[1024];
    int hl = snprintf(head, sizeof head, "{\"alg\":\"%s\",\"typ\":\"JWT\"}", alg_jose[alg]);
    int bl =
        snprintf(body, sizeof body, "{\"sub\":\"%s\",\"iat\":%lld,\"exp\":%lld,\"jti\":\"%llu\"}",
                 sub, (long long)now, (long long)now + 3600, (unsigned long long)jti);
    size_t n = (size_t)snprintf(buf, sizeof buf, "Bearer ");
    size_t start = n;
    n += nf_test_b64url((const unsigned char *)head, (size_t)hl, buf + n);
    buf[n++] = '.';
    n += nf_test_b64url((const unsigned char *)body, (size_t)bl, buf + n);
    unsigned char sig[512];
    size_t sl = sign_raw(alg, buf + start, n - start, sig);
    buf[n++] = '.';
    nf_test_b64url(sig, sl, buf + n);
    char *t = strdup(buf);
    if (!t)
        die("out of memory");
    return t;
}

/* ---- one case ---- */

typedef enum { MISS, HIT, FORGED, NCASES } case_t;
static const char *const case_names[NCASES] = {"miss", "hit", "forged"};

typedef struct {
    const nf_auth_t *auth;
    case_t kase;
    char **tokens;        /* miss: this thread's own; hit, forged: tokens[0] */
    size_t ntokens, base; /* miss: tokens[k] is the pool's base + k, for user_of */
    double seconds;
    int64_t now;
    uint64_t *hist; /* calls by time, HIST_BUCKETS log buckets (hist_bucket) */
    size_t done, wrong;
    double wall;
    char first_err[320];
} worker_t;

static const char *user_of(size_t i)
{
    static __thread char u[32];
    snprintf(u, sizeof u, "u%zu", i % 10000);
    return u;
}

static void *work(void *arg)
{
    worker_t *w = arg;
    char sub[NF_AUTH_SUB_MAX + 1], err[256];
    double t0 = bench_now_s(), end = t0 + w->seconds, t = t0;
    size_t i = 0;
    for (; t < end; i++) {
        size_t k = w->kase == MISS ? i : 0;
        if (k >= w->ntokens)
            break;
        double a = bench_now_s();
        int rc = nf_auth_verify(w->auth, w->tokens[k], w->now, sub, sizeof sub, err, sizeof err);
        t = bench_now_s();
        w->hist[hist_bucket((t - a) * 1e9)]++;
        bool ok = w->kase == FORGED ? rc == NF_AUTH_ESIGNATURE : rc == 0;
        if (ok && w->kase != FORGED) /* the reader the token was made for */
            ok = strcmp(sub, w->kase == MISS ? user_of(w->base + k) : "u42") == 0;
        if (!ok && w->wrong++ == 0)
            snprintf(w->first_err, sizeof w->first_err, "rc %d (%s): %s", rc,
                     nf_auth_error_name(rc), err);
    }
    w->done = i;
    w->wall = t - t0;
    return NULL;
}

/* Runs one case on nthreads threads; prints its JSON line; returns the wrong answers. */
static size_t run_case(const nf_auth_t *auth, alg_t alg, case_t kase, int nthreads, char **pool,
                       size_t npool, double seconds, int64_t now)
{
    worker_t w[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    size_t per = kase == MISS ? npool / (size_t)nthreads : 1;
    for (int i = 0; i < nthreads; i++) {
        w[i] = (worker_t){.auth = auth,
                          .kase = kase,
                          .tokens = kase == MISS ? pool + (size_t)i * per : pool,
                          .ntokens = per,
                          .base = kase == MISS ? (size_t)i * per : 0,
                          .seconds = seconds,
                          .now = now,
                          .hist = calloc(HIST_BUCKETS, sizeof(uint64_t))};
        if (!w[i].hist)
            die("out of memory");
    }
    double c0 = bench_cpu_s(), t0 = bench_now_s();
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&th[i], NULL, work, &w[i]) != 0)
            die("pthread_create failed");
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    double wall = bench_now_s() - t0, cpu = bench_cpu_s() - c0;
    size_t done = 0, wrong = 0;
    double busy = 0;
    for (int i = 0; i < nthreads; i++)
        done += w[i].done, wrong += w[i].wrong, busy += w[i].wall;
    uint64_t hist[HIST_BUCKETS] = {0};
    for (int i = 0; i < nthreads; i++)
        for (size_t b = 0; b < HIST_BUCKETS; b++)
            hist[b] += w[i].hist[b];
    double p50 = 0, p99 = 0;
    uint64_t seen = 0;
    for (size_t b = 0; b < HIST_BUCKETS && done; b++) {
        if (seen < (done + 1) / 2 && seen + hist[b] >= (done + 1) / 2)
            p50 = hist_us(b);
        if (seen < done - done / 100 && seen + hist[b] >= done - done / 100)
            p99 = hist_us(b);
        seen += hist[b];
    }
    printf("{\"bench\":\"auth_verify\",\"alg\":\"%s\",\"case\":\"%s\",\"threads\":%d,"
           "\"verifies\":%zu,\"seconds\":%.3f,\"verifies_per_s\":%.0f,\"us_per_verify\":%.3f,"
           "\"p50_us\":%.3f,\"p99_us\":%.3f,\"cpu_us_per_verify\":%.3f,\"wrong\":%zu}\n",
           alg_names[alg], case_names[kase], nthreads, done, wall, done ? done / wall : 0,
           done ? busy * 1e6 / (double)done : 0, p50, p99, done ? cpu * 1e6 / (double)done : 0,
           wrong);
    fflush(stdout);
    for (int i = 0; i < nthreads; i++) {
        if (w[i].wrong)
            fprintf(stderr, "bench_auth: %s %s, thread %d: %zu wrong answers, the first %s\n",
                    alg_names[alg], case_names[kase], i, w[i].wrong, w[i].first_err);
        free(w[i].hist);
    }
    return wrong;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_auth [--seconds S] [--threads LIST] [--algs LIST] [--quick]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    double seconds = 2;
    int threads[MAX_THREADS], nthr = 0;
    const char *tlist = "1,2", *algs = "hs256,rs256,es256";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            tlist = argv[++i];
        else if (strcmp(argv[i], "--algs") == 0 && i + 1 < argc)
            algs = argv[++i];
        else if (strcmp(argv[i], "--quick") == 0)
            seconds = 0.5;
        else
            usage();
    }
    for (const char *p = tlist; *p && nthr < MAX_THREADS;) {
        char *end;
        long t = strtol(p, &end, 10);
        if (end == p || t < 1 || t > MAX_THREADS)
            usage();
        threads[nthr++] = (int)t;
        p = *end == ',' ? end + 1 : end;
    }
    if (seconds <= 0 || nthr == 0)
        usage();
    for (const char *p = algs; *p;) { /* every name in algs is one of alg_names */
        size_t n = strcspn(p, ",");
        bool known = false;
        for (int a = 0; a < NALGS; a++)
            known |= n == strlen(alg_names[a]) && strncmp(p, alg_names[a], n) == 0;
        if (!known)
            usage();
        p += n + (p[n] == ',');
    }

    snprintf(dir, sizeof dir, "/tmp/nf_bench_auth_XXXXXX");
    if (!mkdtemp(dir))
        die("mkdtemp failed");
    char secret_file[128], rsa_file[128], ec_file[128];
    snprintf(secret_file, sizeof secret_file, "%s/secret", dir);
    snprintf(rsa_file, sizeof rsa_file, "%s/rsa.pem", dir);
    snprintf(ec_file, sizeof ec_file, "%s/ec.pem", dir);
    /* printable, so that no byte of it is a newline the loader would strip */
    if (RAND_bytes(secret, sizeof secret) != 1)
        die("RAND_bytes failed");
    for (size_t i = 0; i < sizeof secret; i++)
        secret[i] = (unsigned char)('a' + secret[i] % 26);
    write_file(secret_file, secret, sizeof secret);
    rsa = EVP_RSA_gen(2048);
    ec = EVP_EC_gen("P-256");
    if (!rsa || !ec)
        die("key generation failed");
    write_pub(rsa_file, rsa);
    write_pub(ec_file, ec);

    char err[512];
    nf_auth_t *auth[NALGS];
    const nf_auth_opts_t opts[NALGS] = {{.hs256_secret_file = secret_file},
                                        {.public_key_file = rsa_file},
                                        {.public_key_file = ec_file}};
    for (int a = 0; a < NALGS; a++)
        if (!(auth[a] = nf_auth_new(&opts[a], err, sizeof err)))
            die(err);
    char desc[512];
    nf_auth_describe(auth[RS256], desc, sizeof desc);
    fprintf(stderr, "bench_auth: keys in %s; %s\n", dir, desc);

    int64_t now = (int64_t)time(NULL);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    printf("{\"bench\":\"auth_env\",\"cpus\":%ld,\"seconds\":%.2f,\"rsa_bits\":2048,"
           "\"ec_curve\":\"P-256\",\"cache_slots\":4096}\n",
           ncpu, seconds);

    /* miss pools: enough distinct tokens for `seconds` at a generous rate per thread (HS256
     * ~15 us a verification, RS256/ES256 ~1 ms), for each thread count, each pool used once (a
     * case that runs out of tokens ends early and is measured over what it did) */
    uint64_t jti = 0;
    size_t wrong = 0;
    for (int a = 0; a < NALGS; a++) {
        bool wanted = false; /* alg_names[a] is one of the comma-separated names in algs */
        for (const char *p = algs; *p;) {
            size_t n = strcspn(p, ",");
            wanted |= n == strlen(alg_names[a]) && strncmp(p, alg_names[a], n) == 0;
            p += n + (p[n] == ',');
        }
        for (int ti = 0; ti < nthr && wanted; ti++) {
            int nt = threads[ti];
            size_t rate = a == HS256 ? 100000 : 1500;
            size_t npool = (size_t)(seconds * (double)rate) * (size_t)nt + (size_t)nt;
            char **pool = malloc(npool * sizeof *pool);
            if (!pool)
                die("out of memory");
            double g0 = bench_now_s();
            for (size_t i = 0; i < npool; i++)
                pool[i] = make_token((alg_t)a, user_of(i), ++jti, now);
            fprintf(stderr, "bench_auth: %s: %zu tokens signed in %.1f s\n", alg_names[a], npool,
                    bench_now_s() - g0);
            wrong += run_case(auth[a], (alg_t)a, MISS, nt, pool, npool, seconds, now);
            for (size_t i = 0; i < npool; i++)
                free(pool[i]);
            free(pool);

            char *one = make_token((alg_t)a, "u42", ++jti, now);
            if (nf_auth_verify(auth[a], one, now, NULL, 0, err, sizeof err) != 0)
                die(err); /* untimed: the first verification puts it in the cache */
            wrong += run_case(auth[a], (alg_t)a, HIT, nt, &one, 1, seconds, now);

            /* the signature's first character changed: still canonical base64url, the right
             * length, a different signature */
            char *sig = strrchr(one, '.') + 1;
            sig[0] = sig[0] == 'A' ? 'B' : 'A';
            wrong += run_case(auth[a], (alg_t)a, FORGED, nt, &one, 1, seconds, now);
            free(one);
        }
    }
    for (int a = 0; a < NALGS; a++)
        nf_auth_free(auth[a]);
    EVP_PKEY_free(rsa), EVP_PKEY_free(ec);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_auth: could not remove %s\n", dir);
    return wrong ? 1 : 0;
}
