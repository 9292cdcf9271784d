/* Tests src/feed/text.c: a table per rule (tags, raw-text elements, comments and CDATA
 * remnants, named/legacy/numeric references, whitespace, UTF-8 repair, the cut), every HTML 4
 * entity, and properties on random input built from the pieces real feeds break in: the
 * output is valid UTF-8 within max-1 bytes with no leading, trailing or double space; a
 * smaller max gives a prefix of a larger one; and a second pass changes nothing unless the
 * first one produced markup or an entity of its own ('&', '<', "]]>"), which is the one case
 * where it must not (decoding "&amp;lt;" yields the text "&lt;"). */
#include "feed/text.h"
#include "nf_test.h"

#include <stdbool.h>
#include <stdlib.h>

#define RC "\xEF\xBF\xBD" /* U+FFFD */

typedef struct {
    const char *in, *want;
} case_t;

static bool run_cases(const case_t *c, size_t n, bool html)
{
    bool ok = true;
    char out[1024];
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(c[i].in);
        size_t r = html ? nf_text_from_html(c[i].in, len, out, sizeof out)
                        : nf_text_plain(c[i].in, len, out, sizeof out);
        if (strcmp(out, c[i].want) != 0 || r != strlen(out)) {
            fprintf(stderr, "  %s(\"%s\") = \"%s\", want \"%s\"\n", html ? "html" : "plain",
                    c[i].in, out, c[i].want);
            ok = false;
        }
    }
    return ok;
}

#define CASES(tab, html) NF_CHECK(run_cases(tab, sizeof tab / sizeof tab[0], html))

static void test_tags(void)
{
    static const case_t c[] = {
        {"Hello", "Hello"},
        {"<p>Hello</p>", "Hello"},
        {"<p>a</p><p>b</p>", "a b"},
        {"a<br>b", "a b"},
        {"a<br/>b", "a b"},
        {"a<BR />b", "a b"},
        {"<ul><li>one</li><li>two</li></ul>", "one two"},
        {"<table><tr><td>a</td><td>b</td></tr></table>", "a b"},
        {"<h1>Title</h1>Text", "Title Text"},
        {"<div>\n  text \n</div>", "text"},
        {"<b>bold</b>text", "boldtext"},
        {"foo<span class=\"x\">bar</span>baz", "foobarbaz"},
        {"H<sub>2</sub>O and E=mc<sup>2</sup>", "H2O and E=mc2"},
        {"a <b>b</b> c", "a b c"},
        {"<A HREF=\"http://x/\">Link</A>", "Link"},
        {"<o:p></o:p>x<o:p>y</o:p>", "x y"},
        {"super<wbr>cali", "supercali"},
        {"<img src=x.png>caption", "caption"},
        /* '<' that does not start a tag is text */
        {"a < b", "a < b"},
        {"a<3", "a<3"},
        {"1 <= 2", "1 <= 2"},
        {"x <- y", "x <- y"},
        {"<<b>>", "<>"},
        {"a <", "a <"},
        {"a </", "a </"},
        {"5 > 3", "5 > 3"},
        /* quotes only count in attribute values */
        {"<a title=\"x > y\">link</a>", "link"},
        {"<a title='x > y'>link</a>", "link"},
        {"<img alt=Don't>text", "text"},
        {"<a href=/x/>y</a>", "y"},
        {"<p data-x=\"a'b\" data-y='c\"d'>z</p>", "z"},
        {"<a b = \"c>d\" >e", "e"},
        /* unclosed at the end: dropped, as browsers do */
        {"Hello <a href=", "Hello"},
        {"Hello <b", "Hello"},
        {"Hello <a title=\"never closed>", "Hello"},
        /* comments, doctype, processing instructions */
        {"<!-- comment -->text", "text"},
        {"a<!-- x > y -->b", "ab"},
        {"a<!---->b", "ab"},
        {"a<!-->b", "ab"},
        {"a<!--->b", "ab"},
        {"a<!-- x --!>b", "ab"},
        {"a<!-- - -- -> -->b", "ab"},
        {"a<!-- unclosed", "a"},
        {"<!DOCTYPE html>x", "x"},
        {"<?xml version=\"1.0\"?>x", "x"},
        {"a</>b", "ab"},
        {"a</ b>c", "ac"},
        /* CDATA remnants from double wrapping */
        {"<![CDATA[Hello]]>", "Hello"},
        {"<![CDATA[<p>Hi</p>]]>", "Hi"},
        {"Hello]]>", "Hello"},
        {"a ]] b ] c", "a ]] b ] c"},
        /* what is decoded is text, never markup */
        {"&lt;p&gt;Hello&lt;/p&gt;", "<p>Hello</p>"},
        {"&lt;script&gt;x", "<script>x"},
        /* a whole document */
        {"<!DOCTYPE html><html><head><meta charset=utf-8><title>T</title>"
         "<link rel=x href=y></head><body><p>Hi</p></body></html>",
         "Hi"},
    };
    CASES(c, true);
}

