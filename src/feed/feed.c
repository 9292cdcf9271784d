/* feed.c — nf_feed_parse(): limits, the repair pass, format dispatch, and the one place where
 * raw item fields become an article (feed.h).
 *
 * The XML and JSON readers only say where a format keeps a value and how much they trust it
 * (priorities, feed_int.h). Everything an article is — which candidate wins, HTML to plain
 * text, caps, date fallback, link resolution and normalization, article_id, content_hash — is
 * decided here, once, so RSS, Atom and JSON Feed items cannot drift apart. Raw values live in
 * scratch buffers reused from item to item; only final strings go to the feed's arena, and
 * text is converted straight into arena space reserved at its upper bound and then shrunk. */
#include "feed/feed.h"

#include "algo/sha256.h"
#include "feed/dates.h"
#include "feed/feed_int.h"
#include "feed/text.h"
#include "feed/url.h"

#include <ctype.h>
#include <libxml/parser.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void nf_feed_limits_default(nf_feed_limits_t *l)
{
    l->max_bytes = 16u << 20;
    l->max_depth = 256;
    l->max_items = 10000;
    l->max_title = 1024;
    l->max_summary = 4096;
    l->max_body = 64 * 1024;
    l->max_field = 4096;
    l->max_list = 64;
    l->xml_mode = NF_FEED_XML_AUTO;
}

const char *nf_feed_format_name(nf_feed_format_t f)
{
    switch (f) {
    case NF_FEED_RSS:
        return "rss";
    case NF_FEED_RDF:
        return "rdf";
    case NF_FEED_ATOM:
        return "atom";
    case NF_FEED_JSON:
        return "json";
    default:
        return "unknown";
    }
}

const char *nf_feed_strerror(int err)
{
    switch (err) {
    case NF_FEED_OK:
        return "ok";
    case NF_FEED_E_TOO_LARGE:
        return "document too large";
    case NF_FEED_E_NOT_A_FEED:
        return "not a feed";
    case NF_FEED_E_MALFORMED:
        return "malformed document";
    case NF_FEED_E_TOO_DEEP:
        return "document nested too deeply";
    case NF_FEED_E_NOMEM:
        return "out of memory";
    default:
        return "unknown error";
    }
}

/* An external entity or DTD is never fetched, whatever the options say (XML_PARSE_NONET only
 * covers the network, not file:// or local paths). */
static xmlParserInputPtr feed_no_entities(const char *url, const char *id, xmlParserCtxtPtr ctxt)
{
    (void)url;
    (void)id;
    (void)ctxt;
    return NULL;
}

static void feed_init_once(void)
{
    xmlInitParser();
    xmlSetExternalEntityLoader(feed_no_entities);
}

void nf_feed_global_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, feed_init_once);
}

/* ---- scratch buffers -------------------------------------------------------------------- */

bool nf_fbuf_add(nf_fbuf_t *b, const char *s, size_t n)
{
    if (b->cap - b->len <= n) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len <= n) {
            if (cap > SIZE_MAX / 2)
                return false;
            cap *= 2;
        }
        char *q = realloc(b->p, cap);
        if (!q)
            return false;
        b->p = q;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return true;
}

void nf_fbuf_free(nf_fbuf_t *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

static bool feed_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static void feed_trim(const char **s, size_t *n)
{
    while (*n && feed_space(**s)) {
        (*s)++;
        (*n)--;
    }
    while (*n && feed_space((*s)[*n - 1]))
        (*n)--;
}

/* ---- warnings, entries ------------------------------------------------------------------ */

void nf_fp_warn(nf_fparse_t *p, const char *fmt, ...)
{
    if (!p->warnings++) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->first_warning, sizeof p->first_warning, fmt, ap);
        va_end(ap);
    }
}

static void entry_reset(nf_fentry_t *e)
{
    nf_fslot_t *slots[] = {&e->title,     &e->summary, &e->body,     &e->link,     &e->guid,
                           &e->published, &e->updated, &e->language, &e->feed_link};
    for (size_t i = 0; i < sizeof slots / sizeof *slots; i++) {
        slots[i]->prio = 0;
        slots[i]->v.len = 0;
    }
    e->guid_not_permalink = false;
    e->author_prio = 0;
    e->nauthors = e->ncategories = e->nlinks = e->ntags = 0;
}

