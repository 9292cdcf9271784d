/* auth.h — verifies the JSON Web Token of a reader's request (`Authorization: Bearer <JWT>`): a
 * user-scoped route answers only for the token's subject (invariant I-10: docs/ARCHITECTURE.md §4,
 * "Who may ask").
 *
 * The keys are the operator's, read once by nf_auth_new: an HS256 secret, a PEM public key
 * (RSA for RS256 or EC P-256 for ES256) and a JWKS file (RSA and EC P-256 keys, chosen by the
 * token's "kid"). The token never chooses how it is checked. Its header is read here first
 * (strict base64url, one JSON object, no duplicate member) and names an algorithm that must be
 * one a configured key is for: HS256 only with the secret, RS256 only with an RSA key, ES256
 * only with a P-256 key; "none" and every other algorithm are always refused. Without this an
 * HS256 token would be checked by libjwt with the PEM text of an RSA key as its HMAC secret
 * (algorithm confusion). The key is picked in this order:
 *   HS256            the secret;
 *   RS256, ES256     the JWKS key named by kid, when the token has a kid and the JWKS holds it
 *                    (of the token's algorithm: else refused); else the PEM key when it is of
 *                    the token's algorithm; else refused (an unknown kid, or no key for alg).
 * Only then is the signature checked, twice: here with OpenSSL and the key parsed at load (an
 * HMAC compared in constant time), then by libjwt 1.10 (jwt_decode), and the algorithm libjwt
 * decoded must be the one chosen (it reads the header with its own JSON parser).
 * The claims are read after the signature holds, never before: exp is required, nbf and iat
 * are honoured when present, each with max_skew_s of leeway:
 *   expired          now >= exp + skew
 *   not yet valid    now <  nbf - skew, or iat > now + skew
 *   iss, aud         when configured: iss equal; aud equal, or an array holding it (when no
 *                    audience is configured, a token's aud is not looked at: configure one
 *                    wherever tokens are issued for several services, RFC 7519 §4.1.3)
 *   sub              required: 1..NF_AUTH_SUB_MAX bytes of UTF-8 without control characters
 *                    (a user id of the query API)
 * exp, nbf and iat are NumericDates (JSON numbers, fractions allowed) in [0, 253402300799].
 * Every part of the token must be canonical base64url without padding, and a signature the
 * length its algorithm gives (HS256 32 bytes, RS256 the modulus, ES256 64): one spelling per
 * signature. (An ES256 signature (r, s) has a twin (r, n - s) that verifies too, and issuers
 * do not all make the low one: a token's text is no identifier.) Tokens with a "crit" header,
 * or a typ other than JWT (libjwt 1.10 refuses those), are refused as malformed. JWKS "oct"
 * keys are never read: HS256 comes from the secret file alone.
 *
 * Messages: every refusal writes one line into err for the 401 body, naming what failed in the
 * token (`token expired at 2026-11-29T10:00:00Z (60 s leeway)`); text taken from the token is
 * quoted with anything but printable ASCII as '?', and cut. They name no configured issuer,
 * audience or secret. nf_auth_error_name gives the metric label of a code.
 *
 * Verified tokens are remembered (4,096 of them, by the SHA-256 of their text): the same text
 * within its exp/nbf/iat window is answered with its subject by a hash and a compare, whatever
 * its algorithm; a refusal is never remembered.
 *
 * Costs: a first verification allocates (the token's copy, two cJSON trees, libjwt's own objects);
 * it runs on the admin server's connection threads, not on a shard. libjwt 1.10 parses the PEM
 * key again for every RS256/ES256 token, which OpenSSL 3.0's decoders make ~0.6 ms: a first
 * verification of a valid RS256 token costs ~0.7 ms of CPU and an ES256 one ~1 ms (two threads
 * do 1.6-2.2 times one's), an HS256 one ~18 us; the same token again, from the cache, under
 * 1 us (perf/README "HTTP edge and authentication", bench_auth). A forged signature is refused
 * by the first check (RS256 ~40 us, ES256 ~100 us), so libjwt's cost is not an attacker's lever.
 *
 * Threads: nf_auth_new and nf_auth_free on one thread, before and after every other call;
 * nf_auth_verify, nf_auth_sign_hs256 and nf_auth_describe from any number of threads at once
 * on one nf_auth_t (it is read-only after nf_auth_new but for the cache of verified tokens,
 * behind its own mutex; libjwt 1.10's decode keeps its state
 * per call, with OpenSSL 3 and jansson under it; cJSON only notes a failed parse's position
 * in a global that nothing here reads); nf_auth_error_name from anywhere. */
#ifndef NF_AUTH_H
#define NF_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define NF_AUTH_SUB_MAX       256   /* bytes of sub, as USER_ID_MAX in query.c */
#define NF_AUTH_KID_MAX       256   /* bytes of a kid */
#define NF_AUTH_SECRET_MIN    32    /* bytes of an HS256 secret (RFC 7518 §3.2: the hash size) */
#define NF_AUTH_TOKEN_DEFAULT 8192  /* max_token_bytes when 0 */
#define NF_AUTH_TOKEN_MAX     65536 /* max_token_bytes at most: libjwt alloca()s each part */
#define NF_AUTH_SKEW_DEFAULT  60    /* max_skew_s when 0 */
#define NF_AUTH_SKEW_MAX      3600  /* max_skew_s at most: more would make exp meaningless */
#define NF_AUTH_RSA_BITS_MIN  2048  /* smaller RSA keys are refused at load */
#define NF_AUTH_FILE_MAX      (1 << 20) /* bytes of a key or JWKS file */

