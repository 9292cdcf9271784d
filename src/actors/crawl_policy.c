/* crawl_policy.c — see crawl_policy.h. Everything here is arithmetic on the caller's structs;
 * the asserts state the invariants the actor relies on (next_crawl_at > now after an update,
 * in-flight never above the limit). Delays are computed in int64 milliseconds; every input that
 * could overflow (Retry-After from the network, a huge interval_s) is capped before it is
 * multiplied. */
#include "actors/crawl_policy.h"

#include "io/fetch.h"

#include <assert.h>
#include <string.h>

nf_crawl_policy_t nf_crawl_policy_default(void)
{
    return (nf_crawl_policy_t){
        .interval_default_ms = 15 * 60 * 1000,
        .interval_floor_ms = 5 * 60 * 1000,
        .interval_ceiling_ms = 24 * 3600 * 1000,
        .jitter_permille = 100,
        .backoff_base_ms = 60 * 1000,
        .backoff_cap_ms = 6 * 3600 * 1000,
        .dead_after_failures = 10,
        .permanent_failure_weight = 2,
        .host_max_concurrent = 2,
        .host_spacing_ms = 1000,
        .breaker_failures = 5,
        .breaker_window_ms = 60 * 1000,
        .breaker_open_ms = 60 * 1000,
        .breaker_open_max_ms = 10 * 60 * 1000,
    };
}

const char *nf_crawl_policy_validate(const nf_crawl_policy_t *p)
{
    if (p->interval_floor_ms < NF_CRAWL_MIN_DELAY_MS)
        return "crawl policy: interval_floor_ms must be >= 60000 (1 min)";
    if (p->interval_floor_ms > p->interval_ceiling_ms)
        return "crawl policy: interval_floor_ms > interval_ceiling_ms";
    if (p->interval_ceiling_ms > NF_CRAWL_MAX_INTERVAL_MS)
        return "crawl policy: interval_ceiling_ms must be <= 30 days";
    if (p->interval_default_ms < p->interval_floor_ms ||
        p->interval_default_ms > p->interval_ceiling_ms)
        return "crawl policy: interval_default_ms outside [interval_floor_ms, "
               "interval_ceiling_ms]";
    if (p->jitter_permille > 500)
        return "crawl policy: jitter_permille must be <= 500 (± 50 %)";
    if (p->backoff_base_ms < NF_CRAWL_MIN_DELAY_MS)
        return "crawl policy: backoff_base_ms must be >= 60000 (1 min)";
    if (p->backoff_base_ms > p->backoff_cap_ms)
        return "crawl policy: backoff_base_ms > backoff_cap_ms";
    if (p->backoff_cap_ms > p->interval_ceiling_ms)
        return "crawl policy: backoff_cap_ms > interval_ceiling_ms";
    if (p->dead_after_failures < 1 || p->dead_after_failures > 1000)
        return "crawl policy: dead_after_failures must be in [1, 1000]";
    if (p->permanent_failure_weight < 1 || p->permanent_failure_weight > p->dead_after_failures)
        return "crawl policy: permanent_failure_weight must be in [1, dead_after_failures]";
    if (p->host_max_concurrent < 1 || p->host_max_concurrent > UINT16_MAX)
        return "crawl policy: host_max_concurrent must be in [1, 65535]";
    if (p->host_spacing_ms < 0 || p->host_spacing_ms > 3600 * 1000)
        return "crawl policy: host_spacing_ms must be in [0, 3600000]";
    if (p->breaker_failures > NF_HOST_BREAKER_MAX_FAILURES)
        return "crawl policy: breaker_failures must be in [0, 16] (0: breaker off)";
    if (p->breaker_failures > 0) {
        if (p->breaker_window_ms < 1)
            return "crawl policy: breaker_window_ms must be >= 1";
        if (p->breaker_open_ms < 1)
            return "crawl policy: breaker_open_ms must be >= 1";
        if (p->breaker_open_max_ms < p->breaker_open_ms)
            return "crawl policy: breaker_open_max_ms < breaker_open_ms";
        if (p->breaker_open_max_ms > NF_CRAWL_MAX_INTERVAL_MS)
            return "crawl policy: breaker_open_max_ms must be <= 30 days";
    }
    return NULL;
}

