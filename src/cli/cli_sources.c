/* cli_sources.c — `newsflow sources add|pause|resume|remove|crawl-now|import|export`: the
 * operator's changes to the compacted sources topic without kcat (docs/topics.md, "sources").
 *
 * Each command reads the topic whole first (read_committed, as the job reads it): what it says
 * of each source_id is what the job crawls, with the configuration's sources (sources.urls,
 * sources.file) under it. It checks the change against that (a URL is http(s) and normalized as
 * the job does; add refuses a source_id or a URL the topic or the configuration already has;
 * the others refuse an id or URL that is in neither), writes one record per source to the
 * partition of its host (nf_sources_partition: the partition a consumer group wants it in),
 * waits for the broker's acknowledgement, then reads back what the job applied: it asks the
 * running job's admin server (/v1/sources) until each source shows the change, or --wait
 * seconds pass. A job that is not running, or a source whose sources partition another process
 * of the group holds, is said and not waited for: the record is in the topic, and the job that
 * reads it applies it.
 *
 * Records are the operator's (no "origin": a configured source published by the job is never
 * written over again once an operator changed it, sources_publish.h). pause and resume keep the
 * record's other fields (title, category, interval); crawl-now adds crawl_at_ms, which no other
 * command carries on. The embedded Kafka (kafka.brokers "embedded") lives inside the running
 * job: its address comes from state.dir/admin.json. */
#include "actors/sources.h"
#include "algo/idset.h"
#include "algo/sha256.h"
#include "cli/cli.h"
#include "feed/opml.h"
#include "io/events.h"
#include "io/kafka.h"
#include "runtime/config.h"
#include "runtime/jsonw.h"
#include "runtime/log.h"
#include "runtime/metrics.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static const char usage[] =
    "Usage: newsflow sources add URL [--interval S] [--id ID] [--title T] [--category C]\n"
    "                            [--paused] [OPTIONS]\n"
    "       newsflow sources pause|resume|remove|crawl-now ID|URL... [OPTIONS]\n"
    "       newsflow sources import FILE.opml [--skip-invalid] [--dry-run] [OPTIONS]\n"
    "       newsflow sources export [--out FILE] [--config FILE] [--set ...]\n"
    "\n"
    "Changes the sources topic (compacted, key = source_id), the way feeds are added, paused and\n"
    "removed while the job runs, then reads back what the job applied.\n"
    "\n"
    "  add URL     a new http(s) feed; its id is the first 16 hex digits of the SHA-256 of the\n"
    "              normalized URL unless --id names one ([A-Za-z0-9._:-], up to 128). Refused\n"
    "              when the id or the URL is a source already. --interval S: seconds between\n"
    "              crawls (default crawl.interval_s, clamped by the crawl floor and ceiling);\n"
    "              --paused: added but not crawled\n"
    "  pause       stop crawling (its schedule and failures are kept)\n"
    "  resume      crawl again (failures reset); also revives a source declared dead\n"
    "  remove      delete the source (a tombstone); a source of the configuration (sources.urls,\n"
    "              sources.file) cannot be removed here: pause it, or take it out of the list\n"
    "  crawl-now   crawl at once, out of any backoff; --wait waits for that crawl's outcome\n"
    "  import      every feed (<outline xmlUrl=...>) of an OPML file, the format feed readers\n"
    "              export; sources already there are left as they are. Any invalid entry\n"
    "              refuses the whole file unless --skip-invalid; --dry-run only checks\n"
    "  export      every source the job crawls (the topic's and the configuration's) as OPML\n"
    "              2.0, with category, interval, status and any --id, to stdout or --out FILE\n"
    "\n"
    "Options:\n"
    "  --wait S    seconds to wait for the running job to show the change (default 30)\n"
    "  --no-wait   write the records and return once the broker acknowledged them\n"
    "  --config FILE, --set SECTION.KEY=VALUE   the job's configuration (kafka.brokers,\n"
    "              kafka.topic_prefix, admin.port, state.dir, sources.*), loaded as `run` does\n"
    "\n"
    "With kafka.brokers \"embedded\" the topic lives inside the running job (its address is in\n"
    "state.dir/admin.json): start the job first.\n"
    "\n"
    "Exit codes: 0 done (and confirmed, or no job to confirm it), 1 the broker or the job failed\n"
    "or did not show the change in time, 2 usage, configuration or validation error.\n";

/* ---------------------------------------------------------------- sets of strings */

/* A string's key in an nf_idset_t: the first 128 bits of its SHA-256 (the project's way of
 * keying ids by their text, as nf_ingest_source_key does). */
static nf_id128_t str_key(const char *str)
{
    uint8_t d[32];
    nf_id128_t k;
    nf_sha256(str, strlen(str), d);
    memcpy(&k.hi, d, 8);
    memcpy(&k.lo, d + 8, 8);
    return k;
}

/* ---------------------------------------------------------------- the topic as it stands */

typedef struct {
    char *id;
    char *value;     /* JSON text; NULL: a tombstone */
    char nurl[1024]; /* the value's URL normalized; "" when it is not one */
    char host[256];
    int32_t part; /* the partition it is in: a change or tombstone goes there, over it */
    size_t seq;   /* read order: the last one of an id counts */
} rec_t;

typedef struct {
    rec_t *v;
    size_t n, cap;
    rec_t **byurl;    /* after recs_settle: sorted by nurl */
    size_t max_bytes; /* kafka.max_event_bytes: a longer record the job dead-letters */
    bool nomem;
} recs_t;

static int on_record(void *arg, int topic_index, int32_t partition, int64_t offset, const void *key,
                     size_t klen, const void *val, size_t vlen, bool tombstone)
{
    recs_t *r = arg;
    (void)topic_index;
    (void)offset;
    if (!key || klen == 0 || klen > NF_SOURCE_ID_MAX || memchr(key, 0, klen))
        return 0; /* the job dead-letters it: not a source */
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 256;
        rec_t *v = realloc(r->v, cap * sizeof *v);
        if (!v) {
            r->nomem = true;
            return -ENOMEM;
        }
        r->v = v;
        r->cap = cap;
    }
    rec_t *e = &r->v[r->n];
    memset(e, 0, sizeof *e);
    e->seq = r->n;
    e->part = partition;
    e->id = strndup(key, klen);
    e->value = tombstone || !val || !vlen ? NULL : strndup(val, vlen);
    if (!e->id || (!tombstone && val && vlen && !e->value)) {
        free(e->id);
        free(e->value);
        r->nomem = true;
        return -ENOMEM;
    }
    nf_source_record_t sr;
    nf_source_url_t u;
    char err[256];
    if (e->value &&
        nf_source_record_decode(key, klen, val, vlen, r->max_bytes, &sr, err, sizeof err) == 0 &&
        nf_sources_check_url(sr.url, &u, err, sizeof err) == 0) {
        snprintf(e->nurl, sizeof e->nurl, "%s", u.url);
        snprintf(e->host, sizeof e->host, "%s", u.host);
    }
    r->n++;
    return 0;
}

