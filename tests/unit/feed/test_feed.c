/* Tests src/feed/feed*.c through nf_feed_parse(), the only entry point: the field mapping of each
 * format (RSS 2.0, RDF, Atom 1.0/0.3, JSON Feed), the article rules (link fallbacks, date
 * fallback, relative links, caps, ids and hashes), and the hostile inputs of
 * tests/data/feeds/README.md, each with its documented outcome and a time bound. Entity bombs
 * must also stay small in memory (the arena is the whole result), and the external-entity
 * tests point their SYSTEM ids at a FIFO: opening it would block, so an alarm turns any attempt
 * to read it into a failure instead of a hang. */
#include "algo/sha256.h"
#include "feed/arena.h"
#include "feed/feed.h"
#include "feed/url.h"
#include "nf_test.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DATA    NF_SOURCE_DIR "/tests/data/feeds/"
#define FETCHED 1700000000000LL /* 2023-11-14T22:13:20Z */

/* Generous: ASan builds are several times slower than Release. */
#define MAX_MS 2000.0

static char g_err[512];
static double g_ms;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int parse_lim(nf_feed_t *f, const char *data, size_t len, const char *url,
                     const nf_feed_limits_t *lim)
{
    double t0 = now_ms();
    int rc = nf_feed_parse(f, data, len, url, FETCHED, lim, g_err, sizeof g_err);
    g_ms = now_ms() - t0;
    if (g_ms > MAX_MS)
        fprintf(stderr, "  parse took %.0f ms\n", g_ms);
    return rc;
}

static int parse_str(nf_feed_t *f, const char *doc, const char *url)
{
    return parse_lim(f, doc, strlen(doc), url, NULL);
}

static char *slurp(const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof path, DATA "%s", name);
    FILE *in = fopen(path, "rb");
    if (!in) {
        fprintf(stderr, "  cannot open %s\n", path);
        return NULL;
    }
    fseek(in, 0, SEEK_END);
    long n = ftell(in);
    fseek(in, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, in) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(in);
    if (buf)
        buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

static int parse_file(nf_feed_t *f, const char *name)
{
    size_t len;
    char *buf = slurp(name, &len);
    if (!buf) {
        memset(f, 0, sizeof *f);
        return 1;
    }
    int rc = parse_lim(f, buf, len, NULL, NULL);
    free(buf);
    return rc;
}

static bool has(const char *s, const char *sub)
{
    return s && strstr(s, sub);
}

/* ---- formats ------------------------------------------------------------------------------ */

static const char rss_doc[] =
    "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
    "<rss version=\"2.0\" xmlns:content=\"http://purl.org/rss/1.0/modules/content/\"\n"
    "     xmlns:dc=\"http://purl.org/dc/elements/1.1/\" "
    "xmlns:atom=\"http://www.w3.org/2005/Atom\"\n"
    "     xmlns:media=\"http://search.yahoo.com/mrss/\">\n"
    "<channel>\n"
    "  <title>The  &lt;b&gt;Daily&lt;/b&gt; News</title>\n"
    "  <link>https://news.example.com/</link>\n"
    "  <atom:link href=\"https://news.example.com/feed.xml\" rel=\"self\"/>\n"
    "  <description>All the news</description>\n"
    "  <language>en-gb</language>\n"
    "  <lastBuildDate>Tue, 14 May 2024 10:00:00 +0200</lastBuildDate>\n"
    "  <managingEditor>editor@example.com (Ed Itor)</managingEditor>\n"
    "  <item>\n"
    "    <title>Story &amp;amp; more</title>\n"
    "    <link>https://News.Example.com:443/2024/story?utm_source=rss&amp;id=7#top</link>\n"
    "    <guid isPermaLink=\"false\">story-7</guid>\n"
    "    <pubDate>Tue, 14 May 2024 08:30:00 GMT</pubDate>\n"
    "    <dc:creator>Jane Doe</dc:creator>\n"
    "    <dc:creator>John Roe</dc:creator>\n"
    "    <category>World</category><category>Politics</category><category>World</category>\n"
    "    <description>&lt;p&gt;Short &lt;em&gt;summary&lt;/em&gt;.&lt;/p&gt;</description>\n"
    "    <content:encoded><![CDATA[<p>The <b>full</b> body.</p><script>x()</script>]]>"
    "</content:encoded>\n"
    "  </item>\n"
    "  <item>\n"
    "    <title>Second</title>\n"
    "    <guid>https://news.example.com/2024/second</guid>\n"
    "    <dc:date>2024-05-14T09:00:00+01:00</dc:date>\n"
    "    <media:group><media:description>Media text</media:description></media:group>\n"
    "  </item>\n"
    "</channel>\n"
    "</rss>\n";

static void test_rss(void)
{
    nf_feed_t f;
    NF_REQUIRE(parse_str(&f, rss_doc, NULL) == NF_FEED_OK);
    NF_CHECK_EQ(f.format, NF_FEED_RSS);
    NF_CHECK_STR(f.version, "2.0");
    NF_CHECK_STR(f.title, "The Daily News");
    NF_CHECK_STR(f.link, "https://news.example.com/");
    NF_CHECK_STR(f.feed_link, "https://news.example.com/feed.xml");
    NF_CHECK_STR(f.description, "All the news");
    NF_CHECK_STR(f.language, "en-gb");
    NF_CHECK_EQ(f.updated_ms, 1715673600000LL); /* 08:00Z */
    NF_CHECK_EQ(f.published_ms, 0);
    NF_REQUIRE(f.nauthors == 1);
    NF_CHECK_STR(f.authors[0].name, "Ed Itor");
    NF_CHECK_STR(f.authors[0].email, "editor@example.com");
    NF_CHECK_EQ(f.nlinks, 2);
    NF_CHECK_EQ(f.warnings, 0);
    NF_REQUIRE(f.nitems == 2);

    const nf_article_t *a = &f.items[0];
    NF_CHECK_STR(a->title, "Story & more"); /* an RSS title is HTML: decoded twice */
    NF_CHECK_STR(a->link, "https://News.Example.com:443/2024/story?utm_source=rss&id=7#top");
    NF_CHECK_STR(a->url, "https://news.example.com/2024/story?id=7");
    char id[33];
    nf_url_article_id(a->url, id);
    NF_CHECK_STR(a->article_id, id);
    NF_CHECK_STR(a->guid, "story-7");
    NF_CHECK_STR(a->summary, "Short summary.");
    NF_CHECK_STR(a->body, "The full body.");
    NF_CHECK_EQ(a->published_ms, 1715675400000LL);
    NF_CHECK_EQ(a->updated_ms, a->published_ms);
    NF_CHECK(!a->date_fallback);
    NF_REQUIRE(a->nauthors == 2);
    NF_CHECK_STR(a->authors[0].name, "Jane Doe");
    NF_CHECK_STR(a->authors[1].name, "John Roe");
    NF_CHECK(a->authors[0].email == NULL);
    NF_REQUIRE(a->ncategories == 2); /* duplicate dropped */
    NF_CHECK_STR(a->categories[0], "World");
    NF_CHECK_STR(a->categories[1], "Politics");
    NF_CHECK_STR(a->language, "en-gb"); /* the feed's */
    uint8_t d[32];
    char hash[65];
    char buf[256];
    snprintf(buf, sizeof buf, "%s\n%s", a->title, a->body);
    nf_sha256(buf, strlen(buf), d);
    nf_hex(d, 32, hash);
    NF_CHECK_STR(a->content_hash, hash);

    const nf_article_t *b = &f.items[1];
    NF_CHECK_STR(b->link, "https://news.example.com/2024/second"); /* permalink guid */
    NF_CHECK_STR(b->url, "https://news.example.com/2024/second");
    NF_CHECK_EQ(b->published_ms, 1715673600000LL);
    NF_CHECK_STR(b->summary, "Media text");
    NF_CHECK_STR(b->body, "Media text"); /* no content: the summary */
    nf_feed_free(&f);
}

