/* testhttpc.h — a raw-socket HTTP/1.1 client for tests: the exact bytes of a request on a fresh
 * connection to 127.0.0.1, the answer read to the end of the stream (send Connection: close).
 * What is tested is what a client on the wire sees. Test code only. */
#ifndef NF_TESTHTTPC_H
#define NF_TESTHTTPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nf_testhttpc_resp {
    int status; /* 0 if no answer */
    char *head; /* status line and headers, each ending in \r\n */
    char *body;
} nf_testhttpc_resp_t;

/* Sends bytes[0..n) (stopping early if the server closes: a 413 may come before the body) and
 * reads the answer (up to 1 MiB, 10 s without a byte at most). */
nf_testhttpc_resp_t nf_testhttpc_raw(uint16_t port, const char *bytes, size_t n);
/* METHOD path with body (len bytes, may be 0) and extra header lines ("Name: v\r\n"..., or
 * NULL). */
nf_testhttpc_resp_t nf_testhttpc(uint16_t port, const char *method, const char *path,
                                 const char *headers, const char *body, size_t len);
/* The value of header name (case-insensitive) into out; false if absent. */
bool nf_testhttpc_header(const nf_testhttpc_resp_t *r, const char *name, char *out, size_t outlen);
void nf_testhttpc_free(nf_testhttpc_resp_t *r);

#endif