static int by_id_then_seq(const void *a, const void *b)
{
    const rec_t *x = a, *y = b;
    int c = strcmp(x->id, y->id);
    return c ? c : x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int by_url(const void *a, const void *b)
{
    return strcmp((*(rec_t *const *)a)->nurl, (*(rec_t *const *)b)->nurl);
}

/* Sorted by id, one entry per id (the last read), tombstones dropped. */
static void recs_settle(recs_t *r)
{
    if (r->n)
        qsort(r->v, r->n, sizeof *r->v, by_id_then_seq);
    size_t o = 0;
    for (size_t i = 0; i < r->n; i++) {
        bool last = i + 1 == r->n || strcmp(r->v[i].id, r->v[i + 1].id) != 0;
        if (last && r->v[i].value) {
            r->v[o++] = r->v[i];
            continue;
        }
        free(r->v[i].id);
        free(r->v[i].value);
    }
    r->n = o;
    if ((r->byurl = malloc((o ? o : 1) * sizeof *r->byurl)) == NULL) {
        r->nomem = true;
        return;
    }
    for (size_t i = 0; i < o; i++)
        r->byurl[i] = &r->v[i];
    if (o)
        qsort(r->byurl, o, sizeof *r->byurl, by_url);
}

static void recs_free(recs_t *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->v[i].id);
        free(r->v[i].value);
    }
    free(r->v);
    free(r->byurl);
}

