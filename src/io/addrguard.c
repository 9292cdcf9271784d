/* addrguard.c — see addrguard.h. Everything is compared in the 128-bit IPv6 form (IPv4 as
 * ::ffff:a.b.c.d), so one table of special ranges covers both families and mapped forms. */
#include "io/addrguard.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *cidr;
    const char *what;
} special_t;

/* Refused unless allowed. IPv4 entries are given in IPv4 notation and mapped. */
static const special_t specials[] = {
    {"0.0.0.0/8", "unspecified/\"this network\""},
    {"10.0.0.0/8", "private"},
    {"100.64.0.0/10", "carrier-grade NAT"},
    {"127.0.0.0/8", "loopback"},
    {"169.254.0.0/16", "link-local"},
    {"172.16.0.0/12", "private"},
    {"192.0.0.0/24", "IETF protocol assignment"},
    {"192.0.2.0/24", "documentation"},
    {"192.168.0.0/16", "private"},
    {"198.18.0.0/15", "benchmarking"},
    {"198.51.100.0/24", "documentation"},
    {"203.0.113.0/24", "documentation"},
    {"224.0.0.0/4", "multicast"},
    {"240.0.0.0/4", "reserved"},
    {"::/128", "unspecified"},
    {"::1/128", "loopback"},
    {"64:ff9b:1::/48", "local-use NAT64"},
    {"100::/64", "discard-only"},
    {"2001:db8::/32", "documentation"},
    {"fc00::/7", "unique local (private)"},
    {"fe80::/10", "link-local"},
    {"ff00::/8", "multicast"},
};

static int parse_cidr(const char *s, nf_cidr_t *out)
{
    char buf[64];
    size_t n = strlen(s);
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, s, n + 1);
    char *slash = strchr(buf, '/');
    long prefix = -1;
    if (slash) {
        *slash = '\0';
        char *end;
        prefix = strtol(slash + 1, &end, 10);
        if (*end || end == slash + 1 || prefix < 0)
            return -1;
    }
    struct in_addr a4;
    struct in6_addr a6;
    memset(out, 0, sizeof *out);
    if (inet_pton(AF_INET, buf, &a4) == 1) {
        if (prefix > 32)
            return -1;
        out->addr[10] = 0xff;
        out->addr[11] = 0xff;
        memcpy(out->addr + 12, &a4, 4);
        out->prefix = (uint8_t)(96 + (prefix < 0 ? 32 : prefix));
        return 0;
    }
    if (inet_pton(AF_INET6, buf, &a6) == 1) {
        if (prefix > 128)
            return -1;
        memcpy(out->addr, &a6, 16);
        out->prefix = (uint8_t)(prefix < 0 ? 128 : prefix);
        return 0;
    }
    return -1;
}

static bool in_cidr(const uint8_t addr[16], const nf_cidr_t *c)
{
    unsigned full = c->prefix / 8, rest = c->prefix % 8;
    if (memcmp(addr, c->addr, full) != 0)
        return false;
    if (rest == 0)
        return true;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (addr[full] & mask) == (c->addr[full] & mask);
}

void nf_addrguard_init(nf_addrguard_t *g)
{
    memset(g, 0, sizeof *g);
}

int nf_addrguard_allow(nf_addrguard_t *g, const char *cidr)
{
    if (g->nallow >= NF_ADDRGUARD_MAX_ALLOW)
        return -1;
    if (parse_cidr(cidr, &g->allow[g->nallow]) != 0)
        return -1;
    g->nallow++;
    return 0;
}

bool nf_addrguard_check(const nf_addrguard_t *g, const struct sockaddr *sa, char *why,
                        size_t whylen)
{
    uint8_t addr[16] = {0};
    char text[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        addr[10] = addr[11] = 0xff;
        memcpy(addr + 12, &in->sin_addr, 4);
        inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        memcpy(addr, &in6->sin6_addr, 16);
        inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
    } else {
        snprintf(why, whylen, "address family %d is not IP", sa->sa_family);
        return false;
    }
    for (unsigned i = 0; i < g->nallow; i++)
        if (in_cidr(addr, &g->allow[i]))
            return true;
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) {
        nf_cidr_t c;
        if (parse_cidr(specials[i].cidr, &c) == 0 && in_cidr(addr, &c)) {
            snprintf(why, whylen, "%s is %s (%s); allow it with fetch.allow_private", text,
                     specials[i].what, specials[i].cidr);
            return false;
        }
    }
    /* Other IPv4-compatible/translated IPv6 forms that embed an IPv4 address (NAT64
     * 64:ff9b::/96): judge the embedded address. */
    static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
    if (memcmp(addr, nat64, 12) == 0) {
        struct sockaddr_in v4 = {.sin_family = AF_INET};
        memcpy(&v4.sin_addr, addr + 12, 4);
        return nf_addrguard_check(g, (const struct sockaddr *)&v4, why, whylen);
    }
    return true;
}
