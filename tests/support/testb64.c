/* testb64.c — see testb64.h. */
#include "testb64.h"

#include <stdint.h>

size_t nf_test_b64url(const unsigned char *in, size_t n, char *out)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = tab[v >> 18], out[o++] = tab[(v >> 12) & 63];
        out[o++] = tab[(v >> 6) & 63], out[o++] = tab[v & 63];
    }
    if (n - i == 1) {
        out[o++] = tab[in[i] >> 2], out[o++] = tab[(in[i] & 3) << 4];
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)in[i] << 8 | in[i + 1];
        out[o++] = tab[v >> 10], out[o++] = tab[(v >> 4) & 63], out[o++] = tab[(v & 15) << 2];
    }
    out[o] = '\0';
    return o;
}
