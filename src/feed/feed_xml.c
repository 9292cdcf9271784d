/* feed_xml.c — RSS 0.9x/2.0, RSS 1.0 (RDF) and Atom 0.3/1.0 through libxml2's SAX2 parser.
 *
 * Streaming: libxml2 calls us per start tag, text run and end tag, and no tree of the document
 * is ever built, so memory follows the largest field, not the feed. An element is classified
 * by (namespace, local name) and the frame kind of its parent (channel, item, author...), kept
 * in a small array indexed by depth. A field element starts a capture: its text (and, for
 * HTML-bearing fields, the tags of child elements) is appended to one scratch buffer, handed to
 * feed.c when the element ends. Subtrees we do not read (images, enclosures, items over the
 * cap) only move the depth counter.
 *
 * Why SAX2 and not xmlTextReader: the reader gives up at the first well-formedness error even
 * with XML_PARSE_RECOVER (xmlTextReaderPushData returns -1 once wellFormed is 0), so a feed
 * with one stray tag would need a second, tree-building read; the SAX2 parser in recover mode
 * continues past such errors by itself. It also skips building and freeing a node per element
 * and text run, which is a quarter of libxml2's time on a large feed.
 *
 * Push mode or pull mode. libxml2's pull parser (one memory input, xmlParseDocument) reads a
 * CDATA section a character at a time (xmlParseCDSect), and feeds carry their HTML in CDATA;
 * its push parser (xmlParseChunk, NF_FEED_XML_CHUNK bytes a call) finds the end of a section
 * with one search and checks its UTF-8 in bulk, but looks ahead for the next '<' after every
 * reference in text, which costs feeds of escaped HTML (&lt;p&gt;...). Measured on the
 * benchmark feeds (perf/README "Parse"), libxml2 alone: the 48 MB RSS feed with CDATA 1.75x
 * faster pushed, the 12 MB Atom feed of escaped HTML 1.15x faster pulled. The callbacks are
 * the same, but libxml2 recovers from a broken document differently in each mode (another
 * count of items, on the tests' mutated feeds). So feed.c pushes a document whose first chunk
 * holds a CDATA section, and reads it again pulled if libxml2 met any error: a broken document
 * always gets the pull reading, which the tests pin; only well-formed ones take the fast path.
 *
 * Options: XML_PARSE_RECOVER | NONET | NOERROR | NOWARNING (| IGNORE_ENC when the repair pass
 * already made the bytes UTF-8); not NOCDATA, which only matters to tree builders: CDATA
 * blocks reach the same text handler as text. Never NOENT, DTDLOAD, DTDATTR or HUGE. Beyond
 * the options, the handler table has no entityDecl, getEntity, getParameterEntity,
 * internalSubset or externalSubset: a DTD is parsed as syntax and forgotten, so no entity can
 * be declared, let alone expanded by libxml2 (the repair pass has already replaced references
 * to the document's internal entities, within caps, and turned the rest into text), and no
 * external subset or entity is ever loaded. libxml2 keeps its own limits (256 levels,
 * 10 MB text). */
#include "feed/feed_int.h"
#include "feed/text.h"

#include <libxml/SAX2.h>
#include <libxml/parser.h>
#include <libxml/parserInternals.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum xml_ns {
    NS_NONE, /* no namespace, or an RSS one: the format's own elements (Atom: see native) */
    NS_ATOM,
    NS_ATOM03,
    NS_RDF,
    NS_DC,
    NS_CONTENT,
    NS_MEDIA,
    NS_ITUNES,
    NS_FEEDBURNER,
    NS_XHTML,
    NS_XML,
    NS_OTHER,
};

enum xml_frame {
    FR_SKIP = 0, /* not read (children skipped or ignored) */
    FR_ROOT,     /* rss, rdf:RDF */
    FR_CHANNEL,  /* channel; Atom's feed */
    FR_ITEM,     /* item, entry */
    FR_GROUP,    /* media:group: its children count as the item's */
    FR_PERSON,   /* atom:author */
    FR_CATEGORY, /* itunes:category, which nests */
    FR_FIELD,    /* capturing */
    FR_INFIELD,  /* element inside a captured field */
};

enum xml_field {
    FD_TITLE = 1,
    FD_SUMMARY,
    FD_BODY,
    FD_LINK,
    FD_GUID,
    FD_PUB,
    FD_UPD,
    FD_DATE, /* dc:date: published and updated */
    FD_LANG,
    FD_PERSON, /* one RSS-style person string */
    FD_CATEGORY,
    FD_KEYWORDS,
    FD_NAME, /* atom:author children */
    FD_EMAIL,
};

enum cap_mode { CM_PLAIN, CM_HTML, CM_XHTML };

enum xml_attr {
    A_HREF,
    A_REL,
    A_TYPE,
    A_MODE,
    A_TERM,
    A_LABEL,
    A_TEXT,
    A_PERMALINK,
    A_BASE,
    A_LANG,
    A_VERSION,
    A_DOMAIN,
    A_SCHEME,
    A_ABOUT,
    A_COUNT,
};

#define XML_MAX_FRAMES 258 /* libxml2 stops at 256 levels */

#define NO_SKIP ((unsigned)-1)

typedef struct xml_ctx {
    nf_fparse_t *p;
    xmlParserCtxtPtr ctxt;
    nf_feed_format_t fmt;
    unsigned depth; /* open elements */
    unsigned skip;  /* depth of the element whose subtree is skipped, or NO_SKIP */
    unsigned max_depth;
    unsigned char frames[XML_MAX_FRAMES];

    /* the element being looked at */
    int ns;
    const char *ln;
    nf_fbuf_t abuf;
    size_t aoff[A_COUNT];
    bool aset[A_COUNT];

    /* capture */
    bool capturing;
    int cfield, cprio, cmode;
    unsigned cdepth;
    bool clast_wins, cbase64, ctext; /* ctext: tags of child elements matter */
    nf_fentry_t *centry;
    nf_fbuf_t buf, href, clabel; /* href: a link's href, a category's scheme */

    /* RSS item: which of <description> and <summary> came (the second one is the body) */
    bool had_desc, had_summary;

    /* atom:author */
    nf_fbuf_t pname, pemail, ptext;
    int pprio;

    /* xml:base in effect, by depth */
    struct {
        unsigned depth;
        const char *base;
    } bases[32];
    unsigned nbases;

    /* The root's default namespace when it is none we know (<feed xmlns="http://wrong/">):
     * elements in it are the format's own. */
    const char *native_uri;
    bool rss090; /* the root's default namespace is RSS 0.90's */

    /* namespace URI -> id, by pointer (libxml2 interns them in the parser's dictionary) */
    struct {
        const void *uri;
        int id;
    } nscache[8];
    unsigned nsnext;

    /* outcome */
    bool root_seen, not_feed, too_deep, stop;
    unsigned errors;
    int err_line, err_col;
    char err_msg[200];
    char root_name[64];
} xml_ctx_t;

