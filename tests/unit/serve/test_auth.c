/* Tests src/serve/auth.c with keys made here by OpenSSL (three RSA keys and two P-256 keys,
 * written as the PEM and JWKS files an operator would give) and tokens signed by libjwt itself or
 * put together byte by byte where libjwt would not sign them (alg none, duplicate members, bad
 * base64, HS256 with the RSA key's PEM text as its secret). Every refusal is checked for its
 * code and a message.
 *
 * By hand: each algorithm and key source; alg none; algorithm confusion; wrong keys and kids;
 * ES256's (r, n - s) twin; the leeway's edges on exp, nbf and iat; every claim rule; malformed
 * tokens and Authorization values; the limits; loading errors of each file. As properties: 400
 * random claim sets against `model` (auth.h's rules written again), every one-byte change and
 * every cut of valid tokens refused, random bytes never taken, and 4 threads verifying at once
 * (under TSan in CI's `^serve/` run) agreeing with one. */
#include "nf_test.h"

#include "serve/auth.h"
#include "testb64.h"

#include <errno.h>
#include <jwt.h>
#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define T0   1795000000 /* 2026-11-18T11:06:40Z */
#define SKEW 60

static char dir[64];
static char secret_file[128], rsa_file[128], ec_file[128], jwks_file[128];
static const char secret[] = "0123456789abcdef0123456789abcdef-newsflow"; /* 41 bytes */
static char *rsa_priv, *rsa2_priv, *ec_priv, *jrsa_priv, *jec_priv;       /* PKCS#8 PEM */
static char *rsa_pub_pem;                                                 /* rsa_file's bytes */
static EVP_PKEY *jrsa, *jec;

/* ---- keys and files ---- */

static char *pem_of(EVP_PKEY *pk, bool priv)
{
    BIO *b = BIO_new(BIO_s_mem());
    if (priv)
        PEM_write_bio_PrivateKey(b, pk, NULL, NULL, 0, NULL, NULL);
    else
        PEM_write_bio_PUBKEY(b, pk);
    char *p = NULL;
    long n = BIO_get_mem_data(b, &p);
    char *s = malloc((size_t)n + 1);
    memcpy(s, p, (size_t)n);
    s[n] = '\0';
    BIO_free(b);
    return s;
}

static void write_file(const char *path, const char *text, size_t n)
{
    FILE *f = fopen(path, "wb");
    fwrite(text, 1, n, f);
    fclose(f);
}

static void path_in(char *out, size_t outlen, const char *name)
{
    snprintf(out, outlen, "%s/%s", dir, name);
}

static void write_pub(const char *name, EVP_PKEY *pk, char *path, size_t pathlen)
{
    path_in(path, pathlen, name);
    char *p = pem_of(pk, false);
    write_file(path, p, strlen(p));
    free(p);
}

static void bn_param_b64(EVP_PKEY *pk, const char *name, int pad, char *out)
{
    BIGNUM *bn = NULL;
    unsigned char buf[1024];
    EVP_PKEY_get_bn_param(pk, name, &bn);
    int n = pad ? BN_bn2binpad(bn, buf, pad) : BN_bn2bin(bn, buf);
    nf_test_b64url(buf, (size_t)n, out);
    BN_free(bn);
}

static void jwk_rsa(EVP_PKEY *pk, const char *kid, const char *extra, char *out, size_t outlen)
{
    char n[1024], e[16];
    bn_param_b64(pk, OSSL_PKEY_PARAM_RSA_N, 0, n);
    bn_param_b64(pk, OSSL_PKEY_PARAM_RSA_E, 0, e);
    snprintf(out, outlen, "{\"kty\":\"RSA\",\"kid\":\"%s\",\"n\":\"%s\",\"e\":\"%s\"%s}", kid, n, e,
             extra);
}

static void jwk_ec(EVP_PKEY *pk, const char *kid, const char *crv, char *out, size_t outlen)
{
    char x[128], y[128];
    bn_param_b64(pk, OSSL_PKEY_PARAM_EC_PUB_X, strcmp(crv, "P-256") == 0 ? 32 : 48, x);
    bn_param_b64(pk, OSSL_PKEY_PARAM_EC_PUB_Y, strcmp(crv, "P-256") == 0 ? 32 : 48, y);
    snprintf(out, outlen,
             "{\"kty\":\"EC\",\"kid\":\"%s\",\"crv\":\"%s\",\"x\":\"%s\",\"y\":\"%s\",\"use\":"
             "\"sig\"}",
             kid, crv, x, y);
}

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/nf_test_auth_XXXXXX");
    if (!mkdtemp(dir))
        abort();
    path_in(secret_file, sizeof secret_file, "secret");
    char withnl[64];
    snprintf(withnl, sizeof withnl, "%s\n", secret);
    write_file(secret_file, withnl, strlen(withnl));

    EVP_PKEY *rsa = EVP_RSA_gen(2048), *rsa2 = EVP_RSA_gen(2048), *ec = EVP_EC_gen("P-256");
    jrsa = EVP_RSA_gen(2048);
    jec = EVP_EC_gen("P-256");
    EVP_PKEY *p384 = EVP_EC_gen("P-384");
    rsa_priv = pem_of(rsa, true), rsa2_priv = pem_of(rsa2, true), ec_priv = pem_of(ec, true);
    jrsa_priv = pem_of(jrsa, true), jec_priv = pem_of(jec, true);
    write_pub("rsa.pem", rsa, rsa_file, sizeof rsa_file);
    rsa_pub_pem = pem_of(rsa, false);
    write_pub("ec.pem", ec, ec_file, sizeof ec_file);

    /* The JWKS: r1 (RSA), e1 (P-256), and three keys to skip: an encryption key, a P-384 key and
     * an oct secret (HS256 must never come from a JWKS). */
    static char jwks[16384];
    char k1[2048], k2[512], k3[2048], k4[512];
    jwk_rsa(jrsa, "r1", ",\"use\":\"sig\",\"alg\":\"RS256\"", k1, sizeof k1);
    jwk_ec(jec, "e1", "P-256", k2, sizeof k2);
    jwk_rsa(rsa2, "enc1", ",\"use\":\"enc\"", k3, sizeof k3);
    jwk_ec(p384, "p384", "P-384", k4, sizeof k4);
    int n = snprintf(jwks, sizeof jwks,
                     "{\"keys\":[%s,%s,%s,%s,{\"kty\":\"oct\",\"kid\":\"s1\",\"k\":\"c2VjcmV0\"}]}",
                     k1, k2, k3, k4);
    path_in(jwks_file, sizeof jwks_file, "jwks.json");
    write_file(jwks_file, jwks, (size_t)n);
    EVP_PKEY_free(rsa), EVP_PKEY_free(rsa2), EVP_PKEY_free(ec), EVP_PKEY_free(p384);
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    free(rsa_priv), free(rsa2_priv), free(ec_priv), free(jrsa_priv), free(jec_priv);
    free(rsa_pub_pem);
    EVP_PKEY_free(jrsa), EVP_PKEY_free(jec);
}

/* ---- tokens ---- */

/* Signed by libjwt: claims (a JSON object) with alg and key, kid when not NULL. malloc'd. */
static char *sign(jwt_alg_t alg, const char *key, size_t keylen, const char *kid,
                  const char *claims)
{
    jwt_t *j = NULL;
    char *s = NULL;
    if (jwt_new(&j) == 0 && jwt_add_grants_json(j, claims) == 0 &&
        (!kid || jwt_add_header(j, "kid", kid) == 0) &&
        jwt_set_alg(j, alg, (const unsigned char *)key, (int)keylen) == 0)
        s = jwt_encode_str(j);
    jwt_free(j);
    if (!s)
        fprintf(stderr, "libjwt did not sign %s\n", claims);
    return s;
}

static char *sign_hs(const char *claims)
{
    return sign(JWT_ALG_HS256, secret, strlen(secret), NULL, claims);
}

static char *sign_rs(const char *claims)
{
    return sign(JWT_ALG_RS256, rsa_priv, strlen(rsa_priv), NULL, claims);
}

static char *sign_es(const char *claims)
{
    return sign(JWT_ALG_ES256, ec_priv, strlen(ec_priv), NULL, claims);
}

/* header.payload of the given JSON texts, then "." and the HMAC-SHA256 with key (keylen 0: the
 * signature text sig instead). malloc'd. */
