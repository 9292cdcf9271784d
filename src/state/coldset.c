/* coldset.c — a keyset's keys on disk behind a cuckoo filter: see coldset.h for the contract. */
#include "state/coldset.h"
#include "algo/hash.h"
#include "runtime/bigmem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PAGE      4096
#define PER_PAGE  170                   /* 24-byte records in a page (4,080 bytes) */
#define SEG_MAX   ((uint64_t)256 << 20) /* a segment takes runs until it is this long */
#define TAGS      1024                  /* a run's tag: its number mod TAGS */
#define SLOTS     5                     /* 24-bit slots in a 16-byte bucket */
#define SLOT_MASK 0xFFFFFFu
#define STASH     64 /* filter victims that found no bucket */
#define MAX_KICKS 500
#define IO_PAGES  16 /* pages per sequential read or write */
#define LOAD_NUM  95 /* the filter is kept at most 95 % full */
#define LOAD_DEN  100
#define FP_SHIFT  10

typedef struct seg {
    int fd;
    uint64_t end;  /* bytes written */
    unsigned refs; /* its live runs, +1 while it is the current one: closed at 0 */
} seg_t;

typedef struct run {
    uint32_t tag;
    struct run *tag_next; /* the next live run with this tag */
    seg_t *seg;
    uint64_t off; /* of its first page in seg */
    uint64_t n, npages;
    uint64_t *fence; /* sk of each page's first record */
    int64_t max_exp;
    uint64_t nfilt;   /* records [0, nfilt) are in the filter */
    uint64_t open_sk; /* sk of record nfilt (UINT64_MAX when all are): searched from there on */
} run_t;

typedef unsigned __int128 bucket_t;

typedef struct stash_ent {
    uint64_t b;
    uint32_t v;
} stash_ent_t;

struct nf_coldset {
    char *dir;
    uint64_t max_nb; /* buckets the filter takes at the first spill */
    bucket_t *fb;    /* nb buckets of SLOTS slots {fp << FP_SHIFT | tag}, 0 = empty */
    uint64_t nb, nfk;
    stash_ent_t stash[STASH];
    unsigned nstash;
    uint64_t rng;

    run_t **runs; /* creation order */
    size_t nruns, runs_cap, npartial;
    run_t *by_tag[TAGS]; /* the live runs of each tag */
    uint32_t next_tag;
    seg_t *cur;

    unsigned char *io; /* IO_PAGES pages */
    unsigned char page[PAGE];
    size_t keys, unfiltered, disk, fence_bytes;
    uint64_t lookups, reads, hits, spills, expired_runs;
    uint64_t spill_ns, spill_ns_max;
};

/* ---------------------------------------------------------------- keys */

/* The run order and the filter's hash. The keyset's keys are hash outputs, but the seen set's
 * share their hi per user: both halves and the key group go through the mix. */
static inline uint64_t key_sk(uint16_t kg, uint64_t hi, uint64_t lo)
{
    return nf_mix64(hi ^ nf_mix64(lo ^ ((uint64_t)kg << 48) ^ 0x636f6c64ull));
}

static inline uint64_t rec_sk(const nf_coldrec_t *r)
{
    return key_sk((uint16_t)r->expkg, r->hi, r->lo);
}

static inline int64_t rec_exp(const nf_coldrec_t *r)
{
    return (int64_t)(r->expkg >> 16);
}

static inline uint32_t fp_of(uint64_t sk)
{
    uint32_t fp = (uint32_t)(sk >> 50); /* 14 bits; the bucket comes from the low 44 */
    return fp ? fp : 1;
}

static inline uint32_t slot_get(const bucket_t *b, int i)
{
    return (uint32_t)(*b >> (24 * i)) & SLOT_MASK;
}

static inline void slot_set(bucket_t *b, int i, uint32_t v)
{
    *b = (*b & ~((bucket_t)SLOT_MASK << (24 * i))) | (bucket_t)v << (24 * i);
}

