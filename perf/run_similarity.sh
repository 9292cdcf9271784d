#!/usr/bin/env bash
# newsflow's story clustering (MinHash + LSH, 128 permutations, 16 bands x 8 rows, threshold
# 0.85) against datasketch's MinHashLSH with the same parameters on the same corpus, in one run
# (issue 22; perf/README, "Similarity peer"). bench_cluster makes the corpus (random-word
# articles, 30 % with near-duplicates planted around the threshold), clusters it, and dumps the
# exact shingle sets with its pair decisions; perf/cluster/datasketch_peer.py runs datasketch
# (PyPI, in a venv: perf/peers_venv.sh) on the same sets and judges both against exact Jaccard.
# Prints JSON lines (cluster.* from bench_cluster, similarity.* from the peer) and tees them to
# perf/results/similarity-<date>-<time>.jsonl (or $NF_SIMILARITY_OUT).
#   perf/run_similarity.sh [--quick] [--articles N]     (default 50,000; --quick 10,000)
set -euo pipefail
cd "$(dirname "$0")/.."
B="${NF_PERF_BUILD_DIR:-build-perf}"
n=50000
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) n=10000 ;;
    --articles) n=$2; shift ;;
    *) echo "usage: perf/run_similarity.sh [--quick] [--articles N]" >&2; exit 2 ;;
  esac
  shift
done
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DNF_BENCH=ON >&2
cmake --build "$B" -j "$(nproc)" --target bench_cluster >&2
py=$(bash perf/peers_venv.sh "$B/perf/venv")
mkdir -p perf/results
out="${NF_SIMILARITY_OUT:-perf/results/similarity-$(date +%Y%m%d-%H%M%S).jsonl}"
corpus="$B/perf/similarity-corpus.bin"
"$B/perf/bench_cluster" --articles "$n" --dump "$corpus" | tee "$out"
line=$(grep '"phase":"sign+lsh+unionfind"' "$out")
"$py" perf/cluster/datasketch_peer.py "$corpus" --newsflow-line "$line" | tee -a "$out"
rm -f "$corpus"
echo "run_similarity.sh: results in $out" >&2
