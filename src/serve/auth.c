/* auth.c — see auth.h. */
#include "serve/auth.h"

#include "algo/sha256.h"
#include "feed/text.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <jwt.h>
#include <math.h>
#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define HEADER_MEMBERS_MAX  16  /* a JOSE header has a handful */
#define PAYLOAD_MEMBERS_MAX 128 /* claims of one token (identity providers send ~30) */
#define JSON_DEPTH_MAX      32  /* nesting of a header or payload: bounds cJSON's recursion */
#define NUMERIC_DATE_MAX    253402300799.0 /* 9999-12-31T23:59:59Z */
#define QUOTE_MAX           48             /* bytes of token text quoted in a message */

/* A public key a token may name: public_key_file's, or one of the JWKS. */
typedef struct pubkey {
    char kid[NF_AUTH_KID_MAX + 1]; /* "" for public_key_file's */
    jwt_alg_t alg;                 /* JWT_ALG_RS256 or JWT_ALG_ES256 */
    EVP_PKEY *pk;                  /* parsed once: what the pre-check verifies with */
    unsigned char *pem;            /* SubjectPublicKeyInfo PEM: what libjwt 1.10 reads */
    int pem_len;
    size_t sig_len; /* a signature's bytes: the RSA modulus, 64 for P-256 (r || s) */
    int bits;
} pubkey_t;

/* Verified tokens: a valid token is sent with every request of its reader's session, and a
 * verification costs ~15 us (HS256) to ~1 ms (RS256, ES256: libjwt parses the key each time).
 * A token that verified is remembered by the SHA-256 of its text with its subject and the
 * times it is valid within (the claims' exp, nbf and iat with the leeway): the same text
 * within them is the same answer, by a hash and a compare. Only successes are kept (a refusal
 * is checked in full again, with its precise message). A direct-mapped table: a collision
 * evicts, which costs a verification, never a wrong answer (the whole hash is compared). */
#define CACHE_SLOTS 4096
typedef struct cached {
    uint8_t h[32];
    bool used;
    double from, until; /* valid for now_s in [from, until) */
    char sub[NF_AUTH_SUB_MAX + 1];
} cached_t;

struct nf_auth {
    unsigned char *secret; /* HS256; NULL: none */
    size_t secret_len;
    pubkey_t *pem; /* public_key_file; NULL: none */
    pubkey_t *jwks;
    size_t njwks, jwks_skipped;
    char *issuer, *audience; /* NULL: not checked */
    uint32_t skew, max_bytes;
    pthread_mutex_t cache_mu; /* the tokens verified lately (see "verified tokens" below) */
    struct cached *cache;
};

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Writes the message and returns rc: every refusal in one statement. */
static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

static bool is_set(const char *s)
{
    return s && *s;
}

/* s[0..n) for a message: printable ASCII kept, any other byte '?', cut to QUOTE_MAX with "...".
 * Token text reaches a 401 body and logs: no control character or markup surprise there. */
static const char *quoted(const char *s, size_t n, char *out, size_t outlen)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 4 < outlen; i++) {
        if (i == QUOTE_MAX) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        unsigned char c = (unsigned char)s[i];
        out[o++] = c >= 0x20 && c < 0x7f && c != '"' && c != '\\' ? (char)c : '?';
    }
    out[o] = '\0';
    return out;
}

/* ---- base64url (RFC 7515 §2) ---- */

static int b64url_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '-')
        return 62;
    if (c == '_')
        return 63;
    return -1;
}

/* Decodes s[0..n) into out (room for n * 3 / 4 + 1 bytes, NUL-terminated): the length, or -1
 * unless it is canonical unpadded base64url. Canonical (the unused low bits zero) so that a
 * token has one spelling: libjwt's own decoder (libb64) skips bytes it does not know. */
static long b64url_decode(const char *s, size_t n, unsigned char *out)
{
    if (n % 4 == 1)
        return -1;
    uint32_t acc = 0;
    unsigned bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64url_value((unsigned char)s[i]);
        if (v < 0)
            return -1;
        acc = ((acc << 6) | (uint32_t)v) & 0xffffff;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
        }
    }
    if (acc & ((1u << bits) - 1))
        return -1;
    out[o] = '\0';
    return (long)o;
}

/* ---- loading keys ---- */

