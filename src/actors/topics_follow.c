/* topics_follow.c — the articles' topic vectors as a global table (topics_follow.h). */
#include "actors/topics_follow.h"

#include "runtime/log.h"
#include "runtime/metrics.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct nf_topics_follow {
    nf_kafka_follower_t *kf;
    nf_runtime_t *rt;
    const nf_analytics_t *an;
    _Atomic bool stopping;
    nf_counter_t records, vectors;
    nf_gauge_t lag;
};

bool nf_topics_follow_parse(const nf_classify_taxonomy_t *tax, const void *val, size_t len,
                            nf_id128_t *id, nf_topic_vec_t *vec)
{
    cJSON *v = val ? cJSON_ParseWithLength(val, len) : NULL;
    const cJSON *aid = cJSON_GetObjectItemCaseSensitive(v, "article_id");
    const cJSON *topics = cJSON_GetObjectItemCaseSensitive(v, "topics");
    bool ok = cJSON_IsString(aid) && nf_id128_from_hex(aid->valuestring, id) == 0;
    vec->n = 0;
    unsigned nt = tax ? nf_classify_topic_count(tax) : 0;
    const cJSON *t, *obj = cJSON_IsObject(topics) ? topics : NULL;
    cJSON_ArrayForEach(t, obj)
    {
        if (!ok || !t->string || !cJSON_IsNumber(t) || vec->n >= NF_TOPICS_MAX)
            continue;
        for (unsigned i = 0; i < nt && i < NF_TOPICS_MAX; i++) {
            if (strcmp(nf_classify_topic_name(tax, i), t->string) != 0)
                continue;
            /* kept sorted by index (interest.h's canonical order) */
            unsigned j = vec->n++;
            while (j > 0 && vec->t[j - 1].topic > i) {
                vec->t[j] = vec->t[j - 1];
                j--;
            }
            vec->t[j].topic = (uint16_t)i;
            vec->t[j].weight = t->valuedouble;
            break;
        }
    }
    cJSON_Delete(v);
    return ok;
}

static int on_article(void *arg, int topic_index, int32_t partition, int64_t offset,
                      const void *key, size_t klen, const void *val, size_t vlen, bool tombstone)
{
    nf_topics_follow_t *f = arg;
    (void)topic_index;
    (void)key;
    (void)klen;
    nf_counter_inc(f->records);
    nf_gauge_set(f->lag, nf_kafka_follow_lag(f->kf));
    nf_id128_t id;
    nf_topic_vec_t vec;
    if (tombstone || !nf_topics_follow_parse(f->an->taxonomy, val, vlen, &id, &vec)) {
        nf_log(NF_LOG_WARN, "interest", "an articles record names no article; skipped",
               NF_LI("partition", partition), NF_LI("offset", offset), NF_LEND);
        return 0;
    }
    unsigned n = nf_runtime_shard_count(f->rt);
    for (unsigned s = 0; s < n; s++) {
        nf_topics_msg_t *t = malloc(sizeof *t);
        if (!t) {
            nf_log(NF_LOG_ERROR, "interest", "out of memory following the articles; stopping",
                   NF_LEND);
            nf_runtime_fail(f->rt);
            return 0;
        }
        t->id = id;
        t->vec = vec;
        nf_msg_t m = {.actor = (uint16_t)f->an->interest_actor, .kind = NF_MSG_TOPICS};
        m.body.ptr = t;
        int r;
        /* a full inbox: wait for the shard (the follower only lags) */
        while ((r = nf_runtime_post(f->rt, s, &m)) == -EAGAIN && !atomic_load(&f->stopping))
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        if (r != 0) {
            free(t);
            return 0;
        }
    }
    nf_counter_inc(f->vectors);
    return 0;
}

nf_topics_follow_t *nf_topics_follow_start(nf_kafka_t *k, nf_runtime_t *rt,
                                           const nf_analytics_t *an, char *err, size_t errlen)
{
    nf_topics_follow_t *f = calloc(1, sizeof *f);
    if (!f) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    f->rt = rt;
    f->an = an;
    int e = nf_metrics_counter("newsflow_topics_follow_records_total",
                               "Records of the articles topic read to learn the topic vectors "
                               "of articles another process deduplicated (a consumer group).",
                               NULL, 0, &f->records);
    e |= nf_metrics_counter("newsflow_topics_follow_vectors_total",
                            "Topic vectors handed to the interest engines from the articles "
                            "topic.",
                            NULL, 0, &f->vectors);
    e |= nf_metrics_gauge("newsflow_topics_follow_lag_records",
                          "Records of the articles topic not yet read by the follower (-1: not "
                          "known yet).",
                          NULL, 0, &f->lag);
    if (e) {
        snprintf(err, errlen, "cannot register the follower's metrics");
        free(f);
        return NULL;
    }
    nf_gauge_set(f->lag, -1);
    if (!(f->kf = nf_kafka_follow(k, NF_TOPIC_ARTICLES, on_article, f, err, errlen))) {
        free(f);
        return NULL;
    }
    return f;
}

void nf_topics_follow_stop(nf_topics_follow_t *f)
{
    if (!f)
        return;
    atomic_store(&f->stopping, true);
    nf_kafka_follow_stop(f->kf);
    free(f);
}
