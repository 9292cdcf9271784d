#!/usr/bin/env bash
# The crawl farm (perf/crawl/RESULTS.md): builds bench_crawl (Release, NF_BENCH=ON, into
# build-perf/ or $NF_PERF_BUILD_DIR) and runs it: newsflow's ingestion on one shard against a
# loopback server with 100,000 distinct feeds at their schedule's rate (111 fetches/s) for 75 s,
# measured over the last 60 s. The JSON lines go to stdout and to
# perf/results/crawl-<date>-<time>.jsonl (gitignored); build output and progress go to stderr.
# Arguments are passed on to bench_crawl, e.g.
#   perf/run_crawl.sh --sink jsonl:/dev/null
#   perf/run_crawl.sh --interval 90 --seconds 30 --window 20     # 10x the rate: headroom
# Exits non-zero only if the build fails or the benchmark does not run: timings are never judged.
set -euo pipefail
cd "$(dirname "$0")/.."
B="${NF_PERF_BUILD_DIR:-build-perf}"
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DNF_BENCH=ON >&2
cmake --build "$B" -j "$(nproc)" --target bench_crawl >&2
mkdir -p perf/results
out="perf/results/crawl-$(date +%Y%m%d-%H%M%S).jsonl"
"$B/perf/bench_crawl" "$@" | tee "$out"
echo "run_crawl.sh: results in $out" >&2
