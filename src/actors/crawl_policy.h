/* crawl_policy.h — the crawl scheduler's decisions: when a source is fetched next, and whether a
 * host may be sent a request now. Pure functions over small structs: no I/O, no clock reads, no
 * allocation, no global state. Time is always the caller's `now_ms` (a monotonic clock in
 * milliseconds that never goes backwards) and randomness the caller's `uint64_t *rng` state
 * (splitmix64, any seed, never NULL), so the same inputs give the same schedule and tests run on
 * a fake clock.
 *
 * Who calls what. The crawl actor owns one nf_crawl_schedule_t per source and one nf_host_t per
 * host, on its shard; this module never shares or keeps them. The actor's loop is:
 *
 *   nf_crawl_init()                      a new source: first crawl spread over [now, now+interval)
 *   nf_crawl_due(s, now)?                ACTIVE and now >= next_crawl_at, else leave it alone
 *   nf_host_may_start(h, now, &at)?      no: nf_crawl_defer(s, at, now) — NOT a source failure
 *   probe = nf_host_started(h, now)      then start the fetch with s->etag / s->last_modified
 *   nf_host_sent(h, now, true)           when the fetcher writes the request (else at its end)
 *   ... fetch completes ...
 *   nf_host_finished(h, now, probe, nf_crawl_host_ok(status, error))  (cancelled: _abandoned)
 *   nf_crawl_on_fetch(policy, s, &res, now, rng)   classify, keep validators, reschedule
 *
 * Guarantees, for every source:
 *  - Never fetched early: nf_crawl_due() is false before next_crawl_at, and every update
 *    (on_result, on_fetch, defer) sets next_crawl_at > now_ms. Only nf_crawl_init() and
 *    nf_crawl_revive() may make a source due at once (their spread includes now).
 *  - After a fetch result, next_crawl_at lies in [now + NF_CRAWL_MIN_DELAY_MS, now + ceiling]:
 *    success (2xx, 304): interval ± jitter, kept within [floor, ceiling]; 304 is a success and
 *    keeps the interval. Failure k (k consecutive failure points): backoff_base * 2^(k-1), capped
 *    at backoff_cap, ± jitter, kept within [backoff_base, backoff_cap]. Backoff may be shorter
 *    than the interval and than the floor (a failed crawl did not load the source), but never
 *    shorter than NF_CRAWL_MIN_DELAY_MS (1 min): validate() enforces backoff_base >= it.
 *  - Retry-After (any outcome): next_crawl_at >= now + min(Retry-After, ceiling). 429/503 with
 *    Retry-After are THROTTLED, not failures: next_crawl_at = now + Retry-After exactly, clamped
 *    into [NF_CRAWL_MIN_DELAY_MS, ceiling], no jitter, failure count untouched. 429/503 without
 *    Retry-After are ordinary failures with backoff. CANCELLED (no attempt): 1 min, no count.
 *  - DEAD: a failure adds 1 failure point, a permanent-ish failure (410 Gone, the address guard
 *    refused the target, body over the cap: retrying will almost surely give the same answer)
 *    adds permanent_failure_weight (default 2). The source becomes DEAD exactly when its points
 *    reach dead_after_failures (default 10; i.e. 10 failures, or 5 permanent ones), never before.
 *    Any success resets the points to 0; THROTTLED-with-Retry-After and CANCELLED leave them.
 *  - DEAD and PAUSED sources are never due. nf_crawl_revive() makes them ACTIVE (points reset,
 *    first-crawl spread); results arriving for a PAUSED source update it but keep it PAUSED.
 *  - ETag / Last-Modified are kept only whole: one that does not fit its array, or contains a
 *    control character, is stored as "" and so never sent (a truncated validator never matches).
 *
 * Per host (nf_host_t): at most host_max_concurrent requests in flight, requests sent at least
 * host_spacing_ms apart, and a circuit breaker: breaker_failures consecutive host failures (a
 * success clears the count) with the last one within breaker_window_ms of the first → OPEN for
 * breaker_open_ms → HALF_OPEN on the first may_start() after that: exactly one probe request →
 * probe success: CLOSED; probe failure: OPEN again, for twice the previous open time, capped at
 * breaker_open_max_ms (equal to breaker_open_ms: no doubling). Results of requests that were not
 * the probe do not move an OPEN or HALF_OPEN breaker (they started before it opened). A host
 * failure is a sign of the host, not of one feed: network errors and HTTP 5xx/429, see
 * nf_crawl_host_ok(). A crawl the breaker (or spacing, or concurrency) holds back is deferred
 * with nf_crawl_defer(): it is not an attempt and never counts as a source failure.
 *
 * The host half is named nf_host_* / nf_breaker_*: politeness is the other half of the same
 * decision, and the actor needs both or neither.
 *
 * Thread: single-threaded per struct (the owning shard). A policy is read-only after validate. */
