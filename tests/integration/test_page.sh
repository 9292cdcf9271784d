#!/usr/bin/env bash
# test_page.sh — the query API's page (GET /) in headless Chromium (Debian's chromium): the job
# ingests generated feeds and demo read events; once a trending window is committed, Chromium
# loads the page (opened on a search and a story's view), runs its scripts (a virtual-time budget lets their fetches finish) and dumps
# the DOM; page_check.py checks what it shows against the committed records. With
# NF_PAGE_SCREENSHOT=FILE it also writes a screenshot there (docs/page.png was made so).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

command -v chromium >/dev/null || fail "chromium is missing (scripts/deps.sh installs it)"
port=$(free_port)
python3 "$SRC/tests/integration/feed_model.py" gen "$TMP/feeds" 200 "$SRC/config/taxonomy.json"
cd "$SRC"
"$NF" run --config config/newsflow.json --set sources.file="$TMP/feeds/sources.txt" \
    --set state.dir="$TMP/state" --set admin.port="$port" --set checkpoint.interval_ms=500 \
    --set demo.read_events_per_s=300 --set trending.window_s=10 --set trending.slide_s=2 \
    --set trending.lateness_ms=200 --set admin.history_interval_ms=500 >"$TMP/out" 2>"$TMP/err" &
PID=$!
for _ in $(seq 120); do
  grep -q '"topic":"trending","key":"[^"]*","value":{[^}]*"items":\[{' "$TMP/out" 2>/dev/null && break
  kill -0 "$PID" 2>/dev/null || fail "the job exited"
  sleep 0.5
done
grep -q '"topic":"trending"' "$TMP/out" || fail "no trending window committed"
# Whole body to a file first: `curl | grep -q` fails under pipefail when grep stops reading early.
curl -fsS -o "$TMP/page.html" "http://127.0.0.1:$port/" || fail "GET / failed"
grep -q "<title>newsflow</title>" "$TMP/page.html" || fail "GET / is not the page"
# The page opened as a link to a search (/?q=WORD) for the longest word of a committed title,
# once the search index has it.
word=$(python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import jobout
t = jobout.records(sys.argv[2])["articles"][0]["title"]
print(max((w.strip(".,:;!?\"()") for w in t.split()), key=len))' "$SRC/tests/integration" "$TMP/out") ||
  fail "no committed article to search for"
for _ in $(seq 50); do
  curl -fsS "http://127.0.0.1:$port/v1/search?q=$word" 2>/dev/null | grep -q '"results":\[{' && break
  sleep 0.2
done
# A story of several articles, opened as a link to its view (/?story=ID).
story=$(python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import jobout
j = [c["cluster_id"] for c in jobout.records(sys.argv[2]).get("story-clusters", [])
     if c["action"] == "joined"]
print(j[0] if j else "")' "$SRC/tests/integration" "$TMP/out")
[ -n "$story" ] || fail "no story of several articles committed"
browse() { # chromium's own profile in TMP: nothing of the machine's user is read or written
  chromium --headless --no-sandbox --disable-gpu --user-data-dir="$TMP/chromium" \
    --virtual-time-budget=10000 --window-size=1280,900 "$@" "http://127.0.0.1:$port/?q=$word&story=$story" 2>>"$TMP/chromium.err"
}
browse --dump-dom >"$TMP/dom.html" || fail "chromium failed: $(tail -3 "$TMP/chromium.err")"
python3 "$SRC/tests/integration/page_check.py" "$TMP/dom.html" "$TMP/out" "$word" "$story" ||
  fail "page_check.py"
[ -n "${NF_PAGE_SCREENSHOT:-}" ] && browse --screenshot="$NF_PAGE_SCREENSHOT" >/dev/null
stop_job
[ "$RC" = 0 ] || fail "the job exited $RC"
pass "test_page"