static rec_t *recs_find(const recs_t *r, const char *id)
{
    rec_t key = {.id = (char *)id, .seq = 0};
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (strcmp(r->v[mid].id, key.id) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < r->n && !strcmp(r->v[lo].id, id) ? &r->v[lo] : NULL;
}

static rec_t *recs_find_url(const recs_t *r, const char *nurl)
{
    size_t lo = 0, hi = r->byurl ? r->n : 0;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (strcmp(r->byurl[mid]->nurl, nurl) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return nurl[0] && lo < r->n && r->byurl && !strcmp(r->byurl[lo]->nurl, nurl) ? r->byurl[lo]
                                                                                 : NULL;
}

/* ---------------------------------------------------------------- a command's context */

typedef enum { W_PAUSED, W_DEAD, W_ACTIVE, W_ABSENT, W_CRAWLED } want_t;

typedef struct {
    char id[NF_SOURCE_ID_MAX + 1];
    char url[1024]; /* for messages */
    want_t want;
    int64_t crawl_at;
    int32_t part;
    bool done, elsewhere, crawled;
    char outcome[32]; /* crawl-now: the last fetch's outcome once crawled */
} expect_t;

typedef struct {
    nf_config_t cfg;
    const char *verb;
    char brokers[1024];
    nf_kafka_t *k;
    int parts; /* of the sources topic */
    recs_t recs;
    nf_source_list_t list; /* the configuration's */
    /* what goes out */
    nf_kafka_pub_t *pubs;
    char **vals, **keys;
    expect_t *exp;
    size_t n, cap;
    /* options */
    double wait_s;
    bool no_wait, skip_invalid, dry_run, paused;
    uint32_t interval_s;
    const char *id, *title, *category, *out;
    nf_opml_t opml;     /* import: the file, parsed */
    cJSON *job_sources; /* the running job's /v1/sources, once asked (job_says_dead) */
    bool job_asked;
} ctx_t;

static int32_t host_part(const ctx_t *x, const char *host)
{
    return nf_sources_partition(host, x->parts);
}

/* A record for partition part and what the job should show once it applied it. The strings are
 * copied. 0; -E2BIG (a record the job would dead-letter, said); -ENOMEM. */
static int queue(ctx_t *x, const char *id, const char *value, int32_t part, const char *url,
                 want_t want, int64_t crawl_at)
{
    if (value && x->cfg.kafka.max_event_bytes && strlen(value) > x->cfg.kafka.max_event_bytes) {
        fprintf(stderr,
                "newsflow sources %s: %s: a record of %zu bytes, over kafka.max_event_bytes "
                "(%u): the job would dead-letter it (shorten the title or category)\n",
                x->verb, url, strlen(value), x->cfg.kafka.max_event_bytes);
        return -E2BIG;
    }
    if (x->n == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 16;
        nf_kafka_pub_t *p = realloc(x->pubs, cap * sizeof *p);
        if (p)
            x->pubs = p;
        char **v = p ? realloc(x->vals, cap * sizeof *v) : NULL;
        if (v)
            x->vals = v;
        char **k = v ? realloc(x->keys, cap * sizeof *k) : NULL;
        if (k)
            x->keys = k;
        expect_t *e = k ? realloc(x->exp, cap * sizeof *e) : NULL;
        if (!e)
            return -ENOMEM;
        x->exp = e;
        x->cap = cap;
    }
    char *k = strdup(id), *v = value ? strdup(value) : NULL;
    if (!k || (value && !v)) {
        free(k);
        free(v);
        return -ENOMEM;
    }
    x->keys[x->n] = k;
    x->vals[x->n] = v;
    x->pubs[x->n] = (nf_kafka_pub_t){
        .key = k, .klen = strlen(k), .value = v, .vlen = v ? strlen(v) : 0, .partition = part};
    expect_t *e = &x->exp[x->n];
    memset(e, 0, sizeof *e);
    snprintf(e->id, sizeof e->id, "%s", id);
    snprintf(e->url, sizeof e->url, "%s", url);
    e->want = want;
    e->crawl_at = crawl_at;
    e->part = part;
    x->n++;
    return 0;
}

static void ctx_free(ctx_t *x)
{
    for (size_t i = 0; i < x->n; i++) {
        free(x->keys[i]);
        free(x->vals[i]);
    }
    free(x->keys);
    free(x->vals);
    free(x->pubs);
    free(x->exp);
    recs_free(&x->recs);
    nf_sources_free(&x->list);
    nf_opml_free(&x->opml);
    cJSON_Delete(x->job_sources);
    nf_kafka_free(x->k);
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---------------------------------------------------------------- connecting */

static int connect_topic(ctx_t *x)
{
    const char *b = x->cfg.kafka.brokers;
    if (!b[0]) {
        fprintf(stderr,
                "newsflow sources %s: kafka.brokers is empty: this job has no sources "
                "topic (its feeds are sources.urls and sources.file only)\n",
                x->verb);
        return NF_EXIT_USAGE;
    }
    if (!strcmp(b, "embedded")) {
        if (!nf_cli_embedded_brokers(x->cfg.state.dir, x->brokers, sizeof x->brokers)) {
            fprintf(stderr,
                    "newsflow sources %s: kafka.brokers is \"embedded\": the sources topic lives "
                    "inside the running job, and no job runs on state.dir %s (no %s/admin.json "
                    "held by a running job). Start it (`newsflow run`) first, or set "
                    "kafka.brokers to your cluster\n",
                    x->verb, x->cfg.state.dir, x->cfg.state.dir);
            return NF_EXIT_RUNTIME;
        }
    } else {
        snprintf(x->brokers, sizeof x->brokers, "%s", b);
    }
    char err[1024];
    nf_kafka_opts_t ko = {.brokers = x->brokers,
                          .topic_prefix = x->cfg.kafka.topic_prefix,
                          .properties = x->cfg.kafka.properties,
                          .client_id = "newsflow-sources"};
    if (!(x->k = nf_kafka_new(&ko, err, sizeof err))) {
        fprintf(stderr, "newsflow sources %s: %s: %s\n", x->verb,
                errno == ENOENT ? "the job's topics are missing (`newsflow topics create`)"
                                : "cannot reach Kafka",
                err);
        return NF_EXIT_RUNTIME;
    }
    if ((x->parts = nf_kafka_input_partitions(x->k, NF_INPUT_SOURCES)) <= 0) {
        fprintf(stderr, "newsflow sources %s: the sources topic's partitions are not known\n",
                x->verb);
        return NF_EXIT_RUNTIME;
    }
    x->recs.max_bytes = x->cfg.kafka.max_event_bytes;
    if (nf_kafka_read_input(x->k, NF_INPUT_SOURCES, on_record, &x->recs, err, sizeof err) != 0) {
        fprintf(stderr, "newsflow sources %s: reading the sources topic: %s\n", x->verb,
                x->recs.nomem ? "out of memory" : err);
        return NF_EXIT_RUNTIME;
    }
    recs_settle(&x->recs);
    if (x->recs.nomem) {
        fprintf(stderr, "newsflow sources %s: out of memory\n", x->verb);
        return NF_EXIT_RUNTIME;
    }
    nf_sources_report_t rep;
    if (nf_sources_load(&x->list, x->cfg.sources.urls, x->cfg.sources.file, &rep) != 0)
        fprintf(stderr,
                "newsflow sources %s: warning: the configuration's source list has errors "
                "(`newsflow config check` lists them); its good entries count\n",
                x->verb);
    nf_sources_report_free(&rep);
    return NF_EXIT_OK;
}

/* ---------------------------------------------------------------- finding a source */

/* The configured http(s) source whose (normalized) URL is url: its id is the URL's digest. */
static const nf_source_def_t *conf_by_url(const ctx_t *x, const char *url)
{
    char id[17];
    nf_sources_id(url, id);
    const nf_source_def_t *d = nf_sources_find(&x->list, id);
    return d && !d->is_file && !strcmp(d->url, url) ? d : NULL;
}

typedef struct {
    rec_t *rec;                  /* the topic's record, or NULL */
    const nf_source_def_t *conf; /* the configuration's, or NULL */
    const char *id, *url, *host;
    int32_t part; /* where a change goes: the record's partition, else the host's */
} found_t;

/* ID or URL -> the source, or a message and false. */
static bool find_source(ctx_t *x, const char *arg, found_t *f)
{
    memset(f, 0, sizeof *f);
    if (strstr(arg, "://")) {
        nf_source_url_t u;
        char err[512];
        if (nf_sources_check_url(arg, &u, err, sizeof err) != 0) {
            fprintf(stderr, "newsflow sources %s: %s\n", x->verb, err);
            return false;
        }
        f->rec = recs_find_url(&x->recs, u.url);
        /* a record's id, whatever its URL now, may be a configured source's */
        f->conf = f->rec ? nf_sources_find(&x->list, f->rec->id) : conf_by_url(x, u.url);
    } else {
        f->rec = recs_find(&x->recs, arg);
        f->conf = nf_sources_find(&x->list, arg);
    }
    f->part = f->rec ? f->rec->part : f->conf ? host_part(x, f->conf->host) : -1;
    if (f->rec && !f->rec->nurl[0] && !strcmp(x->verb, "remove") && !f->conf) {
        f->id = f->rec->id; /* an invalid record: removing it is the way out */
        f->url = "(no valid URL)";
        return true;
    }
    if (f->rec && !f->rec->nurl[0]) {
        fprintf(stderr,
                "newsflow sources %s: the sources topic's record for %s has no valid http(s) URL "
                "or is too long (the job dead-letters it): `newsflow sources remove %s`, then "
                "`sources add URL --id %s`\n",
                x->verb, f->rec->id, f->rec->id, f->rec->id);
        return false;
    }
    if (f->rec) {
        f->id = f->rec->id;
        f->url = f->rec->nurl;
        f->host = f->rec->host;
        return true;
    }
    if (f->conf && !f->conf->is_file) {
        f->id = f->conf->source_id;
        f->url = f->conf->url;
        f->host = f->conf->host;
        return true;
    }
    fprintf(stderr, "newsflow sources %s: %s: %s\n", x->verb, arg,
            f->conf ? "a local file of the configuration: only http(s) sources go through the "
                      "topic"
                    : "no such source (neither in the sources topic nor in the configuration; "
                      "`newsflow sources list` shows the running job's)");
    return false;
}

/* The value a change writes: the topic's record (its other fields kept, origin and crawl_at_ms
 * dropped) or the configuration's definition, with status set (NULL: kept) and crawl_at_ms
 * (0: none). NULL on no memory. */
static char *changed_value(const found_t *f, const char *status, int64_t crawl_at)
{
    cJSON *v = f->rec ? cJSON_Parse(f->rec->value) : cJSON_CreateObject();
    if (!cJSON_IsObject(v)) {
        cJSON_Delete(v);
        v = cJSON_CreateObject();
    }
    if (!v)
        return NULL;
    cJSON_DeleteItemFromObjectCaseSensitive(v, "origin");
    cJSON_DeleteItemFromObjectCaseSensitive(v, "crawl_at_ms");
    if (!f->rec) {
        cJSON_AddStringToObject(v, "url", f->url);
        if (f->conf->interval_s)
            cJSON_AddNumberToObject(v, "interval_s", f->conf->interval_s);
    }
    if (status) {
        cJSON_DeleteItemFromObjectCaseSensitive(v, "status");
        cJSON_AddStringToObject(v, "status", status);
    }
    if (crawl_at)
        cJSON_AddNumberToObject(v, "crawl_at_ms", (double)crawl_at);
    char *s = cJSON_PrintUnformatted(v);
    cJSON_Delete(v);
    return s;
}

static const char *status_of(const found_t *f)
{
    if (!f->rec)
        return "active";
    cJSON *v = cJSON_Parse(f->rec->value);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(v, "status");
    const char *r = !cJSON_IsString(s)                  ? "active"
                    : !strcmp(s->valuestring, "paused") ? "paused"
                    : !strcmp(s->valuestring, "dead")   ? "dead"
                                                        : "active";
    cJSON_Delete(v);
    return r;
}

/* ---------------------------------------------------------------- add and import */

/* Valid UTF-8 without control characters: what a record's text may hold (the job's decoder
 * refuses invalid UTF-8: the record would be a dead letter). */
static bool text_ok(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        unsigned c = *p;
        size_t n = c < 0x80                 ? 1
                   : c >= 0xc2 && c <= 0xdf ? 2
                   : c >= 0xe0 && c <= 0xef ? 3
                   : c >= 0xf0 && c <= 0xf4 ? 4
                                            : 0;
        if (n == 0 || (n == 1 && (c < 0x20 || c == 0x7f)))
            return false;
        for (size_t i = 1; i < n; i++)
            if ((p[i] & 0xc0) != 0x80)
                return false;
        if ((n == 3 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0))) ||
            (n == 4 && ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90))))
            return false;
        p += n;
    }
    return true;
}

