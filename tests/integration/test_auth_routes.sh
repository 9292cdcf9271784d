#!/usr/bin/env bash
# Invariant I-10 on the job itself (issue 38): with auth.hs256_secret_file set, a reader's own
# feed and interest answer their token (200), another reader's token is 403, no token 401 with
# WWW-Authenticate: Bearer, an expired one 401; trending and topics stay open; the edge takes a
# reader's own events with their token and refuses another's; a bad key file stops the start
# with exit 2 naming it. Tokens are made here (HS256 over the secret, python's hmac).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

port=$(free_port)
printf 'newsflow-test-secret-0123456789abcdef-0123456789\n' >"$TMP/secret"
token() { # token SUB EXP_OFFSET_S
  python3 - "$TMP/secret" "$1" "$2" <<'PY'
import base64, hashlib, hmac, json, sys, time
key = open(sys.argv[1], "rb").read().rstrip(b"\n")
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
h = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
p = b64(json.dumps({"sub": sys.argv[2], "exp": int(time.time()) + int(sys.argv[3])}).encode())
s = b64(hmac.new(key, (h + "." + p).encode(), hashlib.sha256).digest())
print(h + "." + p + "." + s)
PY
}
cd "$SRC"
rc=0
"$NF" run --config config/newsflow.json --set state.dir="$TMP/bad" --set admin.port="$port" \
  --set auth.hs256_secret_file="$TMP/missing" >"$TMP/bad.out" 2>"$TMP/bad.err" || rc=$?
[ $rc = 2 ] || fail "a missing secret file: exit $rc, want 2"
grep -q "$TMP/missing" "$TMP/bad.err" || fail "the refusal does not name the file: $(tail -2 "$TMP/bad.err")"

"$NF" run --config config/newsflow.json --set state.dir="$TMP/state" --set admin.port="$port" \
  --set auth.hs256_secret_file="$TMP/secret" --set auth.demo_tokens=true \
  --set checkpoint.interval_ms=500 \
  --set demo.read_events_per_s=0 --set interest.unknown_articles=empty >"$TMP/out" 2>"$TMP/err" &
PID=$!
url="http://127.0.0.1:$port"
code() { curl -s -o "$TMP/body" -D "$TMP/head" -w '%{http_code}' "$@"; }
for _ in $(seq 200); do
  [ "$(code "$url/v1/topics")" = 200 ] && break
  kill -0 "$PID" 2>/dev/null || fail "the job exited"
  sleep 0.2
done
alice=$(token alice 3600)
bob=$(token bob 3600)
old=$(token alice -7200)
# the reader's own events, through the job's edge with their token
now=$(date +%s000)
c=$(code -X POST -H "Authorization: Bearer $alice" -H "Content-Type: application/json" "$url/v1/events" \
  -d "{\"user_id\":\"alice\",\"article_id\":\"a1\",\"ts\":$now}")
[ "$c" = 202 ] || fail "alice's own event: $c $(cat "$TMP/body")"
c=$(code -X POST -H "Authorization: Bearer $alice" -H "Content-Type: application/json" "$url/v1/events" \
  -d "{\"user_id\":\"bob\",\"article_id\":\"a1\",\"ts\":$now}")
[ "$c" = 403 ] || fail "alice posting bob's event: $c, want 403"
c=$(code -X POST -H "Content-Type: application/json" "$url/v1/events" \
  -d "{\"user_id\":\"alice\",\"article_id\":\"a1\",\"ts\":$now}")
[ "$c" = 401 ] || fail "an event without a token: $c, want 401"
# a reader's routes
for path in /v1/feed/alice /v1/users/alice/interest; do
  c=$(code -H "Authorization: Bearer $alice" "$url$path")
  [ "$c" = 200 ] || [ "$c" = 404 ] || [ "$c" = 503 ] || fail "alice's own $path: $c"
  c=$(code -H "Authorization: Bearer $bob" "$url$path")
  [ "$c" = 403 ] || fail "bob reading $path: $c, want 403"
  c=$(code "$url$path")
  [ "$c" = 401 ] || fail "no token on $path: $c, want 401"
  grep -qi '^WWW-Authenticate: Bearer' "$TMP/head" || fail "401 without WWW-Authenticate: Bearer"
  c=$(code -H "Authorization: Bearer $old" "$url$path")
  [ "$c" = 401 ] && grep -q '"reason":"expired"' "$TMP/body" || fail "expired token on $path: $c $(cat "$TMP/body")"
done
for path in /v1/topics /v1/trending /; do
  c=$(code "$url$path")
  [ "$c" = 200 ] || [ "$c" = 503 ] || fail "public $path without a token: $c"
done
# interest.history's default, feedback: alice's save is in her history, her read is not
c=$(code -X POST -H "Authorization: Bearer $alice" -H "Content-Type: application/json" "$url/v1/events" \
  -d "{\"user_id\":\"alice\",\"article_id\":\"a1\",\"kind\":\"save\",\"ts\":$now}")
[ "$c" = 202 ] || fail "alice's save: $c $(cat "$TMP/body")"
kinds=""
for _ in $(seq 150); do
  code -H "Authorization: Bearer $alice" "$url/v1/users/alice/reads" >/dev/null
  kinds=$(python3 -c 'import json,sys; print(" ".join(i["kind"] for i in json.load(open(sys.argv[1])).get("items",[])))' "$TMP/body" 2>/dev/null || true)
  [ -n "$kinds" ] && break
  sleep 0.2
done
[ "$kinds" = save ] || fail "alice's history under interest.history=feedback: '$kinds', want 'save' alone"
# the page of a demo signs its reader in with a demo token (auth.demo_tokens), on this machine only
c=$(code "$url/v1/auth/demo-token?user=carol")
[ "$c" = 200 ] || fail "demo token: $c $(cat "$TMP/body")"
carol=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$TMP/body")
c=$(code -H "Authorization: Bearer $carol" "$url/v1/feed/carol")
[ "$c" = 200 ] || [ "$c" = 503 ] || fail "carol's feed with her demo token: $c"
c=$(code -H "Authorization: Bearer $carol" "$url/v1/feed/alice")
[ "$c" = 403 ] || fail "carol's demo token on alice's feed: $c, want 403"
c=$(code -H "Origin: http://evil.example" "$url/v1/auth/demo-token?user=alice")
[ "$c" = 403 ] || fail "a demo token for a page of another origin: $c, want 403"
body_has "$url/metrics" 'newsflow_auth_refused_total{reason="wrong_subject"} [1-9]' ||
  fail "no wrong_subject refusals counted"
stop_job
[ "$RC" = 0 ] || fail "the job exited $RC"
pass "I-10 on the job: own 200, another's 403, none or expired 401, public open"
