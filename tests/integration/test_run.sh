#!/usr/bin/env bash
# `newsflow run` as an operator meets it: the README's run command for a few seconds, SIGTERM
# draining to exit 0, the admin endpoints (with promtool on /metrics), JSON-lines logs, and the
# documented exit codes. $1 = newsflow binary, $2 = source dir.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Every stderr line is a JSON object with the documented fields.
check_json_logs() {
  python3 - "$1" <<'PY' || fail "log lines are not JSON with ts/level/shard/component/msg"
import json, sys
n = 0
for line in open(sys.argv[1]):
    if not line.strip():
        continue
    o = json.loads(line)
    for k in ("ts", "level", "shard", "component", "msg"):
        assert k in o, (k, line)
    assert o["level"] in ("debug", "info", "warn", "error"), line
    n += 1
assert n >= 2, "expected log lines"
PY
}

# --help and version answer and exit 0.
# (output captured first: grep -q closing the pipe early would fail under pipefail)
"$NF" --help >"$TMP/help" || fail "--help exit code"
grep -q "run \[--config FILE\]" "$TMP/help" || fail "--help does not describe run"
"$NF" run --help >"$TMP/help" || fail "run --help exit code"
grep -q "stop_after_ms" "$TMP/help" || fail "run --help does not describe stopping"
"$NF" version >"$TMP/help" || fail "version exit code"
grep -q "^newsflow " "$TMP/help" || fail "version output"
pass "help and version"

# Usage errors exit 2.
set +e
"$NF" frobnicate 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] || fail "unknown command: exit $rc, want 2"
"$NF" run --bogus 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] || fail "unknown option: exit $rc, want 2"
"$NF" run --set runtime.shards=many 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] || fail "bad --set: exit $rc, want 2"
grep -q 'runtime.shards' "$TMP/err" || fail "bad --set message does not name the key"
NEWSFLOW_RUNTIME_SHARDS=x "$NF" run 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] || fail "bad env override: exit $rc, want 2"
grep -q 'NEWSFLOW_RUNTIME_SHARDS' "$TMP/err" || fail "env error does not name the variable"
set -e
pass "usage and config errors exit 2 naming the key"

# The README's run command, stopped after 3 s through --set: exit 0.
BUILD_DIR=$(cd "$(dirname "$NF")" && pwd)
set +e
NF_BUILD_DIR="$BUILD_DIR" timeout 300 bash "$SRC/scripts/run.sh" \
  --set runtime.stop_after_ms=3000 --set admin.port=0 --set log.progress_interval_ms=1000 \
  --set state.dir="$TMP/state1" \
  >"$TMP/out" 2>"$TMP/err"
rc=$?
set -e
[ $rc -eq 0 ] || fail "README run command exited $rc"
grep -q '"msg":"newsflow started"' "$TMP/err" || fail "no start line"
# The bundled feeds were crawled: articles on stdout, one per URL, and a fetch-log per feed.
python3 - "$TMP/out" <<'PY' || fail "README run command: articles/fetch-log output"
import json, sys, time, datetime
ids, fetches, published = [], 0, []
for n, line in enumerate(open(sys.argv[1]), 1):
    # stdout is the job's JSON lines only (install and build progress go to stderr): it pipes
    # into jq from the first line
    assert line.startswith("{"), "stdout line %d is not JSON: %r" % (n, line[:120])
    o = json.loads(line)
    if o["topic"] == "articles":
        ids.append(o["value"]["article_id"])
        if o["value"]["published_at"]:
            published.append(datetime.datetime.fromisoformat(
                o["value"]["published_at"].replace("Z", "+00:00")).timestamp())
    elif o["topic"] == "fetch-log":
        fetches += 1
        assert o["value"]["error"] is None, o
assert fetches == 4, fetches
assert len(ids) == 9 and len(set(ids)) == 9, ids  # 10 items, one story syndicated twice
# the demo's copy of the feeds is dated as of now (scripts/demo_feeds.py): its newest date (a
# feed's own <updated>, an hour after its newest entry) within the last hour, so the newest
# article within the last 3 h; none in the future, all inside the readers' 48 h feed window
now = time.time()
assert len(published) >= 8, published
assert now - 3 * 3600 <= max(published) <= now + 60, (max(published), now)
assert min(published) >= now - 48 * 3600, (min(published), now)
PY
grep -q '"msg":"progress"' "$TMP/err" || fail "no progress line"
# The same command again on the same state: the articles are known, nothing is emitted twice.
set +e
NF_BUILD_DIR="$BUILD_DIR" timeout 300 bash "$SRC/scripts/run.sh" \
  --set runtime.stop_after_ms=2000 --set admin.port=0 --set state.dir="$TMP/state1" \
  >"$TMP/out2" 2>"$TMP/err2"
rc=$?
set -e
[ $rc -eq 0 ] || fail "second run on the same state exited $rc"
n=$(grep -c '"topic":"articles"' "$TMP/out2" || true)
[ "$n" = 0 ] || fail "second run on the same state emitted $n articles again"
grep -q '"schedules_restored":[1-9]' "$TMP/err2" || fail "crawl schedules not restored"
grep '"msg":"newsflow stopped"' "$TMP/err" >"$TMP/stopline" || fail "no stop line"
grep -q '"exit_code":0' "$TMP/stopline" || fail "stop line without exit_code 0"
grep '^{' "$TMP/err" > "$TMP/json"
check_json_logs "$TMP/json"
pass "README run command runs and stops with exit 0; logs are JSON lines"

