#!/usr/bin/env bash
# admin.operator_port (issue 38): the operators' routes (/metrics, /healthz, /readyz, /v1/status,
# /v1/sources, /v1/ops/history) on a listener of their own, and admin.port facing readers only;
# `newsflow status` finds the job there through state.dir/admin.json, or with the job's own
# configuration.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

pub=$(free_port)
ops=$(free_port)
while [ "$ops" = "$pub" ]; do ops=$(free_port); done
cd "$SRC"
"$NF" run --config config/newsflow.json --set state.dir="$TMP/state" --set admin.port="$pub" \
  --set admin.operator_port="$ops" --set checkpoint.interval_ms=500 >"$TMP/out" 2>"$TMP/err" &
PID=$!
code() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1$2"; }
for _ in $(seq 200); do
  [ "$(code "$ops" /readyz)" = 200 ] && break
  kill -0 "$PID" 2>/dev/null || fail "the job exited: $(tail -3 "$TMP/err")"
  sleep 0.2
done
[ "$(code "$ops" /readyz)" = 200 ] || fail "the operator listener's /readyz never answered 200"
grep -q '"msg":"operator listener' "$TMP/err" || fail "no operator listener line in the log"
for path in /metrics /healthz /readyz /v1/status /v1/sources /v1/ops/history; do
  [ "$(code "$ops" "$path")" = 200 ] || fail "operator port: $path is not 200"
  [ "$(code "$pub" "$path")" = 404 ] || fail "readers' port: $path is not 404"
done
for path in / /v1/topics /v1/trending; do
  c=$(code "$pub" "$path")
  [ "$c" = 200 ] || [ "$c" = 503 ] || fail "readers' port: $path is $c"
  [ "$(code "$ops" "$path")" = 404 ] || fail "operator port: $path is not 404"
done
body_has "http://127.0.0.1:$ops/metrics" 'listener="operator"' ||
  fail "the operator listener's series carry no listener=\"operator\""
"$NF" status --set state.dir="$TMP/state" >"$TMP/status" 2>&1 || fail "newsflow status: $(cat "$TMP/status")"
grep -qi 'epoch' "$TMP/status" || fail "newsflow status printed no epoch: $(head -5 "$TMP/status")"
# With the job's own configuration (admin.port answering readers only), status asks
# admin.operator_port, not the readers' port.
"$NF" status --set state.dir="$TMP/state" --set admin.port="$pub" --set admin.operator_port="$ops" \
  >"$TMP/status" 2>&1 || fail "newsflow status with the job's ports: $(cat "$TMP/status")"
grep -q "from its admin server at 127.0.0.1:$ops" "$TMP/status" ||
  fail "newsflow status with the job's ports did not ask the operator listener: $(head -3 "$TMP/status")"
stop_job
[ "$RC" = 0 ] || fail "the job exited $RC"
pass "operator routes on admin.operator_port, readers' routes on admin.port"
