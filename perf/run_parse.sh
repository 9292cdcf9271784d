#!/usr/bin/env bash
# Parse throughput, side by side in one run (perf/parse/RESULTS.md): newsflow's nf_feed_parse
# against `xmllint --stream --noout` (raw libxml2) and python3-feedparser on the same generated
# files. Builds bench_parse (Release, NF_BENCH=ON, into build-perf/ or $NF_PERF_BUILD_DIR),
# generates perf/results/feed-48mb.xml (RSS) and perf/results/feed-atom-12mb.xml if missing
# (deterministic), then prints JSON lines, a parse.summary line per file with the ratios and
# targets, and tees them to perf/results/parse-<date>-<time>.jsonl (gitignored).
# Options are passed to perf/parse/compare.py, e.g. --rounds 2 --feedparser-runs 2.
# NF_PARSE_ATOM=0 skips the Atom file. Exits non-zero only if a build or a tool fails.
set -euo pipefail
cd "$(dirname "$0")/.."
B="${NF_PERF_BUILD_DIR:-build-perf}"
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DNF_BENCH=ON >&2
cmake --build "$B" -j "$(nproc)" --target bench_parse >&2
mkdir -p perf/results
rss=perf/results/feed-48mb.xml
atom=perf/results/feed-atom-12mb.xml
[ -s "$rss" ] || python3 perf/parse/gen_feed.py --format rss --mb 48 "$rss"
out="perf/results/parse-$(date +%Y%m%d-%H%M%S).jsonl"
{
  python3 perf/parse/compare.py "$B/perf/bench_parse" "$rss" --label rss "$@"
  if [ "${NF_PARSE_ATOM:-1}" != 0 ]; then
    [ -s "$atom" ] || python3 perf/parse/gen_feed.py --format atom --mb 12 "$atom"
    python3 perf/parse/compare.py "$B/perf/bench_parse" "$atom" --label atom "$@"
  fi
} | tee "$out"
echo "run_parse.sh: results in $out" >&2