static char *build(const char *header, const char *payload, const void *key, size_t keylen,
                   const char *sig)
{
    size_t hl = strlen(header), pl = strlen(payload);
    char *t = malloc(2 * (hl + pl) + 1024);
    nf_test_b64url((const unsigned char *)header, hl, t);
    size_t n = strlen(t);
    t[n++] = '.';
    nf_test_b64url((const unsigned char *)payload, pl, t + n);
    n += strlen(t + n);
    t[n] = '.';
    if (keylen) {
        unsigned char md[32];
        unsigned mdlen = 0;
        HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)t, n, md, &mdlen);
        nf_test_b64url(md, mdlen, t + n + 1);
    } else {
        strcpy(t + n + 1, sig ? sig : ""); /* sig is NULL only with a key */
    }
    return t;
}

static char *build_hs(const char *header, const char *payload)
{
    return build(header, payload, secret, strlen(secret), NULL);
}

static const char *bearer(const char *tok)
{
    static __thread char buf[70000];
    snprintf(buf, sizeof buf, "Bearer %s", tok ? tok : "");
    return buf;
}

static char g_sub[NF_AUTH_SUB_MAX + 1], g_err[512];

/* nf_auth_verify's result, checked against want; on a refusal the message must not be empty
 * and sub must be. Prints what it got on a mismatch. */
static int expect_at(const char *file, int line, nf_auth_t *a, const char *authz, int64_t now,
                     int want)
{
    memset(g_sub, 'x', sizeof g_sub);
    memset(g_err, 'x', sizeof g_err);
    int rc = nf_auth_verify(a, authz, now, g_sub, sizeof g_sub, g_err, sizeof g_err);
    bool ok = rc == want && (rc == 0 ? g_sub[0] != '\0' : g_err[0] != '\0' && g_sub[0] == '\0');
    ok = ok && memchr(g_err, '\0', sizeof g_err) != NULL;
    if (!ok) {
        fprintf(stderr, "%s:%d: verify %.80s: got %d %s (\"%.200s\"), want %d %s\n", file, line,
                authz ? authz : "(null)", rc, nf_auth_error_name(rc), g_err, want,
                nf_auth_error_name(want));
        nf_test_failed_checks++;
    }
    return rc;
}
#define EXPECT(a, authz, now, want) expect_at(__FILE__, __LINE__, a, authz, now, want)

/* A token's verdict; frees the token. */
#define EXPECT_TOK(a, tok, now, want)                                                              \
    do {                                                                                           \
        char *t_ = (tok);                                                                          \
        EXPECT(a, bearer(t_), now, want);                                                          \
        free(t_);                                                                                  \
    } while (0)

static nf_auth_t *make(const char *sec, const char *pub, const char *jwks, const char *iss,
                       const char *aud, uint32_t skew)
{
    nf_auth_opts_t o = {.hs256_secret_file = sec,
                        .public_key_file = pub,
                        .jwks_file = jwks,
                        .issuer = iss,
                        .audience = aud,
                        .max_skew_s = skew};
    char err[512];
    nf_auth_t *a = nf_auth_new(&o, err, sizeof err);
    if (!a)
        fprintf(stderr, "nf_auth_new: %s\n", err);
    return a;
}

static const char *claims_sub(const char *sub, int64_t exp)
{
    static char buf[512];
    snprintf(buf, sizeof buf, "{\"sub\":\"%s\",\"exp\":%lld}", sub, (long long)exp);
    return buf;
}

/* ---- by hand ---- */

static void test_each_alg(void)
{
    nf_auth_t *hs = make(secret_file, NULL, NULL, NULL, NULL, 0);
    nf_auth_t *rs = make(NULL, rsa_file, NULL, NULL, NULL, 0);
    nf_auth_t *es = make("", ec_file, "", "", "", 0);
    nf_auth_t *jw = make(NULL, NULL, jwks_file, NULL, NULL, 0);
    nf_auth_t *all = make(secret_file, rsa_file, jwks_file, NULL, NULL, 0);
    NF_REQUIRE(hs && rs && es && jw && all);
    const char *c = claims_sub("alice", T0 + 300);
    char *h = sign_hs(c), *r = sign_rs(c), *e = sign_es(c);
    char *jr = sign(JWT_ALG_RS256, jrsa_priv, strlen(jrsa_priv), "r1", c);
    char *je = sign(JWT_ALG_ES256, jec_priv, strlen(jec_priv), "e1", c);
    EXPECT(hs, bearer(h), T0, 0);
    NF_CHECK_STR(g_sub, "alice");
    EXPECT(rs, bearer(r), T0, 0);
    NF_CHECK_STR(g_sub, "alice");
    EXPECT(es, bearer(e), T0, 0);
    EXPECT(jw, bearer(jr), T0, 0);
    EXPECT(jw, bearer(je), T0, 0);
    NF_CHECK_STR(g_sub, "alice");
    /* One configuration with every source: each token finds its own key. */
    EXPECT(all, bearer(h), T0, 0);
    EXPECT(all, bearer(r), T0, 0);
    EXPECT(all, bearer(jr), T0, 0);
    EXPECT(all, bearer(je), T0, 0);
    EXPECT(all, bearer(e), T0, NF_AUTH_EALG); /* no EC key without a kid there */
    /* Each key alone refuses the others' tokens, by alg before any signature. */
    EXPECT(hs, bearer(r), T0, NF_AUTH_EALG);
    EXPECT(rs, bearer(h), T0, NF_AUTH_EALG);
    EXPECT(rs, bearer(e), T0, NF_AUTH_EALG);
    EXPECT(es, bearer(r), T0, NF_AUTH_EALG);
    EXPECT(jw, bearer(h), T0, NF_AUTH_EALG);
    EXPECT(jw, bearer(r), T0, NF_AUTH_EALG); /* no kid: JWKS keys are chosen by kid */
    NF_CHECK(strstr(g_err, "kid") != NULL);
    /* sub NULL: only checked. */
    NF_CHECK_EQ(nf_auth_verify(hs, bearer(h), T0, NULL, 0, NULL, 0), 0);
    free(h), free(r), free(e), free(jr), free(je);
    nf_auth_free(hs), nf_auth_free(rs), nf_auth_free(es), nf_auth_free(jw), nf_auth_free(all);
}

static void test_alg_none(void)
{
    nf_auth_t *a = make(secret_file, rsa_file, jwks_file, NULL, NULL, 0);
    NF_REQUIRE(a);
    const char *c = claims_sub("mallory", T0 + 300);
    static const char *const heads[] = {"{\"alg\":\"none\"}", "{\"alg\":\"None\"}",
                                        "{\"alg\":\"NONE\",\"typ\":\"JWT\"}",
                                        "{\"alg\":\"none\",\"kid\":\"r1\"}"};
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
        EXPECT_TOK(a, build(heads[i], c, NULL, 0, ""), T0, NF_AUTH_EALG);
        NF_CHECK(strstr(g_err, "never") != NULL);
        EXPECT_TOK(a, build(heads[i], c, NULL, 0, "c2lnbmF0dXJl"), T0, NF_AUTH_EALG);
        EXPECT_TOK(a, build(heads[i], c, secret, strlen(secret), NULL), T0, NF_AUTH_EALG);
    }
    /* Other algorithms: not taken even when libjwt knows them, nor a spelling it would take. */
    EXPECT_TOK(a, build("{\"alg\":\"hs256\"}", c, secret, strlen(secret), NULL), T0, NF_AUTH_EALG);
    EXPECT_TOK(a, build("{\"alg\":\"HS512\"}", c, secret, strlen(secret), NULL), T0, NF_AUTH_EALG);
    EXPECT_TOK(a, build("{\"alg\":\"PS256\"}", c, secret, strlen(secret), NULL), T0, NF_AUTH_EALG);
    EXPECT_TOK(a, build("{\"alg\":\"RS384\"}", c, secret, strlen(secret), NULL), T0, NF_AUTH_EALG);
    EXPECT_TOK(a, build("{\"alg\":\"\\u0001x\"}", c, secret, strlen(secret), NULL), T0,
               NF_AUTH_EALG);
    NF_CHECK(strchr(g_err, '\001') == NULL); /* token text quoted */
    EXPECT_TOK(a, build("{\"typ\":\"JWT\"}", c, secret, strlen(secret), NULL), T0,
               NF_AUTH_EMALFORMED);
    EXPECT_TOK(a, build("{\"alg\":256}", c, secret, strlen(secret), NULL), T0, NF_AUTH_EMALFORMED);
    nf_auth_free(a);
}

