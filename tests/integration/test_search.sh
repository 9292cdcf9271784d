#!/usr/bin/env bash
# test_search.sh — full-text search (GET /v1/search: src/serve/search.h, search_query.h) on a
# running job: the embedded cluster, the bundled example feeds plus one feed of our own
# ($TMP/feeds/fresh.xml), 500 ms checkpoints, a 60 s crawl interval without jitter. The job is
# started five times on one state.dir; search_api.py checks one phase against each run:
#   1. relevance, phrases, exclusions, topic/since/limit filters, one result per story,
#      escaping and <mark>s; then ~2,000 hostile requests from 8 clients (status, latency,
#      memory);
#   2. a clean restart (SIGTERM, exit 0): the same answers at once, no rebuild, no re-index;
#   3. search.db overwritten with garbage, all pages but the first (quick_check fails), then the
#      whole file (not a database): each time rebuilds_total{reason="corrupt"} == 1 (and 0 for
#      the other reasons), the same answers once rebuilt;
#   4. search.db removed: rebuilds_total{reason="missing"} == 1, same answers; then freshness:
#      a new article with a unique word is written into our feed before the job's next crawl of
#      it, and /v1/search must find it at most one checkpoint interval + 300 ms after the
#      committed state (/v1/articles/{id}) shows it.
# Search answers over the example feeds' articles (published 2026-11-20/21) need a retention
# longer than the default 7 days until their dates fall out of serve_state.h's 30-day window:
# search.retention_s and cluster.ttl_s are 30 days here.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

port=$(free_port)
base="http://127.0.0.1:$port"
interval_ms=500
cd "$SRC"
mkdir -p "$TMP/feeds"
feeds=()
for f in world.xml science.atom city.json wire.rss; do feeds+=("$SRC/examples/feeds/$f"); done
printf '%s\n' "${feeds[@]}" fresh.xml >"$TMP/feeds/sources.txt"
py() { python3 "$SRC/tests/integration/search_api.py" "$@"; }
py filler "$TMP/feeds/fresh.xml"

run=0
start_job() {
  run=$((run + 1))
  "$NF" run --config config/newsflow.json --set sources.file="$TMP/feeds/sources.txt" \
      --set state.dir="$TMP/state" --set admin.port="$port" \
      --set checkpoint.interval_ms=$interval_ms --set crawl.interval_s=60 \
      --set crawl.interval_floor_s=60 --set crawl.jitter_permille=0 \
      --set crawl.host_spacing_ms=0 --set search.retention_s=2592000 \
      --set cluster.ttl_s=2592000 >"$TMP/out$run" 2>>"$TMP/err" &
  PID=$!
}
stop_clean() {
  kill -0 "$PID" 2>/dev/null || fail "the job died during phase $1"
  stop_job
  [ "$RC" = 0 ] || fail "the job exited $RC after phase $1"
}
db="$TMP/state/search.db"
t0=$SECONDS

start_job
py first "$base" "$PID" "$TMP/state.json" "$NF" "${feeds[@]}" "$TMP/feeds/fresh.xml" || fail "phase first"
stop_clean first
[ -s "$db" ] || fail "no $db after a clean stop"

start_job
py restart "$base" "$PID" "$TMP/state.json" || fail "phase restart"
stop_clean restart

for how in pages all; do
  py corrupt $how "$db"
  start_job
  py rebuilt corrupt "$base" "$PID" "$TMP/state.json" "$TMP/err" || fail "phase corrupt ($how)"
  stop_clean "corrupt ($how)"
done

rm -f "$db" "$db-wal" "$db-shm"
start_job
py rebuilt missing "$base" "$PID" "$TMP/state.json" "$TMP/err" || fail "phase missing"
py fresh "$base" "$PID" "$TMP/state.json" "$TMP/feeds/fresh.xml" $interval_ms "$TMP/out$run" ||
  fail "phase fresh"
stop_clean fresh
pass "test_search ($((SECONDS - t0)) s)"
