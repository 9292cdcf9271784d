/* ratelimit.c — see ratelimit.h. */
#include "serve/ratelimit.h"

#include "algo/hash.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#define STRIPES 16
#define PROBE   8 /* slots looked at for a key; the idlest of them is reused */

typedef struct bucket {
    uint64_t key; /* 0: empty */
    uint64_t last_ns;
    double tokens;
} bucket_t;

typedef struct stripe {
    pthread_mutex_t mu;
    bucket_t *slots;
} stripe_t;

struct nf_ratelimit {
    double rate, burst;
    size_t mask; /* slots per stripe - 1 */
    stripe_t s[STRIPES];
};

nf_ratelimit_t *nf_ratelimit_new(double rate, double burst, size_t max_keys)
{
    if (!(rate > 0) || !(burst >= 1))
        return NULL;
    size_t per = 64;
    while (per * STRIPES < max_keys)
        per *= 2;
    nf_ratelimit_t *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->rate = rate;
    l->burst = burst;
    l->mask = per - 1;
    for (int i = 0; i < STRIPES; i++) {
        pthread_mutex_init(&l->s[i].mu, NULL);
        if (!(l->s[i].slots = calloc(per, sizeof(bucket_t)))) {
            nf_ratelimit_free(l);
            return NULL;
        }
    }
    return l;
}

void nf_ratelimit_free(nf_ratelimit_t *l)
{
    if (!l)
        return;
    for (int i = 0; i < STRIPES; i++) {
        free(l->s[i].slots);
        pthread_mutex_destroy(&l->s[i].mu);
    }
    free(l);
}

/* key's bucket in the stripe: found in its window of PROBE slots, else a new full one in the
 * window's first empty slot, else in its idlest. */
static bucket_t *find(nf_ratelimit_t *l, stripe_t *s, uint64_t key, uint64_t now_ns)
{
    bucket_t *victim = NULL;
    for (size_t i = 0; i < PROBE; i++) {
        bucket_t *b = &s->slots[(key + i) & l->mask];
        if (b->key == key)
            return b;
        bool better =
            !victim || (victim->key != 0 && (b->key == 0 || b->last_ns < victim->last_ns));
        if (better)
            victim = b;
    }
    *victim = (bucket_t){.key = key, .last_ns = now_ns, .tokens = l->burst};
    return victim;
}

bool nf_ratelimit_take(nf_ratelimit_t *l, const char *key, size_t keylen, double cost,
                       uint64_t now_ns, unsigned *retry_after_s)
{
    uint64_t h = nf_hash64(key, keylen, 0x726174656c696d74ull) | 1; /* never 0: empty */
    stripe_t *s = &l->s[h >> 60]; /* the high bits: the low ones pick the slot */
    pthread_mutex_lock(&s->mu);
    bucket_t *b = find(l, s, h, now_ns);
    if (now_ns > b->last_ns) {
        b->tokens = fmin(l->burst, b->tokens + (double)(now_ns - b->last_ns) / 1e9 * l->rate);
        b->last_ns = now_ns;
    }
    bool ok = b->tokens >= cost;
    if (ok)
        b->tokens -= cost;
    double wait = ok ? 0 : (fmin(cost, l->burst) - b->tokens) / l->rate;
    pthread_mutex_unlock(&s->mu);
    if (!ok && retry_after_s)
        *retry_after_s = wait < 1 ? 1 : (unsigned)ceil(wait);
    return ok;
}
