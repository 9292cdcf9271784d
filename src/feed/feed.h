/* feed.h — one fetched document to a feed and its normalized articles (docs/feeds.md; the parse
 * step of docs/ARCHITECTURE.md §3 "A feed article").
 *
 * nf_feed_parse() detects the format (RSS 0.9x/2.0, RSS 1.0/RDF, Atom 0.3/1.0 through libxml2's
 * streaming SAX2 parser; JSON Feed 1.0/1.1 with cJSON), extracts feed and item fields including
 * the namespaces real feeds use (content:encoded, dc:*, atom:* inside RSS, media:*,
 * itunes:summary as a fallback, feedburner:origLink), and normalizes every item into an
 * article: text fields to plain text (text.h), dates to epoch ms (dates.h; a missing or
 * unparsable date falls back to fetched_ms and sets date_fallback), links resolved against
 * xml:base and the feed URL, then normalized (url.h); article_id from the normalized URL,
 * content_hash = SHA-256 of title + "\n" + body. Field mapping follows gofeed's universal
 * model (tests/conformance/README.md has the table and the fallback chains).
 *
 * Hostile and broken input. XML is parsed with no network access, no DTD loading and no entity
 * expansion by libxml2: our SAX handlers record no entity or DTD declaration, so nothing can be
 * expanded or fetched there (nf_feed_global_init also installs an entity loader that refuses
 * every URI).
 * Before libxml2 sees the bytes, a repair pass (which copies only when it changes something)
 * fixes what real feeds get wrong:
 *  - encoding: a BOM wins (UTF-8; UTF-16LE/BE, also without BOM, are converted to UTF-8);
 *    else bytes that are valid UTF-8 are read as UTF-8 whatever the declaration says (a feed
 *    labelled ISO-8859-1 that is really UTF-8 is the common case, and real Latin-1 text is
 *    almost never valid UTF-8); else a declared encoding libxml2 knows is used (Shift_JIS,
 *    KOI8-R...), except UTF-8 and the labels the WHATWG Encoding Standard reads as
 *    windows-1252 (ISO-8859-1, US-ASCII...): for those, for no declaration and for an unknown
 *    one, each byte that is not part of valid UTF-8 is read as windows-1252 (mixed documents
 *    keep their UTF-8). nf_feed_t.encoding says which rule applied;
 *  - a reference to an internal entity the document's own DOCTYPE declares (<!ENTITY id
 *    "tag:example.com,">) is replaced by its expansion, under caps (feed_dtd.c: 8 KiB per
 *    entity, 16 levels, 1 MiB and 10,000 references per document); external and parameter
 *    entities are never expanded or loaded;
 *  - every other '&' that does not start &lt; &gt; &amp; &quot; &apos; or a numeric reference
 *    to a valid XML character becomes "&amp;" (outside CDATA and comments): bare ampersands
 *    survive, and HTML entities (&nbsp;, &eacute;, legacy "&copy"), references to external
 *    entities and those past the caps reach the text layer as text, which decodes the HTML
 *    ones. So an entity bomb, a quadratic blow-up or an external entity (SYSTEM
 *    "file:///etc/passwd") stays inert text;
 *  - control characters XML forbids are dropped, and so is whitespace before the first '<'.
 * Structural breakage (a missing end tag, a truncated document) is left to libxml2's recover
 * mode, which goes on after it. Because libxml2 then drops the named references that follow a
 * fatal error (&amp; included), such a document is read a second time with the five
 * predefined references written as character references. Each repair and recovered error
 * counts in warnings; the first is described in first_warning (line:col for XML; columns count
 * in the repaired text, lines are unchanged).
 *
 * Limits (nf_feed_limits_t): input size (NF_FEED_E_TOO_LARGE), nesting depth (TOO_DEEP; libxml2
 * itself stops at 256 levels, so a larger max_depth does not raise that), items kept (the rest
 * are counted in truncated_items), plain-text bytes per field, entries per list.
 *
 * Items. Every item element becomes an article, in document order, even one with nothing we
 * keep (gofeed counts those too; the job decides what an article without a URL is worth).
 * skipped_items counts only items that could not be read whole: one cut off by the end of a
 * truncated document, a JSON Feed item that is not an object.
 * The link is the item's link (RSS: the last <link>, as gofeed; Atom: the first rel=alternate
 * or rel-less link that is a web page, else the first of another type, also one whose URL is
 * its text; JSON: url, then external_url; feedburner:origLink before all), else a guid / Atom
 * id / RSS 1.0 rdf:about / JSON id that is an absolute http(s) URL (for RSS unless
 * isPermaLink="false"). Relative links resolve against xml:base, else the feed URL, else the
 * feed's own link. javascript:, vbscript: and data: URLs are in no link field (a warning names
 * each). An article whose link is missing or does not normalize has url NULL and article_id
 * "": it cannot be deduplicated, and the job decides what to do with it. The summary is
 * <description> (or the first of <description> and <summary>; Atom <summary>), the body the
 * content (content:encoded, Atom <content>; an RSS item's second of <description> and
 * <summary>), falling back to the summary. An Atom entry without authors inherits the feed's.
 * Feed-level authors and categories are the feed's. Categories are also tags (term, label,
 * scheme), as feedparser gives them. tests/data/fidelity holds a small feed per rule decided
 * against feedparser's documented behaviour.
 *
 * Memory: every string and array hangs off the feed's arena (arena.h), freed by
 * nf_feed_free(); no per-string malloc. Thread-safe: no global state beyond libxml2's own
 * initialisation (nf_feed_global_init(), once per process before threads; it sets libxml2's
 * process-wide external entity loader). */
