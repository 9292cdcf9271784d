#!/usr/bin/env bash
# Analytics benchmarks (issue 5), side by side in one run: builds the benchmarks (Release,
# NF_BENCH=ON, into build-perf/ or $NF_PERF_BUILD_DIR) and runs
#   bench_readpath     the job's read path in-process (decode -> event-id dedup -> trending ->
#                      interest), 1 and 2 shards, Zipf workload (1M users, 100k articles),
#                      read-events keyed by user_id (an event's partition a hash of its user):
#                      steady state (every user read once, then 4M events of warm-up, dedup TTLs
#                      1.5 s: no user new and the sets at the size they keep), the same with
#                      events dealt to partitions in turn (a producer without keys), cold (sets
#                      and users growing from empty), and steady over a RocksDB store
#   bench_readstages   the read path's steps timed one by one on one thread
#   bench_trend_redis  the seed design's trending store on the same workload: Debian's
#                      redis-server, ZINCRBY per event into 30 s buckets + ZUNIONSTORE per slide,
#                      from a pipelined hiredis client
#   bench_trend        the trending counter and merger alone
#   bench_interest     the interest engine alone, and its memory per million users
#   bench_cluster      MinHash + LSH + union-find, precision/recall vs exact Jaccard, memory
#   bench_classify     the classifier alone
# and prints the ratios. JSON lines go to stdout and to perf/results/analytics-<date>.jsonl
# (gitignored). --quick: small sizes (about a minute). Timings are never judged here.
set -euo pipefail
cd "$(dirname "$0")/.."
B="${NF_PERF_BUILD_DIR:-build-perf}"
quick=()
events=4000000
if [ "${1:-}" = "--quick" ]; then
  quick=(--quick)
  events=400000
fi
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DNF_BENCH=ON >&2
cmake --build "$B" -j "$(nproc)" --target bench_readpath bench_readstages bench_trend_redis \
  bench_trend bench_interest bench_cluster bench_classify >&2
mkdir -p perf/results
out="perf/results/analytics-$(date +%Y%m%d-%H%M%S).jsonl"
store=$(mktemp -d)
trap 'rm -rf "$store"' EXIT
{
  steady=(--events "$events" --warmup "$events" --ttl-s 1.5 --populate)
  "$B/perf/bench_readpath" "${steady[@]}" --shards 1,2
  "$B/perf/bench_readpath" "${steady[@]}" --shards 1,2 --round-robin
  "$B/perf/bench_readpath" --events "$events" --shards 1,2
  "$B/perf/bench_readpath" "${steady[@]}" --shards 1 --store "$store"
  "$B/perf/bench_readstages" --events "$events" --warmup "$events" --ttl-s 2 --populate
  "$B/perf/bench_trend_redis" --events "$events" --span-hours 0.16666667 --seed 42
  "$B/perf/bench_trend" "${quick[@]}"
  "$B/perf/bench_interest" --events "$events"
  "$B/perf/bench_cluster" "${quick[@]}"
  "$B/perf/bench_classify" "${quick[@]}"
} | tee "$out"
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def mode(r):
    if r.get("store"):
        return "store"
    if not r.get("warmup"):
        return "cold"
    return "steady_round_robin" if r.get("partitioning") == "round_robin" else "steady"
rp = {(mode(r), r["shards"]): r for r in rows if r.get("bench") == "readpath"}
redis = next((r for r in rows if r.get("bench") == "trend_redis"), None)
res = {"bench": "analytics_summary"}
for m in ("steady", "steady_round_robin", "cold"):
    one, two = rp.get((m, 1)), rp.get((m, 2))
    if one:
        res[f"readpath_{m}_1_shard_events_per_s"] = one["events_per_s"]
    if one and two:
        res[f"readpath_{m}_scaling_2_vs_1"] = round(two["events_per_s"] / one["events_per_s"], 2)
    if redis and one:
        res[f"readpath_{m}_1_shard_vs_redis"] = round(one["events_per_s"] / redis["events_per_s"], 2)
    if redis and two:
        res[f"readpath_{m}_2_shards_vs_redis"] = round(two["events_per_s"] / redis["events_per_s"], 2)
if ("store", 1) in rp and ("steady", 1) in rp:
    res["readpath_store_vs_memory_1_shard"] = round(
        rp[("store", 1)]["events_per_s"] / rp[("steady", 1)]["events_per_s"], 2)
print(json.dumps(res))
PY
echo "run_analytics.sh: results in $out" >&2