#ifndef NF_CRAWL_POLICY_H
#define NF_CRAWL_POLICY_H

#include <stdbool.h>
#include <stdint.h>

/* No result reschedules a source sooner than this (backoff_base and the floor are >= it). */
#define NF_CRAWL_MIN_DELAY_MS 60000ll
/* Largest ceiling / breaker_open_max: 30 days, so an interval fits uint32_t milliseconds. */
#define NF_CRAWL_MAX_INTERVAL_MS (30ll * 24 * 3600 * 1000)
/* Validator array sizes, NUL included; an IMF-fixdate Last-Modified is 29 characters. */
#define NF_CRAWL_ETAG_MAX          192
#define NF_CRAWL_LAST_MODIFIED_MAX 40
/* Upper limit of breaker_failures (the host keeps that many failure times). */
#define NF_HOST_BREAKER_MAX_FAILURES 16
/* Smallest retry hint while all of a host's slots, or its half-open probe, are taken. */
#define NF_HOST_BUSY_RECHECK_MS 250

typedef struct nf_crawl_policy {
    /* schedule */
    int64_t interval_default_ms;       /* 15 min; for sources without interval_s */
    int64_t interval_floor_ms;         /* 5 min; a source's interval_s is clamped into */
    int64_t interval_ceiling_ms;       /* 24 h   [floor, ceiling] */
    uint32_t jitter_permille;          /* 100: ± 10 % of the delay */
    int64_t backoff_base_ms;           /* 1 min: delay after the first failure */
    int64_t backoff_cap_ms;            /* 6 h */
    uint32_t dead_after_failures;      /* 10 failure points → DEAD */
    uint32_t permanent_failure_weight; /* 2: points of one permanent-ish failure */
    /* host politeness */
    uint32_t host_max_concurrent; /* 2 */
    int64_t host_spacing_ms;      /* 1000: between request starts */
    /* circuit breaker per host */
    uint32_t breaker_failures;   /* 5 (0: breaker off) */
    int64_t breaker_window_ms;   /* 60 s */
    int64_t breaker_open_ms;     /* 60 s */
    int64_t breaker_open_max_ms; /* 10 min: cap of the doubling after failed probes */
} nf_crawl_policy_t;

nf_crawl_policy_t nf_crawl_policy_default(void);
/* NULL if consistent, else a static message naming the offending field(s), e.g.
 * "crawl policy: interval_floor_ms > interval_ceiling_ms". Call once, after loading config. */
const char *nf_crawl_policy_validate(const nf_crawl_policy_t *p);

/* ---- per source ---- */

typedef enum { NF_CRAWL_ACTIVE = 0, NF_CRAWL_PAUSED, NF_CRAWL_DEAD } nf_crawl_status_t;

