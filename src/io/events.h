/* events.h — the job's Kafka inputs decoded into structs, and the dead-letter record for the
 * ones that cannot be (docs/topics.md; docs/ARCHITECTURE.md §3 "A read event").
 *
 * read-events arrive at a million a second per core, so the decoders make one pass over the
 * bytes straight into fixed-size fields: no cJSON tree, no allocation, no syscall, no global
 * state (any thread may call anything here). They accept exactly RFC 8259 JSON in UTF-8 — one
 * flat object, whitespace around it allowed — because a record the job half-understands is worse
 * than one it dead-letters: a refused record goes to the dead-letters topic with the reason the
 * decoder wrote, never blocks its partition and is never silently dropped.
 *
 * What the decoders accept, beyond the grammar:
 *   - unknown fields are skipped, whatever their value, including nested objects and arrays
 *     up to NF_EVENT_MAX_DEPTH levels (the record's own object is level 1), so producers can
 *     add fields without a coordinated release. Duplicate keys are refused for the known
 *     fields (compared after unescaping: "user_id" and "\u0075ser_id" are the same key) and
 *     not looked for among unknown ones, which are never read;
 *   - null for an optional field means absent; for a required one it is a type error;
 *   - strings must be valid UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF);
 *     \uXXXX escapes, surrogate pairs included, are decoded to UTF-8; a lone surrogate is
 *     refused. Id fields may not contain U+0000 (they are C strings, and the event_id
 *     encoding below relies on it); unknown fields may;
 *   - a timestamp is either an RFC 3339 date-time string (upper or lower case T and Z, any
 *     number of fraction digits of which the first three count, a numeric offset or Z, second
 *     60 accepted as the next minute's :00 like timegm) or an integer of epoch milliseconds
 *     (no fraction, no exponent); either must fall in years 1970..9999 UTC. The decoders read
 *     no clock: nf_read_event_check_time (below) holds a decoded ts against the wall clock.
 *
 * Errors. A decoder returns 0, or a negative nf_event_error_t with one NUL-terminated message
 * in err (cut to errlen; err may be NULL). The most fundamental problem wins: the size check,
 * then the first syntax/UTF-8/depth error anywhere in the record, then the first field error
 * in document order, then a missing required field. Byte offsets are 0-based from the start
 * of the value. Quoted excerpts of the input in messages are valid UTF-8, at most 40 bytes,
 * control characters shown as '?'. The messages, exactly:
 *   NF_EVENT_E_TOO_BIG    record is 70000 bytes, over the limit of 65536
 *   NF_EVENT_E_SYNTAX     invalid JSON at byte 17: expected ',' or '}' after a field, got 'x'
 *                         (what was expected, then what was found: 'c' for printable ASCII,
 *                         "end of input", "byte 0x00", "control character 0x0a in a string"...)
 *   NF_EVENT_E_UTF8       invalid UTF-8 at byte 12 (byte 0xc3)
 *                         invalid UTF-8 at byte 12: unpaired surrogate \ud800
 *   NF_EVENT_E_DEPTH      invalid JSON at byte 40: nested deeper than 32 levels
 *   NF_EVENT_E_NOT_OBJECT empty value; expected a JSON object
 *                         top level is an array; expected a JSON object
 *   NF_EVENT_E_DUPLICATE  duplicate field "user_id" at byte 40 (first at byte 1)
 *   NF_EVENT_E_MISSING    missing required field "ts"
 *                         key (source_id) is missing; a sources record needs one
 *   NF_EVENT_E_TYPE       field "user_id": expected a string, got a number
 *                         field "ts": expected an RFC 3339 date-time string or integer epoch
 *                         milliseconds, got a boolean
 *   NF_EVENT_E_EMPTY      field "article_id" is empty
 *   NF_EVENT_E_TOO_LONG   field "user_id" is too long: 200 bytes, max 128
 *   NF_EVENT_E_TS         field "ts": "2024-13-01T00:00:00Z" is not an RFC 3339 date-time
 *                         field "ts": 1.5e12 is not integer epoch milliseconds
 *                         field "ts": "0001-01-01T00:00:00Z" is out of range (years 1970..9999)
 *                         field "ts": -5 is out of range (years 1970..9999)
 *   NF_EVENT_E_VALUE      field "user_id" contains U+0000
 *                         field "type": "xml" is not one of auto, rss, atom, json
 *                         field "interval_s": -1 is out of range [0, 31536000]
 * On failure *out holds whatever was decoded so far: do not use it. */
#ifndef NF_EVENTS_H
#define NF_EVENTS_H