static void test_dropped_elements(void)
{
    static const case_t c[] = {
        {"<script>var x = '<p>hi</p>';</script>after", "after"},
        {"<SCRIPT type=x>alert(1)</SCRIPT >ok", "ok"},
        {"<script>if (a</b) x</script>ok", "ok"},
        {"<script>x</scripts></script>ok", "ok"},
        {"<style>p{color:red}</style>ok", "ok"},
        {"<style type=\"text/css\">a > b {}</style>ok", "ok"},
        {"a<script>never closed", "a"},
        {"<script src=x />after", "after"},
        {"<noscript>enable js</noscript>text", "text"},
        {"<template><p>x</p></template>y", "y"},
        {"<title>Doc</title><p>Body</p>", "Body"},
        {"<iframe src=x>fallback</iframe>z", "z"},
        {"<svg><title>chart</title><text>1</text></svg>z", "z"},
        {"a</script>b", "a b"},
        {"x<script>", "x"},
    };
    CASES(c, true);
}

static void test_named_references(void)
{
    static const case_t c[] = {
        {"&amp;", "&"},
        {"&lt;&gt;&quot;&apos;", "<>\"'"},
        {"a&nbsp;b", "a b"},
        {"a&nbsp;&nbsp; b", "a b"},
        {"&nbsp;x&nbsp;", "x"},
        {"&mdash;&ndash;", "\xE2\x80\x94\xE2\x80\x93"},
        {"&lsquo;&rsquo;&ldquo;&rdquo;", "\xE2\x80\x98\xE2\x80\x99\xE2\x80\x9C\xE2\x80\x9D"},
        {"&hellip;&euro;&trade;", "\xE2\x80\xA6\xE2\x82\xAC\xE2\x84\xA2"},
        {"&copy;&reg;&deg;", "\xC2\xA9\xC2\xAE\xC2\xB0"},
        {"caf&eacute; &Eacute;", "caf\xC3\xA9 \xC3\x89"},
        {"&AMP;&LT;&GT;&QUOT;&COPY;&REG;", "&<>\"\xC2\xA9\xC2\xAE"},
        {"&hyphen;&NonBreakingSpace;x", "\xE2\x80\x90 x"},
        {"&amp;lt;", "&lt;"},
        /* legacy forms without ';' */
        {"&amp", "&"},
        {"AT&amp T", "AT& T"},
        {"&lt &gt &quot", "< > \""},
        {"a&nbsp b", "a b"},
        {"&copy 2020", "\xC2\xA9 2020"},
        {"&reg.", "\xC2\xAE."},
        {"&eacute", "\xC3\xA9"},
        {"&nbsp&nbsp;x", "x"},
        /* ...but not when a letter, digit or '=' follows (raw URLs in text) */
        {"&copy2020", "&copy2020"},
        {"a&nbspb", "a&nbspb"},
        {"?a=1&copy=2&para=3", "?a=1&copy=2&para=3"},
        {"&notit;", "&notit;"},
        /* not legacy: needs ';' */
        {"&mdash x", "&mdash x"},
        {"&apos", "&apos"},
        /* unknown or malformed: literal */
        {"&foo;", "&foo;"},
        {"AT&T", "AT&T"},
        {"a & b", "a & b"},
        {"&", "&"},
        {"&;", "&;"},
        {"&&amp;", "&&"},
        {"&NBSP;", "&NBSP;"},
        {"&Amp;", "&Amp;"},
        {"&averyveryverylongname;", "&averyveryverylongname;"},
        {"&CounterClockwiseContourIntegral;", "&CounterClockwiseContourIntegral;"},
    };
    CASES(c, false);
    CASES(c, true);
}

static void test_numeric_references(void)
{
    static const case_t c[] = {
        {"&#123;", "{"},
        {"&#x1F600;", "\xF0\x9F\x98\x80"},
        {"&#X1f600;", "\xF0\x9F\x98\x80"},
        {"&#39;s", "'s"},
        {"&#39s", "'s"},
        {"&#x27", "'"},
        {"&#0000065;", "A"},
        {"&#233;", "\xC3\xA9"},
        {"&#0;", RC},
        {"&#xD800;", RC},
        {"&#xDFFF;", RC},
        {"&#x110000;", RC},
        {"&#x10FFFF;", "\xF4\x8F\xBF\xBF"},
        {"&#99999999999999999999;", RC},
        {"&#xFFFFFFFFFFFFFFFFFFFF1;", RC},
        /* windows-1252 for 128..159, as browsers do */
        {"&#128;", "\xE2\x82\xAC"},
        {"&#x80;", "\xE2\x82\xAC"},
        {"&#146;", "\xE2\x80\x99"},
        {"&#147;&#148;", "\xE2\x80\x9C\xE2\x80\x9D"},
        {"&#150;&#151;", "\xE2\x80\x93\xE2\x80\x94"},
        {"&#153;", "\xE2\x84\xA2"},
        {"&#159;", "\xC5\xB8"},
        {"a&#129;b", "ab"},
        {"a&#160;b", "a b"},
        {"a&#x3000;b", "a b"},
        {"a&#10;&#9;b", "a b"},
        {"a&#1;b", "ab"},
        /* not references */
        {"&#;", "&#;"},
        {"&#x;", "&#x;"},
        {"&#xZ", "&#xZ"},
        {"&#", "&#"},
        {"#1 &# 2", "#1 &# 2"},
    };
    CASES(c, false);
    CASES(c, true);
}