typedef enum {
    NF_CRAWL_OK = 0,           /* 2xx: a body to parse */
    NF_CRAWL_NOT_MODIFIED,     /* 304: success, nothing new */
    NF_CRAWL_THROTTLED,        /* 429/503: Retry-After honoured; without it, a failure */
    NF_CRAWL_FAILED,           /* other 1xx/3xx/4xx/5xx, network and protocol errors */
    NF_CRAWL_FAILED_PERMANENT, /* 410, address refused, body too large: weighted failure */
    NF_CRAWL_CANCELLED,        /* fetcher shut down: no attempt was made */
} nf_crawl_outcome_t;

/* 248 bytes: 100k sources ≈ 25 MB. */
typedef struct nf_crawl_schedule {
    int64_t next_crawl_at_ms;
    uint32_t interval_ms;         /* already clamped into [floor, ceiling] */
    uint16_t failures;            /* consecutive failure points since the last success */
    uint8_t status;               /* nf_crawl_status_t */
    uint8_t last_outcome;         /* nf_crawl_outcome_t of the last result (metrics, logs) */
    char etag[NF_CRAWL_ETAG_MAX]; /* "" = none: send no If-None-Match */
    char last_modified[NF_CRAWL_LAST_MODIFIED_MAX]; /* "" = none: no If-Modified-Since */
} nf_crawl_schedule_t;

/* A source's own interval (interval_s <= 0: the default) clamped into [floor, ceiling], in ms. */
int64_t nf_crawl_interval_ms(const nf_crawl_policy_t *p, int64_t interval_s);
/* A new source: ACTIVE, no failures, no validators, next_crawl_at uniform in [now, now+interval)
 * so that a fleet of sources added together does not fire together. */
void nf_crawl_init(const nf_crawl_policy_t *p, nf_crawl_schedule_t *s, int64_t interval_s,
                   int64_t now_ms, uint64_t *rng);
/* The source's interval_s changed: takes effect at the next result (the current next_crawl_at
 * may carry a backoff or a Retry-After, which must not be cut short). */
void nf_crawl_set_interval(const nf_crawl_policy_t *p, nf_crawl_schedule_t *s, int64_t interval_s);
/* ACTIVE and now_ms >= next_crawl_at. */
bool nf_crawl_due(const nf_crawl_schedule_t *s, int64_t now_ms);
/* Crawl coverage (docs/slo.md): a source not paused is uncovered at now_ms when it has had no
 * answer (2xx, 304) for more than twice its interval, counting from the later of its last answer
 * (last_ok_ms, 0: none) and when it was taken or resumed (since_ms): a source that never
 * answered is uncovered twice its interval after it came. A paused one is neither (false). */
bool nf_crawl_uncovered(const nf_crawl_schedule_t *s, int64_t last_ok_ms, int64_t since_ms,
                        int64_t now_ms);

/* Classifies a finished fetch: http_status as nf_fetch_result_t.http_status, fetch_error an
 * nf_fetch_error_t (io/fetch.h). A transport error wins over any status. */
nf_crawl_outcome_t nf_crawl_classify(int http_status, int fetch_error);
/* Whether the result speaks well of the host, for nf_host_finished(): false for timeouts, DNS,
 * connect, TLS and protocol errors and HTTP 5xx/429; true when the host answered (2xx-4xx except
 * 429) or the failure was ours (address refused, body too large, redirect limit). */
bool nf_crawl_host_ok(int http_status, int fetch_error);

/* Reschedules after a fetch result (see the guarantees above). retry_after_s: the response's
 * Retry-After in seconds, < 0 if absent. Sets next_crawl_at > now_ms. */
void nf_crawl_on_result(const nf_crawl_policy_t *p, nf_crawl_schedule_t *s,
                        nf_crawl_outcome_t outcome, int64_t retry_after_s, int64_t now_ms,
                        uint64_t *rng);
/* Replaces the validators (NULL = none): each is stored only if it fits and is printable. */
void nf_crawl_set_validators(nf_crawl_schedule_t *s, const char *etag, const char *last_modified);