static void entry_free(nf_fentry_t *e)
{
    nf_fslot_t *slots[] = {&e->title,     &e->summary, &e->body,     &e->link,     &e->guid,
                           &e->published, &e->updated, &e->language, &e->feed_link};
    for (size_t i = 0; i < sizeof slots / sizeof *slots; i++)
        nf_fbuf_free(&slots[i]->v);
    free(e->authors);
    free(e->categories);
    free(e->tags);
    free(e->links);
}

nf_fentry_t *nf_fp_entry(nf_fparse_t *p)
{
    return p->in_item ? &p->item : &p->feed;
}

void nf_fp_offer_buf(nf_fparse_t *p, nf_fslot_t *s, nf_fbuf_t *b, int prio, nf_ftext_t kind,
                     bool last_wins)
{
    (void)p;
    const char *v = b->p;
    size_t n = b->len;
    feed_trim(&v, &n);
    if (!n || s->prio > prio || (s->prio == prio && !last_wins))
        return;
    nf_fbuf_t t = s->v;
    s->v = *b;
    *b = t;
    b->len = 0;
    if (b->p)
        b->p[0] = '\0';
    s->prio = prio;
    s->kind = kind;
}

void nf_fp_offer(nf_fparse_t *p, nf_fslot_t *s, const char *v, size_t n, int prio, nf_ftext_t kind,
                 bool last_wins)
{
    const char *t = v;
    size_t tn = n;
    feed_trim(&t, &tn);
    if (!tn || s->prio > prio || (s->prio == prio && !last_wins))
        return;
    s->v.len = 0;
    if (!nf_fbuf_add(&s->v, t, tn)) {
        p->nomem = true;
        return;
    }
    s->prio = prio;
    s->kind = kind;
}

/* ---- strings into the arena ------------------------------------------------------------- */

/* Plain text of raw (kind), at most max bytes, in the arena. "" when raw is empty. */
static const char *feed_text(nf_fparse_t *p, const char *raw, size_t n, nf_ftext_t kind, size_t max)
{
    /* Decoding can triple a byte (an invalid one becomes U+FFFD), never more. */
    size_t room = n < (SIZE_MAX - 1) / 3 ? 3 * n + 1 : SIZE_MAX;
    if (room > max + 1)
        room = max + 1;
    char *out = nf_arena_alloc_str(p->a, room);
    if (!out) {
        p->nomem = true;
        return "";
    }
    size_t len = kind == NF_FTEXT_HTML ? nf_text_from_html(raw, n, out, room)
                                       : nf_text_plain(raw, n, out, room);
    nf_arena_shrink(p->a, out, len + 1);
    return out;
}

const char *nf_fp_str(nf_fparse_t *p, const char *s, size_t n)
{
    size_t max = p->lim->max_field;
    feed_trim(&s, &n);
    if (n > max) {
        n = max;
        while (n && ((unsigned char)s[n] & 0xC0) == 0x80) /* cut on a code point boundary */
            n--;
    }
    /* Repair can triple a byte (an invalid one becomes U+FFFD). */
    size_t room = n < max / 3 ? 3 * n + 1 : max + 1;
    char *out = nf_arena_alloc_str(p->a, room);
    if (!out) {
        p->nomem = true;
        return NULL;
    }
    size_t len = nf_utf8_sanitize(s, n, out, room);
    nf_arena_shrink(p->a, out, len + 1);
    return out;
}

static const char *slot_str(nf_fparse_t *p, const nf_fslot_t *s)
{
    return s->prio ? nf_fp_str(p, s->v.p, s->v.len) : NULL;
}

/* A language tag as BCP 47 writes it: "en_US" (a POSIX locale) is "en-US". */
static const char *slot_lang(nf_fparse_t *p, const nf_fslot_t *s)
{
    char *l = (char *)slot_str(p, s);
    for (char *c = l; c && *c; c++)
        if (*c == '_')
            *c = '-';
    return l;
}

