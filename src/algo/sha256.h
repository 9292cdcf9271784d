/* sha256.h — SHA-256 (FIPS 180-4), incremental, no allocation. Used for content_hash and the
 * ids derived from normalized URLs, where the same input must give the same id on every
 * machine and version. */
#ifndef NF_SHA256_H
#define NF_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct nf_sha256 {
    uint32_t h[8];
    uint64_t bytes;
    uint8_t buf[64];
    size_t nbuf;
} nf_sha256_t;

void nf_sha256_init(nf_sha256_t *c);
void nf_sha256_update(nf_sha256_t *c, const void *data, size_t len);
void nf_sha256_final(nf_sha256_t *c, uint8_t out[32]);
void nf_sha256(const void *data, size_t len, uint8_t out[32]);
/* Which compression function runs: decided once per process from the CPU (SHA-NI when the CPU
 * has it, else portable C); both give the same digests. nf_sha256_use() overrides the choice
 * for the whole process, for tests and benchmarks: 0, -ENOTSUP (SHANI on a CPU without it),
 * -EINVAL. Any thread, any time: both paths keep the same state, so a switch in the middle of a
 * hash changes nothing. */
typedef enum { NF_SHA256_AUTO = 0, NF_SHA256_PORTABLE = 1, NF_SHA256_SHANI = 2 } nf_sha256_impl_t;
int nf_sha256_use(nf_sha256_impl_t which);
nf_sha256_impl_t nf_sha256_impl(void); /* PORTABLE or SHANI */

/* Lower-case hex of n bytes into out (2n+1 bytes, NUL-terminated). */
void nf_hex(const uint8_t *in, size_t n, char *out);

#endif