static bool id_ok(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > NF_SOURCE_ID_MAX)
        return false;
    for (const char *p = id; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("._:-", *p))
            return false;
    return true;
}

typedef struct {
    const char *url, *id, *title, *category, *status;
    uint32_t interval_s;
    const char *where; /* for messages: "URL" or "FILE:LINE" */
} def_t;

enum { ADD_QUEUED = 0, ADD_EXISTS = 1, ADD_INVALID = -1, ADD_NOMEM = -2 };

/* Checks one new source against the topic, the configuration and those queued before it
 * (seen: ids and URLs queued). */
static int add_one(ctx_t *x, const def_t *d, nf_idset_t *seen, bool quiet_exists)
{
    nf_source_url_t u;
    char err[512], id[NF_SOURCE_ID_MAX + 1];
    if (nf_sources_check_url(d->url, &u, err, sizeof err) != 0) {
        fprintf(stderr, "newsflow sources %s: %s: %s\n", x->verb, d->where, err);
        return ADD_INVALID;
    }
    if (d->id && !id_ok(d->id)) {
        fprintf(stderr,
                "newsflow sources %s: %s: id \"%.200s\" must be 1 to %d of A-Z a-z 0-9 . _ : -\n",
                x->verb, d->where, d->id, NF_SOURCE_ID_MAX);
        return ADD_INVALID;
    }
    if (d->id)
        snprintf(id, sizeof id, "%s", d->id);
    else
        nf_sources_id(u.url, id);
    const rec_t *r = recs_find(&x->recs, id);
    const rec_t *ru = r ? NULL : recs_find_url(&x->recs, u.url);
    const nf_source_def_t *c = nf_sources_find(&x->list, id);
    if (!c)
        c = conf_by_url(x, u.url);
    const char *other = r ? r->id : ru ? ru->id : c ? c->source_id : NULL;
    if (other && !quiet_exists)
        fprintf(stderr,
                "newsflow sources %s: %s: already a source, %s (in the %s): `sources pause`, "
                "`resume` or `remove` changes it%s\n",
                x->verb, d->where, other, r || ru ? "sources topic" : "configuration",
                d->id ? "; or choose another --id" : "");
    if (other)
        return ADD_EXISTS;
    if (seen && (nf_idset_get(seen, str_key(id), NULL) || nf_idset_get(seen, str_key(u.url), NULL)))
        return ADD_EXISTS; /* listed twice in one file: the first counts */
    nf_jw_t w;
    nf_jw_init(&w);
    nf_jw_obj_open(&w);
    nf_jw_key(&w, "url");
    nf_jw_str(&w, u.url);
    if (d->interval_s) {
        nf_jw_key(&w, "interval_s");
        nf_jw_u64(&w, d->interval_s);
    }
    nf_jw_key(&w, "status");
    nf_jw_str(&w, d->status ? d->status : "active");
    if (d->title && d->title[0]) {
        nf_jw_key(&w, "title");
        nf_jw_str(&w, d->title);
    }
    if (d->category && d->category[0]) {
        nf_jw_key(&w, "category");
        nf_jw_str(&w, d->category);
    }
    nf_jw_obj_close(&w);
    want_t want = !d->status || !strcmp(d->status, "active") ? W_ACTIVE
                  : !strcmp(d->status, "dead")               ? W_DEAD
                                                             : W_PAUSED;
    int rc = w.failed ? -ENOMEM : queue(x, id, w.buf, host_part(x, u.host), u.url, want, 0);
    nf_jw_free(&w);
    if (rc == -E2BIG)
        return ADD_INVALID;
    if (rc != 0)
        return ADD_NOMEM;
    if (seen && (nf_idset_insert(seen, str_key(id), 0, NULL) < 0 ||
                 nf_idset_insert(seen, str_key(u.url), 0, NULL) < 0))
        return ADD_NOMEM;
    return ADD_QUEUED;
}

