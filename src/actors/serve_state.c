/* serve_state.c — see serve_state.h. */
#include "actors/serve_state.h"

#include "algo/bytes.h"
#include "algo/hash.h"
#include "feed/dates.h"
#include "runtime/jsonw.h"
#include "state/changelog.h"
#include "state/kstate.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define FUTURE_MS  (5ll * 60 * 1000)
#define RECENT_KG  NF_CHANGELOG_GLOBAL_KG /* one key group: a topic's scan is one prefix */
#define EXPIRY_LEN 8

int64_t nf_serve_published_ms(int64_t published_at_ms, bool has_published, int64_t ingested_ms)
{
    if (has_published && published_at_ms <= ingested_ms + FUTURE_MS)
        return published_at_ms;
    return ingested_ms;
}

static const char *field(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(x) ? x->valuestring : NULL;
}

/* A date field of o (nf_date_parse): whether it has one, into *ms. */
static bool date_field(const cJSON *o, const char *k, int64_t *ms)
{
    const char *s = field(o, k);
    return s && nf_date_parse(s, strlen(s), ms) == 0;
}

bool nf_serve_meta_times(const cJSON *meta, int64_t ingested_default, int64_t *published_ms,
                         int64_t *ingested_ms)
{
    int64_t pub = 0, ing = 0;
    bool has_ing = date_field(meta, "ingested_at", &ing);
    bool has_pub = date_field(meta, "published_at", &pub);
    *ingested_ms = has_ing ? ing : ingested_default;
    *published_ms = nf_serve_published_ms(pub, has_pub, *ingested_ms);
    return has_ing;
}

void nf_serve_recent_prefix(unsigned topic, unsigned char out[NF_SERVE_RECENT_PREFIX])
{
    out[0] = (unsigned char)(RECENT_KG >> 8);
    out[1] = (unsigned char)RECENT_KG;
    out[2] = (unsigned char)topic;
}

void nf_serve_recent_key(unsigned topic, int64_t published_ms, nf_id128_t id,
                         unsigned char out[NF_SERVE_RECENT_KEY_LEN])
{
    nf_serve_recent_prefix(topic, out);
    nf_put_be64(out + 3, (uint64_t)(INT64_MAX - (published_ms > 0 ? published_ms : 0)));
    nf_put_be64(out + 11, id.hi);
    nf_put_be64(out + 19, id.lo);
}

int nf_serve_recent_decode(const void *key, size_t klen, const void *val, size_t vlen,
                           int64_t *expires_ms, int64_t *published_ms, nf_id128_t *id,
                           nf_topic_vec_t *vec)
{
    const unsigned char *k = key, *v = val;
    if (klen != NF_SERVE_RECENT_KEY_LEN || vlen < EXPIRY_LEN + 8)
        return -EINVAL;
    *expires_ms = (int64_t)nf_get_le64(v);
    *published_ms = (int64_t)nf_get_le64(v + 8);
    id->hi = nf_get_be64(k + 11);
    id->lo = nf_get_be64(k + 19);
    return nf_interest_topics_decode(v + 16, vlen - 16, vec) == 0 ? 0 : -EINVAL;
}

void nf_serve_history_prefix(uint16_t kg, nf_id128_t user,
                             unsigned char out[NF_SERVE_HISTORY_PREFIX])
{
    out[0] = (unsigned char)(kg >> 8);
    out[1] = (unsigned char)kg;
    nf_put_be64(out + 2, user.hi);
    nf_put_be64(out + 10, user.lo);
}

void nf_serve_history_put(nf_store_batch_t *b, const nf_interest_read_t *r, const char *article,
                          size_t alen, int64_t expires_ms)
{
    unsigned char key[NF_SERVE_HISTORY_KEY_LEN], val[EXPIRY_LEN + 1 + 8 + NF_EVENT_FIELD_MAX];
    if (alen > NF_EVENT_FIELD_MAX)
        alen = NF_EVENT_FIELD_MAX; /* the decoder's bound: never more */
    nf_serve_history_prefix(r->kg, r->user, key);
    /* newest first; a ts before 1970 cannot be decoded, so the subtraction cannot wrap */
    nf_put_be64(key + NF_SERVE_HISTORY_PREFIX, (uint64_t)(INT64_MAX - r->ts_ms));
    nf_put_be64(key + NF_SERVE_HISTORY_PREFIX + 8, r->seen.lo);
    nf_put_le64(val, (uint64_t)expires_ms);
    val[EXPIRY_LEN] = r->kind;
    nf_put_le64(val + EXPIRY_LEN + 1, (uint64_t)r->ts_ms);
    memcpy(val + EXPIRY_LEN + 9, article, alen);
    nf_store_batch_put(b, NF_KIND_READS, key, sizeof key, val, EXPIRY_LEN + 9 + alen);
}