/* ---- names -------------------------------------------------------------------------------- */

static int ns_from_uri(const char *u)
{
    static const struct {
        const char *uri;
        int id;
    } known[] = {
        {"http://www.w3.org/2005/Atom", NS_ATOM},
        {"http://purl.org/atom/ns#", NS_ATOM03},
        {"http://www.w3.org/1999/02/22-rdf-syntax-ns#", NS_RDF},
        {"http://purl.org/rss/1.0/", NS_NONE},
        {"http://my.netscape.com/rdf/simple/0.9/", NS_NONE},
        {"http://backend.userland.com/rss2", NS_NONE},
        {"http://blogs.law.harvard.edu/tech/rss", NS_NONE},
        {"http://purl.org/dc/elements/1.1/", NS_DC},
        {"http://purl.org/dc/terms/", NS_DC},
        {"http://purl.org/rss/1.0/modules/content/", NS_CONTENT},
        {"http://search.yahoo.com/mrss/", NS_MEDIA},
        {"http://search.yahoo.com/mrss", NS_MEDIA},
        {"http://www.itunes.com/dtds/podcast-1.0.dtd", NS_ITUNES},
        {"http://rssnamespace.org/feedburner/ext/1.0", NS_FEEDBURNER},
        {"http://www.w3.org/1999/xhtml", NS_XHTML},
        {"http://www.w3.org/XML/1998/namespace", NS_XML},
    };
    if (!u || !*u)
        return NS_NONE;
    while (*u == ' ' || *u == '\t' || *u == '\n' || *u == '\r')
        u++;
    size_t n = strlen(u);
    while (n && (u[n - 1] == ' ' || u[n - 1] == '\t' || u[n - 1] == '\n' || u[n - 1] == '\r'))
        n--;
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (strlen(known[i].uri) == n && !strncasecmp(known[i].uri, u, n))
            return known[i].id;
    return NS_OTHER;
}

static int ns_from_prefix(const char *pfx, size_t n)
{
    static const struct {
        const char *prefix;
        int id;
    } known[] = {
        {"atom", NS_ATOM},
        {"dc", NS_DC},
        {"dcterms", NS_DC},
        {"content", NS_CONTENT},
        {"media", NS_MEDIA},
        {"itunes", NS_ITUNES},
        {"feedburner", NS_FEEDBURNER},
        {"rdf", NS_RDF},
        {"xhtml", NS_XHTML},
    };
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (strlen(known[i].prefix) == n && !strncmp(known[i].prefix, pfx, n))
            return known[i].id;
    return NS_OTHER;
}

/* Sets x->ns and x->ln for an element. */
static void xml_name(xml_ctx_t *x, const xmlChar *localname, const xmlChar *prefix,
                     const xmlChar *uri)
{
    const char *ln = localname ? (const char *)localname : "";
    x->ln = ln;
    if (!uri) {
        /* An undeclared prefix: known prefixes still say what the element is. */
        x->ns =
            prefix ? ns_from_prefix((const char *)prefix, strlen((const char *)prefix)) : NS_NONE;
        return;
    }
    for (unsigned i = 0; i < sizeof x->nscache / sizeof *x->nscache; i++)
        if (x->nscache[i].uri == uri) {
            x->ns = x->nscache[i].id;
            return;
        }
    int id = ns_from_uri((const char *)uri);
    if (id == NS_OTHER && prefix)
        id = ns_from_prefix((const char *)prefix, strlen((const char *)prefix));
    if (id == NS_OTHER && x->native_uri && !strcmp(x->native_uri, (const char *)uri))
        id = NS_NONE; /* native in every format */
    unsigned slot = x->nsnext++ % (sizeof x->nscache / sizeof *x->nscache);
    x->nscache[slot].uri = uri;
    x->nscache[slot].id = id;
    x->ns = id;
}

static bool ln_is(const xml_ctx_t *x, const char *name)
{
    return !strcmp(x->ln, name);
}

/* The format's own elements: RSS/RDF ones have no namespace (or an RSS one); Atom's are in an
 * Atom namespace, or none in feeds that forgot xmlns. */
static bool xml_native(const xml_ctx_t *x)
{
    if (x->fmt == NF_FEED_ATOM)
        return x->ns == NS_ATOM || x->ns == NS_ATOM03 || x->ns == NS_NONE;
    return x->ns == NS_NONE;
}

static bool xml_atom(const xml_ctx_t *x)
{
    return x->ns == NS_ATOM || x->ns == NS_ATOM03 || (x->fmt == NF_FEED_ATOM && x->ns == NS_NONE);
}

/* ---- attributes --------------------------------------------------------------------------- */

/* Appends an attribute value and its NUL to abuf. Without XML_PARSE_NOENT (which we never set)
 * libxml2 hands every '&' of a value over as the five characters "&#38;" — from &amp;, &#38;
 * or &#x26; alike — so that a tree builder could write it back: each one is an '&'. */
static void xml_attr_value(xml_ctx_t *x, const char *v, size_t n)
{
    const char *q;
    while (n && (q = memmem(v, n, "&#38;", 5))) {
        size_t k = (size_t)(q - v);
        if (!nf_fbuf_add(&x->abuf, v, k) || !nf_fbuf_add(&x->abuf, "&", 1))
            x->p->nomem = true;
        v += k + 5;
        n -= k + 5;
    }
    if (!nf_fbuf_add(&x->abuf, v, n) || !nf_fbuf_add(&x->abuf, "", 1))
        x->p->nomem = true;
}