static void test_every_html4_entity(void)
{
    static const struct {
        const char *name;
        unsigned cp;
    } e[] = {
        {"AElig", 0xC6},     {"Aacute", 0xC1},   {"Acirc", 0xC2},     {"Agrave", 0xC0},
        {"Alpha", 0x391},    {"Aring", 0xC5},    {"Atilde", 0xC3},    {"Auml", 0xC4},
        {"Beta", 0x392},     {"Ccedil", 0xC7},   {"Chi", 0x3A7},      {"Dagger", 0x2021},
        {"Delta", 0x394},    {"ETH", 0xD0},      {"Eacute", 0xC9},    {"Ecirc", 0xCA},
        {"Egrave", 0xC8},    {"Epsilon", 0x395}, {"Eta", 0x397},      {"Euml", 0xCB},
        {"Gamma", 0x393},    {"Iacute", 0xCD},   {"Icirc", 0xCE},     {"Igrave", 0xCC},
        {"Iota", 0x399},     {"Iuml", 0xCF},     {"Kappa", 0x39A},    {"Lambda", 0x39B},
        {"Mu", 0x39C},       {"Ntilde", 0xD1},   {"Nu", 0x39D},       {"OElig", 0x152},
        {"Oacute", 0xD3},    {"Ocirc", 0xD4},    {"Ograve", 0xD2},    {"Omega", 0x3A9},
        {"Omicron", 0x39F},  {"Oslash", 0xD8},   {"Otilde", 0xD5},    {"Ouml", 0xD6},
        {"Phi", 0x3A6},      {"Pi", 0x3A0},      {"Prime", 0x2033},   {"Psi", 0x3A8},
        {"Rho", 0x3A1},      {"Scaron", 0x160},  {"Sigma", 0x3A3},    {"THORN", 0xDE},
        {"Tau", 0x3A4},      {"Theta", 0x398},   {"Uacute", 0xDA},    {"Ucirc", 0xDB},
        {"Ugrave", 0xD9},    {"Upsilon", 0x3A5}, {"Uuml", 0xDC},      {"Xi", 0x39E},
        {"Yacute", 0xDD},    {"Yuml", 0x178},    {"Zeta", 0x396},     {"aacute", 0xE1},
        {"acirc", 0xE2},     {"acute", 0xB4},    {"aelig", 0xE6},     {"agrave", 0xE0},
        {"alefsym", 0x2135}, {"alpha", 0x3B1},   {"amp", 0x26},       {"and", 0x2227},
        {"ang", 0x2220},     {"apos", 0x27},     {"aring", 0xE5},     {"asymp", 0x2248},
        {"atilde", 0xE3},    {"auml", 0xE4},     {"bdquo", 0x201E},   {"beta", 0x3B2},
        {"brvbar", 0xA6},    {"bull", 0x2022},   {"cap", 0x2229},     {"ccedil", 0xE7},
        {"cedil", 0xB8},     {"cent", 0xA2},     {"chi", 0x3C7},      {"circ", 0x2C6},
        {"clubs", 0x2663},   {"cong", 0x2245},   {"copy", 0xA9},      {"crarr", 0x21B5},
        {"cup", 0x222A},     {"curren", 0xA4},   {"dArr", 0x21D3},    {"dagger", 0x2020},
        {"darr", 0x2193},    {"deg", 0xB0},      {"delta", 0x3B4},    {"diams", 0x2666},
        {"divide", 0xF7},    {"eacute", 0xE9},   {"ecirc", 0xEA},     {"egrave", 0xE8},
        {"empty", 0x2205},   {"emsp", 0x2003},   {"ensp", 0x2002},    {"epsilon", 0x3B5},
        {"equiv", 0x2261},   {"eta", 0x3B7},     {"eth", 0xF0},       {"euml", 0xEB},
        {"euro", 0x20AC},    {"exist", 0x2203},  {"fnof", 0x192},     {"forall", 0x2200},
        {"frac12", 0xBD},    {"frac14", 0xBC},   {"frac34", 0xBE},    {"frasl", 0x2044},
        {"gamma", 0x3B3},    {"ge", 0x2265},     {"gt", 0x3E},        {"hArr", 0x21D4},
        {"harr", 0x2194},    {"hearts", 0x2665}, {"hellip", 0x2026},  {"iacute", 0xED},
        {"icirc", 0xEE},     {"iexcl", 0xA1},    {"igrave", 0xEC},    {"image", 0x2111},
        {"infin", 0x221E},   {"int", 0x222B},    {"iota", 0x3B9},     {"iquest", 0xBF},
        {"isin", 0x2208},    {"iuml", 0xEF},     {"kappa", 0x3BA},    {"lArr", 0x21D0},
        {"lambda", 0x3BB},   {"lang", 0x2329},   {"laquo", 0xAB},     {"larr", 0x2190},
        {"lceil", 0x2308},   {"ldquo", 0x201C},  {"le", 0x2264},      {"lfloor", 0x230A},
        {"lowast", 0x2217},  {"loz", 0x25CA},    {"lrm", 0x200E},     {"lsaquo", 0x2039},
        {"lsquo", 0x2018},   {"lt", 0x3C},       {"macr", 0xAF},      {"mdash", 0x2014},
        {"micro", 0xB5},     {"middot", 0xB7},   {"minus", 0x2212},   {"mu", 0x3BC},
        {"nabla", 0x2207},   {"nbsp", 0xA0},     {"ndash", 0x2013},   {"ne", 0x2260},
        {"ni", 0x220B},      {"not", 0xAC},      {"notin", 0x2209},   {"nsub", 0x2284},
        {"ntilde", 0xF1},    {"nu", 0x3BD},      {"oacute", 0xF3},    {"ocirc", 0xF4},
        {"oelig", 0x153},    {"ograve", 0xF2},   {"oline", 0x203E},   {"omega", 0x3C9},
        {"omicron", 0x3BF},  {"oplus", 0x2295},  {"or", 0x2228},      {"ordf", 0xAA},
        {"ordm", 0xBA},      {"oslash", 0xF8},   {"otilde", 0xF5},    {"otimes", 0x2297},
        {"ouml", 0xF6},      {"para", 0xB6},     {"part", 0x2202},    {"permil", 0x2030},
        {"perp", 0x22A5},    {"phi", 0x3C6},     {"pi", 0x3C0},       {"piv", 0x3D6},
        {"plusmn", 0xB1},    {"pound", 0xA3},    {"prime", 0x2032},   {"prod", 0x220F},
        {"prop", 0x221D},    {"psi", 0x3C8},     {"quot", 0x22},      {"rArr", 0x21D2},
        {"radic", 0x221A},   {"rang", 0x232A},   {"raquo", 0xBB},     {"rarr", 0x2192},
        {"rceil", 0x2309},   {"rdquo", 0x201D},  {"real", 0x211C},    {"reg", 0xAE},
        {"rfloor", 0x230B},  {"rho", 0x3C1},     {"rlm", 0x200F},     {"rsaquo", 0x203A},
        {"rsquo", 0x2019},   {"sbquo", 0x201A},  {"scaron", 0x161},   {"sdot", 0x22C5},
        {"sect", 0xA7},      {"shy", 0xAD},      {"sigma", 0x3C3},    {"sigmaf", 0x3C2},
        {"sim", 0x223C},     {"spades", 0x2660}, {"sub", 0x2282},     {"sube", 0x2286},
        {"sum", 0x2211},     {"sup", 0x2283},    {"sup1", 0xB9},      {"sup2", 0xB2},
        {"sup3", 0xB3},      {"supe", 0x2287},   {"szlig", 0xDF},     {"tau", 0x3C4},
        {"there4", 0x2234},  {"theta", 0x3B8},   {"thetasym", 0x3D1}, {"thinsp", 0x2009},
        {"thorn", 0xFE},     {"tilde", 0x2DC},   {"times", 0xD7},     {"trade", 0x2122},
        {"uArr", 0x21D1},    {"uacute", 0xFA},   {"uarr", 0x2191},    {"ucirc", 0xFB},
        {"ugrave", 0xF9},    {"uml", 0xA8},      {"upsih", 0x3D2},    {"upsilon", 0x3C5},
        {"uuml", 0xFC},      {"weierp", 0x2118}, {"xi", 0x3BE},       {"yacute", 0xFD},
        {"yen", 0xA5},       {"yuml", 0xFF},     {"zeta", 0x3B6},     {"zwj", 0x200D},
        {"zwnj", 0x200C},
    };
    NF_CHECK_EQ(sizeof e / sizeof e[0], 253);
    for (size_t i = 0; i < sizeof e / sizeof e[0]; i++) {
        char in[64], want[16], out[64];
        snprintf(in, sizeof in, "x&%s;y", e[i].name);
        unsigned cp = e[i].cp;
        if (cp == 0xA0 || (cp >= 0x2000 && cp <= 0x200A))
            snprintf(want, sizeof want, "x y");
        else if (cp < 0x80)
            snprintf(want, sizeof want, "x%cy", (char)cp);
        else if (cp < 0x800)
            snprintf(want, sizeof want, "x%c%cy", 0xC0 | cp >> 6, 0x80 | (cp & 63));
        else
            snprintf(want, sizeof want, "x%c%c%cy", 0xE0 | cp >> 12, 0x80 | (cp >> 6 & 63),
                     0x80 | (cp & 63));
        nf_text_plain(in, strlen(in), out, sizeof out);
        if (strcmp(out, want) != 0) {
            fprintf(stderr, "  &%s; -> \"%s\", want \"%s\"\n", e[i].name, out, want);
            NF_CHECK(0);
        }
    }
}

