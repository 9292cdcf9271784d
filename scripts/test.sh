#!/usr/bin/env bash
# The README's second command: install what is missing, build everything (benchmarks included,
# so they keep compiling), run the whole test suite. Output ends with ctest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
B="${NF_BUILD_DIR:-build}"
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DNF_BENCH=ON
cmake --build "$B" -j "$(nproc)"
cd "$B" && ctest --output-on-failure "$@"
