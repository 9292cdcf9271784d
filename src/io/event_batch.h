/* event_batch.h — a batch of reader events as the HTTP edge receives it (serve/edge.h), split
 * into the byte spans of its events.
 *
 * A batch is either a JSON array of values ("[ {...}, {...} ]") or NDJSON (one value per line,
 * blank lines skipped, a "\r" before the "\n" allowed): the first byte that is not whitespace
 * decides ('[' an array, anything else NDJSON). The splitter does not parse the events: it finds
 * where each one starts and ends (strings with their escapes skipped, brackets counted) and
 * hands the span to nf_read_event_decode (events.h), which says precisely what is wrong with
 * one event without losing the others. Only what makes the spans unknowable fails the whole
 * batch: an unterminated string or array, a missing ',' between elements, nesting deeper than
 * NF_EVENT_BATCH_MAX_DEPTH, text after the array.
 *
 * Messages (0-based byte offsets from the start of the body):
 *   NF_EVENT_E_NOT_OBJECT  empty body; expected a JSON array or NDJSON of events
 *   NF_EVENT_E_SYNTAX      invalid JSON array at byte 17: expected ',' or ']' after an element
 *                          invalid JSON array at byte 9: expected a value after ','
 *                          invalid JSON array at byte 40: unterminated string
 *                          invalid JSON array at byte 40: unterminated array
 *                          invalid JSON array at byte 52: text after the array
 *   NF_EVENT_E_DEPTH       invalid JSON at byte 80: nested deeper than 32 levels
 *
 * No allocation; the spans point into the caller's body. Any thread; one batch per thread. */
#ifndef NF_EVENT_BATCH_H
#define NF_EVENT_BATCH_H

#include <stdbool.h>
#include <stddef.h>

#define NF_EVENT_BATCH_MAX_DEPTH 32

typedef struct nf_event_batch {
    const char *body, *p, *end;
    bool array, done;
    bool after_comma; /* an array element must come next */
} nf_event_batch_t;

/* Starts reading body[0..len). 0, or -NF_EVENT_E_NOT_OBJECT for a body of whitespace only. */
int nf_event_batch_init(nf_event_batch_t *b, const char *body, size_t len, char *err,
                        size_t errlen);

/* The next event's span (*ev, *len; surrounding whitespace trimmed): 1; 0 at the end of the
 * batch; or a negative nf_event_error_t with the message in err, after which the batch is done. */
int nf_event_batch_next(nf_event_batch_t *b, const char **ev, size_t *len, char *err,
                        size_t errlen);

#endif