/* SAX2 attributes: nb entries of (localname, prefix, URI, value, end). */
static void xml_attrs(xml_ctx_t *x, int nb, const xmlChar **attrs)
{
    static const char *const names[A_COUNT] = {
        [A_HREF] = "href",       [A_REL] = "rel",
        [A_TYPE] = "type",       [A_MODE] = "mode",
        [A_TERM] = "term",       [A_LABEL] = "label",
        [A_TEXT] = "text",       [A_PERMALINK] = "isPermaLink",
        [A_BASE] = "base",       [A_LANG] = "lang",
        [A_VERSION] = "version", [A_DOMAIN] = "domain",
        [A_SCHEME] = "scheme",   [A_ABOUT] = "about",
    };
    memset(x->aset, 0, sizeof x->aset);
    x->abuf.len = 0;
    for (int k = 0; k < nb; k++, attrs += 5) {
        const char *ln = (const char *)attrs[0], *pfx = (const char *)attrs[1];
        const char *v = (const char *)attrs[3], *end = (const char *)attrs[4];
        if (!ln || !v || !end || end < v)
            continue;
        bool xmlns = pfx && !strcmp(pfx, "xml");
        for (int i = 0; i < A_COUNT; i++) {
            if (strcmp(ln, names[i]) != 0)
                continue;
            if ((i == A_BASE || i == A_LANG) != xmlns)
                break;
            x->aoff[i] = x->abuf.len;
            x->aset[i] = true;
            xml_attr_value(x, v, (size_t)(end - v));
            break;
        }
    }
}

static const char *xml_attr(const xml_ctx_t *x, int i)
{
    return x->aset[i] && x->abuf.p ? x->abuf.p + x->aoff[i] : NULL;
}

static bool attr_is(const xml_ctx_t *x, int i, const char *v)
{
    const char *a = xml_attr(x, i);
    return a && !strcasecmp(a, v);
}

/* ---- xml:base ------------------------------------------------------------------------------ */

/* The base in effect for an element at depth d (NULL: the feed's default base). */
static const char *xml_base_at(xml_ctx_t *x, unsigned d)
{
    while (x->nbases && x->bases[x->nbases - 1].depth > d)
        x->nbases--;
    return x->nbases ? x->bases[x->nbases - 1].base : NULL;
}

static void xml_base_push(xml_ctx_t *x, unsigned d)
{
    while (x->nbases && x->bases[x->nbases - 1].depth >= d)
        x->nbases--;
    const char *v = xml_attr(x, A_BASE);
    if (!v)
        return;
    const char *parent = x->nbases ? x->bases[x->nbases - 1].base : NULL;
    const char *b = nf_fp_resolve(x->p, parent, v, strlen(v));
    if (!b || x->nbases == sizeof x->bases / sizeof *x->bases)
        return;
    x->bases[x->nbases].depth = d;
    x->bases[x->nbases].base = b;
    x->nbases++;
}

/* ---- capture -------------------------------------------------------------------------------- */

static void cap_add(xml_ctx_t *x, const char *s, size_t n)
{
    if (!nf_fbuf_add(&x->buf, s, n))
        x->p->nomem = true;
}

static void cap_add_escaped(xml_ctx_t *x, nf_fbuf_t *b, const char *s, size_t n)
{
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        const char *rep = s[i] == '<'   ? "&lt;"
                          : s[i] == '&' ? "&amp;"
                          : s[i] == '>' ? "&gt;"
                                        : NULL;
        if (!rep)
            continue;
        if (!nf_fbuf_add(b, s + run, i - run) || !nf_fbuf_add(b, rep, strlen(rep)))
            x->p->nomem = true;
        run = i + 1;
    }
    if (!nf_fbuf_add(b, s + run, n - run))
        x->p->nomem = true;
}

static void cap_text(xml_ctx_t *x, const char *s, size_t n)
{
    if (x->cmode == CM_XHTML)
        cap_add_escaped(x, &x->buf, s, n);
    else
        cap_add(x, s, n);
}

/* Mode of an Atom text construct (RFC 4287 §3.1; Atom 0.3's type and mode). An empty type is
 * text; so is one that is no media type at all (no '/'), with a warning. Only a media type that
 * is neither text nor XML says the content is base64 (RFC 4287 §4.1.3.3), and Atom 0.3 says it
 * with mode="base64"; what it holds is then read as HTML. */
static int atom_mode(xml_ctx_t *x, bool *base64)
{
    const char *type = xml_attr(x, A_TYPE), *mode = xml_attr(x, A_MODE);
    *base64 = mode && !strcasecmp(mode, "base64");
    if (mode && !strcasecmp(mode, "escaped"))
        return CM_HTML;
    if (!type || !*type || !strcasecmp(type, "text") || !strcasecmp(type, "text/plain"))
        return *base64 ? CM_HTML : CM_PLAIN;
    if (!strcasecmp(type, "html") || !strcasecmp(type, "text/html"))
        return CM_HTML;
    size_t n = strlen(type);
    if (!strcasecmp(type, "xhtml") || (n >= 4 && !strcasecmp(type + n - 4, "+xml")) ||
        (n >= 4 && !strcasecmp(type + n - 4, "/xml")))
        return CM_XHTML;
    if (!strncasecmp(type, "text/", 5))
        return CM_PLAIN;
    if (!strchr(type, '/')) {
        nf_fp_warn(x->p, "line %d: <%s type=\"%.40s\">: not a type Atom knows, read as text",
                   xmlSAX2GetLineNumber(x->ctxt), x->ln, type);
        return CM_PLAIN;
    }
    *base64 = true;
    return CM_HTML;
}

static void cap_begin(xml_ctx_t *x, unsigned depth, int field, int prio, int mode, bool last_wins)
{
    x->capturing = true;
    x->cfield = field;
    x->cprio = prio;
    x->cmode = mode;
    x->cdepth = depth;
    x->clast_wins = last_wins;
    x->cbase64 = false;
    x->ctext = field == FD_TITLE || field == FD_SUMMARY || field == FD_BODY;
    x->centry = nf_fp_entry(x->p);
    x->buf.len = 0;
    x->href.len = 0;
    if (field == FD_LINK) {
        const char *h = xml_attr(x, A_HREF);
        if (h && !nf_fbuf_add(&x->href, h, strlen(h)))
            x->p->nomem = true;
    }
    if (field == FD_CATEGORY) { /* RSS's domain or Media RSS's scheme; Media RSS's label */
        const char *d = xml_attr(x, A_DOMAIN), *l = xml_attr(x, A_LABEL);
        if (!d)
            d = xml_attr(x, A_SCHEME);
        if (!d && x->ns == NS_MEDIA) /* Media RSS's default scheme */
            d = "http://search.yahoo.com/mrss/category_schema";
        x->clabel.len = 0;
        if ((d && !nf_fbuf_add(&x->href, d, strlen(d))) ||
            (l && !nf_fbuf_add(&x->clabel, l, strlen(l))))
            x->p->nomem = true;
    }
    if (field == FD_GUID && attr_is(x, A_PERMALINK, "false"))
        x->centry->guid_not_permalink = true;
    x->frames[depth] = FR_FIELD;
}