/* ---- randomness ---- */

uint64_t nf_crawl_rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, n), n > 0. The modulo bias is below n / 2^64: nothing for delays in ms. */
static int64_t rand_below(uint64_t *rng, int64_t n)
{
    assert(rng && n > 0);
    return (int64_t)(nf_crawl_rng_next(rng) % (uint64_t)n);
}

/* d ± jitter_permille ‰ of d, uniform. */
static int64_t jitter(const nf_crawl_policy_t *p, int64_t d, uint64_t *rng)
{
    int64_t span = d * (int64_t)p->jitter_permille / 1000;
    if (span <= 0)
        return d;
    return d - span + rand_below(rng, 2 * span + 1);
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* ---- per source ---- */

int64_t nf_crawl_interval_ms(const nf_crawl_policy_t *p, int64_t interval_s)
{
    if (interval_s <= 0)
        return p->interval_default_ms;
    if (interval_s > p->interval_ceiling_ms / 1000) /* before multiplying: no overflow */
        return p->interval_ceiling_ms;
    return clamp64(interval_s * 1000, p->interval_floor_ms, p->interval_ceiling_ms);
}

static void spread_first_crawl(nf_crawl_schedule_t *s, int64_t now_ms, uint64_t *rng)
{
    s->next_crawl_at_ms = now_ms + rand_below(rng, (int64_t)s->interval_ms);
}

void nf_crawl_init(const nf_crawl_policy_t *p, nf_crawl_schedule_t *s, int64_t interval_s,
                   int64_t now_ms, uint64_t *rng)
{
    memset(s, 0, sizeof *s);
    s->interval_ms = (uint32_t)nf_crawl_interval_ms(p, interval_s);
    s->status = NF_CRAWL_ACTIVE;
    s->last_outcome = NF_CRAWL_CANCELLED; /* nothing happened yet */
    spread_first_crawl(s, now_ms, rng);
}

void nf_crawl_set_interval(const nf_crawl_policy_t *p, nf_crawl_schedule_t *s, int64_t interval_s)
{
    s->interval_ms = (uint32_t)nf_crawl_interval_ms(p, interval_s);
}

bool nf_crawl_uncovered(const nf_crawl_schedule_t *s, int64_t last_ok_ms, int64_t since_ms,
                        int64_t now_ms)
{
    int64_t from = last_ok_ms > since_ms ? last_ok_ms : since_ms;
    return s->status != NF_CRAWL_PAUSED && now_ms - from > 2 * (int64_t)s->interval_ms;
}

bool nf_crawl_due(const nf_crawl_schedule_t *s, int64_t now_ms)
{
    return s->status == NF_CRAWL_ACTIVE && now_ms >= s->next_crawl_at_ms;
}

nf_crawl_outcome_t nf_crawl_classify(int http_status, int fetch_error)
{
    switch (fetch_error) {
    case NF_FETCH_OK:
        break;
    case NF_FETCH_E_CANCELLED:
        return NF_CRAWL_CANCELLED;
    /* The same request will meet the same guard and the same cap next time; only a DNS or feed
     * change helps, so these reach DEAD faster. */
    case NF_FETCH_E_REFUSED_ADDRESS:
    case NF_FETCH_E_TOO_LARGE:
        return NF_CRAWL_FAILED_PERMANENT;
    default:
        return NF_CRAWL_FAILED;
    }
    if (http_status >= 200 && http_status <= 299)
        return NF_CRAWL_OK;
    if (http_status == 304)
        return NF_CRAWL_NOT_MODIFIED;
    if (http_status == 429 || http_status == 503)
        return NF_CRAWL_THROTTLED;
    /* 410 is the server saying the feed is gone for good; 404 is often a transient deploy or
     * migration mistake, so it counts once. */
    if (http_status == 410)
        return NF_CRAWL_FAILED_PERMANENT;
    return NF_CRAWL_FAILED; /* 1xx/3xx final, other 4xx/5xx, or no status at all */
}

bool nf_crawl_host_ok(int http_status, int fetch_error)
{
    switch (fetch_error) {
    case NF_FETCH_OK:
        return !(http_status >= 500 || http_status == 429 || http_status < 100);
    case NF_FETCH_E_REFUSED_ADDRESS: /* our guard: no request was sent */
    case NF_FETCH_E_TOO_LARGE:       /* the host answered, the feed is too big */
    case NF_FETCH_E_REDIRECTS:       /* the host answered, with a redirect we do not follow */
    case NF_FETCH_E_CANCELLED:       /* shut down (use nf_host_abandoned) */
        return true;
    default: /* timeout, DNS, connect, TLS, protocol, other */
        return false;
    }
}

/* Delay after failure point count k >= 1: base * 2^(k-1) capped, ± jitter, in [base, cap]. */
static int64_t backoff_ms(const nf_crawl_policy_t *p, uint32_t k, uint64_t *rng)
{
    int64_t d = p->backoff_base_ms;
    for (uint32_t i = 1; i < k && d < p->backoff_cap_ms; i++)
        d *= 2; /* d <= cap <= 30 days before doubling: no overflow */
    if (d > p->backoff_cap_ms)
        d = p->backoff_cap_ms;
    return clamp64(jitter(p, d, rng), p->backoff_base_ms, p->backoff_cap_ms);
}

void nf_crawl_on_result(const nf_crawl_policy_t *p, nf_crawl_schedule_t *s,
                        nf_crawl_outcome_t outcome, int64_t retry_after_s, int64_t now_ms,
                        uint64_t *rng)
{
    const int64_t ceiling = p->interval_ceiling_ms;
    /* Retry-After in ms, capped at the ceiling before multiplying (it comes off the network). */
    int64_t ra_ms = -1;
    if (retry_after_s >= 0)
        ra_ms = retry_after_s > ceiling / 1000 ? ceiling : retry_after_s * 1000;

    uint32_t points = 0; /* failure points this result adds */
    int64_t delay = NF_CRAWL_MIN_DELAY_MS;
    switch (outcome) {
    case NF_CRAWL_OK:
    case NF_CRAWL_NOT_MODIFIED:
        s->failures = 0;
        delay = clamp64(jitter(p, (int64_t)s->interval_ms, rng), p->interval_floor_ms, ceiling);
        break;
    case NF_CRAWL_THROTTLED:
        if (ra_ms >= 0) {
            /* The server said when: exactly then (no jitter; the host's spacing spreads its
             * sources), not sooner than the global minimum, not later than the ceiling. */
            delay = clamp64(ra_ms, NF_CRAWL_MIN_DELAY_MS, ceiling);
            break;
        }
        points = 1;
        break;
    case NF_CRAWL_FAILED_PERMANENT:
        points = p->permanent_failure_weight;
        break;
    case NF_CRAWL_CANCELLED:
        delay = NF_CRAWL_MIN_DELAY_MS; /* no attempt: nothing to learn, nothing counted */
        break;
    case NF_CRAWL_FAILED:
    default:
        points = 1;
        break;
    }
    if (points) {
        uint32_t f = s->failures + points;
        if (f > p->dead_after_failures)
            f = p->dead_after_failures; /* saturate: fits uint16_t (validate: <= 1000) */
        s->failures = (uint16_t)f;
        if (s->failures >= p->dead_after_failures && s->status == NF_CRAWL_ACTIVE)
            s->status = NF_CRAWL_DEAD;
        delay = backoff_ms(p, s->failures, rng);
    }
    if (ra_ms >= 0 && delay < ra_ms)
        delay = ra_ms; /* Retry-After is a lower bound whatever the outcome */

    assert(delay >= NF_CRAWL_MIN_DELAY_MS && delay <= ceiling);
    s->last_outcome = (uint8_t)outcome;
    s->next_crawl_at_ms = now_ms + delay;
}

/* Copies src into dst only whole and printable; otherwise dst = "" (never send a validator the
 * server did not give us byte for byte, nor a header-breaking one). */
static void keep_validator(char *dst, size_t cap, const char *src)
{
    dst[0] = '\0';
    if (!src)
        return;
    size_t n = strnlen(src, cap);
    if (n == cap)
        return; /* would be truncated */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)src[i];
        if (c < 0x20 || c == 0x7f)
            return;
    }
    memcpy(dst, src, n + 1);
}

