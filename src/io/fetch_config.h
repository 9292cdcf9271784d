/* fetch_config.h — the fetcher settings of the job's configuration (fetch.*), built in one place
 * so `newsflow run` and `newsflow parse URL` fetch exactly alike. */
#ifndef NF_IO_FETCH_CONFIG_H
#define NF_IO_FETCH_CONFIG_H

#include "io/addrguard.h"
#include "io/fetch.h"
#include "runtime/config.h"

#include <stddef.h>

/* Fills o from cfg->fetch and guard from fetch.allow_private (o->guard = guard). The strings
 * in o point into cfg, which must outlive them. 0, or -1 with a message in err that names the
 * offending fetch.allow_private entry. */
int nf_fetch_opts_from_config(const nf_config_t *cfg, nf_fetch_opts_t *o, nf_addrguard_t *guard,
                              char *err, size_t errlen);

#endif
