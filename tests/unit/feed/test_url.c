/* Tests src/feed/url.c: every example of RFC 3986 §5.4 (normal and abnormal) for resolution,
 * a table of normalization cases and errors, and properties over random URLs assembled from
 * the pieces that differ between spellings of one URL: normalization is idempotent, its output
 * contains only characters that need no further encoding, resolving against a normalized base
 * normalizes to the same URL as against the raw one, and article ids are 32 stable hex digits. */
#include "feed/url.h"
#include "nf_test.h"

#include <stdbool.h>
#include <stdlib.h>

typedef struct {
    const char *in, *want;
} case_t;

static void test_rfc3986_examples(void)
{
    static const case_t c[] = {
        /* §5.4.1 normal examples */
        {"g:h", "g:h"},
        {"g", "http://a/b/c/g"},
        {"./g", "http://a/b/c/g"},
        {"g/", "http://a/b/c/g/"},
        {"/g", "http://a/g"},
        {"//g", "http://g"},
        {"?y", "http://a/b/c/d;p?y"},
        {"g?y", "http://a/b/c/g?y"},
        {"#s", "http://a/b/c/d;p?q#s"},
        {"g#s", "http://a/b/c/g#s"},
        {"g?y#s", "http://a/b/c/g?y#s"},
        {";x", "http://a/b/c/;x"},
        {"g;x", "http://a/b/c/g;x"},
        {"g;x?y#s", "http://a/b/c/g;x?y#s"},
        {"", "http://a/b/c/d;p?q"},
        {".", "http://a/b/c/"},
        {"./", "http://a/b/c/"},
        {"..", "http://a/b/"},
        {"../", "http://a/b/"},
        {"../g", "http://a/b/g"},
        {"../..", "http://a/"},
        {"../../", "http://a/"},
        {"../../g", "http://a/g"},
        /* §5.4.2 abnormal examples */
        {"../../../g", "http://a/g"},
        {"../../../../g", "http://a/g"},
        {"/./g", "http://a/g"},
        {"/../g", "http://a/g"},
        {"g.", "http://a/b/c/g."},
        {".g", "http://a/b/c/.g"},
        {"g..", "http://a/b/c/g.."},
        {"..g", "http://a/b/c/..g"},
        {"./../g", "http://a/b/g"},
        {"./g/.", "http://a/b/c/g/"},
        {"g/./h", "http://a/b/c/g/h"},
        {"g/../h", "http://a/b/c/h"},
        {"g;x=1/./y", "http://a/b/c/g;x=1/y"},
        {"g;x=1/../y", "http://a/b/c/y"},
        {"g?y/./x", "http://a/b/c/g?y/./x"},
        {"g?y/../x", "http://a/b/c/g?y/../x"},
        {"g#s/./x", "http://a/b/c/g#s/./x"},
        {"g#s/../x", "http://a/b/c/g#s/../x"},
        {"http:g", "http:g"}, /* strict parser */
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char out[NF_URL_MAX];
        int rc = nf_url_resolve("http://a/b/c/d;p?q", c[i].in, out, sizeof out);
        if (rc < 0 || strcmp(out, c[i].want) != 0 || (size_t)rc != strlen(out)) {
            fprintf(stderr, "  resolve(\"%s\") = %d \"%s\", want \"%s\"\n", c[i].in, rc,
                    rc < 0 ? "" : out, c[i].want);
            NF_CHECK(0);
        }
    }
}

