/* Tests src/runtime/slab.h: the class sizes, and a reference model of random allocations and
 * frees (every live block keeps its own bytes: no two overlap, a free block is reused, the byte
 * count covers every live block and stays within a chunk of what is live at the peak), chunks of
 * 2 MiB aligned for huge pages, large blocks through malloc; a holder's compaction into a fresh
 * slab (nf_slab_replace) and bigmem's shrink in place. */
#include "nf_test.h"
#include "runtime/bigmem.h"
#include "runtime/slab.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x51ab51ab51abull;

static uint64_t next_rand(void)
{
    return nf_test_xorshift(&rng);
}

static void test_class_sizes(void)
{
    NF_CHECK_EQ(nf_slab_class_size(0), 32);
    NF_CHECK_EQ(nf_slab_class_size(1), 32);
    NF_CHECK_EQ(nf_slab_class_size(32), 32);
    NF_CHECK_EQ(nf_slab_class_size(33), 48);
    NF_CHECK_EQ(nf_slab_class_size(80), 80);
    NF_CHECK_EQ(nf_slab_class_size(81), 112);
    NF_CHECK_EQ(nf_slab_class_size(NF_SLAB_MAX + 1) > NF_SLAB_MAX, 1);
    uint32_t prev = 0;
    unsigned classes = 0;
    for (uint32_t len = 1; len <= 200000; len++) {
        uint32_t c = nf_slab_class_size(len);
        NF_REQUIRE(c >= len && c % 16 == 0);
        NF_REQUIRE(nf_slab_class_size(c) == c);         /* a class size is its own class */
        NF_REQUIRE(c >= prev);                          /* monotonic */
        NF_REQUIRE(c <= 32 || c <= len + len / 2 + 16); /* at most ~1.5x what is asked */
        if (c != prev && c <= NF_SLAB_MAX)
            classes++;
        prev = c;
    }
    NF_CHECK_EQ(classes, NF_SLAB_CLASSES);
}

typedef struct live {
    unsigned char *p;
    uint32_t len, size;
    unsigned char fill;
} live_t;

static bool intact(const live_t *b)
{
    for (uint32_t i = 0; i < b->len; i++)
        if (b->p[i] != (unsigned char)(b->fill + i))
            return false;
    return true;
}

/* Random allocations and frees against a list of what is live: contents stay, blocks are
 * aligned, and the byte count is >= what is live and <= the peak of it plus one chunk. */
static void test_model(void)
{
    nf_slab_t s;
    nf_slab_init(&s);
    enum { N = 20000 };
    live_t *lv = calloc(N, sizeof *lv);
    NF_REQUIRE(lv);
    size_t n = 0, live_bytes = 0, peak = 0, large = 0;
    for (int step = 0; step < 400000; step++) {
        bool add = n == 0 || (n < N && next_rand() % 100 < 55);
        if (add) {
            uint64_t r = next_rand();
            /* Mostly small (the interest vectors), sometimes up to 100 KB (malloc'd). */
            uint32_t len =
                r % 1000 == 0 ? (uint32_t)(r >> 20) % 100000 + 1 : (uint32_t)(r >> 20) % 600 + 1;
            live_t *b = &lv[n++];
            b->p = nf_slab_alloc(&s, len);
            NF_REQUIRE(b->p);
            NF_REQUIRE(((uintptr_t)b->p & 15) == 0);
            b->len = len;
            b->size = nf_slab_class_size(len);
            b->fill = (unsigned char)r;
            for (uint32_t i = 0; i < len; i++)
                b->p[i] = (unsigned char)(b->fill + i);
            live_bytes += b->size;
            large += b->size > NF_SLAB_MAX;
            if (live_bytes > peak)
                peak = live_bytes;
        } else {
            size_t i = next_rand() % n;
            NF_REQUIRE(intact(&lv[i]));
            nf_slab_free(&s, lv[i].p, lv[i].size);
            live_bytes -= lv[i].size;
            lv[i] = lv[--n];
        }
        if (step % 50000 == 0) {
            NF_CHECK(nf_slab_bytes(&s) >= live_bytes);
            NF_CHECK(nf_slab_bytes(&s) <= peak + NF_BIGMEM_HUGE);
        }
    }
    for (size_t i = 0; i < n; i++)
        NF_CHECK(intact(&lv[i]));
    NF_CHECK(large > 0);
    NF_CHECK(s.mapped > NF_BIGMEM_HUGE); /* it grew to huge chunks */
    for (size_t i = 0; i < s.nchunks; i++)
        if (s.chunk_bytes[i] == NF_BIGMEM_HUGE)
            NF_CHECK(((uintptr_t)s.chunks[i] & (NF_BIGMEM_HUGE - 1)) == 0);
    for (size_t i = 0; i < n; i++)
        if (lv[i].size > NF_SLAB_MAX)
            nf_slab_free(&s, lv[i].p, lv[i].size);
    nf_slab_destroy(&s);
    NF_CHECK_EQ(nf_slab_bytes(&s), 0);
    free(lv);
}

