/* fuzz_variants.c — libFuzzer target for the ranking variants' parser (src/engine/variants.c):
 * the input is ranking.variants as config.h keeps a list ('\n'-separated entries). Checked:
 * the result is 0 or -EINVAL; a refusal's message is NUL-terminated within a small buffer too and
 * starts "ranking.variants:"; an accepted list has 1..NF_VARIANTS_MAX variants with valid,
 * distinct names, at most one shadow (the only one without a share), served shares adding up to
 * 100, weights in [0, 1000], and every reader assigned a served variant, the same one twice. */
#include "engine/variants.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *msg)
{
    fprintf(stderr, "fuzz_variants: %s\n  message: %s\n", what, msg ? msg : "(none)");
    abort();
}

static void check_accepted(const nf_variants_t *v)
{
    unsigned total = 0, shadows = 0;
    if (v->n < 1 || v->n > NF_VARIANTS_MAX)
        fail("variant count out of range", NULL);
    for (unsigned i = 0; i < v->n; i++) {
        const nf_variant_t *x = &v->v[i];
        size_t n = strnlen(x->name, sizeof x->name);
        if (n == 0 || n > NF_VARIANT_NAME_MAX || nf_variants_find(v, x->name, n) != (int)i)
            fail("a name empty, too long or not unique", x->name);
        const double w[4] = {x->w.interest, x->w.follow, x->w.decay, x->w.trending};
        for (int k = 0; k < 4; k++)
            if (!(w[k] >= 0 && w[k] <= 1000))
                fail("a weight out of [0, 1000]", x->name);
        shadows += x->shadow;
        if (x->shadow && x->share)
            fail("a shadow with a share", x->name);
        total += x->share;
    }
    if (shadows > 1 || total != 100 || (v->shadow >= 0) != (shadows == 1))
        fail("shadows or shares wrong", NULL);
    static const char *const users[] = {"", "a", "demo-user-1", "zo\xc3\xab"};
    for (size_t u = 0; u < sizeof users / sizeof *users; u++) {
        unsigned a = nf_variants_assign(v, users[u], strlen(users[u]));
        if (a >= v->n || v->v[a].shadow || a != nf_variants_assign(v, users[u], strlen(users[u])))
            fail("a reader assigned no served variant, or another one twice", users[u]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0; /* ranking.variants is at most 2047 bytes */
    char *list = malloc(size + 1);
    char *err = malloc(256), *small = malloc(8);
    if (!list || !err || !small)
        abort();
    memcpy(list, data, size);
    list[size] = '\0'; /* a NUL inside ends the list, as a C string would */
    nf_variants_t v;
    int rc = nf_variants_parse(list, "default", &v, err, 256);
    if (rc == 0) {
        check_accepted(&v);
    } else if (rc != -EINVAL) {
        fail("result is neither 0 nor -EINVAL", NULL);
    } else {
        if (!memchr(err, '\0', 256) || strncmp(err, "ranking.variants:", 17) != 0)
            fail("a refusal's message does not name ranking.variants", err);
        if (nf_variants_parse(list, "default", &v, small, 8) != -EINVAL ||
            !memchr(small, '\0', 8) || strncmp(small, err, 7) != 0)
            fail("a smaller err is not a prefix of the message", err);
    }
    free(list);
    free(err);
    free(small);
    return 0;
}
