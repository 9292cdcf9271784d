/* config.c — see config.h. One descriptor row per key drives everything here.
 *
 * A value reaches a field by one path, set_value(), which takes text: defaults are text in
 * the table, environment and --set values are text, and a JSON value is checked for its JSON
 * type and then handed over as text too (the number's own digits, so uint64 values above 2^53
 * stay exact). Range, power-of-two, length and enum checks therefore live in one place and
 * give the same messages whatever the source.
 *
 * cJSON does not record where a key was. scan_keys() tokenizes the text once and records,
 * for every object key in document order, its line and where its value starts; a pre-order
 * walk of the cJSON tree meets object members in that same order, so the i-th member found by
 * index_members() belongs to the i-th key found by scan_keys().
 *
 * Adding a type (double, string list): a cfg_type_t value, and a case in set_value(),
 * set_json(), emit_value() and type_name(). */
#include "runtime/config.h"
#include "runtime/failpoint.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* CFG_LIST: strings, stored '\n'-separated in a char array; a JSON array in files, comma-separated
 * in the environment and --set (so an entry there cannot contain a comma). */
typedef enum { CFG_BOOL, CFG_U32, CFG_U64, CFG_F64, CFG_STR, CFG_ENUM, CFG_LIST } cfg_type_t;

#define CFG_POW2 1u /* integer must be a power of two */

typedef struct cfg_key {
    const char *path; /* "section.key", also the field's name in nf_config_t */
    cfg_type_t type;
    size_t off, size;           /* the field */
    uint64_t min, max;          /* integers: value range; strings: min length (max = size-1) */
    double fmin, fmax;          /* doubles: value range (inclusive) */
    const char *def;            /* default, as text (parsed like an environment value) */
    const char *const *choices; /* enum: names, NULL-terminated; index = stored value */
    unsigned flags;             /* CFG_POW2 */
    const char *help;           /* one line for `newsflow config keys` */
} cfg_key_t;

#define KEY(t, f)                                                                                  \
    .path = #f, .type = t, .off = offsetof(nf_config_t, f), .size = sizeof(((nf_config_t *)0)->f)

static const char *const cfg_log_levels[] = {"debug", "info", "warn", "error", NULL};
static const char *const cfg_assignments[] = {"group", "all", NULL};
static const char *const cfg_unknown_articles[] = {"skip", "empty", NULL};
static const char *const cfg_partitioners[] = {"consistent_random", "murmur2_random", NULL};
static const char *const cfg_rocksdb_logs[] = {"off", "warn", "info", NULL};
static const char *const cfg_histories[] = {"off", "feedback", "all", NULL};
_Static_assert(NF_LOG_DEBUG == 0 && NF_LOG_INFO == 1 && NF_LOG_WARN == 2 && NF_LOG_ERROR == 3,
               "cfg_log_levels[] is indexed by nf_log_level_t");

