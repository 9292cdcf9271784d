#!/usr/bin/env bash
# Parse throughput, side by side in one run (perf/README "Parse"): newsflow's nf_feed_parse
# against `xmllint --stream --noout` (raw libxml2), python3-feedparser and gofeed (Go) on the
# same generated files. Builds bench_parse (Release, NF_BENCH=ON, into build-perf/ or $NF_PERF_BUILD_DIR),
# generates perf/results/feed-48mb.xml (RSS), perf/results/feed-atom-12mb.xml and
# perf/results/feed-json-12mb.json (JSON Feed: no xmllint there) if missing
# (deterministic), then prints JSON lines, a parse.summary line per file with the ratios and
# targets, and tees them to perf/results/parse-<date>-<time>.jsonl (gitignored).
# Options are passed to perf/parse/compare.py, e.g. --rounds 2 --feedparser-runs 2.
# NF_PARSE_ATOM=0 skips the Atom file, NF_PARSE_JSON=0 the JSON Feed file. Exits non-zero only if a build or a tool fails.
set -euo pipefail
cd "$(dirname "$0")/.."
B="${NF_PERF_BUILD_DIR:-build-perf}"
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DNF_BENCH=ON >&2
cmake --build "$B" -j "$(nproc)" --target bench_parse >&2
# The Go peer (issue 22): gofeed, built from perf/parse/gofeed (go.mod/go.sum; modules from the
# Go module proxy). Without Go its line says skipped.
gofeed=()
if command -v go >/dev/null; then
  gobin="$(cd "$B" && pwd)/perf/bench_gofeed"
  (cd perf/parse/gofeed && go build -o "$gobin" .) >&2 && gofeed=(--gofeed "$gobin")
fi
mkdir -p perf/results
# NF_PARSE_QUICK=1 (perf/run_all.sh --quick): 8 MB RSS and 4 MB Atom and JSON Feed files.
if [ "${NF_PARSE_QUICK:-0}" = 1 ]; then rss_mb=8 small_mb=4; else rss_mb=48 small_mb=12; fi
rss=perf/results/feed-${rss_mb}mb.xml
atom=perf/results/feed-atom-${small_mb}mb.xml
json=perf/results/feed-json-${small_mb}mb.json
[ -s "$rss" ] || python3 perf/parse/gen_feed.py --format rss --mb "$rss_mb" "$rss"
out="${NF_PARSE_OUT:-perf/results/parse-$(date +%Y%m%d-%H%M%S).jsonl}"
{
  python3 perf/parse/compare.py "$B/perf/bench_parse" "$rss" --label rss "${gofeed[@]}" "$@"
  if [ "${NF_PARSE_ATOM:-1}" != 0 ]; then
    [ -s "$atom" ] || python3 perf/parse/gen_feed.py --format atom --mb "$small_mb" "$atom"
    python3 perf/parse/compare.py "$B/perf/bench_parse" "$atom" --label atom "${gofeed[@]}" "$@"
  fi
  if [ "${NF_PARSE_JSON:-1}" != 0 ]; then # JSON Feed: no xmllint line
    [ -s "$json" ] || python3 perf/parse/gen_feed.py --format json --mb "$small_mb" "$json"
    python3 perf/parse/compare.py "$B/perf/bench_parse" "$json" --label json "${gofeed[@]}" "$@" \
      --xmllint-runs 0
  fi
} | tee "$out"
echo "run_parse.sh: results in $out" >&2
