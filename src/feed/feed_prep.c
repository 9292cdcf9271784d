/* feed_prep.c — the repair pass run on a document before libxml2 or cJSON sees it (feed.h).
 *
 * What real feeds get wrong is rarely structure: it is bytes (a wrong or missing encoding,
 * control characters) and ampersands (bare '&', HTML entities no DTD declares). libxml2's
 * recover mode "recovers" from those by dropping text: the '&' goes, the undeclared entity
 * goes, and after the first such fatal error every later &amp; and &lt; goes too. Fixing them
 * here keeps the text, and turning every non-XML entity reference into text is also what makes
 * entity bombs and external entities inert: libxml2 never sees a reference to a declared
 * entity. Each step copies only when it has something to change, so a clean UTF-8 feed costs
 * one validation scan (32 bytes at a time while they are printable ASCII) and a memchr for
 * '&' — nothing is allocated. nf_feed_prep_charrefs() is the fallback feed.c uses when
 * libxml2 still met a fatal error (see feed_xml() there). */
#include "feed/feed_int.h"

#include <libxml/encoding.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void nf_fp_linecol(const char *data, size_t off, unsigned *line, unsigned *col)
{
    unsigned l = 1;
    size_t bol = 0;
    for (const char *q = data, *end = data + off; (q = memchr(q, '\n', (size_t)(end - q)));) {
        l++;
        q++;
        bol = (size_t)(q - data);
    }
    *line = l;
    *col = (unsigned)(off - bol + 1);
}

/* Takes ownership of a new buffer as the current document. */
static void prep_replace(nf_fprep_t *out, nf_fbuf_t *b)
{
    free(out->owned);
    out->owned = b->p;
    out->data = b->p;
    out->len = b->len;
    b->p = NULL;
    b->len = b->cap = 0;
}

static bool prep_put_cp(nf_fbuf_t *b, unsigned cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | cp >> 6);
        u[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | cp >> 12);
        u[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (char)(0xF0 | cp >> 18);
        u[1] = (char)(0x80 | (cp >> 12 & 0x3F));
        u[2] = (char)(0x80 | (cp >> 6 & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    return nf_fbuf_add(b, u, n);
}

/* UTF-16 (after its BOM, if any) to UTF-8; unpaired surrogates become U+FFFD. */
static int prep_utf16(nf_fparse_t *p, nf_fprep_t *out, const unsigned char *s, size_t len, bool be)
{
    nf_fbuf_t b = {0};
    unsigned bad = 0;
    if (!nf_fbuf_add(&b, "", 0))
        return NF_FEED_E_NOMEM;
    for (size_t i = 0; i + 1 < len; i += 2) {
        unsigned cu = be ? (unsigned)s[i] << 8 | s[i + 1] : (unsigned)s[i + 1] << 8 | s[i];
        unsigned cp = cu;
        if (cu >= 0xD800 && cu <= 0xDBFF && i + 3 < len) {
            unsigned lo =
                be ? (unsigned)s[i + 2] << 8 | s[i + 3] : (unsigned)s[i + 3] << 8 | s[i + 2];
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
                cp = 0x10000 + ((cu - 0xD800) << 10) + (lo - 0xDC00);
                i += 2;
            } else {
                cp = 0xFFFD;
                bad++;
            }
        } else if (cu >= 0xD800 && cu <= 0xDFFF) {
            cp = 0xFFFD;
            bad++;
        }
        if (!prep_put_cp(&b, cp)) {
            nf_fbuf_free(&b);
            return NF_FEED_E_NOMEM;
        }
    }
    if (bad)
        nf_fp_warn(p, "%u unpaired UTF-16 surrogates replaced by U+FFFD", bad);
    prep_replace(out, &b);
    return NF_FEED_OK;
}

/* Length of the valid UTF-8 sequence at s (n bytes available), 0 if invalid. */
static size_t prep_utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        return n >= 2 && (s[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80)
            return 0;
        if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F))
            return 0; /* overlong, surrogate */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
            return 0;
        if ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] > 0x8F))
            return 0;
        return 4;
    }
    return 0;
}