static int verb_add(ctx_t *x, char **args, int nargs)
{
    (void)nargs;
    def_t d = {.url = args[0],
               .id = x->id,
               .title = x->title,
               .category = x->category,
               .status = x->paused ? "paused" : "active",
               .interval_s = x->interval_s,
               .where = args[0]};
    int rc = add_one(x, &d, NULL, false);
    return rc == ADD_QUEUED ? NF_EXIT_OK : rc == ADD_NOMEM ? NF_EXIT_RUNTIME : NF_EXIT_USAGE;
}

/* The file at path ("-": standard input), at most NF_OPML_MAX_BYTES. 0; -EFBIG (larger);
 * -EISDIR; -errno. */
static int read_file(const char *path, char **out, size_t *len)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f)
        return -errno;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return -EISDIR;
    }
    size_t cap = 65536, n = 0;
    char *b = malloc(cap);
    int e = b ? 0 : ENOMEM;
    while (!e) {
        size_t k = fread(b + n, 1, cap - n, f);
        n += k;
        if (n > NF_OPML_MAX_BYTES)
            e = EFBIG;
        else if (k == 0)
            break;
        else if (n == cap) {
            char *nb = realloc(b, cap * 2);
            if (!nb)
                e = ENOMEM;
            else {
                b = nb;
                cap *= 2;
            }
        }
    }
    if (!e && ferror(f))
        e = EIO;
    if (f != stdin)
        fclose(f);
    if (e) {
        free(b);
        return -e;
    }
    *out = b;
    *len = n;
    return 0;
}

static int verb_import(ctx_t *x, char **args, int nargs)
{
    (void)nargs;
    const nf_opml_t o = x->opml;
    nf_idset_t seen; /* the ids and URLs queued before: a feed listed twice counts once */
    size_t queued = 0, exists = 0, invalid = 0;
    int rc = nf_idset_init(&seen, 64) == 0 ? NF_EXIT_OK : NF_EXIT_RUNTIME;
    for (size_t i = 0; i < o.n && rc == NF_EXIT_OK; i++) {
        char where[PATH_MAX + 32];
        snprintf(where, sizeof where, "%s:%d", args[0], o.feeds[i].line);
        def_t d = {.url = o.feeds[i].url,
                   .id = o.feeds[i].id[0] ? o.feeds[i].id : NULL,
                   .title = o.feeds[i].title,
                   .category = o.feeds[i].category,
                   .status = o.feeds[i].status,
                   .interval_s = o.feeds[i].interval_s,
                   .where = where};
        int a = add_one(x, &d, &seen, true);
        queued += a == ADD_QUEUED;
        exists += a == ADD_EXISTS;
        invalid += a == ADD_INVALID;
        if (a == ADD_NOMEM)
            rc = NF_EXIT_RUNTIME;
    }
    nf_idset_free(&seen);
    printf("%s: %zu feeds: %zu new, %zu already sources, %zu invalid\n", args[0],
           queued + exists + invalid, queued, exists, invalid);
    if (rc == NF_EXIT_OK && invalid && !x->skip_invalid) {
        fprintf(stderr,
                "newsflow sources import: %zu invalid entries (above): nothing written. Fix them, "
                "or import the rest with --skip-invalid\n",
                invalid);
        rc = NF_EXIT_USAGE;
    }
    return rc;
}

/* ---------------------------------------------------------------- pause, resume, remove, crawl */

static const char *json_str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Whether the running job shows source id as dead (its crawl policy's verdict); false when no
 * job answers. /v1/sources is asked once per command. */
static bool job_says_dead(ctx_t *x, const char *id)
{
    if (!x->job_asked) {
        char where[300];
        x->job_asked = true;
        if (nf_cli_admin_get(&x->cfg, "/v1/sources", &x->job_sources, where, sizeof where) != 1)
            x->job_sources = NULL;
    }
    const cJSON *o;
    cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(x->job_sources, "sources"))
    {
        const char *sid = json_str(o, "source_id"), *st = json_str(o, "state");
        if (sid && !strcmp(sid, id))
            return st && !strcmp(st, "dead");
    }
    return false;
}

static int change_one(ctx_t *x, const char *arg, int64_t now)
{
    found_t f;
    if (!find_source(x, arg, &f))
        return NF_EXIT_USAGE;
    const char *st = status_of(&f);
    char *v = NULL;
    want_t want;
    int64_t crawl_at = 0;
    if (!strcmp(x->verb, "remove")) {
        if (!f.rec || f.conf) {
            fprintf(stderr,
                    "newsflow sources remove: %s is a source of the configuration (sources.urls or "
                    "sources.file): a tombstone would only give it its configured definition "
                    "back. Stop it with `newsflow sources pause %s`, or take it out of the list\n",
                    f.id, f.id);
            return NF_EXIT_USAGE;
        }
        want = W_ABSENT;
    } else if (!strcmp(x->verb, "pause") || !strcmp(x->verb, "resume")) {
        bool pause = !strcmp(x->verb, "pause");
        /* Active in the topic but declared dead by the crawl policy (the job says so): a
         * crawl-now request revives it (an identical record would not, ingest.h). */
        bool revive = !pause && !strcmp(st, "active") && job_says_dead(x, f.id);
        if (!strcmp(st, pause ? "paused" : "active") && !revive) {
            printf("%s %s: already %s, nothing written\n", f.id, f.url, st);
            return NF_EXIT_OK;
        }
        want = pause ? W_PAUSED : W_ACTIVE;
        crawl_at = revive ? now : 0;
        if (!(v = changed_value(&f, pause ? "paused" : "active", crawl_at)))
            return NF_EXIT_RUNTIME;
    } else { /* crawl-now */
        if (strcmp(st, "active") != 0) {
            fprintf(stderr,
                    "newsflow sources crawl-now: %s is %s: `newsflow sources resume %s` "
                    "first\n",
                    f.id, st, f.id);
            return NF_EXIT_USAGE;
        }
        want = W_CRAWLED;
        crawl_at = now;
        if (!(v = changed_value(&f, NULL, crawl_at)))
            return NF_EXIT_RUNTIME;
    }
    int r = queue(x, f.id, v, f.part, f.url, want, crawl_at);
    free(v);
    return r == 0 ? NF_EXIT_OK : r == -E2BIG ? NF_EXIT_USAGE : NF_EXIT_RUNTIME;
}