/* The bytes of path (at most NF_AUTH_FILE_MAX), NUL-terminated, into *out (malloc'd). */
static int read_file(const char *what, const char *path, char **out, size_t *len, char *err,
                     size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return fail(err, errlen, -1, "%s %s: %s", what, path, strerror(errno));
    char *buf = malloc(NF_AUTH_FILE_MAX + 1);
    size_t n = buf ? fread(buf, 1, NF_AUTH_FILE_MAX + 1, f) : 0;
    bool bad = !buf || ferror(f);
    fclose(f);
    if (bad || n > NF_AUTH_FILE_MAX) {
        free(buf);
        return fail(err, errlen, -1, "%s %s: %s", what, path,
                    !buf  ? "out of memory"
                    : bad ? "read error"
                          : "larger than 1 MiB");
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

static int load_secret(nf_auth_t *a, const char *path, char *err, size_t errlen)
{
    char *buf;
    size_t n;
    if (read_file("hs256_secret_file", path, &buf, &n, err, errlen))
        return -1;
    /* `echo secret > file` and editors add a newline that is no part of the key. */
    if (n && buf[n - 1] == '\n')
        n--;
    if (n && buf[n - 1] == '\r')
        n--;
    if (n < NF_AUTH_SECRET_MIN) {
        OPENSSL_cleanse(buf, n);
        free(buf);
        return fail(err, errlen, -1,
                    "hs256_secret_file %s: the secret is %zu bytes; HS256 needs at least %d "
                    "(e.g. openssl rand -hex 32 > FILE)",
                    path, n, NF_AUTH_SECRET_MIN);
    }
    a->secret = (unsigned char *)buf;
    a->secret_len = n;
    return 0;
}

/* Fills k (alg, size, PEM) from a public key: RSA of NF_AUTH_RSA_BITS_MIN bits or more, or EC
 * P-256, that passes OpenSSL's public key check (odd modulus, a point on the curve). */
static int pubkey_from(EVP_PKEY *pk, pubkey_t *k, const char *where, char *err, size_t errlen)
{
    char group[64] = "";
    if (EVP_PKEY_is_a(pk, "RSA")) {
        k->alg = JWT_ALG_RS256;
        k->bits = EVP_PKEY_get_bits(pk);
        k->sig_len = (size_t)EVP_PKEY_get_size(pk);
        if (k->bits < NF_AUTH_RSA_BITS_MIN)
            return fail(err, errlen, -1, "%s: an RSA key of %d bits; at least %d are taken", where,
                        k->bits, NF_AUTH_RSA_BITS_MIN);
    } else if (EVP_PKEY_is_a(pk, "EC") &&
               EVP_PKEY_get_group_name(pk, group, sizeof group, NULL) == 1 &&
               strcmp(group, "prime256v1") == 0) {
        k->alg = JWT_ALG_ES256;
        k->bits = 256;
        k->sig_len = 64;
    } else {
        return fail(err, errlen, -1, "%s: the key is %s%s%s; RS256 needs RSA, ES256 EC P-256",
                    where, EVP_PKEY_get0_type_name(pk) ? EVP_PKEY_get0_type_name(pk) : "?",
                    group[0] ? " " : "", group);
    }
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_pkey(NULL, pk, NULL);
    int ok = c && EVP_PKEY_public_check(c) == 1;
    EVP_PKEY_CTX_free(c);
    if (!ok)
        return fail(err, errlen, -1, "%s: the key fails OpenSSL's public key check", where);
    BIO *b = BIO_new(BIO_s_mem());
    char *text = NULL;
    long n = b && PEM_write_bio_PUBKEY(b, pk) == 1 ? BIO_get_mem_data(b, &text) : 0;
    if (n > 0 && (k->pem = malloc((size_t)n)) != NULL) {
        memcpy(k->pem, text, (size_t)n);
        k->pem_len = (int)n;
    }
    BIO_free(b);
    if (!k->pem || EVP_PKEY_up_ref(pk) != 1)
        return fail(err, errlen, -1, "%s: cannot write the key as PEM", where);
    k->pk = pk;
    return 0;
}

/* Why a PEM file holds no public key, for the operator: the usual wrong files. */
static const char *pem_hint(const char *text)
{
    if (strstr(text, "PRIVATE KEY-----"))
        return "it holds a private key; give the public key (openssl pkey -in KEY -pubout)";
    if (strstr(text, "BEGIN RSA PUBLIC KEY"))
        return "a PKCS#1 RSA key; convert it (openssl rsa -RSAPublicKey_in -in FILE -pubout)";
    if (strstr(text, "BEGIN CERTIFICATE"))
        return "a certificate; give its key (openssl x509 -in FILE -pubkey -noout)";
    return "no PEM public key (-----BEGIN PUBLIC KEY-----) in it";
}

static int load_pem(nf_auth_t *a, const char *path, char *err, size_t errlen)
{
    char *buf, where[512];
    size_t n;
    if (read_file("public_key_file", path, &buf, &n, err, errlen))
        return -1;
    snprintf(where, sizeof where, "public_key_file %s", path);
    BIO *b = BIO_new_mem_buf(buf, (int)n);
    EVP_PKEY *pk = b ? PEM_read_bio_PUBKEY(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    ERR_clear_error();
    int rc = -1;
    if (!pk) {
        fail(err, errlen, -1, "%s: %s", where, pem_hint(buf));
    } else if ((a->pem = calloc(1, sizeof *a->pem)) != NULL) {
        rc = pubkey_from(pk, a->pem, where, err, errlen);
    } else {
        fail(err, errlen, -1, "%s: out of memory", where);
    }
    EVP_PKEY_free(pk);
    free(buf);
    return rc;
}

/* The decoded bytes of a JWK member (base64url), malloc'd; NULL with a message. */
static unsigned char *jwk_bytes(const cJSON *jwk, const char *name, size_t *len, const char *where,
                                char *err, size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(jwk, name);
    if (!cJSON_IsString(v)) {
        fail(err, errlen, -1, "%s: no \"%s\"", where, name);
        return NULL;
    }
    size_t n = strlen(v->valuestring);
    unsigned char *out = malloc(n * 3 / 4 + 1);
    long got = out && n <= 8192 ? b64url_decode(v->valuestring, n, out) : -1;
    if (got <= 0) {
        free(out);
        fail(err, errlen, -1, "%s: \"%s\" is not base64url of at most 6 KiB", where, name);
        return NULL;
    }
    *len = (size_t)got;
    return out;
}

/* An OpenSSL key from parameters (EVP_PKEY_fromdata): type "RSA" or "EC". */
static EVP_PKEY *pkey_fromdata(const char *type, OSSL_PARAM_BLD *bld)
{
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
    EVP_PKEY_CTX *ctx = params ? EVP_PKEY_CTX_new_from_name(NULL, type, NULL) : NULL;
    EVP_PKEY *pk = NULL;
    if (ctx && EVP_PKEY_fromdata_init(ctx) == 1 &&
        EVP_PKEY_fromdata(ctx, &pk, EVP_PKEY_PUBLIC_KEY, params) != 1)
        pk = NULL;
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    return pk;
}

static EVP_PKEY *jwk_rsa(const cJSON *jwk, const char *where, char *err, size_t errlen)
{
    size_t nl = 0, el = 0;
    unsigned char *n = jwk_bytes(jwk, "n", &nl, where, err, errlen);
    unsigned char *e = n ? jwk_bytes(jwk, "e", &el, where, err, errlen) : NULL;
    BIGNUM *bn = e ? BN_bin2bn(n, (int)nl, NULL) : NULL,
           *be = e ? BN_bin2bn(e, (int)el, NULL) : NULL;
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    EVP_PKEY *pk = NULL;
    if (bn && be && bld && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn) &&
        OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, be))
        pk = pkey_fromdata("RSA", bld);
    if (!pk && e)
        fail(err, errlen, -1, "%s: OpenSSL takes no RSA key from this n and e", where);
    OSSL_PARAM_BLD_free(bld);
    BN_free(bn);
    BN_free(be);
    free(n);
    free(e);
    return pk;
}

static EVP_PKEY *jwk_ec(const cJSON *jwk, const char *where, char *err, size_t errlen)
{
    size_t xl = 0, yl = 0;
    unsigned char *x = jwk_bytes(jwk, "x", &xl, where, err, errlen);
    unsigned char *y = x ? jwk_bytes(jwk, "y", &yl, where, err, errlen) : NULL;
    EVP_PKEY *pk = NULL;
    if (y && (xl != 32 || yl != 32)) {
        fail(err, errlen, -1, "%s: x and y of P-256 are 32 bytes each, not %zu and %zu", where, xl,
             yl);
    } else if (y) {
        unsigned char point[65] = {0x04}; /* SEC 1 uncompressed: 04 || x || y */
        memcpy(point + 1, x, 32);
        memcpy(point + 33, y, 32);
        OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
        if (bld &&
            OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) &&
            OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof point))
            pk = pkey_fromdata("EC", bld);
        OSSL_PARAM_BLD_free(bld);
        if (!pk)
            fail(err, errlen, -1, "%s: x, y is not a point of P-256", where);
    }
    free(x);
    free(y);
    return pk;
}