/* Rows of one section must be contiguous: the canonical JSON is emitted in table order. */
static const cfg_key_t cfg_keys[] = {
    {KEY(CFG_U32, runtime.shards), .max = 256, .def = "0",
     .help = "shard threads; 0 = one per online CPU"},
    {KEY(CFG_BOOL, runtime.pin), .def = "false", .help = "pin shard i to the i-th allowed CPU"},
    {KEY(CFG_U32, runtime.ring_capacity), .min = 64, .max = 1048576, .flags = CFG_POW2,
     .def = "1024", .help = "slots in each shard-to-shard ring"},
    {KEY(CFG_U32, runtime.batch), .min = 1, .max = 4096, .def = "64",
     .help = "publish a ring after this many pending messages (1 = unbatched)"},
    {KEY(CFG_U32, runtime.budget), .min = 1, .max = 1000000, .def = "256",
     .help = "messages taken from one ring per loop iteration"},
    {KEY(CFG_U32, runtime.spin_us), .max = 100000, .def = "50",
     .help = "keep polling this long after the last work before sleeping; 0 = sleep at once"},
    /* The largest stop_after_ms whose nanoseconds fit in int64 (about 292 years): the main
     * loop's deadline is in ns (job/job.c), and config_units tests every duration key so. */
    {KEY(CFG_U64, runtime.stop_after_ms), .max = INT64_MAX / 1000000, .def = "0",
     .help = "stop after this many ms; 0 = run until SIGTERM/SIGINT"},
    {KEY(CFG_ENUM, log.level), .choices = cfg_log_levels, .def = "info",
     .help = "least severe level logged"},
    {KEY(CFG_U32, log.progress_interval_ms), .max = 3600000, .def = "5000",
     .help = "period of progress log lines; 0 = off"},
    {KEY(CFG_U32, log.sample_every), .min = 1, .max = 1000000000, .def = "1000",
     .help = "the named events of high-rate work (article.ingested, cluster.assigned, "
             "feed.cache_miss: 1 in N; interest.updated: 1 in 100 N) are logged, and every one "
             "whose trace is sampled; errors (crawl.error) are not sampled"},
    {KEY(CFG_STR, trace.endpoint), .def = "",
     .help = "OTLP/HTTP traces endpoint of an OpenTelemetry collector, e.g. "
             "http://127.0.0.1:4318/v1/traces (JSON encoding); empty = no traces"},
    {KEY(CFG_F64, trace.sample_ratio), .fmin = 0.0, .fmax = 1.0, .def = "0.01",
     .help = "share of traces kept, decided at each trace's root (a feed request, a fetch, an "
             "epoch); errors and slow requests and epochs are kept whatever it is"},
    {KEY(CFG_U32, trace.slow_ms), .min = 1, .max = 3600000, .def = "500",
     .help = "a feed request or an epoch slower than this is traced whatever trace.sample_ratio "
             "says"},
    {KEY(CFG_U32, trace.queue), .min = 16, .max = 1048576, .def = "4096",
     .help = "spans waiting for the exporter; beyond, they are dropped "
             "(newsflow_trace_spans_total{result=\"dropped\"})"},
    {KEY(CFG_U32, trace.flush_ms), .min = 10, .max = 60000, .def = "1000",
     .help = "the exporter posts what is queued this often (or at 512 spans)"},
    {KEY(CFG_BOOL, admin.enabled), .def = "true",
     .help = "serve /metrics, /healthz and /readyz over HTTP"},
    {KEY(CFG_STR, admin.listen), .min = 1, .def = "127.0.0.1",
     .help = "admin server address (IPv4 or IPv6 literal)"},
    {KEY(CFG_U32, admin.port), .max = 65535, .def = "9464",
     .help = "admin server TCP port; 0 = any free port"},
    {KEY(CFG_U32, admin.max_connections), .min = 4, .max = 100000, .def = "256",
     .help =
         "open connections to admin.port above which the oldest idle one is closed for each "
         "new one (a probe always gets in): a thread each on libmicrohttpd, a few kB each on "
         "the shards (http.shards), which take twice as many before refusing new ones; raise it "
         "for a listener that faces readers"},
    {KEY(CFG_U32, admin.request_timeout_ms), .min = 100, .max = 600000, .def = "10000",
     .help = "a connection that has not sent a whole request this long after its connect or its "
             "last answer is closed (a slow or idle client)"},
    {KEY(CFG_U32, admin.probe_port), .max = 65535, .def = "0",
     .help = "a second listener on admin.listen serving only /healthz, /readyz and /metrics, with "
             "connections of its own: point liveness and readiness probes there so that reader "
             "traffic on admin.port never keeps them out; 0 = none"},
    {KEY(CFG_U32, admin.operator_port), .max = 65535, .def = "0",
     .help = "a listener on admin.listen for the operators' routes (/metrics, /healthz, /readyz, "
             "/v1/status, /v1/sources, /v1/ops/history), which admin.port then no longer serves: "
             "admin.port faces readers; 0 = everything on admin.port"},
    {KEY(CFG_U32, admin.history_interval_ms), .max = 3600000, .def = "10000",
     .help = "period of the samples behind GET /v1/ops/history and the page's graphs (the "
             "last 360 are kept; at least 100); 0 = off"},
    {KEY(CFG_BOOL, http.shards), .def = "true",
     .help = "once the shards run, admin.port is served on their own loops (keep-alive, "
             "pipelining, no thread per connection); false = libmicrohttpd's thread per "
             "connection throughout (the operator and probe listeners always are)"},
    {KEY(CFG_U32, http.max_header_bytes), .min = 1024, .max = 1048576, .def = "16384",
     .help = "request line and headers of one request (431 past it)"},
    {KEY(CFG_U32, http.budget), .min = 1, .max = 100000, .def = "64",
     .help = "requests a shard answers per loop iteration before the stream's work has its turn "
             "again (a flood of queries slows queries, not epochs)"},
    {KEY(CFG_U32, http.workers), .min = 1, .max = 1024, .def = "16",
     .help = "threads answering what a shard may not answer on its loop (POSTs waiting for the "
             "broker, /healthz, /v1/status, search)"},
    {KEY(CFG_U32, http.queue), .min = 1, .max = 1000000, .def = "4096",
     .help = "requests waiting for those threads; past it, 503 with Retry-After"},
    {KEY(CFG_U32, shutdown.timeout_ms), .min = 100, .max = 600000, .def = "10000",
     .help = "time allowed to drain at shutdown before shards are stopped anyway"},
    {KEY(CFG_LIST, sources.urls), .def = "",
     .help = "feeds to crawl: http(s) URLs or local paths (file://, fetched as listed)"},
    {KEY(CFG_STR, sources.file), .def = "",
     .help = "file of feeds, one per line, # comments; relative paths in it are relative to it"},
    {KEY(CFG_STR, fetch.user_agent), .def = "",
     .help = "User-Agent header; empty = newsflow/VERSION (+feed crawler)"},
    {KEY(CFG_U32, fetch.connect_timeout_ms), .min = 100, .max = 600000, .def = "10000",
     .help = "TCP+TLS connect timeout"},
    {KEY(CFG_U32, fetch.total_timeout_ms), .min = 100, .max = 3600000, .def = "30000",
     .help = "whole-transfer timeout"},
    {KEY(CFG_U32, fetch.low_speed_bytes), .max = 1000000000, .def = "64",
     .help = "abort a transfer slower than this many bytes/s ..."},
    {KEY(CFG_U32, fetch.low_speed_time_s), .max = 3600, .def = "10",
     .help = "... for this many seconds (0 = no low-speed limit)"},
    {KEY(CFG_U32, fetch.max_redirects), .max = 20, .def = "5", .help = "redirects followed"},
    {KEY(CFG_U64, fetch.body_max_bytes), .min = 1024, .max = UINT64_C(1) << 32, .def = "16777216",
     .help = "larger bodies are refused while downloading"},
    {KEY(CFG_LIST, fetch.allow_private), .def = "",
     .help = "CIDRs the address guard lets through (loopback, private, link-local are refused)"},
    {KEY(CFG_BOOL, fetch.allow_file), .def = "false",
     .help = "allow file:// URLs from any source (listed local paths are always allowed)"},
    {KEY(CFG_U32, fetch.max_in_flight), .min = 1, .max = 100000, .def = "256",
     .help = "concurrent fetches per shard"},
    {KEY(CFG_U32, crawl.interval_s), .min = 60, .max = 604800, .def = "900",
     .help = "crawl interval of a source"},
    {KEY(CFG_U32, crawl.interval_floor_s), .min = 60, .max = 604800, .def = "300",
     .help = "shortest interval a source may ask for"},
    {KEY(CFG_U32, crawl.interval_ceiling_s), .min = 60, .max = 604800, .def = "86400",
     .help = "longest interval (and longest Retry-After honoured)"},
    {KEY(CFG_U32, crawl.jitter_permille), .max = 500, .def = "100",
     .help = "random spread of each delay, per mille (100 = +-10%)"},
    {KEY(CFG_U32, crawl.backoff_base_s), .min = 60, .max = 86400, .def = "60",
     .help = "delay after a first failure, doubled per consecutive failure"},
    {KEY(CFG_U32, crawl.backoff_cap_s), .min = 60, .max = 604800, .def = "21600",
     .help = "longest backoff"},
    {KEY(CFG_U32, crawl.dead_after_failures), .min = 1, .max = 1000, .def = "10",
     .help = "consecutive failure points before a source is DEAD"},
    {KEY(CFG_U32, crawl.host_max_concurrent), .min = 1, .max = 1000, .def = "2",
     .help = "concurrent requests per host"},
    {KEY(CFG_U32, crawl.host_spacing_ms), .max = 3600000, .def = "1000",
     .help = "minimum time between two requests going out to one host, across restarts and "
             "rebalances (the first request to a host taken over waits this long)"},
    {KEY(CFG_U32, crawl.breaker_failures), .max = 16, .def = "5",
     .help = "failures within the window that open a host's circuit breaker (0 = off)"},
    {KEY(CFG_U32, crawl.breaker_window_s), .min = 1, .max = 86400, .def = "60",
     .help = "circuit breaker failure window"},
    {KEY(CFG_U32, crawl.breaker_open_s), .min = 1, .max = 86400, .def = "60",
     .help = "how long an open breaker refuses requests before one probe"},
    {KEY(CFG_U32, parse.max_items), .min = 1, .max = 1000000, .def = "10000",
     .help = "items kept per feed document"},
    {KEY(CFG_U32, parse.max_body_bytes), .min = 256, .max = 16777216, .def = "65536",
     .help = "plain-text body kept per article"},
    {KEY(CFG_STR, sink.spec), .min = 1, .def = "jsonl:-",
     .help = "where outputs go: jsonl:PATH (one JSON object per line; - = stdout) or none"},
    {KEY(CFG_STR, state.dir), .min = 1, .def = "./newsflow-state",
     .help = "RocksDB state directory (db/ and checkpoints/ inside)"},
    {KEY(CFG_U32, state.budget_mb), .min = 1, .max = 1048576, .def = "1024",
     .help = "memory per shard for each kind of keyed state and each read-path dedup set; over "
             "it, keyed state takes an early checkpoint and a dedup set moves its older keys "
             "to disk in state.dir"},
    {KEY(CFG_U32, state.block_cache_mb), .min = 8, .max = 1048576, .def = "256",
     .help = "RocksDB block cache for cold reads"},
    {KEY(CFG_U32, state.write_buffer_mb), .min = 1, .max = 4096, .def = "64",
     .help = "RocksDB's memtable per kind of state. An epoch's state under "
             "state.ingest_min_bytes goes through it, and a smaller one takes each key for "
             "less: at 100k keys an epoch, 8 MB commits in about half the time of 64 with a "
             "fifth less CPU (perf/README \"Epoch cut and commit\"), at the price of more, "
             "smaller flushes"},
    {KEY(CFG_U64, state.ingest_min_bytes), .max = 1ull << 40, .def = "16777216",
     .help = "an epoch's writes of one kind of state, when their keys and values come to at "
             "least this many bytes, go into RocksDB as a table file, ingested, instead of "
             "through its memtable: 2-3x faster commits of large epochs. Smaller, per-epoch "
             "files outrun RocksDB's compaction (perf/README \"Epoch cut and commit\"); 0 = "
             "never"},
    {KEY(CFG_ENUM, state.rocksdb_log), .choices = cfg_rocksdb_logs, .def = "off",
     .help = "RocksDB's own LOG file in state.dir/db: off = only the settings it records at "
             "open; warn = also its warnings and errors; info = also every flush and "
             "compaction. Off by default because Debian 12's librocksdb 7.8 aborts the whole "
             "process (an assertion) on a LOG write after one failed, as on a full disk: with "
             "warn or info, a full state.dir can end the job by SIGABRT instead of an error "
             "and exit 1 (docs/runbooks.md \"Disk full on state.dir\")"},
    {KEY(CFG_BOOL, state.changelog), .def = "false",
     .help = "also append every epoch's state writes, in its transaction, to the compacted "
             "changelog-<kind> topics, and at start bring state.dir up to them (a lost disk, a "
             "new machine); needs Apache Kafka (not the embedded mock)"},
    {KEY(CFG_U32, checkpoint.interval_ms), .min = 50, .max = 3600000, .def = "5000",
     .help = "epoch length: state, outputs and input offsets commit together this often"},
    {KEY(CFG_U32, checkpoint.retain_every), .max = 1000000, .def = "12",
     .help = "a named checkpoint every N epochs (0 = none)"},
    {KEY(CFG_U32, checkpoint.retain_count), .min = 1, .max = 10000, .def = "5",
     .help = "named checkpoints kept (oldest deleted first)"},
    {KEY(CFG_BOOL, checkpoint.on_stop), .def = "true",
     .help = "a named checkpoint of the final epoch at a clean stop too (when retain_every > 0 "
             "and outputs were committed since the last named one)"},
    {KEY(CFG_STR, kafka.brokers), .def = "embedded",
     .help = "bootstrap servers; \"embedded\" = in-process mock cluster; \"\" = no Kafka"},
    {KEY(CFG_ENUM, kafka.assignment), .choices = cfg_assignments, .def = "group",
     .help = "group: consumer group (cooperative-sticky); all: this process takes every input "
             "partition (single process; restarts resume at once)"},
    {KEY(CFG_BOOL, kafka.exactly_once), .def = "true",
     .help = "transactional producer (false: idempotent, at-least-once)"},
    {KEY(CFG_STR, kafka.topic_prefix), .def = "", .help = "prepended to every topic name"},
    {KEY(CFG_STR, kafka.group_id), .min = 1, .def = "newsflow", .help = "consumer group"},
    {KEY(CFG_STR, kafka.transactional_id), .min = 1, .def = "newsflow-0",
     .help = "transactional id; one per process, stable across restarts"},
    {KEY(CFG_BOOL, kafka.static_membership), .def = "true",
     .help = "group: join as a static member (group.instance.id = kafka.transactional_id), so a "
             "restarted process takes its partitions back at once instead of waiting out its "
             "predecessor's session.timeout.ms"},
    {KEY(CFG_U32, kafka.partitions), .min = 1, .max = 1024, .def = "4",
     .help =
         "partitions per topic created on the embedded cluster and by `newsflow topics create`"},
    {KEY(CFG_U32, kafka.max_event_bytes), .min = 64, .max = 16777216, .def = "65536",
     .help = "input records above this go to dead-letters"},
    {KEY(CFG_U32, kafka.pause_high_water), .min = 2, .max = 10000000, .def = "8192",
     .help = "a shard's queued input above which its partitions are paused"},
    {KEY(CFG_U32, kafka.pause_low_water), .min = 1, .max = 10000000, .def = "2048",
     .help = "queued input below which paused partitions resume"},
    {KEY(CFG_LIST, kafka.properties), .def = "",
     .help = "extra librdkafka properties, \"name=value\" each"},
    {KEY(CFG_U32, scale.standby_replicas), .max = 16, .def = "0",
     .help = "warm standbys: with state.changelog and kafka.assignment=group, >= 1 keeps the "
             "changelogs of every read-events partition other processes own applied to this "
             "process's state.dir, so that a failover restores only their tail (0 = off)"},
    {KEY(CFG_STR, serve.advertised_url), .def = "",
     .help = "this process's query API as other processes name it in a redirect (307 to the "
             "owner of a reader's partition); \"\" = http://admin.listen:PORT"},
    {KEY(CFG_BOOL, serve.global_replica), .def = "true",
     .help = "with state.changelog and kafka.assignment=group on Apache Kafka, keep the global "
             "key group's changelog (articles, stories, trending) applied here, so that every "
             "process answers feeds, trending, articles and stories"},
    {KEY(CFG_ENUM, serve.partitioner), .choices = cfg_partitioners, .def = "consistent_random",
     .help = "how producers place read events by user id (librdkafka's partitioner names): "
             "consistent_random = CRC32 (librdkafka, kcat, the demo), murmur2_random = Java's"},
    {KEY(CFG_U32, serve.reader_cache), .max = 16777216, .def = "262144",
     .help = "readers whose feed inputs (interest vector, hidden articles) are kept from one "
             "committed view to the next while nothing of theirs is written (a feed then reads "
             "neither their interest nor their history); ~100 bytes each plus what they hold "
             "(newsflow_query_reader_cache_bytes); 0 = read them for every feed"},
    {KEY(CFG_LIST, ranking.variants), .def = "",
     .help = "ranking experiments: \"NAME share=PERCENT [interest=X] [follow=X] [decay=X] "
             "[trending=X]\" per served variant (shares add up to 100), and at most one "
             "\"NAME shadow [weights]\" ranked beside every feed but never shown; weights left "
             "out are the seed's (interest 1, follow 0.5, decay 0.5 per hour, trending 0.1); "
             "empty = the seed's ranking alone, named seed (docs/ARCHITECTURE.md §4)"},
    {KEY(CFG_U32, ranking.shadow_percent), .max = 100, .def = "100",
     .help = "the feeds (ranked by interest or follows) the shadow variant is ranked beside, in "
             "percent: each one costs a second ranking (perf/README.md: about 1.7x the feed's CPU "
             "at 100); 0 = the shadow is never ranked"},
    {KEY(CFG_STR, ranking.experiment), .min = 1, .def = "default",
     .help = "the experiment's name, hashed with the user id into the reader's bucket (0..99): "
             "the same reader gets the same variant in every process and across restarts; a new "
             "name reshuffles readers among the variants"},
    {KEY(CFG_BOOL, search.enabled), .def = "true",
     .help = "full-text search (GET /v1/search) over committed articles, in SQLite FTS5 at "
             "state.dir/search.db (needs state.dir and the admin server)"},
    {KEY(CFG_U32, search.retention_s), .min = 3600, .max = 31536000, .def = "604800",
     .help = "articles ingested within this many seconds are searchable (at most cluster.ttl_s, "
             "the metadata's TTL, which a rebuild reads)"},
    {KEY(CFG_U64, search.max_articles), .min = 1000, .max = 1000000000, .def = "2000000",
     .help = "the search index's bound: beyond it the oldest articles leave"},
    {KEY(CFG_U32, search.memory_mb), .min = 2, .max = 65536, .def = "64",
     .help = "SQLite page caches of the search index, all connections together"},
    {KEY(CFG_U32, search.readers), .min = 1, .max = 64, .def = "4",
     .help = "searches run at once (each on its own connection); more wait up to 1 s, then 503"},
    {KEY(CFG_U32, search.scan_max), .min = 20, .max = 1000000, .def = "2000",
     .help = "matches a search scores, newest first: its time is bounded by this whatever the "
             "words (an older match beyond it is not ranked)"},
    {KEY(CFG_BOOL, edge.enabled), .def = "true",
     .help = "take readers' events over HTTP (POST /v1/events, POST /v1/articles/{id}/read) and "
             "produce them to read-events, answering 202 once the broker has them"},
    {KEY(CFG_U32, edge.max_body_bytes), .min = 1024, .max = 67108864, .def = "1048576",
     .help = "largest request body the edge reads (413 beyond)"},
    {KEY(CFG_U32, edge.max_batch), .min = 1, .max = 100000, .def = "1000",
     .help = "events in one POST /v1/events (413 beyond)"},
    {KEY(CFG_U32, edge.max_in_flight), .min = 1, .max = 10000000, .def = "100000",
     .help = "events produced and not yet acknowledged by the broker, all requests together; a "
             "request that would pass it is answered 503 with Retry-After"},
    {KEY(CFG_U32, edge.delivery_timeout_ms), .min = 1000, .max = 300000, .def = "10000",
     .help = "an event the broker has not acknowledged this long after it was produced fails "
             "its request (503 with Retry-After; the client sends it again, the same event_id)"},
    {KEY(CFG_U32, edge.retry_after_s), .min = 1, .max = 3600, .def = "1",
     .help = "the Retry-After of the edge's 503 answers"},
    {KEY(CFG_STR, auth.hs256_secret_file), .def = "",
     .help = "readers' tokens (JWT, Authorization: Bearer) signed HS256 with the bytes of this "
             "file (at least 32); with any auth.* key file set, a reader's routes need a token "
             "whose sub is the reader"},
    {KEY(CFG_STR, auth.public_key_file), .def = "",
     .help = "readers' tokens signed RS256 or ES256 (P-256), verified with this PEM public key"},
    {KEY(CFG_STR, auth.jwks_file), .def = "",
     .help = "readers' tokens verified with the key of this JWKS file their kid names (RSA, EC "
             "P-256)"},
    {KEY(CFG_STR, auth.issuer), .def = "", .help = "the iss tokens must carry (\"\": not checked)"},
    {KEY(CFG_STR, auth.audience), .def = "",
     .help = "the aud tokens must carry (\"\": not checked)"},
    {KEY(CFG_U32, auth.max_skew_s), .max = 3600, .def = "60",
     .help = "clock skew allowed on a token's exp and nbf"},
    {KEY(CFG_BOOL, auth.demo_tokens), .def = "false",
     .help = "GET /v1/auth/demo-token?user= answers a token for any reader, signed with "
             "auth.hs256_secret_file (1 h), to a client on this machine only: the page of a demo "
             "with authentication on; never on a server that faces readers"},
    {KEY(CFG_BOOL, auth.open), .def = "false",
     .help = "without authentication configured, answer readers' routes for clients beyond "
             "loopback too (else 403: a server without auth is for its own machine)"},
    {KEY(CFG_BOOL, limits.enabled), .def = "true",
     .help = "token buckets per client (the token's subject, else the address) and route class; "
             "an empty bucket is 429 with Retry-After"},
    {KEY(CFG_BOOL, limits.loopback), .def = "false",
     .help = "limit clients on loopback without a token too (else the machine's own probes, "
             "sidecars and benchmarks are not limited; a token's subject always is)"},
    {KEY(CFG_U32, limits.public_per_s), .max = 10000000, .def = "1000",
     .help = "requests per second per client to the public routes (trending, articles, search, "
             "...); 0: no limit"},
    {KEY(CFG_U32, limits.reader_per_s), .max = 10000000, .def = "100",
     .help = "requests per second per client to a reader's own routes (feed, interest)"},
    {KEY(CFG_U32, limits.events_per_s), .max = 100000000, .def = "10000",
     .help = "events per second per client through POST /v1/events and .../read"},
    {KEY(CFG_U32, demo.read_events_per_s), .max = 1000000, .def = "5",
     .help = "synthetic read events per second into read-events with embedded Kafka (0 = off)"},
    {KEY(CFG_U32, demo.users), .min = 1, .max = 10000000, .def = "200",
     .help = "readers the demo's events come from (demo-user-0 .. N-1, the first ones most)"},
    {KEY(CFG_U64, demo.events), .max = INT64_MAX, .def = "0",
     .help = "read events the demo produces in all, then stops (0 = no end)"},
    {KEY(CFG_STR, classify.taxonomy), .def = "builtin",
     .help = "topic taxonomy: a JSON file, \"builtin\" (config/taxonomy.json as built) or \"\" "
             "(no classification)"},
    {KEY(CFG_U32, cluster.shingle_words), .min = 1, .max = 16, .def = "3",
     .help = "words per shingle of the normalized title + body"},
    {KEY(CFG_U32, cluster.hashes), .min = 8, .max = 1024, .def = "128",
     .help = "MinHash functions (signature length); must equal bands * rows"},
    {KEY(CFG_U32, cluster.bands), .min = 1, .max = 256, .def = "16", .help = "LSH bands"},
    {KEY(CFG_U32, cluster.rows), .min = 1, .max = 64, .def = "8", .help = "LSH rows per band"},
    {KEY(CFG_F64, cluster.threshold), .fmin = 0.0, .fmax = 1.0, .def = "0.85",
     .help = "estimated Jaccard similarity at which a candidate joins a cluster"},
    {KEY(CFG_U32, cluster.ttl_s), .min = 60, .max = 31536000, .def = "604800",
     .help = "signatures, buckets and cluster links expire after this long"},
    {KEY(CFG_U32, cluster.shard), .max = 255, .def = "0",
     .help = "the shard that owns the similarity index (modulo the shard count)"},
    {KEY(CFG_U32, trending.window_s), .min = 1, .max = 604800, .def = "3600",
     .help = "event-time window length; a multiple of slide_s"},
    {KEY(CFG_U32, trending.slide_s), .min = 1, .max = 86400, .def = "30",
     .help = "the window slides (and a ranked list is emitted) this often"},
    {KEY(CFG_U32, trending.lateness_ms), .max = 86400000, .def = "5000",
     .help = "allowed lateness: watermark = max event time - this; older events are late"},
    {KEY(CFG_U32, trending.idle_ms), .min = 1000, .max = 86400000, .def = "60000",
     .help = "a partition without events this long stops holding the watermark back"},
    {KEY(CFG_U32, trending.cms_width), .min = 16, .max = 1048576, .def = "2048",
     .help = "Count-Min Sketch width (error e/width of the window's events)"},
    {KEY(CFG_U32, trending.cms_depth), .min = 1, .max = 16, .def = "5",
     .help = "Count-Min Sketch depth (bound holds with probability 1 - e^-depth)"},
    {KEY(CFG_U32, trending.top_k), .min = 1, .max = 10000, .def = "50",
     .help = "articles in each ranked list"},
    {KEY(CFG_BOOL, trending.exact), .def = "false",
     .help = "count exactly (a hash map per pane) instead of Count-Min: for verification"},
    {KEY(CFG_BOOL, trending.by_story), .def = "true",
     .help = "one entry per story: a story's score is the sum over its articles read in the window "
             "(stories as the last committed epoch holds them); false: one entry per article, as "
             "before stories were ranked"},
    {KEY(CFG_U32, trending.event_id_ttl_s), .min = 1, .max = 31536000, .def = "7200",
     .help = "a read event's id is remembered this long (repeats are dropped)"},
    {KEY(CFG_U32, trending.max_future_ms), .min = 1000, .max = 86400000, .def = "300000",
     .help = "event times further ahead of the wall clock are refused: such a read event goes to "
             "dead-letters (it would move the watermark past every later event), such an article "
             "date is replaced (its other date, else the fetch time)"},
    {KEY(CFG_BOOL, trending.backfill), .def = "false",
     .help = "count read events of any age into trending windows (a replay of old events on "
             "purpose); false: an event older than window_s + lateness_ms when it was written to "
             "Kafka (its record timestamp) is left out of trending, interest still takes it"},
    {KEY(CFG_BOOL, breaking.enabled), .def = "true",
     .help = "announce breaking news: a story of a trending window read at least `multiple` "
             "times the median of its topic's other trending stories (engine/breaking.h), once "
             "per cooldown, on the breaking-news topic"},
    {KEY(CFG_F64, breaking.multiple), .fmin = 1.0, .fmax = 1000.0, .def = "3",
     .help = "how many times its topic's baseline a story's reads in the window must reach"},
    {KEY(CFG_U32, breaking.min_reads), .min = 1, .max = 1000000000, .def = "20",
     .help = "reads in the window a story needs at least (a burst of three reads is no news)"},
    {KEY(CFG_U32, breaking.min_peers), .min = 1, .max = 10000, .def = "2",
     .help = "other trending stories of its topic a story needs for a baseline"},
    {KEY(CFG_U32, breaking.cooldown_s), .min = 1, .max = 31536000, .def = "21600",
     .help = "a story announced is not announced again for this long (by windows' end times)"},
    {KEY(CFG_BOOL, notifications.enabled), .def = "true",
     .help = "send each breaking story to the readers subscribed to its topic (settings events "
             "`subscribe` / `unsubscribe`; engine/notify.h): one notifications record per reader "
             "and story, exactly once; a job in several processes does not send them yet"},
    {KEY(CFG_U32, notifications.daily_cap), .min = 1, .max = 32, .def = "5",
     .help = "notifications a reader gets per day (UTC, of the windows' end times) at most; a "
             "story past the cap is not sent (nor remembered: it may be sent on a later day)"},
    {KEY(CFG_F64, interest.alpha), .fmin = 0.0, .fmax = 1.0, .def = "0.1",
     .help = "EMA learning rate: weight of a read's article topics"},
    {KEY(CFG_F64, interest.gamma), .fmin = 0.0, .fmax = 1.0, .def = "0.95",
     .help = "decay per day since the user's last update"},
    {KEY(CFG_F64, interest.weight_read), .fmin = -100.0, .fmax = 100.0, .def = "1",
     .help = "a read's article topics are added times alpha times this (1: the upstream formula)"},
    {KEY(CFG_F64, interest.weight_save), .fmin = -100.0, .fmax = 100.0, .def = "2",
     .help = "the same for a save (explicit feedback, kind \"save\")"},
    {KEY(CFG_F64, interest.weight_share), .fmin = -100.0, .fmax = 100.0, .def = "3",
     .help = "the same for a share"},
    {KEY(CFG_F64, interest.weight_dislike), .fmin = -100.0, .fmax = 100.0, .def = "-1",
     .help = "the same for a dislike: negative pushes the article's topics down"},
    {KEY(CFG_F64, interest.weight_hide), .fmin = -100.0, .fmax = 100.0, .def = "-2",
     .help = "the same for a hide"},
    {KEY(CFG_ENUM, interest.history), .choices = cfg_histories, .def = "feedback",
     .help = "a reader's history (GET /v1/users/{user}/reads; what they disliked or hid leaves "
             "their feed): feedback (save, share, dislike, hide), all (every counted read too: "
             "~4 us more CPU per read event, perf/README), or off"},
    {KEY(CFG_U32, interest.history_ttl_s), .min = 1, .max = 31536000, .def = "604800",
     .help = "how long a reader's history keeps an event"},
    {KEY(CFG_U32, interest.seen_ttl_s), .min = 1, .max = 31536000, .def = "86400",
     .help = "a (user, article, session) read is counted once within this time"},
    {KEY(CFG_U32, interest.table_max), .min = 1024, .max = 100000000, .def = "1000000",
     .help = "article topic vectors cached per shard (misses read the state store)"},
    {KEY(CFG_ENUM, interest.unknown_articles), .choices = cfg_unknown_articles, .def = "skip",
     .help = "a read of an article without a topic vector: skip (counted) or empty (the user's "
             "version and decay move, the direction does not)"},
    {KEY(CFG_BOOL, interest.coalesce), .def = "false",
     .help = "one interest-updates record per user per epoch, the latest (the versions in between "
             "are not emitted): far fewer outputs when users read several articles an epoch"},
    {KEY(CFG_U32, interest.coalesce_max_users), .min = 1, .max = 100000000, .def = "262144",
     .help = "with coalesce: users waiting on a shard before their updates go out early"},
    {KEY(CFG_STR, postgres.dsn), .def = "",
     .help = "the database `newsflow sink postgres` writes: a libpq conninfo "
             "(\"host=... dbname=...\") or URI (postgresql://...); \"\": libpq's defaults "
             "(PGHOST, PGPORT, PGDATABASE, ...)"},
    {KEY(CFG_STR, postgres.group_id), .def = "newsflow-sink-postgres",
     .help = "the sinks' consumer group: sink processes of one group share the partitions; "
             "each group has its own offsets in newsflow_sink_offsets"},
    {KEY(CFG_BOOL, postgres.read_events), .def = "false",
     .help = "land read-events too (table read_event, once per event_id)"},
    {KEY(CFG_U32, postgres.batch_rows), .min = 1, .max = 1000000, .def = "5000",
     .help = "records in one transaction at most"},
    {KEY(CFG_U32, postgres.batch_ms), .min = 1, .max = 60000, .def = "200",
     .help = "a batch is written once its first record is this old, or as soon as the topics "
             "are drained"},
    {KEY(CFG_U32, postgres.retry_max_ms), .min = 100, .max = 600000, .def = "30000",
     .help = "longest wait between tries while PostgreSQL is unreachable or failing (doubling "
             "from 100 ms)"},
    {KEY(CFG_U32, postgres.statement_timeout_ms), .min = 1000, .max = 3600000, .def = "60000",
     .help = "PostgreSQL's statement_timeout for the sink; a server silent for this + 10 s is "
             "given up and reconnected"},
    {KEY(CFG_U32, postgres.retention_days), .max = 36500, .def = "30",
     .help = "interest versions and trending snapshots that landed longer ago than this are "
             "deleted hourly (0: kept); articles, stories, current interest and read events are "
             "kept"},
};

