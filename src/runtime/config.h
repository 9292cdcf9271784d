/* config.h — newsflow's configuration: parsed once, validated once, into a typed struct.
 *
 * Every key is one row of a descriptor table in config.c (dotted path, type, field offset,
 * range, default, help); parsing, validation, defaults, the environment mapping, the canonical
 * JSON and `newsflow config keys` are all driven by that table, so adding a key is adding a row
 * (and a field below). After nf_config_load() returns nothing reads JSON again: the rest of the
 * program reads nf_config_t fields.
 *
 * Layers, later wins: built-in defaults, the file, the environment, --set options. A layer may
 * name any subset of keys; keys it does not name keep the value of the layer below.
 *   file          a JSON object of sections, e.g. {"runtime": {"shards": 4}}. Keys are case
 *                 sensitive; unknown sections/keys and duplicate keys are errors.
 *   environment   NEWSFLOW_<SECTION>_<KEY> = "NEWSFLOW_" + path uppercased, '.' -> '_'
 *                 (runtime.shards -> NEWSFLOW_RUNTIME_SHARDS). NEWSFLOW_CONFIG is reserved for
 *                 the caller (it names the file; this module does not read it); any other
 *                 NEWSFLOW_* variable is an error, so a typo cannot be silently ignored.
 *   --set         "section.key=value" strings.
 * Text values (environment, --set) are parsed by the key's type: bool true/false/1/0; unsigned
 * integers in decimal, digits only (no sign, no spaces, no trailing characters, no overflow);
 * strings and enums verbatim.
 *
 * Errors. nf_config_load() writes its message into err (size it NF_CONFIG_ERRLEN; longer messages
 * are cut). A file that parses as JSON has every bad key reported, one message per line (as many
 * as fit); a syntax error, an environment variable or a --set stops at the first. Every message
 * starts with where the value came from — WHERE is "FILE:LINE" (1-based line of the key in the
 * file), "environment NAME" or "--set ARG" — and names the key by its dotted path:
 *   FILE: cannot read: <strerror>               FILE: larger than 1048576 bytes
 *   FILE: empty; expected a JSON object
 *   FILE:LINE:COL: invalid JSON near '<up to 20 chars>'   (COL in bytes; the excerpt stops at
 *                  the line end or another control character; " (unexpected end)",
 *                  " (a NUL byte)", " (a control character, 0x0c)" or
 *                  " (\u0000: strings cannot hold a NUL)" appended when so)
 *   FILE:LINE: expected a JSON object at the top level, got an array
 *   FILE:LINE: unknown section "runtme" (sections: runtime, log, trace, admin, shutdown)
 *   WHERE: unknown key "runtime.shardz" (keys in "runtime": shards, pin, ...)
 *   FILE:LINE: duplicate key "runtime.shards" (first at line 3)
 *   FILE:LINE: runtime: expected an object, got a number
 *   WHERE: runtime.shards: expected an unsigned integer, got a string    (JSON type mismatch)
 *   WHERE: runtime.shards: expected an unsigned integer, got "abc"       (text or 1.5, 1e3)
 *   WHERE: runtime.pin: expected a boolean (true, false, 1 or 0), got "yes"
 *   WHERE: runtime.shards: 5000 is out of range [0, 256]        (also for -1 and for overflow)
 *   WHERE: runtime.ring_capacity: 1000 is not a power of two
 *   WHERE: log.level: "loud" is not one of debug, info, warn, error
 *   WHERE: admin.listen: must not be empty    WHERE: admin.listen: too long (70 bytes, max 63)
 *   --set ARG: expected SECTION.KEY=VALUE
 *   --set ARG: "runtime" is a section, not a key (keys in it: shards, pin, ...)
 *   unknown environment variable NEWSFLOW_X; known: NEWSFLOW_CONFIG, NEWSFLOW_RUNTIME_SHARDS, ...
 *
 * Threads: call at start-up from the main thread (reads the environment). Nothing here keeps
 * global state; the result is a plain value that may be copied and shared read-only. */
#ifndef NF_CONFIG_H
#define NF_CONFIG_H

#include "runtime/log.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define NF_CONFIG_ERRLEN 4096

