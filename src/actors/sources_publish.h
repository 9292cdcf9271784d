/* sources_publish.h — the configured sources as records of the sources topic (docs/ARCHITECTURE.md
 * §3 "Sources and the global stages in a consumer group").
 *
 * In a consumer group with changelogs (nf_ingest_t.in_partitions) a process crawls only the
 * sources whose records are in the sources partitions assigned to it, so the sources of
 * `sources.urls` and `sources.file` go through the topic too: at start, before the job takes
 * input, each process publishes its configured http(s) sources, each to its host's partition
 * (nf_sources_partition), key = source_id, value
 *   {"url":URL,"interval_s":N,"origin":"config"}   (interval_s only when set)
 *
 * Idempotent: the topic is read whole first (read_committed) and a source is published only if
 * its key has no record (or its last one is a tombstone), or its last record is one of these
 * (origin "config") that says something else (another interval). A record without that origin
 * is the operator's (a pause, a URL of their own) and is never overwritten. So restarting N
 * processes with the same list writes nothing; processes that start together may each write a
 * record that says the same thing (harmless: an identical record changes nothing, ingest.h).
 * A source taken out of the list keeps its record: remove it with a tombstone. Local files
 * cannot be shared between machines; the caller refuses them in this mode.
 *
 * Threads: the main thread, before the shards start. */
#ifndef NF_SOURCES_PUBLISH_H
#define NF_SOURCES_PUBLISH_H

#include "actors/sources.h"
#include "io/kafka.h"

#include <stddef.h>

typedef struct nf_sources_publish_stats {
    size_t configured; /* http(s) sources in the list */
    size_t published;  /* written now: absent, or a configured record that differed */
    size_t unchanged;  /* the topic says what the list says */
    size_t operator;   /* the topic holds the operator's record for it: left alone */
    size_t records;    /* records of the topic read */
} nf_sources_publish_stats_t;

/* The value published for d into w (reset first). */
void nf_sources_publish_value(const nf_source_def_t *d, nf_jw_t *w);

/* Publishes the list's http(s) sources as above. 0 or -errno with err. */
int nf_sources_publish(nf_kafka_t *k, const nf_source_list_t *l, nf_sources_publish_stats_t *stats,
                       char *err, size_t errlen);

#endif
