/* feed_json.c — JSON Feed 1.0 / 1.1 (https://jsonfeed.org/version/1.1) through cJSON.
 *
 * JSON Feeds are small and rare next to RSS and Atom, so a tree is fine here; what matters is
 * that nothing in the document can make us crash or loop: nesting is measured before cJSON
 * runs (its recursion is bounded by our max_depth, not by its compile-time 1000), and every
 * field is type-checked — a value of the wrong type is ignored with a warning, never trusted.
 * An id given as a number is kept as its decimal text, since feeds in the wild do that. */
#include "feed/feed_int.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct json_ctx {
    nf_fparse_t *p;
    size_t item; /* 1-based ordinal of the item being read, 0 for the feed */
} json_ctx_t;

static unsigned json_depth(const char *s, size_t n)
{
    unsigned d = 0, max = 0;
    bool str = false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                str = false;
        } else if (c == '"') {
            str = true;
        } else if (c == '{' || c == '[') {
            if (++d > max)
                max = d;
        } else if ((c == '}' || c == ']') && d) {
            d--;
        }
    }
    return max;
}

static void json_wrong_type(json_ctx_t *j, const char *key, const char *want)
{
    if (j->item)
        nf_fp_warn(j->p, "item %zu: \"%s\" is not %s; ignored", j->item, key, want);
    else
        nf_fp_warn(j->p, "feed: \"%s\" is not %s; ignored", key, want);
}

/* The string value of obj[key]; NULL when absent or null, and (with a warning) when it has
 * another type. */
static const char *json_str(json_ctx_t *j, const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v))
        return NULL;
    if (!cJSON_IsString(v) || !v->valuestring) {
        json_wrong_type(j, key, "a string");
        return NULL;
    }
    return v->valuestring;
}

static void json_offer(json_ctx_t *j, nf_fslot_t *s, const cJSON *obj, const char *key, int prio,
                       nf_ftext_t kind)
{
    const char *v = json_str(j, obj, key);
    if (v)
        nf_fp_offer(j->p, s, v, strlen(v), prio, kind, false);
}

static void json_person(json_ctx_t *j, nf_fentry_t *e, const cJSON *a, int prio)
{
    if (!cJSON_IsObject(a)) {
        json_wrong_type(j, "author", "an object");
        return;
    }
    const char *name = json_str(j, a, "name");
    const char *url = json_str(j, a, "url");
    /* JSON Feed has no email; a mailto: url is one. */
    const char *email = url && !strncmp(url, "mailto:", 7) ? url + 7 : NULL;
    nf_fp_add_person(j->p, e, name, name ? strlen(name) : 0, email, email ? strlen(email) : 0,
                     prio);
}

/* authors (1.1) before author (1.0, deprecated in 1.1). */
static void json_authors(json_ctx_t *j, nf_fentry_t *e, const cJSON *obj)
{
    const cJSON *as = cJSON_GetObjectItemCaseSensitive(obj, "authors");
    if (as && !cJSON_IsNull(as)) {
        if (cJSON_IsArray(as)) {
            for (const cJSON *a = as->child; a; a = a->next)
                json_person(j, e, a, 2);
        } else {
            json_wrong_type(j, "authors", "an array");
        }
    }
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(obj, "author");
    if (a && !cJSON_IsNull(a))
        json_person(j, e, a, 1);
}

static void json_link(json_ctx_t *j, nf_fentry_t *e, nf_fslot_t *slot, const cJSON *obj,
                      const char *key, int prio)
{
    const char *v = json_str(j, obj, key);
    if (!v)
        return;
    const char *u = nf_fp_add_link(j->p, e, NULL, v, strlen(v));
    if (u && slot)
        nf_fp_offer(j->p, slot, u, strlen(u), prio, NF_FTEXT_PLAIN, false);
}