static void test_resolve_feeds(void)
{
    static const struct {
        const char *base, *ref, *want;
    } c[] = {
        {"https://example.com/feed.xml", "/articles/1", "https://example.com/articles/1"},
        {"https://example.com/news/feed.xml", "story.html", "https://example.com/news/story.html"},
        {"https://example.com", "a", "https://example.com/a"},
        {"https://example.com", "", "https://example.com"},
        {"https://example.com/feed#x", "", "https://example.com/feed"},
        {"https://example.com/feed", "  \n\t/x?y=1 \r\n", "https://example.com/x?y=1"},
        {"https://example.com/feed", "//cdn.example.net/a", "https://cdn.example.net/a"},
        {"https://example.com/feed", "http://other.example/a/../b", "http://other.example/b"},
        {NULL, "https://example.com/a", "https://example.com/a"},
        {"", "https://example.com/a", "https://example.com/a"},
        {"not a base", "https://example.com/a", "https://example.com/a"},
        {"https://example.com/a/b", "c d", "https://example.com/a/c d"},
        {"https://example.com/a/b", "?", "https://example.com/a/b?"},
        {"https://example.com/a/b?q", "#", "https://example.com/a/b?q#"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char out[NF_URL_MAX];
        int rc = nf_url_resolve(c[i].base, c[i].ref, out, sizeof out);
        if (rc < 0 || strcmp(out, c[i].want) != 0) {
            fprintf(stderr, "  resolve(\"%s\", \"%s\") = %d \"%s\", want \"%s\"\n",
                    c[i].base ? c[i].base : "(null)", c[i].ref, rc, rc < 0 ? "" : out, c[i].want);
            NF_CHECK(0);
        }
    }

    char out[NF_URL_MAX];
    NF_CHECK_EQ(nf_url_resolve(NULL, "/relative", out, sizeof out), NF_URL_E_SYNTAX);
    NF_CHECK_EQ(nf_url_resolve("also/relative", "x", out, sizeof out), NF_URL_E_SYNTAX);
    NF_CHECK_EQ(nf_url_resolve("", "  ", out, sizeof out), NF_URL_E_EMPTY);
    NF_CHECK_EQ(nf_url_resolve(NULL, NULL, out, sizeof out), NF_URL_E_EMPTY);
    NF_CHECK_EQ(nf_url_resolve("http://a/", "bcdefg", out, 16), 15);
    NF_CHECK_EQ(nf_url_resolve("http://a/", "bcdefgh", out, 16), NF_URL_E_TOO_LONG);

    static char big[NF_URL_MAX + 16];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    NF_CHECK_EQ(nf_url_resolve("http://a/b/c", big, out, sizeof out), NF_URL_E_TOO_LONG);
}

static void test_normalize(void)
{
    static const case_t c[] = {
        {"HTTP://Example.COM:80/a/./b/../c?utm_source=x&id=1#frag", "http://example.com/a/c?id=1"},
        {"https://bücher.example/", "https://xn--bcher-kva.example/"},
        {"https://www.BÜCHER.example/", "https://www.xn--bcher-kva.example/"},
        {"http://münchen.de/straße?q=ä", "http://xn--mnchen-3ya.de/stra%C3%9Fe?q=%C3%A4"},
        {"http://faß.de/", "http://xn--fa-hia.de/"}, /* IDNA 2008, not "fass.de" */
        {"http://b%C3%BCcher.example/", "http://xn--bcher-kva.example/"},
        {"https://example.com:443/", "https://example.com/"},
        {"http://example.com:443/", "http://example.com:443/"},
        {"https://example.com:80/", "https://example.com:80/"},
        {"http://example.com:8080", "http://example.com:8080/"},
        {"http://example.com:/", "http://example.com/"},
        {"http://example.com:0080/", "http://example.com/"},
        {"http://example.com:65535/", "http://example.com:65535/"},
        {"http://example.com", "http://example.com/"},
        {"http://example.com?x=1", "http://example.com/?x=1"},
        {"http://example.com/#frag", "http://example.com/"},
        {"http://example.com/a?b#c?d", "http://example.com/a?b"},
        {"http://example.com./", "http://example.com/"},
        {"http://ex%61mple.com/", "http://example.com/"},
        {"http://sub_domain.example.com/", "http://sub_domain.example.com/"},
        {"http://user:Pass@Example.com/", "http://user:Pass@example.com/"},
        {"http://us%65r:p%3aw@example.com/", "http://user:p%3Aw@example.com/"},
        {"http://a@b@example.com/", "http://a%40b@example.com/"},
        {"http://@example.com/", "http://example.com/"},
        {"http://[2001:DB8::1]:8080/x", "http://[2001:db8::1]:8080/x"},
        {"http://[::1]/", "http://[::1]/"},
        {"http://[::FFFF:192.0.2.1]:80/", "http://[::ffff:192.0.2.1]/"},
        {"http://192.168.0.1:80/", "http://192.168.0.1/"},
        {"  http://example.com/a  \n", "http://example.com/a"},
        /* paths */
        {"http://example.com/a%2fb", "http://example.com/a%2Fb"},
        {"http://example.com/%7Euser/%41%42%2d", "http://example.com/~user/AB-"},
        {"http://example.com/a b", "http://example.com/a%20b"},
        {"http://example.com/é", "http://example.com/%C3%A9"},
        {"http://example.com/%c3%a9", "http://example.com/%C3%A9"},
        {"http://example.com/100%", "http://example.com/100%25"},
        {"http://example.com/%zz%4", "http://example.com/%25zz%254"},
        {"http://example.com/a/%2E%2E/b", "http://example.com/b"},
        {"http://example.com/a/%2e/b", "http://example.com/a/b"},
        {"http://example.com/a/../../b", "http://example.com/b"},
        {"http://example.com/./a/.", "http://example.com/a/"},
        {"http://example.com/a//b", "http://example.com/a//b"},
        {"http://example.com/a;b=c/d,e", "http://example.com/a;b=c/d,e"},
        {"http://example.com/\"<>`{}|\\^", "http://example.com/%22%3C%3E%60%7B%7D%7C%5C%5E"},
        {"http://example.com/[x]", "http://example.com/%5Bx%5D"},
        {"http://example.com/a\tb", "http://example.com/a%09b"},
        /* queries and tracking parameters */
        {"http://example.com/?", "http://example.com/"},
        {"http://example.com/?&", "http://example.com/"},
        {"http://example.com/?utm_source=a&utm_medium=b", "http://example.com/"},
        {"http://example.com/?a=1&fbclid=xyz&b=2", "http://example.com/?a=1&b=2"},
        {"http://example.com/?gclid=1&dclid=2&msclkid=3&mc_cid=4&mc_eid=5&igshid=6&yclid=7&_ga=8"
         "&_hsenc=9&_hsmi=10&ref_src=11&keep=1",
         "http://example.com/?keep=1"},
        {"http://example.com/?utm_campaign&utm_=1&utm_content=x&k", "http://example.com/?k"},
        {"http://example.com/?UTM_SOURCE=x&Fbclid=y", "http://example.com/?UTM_SOURCE=x&Fbclid=y"},
        {"http://example.com/?utm=1&xutm_source=2&fbclidx=3",
         "http://example.com/?utm=1&xutm_source=2&fbclidx=3"},
        {"http://example.com/?utm%5Fsource=x", "http://example.com/"},
        {"http://example.com/?a=1&&b=2&", "http://example.com/?a=1&b=2"},
        {"http://example.com/?b=2&a=1", "http://example.com/?b=2&a=1"},
        {"http://example.com/?q=a+b&r=%20", "http://example.com/?q=a+b&r=%20"},
        {"http://example.com/?q=a b", "http://example.com/?q=a%20b"},
        {"http://example.com/?q=%7e&r=%41", "http://example.com/?q=~&r=A"},
        {"http://example.com/?q=x/y?z:@", "http://example.com/?q=x/y?z:@"},
        {"http://example.com/?q=/./..", "http://example.com/?q=/./.."},
        {"http://example.com/?id=1#utm_source=x", "http://example.com/?id=1"},
        {"http://example.com/?a=%26&b=%3D", "http://example.com/?a=%26&b=%3D"},
    };
    NF_CHECK(sizeof c / sizeof c[0] >= 40);
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char out[NF_URL_MAX];
        int rc = nf_url_normalize(c[i].in, out, sizeof out);
        if (rc < 0 || strcmp(out, c[i].want) != 0 || (size_t)rc != strlen(out)) {
            fprintf(stderr, "  normalize(\"%s\") = %d \"%s\", want \"%s\"\n", c[i].in, rc,
                    rc < 0 ? nf_url_strerror(rc) : out, c[i].want);
            NF_CHECK(0);
        }
    }
}

