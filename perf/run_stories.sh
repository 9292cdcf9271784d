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
#   perf/run_stories.sh [--rounds N] [--events N] [--stories K] [--study by_story|breaking]
#
# --study breaking (perf/run_breaking.sh): the same rounds with breaking.enabled off and on
# instead (by story both times), every article's topic vector in the store as a crawled
# article's is; the rows add breaking-news records and the merger's own CPU on breaking news.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3 events=2000000 stories=3 study=by_story
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --events) events="$2"; shift 2 ;;
    --stories) stories="$2"; shift 2 ;;
    --study) study="$2"; shift 2 ;;
    *) echo "usage: perf/run_stories.sh [--rounds N] [--events N] [--stories K] [--study by_story|breaking]" >&2; exit 2 ;;
  esac
done
case "$study" in
  by_story) flag=--by-story name=stories ;;
  breaking) flag=--breaking name=breaking ;;
  *) echo "perf/run_stories.sh: --study is by_story or breaking, not $study" >&2; exit 2 ;;
esac
B="${NF_PERF_BUILD_DIR:-build-perf}"
[ -f "$B/CMakeCache.txt" ] || cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DNF_BENCH=ON >&2
cmake --build "$B" -j "$(nproc)" --target bench_readpath >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p perf/results
out="perf/results/$name-$(date -u +%Y%m%d-%H%M%S).jsonl"
for r in $(seq "$rounds"); do
  for mode in 0 1; do
    rm -rf "$tmp/store"
    if [ "$study" = breaking ]; then # the bench's store for 2 shards is store/2
      "$B/perf/bench_readpath" --seed-topics "$tmp/store/2" --shards 0 >/dev/null 2>"$tmp/r.err" ||
        { tail -20 "$tmp/r.err" >&2; exit 1; }
    fi
    "$B/perf/bench_readpath" --events "$events" --warmup "$events" --ttl-s 1.5 --populate \
      --shards 2 --epoch-ms 1000 --store "$tmp/store" --stories "$stories" "$flag" "$mode" \
      >"$tmp/r.out" 2>"$tmp/r.err" || { tail -20 "$tmp/r.err" >&2; exit 1; }
    python3 - "$tmp/r.out" "$mode" "$r" "$study" "$name" <<'PY' | tee -a "$out"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")][-1]
row = {"bench": sys.argv[5] + "_readpath", "round": int(sys.argv[3]),
       sys.argv[4]: sys.argv[2] == "1"}
keys = ["events_per_s", "cpu_ns_per_event", "durable_events_per_s", "windows", "folded"]
if sys.argv[4] == "breaking":
    keys[-1:] = ["breaking_news", "breaking_cpu_ns_per_event", "breaking_cpu_us_per_window"]
row.update({k: r.get(k) for k in keys})
print(json.dumps(row))
PY
  done
done
measures=(events_per_s cpu_ns_per_event durable_events_per_s windows folded)
[ "$study" = breaking ] &&
  measures=(events_per_s cpu_ns_per_event durable_events_per_s windows breaking_news
    breaking_cpu_ns_per_event breaking_cpu_us_per_window)
python3 perf/ab_summary.py "$out" "${name}_summary" "$study" false true "${measures[@]}" |
  tee -a "$out"
