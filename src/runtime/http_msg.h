/* http_msg.h — one HTTP/1.1 request as the shards' server (httpd.h) parsed it, and the request
 * parser that builds it from the bytes of a connection (http_parser 2.9, Debian's
 * libhttp-parser: the parser Node used for a decade). No socket here: the fuzz target
 * (tests/fuzz/fuzz_http_request.c) drives the same code the server does.
 *
 * Limits (nf_http_limits_t): the request line and headers together, the number of headers, the
 * body. A request past one is refused with its status (414 while in the request target, else
 * 431; 413) and the connection closed; a
 * malformed one is 400, closed. Pipelined requests are taken one at a time: the parser pauses
 * at the end of each, the caller answers it, then resumes with the bytes that follow. */
#ifndef NF_RUNTIME_HTTP_MSG_H
#define NF_RUNTIME_HTTP_MSG_H

#include <http_parser.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define NF_HTTP_MAX_HEADERS 64
#define NF_HTTP_MAX_ARGS    32

typedef struct nf_http_limits {
    size_t max_head; /* request line and headers, bytes (431 past it) */
    size_t max_body; /* 413 past it */
} nf_http_limits_t;

/* A whole request; its strings live in the parser's buffers until the next request starts. */
typedef struct nf_http_msg {
    const char *method; /* "GET", "HEAD", "POST", ... */
    char *path;         /* percent-decoded, without the query */
    bool path_nul;      /* the decoded path held a NUL byte (the request is refused) */
    unsigned nhdr, nargs;
    struct {
        char *name, *value;
    } hdr[NF_HTTP_MAX_HEADERS], arg[NF_HTTP_MAX_ARGS]; /* args: decoded ('+' is a space) */
    bool arg_nul[NF_HTTP_MAX_ARGS];                    /* the decoded value held a NUL */
    char *body;
    size_t body_len;
    bool keep_alive, expect_continue;
    struct sockaddr_storage peer;
} nf_http_msg_t;

typedef enum {
    NF_HTTP_MORE = 0, /* every byte taken, no whole request yet */
    NF_HTTP_REQUEST,  /* a whole request in msg; *used bytes taken (call again with the rest) */
    NF_HTTP_CONTINUE, /* headers of a request that asked for "100 Continue" and may send it */
    NF_HTTP_ERROR,    /* refuse with status (400, 413, 414, 431, 503), then close */
} nf_http_step_t;

typedef struct nf_http_parser {
    http_parser p;
    http_parser_settings s;
    nf_http_limits_t lim;
    nf_http_msg_t msg;
    char *head; /* url, then name NUL value NUL pairs */
    size_t head_len, head_cap;
    size_t url_end; /* the url's length in head */
    char *body;
    size_t body_len, body_cap;
    bool in_value, done, headers_done, continue_told;
    int status;      /* of an error */
    const char *why; /* of an error, for the log */
} nf_http_parser_t;

void nf_http_parser_init(nf_http_parser_t *hp, const nf_http_limits_t *lim);
/* Frees the buffers. */
void nf_http_parser_free(nf_http_parser_t *hp);
/* Feeds n bytes (n = 0: the client closed its side). See nf_http_step_t. After NF_HTTP_REQUEST
 * the caller answers msg, then calls again with the bytes after *used. */
nf_http_step_t nf_http_parse(nf_http_parser_t *hp, const char *data, size_t n, size_t *used);
/* Has a request begun (bytes of one taken, not yet whole)? */
bool nf_http_parser_busy(const nf_http_parser_t *hp);
/* Makes room for need bytes in *buf (capacity *cap), doubling from first (or from *cap): the
 * growth of every buffer the two HTTP servers build. false (nothing changed) without memory. */
bool nf_http_reserve(char **buf, size_t *cap, size_t need, size_t first);
/* The value of header name (case-insensitive), NULL if absent. */
const char *nf_http_msg_header(const nf_http_msg_t *m, const char *name);

#endif
