/* sink.c — see sink.h. */
#include "io/sink.h"

#include "runtime/jsonw.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FLUSH_AT (64u << 10)

typedef struct {
    _Alignas(64) nf_jw_t buf;
    _Atomic uint64_t records[NF_TOPIC__COUNT];
} shard_buf_t;

struct nf_sink {
    int fd; /* -1 for "none" */
    bool close_fd;
    unsigned nshards;
    shard_buf_t *shards;
};

static const char *const topic_names[NF_TOPIC__COUNT] = {
    "articles",
    "fetch-log",
    "story-clusters",
    "trending",
    "interest-updates",
    "dead-letters",
    "trending-panes",
    "changelog-article-key",
    "changelog-crawl-schedule",
    "changelog-event-ids",
    "changelog-cluster-sig",
    "changelog-cluster-bucket",
    "changelog-cluster-parent",
    "changelog-article-topics",
    "changelog-interest",
    "changelog-interest-seen",
    "changelog-trending",
    "changelog-article-meta",
    "changelog-topic-recent",
    "changelog-story",
    "changelog-search-log",
    "changelog-reads",
    "breaking-news",
    "notifications",
};

const char *nf_topic_name(nf_topic_t t)
{
    return (unsigned)t < NF_TOPIC__COUNT ? topic_names[t] : "?";
}

nf_sink_t *nf_sink_open(const char *spec, unsigned nshards, char *err, size_t errlen)
{
    int fd = -1;
    bool close_fd = false;
    if (!strcmp(spec, "none")) {
        fd = -1;
    } else if (!strcmp(spec, "jsonl:-")) {
        fd = 1;
    } else if (!strncmp(spec, "jsonl:", 6) && spec[6]) {
        fd = open(spec + 6, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0) {
            snprintf(err, errlen, "sink %s: cannot open %s: %s", spec, spec + 6, strerror(errno));
            return NULL;
        }
        close_fd = true;
    } else {
        snprintf(err, errlen, "sink \"%s\": expected jsonl:PATH, jsonl:- or none", spec);
        return NULL;
    }
    nf_sink_t *s = calloc(1, sizeof *s);
    shard_buf_t *b = s ? aligned_alloc(64, sizeof(shard_buf_t) * (nshards ? nshards : 1)) : NULL;
    if (!b) {
        free(s);
        if (close_fd)
            close(fd);
        snprintf(err, errlen, "sink: out of memory");
        return NULL;
    }
    memset(b, 0, sizeof(shard_buf_t) * (nshards ? nshards : 1));
    for (unsigned i = 0; i < nshards; i++)
        nf_jw_init(&b[i].buf);
    s->fd = fd;
    s->close_fd = close_fd;
    s->nshards = nshards;
    s->shards = b;
    return s;
}

int nf_sink_flush(nf_sink_t *s, unsigned shard)
{
    nf_jw_t *w = &s->shards[shard].buf;
    size_t off = 0;
    while (s->fd >= 0 && off < w->len) {
        ssize_t n = write(s->fd, w->buf + off, w->len - off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            /* Keep what was not written for the next attempt. */
            memmove(w->buf, w->buf + off, w->len - off);
            w->len -= off;
            return -e;
        }
        off += (size_t)n;
    }
    nf_jw_reset(w);
    return 0;
}

int nf_sink_emit(nf_sink_t *s, unsigned shard, nf_topic_t topic, const char *key,
                 const char *value_json, size_t len)
{
    shard_buf_t *b = &s->shards[shard];
    atomic_fetch_add_explicit(&b->records[topic], 1, memory_order_relaxed);
    if (s->fd < 0)
        return 0;
    nf_jw_t *w = &b->buf;
    nf_jw_raw(w, "{\"topic\":\"", 10);
    nf_jw_raw(w, topic_names[topic], strlen(topic_names[topic]));
    nf_jw_raw(w, "\",\"key\":", 8);
    nf_jw_str(w, key);
    nf_jw_raw(w, ",\"value\":", 9);
    nf_jw_raw(w, value_json, len);
    nf_jw_raw(w, "}\n", 2);
    if (w->failed)
        return -ENOMEM;
    return w->len >= FLUSH_AT ? nf_sink_flush(s, shard) : 0;
}

uint64_t nf_sink_records(const nf_sink_t *s, nf_topic_t topic)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < s->nshards; i++)
        n += atomic_load_explicit(&s->shards[i].records[topic], memory_order_relaxed);
    return n;
}

int nf_sink_close(nf_sink_t *s)
{
    if (!s)
        return 0;
    int rc = 0;
    for (unsigned i = 0; i < s->nshards; i++) {
        int r = nf_sink_flush(s, i);
        if (r && !rc)
            rc = r;
        nf_jw_free(&s->shards[i].buf);
    }
    if (s->close_fd && close(s->fd) != 0 && !rc)
        rc = -errno;
    free(s->shards);
    free(s);
    return rc;
}
