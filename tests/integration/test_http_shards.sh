#!/usr/bin/env bash
# admin.port on the shards' loops (issue 41, src/runtime/httpd.h): the hand-over from the admin
# server once the shards run, a hostile client's requests (http_hostile.py), and a query flood
# that does not stop epochs from committing: wrk floods readers' feeds while the test waits for
# epochs to commit (each answer names its epoch) and counts the rounds each cut's drain took;
# then the share of the shards' time the HTTP side took is read from /metrics.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

port=$(free_port)
cd "$SRC"
ulimit -n "$(ulimit -Hn)"
"$NF" run --config config/newsflow.json --set state.dir="$TMP/state" --set admin.port="$port" \
  --set admin.request_timeout_ms=1500 --set admin.max_connections=2000 \
  --set checkpoint.interval_ms=300 >"$TMP/out" 2>"$TMP/err" &
PID=$!
url="http://127.0.0.1:$port"
for _ in $(seq 300); do
  grep -q "served on the shards' loops" "$TMP/err" && break
  kill -0 "$PID" 2>/dev/null || fail "the job exited: $(tail -3 "$TMP/err")"
  sleep 0.2
done
grep -q "served on the shards' loops" "$TMP/err" || fail "admin.port never moved to the shards"
epoch() { curl -s "$url/v1/trending?limit=1" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("epoch") or 0)' 2>/dev/null || echo 0; }
for _ in $(seq 300); do [ "$(epoch)" -ge 1 ] && break; sleep 0.2; done
[ "$(epoch)" -ge 1 ] || fail "no epoch committed before the flood"

python3 "$(dirname "${BASH_SOURCE[0]}")/http_hostile.py" "$port" 1500 ||
  fail "hostile requests (above)"
kill -0 "$PID" 2>/dev/null || fail "the job died under hostile requests: $(tail -3 "$TMP/err")"

# The flood: 64 connections on readers' feeds (each computed fresh on a shard's loop) for as long
# as it takes 5 epochs to commit (at most 120 s: a hang, not a pace). Then the drain's rounds per
# epoch: without quiet HTTP work (runtime.h, nf_watch_quiet) every round found a shard busy
# answering, and a cut went round thousands of times (seconds) until the flood paused.
metric() { curl -s "$url/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
e0=$(epoch)
r0=$(metric newsflow_epoch_drain_rounds_total) c0=$(metric newsflow_epochs_committed_total)
NF_PATH="/v1/feed/{u}?limit=20" NF_USERS=200 NF_NAME=feed \
  wrk -t 2 -c 64 -d 120s -s perf/query/wrk_report.lua "$url" >"$TMP/wrk" 2>&1 &
WRK=$!
ok=0
for _ in $(seq 1200); do
  [ "$(epoch)" -ge $((e0 + 5)) ] && { ok=1; break; }
  kill -0 "$WRK" 2>/dev/null || break
  sleep 0.1
done
r1=$(metric newsflow_epoch_drain_rounds_total) c1=$(metric newsflow_epochs_committed_total)
kill -INT "$WRK" 2>/dev/null; wait "$WRK" 2>/dev/null
[ "$ok" = 1 ] || fail "epochs stopped committing under a query flood: $e0 -> $(epoch); $(tail -3 "$TMP/wrk")"
reqs=$(python3 -c 'import json,sys; print(json.loads([l for l in open(sys.argv[1]) if l.startswith("{")][-1])["requests"])' "$TMP/wrk" 2>/dev/null || echo 0)
[ "${reqs:-0}" -gt 1000 ] || fail "the flood got few answers: $(cat "$TMP/wrk")"
rounds=$(python3 -c "print(round(($r1 - $r0) / max(1, $c1 - $c0), 1))")
python3 -c "import sys; sys.exit(0 if $rounds < 20 else 1)" ||
  fail "the epochs' drain went round $rounds times per cut during the flood: HTTP work keeps the shards busy"
m=$(curl -s "$url/metrics")
share=$(echo "$m" | awk '/^newsflow_http_loop_seconds_total/ {h=$2} /^newsflow_runtime_busy_seconds_total/ {b=$2} END {if (b > 0) printf "%.2f", h / b; else print "?"}')
pass "5 epochs committed from epoch $e0 during a flood of $reqs feed queries, $rounds drain rounds per cut (the HTTP side's share of busy shard time: $share)"
stop_job
[ "$RC" = 0 ] || fail "the job exited $RC after the flood"
pass "hostile requests and a query flood on the shards' server"