typedef struct nf_config {
    struct {
        uint32_t shards; /* 0 = online CPUs */
        bool pin;
        uint32_t ring_capacity; /* power of two */
        uint32_t batch;
        uint32_t budget;
        uint32_t spin_us;       /* poll this long after the last work before sleeping */
        uint64_t stop_after_ms; /* 0 = run until a signal */
    } runtime;
    struct {
        nf_log_level_t level;
        uint32_t progress_interval_ms; /* 0 = off */
        uint32_t sample_every;         /* named events of high-rate work: 1 in N (docs/slo.md) */
    } log;
    struct {                /* OpenTelemetry traces over OTLP/HTTP (runtime/trace.h, docs/slo.md) */
        char endpoint[512]; /* "" = off */
        double sample_ratio;
        uint32_t slow_ms; /* a request or epoch slower than this is traced whatever the ratio */
        uint32_t queue;
        uint32_t flush_ms;
    } trace;
    struct {
        bool enabled;
        char listen[64]; /* NUL-terminated, non-empty */
        uint32_t port;
        uint32_t history_interval_ms; /* 0 = off */
        uint32_t max_connections, request_timeout_ms;
        uint32_t probe_port;    /* 0 = none: probes use port */
        uint32_t operator_port; /* 0 = none: operators' routes on port too */
    } admin;
    struct {
        bool shards; /* admin.port served on the shards' loops once they run (runtime/httpd.h) */
        uint32_t max_header_bytes, budget, workers, queue;
    } http;
    struct {
        uint32_t timeout_ms;
    } shutdown;
    /* List fields (sources.urls, fetch.allow_private) hold entries separated by '\n'. */
    struct {
        char urls[16384];
        char file[1024];
    } sources;
    struct {
        char user_agent[160];
        uint32_t connect_timeout_ms, total_timeout_ms, low_speed_bytes, low_speed_time_s;
        uint32_t max_redirects;
        uint64_t body_max_bytes;
        char allow_private[1024];
        bool allow_file;
        uint32_t max_in_flight;
    } fetch;
    struct {
        uint32_t interval_s, interval_floor_s, interval_ceiling_s, jitter_permille;
        uint32_t backoff_base_s, backoff_cap_s, dead_after_failures;
        uint32_t host_max_concurrent, host_spacing_ms;
        uint32_t breaker_failures, breaker_window_s, breaker_open_s;
    } crawl;
    struct {
        uint32_t max_items, max_body_bytes;
    } parse;
    struct {
        char spec[1024];
    } sink;
    struct {
        char dir[1024];
        uint32_t budget_mb; /* keyed state in memory, per shard */
        uint32_t block_cache_mb;
        uint32_t write_buffer_mb;  /* RocksDB's memtable per kind of state */
        uint64_t ingest_min_bytes; /* an epoch's kind this large goes in as a table file */
        int rocksdb_log; /* state.rocksdb_log: 0 "off", 1 "warn", 2 "info" (nf_store_log_t) */
        bool changelog;  /* state writes also to the changelog topics; restore from them */
    } state;
    struct {
        uint32_t interval_ms;
        uint32_t retain_every; /* a named checkpoint every N epochs; 0 = none */
        uint32_t retain_count;
        bool on_stop; /* a named checkpoint of the final epoch at a clean stop */
    } checkpoint;
    struct {
        char brokers[1024]; /* "embedded" = in-process mock cluster; "" = no Kafka */
        bool exactly_once;
        char topic_prefix[64];
        char group_id[128];
        char transactional_id[128];
        bool static_membership; /* group.instance.id = transactional_id (group assignment) */
        uint32_t partitions;    /* partitions of topics created on the embedded cluster */
        int assignment;         /* kafka.assignment: 0 "group", 1 "all" (nf_kafka_assignment) */
        uint32_t max_event_bytes;
        uint32_t pause_high_water, pause_low_water; /* per shard, messages queued */
        char properties[4096]; /* extra librdkafka properties "name=value", one per entry */
    } kafka;
    struct {
        uint32_t standby_replicas; /* warm standbys (state/standby.h); 0 = none */
    } scale;
    struct {
        char advertised_url[512]; /* "" = http://admin.listen:port */
        int partitioner;          /* serve.partitioner: 0 consistent_random, 1 murmur2_random */
        bool global_replica;      /* tail the global key group's changelog (state/standby.h) */
        uint32_t reader_cache;    /* readers' feed inputs kept across views (serve/readers.h) */
    } serve;
    struct {                     /* ranking experiments (engine/variants.h) */
        char variants[2048];     /* one entry per variant, '\n'-separated; "" = the seed alone */
        char experiment[64];     /* hashed with the user id into the reader's bucket */
        uint32_t shadow_percent; /* feeds the shadow is ranked beside */
    } ranking;
    struct {
        bool enabled;          /* GET /v1/search (serve/search.h) */
        uint32_t retention_s;  /* articles ingested within it are searchable */
        uint64_t max_articles; /* the oldest beyond it leave */
        uint32_t memory_mb;    /* SQLite page caches */
        uint32_t readers;      /* queries at once */
        uint32_t scan_max;     /* matches a query scores, newest first */
    } search;
    struct {
        bool enabled; /* POST /v1/events and /v1/articles/{id}/read (serve/edge.h) */
        uint32_t max_body_bytes, max_batch, max_in_flight, delivery_timeout_ms, retry_after_s;
    } edge;
    struct {
        char hs256_secret_file[1024], public_key_file[1024], jwks_file[1024];
        char issuer[256], audience[256];
        uint32_t max_skew_s;
        bool open;        /* readers beyond loopback without authentication */
        bool demo_tokens; /* GET /v1/auth/demo-token for the page on this machine */
    } auth;
    struct {
        bool enabled, loopback; /* loopback: limit tokenless loopback clients too */
        uint32_t public_per_s, reader_per_s, events_per_s; /* 0: no limit */
    } limits;
    struct {
        uint32_t read_events_per_s; /* 0 = no demo producer */
        uint32_t users;             /* readers demo-user-0 .. users-1 */
        uint64_t events;            /* then stop (0 = never) */
    } demo;
    struct {
        char taxonomy[1024]; /* "" = no classification */
    } classify;
    struct {
        uint32_t shingle_words, hashes, bands, rows;
        double threshold;
        uint32_t ttl_s, shard;
    } cluster;
    struct {
        uint32_t window_s, slide_s, lateness_ms, idle_ms;
        uint32_t cms_width, cms_depth, top_k;
        bool exact;
        bool by_story; /* rank stories, not articles (trending.c) */
        uint32_t event_id_ttl_s;
        uint32_t max_future_ms; /* event times beyond wall clock + this are refused */
        bool backfill; /* count read events of any age (else: not older than window + lateness) */
    } trending;
    struct { /* breaking news (engine/breaking.h) */
        bool enabled;
        double multiple;
        uint32_t min_reads, min_peers, cooldown_s;
    } breaking;
    struct { /* notifications of breaking news (engine/notify.h) */
        bool enabled;
        uint32_t daily_cap;
    } notifications;
    struct {
        double alpha, gamma;
        /* per event kind (io/events.h), times alpha */
        double weight_read, weight_save, weight_share, weight_dislike, weight_hide;
        int history;            /* interest.history: 0 "off", 1 "feedback", 2 "all" */
        uint32_t history_ttl_s; /* GET /v1/users/{user}/reads */
        uint32_t seen_ttl_s, table_max;
        int unknown_articles;        /* 0 "skip", 1 "empty" */
        bool coalesce;               /* one record per user per epoch */
        uint32_t coalesce_max_users; /* per shard, before an early flush */
    } interest;
    struct {                /* newsflow sink postgres (sink/pg_sink.h) */
        char dsn[1024];     /* libpq conninfo or URI; "" = libpq's defaults (PGHOST, ...) */
        char group_id[128]; /* the sinks' consumer group */
        bool read_events;
        uint32_t batch_rows, batch_ms, retry_max_ms, statement_timeout_ms, retention_days;
    } postgres;
} nf_config_t;

