#!/usr/bin/env bash
# Roll-forward cost on Apache Kafka as a function of the pending epoch's size
# (docs/ARCHITECTURE.md §4 "Roll-forward recovery"; perf/README.md, "Recovery on Apache Kafka").
# For each size N: N read events wait in a fresh set of topics, the job takes them all into one
# epoch (checkpoint.interval_ms --interval) and dies at a fault point of it; the restart rolls the
# epoch forward, deciding what is missing
#   offsets  from the consumer group's committed offsets (epoch=N;writer=TXID metadata), or
#   scan     by reading the outputs back (NF_TEST_FORCE_SCAN=1, what the mock always needs).
# after_pending: nothing of the epoch reached Kafka (everything is produced again);
# after_commit: all of it did (nothing is produced; the scan reads it all back).
# The cases are tests/kafka/recovery_rule.py's, with its exactly-once checks; its JSON lines
# ({"bench":"recovery_rule",...,"rollforward_ms":...}) go to stdout and
# perf/results/recovery-<date>.jsonl. A broker of its own (scripts/kafka.sh, stopped by pid).
#   perf/run_recovery.sh [--sizes 1000,10000,50000,100000] [--interval 10000] [--port 45092]
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=1000,10000,50000,100000
INTERVAL=10000
PORT=45092
while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) SIZES="$2"; shift 2 ;;
    --interval) INTERVAL="$2"; shift 2 ;;
    --port) PORT="$2"; shift 2 ;;
    *) echo "usage: perf/run_recovery.sh [--sizes N,N] [--interval MS] [--port P]" >&2; exit 2 ;;
  esac
done
B="${NF_PERF_BUILD_DIR:-build-perf}"
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DNF_BENCH=ON >&2
cmake --build "$B" -j "$(nproc)" --target newsflow >&2
KDIR=$(mktemp -d /tmp/nf-recovery-kafka-XXXXXX)
trap 'bash scripts/kafka.sh stop --dir "$KDIR" >/dev/null 2>&1; rm -rf "$KDIR"' EXIT
BOOT=$(bash scripts/kafka.sh start --dir "$KDIR" --port "$PORT" 2>/dev/null | tail -1)
mkdir -p perf/results
out="perf/results/recovery-$(date +%Y%m%d-%H%M%S).jsonl"
echo "{\"bench\":\"recovery.env\",\"kernel\":\"$(uname -r)\",\"commit\":\"$(git rev-parse --short HEAD)\",\"loadavg\":\"$(cut -d' ' -f1 /proc/loadavg)\",\"broker\":\"kafka 4.4.0 (1 node)\"}" | tee "$out"
NF_TEST_BROKER="kafka:$BOOT" python3 tests/kafka/recovery_rule.py "$B/newsflow" . \
  --points after_pending,after_commit --methods offsets,scan --sizes "$SIZES" \
  --interval "$INTERVAL" --no-restore | grep '^{' | tee -a "$out"
echo "run_recovery.sh: results in $out" >&2
