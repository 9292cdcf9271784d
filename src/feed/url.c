/* url.c — RFC 3986 resolution and the normalization that article identity rests on (url.h).
 *
 * Both entry points split the input once into the five RFC 3986 components (the Appendix B
 * regular expression, hand-coded) as slices of the caller's string, then write the result
 * straight into the caller's buffer; the only scratch space is one path-sized stack buffer,
 * because dot-segment removal must see the whole merged path. Resolution is the §5.2 algorithm
 * verbatim (strict: "http:g" keeps its scheme), so it works for any scheme; normalization is
 * http(s)-only and opinionated, because its one job is that two spellings of the same article
 * URL meet: §6.2.2 syntax normalization (case, percent-encoding, dot segments) plus the
 * scheme-based rules for http (default port, empty path), host canonicalization (IDNA via
 * libidn2, trailing dot) and removal of tracking parameters.
 *
 * Results longer than NF_URL_MAX - 1 bytes are refused (NF_URL_E_TOO_LONG) whatever outlen
 * is: no real article URL is that long, and the bound keeps the scratch space on the stack. */
#include "feed/url.h"

#include "algo/sha256.h"

#include <idn2.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* ---- character classes ------------------------------------------------------------------ */

enum {
    CH_UNRESERVED = 1, /* ALPHA DIGIT - . _ ~ : never needs encoding, always decoded */
    CH_SUBDELIM = 2,   /* ! $ & ' ( ) * + , ; = */
    CH_SCHEME = 4,     /* ALPHA DIGIT + - . */
    CH_HEX = 8,
};

/* Derived from the RFC 3986 grammar; bytes >= 0x80 are in no class. */
#define U CH_UNRESERVED                        /* _ ~ */
#define D CH_SUBDELIM                          /* ! $ & ' ( ) * , ; = */
#define P (CH_SUBDELIM | CH_SCHEME)            /* + */
#define L (CH_UNRESERVED | CH_SCHEME)          /* g-z, G-Z, - . */
#define H (CH_UNRESERVED | CH_SCHEME | CH_HEX) /* digits, a-f, A-F */
static const uint8_t ch_class[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 00 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 10 */
    0, D, 0, 0, D, 0, D, D, D, D, D, P, D, L, L, 0, /* 20 */
    H, H, H, H, H, H, H, H, H, H, 0, D, 0, D, 0, 0, /* 30 */
    0, H, H, H, H, H, H, L, L, L, L, L, L, L, L, L, /* 40 */
    L, L, L, L, L, L, L, L, L, L, L, 0, 0, 0, 0, U, /* 50 */
    0, H, H, H, H, H, H, L, L, L, L, L, L, L, L, L, /* 60 */
    L, L, L, L, L, L, L, L, L, L, L, 0, 0, 0, U, 0, /* 70 */
    /* 0x80..0xff: 0 */
};
#undef U
#undef D
#undef P
#undef L
#undef H

static inline bool has(unsigned char c, unsigned k)
{
    return (ch_class[c] & k) != 0;
}

static inline unsigned hex_val(unsigned char c)
{
    return c <= '9' ? (unsigned)(c - '0') : (unsigned)((c | 0x20) - 'a' + 10);
}

static inline bool is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static inline char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c | 0x20) : c;
}

/* ---- a bounded writer ------------------------------------------------------------------- */

typedef struct {
    char *p;
    size_t n, cap; /* cap includes room for the NUL */
    bool over;
} buf_t;

