/* Tests src/io/addrguard.c: every special range refused (IPv4, IPv6, IPv4-mapped, NAT64),
 * public addresses allowed, allow-list CIDRs re-admit exactly their range. */
#include "io/addrguard.h"
#include "nf_test.h"

#include <arpa/inet.h>
#include <netinet/in.h>

static bool check(const nf_addrguard_t *g, const char *ip, char *why, size_t n)
{
    struct sockaddr_in v4 = {.sin_family = AF_INET};
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6};
    if (inet_pton(AF_INET, ip, &v4.sin_addr) == 1)
        return nf_addrguard_check(g, (struct sockaddr *)&v4, why, n);
    if (inet_pton(AF_INET6, ip, &v6.sin6_addr) == 1)
        return nf_addrguard_check(g, (struct sockaddr *)&v6, why, n);
    fprintf(stderr, "bad test address %s\n", ip);
    return true;
}

static void test_refused_ranges(void)
{
    nf_addrguard_t g;
    nf_addrguard_init(&g);
    const char *refused[] = {"127.0.0.1",
                             "127.255.255.254",
                             "10.0.0.1",
                             "172.16.0.1",
                             "172.31.255.255",
                             "192.168.1.1",
                             "169.254.169.254",
                             "0.0.0.0",
                             "100.64.0.1",
                             "224.0.0.1",
                             "255.255.255.255",
                             "::1",
                             "::",
                             "fe80::1",
                             "fc00::1",
                             "fd12:3456::1",
                             "::ffff:127.0.0.1",
                             "::ffff:10.1.2.3",
                             "64:ff9b::a00:1",
                             "ff02::1"};
    char why[160];
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        why[0] = 0;
        bool ok = check(&g, refused[i], why, sizeof why);
        if (ok)
            fprintf(stderr, "  %s was allowed\n", refused[i]);
        NF_CHECK(!ok);
        NF_CHECK(strstr(why, "allow it with fetch.allow_private") != NULL);
    }
    check(&g, "127.0.0.1", why, sizeof why);
    NF_CHECK(strstr(why, "127.0.0.1 is loopback") != NULL);
    check(&g, "169.254.169.254", why, sizeof why);
    NF_CHECK(strstr(why, "link-local") != NULL);
}

static void test_public_allowed(void)
{
    nf_addrguard_t g;
    nf_addrguard_init(&g);
    const char *ok[] = {"93.184.216.34", "8.8.8.8",        "172.32.0.1",      "11.0.0.1",
                        "2606:4700::1",  "::ffff:8.8.8.8", "64:ff9b::808:808"};
    char why[160];
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        bool r = check(&g, ok[i], why, sizeof why);
        if (!r)
            fprintf(stderr, "  %s refused: %s\n", ok[i], why);
        NF_CHECK(r);
    }
}

static void test_allow_list(void)
{
    nf_addrguard_t g;
    nf_addrguard_init(&g);
    NF_CHECK_EQ(nf_addrguard_allow(&g, "127.0.0.0/8"), 0);
    NF_CHECK_EQ(nf_addrguard_allow(&g, "fd00::/8"), 0);
    NF_CHECK_EQ(nf_addrguard_allow(&g, "10.1.2.3"), 0);
    NF_CHECK_EQ(nf_addrguard_allow(&g, "10.0.0.0/33"), -1);
    NF_CHECK_EQ(nf_addrguard_allow(&g, "nonsense"), -1);
    NF_CHECK_EQ(nf_addrguard_allow(&g, "/8"), -1);
    char why[160];
    NF_CHECK(check(&g, "127.0.0.1", why, sizeof why));
    NF_CHECK(check(&g, "::ffff:127.0.0.2", why, sizeof why));
    NF_CHECK(check(&g, "fd12::1", why, sizeof why));
    NF_CHECK(check(&g, "10.1.2.3", why, sizeof why));
    NF_CHECK(!check(&g, "10.1.2.4", why, sizeof why));
    NF_CHECK(!check(&g, "::1", why, sizeof why)); /* IPv6 loopback not in the list */
}

int main(void)
{
    NF_RUN(test_refused_ranges);
    NF_RUN(test_public_allowed);
    NF_RUN(test_allow_list);
    return nf_test_report();
}
