/* testb64.h — base64url without padding (RFC 7515 §2), the encoding of a JWT's parts: what the
 * token tests, the token fuzz target and bench_auth build tokens by hand with (src/serve/auth.c
 * only decodes). Test code only. */
#ifndef NF_TESTB64_H
#define NF_TESTB64_H

#include <stddef.h>

/* Encodes in[0..n) into out (4 * ceil(n / 3) + 1 bytes is always enough), NUL-terminated;
 * returns the length written before the NUL. */
size_t nf_test_b64url(const unsigned char *in, size_t n, char *out);

#endif
