#!/usr/bin/env bash
# The burst of issue 36 (perf/README "Memory under a burst"): FEEDS local feeds of PER_FEED
# articles each (perf/burst/gen_feeds.py: 200 x 250 = 50,000 new articles) crawled at once by
# the job with state.budget_mb=BUDGET (default 2), sink none, on the embedded cluster (--set
# kafka.brokers= : without Kafka, whose mock keeps every record in the process). Samples /metrics
# and /proc every half second until every article is clustered and SETTLE s (default 30) more
# have passed (the burst's epochs commit), and prints one JSON line: the story-cluster index's
# allocated bytes (newsflow_cluster_index_bytes) at the peak and at the end, per article; all
# keyed state's (newsflow_state_allocated_bytes); the process's RSS at the peak and at the end;
# RocksDB's memtables and SQLite's memory at the end; epochs, early ones. Nothing is judged.
#
#   perf/run_burst.sh [--build DIR] [--budget-mb M] [--feeds F] [--per-feed N] [--settle S]
#                     [--feeds-dir D] [--set K=V]...
# --feeds-dir D: the feeds generated into D once and used again by later runs (runs to compare).
set -euo pipefail
cd "$(dirname "$0")/.."
B="${NF_PERF_BUILD_DIR:-build-perf}" budget=2 feeds=200 per=250 settle=30 fdir="" extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build) B="$2"; shift 2 ;;
    --budget-mb) budget="$2"; shift 2 ;;
    --feeds) feeds="$2"; shift 2 ;;
    --per-feed) per="$2"; shift 2 ;;
    --settle) settle="$2"; shift 2 ;;
    --feeds-dir) fdir="$2"; shift 2 ;;
    --set) extra+=(--set "$2"); shift 2 ;;
    *) echo "usage: perf/run_burst.sh [--build DIR] [--budget-mb M] [--feeds F] [--per-feed N] [--settle S] [--feeds-dir D] [--set K=V]..." >&2; exit 2 ;;
  esac
done
[ -x "$B/newsflow" ] || { echo "run_burst.sh: no $B/newsflow (build it first)" >&2; exit 1; }
tmp=$(mktemp -d)
job=""
cleanup() {
  if [ -n "$job" ]; then
    kill "$job" 2>/dev/null || true
    for _ in $(seq 150); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$job" 2>/dev/null || true
    wait "$job" 2>/dev/null || true
  fi
  [ -n "${NF_BURST_KEEP:-}" ] && echo "run_burst.sh: kept $tmp" >&2 || rm -rf "$tmp"
}
trap cleanup EXIT
[ -n "$fdir" ] || fdir="$tmp/feeds"
[ -f "$fdir/sources.txt" ] || python3 perf/burst/gen_feeds.py "$fdir" "$feeds" "$per"
total=$((feeds * per))
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$B/newsflow" run --config config/newsflow.json --set sources.file="$fdir/sources.txt" \
  --set state.dir="$tmp/state" --set admin.port="$port" --set sink.spec=none \
  --set state.budget_mb="$budget" --set log.level=warn "${extra[@]}" 2>"$tmp/job.err" &
job=$!
base="http://127.0.0.1:$port"
python3 - "$base" "$job" "$total" "$settle" "$budget" <<'PY'
import json, re, sys, time, urllib.request
base, pid, total, settle, budget = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])

def metrics():
    with urllib.request.urlopen(base + "/metrics", timeout=5) as r:
        text = r.read().decode()
    m = {}
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name, _, val = line.rpartition(" ")
        try:
            v = float(val)
        except ValueError:
            continue
        m[name] = v
        key = re.sub(r"\{.*\}", "", name)
        if key != name:
            m[key] = m.get(key, 0) + v
    return m

def rss():
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0

t0 = time.time()
peak = {"index": 0, "state": 0, "rss": 0}
done_at = None
m = {}
while time.time() - t0 < 900:
    time.sleep(0.5)
    try:
        m = metrics()
        r = rss()
    except Exception:
        continue
    peak["rss"] = max(peak["rss"], r)
    peak["index"] = max(peak["index"], m.get("newsflow_cluster_index_bytes", 0))
    peak["state"] = max(peak["state"], m.get("newsflow_state_allocated_bytes", 0))
    if done_at is None and m.get("newsflow_cluster_assignments_total", 0) >= total:
        done_at = time.time()
    if done_at is not None and time.time() - done_at >= settle:
        break
n = max(m.get("newsflow_cluster_assignments_total", 0), 1)
MB = 1048576
print(json.dumps({
    "bench": "burst", "budget_mb": budget, "articles": total, "clustered": int(n),
    "clustered_after_s": round(done_at - t0, 1) if done_at else None,
    "index_bytes_peak": int(peak["index"]), "index_bytes_final": int(m.get("newsflow_cluster_index_bytes", 0)),
    "index_bytes_per_article_peak": round(peak["index"] / n),
    "index_bytes_per_article_final": round(m.get("newsflow_cluster_index_bytes", 0) / n),
    "index_entries_final": int(m.get("newsflow_cluster_index_entries", 0)),
    "state_allocated_mb_peak": round(peak["state"] / MB, 1),
    "state_allocated_mb_final": round(m.get("newsflow_state_allocated_bytes", 0) / MB, 1),
    "rss_mb_peak": round(peak["rss"] / MB), "rss_mb_final": round(rss() / MB),
    "memtable_mb_final": round(m.get("newsflow_rocksdb_memtable_bytes", 0) / MB),
    "search_mb_final": round(m.get("newsflow_search_memory_bytes", 0) / MB),
    "epochs": int(m.get("newsflow_epochs_committed_total", 0)),
    "early_epochs": int(m.get("newsflow_epoch_early_total", 0)),
}))
PY