static const char *jwk_str(const cJSON *jwk, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(jwk, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Whether a JWK is for us: a signature key (use), RSA for RS256 or EC P-256 for ES256 (alg).
 * Others (encryption keys, oct secrets, other curves and algorithms) are skipped: a JWKS
 * published for many clients holds them. */
static bool jwk_usable(const cJSON *jwk)
{
    const char *kty = jwk_str(jwk, "kty"), *use = jwk_str(jwk, "use"), *alg = jwk_str(jwk, "alg");
    const char *crv = jwk_str(jwk, "crv");
    if (!kty || (use && strcmp(use, "sig") != 0))
        return false;
    if (strcmp(kty, "RSA") == 0)
        return !alg || strcmp(alg, "RS256") == 0;
    if (strcmp(kty, "EC") == 0)
        return crv && strcmp(crv, "P-256") == 0 && (!alg || strcmp(alg, "ES256") == 0);
    return false;
}

/* keys[i] into k: 1 loaded, 0 skipped, -1 refused (with a message). */
static int load_jwk(const nf_auth_t *a, const cJSON *jwk, pubkey_t *k, const char *path, int i,
                    char *err, size_t errlen)
{
    char where[640];
    snprintf(where, sizeof where, "jwks_file %s keys[%d]", path, i);
    if (!cJSON_IsObject(jwk))
        return fail(err, errlen, -1, "%s: not a JSON object", where);
    if (!jwk_usable(jwk))
        return 0;
    const char *kid = jwk_str(jwk, "kid");
    if (!kid || !*kid || strlen(kid) > NF_AUTH_KID_MAX)
        return fail(err, errlen, -1,
                    "%s: no kid of 1..%d bytes; keys are chosen by the token's kid", where,
                    NF_AUTH_KID_MAX);
    for (size_t j = 0; j < a->njwks; j++)
        if (strcmp(a->jwks[j].kid, kid) == 0)
            return fail(err, errlen, -1, "%s: kid \"%s\" again (a token's kid names one key)",
                        where, kid);
    snprintf(where, sizeof where, "jwks_file %s keys[%d] (kid \"%s\")", path, i, kid);
    bool rsa = strcmp(jwk_str(jwk, "kty"), "RSA") == 0;
    EVP_PKEY *pk = rsa ? jwk_rsa(jwk, where, err, errlen) : jwk_ec(jwk, where, err, errlen);
    ERR_clear_error();
    if (!pk)
        return -1;
    int rc = pubkey_from(pk, k, where, err, errlen);
    EVP_PKEY_free(pk);
    if (rc)
        return -1;
    memcpy(k->kid, kid, strlen(kid) + 1);
    return 1;
}

static int load_jwks(nf_auth_t *a, const char *path, char *err, size_t errlen)
{
    char *buf;
    size_t n;
    if (read_file("jwks_file", path, &buf, &n, err, errlen))
        return -1;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(buf, n + 1, &end, true);
    const cJSON *keys = cJSON_GetObjectItemCaseSensitive(root, "keys");
    int rc = 0, nkeys = cJSON_GetArraySize(keys);
    if (!root) {
        rc = fail(err, errlen, -1, "jwks_file %s: not JSON (at byte %td)", path,
                  end ? end - buf : (ptrdiff_t)0);
    } else if (!cJSON_IsArray(keys)) {
        rc = fail(err, errlen, -1, "jwks_file %s: no \"keys\" array", path);
    } else if (nkeys > 0 && !(a->jwks = calloc((size_t)nkeys, sizeof *a->jwks))) {
        rc = fail(err, errlen, -1, "jwks_file %s: out of memory", path);
    }
    int i = 0;
    const cJSON *jwk;
    cJSON_ArrayForEach(jwk, keys)
    {
        if (rc)
            break;
        int got = load_jwk(a, jwk, &a->jwks[a->njwks], path, i++, err, errlen);
        if (got < 0)
            rc = -1;
        else if (got == 0)
            a->jwks_skipped++;
        else
            a->njwks++;
    }
    if (rc == 0 && a->njwks == 0)
        rc = fail(err, errlen, -1,
                  "jwks_file %s: no RS256 or ES256 signature key among its %d (RSA, or EC P-256, "
                  "with use \"sig\" or none)",
                  path, nkeys);
    cJSON_Delete(root);
    free(buf);
    return rc;
}

nf_auth_t *nf_auth_new(const nf_auth_opts_t *o, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!is_set(o->hs256_secret_file) && !is_set(o->public_key_file) && !is_set(o->jwks_file)) {
        fail(err, errlen, -1, "auth: no key: set hs256_secret_file, public_key_file or jwks_file");
        return NULL;
    }
    if (o->max_skew_s > NF_AUTH_SKEW_MAX || o->max_token_bytes > NF_AUTH_TOKEN_MAX) {
        fail(err, errlen, -1, "auth: max_skew_s %u (at most %d), max_token_bytes %u (at most %d)",
             o->max_skew_s, NF_AUTH_SKEW_MAX, o->max_token_bytes, NF_AUTH_TOKEN_MAX);
        return NULL;
    }
    nf_auth_t *a = calloc(1, sizeof *a);
    if (!a) {
        fail(err, errlen, -1, "auth: out of memory");
        return NULL;
    }
    pthread_mutex_init(&a->cache_mu, NULL);
    a->skew = o->max_skew_s ? o->max_skew_s : NF_AUTH_SKEW_DEFAULT;
    a->max_bytes = o->max_token_bytes ? o->max_token_bytes : NF_AUTH_TOKEN_DEFAULT;
    a->issuer = is_set(o->issuer) ? strdup(o->issuer) : NULL;
    a->audience = is_set(o->audience) ? strdup(o->audience) : NULL;
    a->cache = calloc(CACHE_SLOTS, sizeof *a->cache);
    int rc = (is_set(o->issuer) && !a->issuer) || (is_set(o->audience) && !a->audience) || !a->cache
                 ? fail(err, errlen, -1, "auth: out of memory")
                 : 0;
    if (!rc && is_set(o->hs256_secret_file))
        rc = load_secret(a, o->hs256_secret_file, err, errlen);
    if (!rc && is_set(o->public_key_file))
        rc = load_pem(a, o->public_key_file, err, errlen);
    if (!rc && is_set(o->jwks_file))
        rc = load_jwks(a, o->jwks_file, err, errlen);
    if (rc) {
        nf_auth_free(a);
        return NULL;
    }
    /* jansson seeds its hash function at its first object (with atomics); let that first object
     * be made here, on one thread, not by the first requests at once. */
    jwt_t *warm = NULL;
    if (jwt_new(&warm) == 0)
        jwt_free(warm);
    return a;
}

static void pubkey_clear(pubkey_t *k)
{
    EVP_PKEY_free(k->pk);
    free(k->pem);
}

void nf_auth_free(nf_auth_t *a)
{
    if (!a)
        return;
    if (a->secret) {
        OPENSSL_cleanse(a->secret, a->secret_len);
        free(a->secret);
    }
    if (a->pem)
        pubkey_clear(a->pem);
    free(a->pem);
    for (size_t i = 0; i < a->njwks; i++)
        pubkey_clear(&a->jwks[i]);
    free(a->jwks);
    free(a->issuer);
    free(a->audience);
    if (a->cache)
        OPENSSL_cleanse(a->cache, CACHE_SLOTS * sizeof *a->cache);
    free(a->cache);
    pthread_mutex_destroy(&a->cache_mu);
    free(a);
}

/* ---- verifying ---- */

/* One verification's token and what is decoded from it (one allocation, freed at the end). */
typedef struct work {
    char *tok; /* the token, NUL-terminated: libjwt takes a C string */
    size_t dot1, dot2;
    unsigned char *head, *body, *sig; /* the decoded parts, NUL-terminated */
    long head_n, body_n, sig_n;
    cJSON *hj, *pj; /* header and payload */
} work_t;

/* What the header says, and the key chosen for it. */
typedef struct choice {
    jwt_alg_t alg;
    char alg_q[QUOTE_MAX + 8];
    const char *kid; /* in w.hj; NULL: none */
    const unsigned char *key;
    int key_len;
    size_t sig_len;
    const char *key_name; /* for messages */
    EVP_PKEY *pk;         /* RS256, ES256 */
} choice_t;

static bool is_space(char c)
{
    return c == ' ' || c == '\t';
}

/* The token in an Authorization value: "Bearer", spaces, the token; *tok and *n. */
static int take_bearer(const nf_auth_t *a, const char *v, const char **tok, size_t *n, char *err,
                       size_t errlen)
{
    if (!v)
        return fail(err, errlen, NF_AUTH_EMISSING,
                    "no Authorization header: a Bearer token is required");
    size_t len = strnlen(v, (size_t)a->max_bytes + 1);
    if (len > a->max_bytes)
        return fail(err, errlen, NF_AUTH_ETOO_LONG, "Authorization header longer than %u bytes",
                    a->max_bytes);
    size_t i = 0, j = len;
    while (i < j && is_space(v[i]))
        i++;
    while (j > i && is_space(v[j - 1]))
        j--;
    if (i == j)
        return fail(err, errlen, NF_AUTH_EMISSING,
                    "empty Authorization header: a Bearer token is required");
    size_t s = i;
    while (i < j && !is_space(v[i]))
        i++;
    char q[QUOTE_MAX + 8];
    if (i - s != 6 || strncasecmp(v + s, "Bearer", 6) != 0)
        return fail(err, errlen, NF_AUTH_ESCHEME, "Authorization scheme \"%s\" is not Bearer",
                    quoted(v + s, i - s < 16 ? i - s : 16, q, sizeof q));
    while (i < j && is_space(v[i]))
        i++;
    if (i == j)
        return fail(err, errlen, NF_AUTH_EMALFORMED, "Authorization: Bearer without a token");
    *tok = v + i;
    *n = j - i;
    return 0;
}

/* Splits the token at its two dots (after checking every byte) and decodes its three parts. */
static int split(work_t *w, const char *tok, size_t n, char *err, size_t errlen)
{
    unsigned dots = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)tok[i];
        if (c == '.') {
            if (dots < 2)
                *(dots ? &w->dot2 : &w->dot1) = i;
            dots++;
        } else if (b64url_value(c) < 0) {
            return fail(err, errlen, NF_AUTH_EMALFORMED,
                        c > 0x20 && c < 0x7f
                            ? "the token holds '%c' at byte %zu: a JWT is three base64url parts "
                              "joined by dots"
                            : "the token holds byte 0x%02x at %zu: a JWT is three base64url parts "
                              "joined by dots",
                        c, i);
        }
    }
    if (dots != 2)
        return fail(err, errlen, NF_AUTH_EMALFORMED,
                    "the token has %u part%s; a signed JWT has three (header.payload.signature)%s",
                    dots + 1, dots ? "s" : "",
                    dots == 4 ? ", an encrypted one (JWE) is not taken" : "");
    if (w->dot1 == 0 || w->dot2 == w->dot1 + 1)
        return fail(err, errlen, NF_AUTH_EMALFORMED, "the token's %s is empty",
                    w->dot1 == 0 ? "header" : "payload");
    w->tok = malloc(2 * n + 8); /* the token, then its three decoded parts (3/4 of it, + NULs) */
    if (!w->tok)
        return fail(err, errlen, NF_AUTH_EINTERNAL, "out of memory");
    memcpy(w->tok, tok, n);
    w->tok[n] = '\0';
    w->head = (unsigned char *)w->tok + n + 1;
    w->head_n = b64url_decode(w->tok, w->dot1, w->head);
    w->body = w->head + (w->head_n > 0 ? w->head_n : 0) + 1;
    w->body_n = b64url_decode(w->tok + w->dot1 + 1, w->dot2 - w->dot1 - 1, w->body);
    w->sig = w->body + (w->body_n > 0 ? w->body_n : 0) + 1;
    w->sig_n = b64url_decode(w->tok + w->dot2 + 1, n - w->dot2 - 1, w->sig);
    if (w->head_n < 0 || w->body_n < 0 || w->sig_n < 0)
        return fail(err, errlen, NF_AUTH_EMALFORMED,
                    "the token's %s is not canonical base64url (no padding, unused bits zero)",
                    w->head_n < 0   ? "header"
                    : w->body_n < 0 ? "payload"
                                    : "signature");
    return 0;
}

