/* variants.c — see variants.h. */
#include "engine/variants.h"
#include "algo/hash.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

static bool name_ok(const char *s, size_t n)
{
    if (n == 0 || n > NF_VARIANT_NAME_MAX || s[0] == '-' || s[0] == '_')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
              s[i] == '-'))
            return false;
    return !(n == 4 && (memcmp(s, "none", 4) == 0)) && !(n == 5 && memcmp(s, "other", 5) == 0);
}

/* A weight: a plain decimal number in [0, 1000] (digits, at most one point). */
static bool weight_ok(const char *s, double *out)
{
    size_t digits = 0, points = 0;
    for (const char *p = s; *p; p++) {
        if (*p == '.')
            points++;
        else if (*p >= '0' && *p <= '9')
            digits++;
        else
            return false;
    }
    if (!digits || points > 1)
        return false;
    *out = strtod(s, NULL);
    return isfinite(*out) && *out <= 1000.0;
}

/* One option of an entry ("share=50", "decay=1.5", "shadow") into v; *has_share set by share=. */
static int option(nf_variant_t *v, char *tok, bool *has_share, char *why, size_t whylen)
{
    if (strcmp(tok, "shadow") == 0) {
        v->shadow = true;
        return 0;
    }
    char *eq = strchr(tok, '=');
    if (!eq)
        return fail(why, whylen, "\"%s\" is not NAME=VALUE or shadow", tok);
    *eq = '\0';
    const char *val = eq + 1;
    if (strcmp(tok, "share") == 0) {
        char *end;
        unsigned long s = strtoul(val, &end, 10);
        if (!*val || *end || val[0] < '0' || val[0] > '9' || s > 100)
            return fail(why, whylen, "share: \"%s\" is not a whole percent (0..100)", val);
        v->share = (unsigned)s;
        *has_share = true;
        return 0;
    }
    double *w = strcmp(tok, "interest") == 0   ? &v->w.interest
                : strcmp(tok, "follow") == 0   ? &v->w.follow
                : strcmp(tok, "decay") == 0    ? &v->w.decay
                : strcmp(tok, "trending") == 0 ? &v->w.trending
                                               : NULL;
    if (!w)
        return fail(why, whylen,
                    "unknown option \"%s\" (options: share, interest, follow, decay, trending, "
                    "shadow)",
                    tok);
    if (!weight_ok(val, w))
        return fail(why, whylen, "%s: \"%s\" is not a decimal number in [0, 1000]", tok, val);
    return 0;
}

/* One entry (NUL-terminated, modified) into v. 0 or -EINVAL with the reason in why. */
static int entry(char *s, nf_variant_t *v, char *why, size_t whylen)
{
    *v = (nf_variant_t){.w = NF_RANK_SEED};
    bool has_share = false;
    char *save = NULL, *tok = strtok_r(s, " \t", &save);
    if (!tok)
        return fail(why, whylen, "empty; expected NAME [share=PERCENT] [WEIGHT=X]... [shadow]");
    if (!name_ok(tok, strlen(tok)))
        return fail(why, whylen,
                    "name \"%s\": 1..32 of a-z, 0-9, '_' and '-', starting with a letter or "
                    "digit, not none or other",
                    tok);
    memcpy(v->name, tok, strlen(tok) + 1);
    while ((tok = strtok_r(NULL, " \t", &save)))
        if (option(v, tok, &has_share, why, whylen) != 0)
            return -EINVAL;
    if (v->shadow && has_share)
        return fail(why, whylen, "a shadow variant is never served: it takes no share");
    if (!v->shadow && !has_share)
        return fail(why, whylen, "a served variant needs share=PERCENT");
    return 0;
}

static int check_all(const nf_variants_t *out, char *err, size_t errlen)
{
    unsigned total = 0, served = 0;
    for (unsigned i = 0; i < out->n; i++) {
        total += out->v[i].share;
        served += !out->v[i].shadow;
        for (unsigned j = 0; j < i; j++)
            if (strcmp(out->v[i].name, out->v[j].name) == 0)
                return fail(err, errlen, "ranking.variants: \"%s\" is named twice", out->v[i].name);
    }
    if (!served)
        return fail(err, errlen, "ranking.variants: no served variant (all are shadow)");
    if (total != 100)
        return fail(err, errlen,
                    "ranking.variants: the served variants' shares add up to %u, not 100", total);
    return 0;
}

int nf_variants_parse(const char *list, const char *experiment, nf_variants_t *out, char *err,
                      size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->shadow = -1;
    size_t elen = strlen(experiment);
    if (elen == 0 || elen >= sizeof out->experiment)
        return fail(err, errlen, "ranking.experiment: must be 1..63 bytes");
    memcpy(out->experiment, experiment, elen + 1);
    if (!*list) {
        out->v[0] = (nf_variant_t){.name = "seed", .w = NF_RANK_SEED, .share = 100};
        out->n = 1;
        return 0;
    }
    unsigned k = 0;
    for (const char *p = list; p; k++) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        char buf[256], why[200];
        if (n >= sizeof buf)
            return fail(err, errlen, "ranking.variants: entry %u is longer than 255 bytes", k + 1);
        memcpy(buf, p, n);
        buf[n] = '\0';
        if (k == NF_VARIANTS_MAX)
            return fail(err, errlen, "ranking.variants: more than %d variants", NF_VARIANTS_MAX);
        char shown[256];
        memcpy(shown, buf, n + 1);
        if (entry(buf, &out->v[k], why, sizeof why) != 0)
            return fail(err, errlen, "ranking.variants: entry %u (\"%s\"): %s", k + 1, shown, why);
        if (out->v[k].shadow && out->shadow >= 0)
            return fail(err, errlen,
                        "ranking.variants: entry %u (\"%s\"): a second shadow variant "
                        "(one at most)",
                        k + 1, shown);
        if (out->v[k].shadow)
            out->shadow = (int)k;
        out->n = k + 1;
        p = nl ? nl + 1 : NULL;
    }
    return check_all(out, err, errlen);
}

unsigned nf_variants_bucket(const nf_variants_t *v, const char *user, size_t n)
{
    /* experiment NUL user, hashed in one pass from a stack buffer (ids are <= 128 bytes) */
    unsigned char buf[64 + 256];
    size_t el = strlen(v->experiment);
    if (n > sizeof buf - el - 1)
        n = sizeof buf - el - 1; /* not reached: user ids are at most 128 bytes */
    memcpy(buf, v->experiment, el);
    buf[el] = 0;
    memcpy(buf + el + 1, user, n);
    return (unsigned)(nf_hash64(buf, el + 1 + n, NF_VARIANTS_SEED) % NF_VARIANTS_BUCKETS);
}

unsigned nf_variants_assign(const nf_variants_t *v, const char *user, size_t n)
{
    unsigned b = nf_variants_bucket(v, user, n), cum = 0, last = 0;
    for (unsigned i = 0; i < v->n; i++) {
        if (v->v[i].shadow)
            continue;
        last = i;
        cum += v->v[i].share;
        if (b < cum)
            return i;
    }
    return last; /* not reached: the shares add up to 100 */
}

int nf_variants_find(const nf_variants_t *v, const char *name, size_t n)
{
    for (unsigned i = 0; i < v->n; i++)
        if (strlen(v->v[i].name) == n && memcmp(v->v[i].name, name, n) == 0)
            return (int)i;
    return -1;
}

const char *nf_variants_label(const nf_variants_t *v, unsigned i)
{
    return i < v->n ? v->v[i].name : i == v->n ? "none" : "other";
}
