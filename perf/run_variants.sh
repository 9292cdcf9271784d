#!/usr/bin/env bash
# What ranking experiments cost the feed (issue 45; src/engine/variants.h), side by side in
# rounds: perf/run_query.sh (the job ingesting demo read events on its embedded cluster while wrk
# asks for random readers' feeds) in the modes below, in turn so that a drift of the machine falls on
# all of them:
#   off       no ranking.variants (the seed alone), no follows
#   served    two served variants, 50/50 (the seed, and decay 1 / trending 0.3): each feed ranked
#             once, under its reader's weights
#   shadow    the same and a shadow variant (decay 2, trending 0): each feed ranked twice, the
#             second list compared with the first (newsflow_ranking_shadow_overlap)
#   follows   no variants, every reader following F topics and muting one (--follows F)
#   all       shadow and follows
# For each: the feed's requests/s, p99 and the job's CPU per feed request; then the medians and
# the ratios of each mode to off. JSON lines to perf/results/variants-<date>-<time>.jsonl.
# Nothing is judged.
#
#   perf/run_variants.sh [--rounds N] [--follows F] [--modes "off served shadow follows all"]
#                        [run_query.sh options, e.g. --quick]
# (off is always run: the others are compared with it)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3 follows=2 qargs=() modes="served shadow follows all"
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --follows) follows="$2"; shift 2 ;;
    --modes) modes=$(echo "$2" | tr ' ' '\n' | grep -vx off | tr '\n' ' '); shift 2 ;;
    *) qargs+=("$1"); shift ;;
  esac
done
served="seed share=50,fresh share=50 decay=1 trending=0.3"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p perf/results
out="perf/results/variants-$(date -u +%Y%m%d-%H%M%S).jsonl"
for r in $(seq "$rounds"); do
  for mode in off $modes; do
    margs=()
    case "$mode" in
      served) margs=(--set "ranking.variants=$served") ;;
      shadow) margs=(--set "ranking.variants=$served,recency shadow decay=2 trending=0") ;;
      follows) margs=(--follows "$follows") ;;
      all) margs=(--set "ranking.variants=$served,recency shadow decay=2 trending=0"
        --follows "$follows") ;;
    esac
    perf/run_query.sh "${qargs[@]}" "${margs[@]}" >"$tmp/q.out" 2>"$tmp/q.err" ||
      { tail -20 "$tmp/q.err" >&2; exit 1; }
    python3 perf/query/ab_row.py "$tmp/q.out" variants_feed mode "\"$mode\"" "$r" | tee -a "$out"
  done
done
for mode in $modes; do
  python3 perf/ab_summary.py "$out" "variants_summary_$mode" mode '"off"' "\"$mode\"" \
    feed_requests_per_s feed_p99_ms job_cpu_us_per_feed events_per_s_during_feed | tee -a "$out"
done
