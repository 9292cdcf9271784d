#!/usr/bin/env bash
# What state.changelog costs and what it buys (issue 16; docs/ARCHITECTURE.md §4 "Changelog"),
# through a real Apache Kafka broker on this machine, in one run:
#   1. builds newsflow, bench_e2e and bench_restore (Release, NF_BENCH=ON, into build-perf/ or
#      $NF_PERF_BUILD_DIR);
#   2. restore: starts a broker (scripts/kafka.sh, private directory, stopped by pid), runs
#      perf/state/bench_restore for each --records size (interest-sized values, 150-300 B) and
#      once with small values (16 B, like event ids and dedup keys), deletes its topics, stops
#      the broker;
#   3. overhead: perf/run_kafka.sh with --variant state.changelog=false --variant
#      state.changelog=true (each job run made once per variant, one after the other, same rate)
#      and --admin-port, so every kafka_e2e line carries the job's changelog bytes and records
#      per event from its /metrics;
#   4. prints a summary: restore records/s and MB/s; per rate, events/s, job and broker CPU per
#      event with and without the changelog and their ratio, changelog bytes per event.
# JSON lines go to perf/results/changelog-<date>-<time>.jsonl (bench_restore's) and
# perf/results/changelog-e2e-<date>-<time>.jsonl (run_kafka.sh's); the summary is a
# "changelog_summary" line in the first. Nothing is judged: the script fails only if something
# does not run.
#
#   perf/run_changelog.sh [--quick] [--records N,...] [--rates R,...] [--intervals I,...]
#                         [--port P] [--kafka-dir DIR] [--admin-port P] [--no-restore] [--no-e2e]
#                         [-- RUN_KAFKA_ARGS...]
# --quick: restore 200k and 1M records, e2e at 20,000 events/s, 1000 ms, 10 s windows (about 5
# minutes). Default: restore 200k, 1M and 2M; e2e at 25k, 50k and 75k events/s at 1000 ms and
# 5000 ms, 60 s windows (about 30 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
B="${NF_PERF_BUILD_DIR:-build-perf}"
records=200000,1000000,2000000
rates=25000,50000,75000
intervals=1000,5000
e2e_time=()
port="${NF_E2E_KAFKA_PORT:-43392}"
kdir=""
admin_port=49464
do_restore=1
do_e2e=1
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick)
      records=200000,1000000
      rates=20000
      intervals=1000
      e2e_time=(--duration 10 --warmup 8)
      shift
      ;;
    --records) records="$2"; shift 2 ;;
    --rates) rates="$2"; shift 2 ;;
    --intervals) intervals="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    --kafka-dir) kdir="$2"; shift 2 ;;
    --admin-port) admin_port="$2"; shift 2 ;;
    --no-restore) do_restore=0; shift ;;
    --no-e2e) do_e2e=0; shift ;;
    --)
      shift
      extra=("$@")
      break
      ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
      exit 2
      ;;
    *)
      echo "run_changelog.sh: unknown option $1 (--help)" >&2
      exit 2
      ;;
  esac
done

cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DNF_BENCH=ON >&2
cmake --build "$B" -j "$(nproc)" --target newsflow bench_e2e bench_restore >&2

stamp=$(date +%Y%m%d-%H%M%S)
mkdir -p perf/results
out="perf/results/changelog-$stamp.jsonl"
tmp=$(mktemp -d "/tmp/nf-changelog-$stamp-XXXX")
[ -n "$kdir" ] || kdir="$tmp/kafka"
log() { echo "run_changelog.sh: $*" >&2; }

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  bash scripts/kafka.sh stop --dir "$kdir" >/dev/null 2>&1 || true
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "$do_restore" = 1 ]; then
  log "starting Apache Kafka in $kdir on 127.0.0.1:$port"
  brokers=$(bash scripts/kafka.sh start --fresh --dir "$kdir" --port "$port" --heap 1024 \
    2>"$tmp/kafka-start.log" | tail -1) || {
    cat "$tmp/kafka-start.log" >&2
    exit 1
  }
  broker_pid=$(bash scripts/kafka.sh pid 1 --dir "$kdir")
  p="clr-$stamp."
  "$B/perf/bench_restore" --brokers "$brokers" --broker-pid "$broker_pid" --records "$records" \
    --prefix "${p}i" | tee -a "$out"
  "$B/perf/bench_restore" --brokers "$brokers" --broker-pid "$broker_pid" --no-fetch \
    --records "${records%%,*}" --value-min 16 --value-max 16 --kind event_ids --prefix "${p}s" |
    tee -a "$out"
  bash scripts/kafka.sh tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$brokers" \
    --delete --topic 'clr-.*' >/dev/null 2>&1 || true
  bash scripts/kafka.sh stop --dir "$kdir" >&2
