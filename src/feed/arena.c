/* arena.c — bump allocator for a parsed feed's strings and arrays (see arena.h).
 *
 * Blocks form a singly linked list, newest first; allocation bumps an offset in the newest one.
 * When a request does not fit, a new block is chained in, sized max(request, next size) where
 * the next size doubles up to NF_ARENA_MAX_BLOCK. The tail of the old block is wasted, which is
 * at most one request's worth per block: cheap next to a malloc per string. */
#include "feed/arena.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NF_ARENA_MAX_BLOCK ((size_t)1 << 20)

struct nf_arena_block {
    struct nf_arena_block *next;
    size_t size; /* usable bytes in data[] */
    size_t used;
    alignas(max_align_t) unsigned char data[];
};

struct nf_arena {
    struct nf_arena_block *head;
    size_t next_size;
    size_t used, reserved;
    unsigned char *last; /* most recent allocation, for nf_arena_shrink */
    size_t last_size;
};

nf_arena_t *nf_arena_new(size_t first_block)
{
    nf_arena_t *a = calloc(1, sizeof *a);
    if (a)
        a->next_size = first_block ? first_block : 16 * 1024;
    return a;
}

void nf_arena_free(nf_arena_t *a)
{
    if (!a)
        return;
    for (struct nf_arena_block *b = a->head, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(a);
}

static struct nf_arena_block *arena_grow(nf_arena_t *a, size_t n)
{
    size_t size = a->next_size > n ? a->next_size : n;
    if (size > SIZE_MAX - sizeof(struct nf_arena_block))
        return NULL;
    struct nf_arena_block *b = malloc(sizeof *b + size);
    if (!b)
        return NULL;
    b->size = size;
    b->used = 0;
    if (a->head && n > a->next_size && a->head->size - a->head->used > n / 8) {
        /* An oversized request gets its own block behind the current one, which keeps its
         * free space for the small requests that follow. */
        b->next = a->head->next;
        a->head->next = b;
    } else {
        b->next = a->head;
        a->head = b;
    }
    if (a->next_size < NF_ARENA_MAX_BLOCK)
        a->next_size *= 2;
    a->reserved += size;
    return b;
}

static void *arena_take(nf_arena_t *a, size_t n, size_t align)
{
    struct nf_arena_block *b = a->head;
    size_t off = 0;
    if (b) {
        off = (b->used + align - 1) & ~(align - 1);
        if (off > b->size || b->size - off < n)
            b = NULL;
    }
    if (!b) {
        b = arena_grow(a, n);
        if (!b)
            return NULL;
        off = b->used;
    }
    unsigned char *p = b->data + off;
    b->used = off + n;
    a->used += n;
    a->last = p;
    a->last_size = n;
    return p;
}

void *nf_arena_alloc(nf_arena_t *a, size_t n)
{
    return arena_take(a, n, alignof(max_align_t));
}

char *nf_arena_alloc_str(nf_arena_t *a, size_t n)
{
    return arena_take(a, n, 1);
}

char *nf_arena_strndup(nf_arena_t *a, const char *s, size_t n)
{
    if (n == SIZE_MAX)
        return NULL;
    char *p = arena_take(a, n + 1, 1);
    if (p) {
        if (n)
            memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

void nf_arena_shrink(nf_arena_t *a, void *p, size_t n)
{
    if (!p || p != a->last || n > a->last_size)
        return;
    /* The last allocation is at the end of whichever block holds it; that block is the head
     * unless it was an oversized request placed behind the head (then it simply stays full). */
    struct nf_arena_block *b = a->head;
    if (b && (unsigned char *)p >= b->data &&
        (unsigned char *)p + a->last_size == b->data + b->used)
        b->used -= a->last_size - n;
    a->used -= a->last_size - n;
    a->last_size = n;
}

size_t nf_arena_used(const nf_arena_t *a)
{
    return a->used;
}

size_t nf_arena_reserved(const nf_arena_t *a)
{
    return a->reserved;
}