int nf_serve_history_decode(const void *key, size_t klen, const void *val, size_t vlen,
                            int64_t *expires_ms, int *kind, int64_t *ts_ms, const char **article,
                            size_t *alen)
{
    const unsigned char *v = val;
    (void)key;
    if (klen != NF_SERVE_HISTORY_KEY_LEN || vlen < EXPIRY_LEN + 9 ||
        vlen > EXPIRY_LEN + 9 + NF_EVENT_FIELD_MAX || v[EXPIRY_LEN] >= NF_READ_KIND__COUNT)
        return -EINVAL;
    *expires_ms = (int64_t)nf_get_le64(v);
    *kind = v[EXPIRY_LEN];
    *ts_ms = (int64_t)nf_get_le64(v + EXPIRY_LEN + 1);
    *article = (const char *)v + EXPIRY_LEN + 9;
    *alen = vlen - EXPIRY_LEN - 9;
    return 0;
}

void nf_serve_search_prefix(unsigned char out[NF_SERVE_SEARCH_PREFIX])
{
    out[0] = (unsigned char)(RECENT_KG >> 8);
    out[1] = (unsigned char)RECENT_KG;
}

void nf_serve_search_key(int64_t cut_ms, const unsigned char meta_key[NF_SERVE_META_KEY_LEN],
                         unsigned char out[NF_SERVE_SEARCH_KEY_LEN])
{
    nf_serve_search_prefix(out);
    nf_put_be64(out + 2, (uint64_t)(cut_ms > 0 ? cut_ms : 0));
    memcpy(out + 10, meta_key, NF_SERVE_META_KEY_LEN);
}

void nf_serve_put_search(nf_store_batch_t *b, int64_t cut_ms, const void *meta_key,
                         const void *meta_val)
{
    unsigned char k[NF_SERVE_SEARCH_KEY_LEN];
    nf_serve_search_key(cut_ms, meta_key, k);
    nf_store_batch_put(b, NF_KIND_SEARCH_LOG, k, sizeof k, meta_val, EXPIRY_LEN);
}

int nf_serve_search_decode(const void *key, size_t klen, const void *val, size_t vlen,
                           int64_t *cut_ms, unsigned char meta_key[NF_SERVE_META_KEY_LEN],
                           int64_t *expires_ms)
{
    const unsigned char *k = key;
    if (klen != NF_SERVE_SEARCH_KEY_LEN || vlen < EXPIRY_LEN)
        return -EINVAL;
    *cut_ms = (int64_t)nf_get_be64(k + 2);
    memcpy(meta_key, k + 10, NF_SERVE_META_KEY_LEN);
    *expires_ms = (int64_t)nf_get_le64(val);
    return 0;
}

/* s cut to at most max bytes at the start of a character (s is UTF-8). */
static size_t utf8_cut(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n <= max)
        return n;
    while (max > 0 && ((unsigned char)s[max] & 0xC0) == 0x80)
        max--;
    return max;
}