static void test_rdf(void)
{
    static const char doc[] =
        "<rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\"\n"
        "         xmlns=\"http://purl.org/rss/1.0/\" "
        "xmlns:dc=\"http://purl.org/dc/elements/1.1/\">\n"
        " <channel rdf:about=\"http://example.org/index.rdf\"><title>RDF</title>\n"
        "  <link>http://example.org/</link><dc:language>fr</dc:language></channel>\n"
        " <item rdf:about=\"http://example.org/1\"><title>Un</title>\n"
        "  <link>http://example.org/1</link><dc:date>2024-01-02</dc:date>\n"
        "  <dc:subject>Tech</dc:subject></item>\n"
        " <item><title>Deux</title><link>/2</link></item>\n"
        "</rdf:RDF>";
    nf_feed_t f;
    NF_REQUIRE(parse_str(&f, doc, "http://feeds.example.org/x/index.rdf") == NF_FEED_OK);
    NF_CHECK_EQ(f.format, NF_FEED_RDF);
    NF_CHECK_STR(f.version, "1.0");
    NF_CHECK_STR(f.title, "RDF");
    NF_CHECK_STR(f.language, "fr");
    NF_REQUIRE(f.nitems == 2);
    NF_CHECK_STR(f.items[0].title, "Un");
    NF_CHECK_EQ(f.items[0].published_ms, 1704153600000LL);
    NF_REQUIRE(f.items[0].ncategories == 1);
    NF_CHECK_STR(f.items[0].categories[0], "Tech");
    NF_CHECK_STR(f.items[1].link, "http://feeds.example.org/2"); /* against the feed URL */
    NF_CHECK_STR(f.items[1].language, "fr");
    nf_feed_free(&f);
}

static void test_atom(void)
{
    static const char doc[] =
        "<feed xmlns=\"http://www.w3.org/2005/Atom\" xml:lang=\"de\"\n"
        "      xml:base=\"https://blog.example.net/base/\">\n"
        " <title type=\"html\">A &amp;lt;i&amp;gt;blog&amp;lt;/i&amp;gt;</title>\n"
        " <subtitle>Sub</subtitle>\n"
        " <link rel=\"self\" href=\"feed.atom\"/><link href=\"/\"/>\n"
        " <updated>2024-03-01T12:00:00Z</updated>\n"
        " <author><name>Feed Author</name><email>fa@example.net</email></author>\n"
        " <entry xml:base=\"posts/\" xml:lang=\"en\">\n"
        "  <title>Entry &lt;one&gt;</title>\n"
        "  <link rel=\"alternate\" href=\"one.html\"/><link rel=\"enclosure\" href=\"a.mp3\"/>\n"
        "  <link rel=\"related\" href=\"https://other.example/\"/>\n"
        "  <id>tag:example.net,2024:1</id>\n"
        "  <updated>2024-03-01T11:00:00Z</updated>\n"
        "  <category term=\"t1\" label=\"Label One\"/><category term=\"t2\"/>\n"
        "  <summary type=\"xhtml\"><div xmlns=\"http://www.w3.org/1999/xhtml\">"
        "<p>Para &amp; <b>bold</b></p><p>two</p></div></summary>\n"
        "  <content type=\"html\">&lt;p&gt;Body&lt;/p&gt;</content>\n"
        " </entry>\n"
        " <entry><title>Two</title><id>https://blog.example.net/2</id>\n"
        "  <published>2024-02-01T00:00:00Z</published>\n"
        "  <author><name>Other</name></author></entry>\n"
        "</feed>";
    nf_feed_t f;
    NF_REQUIRE(parse_str(&f, doc, NULL) == NF_FEED_OK);
    NF_CHECK_EQ(f.format, NF_FEED_ATOM);
    NF_CHECK_STR(f.version, "1.0");
    NF_CHECK_STR(f.title, "A <i>blog</i>");
    NF_CHECK_STR(f.description, "Sub");
    NF_CHECK_STR(f.link, "https://blog.example.net/");
    NF_CHECK_STR(f.feed_link, "https://blog.example.net/base/feed.atom");
    NF_CHECK_STR(f.language, "de");
    NF_CHECK_EQ(f.updated_ms, 1709294400000LL);
    NF_REQUIRE(f.nitems == 2);
    const nf_article_t *a = &f.items[0];
    NF_CHECK_STR(a->title, "Entry <one>");
    NF_CHECK_STR(a->link, "https://blog.example.net/base/posts/one.html");
    NF_CHECK_EQ(a->nlinks, 2); /* alternate and related; not the enclosure */
    NF_CHECK_STR(a->guid, "tag:example.net,2024:1");
    NF_CHECK_STR(a->summary, "Para & bold two");
    NF_CHECK_STR(a->body, "Body");
    NF_CHECK_STR(a->language, "en");
    NF_CHECK_EQ(a->published_ms, 1709290800000LL); /* updated stands in */
    NF_REQUIRE(a->ncategories == 2);
    NF_CHECK_STR(a->categories[0], "Label One");
    NF_CHECK_STR(a->categories[1], "t2");
    NF_REQUIRE(a->nauthors == 1); /* inherited from the feed (RFC 4287 4.1.2) */
    NF_CHECK_STR(a->authors[0].name, "Feed Author");
    const nf_article_t *b = &f.items[1];
    NF_CHECK_STR(b->link, "https://blog.example.net/2"); /* the id is a URL */
    NF_CHECK_STR(b->language, "de");
    NF_REQUIRE(b->nauthors == 1);
    NF_CHECK_STR(b->authors[0].name, "Other");
    NF_CHECK_EQ(b->updated_ms, b->published_ms);
    nf_feed_free(&f);
}

