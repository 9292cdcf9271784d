/* url.h — URL resolution (RFC 3986 §5) and normalization for article identity.
 *
 * Two feeds linking the same story with different spellings of its URL must yield the same
 * article_id. Normalization (docs/feeds.md): scheme and host lower-cased, IDN host to punycode
 * (libidn2, IDNA 2008 with transitional fallback), default port (80/443) dropped, dot segments
 * removed, empty path -> "/", percent-encoding upper-cased and unreserved characters decoded,
 * fragment removed, tracking query parameters dropped (utm_*, fbclid, gclid, dclid, msclkid,
 * mc_cid, mc_eid, igshid, yclid, _ga, _hsenc, _hsmi, ref_src; the list is in url.c), the other
 * parameters kept in their order (empty ones, as in "a=1&&b=2", dropped; "?" dropped when no
 * parameter is left). Host: percent-decoded, trailing dot removed, IPv6 literals kept in
 * brackets and lower-cased, userinfo kept. Only http and https URLs normalize; others are an
 * error. Results longer than NF_URL_MAX - 1 bytes are NF_URL_E_TOO_LONG whatever outlen is.
 * No allocation except inside libidn2 for non-ASCII hosts. Thread-safe, no global state. */
#ifndef NF_URL_H
#define NF_URL_H

#include <stddef.h>

#define NF_URL_MAX 4096

typedef enum {
    NF_URL_OK = 0,
    NF_URL_E_EMPTY = -1,
    NF_URL_E_SYNTAX = -2,   /* not parseable as a URL */
    NF_URL_E_SCHEME = -3,   /* not http(s) */
    NF_URL_E_HOST = -4,     /* missing or invalid host (IDN conversion failed) */
    NF_URL_E_PORT = -5,     /* port not a number in 1..65535 */
    NF_URL_E_TOO_LONG = -6, /* result does not fit the output buffer */
} nf_url_err_t;

/* Resolves ref against an absolute base. ref may itself be absolute. Leading/trailing
 * whitespace in ref is ignored. Writes a NUL-terminated URL; returns its length or an
 * nf_url_err_t. base may be NULL or empty, then ref must be absolute. Pure RFC 3986 §5.2
 * (strict: "http:g" stays as is), for any scheme; the fragment is kept and nothing is
 * normalized beyond dot-segment removal. NF_URL_E_SYNTAX when nothing absolute results. */
int nf_url_resolve(const char *base, const char *ref, char *out, size_t outlen);

/* Normalizes an absolute http(s) URL as described above. Returns length or nf_url_err_t
 * (NF_URL_E_SYNTAX for a relative reference). Idempotent. */
int nf_url_normalize(const char *url, char *out, size_t outlen);

/* article_id of a normalized URL: lower-case hex of the first 16 bytes of its SHA-256. */
void nf_url_article_id(const char *normalized, char out[33]);

const char *nf_url_strerror(int err);

#endif
