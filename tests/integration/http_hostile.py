#!/usr/bin/env python3
"""http_hostile.py — what a hostile or careless client does to admin.port once the shards serve
it (src/runtime/httpd.h), against a running job: PORT is its admin.port, TIMEOUT_MS its
admin.request_timeout_ms. Each case waits on a condition (an answer, a closed socket), never on
a clock beyond the generous bounds that make a hang a failure.

  - pipelined requests answered in order, keep-alive; pipelined garbage after a good request:
    the good one answered, then 400 and the connection closed
  - a request line over the limit 414, headers over it 431, too many headers 431, a body over
    edge.max_body_bytes 413 (from Content-Length, before the body), a malformed request 400
  - a slow sender (a header byte at a time) and a silent connection closed after the timeout
  - 10,000 idle connections held open: a new client's query and /healthz still answered, the
    oldest idle ones closed past admin.max_connections (newsflow_http_connections_closed_total)
  - Expect: 100-continue answered before the body
Usage: http_hostile.py PORT TIMEOUT_MS"""
import json
import resource
import socket
import sys
import time

PORT = int(sys.argv[1])
TIMEOUT_S = int(sys.argv[2]) / 1000
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def conn():
    s = socket.create_connection(("127.0.0.1", PORT), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_response(f):
    """One response from a socket file: (status, headers dict, body bytes); None at EOF."""
    line = f.readline()
    if not line:
        return None
    status = int(line.split()[1])
    headers = {}
    while True:
        h = f.readline()
        if h in (b"\r\n", b""):
            break
        k, _, v = h.decode().partition(":")
        headers[k.strip().lower()] = v.strip()
    body = f.read(int(headers.get("content-length", 0)))
    return status, headers, body


def closed_within(s, seconds):
    """True once the server closed s (EOF or reset), reading whatever it sends before."""
    s.settimeout(seconds)
    try:
        while s.recv(65536):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def pipelined():
    s = conn()
    paths = [("/v1/topics", 200), ("/v1/articles/not-an-id", 400)] * 25
    s.sendall(b"".join(f"GET {p} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode() for p, _ in paths))
    f = s.makefile("rb")
    got = [read_response(f) for _ in paths]
    ok = all(r and r[0] == want and (b"topics" in r[2] if want == 200 else b"parameter" in r[2])
             for r, (_, want) in zip(got, paths))
    check(ok, "50 pipelined requests answered in order on one connection")
    s.sendall(b"GET /v1/topics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n\x00\x01garbage \r\n\r\n")
    first, second = read_response(f), read_response(f)
    check(first and first[0] == 200 and second and second[0] == 400,
          f"a good request then garbage: 200 then 400 ({first and first[0]}, {second and second[0]})")
    check(closed_within(s, 10), "the connection is closed after the garbage")
    s.close()


def refused(raw, want, what):
    s = conn()
    try:
        s.sendall(raw)
    except (ConnectionResetError, BrokenPipeError):
        pass
    try:
        r = read_response(s.makefile("rb"))
    except (ConnectionResetError, socket.timeout):
        r = None
    check(r is not None and r[0] == want, f"{what}: {want} ({r and r[0]})")
    check(closed_within(s, 10), f"{what}: the connection is closed")
    s.close()


def limits():
    refused(b"GET /v1/search?q=" + b"a" * 70000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 414,
            "a request line of 70 kB")
    refused(b"GET /v1/topics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"b" * 40000 + b"\r\n\r\n", 431,
            "a header of 40 kB")
    refused(b"GET /v1/topics HTTP/1.1\r\n" + b"".join(b"X-H%d: 1\r\n" % i for i in range(200))
            + b"\r\n", 431, "200 headers")
    refused(b"POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000000\r\n\r\n[", 413, "a body of 1 GB announced")
    refused(b"GET /v1/topics HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\n",
            400, "two Content-Lengths")
    refused(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 400, "a TLS hello")


def expect_continue():
    s = conn()
    body = b'[{"user_id":"u","article_id":"x"}]'
    s.sendall(b"POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body))
    f = s.makefile("rb")
    r = read_response(f)
    check(r is not None and r[0] == 100, f"Expect: 100-continue answered 100 ({r and r[0]})")
    s.sendall(body)
    r = read_response(f)
    check(r is not None and r[0] in (202, 400, 404, 503),
          f"then the body is taken and answered ({r and r[0]})")
    s.close()


def slow():
    s = conn()
    s.sendall(b"GET /v1/topics HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    t0 = time.monotonic()
    closed = False
    while time.monotonic() - t0 < TIMEOUT_S + 20:
        try:
            s.sendall(b"X")  # a header byte now and then: never a whole request
        except (BrokenPipeError, ConnectionResetError):
            closed = True
            break
        s.settimeout(0.5)
        try:
            if s.recv(4096) == b"":
                closed = True
                break
        except socket.timeout:
            pass
        except ConnectionResetError:
            closed = True
            break
    check(closed, "a slow sender is cut after admin.request_timeout_ms")
    silent = conn()
    check(closed_within(silent, TIMEOUT_S + 20), "a silent connection is closed after the timeout")
    silent.close()


def get(path):
    s = conn()
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
    r = read_response(s.makefile("rb"))
    s.close()
    return r


def metric(name):
    _, _, body = get("/metrics")
    total = 0.0
    for line in body.decode().splitlines():
        if line.startswith(name):
            total += float(line.split()[-1])
    return total


def idle_flood(n=10000):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < n + 300:  # the job shares the limit (test_http_shards.sh raises both to the hard one)
        print(f"note: the descriptor limit {hard} holds {hard - 300} idle connections, not {n}")
        n = hard - 300
    check(n >= 1000, f"at least 1,000 idle connections can be held ({n})")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    evicted0 = metric('newsflow_http_connections_closed_total{reason="evicted"}')
    held = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", PORT))
        held.append(s)
    t0 = time.monotonic()
    r = get("/v1/topics")
    h = get("/healthz")
    dt = time.monotonic() - t0
    check(r and r[0] == 200 and h and h[0] == 200,
          f"with {n} idle connections open, a query and /healthz answered ({dt * 1000:.0f} ms)")
    evicted = metric('newsflow_http_connections_closed_total{reason="evicted"}') - evicted0
    check(evicted > 0, f"the oldest idle connections were closed past admin.max_connections "
                       f"({evicted:.0f})")
    for s in held:
        s.close()


pipelined()
limits()
expect_continue()
idle_flood()
slow()
sys.exit(1 if failures else 0)