/* Decodes base64 in place (a base64 Atom text construct) when the content is base64 — the
 * alphabet, whitespace, and '=' padding only at the end, in whole quanta — and decodes to UTF-8
 * text. Otherwise the content stays as it is (it is text that mislabels itself) and false is
 * returned. */
static bool cap_unbase64(nf_fbuf_t *b)
{
    unsigned acc = 0, bits = 0, digits = 0, pad = 0;
    size_t o = 0;
    char *out = malloc(b->len + 1);
    if (!out)
        return false;
    for (size_t i = 0; i < b->len; i++) {
        unsigned char c = (unsigned char)b->p[i];
        int v = c >= 'A' && c <= 'Z'   ? c - 'A'
                : c >= 'a' && c <= 'z' ? c - 'a' + 26
                : c >= '0' && c <= '9' ? c - '0' + 52
                : c == '+'             ? 62
                : c == '/'             ? 63
                                       : -1;
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
            continue;
        if (c == '=' && pad < 2) {
            pad++;
            continue;
        }
        if (v < 0 || pad)
            goto not_base64;
        digits++;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (char)(acc >> bits & 0xFF);
        }
    }
    if (!digits || (digits + pad) % 4 != 0 || !nf_utf8_valid(out, o))
        goto not_base64;
    memcpy(b->p, out, o);
    b->len = o;
    b->p[o] = '\0';
    free(out);
    return true;
not_base64:
    free(out);
    return false;
}

static void cap_end(xml_ctx_t *x)
{
    nf_fparse_t *p = x->p;
    nf_fentry_t *e = x->centry;
    int prio = x->cprio;
    x->capturing = false;
    if (!x->buf.p && !nf_fbuf_add(&x->buf, "", 0)) {
        p->nomem = true;
        return;
    }
    nf_ftext_t kind = x->cmode == CM_PLAIN ? NF_FTEXT_PLAIN : NF_FTEXT_HTML;
    if (x->cbase64 && x->buf.len && !cap_unbase64(&x->buf)) {
        nf_fp_warn(p, "line %d: a base64 text construct is not base64 of UTF-8 text: kept as text",
                   xmlSAX2GetLineNumber(x->ctxt));
        kind = NF_FTEXT_PLAIN;
    }
    switch (x->cfield) {
    case FD_TITLE:
        nf_fp_offer_buf(p, &e->title, &x->buf, prio, kind, x->clast_wins);
        break;
    case FD_SUMMARY:
        nf_fp_offer_buf(p, &e->summary, &x->buf, prio, kind, x->clast_wins);
        break;
    case FD_BODY:
        nf_fp_offer_buf(p, &e->body, &x->buf, prio, kind, x->clast_wins);
        break;
    case FD_LINK: {
        const char *ref = x->buf.p;
        size_t n = x->buf.len;
        while (n && (*ref == ' ' || *ref == '\t' || *ref == '\n' || *ref == '\r')) {
            ref++;
            n--;
        }
        if (!n && x->href.len) {
            ref = x->href.p;
            n = x->href.len;
        }
        const char *u = nf_fp_add_link(p, e, xml_base_at(x, x->cdepth), ref, n);
        if (u)
            nf_fp_offer(p, &e->link, u, strlen(u), prio, NF_FTEXT_PLAIN, x->clast_wins);
        break;
    }
    case FD_GUID:
        nf_fp_offer_buf(p, &e->guid, &x->buf, prio, NF_FTEXT_PLAIN, false);
        break;
    case FD_PUB:
        nf_fp_offer_buf(p, &e->published, &x->buf, prio, NF_FTEXT_PLAIN, x->clast_wins);
        break;
    case FD_UPD:
        nf_fp_offer_buf(p, &e->updated, &x->buf, prio, NF_FTEXT_PLAIN, x->clast_wins);
        break;
    case FD_DATE:
        nf_fp_offer(p, &e->published, x->buf.p, x->buf.len, prio, NF_FTEXT_PLAIN, false);
        nf_fp_offer_buf(p, &e->updated, &x->buf, prio, NF_FTEXT_PLAIN, false);
        break;
    case FD_LANG:
        nf_fp_offer_buf(p, &e->language, &x->buf, prio, NF_FTEXT_PLAIN, false);
        break;
    case FD_PERSON:
        nf_fp_add_person_str(p, e, x->buf.p, x->buf.len, prio);
        break;
    case FD_CATEGORY:
        nf_fp_add_tag(p, e, x->buf.p, x->clabel.len ? x->clabel.p : NULL,
                      x->href.len ? x->href.p : NULL, NF_FTEXT_PLAIN);
        break;
    case FD_KEYWORDS:
        nf_fp_add_keywords(p, e, x->buf.p, x->buf.len);
        break;
    case FD_NAME:
        x->pname.len = 0;
        if (!nf_fbuf_add(&x->pname, x->buf.p, x->buf.len))
            p->nomem = true;
        break;
    case FD_EMAIL:
        x->pemail.len = 0;
        if (!nf_fbuf_add(&x->pemail, x->buf.p, x->buf.len))
            p->nomem = true;
        break;
    }
}

/* An element inside a captured field: for text fields, its tags become part of the HTML. */
static void cap_child_start(xml_ctx_t *x, unsigned depth)
{
    x->frames[depth] = FR_INFIELD;
    if (!x->ctext)
        return;
    if (x->cmode == CM_PLAIN) {
        /* Markup in a text-typed field: it was XHTML after all; escape what came before. */
        nf_fbuf_t t = {0};
        cap_add_escaped(x, &t, x->buf.p ? x->buf.p : "", x->buf.len);
        nf_fbuf_free(&x->buf);
        x->buf = t;
        x->cmode = CM_XHTML;
    }
    cap_add(x, "<", 1);
    cap_add(x, x->ln, strlen(x->ln));
    cap_add(x, ">", 1);
}

