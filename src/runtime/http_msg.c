/* http_msg.c — see http_msg.h. http_parser calls back with pieces of the request line and the
 * headers as they arrive (a piece may end anywhere, even inside a name); they are appended to one
 * buffer (url NUL name NUL value NUL ...) whose offsets become the message's pointers once the
 * request is whole. */
#include "runtime/http_msg.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    size_t name, value;
} hdr_off_t;

static nf_http_parser_t *hp_of(http_parser *p)
{
    return (nf_http_parser_t *)p->data;
}

static int refuse(nf_http_parser_t *hp, int status, const char *why)
{
    hp->status = status;
    hp->why = why;
    return 1;
}

bool nf_http_reserve(char **buf, size_t *cap, size_t need, size_t first)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : first;
    while (c < need)
        c *= 2;
    char *b = realloc(*buf, c);
    if (!b)
        return false;
    *buf = b;
    *cap = c;
    return true;
}

static int head_add(nf_http_parser_t *hp, const char *at, size_t len)
{
    if (hp->head_len + len + 1 > hp->lim.max_head && hp->url_end == 0 && hp->msg.nhdr == 0)
        return refuse(hp, 414, "request target over the limit of the request's head");
    if (hp->head_len + len + 1 > hp->lim.max_head)
        return refuse(hp, 431, "request line and headers over the limit");
    if (!nf_http_reserve(&hp->head, &hp->head_cap, hp->head_len + len + 1, 512))
        return refuse(hp, 503, "out of memory");
    memcpy(hp->head + hp->head_len, at, len);
    hp->head_len += len;
    return 0;
}

static int head_end_piece(nf_http_parser_t *hp)
{
    return head_add(hp, "", 1); /* a NUL between pieces */
}

/* The header offsets: kept in the parser's message until the request is whole (as offsets cast
 * into the pointer fields, fixed up by finish()). */
static hdr_off_t *off_of(nf_http_parser_t *hp, unsigned i)
{
    return (hdr_off_t *)&hp->msg.hdr[i];
}

static int on_begin(http_parser *p)
{
    nf_http_parser_t *hp = hp_of(p);
    hp->head_len = hp->body_len = hp->url_end = 0;
    hp->msg.nhdr = 0;
    hp->in_value = hp->done = hp->headers_done = hp->continue_told = false;
    hp->msg.expect_continue = false;
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
    nf_http_parser_t *hp = hp_of(p);
    hp->url_end = 0; /* still in the url: 414 past the limit */
    int r = head_add(hp, at, len);
    hp->url_end = hp->head_len;
    return r;
}

static int on_field(http_parser *p, const char *at, size_t len)
{
    nf_http_parser_t *hp = hp_of(p);
    if (hp->headers_done) /* a chunked body's trailer: not taken */
        return 0;
    if (hp->msg.nhdr == 0 || hp->in_value) { /* a new header */
        if (hp->msg.nhdr == NF_HTTP_MAX_HEADERS)
            return refuse(hp, 431, "too many headers");
        if (head_end_piece(hp))
            return 1;
        off_of(hp, hp->msg.nhdr)->name = hp->head_len;
        off_of(hp, hp->msg.nhdr)->value = 0;
        hp->msg.nhdr++;
        hp->in_value = false;
    }
    return head_add(hp, at, len);
}

static int on_value(http_parser *p, const char *at, size_t len)
{
    nf_http_parser_t *hp = hp_of(p);
    if (hp->headers_done)
        return 0;
    if (!hp->in_value) {
        if (head_end_piece(hp))
            return 1;
        off_of(hp, hp->msg.nhdr - 1)->value = hp->head_len;
        hp->in_value = true;
    }
    return head_add(hp, at, len);
}

static int on_headers(http_parser *p)
{
    nf_http_parser_t *hp = hp_of(p);
    if (head_end_piece(hp))
        return -1;
    hp->headers_done = true;
    if ((p->flags & F_CONTENTLENGTH) && p->content_length > hp->lim.max_body) {
        refuse(hp, 413, "body over the limit");
        return -1;
    }
    for (unsigned i = 0; i < hp->msg.nhdr; i++) {
        hdr_off_t *o = off_of(hp, i);
        if (o->value && strcasecmp(hp->head + o->name, "Expect") == 0)
            hp->msg.expect_continue = strcasecmp(hp->head + o->value, "100-continue") == 0 &&
                                      p->http_major == 1 && p->http_minor >= 1;
    }
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    nf_http_parser_t *hp = hp_of(p);
    if (hp->body_len + len > hp->lim.max_body)
        return refuse(hp, 413, "body over the limit");
    if (!nf_http_reserve(&hp->body, &hp->body_cap, hp->body_len + len + 1, 512))
        return refuse(hp, 503, "out of memory");
    memcpy(hp->body + hp->body_len, at, len);
    hp->body_len += len;
    return 0;
}

static int on_complete(http_parser *p)
{
    nf_http_parser_t *hp = hp_of(p);
    hp->done = true;
    hp->msg.keep_alive = http_should_keep_alive(p) != 0;
    http_parser_pause(p, 1); /* one request at a time: the caller answers it first */
    return 0;
}

