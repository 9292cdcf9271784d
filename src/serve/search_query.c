/* search_query.c — see search_query.h. */
#include "serve/search_query.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The bytes of the word character at p (n > 0 bytes left), or 0 when it is not one: an ASCII
 * letter or digit, or any well-formed UTF-8 sequence (no overlong form, no surrogate, at most
 * U+10FFFF). Which non-ASCII characters are letters is the index's tokenizer's to say (a term
 * it finds no token in is left out: search.h), not a table here that could disagree with it. */
static size_t word_char(const unsigned char *p, size_t n)
{
    unsigned char c = p[0];
    if (c < 0x80)
        return ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || (c >= '0' && c <= '9') ? 1 : 0;
    size_t len;
    uint32_t cp, min;
    if ((c & 0xE0) == 0xC0) {
        len = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4, cp = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

/* Bytes at p that are neither a word character nor '"': how many to skip (at least 1). */
static size_t skip_len(const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n && p[i] != '"' && word_char(p + i, n - i) == 0)
        i++;
    return i ? i : 1;
}

typedef struct {
    const unsigned char *p;
    size_t n, at;
    char *out;
    size_t olen;
} scan_t;

/* Copies the word at s->at into the output (a space before it unless it is the term's first
 * word, *words counting them); returns whether there was one. */
static bool take_word(scan_t *s, unsigned *words)
{
    size_t start = s->at, w;
    while (s->at < s->n && (w = word_char(s->p + s->at, s->n - s->at)) > 0)
        s->at += w;
    if (s->at == start)
        return false;
    if (*words)
        s->out[s->olen++] = ' ';
    memcpy(s->out + s->olen, s->p + start, s->at - start);
    s->olen += s->at - start;
    (*words)++;
    return true;
}

int nf_search_query_parse(const char *text, size_t n, nf_search_query_t *q, char *err,
                          size_t errlen)
{
    memset(q, 0, sizeof *q - sizeof q->buf);
    q->buf[0] = '\0';
    if (n > NF_SEARCH_Q_MAX) {
        snprintf(err, errlen, "q is %zu bytes long; at most %d are searched", n, NF_SEARCH_Q_MAX);
        return -EINVAL;
    }
    scan_t s = {.p = (const unsigned char *)text, .n = n, .out = q->buf};
    bool after_word = false; /* the byte before s.at ends a word: a '-' there is not an exclusion */
    while (s.at < s.n) {
        bool excluded = false;
        if (s.p[s.at] == '-' && !after_word && s.at + 1 < s.n &&
            (s.p[s.at + 1] == '"' || word_char(s.p + s.at + 1, s.n - s.at - 1) > 0)) {
            excluded = true;
            s.at++;
        }
        bool phrase = s.p[s.at] == '"';
        size_t term_at = s.olen;
        unsigned words = 0;
        after_word = false;
        if (phrase) {
            s.at++;
            while (s.at < s.n && s.p[s.at] != '"') {
                if (word_char(s.p + s.at, s.n - s.at) == 0) {
                    s.at += skip_len(s.p + s.at, s.n - s.at);
                } else if (words < NF_SEARCH_PHRASE_MAX) {
                    take_word(&s, &words);
                } else { /* read past it, then forget it */
                    size_t w;
                    while (s.at < s.n && (w = word_char(s.p + s.at, s.n - s.at)) > 0)
                        s.at += w;
                    q->dropped++;
                }
            }
            if (s.at < s.n)
                s.at++; /* the closing quote */
        } else if (take_word(&s, &words)) {
            after_word = true;
        } else {
            s.at++; /* one byte at a time: a '-' after it may start an exclusion */
            continue;
        }
        if (words == 0)
            continue; /* "" or a quote of punctuation */
        unsigned *count = excluded ? &q->excluded : &q->positive;
        if (*count >= NF_SEARCH_TERMS_MAX) {
            q->dropped++;
            s.olen = term_at;
            continue;
        }
        q->buf[s.olen++] = '\0';
        q->t[q->n++] =
            (nf_search_term_t){.text = q->buf + term_at, .phrase = phrase, .excluded = excluded};
        (*count)++;
    }
    if (q->positive == 0) {
        snprintf(err, errlen, "%s",
                 q->excluded ? "q has only exclusions: give a word to search for"
                             : "q has no word to search for (letters or digits)");
        return -EINVAL;
    }
    return 0;
}

typedef struct {
    char *out;
    size_t cap, len;
    bool full;
} sb_t;

static void put(sb_t *b, const char *s)
{
    size_t n = strlen(s);
    if (b->full || b->len + n >= b->cap) {
        b->full = true;
        return;
    }
    memcpy(b->out + b->len, s, n + 1);
    b->len += n;
}

/* The terms of one sign joined by op, each a double-quoted FTS5 string (their text holds no
 * '"': only word characters and spaces). */
static void put_terms(sb_t *b, const nf_search_query_t *q, bool excluded, const char *op)
{
    bool first = true;
    for (unsigned i = 0; i < q->n; i++) {
        if (q->t[i].excluded != excluded)
            continue;
        if (!first)
            put(b, op);
        put(b, "\"");
        put(b, q->t[i].text);
        put(b, "\"");
        first = false;
    }
}

int nf_search_query_match(const nf_search_query_t *q, const char *topic_token, char *out,
                          size_t cap)
{
    sb_t b = {.out = out, .cap = cap};
    if (cap)
        out[0] = '\0';
    put(&b, "(({title summary} : (");
    put_terms(&b, q, false, " AND ");
    put(&b, "))");
    if (q->excluded) {
        put(&b, " NOT ({title summary} : (");
        put_terms(&b, q, true, " OR ");
        put(&b, "))");
    }
    put(&b, ")");
    if (topic_token) {
        put(&b, " AND ({topics} : \"");
        put(&b, topic_token);
        put(&b, "\")");
    }
    return b.full ? -ENOSPC : (int)b.len;
}
