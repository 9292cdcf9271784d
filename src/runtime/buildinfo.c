/* buildinfo.c — see buildinfo.h. */
#include "runtime/buildinfo.h"

#include "runtime/metrics.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <idn2.h>
#include <librdkafka/rdkafka.h>
#include <libxml/parser.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put(nf_buildinfo_item_t *it, const char *name, const char *value, bool built)
{
    it->name = name;
    size_t n = strlen(value ? value : "unknown");
    n = n < sizeof it->value - 1 ? n : sizeof it->value - 1;
    memcpy(it->value, value ? value : "unknown", n);
    it->value[n] = '\0';
    it->built = built;
}

size_t nf_buildinfo(nf_buildinfo_item_t *items)
{
    size_t n = 0;
    put(&items[n++], "version", NF_VERSION, true);
    put(&items[n++], "commit", NF_GIT_COMMIT, true);
    put(&items[n++], "rdkafka", rd_kafka_version_str(), false);
    put(&items[n++], "rocksdb", NF_ROCKSDB_VERSION, true); /* the C API has no version call */
    const curl_version_info_data *cv = curl_version_info(CURLVERSION_NOW);
    put(&items[n++], "curl", cv ? cv->version : NULL, false);
    /* xmlParserVersion is "20914" for 2.9.14. */
    char xml[40];
    unsigned long xv = strtoul(xmlParserVersion, NULL, 10) % 1000000;
    snprintf(xml, sizeof xml, "%lu.%lu.%lu", xv / 10000, xv / 100 % 100, xv % 100);
    put(&items[n++], "xml2", xml, false);
    put(&items[n++], "uring", NF_LIBURING_VERSION, true);
    put(&items[n++], "cjson", cJSON_Version(), false);
    put(&items[n++], "microhttpd", MHD_get_version(), false);
    put(&items[n++], "idn2", idn2_check_version(NULL), false);
    return n;
}

int nf_buildinfo_register_metric(void)
{
    nf_buildinfo_item_t items[NF_BUILDINFO_MAX];
    size_t n = nf_buildinfo(items);
    char labels[1024];
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        char esc[128];
        nf_metrics_label_escape(esc, sizeof esc, items[i].value);
        int w = snprintf(labels + len, sizeof labels - len, "%s%s=\"%s\"", i ? "," : "",
                         items[i].name, esc);
        if (w < 0 || (size_t)w >= sizeof labels - len)
            return -EINVAL;
        len += (size_t)w;
    }
    nf_gauge_t g;
    nf_metrics_gauge("newsflow_build_info",
                     "Always 1; the labels say which build runs: version, git commit and library "
                     "versions (rocksdb and uring: built against).",
                     labels, 0, &g);
    nf_gauge_set(g, 1); /* a zero handle if the registration failed: discarded */
    return 0;
}
