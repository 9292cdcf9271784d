/* sources_publish.c — the configured sources as records of the sources topic (sources_publish.h).
 */
#include "actors/sources_publish.h"

#include "io/events.h"
#include "runtime/jsonw.h"
#include "runtime/log.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the topic says of a configured source (by the list's index). */
enum { ST_ABSENT = 0, ST_SAME, ST_DIFFERS, ST_OPERATOR };

typedef struct {
    const nf_source_list_t *l;
    unsigned char *state;
    nf_jw_t w;
    size_t records;
} read_ctx_t;

void nf_sources_publish_value(const nf_source_def_t *d, nf_jw_t *w)
{
    nf_jw_reset(w);
    nf_jw_obj_open(w);
    nf_jw_key(w, "url");
    nf_jw_str(w, d->url);
    if (d->interval_s) {
        nf_jw_key(w, "interval_s");
        nf_jw_u64(w, d->interval_s);
    }
    nf_jw_key(w, "origin");
    nf_jw_str(w, "config");
    nf_jw_obj_close(w);
}

static bool from_config(const void *val, size_t vlen)
{
    cJSON *v = cJSON_ParseWithLength(val, vlen);
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(v, "origin");
    bool yes = cJSON_IsString(o) && !strcmp(o->valuestring, "config");
    cJSON_Delete(v);
    return yes;
}

static int on_record(void *arg, int topic_index, int32_t partition, int64_t offset,
                     const void *key, size_t klen, const void *val, size_t vlen, bool tombstone)
{
    read_ctx_t *x = arg;
    char id[NF_SOURCE_ID_MAX + 1];
    (void)topic_index;
    (void)partition;
    (void)offset;
    x->records++;
    if (!key || klen == 0 || klen > NF_SOURCE_ID_MAX)
        return 0;
    memcpy(id, key, klen);
    id[klen] = '\0';
    const nf_source_def_t *d = nf_sources_find(x->l, id);
    if (!d || d->is_file)
        return 0; /* not one of this list's: someone else's source */
    size_t i = (size_t)(d - x->l->items);
    if (tombstone || !val || vlen == 0) {
        x->state[i] = ST_ABSENT;
        return 0;
    }
    if (!from_config(val, vlen)) {
        x->state[i] = ST_OPERATOR;
        return 0;
    }
    nf_sources_publish_value(d, &x->w);
    bool same = !x->w.failed && x->w.len == vlen && !memcmp(x->w.buf, val, vlen);
    x->state[i] = same ? ST_SAME : ST_DIFFERS;
    return 0;
}

int nf_sources_publish(nf_kafka_t *k, const nf_source_list_t *l,
                       nf_sources_publish_stats_t *stats, char *err, size_t errlen)
{
    memset(stats, 0, sizeof *stats);
    int np = nf_kafka_input_partitions(k, NF_INPUT_SOURCES);
    if (np <= 0) {
        snprintf(err, errlen, "the sources topic's partitions are not known");
        return -EINVAL;
    }
    read_ctx_t x = {.l = l, .state = calloc(l->n ? l->n : 1, 1)};
    nf_jw_init(&x.w);
    nf_kafka_pub_t *recs = calloc(l->n ? l->n : 1, sizeof *recs);
    char **vals = calloc(l->n ? l->n : 1, sizeof *vals);
    int r = 0;
    if (!x.state || !recs || !vals) {
        snprintf(err, errlen, "out of memory");
        r = -ENOMEM;
    }
    if (r == 0)
        r = nf_kafka_read_input(k, NF_INPUT_SOURCES, on_record, &x, err, errlen);
    size_t n = 0;
    for (size_t i = 0; r == 0 && i < l->n; i++) {
        const nf_source_def_t *d = &l->items[i];
        if (d->is_file)
            continue;
        stats->configured++;
        if (x.state[i] == ST_SAME) {
            stats->unchanged++;
            continue;
        }
        if (x.state[i] == ST_OPERATOR) {
            stats->operator++;
            continue;
        }
        nf_sources_publish_value(d, &x.w);
        if (x.w.failed || !(vals[n] = strndup(x.w.buf, x.w.len))) {
            snprintf(err, errlen, "out of memory");
            r = -ENOMEM;
            break;
        }
        recs[n] = (nf_kafka_pub_t){.key = d->source_id,
                                   .klen = strlen(d->source_id),
                                   .value = vals[n],
                                   .vlen = x.w.len,
                                   .partition = nf_sources_partition(d->host, np)};
        n++;
    }
    if (r == 0)
        r = nf_kafka_publish(k, NF_INPUT_SOURCES, recs, n, err, errlen);
    if (r == 0)
        stats->published = n;
    stats->records = x.records;
    for (size_t i = 0; vals && i < n; i++)
        free(vals[i]);
    free(vals);
    free(recs);
    free(x.state);
    nf_jw_free(&x.w);
    return r;
}