/* The attack libjwt 1.10 alone falls for: alg HS256 and the RSA public key's PEM text, which the
 * attacker has, as the HMAC secret. */
static void test_alg_confusion(void)
{
    nf_auth_t *rs = make(NULL, rsa_file, NULL, NULL, NULL, 0);
    nf_auth_t *both = make(secret_file, rsa_file, NULL, NULL, NULL, 0);
    nf_auth_t *jw = make(NULL, NULL, jwks_file, NULL, NULL, 0);
    NF_REQUIRE(rs && both && jw);
    const char *c = claims_sub("mallory", T0 + 300);
    size_t pl = strlen(rsa_pub_pem);
    /* libjwt itself takes it when handed the PEM: what this module must never let happen. */
    char *forged = sign(JWT_ALG_HS256, rsa_pub_pem, pl, NULL, c);
    jwt_t *j = NULL;
    NF_CHECK_EQ(jwt_decode(&j, forged, (const unsigned char *)rsa_pub_pem, (int)pl), 0);
    jwt_free(j);
    EXPECT(rs, bearer(forged), T0, NF_AUTH_EALG);
    EXPECT(both, bearer(forged), T0, NF_AUTH_ESIGNATURE);
    /* The same with the PEM without its final newline, and with a kid of the JWKS. */
    char *forged2 = sign(JWT_ALG_HS256, rsa_pub_pem, pl - 1, NULL, c);
    EXPECT(rs, bearer(forged2), T0, NF_AUTH_EALG);
    EXPECT(both, bearer(forged2), T0, NF_AUTH_ESIGNATURE);
    EXPECT_TOK(jw, sign(JWT_ALG_HS256, rsa_pub_pem, pl, "r1", c), T0, NF_AUTH_EALG);
    /* alg of one family with a kid of the other: the key decides. */
    EXPECT_TOK(jw, sign(JWT_ALG_RS256, jrsa_priv, strlen(jrsa_priv), "e1", c), T0, NF_AUTH_EALG);
    EXPECT_TOK(jw, sign(JWT_ALG_ES256, jec_priv, strlen(jec_priv), "r1", c), T0, NF_AUTH_EALG);
    /* Two alg members: cJSON would read the first, libjwt's jansson the last. */
    EXPECT_TOK(both, build("{\"alg\":\"RS256\",\"alg\":\"HS256\"}", c, rsa_pub_pem, pl, NULL), T0,
               NF_AUTH_EMALFORMED);
    EXPECT_TOK(both,
               build("{\"alg\":\"HS256\",\"alg\":\"RS256\"}", c, secret, strlen(secret), NULL), T0,
               NF_AUTH_EMALFORMED);
    NF_CHECK(strstr(g_err, "twice") != NULL);
    /* An RS256 header over an ES256 signature: refused on the signature's length. */
    char *es = sign_es(c);
    char *mixed = build("{\"alg\":\"RS256\",\"typ\":\"JWT\"}", c, NULL, 0, strrchr(es, '.') + 1);
    EXPECT(rs, bearer(mixed), T0, NF_AUTH_ESIGNATURE);
    free(mixed), free(es), free(forged), free(forged2);
    nf_auth_free(rs), nf_auth_free(both), nf_auth_free(jw);
}

static void test_wrong_key(void)
{
    nf_auth_t *all = make(secret_file, rsa_file, jwks_file, NULL, NULL, 0);
    nf_auth_t *jw = make(NULL, NULL, jwks_file, NULL, NULL, 0);
    nf_auth_t *es = make(NULL, ec_file, NULL, NULL, NULL, 0);
    NF_REQUIRE(all && jw && es);
    const char *c = claims_sub("alice", T0 + 300);
    static const char other[] = "another secret of more than 32 bytes, not ours";
    EXPECT_TOK(all, sign(JWT_ALG_HS256, other, strlen(other), NULL, c), T0, NF_AUTH_ESIGNATURE);
    EXPECT_TOK(all, sign(JWT_ALG_RS256, rsa2_priv, strlen(rsa2_priv), NULL, c), T0,
               NF_AUTH_ESIGNATURE);
    NF_CHECK(strstr(g_err, "does not verify") != NULL);
    EXPECT_TOK(all, sign(JWT_ALG_RS256, rsa_priv, strlen(rsa_priv), "r1", c), T0,
               NF_AUTH_ESIGNATURE);
    EXPECT_TOK(es, sign(JWT_ALG_ES256, jec_priv, strlen(jec_priv), NULL, c), T0,
               NF_AUTH_ESIGNATURE);
    /* A kid the JWKS does not hold: refused, unless the PEM key is of its alg. */
    EXPECT_TOK(jw, sign(JWT_ALG_RS256, jrsa_priv, strlen(jrsa_priv), "r9", c), T0, NF_AUTH_EALG);
    NF_CHECK(strstr(g_err, "r9") != NULL);
    EXPECT_TOK(all, sign(JWT_ALG_RS256, rsa_priv, strlen(rsa_priv), "r9", c), T0, 0);
    EXPECT_TOK(jw, sign(JWT_ALG_RS256, jrsa_priv, strlen(jrsa_priv), "enc1", c), T0,
               NF_AUTH_EALG); /* skipped keys are not keys */
    EXPECT_TOK(jw, sign(JWT_ALG_HS256, "c2VjcmV0", 8, "s1", c), T0, NF_AUTH_EALG);
    /* A signature altered or cut: its length, or it does not verify. */
    char *h = sign_hs(c);
    size_t n = strlen(h);
    h[n - 2] = h[n - 2] == 'A' ? 'B' : 'A';
    EXPECT(all, bearer(h), T0, NF_AUTH_ESIGNATURE);
    h[n - 3] = '\0';
    EXPECT(all, bearer(h), T0, NF_AUTH_ESIGNATURE);
    strrchr(h, '.')[1] = '\0';
    EXPECT(all, bearer(h), T0, NF_AUTH_ESIGNATURE);
    NF_CHECK(strstr(g_err, "no signature") != NULL);
    free(h);
    nf_auth_free(all), nf_auth_free(jw), nf_auth_free(es);
}

/* Decodes the base64url signature of tok (64 bytes for ES256) into out. */
static size_t sig_bytes(const char *tok, unsigned char *out)
{
    const char *s = strrchr(tok, '.') + 1;
    BIO *b64 = BIO_new(BIO_f_base64()), *mem;
    char buf[256];
    size_t n = strlen(s), k = 0;
    for (size_t i = 0; i < n; i++)
        buf[k++] = s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
    while (k % 4)
        buf[k++] = '=';
    mem = BIO_new_mem_buf(buf, (int)k);
    BIO_set_flags(b64, BIO_FLAGS_BASE64_NO_NL);
    BIO_push(b64, mem);
    int got = BIO_read(b64, out, 512);
    BIO_free_all(b64);
    return got > 0 ? (size_t)got : 0;
}

/* ES256's twin: (r, n - s) verifies as (r, s) does, in the check here and in libjwt's. auth.h
 * says so (a token's text is no identifier); this pins it, and the DER conversion of both. */
static void test_es256_twin(void)
{
    nf_auth_t *a = make(NULL, ec_file, NULL, NULL, NULL, 0);
    NF_REQUIRE(a);
    char *t = sign_es(claims_sub("alice", T0 + 300));
    unsigned char rs[512];
    NF_REQUIRE(sig_bytes(t, rs) == 64);
    BIGNUM *n = NULL, *s = BN_bin2bn(rs + 32, 32, NULL);
    BN_hex2bn(&n, "FFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551");
    BN_sub(s, n, s);
    BN_bn2binpad(s, rs + 32, 32);
    char twin[1024];
    size_t head = (size_t)(strrchr(t, '.') - t) + 1;
    memcpy(twin, t, head);
    nf_test_b64url(rs, 64, twin + head);
    NF_CHECK(strcmp(twin, t) != 0);
    EXPECT(a, bearer(t), T0, 0);
    EXPECT(a, bearer(twin), T0, 0);
    /* r or s zero, or s = n: refused. */
    memset(rs + 32, 0, 32);
    nf_test_b64url(rs, 64, twin + head);
    EXPECT(a, bearer(twin), T0, NF_AUTH_ESIGNATURE);
    BN_bn2binpad(n, rs + 32, 32);
    nf_test_b64url(rs, 64, twin + head);
    EXPECT(a, bearer(twin), T0, NF_AUTH_ESIGNATURE);
    BN_free(n), BN_free(s), free(t);
    nf_auth_free(a);
}

