/* jsonw.h — append-only JSON writer into a growable buffer, for outputs built per message
 * (articles, fetch-log records) where a cJSON tree per message would allocate per node.
 * The caller places commas: nf_jw_key() writes ',' itself unless the object was just opened.
 * Strings are escaped per RFC 8259 and assumed to be valid UTF-8 (text.h guarantees it for
 * feed text). The buffer is reused across messages: nf_jw_reset() keeps its memory. */
#ifndef NF_JSONW_H
#define NF_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nf_jw {
    char *buf;
    size_t len, cap;
    bool first;  /* next key is the first of its object/array */
    bool failed; /* an allocation failed: the content is incomplete */
} nf_jw_t;

void nf_jw_init(nf_jw_t *w);
void nf_jw_free(nf_jw_t *w);
void nf_jw_reset(nf_jw_t *w);

void nf_jw_raw(nf_jw_t *w, const char *s, size_t n);
void nf_jw_obj_open(nf_jw_t *w);             /* "{" */
void nf_jw_obj_close(nf_jw_t *w);            /* "}" */
void nf_jw_arr_open(nf_jw_t *w);             /* "[" */
void nf_jw_arr_close(nf_jw_t *w);            /* "]" */
void nf_jw_key(nf_jw_t *w, const char *key); /* [,]"key": */
void nf_jw_elem(nf_jw_t *w);                 /* [,] before an array element */
void nf_jw_str(nf_jw_t *w, const char *s);   /* "escaped", or null for NULL */
void nf_jw_strn(nf_jw_t *w, const char *s, size_t n);
void nf_jw_i64(nf_jw_t *w, int64_t v);
/* v's decimal digits at the end of b[24] (no terminator); returns where they start. */
size_t nf_u64_digits(uint64_t v, char b[24]);
void nf_jw_u64(nf_jw_t *w, uint64_t v);
/* A number in [0, 1] (a weight, a confidence) with 15 decimals, trailing zeros dropped: absolute
 * error < 6e-16, no printf. Outside [0, 1]: %.17g; not finite: null. */
void nf_jw_unit(nf_jw_t *w, double v);
/* v to 15 significant digits where 1 < v < 10^6 (a feed's score: a unit's precision without
 * printf's exact conversion), else as nf_jw_unit. */
void nf_jw_score(nf_jw_t *w, double v);
void nf_jw_bool(nf_jw_t *w, bool v);
/* v with three decimals (printf %.3f): seconds to the millisecond. */
void nf_jw_fixed3(nf_jw_t *w, double v);

/* For writers of one message shape at a million a second (interest updates): room for n more
 * bytes, as a pointer to write at (NULL if the buffer cannot grow: failed is set); write at most
 * n bytes, then nf_jw_commit(w, end). */
char *nf_jw_reserve(nf_jw_t *w, size_t n);
void nf_jw_commit(nf_jw_t *w, char *end);
/* "00" "01" ... "99": two decimal digits of x < 100 at p by one look-up. */
extern const char nf_jw_pairs[201];
static inline void nf_jw_put2(char *p, uint32_t x)
{
    p[0] = nf_jw_pairs[2 * x];
    p[1] = nf_jw_pairs[2 * x + 1];
}
/* What nf_jw_unit writes for v in [0, 1] (the caller checks the range), at p: at most 17
 * bytes; returns the end. */
char *nf_jw_unit_put(char *p, double v);
void nf_jw_null(nf_jw_t *w);

#endif
