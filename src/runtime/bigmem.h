/* bigmem.h — zero-filled arrays that grow to hundreds of megabytes: keyed-state records and
 * slot tables, which a shard fills at a million keys a second.
 *
 * Why not calloc/realloc: growing such an array by doubling through malloc copies it and the
 * new block is faulted in 4 KiB pages. On the VMs newsflow runs on, a 4 KiB fault costs about
 * 2 us (1.8 GB/s, measured in perf/README "Analytics"), which made page faults the largest
 * single cost of the read path. Here an array is an anonymous mapping with transparent huge
 * pages requested (MADV_HUGEPAGE: 2 MiB faults, ~10 GB/s on the same machine) and it grows by
 * mremap, which moves page tables instead of bytes; fresh pages are zero, so nothing is memset.
 * Where THP is off ("never") the same code runs on 4 KiB pages.
 *
 * Sizes are rounded up to whole pages; the caller keeps the size it asked for and passes it
 * back (to grow and free). Any thread; no global state. */
#ifndef NF_BIGMEM_H
#define NF_BIGMEM_H

#include <stddef.h>

/* bytes zeroed bytes, or NULL (bytes == 0, or no memory). */
void *nf_bigmem_alloc(size_t bytes);
/* Grows p (from nf_bigmem_alloc, old_bytes) to new_bytes >= old_bytes: the contents are kept,
 * the tail is zero, the address may change. NULL on failure, and p is left valid and intact. */
void *nf_bigmem_grow(void *p, size_t old_bytes, size_t new_bytes);
/* Shrinks p (from nf_bigmem_alloc or _grow, old_bytes) to 0 < new_bytes <= old_bytes in place:
 * the pages past new_bytes are unmapped (given back to the system), the rest kept. p, or NULL on
 * failure (p is then left valid and intact at old_bytes). */
void *nf_bigmem_shrink(void *p, size_t old_bytes, size_t new_bytes);
/* bytes (a multiple of NF_BIGMEM_HUGE) zeroed bytes at an address aligned to NF_BIGMEM_HUGE, so
 * that every 2 MiB of it can be one huge page (an unaligned mapping has a 4 KiB-paged head and
 * tail; kernels before 6.7 do not align anonymous mappings themselves). Cannot be grown; freed
 * with nf_bigmem_free. NULL if bytes is 0 or not a multiple, or no memory. */
#define NF_BIGMEM_HUGE ((size_t)2 << 20)
void *nf_bigmem_alloc_huge(size_t bytes);
/* p may be NULL. */
void nf_bigmem_free(void *p, size_t bytes);

#endif