static void json_item(json_ctx_t *j, const cJSON *it)
{
    nf_fparse_t *p = j->p;
    nf_fentry_t *e = &p->item;
    nf_fp_item_begin(p);
    if (p->item_ignored) {
        nf_fp_item_end(p);
        return;
    }
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
    if (cJSON_IsString(id) && id->valuestring) {
        nf_fp_offer(p, &e->guid, id->valuestring, strlen(id->valuestring), 5, NF_FTEXT_PLAIN,
                    false);
    } else if (cJSON_IsNumber(id) && isfinite(id->valuedouble)) {
        char num[32];
        snprintf(num, sizeof num, "%.17g", id->valuedouble);
        nf_fp_offer(p, &e->guid, num, strlen(num), 5, NF_FTEXT_PLAIN, false);
    } else if (id && !cJSON_IsNull(id)) {
        json_wrong_type(j, "id", "a string or number");
    }
    json_link(j, e, &e->link, it, "url", 5);
    json_link(j, e, &e->link, it, "external_url", 4);
    json_offer(j, &e->title, it, "title", 5, NF_FTEXT_PLAIN);
    json_offer(j, &e->body, it, "content_html", 5, NF_FTEXT_HTML);
    json_offer(j, &e->body, it, "content_text", 4, NF_FTEXT_PLAIN);
    json_offer(j, &e->summary, it, "summary", 5, NF_FTEXT_PLAIN);
    json_offer(j, &e->published, it, "date_published", 5, NF_FTEXT_PLAIN);
    json_offer(j, &e->updated, it, "date_modified", 5, NF_FTEXT_PLAIN);
    json_offer(j, &e->language, it, "language", 5, NF_FTEXT_PLAIN);
    json_authors(j, e, it);
    const cJSON *tags = cJSON_GetObjectItemCaseSensitive(it, "tags");
    if (cJSON_IsArray(tags)) {
        for (const cJSON *t = tags->child; t; t = t->next) {
            if (cJSON_IsString(t) && t->valuestring)
                nf_fp_add_category(p, e, t->valuestring, strlen(t->valuestring), NF_FTEXT_PLAIN);
            else
                json_wrong_type(j, "tags[]", "a string");
        }
    } else if (tags && !cJSON_IsNull(tags)) {
        json_wrong_type(j, "tags", "an array");
    }
    nf_fp_item_end(p);
}

/* "https://jsonfeed.org/version/1.1" -> "1.1"; gofeed's test data also says just "1.0". */
static const char *json_version(const char *v)
{
    const char *tail = strstr(v, "jsonfeed.org/version/");
    if (tail)
        v = tail + strlen("jsonfeed.org/version/");
    if (!strcmp(v, "1") || !strcmp(v, "1.0"))
        return "1.0";
    if (!strcmp(v, "1.1"))
        return "1.1";
    return tail ? v : NULL;
}

int nf_feed_json_read(nf_fparse_t *p, const char *data, size_t len, char *err, size_t errlen)
{
    json_ctx_t j = {.p = p};
    unsigned depth = json_depth(data, len);
    if (depth > p->lim->max_depth) {
        snprintf(err, errlen, "JSON nested deeper than %u levels", p->lim->max_depth);
        return NF_FEED_E_TOO_DEEP;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(data, len, &end, false);
    if (!root) {
        unsigned line = 1, col = 1;
        if (end && end >= data && end <= data + len)
            nf_fp_linecol(data, (size_t)(end - data), &line, &col);
        snprintf(err, errlen, "JSON syntax error at line %u:%u", line, col);
        return NF_FEED_E_MALFORMED;
    }
    int rc = NF_FEED_OK;
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(root, "items");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    const char *version =
        cJSON_IsString(ver) && ver->valuestring ? json_version(ver->valuestring) : NULL;
    if (!cJSON_IsObject(root)) {
        snprintf(err, errlen, "JSON document is not an object, so not a JSON Feed");
        rc = NF_FEED_E_NOT_A_FEED;
        goto out;
    }
    if (!version && !cJSON_IsArray(items)) {
        snprintf(err, errlen,
                 "JSON object without a JSON Feed \"version\" "
                 "(\"https://jsonfeed.org/version/1.1\") or \"items\" array: not a JSON Feed");
        rc = NF_FEED_E_NOT_A_FEED;
        goto out;
    }
    if (!version)
        nf_fp_warn(p, "feed: no JSON Feed \"version\"; read as one because it has \"items\"");
    p->f->format = NF_FEED_JSON;
    p->f->version = version ? nf_fp_str(p, version, strlen(version)) : "";
    if (!p->f->version)
        p->f->version = "";

    nf_fentry_t *fe = &p->feed;
    json_offer(&j, &fe->title, root, "title", 5, NF_FTEXT_PLAIN);
    json_link(&j, fe, &fe->link, root, "home_page_url", 5);
    json_link(&j, fe, &fe->feed_link, root, "feed_url", 5);
    json_offer(&j, &fe->summary, root, "description", 5, NF_FTEXT_PLAIN);
    json_offer(&j, &fe->language, root, "language", 5, NF_FTEXT_PLAIN);
    json_authors(&j, fe, root);

    if (cJSON_IsArray(items)) {
        for (const cJSON *it = items->child; it; it = it->next) {
            j.item = p->f->nitems + p->f->skipped_items + p->f->truncated_items + 1;
            if (!cJSON_IsObject(it)) {
                nf_fp_warn(p, "item %zu: not an object; skipped", j.item);
                p->f->skipped_items++;
                continue;
            }
            json_item(&j, it);
            if (p->nomem)
                break;
        }
    } else if (items && !cJSON_IsNull(items)) {
        json_wrong_type(&j, "items", "an array");
    }
out:
    cJSON_Delete(root);
    return rc;
}
