"""A feed farm on loopback for the tests of sources in a consumer group (sources_group.py,
scale_out.py): one threaded HTTP server per host address (127.0.0.2, ...; Linux routes all of
127.0.0.0/8 to lo), a few RSS feeds per host whose items grow with `version` (ETag per version,
304 to If-None-Match), one item URL syndicated by two hosts in different sources partitions,
and a log of every request (time, host, path, User-Agent, If-None-Match, status, arrival).
Every item is about sports (classify gives it a topic vector).

The arrival is when the request's first bytes reached this machine's socket, stamped by the
kernel (SO_TIMESTAMPNS), not when a thread of this busy Python process got round to it: the
politeness checks compare what a publisher receives, and a farm thread delayed by a loaded CPU
must not make two requests look closer (or farther) apart than they came."""
import http.server
import os
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recovery"))
import acclib  # noqa: E402

HOSTS = ["127.0.0.%d" % i for i in range(2, 10)]
# one item URL in the feeds of two hosts whose sources partitions differ (with 4 or 6)
SYNDICATED = "http://127.0.0.99/syndicated/story"
SYNDICATING = ("127.0.0.2", "127.0.0.3")


def murmur2(data):
    """Kafka's murmur2 (Utils.murmur2), unsigned."""
    m, r = 0x5bd1e995, 24
    h = (0x9747b28c ^ len(data)) & 0xffffffff
    n4 = len(data) // 4
    for i in range(n4):
        k = int.from_bytes(data[4 * i:4 * i + 4], "little")
        k = (k * m) & 0xffffffff
        k ^= k >> r
        k = (k * m) & 0xffffffff
        h = (h * m) & 0xffffffff
        h ^= k
    t = data[4 * n4:]
    rem = len(data) % 4
    if rem >= 3:
        h ^= t[2] << 16
    if rem >= 2:
        h ^= t[1] << 8
    if rem >= 1:
        h ^= t[0]
        h = (h * m) & 0xffffffff
    h ^= h >> 13
    h = (h * m) & 0xffffffff
    h ^= h >> 15
    return h


def host_partition(host, partitions):
    """The sources partition of a host (actors/sources.h nf_sources_partition)."""
    return (murmur2(host.encode()) & 0x7fffffff) % partitions


SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def server_bind(self):
        # accepted sockets inherit it: the kernel stamps every packet they receive
        self.socket.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        super().server_bind()


def _arrival(conn):
    """Kernel receive time (epoch s) of the next bytes on conn, waiting for them (MSG_PEEK: the
    request stays to be read); None if the peer closed first."""
    try:
        data, anc, _, _ = conn.recvmsg(1, socket.CMSG_SPACE(16), socket.MSG_PEEK)
    except OSError:
        return None
    for level, kind, d in anc:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(d) >= 16:
            sec, ns = struct.unpack("qq", d[:16])
            return sec + ns / 1e9
    return time.time() if data else None


