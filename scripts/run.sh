#!/usr/bin/env bash
# The README's first command: install what is missing, build (Release), run the job on its
# default configuration with the bundled example feeds (examples/feeds/), articles and fetch-log
# records printed as JSON lines on stdout, the page and the query API on the admin server.
# Extra arguments go to `newsflow run` and win (e.g. --set sources.file=my-feeds.txt, --sink
# jsonl:out.jsonl).
# NF_BUILD_DIR picks the build directory (default: build/); an existing one keeps its options.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
B="${NF_BUILD_DIR:-build}"
[ -f "$B/CMakeCache.txt" ] || cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release
cmake --build "$B" -j "$(nproc)" --target newsflow
echo "run.sh: once it runs, the page (trending stories, a reader's feed) is at http://127.0.0.1:9464/" \
  "(the log line \"the page\" gives the address when --set admin.port/listen change it)" >&2
exec "$B/newsflow" run --config config/newsflow.json --set sources.file=examples/feeds/sources.txt "$@"
