/* feed_int.h — what feed.c shares with the format readers (feed_xml.c, feed_json.c) and the
 * repair pass (feed_prep.c). Not part of the module's contract: include feed.h instead.
 *
 * A reader turns one document into calls on an nf_fparse_t: it opens an item, offers raw
 * values for the item's (or the feed's) fields with a priority, adds list entries, and closes
 * the item. feed.c owns everything after that: choosing among candidates, HTML to text, caps,
 * dates, URL normalization, ids and hashes. So the three formats share one definition of an
 * article, and a reader only knows where its format keeps things. */
#ifndef NF_FEED_INT_H
#define NF_FEED_INT_H

#include "feed/arena.h"
#include "feed/feed.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Growable scratch buffer, reused from item to item (never part of the result). */
typedef struct nf_fbuf {
    char *p;
    size_t len, cap;
} nf_fbuf_t;

/* Appends n bytes and keeps p NUL-terminated; false when out of memory. */
bool nf_fbuf_add(nf_fbuf_t *b, const char *s, size_t n);
void nf_fbuf_free(nf_fbuf_t *b);

typedef enum { NF_FTEXT_PLAIN = 0, NF_FTEXT_HTML = 1 } nf_ftext_t;

/* One single-valued field: the best candidate seen so far. prio 0 = none yet. */
typedef struct nf_fslot {
    nf_fbuf_t v;
    int prio;
    nf_ftext_t kind;
} nf_fslot_t;

typedef struct nf_fentry {
    nf_fslot_t title, summary, body, link, guid, published, updated, language, feed_link;
    bool guid_not_permalink; /* RSS isPermaLink="false" */
    int author_prio;         /* authors of lower priority are dropped, higher ones replace */
    nf_person_t *authors;
    size_t nauthors, authors_cap;
    const char **categories;
    size_t ncategories, categories_cap;
    nf_tag_t *tags;
    size_t ntags, tags_cap;
    const char **links;
    size_t nlinks, links_cap;
} nf_fentry_t;

typedef struct nf_fparse {
    nf_feed_t *f;
    nf_arena_t *a;
    const nf_feed_limits_t *lim;
    const char *feed_url; /* absolute base from the caller, or NULL */
    int64_t fetched_ms;
    nf_fentry_t feed, item;
    bool in_item;
    bool item_ignored; /* beyond max_items: read past, not kept */
    size_t items_cap;
    bool nomem;
    bool xml_ill_formed; /* libxml2 saw a fatal (recovered) error: see feed_prep.c */
    unsigned warnings;
    char first_warning[320];
    nf_fbuf_t tmp; /* scratch for conversions */
} nf_fparse_t;

