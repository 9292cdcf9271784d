#!/usr/bin/env bash
# test_page_click.sh — a reader's click on the page records a read (issue 38): the job runs on
# the embedded Kafka with generated feeds and demo read events (so trending fills, for the demo's
# readers only); once a trending window is committed, a headless Chromium is driven over the
# DevTools protocol (page_click.py, on cdp.py's stdlib WebSocket client) to open
# /?user=click-reader-1, a reader with no interest vector, and click the first trending article
# with a real mouse event. The page must post the read to the HTTP edge
# (POST /v1/articles/{id}/read), say so, and the job must count it: the reader's interest vector
# holds the article's topics, their feed turns from trending to interest, and so does the page's.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

command -v chromium >/dev/null || fail "chromium is missing (scripts/deps.sh installs it)"
command -v setsid >/dev/null || fail "setsid is missing (util-linux)"
CPID=""
# Chromium in a process group of its own (setsid; $! is its browser process, the group's
# leader), so that its renderers go with it, also when the test fails. Under set -e, so every
# step that may fail is an if or || true: the job and the directory must go whatever happens.
cleanup() {
  if [ -n "$CPID" ]; then
    kill -KILL -- -"$CPID" 2>/dev/null || true
    wait "$CPID" 2>/dev/null || true
  fi
  if [ -n "$PID" ]; then kill -9 "$PID" 2>/dev/null || true; fi
  rm -rf "$TMP"
}
port=$(free_port)
reader=click-reader-1
python3 "$SRC/tests/integration/feed_model.py" gen "$TMP/feeds" 200 "$SRC/config/taxonomy.json"
cd "$SRC"
"$NF" run --config config/newsflow.json --set sources.file="$TMP/feeds/sources.txt" \
    --set state.dir="$TMP/state" --set admin.port="$port" --set checkpoint.interval_ms=500 \
    --set demo.read_events_per_s=300 --set trending.window_s=10 --set trending.slide_s=2 \
    --set trending.lateness_ms=200 \
    --set ranking.variants="seed share=50,fresh share=50 decay=1 trending=0.3" \
    >"$TMP/out" 2>"$TMP/err" &
PID=$!
for _ in $(seq 120); do
  grep -q '"topic":"trending","key":"[^"]*","value":{[^}]*"items":\[{' "$TMP/out" 2>/dev/null && break
  kill -0 "$PID" 2>/dev/null || fail "the job exited"
  sleep 0.5
done
grep -q '"topic":"trending"' "$TMP/out" || fail "no trending window committed"
# Port 0: Chromium takes a free port itself and writes it to DevToolsActivePort in its profile
# (no race with another test for a port picked beforehand). The host resolver maps every name
# but 127.0.0.1 to "not found": the article's tab the click opens goes nowhere off the machine.
setsid chromium --headless --no-sandbox --disable-gpu --remote-debugging-port=0 \
  --user-data-dir="$TMP/chromium" --window-size=1280,900 \
  --host-resolver-rules="MAP * ~NOTFOUND, EXCLUDE 127.0.0.1" about:blank 2>"$TMP/chromium.err" &
CPID=$!
for _ in $(seq 600); do
  [ -s "$TMP/chromium/DevToolsActivePort" ] && break
  kill -0 "$CPID" 2>/dev/null || fail "chromium exited: $(tail -3 "$TMP/chromium.err")"
  sleep 0.1
done
dport=$(head -1 "$TMP/chromium/DevToolsActivePort" 2>/dev/null) ||
  fail "chromium wrote no DevToolsActivePort: $(tail -3 "$TMP/chromium.err")"
PYTHONPATH="$SRC/tests/integration" python3 "$SRC/tests/integration/page_click.py" \
  "$port" "$dport" "$reader" || fail "page_click.py"
# The reads reached the job's committed output too, once each: the reader read twice (the
# trending article, then a feed article: page_click.py steps 3 and 8; settings make no update),
# so one interest-updates record of version 1 and one of version 2 (printed when their epochs
# commit, so waited for like the rest).
versions() { grep '"topic":"interest-updates","key":"'"$reader"'"' "$TMP/out" |
  grep -o '"version":[0-9]*' | sort | tr '\n' ' ' || true; }
for _ in $(seq 300); do
  [ "$(versions)" = '"version":1 "version":2 ' ] && break
  sleep 0.1
done
[ "$(versions)" = '"version":1 "version":2 ' ] ||
  fail "interest-updates of $reader on the job's output: $(versions)(want versions 1 and 2, once each)"
kill -KILL -- -"$CPID" # nothing of its throwaway profile to save
wait "$CPID" || true
CPID=""
stop_job
[ "$RC" = 0 ] || fail "the job exited $RC"
pass "test_page_click"
