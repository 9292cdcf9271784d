/* hash.h — the job's non-cryptographic hashing: one fast, well-mixed 64-bit hash of bytes and a
 * 64-bit finalizer, shared by routing keys, sketches (Count-Min), MinHash shingles and LSH band
 * keys, so that every module hashes the same way and none grows its own.
 *
 * nf_hash64 reads the input 8 bytes at a time and folds each word into the state with a 64x64->128
 * multiply (the wyhash/mum construction): a change of any input bit changes every output bit
 * with probability ~1/2. Different seeds give independent-looking functions, which is what the
 * sketches' rows and MinHash's permutations rely on. Not for adversarial keys (no secret), not
 * a checksum; the output is stable across versions and machines (little-endian reads), because
 * band keys and sketch positions are persisted.
 *
 * Pure functions, any thread, no allocation. */
#ifndef NF_HASH_H
#define NF_HASH_H

#include "algo/idset.h"

#include <stddef.h>
#include <stdint.h>

/* A bijective 64-bit finalizer (MurmurHash3's fmix64): spreads a weak integer key. */
static inline uint64_t nf_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* Multiply a by b into 128 bits and fold the halves together. */
static inline uint64_t nf_mum64(uint64_t a, uint64_t b)
{
    __uint128_t r = (__uint128_t)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/* 64-bit hash of n bytes at p under seed. */
uint64_t nf_hash64(const void *p, size_t n, uint64_t seed);

/* 64-bit hash of a NUL-terminated string. */
uint64_t nf_hash64_str(const char *s, uint64_t seed);

/* A 128-bit id of n bytes (state keys of ids that are not already digests: user ids, event
 * ids): {nf_hash64(p, n, seed_hi), nf_hash64(p, n, seed_lo)} exactly (keys are persisted), the
 * two lanes computed in one pass over the bytes so that their multiplies overlap. */
nf_id128_t nf_hash128(const void *p, size_t n, uint64_t seed_hi, uint64_t seed_lo);

#endif
