/* owners.h — which process of a job answers for which key (docs/ARCHITECTURE.md §4, "Several
 * processes"): the query API of one process answers for the keys it owns and names the owner of any
 * other.
 *
 * A process advertises its query API's URL in its consumer's client.id
 * ("newsflow serve=URL", nf_owners_client_id), which the group's coordinator reports in its
 * member descriptions along with each member's assigned partitions (librdkafka offers no way to
 * put user data into the consumer protocol's member metadata, and the client id travels in the
 * same JoinGroup request). A thread of this module, started at the first look-up (a process
 * never asked for another's key never describes the group), describes the group every
 * refresh_ms (and at once after nf_owners_kick: a miss), and keeps the table input partition
 * -> member URL that nf_owners_url reads; the first look-ups find it empty (503 + Retry-After).
 * Between a rebalance and the next description the table can name the previous owner: that process
 * then redirects again, or answers 503 while it does not know either (the client retries; never a
 * loop of more than a refresh).
 *
 * Threads: start/stop from main; nf_owners_url/kick from any thread. */
#ifndef NF_OWNERS_H
#define NF_OWNERS_H

#include "io/streams.h"

#include <stddef.h>
#include <stdint.h>

typedef struct nf_owners nf_owners_t;

typedef struct nf_owners_opts {
    /* The group's members: calls cb(cbarg, client_id, input, partition) per assigned input
     * partition (partition -1: a member with none), as nf_kafka_members. 0 or -errno. */
    int (*describe)(void *arg, int timeout_ms,
                    void (*cb)(void *cbarg, const char *client_id, nf_input_t in,
                               int32_t partition),
                    void *cbarg, char *err, size_t errlen);
    void *arg;
    unsigned refresh_ms; /* 0 = 1000 */
} nf_owners_opts_t;

/* The client.id that advertises url: "newsflow serve=URL" (cut to fit). */
void nf_owners_client_id(const char *url, char *out, size_t outlen);

/* Registers newsflow_query_owner_* metrics (the thread starts at the first look-up). NULL
 * with err. */
nf_owners_t *nf_owners_start(const nf_owners_opts_t *o, char *err, size_t errlen);
void nf_owners_stop(nf_owners_t *ow);

/* The advertised URL of the member assigned (in, partition) at the last description: 1 with
 * it in url (NUL-terminated), 0 when no member is known to have it or it advertises none. */
int nf_owners_url(nf_owners_t *ow, nf_input_t in, int32_t partition, char *url, size_t urllen);
/* Describe again now (the thread wakes; returns at once). */
void nf_owners_kick(nf_owners_t *ow);

#endif
