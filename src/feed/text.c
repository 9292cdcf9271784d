/* text.c — feed text to clean plain text (see text.h), in one pass with no allocation.
 *
 * Every title, summary and body of every item goes through here, so the work is a single
 * forward scan over the input writing straight into the caller's buffer: a byte-class table
 * routes each byte (ordinary ASCII is copied on the spot), tags are skipped by a small state
 * machine modelled on the HTML5 tokenizer (only the parts that decide where a tag ends), and
 * entities are looked up by binary search in a sorted table. Nothing is ever rescanned except
 * the few bytes of an entity name, so the cost is linear even for hostile input.
 *
 * Where real browsers and "plain text" disagree we follow the browser, because the HTML was
 * written to look right in one: "<b" unclosed at the end is a tag and vanishes, "a < b" and
 * "<3" are text, comments and unclosed <script> run to the end. Two deliberate departures:
 * a legacy entity without ';' ("&amp", "&nbsp") is decoded only when not followed by a letter,
 * digit or '=' (the HTML5 attribute rule), since feed text is full of raw URLs such as
 * "?a=1&copy=2" or "&para=x"; and "<script/>" in XHTML content is self-closed instead of
 * swallowing the rest of the item. Control characters (C0 other than whitespace, DEL, C1 other
 * than NEL) and U+FEFF are dropped: they are invisible and poison downstream consumers. */
#include "feed/text.h"

#include <assert.h>
#include <stdint.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* ---- output: a bounded writer that collapses whitespace -------------------------------- */

/* Spaces are never written eagerly: a pending space is flushed only in front of the next
 * visible character, and only if both fit. That gives trimming at both ends, single spaces
 * and the cut on a code point boundary without ever having to back up. */
typedef struct {
    char *p;
    size_t n, cap; /* cap = max - 1: room for the NUL is kept aside */
    bool space;    /* a space is owed before the next visible character */
    bool full;     /* something did not fit: the output is final */
} out_t;

static inline void out_space(out_t *o)
{
    o->space = o->n != 0;
}

/* Appends the UTF-8 bytes of one visible code point (1..4 bytes in b). */
static inline void out_bytes(out_t *o, const char *b, size_t k)
{
    size_t need = k + o->space;
    if (o->cap - o->n < need) {
        o->full = true;
        return;
    }
    if (o->space) {
        o->p[o->n++] = ' ';
        o->space = false;
    }
    memcpy(o->p + o->n, b, k);
    o->n += k;
}

static inline void out_ascii(out_t *o, char c)
{
    if (o->cap - o->n < 1u + o->space) {
        o->full = true;
        return;
    }
    if (o->space) {
        o->p[o->n++] = ' ';
        o->space = false;
    }
    o->p[o->n++] = c;
}

/* ---- UTF-8 ------------------------------------------------------------------------------ */

/* Not a code point: what utf8_next() reports for invalid input. */
#define UTF8_BAD 0x110000u

/* Decodes one code point at s (len >= 1). Invalid input yields UTF8_BAD for its maximal subpart
 * (Unicode §3.9 / WHATWG): the bytes that could start a valid sequence are consumed together,
 * and the first byte that breaks it is left for the next call. */
static inline size_t utf8_next(const unsigned char *s, size_t len, uint32_t *cp)
{
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t need;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    uint32_t v;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 1;
        v = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        v = c & 0x0F;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        else if (c == 0xED)
            hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        v = c & 0x07;
        if (c == 0xF0)
            lo = 0x90; /* overlong */
        else if (c == 0xF4)
            hi = 0x8F; /* > U+10FFFF */
    } else {
        *cp = UTF8_BAD; /* continuation byte, C0/C1 overlong lead, F5..FF */
        return 1;
    }
    size_t i = 1;
    for (; i <= need; i++) {
        if (i >= len)
            break;
        unsigned b = s[i];
        if (i == 1 ? (b < lo || b > hi) : (b & 0xC0) != 0x80)
            break;
        v = v << 6 | (b & 0x3F);
    }
    if (i <= need) {
        *cp = UTF8_BAD;
        return i;
    }
    *cp = v;
    return need + 1;
}

