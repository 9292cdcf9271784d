/* Tests src/feed/opml.c: what a feed reader's export looks like (nested categories, text or
 * title, escaped URLs, newsflow's own attributes), the refusals (not XML, not OPML, cut short,
 * bad interval or status, too deep), hostile XML (entities are never expanded, external ones
 * never read), and a property: random lists written and parsed again are the same lists. */
#include "feed/opml.h"
#include "nf_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse(const char *s, nf_opml_t *o, char *err, size_t errlen)
{
    return nf_opml_parse(s, strlen(s), o, err, errlen);
}

static void test_reader_export(void)
{
    const char *doc =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<opml version=\"1.0\">\n"
        "  <head><title>Subscriptions &amp; more</title></head>\n"
        "  <body>\n"
        "    <outline text=\"News\" title=\"News\">\n"
        "      <outline type=\"rss\" text=\"BBC\" xmlUrl=\"https://bbc.example/rss\"/>\n"
        "      <outline text=\"Tech\">\n"
        "        <outline type=\"rss\" title=\"LWN\" "
        "xmlUrl=\"https://lwn.example/?a=1&amp;b=2\"/>\n"
        "      </outline>\n"
        "    </outline>\n"
        "    <outline type=\"rss\" xmlUrl=\"http://top.example/feed\" htmlUrl=\"http://top\"/>\n"
        "  </body>\n"
        "</opml>\n";
    nf_opml_t o;
    char err[256];
    NF_REQUIRE(parse(doc, &o, err, sizeof err) == 0);
    NF_CHECK_STR(o.title, "Subscriptions & more");
    NF_REQUIRE(o.n == 3);
    NF_CHECK_STR(o.feeds[0].url, "https://bbc.example/rss");
    NF_CHECK_STR(o.feeds[0].title, "BBC");
    NF_CHECK_STR(o.feeds[0].category, "News");
    NF_CHECK_EQ(o.feeds[0].line, 6);
    NF_CHECK_STR(o.feeds[1].url, "https://lwn.example/?a=1&b=2");
    NF_CHECK_STR(o.feeds[1].title, "LWN");
    NF_CHECK_STR(o.feeds[1].category, "News/Tech");
    NF_CHECK_STR(o.feeds[2].category, "");
    NF_CHECK_STR(o.feeds[2].title, "");
    NF_CHECK_STR(o.feeds[2].status, "active");
    NF_CHECK_EQ(o.feeds[2].interval_s, 0);
    nf_opml_free(&o);

    const char *own = "<opml version=\"2.0\" xmlns:nf=\"" NF_OPML_NS "\"><body>"
                      "<outline xmlUrl=\"http://a.example/\" nf:interval=\"600\" "
                      "nf:status=\"paused\" interval=\"5\" status=\"dead\" nf:id=\"wire\"/>"
                      "</body></opml>";
    NF_REQUIRE(parse(own, &o, err, sizeof err) == 0);
    NF_REQUIRE(o.n == 1);
    NF_CHECK_EQ(o.feeds[0].interval_s, 600); /* our namespace only: not the bare attributes */
    NF_CHECK_STR(o.feeds[0].status, "paused");
    NF_CHECK_STR(o.feeds[0].id, "wire");
    nf_opml_free(&o);
}

static void refused(const char *doc, const char *want)
{
    nf_opml_t o;
    char err[256] = "";
    int r = parse(doc, &o, err, sizeof err);
    NF_CHECK(r == -1);
    NF_CHECK(o.n == 0 && o.feeds == NULL);
    if (!strstr(err, want)) {
        fprintf(stderr, "  \"%s\": message \"%s\" lacks \"%s\"\n", doc, err, want);
        NF_CHECK(0);
    }
    nf_opml_free(&o);
}

static void test_refusals(void)
{
    refused("", "the file is empty");
    refused("<?xml version=\"1.0\"?>", "not well-formed XML: line 1");
    refused("not xml at all", "not");
    refused("<html><body/></html>", "root element <html> is not opml: an HTML page");
    refused("<rss version=\"2.0\"/>", "root element <rss> is not opml");
    refused("<opml><body><outline xmlUrl=\"http://a/\"", "line 1");
    refused("<opml><body>\n<outline xmlUrl=\"\"/></body></opml>", "line 2: an outline with an "
                                                                  "empty xmlUrl");
    refused("<opml xmlns:n=\"" NF_OPML_NS "\"><body><outline xmlUrl=\"http://a/\" "
            "n:interval=\"-5\"/></body></opml>",
            "newsflow:interval \"-5\"");
    refused("<opml xmlns:n=\"" NF_OPML_NS "\"><body><outline xmlUrl=\"http://a/\" "
            "n:status=\"sleeping\"/></body></opml>",
            "newsflow:status \"sleeping\"");
    char *deep = malloc(80 * 40 + 100);
    strcpy(deep, "<opml><body>");
    for (int i = 0; i < 70; i++)
        strcat(deep, "<outline text=\"c\">");
    strcat(deep, "</body></opml>");
    refused(deep, "nested deeper than 64");
    free(deep);
}