static bool feed_is_http(const char *s)
{
    return s && (!strncasecmp(s, "http://", 7) || !strncasecmp(s, "https://", 8));
}

const char *nf_fp_default_base(nf_fparse_t *p)
{
    if (p->feed_url && *p->feed_url)
        return p->feed_url;
    if (p->feed.link.prio && feed_is_http(p->feed.link.v.p))
        return p->feed.link.v.p;
    return NULL;
}

/* The scheme of ref when it is one that runs code or holds a document instead of naming a
 * page (javascript:, vbscript:, data:), read as a browser reads it: leading spaces and control
 * characters skipped, tabs and line breaks inside ignored, any case. NULL otherwise. */
static const char *feed_unsafe_scheme(const char *ref, size_t n)
{
    static const char *const unsafe[] = {"javascript", "vbscript", "data"};
    char scheme[12];
    size_t k = 0, i = 0;
    while (i < n && (unsigned char)ref[i] <= ' ')
        i++;
    for (; i < n && ref[i] != ':'; i++) {
        if (ref[i] == '\t' || ref[i] == '\n' || ref[i] == '\r')
            continue;
        if (k == sizeof scheme - 1 || !isalpha((unsigned char)ref[i]))
            return NULL;
        scheme[k++] = (char)tolower((unsigned char)ref[i]);
    }
    if (i == n)
        return NULL;
    scheme[k] = '\0';
    for (size_t u = 0; u < sizeof unsafe / sizeof *unsafe; u++)
        if (!strcmp(scheme, unsafe[u]))
            return unsafe[u];
    return NULL;
}

const char *nf_fp_resolve(nf_fparse_t *p, const char *base, const char *ref, size_t n)
{
    feed_trim(&ref, &n);
    if (!n)
        return NULL;
    const char *unsafe = feed_unsafe_scheme(ref, n);
    if (unsafe) {
        nf_fp_warn(p, "a %s: URL is never a link: dropped ('%.*s')", unsafe, n < 40 ? (int)n : 40,
                   ref);
        return NULL;
    }
    if (!base)
        base = nf_fp_default_base(p);
    p->tmp.len = 0;
    if (!nf_fbuf_add(&p->tmp, ref, n)) {
        p->nomem = true;
        return NULL;
    }
    char out[NF_URL_MAX];
    int rc = nf_url_resolve(base, p->tmp.p, out, sizeof out);
    if (rc >= 0)
        return nf_fp_str(p, out, (size_t)rc);
    return nf_fp_str(p, ref, n);
}

/* Appends to a scratch vector of elements of size sz; false when out of memory. */
static void *vec_push(nf_fparse_t *p, void **v, size_t *n, size_t *cap, size_t sz)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 8;
        void *q = realloc(*v, c * sz);
        if (!q) {
            p->nomem = true;
            return NULL;
        }
        *v = q;
        *cap = c;
    }
    return (char *)*v + (*n)++ * sz;
}

const char *nf_fp_add_link(nf_fparse_t *p, nf_fentry_t *e, const char *base, const char *ref,
                           size_t n)
{
    const char *u = nf_fp_resolve(p, base, ref, n);
    if (!u || e->nlinks >= p->lim->max_list)
        return u;
    for (size_t i = 0; i < e->nlinks; i++)
        if (!strcmp(e->links[i], u))
            return u;
    const char **slot =
        vec_push(p, (void **)&e->links, &e->nlinks, &e->links_cap, sizeof *e->links);
    if (slot)
        *slot = u;
    return u;
}

/* An arena string of s's plain text when it has any, else NULL. */
static const char *feed_part(nf_fparse_t *p, const char *s, size_t n, nf_ftext_t kind)
{
    if (!s)
        return NULL;
    feed_trim(&s, &n);
    const char *t = n ? feed_text(p, s, n, kind, p->lim->max_field) : "";
    return *t ? t : NULL;
}

