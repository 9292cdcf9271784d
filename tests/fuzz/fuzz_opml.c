/* fuzz_opml.c — libFuzzer target for OPML subscription lists (src/feed/opml.h), the file
 * `newsflow sources import` reads.
 *
 * Abort()s when the contract breaks:
 *   - parse: 0 or -1; -1 leaves the list empty with a non-empty, NUL-terminated message; 0
 *     gives at most NF_OPML_MAX_FEEDS feeds, each with a non-empty URL of at most
 *     NF_OPML_MAX_VALUE bytes, an id, title and category (possibly ""), a status of active, paused
 * or dead, an interval within a year and a line >= 1; the same input parses the same twice;
 *   - the round trip: what parsed, written by nf_opml_write, parses again to the same feeds
 *     (URL, id, title, category, interval, status), the title of the list aside — unless a value
 *     holds what XML cannot carry (control characters, invalid UTF-8: the writer drops or
 *     replaces them), in which case it must still parse, with as many feeds. */
#include "feed/opml.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_opml: %s\n", what);
    abort();
}

static bool xml_safe(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p >= 0x7f) /* the writer may rewrite these (or libxml2 normalize \r) */
            return false;
    return true;
}

static bool same(const nf_opml_feed_t *a, const nf_opml_feed_t *b)
{
    return !strcmp(a->url, b->url) && !strcmp(a->id, b->id) && !strcmp(a->title, b->title) &&
           !strcmp(a->category, b->category) && a->interval_s == b->interval_s &&
           !strcmp(a->status, b->status);
}

static void check(const nf_opml_t *o)
{
    if (o->n > NF_OPML_MAX_FEEDS || !o->title)
        fail("too many feeds, or no title");
    for (size_t i = 0; i < o->n; i++) {
        const nf_opml_feed_t *f = &o->feeds[i];
        if (!f->url || !f->url[0] || strlen(f->url) > NF_OPML_MAX_VALUE || !f->title || !f->id ||
            !f->category || !f->status || f->line < 1 || f->interval_s > 31536000u)
            fail("a feed breaks the contract");
        if (strcmp(f->status, "active") && strcmp(f->status, "paused") && strcmp(f->status, "dead"))
            fail("a status other than active, paused, dead");
    }
}

static void round_trip(const nf_opml_t *o)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f || nf_opml_write(f, o->title, o->feeds, o->n) != 0 || fclose(f) != 0)
        fail("write failed");
    nf_opml_t back;
    char err[256];
    if (nf_opml_parse(buf, len, &back, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_opml: written list does not parse: %s\n%.2000s\n", err, buf);
        abort();
    }
    if (back.n != o->n)
        fail("the round trip changed the number of feeds");
    /* The writer groups feeds by category: compare each with the same feed, found in order. */
    for (size_t i = 0; i < o->n; i++) {
        const nf_opml_feed_t *a = &o->feeds[i];
        bool exact = xml_safe(a->url) && xml_safe(a->title) && xml_safe(a->category) &&
                     xml_safe(a->id) && !strstr(a->category, "//") && a->category[0] != '/' &&
                     (!a->category[0] || a->category[strlen(a->category) - 1] != '/');
        bool found = !exact;
        for (size_t j = 0; j < back.n && !found; j++)
            found = same(a, &back.feeds[j]);
        if (!found) {
            fprintf(stderr, "fuzz_opml: feed %zu (%s | %s | %s) lost in the round trip\n", i,
                    a->url, a->title, a->category);
            abort();
        }
    }
    nf_opml_free(&back);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nf_opml_t a, b;
    char ea[256], eb[256];
    ea[0] = eb[0] = 'x';
    int ra = nf_opml_parse((const char *)data, size, &a, ea, sizeof ea);
    int rb = nf_opml_parse((const char *)data, size, &b, eb, sizeof eb);
    if ((ra != 0 && ra != -1) || ra != rb)
        fail("parse returned something else than 0 or -1, or differed the second time");
    if (ra != 0 && (a.n || !ea[0] || !memchr(ea, 0, sizeof ea) || strcmp(ea, eb)))
        fail("a failure left feeds, or its message is empty or differs");
    if (ra == 0) {
        check(&a);
        if (a.n != b.n)
            fail("the same input gave different feeds");
        for (size_t i = 0; i < a.n; i++)
            if (!same(&a.feeds[i], &b.feeds[i]) || a.feeds[i].line != b.feeds[i].line)
                fail("the same input gave different feeds");
        round_trip(&a);
    }
    nf_opml_free(&a);
    nf_opml_free(&b);
    return 0;
}
