/* probe.h — the linear-probing index that kstate and keyset both keep over their records:
 * 8-byte slots {record + 1 (0 = empty), the key's 32-bit hash}, a power-of-two count, a key's
 * home slot = hash & mask. The records and their keys stay with each user. */
#ifndef NF_STATE_PROBE_H
#define NF_STATE_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nf_probe_slot {
    uint32_t ref1; /* the record's index + 1; 0 = empty */
    uint32_t h;    /* the key's hash: home = h & mask */
} nf_probe_slot_t;

/* The first empty slot of h's probe run (where a new key with hash h goes). */
static inline size_t nf_probe_empty(const nf_probe_slot_t *slots, size_t mask, uint32_t h)
{
    size_t i = h & mask;
    while (slots[i].ref1 != 0)
        i = (i + 1) & mask;
    return i;
}

/* The ref1 of the first slot of h's probe run whose tag is h, 0 if none: the record a lookup
 * would compare first, known without reading any record (a tag match may still be another
 * key). For prefetch hints. */
static inline uint32_t nf_probe_peek(const nf_probe_slot_t *slots, size_t mask, uint32_t h)
{
    for (size_t i = h & mask; slots[i].ref1 != 0; i = (i + 1) & mask)
        if (slots[i].h == h)
            return slots[i].ref1;
    return 0;
}

/* Empties slot hole by backward-shift deletion: later members of the probe run move up into
 * the hole unless their home lies cyclically within (hole, their position]. */
static inline void nf_probe_remove(nf_probe_slot_t *slots, size_t mask, size_t hole)
{
    size_t j = hole;
    for (;;) {
        j = (j + 1) & mask;
        if (slots[j].ref1 == 0)
            break;
        size_t home = slots[j].h & mask;
        bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (stays)
            continue;
        slots[hole] = slots[j];
        hole = j;
    }
    slots[hole] = (nf_probe_slot_t){0, 0};
}

#endif
