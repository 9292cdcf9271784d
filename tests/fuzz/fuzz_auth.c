/* fuzz_auth.c — libFuzzer target for a reader's Authorization header (src/serve/auth.h):
 * nf_auth_verify on one nf_auth_t with an HS256 secret, an RSA public key and a JWKS of one
 * P-256 key (kid "e1") configured, iss "fuzz-issuer" and aud "newsflow" checked. The keys are
 * made at the first input (the RSA and EC keys by OpenSSL) and their files removed once read.
 *
 * A signature cannot be guessed, so the first byte of an input says how the rest is used:
 *   0x00..0x7f  the Authorization value itself, as a client sends it;
 *   0x80..0xbf  a payload: signed here (HS256, the configured secret) under {"alg":"HS256"},
 *               so the claim checks behind the signature are reached;
 *   0xc0..0xff  a header: signed here with the secret over a payload that is valid at T0.
 *
 * abort()s when the contract breaks:
 *   - the result is 0 or one of nf_auth_error_t, and the same input gives the same result and
 *     message twice;
 *   - a refusal has a non-empty NUL-terminated message and an empty sub; an acceptance has a
 *     sub of 1..NF_AUTH_SUB_MAX bytes without control characters;
 *   - a signed header is accepted only when it is one JSON object whose alg is exactly "HS256"
 *     (never none, RS256 or ES256 over an HMAC: algorithm confusion);
 *   - a signed payload is accepted only when it is one JSON object with a numeric exp still
 *     valid at T0 (with the 60 s leeway), iss "fuzz-issuer", and sub equal to what is given. */
#include "serve/auth.h"
#include "testb64.h"

#include <cjson/cJSON.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define T0 1795000000
static const char secret[] = "fuzz-secret-0123456789abcdef0123456789";
static const char valid_payload[] =
    "{\"sub\":\"reader-1\",\"exp\":1795000600,\"iss\":\"fuzz-issuer\",\"aud\":\"newsflow\"}";
static nf_auth_t *auth;

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_auth: %s\n", what);
    abort();
}

static void require(int ok, const char *what)
{
    if (!ok)
        fail(what);
}

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    require(f && fwrite(p, 1, n, f) == n && fclose(f) == 0, "writing a key file");
}

static void b64_param(EVP_PKEY *pk, const char *name, char *out)
{
    BIGNUM *bn = NULL;
    unsigned char buf[64];
    require(EVP_PKEY_get_bn_param(pk, name, &bn) == 1, "an EC coordinate");
    BN_bn2binpad(bn, buf, 32);
    nf_test_b64url(buf, 32, out);
    BN_free(bn);
}

static void setup(void)
{
    char dir[] = "/tmp/nf_fuzz_auth_XXXXXX", sec[64], pub[64], jwks[64];
    require(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(sec, sizeof sec, "%s/secret", dir);
    snprintf(pub, sizeof pub, "%s/rsa.pem", dir);
    snprintf(jwks, sizeof jwks, "%s/jwks.json", dir);
    write_file(sec, secret, strlen(secret));
    EVP_PKEY *rsa = EVP_RSA_gen(2048), *ec = EVP_EC_gen("P-256");
    require(rsa && ec, "key generation");
    FILE *f = fopen(pub, "wb");
    require(f && PEM_write_PUBKEY(f, rsa) == 1 && fclose(f) == 0, "writing the RSA key");
    char x[64], y[64], json[512];
    b64_param(ec, OSSL_PKEY_PARAM_EC_PUB_X, x);
    b64_param(ec, OSSL_PKEY_PARAM_EC_PUB_Y, y);
    int n = snprintf(json, sizeof json,
                     "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"e1\",\"x\":\"%s\","
                     "\"y\":\"%s\"}]}",
                     x, y);
    write_file(jwks, json, (size_t)n);
    nf_auth_opts_t o = {.hs256_secret_file = sec,
                        .public_key_file = pub,
                        .jwks_file = jwks,
                        .issuer = "fuzz-issuer",
                        .audience = "newsflow"};
    char err[512];
    auth = nf_auth_new(&o, err, sizeof err);
    if (!auth)
        fail(err);
    unlink(sec), unlink(pub), unlink(jwks), rmdir(dir);
    EVP_PKEY_free(rsa), EVP_PKEY_free(ec);
}

/* "Bearer " + b64url(header) "." b64url(payload) "." HMAC-SHA256 with the secret. malloc'd. */
static char *signed_value(const char *header, size_t hl, const char *payload, size_t pl)
{
    char *v = malloc(7 + (hl + pl) * 4 / 3 + 64);
    memcpy(v, "Bearer ", 7);
    char *t = v + 7;
    nf_test_b64url((const unsigned char *)header, hl, t);
    size_t n = strlen(t);
    t[n++] = '.';
    nf_test_b64url((const unsigned char *)payload, pl, t + n);
    n += strlen(t + n);
    unsigned char md[32];
    unsigned mdlen = 0;
    HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)t, n, md, &mdlen);
    t[n++] = '.';
    nf_test_b64url(md, mdlen, t + n);
    return v;
}

