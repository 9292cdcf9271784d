/* identity.h — whose state a state directory holds: the start's guard against an ordinary operator
 * action (another job's state.dir, a newer build's state) that would otherwise mix two jobs'
 * state or misread a format without a word. docs/ARCHITECTURE.md "State identity";
 * docs/runbooks.md "State from another job".
 *
 * The identity record ("meta/identity" in the store, store.h; it travels into every named
 * checkpoint with the rest of the "default" family) is JSON:
 *   {"format":1,"group":"newsflow","topic_prefix":"","writer":"newsflow-0",
 *    "version":"0.1.0","commit":"abc1234"}
 * format is the state's format version: a build refuses a state whose format is newer than its
 * own (NF_STATE_FORMAT). A state written before identities existed has none: the first start
 * records it. version and commit name the build that last opened it (informational).
 *
 * The other half of the guard, whether the state stands where the consumer group stands in the
 * inputs (an empty, lost or older state.dir), is the epoch's: epoch.h nf_epoch_guard_positions. */
#ifndef NF_IDENTITY_H
#define NF_IDENTITY_H

#include "state/store.h"

#include <stdbool.h>
#include <stddef.h>

/* The state format this build writes. A change that an older build would misread raises it.
 * 1: the first with an identity record. 2: a reader's settings may hold muted sources
 * (engine/follows.h), which a build of format 1 would read as no settings at all. */
#define NF_STATE_FORMAT 2

typedef struct nf_identity {
    const char *group;        /* kafka.group_id */
    const char *topic_prefix; /* kafka.topic_prefix */
    const char *writer;       /* kafka.transactional_id */
} nf_identity_t;

/* The recorded identity against this job's. 0: it matches, or none was recorded (recorded now:
 * *recorded set); then the record names this build. -EEXIST: another job's state, or a newer
 * format: err names both and the ways out. -EIO/-ENOMEM with err. */
int nf_identity_check(nf_store_t *st, const nf_identity_t *id, bool *recorded, char *err,
                      size_t errlen);

#endif
