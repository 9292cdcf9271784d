/* topics_follow.c — the articles' topic vectors as a global table (topics_follow.h). */
#include "actors/topics_follow.h"

#include "algo/bytes.h"
#include "runtime/jsonw.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "state/changelog.h"
#include "state/kstate.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Vectors written to the store at least this often (and at stop), with the offsets reached. */
#define SAVE_EVERY_NS 1000000000ull
#define META_NAME     "topics_follow"

struct nf_topics_follow {
    nf_kafka_follower_t *kf;
    nf_runtime_t *rt;
    const nf_analytics_t *an;
    _Atomic bool stopping;
    nf_counter_t records, vectors;
    nf_gauge_t lag;
    /* the follower thread's: vectors not yet written, the next offset per partition */
    nf_store_batch_t *batch;
    int64_t *next;
    int nparts;
    uint64_t saved_ns;
    bool save_failed;
};

/* The vectors read since the last save into the store, then the offsets reached (a synced
 * write, after them: a crash reads again from the offsets saved before). Follower thread. */
static void save(nf_topics_follow_t *f)
{
    f->saved_ns = nf_now_ns();
    if (!f->an->store || !nf_store_batch_count(f->batch))
        return;
    char err[256];
    nf_jw_t w;
    nf_jw_init(&w);
    nf_jw_arr_open(&w);
    for (int p = 0; p < f->nparts; p++) {
        nf_jw_elem(&w);
        nf_jw_i64(&w, f->next[p]);
    }
    nf_jw_arr_close(&w);
    int r = w.failed ? -ENOMEM : nf_store_write(f->an->store, f->batch, err, sizeof err);
    if (r == 0)
        r = nf_store_meta_put(f->an->store, META_NAME, w.buf, err, sizeof err);
    nf_jw_free(&w);
    nf_store_batch_clear(f->batch);
    if (r != 0 && !f->save_failed) /* the next start reads those records again */
        nf_log(NF_LOG_WARN, "interest", "cannot save the followed topic vectors",
               NF_LS("error", r == -ENOMEM ? "out of memory" : err), NF_LEND);
    f->save_failed = r != 0;
}

/* The offsets a previous run saved (-1: from the first). */
static void load_offsets(nf_topics_follow_t *f)
{
    for (int p = 0; p < f->nparts; p++)
        f->next[p] = -1;
    char *v = NULL, err[256];
    if (!f->an->store || nf_store_meta_get(f->an->store, META_NAME, &v, err, sizeof err) != 1)
        return;
    cJSON *a = cJSON_Parse(v);
    for (int p = 0; p < f->nparts && cJSON_IsArray(a); p++) {
        const cJSON *x = cJSON_GetArrayItem(a, p);
        if (cJSON_IsNumber(x) && x->valuedouble >= 0)
            f->next[p] = (int64_t)x->valuedouble;
    }
    cJSON_Delete(a);
    free(v);
}

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
        if (!ok || !t->string || !cJSON_IsNumber(t) || !isfinite(t->valuedouble) ||
            vec->n >= NF_TOPICS_MAX)
            continue;
        for (unsigned i = 0; i < nt && i < NF_TOPICS_MAX; i++) {
            if (strcmp(nf_classify_topic_name(tax, i), t->string) != 0)
                continue;
            bool dup = false; /* a name given twice: the first counts */
            for (unsigned j = 0; j < vec->n && !dup; j++)
                dup = vec->t[j].topic == i;
            if (dup)
                break;
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
    if (partition >= 0 && partition < f->nparts)
        f->next[partition] = offset + 1;
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
    if (f->an->store) { /* as dedup stores it (interest.h): [expiry][vector] */
        unsigned char sk[18], sv[8 + NF_TOPICS_ENC_MAX];
        int len = nf_interest_topics_encode(&vec, sv + 8, sizeof sv - 8);
        nf_kstate_encode_key((uint16_t)NF_CHANGELOG_GLOBAL_KG, id, sk);
        nf_put_le64(sv, f->an->topics_ttl_ms ? (uint64_t)nf_wall_ms() + f->an->topics_ttl_ms : 0);
        if (len >= 0)
            nf_store_batch_put(f->batch, NF_KIND_ARTICLE_TOPICS, sk, sizeof sk, sv,
                               8 + (size_t)len);
    }
    if (nf_now_ns() - f->saved_ns >= SAVE_EVERY_NS)
        save(f);
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
    nf_metrics_counter("newsflow_topics_follow_records_total",
                       "Records of the articles topic read to learn the topic vectors "
                       "of articles another process deduplicated (a consumer group).",
                       NULL, 0, &f->records);
    nf_metrics_counter("newsflow_topics_follow_vectors_total",
                       "Topic vectors handed to the interest engines from the articles "
                       "topic.",
                       NULL, 0, &f->vectors);
    nf_metrics_gauge("newsflow_topics_follow_lag_records",
                     "Records of the articles topic not yet read by the follower (-1: not "
                     "known yet).",
                     NULL, 0, &f->lag);
    nf_gauge_set(f->lag, -1);
    f->nparts = nf_kafka_topic_partitions(k, NF_TOPIC_ARTICLES);
    f->batch = nf_store_batch_new();
    f->next = calloc(f->nparts > 0 ? (size_t)f->nparts : 1, sizeof *f->next);
    if (!f->batch || !f->next) {
        snprintf(err, errlen, "out of memory");
        nf_store_batch_free(f->batch);
        free(f->next);
        free(f);
        return NULL;
    }
    load_offsets(f);
    f->saved_ns = nf_now_ns();
    if (!(f->kf = nf_kafka_follow(k, NF_TOPIC_ARTICLES, f->next, f->nparts, on_article, f, err,
                                  errlen))) {
        nf_store_batch_free(f->batch);
        free(f->next);
        free(f);
        return NULL;
    }
    nf_kafka_follow_gauge(f->kf, f->lag);
    return f;
}

void nf_topics_follow_stop(nf_topics_follow_t *f)
{
    if (!f)
        return;
    atomic_store(&f->stopping, true);
    nf_kafka_follow_stop(f->kf);
    save(f); /* the follower thread has ended: its state is this thread's now */
    nf_store_batch_free(f->batch);
    free(f->next);
    free(f);
}