static void cap_child_end(xml_ctx_t *x, const char *ln)
{
    if (!x->ctext)
        return;
    cap_add(x, "</", 2);
    cap_add(x, ln, strlen(ln));
    cap_add(x, ">", 1);
}

/* ---- persons -------------------------------------------------------------------------------- */

static void person_begin(xml_ctx_t *x, unsigned depth, int prio)
{
    x->frames[depth] = FR_PERSON;
    x->pprio = prio;
    x->pname.len = x->pemail.len = x->ptext.len = 0;
}

static void person_end(xml_ctx_t *x)
{
    nf_fentry_t *e = nf_fp_entry(x->p);
    if (x->pname.len || x->pemail.len)
        nf_fp_add_person(x->p, e, x->pname.p, x->pname.len, x->pemail.p, x->pemail.len, x->pprio);
    else if (x->ptext.len)
        nf_fp_add_person_str(x->p, e, x->ptext.p, x->ptext.len, x->pprio);
}

/* ---- classification ------------------------------------------------------------------------ */

/* Atom link (in Atom, or atom:link in RSS): by rel, at start (its content is empty). The
 * article's link is the first alternate one (rel="alternate" or no rel, RFC 4287 §4.2.7.2),
 * one that is a web page (type HTML/XHTML or not given) before one of another type (the feed
 * itself in another format). A link without href whose URL is its text (Atom 0.3-era feeds,
 * RSS habits) is captured as RSS's <link> is. Returns the frame. */
static int xml_atom_link(xml_ctx_t *x, unsigned depth, bool item, int alt_prio)
{
    nf_fparse_t *p = x->p;
    nf_fentry_t *e = nf_fp_entry(p);
    const char *href = xml_attr(x, A_HREF), *rel = xml_attr(x, A_REL), *type = xml_attr(x, A_TYPE);
    bool alternate = !rel || !*rel || !strcasecmp(rel, "alternate");
    if (rel && !strcasecmp(rel, "enclosure"))
        return FR_SKIP; /* media, not the article */
    if (!href) {
        if (!alternate)
            return FR_SKIP;
        cap_begin(x, depth, FD_LINK, alt_prio - 1, CM_PLAIN, false);
        return FR_FIELD;
    }
    const char *base = xml_base_at(x, depth);
    if (!href[strspn(href, " \t\r\n")]) {
        /* href="" is the base itself (RFC 3986 §5.2): a page only when xml:base names one; the
         * feed's own URL is no article's link. */
        if (!base)
            return FR_SKIP;
        href = base;
    }
    const char *u = nf_fp_add_link(p, e, base, href, strlen(href));
    if (!u)
        return FR_SKIP;
    bool page = !type || !*type || !strcasecmp(type, "text/html") ||
                !strcasecmp(type, "application/xhtml+xml");
    if (alternate)
        nf_fp_offer(p, &e->link, u, strlen(u), page ? alt_prio : alt_prio - 1, NF_FTEXT_PLAIN,
                    false);
    else if (!item && !strcasecmp(rel, "self"))
        nf_fp_offer(p, &e->feed_link, u, strlen(u), 5, NF_FTEXT_PLAIN, false);
    return FR_SKIP;
}

/* Atom category: term, label and scheme (the label, when there is one, is the category's
 * name in the categories list). Atom 0.3 and feeds that forgot the attribute give the term as
 * text content; that is read as the term (see cap_end). */
static void xml_atom_category(xml_ctx_t *x)
{
    nf_fp_add_tag(x->p, nf_fp_entry(x->p), xml_attr(x, A_TERM), xml_attr(x, A_LABEL),
                  xml_attr(x, A_SCHEME), NF_FTEXT_PLAIN);
}

/* RSS <description>, or <summary> in an item. When an item has both, the first is its summary
 * and the second its body unless a content element gives one (feedparser's rule: a feed that
 * writes both means two things by them). */
static void rss_summary(xml_ctx_t *x, unsigned depth, bool item)
{
    bool desc = ln_is(x, "description");
    if (item && (desc ? x->had_summary && !x->had_desc : x->had_desc && !x->had_summary))
        cap_begin(x, depth, FD_BODY, 2, CM_HTML, false);
    else
        cap_begin(x, depth, FD_SUMMARY, 5, CM_HTML, false);
    if (item)
        *(desc ? &x->had_desc : &x->had_summary) = true;
}

/* Decides what an element inside a channel or item is. Returns the frame kind; for fields,
 * starts the capture. */
