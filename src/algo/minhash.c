/* minhash.c — shingling, MinHash signatures and LSH band keys (minhash.h). */
#include "algo/minhash.h"

#include "algo/hash.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nf_minhash {
    nf_minhash_opts_t o;
    /* h_i(x) = fin(lo(x) * mul[i] + (hi(x) ^ add[i])); mul[i] odd so the first step is a
     * bijection of lo for a fixed hi. */
    uint32_t mul[NF_MINHASH_MAX_HASHES];
    uint32_t add[NF_MINHASH_MAX_HASHES];
};

void nf_minhash_opts_default(nf_minhash_opts_t *o)
{
    o->shingle_words = 3;
    o->hashes = 128;
    o->bands = 16;
    o->rows = 8;
    o->seed = 0x6e66206d696e6861ull; /* "nf minha" */
}

nf_minhash_t *nf_minhash_new(const nf_minhash_opts_t *o, char *err, size_t errlen)
{
    if (o->shingle_words == 0 || o->hashes == 0 || o->hashes % 16 != 0 ||
        o->hashes > NF_MINHASH_MAX_HASHES || o->bands == 0 || o->rows == 0 ||
        o->bands * o->rows != o->hashes) {
        snprintf(err, errlen,
                 "minhash: need shingle_words >= 1, hashes a multiple of 16 in 16..%u and "
                 "bands x rows == hashes (got %u words, %u hashes, %u x %u)",
                 NF_MINHASH_MAX_HASHES, o->shingle_words, o->hashes, o->bands, o->rows);
        return NULL;
    }
    nf_minhash_t *mh = calloc(1, sizeof *mh);
    if (!mh) {
        snprintf(err, errlen, "minhash: out of memory");
        return NULL;
    }
    mh->o = *o;
    for (unsigned i = 0; i < o->hashes; i++) {
        uint64_t r = nf_mix64(o->seed + 0x9e3779b97f4a7c15ull * (i + 1));
        mh->mul[i] = (uint32_t)r | 1u;
        mh->add[i] = (uint32_t)(r >> 32);
    }
    return mh;
}

void nf_minhash_free(nf_minhash_t *mh)
{
    free(mh);
}

const nf_minhash_opts_t *nf_minhash_opts(const nf_minhash_t *mh)
{
    return &mh->o;
}

void nf_minhash_scratch_free(nf_minhash_scratch_t *s)
{
    free(s->text);
    free(s->word_off);
    free(s->shingles);
    memset(s, 0, sizeof *s);
}

static int reserve(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 256;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = n;
    return 0;
}

static inline bool is_word_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

/* Appends the words of p[0..n) to s->text; *nw counts words. Capacity is reserved by the caller
 * (every byte produces at most one byte, every word at most one separator). */
static void normalize(nf_minhash_scratch_t *s, size_t *tl, size_t *nw, const char *p, size_t n)
{
    const unsigned char *u = (const unsigned char *)p;
    size_t i = 0;
    while (i < n) {
        while (i < n && !is_word_byte(u[i]))
            i++;
        if (i == n)
            break;
        if (*nw > 0)
            s->text[(*tl)++] = ' ';
        s->word_off[(*nw)++] = (uint32_t)*tl;
        while (i < n && is_word_byte(u[i])) {
            unsigned char c = u[i++];
            if (c >= 'A' && c <= 'Z')
                c = (unsigned char)(c + ('a' - 'A'));
            s->text[(*tl)++] = (char)c;
        }
    }
}

long nf_minhash_shingles(const nf_minhash_t *mh, nf_minhash_scratch_t *s, const char *title,
                         size_t tlen, const char *body, size_t blen)
{
    size_t total = tlen + blen + 2;
    /* Words are at most (total / 2 + 1): each but the last needs a separator after it. */
    if (total > UINT32_MAX || reserve((void **)&s->text, &s->text_cap, total, 1) != 0 ||
        reserve((void **)&s->word_off, &s->word_cap, total / 2 + 2, sizeof *s->word_off) != 0)
        return -ENOMEM;
    size_t tl = 0, nw = 0;
    if (title)
        normalize(s, &tl, &nw, title, tlen);
    if (body)
        normalize(s, &tl, &nw, body, blen);
    assert(tl <= total);
    size_t k = mh->o.shingle_words;
    size_t ns = nw == 0 ? 0 : nw < k ? 1 : nw - k + 1;
    if (reserve((void **)&s->shingles, &s->shingle_cap, ns ? ns : 1, sizeof *s->shingles) != 0)
        return -ENOMEM;
    size_t span = nw < k ? nw : k;
    for (size_t i = 0; i < ns; i++) {
        size_t last = i + span - 1;
        size_t end = last + 1 < nw ? s->word_off[last + 1] - 1 : tl;
        s->shingles[i] =
            nf_hash64(s->text + s->word_off[i], end - s->word_off[i], NF_MINHASH_SHINGLE_SEED);
    }
    s->nshingles = ns;
    return (long)ns;
}

