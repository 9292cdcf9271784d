/* opml.c — OPML subscription lists (opml.h): a SAX reader over libxml2 and a writer. */
#include "feed/opml.h"

#include <errno.h>
#include <libxml/parser.h>
#include <libxml/parserInternals.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    xmlParserCtxtPtr ctxt;
    nf_opml_t *o;
    unsigned depth;    /* elements open */
    unsigned outlines; /* of them, <outline>s */
    bool root_seen, in_head, in_head_title, title_full, stop;
    char *path[NF_OPML_MAX_DEPTH + 1]; /* the open outlines' names (categories), NULL for feeds */
    char err[256];
} opml_ctx_t;

static void fail(opml_ctx_t *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fail(opml_ctx_t *x, const char *fmt, ...)
{
    if (x->stop)
        return;
    x->stop = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->err, sizeof x->err, fmt, ap);
    va_end(ap);
    xmlStopParser(x->ctxt);
}

/* An attribute value as a string, '&' restored: without XML_PARSE_NOENT libxml2 hands each '&'
 * of a value over as "&#38;" (feed_xml.c does the same). Whole: fields are cut afterwards. */
static char *attr_dup(const xmlChar *v, const xmlChar *end)
{
    size_t n = (size_t)(end - v);
    char *s = malloc(n + 1), *o = s;
    if (!s)
        return NULL;
    for (size_t i = 0; i < n;) {
        if (i + 5 <= n && !memcmp(v + i, "&#38;", 5)) {
            *o++ = '&';
            i += 5;
        } else {
            *o++ = (char)v[i++];
        }
    }
    *o = '\0';
    return s;
}

/* s cut to at most max bytes, at a character boundary (never inside a UTF-8 sequence). */
static void cut_utf8(char *s, size_t max)
{
    size_t n = strlen(s);
    if (n <= max)
        return;
    while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
        max--;
    s[max] = '\0';
}

typedef struct {
    char *url, *text, *title, *interval, *status, *id;
} outline_t;

static void outline_free(outline_t *a)
{
    free(a->url);
    free(a->text);
    free(a->title);
    free(a->interval);
    free(a->status);
    free(a->id);
}

/* The attributes written on the element: nattrs - ndefaulted of them (the rest are defaults a
 * DTD's <!ATTLIST> declared, which libxml2 adds whatever the handlers; they are not the
 * document's: a DTD must not turn a category into a feed). */
static bool outline_attrs(const xmlChar **attrs, int nattrs, outline_t *a)
{
    for (int i = 0; i < nattrs; i++) {
        const xmlChar **at = attrs + 5 * i; /* localname, prefix, URI, value, end */
        const char *name = (const char *)at[0], *uri = (const char *)at[2];
        char **dst = NULL;
        if (!uri && !strcmp(name, "xmlUrl"))
            dst = &a->url;
        else if (!uri && !strcmp(name, "text"))
            dst = &a->text;
        else if (!uri && !strcmp(name, "title"))
            dst = &a->title;
        else if (uri && !strcmp(uri, NF_OPML_NS) && !strcmp(name, "interval"))
            dst = &a->interval;
        else if (uri && !strcmp(uri, NF_OPML_NS) && !strcmp(name, "status"))
            dst = &a->status;
        else if (uri && !strcmp(uri, NF_OPML_NS) && !strcmp(name, "id"))
            dst = &a->id;
        if (dst && !*dst && !(*dst = attr_dup(at[3], at[4])))
            return false;
    }
    return true;
}

/* The enclosing categories joined by '/', cut at NF_OPML_MAX_CATEGORY bytes (a character
 * boundary): 100,000 feeds under 64 levels of long names would otherwise each hold a copy of
 * 64 x 512 bytes. */
static char *category_of(const opml_ctx_t *x)
{
    size_t n = 1;
    for (unsigned i = 0; i < x->outlines; i++)
        n += x->path[i] ? strlen(x->path[i]) + 1 : 0;
    char *s = malloc(n), *o = s;
    if (!s)
        return NULL;
    for (unsigned i = 0; i < x->outlines; i++) {
        if (!x->path[i])
            continue;
        if (o != s)
            *o++ = '/';
        size_t k = strlen(x->path[i]);
        memcpy(o, x->path[i], k);
        o += k;
    }
    *o = '\0';
    cut_utf8(s, NF_OPML_MAX_CATEGORY);
    return s;
}

