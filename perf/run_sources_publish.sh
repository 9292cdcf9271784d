#!/usr/bin/env bash
# What spreading the sources costs a consumer group's start (issue 16; docs/ARCHITECTURE.md §3
# "Sources and the global stages"; src/actors/sources_publish.h): a process publishes its
# sources.file to the sources topic at start, each source to its host's partition, after reading
# the topic whole. Through a real Apache Kafka broker on this machine (scripts/kafka.sh, private
# directory, stopped by pid):
#   1. builds newsflow (Release, build-perf/ or $NF_PERF_BUILD_DIR);
#   2. per size N (--sources, default 10000,100000): writes N feed URLs over N/10 hosts
#      (*.invalid: nothing is fetched), creates the topics under a fresh prefix (12 partitions),
#      then runs the job twice on them (state.changelog=true, kafka.assignment=group,
#      runtime.stop_after_ms=4000): the first start publishes all N, the second finds them all
#      (published 0) — the time each took is the "seconds" of its "configured sources
#      published" log line;
#   3. prints one {"bench":"sources_publish",...} line per size and start to stdout and to
#      perf/results/sources-publish-<date>-<time>.jsonl. Nothing is judged.
#
#   perf/run_sources_publish.sh [--sources N,...] [--port P] [--kafka-dir DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
B="${NF_PERF_BUILD_DIR:-build-perf}"
sizes=10000,100000
port=43492
kdir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --sources) sizes="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    --kafka-dir) kdir="$2"; shift 2 ;;
    -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "run_sources_publish.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
T=$(mktemp -d /tmp/nf-sources-publish-XXXXXX)
kdir="${kdir:-$T/kafka}"
stop() {
  bash scripts/kafka.sh stop --dir "$kdir" >/dev/null 2>&1 || true
  rm -rf "$T"
}
trap stop EXIT
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$B" -j "$(nproc)" --target newsflow >/dev/null
NF="$B/newsflow"
bash scripts/kafka.sh start --fresh --dir "$kdir" --port "$port" >/dev/null
boot="127.0.0.1:$port"
mkdir -p perf/results
out="perf/results/sources-publish-$(date -u +%Y%m%d-%H%M%S).jsonl"

IFS=, read -r -a list <<<"$sizes"
for n in "${list[@]}"; do
  prefix="nfp-sp-$n-$$."
  "$NF" topics create --set kafka.brokers="$boot" --set kafka.topic_prefix="$prefix" \
    --partitions 12 >/dev/null
  # CreateTopics answers before the partitions' leaders serve them: wait for every end offset
  q=()
  for t in sources articles trending-panes read-events changelog-crawl-schedule; do
    for p in $(seq 0 11); do q+=(-t "$prefix$t:$p:-1"); done
  done
  for _ in $(seq 1 60); do kcat -b "$boot" -Q "${q[@]}" >/dev/null 2>&1 && break; sleep 0.5; done
  python3 - "$n" "$T/sources-$n.txt" <<'PY'
import sys
n, path = int(sys.argv[1]), sys.argv[2]
with open(path, "w") as f:
    for i in range(n):
        f.write("http://feeds%d.host%d.invalid/rss/%d.xml\n" % (i % 7, i // 10, i))
PY
  for start in first again; do
    rm -rf "$T/state"
    "$NF" run --set kafka.brokers="$boot" --set kafka.topic_prefix="$prefix" \
      --set kafka.group_id="${prefix}group" --set kafka.transactional_id="${prefix}tx" \
      --set state.changelog=true --set kafka.assignment=group --set state.dir="$T/state" \
      --set sources.file="$T/sources-$n.txt" --set sink.spec=none --set admin.enabled=false \
      --set runtime.stop_after_ms=4000 --set log.level=info 2>"$T/run.err" >/dev/null || true
    python3 - "$T/run.err" "$n" "$start" <<'PY' | tee -a "$out"
import json, sys
path, n, start = sys.argv[1], int(sys.argv[2]), sys.argv[3]
line = None
for l in open(path, errors="replace"):
    if '"configured sources published' in l:
        line = json.loads(l)
if not line:
    sys.exit("run_sources_publish.sh: no publish line in the job's log (%s)" % path)
print(json.dumps({"bench": "sources_publish", "sources": n, "start": start,
                  "published": line["published"], "unchanged": line["unchanged"],
                  "records_read": line["records_read"], "seconds": round(line["seconds"], 3),
                  "sources_per_s": round(n / max(line["seconds"], 1e-9))}))
PY
  done
done
echo "run_sources_publish.sh: results in $out" >&2
