/* failpoint.c — NEWSFLOW_FAILPOINTS, read once (see failpoint.h). */
#include "runtime/failpoint.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char *listed; /* a copy of the variable, or NULL; never freed (process lifetime) */

static void load(void)
{
    const char *v = getenv(NF_FAILPOINTS_ENV);
    if (v && *v)
        listed = strdup(v); /* NULL on no memory: no failpoint, as when unset */
}

bool nf_failpoint(const char *name)
{
    pthread_once(&once, load);
    size_t n = strlen(name);
    for (const char *p = listed; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && n > 0 && memcmp(p, name, n) == 0)
            return true;
        p += len + (p[len] == ',');
    }
    return false;
}

long nf_failpoint_value(const char *name)
{
    pthread_once(&once, load);
    size_t n = strlen(name);
    for (const char *p = listed; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len > n + 1 && n > 0 && memcmp(p, name, n) == 0 && p[n] == '=') {
            long v = 0;
            size_t i = n + 1;
            for (; i < len && p[i] >= '0' && p[i] <= '9' && v < (1L << 31); i++)
                v = v * 10 + (p[i] - '0');
            return i == len && v < (1L << 31) ? v : -1;
        }
        p += len + (p[len] == ',');
    }
    return -1;
}
