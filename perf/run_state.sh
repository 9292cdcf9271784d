#!/usr/bin/env bash
# Keyed state (src/state/kstate.c over src/state/store.c): builds bench_state (Release,
# NF_BENCH=ON, into build-perf/ or $NF_PERF_BUILD_DIR) and runs it: hot gets/puts, cold gets
# from RocksDB, the epoch barrier's serialisation and commit, and restore ("ready") time. The
# JSON lines go to stdout and to perf/results/state-<date>-<time>.jsonl (gitignored); build
# output and progress go to stderr. Arguments are passed on to bench_state, e.g.
#   perf/run_state.sh --quick            # small sizes, well under a minute
#   perf/run_state.sh epoch restore      # some scenarios only
#   perf/run_state.sh --dir /var/tmp     # databases elsewhere (default /tmp; ~2.5 GB at peak)
# A full run takes about 2 minutes on the shared 2-vCPU machine (under 5 even when it is busy).
# The databases are deleted at the end. Exits non-zero only if the build fails or the benchmark
# does not run: timings are never judged.
set -euo pipefail
cd "$(dirname "$0")/.."
B="${NF_PERF_BUILD_DIR:-build-perf}"
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DNF_BENCH=ON >&2
cmake --build "$B" -j "$(nproc)" --target bench_state >&2
mkdir -p perf/results
out="perf/results/state-$(date +%Y%m%d-%H%M%S).jsonl"
"$B/perf/bench_state" "$@" | tee "$out"
echo "run_state.sh: results in $out" >&2
