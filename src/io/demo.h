/* demo.h — synthetic readers for the demo configuration (demo.read_events_per_s): a thread
 * that posts {"user_id","article_id","session_id","ts"} events to the job's own HTTP edge
 * (POST /v1/events, serve/edge.h) at a steady rate, a batch every 100 ms, users and articles
 * drawn from small Zipf-like populations so counts grow visibly. The articles are the given ids
 * (the job passes those of its local example feeds, so reads have topic vectors and move
 * interest vectors), else "demo-article-N". It is an outside client of the job, exactly like a
 * reader's browser would be: its reads take the edge's path (checked, produced, 202 once
 * durable). A batch the edge cannot take now (503, 429, the server not up yet) is sent again,
 * the same bytes; one it refuses is logged. */
#ifndef NF_DEMO_H
#define NF_DEMO_H

#include <stddef.h>
#include <stdint.h>

typedef struct nf_demo nf_demo_t;

/* NULL with err on failure. edge_url: the job's POST /v1/events. users: readers demo-user-0 ..
 * users-1; max_events: stop after that many (0 = never). */
nf_demo_t *nf_demo_start(const char *edge_url, uint32_t per_second, uint32_t users,
                         uint64_t max_events, const char *const *article_ids, size_t nids,
                         char *err, size_t errlen);
/* Stops and joins the thread (NULL is fine). */
void nf_demo_stop(nf_demo_t *d);

#endif
