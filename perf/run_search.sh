#!/usr/bin/env bash
# The search index (issue 19, src/serve/search.h) beside the embedded engines a user would pick
# instead, on one generated corpus, in one run:
#   1. builds bench_search (Release, into build-perf/ or $NF_PERF_BUILD_DIR);
#   2. perf/search/gen_corpus.py: ARTICLES news-like articles published over the last 7 days
#      (Zipf vocabulary of 20,000 words) and 2,000 queries in the index's syntax (40 % two
#      words, 25 % one word, 15 % a phrase from a title, 10 % an exclusion, 10 % three words);
#   3. bench_search: newsflow's index takes ARTICLES - INGEST articles (articles/s, CPU and
#      bytes per article); the first 300 queries' best 20 compared with an unbounded scan's
#      (what search.scan_max costs in ranking); then 2 query threads run the queries for
#      SECONDS while a third thread indexes the last INGEST articles at RATE a second (the
#      issue's "while ingesting"; 0 = as fast as it can): queries/s, p50/p99;
#   4. perf/search/engines.py: the same corpus and queries through Python's sqlite3 (the same
#      libsqlite3's FTS5, bm25 ORDER BY rank LIMIT 20) and Xapian (Debian's python3-xapian,
#      BM25 with FTS5's parameters), indexing then 1 and 2 query processes, no ingest;
#   5. prints the JSON lines and a summary with the ratios.
# JSON lines go to perf/results/search-<date>-<time>.jsonl too. Nothing is judged.
#
#   perf/run_search.sh [--quick] [--articles N] [--ingest N] [--rate R] [--seconds S] [--no-peers]
# --quick: 100,000 articles, 5 s runs (about two minutes). Default: 1,000,000, 15 s (about
# eight minutes: Xapian indexes a million articles in ~3 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
B="${NF_PERF_BUILD_DIR:-build-perf}"
articles=1000000 ingest=100000 rate=1000 seconds=15 peers=1
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) articles=100000; ingest=20000; seconds=5; shift ;;
    --articles) articles="$2"; shift 2 ;;
    --ingest) ingest="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --no-peers) peers=""; shift ;;
    *) echo "usage: perf/run_search.sh [--quick] [--articles N] [--ingest N] [--rate R] [--seconds S] [--no-peers]" >&2; exit 2 ;;
  esac
done
[ "$ingest" -lt "$articles" ] || { echo "run_search.sh: --ingest must be below --articles" >&2; exit 2; }

cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DNF_BENCH=ON >/dev/null
cmake --build "$B" -j2 --target bench_search >/dev/null

W=$(mktemp -d /tmp/nf-search-bench.XXXXXX)
trap 'rm -rf "$W"' EXIT
mkdir -p perf/results
OUT="perf/results/search-$(date -u +%Y%m%d-%H%M%S).jsonl"

echo "run_search.sh: generating $articles articles and 2,000 queries" >&2
python3 perf/search/gen_corpus.py --articles "$articles" --out "$W/corpus.jsonl" \
    --queries "$W/queries.jsonl" --nqueries 2000 --now-ms "$(date +%s%3N)" >&2

echo "run_search.sh: newsflow: index $((articles - ingest)), then queries while indexing at $rate/s" >&2
mkdir -p "$W/newsflow"
"$B/perf/bench_search" --corpus "$W/corpus.jsonl" --queries "$W/queries.jsonl" \
    --dir "$W/newsflow" --articles $((articles - ingest)) --ingest "$ingest" --ingest-rate "$rate" --threads 2 \
    --seconds "$seconds" 2>"$W/bench.err" | tee -a "$OUT" || { cat "$W/bench.err" >&2; exit 1; }
rm -rf "$W/newsflow"

if [ -n "$peers" ]; then
  echo "run_search.sh: peers: SQLite FTS5 from Python, Xapian" >&2
  /usr/bin/python3 perf/search/engines.py --corpus "$W/corpus.jsonl" --queries "$W/queries.jsonl" \
      --dir "$W/peers" --threads 1,2 --seconds "$seconds" | tee -a "$OUT"
fi

python3 - "$OUT" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
nf = next(r for r in rows if r.get("bench") == "search")
peers = {r["engine"]: r for r in rows if r.get("engine") in ("fts5", "xapian")}
print(f"newsflow: {nf['articles']} articles indexed at {nf['articles_per_s']:.0f}/s "
      f"({nf['bytes_per_article']:.0f} B/article); while indexing {nf['ingest_articles_per_s']:.0f}/s: "
      f"{nf['qps']:.0f} queries/s, p50 {nf['p50_ms']:.2f} ms, p99 {nf['p99_ms']:.1f} ms; "
      f"top 20 with scan_max {nf['scan_max']} vs unbounded: Jaccard {nf['top20_vs_unbounded_jaccard']:.3f}, "
      f"identical {100 * nf['top20_vs_unbounded_same_share']:.0f} %")
for name, p in peers.items():
    q2 = p.get("qps_2") or 0
    print(f"{name}: {p['articles_per_s']:.0f} articles/s ({p['bytes_per_article']:.0f} B/article), "
          f"{q2:.0f} queries/s with 2 workers (p99 {p.get('p99_ms_2', 0):.1f} ms); newsflow/{name}: "
          f"indexing {nf['articles_per_s'] / p['articles_per_s']:.2f}x, "
          f"queries {nf['qps'] / q2 if q2 else float('nan'):.2f}x")
print(f"results: {sys.argv[1]}")
PY