#include "runtime/jsonw.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Largest id field, in bytes of UTF-8 (the struct holds one more for the NUL). */
#define NF_EVENT_FIELD_MAX 128
/* Largest variant field (engine/variants.h's names are at most as long). */
#define NF_EVENT_VARIANT_MAX 32
/* Nesting cap for skipped values; the record's object is level 1. */
#define NF_EVENT_MAX_DEPTH 32
/* Valid ts_ms: 1970-01-01T00:00:00Z .. 9999-12-31T23:59:59.999Z. */
#define NF_EVENT_TS_MAX 253402300799999LL

typedef enum nf_event_error {
    NF_EVENT_OK = 0,
    NF_EVENT_E_TOO_BIG = 1,
    NF_EVENT_E_SYNTAX,
    NF_EVENT_E_UTF8,
    NF_EVENT_E_DEPTH,
    NF_EVENT_E_NOT_OBJECT,
    NF_EVENT_E_DUPLICATE,
    NF_EVENT_E_MISSING,
    NF_EVENT_E_TYPE,
    NF_EVENT_E_EMPTY,
    NF_EVENT_E_TOO_LONG,
    NF_EVENT_E_TS,
    NF_EVENT_E_VALUE,
    NF_EVENT_E__COUNT
} nf_event_error_t;

/* A short stable name for a decoder result (0 or negative), for metric labels: "ok",
 * "too_big", "syntax", "utf8", "depth", "not_object", "duplicate", "missing", "type", "empty",
 * "too_long", "ts", "value"; "unknown" for anything else. */
const char *nf_event_error_name(int rc);

/* ---------------------------------------------------------------- read-events */

/* What the reader did (the optional "kind" field; absent or null is a read). Explicit feedback
 * (issue 38) travels on read-events beside implicit reads: one topic, one order per reader. */
typedef enum nf_read_kind {
    NF_READ_KIND_READ = 0,
    NF_READ_KIND_SAVE,
    NF_READ_KIND_SHARE,
    NF_READ_KIND_DISLIKE,
    NF_READ_KIND_HIDE,
    NF_READ_KIND__COUNT
} nf_read_kind_t;

/* A reader's settings (issue 45) travel on read-events too, after the reader's reads in one order:
 * follow / unfollow / mute / unmute / subscribe / unsubscribe a topic of the taxonomy (the `topic`
 * field; the decoded event carries its name in article_id). They are not reads: trending and
 * interest leave them to the reads actor's settings (actors/reads.h). Following a topic ends muting
 * it and the reverse. */
enum {
    NF_READ_KIND_FOLLOW = NF_READ_KIND__COUNT,
    NF_READ_KIND_UNFOLLOW,
    NF_READ_KIND_MUTE,
    NF_READ_KIND_UNMUTE,
    NF_READ_KIND_SUBSCRIBE, /* breaking news of the topic notified (engine/notify.h) */
    NF_READ_KIND_UNSUBSCRIBE,
    /* a source's articles left out of the reader's feed (engine/follows.h); these two name a
     * `source` (its source_id, as articles carry it) instead of a topic */
    NF_READ_KIND_MUTE_SOURCE,
    NF_READ_KIND_UNMUTE_SOURCE,
    NF_EVENT_KIND__COUNT
};
static inline bool nf_read_kind_is_setting(int kind)
{
    return kind >= NF_READ_KIND_FOLLOW && kind < NF_EVENT_KIND__COUNT;
}
/* A setting that names a source (its `source` field) rather than a topic. */
static inline bool nf_read_kind_is_source(int kind)
{
    return kind == NF_READ_KIND_MUTE_SOURCE || kind == NF_READ_KIND_UNMUTE_SOURCE;
}

/* "read", "save", "share", "dislike", "hide", "follow", "unfollow", "mute", "unmute",
 * "subscribe", "unsubscribe", "mute_source", "unmute_source" ("?" for anything else). */
const char *nf_read_kind_name(int kind);

typedef struct nf_read_event {
    char user_id[NF_EVENT_FIELD_MAX + 1]; /* required, non-empty */
    /* required, non-empty; a setting's topic name (its `topic` field) for the settings kinds,
     * its source_id (its `source` field) for the source kinds */
    char article_id[NF_EVENT_FIELD_MAX + 1];
    char session_id[NF_EVENT_FIELD_MAX + 1]; /* optional: "" when absent or null */
    char event_id[NF_EVENT_FIELD_MAX + 1];   /* as given (non-empty), else computed */
    bool event_id_given;
    /* strlen() of each id, so that its users need not measure it again */
    uint8_t user_len, article_len, session_len, event_id_len;
    uint8_t kind;  /* nf_read_kind_t */
    int64_t ts_ms; /* UTC epoch milliseconds, 0 .. NF_EVENT_TS_MAX */
    /* optional: the ranking variant of the feed the read came from ("" when absent or null;
     * engine/variants.h), whatever its spelling: the job counts a name it does not know as
     * "other" rather than refuse the read */
    char variant[NF_EVENT_VARIANT_MAX + 1];
    uint8_t variant_len;
} nf_read_event_t;

