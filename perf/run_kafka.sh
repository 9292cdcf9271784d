#!/usr/bin/env bash
# End to end through a real Apache Kafka broker (scripts/kafka.sh: 4.4.0, KRaft, one node on
# loopback), broker and job side by side on this machine, in one run:
#   1. builds newsflow and perf/kafka/bench_e2e (Release, NF_BENCH=ON, into build-perf/ or
#      $NF_PERF_BUILD_DIR);
#   2. starts its own broker (private directory and port, stopped by pid at the end, also on
#      error or Ctrl-C);
#   3. the broker alone, with Kafka's own tools from the same jars: ProducerPerformance with
#      payloads shaped like the job's read events (--payload-file, random keys), the same
#      producer settings as the load generator; ConsumerPerformance reading them back; and a
#      transactional ProducerPerformance (1 s transactions) with payloads shaped like
#      interest-updates, read back read_committed (the job's output path, without the job);
#   4. the job, for each checkpoint.interval_ms (1000 and 5000): a fresh job per run (own topics,
#      own state, crawls the bundled example feeds first so read events name real articles),
#      bench_e2e producing read-events at an offered rate for --warmup s + --duration s and
#      reading interest-updates and trending read_committed. Rates double from --start-rate
#      until a run is not sustained, then the midpoint between the last sustained rate and that
#      one is tried once (--rates LIST runs exactly those instead); then one run at the
#      producer's maximum (--no-max skips it);
#   5. prints a summary: the highest sustained rate per interval, its latency, the CPU split,
#      and the ratios against the broker-alone figures.
# JSON lines go to stdout and to perf/results/kafka-<date>-<time>.jsonl (gitignored); progress,
# the job's and the tools' chatter go to stderr or to the run directory (kept with --keep).
#
#   perf/run_kafka.sh [--quick] [--intervals 1000,5000] [--rates R,...] [--start-rate R]
#                     [--duration S] [--warmup S] [--users U] [--ceiling-records N]
#                     [--port P] [--no-ceiling] [--no-max] [--keep] [--coalesce] [--job-set K=V]...
#                     [--variant K=V[,K=V...]]... [--admin-port P] [--kafka-dir DIR] [--tag T]
#                     [--processes N[,M...]] [--partitions P] [-- BENCH_E2E_ARGS...]
# --job-set K=V: one more --set for every job run, e.g. --job-set interest.coalesce=true.
# --variant K=V,...: every job run is made once per variant (in the order given, one after the
# other at the same interval and rate), the variant's keys as more --set; its kafka_e2e line
# names it ("variant"). The rate search then goes on while every variant is sustained; the
# summary's per-interval keys are per variant (i<interval>.<variant>_...). E.g.
# --variant state.changelog=false --variant state.changelog=true (perf/run_changelog.sh).
# --admin-port P: the job serves its admin endpoints on P (else admin.enabled=false; keep P, P+1,
# ... below the ephemeral range, /proc/sys/net/ipv4/ip_local_port_range: a client's local port
# there, also in TIME_WAIT, makes the job's bind fail with "Address already in use"); /metrics is
# read just before each bench_e2e run and just after it, and the kafka_e2e line gets the
# differences of newsflow_read_events_total, newsflow_changelog_records_total and
# newsflow_changelog_bytes_total, and changelog_bytes_per_event (their ratio).
# --kafka-dir DIR: the broker's directory (default: inside the run's temporary directory); it is
# wiped at start (--fresh) and the broker stopped by pid at the end either way.
# --tag T: the results file is perf/results/<T>-<date>-<time>.jsonl (default kafka).
# --processes N[,M...]: one job in N processes (docs/design.md §9, tests/kafka/scale_out.py), for
# each N in turn (at every interval and rate): kafka.assignment=group,
# kafka.static_membership=true, state.changelog=true, one consumer group and topic prefix, each
# process its own state directory, transactional id (<prefix>tx-p<K>), log and admin port
# (--admin-port P: P, P+1, ...). All N are started at once and waited for until each logs
# "ready: /readyz answers 200"; bench_e2e sums their CPU (--job-pid P1,P2,...) and pools their
# epochs; the kafka_e2e line gets "processes" and "assignment" (each process's partitions at the
# end of the window, from the group's description). Without --processes the job is one process
# with kafka.assignment=all, as before. Latency is the interest updates' (trending is merged by
# the one process that owns trending-panes; its lists are only counted).
# --partitions P: partitions of every topic of a run (default 4; 6 with --processes: the
# cooperative-sticky assignor balances read-events and sources partitions together, so with few
# partitions a process can get only sources partitions).
# --coalesce: the job with interest.coalesce=true, and bench_e2e measuring every event's own
# latency (--per-event 1: a user's record stands for all its reads of the epoch).
# --quick: a smoke run (10 s windows, one rate, 1M records for the ceiling; ~4 minutes).
# Arguments after -- go to every bench_e2e run (e.g. -- --update-frac 0.1 --users 20000).
# Timings are never judged here: the script fails only if something does not run.
set -euo pipefail
cd "$(dirname "$0")/.."
B="${NF_PERF_BUILD_DIR:-build-perf}"
intervals=1000,5000
rates=""
start_rate=25000
duration=60
warmup=20
users=1000000
ceiling_records=10000000
port="${NF_E2E_KAFKA_PORT:-43392}"
do_ceiling=1
do_max=1
keep=0
bench_extra=()
job_sets=()
coalesce=0
variants=()
admin_port=""
kdir_opt=""
tag=kafka
procs_list=""
partitions=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick)
      duration=10
      warmup=8
      rates=20000
      ceiling_records=1000000
      do_max=0
      shift
      ;;
    --intervals) intervals="$2"; shift 2 ;;
    --rates) rates="$2"; shift 2 ;;
    --start-rate) start_rate="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --users) users="$2"; shift 2 ;;
    --ceiling-records) ceiling_records="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    --no-ceiling) do_ceiling=0; shift ;;
    --no-max) do_max=0; shift ;;
    --keep) keep=1; shift ;;
    --job-set) job_sets+=(--set "$2"); shift 2 ;;
    --variant) variants+=("$2"); shift 2 ;;
    --admin-port) admin_port="$2"; shift 2 ;;
    --kafka-dir) kdir_opt="$2"; shift 2 ;;
    --tag) tag="$2"; shift 2 ;;
    --processes) procs_list="$2"; shift 2 ;;
    --partitions) partitions="$2"; shift 2 ;;
    --coalesce) job_sets+=(--set interest.coalesce=true); coalesce=1; shift ;;
    --)
      shift
      bench_extra=("$@")
      break
      ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
      exit 2
      ;;
    *)
      echo "run_kafka.sh: unknown option $1 (--help)" >&2
      exit 2
      ;;
  esac