static bool prep_xml_ctrl(unsigned c)
{
    return c < 0x20 && c != '\t' && c != '\n' && c != '\r';
}

typedef struct prep_scan {
    bool valid, nonascii, fix; /* fix: controls or U+FFFE/U+FFFF to replace */
    size_t first_bad, first_fix;
} prep_scan_t;

/* A word with a byte >= 0x80 or < 0x20 has the high bit of that byte set in the result. */
static inline uint64_t prep_special(uint64_t w)
{
    const uint64_t lo = 0x2020202020202020ull;
    return w | ((w - lo) & ~w);
}

static void prep_scan(const unsigned char *s, size_t n, prep_scan_t *r)
{
    const uint64_t hi = 0x8080808080808080ull;
    memset(r, 0, sizeof *r);
    r->valid = true;
    size_t i = 0;
    while (i < n) {
        /* Printable ASCII, 32 then 8 bytes at a time: nothing to look at. */
        if (i + 32 <= n) {
            uint64_t w[4];
            memcpy(w, s + i, 32);
            if (!((prep_special(w[0]) | prep_special(w[1]) | prep_special(w[2]) |
                   prep_special(w[3])) &
                  hi)) {
                i += 32;
                continue;
            }
        }
        if (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(prep_special(w) & hi)) {
                i += 8;
                continue;
            }
        }
        unsigned c = s[i];
        if (c < 0x80) {
            if (prep_xml_ctrl(c) && !r->fix) {
                r->fix = true;
                r->first_fix = i;
            }
            i++;
            continue;
        }
        r->nonascii = true;
        size_t k = prep_utf8_seq(s + i, n - i);
        if (!k) {
            if (r->valid) {
                r->valid = false;
                r->first_bad = i;
            }
            i++;
            continue;
        }
        if (k == 3 && c == 0xEF && s[i + 1] == 0xBF && s[i + 2] >= 0xBE && !r->fix) {
            r->fix = true; /* U+FFFE, U+FFFF: not XML characters */
            r->first_fix = i;
        }
        i += k;
    }
}

static const unsigned short cp1252[32] = {
    0x20AC, 0xFFFD, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160,
    0x2039, 0x0152, 0xFFFD, 0x017D, 0xFFFD, 0xFFFD, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022,
    0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0xFFFD, 0x017E, 0x0178,
};

/* Copies the document dropping control characters, replacing U+FFFE/U+FFFF by U+FFFD and, if
 * recode, each byte that is not part of valid UTF-8 by its windows-1252 character. */
static int prep_fix_bytes(nf_fprep_t *out, bool recode, unsigned *ctrl, unsigned *recoded)
{
    const unsigned char *s = (const unsigned char *)out->data;
    size_t n = out->len, i = 0, run = 0;
    nf_fbuf_t b = {0};
    if (!nf_fbuf_add(&b, "", 0))
        return NF_FEED_E_NOMEM;
    while (i < n) {
        unsigned c = s[i];
        size_t k = c < 0x80 ? 1 : recode ? prep_utf8_seq(s + i, n - i) : 1;
        bool bad_ctrl = c < 0x80 && prep_xml_ctrl(c);
        bool nonchar = k == 3 && c == 0xEF && s[i + 1] == 0xBF && s[i + 2] >= 0xBE;
        if (k && !bad_ctrl && !nonchar) {
            i += k;
            continue;
        }
        if (!nf_fbuf_add(&b, (const char *)s + run, i - run))
            goto nomem;
        bool ok;
        if (bad_ctrl) {
            ok = true; /* dropped, as the text layer drops them */
            (*ctrl)++;
            k = 1;
        } else if (nonchar) {
            ok = nf_fbuf_add(&b, "\xEF\xBF\xBD", 3);
            (*ctrl)++;
        } else {
            ok = prep_put_cp(&b, c >= 0xA0 ? c : cp1252[c - 0x80]);
            (*recoded)++;
            k = 1;
        }
        if (!ok)
            goto nomem;
        i += k;
        run = i;
    }
    if (!nf_fbuf_add(&b, (const char *)s + run, n - run))
        goto nomem;
    prep_replace(out, &b);
    return NF_FEED_OK;
nomem:
    nf_fbuf_free(&b);
    return NF_FEED_E_NOMEM;
}