# A running job: ready, healthy, Prometheus metrics; SIGTERM drains and exits 0.
PORT=$(free_port)
"$NF" run --set admin.port="$PORT" --set runtime.shards=2 --set state.dir="$TMP/state2" \
  2>"$TMP/err" &
PID=$!
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
body_has "http://127.0.0.1:$PORT/readyz" ready || fail "/readyz not 200"
body_has "http://127.0.0.1:$PORT/healthz" ok || fail "/healthz not 200"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/nope")" = 404 ] || fail "404"
curl -sf -D "$TMP/headers" "http://127.0.0.1:$PORT/metrics" >"$TMP/metrics" || fail "/metrics"
grep -qi '^content-type: text/plain; version=0.0.4' "$TMP/headers" || fail "metrics content type"
grep -q '^newsflow_runtime_messages_received_total ' "$TMP/metrics" || fail "runtime metrics"
grep -q '^newsflow_process_resident_memory_bytes ' "$TMP/metrics" || fail "process metrics"
if command -v promtool >/dev/null; then
  promtool check metrics <"$TMP/metrics" || fail "promtool rejects /metrics"
  pass "promtool accepts /metrics"
fi
# The admin port is taken: a second job fails with exit 1 and says why.
set +e
"$NF" run --set admin.port="$PORT" --set state.dir="$TMP/state3" 2>"$TMP/err2"; rc=$?
set -e
[ $rc -eq 1 ] || fail "second job on a busy port: exit $rc, want 1"
grep -q "cannot listen on 127.0.0.1:$PORT" "$TMP/err2" || fail "busy port message"
pass "busy admin port: exit 1 with the address"

kill -TERM "$PID"
set +e
timeout 15 tail --pid="$PID" -f /dev/null; wait "$PID"; rc=$?
set -e
PID=""
[ $rc -eq 0 ] || fail "SIGTERM: exit $rc, want 0"
grep -q '"msg":"signal received; committing a final epoch and draining' "$TMP/err" ||
  fail "no drain line"
grep -q '"dropped_at_shutdown":0' "$TMP/err" || fail "messages dropped at shutdown"
pass "ready/healthy/metrics, SIGTERM drains and exits 0"

# A failure the job cannot go on from (here: state it cannot load, trending state saved with
# another trending.cms_width) exits 1, says why, and commits nothing after it: no epoch, so the
# state is as the last run left it and runs again, with one shard as well as with two (trending
# state is kept per input partition, not per shard).
epoch_of() { sed -n 's/.*"msg":"'"$1"'".*"epoch":\([0-9]*\).*/\1/p' "$2" | head -1; }
DEMO=(--config "$SRC/config/newsflow.json" --set sources.file="$SRC/examples/feeds/sources.txt")
# The first run stops once it has counted read events into trending (a fixed run time left a
# slow CI machine still waiting for its partitions, with no trending state to mismatch).
PORT=$(free_port)
"$NF" run "${DEMO[@]}" --set admin.port="$PORT" --set runtime.shards=2 \
  --set state.dir="$TMP/state4" >"$TMP/out4" 2>"$TMP/err4" &
PID=$!
counted=0
for _ in $(seq 600); do
  counted=$(curl -sf "http://127.0.0.1:$PORT/metrics" 2>/dev/null |
    sed -n 's/^newsflow_trending_counted_events_total \([0-9]*\).*/\1/p' || true)
  [ "${counted:-0}" -gt 0 ] && break
  sleep 0.1
done
[ "${counted:-0}" -gt 0 ] || fail "two-shard run counted no read events in 60 s"
stop_job
[ $RC -eq 0 ] || fail "two-shard run: exit $RC"
e2=$(epoch_of "newsflow stopped" "$TMP/err4")
set +e
"$NF" run "${DEMO[@]}" --set admin.port=0 --set runtime.shards=1 --set runtime.stop_after_ms=4000 \
  --set trending.cms_width=1024 --set state.dir="$TMP/state4" >"$TMP/out5" 2>"$TMP/err5"; rc=$?
set -e
[ $rc -eq 1 ] || fail "restart with other trending options over trending state: exit $rc, want 1"
# The merger (shard 0) and the partitions' counters load their state concurrently: whichever
# is first to find it saved with other options names the cause.
grep -qE '"msg":"the stored trending (merger does not load \(corrupt|counter does not load \(unreadable, corrupt), or saved with other trending options\); stopping' "$TMP/err5" ||
  { grep '"level":"error"' "$TMP/err5" | head -5 >&2; fail "no cause named"; }
grep -q '"msg":"the job failed (see the first error above)' "$TMP/err5" || fail "no failure line"
grep -q '"msg":"epoch.committed"' "$TMP/err5" && fail "an epoch committed after the failure"
[ "$(epoch_of "newsflow stopped" "$TMP/err5")" = "$e2" ] || fail "committed epoch moved"
set +e
"$NF" run "${DEMO[@]}" --set admin.port=0 --set runtime.shards=2 --set runtime.stop_after_ms=2000 \
  --set state.dir="$TMP/state4" >/dev/null 2>"$TMP/err6"; rc=$?
set -e
[ $rc -eq 0 ] || fail "two shards again after the failed restart: exit $rc"
[ "$(epoch_of "newsflow started" "$TMP/err6")" = "$e2" ] || fail "state moved by the failed run"
set +e
"$NF" run "${DEMO[@]}" --set admin.port=0 --set runtime.shards=1 --set runtime.stop_after_ms=2000 \
  --set state.dir="$TMP/state4" >/dev/null 2>"$TMP/err7"; rc=$?
set -e
[ $rc -eq 0 ] || fail "one shard over two shards' state: exit $rc"
pass "a failure exits 1 and commits nothing after it"
echo "test_run: all passed"
