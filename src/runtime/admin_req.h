/* admin_req.h — what a /v1/ request is to the hooks (admin.h), for the two servers that build
 * one: libmicrohttpd's (admin.c) and the shards' (httpd.c). Not for the hooks themselves: they
 * use admin.h's accessors. */
#ifndef NF_RUNTIME_ADMIN_REQ_H
#define NF_RUNTIME_ADMIN_REQ_H
#include "runtime/admin.h"
#include "runtime/http_msg.h"
#include "runtime/trace.h"

#define NF_ADMIN_REQ_HEADERS 4

struct MHD_Connection;

struct nf_admin_req {
    struct MHD_Connection *conn; /* libmicrohttpd's request, or NULL */
    const nf_http_msg_t *msg;    /* else the shards' server's */
    int route;                   /* named by the hooks (nf_admin_req_set_route), else -1 */
    unsigned nheaders;           /* added by the hooks (nf_admin_req_header) */
    unsigned nspans;             /* started by the hooks (nf_admin_req_span) */
    nf_span_t spans[NF_ADMIN_REQ_SPANS];
    char headers[NF_ADMIN_REQ_HEADERS][2][512];
};

#endif
