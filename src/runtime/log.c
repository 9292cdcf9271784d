/* log.c — see log.h. Formatting is done by hand into a fixed buffer: no allocation, and a
 * line is either written whole or cut with a trailing "truncated":true marker. */
#include "runtime/log.h"
#include "runtime/runtime.h" /* nf_now_ns */

#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NF_LOG_LINE_MAX 4096

static _Atomic int nf_log_threshold = NF_LOG_INFO;
static _Atomic int nf_log_fd = 2;
static _Thread_local int nf_log_shard = -1;

static const char *const nf_log_names[] = {"debug", "info", "warn", "error"};

void nf_log_set_level(nf_log_level_t level)
{
    atomic_store_explicit(&nf_log_threshold, (int)level, memory_order_relaxed);
}

bool nf_log_enabled(nf_log_level_t level)
{
    return (int)level >= atomic_load_explicit(&nf_log_threshold, memory_order_relaxed);
}

int nf_log_level_parse(const char *s, nf_log_level_t *out)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, nf_log_names[i]) == 0) {
            *out = (nf_log_level_t)i;
            return 0;
        }
    }
    return -1;
}

const char *nf_log_level_name(nf_log_level_t level)
{
    return (unsigned)level < 4 ? nf_log_names[level] : "?";
}

void nf_log_set_thread_shard(int shard)
{
    nf_log_shard = shard;
}

void nf_log_set_fd(int fd)
{
    atomic_store_explicit(&nf_log_fd, fd, memory_order_relaxed);
}

typedef struct {
    char buf[NF_LOG_LINE_MAX];
    size_t len;
    bool cut;
} nf_log_buf_t;

/* Leave room for the closing `,"truncated":true}\n`. */
#define NF_LOG_RESERVE 24

static void lb_raw(nf_log_buf_t *b, const char *s, size_t n)
{
    if (b->cut)
        return;
    if (b->len + n > NF_LOG_LINE_MAX - NF_LOG_RESERVE) {
        b->cut = true;
        return;
    }
    memcpy(b->buf + b->len, s, n);
    b->len += n;
}

static void lb_str(nf_log_buf_t *b, const char *s)
{
    lb_raw(b, s, strlen(s));
}

/* JSON string with escapes; bytes >= 0x80 pass through (callers log UTF-8). */
static void lb_json(nf_log_buf_t *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    lb_raw(b, "\"", 1);
    if (!s)
        s = "";
    for (const unsigned char *p = (const unsigned char *)s; *p && !b->cut; p++) {
        char esc[6];
        switch (*p) {
        case '"':
            lb_raw(b, "\\\"", 2);
            break;
        case '\\':
            lb_raw(b, "\\\\", 2);
            break;
        case '\n':
            lb_raw(b, "\\n", 2);
            break;
        case '\r':
            lb_raw(b, "\\r", 2);
            break;
        case '\t':
            lb_raw(b, "\\t", 2);
            break;
        default:
            if (*p < 0x20) {
                memcpy(esc, "\\u00", 4);
                esc[4] = hex[*p >> 4];
                esc[5] = hex[*p & 15];
                lb_raw(b, esc, 6);
            } else {
                lb_raw(b, (const char *)p, 1);
            }
        }
    }
    lb_raw(b, "\"", 1);
}

/* The line's own keys; a caller's field of the same name would duplicate them. */
static const char *const nf_log_header_keys[] = {"ts", "level", "shard", "component", "msg"};

/* The keys a line has written so far (each as written, NUL-separated). */
typedef struct nf_log_keys {
    char buf[1024];
    size_t len;
} nf_log_keys_t;

static bool key_taken(const nf_log_keys_t *ks, const char *key)
{
    for (size_t i = 0; i < sizeof nf_log_header_keys / sizeof *nf_log_header_keys; i++)
        if (strcmp(nf_log_header_keys[i], key) == 0)
            return true;
    for (size_t i = 0; i < ks->len; i += strlen(ks->buf + i) + 1)
        if (strcmp(ks->buf + i, key) == 0)
            return true;
    return false;
}

/* Writes "key": with the key made unique in the line: many log pipelines reject or mangle
 * duplicate keys, so a repeat is written as "<key>_2" (then _3...). */
