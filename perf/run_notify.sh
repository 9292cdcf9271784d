#!/usr/bin/env bash
# What notifications cost a shard (issue 45; src/engine/notify.h): perf/analytics/bench_notify.c
# in rounds — readers subscribing, windows of breaking stories fanned out to them with every
# value in memory (hot) and read from RocksDB (cold), the subscribers' index rebuilt at start —
# and bench_readpath's CPU per read event beside it, so that a notification's cost reads as a
# share of a read event's. JSON lines to perf/results/notify-<date>-<time>.jsonl. Nothing is
# judged.
#
#   perf/run_notify.sh [--rounds N] [--readers N] [--topics K]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3 readers=100000 topics=3
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --readers) readers="$2"; shift 2 ;;
    --topics) topics="$2"; shift 2 ;;
    *) echo "usage: perf/run_notify.sh [--rounds N] [--readers N] [--topics K]" >&2; exit 2 ;;
  esac
done
B="${NF_PERF_BUILD_DIR:-build-perf}"
[ -f "$B/CMakeCache.txt" ] || cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DNF_BENCH=ON >&2
cmake --build "$B" -j "$(nproc)" --target bench_notify bench_readpath >&2
mkdir -p perf/results
out="perf/results/notify-$(date -u +%Y%m%d-%H%M%S).jsonl"
for r in $(seq "$rounds"); do
  "$B/perf/bench_notify" --readers "$readers" --topics "$topics" |
    sed "s/^{/{\"round\":$r,/" | tee -a "$out"
  # the read path beside it: one shard, its CPU per event (the row's cpu_ns_per_event)
  "$B/perf/bench_readpath" --events 2000000 --shards 1 2>/dev/null | grep '"bench":"readpath"' |
    sed "s/^{/{\"round\":$r,/" | tee -a "$out"
done
