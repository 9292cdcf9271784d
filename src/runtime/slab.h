/* slab.h — size-classed blocks for one thread's many small values (keyed state's out-of-line
 * values: interest vectors of ~100-200 bytes, a million per shard), carved from huge pages.
 *
 * Why not malloc: glibc serves such blocks from 4 KiB pages scattered over its heaps, and the
 * read path touches a random user's value with every event: with a million users that is a TLB
 * miss (a page walk) on top of the cache miss for nearly every value, which software prefetch
 * does not hide. Here blocks come out of 2 MiB-aligned chunks (runtime/bigmem.h), each one huge
 * page where transparent huge pages are enabled, so a hundred megabytes of values need ~50 TLB
 * entries instead of ~25,000.
 *
 * Shape: block sizes are classes about 1.5x apart, multiples of 16 (32, 48, 80, 112, 176, 256,
 * 368, ...; nf_slab_class_size). A freed block goes onto its class's free list (the link is kept
 * in the block itself) and is the next one that class hands out; otherwise blocks are cut from
 * the current chunk, shared by every class, so at most one chunk is partly used. Chunks start
 * small (64 KiB: a small table does not map 2 MiB) and double up to 2 MiB; blocks larger than
 * NF_SLAB_MAX come from malloc. Memory goes back to the system only at nf_slab_destroy: a class's
 * free blocks serve that class again (values that move between classes, as a vector that grows
 * does, leave free blocks that the next new values take). A holder that knows where every block
 * is can give back the chunks that its frees left scattered (a burst's values, evicted): it moves
 * the live blocks into a fresh slab and takes that one's place (nf_slab_replace).
 *
 * One owner thread: no locks. Blocks are 16-byte aligned. */
#ifndef NF_SLAB_H
#define NF_SLAB_H

#include <stddef.h>
#include <stdint.h>

#define NF_SLAB_MAX     65536u /* larger blocks are malloc'd */
#define NF_SLAB_CLASSES 19     /* 32 ... 47216: the classes up to NF_SLAB_MAX */

typedef struct nf_slab {
    void *free[NF_SLAB_CLASSES]; /* per class: free blocks, linked through their first word */
    unsigned char *cur;          /* the chunk blocks are cut from: [cur, end) is uncut */
    unsigned char *end;
    void **chunks; /* every chunk, for destroy */
    size_t *chunk_bytes;
    size_t nchunks, chunks_cap;
    size_t mapped; /* bytes of all chunks */
    size_t cut;    /* bytes cut into blocks (live or free) plus chunk tails left uncut */
    size_t large;  /* bytes of live malloc'd blocks (their sizes) */
} nf_slab_t;

/* The block size that holds len bytes (>= len, > 0): a class size, or len rounded up to 16
 * beyond NF_SLAB_MAX. 0 if len is too large to represent. */
uint32_t nf_slab_class_size(uint32_t len);

void nf_slab_init(nf_slab_t *s);
/* A block of nf_slab_class_size(len) bytes (contents undefined), or NULL (no memory, or len 0
 * or unrepresentable). */
void *nf_slab_alloc(nf_slab_t *s, uint32_t len);
/* Gives back a block of nf_slab_alloc(len) with size = nf_slab_class_size(len). p may be NULL. */
void nf_slab_free(nf_slab_t *s, void *p, uint32_t size);
/* Compaction: s becomes `with` (a slab the holder has just copied every live block of s into,
 * leaving s's large blocks where they are): s's chunks are unmapped, its large blocks stay
 * counted (they are with's now), and `with` is left empty. */
void nf_slab_replace(nf_slab_t *s, nf_slab_t *with);
/* Unmaps every chunk: every block cut from them is gone. Large blocks (size > NF_SLAB_MAX) are
 * the caller's to free first. Leaves s empty, ready for reuse. */
void nf_slab_destroy(nf_slab_t *s);

/* Bytes held: blocks cut (live or on a free list) and large blocks. The chunks map up to one
 * chunk (< 2 MiB) more than this (nf_slab_t.mapped). */
static inline size_t nf_slab_bytes(const nf_slab_t *s)
{
    return s->cut + s->large;
}

#endif