/* The encoding named by the XML declaration, copied into buf; NULL if none. */
static const char *prep_declared(const char *s, size_t n, char *buf, size_t buflen)
{
    if (n < 6 || memcmp(s, "<?xml", 5) != 0)
        return NULL;
    const char *end = memchr(s, '>', n < 512 ? n : 512);
    if (!end)
        return NULL;
    const char *e = memmem(s, (size_t)(end - s), "encoding", 8);
    if (!e)
        return NULL;
    e += 8;
    while (e < end && (*e == ' ' || *e == '=' || *e == '\t' || *e == '\r' || *e == '\n'))
        e++;
    if (e >= end || (*e != '"' && *e != '\''))
        return NULL;
    char q = *e++;
    const char *v = e;
    while (e < end && *e != q)
        e++;
    size_t len = (size_t)(e - v);
    if (e >= end || len == 0 || len >= buflen)
        return NULL;
    memcpy(buf, v, len);
    buf[len] = '\0';
    return buf;
}

static bool prep_is_utf(const char *enc)
{
    return !strncasecmp(enc, "utf-8", 5) || !strncasecmp(enc, "utf8", 4) ||
           !strncasecmp(enc, "utf-16", 6) || !strncasecmp(enc, "utf16", 5) ||
           !strcasecmp(enc, "unicode");
}

/* Labels the WHATWG Encoding Standard reads as windows-1252: their invalid bytes get the
 * same repair as an undeclared document's. */
static bool prep_is_cp1252(const char *enc)
{
    static const char *const labels[] = {
        "iso-8859-1", "iso8859-1",    "iso_8859-1", "latin1",   "l1",    "us-ascii",
        "ascii",      "windows-1252", "cp1252",     "x-cp1252", "cp819", "ibm819",
    };
    for (size_t i = 0; i < sizeof labels / sizeof *labels; i++)
        if (!strcasecmp(enc, labels[i]))
            return true;
    return false;
}

static bool prep_libxml_knows(const char *enc)
{
    xmlCharEncodingHandlerPtr h = xmlFindCharEncodingHandler(enc);
    if (!h)
        return false;
    xmlCharEncCloseFunc(h);
    return true;
}

/* Length of the predefined entity name and ';' after a '&' (s, n bytes), 0 if none; its
 * character in *c. */
static size_t prep_named_ref(const char *s, size_t n, char *c)
{
    if (n >= 3 && s[1] == 't' && s[2] == ';' && (s[0] == 'l' || s[0] == 'g')) {
        *c = s[0] == 'l' ? '<' : '>';
        return 3;
    }
    if (n >= 4 && s[0] == 'a' && s[1] == 'm' && s[2] == 'p' && s[3] == ';') {
        *c = '&';
        return 4;
    }
    if (n >= 5 && (!memcmp(s, "quot;", 5) || !memcmp(s, "apos;", 5))) {
        *c = s[0] == 'q' ? '"' : '\'';
        return 5;
    }
    return 0;
}

bool nf_fp_ref_ok(const char *s, size_t n, size_t *named)
{
    char named_char;
    if (prep_named_ref(s, n, &named_char)) {
        (*named)++;
        return true;
    }
    if (n < 3 || s[0] != '#')
        return false;
    bool hex = s[1] == 'x';
    size_t i = hex ? 2 : 1, digits = 0;
    unsigned long v = 0;
    for (; i < n && digits < 9; i++, digits++) {
        char c = s[i];
        int d = c >= '0' && c <= '9'          ? c - '0'
                : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
                : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10
                                              : -1;
        if (d < 0)
            break;
        v = v * (hex ? 16 : 10) + (unsigned long)d;
    }
    if (!digits || i >= n || s[i] != ';')
        return false;
    return v == 0x9 || v == 0xA || v == 0xD || (v >= 0x20 && v <= 0xD7FF) ||
           (v >= 0xE000 && v <= 0xFFFD) || (v >= 0x10000 && v <= 0x10FFFF);
}