static bool feed_same(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

static void feed_add_tag(nf_fparse_t *p, nf_fentry_t *e, const char *term, size_t tn,
                         const char *label, size_t ln, const char *scheme, size_t sn,
                         nf_ftext_t kind)
{
    if (e->ncategories >= p->lim->max_list && e->ntags >= p->lim->max_list)
        return;
    nf_tag_t t = {.term = feed_part(p, term, tn, kind), .label = feed_part(p, label, ln, kind)};
    if (!t.term)
        return; /* a label alone names no category */
    if (scheme) {
        feed_trim(&scheme, &sn);
        t.scheme = sn ? nf_fp_str(p, scheme, sn) : NULL;
    }
    const char *c = t.label ? t.label : t.term;
    bool seen = false;
    for (size_t i = 0; i < e->ncategories && !seen; i++)
        seen = !strcmp(e->categories[i], c);
    if (!seen && e->ncategories < p->lim->max_list) {
        const char **slot = vec_push(p, (void **)&e->categories, &e->ncategories,
                                     &e->categories_cap, sizeof *e->categories);
        if (slot)
            *slot = c;
    }
    for (size_t i = 0; i < e->ntags; i++)
        if (feed_same(e->tags[i].term, t.term) && feed_same(e->tags[i].label, t.label) &&
            feed_same(e->tags[i].scheme, t.scheme))
            return;
    if (e->ntags >= p->lim->max_list)
        return;
    nf_tag_t *slot = vec_push(p, (void **)&e->tags, &e->ntags, &e->tags_cap, sizeof *e->tags);
    if (slot)
        *slot = t;
}

void nf_fp_add_tag(nf_fparse_t *p, nf_fentry_t *e, const char *term, const char *label,
                   const char *scheme, nf_ftext_t kind)
{
    feed_add_tag(p, e, term, term ? strlen(term) : 0, label, label ? strlen(label) : 0, scheme,
                 scheme ? strlen(scheme) : 0, kind);
}

void nf_fp_add_category(nf_fparse_t *p, nf_fentry_t *e, const char *s, size_t n, nf_ftext_t kind)
{
    feed_add_tag(p, e, s, n, NULL, 0, NULL, 0, kind);
}

void nf_fp_add_keywords(nf_fparse_t *p, nf_fentry_t *e, const char *s, size_t n)
{
    while (n) {
        const char *comma = memchr(s, ',', n);
        size_t k = comma ? (size_t)(comma - s) : n;
        nf_fp_add_category(p, e, s, k, NF_FTEXT_PLAIN);
        if (!comma)
            break;
        s += k + 1;
        n -= k + 1;
    }
}

void nf_fp_add_person(nf_fparse_t *p, nf_fentry_t *e, const char *name, size_t nn,
                      const char *email, size_t ne, int prio)
{
    if (name)
        feed_trim(&name, &nn);
    if (email) {
        feed_trim(&email, &ne);
        if (ne >= 7 && !strncasecmp(email, "mailto:", 7)) {
            email += 7;
            ne -= 7;
        }
    }
    if (!nn && !ne)
        return;
    if (prio < e->author_prio)
        return;
    if (prio > e->author_prio) {
        e->nauthors = 0;
        e->author_prio = prio;
    }
    if (e->nauthors >= p->lim->max_list)
        return;
    nf_person_t pe = {
        .name = nn ? feed_text(p, name, nn, NF_FTEXT_PLAIN, p->lim->max_field) : NULL,
        .email = ne ? nf_fp_str(p, email, ne) : NULL,
    };
    if (pe.name && !*pe.name)
        pe.name = NULL;
    if (!pe.name && !pe.email)
        return;
    nf_person_t *slot =
        vec_push(p, (void **)&e->authors, &e->nauthors, &e->authors_cap, sizeof *e->authors);
    if (slot)
        *slot = pe;
}

static bool feed_looks_email(const char *s, size_t n)
{
    return n && memchr(s, '@', n) && !memchr(s, ' ', n);
}

void nf_fp_add_person_str(nf_fparse_t *p, nf_fentry_t *e, const char *s, size_t n, int prio)
{
    feed_trim(&s, &n);
    if (!n)
        return;
    const char *open = NULL;
    char close = s[n - 1];
    if (close == ')' || close == '>') {
        for (size_t i = n - 1; i-- > 0;)
            if (s[i] == (close == ')' ? '(' : '<')) {
                open = s + i;
                break;
            }
    }
    if (open) {
        const char *outer = s, *inner = open + 1;
        size_t no = (size_t)(open - s), ni = (size_t)(s + n - 1 - inner);
        feed_trim(&outer, &no);
        feed_trim(&inner, &ni);
        if (feed_looks_email(inner, ni)) {
            nf_fp_add_person(p, e, outer, no, inner, ni, prio);
            return;
        }
        if (feed_looks_email(outer, no)) {
            nf_fp_add_person(p, e, inner, ni, outer, no, prio);
            return;
        }
    }
    if (feed_looks_email(s, n))
        nf_fp_add_person(p, e, NULL, 0, s, n, prio);
    else
        nf_fp_add_person(p, e, s, n, NULL, 0, prio);
}

/* ---- items -------------------------------------------------------------------------------- */

void nf_fp_item_begin(nf_fparse_t *p)
{
    entry_reset(&p->item);
    p->in_item = true;
    p->item_ignored = p->f->nitems >= p->lim->max_items;
}

void nf_fp_item_abort(nf_fparse_t *p)
{
    if (p->in_item && !p->item_ignored)
        p->f->skipped_items++;
    else if (p->in_item)
        p->f->truncated_items++;
    p->in_item = false;
}

static size_t item_ordinal(const nf_feed_t *f)
{
    return f->nitems + f->skipped_items + f->truncated_items + 1;
}

/* Epoch ms of a date slot; *ok false when absent or unparsable (warned, for item ord, or the
 * feed when ord is 0). */
static int64_t slot_date(nf_fparse_t *p, const nf_fslot_t *s, const char *what, size_t ord,
                         bool *ok)
{
    *ok = false;
    if (!s->prio)
        return 0;
    const char *v = s->v.p;
    size_t n = s->v.len;
    feed_trim(&v, &n);
    int64_t ms;
    if (nf_date_parse(v, n, &ms) == 0) {
        *ok = true;
        return ms;
    }
    if (ord)
        nf_fp_warn(p, "item %zu: unparsable %s date '%.60s'", ord, what, v);
    else
        nf_fp_warn(p, "feed: unparsable %s date '%.60s'", what, v);
    return 0;
}

/* Copies a scratch vector into the arena. */
static void *feed_keep(nf_fparse_t *p, const void *v, size_t n, size_t sz)
{
    if (!n)
        return NULL;
    void *q = nf_arena_alloc(p->a, n * sz);
    if (!q) {
        p->nomem = true;
        return NULL;
    }
    memcpy(q, v, n * sz);
    return q;
}

/* The longest prefix of s (n bytes) of at most max bytes that ends on a code point boundary,
 * without trailing space, as an arena string. */
static const char *feed_cut(nf_fparse_t *p, const char *s, size_t n, size_t max)
{
    if (n <= max)
        return s;
    while (max && ((unsigned char)s[max] & 0xC0) == 0x80)
        max--;
    while (max && s[max - 1] == ' ')
        max--;
    const char *c = nf_arena_strndup(p->a, s, max);
    if (!c)
        p->nomem = true;
    return c ? c : "";
}

void nf_fp_item_end(nf_fparse_t *p)
{
    nf_feed_t *f = p->f;
    nf_fentry_t *e = &p->item;
    const nf_feed_limits_t *lim = p->lim;
    if (!p->in_item)
        return;
    p->in_item = false;
    if (p->item_ignored) {
        f->truncated_items++;
        return;
    }
    if (f->nitems == p->items_cap) {
        size_t cap = p->items_cap ? p->items_cap * 2 : 16;
        nf_article_t *items = nf_arena_alloc(p->a, cap * sizeof *items);
        if (!items) {
            p->nomem = true;
            return;
        }
        if (f->nitems)
            memcpy(items, f->items, f->nitems * sizeof *items);
        f->items = items;
        p->items_cap = cap;
    }
    nf_article_t *a = &f->items[f->nitems];
    memset(a, 0, sizeof *a);
    size_t ord = item_ordinal(f);

    a->title = e->title.prio
                   ? feed_text(p, e->title.v.p, e->title.v.len, e->title.kind, lim->max_title)
                   : "";
    if (e->body.prio)
        a->body = feed_text(p, e->body.v.p, e->body.v.len, e->body.kind, lim->max_body);
    if (e->summary.prio) {
        if (!a->body) {
            /* One conversion at the larger cap serves both. */
            size_t max = lim->max_body > lim->max_summary ? lim->max_body : lim->max_summary;
            a->body = feed_text(p, e->summary.v.p, e->summary.v.len, e->summary.kind, max);
            a->summary = feed_cut(p, a->body, strlen(a->body), lim->max_summary);
            a->body = feed_cut(p, a->body, strlen(a->body), lim->max_body);
        } else {
            a->summary =
                feed_text(p, e->summary.v.p, e->summary.v.len, e->summary.kind, lim->max_summary);
        }
    }
    if (!a->summary)
        a->summary = "";
    if (!a->body)
        a->body = "";

    a->guid = slot_str(p, &e->guid);
    a->link = slot_str(p, &e->link);
    if (!a->link && a->guid && !e->guid_not_permalink && feed_is_http(a->guid))
        a->link = a->guid;
    if (a->link) {
        char norm[NF_URL_MAX];
        int rc = nf_url_normalize(a->link, norm, sizeof norm);
        if (rc >= 0) {
            a->url = nf_arena_strndup(p->a, norm, (size_t)rc);
            if (a->url)
                nf_url_article_id(a->url, a->article_id);
            else
                p->nomem = true;
        } else {
            nf_fp_warn(p, "item %zu: link '%.80s' unusable: %s", ord, a->link, nf_url_strerror(rc));
        }
    }

    bool okp, oku;
    int64_t pub = slot_date(p, &e->published, "published", ord, &okp);
    int64_t upd = slot_date(p, &e->updated, "updated", ord, &oku);
    if (okp || oku) {
        a->published_ms = okp ? pub : upd;
        a->updated_ms = oku ? upd : pub;
    } else {
        a->published_ms = a->updated_ms = p->fetched_ms;
        a->date_fallback = true;
    }
    a->language = slot_lang(p, &e->language);

    a->authors = feed_keep(p, e->authors, e->nauthors, sizeof *e->authors);
    a->nauthors = a->authors ? e->nauthors : 0;
    a->categories = feed_keep(p, e->categories, e->ncategories, sizeof *e->categories);
    a->ncategories = a->categories ? e->ncategories : 0;
    a->tags = feed_keep(p, e->tags, e->ntags, sizeof *e->tags);
    a->ntags = a->tags ? e->ntags : 0;
    a->links = feed_keep(p, e->links, e->nlinks, sizeof *e->links);
    a->nlinks = a->links ? e->nlinks : 0;

    nf_sha256_t h;
    uint8_t d[32];
    nf_sha256_init(&h);
    nf_sha256_update(&h, a->title, strlen(a->title));
    nf_sha256_update(&h, "\n", 1);
    nf_sha256_update(&h, a->body, strlen(a->body));
    nf_sha256_final(&h, d);
    nf_hex(d, 32, a->content_hash);
    f->nitems++;
}

/* Forgets what a first reading produced (items, feed fields, arena) for a second one; warnings
 * go back to what the repair pass reported. */
static int feed_restart(nf_fparse_t *p, unsigned warnings, const char *first_warning)
{
    nf_feed_t *f = p->f;
    nf_arena_t *a = nf_arena_new(16 * 1024);
    if (!a)
        return NF_FEED_E_NOMEM;
    nf_arena_free(p->a);
    p->a = a;
    f->arena = a;
    f->format = NF_FEED_UNKNOWN;
    f->version = "";
    f->items = NULL;
    f->nitems = f->truncated_items = f->skipped_items = 0;
    p->items_cap = 0;
    p->in_item = p->item_ignored = p->xml_ill_formed = false;
    entry_reset(&p->feed);
    entry_reset(&p->item);
    p->warnings = warnings;
    snprintf(p->first_warning, sizeof p->first_warning, "%s", first_warning);
    return NF_FEED_OK;
}

/* ---- the feed ------------------------------------------------------------------------------ */

static void feed_finish(nf_fparse_t *p)
{
    nf_feed_t *f = p->f;
    nf_fentry_t *e = &p->feed;
    bool ok;
    if (e->title.prio)
        f->title = feed_text(p, e->title.v.p, e->title.v.len, e->title.kind, p->lim->max_title);
    if (e->summary.prio)
        f->description =
            feed_text(p, e->summary.v.p, e->summary.v.len, e->summary.kind, p->lim->max_summary);
    f->link = slot_str(p, &e->link);
    f->feed_link = slot_str(p, &e->feed_link);
    f->language = slot_lang(p, &e->language);
    int64_t pub = slot_date(p, &e->published, "published", 0, &ok);
    f->published_ms = ok ? pub : 0;
    int64_t upd = slot_date(p, &e->updated, "updated", 0, &ok);
    f->updated_ms = ok ? upd : 0;
    f->authors = feed_keep(p, e->authors, e->nauthors, sizeof *e->authors);
    f->nauthors = f->authors ? e->nauthors : 0;
    f->links = feed_keep(p, e->links, e->nlinks, sizeof *e->links);
    f->nlinks = f->links ? e->nlinks : 0;
    f->categories = feed_keep(p, e->categories, e->ncategories, sizeof *e->categories);
    f->ncategories = f->categories ? e->ncategories : 0;
    f->tags = feed_keep(p, e->tags, e->ntags, sizeof *e->tags);
    f->ntags = f->tags ? e->ntags : 0;

    for (size_t i = 0; i < f->nitems; i++) {
        nf_article_t *a = &f->items[i];
        if (!a->language)
            a->language = f->language;
        /* RFC 4287 §4.1.2: an entry without atom:author has the feed's authors. */
        if (f->format == NF_FEED_ATOM && !a->nauthors) {
            a->authors = f->authors;
            a->nauthors = f->nauthors;
        }
        /* A JSON Feed has no feed-level date; the newest item stands in (as gofeed does). */
        if (f->format == NF_FEED_JSON && !a->date_fallback) {
            if (a->published_ms > f->published_ms)
                f->published_ms = a->published_ms;
            if (a->updated_ms > f->updated_ms)
                f->updated_ms = a->updated_ms;
        }
    }
}

/* Push or pull (feed_xml.c): pushed when the first chunk holds a CDATA section. */
static bool feed_xml_push(const nf_fparse_t *p, const char *data, size_t len)
{
    if (p->lim->xml_mode != NF_FEED_XML_AUTO)
        return p->lim->xml_mode == NF_FEED_XML_PUSH;
    return memmem(data, len < NF_FEED_XML_CHUNK ? len : NF_FEED_XML_CHUNK, "<![CDATA[", 9) != NULL;
}

/* A pushed reading that met any error is done again pulled, so that a broken document always
 * gets the same recovery (feed_xml.c). After a fatal error, even in recover mode, libxml2 drops
 * every named entity reference that follows, &amp; and &lt; included (xmlParseReference
 * returns early once wellFormed is 0), which would turn "AT&amp;T" into "ATT" and escaped HTML
 * into soup for the rest of the feed. Character references survive, so such a document is read
 * a second time with the five predefined references rewritten as character references. Only
 * broken documents pay. */
static int feed_xml(nf_fparse_t *p, nf_fprep_t *prep, char *err, size_t errlen)
{
    unsigned warnings = p->warnings;
    char first[sizeof p->first_warning];
    memcpy(first, p->first_warning, sizeof first);
    bool push = feed_xml_push(p, prep->data, prep->len);
    int rc = nf_feed_xml_read(p, prep->data, prep->len, prep->encoding, push, err, errlen);
    if (push && rc != NF_FEED_E_NOMEM && (rc != NF_FEED_OK || p->xml_ill_formed)) {
        if ((rc = feed_restart(p, warnings, first)) != NF_FEED_OK)
            return rc;
        err[0] = '\0';
        rc = nf_feed_xml_read(p, prep->data, prep->len, prep->encoding, false, err, errlen);
    }
    if (rc != NF_FEED_OK || !p->xml_ill_formed || !prep->named_refs)
        return rc;
    if ((rc = nf_feed_prep_charrefs(prep)) != NF_FEED_OK ||
        (rc = feed_restart(p, warnings, first)) != NF_FEED_OK)
        return rc;
    return nf_feed_xml_read(p, prep->data, prep->len, prep->encoding, false, err, errlen);
}

int nf_feed_parse(nf_feed_t *f, const char *data, size_t len, const char *feed_url,
                  int64_t fetched_ms, const nf_feed_limits_t *lim, char *err, size_t errlen)
{
    char noerr[1];
    nf_feed_limits_t dl;
    if (!err || !errlen) {
        err = noerr;
        errlen = sizeof noerr;
    }
    err[0] = '\0';
    memset(f, 0, sizeof *f);
    f->version = f->title = f->description = "";
    if (!lim) {
        nf_feed_limits_default(&dl);
        lim = &dl;
    }
    nf_feed_global_init();
    if (len > lim->max_bytes) {
        snprintf(err, errlen, "document is %zu bytes, over the limit of %zu bytes", len,
                 lim->max_bytes);
        return NF_FEED_E_TOO_LARGE;
    }
    nf_arena_t *a = nf_arena_new(16 * 1024);
    if (!a) {
        snprintf(err, errlen, "out of memory");
        return NF_FEED_E_NOMEM;
    }
    f->arena = a;
    nf_fparse_t p = {
        .f = f,
        .a = a,
        .lim = lim,
        .feed_url = feed_url && *feed_url ? feed_url : NULL,
        .fetched_ms = fetched_ms,
    };
    nf_fprep_t prep;
    int rc = nf_feed_prep(&p, &prep, data ? data : "", data ? len : 0);
    if (rc == NF_FEED_E_MALFORMED)
        snprintf(err, errlen, "document is empty%s",
                 len ? " (only whitespace and control characters)" : "");
    if (rc == NF_FEED_OK) {
        if (prep.json)
            rc = nf_feed_json_read(&p, prep.data, prep.len, err, errlen);
        else
            rc = feed_xml(&p, &prep, err, errlen);
    }
    if (rc == NF_FEED_OK)
        feed_finish(&p);
    if (p.nomem || rc == NF_FEED_E_NOMEM) {
        rc = NF_FEED_E_NOMEM;
        snprintf(err, errlen, "out of memory");
    }
    if (rc != NF_FEED_OK) {
        /* Nothing is kept, so a caller that returns early need not free anything. */
        nf_arena_free(p.a);
        memset(f, 0, sizeof *f);
        f->version = f->title = f->description = "";
        f->warnings = p.warnings;
    } else {
        f->encoding = nf_arena_strndup(p.a, prep.label, strlen(prep.label));
        f->warnings = p.warnings;
        if (p.warnings)
            f->first_warning = nf_arena_strndup(p.a, p.first_warning, strlen(p.first_warning));
    }
    free(prep.owned);
    entry_free(&p.feed);
    entry_free(&p.item);
    nf_fbuf_free(&p.tmp);
    return rc;
}

void nf_feed_free(nf_feed_t *f)
{
    if (!f)
        return;
    nf_arena_free(f->arena);
    memset(f, 0, sizeof *f);
}

static bool date_usable(int64_t ms, int64_t fetched_ms, int64_t max_future_ms)
{
    if (ms <= 0)
        return false;
    int64_t ahead;
    if (__builtin_sub_overflow(ms, fetched_ms, &ahead))
        return false;
    return max_future_ms <= 0 || ahead <= max_future_ms;
}

int nf_article_bound_dates(nf_article_t *a, int64_t fetched_ms, int64_t max_future_ms)
{
    bool pub = date_usable(a->published_ms, fetched_ms, max_future_ms);
    bool upd = date_usable(a->updated_ms, fetched_ms, max_future_ms);
    if (pub && upd)
        return 0;
    if (pub) {
        a->updated_ms = a->published_ms;
        return 1;
    }
    if (upd) {
        a->published_ms = a->updated_ms;
        return 1;
    }
    a->published_ms = a->updated_ms = fetched_ms;
    a->date_fallback = true;
    return 2;
}
