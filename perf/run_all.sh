#!/usr/bin/env bash
# perf/run_all.sh [--quick] — every comparison of newsflow with the systems users would pick
# instead, on the same generated workloads, in one run (issue 22; perf/README, top section):
#   parse       newsflow vs gofeed (Go proxy), feedparser (PyPI) and xmllint --stream, on RSS,
#               Atom and JSON Feed files                                   (perf/run_parse.sh)
#   read path   newsflow vs Apache Flink 2.3 (Maven Central) at 1 and 2 cores, outputs checked
#               equal                                                      (perf/run_stream.sh)
#   similarity  newsflow vs datasketch's MinHashLSH (PyPI), quality against exact Jaccard
#                                                                          (perf/run_similarity.sh)
#   epoch       newsflow's pause and commit vs dirty keys                  (perf/epoch/bench_epoch)
#   restore     newsflow's restore from the changelog topics vs state size, through a broker of
#               its own (scripts/kafka.sh)                              (perf/state/bench_restore)
#   end to end  read event produced -> its interest-update visible read_committed, through a broker
#               of its own, at fixed rates and checkpoint intervals: the latency CDF
#                                                          (perf/run_kafka.sh, perf/kafka/bench_e2e)
# Writes perf/results/<date>-<time>/ (or $NF_RUN_ALL_DIR): each comparison's JSON lines, env.json,
# results.json (every figure), report.md with the gnuplot plots (*.png), and prints the summary
# table. --quick: smaller workloads, under 5 minutes here; CI runs it (.ci/run), where the figures
# are not judged but every comparison must run and the outputs that must agree must agree.
# Exit: 0, or 1 when a comparison failed to run or its outputs disagree (report.py says which).
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *) echo "usage: perf/run_all.sh [--quick]" >&2; exit 2 ;;
esac
B="${NF_PERF_BUILD_DIR:-build-perf}"
export NF_PERF_BUILD_DIR="$B"
out="${NF_RUN_ALL_DIR:-perf/results/$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$out"
t0=$(date +%s)
log() { echo "run_all.sh: $* ($(($(date +%s) - t0)) s)" >&2; }

python3 - "$out/env.json" "$quick" <<'PY'
import json, os, platform, subprocess, sys, datetime
cpu = "?"
for line in open("/proc/cpuinfo"):
    if line.startswith("model name"):
        cpu = line.split(":", 1)[1].strip()
        break
mem = int(open("/proc/meminfo").readline().split()[1]) / 1048576
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
json.dump({"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "commit": commit or "?", "cpu": cpu, "cpus": os.cpu_count(), "mem_gib": round(mem, 1),
           "kernel": platform.release(), "loadavg": os.getloadavg()[0], "quick": sys.argv[2] == "1"},
          open(sys.argv[1], "w"))
PY

log "building"
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DNF_BENCH=ON >&2
cmake --build "$B" -j "$(nproc)" --target bench_parse bench_readpath bench_cluster bench_epoch bench_restore >&2
py=$(bash perf/peers_venv.sh "$B/perf/venv")

log "parse"
if [ $quick = 1 ]; then
  NF_PARSE_QUICK=1 NF_FEEDPARSER_PYTHON="$py" NF_PARSE_OUT="$out/parse.jsonl" \
    bash perf/run_parse.sh --rounds 1 --runs 3 --xmllint-runs 2 --feedparser-runs 1 --gofeed-runs 2 >/dev/null
else
  NF_FEEDPARSER_PYTHON="$py" NF_PARSE_OUT="$out/parse.jsonl" bash perf/run_parse.sh --rounds 3 >/dev/null
fi

log "read path: newsflow and Flink"
NF_STREAM_OUT="$out/stream.jsonl" bash perf/run_stream.sh $([ $quick = 1 ] && echo --quick) >/dev/null

log "similarity: newsflow and datasketch"
NF_SIMILARITY_OUT="$out/similarity.jsonl" bash perf/run_similarity.sh $([ $quick = 1 ] && echo --quick) >/dev/null

log "epoch pause vs dirty keys"
if [ $quick = 1 ]; then sizes=1000,10000,100000 rounds=10; else sizes=1000,10000,100000,1000000 rounds=30; fi
"$B/perf/bench_epoch" --sizes "$sizes" --rounds "$rounds" >"$out/epoch.jsonl"

log "restore time vs state size (changelog, through a broker of its own)"
kdir="$(cd "$B" && pwd)/perf/restore-kafka"
port="${NF_RESTORE_KAFKA_PORT:-49740}"
trap 'bash scripts/kafka.sh stop --dir "$kdir" >/dev/null 2>&1 || true' EXIT
bash scripts/kafka.sh start --fresh --dir "$kdir" --port "$port" >&2
if [ $quick = 1 ]; then records=20000,100000; else records=100000,300000,1000000,3000000; fi
"$B/perf/bench_restore" --brokers "127.0.0.1:$port" --records "$records" \
  --broker-pid "$(bash scripts/kafka.sh pid 1 --dir "$kdir")" >"$out/restore.jsonl"
bash scripts/kafka.sh stop --dir "$kdir" >&2
trap - EXIT
rm -rf "$kdir"

log "end-to-end latency through the broker (perf/run_kafka.sh)"
if [ $quick = 1 ]; then e2e=(--intervals 1000 --rates 10000 --duration 10 --warmup 5 --users 100000)
else e2e=(--intervals 1000,5000 --rates 25000,50000 --duration 30 --warmup 10); fi
bash perf/run_kafka.sh --no-ceiling --no-max --port "${NF_E2E_ALL_KAFKA_PORT:-49760}" --tag e2e-all \
  "${e2e[@]}" >"$out/e2e.jsonl"

log "report"
python3 perf/report.py "$out"
log "report in $out/report.md"