/* First occurrence of the short marker m in s[0..n), found by memchr on its byte m[k] — the
 * one rare in feed text: '!' of "<!", ']' of "]]>" (while '<' and '>' are everywhere in HTML) —
 * and checked around it. glibc's memmem walks short needles a byte at a time; this runs at
 * memchr's vector speed (the scan was 8 % of a parse). */
static const char *prep_find(const char *s, size_t n, const char *m, size_t mlen, size_t k)
{
    for (size_t i = k; i + (mlen - k) <= n;) {
        const char *q = memchr(s + i, m[k], n - i - (mlen - k - 1));
        if (!q)
            return NULL;
        if (!memcmp(q - k, m, mlen))
            return q - k;
        i = (size_t)(q - s) + 1;
    }
    return NULL;
}

/* Next CDATA section or comment at or after from: [*start, *end). False if none. */
static bool prep_next_raw(const char *s, size_t n, size_t from, size_t *start, size_t *end)
{
    while (from < n) {
        const char *q = prep_find(s + from, n - from, "<!", 2, 1);
        if (!q)
            return false;
        size_t at = (size_t)(q - s), rest = n - at;
        const char *close = NULL, *e;
        size_t skip = 0;
        if (rest >= 9 && !memcmp(q, "<![CDATA[", 9)) {
            close = "]]>";
            skip = 9;
        } else if (rest >= 4 && !memcmp(q, "<!--", 4)) {
            close = "-->";
            skip = 4;
        }
        if (!close) {
            from = at + 2;
            continue;
        }
        e = prep_find(q + skip, rest - skip, close, 3, 0);
        *start = at;
        *end = e ? (size_t)(e - s) + 3 : n;
        return true;
    }
    return false;
}

/* Drops leading XML whitespace; false if nothing is left. */
static bool skip_leading_ws(nf_fprep_t *out)
{
    while (out->len &&
           (*out->data == ' ' || *out->data == '\t' || *out->data == '\r' || *out->data == '\n')) {
        out->data++;
        out->len--;
    }
    return out->len != 0;
}

/* One kind of reference kept as text, for its warning. */
typedef struct prep_kept {
    unsigned count;
    size_t first;
    const char *name, *why;
    size_t nl;
} prep_kept_t;

static void prep_keep(prep_kept_t *k, size_t at, const char *name, size_t nl, const char *why)
{
    if (!k->count++) {
        k->first = at;
        k->name = name;
        k->nl = nl;
        k->why = why;
    }
}

/* Escapes every '&' that does not start a reference XML resolves by itself, after replacing the
 * references to entities the document's DOCTYPE declares (feed_dtd.c) where they may be.
 * CDATA sections and comments, where '&' is literal, are located only when a suspicious '&'
 * needs the answer, so a clean document costs one memchr pass; the regions are still found in
 * one forward sweep. */