static int add_feed(opml_ctx_t *x, outline_t *a)
{
    int line = xmlSAX2GetLineNumber(x->ctxt);
    nf_opml_t *o = x->o;
    if (o->n == NF_OPML_MAX_FEEDS) {
        fail(x, "line %d: more than %u feeds", line, NF_OPML_MAX_FEEDS);
        return 0;
    }
    uint32_t interval = 0;
    if (a->interval) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(a->interval, &end, 10);
        if (!a->interval[0] || *end || errno || v > 31536000ul || a->interval[0] == '-') {
            fail(x, "line %d: newsflow:interval \"%.64s\" is not a number of seconds (0..31536000)",
                 line, a->interval);
            return 0;
        }
        interval = (uint32_t)v;
    }
    const char *status = "active";
    if (a->status && (!strcmp(a->status, "paused") || !strcmp(a->status, "dead")))
        status = !strcmp(a->status, "paused") ? "paused" : "dead";
    else if (a->status && strcmp(a->status, "active") != 0) {
        fail(x, "line %d: newsflow:status \"%.64s\" is not active, paused or dead", line,
             a->status);
        return 0;
    }
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        nf_opml_feed_t *f = realloc(o->feeds, cap * sizeof *f);
        if (!f)
            return -1;
        o->feeds = f;
        o->cap = cap;
    }
    /* The strings the feed keeps: taken from the outline's (which then forgets them) or new. */
    char *title = a->text ? a->text : a->title ? a->title : strdup("");
    char *id = a->id ? a->id : strdup("");
    char *category = category_of(x);
    if (!title || !id || !category) {
        free(category);
        if (title != a->text && title != a->title)
            free(title);
        if (id != a->id)
            free(id);
        return -1;
    }
    if (title == a->text)
        a->text = NULL;
    else if (title == a->title)
        a->title = NULL;
    a->id = NULL;
    cut_utf8(id, NF_OPML_MAX_TITLE);
    o->feeds[o->n++] = (nf_opml_feed_t){.url = a->url,
                                        .id = id,
                                        .title = title,
                                        .category = category,
                                        .interval_s = interval,
                                        .status = status,
                                        .line = line};
    a->url = NULL;
    return 0;
}

static void sax_start(void *ctx, const xmlChar *local, const xmlChar *prefix, const xmlChar *uri,
                      int nns, const xmlChar **ns, int nattrs, int ndefaulted,
                      const xmlChar **attrs)
{
    opml_ctx_t *x = ctx;
    (void)prefix;
    (void)uri;
    (void)nns;
    (void)ns;
    if (x->stop)
        return;
    const char *name = (const char *)local;
    if (!x->root_seen) {
        x->root_seen = true;
        if (strcmp(name, "opml") != 0) {
            fail(x, "root element <%.64s> is not opml%s", name,
                 !strcasecmp(name, "html") ? ": an HTML page, not an OPML file" : "");
            return;
        }
    }
    x->depth++;
    if (x->depth == 2)
        x->in_head = !strcmp(name, "head");
    x->in_head_title = x->depth == 3 && x->in_head && !strcmp(name, "title");
    if (strcmp(name, "outline") != 0)
        return;
    if (x->outlines == NF_OPML_MAX_DEPTH) {
        fail(x, "line %d: outlines nested deeper than %u levels", xmlSAX2GetLineNumber(x->ctxt),
             NF_OPML_MAX_DEPTH);
        return;
    }
    outline_t a = {0};
    bool ok = outline_attrs(attrs, nattrs - ndefaulted, &a);
    char *cat = NULL;
    if (a.text)
        cut_utf8(a.text, NF_OPML_MAX_TITLE);
    if (a.title)
        cut_utf8(a.title, NF_OPML_MAX_TITLE);
    if (ok && a.url) {
        if (!a.url[0])
            fail(x, "line %d: an outline with an empty xmlUrl", xmlSAX2GetLineNumber(x->ctxt));
        else if (strlen(a.url) > NF_OPML_MAX_VALUE)
            fail(x, "line %d: an xmlUrl of %zu bytes, more than %u", xmlSAX2GetLineNumber(x->ctxt),
                 strlen(a.url), NF_OPML_MAX_VALUE);
        else
            ok = add_feed(x, &a) == 0;
    } else if (ok) {
        const char *n = a.text ? a.text : a.title;
        ok = !n || !n[0] || (cat = strdup(n)) != NULL;
    }
    outline_free(&a);
    if (!ok)
        fail(x, "out of memory");
    x->path[x->outlines++] = cat;
}

static void sax_end(void *ctx, const xmlChar *local, const xmlChar *prefix, const xmlChar *uri)
{
    opml_ctx_t *x = ctx;
    (void)prefix;
    (void)uri;
    x->in_head_title = false;
    if (x->depth)
        x->depth--;
    if (!strcmp((const char *)local, "outline") && x->outlines) {
        x->outlines--;
        free(x->path[x->outlines]);
        x->path[x->outlines] = NULL;
    }
}

