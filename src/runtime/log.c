/* log.c — see log.h. Formatting is done by hand into a fixed buffer: no allocation, and a
 * line is either written whole or cut with a trailing "truncated":true marker. */
#include "runtime/log.h"

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

void nf_log(nf_log_level_t level, const char *component, const char *msg, ...)
{
    if (!nf_log_enabled(level))
        return;
    nf_log_buf_t b;
    b.len = 0;
    b.cut = false;

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
    if (nf_log_shard >= 0) {
        n = snprintf(tmp, sizeof tmp, "\",\"shard\":%d", nf_log_shard);
        lb_raw(&b, tmp, (size_t)n);
    } else {
        lb_str(&b, "\",\"shard\":null");
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

    va_list ap;
    va_start(ap, msg);
    for (;;) {
        int type = va_arg(ap, int);
        if (type == NF_LOG_FIELD_END)
            break;
        const char *key = va_arg(ap, const char *);
        mark = b.len;
        lb_raw(&b, ",", 1);
        lb_json(&b, key);
        lb_raw(&b, ":", 1);
        if (type == NF_LOG_FIELD_STR) {
            lb_json(&b, va_arg(ap, const char *));
        } else if (type == NF_LOG_FIELD_INT) {
            n = snprintf(tmp, sizeof tmp, "%lld", va_arg(ap, long long));
            lb_raw(&b, tmp, (size_t)n);
        } else {
            double d = va_arg(ap, double);
            n = snprintf(tmp, sizeof tmp, "%.6g", d);
            /* JSON has no NaN/Inf. */
            if (d != d || d - d != 0)
                lb_str(&b, "null");
            else
                lb_raw(&b, tmp, (size_t)n);
        }
        if (b.cut) { /* drop the half-written field and every later one */
            b.len = mark;
            break;
        }
    }
    va_end(ap);

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