static void lb_key(nf_log_buf_t *b, nf_log_keys_t *ks, const char *key)
{
    char alt[80]; /* 56 bytes of the key, "_", up to 11 digits */
    const char *k = key;
    for (int n = 2; key_taken(ks, k) && n < 100; n++) {
        snprintf(alt, sizeof alt, "%.56s_%d", key, n);
        k = alt;
    }
    size_t l = strlen(k) + 1;
    if (ks->len + l <= sizeof ks->buf) {
        memcpy(ks->buf + ks->len, k, l);
        ks->len += l;
    }
    lb_raw(b, ",", 1);
    lb_json(b, k);
    lb_raw(b, ":", 1);
}

#define NF_LOG_FIELDS_MAX 32

typedef struct nf_log_field {
    int type; /* NF_LOG_FIELD_* */
    const char *key, *s;
    long long i;
    double d;
} nf_log_field_t;

/* The context fields of a call, in order; those beyond cap are dropped (no caller has as many). */
static size_t read_fields(va_list ap, nf_log_field_t *f, size_t cap)
{
    size_t n = 0;
    for (;;) {
        int type = va_arg(ap, int);
        if (type == NF_LOG_FIELD_END)
            return n;
        nf_log_field_t x = {.type = type, .key = va_arg(ap, const char *)};
        if (type == NF_LOG_FIELD_STR)
            x.s = va_arg(ap, const char *);
        else if (type == NF_LOG_FIELD_INT)
            x.i = va_arg(ap, long long);
        else
            x.d = va_arg(ap, double);
        if (n < cap)
            f[n++] = x;
    }
}

void nf_log(nf_log_level_t level, const char *component, const char *msg, ...)
{
    if (!nf_log_enabled(level))
        return;
    nf_log_buf_t b;
    b.len = 0;
    b.cut = false;

    nf_log_field_t f[NF_LOG_FIELDS_MAX];
    va_list ap;
    va_start(ap, msg);
    size_t nf = read_fields(ap, f, NF_LOG_FIELDS_MAX);
    va_end(ap);
    /* A "shard" field names the shard the line is about: it fills the header's shard (null on
     * threads that are not shards) instead of repeating the key. */
    long long about_shard = -1;
    bool has_about = false;
    for (size_t i = 0; i < nf && !has_about; i++)
        if (f[i].type == NF_LOG_FIELD_INT && strcmp(f[i].key, "shard") == 0) {
            about_shard = f[i].i;
            has_about = true;
        }

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char tmp[64];
    int n = snprintf(tmp, sizeof tmp, "{\"ts\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ\"",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000);
    lb_raw(&b, tmp, (size_t)n);
    lb_str(&b, ",\"level\":\"");
    lb_str(&b, nf_log_level_name(level));
    long long shard = has_about ? about_shard : nf_log_shard;
    if (shard >= 0) {
        n = snprintf(tmp, sizeof tmp, "\",\"shard\":%lld", shard);
        lb_raw(&b, tmp, (size_t)n);
    } else {
        lb_str(&b, "\",\"shard\":null");
    }
    if (has_about && nf_log_shard >= 0 && nf_log_shard != about_shard) {
        n = snprintf(tmp, sizeof tmp, ",\"thread_shard\":%d", nf_log_shard);
        lb_raw(&b, tmp, (size_t)n);
    }
    lb_str(&b, ",\"component\":");
    lb_json(&b, component);
    lb_str(&b, ",\"msg\":");
    size_t mark = b.len;
    lb_json(&b, msg);
    if (b.cut) { /* an over-long message keeps its start, still valid JSON */
        b.len = mark;
        b.cut = false;
        char head[256];
        snprintf(head, sizeof head, "%s", msg);
        lb_json(&b, head);
        b.cut = true;
    }

    nf_log_keys_t ks;
    ks.len = 0;
    bool about_done = false;
    for (size_t fi = 0; fi < nf; fi++) {
        int type = f[fi].type;
        const char *key = f[fi].key, *sv = f[fi].s;
        long long iv = f[fi].i;
        double dv = f[fi].d;
        if (type == NF_LOG_FIELD_INT && !about_done && strcmp(key, "shard") == 0) {
            about_done = true; /* written in the header */
            continue;
        }
        mark = b.len;
        lb_key(&b, &ks, key);
        if (type == NF_LOG_FIELD_STR) {
            lb_json(&b, sv);
        } else if (type == NF_LOG_FIELD_INT) {
            /* INT64_MIN/MAX are "none" sentinels in the callers' structs: say null */
            if (iv == LLONG_MIN || iv == LLONG_MAX) {
                lb_str(&b, "null");
            } else {
                n = snprintf(tmp, sizeof tmp, "%lld", iv);
                lb_raw(&b, tmp, (size_t)n);
            }
            if (strcmp(key, "errno") == 0 && iv > 0 && iv < 4096) {
                const char *name = strerrorname_np((int)iv);
                lb_key(&b, &ks, "errno_name");
                lb_json(&b, name ? name : "unknown");
            }
        } else {
            n = snprintf(tmp, sizeof tmp, "%.6g", dv);
            /* JSON has no NaN/Inf. */
            if (dv != dv || dv - dv != 0)
                lb_str(&b, "null");
            else
                lb_raw(&b, tmp, (size_t)n);
        }
        if (b.cut) { /* drop the half-written field and every later one */
            b.len = mark;
            break;
        }
    }

    if (b.cut) {
        /* The reserve guarantees room for the marker. */
        memcpy(b.buf + b.len, ",\"truncated\":true", 17);
        b.len += 17;
    }
    b.buf[b.len++] = '}';
    b.buf[b.len++] = '\n';
    ssize_t w = write(atomic_load_explicit(&nf_log_fd, memory_order_relaxed), b.buf, b.len);
    (void)w;
}