/* The built-in defaults (the same values as config/newsflow.json). */
void nf_config_defaults(nf_config_t *cfg);

/* Layers, later wins: built-in defaults, file (path may be NULL), environment (if use_env),
 * sets ("section.key=value" strings). 0 on success; -1 with one precise message in err (see
 * above), in which case *cfg is left unchanged. */
int nf_config_load(nf_config_t *cfg, const char *path, char *const *sets, unsigned nsets,
                   bool use_env, char *err, size_t errlen);

/* The file layer alone, from memory: built-in defaults, then data[0..len) (need not be
 * NUL-terminated) parsed exactly as nf_config_load() parses a file's bytes (it shares the
 * code), with the same messages, `name` standing for FILE. The environment is not read.
 * Returns and reports errors as nf_config_load() does. */
int nf_config_load_buffer(nf_config_t *cfg, const char *name, const char *data, size_t len,
                          char *err, size_t errlen);

/* malloc'ed (free() it), canonical pretty JSON of every key in table order, 2-space indent,
 * newline-terminated: the layout of config/newsflow.json. NULL only if out of memory. */
char *nf_config_to_json(const nf_config_t *cfg);

/* FNV-1a 64 of nf_config_to_json(cfg): equal configurations, equal hashes. */
uint64_t nf_config_hash(const nf_config_t *cfg);

/* For --help: one line per key "section.key  type  default  help", columns aligned. */
void nf_config_describe(FILE *out);

#endif