/* ---------------------------------------------------------------- filter */

/* Any bucket count, so the filter can take its budget whole: the home bucket scales the 44 bits
 * of sk below the fingerprint, and the other is (H(fp) - b) mod nb, which maps each of the
 * two to the other knowing only the fingerprint. */
static inline uint64_t home_bucket(const nf_coldset_t *cs, uint64_t sk)
{
    return (uint64_t)(((unsigned __int128)(sk << 20) * cs->nb) >> 64);
}

static inline uint64_t alt_bucket(const nf_coldset_t *cs, uint64_t b, uint32_t fp)
{
    uint64_t h =
        (uint64_t)(((unsigned __int128)((uint64_t)fp * 0x9e3779b97f4a7c15ull) * cs->nb) >> 64);
    return h >= b ? h - b : h + cs->nb - b;
}

/* Filling or emptying the filter a run at a time touches a random bucket pair per key: the pair
 * of the key AHEAD places on is loaded meanwhile. */
#define AHEAD 8

static inline void prefetch_sk(const nf_coldset_t *cs, uint64_t sk)
{
    uint64_t b = home_bucket(cs, sk);
    __builtin_prefetch(&cs->fb[b]);
    __builtin_prefetch(&cs->fb[alt_bucket(cs, b, fp_of(sk))]);
}

static bool bucket_put(nf_coldset_t *cs, uint64_t b, uint32_t v)
{
    for (int i = 0; i < SLOTS; i++) {
        if (slot_get(&cs->fb[b], i) == 0) {
            slot_set(&cs->fb[b], i, v);
            return true;
        }
    }
    return false;
}

static bool bucket_del(nf_coldset_t *cs, uint64_t b, uint32_t v)
{
    for (int i = 0; i < SLOTS; i++) {
        if (slot_get(&cs->fb[b], i) == v) {
            slot_set(&cs->fb[b], i, 0);
            return true;
        }
    }
    return false;
}

/* 0, or -1: no room (the filter is at its load limit, or its stash is full); nothing changed. */
static int filt_put(nf_coldset_t *cs, uint64_t sk, uint32_t tag)
{
    if (cs->nb == 0 || cs->nstash == STASH || cs->nfk + 1 > cs->nb * SLOTS * LOAD_NUM / LOAD_DEN)
        return -1;
    uint32_t fp = fp_of(sk), v = fp << FP_SHIFT | tag;
    uint64_t i = home_bucket(cs, sk), j = alt_bucket(cs, i, fp);
    cs->nfk++;
    if (bucket_put(cs, i, v) || bucket_put(cs, j, v))
        return 0;
    cs->rng = cs->rng * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t b = (cs->rng >> 63) ? i : j;
    for (int k = 0; k < MAX_KICKS; k++) {
        cs->rng = cs->rng * 6364136223846793005ull + 1442695040888963407ull;
        int at = (int)((cs->rng >> 32) % SLOTS);
        uint32_t out = slot_get(&cs->fb[b], at);
        slot_set(&cs->fb[b], at, v);
        v = out;
        b = alt_bucket(cs, b, v >> FP_SHIFT);
        if (bucket_put(cs, b, v))
            return 0;
    }
    cs->stash[cs->nstash++] = (stash_ent_t){b, v};
    return 0;
}

static void filt_del(nf_coldset_t *cs, uint64_t sk, uint32_t tag)
{
    if (cs->nb == 0)
        return;
    uint32_t fp = fp_of(sk), v = fp << FP_SHIFT | tag;
    uint64_t i = home_bucket(cs, sk), j = alt_bucket(cs, i, fp);
    if (bucket_del(cs, i, v) || bucket_del(cs, j, v)) {
        cs->nfk--;
        return;
    }
    for (unsigned s = 0; s < cs->nstash; s++) {
        if (cs->stash[s].v == v && (cs->stash[s].b == i || cs->stash[s].b == j)) {
            cs->stash[s] = cs->stash[--cs->nstash];
            cs->nfk--;
            return;
        }
    }
}