static void test_hostile(void)
{
    /* A billion laughs and an external entity: no entity is defined, so none expands, and the
     * file named is never read. */
    const char *doc =
        "<?xml version=\"1.0\"?>\n"
        "<!DOCTYPE opml [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;\">"
        "<!ENTITY c \"&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;\"><!ENTITY ext SYSTEM "
        "\"file:///etc/passwd\">]>\n"
        "<opml><body><outline text=\"&c;&ext;\" xmlUrl=\"http://x.example/&c;\"/></body></opml>";
    nf_opml_t o;
    char err[256] = "";
    int r = parse(doc, &o, err, sizeof err);
    if (r == 0) {
        NF_REQUIRE(o.n == 1);
        NF_CHECK(strstr(o.feeds[0].title, "aaa") == NULL);
        NF_CHECK(strstr(o.feeds[0].title, "root:") == NULL);
        NF_CHECK(strstr(o.feeds[0].url, "aaa") == NULL);
    } else {
        NF_CHECK(err[0] != '\0');
    }
    nf_opml_free(&o);

    /* A DTD's attribute defaults are not the document's: they make no category a feed. */
    const char *attlist =
        "<!DOCTYPE opml [<!ATTLIST outline xmlUrl CDATA \"http://dtd.example/\">]>\n"
        "<opml><body><outline text=\"cat\"><outline text=\"f\" xmlUrl=\"http://f.example/\"/>"
        "</outline></body></opml>";
    NF_REQUIRE(parse(attlist, &o, err, sizeof err) == 0);
    NF_REQUIRE(o.n == 1);
    NF_CHECK_STR(o.feeds[0].url, "http://f.example/");
    NF_CHECK_STR(o.feeds[0].category, "cat");
    nf_opml_free(&o);

    /* Long values: a URL over the limit is refused (decoded first: "&amp;" is one byte); a
     * title is cut at a character boundary; a deep path of long names at its own limit. */
    size_t ulen = NF_OPML_MAX_VALUE + 100;
    char *doc2 = malloc(ulen * 6 + 65536);
    strcpy(doc2, "<opml><body><outline xmlUrl=\"http://a/");
    for (size_t i = 0; i < ulen; i++)
        strcat(doc2, "&amp;");
    strcat(doc2, "\"/></body></opml>");
    NF_CHECK(parse(doc2, &o, err, sizeof err) == -1);
    NF_CHECK(strstr(err, "an xmlUrl of") != NULL);
    nf_opml_free(&o);
    strcpy(doc2, "<opml><body>");
    for (int d = 0; d < 10; d++) {
        strcat(doc2, "<outline text=\"");
        for (int i = 0; i < 300; i++)
            strcat(doc2, "\xc3\xa9"); /* 600 bytes of é */
        strcat(doc2, "\">");
    }
    strcat(doc2, "<outline text=\"");
    for (int i = 0; i < 300; i++)
        strcat(doc2, "\xc3\xa9");
    strcat(doc2, "\" xmlUrl=\"http://deep.example/\"/>");
    for (int d = 0; d < 10; d++)
        strcat(doc2, "</outline>");
    strcat(doc2, "</body></opml>");
    NF_REQUIRE(parse(doc2, &o, err, sizeof err) == 0);
    NF_REQUIRE(o.n == 1);
    NF_CHECK(strlen(o.feeds[0].title) <= NF_OPML_MAX_TITLE && strlen(o.feeds[0].title) % 2 == 0);
    NF_CHECK(strlen(o.feeds[0].category) <= NF_OPML_MAX_CATEGORY);
    NF_CHECK(((unsigned char)o.feeds[0].category[strlen(o.feeds[0].category) - 1] & 0xc0) == 0x80);
    nf_opml_free(&o);
    free(doc2);

    /* Over the size limit: refused before parsing. */
    size_t big = NF_OPML_MAX_BYTES + 1;
    char *b = malloc(big);
    memset(b, ' ', big);
    NF_CHECK(nf_opml_parse(b, big, &o, err, sizeof err) == -1);
    NF_CHECK(strstr(err, "more than") != NULL);
    free(b);
    nf_opml_free(&o);
}

/* Random strings from an alphabet that XML carries as it is (escapes included). */
static void rand_str(uint64_t *s, char *out, size_t max, const char *alphabet)
{
    size_t n = nf_test_rand(s) % max, k = strlen(alphabet);
    for (size_t i = 0; i < n; i++)
        out[i] = alphabet[nf_test_rand(s) % k];
    out[n] = '\0';
}