void nf_crawl_set_validators(nf_crawl_schedule_t *s, const char *etag, const char *last_modified)
{
    keep_validator(s->etag, sizeof s->etag, etag);
    keep_validator(s->last_modified, sizeof s->last_modified, last_modified);
}

nf_crawl_outcome_t nf_crawl_on_fetch(const nf_crawl_policy_t *p, nf_crawl_schedule_t *s,
                                     const struct nf_fetch_result *res, int64_t now_ms,
                                     uint64_t *rng)
{
    nf_crawl_outcome_t o = nf_crawl_classify(res->http_status, (int)res->error);
    if (o == NF_CRAWL_OK) {
        nf_crawl_set_validators(s, res->etag, res->last_modified);
    } else if (o == NF_CRAWL_NOT_MODIFIED) {
        /* A 304 need not repeat the validators; one it does send is the current one. */
        if (res->etag[0])
            keep_validator(s->etag, sizeof s->etag, res->etag);
        if (res->last_modified[0])
            keep_validator(s->last_modified, sizeof s->last_modified, res->last_modified);
    }
    nf_crawl_on_result(p, s, o, res->retry_after_s, now_ms, rng);
    return o;
}

void nf_crawl_defer(nf_crawl_schedule_t *s, int64_t until_ms, int64_t now_ms)
{
    s->next_crawl_at_ms = until_ms > now_ms ? until_ms : now_ms + 1;
}

