/* query.c — see query.h. Each request: validate the route's parameters (400 names the one at
 * fault), acquire the latest committed view, read what the answer needs through it (batched
 * where there are several keys), write the JSON, release the view. */
#include "serve/query.h"

#include "actors/interest.h"
#include "algo/bytes.h"
#include "algo/idset.h"
#include "feed/dates.h"
#include "feed/text.h"
#include "runtime/jsonw.h"
#include "state/changelog.h"
#include "state/kstate.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LIMIT_DEFAULT 20
#define LIMIT_MAX     100
#define USER_ID_MAX   256
#define TOP_TOPICS    5
#define TRENDING_SCAN 1000 /* items of a trending window looked at (top_k is 50 by default) */
#define KEY_LEN       18   /* nf_kstate_encode_key */
#define EXPIRY_LEN    8    /* every kind's values start with their expiry (store.h) */

struct nf_query {
    nf_query_opts_t o;
};

nf_query_t *nf_query_new(const nf_query_opts_t *o)
{
    nf_query_t *q = calloc(1, sizeof *q);
    if (q)
        q->o = *o;
    return q;
}

void nf_query_free(nf_query_t *q)
{
    free(q);
}

/* ------------------------------------------------------------------------------ replies */

/* w's JSON (plus a newline) as the body; a writer that failed (no memory) becomes a 503. */
static int finish(nf_jw_t *w, int status, char **body, size_t *len)
{
    nf_jw_raw(w, "\n", 1);
    if (!w->failed) {
        *body = w->buf;
        *len = w->len;
        return status;
    }
    nf_jw_free(w);
    static const char oom[] = "{\"error\":\"out of memory\"}\n";
    if ((*body = strdup(oom)))
        *len = sizeof oom - 1;
    return 503;
}

/* {"error": msg, "parameter": param} (param NULL: none). */
static int fail(int status, const char *msg, const char *param, char **body, size_t *len)
{
    nf_jw_t w;
    nf_jw_init(&w);
    nf_jw_obj_open(&w);
    nf_jw_key(&w, "error");
    nf_jw_str(&w, msg);
    if (param) {
        nf_jw_key(&w, "parameter");
        nf_jw_str(&w, param);
    }
    nf_jw_obj_close(&w);
    return finish(&w, status, body, len);
}

static int store_failed(const char *err, char **body, size_t *len)
{
    char msg[320];
    snprintf(msg, sizeof msg, "the committed state cannot be read: %s", err[0] ? err : "I/O error");
    return fail(503, msg, NULL, body, len);
}

static void put_date(nf_jw_t *w, int64_t ms)
{
    char d[40];
    nf_date_format(ms, d, sizeof d);
    nf_jw_str(w, d);
}

/* Opens the answer's object with the view it reflects. */
static void open_answer(nf_jw_t *w, const nf_store_view_t *v)
{
    nf_jw_init(w);
    nf_jw_obj_open(w);
    nf_jw_key(w, "epoch");
    nf_jw_u64(w, nf_store_view_epoch(v));
    nf_jw_key(w, "committed_at");
    put_date(w, nf_store_view_published_ms(v));
}

static void put_vector(const nf_query_t *q, nf_jw_t *w, const nf_topic_vec_t *vec)
{
    nf_jw_obj_open(w);
    for (uint32_t i = 0; i < vec->n; i++) {
        unsigned t = vec->t[i].topic;
        char num[8];
        const char *name = t < q->o.ntopics ? q->o.topic_names[t] : NULL;
        if (!name) {
            snprintf(num, sizeof num, "%u", t);
            name = num;
        }
        nf_jw_key(w, name);
        nf_jw_unit(w, vec->t[i].weight);
    }
    nf_jw_obj_close(w);
}

/* --------------------------------------------------------------------------- parameters */

/* limit: absent = def; else a decimal 1..LIMIT_MAX. */
static bool parse_limit(const char *s, unsigned def, unsigned *out)
{
    if (!s) {
        *out = def;
        return true;
    }
    unsigned n = 0;
    size_t i = 0;
    for (; s[i] >= '0' && s[i] <= '9' && i < 4; i++)
        n = n * 10 + (unsigned)(s[i] - '0');
    if (i == 0 || s[i] || n < 1 || n > LIMIT_MAX)
        return false;
    *out = n;
    return true;
}

