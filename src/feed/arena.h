/* arena.h — bump allocation in a few large blocks, freed all at once.
 *
 * A parsed feed owns thousands of small strings that live and die together; allocating them one
 * by one would cost a malloc/free pair each and scatter them in memory. An arena hands out
 * pieces of large blocks (the first one small, later ones doubling up to 1 MiB; a request larger
 * than that gets a block of its own) and nf_arena_free() returns everything. The most recent
 * allocation can be shrunk in place (nf_arena_shrink), so a caller can reserve an upper bound,
 * write, and give the unused tail back. Not thread-safe: one owner at a time. */
#ifndef NF_ARENA_H
#define NF_ARENA_H

#include <stddef.h>

typedef struct nf_arena nf_arena_t;

/* NULL when out of memory. first_block 0 means 16 KiB. */
nf_arena_t *nf_arena_new(size_t first_block);
void nf_arena_free(nf_arena_t *a);

/* n bytes aligned to max_align_t (n may be 0); NULL when out of memory. */
void *nf_arena_alloc(nf_arena_t *a, size_t n);
/* n bytes with no alignment, for strings. */
char *nf_arena_alloc_str(nf_arena_t *a, size_t n);
/* Copy of s[0..n) plus a NUL. */
char *nf_arena_strndup(nf_arena_t *a, const char *s, size_t n);
/* Shrinks p, which must be the most recent allocation, to n bytes (n <= its size). Anything else
 * is a no-op, so a caller may always call it. */
void nf_arena_shrink(nf_arena_t *a, void *p, size_t n);

/* Bytes handed out and bytes reserved from malloc, for tests and metrics. */
size_t nf_arena_used(const nf_arena_t *a);
size_t nf_arena_reserved(const nf_arena_t *a);

#endif