static int prep_fix_amps(nf_fparse_t *p, nf_fprep_t *out)
{
    const char *s = out->data;
    size_t n = out->len, i = 0, run = 0, rs = 0, re = 0;
    bool have_raw = true; /* a region [rs, re) may lie at or after re: not looked for yet */
    bool dtd_read = false, changed = false;
    nf_fdtd_t *dtd = NULL;
    prep_kept_t bare = {0}, refused = {0};
    nf_fbuf_t b = {0};
    int rc = NF_FEED_E_NOMEM;
    for (;;) {
        const char *amp = memchr(s + i, '&', n - i);
        if (!amp)
            break;
        size_t at = (size_t)(amp - s);
        i = at + 1;
        if (nf_fp_ref_ok(s + i, n - i, &out->named_refs))
            continue;
        while (have_raw && re <= at)
            have_raw = prep_next_raw(s, n, re, &rs, &re);
        if (have_raw && rs <= at) {
            i = re; /* inside CDATA or a comment: '&' is literal there */
            continue;
        }
        if (!dtd_read) {
            dtd_read = true;
            if (nf_fdtd_read(s, n, &dtd))
                goto out;
        }
        size_t nl = nf_fdtd_name(s + i, n - i);
        const char *why = NULL;
        if (nl && !nf_fdtd_in_subset(dtd, at)) {
            if (!nf_fbuf_add(&b, s + run, at - run))
                goto out;
            size_t mark = b.len;
            int got = nf_fdtd_expand(dtd, s + i, nl, &b, &why);
            if (got < 0)
                goto out;
            if (got) {
                if (memchr(b.p + mark, '&', b.len - mark))
                    out->named_refs++; /* may hold &amp; and the like: see feed_xml() */
                changed = true;
                i += nl + 1;
                run = i;
                continue;
            }
            run = at;
        }
        if (why)
            prep_keep(&refused, at, s + i, nl, why);
        else
            prep_keep(&bare, at, NULL, 0, NULL);
        if (!nf_fbuf_add(&b, s + run, i - run) || !nf_fbuf_add(&b, "amp;", 4))
            goto out;
        out->named_refs++; /* each fix is an &amp; */
        changed = true;
        run = i;
    }
    rc = NF_FEED_OK;
    if (!changed)
        goto out;
    if (!nf_fbuf_add(&b, s + run, n - run)) {
        rc = NF_FEED_E_NOMEM;
        goto out;
    }
    unsigned line, col;
    if (refused.count) {
        nf_fp_linecol(s, refused.first, &line, &col);
        nf_fp_warn(p,
                   "line %u:%u: %u references to DOCTYPE entities kept as text (first &%.*s;: %s)",
                   line, col, refused.count, (int)refused.nl, refused.name, refused.why);
    }
    if (bare.count) {
        nf_fp_linecol(s, bare.first, &line, &col);
        nf_fp_warn(p,
                   "line %u:%u: %u '&' not starting an XML reference (bare, or an entity no DTD "
                   "we read declares) kept as text",
                   line, col, bare.count);
    }
    prep_replace(out, &b);
out:
    nf_fbuf_free(&b);
    nf_fdtd_free(dtd);
    return rc;
}

int nf_feed_prep_charrefs(nf_fprep_t *out)
{
    const char *s = out->data;
    size_t n = out->len, i = 0, run = 0, rs = 0, re = 0;
    bool have_raw = true;
    nf_fbuf_t b = {0};
    if (!nf_fbuf_add(&b, "", 0))
        return NF_FEED_E_NOMEM;
    for (;;) {
        const char *amp = memchr(s + i, '&', n - i);
        if (!amp)
            break;
        size_t at = (size_t)(amp - s);
        i = at + 1;
        char c, ref[8];
        size_t k = prep_named_ref(s + i, n - i, &c);
        if (!k)
            continue;
        while (have_raw && re <= at)
            have_raw = prep_next_raw(s, n, re, &rs, &re);
        if (have_raw && rs <= at) {
            i = re;
            continue;
        }
        int m = snprintf(ref, sizeof ref, "#%d;", c);
        if (!nf_fbuf_add(&b, s + run, i - run) || !nf_fbuf_add(&b, ref, (size_t)m))
            goto nomem;
        i += k;
        run = i;
    }
    if (!nf_fbuf_add(&b, s + run, n - run))
        goto nomem;
    prep_replace(out, &b);
    return NF_FEED_OK;
nomem:
    nf_fbuf_free(&b);
    return NF_FEED_E_NOMEM;
}

