/* testhttpd.c — see testhttpd.h. Test infrastructure, not product code: simple over clever. */
#include "testhttpd.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

struct nf_testhttpd {
    struct MHD_Daemon *d;
    uint16_t port;
    char data_dir[512];
    unsigned change_every_s;
    _Atomic uint64_t requests;
    _Atomic int stopping;
};

static const char *rss_fmt = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                             "<rss version=\"2.0\"><channel><title>Source %s</title>"
                             "<link>http://news.example/%s/</link><description>test</description>"
                             "%s</channel></rss>\n";

static size_t make_feed(char *out, size_t n, const char *id, const char *link_id, unsigned v)
{
    char items[1024];
    size_t off = 0;
    for (int k = 0; k < 3; k++)
        off += (size_t)snprintf(items + off, sizeof items - off,
                                "<item><title>Story %d of %s (v%u)</title>"
                                "<link>http://news.example/%s/%d</link>"
                                "<pubDate>Sat, 21 Nov 2026 10:0%d:00 GMT</pubDate>"
                                "<description>Body %d &amp; more</description></item>",
                                k, id, v, link_id, k, k, k);
    return (size_t)snprintf(out, n, rss_fmt, id, id, items);
}

static enum MHD_Result send_buf(struct MHD_Connection *c, unsigned status, const char *type,
                                const void *buf, size_t len, const char *etag, const char *encoding)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)buf, MHD_RESPMEM_MUST_COPY);
    if (type)
        MHD_add_response_header(r, "Content-Type", type);
    if (etag)
        MHD_add_response_header(r, "ETag", etag);
    if (encoding)
        MHD_add_response_header(r, "Content-Encoding", encoding);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result redirect(struct MHD_Connection *c, unsigned status, const char *to)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, "Location", to);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

typedef struct {
    nf_testhttpd_t *s;
    int kind; /* 0 slow, 1 stall, 2 huge */
    uint64_t sent;
} stream_t;

static ssize_t stream_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
    stream_t *st = cls;
    if (atomic_load(&st->s->stopping))
        return MHD_CONTENT_READER_END_WITH_ERROR;
    if (st->kind == 0) { /* slow: 16 bytes per 100 ms, 160 bytes */
        if (pos >= 160)
            return MHD_CONTENT_READER_END_OF_STREAM;
        usleep(100000);
        size_t n = max < 16 ? max : 16;
        memset(buf, 'x', n);
        return (ssize_t)n;
    }
    if (st->kind == 1) { /* stall: nothing, in small sleeps so stop() is prompt */
        for (int i = 0; i < 300 && !atomic_load(&st->s->stopping); i++)
            usleep(100000);
        return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    /* huge */
    uint64_t total = 100ull << 20;
    if (pos >= total)
        return MHD_CONTENT_READER_END_OF_STREAM;
    size_t n = max;
    if (n > total - pos)
        n = (size_t)(total - pos);
    memset(buf, 'a', n);
    return (ssize_t)n;
}