/* The hot loop: n (a multiple of 16) functions for one shingle. Plain 32-bit lanes so that it
 * vectorizes; on x86-64 an AVX2 clone is chosen at load time when the CPU has it. Not under
 * the sanitizers: the clone's resolver runs before their runtime is set up (TSan: a crash at
 * load). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&                             \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define NF_MH_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define NF_MH_CLONES
#endif

/* 16 functions for one shingle: a fixed trip count and no aliasing, so it becomes a few vector
 * instructions per step even at -O2. */
static inline void sign_block(const uint32_t *restrict mul, const uint32_t *restrict add,
                              uint32_t lo, uint32_t hi, uint32_t *restrict sig)
{
    for (unsigned i = 0; i < 16; i++) {
        uint32_t u = lo * mul[i] + (hi ^ add[i]);
        u ^= u >> 16;
        u *= 0x7feb352du;
        u ^= u >> 15;
        u *= 0x846ca68bu;
        u ^= u >> 16;
        sig[i] = u < sig[i] ? u : sig[i];
    }
}

NF_MH_CLONES
static void sign_kernel(const uint32_t *restrict mul, const uint32_t *restrict add,
                        const uint64_t *restrict sh, size_t ns, unsigned n, uint32_t *restrict sig)
{
    for (unsigned i = 0; i < n; i++)
        sig[i] = NF_MINHASH_EMPTY;
    for (size_t s = 0; s < ns; s++) {
        uint32_t lo = (uint32_t)sh[s], hi = (uint32_t)(sh[s] >> 32);
        for (unsigned j = 0; j < n; j += 16)
            sign_block(mul + j, add + j, lo, hi, sig + j);
    }
}

void nf_minhash_sign(const nf_minhash_t *mh, const uint64_t *shingles, size_t n, uint32_t *sig)
{
    sign_kernel(mh->mul, mh->add, shingles, n, mh->o.hashes, sig);
    /* A real document could, with probability ~2^-32 per slot, produce the empty marker; it
     * stays a valid (if slightly weaker) signature unless every slot is the marker. */
    if (n > 0 && nf_minhash_is_empty(sig, mh->o.hashes))
        sig[0] = NF_MINHASH_EMPTY - 1;
}

int nf_minhash_sign_text(const nf_minhash_t *mh, nf_minhash_scratch_t *s, const char *title,
                         size_t tlen, const char *body, size_t blen, uint32_t *sig)
{
    long ns = nf_minhash_shingles(mh, s, title, tlen, body, blen);
    if (ns < 0)
        return (int)ns;
    nf_minhash_sign(mh, s->shingles, (size_t)ns, sig);
    return 0;
}

uint64_t nf_minhash_band_key(const uint32_t *sig, unsigned band, unsigned rows)
{
    unsigned char buf[4 * 64];
    unsigned char *b = buf;
    const uint32_t *p = sig + (size_t)band * rows;
    uint64_t h = band;
    /* Little-endian bytes, so keys are the same on every machine (they are persisted). */
    for (unsigned r = 0; r < rows; r++) {
        if (r > 0 && r % 64 == 0) {
            h = nf_hash64(buf, sizeof buf, h);
            b = buf;
        }
        b[0] = (unsigned char)p[r];
        b[1] = (unsigned char)(p[r] >> 8);
        b[2] = (unsigned char)(p[r] >> 16);
        b[3] = (unsigned char)(p[r] >> 24);
        b += 4;
    }
    return nf_hash64(buf, (size_t)(b - buf), h);
}

void nf_minhash_band_keys(const nf_minhash_t *mh, const uint32_t *sig, uint64_t *keys)
{
    for (unsigned j = 0; j < mh->o.bands; j++)
        keys[j] = nf_minhash_band_key(sig, j, mh->o.rows);
}

bool nf_minhash_is_empty(const uint32_t *sig, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (sig[i] != NF_MINHASH_EMPTY)
            return false;
    return true;
}

double nf_minhash_similarity(const uint32_t *a, const uint32_t *b, unsigned n)
{
    if (n == 0 || nf_minhash_is_empty(a, n) || nf_minhash_is_empty(b, n))
        return 0.0;
    unsigned eq = 0;
    for (unsigned i = 0; i < n; i++)
        eq += a[i] == b[i];
    return (double)eq / n;
}
