"""cdp.py — a minimal Chrome DevTools Protocol client on Python's standard library, for tests that
drive a headless Chromium the way a reader would (page_click.py): no outside package, so the
suite needs nothing beyond Debian's chromium and python3.

The transport is just enough of a WebSocket client (RFC 6455) for CDP: the opening handshake
with its Sec-WebSocket-Accept checked, masked text frames out (a client must mask), text and
continuation frames in (a server must not mask, but an unmasking costs nothing), pings
answered, a close frame ended. CDP itself: a call is {"id", "method", "params"} answered by the
message with that id; the events that come meanwhile are kept in Session.events.

No Origin header is sent: Chromium refuses DevTools connections from an origin it was not told
to allow (--remote-allow-origins), and a client without one is not a web page."""
import base64
import hashlib
import json
import os
import socket
import struct
import time
import urllib.parse
import urllib.request

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 §1.3


class CdpError(Exception):
    pass


class WebSocket:
    def __init__(self, url, timeout=10):
        u = urllib.parse.urlsplit(url)
        if u.scheme != "ws":
            raise CdpError(f"not a ws:// URL: {url}")
        self.sock = socket.create_connection((u.hostname, u.port or 80), timeout=timeout)
        self.buf = b""  # bytes read past what has been taken (the handshake's tail)
        self.parts = []  # the fragments of a message still coming
        key = base64.b64encode(os.urandom(16)).decode()
        path = u.path + ("?" + u.query if u.query else "")
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {u.netloc}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        if not lines[0].startswith("HTTP/1.1 101"):
            raise CdpError(f"WebSocket handshake refused: {lines[0]}")
        headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
        want = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        if headers.get("sec-websocket-accept") != want:
            raise CdpError("WebSocket handshake: wrong Sec-WebSocket-Accept")

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise CdpError("the DevTools connection closed")
        self.buf += chunk

    def _frame(self):
        """(fin, opcode, payload) of the next frame, taken from the buffer only once it is whole,
        so that a timeout while waiting loses nothing."""
        while True:
            b, need = self.buf, 2
            if len(b) >= 2:
                n = b[1] & 0x7F
                ext = 2 if n == 126 else 8 if n == 127 else 0
                need += ext
                if len(b) >= need:
                    if ext:
                        n = int.from_bytes(b[2:need], "big")
                    masked = b[1] & 0x80
                    start = need + (4 if masked else 0)
                    need = start + n
                    if len(b) >= need:
                        payload = b[start:need]
                        if masked:
                            mask = b[start - 4:start]
                            payload = bytes(x ^ mask[i % 4] for i, x in enumerate(payload))
                        self.buf = b[need:]
                        return b[0] & 0x80, b[0] & 0x0F, payload
            self._fill()

    def _send_frame(self, opcode, payload):
        n = len(payload)
        head = bytes([0x80 | opcode])  # FIN: every frame sent is a whole message
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def send(self, text):
        self._send_frame(0x1, text.encode())

    def recv(self, timeout):
        """The next whole text message; socket.timeout when none comes within timeout s."""
        self.sock.settimeout(max(timeout, 0.01))
        while True:
            fin, opcode, payload = self._frame()
            if opcode == 0x9:  # ping: pong with its payload
                self._send_frame(0xA, payload)
            elif opcode == 0x8:
                raise CdpError("the DevTools connection was closed by Chromium")
            elif opcode in (0x0, 0x1, 0x2):
                self.parts.append(payload)  # kept across a timeout between fragments
                if fin:
                    text, self.parts = b"".join(self.parts).decode(), []
                    return text
            # 0xA (pong) and anything else: nothing to do

    def close(self):
        try:
            self._send_frame(0x8, struct.pack(">H", 1000))
        except OSError:
            pass
        self.sock.close()


def page_ws_url(port, timeout=30):
    """The WebSocket URL of the first page target of the Chromium debugging on port."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                pages = [t for t in json.loads(r.read()) if t.get("type") == "page"]
            if pages:
                return pages[0]["webSocketDebuggerUrl"]
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise CdpError(f"no page target on DevTools port {port} within {timeout} s")
        time.sleep(0.2)


def targets(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
        return json.loads(r.read())


class Session:
    """CDP on one target's WebSocket."""

    def __init__(self, ws_url, timeout=30):
        self.ws = WebSocket(ws_url, timeout)
        self.timeout = timeout
        self.next_id = 0
        self.events = []  # {"method", "params"} received while waiting for answers

    def call(self, method, params=None, timeout=None):
        self.next_id += 1
        mid = self.next_id
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params or {}}))
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CdpError(f"{method}: no answer within {timeout or self.timeout} s")
            try:
                msg = json.loads(self.ws.recv(left))
            except socket.timeout:
                continue
            if msg.get("id") == mid:
                if "error" in msg:
                    raise CdpError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def evaluate(self, expression):
        """The value of a JavaScript expression in the page (a promise awaited)."""
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                           "awaitPromise": True})
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise CdpError(f"{expression[:60]}...: {d.get('exception', {}).get('description') or d.get('text')}")
        return r["result"].get("value")

    def close(self):
        self.ws.close()