static void test_normalize_errors(void)
{
    static const struct {
        const char *in;
        int err;
    } c[] = {
        {"", NF_URL_E_EMPTY},
        {" \t\n", NF_URL_E_EMPTY},
        {"/relative/path", NF_URL_E_SYNTAX},
        {"example.com/x", NF_URL_E_SYNTAX},
        {"ftp://example.com/", NF_URL_E_SCHEME},
        {"mailto:a@b.example", NF_URL_E_SCHEME},
        {"javascript:alert(1)", NF_URL_E_SCHEME},
        {"httpx://example.com/", NF_URL_E_SCHEME},
        {"http:example.com", NF_URL_E_HOST},
        {"http:///path", NF_URL_E_HOST},
        {"http://", NF_URL_E_HOST},
        {"http://user@/", NF_URL_E_HOST},
        {"http://exa mple.com/", NF_URL_E_HOST},
        {"http://a..b/", NF_URL_E_HOST},
        {"http://.example.com/", NF_URL_E_HOST},
        {"http://./", NF_URL_E_HOST},
        {"http://ex%zzample.com/", NF_URL_E_HOST},
        {"http://ex%2Fample.com/", NF_URL_E_HOST},
        {"http://[::1/", NF_URL_E_HOST},
        {"http://[xyz]/", NF_URL_E_HOST},
        {"http://[::1]x/", NF_URL_E_HOST},
        {"http://\xFF\xFE.example/", NF_URL_E_HOST},
        {"http://example.com:99999/", NF_URL_E_PORT},
        {"http://example.com:65536/", NF_URL_E_PORT},
        {"http://example.com:0/", NF_URL_E_PORT},
        {"http://example.com:8a/", NF_URL_E_PORT},
        {"http://example.com:-1/", NF_URL_E_PORT},
        {"http://example.com:80:80/", NF_URL_E_PORT},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char out[NF_URL_MAX];
        int rc = nf_url_normalize(c[i].in, out, sizeof out);
        if (rc != c[i].err) {
            fprintf(stderr, "  normalize(\"%s\") = %d, want %d\n", c[i].in, rc, c[i].err);
            NF_CHECK(0);
        }
    }
    char out[NF_URL_MAX];
    NF_CHECK_EQ(nf_url_normalize(NULL, out, sizeof out), NF_URL_E_EMPTY);
    NF_CHECK_EQ(nf_url_normalize("http://example.com/abc", out, 23), 22);
    NF_CHECK_EQ(nf_url_normalize("http://example.com/abc", out, 22), NF_URL_E_TOO_LONG);
    NF_CHECK_EQ(nf_url_normalize("http://example.com/a b", out, 24), NF_URL_E_TOO_LONG);
    static char big[NF_URL_MAX + 32];
    memcpy(big, "http://example.com/", 19);
    memset(big + 19, 'a', sizeof big - 20);
    big[sizeof big - 1] = '\0';
    static char bigout[2 * NF_URL_MAX];
    NF_CHECK_EQ(nf_url_normalize(big, bigout, sizeof bigout), NF_URL_E_TOO_LONG);
    big[NF_URL_MAX - 1] = '\0'; /* NF_URL_MAX - 1 bytes fit */
    NF_CHECK_EQ(nf_url_normalize(big, bigout, sizeof bigout), NF_URL_MAX - 1);

    for (int e = NF_URL_E_TOO_LONG; e <= 0; e++)
        NF_CHECK(nf_url_strerror(e) != NULL && *nf_url_strerror(e));
}

