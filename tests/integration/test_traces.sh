#!/usr/bin/env bash
# Traces against a real OpenTelemetry Collector (issue 44): the collector built from the Go
# module proxy (scripts/otelcol.sh; its OTLP receiver refuses malformed OTLP) takes the job's
# spans over OTLP/HTTP and writes what it accepted to a file; traces.py checks them.
#
# 1. trace.sample_ratio=1: a feed request is feed.request (server) > query.answer; an article
#    is crawl.fetch > feed.parse, classify, dedup > article.commit, and cluster, one trace per
#    fetch; article.commit links to its epoch's trace, epoch > epoch.cut, .write, .pending,
#    .kafka_transaction, .apply; the log events article.ingested, feed.cache_miss and
#    cluster.assigned carry the trace ids of the same work.
# 2. trace.sample_ratio=0: nothing is sampled, yet a failing fetch and a slow feed (the drill
#    slow-route:feed=600, over trace.slow_ms) are exported whole, and an ordinary fetch is not.
# $1 = newsflow binary, $2 = source dir.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
OC=$(bash "$SRC/scripts/otelcol.sh" path) || fail "the test collector is not built (scripts/deps.sh builds it)"
COL=""
cleanup() {
  stop_pids "$PID" "$COL"
  rm -rf "$TMP"
}

start_collector() { # $1: output file
  CPORT=$(free_port)
  sed -e "s|@PORT@|$CPORT|; s|@OUT@|$1|" "$SRC/tests/otelcol/config.yaml.in" >"$TMP/otelcol.yaml"
  "$OC" --config="$TMP/otelcol.yaml" >"$TMP/otelcol.log" 2>&1 &
  COL=$!
  for _ in $(seq 300); do
    curl -s -o /dev/null "http://127.0.0.1:$CPORT/v1/traces" && return 0
    kill -0 "$COL" 2>/dev/null || { cat "$TMP/otelcol.log" >&2; fail "the collector exited"; }
    sleep 0.05
  done
  fail "the collector never listened"
}
stop_collector() {
  kill -TERM "$COL"
  wait "$COL" 2>/dev/null || true
  COL=""
}
wait_names() { # FILE NAME...: until the collector wrote spans of every NAME to FILE (60 s)
  local file=$1 n name missing
  shift
  for _ in $(seq 600); do
    n=" $(python3 "$SRC/tests/integration/traces.py" names "$file" 2>/dev/null || true) "
    missing=""
    for name in "$@"; do
      case "$n" in *" $name "*) ;; *) missing="$missing $name" ;; esac
    done
    [ -z "$missing" ] && return 0
    kill -0 "$PID" 2>/dev/null || fail "the job exited"
    sleep 0.1
  done
  fail "no$missing span reached the collector"
}
start_job() { # $1: sample ratio, then extra arguments
  local ratio=$1
  shift
  PORT=$(free_port)
  "$NF" run --config "$SRC/config/newsflow.json" --set admin.port="$PORT" \
    --set state.dir="$TMP/state-$ratio" --set checkpoint.interval_ms=300 --set sink.spec=none \
    --set trace.endpoint="http://127.0.0.1:$CPORT/v1/traces" --set trace.sample_ratio="$ratio" \
    --set trace.flush_ms=100 --set log.sample_every=1 "$@" >/dev/null 2>"$TMP/err" &
  PID=$!
  for _ in $(seq 600); do
    kill -0 "$PID" 2>/dev/null || fail "the job exited"
    curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 &&
      curl -sf "http://127.0.0.1:$PORT/v1/trending" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  fail "the job never became ready"
}

# 1. Every trace sampled.
start_collector "$TMP/sampled.jsonl"
start_job 1 --set sources.file="$SRC/examples/feeds/sources.txt"
for i in 1 2 3; do curl -sf -o /dev/null "http://127.0.0.1:$PORT/v1/feed/reader-$i" || fail "feed"; done
# Until the collector has written the whole of an article's way and a feed (a condition).
wait_names "$TMP/sampled.jsonl" article.commit feed.request
stop_job
[ "$RC" = 0 ] || fail "job exit $RC"
cp "$TMP/err" "$TMP/sampled.log"
stop_collector
python3 "$SRC/tests/integration/traces.py" sampled "$TMP/sampled.jsonl" "$TMP/sampled.log" ||
  fail "the sampled traces"
pass "sampled: feed, article and epoch traces with the right parents, links and log trace ids"

# 2. Nothing sampled: errors and slow requests still are.
printf 'file://%s/missing.xml\n' "$TMP" >"$TMP/sources.txt"
grep -v '^#' "$SRC/examples/feeds/sources.txt" | sed "s|^|$SRC/examples/feeds/|" >>"$TMP/sources.txt"
start_collector "$TMP/forced.jsonl"
export NEWSFLOW_FAILPOINTS=slow-route:feed=600
start_job 0 --set sources.file="$TMP/sources.txt"
unset NEWSFLOW_FAILPOINTS
curl -sf -o /dev/null "http://127.0.0.1:$PORT/v1/feed/reader-1" || fail "feed"
wait_names "$TMP/forced.jsonl" crawl.fetch feed.request
stop_job
[ "$RC" = 0 ] || fail "job exit $RC"
stop_collector
python3 "$SRC/tests/integration/traces.py" forced "$TMP/forced.jsonl" || fail "the forced traces"
pass "unsampled: a failing fetch and a slow feed are exported whole, nothing else of the crawl"