struct nf_fetch_result;
/* The whole result path: classify, keep the validators (2xx: the response's validators replace
 * ours, an absent one clears ours; 304: one the response repeats or renews replaces ours; other
 * outcomes keep ours), then on_result with the response's Retry-After. Returns the outcome. */
nf_crawl_outcome_t nf_crawl_on_fetch(const nf_crawl_policy_t *p, nf_crawl_schedule_t *s,
                                     const struct nf_fetch_result *res, int64_t now_ms,
                                     uint64_t *rng);

/* Not attempted now (host busy, spacing, breaker open): next_crawl_at = max(until_ms, now+1).
 * Touches nothing else: a deferral is not a failure and not a success. */
void nf_crawl_defer(nf_crawl_schedule_t *s, int64_t until_ms, int64_t now_ms);
/* Operator / `sources` topic: PAUSED (not scheduled; failures kept). */
void nf_crawl_pause(nf_crawl_schedule_t *s);
/* PAUSED or DEAD → ACTIVE with failures reset and next_crawl_at spread like a new source's
 * (validators kept). No-op on an ACTIVE source. */
void nf_crawl_revive(nf_crawl_schedule_t *s, int64_t now_ms, uint64_t *rng);

const char *nf_crawl_status_name(nf_crawl_status_t st);  /* "active", "paused", "dead" */
const char *nf_crawl_outcome_name(nf_crawl_outcome_t o); /* "ok", "not_modified", ... */

/* ---- a source's health, and when its failures are logged ----
 *
 * What an operator sees of a source: OK (no failure points), BACKOFF (ACTIVE with failure
 * points: retried later than usual), DEAD, PAUSED. Metrics (newsflow_sources{state=}), the
 * admin API and `newsflow sources list` use these names.
 *
 * One log policy for "a source is failing" (a fetch error, an HTTP error, a document that is not
 * a feed — outcomes FAILED and FAILED_PERMANENT): a warning on the first failure, and on every
 * change of health (OK -> BACKOFF -> DEAD); further failures of a source that stays in BACKOFF
 * repeat the warning at most once per NF_CRAWL_FAILURE_LOG_REPEAT_MS, with the number of failures
 * not logged since (the others are suppressed: debug level, and counted). A failing source that
 * succeeds again is logged at info (recovered). Throttling (429/503 with Retry-After) and
 * cancelled fetches are not failures and are never logged at warn. */
#define NF_CRAWL_FAILURE_LOG_REPEAT_MS (10ll * 60 * 1000)

typedef enum {
    NF_CRAWL_HEALTH_OK = 0,
    NF_CRAWL_HEALTH_BACKOFF,
    NF_CRAWL_HEALTH_DEAD,
    NF_CRAWL_HEALTH_PAUSED,
    NF_CRAWL_HEALTH_THROTTLED, /* no failure, but its host answered 429/503 with Retry-After:
                                  next_crawl_at is the time it asked for */
    NF_CRAWL_HEALTH_N
} nf_crawl_health_t;

nf_crawl_health_t nf_crawl_health(const nf_crawl_schedule_t *s);
/* "ok", "backoff", "dead", "paused", "throttled" */
const char *nf_crawl_health_name(nf_crawl_health_t h);
/* What `sources list --failing` lists: backoff, dead and throttled (a host that holds the job
 * off is an operator's business as much as one that fails). */
bool nf_crawl_health_failing(nf_crawl_health_t h);

/* Per source: when its failure was last logged at warn and how many were not logged since. */
typedef struct nf_crawl_failure_log {
    int64_t last_warn_ms; /* 0: none since the source was last OK */
    uint32_t suppressed;
} nf_crawl_failure_log_t;