static void test_article_id(void)
{
    char id[33], id2[33];
    nf_url_article_id("http://example.com/", id);
    /* printf 'http://example.com/' | sha256sum | cut -c1-32 */
    NF_CHECK_STR(id, "2a1b402420ef46577471cdc7409b0fa2");
    nf_url_article_id("http://example.com/a", id2);
    NF_CHECK_EQ(strlen(id2), 32);
    NF_CHECK(strcmp(id, id2) != 0);

    /* two spellings of one article meet */
    char a[NF_URL_MAX], b[NF_URL_MAX];
    NF_REQUIRE(nf_url_normalize("HTTPS://Example.com:443/news/./2024/../story?utm_medium=rss&id=7",
                                a, sizeof a) > 0);
    NF_REQUIRE(nf_url_normalize("https://example.com/news/story?id=7&fbclid=abc#comments", b,
                                sizeof b) > 0);
    NF_CHECK_STR(a, b);
    nf_url_article_id(a, id);
    nf_url_article_id(b, id2);
    NF_CHECK_STR(id, id2);
}

/* ---- properties ------------------------------------------------------------------------- */

static uint64_t rng = 0xd1b54a32d192ed03ull;
static uint64_t next_rand(void)
{
    return nf_test_xorshift(&rng);
}

#define PICK(arr) arr[next_rand() % (sizeof arr / sizeof arr[0])]

