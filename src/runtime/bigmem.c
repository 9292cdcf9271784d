/* bigmem.c — anonymous mappings with huge pages, grown by mremap (bigmem.h). */
#include "runtime/bigmem.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t round_pages(size_t bytes)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    if (bytes > SIZE_MAX - pg)
        return 0;
    return (bytes + pg - 1) & ~(pg - 1);
}

void *nf_bigmem_alloc(size_t bytes)
{
    size_t n = round_pages(bytes);
    if (n == 0)
        return NULL;
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    /* A hint: refused (THP compiled out, or "never") means 4 KiB pages, which still work. */
    (void)madvise(p, n, MADV_HUGEPAGE);
    return p;
}

void *nf_bigmem_alloc_huge(size_t bytes)
{
    if (bytes == 0 || bytes % NF_BIGMEM_HUGE || bytes > SIZE_MAX - NF_BIGMEM_HUGE)
        return NULL;
    /* Map one huge page more than asked, then unmap the unaligned head and the rest. */
    size_t span = bytes + NF_BIGMEM_HUGE;
    unsigned char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    uintptr_t a = ((uintptr_t)p + NF_BIGMEM_HUGE - 1) & ~(uintptr_t)(NF_BIGMEM_HUGE - 1);
    unsigned char *q = (unsigned char *)a;
    if (q > p)
        munmap(p, (size_t)(q - p));
    if (q + bytes < p + span)
        munmap(q + bytes, (size_t)(p + span - (q + bytes)));
    (void)madvise(q, bytes, MADV_HUGEPAGE);
    return q;
}

void *nf_bigmem_grow(void *p, size_t old_bytes, size_t new_bytes)
{
    if (!p)
        return nf_bigmem_alloc(new_bytes);
    size_t o = round_pages(old_bytes), n = round_pages(new_bytes);
    if (n == 0 || n < o)
        return NULL;
    if (n == o)
        return p;
    void *q = mremap(p, o, n, MREMAP_MAYMOVE);
    if (q == MAP_FAILED)
        return NULL;
    (void)madvise(q, n, MADV_HUGEPAGE);
    return q;
}

void *nf_bigmem_shrink(void *p, size_t old_bytes, size_t new_bytes)
{
    size_t o = round_pages(old_bytes), n = round_pages(new_bytes);
    if (!p || n == 0 || n > o)
        return NULL;
    if (n < o && munmap((unsigned char *)p + n, o - n) != 0)
        return NULL;
    return p;
}

void nf_bigmem_free(void *p, size_t bytes)
{
    if (p)
        munmap(p, round_pages(bytes));
}
