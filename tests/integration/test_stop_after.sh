#!/usr/bin/env bash
# runtime.stop_after_ms at the edge of its range (issue 15, item 5): the documented maximum
# runs (it does not stop at once after an overflow), and values beyond it — 2^63 and
# 18446744073709551 (whose nanoseconds wrap a uint64) — are refused with the range named, exit 2,
# instead of being accepted and stopping the job at once with exit 0.
# $1 = newsflow binary, $2 = source dir.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

# A job with nothing to read and nowhere to write: only the stop rule decides when it ends.
common=(--set kafka.brokers= --set admin.enabled=false --set sink.spec=none
        --set sources.urls= --set state.dir="$TMP/state")

# 1. Beyond the maximum: refused, naming the key and its range, before anything starts.
MAX=9223372036854 # INT64_MAX / 10^6: the largest whose nanoseconds fit in int64
for v in 9223372036854775808 18446744073709551 $((MAX + 1)); do
  set +e
  timeout 20 "$NF" run "${common[@]}" --set runtime.stop_after_ms=$v >"$TMP/out" 2>"$TMP/err"
  rc=$?
  set -e
  [ $rc -eq 2 ] || fail "runtime.stop_after_ms=$v: exit $rc, want 2 (a config error)"
  grep -q "runtime.stop_after_ms: $v is out of range \[0, $MAX\]" "$TMP/err" ||
    fail "runtime.stop_after_ms=$v: the message does not name the range"
done
pass "runtime.stop_after_ms beyond $MAX is refused with its range"

# 2. The maximum itself: the job runs until SIGTERM, then drains to exit 0. "Still running" is
# checked after the start line and 2 s more (a wrapped deadline stopped it within 50 ms).
"$NF" run "${common[@]}" --set runtime.stop_after_ms=$MAX >"$TMP/out" 2>"$TMP/err" &
PID=$!
for _ in $(seq 300); do
  grep -q '"msg":"newsflow started"' "$TMP/err" 2>/dev/null && break
  kill -0 "$PID" 2>/dev/null || break
  sleep 0.1
done
grep -q '"msg":"newsflow started"' "$TMP/err" || fail "runtime.stop_after_ms=$MAX: no start line"
sleep 2
kill -0 "$PID" 2>/dev/null || fail "runtime.stop_after_ms=$MAX: the job stopped by itself"
! grep -q 'stop_after_ms reached' "$TMP/err" || fail "runtime.stop_after_ms=$MAX: reached at once"
stop_job
[ $RC -eq 0 ] || fail "runtime.stop_after_ms=$MAX: exit $RC after SIGTERM, want 0"
pass "runtime.stop_after_ms=$MAX runs until SIGTERM, exit 0"