static enum MHD_Result send_stream(struct MHD_Connection *c, nf_testhttpd_t *s, int kind,
                                   uint64_t size)
{
    stream_t *st = calloc(1, sizeof *st);
    st->s = s;
    st->kind = kind;
    struct MHD_Response *r = MHD_create_response_from_callback(size, 16384, stream_cb, st, free);
    MHD_add_response_header(r, "Content-Type", "application/rss+xml");
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_size, void **con_cls)
{
    nf_testhttpd_t *s = cls;
    (void)version;
    (void)upload;
    (void)upload_size;
    (void)con_cls;
    atomic_fetch_add(&s->requests, 1);
    if (strcmp(method, "GET") != 0)
        return send_buf(c, 405, "text/plain", "GET only\n", 9, NULL, NULL);
    char body[4096], etag[64], id[32];
    unsigned v = s->change_every_s ? (unsigned)(time(NULL) / s->change_every_s) : 0;
    if (sscanf(url, "/feed/%31[0-9].xml", id) == 1) {
        snprintf(etag, sizeof etag, "\"%s-v%u\"", id, v);
        const char *inm = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "If-None-Match");
        if (inm && strcmp(inm, etag) == 0) {
            struct MHD_Response *r =
                MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
            MHD_add_response_header(r, "ETag", etag);
            enum MHD_Result ret = MHD_queue_response(c, 304, r);
            MHD_destroy_response(r);
            return ret;
        }
        size_t n = make_feed(body, sizeof body, id, id, v);
        return send_buf(c, 200, "application/rss+xml", body, n, etag, NULL);
    }
    if (sscanf(url, "/shared/%31[0-9].xml", id) == 1) {
        size_t n = make_feed(body, sizeof body, id, "shared", 0);
        return send_buf(c, 200, "application/rss+xml", body, n, NULL, NULL);
    }
    if (!strcmp(url, "/slow"))
        return send_stream(c, s, 0, MHD_SIZE_UNKNOWN);
    if (!strcmp(url, "/stall"))
        return send_stream(c, s, 1, MHD_SIZE_UNKNOWN);
    if (!strcmp(url, "/huge"))
        return send_stream(c, s, 2, 100ull << 20);
    if (!strcmp(url, "/huge-chunked"))
        return send_stream(c, s, 2, MHD_SIZE_UNKNOWN);
    unsigned code;
    if (sscanf(url, "/status/%u", &code) == 1 && code >= 200 && code < 600)
        return send_buf(c, code, "text/plain", "status\n", 7, NULL, NULL);
    if (!strcmp(url, "/429") || !strcmp(url, "/503-date")) {
        bool is429 = url[1] == '4';
        struct MHD_Response *r =
            MHD_create_response_from_buffer(5, "busy\n", MHD_RESPMEM_PERSISTENT);
        if (is429) {
            MHD_add_response_header(r, "Retry-After", "120");
        } else {
            char date[64];
            time_t t = time(NULL) + 300;
            struct tm tm;
            gmtime_r(&t, &tm);
            strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
            MHD_add_response_header(r, "Retry-After", date);
        }
        enum MHD_Result ret = MHD_queue_response(c, is429 ? 429 : 503, r);
        MHD_destroy_response(r);
        return ret;
    }
    if (!strcmp(url, "/gzip")) {
        char plain[4096];
        size_t n = make_feed(plain, sizeof plain, "gz", "gz", 0);
        z_stream z = {0};
        deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
        z.next_in = (Bytef *)plain;
        z.avail_in = (uInt)n;
        z.next_out = (Bytef *)body;
        z.avail_out = sizeof body;
        deflate(&z, Z_FINISH);
        size_t out = sizeof body - z.avail_out;
        deflateEnd(&z);
        return send_buf(c, 200, "application/rss+xml", body, out, NULL, "gzip");
    }
    if (!strcmp(url, "/loop"))
        return redirect(c, 302, "/loop");
    if (!strcmp(url, "/to-private"))
        return redirect(c, 302, "http://10.255.255.1/feed.xml");
    if (!strcmp(url, "/redirect"))
        return redirect(c, 301, "/feed/1.xml");
    if (!strcmp(url, "/html")) {
        const char *h = "<!DOCTYPE html><html><head><title>Not a feed</title></head>"
                        "<body><p>Hello</p></body></html>";
        return send_buf(c, 200, "text/html", h, strlen(h), NULL, NULL);
    }
    if (!strncmp(url, "/file/", 6) && !strstr(url, "..")) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", s->data_dir, url + 6);
        FILE *f = fopen(path, "rb");
        if (f) {
            static char fbuf[1 << 20];
            size_t n = fread(fbuf, 1, sizeof fbuf, f);
            fclose(f);
            return send_buf(c, 200, "application/xml", fbuf, n, NULL, NULL);
        }
    }
    return send_buf(c, 404, "text/plain", "not found\n", 10, NULL, NULL);
}

nf_testhttpd_t *nf_testhttpd_start(const char *data_dir, unsigned change_every_s)
{
    nf_testhttpd_t *s = calloc(1, sizeof *s);
    snprintf(s->data_dir, sizeof s->data_dir, "%s",
             data_dir ? data_dir : NF_SOURCE_DIR "/tests/data/feeds");
    s->change_every_s = change_every_s;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    s->d =
        MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL,
                         NULL, handler, s, MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_CONNECTION_TIMEOUT,
                         (unsigned)60, MHD_OPTION_CONNECTION_LIMIT, (unsigned)4096, MHD_OPTION_END);
    if (!s->d) {
        free(s);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : 0;
    return s;
}

uint16_t nf_testhttpd_port(const nf_testhttpd_t *s)
{
    return s->port;
}

uint64_t nf_testhttpd_requests(const nf_testhttpd_t *s)
{
    return atomic_load(&s->requests);
}

void nf_testhttpd_stop(nf_testhttpd_t *s)
{
    if (!s)
        return;
    atomic_store(&s->stopping, 1);
    MHD_stop_daemon(s->d);
    free(s);
}