#define CFG_NKEYS    (sizeof cfg_keys / sizeof cfg_keys[0])
#define CFG_PATH_MAX 128 /* longer than any path in the table (checked by cfg_table_ok) */
#define CFG_FILE_MAX (1u << 20)
#define CFG_SHOW_MAX 40 /* bytes of a bad value quoted in a message */

/* ---- messages ---- */

/* Appends to buf (a NUL-terminated string of capacity n); output that does not fit is cut. */
static void cfg_append(char *buf, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void cfg_append(char *buf, size_t n, const char *fmt, ...)
{
    size_t len = strlen(buf);
    if (len + 1 >= n)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, n - len, fmt, ap);
    va_end(ap);
}

static int cfg_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int cfg_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* A bad value for a message: quoted, and cut to CFG_SHOW_MAX bytes. */
static void cfg_show(char *buf, size_t n, const char *s, size_t len, bool quoted)
{
    int shown = (int)(len > CFG_SHOW_MAX ? CFG_SHOW_MAX : len);
    const char *more = len > CFG_SHOW_MAX ? "..." : "";
    snprintf(buf, n, quoted ? "\"%.*s%s\"" : "%.*s%s", shown, s, more);
}

static const char *json_kind(const cJSON *v)
{
    if (cJSON_IsString(v))
        return "a string";
    if (cJSON_IsNumber(v))
        return "a number";
    if (cJSON_IsBool(v))
        return "a boolean";
    if (cJSON_IsNull(v))
        return "null";
    if (cJSON_IsArray(v))
        return "an array";
    if (cJSON_IsObject(v))
        return "an object";
    return "an invalid value";
}

