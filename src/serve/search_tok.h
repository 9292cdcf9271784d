/* search_tok.h — the search index's FTS5 tokenizer: SQLite's unicode61 (remove_diacritics 2)
 * plus word pairs, so that a quoted phrase is looked up as pairs of adjacent words instead of
 * FTS5 comparing the positions of every row holding all its words.
 *
 * Documents: every unicode61 token at its position, and after each token but the first the
 * pair "previous\x1Fthis" colocated with the previous token (FTS5_TOKEN_COLOCATED: it adds no
 * position and no length). FTS5's auxiliary passes (highlight, snippet), which skip colocated
 * tokens, get unicode61's tokens alone.
 *
 * Queries: a text of one token is that token. A text of n >= 2 tokens (FTS5 tokenizes each
 * quoted string apart: a phrase) is the n - 1 pairs, then the last token: "a b c" is the
 * phrase [a\x1Fb, b\x1Fc, c], which matches at exactly the positions where a, b, c follow one
 * another, and which highlight() shows as the three words. Its document count is about the
 * phrase's own (the rarest pair's), where the words' would be the rarest word's.
 *
 * A query text of n >= 2 tokens ending in NF_SEARCH_PAIRS_ONLY (a separator to unicode61) is
 * its n - 1 pairs alone: the same rows and the same instances as with the last word, which
 * only highlight() needs, without walking the last word's posting list (a stopword's: most of
 * the index). nf_search_mark_phrases writes a query's scan that way.
 *
 * A pair longer than NF_SEARCH_PAIR_MAX bytes is cut to it at a UTF-8 boundary, on both sides
 * alike: two phrases whose pairs agree on their first 128 bytes (words of more than a hundred
 * bytes) find each other's rows. unicode61's tokens contain no control character, so the 0x1F
 * separator never occurs in a word.
 *
 * Threads: a tokenizer instance belongs to its connection (SQLite's rule). */
#ifndef NF_SEARCH_TOK_H
#define NF_SEARCH_TOK_H

#include "serve/search_query.h"

#include <sqlite3.h>

#define NF_SEARCH_TOKENIZER  "nf_pairs" /* the name the index's table declares */
#define NF_SEARCH_PAIR_MAX   128
#define NF_SEARCH_PAIRS_ONLY '\x1E' /* at the end of a query text: no last word (below) */

/* The FTS5 API of connection db, or NULL. */
fts5_api *nf_search_fts5(sqlite3 *db);

/* Registers the tokenizer on connection db (before the table is read or made): SQLITE_OK or an
 * SQLite code. */
int nf_search_tokenizer_register(sqlite3 *db);

/* The tokenizer on connection db (registered there): SQLITE_OK with *tok and *out, which the
 * caller deletes with tok->xDelete(*out). */
int nf_search_tokenizer_open(sqlite3 *db, fts5_tokenizer *tok, Fts5Tokenizer **out);

/* q with every term of several words marked NF_SEARCH_PAIRS_ONLY, into *m (the marked texts in
 * buf, cap >= sizeof q->buf + NF_SEARCH_TERMS_MAX * 2; a term that does not fit is left as it
 * is): an expression that matches what q's does, for the scan; q's own is for highlight(). */
void nf_search_mark_phrases(const nf_search_query_t *q, nf_search_query_t *m, char *buf,
                            size_t cap);

#endif