/* ---------------------------------------------------------------- runs on disk */

static void seg_unref(seg_t *s)
{
    if (--s->refs == 0) {
        close(s->fd);
        free(s);
    }
}

/* A new current segment (the old one's reference as current dropped). */
static int seg_new(nf_coldset_t *cs)
{
    int fd = open(cs->dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) { /* a file system without O_TMPFILE: a named file, unlinked at once */
        size_t n = strlen(cs->dir) + 32;
        char *path = malloc(n);
        if (!path)
            return -ENOMEM;
        snprintf(path, n, "%s/newsflow-cold-XXXXXX", cs->dir);
        fd = mkostemp(path, O_CLOEXEC);
        if (fd >= 0)
            unlink(path);
        free(path);
        if (fd < 0)
            return -errno;
    }
    seg_t *s = calloc(1, sizeof *s);
    if (!s) {
        close(fd);
        return -ENOMEM;
    }
    s->fd = fd;
    s->refs = 1;
    if (cs->cur)
        seg_unref(cs->cur);
    cs->cur = s;
    return 0;
}

static int read_full(int fd, void *buf, size_t len, uint64_t off)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -EIO;
        got += (size_t)r;
    }
    return 0;
}

static int write_full(int fd, const void *buf, size_t len, uint64_t off)
{
    size_t put = 0;
    while (put < len) {
        ssize_t r = pwrite(fd, (const char *)buf + put, len - put, (off_t)(off + put));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 && errno == ENOSPC ? -ENOSPC : -EIO;
        put += (size_t)r;
    }
    return 0;
}

/* Takes records [0, r->nfilt) of run r out of the filter, reading the run back IO_PAGES pages
 * at a time (and the bucket pair of the record AHEAD places on meanwhile). 0 or -EIO. */
static int unfilter_run(nf_coldset_t *cs, const run_t *r)
{
    uint64_t n = r->nfilt;
    for (uint64_t p = 0; p * PER_PAGE < n; p += IO_PAGES) {
        uint64_t np = r->npages - p < IO_PAGES ? r->npages - p : IO_PAGES;
        if (read_full(r->seg->fd, cs->io, np * PAGE, r->off + p * PAGE) != 0)
            return -EIO;
        for (uint64_t q = 0; q < np; q++) {
            uint64_t first = (p + q) * PER_PAGE;
            uint64_t m = n - first < PER_PAGE ? n - first : PER_PAGE;
            const unsigned char *pg = cs->io + q * PAGE;
            for (uint64_t i = 0; i < m; i++) {
                nf_coldrec_t rec;
                if (i + AHEAD < m) {
                    memcpy(&rec, pg + (i + AHEAD) * sizeof rec, sizeof rec);
                    prefetch_sk(cs, rec_sk(&rec));
                }
                memcpy(&rec, pg + i * sizeof rec, sizeof rec);
                filt_del(cs, rec_sk(&rec), r->tag);
            }
            if (first + m >= n)
                return 0;
        }
    }
    return 0;
}

/* The filter, at its full size, when the first run needs it: a set that spills has filled a
 * ring of a fifth of its budget already, and a filter that grew by doubling would have to read
 * every run back at each step — a pause of seconds at tens of millions of keys. */
static void filter_alloc(nf_coldset_t *cs)
{
    if (cs->nb || cs->max_nb == 0)
        return;
    cs->fb = nf_bigmem_alloc((size_t)cs->max_nb * sizeof *cs->fb);
    if (cs->fb)
        cs->nb = cs->max_nb; /* else no filter: every run unfiltered, exact and slow */
}

/* ---------------------------------------------------------------- sort */

