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
#include <unistd.h>

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

int32_t nf_murmur2(const void *data, size_t len)
{
    const uint32_t m = 0x5bd1e995u;
    const int r = 24;
    const unsigned char *d = data;
    uint32_t h = 0x9747b28cu ^ (uint32_t)len;
    size_t n4 = len / 4;
    for (size_t i = 0; i < n4; i++) {
        const unsigned char *q = d + 4 * i;
        uint32_t k =
            (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
        k *= m;
        k ^= k >> r;
        k *= m;
        h *= m;
        h ^= k;
    }
    const unsigned char *t = d + 4 * n4;
    switch (len % 4) {
    case 3:
        h ^= (uint32_t)t[2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)t[1] << 8;
        /* fall through */
    case 1:
        h ^= t[0];
        h *= m;
        break;
    default:
        break;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}

int32_t nf_sources_partition(const char *host, int32_t partitions)
{
    uint32_t h = (uint32_t)nf_murmur2(host, strlen(host)) & 0x7fffffffu;
    return partitions > 0 ? (int32_t)(h % (uint32_t)partitions) : 0;
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

/* A local path or file:// URL. "SCHEME:..." without "//" (mailto:, urn:) is a URL with another
 * scheme, not a path: it is refused, not taken for a file that does not exist. */
static bool is_local(const char *raw)
{
    if (!strncmp(raw, "file://", 7))
        return true;
    if (strstr(raw, "://"))
        return false;
    size_t n = strspn(raw, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-");
    return !(n > 1 && raw[n] == ':' && isalpha((unsigned char)raw[0]));
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

/* The source_id of url into out, and the digest it comes from (seen_key). */
static void id_digest(const char *url, char out[17], uint8_t digest[32])
{
    nf_sha256(url, strlen(url), digest);
    nf_hex(digest, 8, out);
}

void nf_sources_id(const char *url, char out[17])
{
    uint8_t digest[32];
    id_digest(url, out, digest);
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
    int rc = 0;
    if (is_local(raw)) {
        /* A local path (or a file URL). One that does not resolve now is kept: a missing feed
         * file is that source's failure (fetch error, backoff), not the job's. */
        const char *path = strncmp(raw, "file://", 7) ? raw : raw + 7;
        char abs[PATH_MAX];
        if (!realpath(path, abs)) {
            int e = errno;
            char cwd[PATH_MAX] = "";
            if (path[0] != '/' && !getcwd(cwd, sizeof cwd)) {
                snprintf(err, errlen, "%s: \"%s\": cannot make the path absolute: %s", where, raw,
                         strerror(errno));
                return -1;
            }
            if ((size_t)snprintf(abs, sizeof abs, "%s%s%s", cwd, cwd[0] ? "/" : "", path) >=
                sizeof abs) {
                snprintf(err, errlen, "%s: path longer than %zu bytes", where, sizeof abs - 1);
                return -1;
            }
            snprintf(err, errlen,
                     "%s: \"%s\" is not an http(s) URL and not a readable file now (%s): kept as "
                     "a local source that fails until %s exists",
                     where, raw, strerror(e), abs);
            d.missing = true;
            rc = 1;
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
    id_digest(url, d.source_id, digest);
    d.host_key = nf_sources_host_key(host);

    if (!l->seen.slots && nf_idset_init(&l->seen, 1024) != 0) {
        snprintf(err, errlen, "%s: out of memory", where);
        return -1;
    }
    /* Keyed by the source_id's 64 bits: two URLs with one source_id would share its state. */
    int ins = nf_idset_insert(&l->seen, seen_key(digest), l->n, NULL);
    if (ins == 0) {
        l->duplicates++;
        return rc;
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
    return rc;
}

void nf_sources_report_free(nf_sources_report_t *r)
{
    free(r->errors);
    free(r->warnings);
    *r = (nf_sources_report_t){0};
}

/* Appends "line\n" to *buf; false without memory (the report is then short, the count right). */
static bool report_append(char **buf, size_t *len, size_t *cap, const char *line)
{
    size_t n = strlen(line);
    if (*len + n + 2 > *cap) {
        size_t c = *cap ? *cap : 1024;
        while (*len + n + 2 > c)
            c *= 2;
        char *b = realloc(*buf, c);
        if (!b)
            return false;
        *buf = b;
        *cap = c;
    }
    memcpy(*buf + *len, line, n);
    *len += n;
    (*buf)[(*len)++] = '\n';
    (*buf)[*len] = '\0';
    return true;
}

static void report_error(nf_sources_report_t *r, const char *msg)
{
    if (r->nerrors++ < NF_SOURCES_REPORT_LINES)
        report_append(&r->errors, &r->errors_len, &r->errors_cap, msg);
}

/* "... and N more" after the first NF_SOURCES_REPORT_LINES of a kind. */
static void report_more(char **buf, size_t *len, size_t *cap, unsigned n, const char *what)
{
    if (n <= NF_SOURCES_REPORT_LINES)
        return;
    char msg[96];
    snprintf(msg, sizeof msg, "... and %u more %s (only the first %u are listed)",
             n - NF_SOURCES_REPORT_LINES, what, NF_SOURCES_REPORT_LINES);
    report_append(buf, len, cap, msg);
}

/* One entry of the list: added, a warning, or an error, each recorded in r. */
static void load_one(nf_source_list_t *l, const char *spec, const char *where,
                     nf_sources_report_t *r)
{
    char err[PATH_MAX + 1024];
    int a = nf_sources_add(l, spec, where, err, sizeof err);
    if (a < 0) {
        report_error(r, err);
    } else if (a > 0 && r->nwarnings++ < NF_SOURCES_REPORT_LINES) {
        report_append(&r->warnings, &r->warnings_len, &r->warnings_cap, err);
    }
}

static void load_file(nf_source_list_t *l, const char *path, nf_sources_report_t *r)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        char msg[PATH_MAX + 128];
        snprintf(msg, sizeof msg, "sources.file: cannot open %s: %s", path, strerror(errno));
        report_error(r, msg);
        return;
    }
    char line[2048], where[PATH_MAX + 32];
    unsigned lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t n = strlen(line);
        if (n == sizeof line - 1 && line[n - 1] != '\n' && !feof(f)) {
            /* Longer than any URL we accept: report it once and skip the rest of it. */
            snprintf(where, sizeof where, "%s:%u: line longer than %zu bytes", path, lineno,
                     sizeof line - 2);
            report_error(r, where);
            int ch;
            while ((ch = fgetc(f)) != EOF && ch != '\n')
                ;
            continue;
        }
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
        if (is_local(p) && strncmp(p, "file://", 7) != 0 && p[0] != '/' && slash) {
            snprintf(joined, sizeof joined, "%.*s/%s", (int)(slash - path), path, p);
            p = joined;
        }
        load_one(l, p, where, r);
    }
    if (ferror(f)) {
        char msg[PATH_MAX + 128];
        snprintf(msg, sizeof msg, "sources.file: error reading %s after line %u", path, lineno);
        report_error(r, msg);
    }
    fclose(f);
}

int nf_sources_load(nf_source_list_t *l, const char *urls, const char *path,
                    nf_sources_report_t *rep)
{
    *rep = (nf_sources_report_t){0};
    unsigned idx = 0;
    for (const char *it = urls ? urls : ""; *it; idx++) {
        size_t n = strcspn(it, "\n");
        char item[2048], where[48];
        snprintf(where, sizeof where, "sources.urls[%u]", idx);
        if (n >= sizeof item) {
            char msg[96];
            snprintf(msg, sizeof msg, "%s: URL longer than 1023 bytes", where);
            report_error(rep, msg);
        } else {
            memcpy(item, it, n);
            item[n] = '\0';
            load_one(l, item, where, rep);
        }
        it += n + (it[n] == '\n');
    }
    if (path && path[0])
        load_file(l, path, rep);
    report_more(&rep->errors, &rep->errors_len, &rep->errors_cap, rep->nerrors, "errors");
    report_more(&rep->warnings, &rep->warnings_len, &rep->warnings_cap, rep->nwarnings, "warnings");
    return rep->nerrors ? -1 : 0;
}

int nf_sources_load_file(nf_source_list_t *l, const char *path, char *err, size_t errlen)
{
    nf_sources_report_t r;
    int rc = nf_sources_load(l, NULL, path, &r);
    if (rc != 0 && err && errlen) {
        snprintf(err, errlen, "%s", r.errors ? r.errors : "out of memory");
        size_t n = strlen(err);
        if (n && err[n - 1] == '\n')
            err[n - 1] = '\0';
    }
    nf_sources_report_free(&r);
    return rc;
}
