/* testhttpd.h — a loopback HTTP server for tests and benchmarks (libmicrohttpd).
 *
 * Listens on 127.0.0.1 on an ephemeral port. Routes (GET):
 *   /feed/N.xml      small RSS 2.0 feed of source N: 3 items linking http://news.example/N/K,
 *                    ETag "N-vV" where V changes every `change_every_s` seconds (0: never);
 *                    If-None-Match with the current ETag -> 304
 *   /shared/N.xml    RSS whose items link to the same 3 URLs for every N (dedup tests)
 *   /slow            200, body dribbled 16 bytes per 100 ms for ~1 s (completes)
 *   /stall           200 headers, then nothing until the client gives up (or 30 s)
 *   /status/C        status code C with a short body (500, 404, 410, ...)
 *   /429             429 with Retry-After: 120
 *   /503-date        503 with Retry-After as an HTTP date 300 s ahead
 *   /gzip            gzip-encoded RSS (Content-Encoding: gzip)
 *   /loop            302 to itself (redirect loop)
 *   /to-private      302 to http://10.255.255.1/feed.xml (must be refused before connecting)
 *   /redirect        301 to /feed/1.xml
 *   /huge            100 MiB body with Content-Length
 *   /huge-chunked    100 MiB body, chunked (no length)
 *   /html            an HTML page, not a feed
 *   /file/NAME       the bytes of tests/data/feeds/NAME (hostile inputs: bomb.xml, xxe.xml, ...)
 * Thread-per-connection, so a stalled client never delays another. */
#ifndef NF_TESTHTTPD_H
#define NF_TESTHTTPD_H

#include <stdint.h>

typedef struct nf_testhttpd nf_testhttpd_t;

/* data_dir: where /file/ reads from (NULL: NF_SOURCE_DIR "/tests/data/feeds"). NULL on failure. */
nf_testhttpd_t *nf_testhttpd_start(const char *data_dir, unsigned change_every_s);
uint16_t nf_testhttpd_port(const nf_testhttpd_t *s);
uint64_t nf_testhttpd_requests(const nf_testhttpd_t *s);
void nf_testhttpd_stop(nf_testhttpd_t *s);

#endif
