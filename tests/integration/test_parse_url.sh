#!/usr/bin/env bash
# `newsflow parse URL`: fetched through the job's fetcher and address guard, then parsed.
# A loopback server (python3 http.server) serves examples/feeds. $1 = newsflow, $2 = source dir.
set -euo pipefail
NF="$1"
SRC="$2"
TMP=$(mktemp -d)
SERVER=""
cleanup() { [ -z "$SERVER" ] || kill "$SERVER" 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
for v in $(env | grep -o '^NEWSFLOW_[A-Z_]*' || true); do unset "$v"; done

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 -m http.server --bind 127.0.0.1 --directory "$SRC/examples/feeds" "$PORT" >/dev/null 2>&1 &
SERVER=$!
for _ in $(seq 50); do
  python3 -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 1)" 2>/dev/null && break
  sleep 0.1
done

# The default guard refuses loopback, before connecting, and says how to allow it.
set +e
"$NF" parse "http://127.0.0.1:$PORT/world.xml" >"$TMP/out" 2>"$TMP/err"; rc=$?
set -e
[ $rc -eq 1 ] || fail "guarded fetch: exit $rc, want 1"
grep -q "address guard: 127.0.0.1 is loopback" "$TMP/err" || fail "guard message: $(cat "$TMP/err")"

# A bad allow-list entry is a config error naming the entry (same code path as `run`).
set +e
NEWSFLOW_FETCH_ALLOW_PRIVATE=127.0.0.0/8,bogus "$NF" parse "http://127.0.0.1:$PORT/world.xml" \
  >/dev/null 2>"$TMP/err"; rc=$?
set -e
[ $rc -eq 2 ] || fail "bad allow_private: exit $rc, want 2"
grep -q 'fetch.allow_private\[1\]: "bogus"' "$TMP/err" || fail "allow_private message: $(cat "$TMP/err")"

# Allowed: same articles as parsing the file, with the URL as base.
export NEWSFLOW_FETCH_ALLOW_PRIVATE=127.0.0.0/8
"$NF" parse --compact "http://127.0.0.1:$PORT/world.xml" >"$TMP/url.json"
"$NF" parse --compact "$SRC/examples/feeds/world.xml" >"$TMP/file.json"
python3 - "$TMP/url.json" "$TMP/file.json" <<'PY' || fail "URL and file parses differ"
import json, sys
u, f = (json.load(open(p)) for p in sys.argv[1:3])
key = lambda d: [(a["article_id"], a["title"], a["content_hash"]) for a in d["articles"]]
assert len(u["articles"]) == 3 and key(u) == key(f), (key(u), key(f))
PY

# A 404 is an error naming the status.
set +e
"$NF" parse "http://127.0.0.1:$PORT/missing.xml" 2>"$TMP/err"; rc=$?
set -e
[ $rc -eq 1 ] || fail "404: exit $rc, want 1"
grep -q "HTTP 404" "$TMP/err" || fail "404 message"
echo "test_parse_url: all passed"