/* The event_id of an event that does not carry one (docs/topics.md "Deterministic ids"), so that a
 * replayed or re-sent event is recognised as the same one: the lower-case hex (64 digits) of
 *   SHA-256( user_id 0x00 article_id 0x00 session_id 0x00 )            for a read
 *   SHA-256( user_id 0x00 article_id 0x00 session_id 0x00 kind 0x00 )   for feedback
 *   SHA-256( user_id 0x00 topic 0x00 session_id 0x00 kind 0x00 ts 0x00 ) for a setting (ts its
 *                                         decimal epoch ms: follow, unfollow, follow are three;
 *                                         a source setting has its source in place of topic)
 * over the fields' UTF-8 bytes, each followed by one NUL byte (an absent session_id is the
 * empty string: it contributes only its NUL; kind is its name, "save"...). No field can contain
 * NUL, so different tuples never share an encoding; a read keeps the id it had before kinds
 * existed, so events already in Kafka keep theirs. out receives 65 bytes. */
void nf_read_event_id(const char *user_id, const char *article_id, const char *session_id, int kind,
                      int64_t ts_ms, char out[65]);

/* The canonical read-events value of e (what the HTTP edge produces, serve/edge.h), appended to
 * w: {"event_id":E,"user_id":U,"article_id":A[,"session_id":S][,"kind":K][,"variant":V],
 * "ts":MS} ("topic", or "source" for a source setting, in place of "article_id" for a
 * setting) — session_id and variant
 * only when non-empty, kind only when not a read, ts as integer epoch milliseconds — so that a
 * read the edge writes takes the decoder's fast path and decodes back to e. */
void nf_read_event_json(nf_jw_t *w, const nf_read_event_t *e);

/* Decodes one read-events value (json, len bytes; need not be NUL-terminated) into *out.
 * Fields: user_id, article_id (strings, required, 1..128 bytes), session_id (string or null,
 * optional, 0..128 bytes), variant (string or null, optional, 0..32 bytes: not part of the
 * event id, a read is the same read whichever feed it came from), event_id (string or null,
 * optional, 1..128 bytes; computed with
 * nf_read_event_id() when absent), kind (string or null, optional: one of the kinds' names, else
 * NF_EVENT_E_VALUE `field "kind": "like" is not one of read, save, share, dislike, hide, follow,
 * unfollow, mute, unmute`), ts (required; RFC 3339 string or integer epoch ms), topic (string,
 * 1..128 bytes: required for the settings kinds, which take no article_id — `field
 * "article_id": a follow names a topic, not an article` — and ignored for the others, whatever
 * its value, except that a repeated "topic" key is refused as any known field's is); source
 * (string, 1..128 bytes): the same for the source kinds (mute_source, unmute_source) — `field
 * "topic": a mute_source names a source, not a topic` when a source setting names a topic.
 * max_bytes: larger values are refused before any parsing (0: no limit).
 * 0, or -NF_EVENT_E_* with the message in err (see the top of this file). */
int nf_read_event_decode(const char *json, size_t len, size_t max_bytes, nf_read_event_t *out,
                         char *err, size_t errlen);
/* The same decoder without its fast path for the common shape (plain ASCII ids, integer ts, no
 * other field): nf_read_event_decode gives exactly its result for every input, which the tests
 * and the fuzz target check by comparing the two. */
int nf_read_event_decode_strict(const char *json, size_t len, size_t max_bytes,
                                nf_read_event_t *out, char *err, size_t errlen);

/* Event time against the job's clock (issue 15). The decoder above takes any ts in years
 * 1970..9999 and reads no clock; the kafka_in actor (actors/reads.h) then calls this with its
 * wall clock, and a refused event goes to dead-letters (stage "event_time") before it reaches
 * the event-id dedup set, the trending watermark or a user's interest: one event dated
 * 9999-12-31 would otherwise move its partition's watermark past every later event for good.
 * Accepted: NF_EVENT_TS_FLOOR <= ts_ms <= now_ms + max_future_ms (max_future_ms 0: no upper
 * bound, for benchmarks). The floor is fixed: no read of this job is older than 2000, and a ts
 * below it is a clock that was never set (0) or epoch seconds sent as milliseconds (1.7e9 ms
 * is January 1970). 0, or -NF_EVENT_E_TS with one of these messages in err (cut to errlen; err
 * may be NULL):
 *   field "ts": 9999-12-31T23:59:59.999Z is 251606683554235 ms ahead of the wall clock
 *   (2026-11-25T19:05:54.764Z), more than the 300000 allowed (trending.max_future_ms)
 *   field "ts": 1970-01-20T16:13:20Z is before 2000-01-01T00:00:00Z (a clock that was not set,
 *   or epoch seconds sent as milliseconds?) */
