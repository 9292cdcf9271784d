#!/usr/bin/env bash
# The README's first command: install what is missing, build (Release), run the job on its
# default configuration. Extra arguments go to `newsflow run` (e.g. --set runtime.shards=1).
# NF_BUILD_DIR picks the build directory (default: build/); an existing one keeps its options.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
B="${NF_BUILD_DIR:-build}"
[ -f "$B/CMakeCache.txt" ] || cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release
cmake --build "$B" -j "$(nproc)" --target newsflow
exec "$B/newsflow" run --config config/newsflow.json "$@"
