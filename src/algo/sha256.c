/* sha256.c — SHA-256 as FIPS 180-4 §6.2 describes it, for content_hash and article ids.
 *
 * Written out rather than taken from OpenSSL/libcurl's internals so ids never depend on which
 * crypto library a build happened to link. The state is plain data (no allocation, no global
 * tables beyond the constant K), so a shard can keep one on its stack. Full 64-byte blocks are
 * compressed straight from the caller's buffer; only a partial tail is copied into c->buf.
 *
 * Two compression functions compute the same thing: the portable one below, and on x86 CPUs
 * with the SHA extensions (SHA-NI: Intel since Goldmont/Ice Lake, every AMD Zen) one built on
 * SHA256RNDS2/MSG1/MSG2, 4x (a URL) to 6x (long input) faster, which matters because every
 * article hashes its title and body (content_hash) and its URL (article_id). The CPU is asked
 * once (cpuid); the answer is kept in an atomic so shards may hash concurrently from the start.
 * nf_sha256_use() forces a path, for the tests that check both against each other. */
#include "algo/sha256.h"

#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define NF_SHA256_X86 1
#include <cpuid.h>
#include <immintrin.h>
#endif

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t ror(uint32_t x, unsigned n)
{
    return (x >> n) | (x << (32 - n));
}

static inline uint32_t load_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static inline void store_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void compress_portable(uint32_t h[8], const uint8_t *block)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = load_be32(block + 4 * i);
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 =
            hh + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += hh;
}

static void blocks_portable(uint32_t h[8], const uint8_t *p, size_t n)
{
    for (; n; n--, p += 64)
        compress_portable(h, p);
}

#ifdef NF_SHA256_X86
/* The SHA-NI compression of n blocks. The instructions keep the state as two vectors, ABEF and
 * CDGH, and SHA256RNDS2 does two rounds with the low two dwords of its message+constant operand.
 * Each group of four rounds g (0..15) adds K to the schedule words W[4g..4g+3] held in m[g % 4];
 * words from group 4 on are built as they are needed: MSG1 of the group three back, the
 * ALIGNR/ADD of W[t-7], and MSG2 (FIPS 180-4 §6.2.2 step 1, four words at a time). */
__attribute__((target("sha,sse4.1"))) static void blocks_shani(uint32_t h[8], const uint8_t *p,
                                                               size_t n)
{
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bll, 0x0405060700010203ll);
    __m128i dcba = _mm_loadu_si128((const __m128i *)&h[0]);
    __m128i hgfe = _mm_loadu_si128((const __m128i *)&h[4]);
    __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
    __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
    __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
    for (; n; n--, p += 64) {
        __m128i abef0 = abef, cdgh0 = cdgh, m[4];
#pragma GCC unroll 16
        for (int g = 0; g < 16; g++) {
            if (g < 4)
                m[g] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * g)), bswap);
            __m128i wk = _mm_add_epi32(m[g % 4], _mm_loadu_si128((const __m128i *)&K[4 * g]));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);
            if (g >= 3 && g < 15) { /* finish W[4(g+1)..]: + W[t-7], then MSG2 */
                __m128i w7 = _mm_alignr_epi8(m[g % 4], m[(g + 3) % 4], 4);
                m[(g + 1) % 4] = _mm_sha256msg2_epu32(_mm_add_epi32(m[(g + 1) % 4], w7), m[g % 4]);
            }
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(wk, 0x0E));
            if (g >= 1 && g < 13) /* start W[4(g+3)..] from the group before this one */
                m[(g + 3) % 4] = _mm_sha256msg1_epu32(m[(g + 3) % 4], m[g % 4]);
        }
        abef = _mm_add_epi32(abef, abef0);
        cdgh = _mm_add_epi32(cdgh, cdgh0);
    }
    __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)&h[0], _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)&h[4], _mm_alignr_epi8(dchg, feba, 8));
}

static bool cpu_has_shani(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSSE3) || !(c & bit_SSE4_1))
        return false;
    if (__get_cpuid_max(0, NULL) < 7)
        return false;
    __cpuid_count(7, 0, a, b, c, d);
    return (b & bit_SHA) != 0;
}
#else
static bool cpu_has_shani(void)
{
    return false;
}
#endif

/* 0: not decided yet, else an nf_sha256_impl_t. Relaxed is enough: every thread that decides
 * decides the same, and the value guards no other memory. */
static _Atomic int impl;

static nf_sha256_impl_t impl_get(void)
{
    int v = atomic_load_explicit(&impl, memory_order_relaxed);
    if (v == 0) {
        v = cpu_has_shani() ? NF_SHA256_SHANI : NF_SHA256_PORTABLE;
        atomic_store_explicit(&impl, v, memory_order_relaxed);
    }
    return (nf_sha256_impl_t)v;
}

static void blocks(uint32_t h[8], const uint8_t *p, size_t n)
{
#ifdef NF_SHA256_X86
    if (impl_get() == NF_SHA256_SHANI) {
        blocks_shani(h, p, n);
        return;
    }
#endif
    blocks_portable(h, p, n);
}

int nf_sha256_use(nf_sha256_impl_t which)
{
    if (which == NF_SHA256_AUTO)
        which = cpu_has_shani() ? NF_SHA256_SHANI : NF_SHA256_PORTABLE;
    else if (which == NF_SHA256_SHANI && !cpu_has_shani())
        return -ENOTSUP;
    else if (which != NF_SHA256_PORTABLE && which != NF_SHA256_SHANI)
        return -EINVAL;
    atomic_store_explicit(&impl, (int)which, memory_order_relaxed);
    return 0;
}

nf_sha256_impl_t nf_sha256_impl(void)
{
    return impl_get();
}

void nf_sha256_init(nf_sha256_t *c)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, iv, sizeof iv);
    c->bytes = 0;
    c->nbuf = 0;
}

void nf_sha256_update(nf_sha256_t *c, const void *data, size_t len)
{
    const uint8_t *p = data;
    assert(c->nbuf < 64);
    c->bytes += len;
    if (c->nbuf) {
        size_t take = 64 - c->nbuf;
        if (take > len)
            take = len;
        memcpy(c->buf + c->nbuf, p, take);
        c->nbuf += take;
        p += take;
        len -= take;
        if (c->nbuf < 64)
            return;
        blocks(c->h, c->buf, 1);
        c->nbuf = 0;
    }
    if (len >= 64) {
        blocks(c->h, p, len / 64);
        p += len & ~(size_t)63;
        len &= 63;
    }
    if (len) {
        memcpy(c->buf, p, len);
        c->nbuf = len;
    }
}

void nf_sha256_final(nf_sha256_t *c, uint8_t out[32])
{
    uint64_t bits = c->bytes * 8;
    c->buf[c->nbuf++] = 0x80;
    if (c->nbuf > 56) {
        memset(c->buf + c->nbuf, 0, 64 - c->nbuf);
        blocks(c->h, c->buf, 1);
        c->nbuf = 0;
    }
    memset(c->buf + c->nbuf, 0, 56 - c->nbuf);
    for (int i = 0; i < 8; i++)
        c->buf[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
    blocks(c->h, c->buf, 1);
    for (int i = 0; i < 8; i++)
        store_be32(out + 4 * i, c->h[i]);
    /* The context holds a digest of the caller's data; leave nothing of it behind. */
    memset(c, 0, sizeof *c);
}

void nf_sha256(const void *data, size_t len, uint8_t out[32])
{
    nf_sha256_t c;
    nf_sha256_init(&c);
    nf_sha256_update(&c, data, len);
    nf_sha256_final(&c, out);
}

void nf_hex(const uint8_t *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}