static int verb_change(ctx_t *x, char **args, int nargs)
{
    int64_t now = wall_ms();
    for (int i = 0; i < nargs; i++) {
        int rc = change_one(x, args[i], now);
        if (rc != NF_EXIT_OK)
            return rc; /* nothing written: one bad argument refuses them all */
    }
    return NF_EXIT_OK;
}

/* ---------------------------------------------------------------- export */

/* The OPML of feeds to path (NULL: stdout). */
static int write_opml(const char *path, const nf_opml_feed_t *feeds, size_t n)
{
    FILE *f = path ? fopen(path, "w") : stdout;
    if (!f) {
        fprintf(stderr, "newsflow sources export: %s: %s\n", path, strerror(errno));
        return NF_EXIT_USAGE;
    }
    int w = nf_opml_write(f, "newsflow sources", feeds, n);
    int c = path ? fclose(f) : fflush(stdout);
    if (w != 0 || c != 0) {
        fprintf(stderr, "newsflow sources export: writing %s: %s\n", path ? path : "stdout",
                strerror(errno));
        return NF_EXIT_RUNTIME;
    }
    if (path)
        fprintf(stderr, "newsflow sources export: %zu sources written to %s\n", n, path);
    return NF_EXIT_OK;
}

static int verb_export(ctx_t *x, char **args, int nargs)
{
    (void)args;
    (void)nargs;
    size_t cap = x->recs.n + x->list.n + 1, n = 0;
    nf_opml_feed_t *feeds = calloc(cap, sizeof *feeds);
    cJSON **vals = calloc(cap, sizeof *vals);
    int rc = feeds && vals ? NF_EXIT_OK : NF_EXIT_RUNTIME;
    if (rc != NF_EXIT_OK)
        fprintf(stderr, "newsflow sources export: out of memory\n");
    for (size_t i = 0; rc == NF_EXIT_OK && i < x->recs.n; i++) {
        const rec_t *r = &x->recs.v[i];
        if (!r->nurl[0])
            continue; /* the job dead-letters it */
        cJSON *v = vals[n] = cJSON_Parse(r->value);
        const cJSON *iv = cJSON_GetObjectItemCaseSensitive(v, "interval_s");
        const char *st = json_str(v, "status");
        char derived[17];
        nf_sources_id(r->nurl, derived); /* an id of the operator's choosing goes with it */
        feeds[n++] = (nf_opml_feed_t){
            .url = (char *)r->nurl,
            .id = strcmp(r->id, derived) != 0 ? r->id : "",
            .title = (char *)(json_str(v, "title") ? json_str(v, "title") : ""),
            .category = (char *)(json_str(v, "category") ? json_str(v, "category") : ""),
            .interval_s = cJSON_IsNumber(iv) && iv->valuedouble > 0 ? (uint32_t)iv->valuedouble : 0,
            .status = st && (!strcmp(st, "paused") || !strcmp(st, "dead")) ? st : "active"};
    }
    for (size_t i = 0; rc == NF_EXIT_OK && i < x->list.n; i++) {
        const nf_source_def_t *d = &x->list.items[i];
        if (d->is_file || recs_find(&x->recs, d->source_id))
            continue; /* a local file is not a feed of the web; the topic's record wins */
        feeds[n++] = (nf_opml_feed_t){.url = (char *)d->url,
                                      .title = "",
                                      .category = "",
                                      .interval_s = d->interval_s,
                                      .status = "active"};
    }
    if (rc == NF_EXIT_OK)
        rc = write_opml(x->out, feeds, n);
    for (size_t i = 0; vals && i < n; i++)
        cJSON_Delete(vals[i]);
    free(vals);
    free(feeds);
    return rc;
}

/* ---------------------------------------------------------------- reading back */

static const char *want_name(const expect_t *e)
{
    switch (e->want) {
    case W_PAUSED:
        return "paused";
    case W_DEAD:
        return "dead";
    case W_ACTIVE:
        return "active";
    case W_ABSENT:
        return "removed";
    case W_CRAWLED:
        return "crawl requested";
    default:
        return "added";
    }
}

/* Whether the job's view of e's source (o: its /v1/sources object, NULL if absent) shows the
 * change. A crawl-now is shown once the request was applied; *crawled once its fetch ended. */
static bool shows(const expect_t *e, const cJSON *o, bool *crawled)
{
    const char *state = o ? json_str(o, "state") : NULL;
    bool paused = state && !strcmp(state, "paused"), dead = state && !strcmp(state, "dead");
    const cJSON *at = cJSON_GetObjectItemCaseSensitive(o, "crawl_at_ms");
    const cJSON *answered = cJSON_GetObjectItemCaseSensitive(o, "crawl_answered_ms");
    const cJSON *busy = cJSON_GetObjectItemCaseSensitive(o, "in_flight");
    switch (e->want) {
    case W_ABSENT:
        return !o;
    case W_PAUSED:
        return paused;
    case W_DEAD:
        return dead;
    case W_ACTIVE:
        return o && !paused && !dead;
    case W_CRAWLED:
        if (!o || !cJSON_IsNumber(at) || (int64_t)at->valuedouble != e->crawl_at)
            return false;
        /* the fetch that answered this request has ended (the job's own record of it: the
         * CLI's clock and the job's need not agree) */
        *crawled = cJSON_IsNumber(answered) && (int64_t)answered->valuedouble == e->crawl_at &&
                   !cJSON_IsTrue(busy);
        return true;
    }
    return false;
}

/* Marks the sources whose partition another process of the group holds (status: /v1/status:
 * the input partitions assigned to the job; with kafka.assignment=all, or the embedded broker,
 * every partition; none listed yet: nothing is marked, the job may still be joining). */
