#!/usr/bin/env bash
# The README's first command: install what is missing, build (Release), run the job on its
# default configuration with the bundled example feeds (examples/feeds/, dated as of now in a
# copy under the build directory), articles and fetch-log records printed as JSON lines on
# stdout, the page and the query API on the admin server.
# Extra arguments go to `newsflow run` and win (e.g. --set sources.file=my-feeds.txt, --sink
# jsonl:out.jsonl).
# NF_BUILD_DIR picks the build directory (default: build/); an existing one keeps its options.
set -euo pipefail
cd "$(dirname "$0")/.."
# Install and build progress goes to stderr: stdout is the job's JSON lines only, so
# `scripts/run.sh | jq` works from the first line.
bash scripts/deps.sh >&2
B="${NF_BUILD_DIR:-build}"
[ -f "$B/CMakeCache.txt" ] || cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release >&2
cmake --build "$B" -j "$(nproc)" --target newsflow >&2
echo "run.sh: once it runs, the page (trending stories, a reader's feed) is at http://127.0.0.1:9464/" \
  "(the log line \"the page\" gives the address when --set admin.port/listen change it)" >&2
# The bundled feeds carry fixed dates; the copy the demo crawls is dated as of now, so the feed's
# 48 h window holds its articles whenever it runs (scripts/demo_feeds.py).
python3 scripts/demo_feeds.py examples/feeds "$B/demo-feeds"
exec "$B/newsflow" run --config config/newsflow.json --set sources.file="$B/demo-feeds/sources.txt" "$@"
