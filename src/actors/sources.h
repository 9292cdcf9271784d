/* sources.h — the list of feeds to crawl, as the operator gives it.
 *
 * Sources come from the configuration (sources.urls, a list) and from a file (sources.file: one
 * URL per line, '#' comments, blank lines ignored). A line may also be a local path (relative to
 * the sources file's directory): it becomes
 * an absolute file:// URL, which is fetched even though fetch.allow_file is off, because the
 * operator listed it (a feed on the web can never redirect to file://). The sources topic
 * (ingest.h) adds, changes and removes sources at run time; its URLs are checked with
 * nf_sources_check_url(), which accepts http(s) only: a Kafka record may not name local files.
 *
 * Every source gets a deterministic source_id (first 16 hex digits of the SHA-256 of its
 * normalized URL, so the same feed has the same id on every run and machine) and a routing key
 * derived from its host, so all sources of one host land on one shard and per-host politeness
 * is shard-local. The same feed listed twice is kept once. */
#ifndef NF_SOURCES_H
#define NF_SOURCES_H

#include "algo/idset.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nf_source_def {
    char source_id[17];
    /* Exact-size strings owned by the list (fixed buffers made 100k sources cost 130 MB). */
    const char *url;     /* normalized for http(s); absolute file:// for local paths; < 1 KiB */
    const char *host;    /* lower-case host; "file:PATH" for local files; < 256 B */
    uint64_t host_key;   /* routing key: FNV-1a of host */
    uint32_t interval_s; /* 0 = the crawl default */
    bool is_file;
    bool missing; /* a local file that did not exist when the list was loaded */
} nf_source_def_t;

typedef struct nf_source_list {
    nf_source_def_t *items;
    size_t n, cap;
    size_t duplicates; /* lines naming a source already listed */
    nf_idset_t seen;   /* source_id (the URL digest's first 8 bytes) -> index: duplicates, find */
} nf_source_list_t;

void nf_sources_init(nf_source_list_t *l);
void nf_sources_free(nf_source_list_t *l);

/* Adds one source; where names the origin for messages ("sources.urls[3]", "FILE:LINE").
 * 0 added (or a duplicate); 1 added, but it is a local file that does not exist now (the
 * warning, "WHERE: ...", in err); -1 not added, with the reason in err (not a URL, unsupported
 * scheme, bad host, too long, out of memory). */
int nf_sources_add(nf_source_list_t *l, const char *spec, const char *where, char *err,
                   size_t errlen);

/* What loading a source list found: one "WHERE: reason\n" line per bad line (errors) and per
 * missing local file (warnings), in list order. */
/* Lines of each kind a report keeps (a file of thousands of bad lines, a CSV given by mistake,
 * must not become a report as large): the rest are counted and summed up in a last line. */
#define NF_SOURCES_REPORT_LINES 50u

typedef struct nf_sources_report {
    char *errors, *warnings; /* NUL-terminated, malloc'ed, one per line; NULL when none */
    size_t errors_len, errors_cap, warnings_len, warnings_cap;
    unsigned nerrors, nwarnings;
} nf_sources_report_t;

void nf_sources_report_free(nf_sources_report_t *r);

/* The operator's whole list: urls (entries separated by '\n', as sources.urls holds them; NULL
 * or "" for none), then the lines of the file at path (NULL or "" for none). Goes on past bad
 * lines and reports every one in rep (zeroed first). 0 when nothing is wrong (warnings aside),
 * -1 when rep->nerrors > 0 (a sources file that cannot be read is one error). `config check`
 * and `run` both load the list with this: a list that passes one passes the other. */
int nf_sources_load(nf_source_list_t *l, const char *urls, const char *path,
                    nf_sources_report_t *rep);
/* Adds every line of a sources file: nf_sources_load with the file alone. 0, or -1 with the
 * first errors ("FILE:LINE: ...", one per line) in err. */
int nf_sources_load_file(nf_source_list_t *l, const char *path, char *err, size_t errlen);

uint64_t nf_sources_host_key(const char *host);

/* The sources topic's partition of a host (docs/ARCHITECTURE.md §3 "Sources and the global stages
 * in a consumer group": every feed of a host in one partition, so its politeness and breaker live
 * in one process): Kafka's default partitioner for a record keyed by the host — murmur2 of its
 * bytes, sign bit cleared, modulo partitions — so that any client can place a record with `kcat -p`
 * or a producer keyed by the host. partitions > 0. */
int32_t nf_sources_partition(const char *host, int32_t partitions);
/* Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2), for the test vectors. */
int32_t nf_murmur2(const void *data, size_t len);

/* The source_id of a normalized URL (nf_source_url_t.url, nf_source_def_t.url): the first 16
 * hex digits of its SHA-256, NUL-terminated. */
void nf_sources_id(const char *url, char out[17]);

/* The configured source with this source_id, or NULL. Read-only: once the list is complete, any
 * thread may call it (the shards do, concurrently). */
const nf_source_def_t *nf_sources_find(const nf_source_list_t *l, const char *source_id);

/* One feed URL from outside the operator's list, checked and normalized exactly as
 * nf_sources_add() does an http(s) URL, with the host and routing key it would get. */
typedef struct nf_source_url {
    char url[1024]; /* normalized */
    char host[256]; /* lower-case host */
    uint64_t host_key;
} nf_source_url_t;

/* 0, or -1 with the reason in err ("url: \"ftp://x\": scheme is not http or https"). Only
 * http(s): a local path or file:// URL is refused. No allocation (libidn2 aside, for IDN hosts);
 * any thread. */
int nf_sources_check_url(const char *spec, nf_source_url_t *out, char *err, size_t errlen);

#endif