static void random_url(char *s, size_t cap)
{
    static const char *const scheme[] = {"http", "https", "HTTP", "HtTpS"};
    static const char *const user[] = {"", "", "", "u@", "u:p@", "%75ser@", "a b@", "@"};
    static const char *const host[] = {"example.com",   "Example.COM",          "example.com.",
                                       "ex%61mple.com", "bücher.example",       "BÜCHER.example",
                                       "[::1]",         "[2001:DB8::A]",        "127.0.0.1",
                                       "a-b_c.example", "xn--bcher-kva.example"};
    static const char *const port[] = {"", "", "", ":80", ":443", ":8080", ":", ":0080", ":1"};
    static const char *const seg[] = {"/a",     "/B",    "/.",   "/..", "/%2e", "/%2E%2E",
                                      "/%7E",   "/%7e",  "/%zz", "/ ",  "/é",   "/",
                                      "/a%2Fb", "/;x=1", "/%41", "/~",  "/a.b", "/..a",
                                      "/%",     "/[",    "/%25", "/+",  "/\""};
    static const char *const param[] = {
        "utm_source=1", "id=2",    "fbclid=x", "",  "a=%7e", "q=a b",          "x=?",   "y=/..",
        "_ga=1",        "UTM_x=1", "z=%2F",    "k", "=v",    "utm%5Fmedium=2", "%zz=1", "a=#b"};
    static const char *const frag[] = {"", "", "#", "#x", "#a/../b"};
    size_t n =
        (size_t)snprintf(s, cap, "%s://%s%s%s", PICK(scheme), PICK(user), PICK(host), PICK(port));
    for (int k = (int)(next_rand() % 5); k > 0 && n < cap; k--)
        n += (size_t)snprintf(s + n, cap - n, "%s", PICK(seg));
    if (next_rand() % 3 && n < cap) {
        n += (size_t)snprintf(s + n, cap - n, "?");
        for (int k = (int)(next_rand() % 4); k > 0 && n < cap; k--)
            n += (size_t)snprintf(s + n, cap - n, "%s%s", PICK(param), k > 1 ? "&" : "");
    }
    if (n < cap)
        snprintf(s + n, cap - n, "%s", PICK(frag));
}

/* Only characters that normalization would leave alone, "%XX" in upper case and never for an
 * unreserved character, no fragment, no dot segment. */