void nf_http_parser_init(nf_http_parser_t *hp, const nf_http_limits_t *lim)
{
    memset(hp, 0, sizeof *hp);
    hp->lim = *lim;
    http_parser_init(&hp->p, HTTP_REQUEST);
    hp->p.data = hp;
    http_parser_settings_init(&hp->s);
    hp->s.on_message_begin = on_begin;
    hp->s.on_url = on_url;
    hp->s.on_header_field = on_field;
    hp->s.on_header_value = on_value;
    hp->s.on_headers_complete = on_headers;
    hp->s.on_body = on_body;
    hp->s.on_message_complete = on_complete;
}

void nf_http_parser_free(nf_http_parser_t *hp)
{
    free(hp->head);
    free(hp->body);
    hp->head = hp->body = NULL;
    hp->head_cap = hp->body_cap = 0;
}

bool nf_http_parser_busy(const nf_http_parser_t *hp)
{
    return hp->head_len > 0 && !hp->done;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decodes s in place ('+' a space when plus); true if a NUL byte came out. A '%' not
 * followed by two hex digits is kept as it is. */
static bool decode(char *s, bool plus)
{
    bool nul = false;
    char *o = s;
    for (char *i = s; *i; i++) {
        int h, l;
        if (*i == '%' && (h = hexval(i[1])) >= 0 && (l = hexval(i[2])) >= 0) {
            *o = (char)(h * 16 + l);
            nul |= *o == '\0';
            o++;
            i += 2;
        } else {
            *o++ = plus && *i == '+' ? ' ' : *i;
        }
    }
    *o = '\0';
    return nul;
}

static void split_args(nf_http_msg_t *m, char *q)
{
    m->nargs = 0;
    for (char *save = NULL, *pair = strtok_r(q, "&", &save); pair && m->nargs < NF_HTTP_MAX_ARGS;
         pair = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(pair, '=');
        char *val = eq ? eq + 1 : pair + strlen(pair);
        if (eq)
            *eq = '\0';
        decode(pair, true);
        m->arg[m->nargs].name = pair;
        m->arg[m->nargs].value = val;
        m->arg_nul[m->nargs] = decode(val, true);
        m->nargs++;
    }
}

/* The whole request's pointers, from the offsets. */
static void finish(nf_http_parser_t *hp)
{
    nf_http_msg_t *m = &hp->msg;
    hdr_off_t off[NF_HTTP_MAX_HEADERS];
    memcpy(off, m->hdr, sizeof(hdr_off_t) * m->nhdr);
    hp->head[hp->url_end] = '\0';
    for (unsigned i = 0; i < m->nhdr; i++) {
        m->hdr[i].name = hp->head + off[i].name;
        m->hdr[i].value = off[i].value ? hp->head + off[i].value : hp->head + hp->url_end;
    }
    m->method = http_method_str((enum http_method)hp->p.method);
    m->path = hp->head;
    char *q = strchr(hp->head, '?');
    char *frag = strchr(hp->head, '#');
    if (frag)
        *frag = '\0';
    if (q)
        *q++ = '\0';
    m->path_nul = decode(m->path, false);
    if (q)
        split_args(m, q);
    else
        m->nargs = 0;
    if (!nf_http_reserve(&hp->body, &hp->body_cap, hp->body_len + 1, 512)) {
        m->body = "";
        m->body_len = 0;
    } else {
        hp->body[hp->body_len] = '\0';
        m->body = hp->body;
        m->body_len = hp->body_len;
    }
}

_Static_assert(sizeof(hdr_off_t) <= sizeof(((nf_http_msg_t *)0)->hdr[0]),
               "header offsets fit where the pointers go");

nf_http_step_t nf_http_parse(nf_http_parser_t *hp, const char *data, size_t n, size_t *used)
{
    *used = 0;
    if (hp->status) /* refused before: nothing more is read */
        return NF_HTTP_ERROR;
    if (HTTP_PARSER_ERRNO(&hp->p) == HPE_PAUSED)
        http_parser_pause(&hp->p, 0);
    hp->done = false;
    size_t got = http_parser_execute(&hp->p, &hp->s, data, n);
    enum http_errno e = HTTP_PARSER_ERRNO(&hp->p);
    if (hp->done) {
        finish(hp);
        *used = got;
        return NF_HTTP_REQUEST;
    }
    if (e != HPE_OK) {
        if (!hp->status)
            refuse(hp, 400, http_errno_description(e));
        return NF_HTTP_ERROR;
    }
    *used = got;
    if (hp->headers_done && hp->msg.expect_continue && !hp->continue_told) {
        hp->continue_told = true;
        return NF_HTTP_CONTINUE;
    }
    return NF_HTTP_MORE;
}

const char *nf_http_msg_header(const nf_http_msg_t *m, const char *name)
{
    for (unsigned i = 0; i < m->nhdr; i++)
        if (strcasecmp(m->hdr[i].name, name) == 0)
            return m->hdr[i].value;
    return NULL;
}