static int xml_classify(xml_ctx_t *x, unsigned depth, bool item)
{
    bool native = xml_native(x), atom = xml_atom(x), rss = x->fmt != NF_FEED_ATOM;
    int ns = x->ns;
    if (native && rss) {
        if (ln_is(x, "title"))
            return cap_begin(x, depth, FD_TITLE, 5, CM_HTML, false), FR_FIELD;
        if (ln_is(x, "link"))
            return cap_begin(x, depth, FD_LINK, 5, CM_PLAIN, true), FR_FIELD;
        if (ln_is(x, "description") || (item && ln_is(x, "summary")))
            return rss_summary(x, depth, item), FR_FIELD;
        if (ln_is(x, "pubDate"))
            return cap_begin(x, depth, FD_PUB, 5, CM_PLAIN, false), FR_FIELD;
        if (item && ln_is(x, "guid"))
            return cap_begin(x, depth, FD_GUID, 5, CM_PLAIN, false), FR_FIELD;
        if (ln_is(x, "author"))
            return cap_begin(x, depth, FD_PERSON, 5, CM_PLAIN, false), FR_FIELD;
        if (ln_is(x, "category"))
            return cap_begin(x, depth, FD_CATEGORY, 1, CM_PLAIN, false), FR_FIELD;
        if (!item) {
            if (ln_is(x, "language"))
                return cap_begin(x, depth, FD_LANG, 5, CM_PLAIN, false), FR_FIELD;
            if (ln_is(x, "lastBuildDate"))
                return cap_begin(x, depth, FD_UPD, 5, CM_PLAIN, false), FR_FIELD;
            if (ln_is(x, "managingEditor"))
                return cap_begin(x, depth, FD_PERSON, 5, CM_PLAIN, false), FR_FIELD;
            if (ln_is(x, "webMaster"))
                return cap_begin(x, depth, FD_PERSON, 4, CM_PLAIN, false), FR_FIELD;
        }
        return FR_SKIP;
    }
    if (atom) {
        /* Atom's own elements, or atom:* inside RSS (one priority step below RSS's). */
        int top = native ? 5 : 4;
        if (ln_is(x, "link"))
            return xml_atom_link(x, depth, item, top);
        if (ln_is(x, "title") || ((ln_is(x, "summary") || ln_is(x, "content")) && item) ||
            ((ln_is(x, "subtitle") || ln_is(x, "tagline")) && !item)) {
            bool b64;
            int mode = atom_mode(x, &b64);
            int field = ln_is(x, "title") ? FD_TITLE : ln_is(x, "content") ? FD_BODY : FD_SUMMARY;
            cap_begin(x, depth, field, top, mode, false);
            x->cbase64 = b64;
            return FR_FIELD;
        }
        /* A repeated Atom date: the last one wins, as in feedparser (its test
         * atom/entry_updated_multiple_values, "ensure overwrite"). */
        if (ln_is(x, "updated") || ln_is(x, "modified"))
            return cap_begin(x, depth, FD_UPD, ln_is(x, "updated") ? top : top - 1, CM_PLAIN, true),
                   FR_FIELD;
        if (ln_is(x, "author"))
            return person_begin(x, depth, native ? 5 : 4), FR_PERSON;
        if (item) {
            if (ln_is(x, "published") || ln_is(x, "issued") || ln_is(x, "created"))
                return cap_begin(x, depth, FD_PUB,
                                 ln_is(x, "published") ? top
                                 : ln_is(x, "issued")  ? top - 1
                                                       : 1,
                                 CM_PLAIN, true),
                       FR_FIELD;
            if (ln_is(x, "id"))
                return cap_begin(x, depth, FD_GUID, top, CM_PLAIN, false), FR_FIELD;
        }
        if (ln_is(x, "category")) {
            if (xml_attr(x, A_TERM))
                return xml_atom_category(x), FR_SKIP;
            return cap_begin(x, depth, FD_CATEGORY, 1, CM_PLAIN, false), FR_FIELD;
        }
        return FR_SKIP;
    }
    switch (ns) {
    case NS_CONTENT:
        if (item && ln_is(x, "encoded"))
            return cap_begin(x, depth, FD_BODY, 5, CM_HTML, false), FR_FIELD;
        break;
    case NS_DC:
        if (ln_is(x, "title"))
            return cap_begin(x, depth, FD_TITLE, 4, CM_HTML, false), FR_FIELD;
        if (ln_is(x, "description"))
            return cap_begin(x, depth, FD_SUMMARY, 4, CM_HTML, false), FR_FIELD;
        if (ln_is(x, "date"))
            return cap_begin(x, depth, item ? FD_DATE : FD_UPD, 1, CM_PLAIN, false), FR_FIELD;
        if (ln_is(x, "modified"))
            return cap_begin(x, depth, FD_UPD, 2, CM_PLAIN, false), FR_FIELD;
        if (ln_is(x, "issued") || ln_is(x, "created"))
            return cap_begin(x, depth, FD_PUB, 2, CM_PLAIN, false), FR_FIELD;
        if (ln_is(x, "creator") || ln_is(x, "author"))
            return cap_begin(x, depth, FD_PERSON, 2, CM_PLAIN, false), FR_FIELD;
        if (ln_is(x, "language"))
            return cap_begin(x, depth, FD_LANG, item ? 5 : 4, CM_PLAIN, false), FR_FIELD;
        if (ln_is(x, "subject"))
            return cap_begin(x, depth, FD_CATEGORY, 1, CM_PLAIN, false), FR_FIELD;
        if (item && ln_is(x, "identifier"))
            return cap_begin(x, depth, FD_GUID, 2, CM_PLAIN, false), FR_FIELD;
        break;
    case NS_ITUNES:
        if (ln_is(x, "summary"))
            return cap_begin(x, depth, FD_SUMMARY, 3, CM_HTML, false), FR_FIELD;
        if (ln_is(x, "subtitle"))
            return cap_begin(x, depth, FD_SUMMARY, 2, CM_HTML, false), FR_FIELD;
        if (ln_is(x, "author"))
            return cap_begin(x, depth, FD_PERSON, 1, CM_PLAIN, false), FR_FIELD;
        if (ln_is(x, "keywords"))
            return cap_begin(x, depth, FD_KEYWORDS, 1, CM_PLAIN, false), FR_FIELD;
        if (ln_is(x, "category")) {
            const char *t = xml_attr(x, A_TEXT);
            if (t)
                nf_fp_add_category(x->p, nf_fp_entry(x->p), t, strlen(t), NF_FTEXT_PLAIN);
            return FR_CATEGORY;
        }
        break;
    case NS_MEDIA:
        if (!item)
            break;
        if (ln_is(x, "group"))
            return FR_GROUP;
        if (ln_is(x, "title") || ln_is(x, "description")) {
            int mode = attr_is(x, A_TYPE, "html") ? CM_HTML : CM_PLAIN;
            return cap_begin(x, depth, ln_is(x, "title") ? FD_TITLE : FD_SUMMARY, 1, mode, false),
                   FR_FIELD;
        }
        if (ln_is(x, "keywords"))
            return cap_begin(x, depth, FD_KEYWORDS, 1, CM_PLAIN, false), FR_FIELD;
        if (ln_is(x, "category"))
            return cap_begin(x, depth, FD_CATEGORY, 1, CM_PLAIN, false), FR_FIELD;
        break;
    case NS_FEEDBURNER:
        if (item && ln_is(x, "origLink"))
            return cap_begin(x, depth, FD_LINK, 6, CM_PLAIN, false), FR_FIELD;
        break;
    case NS_XHTML:
        if (item && ln_is(x, "body"))
            return cap_begin(x, depth, FD_BODY, 3, CM_XHTML, false), FR_FIELD;
        break;
    default:
        break;
    }
    return FR_SKIP;
}

