/* idset.h — a set of 128-bit ids with a 64-bit value each, in memory: today the sources list's
 * index of source ids (actors/sources.c). (It held the ArticleKey table before that became keyed
 * state over RocksDB in actors/dedup.c.)
 *
 * Open addressing with linear probing over a power-of-two table kept at most 3/4 full; ids are
 * already uniform (SHA-256 prefixes), so their first word is the hash. Grows by doubling (the
 * only allocation; amortised O(1)); no deletion yet (TTL eviction comes with the durable state
 * layer). One shard owns a set: not thread-safe. */
#ifndef NF_IDSET_H
#define NF_IDSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nf_id128 {
    uint64_t hi, lo;
} nf_id128_t;

/* -1, 0 or 1: ids ordered by their first word, then their second. */
static inline int nf_id128_cmp(nf_id128_t a, nf_id128_t b)
{
    return a.hi != b.hi ? (a.hi < b.hi ? -1 : 1) : a.lo != b.lo ? (a.lo < b.lo ? -1 : 1) : 0;
}

typedef struct nf_idset_entry {
    nf_id128_t id;
    uint64_t value;
} nf_idset_entry_t;

typedef struct nf_idset {
    nf_idset_entry_t *slots;
    size_t mask; /* capacity - 1 */
    size_t count;
    bool has_zero; /* the all-zero id marks empty slots, so it is stored aside */
    uint64_t zero_value;
} nf_idset_t;

int nf_idset_init(nf_idset_t *s, size_t initial_capacity);
void nf_idset_free(nf_idset_t *s);

/* Inserts id with value if absent: returns 1 (inserted), 0 (present: *existing gets its value,
 * if non-NULL), or -ENOMEM. */
int nf_idset_insert(nf_idset_t *s, nf_id128_t id, uint64_t value, uint64_t *existing);
/* true and *value if present. */
bool nf_idset_get(const nf_idset_t *s, nf_id128_t id, uint64_t *value);
static inline size_t nf_idset_count(const nf_idset_t *s)
{
    return s->count + (s->has_zero ? 1 : 0);
}
/* Empties the set, keeping its memory (O(capacity)). */
void nf_idset_clear(nf_idset_t *s);
/* Bytes of memory held (for metrics and the memory budget). */
size_t nf_idset_bytes(const nf_idset_t *s);

/* The id as 32 lower-case hex digits and a NUL (an article_id, a user key in a log line). */
void nf_id128_hex(nf_id128_t id, char out[33]);
/* Parses 32 hex digits (an article_id) into an id; 0 or -1. */
int nf_id128_from_hex(const char *hex, nf_id128_t *out);
/* The same for exactly the 32 bytes at hex (readable; no terminator looked at), with SSE2 where
 * there is SSE2: the read path parses an article id per event. 0 or -1. */
int nf_id128_from_hex32(const char *hex, nf_id128_t *out);

#endif
