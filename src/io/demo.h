/* demo.h — a producer of synthetic read events for the demo configuration
 * (demo.read_events_per_s): a thread with its own librdkafka producer writing
 * {"user_id","article_id","session_id","ts"} records keyed by user_id into read-events at a
 * steady rate, users and articles drawn from small Zipf-like populations so counts grow
 * visibly. The articles are the given ids (the job passes those of its local example feeds,
 * so reads have topic vectors and move interest vectors), else "demo-article-N". It is an
 * outside client of the job, exactly like a real producer would be. */
#ifndef NF_DEMO_H
#define NF_DEMO_H

#include <stddef.h>
#include <stdint.h>

typedef struct nf_demo nf_demo_t;

/* NULL with err on failure. */
/* users: readers demo-user-0 .. users-1; max_events: stop after that many (0 = never);
 * partitioner: librdkafka's name of how records are placed by key (serve.partitioner). */
nf_demo_t *nf_demo_start(const char *brokers, const char *topic, const char *partitioner,
                         uint32_t per_second, uint32_t users, uint64_t max_events,
                         const char *const *article_ids, size_t nids, char *err, size_t errlen);
/* Stops and joins the thread (NULL is fine). */
void nf_demo_stop(nf_demo_t *d);

#endif
