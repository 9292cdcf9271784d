/* testhttpc.c — see testhttpc.h. */
#include "testhttpc.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

nf_testhttpc_resp_t nf_testhttpc_raw(uint16_t port, const char *bytes, size_t n)
{
    nf_testhttpc_resp_t r = {0};
    struct sockaddr_in s4 = {.sin_family = AF_INET, .sin_port = htons(port)};
    s4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return r;
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&s4, sizeof s4) != 0) {
        close(fd);
        return r;
    }
    for (size_t at = 0; at < n;) {
        ssize_t k = send(fd, bytes + at, n - at, MSG_NOSIGNAL);
        if (k <= 0)
            break;
        at += (size_t)k;
    }
    size_t cap = 1 << 20, used = 0;
    char *buf = malloc(cap);
    ssize_t k;
    while (buf && used + 1 < cap && (k = read(fd, buf + used, cap - used - 1)) > 0)
        used += (size_t)k;
    close(fd);
    if (!buf)
        return r;
    buf[used] = '\0';
    char *sep = strstr(buf, "\r\n\r\n");
    if (sep && sscanf(buf, "HTTP/1.%*d %d", &r.status) == 1) {
        r.head = strndup(buf, (size_t)(sep - buf + 2));
        r.body = strdup(sep + 4);
    }
    free(buf);
    return r;
}

nf_testhttpc_resp_t nf_testhttpc(uint16_t port, const char *method, const char *path,
                                 const char *headers, const char *body, size_t len)
{
    size_t cap = len + strlen(path) + (headers ? strlen(headers) : 0) + 256;
    char *req = malloc(cap);
    if (!req)
        return (nf_testhttpc_resp_t){0};
    int h = snprintf(
        req, cap,
        "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%sContent-Length: %zu\r\n"
        "\r\n",
        method, path, headers ? headers : "", len);
    if (len)
        memcpy(req + h, body, len);
    nf_testhttpc_resp_t r = nf_testhttpc_raw(port, req, (size_t)h + len);
    free(req);
    return r;
}

bool nf_testhttpc_header(const nf_testhttpc_resp_t *r, const char *name, char *out, size_t outlen)
{
    size_t n = strlen(name);
    for (const char *p = r->head ? strstr(r->head, "\r\n") : NULL; p && p[2];
         p = strstr(p + 2, "\r\n")) {
        const char *line = p + 2;
        if (strncasecmp(line, name, n) == 0 && line[n] == ':') {
            const char *v = line + n + 1;
            while (*v == ' ')
                v++;
            const char *e = strstr(v, "\r\n");
            snprintf(out, outlen, "%.*s", (int)(e ? e - v : (long)strlen(v)), v);
            return true;
        }
    }
    return false;
}

void nf_testhttpc_free(nf_testhttpc_resp_t *r)
{
    free(r->head);
    free(r->body);
    memset(r, 0, sizeof *r);
}