/* A topic name of the taxonomy: its index, or -1. */
static int topic_index(const nf_query_t *q, const char *s)
{
    for (unsigned i = 0; i < q->o.ntopics; i++)
        if (q->o.topic_names[i] && strcmp(q->o.topic_names[i], s) == 0)
            return (int)i;
    return -1;
}

static int bad_topic(const nf_query_t *q, const char *s, char **body, size_t *len)
{
    nf_jw_t w;
    nf_jw_init(&w);
    nf_jw_obj_open(&w);
    nf_jw_key(&w, "error");
    char msg[160];
    size_t n = strlen(s);
    if (!nf_utf8_valid(s, n))
        s = "?", n = 1;
    if (n > 64) /* cut at a character's start, so the message stays UTF-8 */
        for (n = 64; n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80; n--)
            ;
    snprintf(msg, sizeof msg, "unknown topic '%.*s'", (int)n, s);
    nf_jw_str(&w, msg);
    nf_jw_key(&w, "parameter");
    nf_jw_str(&w, "topic");
    nf_jw_key(&w, "topics");
    nf_jw_arr_open(&w);
    for (unsigned i = 0; i < q->o.ntopics; i++) {
        nf_jw_elem(&w);
        nf_jw_str(&w, q->o.topic_names[i]);
    }
    nf_jw_arr_close(&w);
    nf_jw_obj_close(&w);
    return finish(&w, 400, body, len);
}