static void sort_small(nf_coldrec_t *a, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        nf_coldrec_t x = a[i];
        uint64_t k = rec_sk(&x);
        size_t j = i;
        while (j > 0 && rec_sk(&a[j - 1]) > k) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = x;
    }
}

/* By sk: four passes of 16 bits between a and tmp, ending in a. */
static int sort_recs(nf_coldrec_t *a, size_t n)
{
    if (n < 64) {
        sort_small(a, n);
        return 0;
    }
    nf_coldrec_t *tmp = nf_bigmem_alloc(n * sizeof *tmp);
    size_t *cnt = malloc(65536 * sizeof *cnt);
    if (!tmp || !cnt) {
        nf_bigmem_free(tmp, n * sizeof *tmp);
        free(cnt);
        return -ENOMEM;
    }
    nf_coldrec_t *src = a, *dst = tmp;
    for (int pass = 0; pass < 4; pass++) {
        int shift = 16 * pass;
        memset(cnt, 0, 65536 * sizeof *cnt);
        for (size_t i = 0; i < n; i++)
            cnt[(rec_sk(&src[i]) >> shift) & 0xFFFF]++;
        size_t at = 0;
        for (size_t d = 0; d < 65536; d++) {
            size_t c = cnt[d];
            cnt[d] = at;
            at += c;
        }
        for (size_t i = 0; i < n; i++)
            dst[cnt[(rec_sk(&src[i]) >> shift) & 0xFFFF]++] = src[i];
        nf_coldrec_t *t = src;
        src = dst;
        dst = t;
    }
    nf_bigmem_free(tmp, n * sizeof *tmp);
    free(cnt);
    return 0;
}

/* ---------------------------------------------------------------- public */

nf_coldset_t *nf_coldset_new(const nf_coldset_opts_t *o, char *err, size_t errlen)
{
    nf_coldset_t *cs = calloc(1, sizeof *cs);
    if (!cs || !(cs->dir = strdup(o->dir)) || !(cs->io = malloc((size_t)IO_PAGES * PAGE))) {
        snprintf(err, errlen, "cold keys: out of memory");
        nf_coldset_free(cs);
        return NULL;
    }
    /* the fixed part (this struct, the I/O buffer) comes out of the filter's share */
    size_t fixed = sizeof *cs + (size_t)IO_PAGES * PAGE;
    cs->max_nb = o->filter_max_bytes > fixed ? (o->filter_max_bytes - fixed) / 16 : 0;
    cs->rng = 0x636f6c6473657421ull;
    int rc = seg_new(cs); /* proves the directory takes files before any key depends on it */
    if (rc != 0) {
        snprintf(err, errlen, "cold keys: cannot create a file in %s: %s", o->dir, strerror(-rc));
        nf_coldset_free(cs);
        return NULL;
    }
    return cs;
}

void nf_coldset_free(nf_coldset_t *cs)
{
    if (!cs)
        return;
    for (size_t i = 0; i < cs->nruns; i++) {
        run_t *r = cs->runs[i];
        free(r->fence);
        seg_unref(r->seg);
        free(r);
    }
    if (cs->cur)
        seg_unref(cs->cur);
    free(cs->runs);
    nf_bigmem_free(cs->fb, (size_t)cs->nb * sizeof *cs->fb);
    free(cs->io);
    free(cs->dir);
    free(cs);
}

