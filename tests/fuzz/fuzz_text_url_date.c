/* libFuzzer target for the other parsers of outside text (src/feed/text.c, url.c, dates.c).
 * The first byte picks the parser; the rest is its input. Invariants checked:
 *   text:  output valid UTF-8, shorter than the buffer, no leading/trailing/double spaces;
 *   url:   a normalized URL normalizes to itself; a resolved reference (against the RFC 3986
 *          example base) is absolute;
 *   dates: a parsed date formats and parses back to the same instant. */
#include "feed/dates.h"
#include "feed/text.h"
#include "feed/url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_text_url_date: invariant broken: %s\n", what);
        abort();
    }
}

static void check_text(const char *in, size_t len, int html)
{
    static char out[4096];
    size_t max = 1 + (len % sizeof out);
    size_t n = html ? nf_text_from_html(in, len, out, max) : nf_text_plain(in, len, out, max);
    require(n < max && out[n] == '\0', "text: fits and is terminated");
    require(nf_utf8_valid(out, n), "text: valid UTF-8");
    require(n == 0 || (out[0] != ' ' && out[n - 1] != ' '), "text: trimmed");
    require(strstr(out, "  ") == NULL, "text: spaces collapsed");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 8192)
        return 0;
    char s[8193];
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0';
    size_t len = size - 1;
    switch (data[0] % 4) {
    case 0:
        check_text(s, len, 1);
        break;
    case 1:
        check_text(s, len, 0);
        break;
    case 2: {
        if (memchr(s, '\0', len))
            break; /* URLs are C strings */
        static char a[NF_URL_MAX], b[NF_URL_MAX];
        if (nf_url_normalize(s, a, sizeof a) >= 0) {
            require(nf_url_normalize(a, b, sizeof b) >= 0, "url: normalized url normalizes");
            require(strcmp(a, b) == 0, "url: normalize is idempotent");
        }
        if (nf_url_resolve("http://a/b/c/d;p?q", s, a, sizeof a) >= 0)
            require(strstr(a, ":") != NULL && a[0] != ':', "url: resolved url has a scheme");
        break;
    }
    default: {
        int64_t ms, again;
        if (nf_date_parse(s, len, &ms) == 0) {
            char buf[40];
            size_t n = nf_date_format(ms, buf, sizeof buf);
            require(n < sizeof buf, "date: formats");
            require(nf_date_parse(buf, n, &again) == 0 && again == ms, "date: round trip");
        }
    }
    }
    return 0;
}