done

cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DNF_BENCH=ON >&2
cmake --build "$B" -j "${NF_PERF_JOBS:-$(nproc)}" --target newsflow bench_e2e >&2
NF="$B/newsflow"
E2E="$B/perf/bench_e2e"

stamp=$(date +%Y%m%d-%H%M%S)
mkdir -p perf/results
out="perf/results/$tag-$stamp.jsonl"
run_dir=$(mktemp -d "/tmp/nf-e2e-$stamp-XXXX")
kdir="${kdir_opt:-$run_dir/kafka}"
[ ${#variants[@]} -gt 0 ] || variants=("")
[ -n "$partitions" ] || partitions=$([ -n "$procs_list" ] && echo 6 || echo 4)
job_pids=() # the running job's processes (one without --processes)
nprocs=""   # processes of the current runs ("" = one process, kafka.assignment=all)

log() { echo "run_kafka.sh: $*" >&2; }
emit() { # a JSON line to stdout and to the results file
  printf '%s\n' "$1" | tee -a "$out"
}

any_alive() { # any_alive PID...: whether one of them still runs
  local q
  for q in "$@"; do
    [ -d "/proc/$q" ] && return 0
  done
  return 1
}

stop_job() { # every process of the job: SIGTERM to all, 30 s, then SIGKILL to what is left
  [ ${#job_pids[@]} -gt 0 ] || return 0
  local q
  for q in "${job_pids[@]}"; do
    kill -TERM "$q" 2>/dev/null || true
  done
  for _ in $(seq 1 300); do
    any_alive "${job_pids[@]}" || break
    sleep 0.1
  done
  for q in "${job_pids[@]}"; do
    if [ -d "/proc/$q" ]; then
      log "the job (pid $q) did not stop within 30 s of SIGTERM; killing it"
      kill -KILL "$q" 2>/dev/null || true
    fi
    wait "$q" 2>/dev/null || true
  done
  job_pids=()
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_job
  bash scripts/kafka.sh stop --dir "$kdir" >/dev/null 2>&1 || true
  if [ "$keep" = 1 ]; then
    log "kept $run_dir"
  else
    rm -rf "$run_dir"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The broker listens on PORT and its controller on PORT+100: both must be free.
port_busy() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }
for _ in $(seq 1 20); do
  if port_busy "$port" || port_busy "$((port + 100))"; then
    port=$((port + 7))
  else
    break
  fi
done
# With --processes the broker keeps Kafka's default group.initial.rebalance.delay.ms (3000, the
# test broker's is 0): the N processes, started together, then join one generation and get one
# assignment that interleaves both topics' partitions. With 0, the first to join takes every
# partition and the next ones take partitions from it topic by topic (seen: one process with all
# of read-events, the other with all of sources).
[ -z "$procs_list" ] || export NF_KAFKA_INITIAL_REBALANCE_DELAY_MS=3000
log "starting Apache Kafka in $kdir on 127.0.0.1:$port"
brokers=$(bash scripts/kafka.sh start --fresh --dir "$kdir" --port "$port" --heap 1024 2>"$run_dir/kafka-start.log" |
  tail -1) || {
  cat "$run_dir/kafka-start.log" >&2
  exit 1
}
broker_pid=$(bash scripts/kafka.sh pid 1 --dir "$kdir")
log "broker pid $broker_pid at $brokers; results in $out"

# Waits until every partition of the prefix's topics has a leader (a job started on a topic
# created a moment ago can meet "Not leader for partition").
wait_topics() {
  local prefix="$1" want="$2" n=0
  for _ in $(seq 1 150); do
    n=$(kcat -b "$brokers" -L -m 5 2>/dev/null | awk -v p="\"$prefix" '
      /^  topic /{ t = index($2, p) == 1 }
      t && /partition [0-9]+, leader [0-9]+,/ { n++ }
      END { print n + 0 }')
    [ "$n" -ge "$want" ] && return 0
    sleep 0.2
  done
  log "topics $prefix*: $n of $want partitions have a leader after 30 s"
  return 1
}

create_topics() { # create_topics PREFIX [N]: every topic of the job (its changelogs too), N partitions each
  local lines
  lines=$("$NF" topics create --set kafka.brokers="$brokers" --set kafka.topic_prefix="$1" \
    --partitions "${2:-4}" 2>>"$run_dir/topics.log") || true
  printf '%s\n' "$lines" >>"$run_dir/topics.log"
  # one line per topic, "<topic> created|exists <partitions>": wait for all their leaders
  wait_topics "$1" "$(printf '%s\n' "$lines" | awk '$NF ~ /^[0-9]+$/ { n += $NF } END { print n + 0 }')"
}

delete_topics() { # frees the broker's disk between runs
  bash scripts/kafka.sh tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$brokers" \
    --delete --topic "$(printf '%s' "$1" | sed 's/[.]/[.]/g').*" >>"$run_dir/topics.log" 2>&1 || true
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

env_line() {
  python3 - "$@" <<'PY'
import json, os, platform, subprocess, sys
def sh(c):
    try:
        return subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
    except Exception:
        return ""
print(json.dumps({
    "bench": "kafka_env", "date": sys.argv[1], "commit": sh("git rev-parse --short=12 HEAD"),
    "dirty": bool(sh("git status --porcelain -- src")), "kernel": platform.release(),
    "cpus": os.cpu_count(), "cpu_model": sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"),
    "loadavg": [float(x) for x in open("/proc/loadavg").read().split()[:3]],
    "kafka": "4.4.0", "java": sh("java -version 2>&1 | head -1"),
    "librdkafka": sh("pkg-config --modversion rdkafka"), "broker_heap_mb": 1024,
    "intervals": sys.argv[2], "duration_s": float(sys.argv[3]), "warmup_s": float(sys.argv[4]),
    "users": int(sys.argv[5])}))
PY
}

# ---- 3. the broker alone -------------------------------------------------------------------
ceiling() {
  local p="ceil-$stamp." n="$ceiling_records" t0 t1 b0 b1 tool_cpu
  create_topics "$p"
  # Payloads: 10,000 read events as bench_e2e writes them (132 B), and 10,000 records shaped
  # like interest-updates (an 8-topic vector, ~250 B).
  python3 - "$run_dir/events.txt" "$run_dir/updates.txt" <<'PY'
import random, sys
r = random.Random(42)
arts = ["%032x" % r.getrandbits(128) for _ in range(8)]
with open(sys.argv[1], "w") as f:
    for i in range(10000):
        f.write('{"event_id":"e%d","user_id":"u%d","article_id":"%s","session_id":"s%d","ts":%d}\n'
                % (10000000 + i, r.randrange(1000000), r.choice(arts), 10000000 + i,
                   1764085278660 + i))
topics = ["science", "energy", "politics", "world", "health", "sports", "technology", "business"]
with open(sys.argv[2], "w") as f:
    for i in range(10000):
        v = ",".join('"%s":%.9f' % (t, r.random()) for t in r.sample(topics, 4))
        f.write('{"user_id":"u%d","version":%d,"vector":{%s},"updated_at":"2026-11-25T15:41:18.%03dZ"}\n'
                % (r.randrange(1000000), r.randrange(1, 50), v, i % 1000))
PY
  local props=(acks=all enable.idempotence=true linger.ms=10 batch.size=1000000
    compression.type=none "bootstrap.servers=$brokers")
  # 1. producer: the read-events side (what the load generator does)
  b0=$(cpu_ticks "$broker_pid")
  t0=$(date +%s.%N)
  /usr/bin/time -f "%U %S" -o "$run_dir/time.prod" \
    bash scripts/kafka.sh tool org.apache.kafka.tools.ProducerPerformance \
    --topic "${p}read-events" --num-records "$n" --throughput -1 \
    --payload-file "$run_dir/events.txt" --key-distribution random --record-key-range 1000000 \
    --warmup-records "$((n / 5))" --command-property "${props[@]}" \
    >"$run_dir/ceil-prod.txt" 2>"$run_dir/ceil-prod.err" || true
  t1=$(date +%s.%N)
  b1=$(cpu_ticks "$broker_pid")
  tool_cpu=$(awk '{print $1 + $2}' "$run_dir/time.prod")
  emit "$(ceil_json producer "$run_dir/ceil-prod.txt" "$n" "$t0" "$t1" "$b0" "$b1" "$tool_cpu")"
  # 2. consumer: reads them back
  b0=$(cpu_ticks "$broker_pid")
  t0=$(date +%s.%N)
  /usr/bin/time -f "%U %S" -o "$run_dir/time.cons" \
    bash scripts/kafka.sh tool org.apache.kafka.tools.ConsumerPerformance \
    --bootstrap-server "$brokers" --topic "${p}read-events" --num-records "$n" --timeout 30000 \
    --command-property isolation.level=read_committed auto.offset.reset=earliest \
    >"$run_dir/ceil-cons.txt" 2>"$run_dir/ceil-cons.err" || true
  t1=$(date +%s.%N)
  b1=$(cpu_ticks "$broker_pid")
  tool_cpu=$(awk '{print $1 + $2}' "$run_dir/time.cons")
  emit "$(ceil_json consumer "$run_dir/ceil-cons.txt" "$n" "$t0" "$t1" "$b0" "$b1" "$tool_cpu")"
  # 3. transactional producer, 1 s transactions: the job's output path without the job
  b0=$(cpu_ticks "$broker_pid")
  t0=$(date +%s.%N)
  /usr/bin/time -f "%U %S" -o "$run_dir/time.txn" \
    bash scripts/kafka.sh tool org.apache.kafka.tools.ProducerPerformance \
    --topic "${p}interest-updates" --num-records "$n" --throughput -1 \
    --payload-file "$run_dir/updates.txt" --key-distribution random --record-key-range 1000000 \
    --transactional-id "${p}perf-tx" --transaction-duration-ms 1000 \
    --warmup-records "$((n / 5))" --command-property "${props[@]}" \
    >"$run_dir/ceil-txn.txt" 2>"$run_dir/ceil-txn.err" || true
  t1=$(date +%s.%N)
  b1=$(cpu_ticks "$broker_pid")
  tool_cpu=$(awk '{print $1 + $2}' "$run_dir/time.txn")
  emit "$(ceil_json producer_txn "$run_dir/ceil-txn.txt" "$n" "$t0" "$t1" "$b0" "$b1" "$tool_cpu")"
  # 4. read_committed consumer of the transactional records
  b0=$(cpu_ticks "$broker_pid")
  t0=$(date +%s.%N)
  /usr/bin/time -f "%U %S" -o "$run_dir/time.ctx" \
    bash scripts/kafka.sh tool org.apache.kafka.tools.ConsumerPerformance \
    --bootstrap-server "$brokers" --topic "${p}interest-updates" --num-records "$n" \
    --timeout 30000 --command-property isolation.level=read_committed auto.offset.reset=earliest \
    >"$run_dir/ceil-ctx.txt" 2>"$run_dir/ceil-ctx.err" || true
  t1=$(date +%s.%N)
  b1=$(cpu_ticks "$broker_pid")
  tool_cpu=$(awk '{print $1 + $2}' "$run_dir/time.ctx")
  emit "$(ceil_json consumer_txn "$run_dir/ceil-ctx.txt" "$n" "$t0" "$t1" "$b0" "$b1" "$tool_cpu")"
  delete_topics "$p"
}

# ceil_json WHAT TOOL_OUTPUT N T0 T1 BROKER_TICKS0 BROKER_TICKS1 TOOL_CPU_S: one JSON line
ceil_json() {
  python3 - "$@" "$(getconf CLK_TCK)" <<'PY'
import json, re, sys
what, path, n, t0, t1, b0, b1, tool_cpu, tck = sys.argv[1:10]
text = open(path).read()
res = {"bench": "kafka_ceiling", "tool": what, "records": int(n),
       "wall_s": round(float(t1) - float(t0), 2),
       "cpu_broker_s": round((int(b1) - int(b0)) / float(tck), 2),
       "cpu_tool_s": round(float(tool_cpu or 0), 2)}
if what.startswith("producer"):
    # the steady-state line (after --warmup-records) if there is one, else the whole run
    lines = [l for l in text.splitlines() if "records/sec" in l and "records sent" in l]
    steady = [l for l in lines if "steady" in l.lower()]
    line = (steady or lines or [""])[-1]
    m = re.search(r"([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
                  r"([\d.]+) ms max latency(?:, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th)?",
                  line)
    if m:
        res.update({"records_per_s": round(float(m.group(1))), "mb_per_s": float(m.group(2)),
                    "lat_ms_avg": float(m.group(3)), "lat_ms_max": float(m.group(4))})
        if m.group(5):
            res.update({"lat_ms_p50": int(m.group(5)), "lat_ms_p99": int(m.group(7))})
    res["steady_state_line"] = bool(steady)
else:
    rows = [l for l in text.splitlines() if re.match(r"^\d{4}-", l)]
    if rows:
        f = [x.strip() for x in rows[-1].split(",")]
        # start, end, MB, MB/s, nMsg, nMsg/s, rebalance ms, fetch ms, fetch MB/s, fetch nMsg/s
        res.update({"records_read": int(float(f[4])), "records_per_s": round(float(f[9])),
                    "mb_per_s": float(f[8]), "fetch_ms": int(float(f[7]))})
if "records_per_s" not in res:
    res["error"] = "no result line in " + path
elif res["records_per_s"]:
    res["broker_cpu_us_per_record"] = round(res["cpu_broker_s"] * 1e6 / int(n), 2)
print(json.dumps(res))
PY
}

# ---- 4. the job ----------------------------------------------------------------------------
run_no=0
last_json=""
# start_job INTERVAL PREFIX STATE_DIR LOG [VARIANT]: a fresh job, in the background (job_pids,
# and job_logs: its stderr files), waited for until it logs "newsflow started"; retried when it
# stops first (a partition of topics created a moment ago can still answer "Not leader for
# partition" although its leader is known). With --processes (nprocs set): nprocs processes of
# one job, STATE_DIR-p<K> and LOG without .log plus -p<K>.log, all started at once and waited
# for until each logs "ready: /readyz answers 200" (it has partitions from the group and its
# first epoch committed); a retry restarts them all.
start_job() {
  local interval="$1" p="$2" st="$3" joblog="$4" variant="${5:-}" attempt kv k n="${nprocs:-1}"
  local ready_msg='"msg":"newsflow started"' common=() per=() dead
  for kv in ${variant//,/ }; do
    common+=(--set "$kv")
  done
  if [ -n "$nprocs" ]; then
    ready_msg='"msg":"ready: /readyz answers 200"'
    common+=(--set kafka.assignment=group --set kafka.static_membership=true
      --set state.changelog=true)
  else
    common+=(--set kafka.assignment=all --set kafka.transactional_id="${p}tx")
  fi
  job_logs=()
  for k in $(seq 1 "$n"); do
    if [ -n "$nprocs" ]; then
      job_logs+=("${joblog%.log}-p$k.log")
    else
      job_logs+=("$joblog")
    fi
  done
  for attempt in 1 2 3 4 5; do
    job_pids=()
    for k in $(seq 1 "$n"); do
      per=(--set admin.enabled=false)
      if [ -n "$admin_port" ]; then
        per=(--set admin.enabled=true --set admin.port="$((admin_port + k - 1))")
      fi
      if [ -n "$nprocs" ]; then
        per+=(--set kafka.transactional_id="${p}tx-p$k" --set state.dir="$st-p$k")
        rm -rf "$st-p$k"
      else
        per+=(--set state.dir="$st")
        rm -rf "$st"
      fi
      "$NF" run --set kafka.brokers="$brokers" --set kafka.topic_prefix="$p" \
        --set kafka.group_id="${p}group" --set sink.spec=none \
        --set checkpoint.interval_ms="$interval" --set demo.read_events_per_s=0 \
        --set sources.file=examples/feeds/sources.txt \
        --set log.progress_interval_ms=5000 "${common[@]}" "${per[@]}" "${job_sets[@]}" \
        2>"${job_logs[$((k - 1))]}" &
      job_pids+=($!)
    done
    dead=""
    for _ in $(seq 1 1200); do
      local all=1
      for k in $(seq 1 "$n"); do
        grep -q "$ready_msg" "${job_logs[$((k - 1))]}" || all=0
        [ -d "/proc/${job_pids[$((k - 1))]}" ] || dead=$k
      done
      [ "$all" = 1 ] && return 0
      [ -z "$dead" ] || break
      sleep 0.1
    done
    stop_job
    log "the job did not start (attempt $attempt${dead:+, process $dead exited}): $(tail -1 \
      "${job_logs[$((${dead:-1} - 1))]}" | cut -c1-300)"
    sleep 2
  done
  return 1
}
# metrics_snapshot FILE: the job's /metrics counters this script reports (with --admin-port),
# summed over its processes by with_metrics (one block per process, same names)
metrics_snapshot() {
  [ -n "$admin_port" ] || return 0
  local k
  : >"$1"
  for k in $(seq 1 "${nprocs:-1}"); do
    curl -s --max-time 5 "http://127.0.0.1:$((admin_port + k - 1))/metrics" 2>/dev/null |
      grep -E '^newsflow_(read_events_total|changelog_records_total|changelog_bytes_total)[ {]' \
        >>"$1" || true
  done
}
# assignment_json GROUP: {"p1":{"read-events":[0,3],"sources":[1]},...}, what the group's
# members own now (static members: the consumer id starts with the transactional id); {} when the
# group cannot be described
assignment_json() {
  NF_KAFKA_TOOL_HEAP=256 bash scripts/kafka.sh tool \
    org.apache.kafka.tools.consumer.group.ConsumerGroupCommand --bootstrap-server "$brokers" \
    --describe --group "$1" 2>/dev/null | python3 -c '
import json, re, sys
out = {}
for l in sys.stdin:
    f = l.split()
    if len(f) < 7 or not f[2].isdigit():
        continue
    topic, part, cid = f[1], int(f[2]), f[6]
    m = re.search(r"tx-(p\d+)", cid)
    if not m:
        continue
    kind = topic.rsplit(".", 1)[-1]
    out.setdefault(m.group(1), {}).setdefault(kind, []).append(part)
for v in out.values():
    for k in v:
        v[k].sort()
print(json.dumps(dict(sorted(out.items()))))' || echo '{}'
}
# with_metrics JSON BEFORE AFTER VARIANT [PROCESSES ASSIGNMENT]: JSON with the variant, the
# metrics' differences and (with --processes) the number of processes and their partitions
with_metrics() {
  python3 - "$@" <<'PY'
import json, sys
line, before, after, variant = sys.argv[1:5]
procs, assign = (sys.argv[5:7] + ["", ""])[:2]
def read(path):
    out = {}
    try:
        for l in open(path):
            f = l.split()
            name = f[0].partition("{")[0]
            out[name] = out.get(name, 0) + float(f[-1])
    except OSError:
        pass
    return out
try:
    r = json.loads(line)
except ValueError:
    print(line)
    sys.exit(0)
if variant:
    r["variant"] = variant
if procs:
    r["processes"] = int(procs)
    try:
        r["assignment"] = json.loads(assign or "{}")
    except ValueError:
        r["assignment"] = {}
b, a = read(before), read(after)
if a:
    d = {k: a.get(k, 0) - b.get(k, 0) for k in a}
    ev = d.get("newsflow_read_events_total", 0)
    r["metrics_read_events"] = int(ev)
    r["metrics_changelog_records"] = int(d.get("newsflow_changelog_records_total", 0))
    r["metrics_changelog_bytes"] = int(d.get("newsflow_changelog_bytes_total", 0))
    if ev:
        r["changelog_bytes_per_event"] = round(r["metrics_changelog_bytes"] / ev, 1)
        r["changelog_records_per_event"] = round(r["metrics_changelog_records"] / ev, 3)
print(json.dumps(r))
PY
}
# run_job INTERVAL RATE(0 = max): run_one once per variant; last_json is the last one's, and
# all_sustained says whether every variant's run was sustained
run_job() {
  local v
  all_sustained=1
  for v in "${variants[@]}"; do
    run_one "$1" "$2" "$v"
    sustained "$last_json" || all_sustained=0
  done
}
# run_one INTERVAL RATE VARIANT: one fresh job, one bench_e2e run; sets last_json
run_one() {
  local interval="$1" rate="$2" variant="$3" p st joblog pids logs assign="" k
  run_no=$((run_no + 1))
  p="e2e-$stamp-$run_no."
  st="$run_dir/state-$run_no"
  joblog="$run_dir/job-$run_no.log"
  create_topics "$p" "$partitions"
  # N processes starting at once are N chances to meet "Not leader for partition" on topics just
  # created (and a retry restarts them all): give the leaders a moment more
  [ -z "$nprocs" ] || sleep 2
  start_job "$interval" "$p" "$st" "$joblog" "$variant" || {
    emit "{\"bench\":\"kafka_e2e_failed\",\"run\":$run_no,\"interval_ms\":$interval,\"offered_per_s\":$rate,\"variant\":\"$variant\",\"processes\":${nprocs:-1},\"error\":\"the job did not start\"}"
    last_json=""
    delete_topics "$p"
    return 0
  }
  pids=$(IFS=,; echo "${job_pids[*]}")
  logs=$(IFS=,; echo "${job_logs[*]}")
  log "run $run_no: interval ${interval} ms, offered ${rate} events/s (0 = max), job pid $pids${variant:+, $variant}${nprocs:+, $nprocs processes}"
  metrics_snapshot "$run_dir/metrics-$run_no.before"
  last_json=$("$E2E" --brokers "$brokers" --prefix "$p" --rate "$rate" --duration "$duration" \
    --warmup "$warmup" --users "$users" --interval-ms "$interval" --job-pid "$pids" \
    --broker-pid "$broker_pid" --job-log "$logs" --label "run$run_no" \
    --per-event "$coalesce" "${bench_extra[@]}" 2>>"$run_dir/bench.log" | tail -1) || true
  [ -n "$last_json" ] ||
    last_json="{\"bench\":\"kafka_e2e_failed\",\"run\":$run_no,\"interval_ms\":$interval,\"offered_per_s\":$rate,\"variant\":\"$variant\"}"
  metrics_snapshot "$run_dir/metrics-$run_no.after"
  [ -z "$nprocs" ] || assign=$(assignment_json "${p}group")
  last_json=$(with_metrics "$last_json" "$run_dir/metrics-$run_no.before" \
    "$run_dir/metrics-$run_no.after" "$variant" "$nprocs" "$assign")
  tail -1 "$run_dir/bench.log" >&2
  [ -z "$assign" ] || log "run $run_no: partitions at the end: $assign"
  for k in $(seq 1 "${#job_pids[@]}"); do
    if [ ! -d "/proc/${job_pids[$((k - 1))]}" ]; then
      log "the job's process $k exited during run $run_no; its log:"
      tail -5 "${job_logs[$((k - 1))]}" >&2
    fi
  done
  stop_job
  emit "$last_json"
  rm -rf "$st" "$st"-p*
  delete_topics "$p"
  sleep 3
}

sustained() { python3 -c 'import json,sys; sys.exit(0 if json.loads(sys.argv[1]).get("sustained") else 1)' "$1" 2>/dev/null; }

emit "$(env_line "$stamp" "$intervals" "$duration" "$warmup" "$users")"
if [ "$do_ceiling" = 1 ]; then
  log "broker alone: $ceiling_records records each (ProducerPerformance, ConsumerPerformance)"
  ceiling
fi
for interval in ${intervals//,/ }; do
  pl="${procs_list:--}"
  for np in ${pl//,/ }; do
    nprocs="${np#-}" # "-": no --processes, one process with kafka.assignment=all
    if [ -n "$rates" ]; then
      for r in ${rates//,/ }; do
        run_job "$interval" "$r"
      done
    else
      ok=0
      r="$start_rate"
      bad=0
      while [ "$r" -le 1600000 ]; do
        run_job "$interval" "$r"
        if [ "$all_sustained" = 1 ]; then
          ok=$r
          r=$((r * 2))
        else
          bad=$r
          break
        fi
      done
      if [ "$bad" -gt 0 ] && [ "$ok" -gt 0 ]; then
        run_job "$interval" $(((ok + bad) / 2 / 1000 * 1000))
      fi
    fi
    if [ "$do_max" = 1 ]; then
      run_job "$interval" 0
    fi
  done
done
nprocs=""

python3 - "$out" <<'PY' | tee -a "$out"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
ceil = {r["tool"]: r for r in rows if r.get("bench") == "kafka_ceiling"}
runs = [r for r in rows if r.get("bench") == "kafka_e2e"]
env = next((r for r in rows if r.get("bench") == "kafka_env"), {})
def cr(t):
    return ceil.get(t, {}).get("records_per_s") or 0
out = sys.stderr
print(f"\nload average at start {env.get('loadavg')}; {env.get('cpus')} CPUs", file=out)
if ceil:
    print("\nbroker alone (Kafka's own perf tools, same broker):", file=out)
    print(f"{'tool':<14}{'records/s':>12}{'MB/s':>8}{'broker CPU us/rec':>19}"
          f"{'broker CPU s':>13}{'tool CPU s':>11}", file=out)
    for t, r in ceil.items():
        print(f"{t:<14}{r.get('records_per_s', 0):>12,}{r.get('mb_per_s', 0):>8.1f}"
              f"{r.get('broker_cpu_us_per_record', 0):>19}{r.get('cpu_broker_s', 0):>13}"
              f"{r.get('cpu_tool_s', 0):>11}", file=out)
p, c, pt, ct = cr("producer"), cr("consumer"), cr("producer_txn"), cr("consumer_txn")
# Every event crosses the broker four times: produced (read-events), fetched by the job,
# produced in a transaction (interest-updates), fetched read_committed. The tools' records/s
# include their own (Java) client's CPU on the same two cores; the broker's CPU per record does
# not: their sum is what the broker alone spends per event of the pipeline.
us = [ceil.get(t, {}).get("broker_cpu_us_per_record") for t in
      ("producer", "consumer", "producer_txn", "consumer_txn")]
brk_us = round(sum(us), 2) if all(us) else 0
print("\njob end to end (one row per run):", file=out)
print(f"{'interval':>8}{'offered':>9}{'produced':>10}{'outputs/s':>10}{'sust':>6}"
      f"{'p50 ms':>8}{'p99 ms':>8}{'p99/int':>8}{'job CPU':>8}{'broker':>7}{'loadgen':>8}"
      f"{'other':>7}{'job us/ev':>10}{'brk us/ev':>10}{'vs prod':>8}{'load':>6}", file=out)
def g(r, k):
    v = r.get(k)
    return "-" if v is None else v
head = None
for r in runs:
    h = (r.get("variant", ""), r.get("processes"), json.dumps(r.get("assignment")))
    if (r.get("variant") or r.get("processes")) and h != head:
        print(f"  {h[0]}" + (f" {h[1]} process(es), partitions {h[2]}" if h[1] else "") + ":",
              file=out)
    head = h
    print(f"{r['interval_ms']:>8}{r['offered_per_s']:>9,.0f}{r['produce_per_s']:>10,.0f}"
          f"{r['outputs_per_s']:>10,.0f}{'yes' if r['sustained'] else 'no':>6}"
          f"{g(r, 'lat_ms_p50'):>8}{g(r, 'lat_ms_p99'):>8}{g(r, 'p99_over_interval'):>8}"
          f"{r['cpu_job_s']:>8}{r['cpu_broker_s']:>7}{r['cpu_loadgen_s']:>8}{r['cpu_other_s']:>7}"
          f"{r['job_cpu_us_per_event']:>10}{r['broker_cpu_us_per_event']:>10}"
          f"{(r['produce_per_s'] / p if p else 0):>8.3f}{r['loadavg_start'][0]:>6}", file=out)
res = {"bench": "kafka_summary", "producer_ceiling_per_s": p, "consumer_ceiling_per_s": c,
       "producer_txn_ceiling_per_s": pt, "consumer_txn_ceiling_per_s": ct,
       "broker_alone_cpu_us_per_event": brk_us}
def procs(r):
    return r.get("processes", 0)
one = {}  # (interval, variant) -> the best sustained run with 1 process, for the ratios
for iv, var, np in sorted({(r["interval_ms"], r.get("variant", ""), procs(r)) for r in runs}):
    mine = [r for r in runs if r["interval_ms"] == iv and r.get("variant", "") == var
            and procs(r) == np]
    ok = [r for r in mine if r["sustained"] and r["mode"] == "rate"]
    best = max(ok, key=lambda r: r["produce_per_s"]) if ok else None
    mx = next((r for r in mine if r["mode"] == "max"), None)
    k = f"i{iv}" + (f".{var}" if var else "") + (f".n{np}" if np else "")
    if best and np == 1:
        one[(iv, var)] = best
    if best and np > 1 and (iv, var) in one:
        b1 = one[(iv, var)]
        res[f"{k}_sustained_vs_n1"] = round(best["produce_per_s"] / b1["produce_per_s"], 2)
        if b1["job_cpu_us_per_event"]:
            res[f"{k}_job_cpu_per_event_vs_n1"] = round(
                best["job_cpu_us_per_event"] / b1["job_cpu_us_per_event"], 2)
    if best and np:
        res[f"{k}_assignment"] = best.get("assignment")
    if best:
        res[f"{k}_sustained_per_s"] = best["produce_per_s"]
        res[f"{k}_p50_ms"] = best["lat_ms_p50"]
        res[f"{k}_p99_ms"] = best["lat_ms_p99"]
        res[f"{k}_p99_over_interval"] = best["p99_over_interval"]
        res[f"{k}_cpu_job_s"] = best["cpu_job_s"]
        res[f"{k}_cpu_broker_s"] = best["cpu_broker_s"]
        if p:
            res[f"{k}_sustained_vs_producer_ceiling"] = round(best["produce_per_s"] / p, 3)
        res[f"{k}_job_cpu_us_per_event"] = best["job_cpu_us_per_event"]
        res[f"{k}_broker_cpu_us_per_event"] = best["broker_cpu_us_per_event"]
        if brk_us:
            res[f"{k}_broker_e2e_vs_alone_cpu_per_event"] = round(
                best["broker_cpu_us_per_event"] / brk_us, 2)
        if best["broker_cpu_us_per_event"]:
            res[f"{k}_job_vs_broker_cpu_per_event"] = round(
                best["job_cpu_us_per_event"] / best["broker_cpu_us_per_event"], 2)
        res[f"{k}_target_200k_met"] = best["produce_per_s"] >= 200000
        res[f"{k}_p99_le_2x_interval"] = (best["p99_over_interval"] or 99) <= 2
        if "changelog_bytes_per_event" in best:
            res[f"{k}_changelog_bytes_per_event"] = best["changelog_bytes_per_event"]
    else:
        res[f"{k}_sustained_per_s"] = 0
    if mx:
        res[f"{k}_max_outputs_per_s"] = mx["outputs_per_s"]
        if p:
            res[f"{k}_max_outputs_vs_producer_ceiling"] = round(mx["outputs_per_s"] / p, 3)
print(json.dumps(res))
PY
log "results in $out"
