#!/usr/bin/env bash
# test_query_api.sh — the query API (src/serve/query.h) on a running job: the embedded cluster,
# the bundled example feeds and the demo's read events, short checkpoints and trending windows.
# query_api.py checks the server against docs/openapi.json (every operation, every parameter
# constraint broken, undocumented paths), the answers against the job's committed records on
# stdout (interest vectors bit for bit, the trending window), and hostile requests.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

port=$(free_port)
cd "$SRC"
"$NF" run --config config/newsflow.json --set sources.file=examples/feeds/sources.txt \
    --set state.dir="$TMP/state" --set admin.port="$port" --set checkpoint.interval_ms=500 \
    --set demo.read_events_per_s=300 --set trending.window_s=10 --set trending.slide_s=2 \
    --set trending.lateness_ms=200 >"$TMP/out" 2>"$TMP/err" &
PID=$!
for _ in $(seq 100); do
  curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  kill -0 "$PID" 2>/dev/null || fail "the job exited before it was ready"
  sleep 0.2
done
python3 "$SRC/tests/integration/query_api.py" "http://127.0.0.1:$port" "$SRC/docs/openapi.json" \
    "$TMP/out" || fail "query_api.py"
kill -0 "$PID" 2>/dev/null || fail "the job died under the queries"
stop_job
[ "$RC" = 0 ] || fail "the job exited $RC after the queries"
pass "test_query_api"
