/* cms.h — Count-Min Sketch: approximate counts of a multiset of keys in fixed memory, the trending
 * stage's per-pane counter (width 2048 x depth 5 by default: docs/ARCHITECTURE.md §1,
 * "Parameters").
 *
 * A sketch is depth rows of width 64-bit cells. A key is hashed once (nf_cms_hash, i.e.
 * nf_hash64 under the sketch's seed) and its cell in row i is picked by double hashing
 * (h1 + i*h2, h2 = nf_mix64(h) | 1, reduced by multiply-shift), so the hot path hashes the key
 * bytes once whatever the depth, and the caller can reuse the same 64-bit hash as the key's
 * identity elsewhere (the trend engine's candidate index does).
 *
 * Guarantees (Cormode & Muthukrishnan): with N the total added, for every key
 *   true <= estimate, and estimate <= true + (e / width) * N with probability >= 1 - e^-depth.
 * Sketches of the same shape (width, depth, seed) are linear: merge adds cell by cell (the
 * sketch of a union of streams), subtract removes a sub-stream (refused if a cell would go
 * negative, which means it was not a sub-stream).
 *
 * Encoding (nf_cms_encode): little-endian, versioned, "NFCM" v1, shape, total, the cells as
 * LEB128 varints (a sparse pane is mostly 1-byte zeros), and an nf_hash64 trailer over
 * everything before it so a corrupt blob is refused (-EINVAL), never half-applied.
 *
 * Threads: a sketch belongs to one thread. No allocation except init/decode. */
#ifndef NF_CMS_H
#define NF_CMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NF_CMS_MAX_WIDTH (1u << 24)
#define NF_CMS_MAX_DEPTH 32u

typedef struct nf_cms {
    uint32_t width, depth;
    uint64_t seed;
    uint64_t total;  /* N: sum of everything added */
    uint64_t *cells; /* depth rows of width cells */
} nf_cms_t;

/* 0, -EINVAL (width or depth 0 or above the maxima) or -ENOMEM. Cells start at zero. */
int nf_cms_init(nf_cms_t *c, uint32_t width, uint32_t depth, uint64_t seed);
void nf_cms_free(nf_cms_t *c);
void nf_cms_clear(nf_cms_t *c);

/* The key's 64-bit hash under this sketch's seed: the only input add/estimate need. */
uint64_t nf_cms_hash(const nf_cms_t *c, const void *key, size_t len);

void nf_cms_add(nf_cms_t *c, uint64_t h, uint64_t n);
/* Adds n and returns the key's new estimate (one pass over the rows instead of two). */
uint64_t nf_cms_add_estimate(nf_cms_t *c, uint64_t h, uint64_t n);
uint64_t nf_cms_estimate(const nf_cms_t *c, uint64_t h);

bool nf_cms_same_shape(const nf_cms_t *a, const nf_cms_t *b);
/* dst += src. -EINVAL if the shapes differ (dst unchanged). */
int nf_cms_merge(nf_cms_t *dst, const nf_cms_t *src);
/* dst -= src. -EINVAL if the shapes differ, -ERANGE if src is not contained in dst (some cell
 * or the total would go negative); dst unchanged on error. */
int nf_cms_subtract(nf_cms_t *dst, const nf_cms_t *src);

/* Upper bound of the encoded size. */
size_t nf_cms_encoded_max(const nf_cms_t *c);
/* Encodes into buf; returns the bytes written, 0 if cap is too small. */
size_t nf_cms_encode(const nf_cms_t *c, void *buf, size_t cap);
/* Decodes a whole blob into *out (initialised here; free with nf_cms_free). 0, -EINVAL
 * (corrupt, truncated, trailing bytes, bad shape) or -ENOMEM. */
int nf_cms_decode(nf_cms_t *out, const void *buf, size_t len);
/* dst += the decoded blob, without allocating. The blob is validated completely (including
 * its shape against dst's) before dst is touched: -EINVAL leaves dst unchanged. */
int nf_cms_decode_merge(nf_cms_t *dst, const void *buf, size_t len);

/* Bytes of memory held. */
size_t nf_cms_bytes(const nf_cms_t *c);

#endif
