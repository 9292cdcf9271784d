/* buildinfo.h — what this binary is: its version, git commit and the versions of the libraries it
 * runs with. One list for `newsflow version` and the newsflow_build_info gauge, so the two never
 * disagree.
 *
 * Library versions are read at run time where the library can say (librdkafka, libcurl, libxml2,
 * cJSON, libmicrohttpd, libidn2); RocksDB and liburing have no run-time version call, so theirs
 * are the versions built against (the `built` flag). Any thread; no allocation. */
#ifndef NF_BUILDINFO_H
#define NF_BUILDINFO_H

#include <stdbool.h>
#include <stddef.h>

typedef struct nf_buildinfo_item {
    const char *name; /* a Prometheus label name too: "version", "commit", "rdkafka", ... */
    char value[48];
    bool built; /* the version compiled against, not one read from the library at run time */
} nf_buildinfo_item_t;

#define NF_BUILDINFO_MAX 10

/* Fills items (at least NF_BUILDINFO_MAX) and returns how many: version, commit, rdkafka,
 * rocksdb, curl, xml2, uring, cjson, microhttpd, idn2. */
size_t nf_buildinfo(nf_buildinfo_item_t *items);

/* Registers newsflow_build_info{version=,commit=,rdkafka=,...} = 1 (after nf_metrics_init).
 * 0, or -EINVAL when the labels do not fit 1 KiB; a failed registration is the registry's to
 * report (metrics.h), not this function's. */
int nf_buildinfo_register_metric(void);

#endif