static void test_atom03(void)
{
    static const char doc[] =
        "<feed version=\"0.3\" xmlns=\"http://purl.org/atom/ns#\">\n"
        " <title mode=\"escaped\" type=\"text/html\">T &amp;amp; U</title>\n"
        " <tagline>Tag</tagline><modified>2004-01-01T19:48:21Z</modified>\n"
        " <entry><title mode=\"base64\">QmFzZTY0IHRpdGxl</title>\n"
        "  <link rel=\"alternate\" href=\"http://example.org/e\"/>\n"
        "  <issued>2003-12-31T10:00:00-05:00</issued><modified>2004-01-01T00:00:00Z</modified>\n"
        "  <content type=\"application/xhtml+xml\" mode=\"xml\">"
        "<div xmlns=\"http://www.w3.org/1999/xhtml\">x &lt; y</div></content></entry>\n"
        "</feed>";
    nf_feed_t f;
    NF_REQUIRE(parse_str(&f, doc, NULL) == NF_FEED_OK);
    NF_CHECK_STR(f.version, "0.3");
    NF_CHECK_STR(f.title, "T & U");
    NF_CHECK_STR(f.description, "Tag");
    NF_CHECK_EQ(f.updated_ms, 1072986501000LL);
    NF_REQUIRE(f.nitems == 1);
    NF_CHECK_STR(f.items[0].title, "Base64 title");
    NF_CHECK_STR(f.items[0].body, "x < y");
    NF_CHECK_EQ(f.items[0].published_ms, 1072882800000LL);
    NF_CHECK_EQ(f.items[0].updated_ms, 1072915200000LL);
    nf_feed_free(&f);
}

static void test_json(void)
{
    static const char doc[] =
        "{\"version\": \"https://jsonfeed.org/version/1.1\", \"title\": \"J\",\n"
        " \"home_page_url\": \"https://j.example/\", \"feed_url\": \"https://j.example/f.json\",\n"
        " \"language\": \"es\", \"authors\": [{\"name\": \"A\"}],\n"
        " \"items\": [\n"
        "  {\"id\": \"1\", \"url\": \"/p/1\", \"title\": \"One &amp; two\",\n"
        "   \"content_html\": \"<p>Hello <b>world</b></p>\", \"content_text\": \"plain\",\n"
        "   \"summary\": \"Sum\", \"date_published\": \"2024-05-01T00:00:00Z\",\n"
        "   \"date_modified\": \"2024-05-02T00:00:00Z\", \"tags\": [\"a\", \"b\"],\n"
        "   \"author\": {\"name\": \"Old\", \"url\": \"mailto:old@example.com\"}},\n"
        "  {\"id\": \"https://j.example/2\", \"content_text\": \"only text\"}\n"
        " ]}";
    nf_feed_t f;
    NF_REQUIRE(parse_str(&f, doc, NULL) == NF_FEED_OK);
    NF_CHECK_EQ(f.format, NF_FEED_JSON);
    NF_CHECK_STR(f.version, "1.1");
    NF_CHECK_STR(f.link, "https://j.example/");
    NF_CHECK_STR(f.feed_link, "https://j.example/f.json");
    NF_CHECK_EQ(f.updated_ms, 1714608000000LL); /* newest item */
    NF_REQUIRE(f.nitems == 2);
    const nf_article_t *a = &f.items[0];
    NF_CHECK_STR(a->link, "https://j.example/p/1"); /* against home_page_url */
    NF_CHECK_STR(a->title, "One & two");
    NF_CHECK_STR(a->body, "Hello world");
    NF_CHECK_STR(a->summary, "Sum");
    NF_CHECK_STR(a->language, "es");
    NF_REQUIRE(a->nauthors == 1);
    NF_CHECK_STR(a->authors[0].name, "Old");
    NF_CHECK_STR(a->authors[0].email, "old@example.com");
    NF_CHECK_EQ(a->ncategories, 2);
    NF_CHECK_STR(f.items[1].link, "https://j.example/2");
    NF_CHECK_STR(f.items[1].body, "only text");
    NF_CHECK(f.items[1].date_fallback);
    nf_feed_free(&f);
}

/* ---- article rules ------------------------------------------------------------------------- */

static void test_dates_and_fallback(void)
{
    static const char doc[] =
        "<rss version=\"2.0\"><channel>\n"
        "<item><title>none</title></item>\n"
        "<item><title>bad</title><pubDate>someday soon</pubDate></item>\n"
        "<item><title>ok</title><pubDate>Sat, 07 Sep 2002 00:00:01 GMT</pubDate></item>\n"
        "</channel></rss>";
    nf_feed_t f;
    NF_REQUIRE(parse_str(&f, doc, NULL) == NF_FEED_OK);
    NF_REQUIRE(f.nitems == 3);
    NF_CHECK(f.items[0].date_fallback);
    NF_CHECK_EQ(f.items[0].published_ms, FETCHED);
    NF_CHECK_EQ(f.items[0].updated_ms, FETCHED);
    NF_CHECK(f.items[1].date_fallback);
    NF_CHECK(!f.items[2].date_fallback);
    NF_CHECK_EQ(f.items[2].published_ms, 1031356801000LL);
    NF_CHECK_EQ(f.warnings, 1);
    NF_CHECK(has(f.first_warning, "item 2") && has(f.first_warning, "someday soon"));
    /* Items without a link keep url NULL and an empty article_id. */
    NF_CHECK(f.items[0].url == NULL && f.items[0].article_id[0] == '\0');
    nf_feed_free(&f);
}