/* Recoverable problem: counted; the first one is kept as the feed's first_warning. */
void nf_fp_warn(nf_fparse_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Items. begin/end bracket one item; abort drops a partial one (counted as skipped). */
void nf_fp_item_begin(nf_fparse_t *p);
void nf_fp_item_end(nf_fparse_t *p);
void nf_fp_item_abort(nf_fparse_t *p);
/* The entry values go to: the open item, or the feed outside items. */
nf_fentry_t *nf_fp_entry(nf_fparse_t *p);

/* Offers a candidate for a slot. It wins if prio is higher than the current one's (or equal
 * and last_wins). Whitespace-only values are ignored. offer_buf takes the buffer's content by
 * swapping buffers (no copy); offer copies s. */
void nf_fp_offer(nf_fparse_t *p, nf_fslot_t *s, const char *v, size_t n, int prio, nf_ftext_t kind,
                 bool last_wins);
void nf_fp_offer_buf(nf_fparse_t *p, nf_fslot_t *s, nf_fbuf_t *b, int prio, nf_ftext_t kind,
                     bool last_wins);

/* Lists. Links are resolved against base (NULL: the feed URL, else the feed's own link) and
 * added to the entry's links; the resolved string is returned (arena) or NULL when empty. */
const char *nf_fp_add_link(nf_fparse_t *p, nf_fentry_t *e, const char *base, const char *ref,
                           size_t n);
void nf_fp_add_category(nf_fparse_t *p, nf_fentry_t *e, const char *s, size_t n, nf_ftext_t kind);
/* A category with its parts (term required; label and scheme may be NULL): the label, else the
 * term, goes to the categories, the three to the tags. */
void nf_fp_add_tag(nf_fparse_t *p, nf_fentry_t *e, const char *term, const char *label,
                   const char *scheme, nf_ftext_t kind);
/* Comma-separated keywords (itunes:keywords, media:keywords). */
void nf_fp_add_keywords(nf_fparse_t *p, nf_fentry_t *e, const char *s, size_t n);
/* name/email may be NULL/0. */
void nf_fp_add_person(nf_fparse_t *p, nf_fentry_t *e, const char *name, size_t nn,
                      const char *email, size_t ne, int prio);
/* One RSS-style person string: "email (Name)", "Name (email)", "Name <email>", "email", "Name". */
void nf_fp_add_person_str(nf_fparse_t *p, nf_fentry_t *e, const char *s, size_t n, int prio);

/* Resolves ref (trimmed) against base into an arena string; the published ref when it cannot be
 * resolved. NULL when ref is empty. */
const char *nf_fp_resolve(nf_fparse_t *p, const char *base, const char *ref, size_t n);
/* The base for links that carry no xml:base: the caller's feed URL, else the feed's link once
 * known (absolute), else NULL. */
const char *nf_fp_default_base(nf_fparse_t *p);

/* Arena copy of s with whitespace trimmed and invalid UTF-8 repaired, cut to max_field. */
const char *nf_fp_str(nf_fparse_t *p, const char *s, size_t n);

/* Readers. They fill p and return NF_FEED_OK or an nf_feed_err_t with a message in err. */
/* push: libxml2's push parser rather than its pull parser (feed_xml.c says when and why). */
int nf_feed_xml_read(nf_fparse_t *p, const char *data, size_t len, const char *encoding, bool push,
                     char *err, size_t errlen);
int nf_feed_json_read(nf_fparse_t *p, const char *data, size_t len, char *err, size_t errlen);

/* The repair pass of feed.h: out points at data (unchanged) or at *owned (malloc'd, the caller
 * frees it). encoding: for libxml2 ("UTF-8", or NULL to let it read the declaration); label: for
 * nf_feed_t.encoding. Repairs are reported through nf_fp_warn. */
typedef struct nf_fprep {
    const char *data;
    size_t len;
    char *owned;
    const char *encoding;
    char label[128];
    bool json;
    size_t named_refs; /* &lt; &gt; &amp; &quot; &apos; seen */
} nf_fprep_t;
int nf_feed_prep(nf_fparse_t *p, nf_fprep_t *out, const char *data, size_t len);
/* Rewrites &lt; &gt; &amp; &quot; &apos; outside CDATA and comments as character references,
 * which libxml2 still decodes after a fatal error (named ones it then drops). */
int nf_feed_prep_charrefs(nf_fprep_t *out);

/* Is the reference after a '&' (s, n bytes) one XML resolves without a DTD (&lt; &gt; &amp;
 * &quot; &apos; or a character reference to a valid XML character)? Counts the named ones in
 * *named. */
bool nf_fp_ref_ok(const char *s, size_t n, size_t *named);

/* The internal entities of the document's DOCTYPE (feed_dtd.c has the rules and why). */
#define NF_DTD_MAX_ENTITIES  128
#define NF_DTD_MAX_EXPANSION 8192    /* bytes of one entity's expansion */
#define NF_DTD_MAX_TOTAL     1048576 /* bytes a document's references insert in all */
#define NF_DTD_MAX_REFS      10000   /* references a document may have replaced */
#define NF_DTD_MAX_LEVELS    16      /* references nested inside an entity */
#define NF_STR_(x)           #x
#define NF_STR(x)            NF_STR_(x)
typedef struct nf_fdtd nf_fdtd_t;
/* Reads the DOCTYPE's internal subset of s, if the prolog has one; *out NULL when there is no
 * DOCTYPE. NF_FEED_OK or NF_FEED_E_NOMEM. */
int nf_fdtd_read(const char *s, size_t n, nf_fdtd_t **out);
/* Is document offset off inside the internal subset (where references are declarations, not
 * text)? */
bool nf_fdtd_in_subset(const nf_fdtd_t *d, size_t off);
/* Length of the entity name after a '&' (s, n bytes) when a ';' ends it, else 0. */
size_t nf_fdtd_name(const char *s, size_t n);
/* Appends entity name's expansion to out: 1 done; 0 not expanded, *why says why (NULL: the
 * name is not declared); -1 out of memory. */
int nf_fdtd_expand(nf_fdtd_t *d, const char *name, size_t nl, nf_fbuf_t *out, const char **why);
void nf_fdtd_free(nf_fdtd_t *d);

/* Line (1-based) of data[off] and column (1-based, in bytes). */
void nf_fp_linecol(const char *data, size_t off, unsigned *line, unsigned *col);

#endif
