/* fetch_config.c — see fetch_config.h. */
#include "io/fetch_config.h"

#include <stdio.h>
#include <string.h>

int nf_fetch_opts_from_config(const nf_config_t *cfg, nf_fetch_opts_t *o, nf_addrguard_t *guard,
                              char *err, size_t errlen)
{
    nf_fetch_opts_default(o);
    o->user_agent = cfg->fetch.user_agent;
    o->connect_timeout_ms = cfg->fetch.connect_timeout_ms;
    o->total_timeout_ms = cfg->fetch.total_timeout_ms;
    o->low_speed_bytes = cfg->fetch.low_speed_bytes;
    o->low_speed_time_s = cfg->fetch.low_speed_time_s;
    o->max_redirects = cfg->fetch.max_redirects;
    o->body_max_bytes = cfg->fetch.body_max_bytes;
    o->allow_file = cfg->fetch.allow_file;

    nf_addrguard_init(guard);
    unsigned idx = 0;
    for (const char *it = cfg->fetch.allow_private; *it; idx++) {
        size_t l = strcspn(it, "\n");
        char item[1024];
        snprintf(item, sizeof item, "%.*s", (int)l, it);
        if (nf_addrguard_allow(guard, item) != 0) {
            snprintf(err, errlen,
                     "fetch.allow_private[%u]: \"%.200s\" is not an IP address or CIDR (or more "
                     "than %d entries)",
                     idx, item, NF_ADDRGUARD_MAX_ALLOW);
            return -1;
        }
        it += l + (it[l] == '\n');
    }
    o->guard = guard;
    return 0;
}