static void test_whitespace(void)
{
    static const case_t c[] = {
        {"  a  b  ", "a b"},
        {"\t\na\r\n", "a"},
        {"a\fb\vc", "a b c"},
        {"x\u00A0y", "x y"},
        {"x\xC2\x85y", "x y"}, /* NEL */
        {"x\u1680y", "x y"},
        {"x\u2000y", "x y"},
        {"x\u2003y", "x y"},
        {"x\u200Ay", "x y"},
        {"x\u2028y\u2029z", "x y z"},
        {"x\u202Fy\u205Fz", "x y z"},
        {"x\u3000y", "x y"},
        {"x \u00A0 \u3000 y", "x y"},
        {"x\u200By", "x\u200By"}, /* ZWSP is not white space */
        {"\uFEFFTitle", "Title"}, /* BOM */
        {"x\x01y\x1Fz\x7Fw", "xyzw"},
        {"x\xC2\x80y", "xy"}, /* C1 control */
        {"", ""},
        {"   ", ""},
        {"\u00A0", ""},
    };
    CASES(c, false);
    CASES(c, true);

    char out[16];
    NF_CHECK_EQ(nf_text_plain("a\0b", 3, out, sizeof out), 2);
    NF_CHECK_STR(out, "ab");
}

static void test_utf8_repair(void)
{
    static const case_t c[] = {
        {"\xC3\xA9", "\xC3\xA9"},
        {"\xC3", RC},
        {"a\xC3", "a" RC},
        {"\xC3x", RC "x"},
        {"\xC0\xAF", RC RC},               /* overlong '/' */
        {"\xC1\xBF", RC RC},               /* overlong */
        {"\xE0\x80\xAF", RC RC RC},        /* overlong 3-byte */
        {"\xE0\x9F\xBF", RC RC RC},        /* overlong 3-byte, boundary */
        {"\xE0\xA0\x80", "\xE0\xA0\x80"},  /* smallest 3-byte */
        {"\xED\xA0\x80", RC RC RC},        /* surrogate */
        {"\xED\x9F\xBF", "\xED\x9F\xBF"},  /* just below */
        {"\xF0\x8F\xBF\xBF", RC RC RC RC}, /* overlong 4-byte */
        {"\xF4\x90\x80\x80", RC RC RC RC}, /* > U+10FFFF */
        {"\xF5\x80\x80\x80", RC RC RC RC},
        {"\xE2\x82", RC}, /* truncated euro: one maximal subpart */
        {"\xE2\x82x", RC "x"},
        {"\xF0\x9F\x98", RC},
        {"\xF0\x9F\x98\x80", "\xF0\x9F\x98\x80"},
        {"\xF0\x9F\x98\xF0\x9F\x98\x80", RC "\xF0\x9F\x98\x80"},
        {"\xFF\xFE", RC RC},
        {"\x80\xBF", RC RC},
        {"\xE2\x28\xA1", RC "(" RC},
        /* Unicode 15 §3.9, Table 3-8 */
        {"\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64", "a" RC RC RC "b" RC "c" RC RC "d"},
        {RC, RC}, /* a real U+FFFD is kept */
    };
    CASES(c, false);
    CASES(c, true);
}