typedef enum {
    NF_CRAWL_LOG_QUIET = 0,  /* nothing to say (a success, a throttle, a cancel) */
    NF_CRAWL_LOG_WARN,       /* a failure or a change of health: log at warn */
    NF_CRAWL_LOG_SUPPRESSED, /* a failure within the repeat period: debug level, count it */
    NF_CRAWL_LOG_RECOVERED,  /* a failing source succeeded: log at info */
} nf_crawl_log_t;

/* The decision for one result: health before and after it, whether it was a failure. On WARN,
 * *suppressed is the number of failures not logged since the previous warning (then reset). */
nf_crawl_log_t nf_crawl_failure_log(nf_crawl_failure_log_t *l, nf_crawl_health_t before,
                                    nf_crawl_health_t after, bool failed, int64_t now_ms,
                                    uint32_t *suppressed);

/* splitmix64 step: the module's only source of randomness, on the caller's state. */
uint64_t nf_crawl_rng_next(uint64_t *state);

/* ---- per host ---- */

typedef enum { NF_BREAKER_CLOSED = 0, NF_BREAKER_OPEN, NF_BREAKER_HALF_OPEN } nf_breaker_state_t;

typedef struct nf_host {
    const nf_crawl_policy_t *policy;                  /* must outlive the host */
    int64_t last_start_ms;                            /* latest start or send; INT64_MIN: none */
    int64_t open_until_ms;                            /* OPEN: when HALF_OPEN may begin */
    int64_t open_for_ms;                              /* length of the current/last open period */
    int64_t fail_at_ms[NF_HOST_BREAKER_MAX_FAILURES]; /* ring: last consecutive failures */
    uint32_t opened, half_opened, closed;             /* state transitions, for metrics */
    uint16_t in_flight;
    uint16_t unsent; /* started, not yet nf_host_sent: when they go out is not known yet */
    uint8_t state;   /* nf_breaker_state_t */
    uint8_t fail_n, fail_head;
    bool probe_in_flight;
} nf_host_t;

void nf_host_init(nf_host_t *h, const nf_crawl_policy_t *p);
/* Whether a request may start now. If not, *retry_at_ms (> now_ms) says when to look again:
 * the breaker's reopen time while OPEN, the spacing's end, or now + max(spacing,
 * NF_HOST_BUSY_RECHECK_MS) while all slots (or the half-open probe) are taken, or while a
 * started request has not gone out yet (with spacing > 0) — the actor may also look again on
 * nf_host_finished(). Moves an OPEN breaker whose time is up to HALF_OPEN. */
bool nf_host_may_start(nf_host_t *h, int64_t now_ms, int64_t *retry_at_ms);
/* A request starts (only after may_start said yes). Returns true if it is the half-open probe:
 * keep that and pass it back to nf_host_finished(). */
bool nf_host_started(nf_host_t *h, int64_t now_ms);
/* The spacing is a promise about what the host receives, so it counts from when a request goes
 * out, not from when the actor started it: a busy event loop can send a request it started
 * late, right before the next one. A started request is sent exactly once (first = true: the
 * fetcher is about to write it, or, if it never was — a connection that failed —, when it
 * ended); a redirect's request to the same transfer is sent again (first = false). Until its
 * first send, no other request to the host starts; the spacing counts from the latest send. */
void nf_host_sent(nf_host_t *h, int64_t now_ms, bool first);
/* A host whose requests this process did not make until now (a sources partition assigned by a
 * rebalance, or this process started: a previous owner, or its own previous run, may have sent
 * one a moment ago): its first request waits a full spacing from now_ms. */
void nf_host_adopted(nf_host_t *h, int64_t now_ms);
/* The request ended; success = nf_crawl_host_ok(...). */
void nf_host_finished(nf_host_t *h, int64_t now_ms, bool probe, bool success);
/* The request ended without a result (cancelled): frees its slot; a probe may be sent again. */
void nf_host_abandoned(nf_host_t *h, bool probe);

const char *nf_breaker_state_name(nf_breaker_state_t st); /* "closed", "open", "half_open" */

#endif