static void sax_text(void *ctx, const xmlChar *s, int n)
{
    opml_ctx_t *x = ctx;
    if (!x->in_head_title || x->stop || x->title_full)
        return;
    size_t have = strlen(x->o->title);
    if (have + (size_t)n > NF_OPML_MAX_TITLE) { /* cut there: later pieces would garble it */
        x->title_full = true;
        return;
    }
    char *t = realloc(x->o->title, have + (size_t)n + 1);
    if (!t) {
        fail(x, "out of memory");
        return;
    }
    memcpy(t + have, s, (size_t)n);
    t[have + (size_t)n] = '\0';
    x->o->title = t;
}

static void sax_error(void *ctx, xmlErrorPtr e)
{
    opml_ctx_t *x = ctx;
    if (e && e->level >= XML_ERR_FATAL) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s", e->message ? e->message : "malformed");
        msg[strcspn(msg, "\n")] = '\0';
        fail(x, "not well-formed XML: line %d:%d: %s", e->line, e->int2, msg);
    }
}

void nf_opml_free(nf_opml_t *o)
{
    for (size_t i = 0; o && i < o->n; i++) {
        free(o->feeds[i].url);
        free(o->feeds[i].id);
        free(o->feeds[i].title);
        free(o->feeds[i].category);
    }
    if (o) {
        free(o->feeds);
        free(o->title);
        memset(o, 0, sizeof *o);
    }
}