static void test_cut(void)
{
    static const struct {
        const char *in;
        size_t max;
        const char *want;
    } c[] = {
        {"Hello world", 6, "Hello"},
        {"Hello world", 7, "Hello"}, /* never a trailing space */
        {"Hello world", 8, "Hello w"},
        {"Hello world", 1, ""},
        {"  Hello", 3, "He"},
        {"h\xC3\xA9llo", 3, "h"},
        {"h\xC3\xA9llo", 4, "h\xC3\xA9"},
        {"\xF0\x9F\x98\x80\xF0\x9F\x98\x80", 5, "\xF0\x9F\x98\x80"},
        {"\xF0\x9F\x98\x80\xF0\x9F\x98\x80", 4, ""},
        {"&amp;&amp;", 2, "&"},
        {"&mdash;x", 3, ""},
        {"<p>ab</p><p>cd</p>", 4, "ab"},
        {"ab\xC3yz", 4, "ab"}, /* U+FFFD is 3 bytes */
        {"abc\xE2\x80\x83\xC3\xA9", 6, "abc"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char out[64];
        memset(out, 'X', sizeof out);
        size_t r = nf_text_from_html(c[i].in, strlen(c[i].in), out, c[i].max);
        NF_CHECK_STR(out, c[i].want);
        NF_CHECK_EQ(r, strlen(c[i].want));
        NF_CHECK(out[c[i].max] == 'X'); /* nothing written past max */
    }
}

static void test_not_nul_terminated(void)
{
    /* len, not a NUL, ends the input: what lies beyond must not be read as a tag's end,
     * an entity's ';' or a UTF-8 continuation. */
    char out[32];
    NF_CHECK_EQ(nf_text_from_html("ab<b>cd", 4, out, sizeof out), 2);
    NF_CHECK_STR(out, "ab");
    nf_text_plain("&amp;", 4, out, sizeof out);
    NF_CHECK_STR(out, "&");
    nf_text_plain("&#65;", 4, out, sizeof out);
    NF_CHECK_STR(out, "A");
    nf_text_plain("x\xC3\xA9", 2, out, sizeof out);
    NF_CHECK_STR(out, "x" RC);
    nf_text_from_html("a<!-->", 5, out, sizeof out);
    NF_CHECK_STR(out, "a");
    nf_text_from_html("<script>a</script>b", 17, out, sizeof out);
    NF_CHECK_STR(out, "");
}

/* What nf_text_plain must give for inputs made only of ASCII letters, '&' before a letter (no
 * entity), '<', ']', spaces, tabs, newlines, DEL, \x01 and UTF-8 letters: whitespace runs
 * collapsed to one space and trimmed, the two controls dropped, the rest as is. */
static void plain_model(const char *in, char *out)
{
    size_t w = 0;
    bool space = false;
    for (; *in; in++) {
        if (*in == ' ' || *in == '\t' || *in == '\n') {
            space = w > 0;
        } else if (*in != '\x7f' && *in != '\x01') {
            if (space)
                out[w++] = ' ';
            space = false;
            out[w++] = *in;
        }
    }
    out[w] = '\0';
}

/* A long run of plain text (the fast path that scans 16 bytes at a time) with one byte or
 * pair that must end the run placed at every offset, in inputs of every length around the
 * 16-byte steps. The run must stop exactly there, or the tab, the double space or the "]]>"
 * (in HTML) would be copied as they are. */
static void test_long_text_runs(void)
{
    static const char *const breaks[] = {"\t", "  ", " \t", "\n",       "\x7f",      "&",    "<",
                                         "]",  " &", " <",  "\xC3\xA9", " \xC3\xA9", "\x01", " ]"};
    char in[96], want[96], out[128];
    int bad = 0;
    for (size_t b = 0; b < sizeof breaks / sizeof breaks[0]; b++) {
        for (size_t len = 1; len <= 40; len++) {
            for (size_t at = 0; at <= len; at++) {
                /* "abcd fghi ...": single spaces between words stay in the run */
                size_t n = 0;
                for (size_t k = 0; k <= len; k++) {
                    if (k == at)
                        n += (size_t)snprintf(in + n, sizeof in - n, "%s", breaks[b]);
                    if (k < len)
                        in[n++] = k % 5 == 4 ? ' ' : (char)('a' + k % 26);
                }
                in[n] = '\0';
                plain_model(in, want);
                nf_text_plain(in, n, out, sizeof out);
                if (strcmp(out, want) != 0 && bad++ < 5)
                    fprintf(stderr, "  plain(\"%s\") = \"%s\", want \"%s\"\n", in, out, want);
                /* HTML: the end of a CDATA remnant vanishes wherever the run meets it. */
                if (strcmp(breaks[b], "]") != 0)
                    continue;
                char html[100], without[100];
                size_t pre = (size_t)(strchr(in, ']') - in);
                snprintf(html, sizeof html, "%.*s]]>%s", (int)pre, in, in + pre + 1);
                snprintf(without, sizeof without, "%.*s%s", (int)pre, in, in + pre + 1);
                plain_model(without, want);
                nf_text_from_html(html, strlen(html), out, sizeof out);
                if (strcmp(out, want) != 0 && bad++ < 5)
                    fprintf(stderr, "  html(\"%s\") = \"%s\", want \"%s\"\n", html, out, want);
            }
        }
    }
    NF_CHECK_EQ(bad, 0);
}

static void test_sanitize(void)
{
    char out[64];
    NF_CHECK_EQ(nf_utf8_sanitize("a\0b\xC3", 4, out, sizeof out), 5);
    NF_CHECK_STR(out, "ab" RC);
    nf_utf8_sanitize("  keep  <b>&amp;</b> ", 21, out, sizeof out);
    NF_CHECK_STR(out, "  keep  <b>&amp;</b> ");
    nf_utf8_sanitize("\xED\xA0\x80z", 4, out, sizeof out);
    NF_CHECK_STR(out, RC RC RC "z");
    NF_CHECK_EQ(nf_utf8_sanitize("h\xC3\xA9llo", 6, out, 3), 1);
    NF_CHECK_STR(out, "h");
    NF_CHECK_EQ(nf_utf8_sanitize("ab\xFF", 3, out, 5), 2);
    NF_CHECK_STR(out, "ab");

    NF_CHECK(nf_utf8_valid("", 0));
    NF_CHECK(nf_utf8_valid("a\0b", 3));
    NF_CHECK(nf_utf8_valid("\xF4\x8F\xBF\xBF", 4));
    NF_CHECK(nf_utf8_valid(RC, 3));
    NF_CHECK(!nf_utf8_valid("\xF4\x90\x80\x80", 4));
    NF_CHECK(!nf_utf8_valid("\xED\xA0\x80", 3));
    NF_CHECK(!nf_utf8_valid("\xC0\x80", 2));
    NF_CHECK(!nf_utf8_valid("\xE2\x82", 2));
    NF_CHECK(!nf_utf8_valid("\xE2\x82\xAC", 2));
}

static void test_every_prefix(void)
{
    /* Every markup construct cut at every byte, in an exact-size heap buffer: nothing may be
     * read past len (ASan), and the output stays well formed. */
    static const char *const inputs[] = {
        "<p>a</p><br/><!-- c --><![CDATA[x]]><script>s</script><a title='>'>b</a>",
        "&amp;&amp&#x1F600;&#128;&#;&nbsp;&copy2&NonBreakingSpace;",
        "\xF0\x9F\x98\x80\xE2\x82\xAC\xC3\xA9 \xE3\x80\x80<!--->-->",
        "<!DOCTYPE x><?pi?></ x></><style a=\"</style\">y</style >z",
    };
    char out[256];
    for (size_t k = 0; k < sizeof inputs / sizeof inputs[0]; k++) {
        size_t full = strlen(inputs[k]);
        for (size_t len = 0; len <= full; len++) {
            char *exact = malloc(len ? len : 1);
            NF_REQUIRE(exact);
            memcpy(exact, inputs[k], len);
            size_t r1 = nf_text_from_html(exact, len, out, sizeof out);
            NF_CHECK(nf_utf8_valid(out, r1) && strlen(out) == r1);
            size_t r2 = nf_text_plain(exact, len, out, sizeof out);
            NF_CHECK(nf_utf8_valid(out, r2) && strlen(out) == r2);
            size_t r3 = nf_utf8_sanitize(exact, len, out, sizeof out);
            NF_CHECK(nf_utf8_valid(out, r3) && strlen(out) == r3);
            free(exact);
        }
    }
}

/* ---- properties on random input ------------------------------------------------------- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void)
{
    return nf_test_xorshift(&rng);
}

static size_t random_input(char *buf, size_t cap)
{
    static const char *const pieces[] = {
        "<p>",
        "</p>",
        "<b>",
        "</b>",
        "<br/>",
        "<script>",
        "</script>",
        "<style>",
        "</STYLE>",
        "<!--",
        "-->",
        "<![CDATA[",
        "]]>",
        "]",
        "&amp;",
        "&amp",
        "&lt;",
        "&gt;",
        "&#x1F600;",
        "&#128;",
        "&#0;",
        "&#",
        "&nbsp;",
        "&nbsp",
        "&copy",
        "&",
        ";",
        "#",
        "x",
        " ",
        "  ",
        "\t",
        "\n",
        "\xC2\xA0",
        "\xE3\x80\x80",
        "\xE2\x80\x83",
        "\xC3",
        "\xE2\x82",
        "\xF0\x9F\x98\x80",
        "\xC3\xA9",
        "\xFF",
        "\xED\xA0\x80",
        "\xEF\xBB\xBF",
        "\x01",
        "a",
        "word",
        "<",
        ">",
        "\"",
        "'",
        "=",
        "/",
        "<a href='x>y'>",
        "<img alt=Don't>",
        "</",
        "<!",
        "<?",
        "-",
        "!",
        "<title>",
        "</title>",
        "&lt;p&gt;",
        "]]&gt;",
    };
    size_t n = 0, want = (size_t)(next_rand() % 60);
    for (size_t k = 0; k < want; k++) {
        if (next_rand() % 8 == 0) {
            if (n + 1 > cap)
                break;
            buf[n++] = (char)next_rand();
            continue;
        }
        const char *p = pieces[next_rand() % (sizeof pieces / sizeof pieces[0])];
        size_t l = strlen(p);
        if (n + l > cap)
            break;
        memcpy(buf + n, p, l);
        n += l;
    }
    return n;
}

static bool well_formed(const char *out, size_t r, size_t max)
{
    if (r > max - 1 || out[r] != '\0' || strlen(out) != r || !nf_utf8_valid(out, r))
        return false;
    if (r && (out[0] == ' ' || out[r - 1] == ' '))
        return false;
    for (size_t i = 0; i < r; i++) {
        unsigned char c = (unsigned char)out[i];
        if ((c < 0x20 && c != 0) || c == 0x7F || (c == ' ' && i + 1 < r && out[i + 1] == ' '))
            return false;
        if (c == 0xC2 && i + 1 < r && (unsigned char)out[i + 1] == 0xA0)
            return false;
    }
    return true;
}

static void test_properties(void)
{
    char in[1024], out[1200], out2[1200], big[1200];
    for (int round = 0; round < 200000; round++) {
        size_t len = random_input(in, sizeof in);
        bool html = round & 1;
        size_t max = 1 + (size_t)(next_rand() % (next_rand() % 4 ? 64 : sizeof out - 1));
        size_t (*f)(const char *, size_t, char *, size_t) =
            html ? nf_text_from_html : nf_text_plain;

        /* An exact-size heap copy, so ASan sees any read past len. */
        char *exact = malloc(len ? len : 1);
        NF_REQUIRE(exact);
        memcpy(exact, in, len);
        size_t r = f(exact, len, out, max);
        free(exact);
        if (!well_formed(out, r, max)) {
            fprintf(stderr, "  malformed output for max %zu: \"%.*s\" -> \"%s\"\n", max, (int)len,
                    in, out);
            NF_REQUIRE(0);
        }

        /* A smaller buffer yields a prefix of what a large one does. */
        size_t rb = f(in, len, big, sizeof big);
        NF_REQUIRE(rb >= r && memcmp(big, out, r) == 0);

        /* Idempotent unless the first pass decoded markup or a reference into its output. */
        bool stable = !strchr(big, '&') && !(html && (strchr(big, '<') || strstr(big, "]]>")));
        if (stable) {
            size_t r2 = f(big, rb, out2, sizeof out2);
            if (r2 != rb || strcmp(out2, big) != 0) {
                fprintf(stderr, "  not idempotent: \"%s\" -> \"%s\"\n", big, out2);
                NF_REQUIRE(0);
            }
            nf_text_plain(big, rb, out2, sizeof out2);
            NF_REQUIRE(strcmp(out2, big) == 0);
        }

        /* sanitize: valid, NUL-free, idempotent, the identity on valid NUL-free input. */
        size_t rs = nf_utf8_sanitize(in, len, out, max);
        NF_REQUIRE(rs <= max - 1 && strlen(out) == rs && nf_utf8_valid(out, rs));
        size_t rs2 = nf_utf8_sanitize(out, rs, out2, max);
        NF_REQUIRE(rs2 == rs && memcmp(out, out2, rs) == 0);
        if (nf_utf8_valid(in, len) && !memchr(in, 0, len) && len < max)
            NF_REQUIRE(rs == len && memcmp(out, in, len) == 0);
    }
}