void nf_crawl_pause(nf_crawl_schedule_t *s)
{
    s->status = NF_CRAWL_PAUSED;
}

void nf_crawl_revive(nf_crawl_schedule_t *s, int64_t now_ms, uint64_t *rng)
{
    if (s->status == NF_CRAWL_ACTIVE)
        return;
    s->status = NF_CRAWL_ACTIVE;
    s->failures = 0;
    spread_first_crawl(s, now_ms, rng);
}

nf_crawl_health_t nf_crawl_health(const nf_crawl_schedule_t *s)
{
    if (s->status == NF_CRAWL_DEAD)
        return NF_CRAWL_HEALTH_DEAD;
    if (s->status == NF_CRAWL_PAUSED)
        return NF_CRAWL_HEALTH_PAUSED;
    if (s->failures)
        return NF_CRAWL_HEALTH_BACKOFF;
    return s->last_outcome == NF_CRAWL_THROTTLED ? NF_CRAWL_HEALTH_THROTTLED : NF_CRAWL_HEALTH_OK;
}

const char *nf_crawl_health_name(nf_crawl_health_t h)
{
    static const char *const names[NF_CRAWL_HEALTH_N] = {"ok", "backoff", "dead", "paused",
                                                         "throttled"};
    return (unsigned)h < NF_CRAWL_HEALTH_N ? names[h] : "?";
}

bool nf_crawl_health_failing(nf_crawl_health_t h)
{
    return h == NF_CRAWL_HEALTH_BACKOFF || h == NF_CRAWL_HEALTH_DEAD ||
           h == NF_CRAWL_HEALTH_THROTTLED;
}