static void choices_list(char *buf, size_t n, const char *const *choices, const char *sep)
{
    buf[0] = '\0';
    for (size_t i = 0; choices[i]; i++)
        cfg_append(buf, n, "%s%s", i ? sep : "", choices[i]);
}

/* ---- the table as a tree of sections ---- */

/* The child `name` of the object at `prefix` ("" = root): a key's index, CFG_OBJECT for a
 * section (a prefix of some key), or CFG_NONE. */
enum { CFG_NONE = -1, CFG_OBJECT = -2 };

static bool has_prefix(const char *path, const char *prefix, size_t plen)
{
    return plen == 0 || (strncmp(path, prefix, plen) == 0 && path[plen] == '.');
}

/* The component of key i's path right below prefix (NULL if not under it); length in *len. */
static const char *cfg_below(size_t i, const char *prefix, size_t plen, size_t *len)
{
    const char *path = cfg_keys[i].path;
    if (!has_prefix(path, prefix, plen))
        return NULL;
    const char *rest = path + (plen ? plen + 1 : 0);
    *len = strcspn(rest, ".");
    return rest;
}

static int cfg_child(const char *prefix, size_t plen, const char *name, size_t nlen)
{
    if (nlen == 0 || memchr(name, '.', nlen))
        return CFG_NONE;
    for (size_t i = 0; i < CFG_NKEYS; i++) {
        size_t len;
        const char *c = cfg_below(i, prefix, plen, &len);
        if (c && len == nlen && memcmp(c, name, nlen) == 0)
            return c[len] ? CFG_OBJECT : (int)i;
    }
    return CFG_NONE;
}