/* Room for one more run in cs->runs. */
static int runs_reserve(nf_coldset_t *cs)
{
    if (cs->nruns == cs->runs_cap) {
        size_t cap = cs->runs_cap ? cs->runs_cap * 2 : 16;
        run_t **v = realloc(cs->runs, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        cs->runs = v;
        cs->runs_cap = cap;
    }
    return 0;
}

/* Tags go round: runs sharing one are the oldest and the newest (by then most of the old ones
 * have expired), so a tag names one or two live runs as a rule. */
static uint32_t next_tag(nf_coldset_t *cs)
{
    uint32_t t = cs->next_tag;
    cs->next_tag = (t + 1) % TAGS;
    return t;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int spill(nf_coldset_t *cs, nf_coldrec_t *recs, size_t n);

int nf_coldset_spill(nf_coldset_t *cs, nf_coldrec_t *recs, size_t n)
{
    uint64_t t0 = mono_ns();
    int rc = spill(cs, recs, n);
    uint64_t ns = mono_ns() - t0;
    cs->spill_ns += ns;
    cs->spill_ns_max = ns > cs->spill_ns_max ? ns : cs->spill_ns_max;
    return rc;
}

static int spill(nf_coldset_t *cs, nf_coldrec_t *recs, size_t n)
{
    if (n == 0)
        return 0;
    if (sort_recs(recs, n) != 0)
        return -ENOMEM;
    uint64_t npages = (n + PER_PAGE - 1) / PER_PAGE;
    run_t *r = calloc(1, sizeof *r);
    uint64_t *fence = malloc(npages * sizeof *fence);
    if (!r || !fence || runs_reserve(cs) != 0) {
        free(r);
        free(fence);
        return -ENOMEM;
    }
    int rc = 0;
    if (!cs->cur || (cs->cur->end > 0 && cs->cur->end + npages * PAGE > SEG_MAX))
        rc = seg_new(cs);
    seg_t *s = cs->cur;
    int64_t max_exp = 0;
    for (uint64_t p = 0; p < npages && rc == 0; p += IO_PAGES) {
        uint64_t np = npages - p < IO_PAGES ? npages - p : IO_PAGES;
        memset(cs->io, 0, np * PAGE);
        for (uint64_t q = 0; q < np; q++) {
            uint64_t first = (p + q) * PER_PAGE;
            uint64_t m = n - first < PER_PAGE ? n - first : PER_PAGE;
            fence[p + q] = rec_sk(&recs[first]);
            for (uint64_t i = 0; i < m; i++) {
                const nf_coldrec_t *x = &recs[first + i];
                max_exp = rec_exp(x) > max_exp ? rec_exp(x) : max_exp;
                memcpy(cs->io + q * PAGE + i * sizeof *x, x, sizeof *x);
            }
        }
        rc = write_full(s->fd, cs->io, np * PAGE, s->end + p * PAGE);
    }
    /* Writeback starts now, without waiting for it: left to the kernel, the dirty pages of
     * many runs piled up until it throttled a later spill's writes for seconds (a 4.1 s pause
     * in the 760M-event run of perf/README). */
    if (rc == 0)
        (void)sync_file_range(s->fd, (off_t)s->end, (off_t)(npages * PAGE), SYNC_FILE_RANGE_WRITE);
    if (rc != 0) {
        free(r);
        free(fence);
        return rc == -ENOMEM ? -ENOMEM : rc == -ENOSPC ? -ENOSPC : -EIO;
    }
    *r = (run_t){.seg = s,
                 .off = s->end,
                 .n = n,
                 .npages = npages,
                 .fence = fence,
                 .max_exp = max_exp,
                 .open_sk = UINT64_MAX};
    s->end += npages * PAGE;
    s->refs++;
    r->tag = next_tag(cs);
    filter_alloc(cs);
    while (r->nfilt < n) {
        if (cs->nb && r->nfilt + AHEAD < n)
            prefetch_sk(cs, rec_sk(&recs[r->nfilt + AHEAD]));
        if (filt_put(cs, rec_sk(&recs[r->nfilt]), r->tag) != 0)
            break;
        r->nfilt++;
    }
    r->tag_next = cs->by_tag[r->tag];
    cs->by_tag[r->tag] = r;
    if (r->nfilt < n) {
        r->open_sk = rec_sk(&recs[r->nfilt]);
        cs->npartial++;
        cs->unfiltered += n - r->nfilt;
    }
    cs->runs[cs->nruns++] = r;
    cs->keys += n;
    cs->disk += npages * PAGE;
    cs->fence_bytes += npages * sizeof *fence;
    cs->spills++;
    return 0;
}

/* The last page of r whose first sk is <= sk (sk >= the run's first). */
static uint64_t page_of(const run_t *r, uint64_t sk)
{
    uint64_t lo = 0, hi = r->npages; /* the first page whose fence is > sk */
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (r->fence[mid] <= sk)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - 1;
}

/* Whether run r holds (kg, key) unexpired at now: the page its sk falls in, and the pages
 * before while they start with that same sk. */
static int run_search(nf_coldset_t *cs, const run_t *r, uint64_t sk, uint16_t kg, nf_id128_t key,
                      int64_t now)
{
    if (r->max_exp <= now || sk < r->fence[0])
        return 0;
    for (uint64_t p = page_of(r, sk);; p--) {
        if (read_full(r->seg->fd, cs->page, PAGE, r->off + p * PAGE) != 0)
            return -EIO;
        cs->reads++;
        uint64_t first = p * PER_PAGE, m = r->n - first < PER_PAGE ? r->n - first : PER_PAGE;
        for (uint64_t i = 0; i < m; i++) {
            nf_coldrec_t x;
            memcpy(&x, cs->page + i * sizeof x, sizeof x);
            if (x.hi == key.hi && x.lo == key.lo && (uint16_t)x.expkg == kg && rec_exp(&x) > now)
                return 1;
        }
        if (p == 0 || r->fence[p] != sk)
            return 0;
    }
}

/* The tags of the filter's entries whose fingerprint is sk's, in its two buckets and the
 * stash, into tags (room for 2 * SLOTS + STASH); how many. A tag may come twice. */
static unsigned match_tags(const nf_coldset_t *cs, uint64_t sk, uint32_t *tags)
{
    uint32_t fp = fp_of(sk);
    uint64_t b[2] = {home_bucket(cs, sk), 0};
    b[1] = alt_bucket(cs, b[0], fp);
    unsigned n = 0;
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < SLOTS; i++) {
            uint32_t v = slot_get(&cs->fb[b[k]], i);
            if (v >> FP_SHIFT == fp)
                tags[n++] = v & (TAGS - 1);
        }
    }
    for (unsigned i = 0; i < cs->nstash; i++) {
        const stash_ent_t *e = &cs->stash[i];
        if (e->v >> FP_SHIFT == fp && (e->b == b[0] || e->b == b[1]))
            tags[n++] = e->v & (TAGS - 1);
    }
    return n;
}