static void test_links(void)
{
    static const char doc[] =
        "<rss version=\"2.0\"><channel><link>https://site.example/news/</link>\n"
        "<item><link>story.html</link></item>\n"
        "<item><guid isPermaLink=\"false\">https://site.example/not-a-link</guid></item>\n"
        "<item><guid>https://site.example/permalink</guid></item>\n"
        "<item><link>ftp://site.example/file</link></item>\n"
        "<item><link>https://a.example/1</link><link>https://a.example/2</link></item>\n"
        "<item><link>https://a.example/x</link>"
        "<feedburner:origLink xmlns:feedburner=\"http://rssnamespace.org/feedburner/ext/1.0\">"
        "https://orig.example/y</feedburner:origLink></item>\n"
        "</channel></rss>";
    nf_feed_t f;
    /* No feed URL: relative links resolve against the channel's link. */
    NF_REQUIRE(parse_str(&f, doc, NULL) == NF_FEED_OK);
    NF_REQUIRE(f.nitems == 6);
    NF_CHECK_STR(f.items[0].url, "https://site.example/news/story.html");
    NF_CHECK(f.items[1].link == NULL && f.items[1].url == NULL);
    NF_CHECK_STR(f.items[1].guid, "https://site.example/not-a-link");
    NF_CHECK_STR(f.items[2].url, "https://site.example/permalink");
    NF_CHECK_STR(f.items[3].link, "ftp://site.example/file");
    NF_CHECK(f.items[3].url == NULL && !f.items[3].article_id[0]);
    NF_CHECK_STR(f.items[4].link, "https://a.example/2"); /* the last <link>, as gofeed */
    NF_CHECK_EQ(f.items[4].nlinks, 2);
    NF_CHECK_STR(f.items[5].url, "https://orig.example/y");
    NF_CHECK(f.warnings >= 1); /* the ftp link */
    nf_feed_free(&f);

    /* With a feed URL, it wins over the channel link. */
    NF_REQUIRE(parse_str(&f, doc, "https://feeds.example/rss/all.xml") == NF_FEED_OK);
    NF_CHECK_STR(f.items[0].url, "https://feeds.example/rss/story.html");
    nf_feed_free(&f);

    /* Without either, a relative link stays as published and has no url. */
    NF_REQUIRE(parse_str(&f, "<rss><channel><item><link>/a</link></item></channel></rss>", NULL) ==
               NF_FEED_OK);
    NF_REQUIRE(f.nitems == 1);
    NF_CHECK_STR(f.items[0].link, "/a");
    NF_CHECK(f.items[0].url == NULL);
    NF_CHECK_STR(f.version, "");
    nf_feed_free(&f);
}

static void test_limits(void)
{
    nf_feed_limits_t lim;
    nf_feed_limits_default(&lim);
    lim.max_items = 3;
    lim.max_title = 10;
    lim.max_summary = 8;
    lim.max_list = 2;
    char doc[8192] = "<rss version=\"2.0\"><channel>";
    for (int i = 0; i < 5; i++)
        snprintf(doc + strlen(doc), sizeof doc - strlen(doc),
                 "<item><title>Ünïcödé title %d</title><description>0123456789abcdef"
                 "</description><category>a</category><category>b</category>"
                 "<category>c</category></item>",
                 i);
    strcat(doc, "</channel></rss>");
    nf_feed_t f;
    NF_REQUIRE(parse_lim(&f, doc, strlen(doc), NULL, &lim) == NF_FEED_OK);
    NF_CHECK_EQ(f.nitems, 3);
    NF_CHECK_EQ(f.truncated_items, 2);
    NF_REQUIRE(f.nitems == 3);
    NF_CHECK(strlen(f.items[0].title) <= 10);
    NF_CHECK_STR(f.items[0].title, "Ünïcöd"); /* 9 bytes: "é" would make 11 */
    NF_CHECK_STR(f.items[0].summary, "01234567");
    NF_CHECK_STR(f.items[0].body, "0123456789abcdef"); /* body cap is the default */
    NF_CHECK_EQ(f.items[0].ncategories, 2);
    nf_feed_free(&f);
}

static void test_args(void)
{
    nf_feed_t f;
    NF_CHECK_EQ(nf_feed_parse(&f, NULL, 0, NULL, 0, NULL, NULL, 0), NF_FEED_E_MALFORMED);
    nf_feed_free(&f);
    NF_CHECK_EQ(nf_feed_parse(&f, "<rss/>", 6, NULL, 0, NULL, NULL, 0), NF_FEED_OK);
    NF_CHECK_EQ(f.nitems, 0);
    nf_feed_free(&f);
    nf_feed_free(NULL);
    NF_CHECK_STR(nf_feed_format_name(NF_FEED_RDF), "rdf");
    NF_CHECK_STR(nf_feed_strerror(NF_FEED_E_TOO_DEEP), "document nested too deeply");
}

static void test_arena(void)
{
    nf_arena_t *a = nf_arena_new(64);
    NF_REQUIRE(a);
    char *s = nf_arena_strndup(a, "hello", 5);
    NF_CHECK_STR(s, "hello");
    char *big = nf_arena_alloc_str(a, 100000); /* own block */
    NF_REQUIRE(big);
    memset(big, 'x', 100000);
    char *t = nf_arena_alloc_str(a, 100);
    NF_REQUIRE(t);
    nf_arena_shrink(a, t, 10);
    char *u = nf_arena_alloc_str(a, 1);
    NF_CHECK(u == t + 10); /* the shrunk tail was given back */
    void *al = nf_arena_alloc(a, 24);
    NF_CHECK(((uintptr_t)al % _Alignof(max_align_t)) == 0);
    NF_CHECK(nf_arena_used(a) <= nf_arena_reserved(a));
    nf_arena_free(a);
}

/* ---- hostile inputs ------------------------------------------------------------------------ */

/* Memory of a parse result: what the arena took from malloc. */
static size_t reserved(const nf_feed_t *f)
{
    return f->arena ? nf_arena_reserved(f->arena) : 0;
}

static void test_billion_laughs(void)
{
    nf_feed_t f;
    NF_REQUIRE(parse_file(&f, "billion_laughs.xml") == NF_FEED_OK);
    NF_CHECK(g_ms < MAX_MS);
    NF_REQUIRE(f.nitems == 2);
    NF_CHECK_STR(f.items[0].title, "&lol9;"); /* inert text */
    NF_CHECK_STR(f.title, "Bomb &lol9;");
    NF_CHECK_STR(f.items[1].title, "second");
    NF_CHECK(reserved(&f) < 256 * 1024);
    nf_feed_free(&f);
}