/* "a, b, c": the children of the object at prefix, in table order. */
static void cfg_children(char *buf, size_t n, const char *prefix, size_t plen)
{
    buf[0] = '\0';
    for (size_t i = 0; i < CFG_NKEYS; i++) {
        size_t len, lj;
        const char *c = cfg_below(i, prefix, plen, &len);
        bool seen = !c;
        for (size_t j = 0; j < i && !seen; j++) {
            const char *cj = cfg_below(j, prefix, plen, &lj);
            seen = cj && lj == len && memcmp(cj, c, len) == 0;
        }
        if (!seen)
            cfg_append(buf, n, "%s%.*s", buf[0] ? ", " : "", (int)len, c);
    }
}

static int cfg_unknown(char *err, size_t errlen, const char *where, const char *prefix, size_t plen,
                       const char *name, size_t nlen)
{
    char known[512];
    cfg_children(known, sizeof known, prefix, plen);
    if (plen == 0)
        return cfg_fail(err, errlen, "%s: unknown section \"%.*s\" (sections: %s)", where,
                        (int)nlen, name, known);
    return cfg_fail(err, errlen, "%s: unknown key \"%.*s.%.*s\" (keys in \"%.*s\": %s)", where,
                    (int)plen, prefix, (int)nlen, name, (int)plen, prefix, known);
}

/* ---- values ---- */

enum { U_OK, U_JUNK, U_NEGATIVE, U_OVERFLOW };

/* Decimal digits only: no sign, spaces or trailing characters. */
static int parse_u64(const char *s, size_t len, uint64_t *out)
{
    bool negative = len > 1 && s[0] == '-';
    size_t i = negative ? 1 : 0;
    if (i == len)
        return U_JUNK;
    uint64_t v = 0;
    bool overflow = false;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return U_JUNK;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            overflow = true;
        v = v * 10 + d;
    }
    *out = v;
    return negative ? U_NEGATIVE : overflow ? U_OVERFLOW : U_OK;
}

static const char *type_name(const cfg_key_t *k, char *buf, size_t n)
{
    switch (k->type) {
    case CFG_BOOL:
        return "bool";
    case CFG_U32:
        return "uint32";
    case CFG_U64:
        return "uint64";
    case CFG_F64:
        return "number";
    case CFG_STR:
        return "string";
    case CFG_ENUM:
        choices_list(buf, n, k->choices, "|");
        return buf;
    case CFG_LIST:
        return "list";
    }
    return "?";
}

/* Validates text s[0..len) for key k and stores it in cfg. On failure writes what is wrong
 * (without the key or location) to msg and returns -1. `quoted`: show a bad value in quotes
 * (text sources) rather than as is (JSON number literals). */
static int set_value(const cfg_key_t *k, nf_config_t *cfg, const char *s, size_t len, bool quoted,
                     char *msg, size_t n)
{
    char *field = (char *)cfg + k->off;
    char shown[CFG_SHOW_MAX + 8];
    cfg_show(shown, sizeof shown, s, len, quoted);

    switch (k->type) {
    case CFG_BOOL: {
        bool b;
        if ((len == 4 && !memcmp(s, "true", 4)) || (len == 1 && s[0] == '1'))
            b = true;
        else if ((len == 5 && !memcmp(s, "false", 5)) || (len == 1 && s[0] == '0'))
            b = false;
        else
            return cfg_fail(msg, n, "expected a boolean (true, false, 1 or 0), got %s", shown);
        memcpy(field, &b, sizeof b);
        return 0;
    }
    case CFG_U32:
    case CFG_U64: {
        uint64_t v = 0;
        int rc = parse_u64(s, len, &v);
        if (rc == U_JUNK)
            return cfg_fail(msg, n, "expected an unsigned integer, got %s", shown);
        if (rc != U_OK || v < k->min || v > k->max) {
            cfg_show(shown, sizeof shown, s, len, false); /* a number: never quoted */
            return cfg_fail(msg, n, "%s is out of range [%" PRIu64 ", %" PRIu64 "]", shown, k->min,
                            k->max);
        }
        if ((k->flags & CFG_POW2) && (v & (v - 1)) != 0)
            return cfg_fail(msg, n, "%" PRIu64 " is not a power of two", v);
        if (k->type == CFG_U32) {
            uint32_t v32 = (uint32_t)v;
            memcpy(field, &v32, sizeof v32);
        } else {
            memcpy(field, &v, sizeof v);
        }
        return 0;
    }
    case CFG_F64: {
        char num[64];
        char *end = NULL;
        if (len == 0 || len >= sizeof num)
            return cfg_fail(msg, n, "expected a number, got %s", shown);
        memcpy(num, s, len);
        num[len] = '\0';
        errno = 0;
        double d = strtod(num, &end);
        if (end != num + len || errno == ERANGE || d != d)
            return cfg_fail(msg, n, "expected a number, got %s", shown);
        if (d < k->fmin || d > k->fmax) {
            cfg_show(shown, sizeof shown, s, len, false);
            return cfg_fail(msg, n, "%s is out of range [%g, %g]", shown, k->fmin, k->fmax);
        }
        memcpy(field, &d, sizeof d);
        return 0;
    }
    case CFG_STR:
        if (len < k->min)
            return k->min == 1
                       ? cfg_fail(msg, n, "must not be empty")
                       : cfg_fail(msg, n, "%s is too short (%zu bytes, at least %" PRIu64 ")",
                                  shown, len, k->min);
        if (len > k->size - 1)
            return cfg_fail(msg, n, "too long (%zu bytes, max %zu)", len, k->size - 1);
        memset(field, 0, k->size);
        memcpy(field, s, len);
        return 0;
    case CFG_ENUM: {
        for (int i = 0; k->choices[i]; i++) {
            if (strlen(k->choices[i]) == len && memcmp(k->choices[i], s, len) == 0) {
                memcpy(field, &i, sizeof i);
                return 0;
            }
        }
        char list[256];
        choices_list(list, sizeof list, k->choices, ", ");
        return cfg_fail(msg, n, "%s is not one of %s", shown, list);
    }
    case CFG_LIST: {
        /* Text form: comma-separated, spaces around entries ignored, "" = empty list. */
        size_t out = 0, i = 0;
        char *dst = field;
        memset(field, 0, k->size);
        while (i < len) {
            while (i < len && (s[i] == ' ' || s[i] == '\t'))
                i++;
            size_t start = i;
            while (i < len && s[i] != ',')
                i++;
            size_t end = i;
            while (end > start && (s[end - 1] == ' ' || s[end - 1] == '\t'))
                end--;
            if (i < len)
                i++; /* the comma */
            if (end == start) {
                if (start == len && out == 0)
                    break; /* "" or only spaces: the empty list */
                return cfg_fail(msg, n, "empty entry in list %s", shown);
            }
            if (memchr(s + start, '\n', end - start))
                return cfg_fail(msg, n, "a list entry must not contain a newline");
            if (out + (out ? 1 : 0) + (end - start) > k->size - 1)
                return cfg_fail(msg, n, "too long (max %zu bytes in all)", k->size - 1);
            if (out)
                dst[out++] = '\n';
            memcpy(dst + out, s + start, end - start);
            out += end - start;
        }
        return 0;
    }
    }
    return cfg_fail(msg, n, "unsupported type");
}

/* A JSON value for key k: check its JSON type, then set_value() its text. `raw` is the value's
 * text in the file (NULL if unknown). */