/* The root element: which format, or not a feed. */
static void xml_root(xml_ctx_t *x)
{
    nf_fparse_t *p = x->p;
    nf_feed_t *f = p->f;
    const char *v = xml_attr(x, A_VERSION);
    x->root_seen = true;
    snprintf(x->root_name, sizeof x->root_name, "%s", x->ln);
    if (ln_is(x, "rss") || ln_is(x, "channel")) {
        x->fmt = NF_FEED_RSS;
        x->frames[0] = ln_is(x, "rss") ? FR_ROOT : FR_CHANNEL;
        f->version = v ? nf_fp_str(p, v, strlen(v)) : "";
    } else if (ln_is(x, "RDF")) {
        x->fmt = NF_FEED_RDF;
        x->frames[0] = FR_ROOT;
        f->version = x->rss090 ? "0.90" : "1.0";
    } else if (ln_is(x, "feed")) {
        x->fmt = NF_FEED_ATOM;
        x->frames[0] = FR_CHANNEL;
        f->version = x->ns == NS_ATOM03 || (v && !strcmp(v, "0.3")) ? "0.3" : "1.0";
    } else {
        x->not_feed = true;
        x->stop = true; /* sax_start stops the parser */
        return;
    }
    if (!f->version)
        f->version = "";
    f->format = x->fmt;
    if (x->native_uri)
        nf_fp_warn(p, "<%s> in namespace '%.80s', none its format uses: read as %s", x->ln,
                   x->native_uri, nf_feed_format_name(x->fmt));
}

/* ---- SAX2 callbacks ---------------------------------------------------------------------- */

/* An element inside a channel, item, author...: what it is. Returns true to skip its subtree. */
static bool xml_start(xml_ctx_t *x, unsigned depth, int nattrs, const xmlChar **attrs)
{
    nf_fparse_t *p = x->p;
    if (x->capturing) {
        cap_child_start(x, depth);
        return false;
    }
    xml_attrs(x, nattrs, attrs);
    xml_base_push(x, depth);
    if (depth == 0) {
        xml_root(x);
        const char *lang = xml_attr(x, A_LANG);
        if (lang)
            nf_fp_offer(p, &p->feed.language, lang, strlen(lang), 1, NF_FTEXT_PLAIN, false);
        return false;
    }
    int parent = x->frames[depth - 1], kind = FR_SKIP;
    bool item_name = x->fmt == NF_FEED_ATOM ? xml_native(x) && ln_is(x, "entry")
                                            : xml_native(x) && ln_is(x, "item");
    switch (parent) {
    case FR_ROOT:
        if (ln_is(x, "channel") && xml_native(x)) {
            kind = FR_CHANNEL;
            const char *lang = xml_attr(x, A_LANG);
            if (lang)
                nf_fp_offer(p, &p->feed.language, lang, strlen(lang), 1, NF_FTEXT_PLAIN, false);
            break;
        }
        /* RSS 0.90 and RDF keep items beside the channel. */
        __attribute__((fallthrough));
    case FR_CHANNEL:
        if (item_name && !p->in_item) {
            nf_fp_item_begin(p);
            x->had_desc = x->had_summary = false;
            if (p->item_ignored) {
                nf_fp_item_end(p); /* counted as truncated; its content is not read */
                break;
            }
            const char *lang = xml_attr(x, A_LANG), *about = xml_attr(x, A_ABOUT);
            if (lang)
                nf_fp_offer(p, &p->item.language, lang, strlen(lang), 3, NF_FTEXT_PLAIN, false);
            /* RSS 1.0: rdf:about is the item's URI, its id when it has no guid. */
            if (about && x->fmt == NF_FEED_RDF)
                nf_fp_offer(p, &p->item.guid, about, strlen(about), 1, NF_FTEXT_PLAIN, false);
            kind = FR_ITEM;
            break;
        }
        if (parent == FR_CHANNEL)
            kind = xml_classify(x, depth, false);
        break;
    case FR_ITEM:
    case FR_GROUP:
        kind = xml_classify(x, depth, true);
        break;
    case FR_PERSON:
        if (xml_atom(x) && ln_is(x, "name"))
            kind = (cap_begin(x, depth, FD_NAME, 1, CM_PLAIN, false), FR_FIELD);
        else if (xml_atom(x) && ln_is(x, "email"))
            kind = (cap_begin(x, depth, FD_EMAIL, 1, CM_PLAIN, false), FR_FIELD);
        break;
    case FR_CATEGORY:
        if (x->ns == NS_ITUNES && ln_is(x, "category")) {
            const char *t = xml_attr(x, A_TEXT);
            if (t)
                nf_fp_add_category(p, nf_fp_entry(p), t, strlen(t), NF_FTEXT_PLAIN);
            kind = FR_CATEGORY;
        }
        break;
    default:
        break;
    }
    x->frames[depth] = (unsigned char)kind;
    return kind == FR_SKIP;
}

static void sax_start(void *ctx, const xmlChar *localname, const xmlChar *prefix,
                      const xmlChar *uri, int nns, const xmlChar **ns, int nattrs, int ndefaulted,
                      const xmlChar **attrs)
{
    (void)ndefaulted;
    xml_ctx_t *x = ctx;
    unsigned depth = x->depth++;
    if (x->stop)
        return;
    if (depth > x->max_depth || depth + 1 >= XML_MAX_FRAMES) {
        x->too_deep = true; /* skipped subtrees count too: the limit is the document's */
        x->stop = true;
        xmlStopParser(x->ctxt);
        return;
    }
    if (depth > x->skip)
        return;
    for (int i = 0; depth == 0 && i < nns; i++) {
        /* The root's default namespace: one we do not know makes its elements native. */
        const char *dflt = ns[2 * i] ? NULL : (const char *)ns[2 * i + 1];
        if (dflt && ns_from_uri(dflt) == NS_OTHER)
            x->native_uri = dflt;
        else if (dflt && !strcmp(dflt, "http://my.netscape.com/rdf/simple/0.9/"))
            x->rss090 = true;
    }
    xml_name(x, localname, prefix, uri);
    if (xml_start(x, depth, nattrs, attrs))
        x->skip = depth;
    if (x->stop || x->p->nomem) {
        x->stop = true;
        xmlStopParser(x->ctxt);
    }
}