fi

e2e_out=""
if [ "$do_e2e" = 1 ]; then
  NF_PERF_BUILD_DIR="$B" perf/run_kafka.sh --tag changelog-e2e --no-ceiling --no-max \
    --intervals "$intervals" --rates "$rates" "${e2e_time[@]}" --port "$port" \
    --kafka-dir "$kdir" --admin-port "$admin_port" \
    --variant state.changelog=false --variant state.changelog=true "${extra[@]}" >/dev/null
  e2e_out=$(ls -t perf/results/changelog-e2e-*.jsonl | head -1)
fi

python3 - "$out" "$e2e_out" <<'PY' | tee -a "$out"
import json, sys
def rows(p):
    try:
        return [json.loads(l) for l in open(p) if l.startswith("{")]
    except OSError:
        return []
rs, es = rows(sys.argv[1]), rows(sys.argv[2]) if sys.argv[2] else []
err = sys.stderr
res = {"bench": "changelog_summary", "e2e_results": sys.argv[2]}
kind = "interest"
for r in rs:
    if r["bench"] == "changelog_restore.env":
        kind = r["kind"]
    if r["bench"] == "changelog_restore":
        k = f"restore_{kind}_{r['records']}"
        res[k + "_records_per_s"] = r["records_per_s"]
        res[k + "_mb_per_s"] = r["mb_per_s"]
        res[k + "_apply_share"] = round(r["apply_s"] / r["seconds"], 2) if r["seconds"] else 0
        print(f"restore {kind:<10}{r['records']:>10,} records {r['bytes'] / 1e6:>8.1f} MB "
              f"{r['seconds']:>7.2f} s {r['records_per_s']:>9,.0f} rec/s {r['mb_per_s']:>6.1f} MB/s"
              f"  (RocksDB side {r['apply_s']:.2f} s, Kafka side {r['kafka_s']:.2f} s)", file=err)
runs = [r for r in es if r.get("bench") == "kafka_e2e"]
by = {}
for r in runs:
    by.setdefault((r["interval_ms"], r["offered_per_s"]), {})[r.get("variant", "")] = r
print(f"\n{'interval':>8}{'offered':>9}  {'changelog':<10}{'events/s':>10}{'sust':>6}"
      f"{'job us/ev':>10}{'brk us/ev':>10}{'p99 ms':>8}{'CL B/ev':>9}{'CL rec/ev':>10}", file=err)
for (iv, rate), v in sorted(by.items()):
    for name, r in sorted(v.items()):
        print(f"{iv:>8}{rate:>9,.0f}  {name.split('=')[-1]:<10}{r['produce_per_s']:>10,.0f}"
              f"{'yes' if r['sustained'] else 'no':>6}{r['job_cpu_us_per_event']:>10}"
              f"{r['broker_cpu_us_per_event']:>10}{str(r.get('lat_ms_p99', '-')):>8}"
              f"{r.get('changelog_bytes_per_event', '-'):>9}"
              f"{r.get('changelog_records_per_event', '-'):>10}", file=err)
    off, on = v.get("state.changelog=false"), v.get("state.changelog=true")
    if off and on:
        k = f"i{iv}_r{int(rate)}"
        res[k + "_events_per_s_off"] = off["produce_per_s"]
        res[k + "_events_per_s_on"] = on["produce_per_s"]
        res[k + "_sustained_off"] = off["sustained"]
        res[k + "_sustained_on"] = on["sustained"]
        res[k + "_job_cpu_us_per_event_off"] = off["job_cpu_us_per_event"]
        res[k + "_job_cpu_us_per_event_on"] = on["job_cpu_us_per_event"]
        res[k + "_broker_cpu_us_per_event_off"] = off["broker_cpu_us_per_event"]
        res[k + "_broker_cpu_us_per_event_on"] = on["broker_cpu_us_per_event"]
        if off["job_cpu_us_per_event"]:
            res[k + "_job_cpu_ratio_on_off"] = round(
                on["job_cpu_us_per_event"] / off["job_cpu_us_per_event"], 2)
        if off["broker_cpu_us_per_event"]:
            res[k + "_broker_cpu_ratio_on_off"] = round(
                on["broker_cpu_us_per_event"] / off["broker_cpu_us_per_event"], 2)
        res[k + "_changelog_bytes_per_event"] = on.get("changelog_bytes_per_event")
        res[k + "_changelog_records_per_event"] = on.get("changelog_records_per_event")
print(json.dumps(res))
PY
log "results in $out${e2e_out:+ and $e2e_out}"