static void mark_elsewhere(ctx_t *x, const cJSON *status)
{
    char topic[256];
    snprintf(topic, sizeof topic, "%ssources", x->cfg.kafka.topic_prefix);
    bool any = false, held[4096] = {false};
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(status, "partitions"))
    {
        const char *t = json_str(p, "topic");
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(p, "partition");
        any = true; /* assigned input partitions: a process of a group may hold no sources one */
        if (!t || strcmp(t, topic) != 0 || !cJSON_IsNumber(n))
            continue;
        if (n->valuedouble >= 0 && n->valuedouble < 4096)
            held[(int)n->valuedouble] = true;
    }
    for (size_t i = 0; any && i < x->n; i++)
        x->exp[i].elsewhere = x->exp[i].part >= 4096 || !held[x->exp[i].part];
}

/* One look at the job's sources: how many expectations are still open. -1: it failed. */
static long look(ctx_t *x, bool *crawled_all)
{
    cJSON *j = NULL;
    char where[300];
    if (nf_cli_admin_get(&x->cfg, "/v1/sources", &j, where, sizeof where) != 1)
        return -1;
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "sources");
    int na = cJSON_GetArraySize(arr);
    const cJSON **byid = calloc(na > 0 ? (size_t)na : 1, sizeof *byid);
    nf_idset_t ids = {0}; /* source_id -> its object's index in byid */
    const cJSON *o;
    size_t k = 0;
    long open = byid && nf_idset_init(&ids, (size_t)na + 1) == 0 ? 0 : -1;
    cJSON_ArrayForEach(o, arr)
    {
        const char *id = json_str(o, "source_id");
        int r = id && open >= 0 ? nf_idset_insert(&ids, str_key(id), k, NULL) : 0;
        if (r == 1)
            byid[k++] = o;
        else if (r < 0)
            open = -1;
    }
    *crawled_all = true;
    for (size_t i = 0; open >= 0 && i < x->n; i++) {
        expect_t *e = &x->exp[i];
        if (e->elsewhere)
            continue;
        uint64_t m;
        const cJSON *mine = nf_idset_get(&ids, str_key(e->id), &m) ? byid[m] : NULL;
        bool crawled = true;
        e->done = shows(e, mine, &crawled);
        e->crawled = e->want == W_CRAWLED && e->done && crawled;
        if (e->crawled)
            snprintf(e->outcome, sizeof e->outcome, "%s",
                     json_str(mine, "last_outcome") ? json_str(mine, "last_outcome") : "?");
        open += !e->done;
        *crawled_all &= crawled;
    }
    if (open < 0)
        fprintf(stderr, "newsflow sources %s: out of memory\n", x->verb);
    nf_idset_free(&ids);
    free(byid);
    cJSON_Delete(j);
    return open;
}

