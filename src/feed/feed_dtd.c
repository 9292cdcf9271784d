/* feed_dtd.c — the internal entities a document declares in its own DOCTYPE, expanded by the
 * repair pass (feed_prep.c) before libxml2 sees the text.
 *
 * Feeds use them for a repeated prefix (<!ENTITY id "tag:example.com,2024:">, then
 * <id>&id;17</id>); a careful reader expects the expansion, as feedparser gives it. libxml2 is
 * never asked to expand anything (feed_xml.c registers no entity handler): the references are
 * replaced here, in the bytes, under limits of our own, so a bomb stays inert:
 *  - only internal general entities (a quoted value) are read; external ones (SYSTEM/PUBLIC)
 *    and parameter entities (%) are never expanded, and nothing is ever loaded;
 *  - an entity's whole expansion (references inside it expanded too, at most
 *    NF_DTD_MAX_LEVELS levels deep; a cycle is refused) is at most NF_DTD_MAX_EXPANSION bytes,
 *    else it is refused — and so is every entity that refers to it: the billion laughs stop
 *    at their fourth level;
 *  - a document inserts at most NF_DTD_MAX_TOTAL bytes and NF_DTD_MAX_REFS references in all;
 *    references past that stay text (the quadratic blow-up);
 *  - the first declaration of a name wins (XML 1.0 §4.2), at most NF_DTD_MAX_ENTITIES are kept.
 * An expansion goes in as text: its quotes become character references (so it cannot end an
 * attribute value early) and its line breaks spaces (so line numbers in warnings stay those of
 * the document); its markup, as in XML, is markup. A refused reference is left to the repair
 * pass, which keeps it as text, and is counted in a warning. */
#include "feed/feed_int.h"

#include <stdlib.h>
#include <string.h>

typedef struct dtd_entity {
    const char *name, *value; /* in the document */
    size_t nlen, vlen;
    bool external;
    unsigned char state;  /* ENT_* */
    unsigned char height; /* ENT_DONE: levels of references inside it (0: none) */
    const char *why;      /* ENT_REFUSED: the reason */
    size_t off, len;      /* expansion in exp */
} dtd_entity_t;

enum { ENT_NEW, ENT_BUSY, ENT_DONE, ENT_REFUSED };

struct nf_fdtd {
    dtd_entity_t ents[NF_DTD_MAX_ENTITIES];
    unsigned n;
    size_t subset_start, subset_end; /* [start, end): the internal subset, in document offsets */
    nf_fbuf_t exp;                   /* every expansion, one after another */
    size_t total;                    /* bytes inserted into the document */
    unsigned refs;                   /* references replaced */
};

static bool dtd_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool dtd_name_start(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || c == ':' || c >= 0x80;
}

static bool dtd_name_char(unsigned char c)
{
    return dtd_name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

size_t nf_fdtd_name(const char *s, size_t n)
{
    if (!n || !dtd_name_start((unsigned char)s[0]))
        return 0;
    size_t i = 1;
    while (i < n && dtd_name_char((unsigned char)s[i]))
        i++;
    return i < n && s[i] == ';' ? i : 0;
}

/* Offset just past the first `close` at or after i, skipping quoted literals when quoted is
 * set; n if none. */
static size_t dtd_past(const char *s, size_t n, size_t i, const char *close, bool quoted)
{
    size_t cl = strlen(close);
    while (i < n) {
        if (quoted && (s[i] == '"' || s[i] == '\'')) {
            const char *q = memchr(s + i + 1, s[i], n - i - 1);
            i = q ? (size_t)(q - s) + 1 : n;
            continue;
        }
        if (n - i >= cl && !memcmp(s + i, close, cl))
            return i + cl;
        i++;
    }
    return n;
}

static size_t dtd_skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n && dtd_ws(s[i]))
        i++;
    return i;
}

