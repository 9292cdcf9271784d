/* minhash.h — text -> word shingles -> MinHash signature -> LSH band keys (the cluster stage's
 * first half: docs/ARCHITECTURE.md §1, "Parameters"). Pure functions over a read-only parameter
 * object; no state.
 *
 * Normalization: a word is a maximal run of ASCII letters and digits or bytes >= 0x80 (UTF-8
 * sequences kept as they are, so non-Latin words survive without a Unicode table); ASCII letters
 * are lower-cased; everything else separates words. A shingle is nf_hash64 of k consecutive words
 * joined by one space (seed NF_MINHASH_SHINGLE_SEED). A document of 1..k-1 words has one shingle
 * of all its words; a document without words has no shingle and its signature is all
 * NF_MINHASH_EMPTY: such a signature must never become an LSH candidate (nf_minhash_is_empty;
 * nf_minhash_similarity gives it 0 against anything).
 *
 * Signature: for each of `hashes` functions h_i, the minimum of h_i(shingle) over the shingles,
 * as 32-bit values. h_i is derived from the 64-bit shingle hash x with per-function 32-bit
 * constants (multiply-add of x's halves, then a xorshift-multiply finalizer), so the loop over i
 * is plain 32-bit arithmetic that the compiler vectorizes: the hot loop is ~300 shingles x 128
 * functions per article. The test suite checks that the LSH candidate rate of these functions
 * matches 1-(1-s^r)^b. The constants come from the seed; changing seed or formula changes every
 * persisted band key (the cluster index would have to be rebuilt).
 *
 * Band keys: band j's key is nf_hash64 over its `rows` 32-bit values (little-endian) seeded by j.
 * Similarity estimate: the fraction of equal slots.
 *
 * Threads: an nf_minhash_t is immutable after nf_minhash_new and may be shared by every shard.
 * A scratch belongs to one thread; signing with a warm scratch does not allocate. */
#ifndef NF_MINHASH_H
#define NF_MINHASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NF_MINHASH_EMPTY        0xFFFFFFFFu
#define NF_MINHASH_SHINGLE_SEED 0x5348494e474c4533ull /* "SHINGLE3" */
#define NF_MINHASH_MAX_HASHES   1024u

typedef struct nf_minhash_opts {
    unsigned shingle_words; /* k: words per shingle, default 3 */
    unsigned hashes;        /* signature length, default 128; a multiple of 16, <= 1024 */
    unsigned bands, rows;   /* LSH: bands x rows == hashes; default 16 x 8 */
    uint64_t seed;          /* the functions' constants; default fixed (persisted band keys) */
} nf_minhash_opts_t;

void nf_minhash_opts_default(nf_minhash_opts_t *o);

typedef struct nf_minhash nf_minhash_t;

/* NULL with a message in err if the options are inconsistent, or on allocation failure. */
nf_minhash_t *nf_minhash_new(const nf_minhash_opts_t *o, char *err, size_t errlen);
void nf_minhash_free(nf_minhash_t *mh);
const nf_minhash_opts_t *nf_minhash_opts(const nf_minhash_t *mh);

/* Word and shingle buffers, grown on demand and reused. Zero-initialize ({0}) before first use. */
typedef struct nf_minhash_scratch {
    char *text; /* normalized words, one space apart */
    size_t text_cap;
    uint32_t *word_off; /* start of each word in text */
    size_t word_cap;
    uint64_t *shingles;
    size_t shingle_cap, nshingles; /* nshingles: of the last document signed */
} nf_minhash_scratch_t;

void nf_minhash_scratch_free(nf_minhash_scratch_t *s);

/* Normalizes title and body as one word stream (title words first) and computes their shingle
 * hashes into s->shingles / s->nshingles. Either part may be NULL with length 0. Returns the
 * number of shingles or -ENOMEM. */
long nf_minhash_shingles(const nf_minhash_t *mh, nf_minhash_scratch_t *s, const char *title,
                         size_t tlen, const char *body, size_t blen);

/* Shingles title + body and signs them: sig gets opts.hashes values. 0 or -ENOMEM. */
int nf_minhash_sign_text(const nf_minhash_t *mh, nf_minhash_scratch_t *s, const char *title,
                         size_t tlen, const char *body, size_t blen, uint32_t *sig);

/* Signs n precomputed 64-bit shingle hashes (n = 0: the empty signature). Never fails. */
void nf_minhash_sign(const nf_minhash_t *mh, const uint64_t *shingles, size_t n, uint32_t *sig);

/* Band keys: keys[j] for j < opts.bands. */
void nf_minhash_band_keys(const nf_minhash_t *mh, const uint32_t *sig, uint64_t *keys);
/* One band's key (the same as nf_minhash_band_keys' keys[band]) for a given rows count. */
uint64_t nf_minhash_band_key(const uint32_t *sig, unsigned band, unsigned rows);

/* True if sig (n values) is the signature of a document without shingles. */
bool nf_minhash_is_empty(const uint32_t *sig, unsigned n);

/* Fraction of the n slots where a and b agree; 0 if either is empty. */
double nf_minhash_similarity(const uint32_t *a, const uint32_t *b, unsigned n);

#endif