static inline void put(buf_t *b, const char *s, size_t n)
{
    if (b->cap - b->n <= n) {
        b->over = true;
        return;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static inline void put_c(buf_t *b, char c)
{
    put(b, &c, 1);
}

static int finish(buf_t *b)
{
    if (b->over || b->n >= NF_URL_MAX)
        return NF_URL_E_TOO_LONG;
    b->p[b->n] = '\0';
    return (int)b->n;
}

/* ---- components ------------------------------------------------------------------------- */

typedef struct {
    const char *p;
    size_t n;
    bool has; /* "?" with nothing after it is a present, empty query */
} slice_t;

typedef struct {
    slice_t scheme, auth, path, query, frag;
} parts_t;

/* RFC 3986 Appendix B: ^(([^:/?#]+):)?(//([^/?#]*))?([^?#]*)(\?([^#]*))?(#(.*))? with the
 * scheme also checked against its grammar, so "a b:c" or "1x:y" is a relative path. */
static void split(const char *s, size_t n, parts_t *u)
{
    memset(u, 0, sizeof *u);
    size_t i = 0;
    if (n && ((s[0] | 0x20) >= 'a' && (s[0] | 0x20) <= 'z')) {
        size_t k = 1;
        while (k < n && has((unsigned char)s[k], CH_SCHEME))
            k++;
        if (k < n && s[k] == ':') {
            u->scheme = (slice_t){s, k, true};
            i = k + 1;
        }
    }
    if (n - i >= 2 && s[i] == '/' && s[i + 1] == '/') {
        size_t k = i + 2;
        while (k < n && s[k] != '/' && s[k] != '?' && s[k] != '#')
            k++;
        u->auth = (slice_t){s + i + 2, k - i - 2, true};
        i = k;
    }
    size_t k = i;
    while (k < n && s[k] != '?' && s[k] != '#')
        k++;
    u->path = (slice_t){s + i, k - i, true};
    i = k;
    if (i < n && s[i] == '?') {
        k = ++i;
        while (k < n && s[k] != '#')
            k++;
        u->query = (slice_t){s + i, k - i, true};
        i = k;
    }
    if (i < n && s[i] == '#')
        u->frag = (slice_t){s + i + 1, n - i - 1, true};
}

/* RFC 3986 §5.2.4, appending to b. Segments are popped back to b->n at entry, never further,
 * so the path cannot eat what was written before it. */
static void remove_dots(const char *in, size_t n, buf_t *b)
{
    size_t floor = b->n, i = 0;
    while (i < n && !b->over) {
        size_t rest = n - i;
        const char *p = in + i;
        if (rest >= 3 && p[0] == '.' && p[1] == '.' && p[2] == '/') {
            i += 3; /* A */
        } else if (rest >= 2 && p[0] == '.' && p[1] == '/') {
            i += 2; /* A */
        } else if (rest >= 3 && p[0] == '/' && p[1] == '.' && p[2] == '/') {
            i += 2; /* B: "/./" -> "/" */
        } else if (rest == 2 && p[0] == '/' && p[1] == '.') {
            put_c(b, '/'); /* B: "/." at the end */
            i = n;
        } else if (rest >= 3 && p[0] == '/' && p[1] == '.' && p[2] == '.' &&
                   (rest == 3 || p[3] == '/')) {
            /* C: "/../" -> "/" or "/.." at the end -> "/", dropping the last output segment */
            while (b->n > floor && b->p[b->n - 1] != '/')
                b->n--;
            if (b->n > floor)
                b->n--;
            if (rest == 3) {
                put_c(b, '/');
                i = n;
            } else {
                i += 3;
            }
        } else if ((rest == 1 && p[0] == '.') || (rest == 2 && p[0] == '.' && p[1] == '.')) {
            i = n; /* D */
        } else {
            size_t k = 1; /* E: the first segment, with its leading '/' if any */
            while (k < rest && p[k] != '/')
                k++;
            put(b, p, k);
            i += k;
        }
    }
}

static void trim(const char **s, size_t *n)
{
    while (*n && is_ws((unsigned char)**s)) {
        (*s)++;
        (*n)--;
    }
    while (*n && is_ws((unsigned char)(*s)[*n - 1]))
        (*n)--;
}

/* ---- resolution ------------------------------------------------------------------------- */

int nf_url_resolve(const char *base, const char *ref, char *out, size_t outlen)
{
    size_t rn = ref ? strlen(ref) : 0, bn = base ? strlen(base) : 0;
    trim(&ref, &rn);
    trim(&base, &bn);
    if (rn == 0 && bn == 0)
        return NF_URL_E_EMPTY;
    parts_t r, b, t;
    split(ref ? ref : "", rn, &r);
    split(base ? base : "", bn, &b);
    if (!r.scheme.has && !b.scheme.has)
        return NF_URL_E_SYNTAX; /* nothing absolute to resolve against */

    char tmp[NF_URL_MAX];
    buf_t path = {tmp, 0, sizeof tmp, false};
    bool dots = true;
    if (r.scheme.has) {
        t = r;
    } else {
        t.scheme = b.scheme;
        t.frag = r.frag;
        if (r.auth.has) {
            t.auth = r.auth;
            t.path = r.path;
            t.query = r.query;
        } else {
            t.auth = b.auth;
            if (r.path.n == 0) {
                t.path = b.path;
                t.query = r.query.has ? r.query : b.query;
                dots = false;
            } else {
                t.query = r.query;
                if (r.path.p[0] == '/') {
                    t.path = r.path;
                } else {
                    /* §5.2.3 merge: the base path up to its last '/', or "/" when the base
                     * has an authority and an empty path. */
                    if (b.auth.has && b.path.n == 0) {
                        put_c(&path, '/');
                    } else {
                        size_t k = b.path.n;
                        while (k && b.path.p[k - 1] != '/')
                            k--;
                        put(&path, b.path.p, k);
                    }
                    put(&path, r.path.p, r.path.n);
                    if (path.over)
                        return NF_URL_E_TOO_LONG;
                    t.path = (slice_t){tmp, path.n, true};
                }
            }
        }
    }

    /* §5.3 recomposition */
    buf_t o = {out, 0, outlen, false};
    put(&o, t.scheme.p, t.scheme.n);
    put_c(&o, ':');
    if (t.auth.has) {
        put(&o, "//", 2);
        put(&o, t.auth.p, t.auth.n);
    }
    if (dots)
        remove_dots(t.path.p, t.path.n, &o);
    else
        put(&o, t.path.p, t.path.n);
    if (t.query.has) {
        put_c(&o, '?');
        put(&o, t.query.p, t.query.n);
    }
    if (t.frag.has) {
        put_c(&o, '#');
        put(&o, t.frag.p, t.frag.n);
    }
    return finish(&o);
}

/* ---- normalization ---------------------------------------------------------------------- */

/* Query parameters that identify a click, a campaign or a mailing, never the article. Names
 * are compared as sent (after percent-normalization), case-sensitively: "ID" and "id" can be
 * different parameters to a server. "utm_" is a prefix; the rest are exact. */
static const char *const tracking_params[] = {
    "_ga",     "_gl",         "_hsenc",     "_hsmi",      "_openstat", "dclid",   "fbclid",
    "gbraid",  "gclid",       "gclsrc",     "igshid",     "mc_cid",    "mc_eid",  "mkt_tok",
    "msclkid", "oly_anon_id", "oly_enc_id", "rb_clickid", "ref_src",   "s_kwcid", "ttclid",
    "twclid",  "vero_id",     "wbraid",     "yclid",
};
#define TRACKING_PREFIX "utm_"

static bool is_tracking(const char *name, size_t n)
{
    if (n >= 4 && memcmp(name, TRACKING_PREFIX, 4) == 0)
        return true;
    for (size_t i = 0; i < sizeof tracking_params / sizeof tracking_params[0]; i++) {
        const char *t = tracking_params[i];
        if (strncmp(t, name, n) == 0 && t[n] == '\0')
            return true;
    }
    return false;
}

/* §6.2.2.1/6.2.2.2: "%xx" upper-cased, or decoded when it encodes an unreserved character;
 * bytes the component may not contain literally (space, '"', '<', non-ASCII, a '%' that does
 * not start an escape, ...) encoded. 'extra' lists the delimiters the component allows
 * besides unreserved and sub-delims. */
static void pct_normalize(const char *s, size_t n, const char *extra, buf_t *b)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '%' && n - i >= 3 && has((unsigned char)s[i + 1], CH_HEX) &&
            has((unsigned char)s[i + 2], CH_HEX)) {
            unsigned char v = (unsigned char)(hex_val((unsigned char)s[i + 1]) << 4 |
                                              hex_val((unsigned char)s[i + 2]));
            if (has(v, CH_UNRESERVED)) {
                put_c(b, (char)v);
            } else {
                char e[3] = {'%', hex[v >> 4], hex[v & 15]};
                put(b, e, 3);
            }
            i += 2;
        } else if (has(c, CH_UNRESERVED | CH_SUBDELIM) || (c && c != '%' && strchr(extra, c))) {
            put_c(b, (char)c);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            put(b, e, 3);
        }
    }
}