class Farm:
    """One threaded HTTP server per loopback host; a log of every request."""

    def __init__(self, ctx, hosts=HOSTS, feeds_per_host=2):
        self.ctx = ctx
        self.hosts, self.feeds_per_host = list(hosts), feeds_per_host
        self.lock = threading.Lock()
        # (monotonic s when answered, host, path, user agent, if-none-match or None, status,
        #  kernel arrival, epoch s)
        self.log = []
        self.in_flight = {h: 0 for h in hosts}  # requests being answered now, per host
        self.max_in_flight = {h: 0 for h in hosts}  # the most at once
        self.servers = []
        self.base = {}
        self.version = 1  # 2: every feed gains an item (and a new ETag)
        farm = self

        class H(http.server.BaseHTTPRequestHandler):
            def handle_one_request(self):
                self.arrival = _arrival(self.connection)
                super().handle_one_request()

            def do_GET(self):
                host = self.server.server_address[0]
                with farm.lock:
                    farm.in_flight[host] += 1
                    farm.max_in_flight[host] = max(farm.max_in_flight[host],
                                                   farm.in_flight[host])
                try:
                    self.answer(host)
                finally:
                    with farm.lock:
                        farm.in_flight[host] -= 1

            def answer(self, host):
                inm = self.headers.get("If-None-Match")
                ver = farm.version
                etag = '"v%d-%s%s"' % (ver, host, self.path)
                item = "http://%s/articles%s" % (host, self.path.replace(".xml", ""))
                status = 304 if inm == etag else 200
                with farm.lock:
                    farm.log.append((time.monotonic(), host, self.path,
                                     self.headers.get("User-Agent", ""), inm, status,
                                     self.arrival or time.time()))
                if status == 304:
                    self.send_response(304)
                    self.send_header("ETag", etag)
                    self.end_headers()
                    return
                body = ("<?xml version='1.0'?><rss version='2.0'><channel><title>%s%s</title>"
                        "<link>http://%s/</link><description>farm</description>" %
                        (host, self.path, host))
                for i in range(2 + ver):
                    body += ("<item><title>Story %d of %s%s</title><link>%s/%d</link>"
                             "<description>Body %d of the feed %s on %s. The football club "
                             "won the championship game after the coach changed tactics."
                             "</description></item>" %
                             (i, host, self.path, item, i, i, self.path, host))
                if host in SYNDICATING:
                    body += ("<item><title>The syndicated story</title><link>%s</link>"
                             "<description>Shared by several hosts.</description></item>" %
                             SYNDICATED)
                body += "</channel></rss>"
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/rss+xml")
                self.send_header("ETag", etag)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        def serve(s):
            # The farm measures the job's politeness: as root its threads (the handlers inherit
            # it) run before a CPU hog of the same priority as the job (chaos.py) delays them.
            try:
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), -10)
            except OSError:
                pass
            s.serve_forever()

        for h in self.hosts:
            s = Server((h, 0), H)
            threading.Thread(target=serve, args=(s,), daemon=True).start()
            self.servers.append(s)
            self.base[h] = "http://%s:%d" % (h, s.server_address[1])

    def urls(self):
        """[(feed URL, host)] of every feed."""
        return [("%s/f%d.xml" % (self.base[h], i), h) for h in self.hosts
                for i in range(self.feeds_per_host)]

    def items(self):
        """The item URLs the feeds hold now (each the URL of one article)."""
        return {"http://%s/articles/f%d/%d" % (h, i, k) for h in self.hosts
                for i in range(self.feeds_per_host) for k in range(2 + self.version)} | \
            {SYNDICATED}

    def requests(self):
        with self.lock:
            return list(self.log)

    def sources_file(self, path):
        """Writes the feeds' URLs, one per line (sources.file)."""
        with open(path, "w") as f:
            for u, _ in self.urls():
                f.write(u + "\n")
        return path

    def politeness(self, spacing_ms, max_concurrent=None, slack_ms=2, t0=0.0):
        """The job's politeness as the hosts saw it: (violations, summary). A violation is two
        requests arriving at one host (the kernel's receive times) less than spacing_ms -
        slack_ms apart, whichever processes sent them (crawl.host_spacing_ms holds across the
        job; 2 ms of slack for the job's millisecond clock), or more than max_concurrent
        requests of one host answered at once. Times in the messages are seconds after t0
        (time.monotonic(), when the farm answered)."""
        reqs = self.requests()
        bad, gaps = [], []

        def say(h, a, b, g):
            return "%s: %s by %s at %.3f s then %s by %s %.3f s later" % (
                h, a[2], a[3], a[0] - t0, b[2], b[3], g)
        for h in self.hosts:
            rs = sorted((r for r in reqs if r[1] == h), key=lambda r: r[6])
            for a, b in zip(rs, rs[1:]):
                g = b[6] - a[6]
                gaps.append((g, say(h, a, b, g)))
                if g < (spacing_ms - slack_ms) / 1000.0:
                    bad.append(gaps[-1][1])
            if max_concurrent is not None and self.max_in_flight[h] > max_concurrent:
                bad.append("%s: %d requests answered at once (crawl.host_max_concurrent %d)" %
                           (h, self.max_in_flight[h], max_concurrent))
        gaps.sort()
        return bad, {"requests": len(reqs), "min_gap_s": round(gaps[0][0], 3) if gaps else None,
                     "closest": [d for _, d in gaps[:3]],
                     "max_in_flight": max(self.max_in_flight.values())}

    def check_articles(self, ctx, broker):
        """Every item URL the feeds hold in `articles` exactly once and every article in
        `story-clusters` exactly once (read_committed). Returns a summary line."""
        count = {}
        for _, _, v in acclib.read_outputs(ctx, broker, "articles"):
            count[v.get("url")] = count.get(v.get("url"), 0) + 1
        twice = {u: n for u, n in count.items() if n != 1}
        ctx.check(not twice, "articles emitted more than once: %r" % dict(list(twice.items())[:8]))
        missing = self.items() - set(count)
        ctx.check(not missing, "items never emitted: %r" % sorted(missing)[:5])
        stories = acclib.read_outputs(ctx, broker, "story-clusters")
        per = {}
        for k, _, _ in stories:
            per[k] = per.get(k, 0) + 1
        ctx.check(len(per) == len(count) and all(n == 1 for n in per.values()),
                  "story-clusters: %d records for %d articles, %d articles more than once" %
                  (len(stories), len(count), sum(1 for n in per.values() if n != 1)))
        return "articles: %d, each once; story-clusters: one record each" % len(count)

    def stop(self):
        for s in self.servers:
            s.shutdown()
            s.server_close()


