/* analytics_int.h — what analytics.c (options, registration, the state's blob helpers) shares
 * with the two actors it registers, stories.c and trending.c; private to those three. */
#ifndef NF_ACTORS_ANALYTICS_INT_H
#define NF_ACTORS_ANALYTICS_INT_H
#include "actors/analytics.h"
#include "runtime/runtime.h"

extern const nf_actor_ops_t nf_stories_ops;  /* "stories": stories.c */
extern const nf_actor_ops_t nf_trending_ops; /* "trending": trending.c */
void nf_stories_metrics(nf_analytics_t *an);
void nf_trending_metrics(nf_analytics_t *an);

#endif