/* Howard Hinnant's days_from_civil inverse: days since 1970-01-01 to y-m-d (no locale, no
 * library call, so usable in a signal handler). */
static void civil_from_days(long long z, int *y, unsigned *m, unsigned *d)
{
    z += 719468;
    long long era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    long long yy = (long long)yoe + era * 400;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int)(yy + (*m <= 2));
}

static void put_num(nf_log_buf_t *b, unsigned long long v, int width)
{
    char d[24];
    int n = 0;
    do {
        d[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v && n < 20);
    while (n < width)
        d[n++] = '0';
    while (n > 0)
        lb_raw(b, &d[--n], 1);
}

void nf_log_signal_safe(nf_log_level_t level, const char *component, const char *msg)
{
    if (!nf_log_enabled(level))
        return;
    nf_log_buf_t b;
    b.len = 0;
    b.cut = false;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long days = ts.tv_sec / 86400, secs = ts.tv_sec % 86400;
    int y;
    unsigned mo, d;
    civil_from_days(days, &y, &mo, &d);
    lb_str(&b, "{\"ts\":\"");
    put_num(&b, (unsigned long long)y, 4);
    lb_raw(&b, "-", 1);
    put_num(&b, mo, 2);
    lb_raw(&b, "-", 1);
    put_num(&b, d, 2);
    lb_raw(&b, "T", 1);
    put_num(&b, (unsigned long long)(secs / 3600), 2);
    lb_raw(&b, ":", 1);
    put_num(&b, (unsigned long long)(secs / 60 % 60), 2);
    lb_raw(&b, ":", 1);
    put_num(&b, (unsigned long long)(secs % 60), 2);
    lb_raw(&b, ".", 1);
    put_num(&b, (unsigned long long)(ts.tv_nsec / 1000000), 3);
    lb_str(&b, "Z\",\"level\":\"");
    lb_str(&b, nf_log_level_name(level));
    lb_str(&b, "\",\"shard\":null,\"component\":");
    lb_json(&b, component);
    lb_str(&b, ",\"msg\":");
    lb_json(&b, msg);
    b.buf[b.len++] = '}';
    b.buf[b.len++] = '\n';
    ssize_t w = write(atomic_load_explicit(&nf_log_fd, memory_order_relaxed), b.buf, b.len);
    (void)w;
}

bool nf_log_gate_pass(nf_log_gate_t *g, uint64_t every_ns, uint64_t *held)
{
    uint64_t now = nf_now_ns(), last = atomic_load(&g->last_ns);
    if (last && now - last < every_ns) {
        atomic_fetch_add(&g->held, 1);
        return false;
    }
    atomic_store(&g->last_ns, now);
    *held = atomic_exchange(&g->held, 0);
    return true;
}

static _Atomic unsigned g_sample_every = 1000;

void nf_log_set_sample_every(unsigned every)
{
    atomic_store_explicit(&g_sample_every, every ? every : 1, memory_order_relaxed);
}

bool nf_log_sampled(nf_log_sampler_t *s, unsigned scale, bool traced)
{
    uint64_t every =
        (uint64_t)atomic_load_explicit(&g_sample_every, memory_order_relaxed) * (scale ? scale : 1);
    return traced || s->n++ % every == 0;
}