static inline size_t utf8_put(uint32_t cp, char b[4])
{
    if (cp < 0x80) {
        b[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        b[0] = (char)(0xC0 | cp >> 6);
        b[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        b[0] = (char)(0xE0 | cp >> 12);
        b[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        b[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    b[0] = (char)(0xF0 | cp >> 18);
    b[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    b[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    b[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Unicode White_Space (which includes NBSP and U+2000..U+200A) collapses to one ASCII space;
 * invisible control characters are dropped; everything else is written as is. */
static void out_cp(out_t *o, uint32_t cp)
{
    if (cp < 0x80) {
        if (cp > 0x20 && cp != 0x7F)
            out_ascii(o, (char)cp);
        else if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D))
            out_space(o);
        return;
    }
    if (cp < 0xA0) {
        if (cp == 0x85)
            out_space(o);
        return;
    }
    if (cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
        cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000) {
        out_space(o);
        return;
    }
    if (cp == 0xFEFF)
        return;
    char b[4];
    out_bytes(o, b, utf8_put(cp, b));
}

/* ---- character references --------------------------------------------------------------- */

/* The HTML 4 set (latin1, symbols, special), apos, the upper-case legacy forms, and the HTML5
 * names that turn up in real feed text (ASCII punctuation, spaces, quotes). Sorted by byte
 * value for the binary search; legacy = also recognised without ';' (HTML5 legacy list). The
 * full HTML5 list (2231 names) would triple the table for names no feed uses. */
typedef struct {
    char name[17];
    uint32_t cp;
    uint8_t legacy;
} entity_t;

static const entity_t entities[] = {
    {"AElig", 0x00C6, 1},    {"AMP", 0x0026, 1},
    {"Aacute", 0x00C1, 1},   {"Acirc", 0x00C2, 1},
    {"Agrave", 0x00C0, 1},   {"Alpha", 0x0391, 0},
    {"Aring", 0x00C5, 1},    {"Atilde", 0x00C3, 1},
    {"Auml", 0x00C4, 1},     {"Beta", 0x0392, 0},
    {"COPY", 0x00A9, 1},     {"Ccedil", 0x00C7, 1},
    {"Chi", 0x03A7, 0},      {"Dagger", 0x2021, 0},
    {"Delta", 0x0394, 0},    {"ETH", 0x00D0, 1},
    {"Eacute", 0x00C9, 1},   {"Ecirc", 0x00CA, 1},
    {"Egrave", 0x00C8, 1},   {"Epsilon", 0x0395, 0},
    {"Eta", 0x0397, 0},      {"Euml", 0x00CB, 1},
    {"GT", 0x003E, 1},       {"Gamma", 0x0393, 0},
    {"Hat", 0x005E, 0},      {"Iacute", 0x00CD, 1},
    {"Icirc", 0x00CE, 1},    {"Igrave", 0x00CC, 1},
    {"Iota", 0x0399, 0},     {"Iuml", 0x00CF, 1},
    {"Kappa", 0x039A, 0},    {"LT", 0x003C, 1},
    {"Lambda", 0x039B, 0},   {"MediumSpace", 0x205F, 0},
    {"Mu", 0x039C, 0},       {"NewLine", 0x000A, 0},
    {"NoBreak", 0x2060, 0},  {"NonBreakingSpace", 0x00A0, 0},
    {"Ntilde", 0x00D1, 1},   {"Nu", 0x039D, 0},
    {"OElig", 0x0152, 0},    {"Oacute", 0x00D3, 1},
    {"Ocirc", 0x00D4, 1},    {"Ograve", 0x00D2, 1},
    {"Omega", 0x03A9, 0},    {"Omicron", 0x039F, 0},
    {"Oslash", 0x00D8, 1},   {"Otilde", 0x00D5, 1},
    {"Ouml", 0x00D6, 1},     {"Phi", 0x03A6, 0},
    {"Pi", 0x03A0, 0},       {"Prime", 0x2033, 0},
    {"Psi", 0x03A8, 0},      {"QUOT", 0x0022, 1},
    {"REG", 0x00AE, 1},      {"Rho", 0x03A1, 0},
    {"Scaron", 0x0160, 0},   {"Sigma", 0x03A3, 0},
    {"THORN", 0x00DE, 1},    {"TRADE", 0x2122, 0},
    {"Tab", 0x0009, 0},      {"Tau", 0x03A4, 0},
    {"Theta", 0x0398, 0},    {"Uacute", 0x00DA, 1},
    {"Ucirc", 0x00DB, 1},    {"Ugrave", 0x00D9, 1},
    {"Upsilon", 0x03A5, 0},  {"Uuml", 0x00DC, 1},
    {"Xi", 0x039E, 0},       {"Yacute", 0x00DD, 1},
    {"Yuml", 0x0178, 0},     {"ZeroWidthSpace", 0x200B, 0},
    {"Zeta", 0x0396, 0},     {"aacute", 0x00E1, 1},
    {"acirc", 0x00E2, 1},    {"acute", 0x00B4, 1},
    {"aelig", 0x00E6, 1},    {"agrave", 0x00E0, 1},
    {"alefsym", 0x2135, 0},  {"alpha", 0x03B1, 0},
    {"amp", 0x0026, 1},      {"and", 0x2227, 0},
    {"ang", 0x2220, 0},      {"apos", 0x0027, 0},
    {"aring", 0x00E5, 1},    {"ast", 0x002A, 0},
    {"asymp", 0x2248, 0},    {"atilde", 0x00E3, 1},
    {"auml", 0x00E4, 1},     {"bdquo", 0x201E, 0},
    {"beta", 0x03B2, 0},     {"brvbar", 0x00A6, 1},
    {"bsol", 0x005C, 0},     {"bull", 0x2022, 0},
    {"bullet", 0x2022, 0},   {"cap", 0x2229, 0},
    {"ccedil", 0x00E7, 1},   {"cedil", 0x00B8, 1},
    {"cent", 0x00A2, 1},     {"centerdot", 0x00B7, 0},
    {"check", 0x2713, 0},    {"chi", 0x03C7, 0},
    {"circ", 0x02C6, 0},     {"clubs", 0x2663, 0},
    {"colon", 0x003A, 0},    {"comma", 0x002C, 0},
    {"commat", 0x0040, 0},   {"cong", 0x2245, 0},
    {"copy", 0x00A9, 1},     {"copysr", 0x2117, 0},
    {"crarr", 0x21B5, 0},    {"cross", 0x2717, 0},
    {"cup", 0x222A, 0},      {"curren", 0x00A4, 1},
    {"dArr", 0x21D3, 0},     {"dagger", 0x2020, 0},
    {"darr", 0x2193, 0},     {"dash", 0x2010, 0},
    {"deg", 0x00B0, 1},      {"delta", 0x03B4, 0},
    {"diams", 0x2666, 0},    {"divide", 0x00F7, 1},
    {"dollar", 0x0024, 0},   {"eacute", 0x00E9, 1},
    {"ecirc", 0x00EA, 1},    {"egrave", 0x00E8, 1},
    {"empty", 0x2205, 0},    {"emsp", 0x2003, 0},
    {"ensp", 0x2002, 0},     {"epsilon", 0x03B5, 0},
    {"equals", 0x003D, 0},   {"equiv", 0x2261, 0},
    {"eta", 0x03B7, 0},      {"eth", 0x00F0, 1},
    {"euml", 0x00EB, 1},     {"euro", 0x20AC, 0},
    {"excl", 0x0021, 0},     {"exist", 0x2203, 0},
    {"fnof", 0x0192, 0},     {"forall", 0x2200, 0},
    {"frac12", 0x00BD, 1},   {"frac14", 0x00BC, 1},
    {"frac34", 0x00BE, 1},   {"frasl", 0x2044, 0},
    {"gamma", 0x03B3, 0},    {"ge", 0x2265, 0},
    {"grave", 0x0060, 0},    {"gt", 0x003E, 1},
    {"hArr", 0x21D4, 0},     {"hairsp", 0x200A, 0},
    {"half", 0x00BD, 0},     {"harr", 0x2194, 0},
    {"hearts", 0x2665, 0},   {"hellip", 0x2026, 0},
    {"horbar", 0x2015, 0},   {"hyphen", 0x2010, 0},
    {"iacute", 0x00ED, 1},   {"icirc", 0x00EE, 1},
    {"iexcl", 0x00A1, 1},    {"igrave", 0x00EC, 1},
    {"image", 0x2111, 0},    {"infin", 0x221E, 0},
    {"int", 0x222B, 0},      {"iota", 0x03B9, 0},
    {"iquest", 0x00BF, 1},   {"isin", 0x2208, 0},
    {"iuml", 0x00EF, 1},     {"kappa", 0x03BA, 0},
    {"lArr", 0x21D0, 0},     {"lambda", 0x03BB, 0},
    {"lang", 0x2329, 0},     {"laquo", 0x00AB, 1},
    {"larr", 0x2190, 0},     {"lceil", 0x2308, 0},
    {"lcub", 0x007B, 0},     {"ldquo", 0x201C, 0},
    {"ldquor", 0x201E, 0},   {"le", 0x2264, 0},
    {"lfloor", 0x230A, 0},   {"lowast", 0x2217, 0},
    {"lowbar", 0x005F, 0},   {"loz", 0x25CA, 0},
    {"lpar", 0x0028, 0},     {"lrm", 0x200E, 0},
    {"lsaquo", 0x2039, 0},   {"lsqb", 0x005B, 0},
    {"lsquo", 0x2018, 0},    {"lsquor", 0x201A, 0},
    {"lt", 0x003C, 1},       {"macr", 0x00AF, 1},
    {"mdash", 0x2014, 0},    {"micro", 0x00B5, 1},
    {"middot", 0x00B7, 1},   {"minus", 0x2212, 0},
    {"mldr", 0x2026, 0},     {"mu", 0x03BC, 0},
    {"nabla", 0x2207, 0},    {"nbsp", 0x00A0, 1},
    {"ndash", 0x2013, 0},    {"ne", 0x2260, 0},
    {"ni", 0x220B, 0},       {"not", 0x00AC, 1},
    {"notin", 0x2209, 0},    {"nsub", 0x2284, 0},
    {"ntilde", 0x00F1, 1},   {"nu", 0x03BD, 0},
    {"num", 0x0023, 0},      {"numsp", 0x2007, 0},
    {"oacute", 0x00F3, 1},   {"ocirc", 0x00F4, 1},
    {"oelig", 0x0153, 0},    {"ograve", 0x00F2, 1},
    {"oline", 0x203E, 0},    {"omega", 0x03C9, 0},
    {"omicron", 0x03BF, 0},  {"oplus", 0x2295, 0},
    {"or", 0x2228, 0},       {"ordf", 0x00AA, 1},
    {"ordm", 0x00BA, 1},     {"oslash", 0x00F8, 1},
    {"otilde", 0x00F5, 1},   {"otimes", 0x2297, 0},
    {"ouml", 0x00F6, 1},     {"para", 0x00B6, 1},
    {"part", 0x2202, 0},     {"percnt", 0x0025, 0},
    {"period", 0x002E, 0},   {"permil", 0x2030, 0},
    {"perp", 0x22A5, 0},     {"phi", 0x03C6, 0},
    {"pi", 0x03C0, 0},       {"piv", 0x03D6, 0},
    {"plus", 0x002B, 0},     {"plusmn", 0x00B1, 1},
    {"pound", 0x00A3, 1},    {"prime", 0x2032, 0},
    {"prod", 0x220F, 0},     {"prop", 0x221D, 0},
    {"psi", 0x03C8, 0},      {"puncsp", 0x2008, 0},
    {"quest", 0x003F, 0},    {"quot", 0x0022, 1},
    {"rArr", 0x21D2, 0},     {"radic", 0x221A, 0},
    {"rang", 0x232A, 0},     {"raquo", 0x00BB, 1},
    {"rarr", 0x2192, 0},     {"rceil", 0x2309, 0},
    {"rcub", 0x007D, 0},     {"rdquo", 0x201D, 0},
    {"rdquor", 0x201D, 0},   {"real", 0x211C, 0},
    {"reg", 0x00AE, 1},      {"rfloor", 0x230B, 0},
    {"rho", 0x03C1, 0},      {"rlm", 0x200F, 0},
    {"rpar", 0x0029, 0},     {"rsaquo", 0x203A, 0},
    {"rsqb", 0x005D, 0},     {"rsquo", 0x2019, 0},
    {"rsquor", 0x2019, 0},   {"sbquo", 0x201A, 0},
    {"scaron", 0x0161, 0},   {"sdot", 0x22C5, 0},
    {"sect", 0x00A7, 1},     {"semi", 0x003B, 0},
    {"shy", 0x00AD, 1},      {"sigma", 0x03C3, 0},
    {"sigmaf", 0x03C2, 0},   {"sim", 0x223C, 0},
    {"sol", 0x002F, 0},      {"spades", 0x2660, 0},
    {"star", 0x2606, 0},     {"starf", 0x2605, 0},
    {"sub", 0x2282, 0},      {"sube", 0x2286, 0},
    {"sum", 0x2211, 0},      {"sup", 0x2283, 0},
    {"sup1", 0x00B9, 1},     {"sup2", 0x00B2, 1},
    {"sup3", 0x00B3, 1},     {"supe", 0x2287, 0},
    {"szlig", 0x00DF, 1},    {"tau", 0x03C4, 0},
    {"there4", 0x2234, 0},   {"theta", 0x03B8, 0},
    {"thetasym", 0x03D1, 0}, {"thinsp", 0x2009, 0},
    {"thorn", 0x00FE, 1},    {"tilde", 0x02DC, 0},
    {"times", 0x00D7, 1},    {"trade", 0x2122, 0},
    {"uArr", 0x21D1, 0},     {"uacute", 0x00FA, 1},
    {"uarr", 0x2191, 0},     {"ucirc", 0x00FB, 1},
    {"ugrave", 0x00F9, 1},   {"uml", 0x00A8, 1},
    {"upsih", 0x03D2, 0},    {"upsilon", 0x03C5, 0},
    {"uuml", 0x00FC, 1},     {"verbar", 0x007C, 0},
    {"vert", 0x007C, 0},     {"weierp", 0x2118, 0},
    {"xi", 0x03BE, 0},       {"yacute", 0x00FD, 1},
    {"yen", 0x00A5, 1},      {"yuml", 0x00FF, 1},
    {"zeta", 0x03B6, 0},     {"zwj", 0x200D, 0},
    {"zwnj", 0x200C, 0},
};

#define ENTITY_NAME_MAX 16

/* strcmp order of a table name against (name, n), which has no NUL. Inline: a library call
 * per probe was a third of the time on entity-heavy text. */
static inline int name_cmp(const char *e, const char *name, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (e[i] != name[i])
            return (unsigned char)e[i] - (unsigned char)name[i];
    return e[n] != '\0';
}

static const entity_t *entity_find(const char *name, size_t n)
{
    size_t lo = 0, hi = sizeof entities / sizeof entities[0];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = name_cmp(entities[mid].name, name, n);
        if (c == 0)
            return &entities[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* What browsers do for &#128;..&#159;: the author meant windows-1252. Zero = undefined there,
 * the code point is kept (and then dropped as a control character). */
static const uint16_t cp1252[32] = {
    0x20AC, 0,      0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160,
    0x2039, 0x0152, 0,      0x017D, 0,      0,      0x2018, 0x2019, 0x201C, 0x201D, 0x2022,
    0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0,      0x017E, 0x0178,
};

static inline bool is_alpha(unsigned c)
{
    return (c | 0x20) - 'a' < 26;
}

static inline bool is_digit(unsigned c)
{
    return c - '0' < 10;
}

static inline int hex_val(unsigned c)
{
    if (is_digit(c))
        return (int)(c - '0');
    c |= 0x20;
    if (c - 'a' < 6)
        return (int)(c - 'a' + 10);
    return -1;
}

/* s[0] == '&'. Decodes a character reference into *cp and returns the bytes it spans, or 0 if
 * there is none (the '&' is then literal text, and so is whatever follows it). */
static size_t entity_decode(const unsigned char *s, size_t len, uint32_t *cp)
{
    size_t i = 1;
    if (i < len && s[i] == '#') {
        i++;
        bool hex = i < len && (s[i] | 0x20) == 'x';
        i += hex;
        size_t start = i;
        uint32_t v = 0;
        for (; i < len; i++) {
            int d = hex ? hex_val(s[i]) : (is_digit(s[i]) ? s[i] - '0' : -1);
            if (d < 0)
                break;
            v = v * (hex ? 16 : 10) + (uint32_t)d;
            if (v > 0x10FFFF)
                v = 0x110000; /* saturate: stays invalid however many digits follow */
        }
        if (i == start)
            return 0;
        if (i < len && s[i] == ';')
            i++;
        if (v == 0 || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
            v = 0xFFFD;
        else if (v >= 0x80 && v <= 0x9F && cp1252[v - 0x80])
            v = cp1252[v - 0x80];
        *cp = v;
        return i;
    }
    while (i < len && i <= ENTITY_NAME_MAX + 1 && (is_alpha(s[i]) || is_digit(s[i])))
        i++;
    size_t n = i - 1;
    if (n == 0 || n > ENTITY_NAME_MAX)
        return 0;
    const entity_t *e = entity_find((const char *)s + 1, n);
    if (!e)
        return 0;
    if (i < len && s[i] == ';') {
        *cp = e->cp;
        return i + 1;
    }
    if (!e->legacy || (i < len && s[i] == '='))
        return 0;
    *cp = e->cp;
    return i;
}

/* ---- markup ----------------------------------------------------------------------------- */

enum { T, S, C, A, L, R, H }; /* text, space, control, '&', '<', ']', non-ASCII */

static const uint8_t byte_class[256] = {
    C, C, C, C, C, C, C, C, C, S, S, S, S, S, C, C, /* 00 */
    C, C, C, C, C, C, C, C, C, C, C, C, C, C, C, C, /* 10 */
    S, T, T, T, T, T, A, T, T, T, T, T, T, T, T, T, /* 20 */
    T, T, T, T, T, T, T, T, T, T, T, T, L, T, T, T, /* 30 */
    T, T, T, T, T, T, T, T, T, T, T, T, T, T, T, T, /* 40 */
    T, T, T, T, T, T, T, T, T, T, T, T, T, R, T, T, /* 50 */
    T, T, T, T, T, T, T, T, T, T, T, T, T, T, T, T, /* 60 */
    T, T, T, T, T, T, T, T, T, T, T, T, T, T, T, C, /* 70 */
    H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, /* 80 */
    H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, /* 90 */
    H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, /* a0 */
    H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, /* b0 */
    H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, /* c0 */
    H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, /* d0 */
    H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, /* e0 */
    H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, /* f0 */
};

enum { TAG_INLINE = 1, TAG_RAW = 2 };

/* Tags not listed are block-like: they separate words ("<p>a</p><p>b</p>" is "a b", and so is
 * an unknown "<o:p>"); a missing space between words is worse than an extra one, which the
 * collapsing absorbs. TAG_RAW: content is not text and is dropped up to the end tag. Sorted. */
static const struct {
    char name[9];
    uint8_t kind;
} tags[] = {
    {"a", TAG_INLINE},      {"abbr", TAG_INLINE},   {"acronym", TAG_INLINE}, {"b", TAG_INLINE},
    {"bdi", TAG_INLINE},    {"bdo", TAG_INLINE},    {"big", TAG_INLINE},     {"blink", TAG_INLINE},
    {"cite", TAG_INLINE},   {"code", TAG_INLINE},   {"data", TAG_INLINE},    {"del", TAG_INLINE},
    {"dfn", TAG_INLINE},    {"em", TAG_INLINE},     {"font", TAG_INLINE},    {"i", TAG_INLINE},
    {"iframe", TAG_RAW},    {"ins", TAG_INLINE},    {"kbd", TAG_INLINE},     {"label", TAG_INLINE},
    {"mark", TAG_INLINE},   {"nobr", TAG_INLINE},   {"noembed", TAG_RAW},    {"noframes", TAG_RAW},
    {"noscript", TAG_RAW},  {"q", TAG_INLINE},      {"rb", TAG_INLINE},      {"rp", TAG_INLINE},
    {"rt", TAG_INLINE},     {"rtc", TAG_INLINE},    {"ruby", TAG_INLINE},    {"s", TAG_INLINE},
    {"samp", TAG_INLINE},   {"script", TAG_RAW},    {"small", TAG_INLINE},   {"span", TAG_INLINE},
    {"strike", TAG_INLINE}, {"strong", TAG_INLINE}, {"style", TAG_RAW},      {"sub", TAG_INLINE},
    {"sup", TAG_INLINE},    {"svg", TAG_RAW},       {"template", TAG_RAW},   {"time", TAG_INLINE},
    {"title", TAG_RAW},     {"tt", TAG_INLINE},     {"u", TAG_INLINE},       {"var", TAG_INLINE},
    {"wbr", TAG_INLINE},
};

static unsigned tag_kind(const char *name, size_t n)
{
    if (n >= sizeof tags[0].name)
        return 0;
    size_t lo = 0, hi = sizeof tags / sizeof tags[0];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = name_cmp(tags[mid].name, name, n);
        if (c == 0)
            return tags[mid].kind;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

static inline bool is_tag_space(unsigned c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r';
}

/* Where a <!...>, <?...> or </ ...> (all "bogus comments" to HTML5) ends: after the next '>'. */
static size_t skip_to_gt(const unsigned char *s, size_t len, size_t j)
{
    const unsigned char *g = j < len ? memchr(s + j, '>', len - j) : NULL;
    return g ? (size_t)(g - s) + 1 : len;
}

/* s[b-4..b) == "<!--". Ends at "-->" or "--!>", or at once for "<!-->" and "<!--->". */
static size_t skip_comment(const unsigned char *s, size_t len, size_t b)
{
    for (size_t k = b; k < len;) {
        const unsigned char *p = memchr(s + k, '>', len - k);
        if (!p)
            break;
        size_t g = (size_t)(p - s);
        if (g == b || (g == b + 1 && s[b] == '-') ||
            (g >= b + 2 && s[g - 1] == '-' && s[g - 2] == '-') ||
            (g >= b + 3 && s[g - 1] == '!' && s[g - 2] == '-' && s[g - 3] == '-'))
            return g + 1;
        k = g + 1;
    }
    return len;
}

/* Skips raw text (script, style, ...) from j up to and including its end tag </name ...>. */
static size_t skip_raw(const unsigned char *s, size_t len, size_t j, const char *name, size_t n)
{
    while (j < len) {
        const unsigned char *p = memchr(s + j, '<', len - j);
        if (!p)
            break;
        size_t k = (size_t)(p - s);
        if (len - k >= n + 2 && s[k + 1] == '/' &&
            strncasecmp((const char *)s + k + 2, name, n) == 0 &&
            (len - k == n + 2 || is_tag_space(s[k + 2 + n]) || s[k + 2 + n] == '/' ||
             s[k + 2 + n] == '>'))
            return skip_to_gt(s, len, k + 2 + n);
        j = k + 1;
    }
    return len;
}

/* s[j] starts a tag name (after "<" or "</"). Finds the '>' that ends the tag the way the HTML5
 * tokenizer does: quotes only count where an attribute value starts, so "<img alt=Don't>"
 * ends at its '>' while "<a title='x > y'>" does not end inside the quotes. Returns the index
 * after the tag (len if it is unclosed: a tag cut off at the end is dropped). */
static size_t tag_end(const unsigned char *s, size_t len, size_t j, bool *self_closing)
{
    enum { BEFORE_ATTR, ATTR_NAME, AFTER_NAME, BEFORE_VALUE, UNQUOTED } st = BEFORE_ATTR;
    bool slash = false;
    for (; j < len; j++) {
        unsigned c = s[j];
        if (c == '>' && st != UNQUOTED) {
            *self_closing = slash;
            return j + 1;
        }
        switch (st) {
        case BEFORE_ATTR:
            slash = c == '/';
            if (!slash && !is_tag_space(c))
                st = ATTR_NAME;
            break;
        case ATTR_NAME:
        case AFTER_NAME:
            if (c == '=')
                st = BEFORE_VALUE;
            else if (c == '/') {
                st = BEFORE_ATTR;
                slash = true;
            } else if (is_tag_space(c))
                st = AFTER_NAME;
            else
                st = ATTR_NAME;
            break;
        case BEFORE_VALUE:
            if (c == '"' || c == '\'') {
                const unsigned char *q = memchr(s + j + 1, (int)c, len - j - 1);
                if (!q)
                    return len;
                j = (size_t)(q - s);
                st = BEFORE_ATTR;
            } else if (!is_tag_space(c))
                st = UNQUOTED;
            break;
        case UNQUOTED:
            if (c == '>') {
                *self_closing = false;
                return j + 1;
            }
            if (is_tag_space(c))
                st = BEFORE_ATTR;
            break;
        }
    }
    return len;
}

/* s[i] == '<'. Consumes the markup that starts here and returns where text resumes; a '<'
 * that does not start markup is written as text. */
static size_t markup(const unsigned char *s, size_t len, size_t i, out_t *o)
{
    size_t j = i + 1;
    bool closing = false;
    if (j < len && s[j] == '/') {
        if (j + 1 < len && s[j + 1] == '>')
            return j + 2; /* "</>" is nothing */
        if (j + 1 < len && !is_alpha(s[j + 1]))
            return skip_to_gt(s, len, j + 1);
        closing = true;
        j++;
    } else if (j < len && s[j] == '!') {
        if (len - j >= 3 && s[j + 1] == '-' && s[j + 2] == '-')
            return skip_comment(s, len, j + 3);
        /* A CDATA section left over from double wrapping: its text is text; "]]>" is dropped
         * where it is seen. */
        if (len - j >= 8 && memcmp(s + j + 1, "[CDATA[", 7) == 0)
            return j + 8;
        return skip_to_gt(s, len, j + 1);
    } else if (j < len && s[j] == '?') {
        return skip_to_gt(s, len, j + 1);
    }
    if (j >= len || !is_alpha(s[j])) {
        out_ascii(o, '<');
        return i + 1; /* "a < b", "<3", "</" at the end */
    }

    char name[16];
    size_t n = 0;
    for (; j < len && !is_tag_space(s[j]) && s[j] != '/' && s[j] != '>'; j++, n++)
        if (n < sizeof name)
            name[n] = (char)(s[j] | (is_alpha(s[j]) ? 0x20 : 0));
    bool self_closing = false;
    size_t next = tag_end(s, len, j, &self_closing);
    unsigned kind = n <= sizeof name ? tag_kind(name, n) : 0;
    if (!(kind & TAG_INLINE))
        out_space(o);
    if ((kind & TAG_RAW) && !closing && !self_closing)
        next = skip_raw(s, len, next, name, n);
    return next;
}

/* ---- the one pass ----------------------------------------------------------------------- */

#ifdef __SSE2__
/* Bit k set where v[k] is not text and not a space: C0 controls and tabs/newlines, DEL,
 * '&', '<', ']', and every byte >= 0x80 (negative to the signed compare with 0x20). */
static inline unsigned not_text_mask(__m128i v)
{
    __m128i m = _mm_cmplt_epi8(v, _mm_set1_epi8(0x20));
    m = _mm_or_si128(m, _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7F)));
    m = _mm_or_si128(m, _mm_cmpeq_epi8(v, _mm_set1_epi8('&')));
    m = _mm_or_si128(m, _mm_cmpeq_epi8(v, _mm_set1_epi8('<')));
    m = _mm_or_si128(m, _mm_cmpeq_epi8(v, _mm_set1_epi8(']')));
    return (unsigned)_mm_movemask_epi8(m);
}
#endif

/* Where a run of text that continues at s[j] ends: at the first byte that is not class T,
 * except that a single space followed by a T byte stays in the run (it needs no collapsing,
 * and leaving the run at every word would cost a dispatch per word). This scan is most of the
 * time spent on ordinary prose, so with SSE2 (every x86-64) it looks at 16 bytes per step:
 * the bytes at j..j+15 and, for the "space followed by" test, their successors at j+1..j+16.
 * Both loops follow byte_class[]; the byte loop finishes the tail (and is all there is
 * without SSE2). */
static inline size_t text_run_end(const unsigned char *s, size_t len, size_t j)
{
#ifdef __SSE2__
    const __m128i space = _mm_set1_epi8(' ');
    for (; len - j > 16; j += 16) { /* s[j + 16] exists: every byte's successor is loaded */
        __m128i a = _mm_loadu_si128((const __m128i *)(s + j));
        __m128i b = _mm_loadu_si128((const __m128i *)(s + j + 1));
        unsigned spaces = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(a, space));
        unsigned next_not_t =
            not_text_mask(b) | (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(b, space));
        unsigned stop = not_text_mask(a) | (spaces & next_not_t);
        if (stop)
            return j + (size_t)__builtin_ctz(stop);
    }
#endif
    for (; j < len; j++)
        if (byte_class[s[j]] != T && !(s[j] == ' ' && j + 1 < len && byte_class[s[j + 1]] == T))
            break;
    return j;
}

static size_t convert(const char *in, size_t len, char *out, size_t max, bool html)
{
    assert(max >= 1);
    out_t o = {.p = out, .n = 0, .cap = max - 1, .space = false, .full = false};
    const unsigned char *s = (const unsigned char *)in;
    size_t i = 0;
    while (i < len && !o.full) {
        unsigned c = s[i];
        switch (byte_class[c]) {
        case T: {
            /* The common case: a run of plain ASCII is copied in one go, cut anywhere. */
            size_t j = text_run_end(s, len, i + 1);
            size_t room = o.cap - o.n;
            if (room < 1u + o.space) {
                o.full = true;
                break;
            }
            if (o.space) {
                o.p[o.n++] = ' ';
                o.space = false;
                room--;
            }
            size_t k = j - i <= room ? j - i : room;
            if (k < j - i && s[i + k - 1] == ' ')
                k--; /* cut after a word's space: the output must not end in one */
            memcpy(o.p + o.n, s + i, k);
            o.n += k;
            o.full = k < j - i;
            i = j;
            break;
        }
        case S:
            out_space(&o);
            i++;
            break;
        case C:
            i++;
            break;
        case A: {
            uint32_t cp;
            size_t k = entity_decode(s + i, len - i, &cp);
            if (k) {
                out_cp(&o, cp);
                i += k;
            } else {
                out_ascii(&o, '&');
                i++;
            }
            break;
        }
        case L:
            if (html) {
                i = markup(s, len, i, &o);
            } else {
                out_ascii(&o, '<');
                i++;
            }
            break;
        case R:
            if (html && len - i >= 3 && s[i + 1] == ']' && s[i + 2] == '>') {
                i += 3; /* the end of a CDATA remnant */
            } else {
                out_ascii(&o, ']');
                i++;
            }
            break;
        default: {
            uint32_t cp;
            i += utf8_next(s + i, len - i, &cp);
            out_cp(&o, cp == UTF8_BAD ? 0xFFFD : cp);
            break;
        }
        }
    }
    out[o.n] = '\0';
    return o.n;
}

size_t nf_text_from_html(const char *in, size_t len, char *out, size_t max)
{
    return convert(in, len, out, max, true);
}

size_t nf_text_plain(const char *in, size_t len, char *out, size_t max)
{
    return convert(in, len, out, max, false);
}

size_t nf_utf8_sanitize(const char *in, size_t len, char *out, size_t max)
{
    assert(max >= 1);
    const unsigned char *s = (const unsigned char *)in;
    size_t cap = max - 1, n = 0, i = 0;
    while (i < len) {
        unsigned c = s[i];
        if (c < 0x80) {
            if (c) {
                if (n == cap)
                    break;
                out[n++] = (char)c;
            }
            i++;
            continue;
        }
        uint32_t cp;
        size_t k = utf8_next(s + i, len - i, &cp);
        if (cp == UTF8_BAD) {
            if (cap - n < 3)
                break;
            memcpy(out + n, "\xEF\xBF\xBD", 3);
            n += 3;
        } else {
            if (cap - n < k)
                break;
            memcpy(out + n, s + i, k);
            n += k;
        }
        i += k;
    }
    out[n] = '\0';
    return n;
}

bool nf_utf8_valid(const char *in, size_t len)
{
    const unsigned char *s = (const unsigned char *)in;
    for (size_t i = 0; i < len;) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        size_t k = utf8_next(s + i, len - i, &cp);
        if (cp == UTF8_BAD)
            return false;
        i += k;
    }
    return true;
}