int nf_serve_put_article(nf_store_batch_t *b, uint16_t kg, const nf_article_blob_t *a,
                         uint64_t meta_ttl_ms)
{
    cJSON *root = cJSON_ParseWithLength(a->json, a->len); /* NULL: what the blob itself knows */
    int64_t pub_at = 0;
    bool has_pub = date_field(root, "published_at", &pub_at);
    int64_t published_ms = nf_serve_published_ms(pub_at, has_pub, a->ingested_ms);

    nf_jw_t w;
    nf_jw_init(&w);
    nf_jw_raw(&w, "\0\0\0\0\0\0\0\0", EXPIRY_LEN); /* the expiry, written below */
    nf_jw_obj_open(&w);
    nf_jw_key(&w, "article_id");
    nf_jw_str(&w, a->article_id);
    static const char *const keep[] = {"url",          "title",       "source_id",
                                       "published_at", "ingested_at", "language"};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        nf_jw_key(&w, keep[i]);
        nf_jw_str(&w, field(root, keep[i]));
    }
    const char *summary = field(root, "summary");
    nf_jw_key(&w, "summary");
    if (summary)
        nf_jw_strn(&w, summary, utf8_cut(summary, NF_SERVE_SUMMARY_MAX));
    else
        nf_jw_null(&w);
    nf_jw_obj_close(&w);
    cJSON_Delete(root);
    if (w.failed) {
        nf_jw_free(&w);
        return -ENOMEM;
    }
    nf_put_le64((unsigned char *)w.buf, (uint64_t)a->ingested_ms + meta_ttl_ms);
    unsigned char key[NF_SERVE_META_KEY_LEN];
    nf_kstate_encode_key(kg, a->id, key);
    nf_store_batch_put(b, NF_KIND_ARTICLE_META, key, sizeof key, w.buf, w.len);
    nf_jw_free(&w);

    int64_t expires = published_ms + NF_SERVE_RECENT_MS;
    if (expires <= a->ingested_ms)
        return 0; /* already past the recent window */
    unsigned char val[16 + NF_TOPICS_ENC_MAX];
    nf_put_le64(val, (uint64_t)expires);
    nf_put_le64(val + 8, (uint64_t)published_ms);
    int n = nf_interest_topics_encode(&a->topics, val + 16, NF_TOPICS_ENC_MAX);
    if (n < 0)
        return 0; /* crawl's vectors always encode; a bad one just indexes nothing */
    for (uint32_t i = 0; i < a->topics.n; i++) {
        if (!(a->topics.t[i].weight > 0))
            continue;
        unsigned char rk[NF_SERVE_RECENT_KEY_LEN];
        nf_serve_recent_key(a->topics.t[i].topic, published_ms, a->id, rk);
        nf_store_batch_put(b, NF_KIND_TOPIC_RECENT, rk, sizeof rk, val, 16 + (size_t)n);
    }
    return 0;
}

/* ---------------------------------------------------------------------------- stories */

#define STORY_MORE  0x80000000u
#define SOURCE_SEED 0x736f75726365ull /* "source" */

void nf_serve_story_init(nf_serve_story_t *s)
{
    memset(s, 0, sizeof *s);
    s->size = 1;
}

int nf_serve_story_decode(const void *val, size_t len, nf_serve_story_t *s)
{
    const unsigned char *v = val;
    nf_serve_story_init(s);
    if (len == 4) { /* before sources were kept */
        s->size = nf_get_le32(v);
        return 0;
    }
    if (len < 8)
        return -EINVAL;
    uint32_t n = nf_get_le32(v + 4) & ~STORY_MORE;
    if (n > NF_SERVE_STORY_SOURCES_MAX || len != 8 + 8 * (size_t)n)
        return -EINVAL;
    s->size = nf_get_le32(v);
    s->more = (nf_get_le32(v + 4) & STORY_MORE) != 0;
    s->nsources = n;
    for (uint32_t i = 0; i < n; i++)
        s->sources[i] = nf_get_le64(v + 8 + 8 * i);
    return 0;
}

size_t nf_serve_story_encode(const nf_serve_story_t *s, unsigned char *out)
{
    nf_put_le32(out, s->size);
    nf_put_le32(out + 4, s->nsources | (s->more ? STORY_MORE : 0));
    for (uint32_t i = 0; i < s->nsources; i++)
        nf_put_le64(out + 8 + 8 * i, s->sources[i]);
    return 8 + 8 * (size_t)s->nsources;
}

void nf_serve_story_add_source(nf_serve_story_t *s, uint64_t source)
{
    if (!source)
        return;
    for (uint32_t i = 0; i < s->nsources; i++)
        if (s->sources[i] == source)
            return;
    if (s->nsources < NF_SERVE_STORY_SOURCES_MAX)
        s->sources[s->nsources++] = source;
    else
        s->more = true;
}

void nf_serve_story_merge(nf_serve_story_t *into, const nf_serve_story_t *from)
{
    for (uint32_t i = 0; i < from->nsources; i++)
        nf_serve_story_add_source(into, from->sources[i]);
    into->more |= from->more;
}

uint64_t nf_serve_source_hash(const char *source_id, size_t len)
{
    uint64_t h = nf_hash64(source_id, len, SOURCE_SEED);
    return h ? h : 1; /* 0 means "no source" */
}