/* A user id: 1..USER_ID_MAX bytes of UTF-8 without control characters. */
static bool valid_user(const char *s, size_t n)
{
    if (n == 0 || n > USER_ID_MAX || !nf_utf8_valid(s, n))
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return false;
    return true;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A stored value's expiry has passed (compaction drops such values lazily: readers check). */
static bool expired(const unsigned char *v, int64_t now)
{
    uint64_t exp = nf_get_le64(v);
    return exp != 0 && (int64_t)exp <= now;
}

/* ------------------------------------------------------------------------------ interest */

static int route_interest(nf_query_t *q, nf_store_view_t *v, const char *user, char **body,
                          size_t *len)
{
    nf_id128_t uk = nf_interest_user_key(user);
    unsigned np = q->o.read_partitions ? q->o.read_partitions : 1;
    unsigned char *keys = malloc((size_t)np * KEY_LEN);
    void **vals = calloc(np, sizeof *vals);
    size_t *lens = calloc(np, sizeof *lens);
    int status;
    if (!keys || !vals || !lens) {
        status = fail(503, "out of memory", NULL, body, len);
        goto out;
    }
    size_t n = 0;
    for (unsigned p = 0; p < np; p++)
        if (!q->o.owns || q->o.owns(q->o.owns_arg, p))
            nf_kstate_encode_key((uint16_t)p, uk, keys + KEY_LEN * n++);
    char err[256] = "";
    if (nf_store_view_multi_get(v, NF_KIND_INTEREST, n, keys, KEY_LEN, vals, lens, err,
                                sizeof err) != 0) {
        status = store_failed(err, body, len);
        goto out;
    }
    /* The most recently updated vector (several only if the read-events partitions changed). */
    const unsigned char *best = NULL;
    size_t best_len = 0;
    int64_t now = now_ms();
    for (size_t i = 0; i < n; i++) {
        const unsigned char *x = vals[i];
        if (!x || lens[i] < EXPIRY_LEN + 16 || expired(x, now))
            continue;
        if (!best || (int64_t)nf_get_le64(x + 16) > (int64_t)nf_get_le64(best + 16)) {
            best = x;
            best_len = lens[i];
        }
    }
    nf_topic_vec_t vec;
    if (!best) {
        status = fail(404,
                      "no interest vector for this user in the committed state (no read of "
                      "theirs counted yet, or their partition is another process's)",
                      "user_id", body, len);
        goto out;
    }
    if (nf_interest_topics_decode(best + 24, best_len - 24, &vec) != 0) {
        status = store_failed("a stored interest vector does not decode", body, len);
        goto out;
    }
    nf_jw_t w;
    open_answer(&w, v);
    nf_jw_key(&w, "user_id");
    nf_jw_str(&w, user);
    nf_jw_key(&w, "version");
    nf_jw_u64(&w, nf_get_le64(best + 8));
    nf_jw_key(&w, "updated_at");
    put_date(&w, (int64_t)nf_get_le64(best + 16));
    nf_jw_key(&w, "vector");
    put_vector(q, &w, &vec);
    /* The reader's top topics: by weight, then by index (a stable order for equal weights). */
    nf_jw_key(&w, "top_topics");
    nf_jw_arr_open(&w);
    bool used[NF_TOPICS_MAX] = {false};
    for (int k = 0; k < TOP_TOPICS; k++) {
        int at = -1;
        for (uint32_t i = 0; i < vec.n; i++)
            if (!used[i] && vec.t[i].weight > 0 && (at < 0 || vec.t[i].weight > vec.t[at].weight))
                at = (int)i;
        if (at < 0)
            break;
        used[at] = true;
        unsigned t = vec.t[at].topic;
        nf_jw_elem(&w);
        if (t < q->o.ntopics)
            nf_jw_str(&w, q->o.topic_names[t]);
        else
            nf_jw_u64(&w, t);
    }
    nf_jw_arr_close(&w);
    nf_jw_obj_close(&w);
    status = finish(&w, 200, body, len);
out:
    for (unsigned i = 0; vals && i < np; i++)
        free(vals[i]);
    free(vals);
    free(lens);
    free(keys);
    return status;
}

/* ------------------------------------------------------------------------------ trending */

static uint16_t article_kg(const nf_query_t *q, nf_id128_t id)
{
    return q->o.global_articles ? (uint16_t)NF_CHANGELOG_GLOBAL_KG : (uint16_t)(id.hi % 256);
}

static int route_trending(nf_query_t *q, nf_store_view_t *v, nf_admin_req_t *req, char **body,
                          size_t *len)
{
    unsigned limit;
    if (!parse_limit(nf_admin_req_arg(req, "limit"), LIMIT_DEFAULT, &limit))
        return fail(400, "limit must be a whole number from 1 to 100", "limit", body, len);
    const char *topic = nf_admin_req_arg(req, "topic");
    int ti = -1;
    if (topic && (ti = topic_index(q, topic)) < 0)
        return bad_topic(q, topic, body, len);

    char err[256] = "";
    void *last = NULL;
    size_t last_len = 0;
    int r = nf_store_view_get(v, NF_KIND_TRENDING, "L", 1, &last, &last_len, err, sizeof err);
    if (r < 0)
        return store_failed(err, body, len);
    cJSON *root = NULL;
    if (r == 1 && last_len > EXPIRY_LEN)
        root = cJSON_ParseWithLength((const char *)last + EXPIRY_LEN, last_len - EXPIRY_LEN);
    free(last);
    if (r == 1 && !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return store_failed("the last trending window does not parse", body, len);
    }
    const cJSON *items = root ? cJSON_GetObjectItemCaseSensitive(root, "items") : NULL;
    size_t n = 0, cap = (size_t)cJSON_GetArraySize(items);
    if (cap > TRENDING_SCAN)
        cap = TRENDING_SCAN;
    const char **ids = calloc(cap ? cap : 1, sizeof *ids);
    double *scores = calloc(cap ? cap : 1, sizeof *scores);
    unsigned char *keys = malloc((cap ? cap : 1) * KEY_LEN);
    void **vals = calloc(cap ? cap : 1, sizeof *vals);
    size_t *lens = calloc(cap ? cap : 1, sizeof *lens);
    bool *hex = calloc(cap ? cap : 1, sizeof *hex);
    int status;
    if (!ids || !scores || !keys || !vals || !lens || !hex) {
        status = fail(503, "out of memory", NULL, body, len);
        goto out;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, items)
    {
        if (n == cap)
            break;
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "article_id");
        const cJSON *sc = cJSON_GetObjectItemCaseSensitive(it, "score");
        if (!cJSON_IsString(id) || !cJSON_IsNumber(sc))
            continue;
        ids[n] = id->valuestring;
        scores[n] = sc->valuedouble;
        nf_id128_t aid;
        hex[n] = strlen(id->valuestring) == 32 && nf_id128_from_hex32(id->valuestring, &aid) == 0;
        if (!hex[n])
            aid = (nf_id128_t){0, 0}; /* a read event may name any article id: no vector */
        nf_kstate_encode_key(article_kg(q, aid), aid, keys + KEY_LEN * n);
        n++;
    }
    if (nf_store_view_multi_get(v, NF_KIND_ARTICLE_TOPICS, n, keys, KEY_LEN, vals, lens, err,
                                sizeof err) != 0) {
        status = store_failed(err, body, len);
        goto out;
    }
    nf_jw_t w;
    open_answer(&w, v);
    const cJSON *ws = root ? cJSON_GetObjectItemCaseSensitive(root, "window_start") : NULL;
    const cJSON *we = root ? cJSON_GetObjectItemCaseSensitive(root, "window_end") : NULL;
    nf_jw_key(&w, "window_start");
    nf_jw_str(&w, cJSON_IsString(ws) ? ws->valuestring : NULL);
    nf_jw_key(&w, "window_end");
    nf_jw_str(&w, cJSON_IsString(we) ? we->valuestring : NULL);
    nf_jw_key(&w, "topic");
    nf_jw_str(&w, topic);
    nf_jw_key(&w, "items");
    nf_jw_arr_open(&w);
    int64_t now = now_ms();
    unsigned shown = 0;
    for (size_t i = 0; i < n && shown < limit; i++) {
        const unsigned char *x = vals[i];
        nf_topic_vec_t vec;
        bool known = hex[i] && x && lens[i] >= EXPIRY_LEN && !expired(x, now) &&
                     nf_interest_topics_decode(x + EXPIRY_LEN, lens[i] - EXPIRY_LEN, &vec) == 0;
        if (ti >= 0) {
            bool has = false;
            for (uint32_t k = 0; known && k < vec.n && !has; k++)
                has = vec.t[k].topic == (unsigned)ti && vec.t[k].weight > 0;
            if (!has)
                continue;
        }
        nf_jw_elem(&w);
        nf_jw_obj_open(&w);
        nf_jw_key(&w, "article_id");
        nf_jw_str(&w, ids[i]);
        nf_jw_key(&w, "score");
        nf_jw_u64(&w, scores[i] > 0 ? (uint64_t)scores[i] : 0);
        nf_jw_key(&w, "topics");
        if (known)
            put_vector(q, &w, &vec);
        else
            nf_jw_null(&w);
        nf_jw_obj_close(&w);
        shown++;
    }
    nf_jw_arr_close(&w);
    nf_jw_obj_close(&w);
    status = finish(&w, 200, body, len);
out:
    for (size_t i = 0; vals && i < n; i++)
        free(vals[i]);
    free(vals);
    free(lens);
    free(keys);
    free(hex);
    free(scores);
    free(ids);
    cJSON_Delete(root);
    return status;
}