nf_crawl_log_t nf_crawl_failure_log(nf_crawl_failure_log_t *l, nf_crawl_health_t before,
                                    nf_crawl_health_t after, bool failed, int64_t now_ms,
                                    uint32_t *suppressed)
{
    *suppressed = 0;
    if (!failed) {
        bool was_failing = before == NF_CRAWL_HEALTH_BACKOFF || before == NF_CRAWL_HEALTH_DEAD ||
                           l->last_warn_ms != 0;
        if (after == NF_CRAWL_HEALTH_OK) {
            *l = (nf_crawl_failure_log_t){0};
            return was_failing ? NF_CRAWL_LOG_RECOVERED : NF_CRAWL_LOG_QUIET;
        }
        return NF_CRAWL_LOG_QUIET;
    }
    if (before != after || l->last_warn_ms == 0 ||
        now_ms - l->last_warn_ms >= NF_CRAWL_FAILURE_LOG_REPEAT_MS) {
        *suppressed = l->suppressed;
        l->suppressed = 0;
        l->last_warn_ms = now_ms ? now_ms : 1;
        return NF_CRAWL_LOG_WARN;
    }
    l->suppressed++;
    return NF_CRAWL_LOG_SUPPRESSED;
}

const char *nf_crawl_status_name(nf_crawl_status_t st)
{
    switch (st) {
    case NF_CRAWL_ACTIVE:
        return "active";
    case NF_CRAWL_PAUSED:
        return "paused";
    case NF_CRAWL_DEAD:
        return "dead";
    }
    return "?";
}

const char *nf_crawl_outcome_name(nf_crawl_outcome_t o)
{
    switch (o) {
    case NF_CRAWL_OK:
        return "ok";
    case NF_CRAWL_NOT_MODIFIED:
        return "not_modified";
    case NF_CRAWL_THROTTLED:
        return "throttled";
    case NF_CRAWL_FAILED:
        return "failed";
    case NF_CRAWL_FAILED_PERMANENT:
        return "failed_permanent";
    case NF_CRAWL_CANCELLED:
        return "cancelled";
    }
    return "?";
}

/* ---- per host ---- */

void nf_host_init(nf_host_t *h, const nf_crawl_policy_t *p)
{
    memset(h, 0, sizeof *h);
    h->policy = p;
    h->last_start_ms = INT64_MIN;
    h->open_for_ms = p->breaker_open_ms;
    h->state = NF_BREAKER_CLOSED;
}

static int64_t busy_recheck(const nf_host_t *h, int64_t now_ms)
{
    int64_t d = h->policy->host_spacing_ms;
    return now_ms + (d > NF_HOST_BUSY_RECHECK_MS ? d : NF_HOST_BUSY_RECHECK_MS);
}

bool nf_host_may_start(nf_host_t *h, int64_t now_ms, int64_t *retry_at_ms)
{
    const nf_crawl_policy_t *p = h->policy;
    if (h->state == NF_BREAKER_OPEN) {
        if (now_ms < h->open_until_ms) {
            *retry_at_ms = h->open_until_ms;
            return false;
        }
        h->state = NF_BREAKER_HALF_OPEN;
        h->probe_in_flight = false;
        h->half_opened++;
    }
    if (h->in_flight >= p->host_max_concurrent ||
        (h->state == NF_BREAKER_HALF_OPEN && h->probe_in_flight)) {
        *retry_at_ms = busy_recheck(h, now_ms);
        return false;
    }
    if (h->unsent && p->host_spacing_ms > 0) { /* its send time, and so the spacing, unknown */
        *retry_at_ms = busy_recheck(h, now_ms);
        return false;
    }
    /* last_start_ms is INT64_MIN before the first start: no subtraction, no overflow. */
    if (h->last_start_ms != INT64_MIN && now_ms - h->last_start_ms < p->host_spacing_ms) {
        *retry_at_ms = h->last_start_ms + p->host_spacing_ms;
        assert(*retry_at_ms > now_ms);
        return false;
    }
    return true;
}