/* The deepest nesting of JSON text (brackets outside strings): bounds cJSON's and jansson's
 * recursion before either parses it. */
static unsigned json_depth(const unsigned char *s, long n)
{
    unsigned depth = 0, max = 0;
    bool in_str = false;
    for (long i = 0; i < n; i++) {
        if (in_str) {
            if (s[i] == '\\')
                i++;
            else if (s[i] == '"')
                in_str = false;
        } else if (s[i] == '"') {
            in_str = true;
        } else if (s[i] == '{' || s[i] == '[') {
            max = ++depth > max ? depth : max;
        } else if ((s[i] == '}' || s[i] == ']') && depth) {
            depth--;
        }
    }
    return max;
}

/* "\u0000" anywhere (any case of its hex): cJSON ends a string there, so "alice\u0000x" would
 * read as "alice". */
static bool has_nul_escape(const unsigned char *s, long n)
{
    for (long i = 0; i + 5 < n; i++)
        if (s[i] == '\\' && (s[i + 1] == 'u' || s[i + 1] == 'U') &&
            memcmp(s + i + 2, "0000", 4) == 0)
            return true;
    return false;
}

/* A decoded part as one JSON object with at most max members, none twice (RFC 7515 §4 and
 * RFC 7519 §4 allow refusing duplicates; cJSON reads the first, jansson the last: libjwt and
 * this file would read different headers). */