/* -------------------------------------------------------------------------------- routes */

int nf_query_handle(nf_query_t *q, const char *route, nf_admin_req_t *req, char **body, size_t *len)
{
    static const char users[] = "users/", interest[] = "/interest";
    const char *user = NULL;
    size_t ulen = 0;
    size_t rl = strlen(route);
    bool is_interest = strncmp(route, users, sizeof users - 1) == 0 &&
                       rl >= sizeof users - 1 + sizeof interest - 1 &&
                       strcmp(route + rl - (sizeof interest - 1), interest) == 0;
    if (is_interest) {
        user = route + sizeof users - 1;
        ulen = rl - (sizeof users - 1) - (sizeof interest - 1);
    } else if (strcmp(route, "trending") != 0) {
        return 0;
    }
    if (is_interest && !valid_user(user, ulen))
        return fail(400, "user_id must be 1 to 256 bytes of UTF-8 without control characters",
                    "user_id", body, len);

    nf_store_view_t *v = q->o.store ? nf_store_view_acquire(q->o.store) : NULL;
    if (!v) {
        nf_admin_req_header(req, "Retry-After", "1");
        return fail(503, "restoring: no committed state to answer from yet", NULL, body, len);
    }
    int status;
    if (is_interest) {
        char *u = strndup(user, ulen);
        status =
            u ? route_interest(q, v, u, body, len) : fail(503, "out of memory", NULL, body, len);
        free(u);
    } else {
        status = route_trending(q, v, req, body, len);
    }
    nf_store_view_release(v);
    return status;
}