void nf_serve_story_prefix(uint16_t kg, nf_id128_t story, char tag,
                           unsigned char out[NF_SERVE_STORY_PREFIX])
{
    nf_kstate_encode_key(kg, story, out);
    out[18] = (unsigned char)tag;
}

void nf_serve_member_tail(int64_t published_ms, nf_id128_t article,
                          unsigned char out[NF_SERVE_MEMBER_TAIL])
{
    nf_put_be64(out, (uint64_t)(INT64_MAX - (published_ms > 0 ? published_ms : 0)));
    nf_put_be64(out + 8, article.hi);
    nf_put_be64(out + 16, article.lo);
}

void nf_serve_member_tail_decode(const unsigned char tail[NF_SERVE_MEMBER_TAIL],
                                 int64_t *published_ms, nf_id128_t *article)
{
    uint64_t inv = nf_get_be64(tail); /* as written: INT64_MAX - published, published >= 0 */
    *published_ms = inv <= (uint64_t)INT64_MAX ? INT64_MAX - (int64_t)inv : 0;
    article->hi = nf_get_be64(tail + 8);
    article->lo = nf_get_be64(tail + 16);
}

void nf_serve_put_member(nf_store_batch_t *b, uint16_t kg, nf_id128_t story, int64_t published_ms,
                         nf_id128_t article, int64_t expires_ms)
{
    unsigned char k[NF_SERVE_MEMBER_KEY_LEN], v[EXPIRY_LEN];
    nf_serve_story_prefix(kg, story, NF_SERVE_STORY_MEMBER, k);
    nf_serve_member_tail(published_ms, article, k + NF_SERVE_STORY_PREFIX);
    nf_put_le64(v, (uint64_t)expires_ms);
    nf_store_batch_put(b, NF_KIND_STORY, k, sizeof k, v, sizeof v);
}

void nf_serve_put_child(nf_store_batch_t *b, uint16_t kg, nf_id128_t story, nf_id128_t merged,
                        int64_t expires_ms)
{
    unsigned char k[NF_SERVE_CHILD_KEY_LEN], v[EXPIRY_LEN];
    nf_serve_story_prefix(kg, story, NF_SERVE_STORY_CHILD, k);
    nf_put_be64(k + NF_SERVE_STORY_PREFIX, merged.hi);
    nf_put_be64(k + NF_SERVE_STORY_PREFIX + 8, merged.lo);
    nf_put_le64(v, (uint64_t)expires_ms);
    nf_store_batch_put(b, NF_KIND_STORY, k, sizeof k, v, sizeof v);
}

int nf_serve_member_decode(const void *key, size_t klen, const void *val, size_t vlen,
                           int64_t *expires_ms, int64_t *published_ms, nf_id128_t *article)
{
    const unsigned char *k = key;
    if (klen != NF_SERVE_MEMBER_KEY_LEN || vlen < EXPIRY_LEN || k[18] != NF_SERVE_STORY_MEMBER)
        return -EINVAL;
    *expires_ms = (int64_t)nf_get_le64(val);
    nf_serve_member_tail_decode(k + NF_SERVE_STORY_PREFIX, published_ms, article);
    return 0;
}

int nf_serve_child_decode(const void *key, size_t klen, const void *val, size_t vlen,
                          int64_t *expires_ms, nf_id128_t *merged)
{
    const unsigned char *k = key;
    if (klen != NF_SERVE_CHILD_KEY_LEN || vlen < EXPIRY_LEN || k[18] != NF_SERVE_STORY_CHILD)
        return -EINVAL;
    *expires_ms = (int64_t)nf_get_le64(val);
    merged->hi = nf_get_be64(k + NF_SERVE_STORY_PREFIX);
    merged->lo = nf_get_be64(k + NF_SERVE_STORY_PREFIX + 8);
    return 0;
}

void nf_serve_article_story(const nf_article_blob_t *a, int64_t *published_ms, uint64_t *source)
{
    cJSON *root = cJSON_ParseWithLength(a->json, a->len);
    int64_t pub_at = 0;
    bool has_pub = date_field(root, "published_at", &pub_at);
    *published_ms = nf_serve_published_ms(pub_at, has_pub, a->ingested_ms);
    const char *src = field(root, "source_id");
    *source = src ? nf_serve_source_hash(src, strlen(src)) : 0;
    cJSON_Delete(root);
}