/* <!ENTITY at i (past the keyword): records a general entity; returns the offset past '>'. */
static size_t dtd_entity(nf_fdtd_t *d, const char *s, size_t n, size_t i)
{
    size_t end = dtd_past(s, n, i, ">", true);
    i = dtd_skip_ws(s, n, i);
    if (i < n && s[i] == '%')
        return end; /* a parameter entity: never used */
    size_t nl = 0;
    while (i + nl < end && dtd_name_char((unsigned char)s[i + nl]))
        nl++;
    if (!nl || !dtd_name_start((unsigned char)s[i]))
        return end;
    dtd_entity_t e = {.name = s + i, .nlen = nl};
    i = dtd_skip_ws(s, n, i + nl);
    if (i < end && (s[i] == '"' || s[i] == '\'')) {
        const char *q = memchr(s + i + 1, s[i], end - i - 1);
        if (!q)
            return end;
        e.value = s + i + 1;
        e.vlen = (size_t)(q - e.value);
    } else {
        e.external = true; /* SYSTEM or PUBLIC */
    }
    for (unsigned k = 0; k < d->n; k++)
        if (d->ents[k].nlen == nl && !memcmp(d->ents[k].name, e.name, nl))
            return end; /* the first declaration wins */
    if (d->n < NF_DTD_MAX_ENTITIES)
        d->ents[d->n++] = e;
    return end;
}

/* The internal subset of a DOCTYPE at i (past "<!DOCTYPE"). */
static void dtd_doctype(nf_fdtd_t *d, const char *s, size_t n, size_t i)
{
    /* The name and external id, up to '[' or '>' outside quotes. */
    while (i < n && s[i] != '[' && s[i] != '>') {
        if (s[i] == '"' || s[i] == '\'') {
            const char *q = memchr(s + i + 1, s[i], n - i - 1);
            i = q ? (size_t)(q - s) + 1 : n;
        } else {
            i++;
        }
    }
    if (i >= n || s[i] != '[')
        return;
    d->subset_start = ++i;
    while (i < n && s[i] != ']') {
        if (s[i] == '<' && n - i >= 4 && !memcmp(s + i, "<!--", 4))
            i = dtd_past(s, n, i + 4, "-->", false);
        else if (s[i] == '<' && n - i >= 2 && s[i + 1] == '?')
            i = dtd_past(s, n, i + 2, "?>", false);
        else if (s[i] == '<' && n - i >= 8 && !memcmp(s + i, "<!ENTITY", 8))
            i = dtd_entity(d, s, n, i + 8);
        else if (s[i] == '<' && n - i >= 2 && s[i + 1] == '!')
            i = dtd_past(s, n, i + 2, ">", true);
        else
            i++; /* whitespace, a %reference;, or junk */
    }
    d->subset_end = i;
}

int nf_fdtd_read(const char *s, size_t n, nf_fdtd_t **out)
{
    *out = NULL;
    size_t i = 0;
    /* The prolog: declarations, processing instructions, comments, whitespace. */
    for (;;) {
        i = dtd_skip_ws(s, n, i);
        if (n - i >= 2 && s[i] == '<' && s[i + 1] == '?')
            i = dtd_past(s, n, i + 2, "?>", false);
        else if (n - i >= 4 && !memcmp(s + i, "<!--", 4))
            i = dtd_past(s, n, i + 4, "-->", false);
        else
            break;
    }
    if (n - i < 9 || memcmp(s + i, "<!DOCTYPE", 9) != 0)
        return NF_FEED_OK;
    nf_fdtd_t *d = calloc(1, sizeof *d);
    if (!d)
        return NF_FEED_E_NOMEM;
    dtd_doctype(d, s, n, i + 9);
    *out = d;
    return NF_FEED_OK;
}

bool nf_fdtd_in_subset(const nf_fdtd_t *d, size_t off)
{
    return d && off >= d->subset_start && off < d->subset_end;
}

static dtd_entity_t *dtd_find(nf_fdtd_t *d, const char *name, size_t nl)
{
    for (unsigned k = 0; k < d->n; k++)
        if (d->ents[k].nlen == nl && !memcmp(d->ents[k].name, name, nl))
            return &d->ents[k];
    return NULL;
}

/* Appends part of a value as the text it becomes in the document (see the top comment); an '&'
 * that starts no reference XML resolves by itself becomes "&amp;", as the repair pass does. */
static bool dtd_put(nf_fbuf_t *b, const char *s, size_t n)
{
    size_t run = 0, named = 0;
    for (size_t i = 0; i < n; i++) {
        const char *rep = s[i] == '"'                                                  ? "&#34;"
                          : s[i] == '\''                                               ? "&#39;"
                          : s[i] == '\n' || s[i] == '\r'                               ? " "
                          : s[i] == '&' && !nf_fp_ref_ok(s + i + 1, n - i - 1, &named) ? "&amp;"
                                                                                       : NULL;
        if (!rep)
            continue;
        if (!nf_fbuf_add(b, s + run, i - run) || !nf_fbuf_add(b, rep, strlen(rep)))
            return false;
        run = i + 1;
    }
    return nf_fbuf_add(b, s + run, n - run);
}