#ifndef NF_FEED_H
#define NF_FEED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    NF_FEED_UNKNOWN = 0,
    NF_FEED_RSS,  /* 0.9x / 2.0 */
    NF_FEED_RDF,  /* RSS 1.0 (and 0.90) */
    NF_FEED_ATOM, /* 0.3 / 1.0 */
    NF_FEED_JSON, /* JSON Feed 1.0 / 1.1 */
} nf_feed_format_t;

typedef struct nf_feed_limits {
    size_t max_bytes;   /* input larger than this is refused (default 16 MiB) */
    unsigned max_depth; /* XML/JSON nesting (default 256) */
    unsigned max_items; /* items kept; the rest counted in truncated_items (default 10000) */
    size_t max_title;   /* bytes of plain text kept (default 1 KiB) */
    size_t max_summary; /* default 4 KiB */
    size_t max_body;    /* default 64 KiB */
    size_t max_field;   /* any other string: link, guid, name, category... (default 4 KiB) */
    unsigned max_list;  /* authors, categories, links kept per item or feed (default 64) */
    int xml_mode;       /* how libxml2 is fed (feed_xml.c says why): NF_FEED_XML_AUTO (default),
                           _PULL or _PUSH, for tests and benchmarks */
} nf_feed_limits_t;

enum { NF_FEED_XML_AUTO = 0, NF_FEED_XML_PULL = 1, NF_FEED_XML_PUSH = 2 };

void nf_feed_limits_default(nf_feed_limits_t *l);

/* Bytes handed to libxml2's push parser per call (feed_xml.c says why push mode). */
#define NF_FEED_XML_CHUNK 65536

typedef struct nf_person {
    const char *name;  /* NULL if absent */
    const char *email; /* NULL if absent */
} nf_person_t;

/* One category as the feed gives it (feedparser's tags): Atom's term, label and scheme; RSS's
 * text and domain; dc:subject, itunes:category and keywords as terms. */
typedef struct nf_tag {
    const char *term;   /* never NULL */
    const char *label;  /* NULL if absent */
    const char *scheme; /* NULL if absent */
} nf_tag_t;

typedef struct nf_article {
    const char *title;   /* plain text, "" if absent */
    const char *link;    /* resolved, as published (NULL if none) */
    const char *url;     /* normalized link (NULL if the item has no usable link) */
    const char *guid;    /* NULL if absent */
    const char *summary; /* plain text, "" if absent */
    const char *body;    /* plain text, capped; the summary when the item has no content */
    nf_person_t *authors;
    size_t nauthors;
    const char **categories; /* plain text (a tag's label, else its term), duplicates dropped */
    size_t ncategories;
    nf_tag_t *tags; /* every category with its term, label and scheme, duplicates dropped */
    size_t ntags;
    const char **links; /* every link the item gives, resolved, in document order */
    size_t nlinks;
    const char *language; /* item's, else the feed's; NULL if unknown */
    int64_t published_ms; /* published, else updated, else fetched_ms */
    int64_t updated_ms;   /* updated, else published_ms */
    bool date_fallback;   /* no usable date: published_ms = updated_ms = fetched_ms */
    char article_id[33];  /* "" when url is NULL */
    char content_hash[65];
} nf_article_t;

