/* slab.c — size-classed blocks carved from huge-page chunks (slab.h). */
#include "runtime/slab.h"
#include "runtime/bigmem.h"

#include <stdlib.h>
#include <string.h>

#define FIRST_CHUNK ((size_t)64 << 10)
#define MIN_BLOCK   32u

/* The class sizes: s_0 = 32, s_k = c_k rounded up to 16 (c_0 = 32, c_k+1 = c_k + c_k / 2).
 * Advances *c to c_k+1 and returns s_k+1. */
static inline uint64_t next_class(uint64_t *c)
{
    *c += *c / 2;
    return (*c + 15) & ~(uint64_t)15;
}

/* The class of len: its index k and its size, the smallest class size >= len. A class size
 * maps to its own class. */
static unsigned class_of(uint32_t len, uint64_t *size)
{
    uint64_t c = MIN_BLOCK, s = MIN_BLOCK;
    unsigned k = 0;
    for (; s < len; k++)
        s = next_class(&c);
    *size = s;
    return k;
}

uint32_t nf_slab_class_size(uint32_t len)
{
    uint64_t size;
    class_of(len ? len : 1, &size);
    return size <= UINT32_MAX ? (uint32_t)size : 0;
}

void nf_slab_init(nf_slab_t *s)
{
    memset(s, 0, sizeof *s);
}

static void push_free(nf_slab_t *s, unsigned k, void *p)
{
    memcpy(p, &s->free[k], sizeof(void *));
    s->free[k] = p;
}

/* The uncut tail of the current chunk into free lists, largest classes first, so that moving
 * to a new chunk wastes at most 31 bytes (counted as cut: it is held). */
static void retire_tail(nf_slab_t *s)
{
    size_t left = (size_t)(s->end - s->cur);
    s->cut += left;
    while (left >= MIN_BLOCK) {
        unsigned k = 0; /* the largest class that fits */
        uint64_t size = MIN_BLOCK, c = MIN_BLOCK, next;
        while ((next = next_class(&c)) <= left && next <= NF_SLAB_MAX) {
            size = next;
            k++;
        }
        push_free(s, k, s->cur);
        s->cur += size;
        left -= size;
    }
    s->cur = s->end;
}

static int new_chunk(nf_slab_t *s)
{
    size_t bytes = s->mapped < FIRST_CHUNK ? FIRST_CHUNK : s->mapped;
    if (bytes > NF_BIGMEM_HUGE)
        bytes = NF_BIGMEM_HUGE;
    if (s->nchunks == s->chunks_cap) {
        size_t cap = s->chunks_cap ? s->chunks_cap * 2 : 16;
        void **c = realloc(s->chunks, cap * sizeof *c);
        if (!c)
            return -1;
        s->chunks = c;
        size_t *b = realloc(s->chunk_bytes, cap * sizeof *b);
        if (!b)
            return -1;
        s->chunk_bytes = b;
        s->chunks_cap = cap;
    }
    unsigned char *p =
        bytes == NF_BIGMEM_HUGE ? nf_bigmem_alloc_huge(bytes) : nf_bigmem_alloc(bytes);
    if (!p)
        return -1;
    retire_tail(s);
    s->chunks[s->nchunks] = p;
    s->chunk_bytes[s->nchunks++] = bytes;
    s->mapped += bytes;
    s->cur = p;
    s->end = p + bytes;
    return 0;
}

void *nf_slab_alloc(nf_slab_t *s, uint32_t len)
{
    uint64_t size;
    unsigned k = class_of(len ? len : 1, &size);
    if (len == 0 || size > UINT32_MAX)
        return NULL;
    if (size > NF_SLAB_MAX) {
        void *p = malloc(size);
        if (p)
            s->large += size;
        return p;
    }
    void *p = s->free[k];
    if (p) {
        memcpy(&s->free[k], p, sizeof(void *));
        return p;
    }
    if ((size_t)(s->end - s->cur) < size && new_chunk(s) != 0)
        return NULL;
    p = s->cur;
    s->cur += size;
    s->cut += size;
    return p;
}

void nf_slab_free(nf_slab_t *s, void *p, uint32_t size)
{
    if (!p)
        return;
    uint64_t csize;
    unsigned k = class_of(size, &csize);
    if (csize > NF_SLAB_MAX) {
        s->large -= csize;
        free(p);
        return;
    }
    push_free(s, k, p);
}

void nf_slab_destroy(nf_slab_t *s)
{
    for (size_t i = 0; i < s->nchunks; i++)
        nf_bigmem_free(s->chunks[i], s->chunk_bytes[i]);
    free(s->chunks);
    free(s->chunk_bytes);
    nf_slab_init(s);
}

void nf_slab_replace(nf_slab_t *s, nf_slab_t *with)
{
    size_t large = s->large;
    nf_slab_destroy(s);
    *s = *with;
    s->large += large;
    nf_slab_init(with);
}