/* feeds written as a list titled title and parsed back into o (which the caller frees). */
static void write_parse(const nf_opml_feed_t *feeds, size_t n, const char *title, nf_opml_t *o)
{
    char *buf = NULL, err[256];
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    NF_REQUIRE(mf && nf_opml_write(mf, title, feeds, n) == 0);
    fclose(mf);
    int r = nf_opml_parse(buf, len, o, err, sizeof err);
    if (r != 0)
        fprintf(stderr, "  written list does not parse: %s\n%s\n", err, buf);
    free(buf);
    NF_REQUIRE(r == 0);
}

static void test_round_trip(void)
{
    uint64_t seed = 42;
    static const char *const statuses[] = {"active", "paused", "dead"};
    for (int round = 0; round < 200; round++) {
        size_t n = nf_test_rand(&seed) % 30;
        nf_opml_feed_t *f = calloc(n + 1, sizeof *f);
        for (size_t i = 0; i < n; i++) {
            char url[64], title[40], cat[40];
            rand_str(&seed, url, 30, "abc/?&=%#;'\"<>");
            snprintf(url + strlen(url), 8, "%zu", i);
            rand_str(&seed, title, 30, "ab &<>\"'");
            if (nf_test_rand(&seed) % 2)
                strcat(title, "\xc3\xa9"); /* é: UTF-8 as it is */
            rand_str(&seed, cat, 4, "xy");
            /* categories of one or two components, never empty ones */
            char c2[80] = "";
            if (cat[0])
                snprintf(c2, sizeof c2, "%s%s", cat, nf_test_rand(&seed) % 2 ? "/z" : "");
            char id[32] = "";
            if (nf_test_rand(&seed) % 3 == 0)
                snprintf(id, sizeof id, "src-%zu:x.y_z", i);
            f[i] = (nf_opml_feed_t){.url = strdup(url),
                                    .id = strdup(id),
                                    .title = strdup(title),
                                    .category = strdup(c2),
                                    .interval_s = (uint32_t)(nf_test_rand(&seed) % 3 * 300),
                                    .status = statuses[nf_test_rand(&seed) % 3]};
        }
        nf_opml_t o;
        write_parse(f, n, "t & <t>", &o);
        NF_CHECK_STR(o.title, "t & <t>");
        NF_REQUIRE(o.n == n);
        /* the same feeds; within a category, in the order given */
        for (size_t i = 0; i < n; i++) {
            size_t hits = 0;
            for (size_t j = 0; j < n; j++)
                hits += !strcmp(f[i].url, o.feeds[j].url) && !strcmp(f[i].id, o.feeds[j].id) &&
                        !strcmp(f[i].title, o.feeds[j].title) &&
                        !strcmp(f[i].category, o.feeds[j].category) &&
                        f[i].interval_s == o.feeds[j].interval_s &&
                        !strcmp(f[i].status, o.feeds[j].status);
            if (hits != 1)
                fprintf(stderr, "  [%s] [%s] [%s] %u %s: %zu hits\n", f[i].url, f[i].title,
                        f[i].category, f[i].interval_s, f[i].status, hits);
            NF_CHECK(hits == 1);
        }
        nf_opml_free(&o);
        for (size_t i = 0; i < n; i++) {
            free(f[i].url);
            free(f[i].id);
            free(f[i].title);
            free(f[i].category);
        }
        free(f);
    }
}

static void test_write_repairs(void)
{
    /* Control characters dropped, invalid UTF-8 replaced: the file still parses. 0xF5..0xFF
     * never lead a sequence: "\xf5\x80\x80" is three invalid bytes. */
    nf_opml_feed_t g[2] = {{.url = "u",
                            .title = "a\xf5\x80\x80"
                                     "b",
                            .category = "",
                            .status = "active"},
                           {.url = "http://a.example/\x01x",
                            .title = "bad \xff\xfe utf8 \xed\xa0\x80 surrogate",
                            .category = "",
                            .status = "active"}};
    nf_opml_t o;
    write_parse(g, 2, "\x02", &o);
    NF_REQUIRE(o.n == 2);
    NF_CHECK_STR(o.feeds[0].title, "a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                                   "b"); /* one category: the order given */
    NF_CHECK_STR(o.feeds[1].url, "http://a.example/x");
    NF_CHECK(strstr(o.feeds[1].title, "\xef\xbf\xbd") != NULL);
    nf_opml_free(&o);
}

int main(void)
{
    NF_RUN(test_reader_export);
    NF_RUN(test_refusals);
    NF_RUN(test_hostile);
    NF_RUN(test_round_trip);
    NF_RUN(test_write_repairs);
    return nf_test_report();
}