static int set_json(const cfg_key_t *k, nf_config_t *cfg, const cJSON *v, const char *raw,
                    char *msg, size_t n)
{
    char list[256];
    switch (k->type) {
    case CFG_BOOL:
        if (!cJSON_IsBool(v))
            return cfg_fail(msg, n, "expected a boolean, got %s", json_kind(v));
        return cJSON_IsTrue(v) ? set_value(k, cfg, "true", 4, false, msg, n)
                               : set_value(k, cfg, "false", 5, false, msg, n);
    case CFG_U32:
    case CFG_U64:
        if (!cJSON_IsNumber(v))
            return cfg_fail(msg, n, "expected an unsigned integer, got %s", json_kind(v));
        if (raw)
            return set_value(k, cfg, raw, strspn(raw, "+-0123456789.eE"), false, msg, n);
        char num[64]; /* no key map (cannot happen for text cJSON accepted): best effort */
        snprintf(num, sizeof num, "%.17g", v->valuedouble);
        return set_value(k, cfg, num, strlen(num), false, msg, n);
    case CFG_F64: {
        if (!cJSON_IsNumber(v))
            return cfg_fail(msg, n, "expected a number, got %s", json_kind(v));
        if (raw)
            return set_value(k, cfg, raw, strspn(raw, "+-0123456789.eE"), false, msg, n);
        char text[64];
        snprintf(text, sizeof text, "%.17g", v->valuedouble);
        return set_value(k, cfg, text, strlen(text), false, msg, n);
    }
    case CFG_STR:
        if (!cJSON_IsString(v))
            return cfg_fail(msg, n, "expected a string, got %s", json_kind(v));
        return set_value(k, cfg, v->valuestring, strlen(v->valuestring), true, msg, n);
    case CFG_ENUM:
        if (!cJSON_IsString(v)) {
            choices_list(list, sizeof list, k->choices, ", ");
            return cfg_fail(msg, n, "expected a string (one of %s), got %s", list, json_kind(v));
        }
        return set_value(k, cfg, v->valuestring, strlen(v->valuestring), true, msg, n);
    case CFG_LIST: {
        if (!cJSON_IsArray(v))
            return cfg_fail(msg, n, "expected an array of strings, got %s", json_kind(v));
        char *field = (char *)cfg + k->off;
        size_t out = 0, idx = 0;
        const cJSON *it;
        /* Built aside, so a bad entry leaves the field as it was. */
        char *buf = calloc(1, k->size);
        if (!buf)
            return cfg_fail(msg, n, "out of memory");
        cJSON_ArrayForEach(it, v)
        {
            if (!cJSON_IsString(it)) {
                free(buf);
                return cfg_fail(msg, n, "entry %zu: expected a string, got %s", idx, json_kind(it));
            }
            size_t l = strlen(it->valuestring);
            if (l == 0 || strchr(it->valuestring, '\n')) {
                free(buf);
                return cfg_fail(msg, n, "entry %zu: %s", idx,
                                l ? "must not contain a newline" : "must not be empty");
            }
            if (out + (out ? 1 : 0) + l > k->size - 1) {
                free(buf);
                return cfg_fail(msg, n, "too long (max %zu bytes in all)", k->size - 1);
            }
            if (out)
                buf[out++] = '\n';
            memcpy(buf + out, it->valuestring, l);
            out += l;
            idx++;
        }
        memcpy(field, buf, k->size);
        free(buf);
        return 0;
    }
    }
    return cfg_fail(msg, n, "unsupported type");
}

/* s[0..len) as a JSON string. */
static void json_string(FILE *f, const char *s, size_t len)
{
    fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* The field's value as a JSON literal. */
static void emit_value(FILE *f, const cfg_key_t *k, const nf_config_t *cfg)
{
    const char *field = (const char *)cfg + k->off;
    switch (k->type) {
    case CFG_BOOL: {
        bool b;
        memcpy(&b, field, sizeof b);
        fputs(b ? "true" : "false", f);
        return;
    }
    case CFG_U32: {
        uint32_t v;
        memcpy(&v, field, sizeof v);
        fprintf(f, "%" PRIu32, v);
        return;
    }
    case CFG_U64: {
        uint64_t v;
        memcpy(&v, field, sizeof v);
        fprintf(f, "%" PRIu64, v);
        return;
    }
    case CFG_F64: {
        double v;
        memcpy(&v, field, sizeof v);
        /* the shortest form that reads back as the same double (0.1, not 0.10000000000000001) */
        char text[40];
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(text, sizeof text, "%.*g", prec, v);
            if (strtod(text, NULL) == v)
                break;
        }
        fputs(text, f);
        if (!strpbrk(text, ".eEn"))
            fputs(".0", f); /* stays a JSON number that reads as a double */
        return;
    }
    case CFG_STR:
        json_string(f, field, strlen(field));
        return;
    case CFG_ENUM: {
        int i;
        memcpy(&i, field, sizeof i);
        json_string(f, k->choices[i], strlen(k->choices[i]));
        return;
    }
    case CFG_LIST: {
        fputc('[', f);
        for (const char *p = field; *p;) {
            size_t l = strcspn(p, "\n");
            if (p != field)
                fputs(", ", f);
            json_string(f, p, l); /* an entry may be longer than any fixed buffer */
            p += l + (p[l] == '\n');
        }
        fputc(']', f);
        return;
    }
    }
}

/* ---- the table's own invariants (asserted once by nf_config_defaults) ---- */

static size_t cfg_depth(const char *path)
{
    size_t d = 0;
    for (; *path; path++)
        d += *path == '.';
    return d;
}

/* Leading object components shared by two paths ("a.b.c", "a.b.d" -> 2; "a.x", "a" -> 0). */
static size_t cfg_common(const char *a, const char *b)
{
    size_t common = 0;
    for (;;) {
        size_t la = strcspn(a, "."), lb = strcspn(b, ".");
        if (a[la] != '.' || b[lb] != '.' || la != lb || memcmp(a, b, la) != 0)
            return common;
        common++;
        a += la + 1;
        b += lb + 1;
    }
}

#ifndef NDEBUG
static bool cfg_table_ok(void)
{
    for (size_t i = 0; i < CFG_NKEYS; i++) {
        const cfg_key_t *k = &cfg_keys[i];
        size_t want = k->type == CFG_BOOL   ? sizeof(bool)
                      : k->type == CFG_U32  ? sizeof(uint32_t)
                      : k->type == CFG_U64  ? sizeof(uint64_t)
                      : k->type == CFG_F64  ? sizeof(double)
                      : k->type == CFG_ENUM ? sizeof(int)
                                            : k->size;
        uint64_t max = k->type == CFG_STR || k->type == CFG_LIST ? k->size - 1 : k->max;
        if (k->size != want || strlen(k->path) >= CFG_PATH_MAX || k->min > max ||
            (k->type == CFG_U32 && k->max > UINT32_MAX) || (k->type == CFG_ENUM && !k->choices))
            return false;
        for (size_t j = 0; j < i; j++) {
            /* unique paths; no key is also a section; sections contiguous */
            const char *p = k->path, *q = cfg_keys[j].path;
            size_t lq = strlen(q), lp = strlen(p);
            if (!strcmp(p, q) || (lq < lp && has_prefix(p, q, lq)) ||
                (lp < lq && has_prefix(q, p, lp)))
                return false;
            if (j + 1 < i && cfg_common(q, p) > cfg_common(cfg_keys[i - 1].path, p))
                return false;
        }
    }
    return true;
}
#endif

/* ---- public: defaults, JSON, hash, describe ---- */

void nf_config_defaults(nf_config_t *cfg)
{
    assert(cfg_table_ok());
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < CFG_NKEYS; i++) {
        char msg[256];
        int rc = set_value(&cfg_keys[i], cfg, cfg_keys[i].def, strlen(cfg_keys[i].def), true, msg,
                           sizeof msg);
        assert(rc == 0 && "a default in cfg_keys[] fails its own checks");
        (void)rc;
    }
}