/* The host, lower-cased and in ASCII: IPv6 literals checked and kept in brackets, reg-names
 * percent-decoded, their trailing dot dropped and, if not ASCII, converted with IDNA 2008
 * (UTS #46 non-transitional, which also case-folds; transitional as a fallback for the few
 * names only IDNA 2003 accepted). */
static int put_host(const char *h, size_t n, buf_t *b)
{
    if (n == 0)
        return NF_URL_E_HOST;
    if (h[0] == '[') {
        if (n < 4 || h[n - 1] != ']')
            return NF_URL_E_HOST;
        bool colon = false;
        for (size_t i = 1; i + 1 < n; i++) {
            char c = lower(h[i]);
            if (c == ':')
                colon = true;
            else if (!has((unsigned char)c, CH_HEX) && c != '.')
                return NF_URL_E_HOST;
        }
        if (!colon)
            return NF_URL_E_HOST;
        for (size_t i = 0; i < n; i++)
            put_c(b, lower(h[i]));
        return 0;
    }

    char name[1024];
    size_t k = 0;
    bool ascii = true;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)h[i];
        if (c == '%') {
            if (n - i < 3 || !has((unsigned char)h[i + 1], CH_HEX) ||
                !has((unsigned char)h[i + 2], CH_HEX))
                return NF_URL_E_HOST;
            c = (unsigned char)(hex_val((unsigned char)h[i + 1]) << 4 |
                                hex_val((unsigned char)h[i + 2]));
            i += 2;
        }
        if (k + 1 >= sizeof name)
            return NF_URL_E_HOST;
        ascii &= c < 0x80;
        name[k++] = (char)c;
    }
    if (k && name[k - 1] == '.')
        k--; /* "example.com." is the same host */
    name[k] = '\0';

    const char *a = name;
    char *idn = NULL;
    if (!ascii) {
        if (idn2_to_ascii_8z(name, &idn, IDN2_NFC_INPUT | IDN2_NONTRANSITIONAL) != IDN2_OK &&
            idn2_to_ascii_8z(name, &idn, IDN2_NFC_INPUT | IDN2_TRANSITIONAL) != IDN2_OK)
            return NF_URL_E_HOST;
        a = idn;
        k = strlen(idn);
    }
    int rc = 0;
    /* letters, digits, '-', '_' (real hosts have it) in non-empty labels */
    for (size_t i = 0; i < k && rc == 0; i++) {
        char c = lower(a[i]);
        if (c == '.' ? (i == 0 || a[i - 1] == '.' || i + 1 == k)
                     : !(has((unsigned char)c, CH_UNRESERVED) && c != '~' && c != '.'))
            rc = NF_URL_E_HOST;
    }
    if (k == 0)
        rc = NF_URL_E_HOST;
    if (rc == 0)
        for (size_t i = 0; i < k; i++)
            put_c(b, lower(a[i]));
    idn2_free(idn);
    return rc;
}