static char *hs_claims(const char *fmt, long long v)
{
    char c[512];
    snprintf(c, sizeof c, fmt, v);
    return sign_hs(c);
}

/* RFC 7519 with the leeway: valid while now < exp + skew, from nbf - skew, iat <= now + skew. */
static void test_time_edges(void)
{
    nf_auth_t *a = make(secret_file, NULL, NULL, NULL, NULL, 0); /* 0: 60 s */
    nf_auth_t *b = make(secret_file, NULL, NULL, NULL, NULL, 5);
    NF_REQUIRE(a && b);
    const char *e = "{\"sub\":\"u\",\"exp\":%lld}";
    EXPECT_TOK(a, hs_claims(e, T0 - SKEW + 1), T0, 0);
    EXPECT_TOK(a, hs_claims(e, T0 - SKEW), T0, NF_AUTH_EEXPIRED);
    EXPECT_TOK(a, hs_claims(e, T0), T0, 0);
    EXPECT_TOK(b, hs_claims(e, T0 - 4), T0, 0);
    EXPECT_TOK(b, hs_claims(e, T0 - 5), T0, NF_AUTH_EEXPIRED);
    NF_CHECK_STR(g_err, "token expired at 2026-11-18T11:06:35Z (5 s leeway)");
    EXPECT_TOK(a, sign_hs("{\"sub\":\"u\",\"exp\":1794999940.5}"), T0, 0);
    EXPECT_TOK(a, sign_hs("{\"sub\":\"u\",\"exp\":1794999939.99}"), T0, NF_AUTH_EEXPIRED);
    NF_CHECK_STR(g_err, "token expired at 2026-11-18T11:05:39Z (60 s leeway)");

    const char *nbf = "{\"sub\":\"u\",\"exp\":1795000600,\"nbf\":%lld}";
    EXPECT_TOK(a, hs_claims(nbf, T0 + SKEW), T0, 0);
    EXPECT_TOK(a, hs_claims(nbf, T0 + SKEW + 1), T0, NF_AUTH_ENOT_YET_VALID);
    NF_CHECK_STR(g_err, "token not valid before 2026-11-18T11:07:41Z (60 s leeway)");
    EXPECT_TOK(b, hs_claims(nbf, T0 + 6), T0, NF_AUTH_ENOT_YET_VALID);
    EXPECT_TOK(a, hs_claims(nbf, 0), T0, 0);

    const char *iat = "{\"sub\":\"u\",\"exp\":1795000600,\"iat\":%lld}";
    EXPECT_TOK(a, hs_claims(iat, T0 + SKEW), T0, 0);
    EXPECT_TOK(a, hs_claims(iat, T0 + SKEW + 1), T0, NF_AUTH_ENOT_YET_VALID);
    NF_CHECK(strstr(g_err, "issued in the future") != NULL);
    EXPECT_TOK(a, hs_claims(iat, T0 - 86400), T0, 0);
    nf_auth_free(a), nf_auth_free(b);
}

static void test_claims(void)
{
    nf_auth_t *a = make(secret_file, NULL, NULL, "https://id.example", "newsflow", 0);
    nf_auth_t *open = make(secret_file, NULL, NULL, NULL, NULL, 0);
    NF_REQUIRE(a && open);
    static const struct {
        const char *claims;
        int want;
    } cases[] = {
        {"{\"sub\":\"u\",\"iss\":\"https://id.example\",\"aud\":\"newsflow\"}", NF_AUTH_ENO_EXPIRY},
        {"{\"sub\":\"u\",\"EXP\":1795000600,\"iss\":\"https://id.example\",\"aud\":\"newsflow\"}",
         NF_AUTH_ENO_EXPIRY},
        {"{\"sub\":\"u\",\"exp\":\"1795000600\",\"iss\":\"https://"
         "id.example\",\"aud\":\"newsflow\"}",
         NF_AUTH_ECLAIM},
        {"{\"sub\":\"u\",\"exp\":-1,\"iss\":\"https://id.example\",\"aud\":\"newsflow\"}",
         NF_AUTH_ECLAIM},
        {"{\"sub\":\"u\",\"exp\":1e300,\"iss\":\"https://id.example\",\"aud\":\"newsflow\"}",
         NF_AUTH_ECLAIM},
        {"{\"sub\":\"u\",\"exp\":1795000600,\"nbf\":null,\"iss\":\"https://id.example\","
         "\"aud\":\"newsflow\"}",
         NF_AUTH_ECLAIM},
        {"{\"sub\":\"u\",\"exp\":1795000600,\"aud\":\"newsflow\"}", NF_AUTH_EISSUER},
        {"{\"sub\":\"u\",\"exp\":1795000600,\"iss\":\"https://id.example/\",\"aud\":\"newsflow\"}",
         NF_AUTH_EISSUER},
        {"{\"sub\":\"u\",\"exp\":1795000600,\"iss\":[\"https://id.example\"],\"aud\":\"newsflow\"}",
         NF_AUTH_ECLAIM},
        {"{\"sub\":\"u\",\"exp\":1795000600,\"iss\":\"https://id.example\"}", NF_AUTH_EAUDIENCE},
        {"{\"sub\":\"u\",\"exp\":1795000600,\"iss\":\"https://id.example\",\"aud\":\"Newsflow\"}",
         NF_AUTH_EAUDIENCE},
        {"{\"sub\":\"u\",\"exp\":1795000600,\"iss\":\"https://id.example\",\"aud\":[\"a\",\"b\"]}",
         NF_AUTH_EAUDIENCE},
        {"{\"sub\":\"u\",\"exp\":1795000600,\"iss\":\"https://id.example\",\"aud\":[]}",
         NF_AUTH_EAUDIENCE},
        {"{\"sub\":\"u\",\"exp\":1795000600,\"iss\":\"https://id.example\",\"aud\":[\"a\","
         "\"newsflow\"]}",
         0},
        {"{\"sub\":\"u\",\"exp\":1795000600,\"iss\":\"https://id.example\",\"aud\":[1,"
         "\"newsflow\"]}",
         NF_AUTH_ECLAIM},
        {"{\"sub\":\"u\",\"exp\":1795000600,\"iss\":\"https://id.example\",\"aud\":7}",
         NF_AUTH_ECLAIM},
        {"{\"exp\":1795000600,\"iss\":\"https://id.example\",\"aud\":\"newsflow\"}",
         NF_AUTH_ENO_SUBJECT},
        {"{\"sub\":\"\",\"exp\":1795000600,\"iss\":\"https://id.example\",\"aud\":\"newsflow\"}",
         NF_AUTH_ENO_SUBJECT},
        {"{\"sub\":42,\"exp\":1795000600,\"iss\":\"https://id.example\",\"aud\":\"newsflow\"}",
         NF_AUTH_ENO_SUBJECT},
        {"{\"sub\":\"a\\nb\",\"exp\":1795000600,\"iss\":\"https://"
         "id.example\",\"aud\":\"newsflow\"}",
         NF_AUTH_ENO_SUBJECT},
        {"{\"sub\":\"caf\\u00e9\",\"exp\":1795000600,\"iss\":\"https://id.example\",\"aud\":"
         "\"newsflow\"}",
         0},
        {"{\"sub\":\"al\\u0000ice\",\"exp\":1795000600,\"iss\":\"https://id.example\",\"aud\":"
         "\"newsflow\"}",
         NF_AUTH_EMALFORMED},
    };
    /* Put together here: jansson (libjwt's signing) refuses \u0000 and would reorder. */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *t = build_hs("{\"alg\":\"HS256\",\"typ\":\"JWT\"}", cases[i].claims);
        if (expect_at(__FILE__, __LINE__, a, bearer(t), T0, cases[i].want) != cases[i].want)
            fprintf(stderr, "  case %zu: %s\n", i, cases[i].claims);
        free(t);
    }
    /* Without issuer and audience configured, any iss and aud (even of odd types) go. */
    EXPECT_TOK(open, sign_hs("{\"sub\":\"u\",\"exp\":1795000600,\"iss\":5,\"aud\":{}}"), T0, 0);
    /* sub: at most NF_AUTH_SUB_MAX bytes, and at most what the caller's buffer holds. */
    char claims[1024], longsub[NF_AUTH_SUB_MAX + 2];
    memset(longsub, 's', sizeof longsub);
    longsub[NF_AUTH_SUB_MAX] = '\0';
    snprintf(claims, sizeof claims, "{\"sub\":\"%s\",\"exp\":1795000600}", longsub);
    char *t = sign_hs(claims);
    EXPECT(open, bearer(t), T0, 0);
    NF_CHECK_EQ(strlen(g_sub), NF_AUTH_SUB_MAX);
    char small[16], err[256];
    NF_CHECK_EQ(nf_auth_verify(open, bearer(t), T0, small, sizeof small, err, sizeof err),
                NF_AUTH_ENO_SUBJECT);
    NF_CHECK(small[0] == '\0' && strstr(err, "at most 15") != NULL);
    free(t);
    longsub[NF_AUTH_SUB_MAX] = 's';
    longsub[NF_AUTH_SUB_MAX + 1] = '\0';
    snprintf(claims, sizeof claims, "{\"sub\":\"%s\",\"exp\":1795000600}", longsub);
    EXPECT_TOK(open, sign_hs(claims), T0, NF_AUTH_ENO_SUBJECT);
    nf_auth_free(a), nf_auth_free(open);
}

