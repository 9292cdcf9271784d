/* sources.c — see sources.h. Runs once at start-up: clarity over speed. */
#include "actors/sources.h"

#include "algo/sha256.h"
#include "feed/url.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nf_sources_init(nf_source_list_t *l)
{
    *l = (nf_source_list_t){0};
}

void nf_sources_free(nf_source_list_t *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free((char *)l->items[i].url);
        free((char *)l->items[i].host);
    }
    free(l->items);
    if (l->seen.slots)
        nf_idset_free(&l->seen);
    *l = (nf_source_list_t){0};
}

uint64_t nf_sources_host_key(const char *host)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)host; *p; p++) {
        h ^= *p;
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Host of a normalized http(s) URL: between "://" (after any userinfo) and the next ':', '/'. */
static void url_host(const char *url, char *out, size_t outlen)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    const char *end = p + strcspn(p, "/?#");
    const char *at = memchr(p, '@', (size_t)(end - p));
    if (at)
        p = at + 1;
    const char *hend = p;
    if (*p == '[') {
        hend = memchr(p, ']', (size_t)(end - p));
        hend = hend ? hend + 1 : end;
    } else {
        while (hend < end && *hend != ':')
            hend++;
    }
    snprintf(out, outlen, "%.*s", (int)(hend - p), p);
}

/* spec without surrounding white space into raw (1024 bytes); -1 with "WHERE: reason". */
static int trim_spec(const char *spec, char raw[1024], const char *where, char *err, size_t errlen)
{
    while (isspace((unsigned char)*spec))
        spec++;
    size_t n = strlen(spec);
    while (n && isspace((unsigned char)spec[n - 1]))
        n--;
    if (n == 0 || n >= 1024) {
        snprintf(err, errlen, "%s: %s", where, n ? "URL longer than 1023 bytes" : "empty source");
        return -1;
    }
    memcpy(raw, spec, n);
    raw[n] = '\0';
    return 0;
}

/* The http(s) half of nf_sources_add, shared with nf_sources_check_url. */
static int check_http(const char *raw, nf_source_url_t *out, const char *where, char *err,
                      size_t errlen)
{
    int r = nf_url_normalize(raw, out->url, sizeof out->url);
    if (r < 0) {
        snprintf(err, errlen, "%s: \"%.200s\": %s", where, raw, nf_url_strerror(r));
        return -1;
    }
    url_host(out->url, out->host, sizeof out->host);
    out->host_key = nf_sources_host_key(out->host);
    return 0;
}

static bool is_local(const char *raw)
{
    return strstr(raw, "://") == NULL || !strncmp(raw, "file://", 7);
}

int nf_sources_check_url(const char *spec, nf_source_url_t *out, char *err, size_t errlen)
{
    char raw[1024];
    if (trim_spec(spec, raw, "url", err, errlen) != 0)
        return -1;
    if (is_local(raw)) {
        snprintf(err, errlen,
                 "url: \"%.200s\": only http(s) URLs are accepted here (local files "
                 "only from sources.urls / sources.file)",
                 raw);
        return -1;
    }
    return check_http(raw, out, "url", err, errlen);
}

/* The 64 bits of a source_id as the key of nf_source_list_t.seen: the digest's first 8 bytes. */
static nf_id128_t seen_key(const uint8_t digest8[8])
{
    nf_id128_t key = {0, 0};
    memcpy(&key.hi, digest8, 8);
    return key;
}

const nf_source_def_t *nf_sources_find(const nf_source_list_t *l, const char *source_id)
{
    uint8_t d[8];
    if (!l->seen.slots || strlen(source_id) != 16)
        return NULL;
    for (int i = 0; i < 16; i++) {
        char ch = source_id[i];
        int v = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (v < 0) /* source_ids are lower-case hex: "ABC…" is another (topic) source */
            return NULL;
        if (i % 2 == 0)
            d[i / 2] = (uint8_t)(v << 4);
        else
            d[i / 2] |= (uint8_t)v;
    }
    uint64_t idx;
    if (!nf_idset_get(&l->seen, seen_key(d), &idx) || idx >= l->n)
        return NULL;
    return &l->items[idx];
}

int nf_sources_add(nf_source_list_t *l, const char *spec, const char *where, char *err,
                   size_t errlen)
{
    char raw[1024];
    if (trim_spec(spec, raw, where, err, errlen) != 0)
        return -1;

    nf_source_def_t d;
    memset(&d, 0, sizeof d);
    nf_source_url_t u;
    char *url = u.url, *host = u.host;
    if (is_local(raw)) {
        /* A local path (or a file URL): must exist now, so a typo fails at start. */
        const char *path = strncmp(raw, "file://", 7) ? raw : raw + 7;
        char abs[PATH_MAX];
        if (!realpath(path, abs)) {
            snprintf(err, errlen, "%s: \"%s\" is neither an http(s) URL nor a readable file: %s",
                     where, raw, strerror(errno));
            return -1;
        }
        if (strlen(abs) + 8 > sizeof u.url) {
            snprintf(err, errlen, "%s: path longer than %zu bytes", where, sizeof u.url - 8);
            return -1;
        }
        memcpy(url, "file://", 7);
        memcpy(url + 7, abs, strlen(abs) + 1);
        /* Each local file is its own "host": politeness is for servers, not for files. */
        snprintf(host, sizeof u.host, "file:%.*s", (int)sizeof u.host - 6, abs);
        d.is_file = true;
    } else if (check_http(raw, &u, where, err, errlen) != 0) {
        return -1;
    }
    uint8_t digest[32];
    nf_sha256(url, strlen(url), digest);
    nf_hex(digest, 8, d.source_id);
    d.host_key = nf_sources_host_key(host);

    if (!l->seen.slots && nf_idset_init(&l->seen, 1024) != 0) {
        snprintf(err, errlen, "%s: out of memory", where);
        return -1;
    }
    /* Keyed by the source_id's 64 bits: two URLs with one source_id would share its state. */
    int ins = nf_idset_insert(&l->seen, seen_key(digest), l->n, NULL);
    if (ins == 0) {
        l->duplicates++;
        return 0;
    }
    if (ins < 0) {
        snprintf(err, errlen, "%s: out of memory", where);
        return -1;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        nf_source_def_t *items = realloc(l->items, cap * sizeof *items);
        if (!items) {
            snprintf(err, errlen, "%s: out of memory", where);
            return -1;
        }
        l->items = items;
        l->cap = cap;
    }
    d.url = strdup(url);
    d.host = strdup(host);
    if (!d.url || !d.host) {
        free((char *)d.url);
        free((char *)d.host);
        snprintf(err, errlen, "%s: out of memory", where);
        return -1;
    }
    l->items[l->n++] = d;
    return 0;
}

int nf_sources_load_file(nf_source_list_t *l, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "sources.file: cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    char line[2048], where[PATH_MAX + 32];
    unsigned lineno = 0;
    int rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        const char *p = line;
        while (isspace((unsigned char)*p))
            p++;
        if (!*p)
            continue;
        snprintf(where, sizeof where, "%s:%u", path, lineno);
        /* A relative local path is relative to the sources file, not to the working dir. */
        char joined[PATH_MAX + 2048];
        const char *slash = strrchr(path, '/');
        if (!strstr(p, "://") && p[0] != '/' && slash) {
            snprintf(joined, sizeof joined, "%.*s/%s", (int)(slash - path), path, p);
            p = joined;
        }
        if (nf_sources_add(l, p, where, err, errlen) != 0) {
            rc = -1;
            break;
        }
    }
    fclose(f);
    return rc;
}
