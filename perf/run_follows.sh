#!/usr/bin/env bash
# What follows and mutes cost the feed (issue 45), side by side in rounds, each round once
# without settings and once with every reader following F topics and muting one (--follows F of
# perf/run_query.sh: the job ingesting demo read events on its embedded cluster while wrk asks
# for random readers' feeds), in turn so that a drift of the machine falls on both: the feed's
# requests/s, p99 and the job's CPU per feed request. With follows a feed draws from up to F more
# topics' recent lists and drops the muted topic's articles. Then the medians and the ratios
# with / without. JSON lines to perf/results/follows-<date>-<time>.jsonl. Nothing is judged.
#
# --mute-sources M: "on" mutes M random sources per reader too (their articles leave the feed).
#
#   perf/run_follows.sh [--rounds N] [--follows F] [--mute-sources M] [run_query.sh options]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3 follows=2 msrc=0 qargs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --follows) follows="$2"; shift 2 ;;
    --mute-sources) msrc="$2"; shift 2 ;;
    *) qargs+=("$1"); shift ;;
  esac
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p perf/results
out="perf/results/follows-$(date -u +%Y%m%d-%H%M%S).jsonl"
for r in $(seq "$rounds"); do
  for mode in off on; do
    fargs=()
    [ "$mode" = on ] && fargs=(--follows "$follows" --mute-sources "$msrc")
    perf/run_query.sh "${qargs[@]}" "${fargs[@]}" >"$tmp/q.out" 2>"$tmp/q.err" ||
      { tail -20 "$tmp/q.err" >&2; exit 1; }
    python3 perf/query/ab_row.py "$tmp/q.out" follows_feed follows "\"$mode\"" "$r" | tee -a "$out"
  done
done
python3 perf/ab_summary.py "$out" follows_summary follows '"off"' '"on"' feed_requests_per_s \
  feed_p99_ms job_cpu_us_per_feed events_per_s_during_feed | tee -a "$out"