/* A freed block is what its class hands out next; other classes do not take it. */
static void test_reuse(void)
{
    nf_slab_t s;
    nf_slab_init(&s);
    void *a = nf_slab_alloc(&s, 100);
    void *b = nf_slab_alloc(&s, 100);
    NF_REQUIRE(a && b && a != b);
    size_t held = nf_slab_bytes(&s);
    nf_slab_free(&s, a, nf_slab_class_size(100));
    void *c = nf_slab_alloc(&s, 30); /* another class: cut anew */
    NF_CHECK(c != a);
    NF_CHECK_EQ(nf_slab_alloc(&s, 90), a); /* 90 and 100 share the 112 class */
    NF_CHECK_EQ(nf_slab_bytes(&s), held + 32);
    NF_CHECK(nf_slab_alloc(&s, 0) == NULL);
    nf_slab_destroy(&s);
}

/* Compaction: the live blocks copied into a fresh slab, which takes the old one's place; its
 * chunks are unmapped, its large blocks stay counted (and freeable) where they are. */
static void test_replace(void)
{
    enum { N = 20000, KEEP = 500 };
    nf_slab_t s, t;
    nf_slab_init(&s);
    nf_slab_init(&t);
    void **b = malloc(N * sizeof *b);
    NF_REQUIRE(b);
    for (int i = 0; i < N; i++) {
        b[i] = nf_slab_alloc(&s, 100);
        NF_REQUIRE(b[i]);
        memset(b[i], i & 0xff, 100);
    }
    void *big = nf_slab_alloc(&s, 70000);
    NF_REQUIRE(big);
    size_t big_size = nf_slab_class_size(70000);
    for (int i = KEEP; i < N; i++) /* a burst's blocks, evicted */
        nf_slab_free(&s, b[i], nf_slab_class_size(100));
    size_t mapped = s.mapped;
    for (int i = 0; i < KEEP; i++) {
        void *c = nf_slab_alloc(&t, nf_slab_class_size(100));
        NF_REQUIRE(c);
        memcpy(c, b[i], 100);
        b[i] = c;
    }
    nf_slab_replace(&s, &t);
    NF_CHECK(s.mapped * 8 < mapped);
    NF_CHECK_EQ(s.large, big_size);
    NF_CHECK_EQ(nf_slab_bytes(&s), KEEP * nf_slab_class_size(100) + big_size);
    NF_CHECK_EQ(t.nchunks, 0);
    NF_CHECK_EQ(nf_slab_bytes(&t), 0);
    for (int i = 0; i < KEEP; i++)
        NF_CHECK(((unsigned char *)b[i])[99] == (i & 0xff));
    nf_slab_free(&s, big, (uint32_t)big_size);
    NF_CHECK_EQ(s.large, 0);
    nf_slab_destroy(&s);
    free(b);
}

/* bigmem: an array shrunk in place keeps its head and can grow again. */
static void test_bigmem_shrink(void)
{
    size_t old = (size_t)8 << 20, keep = ((size_t)1 << 20) + 100;
    unsigned char *p = nf_bigmem_alloc(old);
    NF_REQUIRE(p);
    for (size_t i = 0; i < old; i += 4096)
        p[i] = (unsigned char)(i >> 12);
    NF_CHECK(nf_bigmem_shrink(p, old, old + 1) == NULL); /* not a shrink */
    NF_CHECK(nf_bigmem_shrink(p, old, 0) == NULL);
    NF_CHECK(nf_bigmem_shrink(p, old, keep) == p);
    bool same = true;
    for (size_t i = 0; i < keep; i += 4096)
        same &= p[i] == (unsigned char)(i >> 12);
    NF_CHECK(same);
    p = nf_bigmem_grow(p, keep, old);
    NF_REQUIRE(p);
    NF_CHECK(p[4096] == 1 && p[old - 1] == 0); /* the new tail is zero */
    nf_bigmem_free(p, old);
}

int main(void)
{
    NF_RUN(test_class_sizes);
    NF_RUN(test_reuse);
    NF_RUN(test_model);
    NF_RUN(test_replace);
    NF_RUN(test_bigmem_shrink);
    return nf_test_report();
}