static int parse_object(const unsigned char *s, long n, int max, const char *what, cJSON **out,
                        char *err, size_t errlen)
{
    if (memchr(s, '\0', (size_t)n) || has_nul_escape(s, n))
        return fail(err, errlen, NF_AUTH_EMALFORMED, "the token's %s holds a NUL character", what);
    if (json_depth(s, n) > JSON_DEPTH_MAX)
        return fail(err, errlen, NF_AUTH_EMALFORMED, "the token's %s nests deeper than %d", what,
                    JSON_DEPTH_MAX);
    cJSON *j = cJSON_ParseWithLengthOpts((const char *)s, (size_t)n + 1, NULL, true);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return fail(err, errlen, NF_AUTH_EMALFORMED, "the token's %s is not a JSON object", what);
    }
    *out = j;
    int count = 0;
    for (const cJSON *m = j->child; m; m = m->next, count++) {
        if (count == max)
            return fail(err, errlen, NF_AUTH_EMALFORMED, "the token's %s has more than %d members",
                        what, max);
        for (const cJSON *p = j->child; p != m; p = p->next)
            if (strcmp(p->string, m->string) == 0) {
                char q[QUOTE_MAX + 8];
                return fail(err, errlen, NF_AUTH_EMALFORMED, "the token's %s has \"%s\" twice",
                            what, quoted(m->string, strlen(m->string), q, sizeof q));
            }
    }
    return 0;
}

/* alg (exactly as RFC 7518 spells it: libjwt's strcasecmp would take "hs256"), kid, typ, crit. */
static int read_header(const work_t *w, choice_t *c, char *err, size_t errlen)
{
    const cJSON *alg = cJSON_GetObjectItemCaseSensitive(w->hj, "alg");
    const cJSON *kid = cJSON_GetObjectItemCaseSensitive(w->hj, "kid");
    const cJSON *typ = cJSON_GetObjectItemCaseSensitive(w->hj, "typ");
    if (!cJSON_IsString(alg))
        return fail(err, errlen, NF_AUTH_EMALFORMED, "the token's header has no alg string");
    quoted(alg->valuestring, strlen(alg->valuestring), c->alg_q, sizeof c->alg_q);
    if (strcasecmp(alg->valuestring, "none") == 0)
        return fail(err, errlen, NF_AUTH_EALG, "alg \"%s\": unsigned tokens are never taken",
                    c->alg_q);
    c->alg = strcmp(alg->valuestring, "HS256") == 0   ? JWT_ALG_HS256
             : strcmp(alg->valuestring, "RS256") == 0 ? JWT_ALG_RS256
             : strcmp(alg->valuestring, "ES256") == 0 ? JWT_ALG_ES256
                                                      : JWT_ALG_INVAL;
    if (c->alg == JWT_ALG_INVAL)
        return fail(err, errlen, NF_AUTH_EALG, "alg \"%s\" is not taken (HS256, RS256, ES256)",
                    c->alg_q);
    if (cJSON_GetObjectItemCaseSensitive(w->hj, "crit"))
        return fail(err, errlen, NF_AUTH_EMALFORMED,
                    "the token's header has crit: no extension is understood here");
    if (typ && (!cJSON_IsString(typ) || strcasecmp(typ->valuestring, "JWT") != 0))
        return fail(err, errlen, NF_AUTH_EMALFORMED, "the token's typ is not JWT");
    if (kid && (!cJSON_IsString(kid) || strlen(kid->valuestring) > NF_AUTH_KID_MAX))
        return fail(err, errlen, NF_AUTH_EMALFORMED,
                    "the token's kid is not a string of at most %d bytes", NF_AUTH_KID_MAX);
    c->kid = kid ? kid->valuestring : NULL;
    return 0;
}

static void choose(choice_t *c, const pubkey_t *k, const char *name)
{
    c->key = k->pem;
    c->key_len = k->pem_len;
    c->pk = k->pk;
    c->sig_len = k->sig_len;
    c->key_name = name;
}

