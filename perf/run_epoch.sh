#!/usr/bin/env bash
# Builds the epoch benchmark (perf/epoch/bench_epoch.c) (Release, NF_BENCH=ON, into build-perf/ at the repo root) and runs
# it. The JSON lines go to stdout and to perf/results/runtime-<date>-<time>.jsonl (gitignored);
# build output goes to stderr. Arguments are passed on to bench_epoch, e.g.
#   perf/run_epoch.sh --sizes 100000 --rounds 50
# Exits non-zero only if the build fails or the benchmark crashes: timings are never judged.
set -euo pipefail
cd "$(dirname "$0")/.."
B="${NF_PERF_BUILD_DIR:-build-perf}"
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DNF_BENCH=ON >&2
cmake --build "$B" -j "$(nproc)" --target bench_epoch >&2
mkdir -p perf/results
out="perf/results/epoch-$(date +%Y%m%d-%H%M%S).jsonl"
"$B/perf/bench_epoch" "$@" | tee "$out"
echo "run_epoch.sh: results in $out" >&2