static void sax_end(void *ctx, const xmlChar *localname, const xmlChar *prefix, const xmlChar *uri)
{
    (void)prefix;
    (void)uri;
    xml_ctx_t *x = ctx;
    if (!x->depth)
        return;
    unsigned depth = --x->depth;
    if (x->stop || depth > x->skip)
        return;
    if (depth == x->skip) {
        x->skip = NO_SKIP;
        return;
    }
    switch (x->frames[depth]) {
    case FR_FIELD:
        if (x->capturing && depth == x->cdepth)
            cap_end(x);
        break;
    case FR_INFIELD:
        if (x->capturing)
            cap_child_end(x, localname ? (const char *)localname : "");
        break;
    case FR_PERSON:
        person_end(x);
        break;
    case FR_ITEM:
        nf_fp_item_end(x->p);
        break;
    default:
        break;
    }
    if (x->p->nomem) {
        x->stop = true;
        xmlStopParser(x->ctxt);
    }
}

static void sax_text(void *ctx, const xmlChar *s, int len)
{
    xml_ctx_t *x = ctx;
    if (x->stop || len <= 0 || !x->depth || x->depth - 1 >= x->skip)
        return;
    if (x->capturing) {
        if (x->cfield != FD_CATEGORY || x->depth - 1 == x->cdepth)
            cap_text(x, (const char *)s, (size_t)len); /* a category is its own text only */
    } else if (x->frames[x->depth - 1] == FR_PERSON &&
               !nf_fbuf_add(&x->ptext, (const char *)s, (size_t)len))
        x->p->nomem = true;
}

static void sax_error(void *ctx, xmlErrorPtr e)
{
    xml_ctx_t *x = ctx;
    if (!e || e->level == XML_ERR_NONE)
        return;
    char msg[200];
    snprintf(msg, sizeof msg, "%s", e->message ? e->message : "error");
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        msg[--n] = '\0';
    if (e->code == XML_ERR_INTERNAL_ERROR && strstr(msg, "Excessive depth"))
        x->too_deep = true;
    if (!x->errors++) {
        x->err_line = e->line;
        x->err_col = e->int2;
        snprintf(x->err_msg, sizeof x->err_msg, "%s", msg);
    }
    nf_fp_warn(x->p, "line %d:%d: %s", e->line, e->int2, msg);
}

int nf_feed_xml_read(nf_fparse_t *p, const char *data, size_t len, const char *encoding, bool push,
                     char *err, size_t errlen)
{
    int rc = NF_FEED_OK;
    if (!len) {
        snprintf(err, errlen, "document is empty");
        return NF_FEED_E_MALFORMED;
    }
    if (len > INT32_MAX) {
        snprintf(err, errlen, "document too large for libxml2");
        return NF_FEED_E_TOO_LARGE;
    }
    xml_ctx_t *x = calloc(1, sizeof *x);
    if (!x)
        return NF_FEED_E_NOMEM;
    x->p = p;
    x->max_depth = p->lim->max_depth;
    x->skip = NO_SKIP;
    /* Pushed, the first bytes only go in at creation (libxml2 looks at them for a byte order
     * mark and parses nothing until xmlParseChunk, after our handlers are set). */
    size_t first = len < 4 ? len : 4;
    x->ctxt = push ? xmlCreatePushParserCtxt(NULL, NULL, data, (int)first, NULL)
                   : xmlCreateMemoryParserCtxt(data, (int)len);
    if (!x->ctxt || !x->ctxt->sax) {
        rc = NF_FEED_E_NOMEM;
        goto out;
    }
    xmlCtxtUseOptions(x->ctxt, XML_PARSE_RECOVER | XML_PARSE_NONET | XML_PARSE_NOERROR |
                                   XML_PARSE_NOWARNING | (encoding ? XML_PARSE_IGNORE_ENC : 0));
    /* Our handlers and nothing else: no tree, no DTD, no entities (see the top comment). */
    xmlSAXHandler *h = x->ctxt->sax;
    memset(h, 0, sizeof *h);
    h->initialized = XML_SAX2_MAGIC;
    h->startElementNs = sax_start;
    h->endElementNs = sax_end;
    h->characters = sax_text;
    h->cdataBlock = sax_text;
    h->ignorableWhitespace = sax_text;
    h->serror = sax_error;
    x->ctxt->userData = x;
    if (!push)
        xmlParseDocument(x->ctxt);
    for (size_t off = first; push && off < len && !x->stop;) {
        size_t k = len - off < NF_FEED_XML_CHUNK ? len - off : NF_FEED_XML_CHUNK;
        xmlParseChunk(x->ctxt, data + off, (int)k, 0);
        off += k;
    }
    if (push && !x->stop)
        xmlParseChunk(x->ctxt, NULL, 0, 1);
    p->xml_ill_formed = !x->ctxt->wellFormed;
    if (x->ctxt->myDoc) /* never built by our handlers; defensive */
        xmlFreeDoc(x->ctxt->myDoc);
    x->ctxt->myDoc = NULL;
    if (p->nomem) {
        rc = NF_FEED_E_NOMEM;
        goto out;
    }
    if (p->in_item) /* cut off by the end of the document or a fatal error */
        nf_fp_item_abort(p);
    if (x->too_deep) {
        snprintf(err, errlen, "elements nested deeper than %u levels",
                 x->max_depth < 256 ? x->max_depth : 256);
        rc = NF_FEED_E_TOO_DEEP;
    } else if (x->not_feed) {
        bool html = !strcasecmp(x->root_name, "html");
        snprintf(err, errlen, "root element <%s> is not rss, rdf:RDF or feed%s", x->root_name,
                 html ? ": an HTML page, not a feed" : "");
        rc = NF_FEED_E_NOT_A_FEED;
    } else if (!x->root_seen) {
        if (x->errors)
            snprintf(err, errlen, "not XML: line %d:%d: %s", x->err_line, x->err_col, x->err_msg);
        else
            snprintf(err, errlen, "not XML: no root element");
        rc = NF_FEED_E_MALFORMED;
    }
out:
    if (x->ctxt)
        xmlFreeParserCtxt(x->ctxt);
    nf_fbuf_free(&x->abuf);
    nf_fbuf_free(&x->buf);
    nf_fbuf_free(&x->href);
    nf_fbuf_free(&x->clabel);
    nf_fbuf_free(&x->pname);
    nf_fbuf_free(&x->pemail);
    nf_fbuf_free(&x->ptext);
    free(x);
    return rc;
}