/* Computes e's expansion into d->exp once. Returns ENT_DONE, ENT_REFUSED (with *why), or -1
 * when out of memory. The recursion is at most NF_DTD_MAX_ENTITIES deep (a cycle stops at
 * ENT_BUSY). */
static int dtd_expand(nf_fdtd_t *d, dtd_entity_t *e, const char **why)
{
    if (e->state == ENT_DONE)
        return ENT_DONE;
    if (e->external) {
        *why = "an external entity (SYSTEM/PUBLIC), never loaded";
        return ENT_REFUSED;
    }
    if (e->state == ENT_REFUSED) {
        *why = e->why;
        return ENT_REFUSED;
    }
    if (e->state == ENT_BUSY) {
        *why = "it refers to itself";
        return ENT_REFUSED;
    }
    e->state = ENT_BUSY;
    nf_fbuf_t t = {0};
    const char *v = e->value;
    size_t n = e->vlen, run = 0;
    unsigned height = 0;
    int rc = ENT_DONE;
    for (size_t i = 0; i < n && rc == ENT_DONE; i++) {
        if (v[i] != '&')
            continue;
        size_t nl = nf_fdtd_name(v + i + 1, n - i - 1);
        dtd_entity_t *c = nl ? dtd_find(d, v + i + 1, nl) : NULL;
        if (!c)
            continue; /* a character or predefined reference, or text: the repair pass decides */
        if (!dtd_put(&t, v + run, i - run)) {
            rc = -1;
            break;
        }
        rc = dtd_expand(d, c, why);
        if (rc == ENT_DONE && c->height + 1u > height)
            height = c->height + 1u;
        if (rc == ENT_DONE && height > NF_DTD_MAX_LEVELS) {
            *why = "its references nest deeper than " NF_STR(NF_DTD_MAX_LEVELS) " levels";
            rc = ENT_REFUSED;
        }
        if (rc == ENT_DONE && !nf_fbuf_add(&t, d->exp.p + c->off, c->len))
            rc = -1;
        if (rc == ENT_DONE && t.len > NF_DTD_MAX_EXPANSION) {
            *why = "it expands to more than " NF_STR(NF_DTD_MAX_EXPANSION) " bytes";
            rc = ENT_REFUSED;
        }
        i += nl + 1;
        run = i + 1;
    }
    if (rc == ENT_DONE && !dtd_put(&t, v + run, n - run))
        rc = -1;
    if (rc == ENT_DONE && t.len > NF_DTD_MAX_EXPANSION) {
        *why = "it expands to more than " NF_STR(NF_DTD_MAX_EXPANSION) " bytes";
        rc = ENT_REFUSED;
    }
    if (rc == ENT_DONE) {
        e->off = d->exp.len;
        e->len = t.len;
        e->height = (unsigned char)height;
        if (!nf_fbuf_add(&d->exp, t.p ? t.p : "", t.len))
            rc = -1;
    }
    nf_fbuf_free(&t);
    e->state = rc == ENT_DONE ? ENT_DONE : rc == ENT_REFUSED ? ENT_REFUSED : ENT_NEW;
    e->why = rc == ENT_REFUSED ? *why : NULL;
    return rc;
}

int nf_fdtd_expand(nf_fdtd_t *d, const char *name, size_t nl, nf_fbuf_t *out, const char **why)
{
    dtd_entity_t *e = d ? dtd_find(d, name, nl) : NULL;
    if (!e) {
        *why = NULL; /* not declared here */
        return 0;
    }
    int rc = dtd_expand(d, e, why);
    if (rc < 0)
        return -1;
    if (rc == ENT_REFUSED)
        return 0;
    if (d->refs >= NF_DTD_MAX_REFS || d->total + e->len > NF_DTD_MAX_TOTAL) {
        *why = "the document's expansion budget (" NF_STR(NF_DTD_MAX_TOTAL) " bytes, " NF_STR(
            NF_DTD_MAX_REFS) " references) is spent";
        return 0;
    }
    if (!nf_fbuf_add(out, d->exp.p + e->off, e->len))
        return -1;
    d->refs++;
    d->total += e->len;
    return 1;
}

void nf_fdtd_free(nf_fdtd_t *d)
{
    if (!d)
        return;
    nf_fbuf_free(&d->exp);
    free(d);
}