/* DOCTYPE internal entities (feed_dtd.c): expanded within their limits, text beyond them. */
static void test_entity_limits(void)
{
    nf_feed_t f;
    size_t cap = 64 * 1024 + 200 * 64 + 20 * 8;
    char *doc = malloc(cap);
    NF_REQUIRE(doc);

    /* The document's budget: 1 MiB of expansions, so 131 of 200 references of 8,000 bytes. */
    size_t n = (size_t)snprintf(doc, cap, "<!DOCTYPE rss [<!ENTITY big \"");
    memset(doc + n, 'B', 8000);
    n += 8000;
    n += (size_t)snprintf(doc + n, cap - n, "\">]><rss><channel>");
    for (int i = 0; i < 200; i++)
        n += (size_t)snprintf(doc + n, cap - n, "<item><title>&big;</title></item>");
    n += (size_t)snprintf(doc + n, cap - n, "</channel></rss>");
    NF_REQUIRE(parse_lim(&f, doc, n, NULL, NULL) == NF_FEED_OK);
    NF_REQUIRE(f.nitems == 200);
    size_t expanded = 0, text = 0;
    for (size_t i = 0; i < f.nitems; i++) {
        expanded += !strncmp(f.items[i].title, "BBBB", 4);
        text += !strcmp(f.items[i].title, "&big;");
    }
    NF_CHECK_EQ(expanded, 1048576 / 8000);
    NF_CHECK_EQ(text, 200 - 1048576 / 8000);
    NF_CHECK(has(f.first_warning, "budget"));
    nf_feed_free(&f);

    /* At most 10,000 references, however small. */
    n = (size_t)snprintf(doc, cap,
                         "<!DOCTYPE rss [<!ENTITY c \"c\">]><rss><channel><item>"
                         "<description>");
    for (int i = 0; i < 10001; i++)
        n += (size_t)snprintf(doc + n, cap - n, "&c;");
    n += (size_t)snprintf(doc + n, cap - n, "</description></item></channel></rss>");
    NF_REQUIRE(parse_lim(&f, doc, n, NULL, NULL) == NF_FEED_OK);
    NF_REQUIRE(f.nitems == 1);
    const char *body = f.items[0].body;
    NF_CHECK(strlen(body) == 10000 + 3 && !strcmp(body + 10000, "&c;") && body[9999] == 'c');
    nf_feed_free(&f);

    /* Nesting: a chain of 21 entities; 16 levels of references inside one expand, deeper ones
     * are refused; a cycle is too. */
    n = (size_t)snprintf(doc, cap, "<!DOCTYPE rss [");
    for (int i = 0; i < 20; i++)
        n += (size_t)snprintf(doc + n, cap - n, "<!ENTITY e%d \"&e%d;\">", i, i + 1);
    n += (size_t)snprintf(doc + n, cap - n,
                          "<!ENTITY e20 \"end\"><!ENTITY a \"&b;\"><!ENTITY b \"&a;\">"
                          "<!ENTITY e20 \"second declaration\">]><rss><channel>"
                          "<item><title>&e0;</title></item><item><title>&e4;</title></item>"
                          "<item><title>&a;</title></item></channel></rss>");
    NF_REQUIRE(parse_lim(&f, doc, n, NULL, NULL) == NF_FEED_OK);
    NF_REQUIRE(f.nitems == 3);
    NF_CHECK_STR(f.items[0].title, "&e0;");
    NF_CHECK_STR(f.items[1].title, "end"); /* the first declaration wins */
    NF_CHECK_STR(f.items[2].title, "&a;");
    nf_feed_free(&f);

    /* Markup in an expansion is markup, as in XML; CDATA and comments are not expanded. */
    const char *markup = "<!DOCTYPE rss [<!ENTITY b \"<b>bold</b> &amp; more\">]><rss><channel>"
                         "<item><title>&b;</title><description><![CDATA[&b;]]></description>"
                         "</item></channel><!-- &b; --></rss>";
    NF_REQUIRE(parse_str(&f, markup, NULL) == NF_FEED_OK);
    NF_REQUIRE(f.nitems == 1);
    NF_CHECK_STR(f.items[0].title, "bold & more");
    NF_CHECK_STR(f.items[0].summary, "&b;");
    NF_CHECK_EQ(f.warnings, 0);
    nf_feed_free(&f);
    free(doc);
}

/* The repair pass finds CDATA sections and comments by their rare byte ('!', ']'), then checks
 * around it: near misses on either side must not end or start a region early. */
static void test_cdata_boundaries(void)
{
    static const char doc[] =
        "<!-- & --><rss><channel><item><title>a ] ]] ! &x</title>"
        "<description><![CDATA[ x]] ]> ]]]&y !]]></description>"
        "<guid><![CDATA[x]] ]> ]]]&y]]></guid>"
        "<link>http://e.example/?a=1&b=2</link></item><!-- - -> & -->"
        "<item><title>&z;<![CDATA[]]]]><![CDATA[x&]]></title></item></channel></rss>";
    nf_feed_t f;
    NF_REQUIRE(parse_str(&f, doc, NULL) == NF_FEED_OK);
    NF_REQUIRE(f.nitems == 2);
    NF_CHECK_STR(f.items[0].title, "a ] ]] ! &x");
    NF_CHECK_STR(f.items[0].summary, "x]] ]> ]]]&y !");
    NF_CHECK_STR(f.items[0].link, "http://e.example/?a=1&b=2");
    NF_CHECK_STR(f.items[0].guid, "x]] ]> ]]]&y"); /* plain text: an escaped '&' would show */
    NF_CHECK_STR(f.items[1].title, "&z;]]x&");
    nf_feed_free(&f);
}

static void test_quadratic_blowup(void)
{
    nf_feed_t f;
    NF_REQUIRE(parse_file(&f, "quadratic_blowup.xml") == NF_FEED_OK);
    NF_CHECK(g_ms < MAX_MS);
    NF_REQUIRE(f.nitems == 1);
    NF_CHECK(has(f.items[0].summary, "&a;&a;"));
    NF_CHECK(!has(f.items[0].summary, "AAAA"));
    NF_CHECK(reserved(&f) < 1024 * 1024);
    nf_feed_free(&f);
}