/* An independent model of UTF-8 validity: decode greedily, then reject overlongs, surrogates
 * and values past U+10FFFF by the value rather than by the byte ranges text.c uses. */
static bool model_valid(const unsigned char *s, size_t len)
{
    for (size_t i = 0; i < len;) {
        unsigned c = s[i];
        size_t n = c < 0x80 ? 1 : c >> 5 == 6 ? 2 : c >> 4 == 14 ? 3 : c >> 3 == 30 ? 4 : 0;
        if (!n || i + n > len)
            return false;
        uint32_t v = n == 1 ? c : c & (0x7F >> n);
        for (size_t k = 1; k < n; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return false;
            v = v << 6 | (s[i + k] & 0x3F);
        }
        static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (v < min[n] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
            return false;
        i += n;
    }
    return true;
}

static void test_utf8_valid_model(void)
{
    unsigned char b[8];
    for (int round = 0; round < 500000; round++) {
        size_t len = 1 + (size_t)(next_rand() % 6);
        for (size_t i = 0; i < len; i++) {
            uint64_t r = next_rand();
            /* bias towards lead and continuation bytes */
            b[i] = (uint8_t)(r % 3 == 0   ? 0x80 | (r >> 8 & 0x3F)
                             : r % 3 == 1 ? 0xC0 | (r >> 8 & 0x3F)
                                          : r >> 8);
        }
        if (nf_utf8_valid((const char *)b, len) != model_valid(b, len)) {
            fprintf(stderr, "  disagree on %zu bytes starting %02x %02x\n", len, b[0], b[1]);
            NF_REQUIRE(0);
        }
    }
}

int main(void)
{
    NF_RUN(test_tags);
    NF_RUN(test_dropped_elements);
    NF_RUN(test_named_references);
    NF_RUN(test_numeric_references);
    NF_RUN(test_every_html4_entity);
    NF_RUN(test_whitespace);
    NF_RUN(test_utf8_repair);
    NF_RUN(test_cut);
    NF_RUN(test_not_nul_terminated);
    NF_RUN(test_long_text_runs);
    NF_RUN(test_sanitize);
    NF_RUN(test_every_prefix);
    NF_RUN(test_properties);
    NF_RUN(test_utf8_valid_model);
    return nf_test_report();
}