int nf_url_normalize(const char *url, char *out, size_t outlen)
{
    size_t n = url ? strlen(url) : 0;
    trim(&url, &n);
    if (n == 0)
        return NF_URL_E_EMPTY;
    parts_t u;
    split(url, n, &u);
    if (!u.scheme.has)
        return NF_URL_E_SYNTAX;
    bool https;
    if (u.scheme.n == 4 && strncasecmp(u.scheme.p, "http", 4) == 0)
        https = false;
    else if (u.scheme.n == 5 && strncasecmp(u.scheme.p, "https", 5) == 0)
        https = true;
    else
        return NF_URL_E_SCHEME;
    if (!u.auth.has)
        return NF_URL_E_HOST;

    buf_t o = {out, 0, outlen, false};
    put(&o, https ? "https://" : "http://", https ? 8 : 7);

    /* authority = [ userinfo "@" ] host [ ":" port ]; the last '@' ends the userinfo */
    const char *a = u.auth.p;
    size_t an = u.auth.n;
    for (size_t k = an; k-- > 0;) {
        if (a[k] == '@') {
            if (k) {
                pct_normalize(a, k, ":", &o);
                put_c(&o, '@');
            }
            a += k + 1;
            an -= k + 1;
            break;
        }
    }
    size_t hn = an;
    if (an && a[0] == '[') {
        const char *e = memchr(a, ']', an);
        hn = e ? (size_t)(e - a) + 1 : an;
        if (hn < an && a[hn] != ':')
            return NF_URL_E_HOST;
    } else {
        const char *e = memchr(a, ':', an);
        if (e)
            hn = (size_t)(e - a);
    }
    int rc = put_host(a, hn, &o);
    if (rc)
        return rc;
    if (hn < an) {
        /* ":" alone is an empty port, dropped (§6.2.3); leading zeros do not count */
        unsigned long port = 0;
        size_t digits = 0;
        for (size_t i = hn + 1; i < an; i++) {
            if (a[i] < '0' || a[i] > '9')
                return NF_URL_E_PORT;
            port = port * 10 + (unsigned long)(a[i] - '0');
            if (port > 65535)
                return NF_URL_E_PORT;
            digits++;
        }
        if (digits && port == 0)
            return NF_URL_E_PORT;
        if (digits && port != (https ? 443u : 80u)) {
            char pb[8];
            int pn = 0;
            char rev[6];
            do {
                rev[pn++] = (char)('0' + port % 10);
                port /= 10;
            } while (port);
            pb[0] = ':';
            for (int i = 0; i < pn; i++)
                pb[1 + i] = rev[pn - 1 - i];
            put(&o, pb, (size_t)pn + 1);
        }
    }

    /* Decode before removing dot segments, so "%2E%2E" is a ".." like any other. */
    char tmp[NF_URL_MAX];
    buf_t path = {tmp, 0, sizeof tmp, false};
    pct_normalize(u.path.p, u.path.n, ":@/", &path);
    if (path.over)
        return NF_URL_E_TOO_LONG;
    if (path.n == 0)
        put_c(&o, '/');
    else
        remove_dots(tmp, path.n, &o);

    if (u.query.has && u.query.n) {
        size_t q0 = o.n;
        put_c(&o, '?');
        pct_normalize(u.query.p, u.query.n, ":@/?", &o);
        if (o.over)
            return NF_URL_E_TOO_LONG;
        /* Filter the parameters in place: the kept ones only move left. */
        size_t w = q0 + 1, r = q0 + 1;
        while (r <= o.n) {
            size_t e = r;
            while (e < o.n && o.p[e] != '&')
                e++;
            size_t name = r;
            while (name < e && o.p[name] != '=')
                name++;
            if (e > r && !is_tracking(o.p + r, name - r)) {
                if (w > q0 + 1)
                    o.p[w++] = '&';
                memmove(o.p + w, o.p + r, e - r);
                w += e - r;
            }
            r = e + 1;
        }
        o.n = w == q0 + 1 ? q0 : w; /* no parameter left: no '?' either */
    }
    return finish(&o);
}

void nf_url_article_id(const char *normalized, char out[33])
{
    uint8_t d[32];
    nf_sha256(normalized, strlen(normalized), d);
    nf_hex(d, 16, out);
}

const char *nf_url_strerror(int err)
{
    switch (err) {
    case NF_URL_E_EMPTY:
        return "empty URL";
    case NF_URL_E_SYNTAX:
        return "not an absolute URL";
    case NF_URL_E_SCHEME:
        return "scheme is not http or https";
    case NF_URL_E_HOST:
        return "missing or invalid host";
    case NF_URL_E_PORT:
        return "port is not a number in 1..65535";
    case NF_URL_E_TOO_LONG:
        return "URL too long";
    default:
        return err >= 0 ? "ok" : "unknown URL error";
    }
}
