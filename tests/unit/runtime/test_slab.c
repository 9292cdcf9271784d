/* Tests src/runtime/slab.h: the class sizes, and a reference model of random allocations and
 * frees (every live block keeps its own bytes: no two overlap, a free block is reused, the byte
 * count covers every live block and stays within a chunk of what is live at the peak), chunks of
 * 2 MiB aligned for huge pages, large blocks through malloc. */
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
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
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

int main(void)
{
    NF_RUN(test_class_sizes);
    NF_RUN(test_reuse);
    NF_RUN(test_model);
    return nf_test_report();
}
