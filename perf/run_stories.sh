#!/usr/bin/env bash
# What ranking trending by story costs (issue 45), side by side in rounds, each round once with
# trending.by_story off and once on, in turn so that a drift of the machine falls on both:
# perf/analytics/bench_readpath (decode, event-id dedup, trending, interest on 2 shards, steady
# state, RocksDB state with epochs every second, every article in a story of 3 as the story
# index's parent links): events/s, CPU per event, windows emitted and articles folded into
# stories. By story, each window's scored articles are mapped to their stories through the last
# committed view (a RocksDB read per link); by article nothing is read. Then the medians and the
# ratios on / off. JSON lines to perf/results/stories-<date>-<time>.jsonl. Nothing is judged.
#
#   perf/run_stories.sh [--rounds N] [--events N] [--stories K]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3 events=2000000 stories=3
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --events) events="$2"; shift 2 ;;
    --stories) stories="$2"; shift 2 ;;
    *) echo "usage: perf/run_stories.sh [--rounds N] [--events N] [--stories K]" >&2; exit 2 ;;
  esac
done
B="${NF_PERF_BUILD_DIR:-build-perf}"
[ -f "$B/CMakeCache.txt" ] || cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DNF_BENCH=ON >&2
cmake --build "$B" -j "$(nproc)" --target bench_readpath >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p perf/results
out="perf/results/stories-$(date -u +%Y%m%d-%H%M%S).jsonl"
for r in $(seq "$rounds"); do
  for mode in 0 1; do
    rm -rf "$tmp/store"
    "$B/perf/bench_readpath" --events "$events" --warmup "$events" --ttl-s 1.5 --populate \
      --shards 2 --epoch-ms 1000 --store "$tmp/store" --stories "$stories" --by-story "$mode" \
      >"$tmp/r.out" 2>"$tmp/r.err" || { tail -20 "$tmp/r.err" >&2; exit 1; }
    python3 - "$tmp/r.out" "$mode" "$r" <<'PY' | tee -a "$out"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")][-1]
print(json.dumps({"bench": "stories_readpath", "round": int(sys.argv[3]),
                  "by_story": sys.argv[2] == "1", "events_per_s": r.get("events_per_s"),
                  "cpu_ns_per_event": r.get("cpu_ns_per_event"),
                  "durable_events_per_s": r.get("durable_events_per_s"),
                  "windows": r.get("windows"), "folded": r.get("folded")}))
PY
  done
done
python3 perf/ab_summary.py "$out" stories_summary by_story false true events_per_s \
  cpu_ns_per_event durable_events_per_s windows folded | tee -a "$out"