#define NF_EVENT_TS_FLOOR 946684800000LL /* 2000-01-01T00:00:00Z */
int nf_read_event_check_time(int64_t ts_ms, int64_t now_ms, int64_t max_future_ms, char *err,
                             size_t errlen);

/* ---------------------------------------------------------------- sources */

#define NF_SOURCE_ID_MAX       128       /* bytes of the record key */
#define NF_SOURCE_URL_MAX      1023      /* bytes; the sources module refuses longer URLs too */
#define NF_SOURCE_INTERVAL_MAX 31536000u /* one year, in seconds */
#define NF_SOURCE_CRAWL_AT_MAX 253402300799999ll /* ms: the end of year 9999 */

typedef enum { NF_SOURCE_AUTO = 0, NF_SOURCE_RSS, NF_SOURCE_ATOM, NF_SOURCE_JSON } nf_source_type_t;
typedef enum { NF_SOURCE_ACTIVE = 0, NF_SOURCE_PAUSED, NF_SOURCE_DEAD } nf_source_status_t;

typedef struct nf_source_record {
    char source_id[NF_SOURCE_ID_MAX + 1]; /* the record key; non-empty */
    bool tombstone;                       /* NULL or empty value: remove the source */
    /* The rest is set only when !tombstone. */
    char url[NF_SOURCE_URL_MAX + 1]; /* required, non-empty; checked and normalized later by
                                        nf_sources_add(), not here */
    nf_source_type_t type;           /* "auto" (default), "rss", "atom", "json" */
    uint32_t interval_s;             /* 0 (default) = the crawl default; 0..31536000 */
    nf_source_status_t status;       /* "active" (default), "paused", "dead" */
    /* "crawl_at_ms": an operator's crawl-now request (wall clock, ms; 0 = none): a source that
     * has not applied this request yet is crawled now (ingest.h). 0..NF_SOURCE_CRAWL_AT_MAX. */
    int64_t crawl_at_ms;
} nf_source_record_t;

/* Decodes one record of the compacted sources topic: key (keylen bytes: the source_id; must
 * be present, non-empty, valid UTF-8 without NUL, at most NF_SOURCE_ID_MAX bytes) and value
 * (NULL or 0 bytes: a tombstone, nothing else is read). Value fields: url (string, required),
 * type, status (strings from the lists above, or null), interval_s, crawl_at_ms (integers or
 * null); unknown
 * fields are skipped. Same errors, limits and messages as nf_read_event_decode(); a bad key is
 * NF_EVENT_E_MISSING, _EMPTY, _TOO_LONG, _UTF8 or _VALUE, its message starting with "key". */
int nf_source_record_decode(const char *key, size_t keylen, const char *value, size_t len,
                            size_t max_bytes, nf_source_record_t *out, char *err, size_t errlen);

const char *nf_source_type_name(nf_source_type_t t);     /* "auto", "rss", ... */
const char *nf_source_status_name(nf_source_status_t s); /* "active", "paused", "dead" */

/* ---------------------------------------------------------------- dead-letters */

/* The excerpt of a payload a dead letter carries: at most this many bytes of it. */
#define NF_DEAD_LETTER_EXCERPT 1024

/* Appends the dead-letters value for one refused record to w (one JSON object; the caller
 * resets w or writes around it):
 *   {"origin":{"topic":T,"partition":P,"offset":O},"stage":S,"error":E,"payload":X,"ts":TS}
 * payload is an excerpt: the first NF_DEAD_LETTER_EXCERPT bytes of the payload at most, cut
 * before a UTF-8 sequence that would straddle the limit, every byte that is not part of valid
 * UTF-8 replaced by U+FFFD, as a JSON string (NUL and control characters escaped); null when
 * payload is NULL (a Kafka tombstone). error gets the same repair and cut, so a message that
 * quotes input stays valid JSON. topic and stage are program constants (valid UTF-8); use a
 * partition and offset of -1 for inputs that did not come from Kafka. ts is now_ms in RFC 3339
 * UTC (the caller's clock, so that tests and replays are deterministic). No allocation beyond
 * w's buffer; w->failed reports an allocation failure. */
void nf_dead_letter_json(nf_jw_t *w, const char *topic, int32_t partition, int64_t offset,
                         const char *stage, const char *error, const void *payload,
                         size_t payload_len, int64_t now_ms);

/* The dead-letters record key naming the origin: "TOPIC/PARTITION/OFFSET" ('/' cannot occur
 * in a Kafka topic name). Returns the length like snprintf (>= cap: cut). */
size_t nf_dead_letter_key(char *out, size_t cap, const char *topic, int32_t partition,
                          int64_t offset);

#endif