/* The verdict, checked for the promises every input keeps (and twice the same). */
static int verify(const char *value, char *sub)
{
    char err[512], err2[512], sub2[NF_AUTH_SUB_MAX + 1];
    memset(err, 0x55, sizeof err);
    int rc = nf_auth_verify(auth, value, T0, sub, NF_AUTH_SUB_MAX + 1, err, sizeof err);
    require(rc <= 0 && rc > -NF_AUTH_NERRORS, "the result is 0 or an nf_auth_error_t");
    require(strcmp(nf_auth_error_name(rc), "unknown") != 0, "every result has a name");
    require(memchr(err, '\0', sizeof err) != NULL, "the message is NUL-terminated");
    if (rc) {
        require(err[0] != '\0', "a refusal has a message");
        require(sub[0] == '\0', "a refusal leaves sub empty");
    } else {
        size_t n = strlen(sub);
        require(n >= 1 && n <= NF_AUTH_SUB_MAX, "an accepted sub has 1..NF_AUTH_SUB_MAX bytes");
        for (size_t i = 0; i < n; i++)
            require((unsigned char)sub[i] >= 0x20 && sub[i] != 0x7f, "no control byte in sub");
    }
    int rc2 = nf_auth_verify(auth, value, T0, sub2, sizeof sub2, err2, sizeof err2);
    require(rc2 == rc && strcmp(sub, sub2) == 0, "the same input verifies the same twice");
    require(rc == 0 || strcmp(err, err2) == 0, "the same message twice");
    return rc;
}

static const cJSON *member(const cJSON *o, const char *name)
{
    return cJSON_GetObjectItemCaseSensitive(o, name);
}

/* An accepted header: one object, alg exactly HS256 (what the HMAC was made with). */
static void check_header(const char *h, size_t n)
{
    cJSON *j = cJSON_ParseWithLength(h, n);
    const cJSON *alg = member(j, "alg");
    require(cJSON_IsObject(j) && cJSON_IsString(alg) && strcmp(alg->valuestring, "HS256") == 0,
            "an HMAC-signed header was accepted with an alg other than HS256");
    cJSON_Delete(j);
}

/* An accepted payload: exp valid at T0, the issuer, and the sub given back. */
static void check_payload(const char *p, size_t n, const char *sub)
{
    cJSON *j = cJSON_ParseWithLength(p, n);
    const cJSON *exp = member(j, "exp"), *iss = member(j, "iss"), *s = member(j, "sub");
    require(cJSON_IsObject(j), "an accepted payload is an object");
    require(cJSON_IsNumber(exp) && (double)T0 < exp->valuedouble + 60, "accepted after exp");
    require(cJSON_IsString(iss) && strcmp(iss->valuestring, "fuzz-issuer") == 0,
            "accepted with another issuer");
    require(cJSON_IsString(s) && strcmp(s->valuestring, sub) == 0, "sub is the token's sub");
    cJSON_Delete(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!auth)
        setup();
    if (size == 0)
        return 0;
    const char *rest = (const char *)data + 1;
    size_t n = size - 1;
    char sub[NF_AUTH_SUB_MAX + 1];
    char *value;
    if (data[0] < 0x80) {
        value = malloc(n + 1);
        memcpy(value, rest, n);
        value[n] = '\0';
        verify(value, sub);
    } else if (data[0] < 0xc0) {
        static const char head[] = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";
        value = signed_value(head, sizeof head - 1, rest, n);
        if (verify(value, sub) == 0)
            check_payload(rest, n, sub);
    } else {
        value = signed_value(rest, n, valid_payload, sizeof valid_payload - 1);
        if (verify(value, sub) == 0)
            check_header(rest, n);
    }
    free(value);
    return 0;
}