/* The configured key for the header's alg (and kid): see auth.h for the order. */
static int choose_key(const nf_auth_t *a, choice_t *c, char *err, size_t errlen)
{
    char q[QUOTE_MAX + 8];
    if (c->alg == JWT_ALG_HS256) {
        if (!a->secret)
            return fail(err, errlen, NF_AUTH_EALG, "alg HS256 is not taken here (no HS256 key)");
        c->key = a->secret;
        c->key_len = (int)a->secret_len;
        c->sig_len = 32;
        c->key_name = "the HS256 secret";
        return 0;
    }
    for (size_t i = 0; c->kid && i < a->njwks; i++) {
        if (strcmp(a->jwks[i].kid, c->kid) != 0)
            continue;
        if (a->jwks[i].alg != c->alg)
            return fail(err, errlen, NF_AUTH_EALG, "alg %s does not match kid \"%s\"'s key (%s)",
                        c->alg_q, quoted(c->kid, strlen(c->kid), q, sizeof q),
                        jwt_alg_str(a->jwks[i].alg));
        choose(c, &a->jwks[i], "the JWKS key of that kid");
        return 0;
    }
    if (a->pem && a->pem->alg == c->alg) {
        choose(c, a->pem, "the public key");
        return 0;
    }
    if (c->kid && a->njwks)
        return fail(err, errlen, NF_AUTH_EALG, "kid \"%s\" names no key here",
                    quoted(c->kid, strlen(c->kid), q, sizeof q));
    return fail(err, errlen, NF_AUTH_EALG, "alg %s is not taken here (no %s key%s)", c->alg_q,
                c->alg == JWT_ALG_RS256 ? "RSA" : "EC P-256",
                a->njwks && !c->kid ? "; JWKS keys are chosen by kid" : "");
}

/* HMAC-SHA256 of header.payload compared in constant time. libjwt compares too, and Debian's
 * 1.10.2-1+deb12u1 does that in constant time (CVE-2024-25189); a libjwt without that fix
 * would leak the comparison's timing, this check does not. */
static bool hmac_matches(const nf_auth_t *a, const work_t *w)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    if (!HMAC(EVP_sha256(), a->secret, (int)a->secret_len, (const unsigned char *)w->tok, w->dot2,
              md, &mdlen))
        return false;
    return mdlen == 32 && w->sig_n == 32 && CRYPTO_memcmp(md, w->sig, 32) == 0;
}

/* The DER ECDSA-Sig-Value of a JWS ES256 signature (r || s, 32 bytes each): its length in der
 * (room for 72), or 0. */
static int es256_der(const unsigned char *rs, unsigned char *der)
{
    ECDSA_SIG *es = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(rs, 32, NULL), *s = BN_bin2bn(rs + 32, 32, NULL);
    int n = 0;
    if (es && r && s && ECDSA_SIG_set0(es, r, s) == 1) {
        r = s = NULL; /* es owns them */
        n = i2d_ECDSA_SIG(es, &der);
    }
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(es);
    return n > 0 ? n : 0;
}

/* RS256 or ES256 over header.payload with the key parsed at load. libjwt 1.10 parses the PEM
 * text again on every call, which OpenSSL 3.0's decoders make cost ~0.6 ms, one thread at a
 * time: a forged token is refused here for ~65 us instead (RSA-2048; P-256 ~170 us). */
static bool pkey_matches(const work_t *w, const choice_t *c)
{
    unsigned char der[80];
    const unsigned char *sig = w->sig;
    size_t slen = (size_t)w->sig_n;
    if (c->alg == JWT_ALG_ES256) {
        slen = (size_t)es256_der(w->sig, der);
        sig = der;
    }
    EVP_MD_CTX *m = slen ? EVP_MD_CTX_new() : NULL;
    bool ok = m && EVP_DigestVerifyInit(m, NULL, EVP_sha256(), NULL, c->pk) == 1 &&
              EVP_DigestVerify(m, sig, slen, (const unsigned char *)w->tok, w->dot2) == 1;
    EVP_MD_CTX_free(m);
    ERR_clear_error();
    return ok;
}

static int check_signature(const nf_auth_t *a, const work_t *w, const choice_t *c, char *err,
                           size_t errlen)
{
    if (w->sig_n == 0)
        return fail(err, errlen, NF_AUTH_ESIGNATURE, "the token has no signature");
    if ((size_t)w->sig_n != c->sig_len)
        return fail(err, errlen, NF_AUTH_ESIGNATURE, "the %s signature is %ld bytes; %s makes %zu",
                    c->alg_q, w->sig_n, c->key_name, c->sig_len);
    if (c->alg == JWT_ALG_HS256 ? !hmac_matches(a, w) : !pkey_matches(w, c))
        return fail(err, errlen, NF_AUTH_ESIGNATURE, "the signature does not verify with %s",
                    c->key_name);
    jwt_t *j = NULL;
    int rc = jwt_decode(&j, w->tok, c->key, c->key_len);
    jwt_alg_t got = j ? jwt_get_alg(j) : JWT_ALG_INVAL;
    jwt_free(j);
    ERR_clear_error(); /* a failed check leaves OpenSSL errors queued on this thread */
    if (rc == ENOMEM)
        return fail(err, errlen, NF_AUTH_EINTERNAL, "out of memory");
    if (rc) /* the signature held above: libjwt's jansson refused what cJSON took */
        return fail(err, errlen, NF_AUTH_EMALFORMED,
                    "libjwt refuses the token (JSON it does not take, such as invalid UTF-8)");
    if (got != c->alg) /* read_header and libjwt read the same bytes differently */
        return fail(err, errlen, NF_AUTH_EALG, "libjwt read alg %s where %s was chosen",
                    jwt_alg_str(got) ? jwt_alg_str(got) : "?", jwt_alg_str(c->alg));
    return 0;
}

/* ---- claims ---- */

/* A NumericDate claim: 1 with *v, 0 when absent, NF_AUTH_ECLAIM when not a number in range. */
static int numeric_date(const cJSON *p, const char *name, double *v, char *err, size_t errlen)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(p, name);
    if (!c)
        return 0;
    if (!cJSON_IsNumber(c) || !isfinite(c->valuedouble) || c->valuedouble < 0 ||
        c->valuedouble > NUMERIC_DATE_MAX)
        return fail(err, errlen, NF_AUTH_ECLAIM,
                    "the token's %s is not a NumericDate (seconds since 1970, 0..9999-12-31)",
                    name);
    *v = c->valuedouble;
    return 1;
}

