#!/usr/bin/env bash
# What looking for breaking news costs the read path (issue 45; engine/breaking.h; the issue's
# bound: 5 %), side by side in rounds, each round once with breaking.enabled off and once on, in
# turn so that a drift of the machine falls on both: perf/analytics/bench_readpath (decode,
# event-id dedup, trending by story, interest on 2 shards, steady state, RocksDB state with
# epochs every second, every article in a story of 3 and its topic vector in the store, as a
# crawled article's is). On, the merger reads each ranked entry's lead's topic vector from the
# last committed view (a RocksDB read per entry per window) and judges the window; off, it does
# not. events/s, CPU per event, windows and breaking-news records; then the medians and the
# ratios on / off. JSON lines to perf/results/breaking-<date>-<time>.jsonl. Nothing is judged.
#
#   perf/run_breaking.sh [--rounds N] [--events N] [--stories K]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3 events=2000000 stories=3
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --events) events="$2"; shift 2 ;;
    --stories) stories="$2"; shift 2 ;;
    *) echo "usage: perf/run_breaking.sh [--rounds N] [--events N] [--stories K]" >&2; exit 2 ;;
  esac
done
B="${NF_PERF_BUILD_DIR:-build-perf}"
[ -f "$B/CMakeCache.txt" ] || cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DNF_BENCH=ON >&2
cmake --build "$B" -j "$(nproc)" --target bench_readpath >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p perf/results
out="perf/results/breaking-$(date -u +%Y%m%d-%H%M%S).jsonl"
for r in $(seq "$rounds"); do
  for mode in 0 1; do
    rm -rf "$tmp/store"
    "$B/perf/bench_readpath" --seed-topics "$tmp/store/2" --shards 0 >/dev/null 2>"$tmp/r.err" ||
      { tail -20 "$tmp/r.err" >&2; exit 1; }
    "$B/perf/bench_readpath" --events "$events" --warmup "$events" --ttl-s 1.5 --populate \
      --shards 2 --epoch-ms 1000 --store "$tmp/store" --stories "$stories" --breaking "$mode" \
      >"$tmp/r.out" 2>"$tmp/r.err" || { tail -20 "$tmp/r.err" >&2; exit 1; }
    python3 - "$tmp/r.out" "$mode" "$r" <<'PY' | tee -a "$out"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")][-1]
print(json.dumps({"bench": "breaking_readpath", "round": int(sys.argv[3]),
                  "breaking": sys.argv[2] == "1", "events_per_s": r.get("events_per_s"),
                  "cpu_ns_per_event": r.get("cpu_ns_per_event"),
                  "durable_events_per_s": r.get("durable_events_per_s"),
                  "windows": r.get("windows"), "breaking_news": r.get("breaking_news"),
                  "breaking_cpu_ns_per_event": r.get("breaking_cpu_ns_per_event"),
                  "breaking_cpu_us_per_window": r.get("breaking_cpu_us_per_window")}))
PY
  done
done
python3 perf/ab_summary.py "$out" breaking_summary breaking false true events_per_s \
  cpu_ns_per_event durable_events_per_s windows breaking_news breaking_cpu_ns_per_event \
  breaking_cpu_us_per_window | tee -a "$out"