/* run_search over the live runs with the tag: 1 (counted a hit), 0, or -EIO. */
static int search_tag(nf_coldset_t *cs, uint32_t tag, uint64_t sk, uint16_t kg, nf_id128_t key,
                      int64_t now)
{
    for (const run_t *r = cs->by_tag[tag]; r; r = r->tag_next) {
        int rc = run_search(cs, r, sk, kg, key, now);
        if (rc != 0) {
            cs->hits += rc > 0;
            return rc;
        }
    }
    return 0;
}

int nf_coldset_contains(nf_coldset_t *cs, uint16_t kg, nf_id128_t key, int64_t now_ms)
{
    if (cs->nruns == 0)
        return 0;
    cs->lookups++;
    uint64_t sk = key_sk(kg, key.hi, key.lo);
    if (cs->nb) {
        uint32_t tags[2 * SLOTS + STASH];
        for (unsigned i = 0, n = match_tags(cs, sk, tags); i < n; i++) {
            int rc = search_tag(cs, tags[i], sk, kg, key, now_ms);
            if (rc != 0)
                return rc;
        }
    }
    for (size_t i = 0; cs->npartial && i < cs->nruns; i++) {
        const run_t *r = cs->runs[i];
        if (r->nfilt == r->n || sk < r->open_sk)
            continue;
        int rc = run_search(cs, r, sk, kg, key, now_ms);
        if (rc != 0) {
            cs->hits += rc > 0;
            return rc;
        }
    }
    return 0;
}