static int confirm(ctx_t *x)
{
    cJSON *st = NULL;
    char where[300];
    int a = nf_cli_admin_get(&x->cfg, "/v1/status", &st, where, sizeof where);
    if (a == 0) {
        printf("no running job answered at %s: the records are in the sources topic, and a job "
               "applies them when it reads it\n",
               where);
        return NF_EXIT_OK;
    }
    if (a < 0)
        return NF_EXIT_RUNTIME;
    mark_elsewhere(x, st);
    cJSON_Delete(st);
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long open = 0;
    bool crawled = false;
    for (;;) {
        if ((open = look(x, &crawled)) < 0)
            return NF_EXIT_RUNTIME;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double spent = (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9;
        if ((open == 0 && crawled) || spent >= x->wait_s)
            break;
        struct timespec ts = {0, 100 * 1000000};
        nanosleep(&ts, NULL);
    }
    for (size_t i = 0; i < x->n; i++) {
        const expect_t *e = &x->exp[i];
        if (e->elsewhere)
            printf("%s %s: written to sources partition %d, which another process of the group "
                   "holds: ask its admin server\n",
                   e->id, e->url, e->part);
        else if (!e->done)
            fprintf(stderr,
                    "newsflow sources %s: %s %s: the job at %s does not show it %s after "
                    "%.0f s\n",
                    x->verb, e->id, e->url, where, want_name(e), x->wait_s);
        else if (e->crawled)
            printf("%s %s: crawled, outcome %s (applied by the job at %s)\n", e->id, e->url,
                   e->outcome, where);
        else if (x->n <= 20)
            printf("%s %s: %s (applied by the job at %s)\n", e->id, e->url, want_name(e), where);
    }
    if (open == 0 && x->n > 20)
        printf("%zu sources applied by the job at %s\n", x->n, where);
    if (open == 0 && !crawled)
        printf("the crawl has not finished within %.0f s: `newsflow sources list` shows its "
               "outcome\n",
               x->wait_s);
    return open == 0 ? NF_EXIT_OK : NF_EXIT_RUNTIME;
}

/* ---------------------------------------------------------------- the command */

static int write_and_confirm(ctx_t *x)
{
    if (x->n == 0 || x->dry_run) {
        if (x->dry_run)
            printf("dry run: %zu records not written\n", x->n);
        return NF_EXIT_OK;
    }
    char err[512];
    if (nf_kafka_publish(x->k, NF_INPUT_SOURCES, x->pubs, x->n, err, sizeof err) != 0) {
        fprintf(stderr, "newsflow sources %s: writing to the sources topic at %s: %s\n", x->verb,
                x->brokers, err);
        return NF_EXIT_RUNTIME;
    }
    printf("%zu record%s written to the sources topic\n", x->n, x->n == 1 ? "" : "s");
    return x->no_wait ? NF_EXIT_OK : confirm(x);
}

/* What can be checked before Kafka is asked: arguments, the URL and id of add, the OPML file of
 * import (parsed into x->opml). */
static int precheck(ctx_t *x, char **args, int nargs)
{
    const char *v = x->verb;
    bool add = !strcmp(v, "add"), import = !strcmp(v, "import"), export = !strcmp(v, "export");
    if ((add || import) && nargs != 1)
        return nf_cli_bad_usage(
            NULL, usage, add ? "sources add takes one URL" : "sources import takes one file", NULL);
    if (export && nargs != 0)
        return nf_cli_bad_usage(NULL, usage, "sources export takes no argument (--out FILE)", NULL);
    if (!add && !import && !export && nargs < 1)
        return nf_cli_bad_usage(NULL, usage, "this sources command needs an ID or URL", v);
    char err[512];
    if (add) {
        nf_source_url_t u;
        if (nf_sources_check_url(args[0], &u, err, sizeof err) != 0) {
            fprintf(stderr, "newsflow sources add: %s\n", err);
            return NF_EXIT_USAGE;
        }
        if ((x->title && !text_ok(x->title)) || (x->category && !text_ok(x->category))) {
            fprintf(stderr, "newsflow sources add: --title and --category want UTF-8 text "
                            "without control characters\n");
            return NF_EXIT_USAGE;
        }
        if (x->id && !id_ok(x->id)) {
            fprintf(stderr,
                    "newsflow sources add: id \"%.200s\" must be 1 to %d of A-Z a-z 0-9 "
                    ". _ : -\n",
                    x->id, NF_SOURCE_ID_MAX);
            return NF_EXIT_USAGE;
        }
    }
    if (import) {
        char *data = NULL;
        size_t len = 0;
        int r = read_file(args[0], &data, &len);
        if (r != 0) {
            fprintf(stderr, "newsflow sources import: %s: %s\n", args[0],
                    r == -EFBIG ? "larger than 16 MiB, the most an OPML file may have"
                                : strerror(-r));
            return NF_EXIT_USAGE;
        }
        r = nf_opml_parse(data, len, &x->opml, err, sizeof err);
        free(data);
        if (r != 0) {
            fprintf(stderr, "newsflow sources import: %s: %s\n", args[0], err);
            return NF_EXIT_USAGE;
        }
    }
    return NF_EXIT_OK;
}

/* Options into x; positional arguments into args. NF_EXIT_OK or a usage error. */
static int parse_opts(ctx_t *x, int argc, char **argv, const char **config, char **sets,
                      unsigned *nsets, char **args, int *nargs)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int co = nf_cli_config_opt(argc, argv, &i, config, sets, nsets);
        if (co < 0)
            return nf_cli_bad_usage(NULL, usage, "option needs a value:", a);
        if (co > 0)
            continue;
        bool val = i + 1 < argc;
        char *end = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return -1;
        } else if (!strcmp(a, "--no-wait")) {
            x->no_wait = true;
        } else if (!strcmp(a, "--wait") && val) {
            x->wait_s = strtod(argv[++i], &end);
            if (!argv[i][0] || *end || !(x->wait_s >= 0 && x->wait_s <= 86400))
                return nf_cli_bad_usage(NULL, usage, "--wait wants seconds (0..86400), not",
                                        argv[i]);
        } else if (!strcmp(a, "--interval") && val && !strcmp(x->verb, "add")) {
            unsigned long v = strtoul(argv[++i], &end, 10);
            if (*end || !argv[i][0] || argv[i][0] == '-' || v > NF_SOURCE_INTERVAL_MAX)
                return nf_cli_bad_usage(NULL, usage, "--interval wants seconds (0..31536000), not",
                                        argv[i]);
            x->interval_s = (uint32_t)v;
        } else if (!strcmp(a, "--id") && val && !strcmp(x->verb, "add")) {
            x->id = argv[++i];
        } else if (!strcmp(a, "--title") && val && !strcmp(x->verb, "add")) {
            x->title = argv[++i];
        } else if (!strcmp(a, "--category") && val && !strcmp(x->verb, "add")) {
            x->category = argv[++i];
        } else if (!strcmp(a, "--paused") && !strcmp(x->verb, "add")) {
            x->paused = true;
        } else if (!strcmp(a, "--skip-invalid") && !strcmp(x->verb, "import")) {
            x->skip_invalid = true;
        } else if (!strcmp(a, "--dry-run") && !strcmp(x->verb, "import")) {
            x->dry_run = true;
        } else if (!strcmp(a, "--out") && val && !strcmp(x->verb, "export")) {
            x->out = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            static const char *const with_value[] = {"--wait",  "--interval", "--id",
                                                     "--title", "--category", "--out"};
            bool takes = false;
            for (size_t k = 0; k < sizeof with_value / sizeof *with_value; k++)
                takes |= !strcmp(a, with_value[k]);
            return nf_cli_bad_usage(
                NULL, usage,
                takes && !val ? "option needs a value:" : "unknown option for this command", a);
        } else {
            args[(*nargs)++] = argv[i];
        }
    }
    return NF_EXIT_OK;
}

int nf_cli_sources_write(int argc, char **argv)
{
    ctx_t x = {.verb = argv[0], .wait_s = 30};
    nf_sources_init(&x.list);
    const char *config = nf_cli_config_default();
    char **sets = calloc((size_t)argc + 1, sizeof *sets),
         **args = calloc((size_t)argc + 1, sizeof *args);
    unsigned nsets = 0;
    int nargs = 0, rc = NF_EXIT_RUNTIME;
    if (!sets || !args) {
        fputs("newsflow: out of memory\n", stderr);
        goto out;
    }
    if ((rc = parse_opts(&x, argc, argv, &config, sets, &nsets, args, &nargs)) != NF_EXIT_OK) {
        rc = rc < 0 ? NF_EXIT_OK : rc;
        goto out;
    }
    char err[NF_CONFIG_ERRLEN];
    if (nf_config_load(&x.cfg, config, sets, nsets, true, err, sizeof err) != 0) {
        fprintf(stderr, "newsflow: config error: %s\n", err);
        rc = NF_EXIT_USAGE;
        goto out;
    }
    if ((rc = precheck(&x, args, nargs)) != NF_EXIT_OK)
        goto out;
    nf_log_set_level(x.cfg.log.level);
    if (nf_metrics_init(1) != 0) { /* the Kafka client counts into it */
        fprintf(stderr, "newsflow sources %s: cannot create the metrics registry\n", x.verb);
        rc = NF_EXIT_RUNTIME;
        goto out;
    }
    if ((rc = connect_topic(&x)) != NF_EXIT_OK)
        goto out;
    if (!strcmp(x.verb, "add"))
        rc = verb_add(&x, args, nargs);
    else if (!strcmp(x.verb, "import"))
        rc = verb_import(&x, args, nargs);
    else if (!strcmp(x.verb, "export"))
        rc = verb_export(&x, args, nargs);
    else
        rc = verb_change(&x, args, nargs);
    if (rc == NF_EXIT_OK && strcmp(x.verb, "export") != 0)
        rc = write_and_confirm(&x);
out:
    ctx_free(&x);
    free(sets);
    free(args);
    return rc;
}