bool nf_host_started(nf_host_t *h, int64_t now_ms)
{
    assert(h->state != NF_BREAKER_OPEN);
    assert(h->in_flight < h->policy->host_max_concurrent);
    h->in_flight++;
    h->unsent++;
    h->last_start_ms = now_ms;
    if (h->state == NF_BREAKER_HALF_OPEN) {
        assert(!h->probe_in_flight);
        h->probe_in_flight = true;
        return true;
    }
    return false;
}

void nf_host_sent(nf_host_t *h, int64_t now_ms, bool first)
{
    if (first) {
        assert(h->unsent > 0);
        h->unsent--;
    }
    if (now_ms > h->last_start_ms)
        h->last_start_ms = now_ms;
}

void nf_host_adopted(nf_host_t *h, int64_t now_ms)
{
    if (now_ms > h->last_start_ms)
        h->last_start_ms = now_ms;
}

static void breaker_open(nf_host_t *h, int64_t now_ms, int64_t open_for_ms)
{
    h->state = NF_BREAKER_OPEN;
    h->open_for_ms = open_for_ms;
    h->open_until_ms = now_ms + open_for_ms;
    h->probe_in_flight = false;
    h->fail_n = 0;
    h->fail_head = 0;
    h->opened++;
}

void nf_host_finished(nf_host_t *h, int64_t now_ms, bool probe, bool success)
{
    const nf_crawl_policy_t *p = h->policy;
    assert(h->in_flight > 0 && h->unsent < h->in_flight); /* this one was sent */
    h->in_flight--;
    if (p->breaker_failures == 0)
        return;
    if (probe) {
        assert(h->state == NF_BREAKER_HALF_OPEN && h->probe_in_flight);
        h->probe_in_flight = false;
        if (success) {
            h->state = NF_BREAKER_CLOSED;
            h->open_for_ms = p->breaker_open_ms;
            h->fail_n = 0;
            h->fail_head = 0;
            h->closed++;
        } else {
            int64_t next = h->open_for_ms * 2; /* open_for <= 30 days: no overflow */
            breaker_open(h, now_ms, next > p->breaker_open_max_ms ? p->breaker_open_max_ms : next);
        }
        return;
    }
    if (h->state != NF_BREAKER_CLOSED)
        return; /* started before the breaker opened: only the probe decides */
    if (success) {
        h->fail_n = 0; /* consecutive failures only */
        h->fail_head = 0;
        return;
    }
    /* Ring of the last breaker_failures failure times; fail_head is the oldest when full. */
    const uint32_t k = p->breaker_failures;
    if (h->fail_n < k) {
        h->fail_at_ms[(h->fail_head + h->fail_n) % k] = now_ms;
        h->fail_n++;
    } else {
        h->fail_at_ms[h->fail_head] = now_ms;
        h->fail_head = (uint8_t)((h->fail_head + 1) % k);
    }
    if (h->fail_n == k && now_ms - h->fail_at_ms[h->fail_head] <= p->breaker_window_ms)
        breaker_open(h, now_ms, p->breaker_open_ms);
}

void nf_host_abandoned(nf_host_t *h, bool probe)
{
    assert(h->in_flight > 0 && h->unsent < h->in_flight); /* this one was sent */
    h->in_flight--;
    if (probe) {
        assert(h->state == NF_BREAKER_HALF_OPEN && h->probe_in_flight);
        h->probe_in_flight = false;
    }
}

const char *nf_breaker_state_name(nf_breaker_state_t st)
{
    switch (st) {
    case NF_BREAKER_CLOSED:
        return "closed";
    case NF_BREAKER_OPEN:
        return "open";
    case NF_BREAKER_HALF_OPEN:
        return "half_open";
    }
    return "?";
}