static void test_malformed(void)
{
    nf_auth_t *a = make(secret_file, rsa_file, NULL, NULL, NULL, 0);
    NF_REQUIRE(a);
    const char *c = claims_sub("u", T0 + 300);
    const char *hdr = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";
    char *good = build_hs(hdr, c);
    EXPECT(a, bearer(good), T0, 0);
    static const char *const bad[] = {
        "abc",
        "abc.def",
        "a.b.c.d",
        "a.b.c.d.e",
        ".eyJ9.c2ln",
        "eyJ9..c2ln",
        "..",
        "eyJhbGciOiJIUzI1NiJ9.eyJ9.c2ln=",
        "eyJ+bGci.eyJ9.c2ln",
        "eyJ/bGci.eyJ9.c2ln",
        "eyJhbGciOiJIUzI1NiJ9.e!J9.c2ln",
        "eyJhbGciOiJIUzI1NiJ9.eyJ9.c2l\x01",
        "eyJhbGciOiJIUzI1NiJ9.eyJ9.c", /* 1 mod 4 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        EXPECT(a, bearer(bad[i]), T0, NF_AUTH_EMALFORMED);
    /* Not canonical: "eyJ9" is "{}"; "eyJ9" with the unused bits of a 2-byte tail set. */
    EXPECT_TOK(a, build_hs("{\"alg\":\"HS256\"}", "{}"), T0, NF_AUTH_ENO_EXPIRY);
    char *t = build_hs("{\"alg\":\"HS256\"}", "{}");
    char *p = strchr(t, '.') + 1; /* "e30" = "{}": 2 bytes, 2 unused bits in '0' */
    NF_CHECK(strncmp(p, "e30.", 4) == 0);
    p[2] = '1';
    EXPECT(a, bearer(t), T0, NF_AUTH_EMALFORMED);
    NF_CHECK(strstr(g_err, "canonical") != NULL);
    free(t);
    /* JSON that is not one object, signed as it should be. */
    EXPECT_TOK(a, build_hs(hdr, "not json"), T0, NF_AUTH_EMALFORMED);
    EXPECT_TOK(a, build_hs(hdr, "[1,2]"), T0, NF_AUTH_EMALFORMED);
    EXPECT_TOK(a, build_hs(hdr, "{\"sub\":\"u\"} {}"), T0, NF_AUTH_EMALFORMED);
    EXPECT_TOK(a, build_hs("{\"alg\":\"HS256\"", c), T0, NF_AUTH_EMALFORMED);
    EXPECT_TOK(a, build_hs("\"HS256\"", c), T0, NF_AUTH_EMALFORMED);
    EXPECT_TOK(a, build_hs("{\"alg\":\"HS256\",\"crit\":[\"b64\"],\"b64\":false}", c), T0,
               NF_AUTH_EMALFORMED);
    /* typ: refused here because libjwt 1.10 refuses it (RFC 9068's at+jwt included). */
    char *at = build_hs("{\"alg\":\"HS256\",\"typ\":\"at+jwt\"}", c);
    jwt_t *j = NULL;
    NF_CHECK(jwt_decode(&j, at, (const unsigned char *)secret, (int)strlen(secret)) != 0);
    jwt_free(j);
    EXPECT(a, bearer(at), T0, NF_AUTH_EMALFORMED);
    free(at);
    EXPECT_TOK(a, build_hs("{\"alg\":\"HS256\",\"typ\":\"jwt\"}", c), T0, 0);
    EXPECT_TOK(a, build_hs("{\"alg\":\"HS256\",\"kid\":7}", c), T0, NF_AUTH_EMALFORMED);
    EXPECT_TOK(
        a, build_hs("{\"alg\":\"HS256\"}", "{\"sub\":\"u\",\"sub\":\"admin\",\"exp\":1795000600}"),
        T0, NF_AUTH_EMALFORMED);
    /* Invalid UTF-8 in a claim: cJSON takes it, libjwt's jansson does not. */
    EXPECT_TOK(a, build_hs(hdr, "{\"sub\":\"u\",\"exp\":1795000600,\"n\":\"\xff\"}"), T0,
               NF_AUTH_EMALFORMED);
    NF_CHECK(strstr(g_err, "libjwt") != NULL);
    /* Nesting past the bound. */
    char deep[600];
    memset(deep, 0, sizeof deep);
    strcpy(deep, "{\"sub\":\"u\",\"exp\":1795000600,\"x\":");
    size_t dl = strlen(deep);
    for (int i = 0; i < 40; i++)
        deep[dl + (size_t)i] = '[';
    for (int i = 0; i < 40; i++)
        deep[dl + 40 + (size_t)i] = ']';
    deep[dl + 80] = '}';
    EXPECT_TOK(a, build_hs(hdr, deep), T0, NF_AUTH_EMALFORMED);
    NF_CHECK(strstr(g_err, "deeper") != NULL);
    free(good);
    nf_auth_free(a);
}

/* A header with a NUL byte inside its JSON (b64url of bytes with a 0). */
static void test_nul_bytes(void)
{
    nf_auth_t *a = make(secret_file, NULL, NULL, NULL, NULL, 0);
    NF_REQUIRE(a);
    static const unsigned char head[] = "{\"alg\":\"HS256\"}\0{\"alg\":\"none\"}";
    char hb[128], pb[128], tok[512];
    nf_test_b64url(head, sizeof head - 1, hb);
    const char *c = claims_sub("u", T0 + 300);
    nf_test_b64url((const unsigned char *)c, strlen(c), pb);
    int n = snprintf(tok, sizeof tok, "%s.%s", hb, pb);
    unsigned char md[32];
    unsigned mdlen = 0;
    HMAC(EVP_sha256(), secret, (int)strlen(secret), (unsigned char *)tok, (size_t)n, md, &mdlen);
    tok[n] = '.';
    nf_test_b64url(md, mdlen, tok + n + 1);
    EXPECT(a, bearer(tok), T0, NF_AUTH_EMALFORMED);
    NF_CHECK(strstr(g_err, "NUL") != NULL);
    nf_auth_free(a);
}

static void test_scheme(void)
{
    nf_auth_t *a = make(secret_file, NULL, NULL, NULL, NULL, 0);
    NF_REQUIRE(a);
    char *t = sign_hs(claims_sub("bob", T0 + 300));
    char v[2048];
    EXPECT(a, NULL, T0, NF_AUTH_EMISSING);
    EXPECT(a, "", T0, NF_AUTH_EMISSING);
    EXPECT(a, " \t ", T0, NF_AUTH_EMISSING);
    EXPECT(a, "Basic dXNlcjpwYXNz", T0, NF_AUTH_ESCHEME);
    NF_CHECK(strstr(g_err, "Basic") != NULL);
    EXPECT(a, "Bearer", T0, NF_AUTH_EMALFORMED);
    EXPECT(a, "Bearer   ", T0, NF_AUTH_EMALFORMED);
    static const char *const ok[] = {"Bearer %s",     "bearer %s",    "BEARER %s",  "BeArEr\t%s",
                                     "  Bearer %s  ", "Bearer    %s", "Bearer %s\t"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        snprintf(v, sizeof v, ok[i], t);
        EXPECT(a, v, T0, 0);
        NF_CHECK_STR(g_sub, "bob");
    }
    static const char *const scheme[] = {"Bearer%s", "Token %s", "Bearers %s", "JWT %s", "Bear %s"};
    for (size_t i = 0; i < sizeof scheme / sizeof scheme[0]; i++) {
        snprintf(v, sizeof v, scheme[i], t);
        EXPECT(a, v, T0, NF_AUTH_ESCHEME);
    }
    snprintf(v, sizeof v, "Bearer %s %s", t, t);
    EXPECT(a, v, T0, NF_AUTH_EMALFORMED);
    snprintf(v, sizeof v, "Bearer \"%s\"", t);
    EXPECT(a, v, T0, NF_AUTH_EMALFORMED);
    free(t);
    nf_auth_free(a);
}

/* max_token_bytes counts the whole header value, refused before any parsing. */
static void test_limits(void)
{
    char err[256];
    nf_auth_opts_t o = {.hs256_secret_file = secret_file, .max_token_bytes = 600};
    nf_auth_t *a = nf_auth_new(&o, err, sizeof err);
    nf_auth_t *d = make(secret_file, NULL, NULL, NULL, NULL, 0);
    NF_REQUIRE(a && d);
    /* A token padded by a claim until "Bearer " + token is exactly 600 bytes. */
    char pad[600], claims[800];
    char *t = NULL;
    for (size_t k = 300; k < 500 && !t; k++) {
        memset(pad, 'p', k);
        pad[k] = '\0';
        snprintf(claims, sizeof claims, "{\"sub\":\"u\",\"exp\":1795000600,\"p\":\"%s\"}", pad);
        char *s = sign_hs(claims);
        if (strlen(s) + 7 == 600)
            t = s;
        else
            free(s);
    }
    NF_REQUIRE(t);
    EXPECT(a, bearer(t), T0, 0);
    char v[700];
    snprintf(v, sizeof v, "Bearer %s ", t); /* 601: even trailing space counts */
    EXPECT(a, v, T0, NF_AUTH_ETOO_LONG);
    free(t);
    /* The default: 8192. A huge header (64 KiB of 'A') is refused as too long, not parsed. */
    static char huge[NF_AUTH_TOKEN_DEFAULT + 64];
    memset(huge, 'A', sizeof huge - 1);
    memcpy(huge, "Bearer ", 7);
    huge[NF_AUTH_TOKEN_DEFAULT] = '\0';
    EXPECT(d, huge, T0, NF_AUTH_EMALFORMED); /* exactly 8192: parsed, one part */
    huge[NF_AUTH_TOKEN_DEFAULT] = 'A';
    huge[NF_AUTH_TOKEN_DEFAULT + 1] = '\0';
    EXPECT(d, huge, T0, NF_AUTH_ETOO_LONG);
    NF_CHECK(strstr(g_err, "8192") != NULL);
    nf_auth_free(a), nf_auth_free(d);
    /* Options out of range. */
    nf_auth_opts_t big = {.hs256_secret_file = secret_file, .max_token_bytes = 1 << 20};
    NF_CHECK(nf_auth_new(&big, err, sizeof err) == NULL && err[0]);
    nf_auth_opts_t skew = {.hs256_secret_file = secret_file, .max_skew_s = 86400};
    NF_CHECK(nf_auth_new(&skew, err, sizeof err) == NULL && err[0]);
}

/* nf_auth_new refuses, naming the file and what is wrong. */
static void expect_refused(const nf_auth_opts_t *o, const char *needle, int line)
{
    char err[1024] = "";
    nf_auth_t *a = nf_auth_new(o, err, sizeof err);
    if (a || !err[0] || (needle && !strstr(err, needle))) {
        fprintf(stderr, "%s:%d: nf_auth_new: %s (\"%s\"), want a refusal naming \"%s\"\n", __FILE__,
                line, a ? "taken" : "refused", err, needle ? needle : "");
        nf_test_failed_checks++;
    }
    nf_auth_free(a);
}

static void expect_jwks_refused(const char *json, const char *needle, int line)
{
    char path[128];
    path_in(path, sizeof path, "bad.jwks");
    write_file(path, json, strlen(json));
    nf_auth_opts_t o = {.jwks_file = path};
    expect_refused(&o, needle, line);
}

static void test_load_errors(void)
{
    nf_auth_opts_t none = {0};
    expect_refused(&none, "no key", __LINE__);
    nf_auth_opts_t missing = {.hs256_secret_file = "/nonexistent/secret"};
    expect_refused(&missing, "/nonexistent/secret", __LINE__);
    char p[128];
    path_in(p, sizeof p, "short");
    write_file(p, "0123456789abcdef0123456789abcde\n", 32); /* 31 bytes and a newline */
    nf_auth_opts_t shortsec = {.hs256_secret_file = p};
    expect_refused(&shortsec, "31 bytes", __LINE__);
    write_file(p, "0123456789abcdef0123456789abcdef\r\n", 34); /* 32: taken */
    nf_auth_t *a = nf_auth_new(&shortsec, NULL, 0);
    NF_CHECK(a != NULL);
    nf_auth_free(a);

    nf_auth_opts_t priv = {.public_key_file = p};
    write_file(p, rsa_priv, strlen(rsa_priv));
    expect_refused(&priv, "private key", __LINE__);
    write_file(p, "hello", 5);
    expect_refused(&priv, "BEGIN PUBLIC KEY", __LINE__);
    EVP_PKEY *small = EVP_RSA_gen(1024), *p384 = EVP_EC_gen("P-384");
    write_pub("small.pem", small, p, sizeof p);
    expect_refused(&priv, "1024 bits", __LINE__);
    write_pub("p384.pem", p384, p, sizeof p);
    expect_refused(&priv, "EC secp384r1", __LINE__);

    char k[2048], json[4200];
    expect_jwks_refused("{\"keys\": [", "not JSON", __LINE__);
    expect_jwks_refused("{\"kids\": []}", "no \"keys\"", __LINE__);
    expect_jwks_refused("{\"keys\": [{\"kty\":\"oct\",\"k\":\"c2VjcmV0\",\"kid\":\"s\"}]}",
                        "no RS256 or ES256", __LINE__);
    expect_jwks_refused("{\"keys\": [7]}", "keys[0]", __LINE__);
    jwk_rsa(jrsa, "", "", k, sizeof k);
    snprintf(json, sizeof json, "{\"keys\":[%s]}", k);
    expect_jwks_refused(json, "no kid", __LINE__);
    jwk_rsa(jrsa, "same", "", k, sizeof k);
    snprintf(json, sizeof json, "{\"keys\":[%s,%s]}", k, k);
    expect_jwks_refused(json, "again", __LINE__);
    jwk_rsa(small, "small", "", k, sizeof k);
    snprintf(json, sizeof json, "{\"keys\":[%s]}", k);
    expect_jwks_refused(json, "1024 bits", __LINE__);
    expect_jwks_refused("{\"keys\":[{\"kty\":\"RSA\",\"kid\":\"x\",\"n\":\"a+b\",\"e\":\"AQAB\"}]}",
                        "\"n\"", __LINE__);
    expect_jwks_refused("{\"keys\":[{\"kty\":\"RSA\",\"kid\":\"x\",\"n\":\"AQAB\"}]}", "no \"e\"",
                        __LINE__);
    /* A point off the curve: y + 1. */
    jwk_ec(jec, "e", "P-256", k, sizeof k);
    char *y = strstr(k, "\"y\":\"") + 5;
    y[10] = y[10] == 'A' ? 'B' : 'A';
    snprintf(json, sizeof json, "{\"keys\":[%s]}", k);
    expect_jwks_refused(json, "P-256", __LINE__);
    expect_jwks_refused("{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"x\",\"x\":\"AQAB\","
                        "\"y\":\"AQAB\"}]}",
                        "32 bytes", __LINE__);
    EVP_PKEY_free(small), EVP_PKEY_free(p384);
}

static void test_sign_and_names(void)
{
    nf_auth_t *a = make(secret_file, NULL, NULL, "https://id.example", "newsflow", 0);
    nf_auth_t *rs = make(NULL, rsa_file, jwks_file, NULL, NULL, 0);
    NF_REQUIRE(a && rs);
    char tok[1024];
    int n = nf_auth_sign_hs256(a, "carol", T0 + 60, tok, sizeof tok);
    NF_CHECK(n > 0 && (size_t)n == strlen(tok));
    EXPECT(a, bearer(tok), T0, 0);
    NF_CHECK_STR(g_sub, "carol");
    EXPECT(a, bearer(tok), T0 + 60 + SKEW, NF_AUTH_EEXPIRED);
    NF_CHECK_EQ(nf_auth_sign_hs256(a, "carol", T0, tok, (size_t)n), -ENOSPC);
    NF_CHECK_EQ(nf_auth_sign_hs256(a, "", T0, tok, sizeof tok), -EINVAL);
    NF_CHECK_EQ(nf_auth_sign_hs256(rs, "carol", T0, tok, sizeof tok), -1);

    static const char *const names[NF_AUTH_NERRORS] = {
        "ok",     "missing",   "scheme",     "too_long", "malformed",
        "alg",    "signature", "no_expiry",  "expired",  "not_yet_valid",
        "issuer", "audience",  "no_subject", "claim",    "internal"};
    for (int i = 0; i < NF_AUTH_NERRORS; i++)
        NF_CHECK_STR(nf_auth_error_name(-i), names[i]);
    NF_CHECK_STR(nf_auth_error_name(1), "unknown");
    NF_CHECK_STR(nf_auth_error_name(-NF_AUTH_NERRORS), "unknown");
    NF_CHECK_EQ(NF_AUTH_EINTERNAL, -(NF_AUTH_NERRORS - 1));

    char d[512];
    nf_auth_describe(rs, d, sizeof d);
    NF_CHECK(strstr(d, "RS256 public key (2048 bits)") && strstr(d, "r1 RS256") &&
             strstr(d, "e1 ES256") && strstr(d, "3 skipped"));
    nf_auth_describe(a, d, sizeof d);
    NF_CHECK(strstr(d, "HS256 secret (41 bytes)") && strstr(d, "iss checked") &&
             !strstr(d, secret));
    nf_auth_free(a), nf_auth_free(rs);
}

/* ---- properties ---- */

/* What auth.h says of a claim set (NULL fields absent), the configuration being
 * iss "https://id.example", aud "newsflow", leeway 60. */
typedef struct claimset {
    bool has_exp, has_nbf, has_iat;
    int64_t exp, nbf, iat;
    const char *iss, *aud, *sub; /* aud: JSON text */
} claimset_t;

static int model(const claimset_t *c, int64_t now)
{
    if (!c->has_exp)
        return NF_AUTH_ENO_EXPIRY;
    if (now >= c->exp + SKEW)
        return NF_AUTH_EEXPIRED;
    if (c->has_nbf && now < c->nbf - SKEW)
        return NF_AUTH_ENOT_YET_VALID;
    if (c->has_iat && c->iat > now + SKEW)
        return NF_AUTH_ENOT_YET_VALID;
    if (!c->iss || strcmp(c->iss, "https://id.example") != 0)
        return NF_AUTH_EISSUER;
    if (!c->aud || !strstr(c->aud, "\"newsflow\""))
        return NF_AUTH_EAUDIENCE;
    if (!c->sub || !*c->sub)
        return NF_AUTH_ENO_SUBJECT;
    return 0;
}

static void claims_json(const claimset_t *c, char *out, size_t outlen)
{
    size_t o = (size_t)snprintf(out, outlen, "{\"jti\":\"x\"");
    if (c->has_exp)
        o += (size_t)snprintf(out + o, outlen - o, ",\"exp\":%lld", (long long)c->exp);
    if (c->has_nbf)
        o += (size_t)snprintf(out + o, outlen - o, ",\"nbf\":%lld", (long long)c->nbf);
    if (c->has_iat)
        o += (size_t)snprintf(out + o, outlen - o, ",\"iat\":%lld", (long long)c->iat);
    if (c->iss)
        o += (size_t)snprintf(out + o, outlen - o, ",\"iss\":\"%s\"", c->iss);
    if (c->aud)
        o += (size_t)snprintf(out + o, outlen - o, ",\"aud\":%s", c->aud);
    if (c->sub)
        o += (size_t)snprintf(out + o, outlen - o, ",\"sub\":\"%s\"", c->sub);
    snprintf(out + o, outlen - o, "}");
}

/* A token of a random key source for claims: HS256, the PEM's RS256, or a JWKS kid. */
static char *sign_any(uint64_t r, const char *claims)
{
    switch (r % 4) {
    case 0:
        return sign_hs(claims);
    case 1:
        return sign_rs(claims);
    case 2:
        return sign(JWT_ALG_RS256, jrsa_priv, strlen(jrsa_priv), "r1", claims);
    default:
        return sign(JWT_ALG_ES256, jec_priv, strlen(jec_priv), "e1", claims);
    }
}

static void test_property_claims(void)
{
    nf_auth_t *a = make(secret_file, rsa_file, jwks_file, "https://id.example", "newsflow", 0);
    NF_REQUIRE(a);
    static const char *const isss[] = {NULL, "https://id.example", "https://other.example", ""};
    static const char *const auds[] = {
        NULL, "\"newsflow\"", "\"other\"", "[\"x\",\"newsflow\"]", "[\"x\"]", "[]"};
    static const char *const subs[] = {NULL, "", "u1", "reader-42", "\\u00e9l\\u00e8ve"};
    uint64_t seed = 20261118;
    int counts[NF_AUTH_NERRORS] = {0};
    for (int i = 0; i < 400; i++) {
        claimset_t c = {0};
        uint64_t r = nf_test_rand(&seed);
        c.has_exp = r % 10 != 0, c.has_nbf = r / 10 % 2, c.has_iat = r / 20 % 2;
        c.exp = T0 + (int64_t)(nf_test_rand(&seed) % 401) - 200;
        c.nbf = T0 + (int64_t)(nf_test_rand(&seed) % 401) - 200;
        c.iat = T0 + (int64_t)(nf_test_rand(&seed) % 401) - 200;
        c.iss = isss[r / 40 % 8 < 5 ? 1 : r / 40 % 4];
        c.aud = auds[r / 320 % 12 < 6 ? 1 : r / 320 % 6];
        c.sub = subs[r / 3840 % 10 < 6 ? 3 : r / 3840 % 5];
        char claims[512];
        claims_json(&c, claims, sizeof claims);
        int64_t now = T0 + (int64_t)(nf_test_rand(&seed) % 121) - 60;
        int want = model(&c, now);
        char *t = sign_any(nf_test_rand(&seed), claims);
        if (expect_at(__FILE__, __LINE__, a, bearer(t), now, want) != want)
            fprintf(stderr, "  case %d at %lld: %s\n", i, (long long)now, claims);
        counts[-want]++;
        free(t);
    }
    /* The generator reaches every outcome it can. */
    static const int reached[] = {0,
                                  NF_AUTH_ENO_EXPIRY,
                                  NF_AUTH_EEXPIRED,
                                  NF_AUTH_ENOT_YET_VALID,
                                  NF_AUTH_EISSUER,
                                  NF_AUTH_EAUDIENCE,
                                  NF_AUTH_ENO_SUBJECT};
    for (size_t i = 0; i < sizeof reached / sizeof reached[0]; i++)
        NF_CHECK(counts[-reached[i]] > 0);
    nf_auth_free(a);
}

/* The cache of verified tokens answers as a full verification would: each token checked at
 * many times around its exp, nbf and iat edges, in random order (a success is cached, later
 * checks may hit it), agrees with the model every time. */
static void test_property_cache(void)
{
    nf_auth_t *a = make(secret_file, rsa_file, jwks_file, "https://id.example", "newsflow", 0);
    NF_REQUIRE(a);
    uint64_t seed = 20261129;
    int hits_possible = 0;
    for (int i = 0; i < 200; i++) {
        claimset_t c = {
            .has_exp = true, .iss = "https://id.example", .aud = "\"newsflow\"", .sub = "r-7"};
        uint64_t r = nf_test_rand(&seed);
        c.has_nbf = r % 2, c.has_iat = r / 2 % 2;
        c.exp = T0 + (int64_t)(nf_test_rand(&seed) % 121) - 60;
        c.nbf = T0 + (int64_t)(nf_test_rand(&seed) % 121) - 60;
        c.iat = T0 + (int64_t)(nf_test_rand(&seed) % 121) - 60;
        char claims[512];
        claims_json(&c, claims, sizeof claims);
        char *t = sign_any(nf_test_rand(&seed), claims);
        for (int k = 0; k < 12; k++) {
            int64_t now = T0 + (int64_t)(nf_test_rand(&seed) % 301) - 150;
            int want = model(&c, now);
            hits_possible += want == 0;
            if (expect_at(__FILE__, __LINE__, a, bearer(t), now, want) != want)
                fprintf(stderr, "  token %d check %d at %lld: %s\n", i, k, (long long)now, claims);
        }
        free(t);
    }
    NF_CHECK(hits_possible > 200); /* the same valid token is checked again and again */
    nf_auth_free(a);
}

/* Every token with one byte changed (to another base64url byte or a dot) or cut short is
 * refused: one spelling per token, a signature over every byte. */
static void test_property_mutations(void)
{
    nf_auth_t *a = make(secret_file, rsa_file, jwks_file, NULL, NULL, 0);
    NF_REQUIRE(a);
    const char *c = claims_sub("alice", T0 + 300);
    char *toks[4] = {sign_hs(c), sign_rs(c),
                     sign(JWT_ALG_ES256, jec_priv, strlen(jec_priv), "e1", c),
                     sign(JWT_ALG_RS256, jrsa_priv, strlen(jrsa_priv), "r1", c)};
    static const char repl[] = "AQgw-_.9";
    uint64_t seed = 7;
    size_t tried = 0;
    for (int k = 0; k < 4; k++) {
        char *t = toks[k];
        size_t n = strlen(t);
        EXPECT(a, bearer(t), T0, 0);
        for (size_t i = 0; i < n; i++) {
            char was = t[i];
            for (int m = 0; m < 2; m++) {
                char to = repl[nf_test_rand(&seed) % (sizeof repl - 1)];
                if (to == was)
                    continue;
                t[i] = to;
                memset(g_err, 0, sizeof g_err);
                int rc = nf_auth_verify(a, bearer(t), T0, g_sub, sizeof g_sub, g_err, sizeof g_err);
                if (rc == 0 || !g_err[0]) {
                    fprintf(stderr, "token %d byte %zu '%c' -> '%c' gave %d \"%s\"\n", k, i, was,
                            to, rc, g_err);
                    nf_test_failed_checks++;
                }
                tried++;
            }
            t[i] = was;
        }
        for (size_t cut = 0; cut < n; cut += 1 + nf_test_rand(&seed) % 4) {
            char was = t[cut];
            t[cut] = '\0';
            NF_CHECK(nf_auth_verify(a, bearer(t), T0, g_sub, sizeof g_sub, g_err, sizeof g_err) <
                         0 &&
                     g_err[0]);
            t[cut] = was;
            tried++;
        }
        free(t);
    }
    fprintf(stderr, "  %zu altered tokens refused\n", tried);
    nf_auth_free(a);
}

/* Random bytes and random base64url-and-dots strings: refused with a message, never taken. */
static void test_property_random(void)
{
    nf_auth_t *a = make(secret_file, rsa_file, jwks_file, NULL, NULL, 0);
    NF_REQUIRE(a);
    uint64_t seed = 99;
    static const char alpha[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_..";
    char v[1200];
    for (int i = 0; i < 5000; i++) {
        size_t n = nf_test_rand(&seed) % 1100, o = 0;
        if (i % 2)
            o = (size_t)snprintf(v, sizeof v, "Bearer ");
        for (; o < n; o++) {
            uint64_t r = nf_test_rand(&seed);
            v[o] = i % 4 < 2 ? (char)(1 + r % 255) : alpha[r % (sizeof alpha - 1)];
        }
        v[o] = '\0';
        int rc = nf_auth_verify(a, v, T0, g_sub, sizeof g_sub, g_err, sizeof g_err);
        if (rc >= 0 || rc <= -NF_AUTH_NERRORS || !g_err[0]) {
            fprintf(stderr, "random %d gave %d \"%s\"\n", i, rc, g_err);
            nf_test_failed_checks++;
        }
    }
    nf_auth_free(a);
}

/* ---- threads ---- */

typedef struct tcase {
    char authz[2048];
    int want;
    char sub[32];
} tcase_t;

static nf_auth_t *g_shared;
static tcase_t g_cases[12];
static int g_ncases;

static void *verifier(void *arg)
{
    uintptr_t bad = 0;
    uint64_t seed = (uint64_t)(uintptr_t)arg;
    char sub[NF_AUTH_SUB_MAX + 1], err[256];
    for (int i = 0; i < 300; i++) {
        const tcase_t *c = &g_cases[nf_test_rand(&seed) % (uint64_t)g_ncases];
        int rc = nf_auth_verify(g_shared, c->authz, T0, sub, sizeof sub, err, sizeof err);
        if (rc != c->want || (rc == 0 && strcmp(sub, c->sub) != 0) || (rc != 0 && !err[0]))
            bad++;
    }
    return (void *)bad;
}

static void add_case(char *tok, int want, const char *sub)
{
    tcase_t *c = &g_cases[g_ncases++];
    snprintf(c->authz, sizeof c->authz, "Bearer %s", tok);
    c->want = want;
    snprintf(c->sub, sizeof c->sub, "%s", sub);
    free(tok);
}

static void test_threads(void)
{
    g_shared = make(secret_file, rsa_file, jwks_file, NULL, NULL, 0);
    NF_REQUIRE(g_shared);
    add_case(sign_hs(claims_sub("t-hs", T0 + 300)), 0, "t-hs");
    add_case(sign_rs(claims_sub("t-rs", T0 + 300)), 0, "t-rs");
    add_case(sign(JWT_ALG_ES256, jec_priv, strlen(jec_priv), "e1", claims_sub("t-es", T0 + 300)), 0,
             "t-es");
    add_case(sign(JWT_ALG_RS256, jrsa_priv, strlen(jrsa_priv), "r1", claims_sub("t-jr", T0 + 300)),
             0, "t-jr");
    add_case(sign_hs(claims_sub("old", T0 - 300)), NF_AUTH_EEXPIRED, "");
    add_case(sign(JWT_ALG_RS256, rsa2_priv, strlen(rsa2_priv), NULL, claims_sub("x", T0 + 300)),
             NF_AUTH_ESIGNATURE, "");
    add_case(sign(JWT_ALG_HS256, rsa_pub_pem, strlen(rsa_pub_pem), NULL, claims_sub("x", T0 + 300)),
             NF_AUTH_ESIGNATURE, "");
    add_case(build("{\"alg\":\"none\"}", claims_sub("x", T0 + 300), NULL, 0, ""), NF_AUTH_EALG, "");
    add_case(strdup("a.b"), NF_AUTH_EMALFORMED, "");
    for (int i = 0; i < g_ncases; i++) /* one thread first: the reference */
        EXPECT(g_shared, g_cases[i].authz, T0, g_cases[i].want);
    pthread_t th[4];
    for (uintptr_t i = 0; i < 4; i++)
        NF_REQUIRE(pthread_create(&th[i], NULL, verifier, (void *)(i + 1)) == 0);
    uintptr_t bad = 0;
    for (int i = 0; i < 4; i++) {
        void *r = NULL;
        pthread_join(th[i], &r);
        bad += (uintptr_t)r;
    }
    NF_CHECK_EQ(bad, 0);
    nf_auth_free(g_shared);
}

int main(void)
{
    setup();
    NF_RUN(test_each_alg);
    NF_RUN(test_alg_none);
    NF_RUN(test_alg_confusion);
    NF_RUN(test_wrong_key);
    NF_RUN(test_es256_twin);
    NF_RUN(test_time_edges);
    NF_RUN(test_claims);
    NF_RUN(test_malformed);
    NF_RUN(test_nul_bytes);
    NF_RUN(test_scheme);
    NF_RUN(test_limits);
    NF_RUN(test_load_errors);
    NF_RUN(test_sign_and_names);
    NF_RUN(test_property_claims);
    NF_RUN(test_property_cache);
    NF_RUN(test_property_mutations);
    NF_RUN(test_property_random);
    NF_RUN(test_threads);
    teardown();
    return nf_test_report();
}