typedef struct nf_feed {
    nf_feed_format_t format;
    const char *version; /* "2.0", "0.91", "1.0" (RDF), "0.3", "1.0" (Atom), "1.1" (JSON)...;
                            "" when the document does not say */
    const char *title, *description; /* plain text, "" if absent */
    const char *link;                /* the site (RSS link, Atom alternate, JSON home_page_url) */
    const char *feed_link;           /* the feed itself (atom:link rel=self, JSON feed_url) */
    const char **links;              /* every feed-level link, resolved, in document order */
    size_t nlinks;
    const char *language; /* NULL if unknown */
    nf_person_t *authors;
    size_t nauthors;
    const char **categories; /* the feed's own, as an article's */
    size_t ncategories;
    nf_tag_t *tags;
    size_t ntags;
    int64_t published_ms; /* 0 if absent (JSON Feed: newest item date) */
    int64_t updated_ms;   /* 0 if absent (JSON Feed: newest item date) */
    nf_article_t *items;
    size_t nitems;
    size_t truncated_items;    /* items beyond max_items */
    size_t skipped_items;      /* items cut off by the document's end, JSON items not objects */
    unsigned warnings;         /* recoverable problems: repairs, libxml2 errors, bad dates, links */
    const char *first_warning; /* description of the first one, NULL if none */
    const char *encoding;      /* how the bytes were decoded, e.g. "UTF-8", "UTF-16LE (BOM)",
                                  "KOI8-R (declared)", "windows-1252 (invalid UTF-8)" */
    void *arena;               /* owns every string and array above */
} nf_feed_t;

typedef enum {
    NF_FEED_OK = 0,
    NF_FEED_E_TOO_LARGE = -1,  /* over max_bytes */
    NF_FEED_E_NOT_A_FEED = -2, /* parsed, but no rss/feed/rdf root or JSON Feed object */
    NF_FEED_E_MALFORMED = -3,  /* not even recoverable XML/JSON (or empty) */
    NF_FEED_E_TOO_DEEP = -4,   /* nesting over max_depth (or libxml2's 256) */
    NF_FEED_E_NOMEM = -5,
} nf_feed_err_t;

/* libxml2's initialisation and an external-entity loader that refuses every URI (a second lock
 * behind the parse options). Once per process, before threads; nf_feed_parse calls it too. */
void nf_feed_global_init(void);

/* Parses data[0..len) into *f, which it initialises; call nf_feed_free(f) when done with it.
 * feed_url: where the document came from (base for relative links; may be NULL).
 * fetched_ms: the fallback date. lim: NULL for the defaults. On error returns an
 * nf_feed_err_t with a message in err that names the problem and, for XML/JSON syntax, the
 * line and column; f then holds nothing and owns no memory (nf_feed_free is harmless but not
 * needed). err may be NULL. */
int nf_feed_parse(nf_feed_t *f, const char *data, size_t len, const char *feed_url,
                  int64_t fetched_ms, const nf_feed_limits_t *lim, char *err, size_t errlen);
void nf_feed_free(nf_feed_t *f);

/* The job's rule for an article's dates (issue 15), which nf_feed_parse does not apply (it
 * reports what the feed says: the `parse` command, conformance with gofeed). A date is not
 * usable when it is after fetched_ms + max_future_ms (max_future_ms 0: no upper bound) — an
 * article cannot have been published after it was fetched, beyond clock skew; a far-future date
 * would rank it first for ever downstream — or at or before 1970-01-01T00:00:00Z (the epoch
 * placeholder of feeds with no real date, or a year before 1970). An unusable published_ms
 * takes updated_ms and the other way round; when neither is usable both become fetched_ms and
 * date_fallback is set. Returns the number of dates replaced (0, 1 or 2). */
int nf_article_bound_dates(nf_article_t *a, int64_t fetched_ms, int64_t max_future_ms);

/* "rss", "rdf", "atom", "json", "unknown". */
const char *nf_feed_format_name(nf_feed_format_t f);
/* Short description of an nf_feed_err_t. */
const char *nf_feed_strerror(int err);

#endif
