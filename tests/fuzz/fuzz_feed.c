/* libFuzzer target for the feed parser (src/feed): arbitrary bytes as a fetched document.
 * Beyond "no crash, no leak, no sanitizer report", it checks the parser's promises on every
 * article it returns: text fields are valid UTF-8 within their caps, a url is a fixed point of
 * nf_url_normalize, an article_id is 32 hex digits derived from that url, content_hash is 64
 * hex digits; no link field holds a javascript:, vbscript: or data: URL (as a browser reads the
 * scheme); every tag has a term and lists stay within max_list; an error comes with a message.
 * Violations abort() so the fuzzer keeps the input. */
#include "feed/feed.h"
#include "feed/text.h"
#include "feed/url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    nf_feed_global_init();
    return 0;
}

static void require(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_feed: invariant broken: %s\n", what);
        abort();
    }
}

static int is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return s[n] == '\0';
}

static void check_text(const char *s, size_t cap, const char *what)
{
    if (!s)
        return;
    size_t n = strlen(s);
    require(nf_utf8_valid(s, n), what);
    require(n < cap, what);
}

/* A link as a browser would read its scheme: leading spaces and controls skipped, tabs and line
 * breaks inside ignored, any case. */
static void check_link(const char *u)
{
    static const char *const unsafe[] = {"javascript:", "vbscript:", "data:"};
    if (!u)
        return;
    char s[16];
    size_t k = 0;
    while (*u && (unsigned char)*u <= ' ')
        u++;
    for (; *u && k < sizeof s - 1; u++)
        if (*u != '\t' && *u != '\n' && *u != '\r')
            s[k++] = (char)(*u >= 'A' && *u <= 'Z' ? *u + 32 : *u);
    s[k] = '\0';
    for (size_t i = 0; i < sizeof unsafe / sizeof *unsafe; i++)
        require(strncmp(s, unsafe[i], strlen(unsafe[i])) != 0, "no unsafe scheme in a link field");
}

static void check_lists(const char *const *links, size_t nlinks, const nf_tag_t *tags, size_t ntags,
                        size_t ncategories, unsigned max_list)
{
    require(nlinks <= max_list && ntags <= max_list && ncategories <= max_list,
            "lists within max_list");
    for (size_t i = 0; i < nlinks; i++)
        check_link(links[i]);
    for (size_t i = 0; i < ntags; i++)
        require(tags[i].term && *tags[i].term, "a tag has a term");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nf_feed_limits_t lim;
    nf_feed_limits_default(&lim);
    lim.max_bytes = 1 << 20;
    nf_feed_t f;
    char err[512];
    err[0] = '\0';
    int r = nf_feed_parse(&f, (const char *)data, size, "https://fuzz.example/feed.xml",
                          1700000000000, &lim, err, sizeof err);
    if (r != 0) {
        require(err[0] != '\0', "an error has a message");
        return 0;
    }
    check_text(f.title, 1 << 16, "feed title");
    check_link(f.link);
    check_link(f.feed_link);
    check_lists(f.links, f.nlinks, f.tags, f.ntags, f.ncategories, lim.max_list);
    for (size_t i = 0; i < f.nitems; i++) {
        const nf_article_t *a = &f.items[i];
        check_text(a->title, lim.max_title + 1, "title: UTF-8 within cap");
        check_text(a->summary, lim.max_summary + 1, "summary: UTF-8 within cap");
        check_text(a->body, lim.max_body + 1, "body: UTF-8 within cap");
        require(is_hex(a->content_hash, 64), "content_hash is 64 hex digits");
        check_link(a->link);
        check_lists(a->links, a->nlinks, a->tags, a->ntags, a->ncategories, lim.max_list);
        if (a->url) {
            char again[NF_URL_MAX];
            int n = nf_url_normalize(a->url, again, sizeof again);
            require(n >= 0 && strcmp(again, a->url) == 0, "url is normalized (fixed point)");
            char id[33];
            nf_url_article_id(a->url, id);
            require(strcmp(id, a->article_id) == 0, "article_id derives from url");
        } else {
            require(a->article_id[0] == '\0', "no url, no article_id");
        }
    }
    nf_feed_free(&f);
    return 0;
}