char *nf_config_to_json(const nf_config_t *cfg)
{
    char *out = NULL;
    size_t outlen = 0;
    FILE *f = open_memstream(&out, &outlen);
    if (!f)
        return NULL;
    size_t depth = 0; /* open objects below the root */
    bool first = true;
    const char *prev = "";
    fputc('{', f);
    for (size_t i = 0; i < CFG_NKEYS; i++) {
        const char *p = cfg_keys[i].path;
        size_t common = cfg_common(prev, p), want = cfg_depth(p);
        for (; depth > common; depth--, first = false)
            fprintf(f, "\n%*s}", (int)(2 * depth), "");
        const char *name = p;
        for (size_t d = 0; d < depth; d++)
            name += strcspn(name, ".") + 1;
        for (; depth < want; depth++, first = true) {
            size_t len = strcspn(name, ".");
            fprintf(f, "%s\n%*s\"%.*s\": {", first ? "" : ",", (int)(2 * depth + 2), "", (int)len,
                    name);
            name += len + 1;
        }
        fprintf(f, "%s\n%*s\"%s\": ", first ? "" : ",", (int)(2 * depth + 2), "", name);
        emit_value(f, &cfg_keys[i], cfg);
        first = false;
        prev = p;
    }
    for (; depth > 0; depth--)
        fprintf(f, "\n%*s}", (int)(2 * depth), "");
    fputs("\n}\n", f);
    if (fclose(f) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

uint64_t nf_config_hash(const nf_config_t *cfg)
{
    char *json = nf_config_to_json(cfg);
    uint64_t h = UINT64_C(14695981039346656037);
    for (const unsigned char *s = (const unsigned char *)json; s && *s; s++) {
        h ^= *s;
        h *= UINT64_C(1099511628211);
    }
    free(json);
    return h;
}

void nf_config_describe(FILE *out)
{
    nf_config_t def;
    nf_config_defaults(&def);
    char defs[CFG_NKEYS][80], types[CFG_NKEYS][64];
    int wpath = 0, wtype = 0, wdef = 0;
    for (size_t i = 0; i < CFG_NKEYS; i++) {
        const cfg_key_t *k = &cfg_keys[i];
        FILE *f = fmemopen(defs[i], sizeof defs[i], "w");
        if (f) {
            emit_value(f, k, &def);
            fclose(f);
        } else {
            snprintf(defs[i], sizeof defs[i], "%s", k->def);
        }
        char tmp[sizeof types[i]];
        snprintf(types[i], sizeof types[i], "%s", type_name(k, tmp, sizeof tmp));
        int lp = (int)strlen(k->path), lt = (int)strlen(types[i]), ld = (int)strlen(defs[i]);
        wpath = lp > wpath ? lp : wpath;
        wtype = lt > wtype ? lt : wtype;
        wdef = ld > wdef ? ld : wdef;
    }
    for (size_t i = 0; i < CFG_NKEYS; i++) {
        const cfg_key_t *k = &cfg_keys[i];
        fprintf(out, "%-*s  %-*s  %-*s  %s", wpath, k->path, wtype, types[i], wdef, defs[i],
                k->help);
        if (k->type == CFG_U32 || k->type == CFG_U64)
            fprintf(out, " [%" PRIu64 ", %" PRIu64 "]%s", k->min, k->max,
                    k->flags & CFG_POW2 ? ", power of two" : "");
        else if (k->type == CFG_F64)
            fprintf(out, " [%g, %g]", k->fmin, k->fmax);
        else if (k->type == CFG_STR)
            fprintf(out, " [%" PRIu64 "-%zu bytes]", k->min, k->size - 1);
        else if (k->type == CFG_LIST)
            fprintf(out, " [JSON array; comma-separated in env/--set]");
        fputc('\n', out);
    }
}

/* ---- the file layer ---- */

typedef struct cfg_keyloc {
    unsigned line;    /* 1-based line of the key */
    size_t value_off; /* where its value starts in the text */
} cfg_keyloc_t;

typedef struct cfg_doc {
    const char *path; /* for messages */
    const char *text;
    cfg_keyloc_t *locs; /* per object key, document order */
    size_t nlocs;
    const cJSON **members; /* per object member, pre-order; members[i] has locs[i] */
    size_t nmembers;
    size_t nul_escape; /* where the first "\u0000" in a string is, or SIZE_MAX */
} cfg_doc_t;

static size_t skip_ws(const char *s, size_t i, unsigned *line)
{
    for (; s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'; i++)
        *line += s[i] == '\n';
    return i;
}

/* Records every object key (a string followed, after whitespace, by ':'), and the first
 * "\u0000" escape in any string. Only run on text cJSON accepted, so strings are well formed.
 * -1 if out of memory. */
static int scan_keys(cfg_doc_t *d)
{
    const char *s = d->text;
    unsigned line = 1;
    size_t cap = 0;
    for (size_t i = 0; s[i];) {
        if (s[i] == '\n')
            line++;
        if (s[i] != '"') {
            i++;
            continue;
        }
        unsigned start = line;
        for (i++; s[i] && s[i] != '"'; i++) {
            if (s[i] == '\\' && s[i + 1]) {
                if (s[i + 1] == 'u' && !strncmp(s + i + 2, "0000", 4) && d->nul_escape == SIZE_MAX)
                    d->nul_escape = i;
                i++;
            } else if (s[i] == '\n')
                line++;
        }
        if (s[i])
            i++;
        unsigned after = line;
        size_t j = skip_ws(s, i, &after);
        if (s[j] != ':')
            continue; /* a string value; the loop goes on counting lines from i */
        if (d->nlocs == cap) {
            cap = cap ? 2 * cap : 32;
            cfg_keyloc_t *grown = realloc(d->locs, cap * sizeof *grown);
            if (!grown)
                return -1;
            d->locs = grown;
        }
        unsigned ignored = 0;
        d->locs[d->nlocs++] = (cfg_keyloc_t){start, skip_ws(s, j + 1, &ignored)};
        i = j + 1;
        line = after;
    }
    return 0;
}

static size_t count_members(const cJSON *node)
{
    size_t n = 0;
    for (const cJSON *c = node->child; c; c = c->next)
        n += (c->string != NULL) + count_members(c);
    return n;
}

static void index_members(cfg_doc_t *d, const cJSON *node)
{
    for (const cJSON *c = node->child; c; c = c->next) {
        if (c->string)
            d->members[d->nmembers++] = c;
        index_members(d, c);
    }
}

static const cfg_keyloc_t *doc_loc(const cfg_doc_t *d, const cJSON *member)
{
    for (size_t i = 0; i < d->nmembers; i++)
        if (d->members[i] == member)
            return &d->locs[i];
    return NULL;
}

/* err gains one more error: appended on a line of its own when it holds some already (walk goes
 * on past a bad key so that `config check` lists every one), as long as it fits. */
static void cfg_more(char *err, size_t errlen, const char *one)
{
    size_t used = strnlen(err, errlen);
    if (used == 0 || used + 1 + strlen(one) < errlen) /* the first one, or a whole one */
        cfg_append(err, errlen, "%s%s", used ? "\n" : "", one);
}

/* Every member of obj into cfg: each bad one (duplicate, unknown, mistyped, out of range) is
 * reported in err (cfg_more) and the walk goes on. 0, or -1 if any was bad. */
static int walk(const cfg_doc_t *d, nf_config_t *cfg, const cJSON *obj, const char *prefix,
                char *err, size_t errlen)
{
    size_t plen = strlen(prefix);
    int rc = 0;
    for (const cJSON *m = obj->child; m; m = m->next) {
        const cfg_keyloc_t *loc = doc_loc(d, m);
        char where[CFG_PATH_MAX + 4096], one[CFG_PATH_MAX + 5000] = "";
        if (loc)
            snprintf(where, sizeof where, "%s:%u", d->path, loc->line);
        else
            snprintf(where, sizeof where, "%s", d->path);
        const char *dot = plen ? "." : "";
        const cJSON *p = obj->child;
        while (p != m && strcmp(p->string, m->string) != 0)
            p = p->next;
        int child = p != m ? CFG_NONE : cfg_child(prefix, plen, m->string, strlen(m->string));
        if (p != m) {
            const cfg_keyloc_t *first = doc_loc(d, p);
            cfg_fail(one, sizeof one, "%s: duplicate key \"%s%s%s\" (first at line %u)", where,
                     prefix, dot, m->string, first ? first->line : 0);
        } else if (child == CFG_NONE) {
            cfg_unknown(one, sizeof one, where, prefix, plen, m->string, strlen(m->string));
        } else if (child == CFG_OBJECT) {
            char sub[CFG_PATH_MAX];
            snprintf(sub, sizeof sub, "%s%s%s", prefix, dot, m->string);
            if (!cJSON_IsObject(m))
                cfg_fail(one, sizeof one, "%s: %s: expected an object, got %s", where, sub,
                         json_kind(m));
            else if (walk(d, cfg, m, sub, err, errlen) < 0)
                rc = -1;
        } else {
            char msg[512];
            const cfg_key_t *k = &cfg_keys[child];
            if (set_json(k, cfg, m, loc ? d->text + loc->value_off : NULL, msg, sizeof msg) < 0)
                cfg_fail(one, sizeof one, "%s: %s: %s", where, k->path, msg);
        }
        if (one[0]) {
            cfg_more(err, errlen, one);
            rc = -1;
        }
    }
    return rc;
}

/* The whole file, NUL-terminated, in *out (malloc'ed). Reads at most CFG_FILE_MAX + 1 bytes:
 * enough for load_text() to tell that a file is too large. */
static int read_file(const char *path, char **out, size_t *outlen, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return cfg_fail(err, errlen, "%s: cannot read: %s", path, strerror(errno));
    char *buf = malloc(CFG_FILE_MAX + 2);
    if (!buf) {
        fclose(f);
        return cfg_fail(err, errlen, "%s: cannot read: out of memory", path);
    }
    size_t n = fread(buf, 1, CFG_FILE_MAX + 1, f);
    int rerr = ferror(f) ? errno : 0;
    fclose(f);
    if (rerr) {
        free(buf);
        return cfg_fail(err, errlen, "%s: cannot read: %s", path, strerror(rerr));
    }
    buf[n] = '\0';
    *out = buf;
    *outlen = n;
    return 0;
}

static int syntax_error(const char *path, const char *text, size_t pos, const char *what, char *err,
                        size_t errlen)
{
    unsigned line = 1;
    size_t bol = 0;
    for (size_t i = 0; i < pos; i++) {
        if (text[i] == '\n') {
            line++;
            bol = i + 1;
        }
    }
    /* Up to 20 bytes, stopping at the line end or any other control character. */
    size_t near = 0;
    for (unsigned char c; near < 20; near++)
        if ((c = (unsigned char)text[pos + near]) < 0x20 && c != '\t')
            break;
    return cfg_fail(err, errlen, "%s:%u:%zu: invalid JSON near '%.*s'%s", path, line, pos - bol + 1,
                    (int)near, text + pos, what);
}

/* The first byte JSON allows nowhere (a control character but tab, LF and CR), or len. cJSON
 * takes every byte up to ' ' for a blank and lets control characters into strings, so without
 * this check it accepts `{"a"\x15: 1}`, which scan_keys() (it knows the four JSON blanks only)
 * does not see as a key: keys and locations no longer pair up. */
static size_t find_control(const char *text, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
            return i;
    }
    return len;
}

/* cJSON reports a failed string the byte *after* its start ("{,}" -> at '}'), which matters
 * when it wanted a key and found something else: `{"a": 1,}` would point past the '}'. When
 * the byte before pos is not blank or a quote and the last non-blank byte before that one
 * opened an object or ended a member, that byte is the culprit. */
static size_t cjson_error_pos(const char *text, size_t pos)
{
    if (pos == 0 || strchr(" \t\r\n\"", text[pos - 1]))
        return pos;
    size_t i = pos - 1;
    while (i > 0 && strchr(" \t\r\n", text[i - 1]))
        i--;
    return i > 0 && (text[i - 1] == '{' || text[i - 1] == ',') ? pos - 1 : pos;
}

/* The file layer over text[0..len), named `name` in messages: everything nf_config_load() does
 * with a file once it has its bytes, and all nf_config_load_buffer() does. text[len] must be
 * '\0' (cJSON wants a C string); NULs before it are reported, not read past. */
static int load_text(nf_config_t *cfg, const char *name, const char *text, size_t len, char *err,
                     size_t errlen)
{
    assert(text[len] == '\0');
    if (len > CFG_FILE_MAX)
        return cfg_fail(err, errlen, "%s: larger than %u bytes", name, CFG_FILE_MAX);
    int rc = -1;
    cJSON *root = NULL;
    cfg_doc_t d = {.path = name, .text = text, .nul_escape = SIZE_MAX};
    unsigned line = 1;
    /* cJSON skips a UTF-8 byte order mark at the start: so must the count of leading lines. */
    size_t first = skip_ws(text, strncmp(text, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0, &line);
    size_t ctl = find_control(text, len);
    const char *end = NULL;
    if (first == len) {
        cfg_fail(err, errlen, "%s: empty; expected a JSON object", name);
        goto out;
    }
    if (ctl < len) {
        char what[48] = " (a NUL byte)";
        if (text[ctl])
            snprintf(what, sizeof what, " (a control character, 0x%02x)", (unsigned char)text[ctl]);
        syntax_error(name, text, ctl, what, err, errlen);
        goto out;
    }
    /* return_parse_end is cJSON_GetErrorPtr() without the global (thread-unsafe) state. */
    root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root) {
        size_t pos = end ? (size_t)(end - text) : 0;
        pos = cjson_error_pos(text, pos > len ? len : pos);
        syntax_error(name, text, pos > len ? len : pos, pos >= len ? " (unexpected end)" : "", err,
                     errlen);
        goto out;
    }
    if (!cJSON_IsObject(root)) {
        cfg_fail(err, errlen, "%s:%u: expected a JSON object at the top level, got %s", name, line,
                 json_kind(root));
        goto out;
    }
    size_t n = count_members(root);
    d.members = n ? malloc(n * sizeof *d.members) : NULL;
    if ((n && !d.members) || scan_keys(&d) < 0) {
        cfg_fail(err, errlen, "%s: out of memory", name);
        goto out;
    }
    /* cJSON decodes "\u0000" into a NUL that ends the C string, so "runtime\u0000x" would be
     * taken for the section "runtime" and "info\u0000x" for the level "info". */
    if (d.nul_escape != SIZE_MAX) {
        syntax_error(name, text, d.nul_escape, " (\\u0000: strings cannot hold a NUL)", err,
                     errlen);
        goto out;
    }
    index_members(&d, root);
    assert(d.nmembers == d.nlocs);
    if (d.nmembers != d.nlocs)
        d.nmembers = 0; /* no locations rather than wrong ones */
    if (errlen)
        err[0] = '\0'; /* walk appends every bad key's error */
    rc = walk(&d, cfg, root, "", err, errlen);
out:
    cJSON_Delete(root);
    free(d.members);
    free(d.locs);
    return rc;
}

static int load_file(nf_config_t *cfg, const char *path, char *err, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    if (read_file(path, &text, &len, err, errlen) < 0)
        return -1;
    int rc = load_text(cfg, path, text, len, err, errlen);
    free(text);
    return rc;
}

/* ---- the environment and --set layers ---- */

static void env_name(const cfg_key_t *k, char *buf, size_t n)
{
    snprintf(buf, n, "NEWSFLOW_%s", k->path);
    for (char *c = buf; *c; c++)
        *c = *c == '.' ? '_' : (char)toupper((unsigned char)*c);
}

static int set_text(const cfg_key_t *k, nf_config_t *cfg, const char *where, const char *value,
                    char *err, size_t errlen)
{
    char msg[512];
    if (set_value(k, cfg, value, strlen(value), true, msg, sizeof msg) < 0)
        return cfg_fail(err, errlen, "%s: %s: %s", where, k->path, msg);
    return 0;
}

static int load_env(nf_config_t *cfg, char *err, size_t errlen)
{
    char name[CFG_PATH_MAX + 16];
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "NEWSFLOW_", 9) != 0)
            continue;
        size_t len = strcspn(*e, "=");
        bool known = (len == strlen("NEWSFLOW_CONFIG") && !strncmp(*e, "NEWSFLOW_CONFIG", len)) ||
                     /* a drill hook, not configuration (failpoint.h) */
                     (len == strlen(NF_FAILPOINTS_ENV) && !strncmp(*e, NF_FAILPOINTS_ENV, len));
        for (size_t i = 0; i < CFG_NKEYS && !known; i++) {
            env_name(&cfg_keys[i], name, sizeof name);
            known = strlen(name) == len && !strncmp(*e, name, len);
        }
        if (known)
            continue;
        char list[2048] = "NEWSFLOW_CONFIG";
        for (size_t i = 0; i < CFG_NKEYS; i++) {
            env_name(&cfg_keys[i], name, sizeof name);
            cfg_append(list, sizeof list, ", %s", name);
        }
        return cfg_fail(err, errlen, "unknown environment variable %.*s; known: %s",
                        (int)(len > 200 ? 200 : len), *e, list);
    }
    for (size_t i = 0; i < CFG_NKEYS; i++) {
        env_name(&cfg_keys[i], name, sizeof name);
        const char *v = getenv(name);
        char where[sizeof name + 16];
        snprintf(where, sizeof where, "environment %s", name);
        if (v && set_text(&cfg_keys[i], cfg, where, v, err, errlen) < 0)
            return -1;
    }
    return 0;
}

