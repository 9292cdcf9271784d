/* addrguard.h — which network addresses the fetcher may connect to.
 *
 * Feeds come from the open web, so a feed URL (or a redirect) must not reach the machine's own
 * services or the private network: loopback, private (RFC 1918, fc00::/7), link-local (incl. the
 * cloud metadata address 169.254.169.254), unspecified, carrier-grade NAT, multicast, broadcast,
 * documentation/benchmark and reserved ranges are refused, including the same addresses written
 * as IPv4-mapped IPv6. The operator may allow ranges back (fetch.allow_private, a list of CIDRs;
 * the tests allow 127.0.0.0/8). The check runs on the resolved address of every connection
 * curl opens, so DNS answers and redirects cannot get around it. */
#ifndef NF_ADDRGUARD_H
#define NF_ADDRGUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define NF_ADDRGUARD_MAX_ALLOW 32

typedef struct nf_cidr {
    uint8_t addr[16]; /* IPv4 stored as IPv4-mapped IPv6 */
    uint8_t prefix;   /* over the 128-bit form */
} nf_cidr_t;

typedef struct nf_addrguard {
    nf_cidr_t allow[NF_ADDRGUARD_MAX_ALLOW];
    unsigned nallow;
} nf_addrguard_t;

void nf_addrguard_init(nf_addrguard_t *g);
/* Adds an allowed range ("127.0.0.0/8", "::1/128", "10.1.2.3"). 0, or -1 if unparsable/full. */
int nf_addrguard_allow(nf_addrguard_t *g, const char *cidr);
/* true if sa may be connected to; otherwise false with a reason such as
 * "127.0.0.1 is loopback (allow it with fetch.allow_private)". */
bool nf_addrguard_check(const nf_addrguard_t *g, const struct sockaddr *sa, char *why,
                        size_t whylen);

#endif