static bool looks_normal(const char *u)
{
    if (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0)
        return false;
    if (strchr(u, '#') || strstr(u, "/./") || strstr(u, "/../"))
        return false;
    for (const char *p = u; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c <= ' ' || c >= 0x7F || strchr("\"<>\\^`{|}", c))
            return false;
        if (c == '%') {
            char h[3] = {p[1], p[2], 0};
            if (!strchr("0123456789ABCDEF", h[0]) || !strchr("0123456789ABCDEF", h[1]) || !h[0] ||
                !h[1])
                return false;
            unsigned v = (unsigned)strtoul(h, NULL, 16);
            if ((v >= 'a' && v <= 'z') || (v >= 'A' && v <= 'Z') || (v >= '0' && v <= '9') ||
                v == '-' || v == '.' || v == '_' || v == '~')
                return false;
        }
    }
    return true;
}

static void test_properties(void)
{
    static const char *const bases[] = {"http://Example.com/a/b?utm_source=x", "https://h/",
                                        "http://h/x/%2E%2E/y/z", "https://bücher.example/p/q"};
    static const char *const refs[] = {"",
                                       "g",
                                       "../g",
                                       "/g",
                                       "?y",
                                       "#f",
                                       "//Other.example/x",
                                       "./a/../b?utm_id=1&k=2",
                                       "..",
                                       "https://h2/a/./b"};
    int ok = 0;
    for (int round = 0; round < 100000; round++) {
        char in[1024], n1[NF_URL_MAX], n2[NF_URL_MAX];
        random_url(in, sizeof in);
        int r1 = nf_url_normalize(in, n1, sizeof n1);
        if (r1 < 0)
            continue;
        ok++;
        if (!looks_normal(n1)) {
            fprintf(stderr, "  \"%s\" -> \"%s\" is not normal\n", in, n1);
            NF_REQUIRE(0);
        }
        int r2 = nf_url_normalize(n1, n2, sizeof n2);
        if (r2 != r1 || strcmp(n1, n2) != 0) {
            fprintf(stderr, "  not idempotent: \"%s\" -> \"%s\" -> \"%s\"\n", in, n1, n2);
            NF_REQUIRE(0);
        }
        char id[33];
        nf_url_article_id(n1, id);
        NF_REQUIRE(strlen(id) == 32 && strspn(id, "0123456789abcdef") == 32);
    }
    NF_CHECK(ok > 50000);

    /* Resolving against the raw or the normalized base ends at the same normalized URL. */
    for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++) {
        char nb[NF_URL_MAX];
        NF_REQUIRE(nf_url_normalize(bases[b], nb, sizeof nb) > 0);
        for (size_t r = 0; r < sizeof refs / sizeof refs[0]; r++) {
            char x[NF_URL_MAX], y[NF_URL_MAX], nx[NF_URL_MAX], ny[NF_URL_MAX];
            NF_REQUIRE(nf_url_resolve(bases[b], refs[r], x, sizeof x) > 0);
            NF_REQUIRE(nf_url_resolve(nb, refs[r], y, sizeof y) > 0);
            NF_REQUIRE(nf_url_normalize(x, nx, sizeof nx) > 0);
            NF_REQUIRE(nf_url_normalize(y, ny, sizeof ny) > 0);
            if (strcmp(nx, ny) != 0) {
                fprintf(stderr, "  base \"%s\" ref \"%s\": \"%s\" vs \"%s\"\n", bases[b], refs[r],
                        nx, ny);
                NF_CHECK(0);
            }
        }
    }
}

int main(void)
{
    NF_RUN(test_rfc3986_examples);
    NF_RUN(test_resolve_feeds);
    NF_RUN(test_normalize);
    NF_RUN(test_normalize_errors);
    NF_RUN(test_article_id);
    NF_RUN(test_properties);
    return nf_test_report();
}