static void test_xxe_file(void)
{
    nf_feed_t f;
    NF_REQUIRE(parse_file(&f, "xxe_file.xml") == NF_FEED_OK);
    NF_CHECK(g_ms < MAX_MS);
    NF_REQUIRE(f.nitems == 1);
    NF_CHECK_STR(f.items[0].title, "&xxe;");
    NF_CHECK_STR(f.items[0].summary, "before &xxe; after");
    NF_CHECK(!has(f.title, "root:"));
    nf_feed_free(&f);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL: parse blocked opening a FIFO: an external entity or DTD "
                              "was read\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

/* Every way a document can ask for an outside file, pointed at a FIFO nobody writes: opening
 * it would block until the alarm fires. */
static void test_external_never_opened(void)
{
    char dir[] = "/tmp/nf_feed_fifo_XXXXXX";
    NF_REQUIRE(mkdtemp(dir));
    char fifo[128];
    snprintf(fifo, sizeof fifo, "%s/pipe", dir);
    NF_REQUIRE(mkfifo(fifo, 0600) == 0);
    const char *tmpl[] = {
        "<!DOCTYPE rss [<!ENTITY e SYSTEM \"file://%s\">]><rss><channel><title>&e;</title>"
        "<item><title>x &e;</title></item></channel></rss>",
        "<!DOCTYPE rss [<!ENTITY %% p SYSTEM \"file://%s\"> %%p;]><rss><channel><item><title>"
        "y</title></item></channel></rss>",
        "<!DOCTYPE rss SYSTEM \"file://%s\"><rss><channel><item><title>z</title></item>"
        "</channel></rss>",
        "<!DOCTYPE rss SYSTEM \"%s\"><rss><channel><item><title>w</title></item></channel></rss>",
        "<?xml version=\"1.0\"?><!DOCTYPE rss [<!ENTITY e SYSTEM \"%s\">]><rss "
        "xmlns:xi=\"http://www.w3.org/2001/XInclude\"><channel><xi:include href=\"%s\"/>"
        "<item><title attr=\"&e;\">v</title></item></channel></rss>",
    };
    signal(SIGALRM, on_alarm);
    for (size_t i = 0; i < sizeof tmpl / sizeof *tmpl; i++) {
        char doc[1024];
        snprintf(doc, sizeof doc, tmpl[i], fifo, fifo);
        alarm(10);
        nf_feed_t f;
        int rc = parse_str(&f, doc, NULL);
        alarm(0);
        NF_CHECK_EQ(rc, NF_FEED_OK);
        NF_CHECK_EQ(f.nitems, 1);
        nf_feed_free(&f);
    }
    signal(SIGALRM, SIG_DFL);
    unlink(fifo);
    rmdir(dir);
}

static void test_external_dtd(void)
{
    nf_feed_t f;
    NF_REQUIRE(parse_file(&f, "external_dtd.xml") == NF_FEED_OK);
    NF_CHECK(g_ms < MAX_MS);
    NF_CHECK_STR(f.version, "0.91");
    NF_REQUIRE(f.nitems == 1);
    NF_CHECK_STR(f.items[0].title, "Café & crème"); /* HTML entities via the text layer */
    nf_feed_free(&f);
}

static void test_too_large(void)
{
    size_t len = 17u << 20;
    char *big = malloc(len);
    NF_REQUIRE(big);
    memset(big, ' ', len);
    memcpy(big, "<rss><channel>", 14);
    nf_feed_t f;
    NF_CHECK_EQ(parse_lim(&f, big, len, NULL, NULL), NF_FEED_E_TOO_LARGE);
    NF_CHECK(g_ms < 50);
    NF_CHECK(has(g_err, "17825792 bytes") && has(g_err, "16777216"));
    nf_feed_free(&f);
    free(big);
}

static void test_deep_nesting(void)
{
    enum { DEPTH = 10000 };
    size_t cap = DEPTH * 8 + 64;
    char *doc = malloc(cap);
    NF_REQUIRE(doc);
    strcpy(doc, "<rss><channel><item>");
    size_t n = strlen(doc);
    for (int i = 0; i < DEPTH; i++, n += 3)
        memcpy(doc + n, "<a>", 3);
    for (int i = 0; i < DEPTH; i++, n += 4)
        memcpy(doc + n, "</a>", 4);
    doc[n] = '\0';
    nf_feed_t f;
    NF_CHECK_EQ(parse_lim(&f, doc, n, NULL, NULL), NF_FEED_E_TOO_DEEP);
    NF_CHECK(g_ms < MAX_MS);
    NF_CHECK(has(g_err, "deeper than 256"));
    nf_feed_free(&f);

    /* Our own, lower limit, also inside a subtree we do not read. */
    nf_feed_limits_t lim;
    nf_feed_limits_default(&lim);
    lim.max_depth = 16;
    NF_CHECK_EQ(parse_lim(&f, doc, n, NULL, &lim), NF_FEED_E_TOO_DEEP);
    NF_CHECK(has(g_err, "deeper than 16"));
    nf_feed_free(&f);

    /* JSON: measured before cJSON recurses. */
    n = 0;
    n += (size_t)snprintf(doc, cap, "{\"version\":\"1\",\"items\":");
    for (int i = 0; i < DEPTH; i++)
        doc[n++] = '[';
    for (int i = 0; i < DEPTH; i++)
        doc[n++] = ']';
    doc[n++] = '}';
    doc[n] = '\0';
    NF_CHECK_EQ(parse_lim(&f, doc, n, NULL, NULL), NF_FEED_E_TOO_DEEP);
    NF_CHECK(g_ms < MAX_MS);
    nf_feed_free(&f);
    free(doc);
}

static void test_not_feeds(void)
{
    nf_feed_t f;
    NF_CHECK_EQ(parse_file(&f, "html_page.html"), NF_FEED_E_NOT_A_FEED);
    NF_CHECK(has(g_err, "<html>") && has(g_err, "HTML page"));
    nf_feed_free(&f);
    NF_CHECK_EQ(parse_file(&f, "garbage.bin"), NF_FEED_E_MALFORMED);
    NF_CHECK(has(g_err, "line "));
    nf_feed_free(&f);
    NF_CHECK_EQ(parse_file(&f, "garbage.txt"), NF_FEED_E_MALFORMED);
    NF_CHECK(has(g_err, "line 1:1"));
    nf_feed_free(&f);
    NF_CHECK_EQ(parse_file(&f, "empty.xml"), NF_FEED_E_MALFORMED);
    NF_CHECK(has(g_err, "empty"));
    nf_feed_free(&f);
    NF_CHECK_EQ(parse_file(&f, "whitespace_only.xml"), NF_FEED_E_MALFORMED);
    nf_feed_free(&f);
    NF_CHECK_EQ(parse_str(&f, "\x01 \x02\x1b", NULL), NF_FEED_E_MALFORMED);
    NF_CHECK(has(g_err, "empty"));
    nf_feed_free(&f);
    NF_CHECK_EQ(parse_str(&f, "\x01 <?xml version=\"1.0\"?><rss><channel/></rss>", NULL),
                NF_FEED_OK);
    nf_feed_free(&f);
    NF_CHECK_EQ(parse_file(&f, "json_not_feed.json"), NF_FEED_E_NOT_A_FEED);
    nf_feed_free(&f);
    NF_CHECK_EQ(parse_file(&f, "json_array.json"), NF_FEED_E_NOT_A_FEED);
    nf_feed_free(&f);
    NF_CHECK_EQ(parse_str(&f, "{\"version\": \"1.1\", \"items\": [}", NULL), NF_FEED_E_MALFORMED);
    NF_CHECK(has(g_err, "JSON syntax error at line 1:"));
    nf_feed_free(&f);
    NF_CHECK_EQ(parse_str(&f, "<note><to>x</to></note>", NULL), NF_FEED_E_NOT_A_FEED);
    NF_CHECK(has(g_err, "<note>"));
    nf_feed_free(&f);
}

static void test_bare_amp_nbsp(void)
{
    nf_feed_t f;
    NF_REQUIRE(parse_file(&f, "bare_amp_nbsp.xml") == NF_FEED_OK);
    NF_CHECK_STR(f.title, "Fish & Chips Daily");
    NF_REQUIRE(f.nitems == 2);
    NF_CHECK_STR(f.items[0].title, "Tom & Jerry — café");
    NF_CHECK_STR(f.items[0].url, "https://example.com/story?a=1&b=2");
    NF_CHECK(has(f.items[0].summary, "Q&A © 2024 A"));
    NF_CHECK_STR(f.items[1].title, "AT&T");
    NF_CHECK(f.warnings >= 1 && has(f.first_warning, "line 2:"));
    nf_feed_free(&f);
}

/* After a fatal (recovered) error libxml2 drops named references; the second reading keeps
 * them. */
static void test_recovery_keeps_entities(void)
{
    nf_feed_t f;
    NF_REQUIRE(parse_file(&f, "mismatched_tags.xml") == NF_FEED_OK);
    NF_REQUIRE(f.nitems == 2);
    NF_CHECK_STR(f.items[1].title, "Two");
    nf_feed_free(&f);
    static const char doc[] =
        "<rss><channel><item><title>a <b>b</i></title></item>"
        "<item><title>AT&amp;T &lt;3</title><link>http://e.example/?a=1&amp;b=2</link>"
        "<description><![CDATA[x &amp; y]]></description></item></channel></rss>";
    NF_REQUIRE(parse_str(&f, doc, NULL) == NF_FEED_OK);
    NF_REQUIRE(f.nitems == 2);
    NF_CHECK_STR(f.items[1].title, "AT&T <3");
    NF_CHECK_STR(f.items[1].link, "http://e.example/?a=1&b=2");
    NF_CHECK_STR(f.items[1].summary, "x & y");
    NF_CHECK(has(f.first_warning, "mismatch"));
    nf_feed_free(&f);
}

static void test_truncated(void)
{
    nf_feed_t f;
    NF_REQUIRE(parse_file(&f, "truncated.xml") == NF_FEED_OK);
    NF_CHECK_EQ(f.nitems, 1);
    NF_CHECK_EQ(f.skipped_items, 1);
    NF_CHECK(f.warnings >= 1);
    nf_feed_free(&f);
}

static void test_control_chars(void)
{
    nf_feed_t f;
    NF_REQUIRE(parse_file(&f, "control_chars.xml") == NF_FEED_OK);
    NF_CHECK_STR(f.title, "Ctl chars");
    NF_REQUIRE(f.nitems == 1);
    NF_CHECK_STR(f.items[0].title, "AB");
    nf_feed_free(&f);
}

static void check_text(const char *file, const char *title, const char *item, const char *enc)
{
    nf_feed_t f;
    int rc = parse_file(&f, file);
    NF_CHECK_EQ(rc, NF_FEED_OK);
    if (rc == NF_FEED_OK) {
        NF_CHECK_STR(f.title, title);
        NF_CHECK(f.nitems == 1 && !strcmp(f.items[0].title, item));
        if (!has(f.encoding, enc))
            fprintf(stderr, "  %s: encoding '%s', want '%s'\n", file, f.encoding, enc);
        NF_CHECK(has(f.encoding, enc));
    } else {
        fprintf(stderr, "  %s: %s\n", file, g_err);
    }
    nf_feed_free(&f);
}

/* Declared and really KOI8-R: libxml2 decodes it (iconv). */
static void test_koi8r(void)
{
    /* "Привет" in KOI8-R */
    static const char doc[] = "<?xml version=\"1.0\" encoding=\"KOI8-R\"?><rss><channel><title>"
                              "\xf0\xd2\xc9\xd7\xc5\xd4</title></channel></rss>";
    nf_feed_t f;
    NF_REQUIRE(parse_str(&f, doc, NULL) == NF_FEED_OK);
    NF_CHECK_STR(f.title, "Привет");
    NF_CHECK_STR(f.encoding, "KOI8-R (declared)");
    NF_CHECK_EQ(f.warnings, 0);
    nf_feed_free(&f);
}

static void test_encodings(void)
{
    check_text("declared_latin1_is_utf8.xml", "Café Zürich", "Crème brûlée — naïve",
               "UTF-8 (declared ISO-8859-1)");
    check_text("declared_utf8_is_cp1252.xml", "Café Zürich", "Crème brûlée — naïve €",
               "windows-1252");
    check_text("latin1_declared.xml", "Café Zürich", "Crème brûlée",
               "windows-1252 (declared ISO-8859-1)");
    check_text("unknown_encoding_latin1.xml", "Café", "Crème", "windows-1252");
    check_text("unknown_encoding_utf8.xml", "Café", "Crème", "UTF-8");
    check_text("bom_utf8.xml", "Café ☕ 𝄞", "Crème", "UTF-8 (BOM)");
    check_text("bom_utf16le.xml", "Café ☕ 𝄞", "Crème", "UTF-16LE (BOM)");
    check_text("bom_utf16be.xml", "Café ☕ 𝄞", "Crème", "UTF-16BE (BOM)");
    check_text("utf16le_no_bom.xml", "Café ☕ 𝄞", "Crème", "UTF-16LE (no BOM)");
}

static void test_json_wrong_types(void)
{
    nf_feed_t f;
    NF_REQUIRE(parse_file(&f, "json_wrong_types.json") == NF_FEED_OK);
    NF_CHECK_STR(f.title, "");
    NF_CHECK(f.link == NULL);
    NF_CHECK_EQ(f.nauthors, 0);
    NF_CHECK_EQ(f.skipped_items, 2); /* a string and a null */
    NF_REQUIRE(f.nitems == 3);
    NF_CHECK_STR(f.items[0].guid, "12345");
    NF_CHECK_STR(f.items[0].title, "");
    NF_CHECK_STR(f.items[0].body, "kept");
    NF_CHECK_EQ(f.items[0].ncategories, 1);
    NF_CHECK(f.items[0].date_fallback); /* a number is no date */
    NF_CHECK_STR(f.items[1].link, "https://example.com/ext");
    NF_CHECK_STR(f.items[1].body, "Hi & bye");
    NF_CHECK_EQ(f.items[1].nauthors, 1);
    NF_CHECK_EQ(f.items[2].updated_ms, 1714550400000LL);
    NF_CHECK(f.warnings >= 8);
    nf_feed_free(&f);
}

/* Random corruptions of a valid feed: never a crash, and any outcome is a defined one. */
/* NULL-safe string equality. */
static bool same_str(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

/* Parses doc pulled and pushed (feed_xml.c) and requires the same outcome: status, feed fields,
 * every article's fields, counts and warnings. Returns the status. */
static int parse_both_ways(const char *doc, size_t len)
{
    nf_feed_limits_t lim;
    nf_feed_limits_default(&lim);
    nf_feed_t f[2];
    int rc[2];
    char err[2][256];
    for (int m = 0; m < 2; m++) {
        lim.xml_mode = m ? NF_FEED_XML_PUSH : NF_FEED_XML_PULL;
        rc[m] = nf_feed_parse(&f[m], doc, len, "https://m.example/", FETCHED, &lim, err[m],
                              sizeof err[m]);
    }
    NF_CHECK_EQ(rc[0], rc[1]);
    if (rc[0] == NF_FEED_OK && rc[1] == NF_FEED_OK) {
        bool same = f[0].nitems == f[1].nitems && f[0].warnings == f[1].warnings &&
                    f[0].skipped_items == f[1].skipped_items && same_str(f[0].title, f[1].title) &&
                    same_str(f[0].link, f[1].link);
        for (size_t i = 0; same && i < f[0].nitems; i++) {
            const nf_article_t *a = &f[0].items[i], *b = &f[1].items[i];
            same = same_str(a->title, b->title) && same_str(a->link, b->link) &&
                   same_str(a->guid, b->guid) && same_str(a->summary, b->summary) &&
                   same_str(a->body, b->body) && a->published_ms == b->published_ms &&
                   a->ncategories == b->ncategories && a->nlinks == b->nlinks &&
                   !strcmp(a->content_hash, b->content_hash);
        }
        if (!same) {
            fprintf(stderr, "  pulled/pushed: items %zu/%zu warnings %u/%u (%s | %s)\n",
                    f[0].nitems, f[1].nitems, f[0].warnings, f[1].warnings,
                    f[0].first_warning ? f[0].first_warning : "-",
                    f[1].first_warning ? f[1].first_warning : "-");
            fprintf(stderr, "  pulled and pushed readings differ on:\n%.*s\n", (int)len, doc);
            NF_CHECK(same);
        }
    } else if (rc[0] == rc[1] && rc[0] != NF_FEED_OK) {
        NF_CHECK_STR(err[0], err[1]);
    }
    for (int m = 0; m < 2; m++)
        if (rc[m] == NF_FEED_OK)
            nf_feed_free(&f[m]);
    return rc[0];
}

/* Every hostile file of tests/data/feeds reads the same pulled and pushed. */
static void test_pull_push_files(void)
{
    static const char *const files[] = {
        "bare_amp_nbsp.xml",
        "billion_laughs.xml",
        "bom_utf16be.xml",
        "bom_utf16le.xml",
        "bom_utf8.xml",
        "control_chars.xml",
        "declared_latin1_is_utf8.xml",
        "declared_utf8_is_cp1252.xml",
        "empty.xml",
        "external_dtd.xml",
        "garbage.txt",
        "html_page.html",
        "latin1_declared.xml",
        "mismatched_tags.xml",
        "quadratic_blowup.xml",
        "truncated.xml",
        "unknown_encoding_latin1.xml",
        "unknown_encoding_utf8.xml",
        "utf16le_no_bom.xml",
        "whitespace_only.xml",
        "xxe_file.xml",
    };
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        size_t len;
        char *doc = slurp(files[i], &len);
        NF_REQUIRE(doc);
        parse_both_ways(doc, len);
        free(doc);
    }
}

static void test_mutations(void)
{
    size_t n = strlen(rss_doc);
    char *doc = malloc(n + 1);
    NF_REQUIRE(doc);
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int ok = 0;
    NF_CHECK_EQ(parse_both_ways(rss_doc, n), NF_FEED_OK); /* well-formed: pushed for real */
    for (int round = 0; round < 2000; round++) {
        memcpy(doc, rss_doc, n + 1);
        size_t len = n;
        for (int k = 0; k < 1 + round % 8; k++) {
            nf_test_xorshift(&seed);
            size_t at = (size_t)(seed % n);
            static const char pool[] = "<>&;\"'/!?[]\x00\xff\xc3#x";
            doc[at] = pool[(seed >> 32) % (sizeof pool - 1)];
            if ((seed >> 40) % 16 == 0)
                len = at; /* truncate */
        }
        nf_feed_t f;
        int rc = nf_feed_parse(&f, doc, len, "https://m.example/", FETCHED, NULL, NULL, 0);
        NF_CHECK(rc == NF_FEED_OK || rc == NF_FEED_E_MALFORMED || rc == NF_FEED_E_NOT_A_FEED);
        NF_CHECK_EQ(parse_both_ways(doc, len), rc);
        if (rc == NF_FEED_OK) {
            ok++;
            for (size_t i = 0; i < f.nitems; i++)
                NF_CHECK(f.items[i].title && f.items[i].body &&
                         strlen(f.items[i].content_hash) == 64);
        }
        nf_feed_free(&f);
    }
    NF_CHECK(ok > 1000);
    free(doc);
}

int main(void)
{
    nf_feed_global_init();
    NF_RUN(test_rss);
    NF_RUN(test_rdf);
    NF_RUN(test_atom);
    NF_RUN(test_atom03);
    NF_RUN(test_json);
    NF_RUN(test_dates_and_fallback);
    NF_RUN(test_links);
    NF_RUN(test_limits);
    NF_RUN(test_args);
    NF_RUN(test_arena);
    NF_RUN(test_billion_laughs);
    NF_RUN(test_quadratic_blowup);
    NF_RUN(test_entity_limits);
    NF_RUN(test_cdata_boundaries);
    NF_RUN(test_xxe_file);
    NF_RUN(test_external_never_opened);
    NF_RUN(test_external_dtd);
    NF_RUN(test_too_large);
    NF_RUN(test_deep_nesting);
    NF_RUN(test_not_feeds);
    NF_RUN(test_bare_amp_nbsp);
    NF_RUN(test_recovery_keeps_entities);
    NF_RUN(test_truncated);
    NF_RUN(test_control_chars);
    NF_RUN(test_encodings);
    NF_RUN(test_koi8r);
    NF_RUN(test_json_wrong_types);
    NF_RUN(test_pull_push_files);
    NF_RUN(test_mutations);
    return nf_test_report();
}
