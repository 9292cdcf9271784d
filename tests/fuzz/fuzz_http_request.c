/* fuzz_http_request.c — libFuzzer target for the request path of the shards' HTTP server
 * (src/runtime/http_msg.c: http_parser and what builds a request from it; the accessors the
 * hooks read, src/runtime/admin_respond.c). abort()s when:
 *   - the bytes fed in pieces (sizes from the input's first byte) give other requests than the
 *     same bytes fed at once, or a refusal where those give none: a request must not depend on
 *     how TCP cut it (which limit a refused request meets first may: http_parser reports a
 *     piece of a header when its input ends, so the head's length is checked sooner);
 *   - a request breaks the limits (headers, body), or its path holds a NUL without being
 *     marked, or an argument's accessor does not find the first value of that name. */
#include "runtime/admin_req.h"
#include "runtime/http_msg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_http_request: %s\n", what);
    abort();
}

typedef struct {
    char *s;
    size_t len, cap;
} digest_t;

static void add(digest_t *d, const char *p, size_t n)
{
    if (d->len + n + 1 > d->cap) {
        d->cap = (d->len + n + 1) * 2;
        d->s = realloc(d->s, d->cap);
        if (!d->s)
            abort();
    }
    memcpy(d->s + d->len, p, n);
    d->len += n;
    d->s[d->len] = '\0';
}

static void adds(digest_t *d, const char *s)
{
    add(d, s, strlen(s));
    add(d, "|", 1);
}

static void check(const nf_http_msg_t *m, const nf_http_limits_t *lim, digest_t *d)
{
    if (m->nhdr > NF_HTTP_MAX_HEADERS || m->nargs > NF_HTTP_MAX_ARGS || m->body_len > lim->max_body)
        fail("a request past its limits");
    nf_admin_req_t req = {.msg = m};
    adds(d, m->method);
    adds(d, m->path);
    for (unsigned i = 0; i < m->nhdr; i++) {
        adds(d, m->hdr[i].name);
        adds(d, m->hdr[i].value);
        if (!nf_admin_req_header_in(&req, m->hdr[i].name))
            fail("a header the accessor does not find");
    }
    for (unsigned i = 0; i < m->nargs; i++) {
        const char *v = nf_admin_req_arg(&req, m->arg[i].name);
        unsigned first = 0;
        while (strcmp(m->arg[first].name, m->arg[i].name) != 0)
            first++;
        const char *want = m->arg_nul[first] ? "\x7f" : m->arg[first].value;
        if (!v || strcmp(v, want) != 0)
            fail("an argument's accessor does not give the first value of its name");
        adds(d, m->arg[i].name);
        adds(d, m->arg[i].value);
    }
    add(d, m->body, m->body_len);
    adds(d, m->keep_alive ? "keep" : "close");
}

/* Feeds data in pieces of `piece` bytes (0: at once); the requests and the end, digested. */
static void run(const uint8_t *data, size_t size, size_t piece, digest_t *d)
{
    nf_http_limits_t lim = {.max_head = 2048, .max_body = 4096};
    nf_http_parser_t hp;
    nf_http_parser_init(&hp, &lim);
    size_t off = 0;
    while (off < size) {
        size_t n = piece && size - off > piece ? piece : size - off;
        const char *p = (const char *)data + off;
        size_t left = n, used;
        for (;;) {
            nf_http_step_t st = nf_http_parse(&hp, p, left, &used);
            if (st == NF_HTTP_ERROR) {
                if (hp.status < 400 || hp.status > 599)
                    fail("a refusal without a 4xx or 5xx status");
                adds(d, "error");
                nf_http_parser_free(&hp);
                return;
            }
            if (used > left)
                fail("the parser took more bytes than it was given");
            p += used;
            left -= used;
            if (st == NF_HTTP_REQUEST)
                check(&hp.msg, &lim, d);
            if (!left)
                break;
            if (st != NF_HTTP_REQUEST && st != NF_HTTP_CONTINUE)
                fail("bytes left over without a request");
        }
        off += n;
    }
    adds(d, nf_http_parser_busy(&hp) ? "partial" : "end");
    nf_http_parser_free(&hp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t piece = 1 + data[0] % 13;
    digest_t whole = {0}, pieces = {0};
    run(data + 1, size - 1, 0, &whole);
    run(data + 1, size - 1, piece, &pieces);
    if (whole.len != pieces.len || memcmp(whole.s, pieces.s, whole.len) != 0) {
        fprintf(stderr, "at once: %s\nin pieces of %zu: %s\n", whole.s, piece, pieces.s);
        fail("the requests depend on how the bytes were cut");
    }
    free(whole.s);
    free(pieces.s);
    return 0;
}