void nf_coldset_prefetch(const nf_coldset_t *cs, uint16_t kg, nf_id128_t key)
{
    if (cs->nb)
        prefetch_sk(cs, key_sk(kg, key.hi, key.lo));
}

static void advise_page(const run_t *r, uint64_t sk)
{
    if (sk >= r->fence[0])
        (void)posix_fadvise(r->seg->fd, (off_t)(r->off + page_of(r, sk) * PAGE), PAGE,
                            POSIX_FADV_WILLNEED);
}

void nf_coldset_prefetch_page(const nf_coldset_t *cs, uint16_t kg, nf_id128_t key)
{
    if (!cs->nb || cs->nruns == 0)
        return;
    uint64_t sk = key_sk(kg, key.hi, key.lo);
    uint32_t tags[2 * SLOTS + STASH];
    for (unsigned i = 0, n = match_tags(cs, sk, tags); i < n; i++)
        for (const run_t *r = cs->by_tag[tags[i]]; r; r = r->tag_next)
            advise_page(r, sk);
}

/* Takes run i out: its keys out of the filter (the run is read back for them), its tag, its
 * place in the segment. -EIO if it could not be read (it is dropped all the same: its filter
 * entries then stay, pointing at no run or at a later one with the tag — a wasted page read,
 * never a wrong answer, since a read checks the key itself). */
static int run_remove(nf_coldset_t *cs, size_t i)
{
    run_t *r = cs->runs[i];
    int rc = r->nfilt > 0 && cs->nb ? unfilter_run(cs, r) : 0;
    /* its disk space back now, not when the segment's last run goes (best effort: a file
     * system without hole punching keeps it until then) */
    (void)fallocate(r->seg->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)r->off,
                    (off_t)(r->npages * PAGE));
    run_t **at = &cs->by_tag[r->tag];
    while (*at != r)
        at = &(*at)->tag_next;
    *at = r->tag_next;
    if (r->nfilt < r->n) {
        cs->npartial--;
        cs->unfiltered -= r->n - r->nfilt;
    }
    cs->keys -= r->n;
    cs->disk -= r->npages * PAGE;
    cs->fence_bytes -= r->npages * sizeof *r->fence;
    memmove(&cs->runs[i], &cs->runs[i + 1], (cs->nruns - i - 1) * sizeof *cs->runs);
    cs->nruns--;
    seg_unref(r->seg);
    free(r->fence);
    free(r);
    return rc;
}

long nf_coldset_expire(nf_coldset_t *cs, int64_t now_ms)
{
    long dropped = 0;
    int rc = 0;
    for (size_t i = 0; i < cs->nruns;) {
        if (cs->runs[i]->max_exp > now_ms) {
            i++;
            continue;
        }
        dropped += (long)cs->runs[i]->n;
        rc |= run_remove(cs, i);
        cs->expired_runs++;
    }
    return rc ? -EIO : dropped;
}

void nf_coldset_stats(const nf_coldset_t *cs, nf_coldset_stats_t *out)
{
    *out = (nf_coldset_stats_t){
        .keys = cs->keys,
        .runs = cs->nruns,
        .bytes = sizeof *cs + (size_t)cs->nb * sizeof(bucket_t) + cs->fence_bytes +
                 cs->runs_cap * sizeof(run_t *) + cs->nruns * sizeof(run_t) +
                 (size_t)IO_PAGES * PAGE,
        .disk_bytes = cs->disk,
        .unfiltered = cs->unfiltered,
        .lookups = cs->lookups,
        .reads = cs->reads,
        .hits = cs->hits,
        .spills = cs->spills,
        .expired_runs = cs->expired_runs,
        .spill_ns = cs->spill_ns,
        .spill_ns_max = cs->spill_ns_max,
    };
}