static int load_set(nf_config_t *cfg, const char *arg, char *err, size_t errlen)
{
    char where[256];
    snprintf(where, sizeof where, "--set %s", arg);
    const char *eq = strchr(arg, '=');
    if (!eq)
        return cfg_fail(err, errlen, "%s: expected SECTION.KEY=VALUE", where);
    size_t len = (size_t)(eq - arg);
    for (size_t i = 0; i < CFG_NKEYS; i++)
        if (strlen(cfg_keys[i].path) == len && !strncmp(cfg_keys[i].path, arg, len))
            return set_text(&cfg_keys[i], cfg, where, eq + 1, err, errlen);
    /* Not a key: name the deepest known section it is under. */
    size_t plen = 0;
    for (;;) {
        const char *name = arg + (plen ? plen + 1 : 0);
        size_t nlen = strcspn(name, ".=");
        if (cfg_child(arg, plen, name, nlen) != CFG_OBJECT)
            break;
        plen = (size_t)(name + nlen - arg);
        if (plen == len) {
            char known[512];
            cfg_children(known, sizeof known, arg, plen);
            return cfg_fail(err, errlen, "%s: \"%.*s\" is a section, not a key (keys in it: %s)",
                            where, (int)len, arg, known);
        }
    }
    const char *rest = arg + (plen ? plen + 1 : 0);
    size_t rlen = plen ? (size_t)(eq - rest) : strcspn(arg, ".="); /* the unknown section */
    return cfg_unknown(err, errlen, where, arg, plen, rest, rlen);
}

/* Rules between keys, checked once every layer is in (a layer may fix what another broke). */
static int check_relations(const nf_config_t *c, char *err, size_t errlen)
{
    if ((uint64_t)c->cluster.bands * c->cluster.rows != c->cluster.hashes)
        return cfg_fail(err, errlen,
                        "cluster.hashes (%u) must equal cluster.bands (%u) * cluster.rows (%u)",
                        c->cluster.hashes, c->cluster.bands, c->cluster.rows);
    if (c->trending.window_s % c->trending.slide_s != 0)
        return cfg_fail(err, errlen,
                        "trending.window_s (%u) must be a multiple of trending.slide_s (%u)",
                        c->trending.window_s, c->trending.slide_s);
    if (c->trending.window_s / c->trending.slide_s > 10000)
        return cfg_fail(err, errlen,
                        "trending.window_s / trending.slide_s is %u panes; at most 10000",
                        c->trending.window_s / c->trending.slide_s);
    /* a full batch the edge could never take would be told to retry for ever */
    if (c->edge.max_in_flight < c->edge.max_batch)
        return cfg_fail(err, errlen,
                        "edge.max_in_flight (%u) must be at least edge.max_batch (%u): a full "
                        "batch could never be taken",
                        c->edge.max_in_flight, c->edge.max_batch);
    if (c->limits.enabled && c->limits.events_per_s &&
        2ull * c->limits.events_per_s < c->edge.max_batch)
        return cfg_fail(err, errlen,
                        "2 * limits.events_per_s (%llu, a client's bucket) must be at least "
                        "edge.max_batch (%u): a full batch could never be taken",
                        2ull * c->limits.events_per_s, c->edge.max_batch);
    return 0;
}

int nf_config_load(nf_config_t *cfg, const char *path, char *const *sets, unsigned nsets,
                   bool use_env, char *err, size_t errlen)
{
    nf_config_t c;
    nf_config_defaults(&c);
    if (errlen)
        err[0] = '\0';
    if (path && load_file(&c, path, err, errlen) < 0)
        return -1;
    if (use_env && load_env(&c, err, errlen) < 0)
        return -1;
    for (unsigned i = 0; i < nsets; i++)
        if (load_set(&c, sets[i], err, errlen) < 0)
            return -1;
    if (check_relations(&c, err, errlen) < 0)
        return -1;
    *cfg = c;
    return 0;
}

int nf_config_load_buffer(nf_config_t *cfg, const char *name, const char *data, size_t len,
                          char *err, size_t errlen)
{
    nf_config_t c;
    nf_config_defaults(&c);
    if (errlen)
        err[0] = '\0';
    /* A NUL-terminated copy for cJSON; one byte past the limit is enough to report it. */
    size_t n = len > CFG_FILE_MAX ? CFG_FILE_MAX + 1 : len;
    char *text = malloc(n + 1);
    if (!text)
        return cfg_fail(err, errlen, "%s: out of memory", name);
    if (n)
        memcpy(text, data, n);
    text[n] = '\0';
    int rc = load_text(&c, name, text, n, err, errlen);
    free(text);
    if (rc == 0)
        rc = check_relations(&c, err, errlen);
    if (rc == 0)
        *cfg = c;
    return rc;
}