typedef struct nf_auth_opts {
    const char *hs256_secret_file; /* "" or NULL: none. The file's bytes (a trailing newline, or
                                      CRLF, stripped) are the HMAC key; < 32 bytes refused */
    const char *public_key_file;   /* PEM public key (BEGIN PUBLIC KEY): RSA (RS256, >= 2048
                                      bits) or EC P-256 (ES256); "" or NULL: none */
    const char *jwks_file;         /* a JWKS JSON file ({"keys": [...]}): RSA (n, e) and EC P-256
                                      (x, y) keys with a kid, selected by the token's kid; keys of
                                      other types or curves, "use" other than "sig" or "alg"
                                      other than RS256/ES256 are skipped; "" or NULL: none */
    const char *issuer;            /* "" or NULL: iss not checked, else must equal */
    const char *audience;          /* "" or NULL: aud not checked, else must equal (string or
                                      member of an array) */
    uint32_t max_skew_s;           /* leeway on exp/nbf/iat, NF_AUTH_SKEW_DEFAULT when 0 */
    uint32_t max_token_bytes;      /* NF_AUTH_TOKEN_DEFAULT when 0: longer Authorization values
                                      are refused before any parsing */
} nf_auth_opts_t;

typedef struct nf_auth nf_auth_t;

/* What nf_auth_verify returns: 0 or one of these (stable: metric labels and tests use them). */
typedef enum nf_auth_error {
    NF_AUTH_OK = 0,
    NF_AUTH_EMISSING = -1,       /* no Authorization value, or only whitespace */
    NF_AUTH_ESCHEME = -2,        /* a scheme other than Bearer (Basic, ...) */
    NF_AUTH_ETOO_LONG = -3,      /* longer than max_token_bytes */
    NF_AUTH_EMALFORMED = -4,     /* Bearer without a token, not three base64url parts, a header
                                    or payload that is not one JSON object (for cJSON and for
                                    libjwt's jansson), crit, typ */
    NF_AUTH_EALG = -5,           /* alg none, an alg no configured key is for, an unknown kid */
    NF_AUTH_ESIGNATURE = -6,     /* the signature's length, or it does not verify */
    NF_AUTH_ENO_EXPIRY = -7,     /* no exp */
    NF_AUTH_EEXPIRED = -8,       /* now >= exp + skew */
    NF_AUTH_ENOT_YET_VALID = -9, /* now < nbf - skew, or iat > now + skew */
    NF_AUTH_EISSUER = -10,       /* iss missing or not the configured issuer */
    NF_AUTH_EAUDIENCE = -11,     /* aud missing or not naming the configured audience */
    NF_AUTH_ENO_SUBJECT = -12,   /* sub missing, not a string, empty, too long (for
                                    NF_AUTH_SUB_MAX or sublen), control characters, bad UTF-8 */
    NF_AUTH_ECLAIM = -13,        /* exp, nbf, iat, iss or aud of the wrong JSON type or range */
    NF_AUTH_EINTERNAL = -14,     /* out of memory */
} nf_auth_error_t;
#define NF_AUTH_NERRORS 15 /* codes 0 .. -14 */

/* Reads the configured files. NULL when nothing is configured, a file cannot be read, or a key
 * is refused (too short, too small, wrong curve, not a public key, a JWKS without a usable key,
 * a duplicate kid), with a message in err naming the file and what is wrong. */
nf_auth_t *nf_auth_new(const nf_auth_opts_t *o, char *err, size_t errlen);
void nf_auth_free(nf_auth_t *a);

/* Verifies an Authorization header value (NUL-terminated; NULL is "missing") at now_s (unix
 * seconds). 0 with the token's sub in sub[0..sublen) (NUL-terminated; sub may be NULL to only
 * check); else an nf_auth_error_t with one line in err (when errlen > 0; never empty) and sub
 * empty. "Bearer" is matched without regard to case; spaces or tabs separate it from the
 * token, and surrounding ones are ignored. Never crashes, on any input. */
int nf_auth_verify(const nf_auth_t *a, const char *authorization, int64_t now_s, char *sub,
                   size_t sublen, char *err, size_t errlen);

/* The metric label of an nf_auth_verify result: "ok", "missing", "scheme", "too_long",
 * "malformed", "alg", "signature", "no_expiry", "expired", "not_yet_valid", "issuer",
 * "audience", "no_subject", "claim", "internal"; "unknown" for anything else. */
const char *nf_auth_error_name(int rc);

/* A token for tests and the demo page: HS256 with the configured secret, claims sub, exp,
 * and iss and aud when configured (so that nf_auth_verify takes it until exp + skew). The
 * token's length, NUL-terminated in out; -1 (-EPERM) without an HS256 secret, -EINVAL for an
 * empty sub, -ENOSPC when out is too small, -ENOMEM. */
int nf_auth_sign_hs256(const nf_auth_t *a, const char *sub, int64_t exp_s, char *out,
                       size_t outlen);

/* One line for the start-up log: the keys (kinds, sizes, kids), issuer and audience checks and
 * the leeway. Returns what snprintf would. */
int nf_auth_describe(const nf_auth_t *a, char *out, size_t outlen);

#endif
