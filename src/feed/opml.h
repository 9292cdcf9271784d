/* opml.h — OPML subscription lists: the format every feed reader imports and exports (OPML 1.0
 * and 2.0, http://opml.org/spec2.opml), read for `newsflow sources import` and written for
 * `sources export`.
 *
 * Reading: an <outline> with an xmlUrl attribute is a feed; one without is a category, whose
 * text (or title) names the feeds inside it (nested categories joined by '/'). Feeds keep their
 * text (or title) attribute and the line they are on, for messages. newsflow's own attributes,
 * in the namespace NF_OPML_NS (prefix "newsflow" when written), carry what OPML has no word
 * for: id (a source_id other than the one derived from the URL), interval (seconds between
 * crawls) and status ("paused", "dead"; absent: active), so that an export imported again
 * gives the same sources. The URLs are returned as written:
 * checking them is the caller's (sources.h).
 *
 * Hostile input: the document must be well formed (a file cut short is refused, not half
 * imported); no DTD is loaded, no entity defined, nothing fetched (the parser has no handler
 * for them: libxml2 parses a DTD as syntax and forgets it, and attribute defaults a DTD
 * declares are ignored); at most NF_OPML_MAX_BYTES, NF_OPML_MAX_FEEDS feeds, outlines nested
 * NF_OPML_MAX_DEPTH deep, an xmlUrl of NF_OPML_MAX_VALUE bytes; titles and category names are
 * cut at NF_OPML_MAX_TITLE bytes, a category path at NF_OPML_MAX_CATEGORY (at a character
 * boundary). Fuzz target: fuzz_opml.
 *
 * Writing escapes what XML needs, drops the control characters XML 1.0 cannot hold and
 * replaces invalid UTF-8 with U+FFFD: whatever the records say, the file parses. */
#ifndef NF_OPML_H
#define NF_OPML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define NF_OPML_NS           "https://github.com/newsflow/newsflow/opml"
#define NF_OPML_MAX_BYTES    (16u << 20)
#define NF_OPML_MAX_FEEDS    100000u
#define NF_OPML_MAX_DEPTH    64u
#define NF_OPML_MAX_VALUE    4096u /* an xmlUrl longer is refused (the job's limit is 1023) */
#define NF_OPML_MAX_TITLE    512u  /* text, title and category names are cut there */
#define NF_OPML_MAX_CATEGORY 1024u /* a feed's whole category path is cut there */

typedef struct nf_opml_feed {
    char *url;      /* xmlUrl as written */
    char *id;       /* newsflow:id (a source_id of the operator's choosing); "" if none */
    char *title;    /* text, else title; "" if neither */
    char *category; /* the enclosing outlines' names joined by '/'; "" at the top */
    uint32_t interval_s;
    const char *status; /* "active", "paused" or "dead" (static strings) */
    int line;
} nf_opml_feed_t;

typedef struct nf_opml {
    nf_opml_feed_t *feeds;
    size_t n, cap;
    char *title; /* head/title; "" if none */
} nf_opml_t;

/* Parses data (len bytes). 0, or -1 with the reason in err ("line 12: ...", "root element
 * <html> is not opml", "more than 100000 feeds", ...); out is then empty. Free with
 * nf_opml_free either way. Any thread. */
int nf_opml_parse(const char *data, size_t len, nf_opml_t *out, char *err, size_t errlen);
void nf_opml_free(nf_opml_t *o);

/* Writes an OPML 2.0 document of feeds (title, url, category: a category becomes the enclosing
 * outlines, the feeds sorted by category, in their order within one; an id NULL or "",
 * interval_s 0 and status "active" or NULL are left out). 0, or -1 (a write failed: errno). */
int nf_opml_write(FILE *f, const char *title, const nf_opml_feed_t *feeds, size_t n);

#endif
