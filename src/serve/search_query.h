/* search_query.h — a reader's search text (GET /v1/search?q=) read as words, "quoted phrases"
 * and -exclusions, and written as an SQLite FTS5 MATCH expression that can only mean that.
 *
 * The syntax, and nothing else:
 *   word          an article must contain it (every word: AND)
 *   "a b c"       the words in this order; an unclosed quote runs to the end of the text
 *   -word -"a b"  an article must not contain it
 * A word is a run of ASCII letters and digits and non-ASCII characters (well-formed UTF-8);
 * every other byte (ASCII punctuation, controls, NUL, invalid UTF-8) separates words, so FTS5's
 * own syntax (NEAR(, *, col:, ^, AND/OR/NOT, braces) is searched as the plain words it contains:
 * every term reaches the engine inside a double-quoted string, which FTS5 reads as a phrase of
 * its tokenizer's tokens and nothing more. Terms past NF_SEARCH_TERMS_MAX (positive or
 * excluded) and phrase words past NF_SEARCH_PHRASE_MAX are dropped (q.dropped counts them).
 * Which non-ASCII characters make tokens is left to the index's tokenizer: nf_search_run drops
 * a term in which it finds none (a combining mark, a dash, an emoji alone).
 *
 * Threads: pure functions, any thread. */
#ifndef NF_SEARCH_QUERY_H
#define NF_SEARCH_QUERY_H

#include <stdbool.h>
#include <stddef.h>

#define NF_SEARCH_Q_MAX      1024 /* bytes of q (a longer one is refused) */
#define NF_SEARCH_TERMS_MAX  16   /* positive terms, and as many exclusions */
#define NF_SEARCH_PHRASE_MAX 16   /* words of a phrase */
/* The largest MATCH expression nf_search_query_match writes (with its NUL). */
#define NF_SEARCH_MATCH_MAX (2 * NF_SEARCH_Q_MAX + 64 * (2 * NF_SEARCH_TERMS_MAX) + 128)

typedef struct nf_search_term {
    const char *text; /* in q.buf: the term's words, one space between them */
    bool phrase;      /* quoted (a one-word phrase is still a phrase) */
    bool excluded;
} nf_search_term_t;

typedef struct nf_search_query {
    nf_search_term_t t[2 * NF_SEARCH_TERMS_MAX];
    unsigned n, positive, excluded, dropped;
    char buf[2 * NF_SEARCH_Q_MAX + 2 * NF_SEARCH_TERMS_MAX + 2];
} nf_search_query_t;

/* Reads text (n bytes, any bytes) into *q. 0; or -EINVAL with a message for the reader in err:
 * longer than NF_SEARCH_Q_MAX, or no word to search for (empty, punctuation only, or only
 * exclusions). */
int nf_search_query_parse(const char *text, size_t n, nf_search_query_t *q, char *err,
                          size_t errlen);

/* The FTS5 MATCH expression of q over the columns `title` and `summary`, AND the token
 * topic_token in column `topics` when topic_token is non-NULL (letters and digits only): the
 * bytes written (out is NUL-terminated), or -ENOSPC when cap is too small. */
int nf_search_query_match(const nf_search_query_t *q, const char *topic_token, char *out,
                          size_t cap);

#endif