static const char *iso_time(double t, char *out, size_t outlen)
{
    time_t s = (time_t)floor(t);
    struct tm tm;
    if (!gmtime_r(&s, &tm) || strftime(out, outlen, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(out, outlen, "%.0f", t);
    return out;
}

/* exp (required), nbf, iat against now with the leeway: RFC 7519 §4.1.4-6. */
static int check_times(const nf_auth_t *a, const cJSON *p, int64_t now_s, char *err, size_t errlen)
{
    double exp = 0, nbf = 0, iat = 0, now = (double)now_s, skew = a->skew;
    char t[40];
    int rc = numeric_date(p, "exp", &exp, err, errlen);
    if (rc < 0)
        return rc;
    if (rc == 0)
        return fail(err, errlen, NF_AUTH_ENO_EXPIRY, "the token has no exp: tokens must expire");
    if (now >= exp + skew)
        return fail(err, errlen, NF_AUTH_EEXPIRED, "token expired at %s (%u s leeway)",
                    iso_time(exp, t, sizeof t), a->skew);
    if ((rc = numeric_date(p, "nbf", &nbf, err, errlen)) < 0)
        return rc;
    if (rc && now < nbf - skew)
        return fail(err, errlen, NF_AUTH_ENOT_YET_VALID, "token not valid before %s (%u s leeway)",
                    iso_time(nbf, t, sizeof t), a->skew);
    if ((rc = numeric_date(p, "iat", &iat, err, errlen)) < 0)
        return rc;
    if (rc && iat > now + skew)
        return fail(err, errlen, NF_AUTH_ENOT_YET_VALID,
                    "token issued in the future, at %s (%u s leeway)", iso_time(iat, t, sizeof t),
                    a->skew);
    return 0;
}

static int check_issuer(const nf_auth_t *a, const cJSON *p, char *err, size_t errlen)
{
    const cJSON *iss = cJSON_GetObjectItemCaseSensitive(p, "iss");
    char q[QUOTE_MAX + 8];
    if (!iss)
        return fail(err, errlen, NF_AUTH_EISSUER, "the token has no iss");
    if (!cJSON_IsString(iss))
        return fail(err, errlen, NF_AUTH_ECLAIM, "the token's iss is not a string");
    if (strcmp(iss->valuestring, a->issuer) != 0)
        return fail(err, errlen, NF_AUTH_EISSUER, "iss \"%s\" is not the issuer taken here",
                    quoted(iss->valuestring, strlen(iss->valuestring), q, sizeof q));
    return 0;
}

/* aud: a string, or an array of strings one of which is ours (RFC 7519 §4.1.3). */
static int check_audience(const nf_auth_t *a, const cJSON *p, char *err, size_t errlen)
{
    const cJSON *aud = cJSON_GetObjectItemCaseSensitive(p, "aud");
    if (!aud)
        return fail(err, errlen, NF_AUTH_EAUDIENCE, "the token has no aud");
    if (cJSON_IsString(aud)) {
        if (strcmp(aud->valuestring, a->audience) == 0)
            return 0;
    } else if (cJSON_IsArray(aud)) {
        const cJSON *m;
        cJSON_ArrayForEach(m, aud)
        {
            if (!cJSON_IsString(m))
                return fail(err, errlen, NF_AUTH_ECLAIM, "the token's aud holds a non-string");
            if (strcmp(m->valuestring, a->audience) == 0)
                return 0;
        }
    } else {
        return fail(err, errlen, NF_AUTH_ECLAIM, "the token's aud is not a string or an array");
    }
    return fail(err, errlen, NF_AUTH_EAUDIENCE, "the token's aud does not name this service");
}

/* sub: a user id as the query API takes it (valid_user in query.c). */
static int take_sub(const cJSON *p, char *sub, size_t sublen, char *err, size_t errlen)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(p, "sub");
    if (!s)
        return fail(err, errlen, NF_AUTH_ENO_SUBJECT, "the token has no sub");
    if (!cJSON_IsString(s))
        return fail(err, errlen, NF_AUTH_ENO_SUBJECT, "the token's sub is not a string");
    size_t n = strlen(s->valuestring), cap = NF_AUTH_SUB_MAX;
    if (sub && sublen && sublen - 1 < cap)
        cap = sublen - 1;
    if (n == 0)
        return fail(err, errlen, NF_AUTH_ENO_SUBJECT, "the token's sub is empty");
    if (n > cap)
        return fail(err, errlen, NF_AUTH_ENO_SUBJECT, "the token's sub is %zu bytes; at most %zu",
                    n, cap);
    bool ok = nf_utf8_valid(s->valuestring, n);
    for (size_t i = 0; ok && i < n; i++)
        ok = (unsigned char)s->valuestring[i] >= 0x20 && s->valuestring[i] != 0x7f;
    if (!ok)
        return fail(err, errlen, NF_AUTH_ENO_SUBJECT,
                    "the token's sub holds a control character or invalid UTF-8");
    if (sub && sublen)
        memcpy(sub, s->valuestring, n + 1);
    return 0;
}

static int check_claims(const nf_auth_t *a, const cJSON *p, int64_t now_s, char *sub, size_t sublen,
                        char *err, size_t errlen)
{
    int rc = check_times(a, p, now_s, err, errlen);
    if (!rc && a->issuer)
        rc = check_issuer(a, p, err, errlen);
    if (!rc && a->audience)
        rc = check_audience(a, p, err, errlen);
    return rc ? rc : take_sub(p, sub, sublen, err, errlen);
}

/* The cached subject of token h valid at now, copied into sub: true; else false. */
static bool cache_get(const nf_auth_t *a, const uint8_t h[32], int64_t now_s, char *sub,
                      size_t sublen)
{
    nf_auth_t *m = (nf_auth_t *)a; /* the cache is the one mutable part, under its mutex */
    cached_t *e = &m->cache[(h[0] | (unsigned)h[1] << 8) % CACHE_SLOTS];
    pthread_mutex_lock(&m->cache_mu);
    bool hit = e->used && memcmp(e->h, h, 32) == 0 && (double)now_s >= e->from &&
               (double)now_s < e->until && (!sub || strlen(e->sub) < sublen);
    if (hit && sub && sublen)
        memcpy(sub, e->sub, strlen(e->sub) + 1);
    pthread_mutex_unlock(&m->cache_mu);
    return hit;
}

/* Remembers token h, verified: its validity window from the claims (check_times' rules). */
static void cache_put(const nf_auth_t *a, const uint8_t h[32], const cJSON *p, const char *sub)
{
    double exp = 0, nbf = 0, iat = 0, skew = a->skew;
    double from = -INFINITY;
    if (numeric_date(p, "exp", &exp, NULL, 0) != 1 || strlen(sub) > NF_AUTH_SUB_MAX)
        return;
    if (numeric_date(p, "nbf", &nbf, NULL, 0) == 1)
        from = nbf - skew;
    if (numeric_date(p, "iat", &iat, NULL, 0) == 1 && iat - skew > from)
        from = iat - skew;
    nf_auth_t *m = (nf_auth_t *)a;
    cached_t *e = &m->cache[(h[0] | (unsigned)h[1] << 8) % CACHE_SLOTS];
    pthread_mutex_lock(&m->cache_mu);
    memcpy(e->h, h, 32);
    e->used = true;
    e->from = from;
    e->until = exp + skew;
    memcpy(e->sub, sub, strlen(sub) + 1);
    pthread_mutex_unlock(&m->cache_mu);
}

int nf_auth_verify(const nf_auth_t *a, const char *authorization, int64_t now_s, char *sub,
                   size_t sublen, char *err, size_t errlen)
{
    if (sub && sublen)
        sub[0] = '\0';
    if (err && errlen)
        err[0] = '\0';
    const char *tok = NULL;
    size_t n = 0;
    int rc = take_bearer(a, authorization, &tok, &n, err, errlen);
    if (rc)
        return rc;
    uint8_t h[32];
    nf_sha256_t hc;
    nf_sha256_init(&hc);
    nf_sha256_update(&hc, tok, n);
    nf_sha256_final(&hc, h);
    if (cache_get(a, h, now_s, sub, sublen))
        return 0;
    char own[NF_AUTH_SUB_MAX + 1];
    if (!sub || !sublen) { /* the caller only checks: the subject is still what is cached */
        sub = own;
        sublen = sizeof own;
    }
    work_t w = {0};
    choice_t c = {0};
    rc = split(&w, tok, n, err, errlen);
    if (!rc)
        rc = parse_object(w.head, w.head_n, HEADER_MEMBERS_MAX, "header", &w.hj, err, errlen);
    if (!rc)
        rc = read_header(&w, &c, err, errlen);
    if (!rc)
        rc = choose_key(a, &c, err, errlen);
    /* The payload's JSON is parsed before the signature is checked (a malformed token is told
     * as such), its claims are read only after. */
    if (!rc)
        rc = parse_object(w.body, w.body_n, PAYLOAD_MEMBERS_MAX, "payload", &w.pj, err, errlen);
    if (!rc)
        rc = check_signature(a, &w, &c, err, errlen);
    if (!rc)
        rc = check_claims(a, w.pj, now_s, sub, sublen, err, errlen);
    if (!rc)
        cache_put(a, h, w.pj, sub);
    cJSON_Delete(w.hj);
    cJSON_Delete(w.pj);
    free(w.tok);
    if (rc && sub && sublen)
        sub[0] = '\0';
    return rc;
}

const char *nf_auth_error_name(int rc)
{
    static const char *const names[NF_AUTH_NERRORS] = {
        "ok",     "missing",   "scheme",     "too_long", "malformed",
        "alg",    "signature", "no_expiry",  "expired",  "not_yet_valid",
        "issuer", "audience",  "no_subject", "claim",    "internal",
    };
    return rc <= 0 && rc > -NF_AUTH_NERRORS ? names[-rc] : "unknown";
}

int nf_auth_sign_hs256(const nf_auth_t *a, const char *sub, int64_t exp_s, char *out, size_t outlen)
{
    if (!a->secret)
        return -EPERM;
    if (!sub || !*sub)
        return -EINVAL;
    jwt_t *j = NULL;
    if (jwt_new(&j))
        return -ENOMEM;
    int rc = jwt_set_alg(j, JWT_ALG_HS256, a->secret, (int)a->secret_len);
    if (!rc)
        rc = jwt_add_grant(j, "sub", sub);
    if (!rc)
        rc = jwt_add_grant_int(j, "exp", (long)exp_s);
    if (!rc && a->issuer)
        rc = jwt_add_grant(j, "iss", a->issuer);
    if (!rc && a->audience)
        rc = jwt_add_grant(j, "aud", a->audience);
    char *s = rc ? NULL : jwt_encode_str(j);
    jwt_free(j);
    if (!s)
        return rc == EINVAL ? -EINVAL : -ENOMEM;
    size_t n = strlen(s);
    if (n >= outlen) {
        free(s);
        return -ENOSPC;
    }
    memcpy(out, s, n + 1);
    free(s);
    return (int)n;
}

static const char *alg_of(const pubkey_t *k)
{
    return k->alg == JWT_ALG_RS256 ? "RS256" : "ES256";
}

int nf_auth_describe(const nf_auth_t *a, char *out, size_t outlen)
{
    size_t o = 0;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        int k_ =                                                                                   \
            snprintf(out + (o < outlen ? o : outlen), o < outlen ? outlen - o : 0, __VA_ARGS__);   \
        o += k_ > 0 ? (size_t)k_ : 0;                                                              \
    } while (0)
    PUT("auth:");
    if (a->secret)
        PUT(" HS256 secret (%zu bytes);", a->secret_len);
    if (a->pem)
        PUT(" %s public key (%d bits);", alg_of(a->pem), a->pem->bits);
    if (a->njwks) {
        PUT(" JWKS %zu key%s (", a->njwks, a->njwks == 1 ? "" : "s");
        for (size_t i = 0; i < a->njwks; i++)
            PUT("%s%s %s", i ? ", " : "", a->jwks[i].kid, alg_of(&a->jwks[i]));
        PUT("), %zu skipped;", a->jwks_skipped);
    }
    PUT(" iss %s, aud %s; %u s leeway; tokens up to %u bytes", a->issuer ? "checked" : "any",
        a->audience ? "checked" : "any", a->skew, a->max_bytes);
#undef PUT
    return (int)o;
}