int nf_opml_parse(const char *data, size_t len, nf_opml_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (len > NF_OPML_MAX_BYTES) {
        snprintf(err, errlen, "%zu bytes, more than the %u an OPML file may have", len,
                 NF_OPML_MAX_BYTES);
        return -1;
    }
    if (len == 0) {
        snprintf(err, errlen, "not XML: the file is empty");
        return -1;
    }
    opml_ctx_t x = {.o = out};
    if (!(out->title = strdup("")) || !(x.ctxt = xmlCreateMemoryParserCtxt(data, (int)len))) {
        free(out->title);
        out->title = NULL;
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    xmlCtxtUseOptions(x.ctxt, XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    /* Our handlers and nothing else: no tree, no DTD, no entities (opml.h). */
    xmlSAXHandler *h = x.ctxt->sax;
    memset(h, 0, sizeof *h);
    h->initialized = XML_SAX2_MAGIC;
    h->startElementNs = sax_start;
    h->endElementNs = sax_end;
    h->characters = sax_text;
    h->serror = sax_error;
    x.ctxt->userData = &x;
    xmlParseDocument(x.ctxt);
    if (!x.stop && !x.ctxt->wellFormed)
        fail(&x, "not well-formed XML");
    if (!x.stop && !x.root_seen)
        fail(&x, "not XML: no root element");
    if (x.ctxt->myDoc) /* libxml2's SAX1 compatibility builds one for <!ENTITY>s: freed */
        xmlFreeDoc(x.ctxt->myDoc);
    x.ctxt->myDoc = NULL;
    xmlFreeParserCtxt(x.ctxt);
    for (unsigned i = 0; i < x.outlines; i++)
        free(x.path[i]);
    if (x.stop) {
        snprintf(err, errlen, "%s", x.err);
        nf_opml_free(out);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- writing */

/* s as XML character data or an attribute value: escaped, XML 1.0's forbidden controls
 * dropped, invalid UTF-8 as U+FFFD. At most max bytes of s (0: all). */
static void put_text(FILE *f, const char *s, size_t max)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + strlen(s);
    if (max && (size_t)(end - p) > max)
        end = p + max;
    while (p < end) {
        unsigned c = *p;
        if (c < 0x80) {
            if (c == '&')
                fputs("&amp;", f);
            else if (c == '<')
                fputs("&lt;", f);
            else if (c == '>')
                fputs("&gt;", f);
            else if (c == '"')
                fputs("&quot;", f);
            else if (c == '\t' || c == '\n' || c == '\r')
                fprintf(f, "&#%u;", c);
            else if (c >= 0x20 && c != 0x7f)
                fputc((int)c, f);
            p++;
            continue;
        }
        size_t n = c >= 0xf0 && c <= 0xf4   ? 4
                   : c >= 0xe0 && c <= 0xef ? 3
                   : c >= 0xc2 && c <= 0xdf ? 2
                                            : 0;
        bool ok = n && (size_t)(end - p) >= n;
        for (size_t i = 1; ok && i < n; i++)
            ok = (p[i] & 0xc0) == 0x80;
        if (ok && n == 3) /* no overlong form, no surrogate */
            ok = !(c == 0xe0 && p[1] < 0xa0) && !(c == 0xed && p[1] >= 0xa0);
        if (ok && n == 4)
            ok = !(c == 0xf0 && p[1] < 0x90) && !(c == 0xf4 && p[1] >= 0x90);
        if (ok && n == 3 && c == 0xef && p[1] == 0xbf && p[2] >= 0xbe)
            ok = false; /* U+FFFE, U+FFFF: not XML characters */
        if (ok) {
            fwrite(p, 1, n, f);
            p += n;
        } else {
            fputs("\xef\xbf\xbd", f);
            p++;
        }
    }
}

static int by_category(const void *a, const void *b)
{
    const nf_opml_feed_t *x = *(const nf_opml_feed_t *const *)a;
    const nf_opml_feed_t *y = *(const nf_opml_feed_t *const *)b;
    int c = strcmp(x->category ? x->category : "", y->category ? y->category : "");
    return c ? c : x < y ? -1 : x > y;
}

/* Components of path (split at '/', empty ones skipped) into comp (at most max); their count. */
static unsigned split_path(const char *path, const char **comp, size_t *len, unsigned max)
{
    unsigned n = 0;
    for (const char *p = path; *p && n < max;) {
        size_t k = strcspn(p, "/");
        if (k) {
            comp[n] = p;
            len[n++] = k;
        }
        p += k + (p[k] == '/');
    }
    return n;
}

static void indent(FILE *f, unsigned depth)
{
    for (unsigned i = 0; i < depth + 2; i++)
        fputs("  ", f);
}

static void put_feed(FILE *f, const nf_opml_feed_t *e, unsigned depth)
{
    indent(f, depth);
    fputs("<outline type=\"rss\" text=\"", f);
    put_text(f, e->title ? e->title : "", 0);
    fputs("\" xmlUrl=\"", f);
    put_text(f, e->url, 0);
    fputc('"', f);
    if (e->id && e->id[0]) {
        fputs(" newsflow:id=\"", f);
        put_text(f, e->id, 0);
        fputc('"', f);
    }
    if (e->interval_s)
        fprintf(f, " newsflow:interval=\"%u\"", e->interval_s);
    if (e->status && strcmp(e->status, "active") != 0) {
        fputs(" newsflow:status=\"", f);
        put_text(f, e->status, 0);
        fputc('"', f);
    }
    fputs("/>\n", f);
}

int nf_opml_write(FILE *f, const char *title, const nf_opml_feed_t *feeds, size_t n)
{
    const nf_opml_feed_t **order = malloc((n ? n : 1) * sizeof *order);
    if (!order) {
        errno = ENOMEM;
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        order[i] = &feeds[i];
    qsort(order, n, sizeof *order, by_category);
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<opml version=\"2.0\" xmlns:newsflow=\"" NF_OPML_NS "\">\n  <head>\n    <title>",
          f);
    put_text(f, title ? title : "", NF_OPML_MAX_TITLE);
    fputs("</title>\n  </head>\n  <body>\n", f);
    const char *open[NF_OPML_MAX_DEPTH];
    size_t open_len[NF_OPML_MAX_DEPTH];
    unsigned nopen = 0;
    for (size_t i = 0; i < n; i++) {
        const char *comp[NF_OPML_MAX_DEPTH - 1];
        size_t len[NF_OPML_MAX_DEPTH - 1];
        unsigned nc = split_path(order[i]->category ? order[i]->category : "", comp, len,
                                 NF_OPML_MAX_DEPTH - 1);
        unsigned same = 0;
        while (same < nc && same < nopen && len[same] == open_len[same] &&
               !memcmp(comp[same], open[same], len[same]))
            same++;
        while (nopen > same) {
            indent(f, --nopen);
            fputs("</outline>\n", f);
        }
        for (; nopen < nc; nopen++) {
            char name[NF_OPML_MAX_VALUE + 1];
            snprintf(name, sizeof name, "%.*s", (int)len[nopen], comp[nopen]);
            indent(f, nopen);
            fputs("<outline text=\"", f);
            put_text(f, name, 0);
            fputs("\">\n", f);
            open[nopen] = comp[nopen];
            open_len[nopen] = len[nopen];
        }
        put_feed(f, order[i], nopen);
    }
    while (nopen > 0) {
        indent(f, --nopen);
        fputs("</outline>\n", f);
    }
    fputs("  </body>\n</opml>\n", f);
    free(order);
    return ferror(f) ? -1 : 0;
}