int nf_feed_prep(nf_fparse_t *p, nf_fprep_t *out, const char *data, size_t len)
{
    const unsigned char *u = (const unsigned char *)data;
    const char *bom = NULL;
    int rc;
    memset(out, 0, sizeof *out);
    out->data = data;
    out->len = len;
    out->encoding = "UTF-8";
    if (len >= 3 && u[0] == 0xEF && u[1] == 0xBB && u[2] == 0xBF) {
        out->data += 3;
        out->len -= 3;
        bom = "UTF-8 (BOM)";
    } else if (len >= 2 && ((u[0] == 0xFF && u[1] == 0xFE) || (u[0] == 0xFE && u[1] == 0xFF))) {
        bool be = u[0] == 0xFE;
        if ((rc = prep_utf16(p, out, u + 2, len - 2, be)))
            return rc;
        bom = be ? "UTF-16BE (BOM)" : "UTF-16LE (BOM)";
    } else if (len >= 4 && ((u[0] && !u[1] && !u[3]) || (!u[0] && u[1] && !u[2]))) {
        bool be = !u[0];
        if ((rc = prep_utf16(p, out, u, len, be)))
            return rc;
        bom = be ? "UTF-16BE (no BOM)" : "UTF-16LE (no BOM)";
    }
    if (!skip_leading_ws(out))
        return NF_FEED_E_MALFORMED;
    snprintf(out->label, sizeof out->label, "%s", bom ? bom : "UTF-8");
    if (out->data[0] == '{' || out->data[0] == '[') {
        out->json = true;
        return NF_FEED_OK;
    }

    prep_scan_t sc;
    prep_scan((const unsigned char *)out->data, out->len, &sc);
    char declbuf[64];
    const char *declared = bom ? NULL : prep_declared(out->data, out->len, declbuf, sizeof declbuf);
    unsigned ctrl = 0, recoded = 0;
    size_t first_bad = sc.first_bad, first_fix = sc.first_fix;
    unsigned line, col;
    if (sc.valid) {
        if (declared && sc.nonascii && !prep_is_utf(declared)) {
            snprintf(out->label, sizeof out->label, "UTF-8 (declared %s)", declared);
            nf_fp_warn(p, "declared encoding %s, but the bytes are UTF-8: read as UTF-8", declared);
        }
        if (sc.fix && (rc = prep_fix_bytes(out, false, &ctrl, &recoded)))
            return rc;
    } else if (declared && !prep_is_utf(declared) && !prep_is_cp1252(declared) &&
               prep_libxml_knows(declared)) {
        out->encoding = NULL; /* libxml2 decodes what the declaration says */
        snprintf(out->label, sizeof out->label, "%s (declared)", declared);
        if (sc.fix && (rc = prep_fix_bytes(out, false, &ctrl, &recoded)))
            return rc;
    } else {
        nf_fp_linecol(out->data, first_bad, &line, &col);
        if ((rc = prep_fix_bytes(out, true, &ctrl, &recoded)))
            return rc;
        if (declared && prep_is_cp1252(declared))
            snprintf(out->label, sizeof out->label, "windows-1252 (declared %s)", declared);
        else if (declared && !prep_is_utf(declared))
            snprintf(out->label, sizeof out->label, "windows-1252 (declared %s, unknown)",
                     declared);
        else
            snprintf(out->label, sizeof out->label, "windows-1252 (invalid UTF-8)");
        if (!declared || !prep_is_cp1252(declared)) /* else the document said so: no problem */
            nf_fp_warn(p,
                       "line %u:%u: %u bytes are not UTF-8%s%s%s: read as windows-1252 "
                       "characters",
                       line, col, recoded, declared ? " (declared " : "", declared ? declared : "",
                       declared ? ")" : "");
    }
    if (ctrl) {
        /* Offsets after recoding differ; the scan's offset is in the original bytes. */
        nf_fp_warn(p, "%u control characters XML forbids dropped (first at byte %zu)", ctrl,
                   first_fix);
    }
    /* Dropped control characters may have been all there was, or what hid leading space. */
    if (!skip_leading_ws(out))
        return NF_FEED_E_MALFORMED;
    return prep_fix_amps(p, out);
}
