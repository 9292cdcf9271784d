#!/usr/bin/env bash
# The HTTP ingest edge (POST /v1/events) beside seed 003's design, in one run on one broker
# (perf/README.md, "HTTP edge and authentication (issue 38)", says how to read the report):
#   1. installs the Koa peer (perf/edge/koa/install.sh: npm ci) and checks its validator
#      (perf/edge/koa/check.js); builds newsflow (Release, build-perf/) unless --build names a
#      build directory, used as it is;
#   2. starts one Apache Kafka node (scripts/kafka.sh, /tmp/nf-edgeperf-kafka, port 32092,
#      fresh) and creates read-events with 6 partitions;
#   3. one server after the other, each pinned to the same CPUs (--server-cpus, default 0), the
#      load generator and the broker pinned to the others (--load-cpus, --broker-cpus, default 1):
#        koa        perf/edge/koa/server.js, one kafkajs send per request (port 32480)
#        koa-coal   the same with --coalesce: the requests that arrive during a send go together
#                   in the next one (port 32481)
#        newsflow   $BUILD/newsflow ingest (port 32482); skipped with a message while
#                   `newsflow ingest --help` fails;
#      for each: a smoke test (one event as a JSON array, two as NDJSON, a batch with one invalid
#      event which must be rejected), then wrk (perf/edge/events.lua: batches of 100 events,
#      CONNS connections, one thread) for WARMUP s, then for SECONDS s while the server's,
#      the broker's and wrk's CPU seconds are read (utime+stime of the whole process from
#      /proc/PID/stat; wrk's from its rusage); then the topic's end offsets must have grown by at
#      least the events the 202 answers accepted (and by no more than those plus what was in
#      flight when wrk stopped);
#   4. writes the JSON lines and report.md (a markdown table, ratios newsflow / Koa) to OUT
#      (default build-perf/edge/) and prints the report.
# Servers and the broker are stopped by pid at the end, also on failure or Ctrl-C.
#
#   perf/run_edge.sh [--quick] [--build DIR] [--conns N] [--seconds S] [--warmup S]
#                    [--only koa|koa-coal|newsflow]... [--server-cpus LIST] [--load-cpus LIST]
#                    [--broker-cpus LIST|none] [--out DIR]
# --quick: 10 s measured after 3 s of warm-up (about 2 minutes with the broker's start);
# default: 30 s after 10 s. CPU lists are taskset's (0, 1, 0-1); --broker-cpus none leaves the
# broker unpinned. On a one-CPU machine nothing is pinned.
# NF_EDGE_NEWSFLOW_ARGS: extra arguments for `newsflow ingest` (e.g. "--set edge.max_in_flight=20000"
# for Koa's bound; none by default: `ingest` has no shards, its HTTP server's threads and
# librdkafka's all run on the pinned CPU).
# Exit: 0 when every server that ran passed its checks, 1 otherwise, 2 usage.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
B="${NF_PERF_BUILD_DIR:-build-perf}" build_given=""
seconds=30 warmup=10 conns=16 only=()
server_cpus=0 load_cpus=1 broker_cpus=1
out=build-perf/edge
kdir=/tmp/nf-edgeperf-kafka kport=32092
koa_port=32480 coal_port=32481 nf_port=32482
batch=100
nf_extra="${NF_EDGE_NEWSFLOW_ARGS:-}"
usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) seconds=10 warmup=3; shift ;;
    --build) B="${2:?--build needs a directory}" build_given=1; shift 2 ;;
    --conns) conns="${2:?}"; shift 2 ;;
    --seconds) seconds="${2:?}"; shift 2 ;;
    --warmup) warmup="${2:?}"; shift 2 ;;
    --only) only+=("${2:?}"); shift 2 ;;
    --server-cpus) server_cpus="${2:?}"; shift 2 ;;
    --load-cpus) load_cpus="${2:?}"; shift 2 ;;
    --broker-cpus) broker_cpus="${2:?}"; shift 2 ;;
    --out) out="${2:?}"; shift 2 ;;
    -h | --help) usage ;;
    *) echo "run_edge.sh: unknown option $1" >&2; usage ;;
  esac
done
for n in "$conns" "$seconds" "$warmup"; do
  case "$n" in '' | *[!0-9]*) echo "run_edge.sh: --conns, --seconds and --warmup take whole numbers" >&2; exit 2 ;; esac
done
for o in "${only[@]}"; do
  case "$o" in koa | koa-coal | newsflow) ;; *) echo "run_edge.sh: --only takes koa, koa-coal or newsflow" >&2; exit 2 ;; esac
done
wanted() { [ ${#only[@]} -eq 0 ] && return 0; local o; for o in "${only[@]}"; do [ "$o" = "$1" ] && return 0; done; return 1; }
for tool in wrk node npm kcat java curl python3 taskset; do
  command -v "$tool" >/dev/null || { echo "run_edge.sh: $tool missing (scripts/deps.sh installs it)" >&2; exit 1; }
done
ncpu=$(nproc)
if [ "$ncpu" -lt 2 ]; then
  echo "run_edge.sh: one CPU: nothing is pinned, server, broker and load share it" >&2
  server_cpus="" load_cpus="" broker_cpus=none
fi
pin() { # pin LIST CMD...: taskset -c LIST, or the command alone without a list
  local list="$1"
  shift
  if [ -n "$list" ] && [ "$list" != none ]; then taskset -c "$list" "$@"; else "$@"; fi
}

mkdir -p "$out/logs"
out=$(cd "$out" && pwd)
rm -f "$out"/logs/* "$out/results.jsonl" "$out/report.md"
results="$out/results.jsonl"
emit() { echo "$1" >>"$results"; }

# ---- 1. peers and build ----
bash perf/edge/koa/install.sh
node perf/edge/koa/check.js >&2
nf_ok="" nf_why=""
if wanted newsflow; then
  if [ -z "$build_given" ]; then
    [ -f "$B/CMakeCache.txt" ] || cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DNF_BENCH=ON >&2
    cmake --build "$B" -j "$ncpu" --target newsflow >&2
  fi
  if [ ! -x "$B/newsflow" ]; then
    nf_why="$B/newsflow does not exist"
  elif ! "$B/newsflow" ingest --help >"$out/logs/newsflow-ingest-help.txt" 2>&1; then
    nf_why="\`$B/newsflow ingest --help\` failed: $(head -1 "$out/logs/newsflow-ingest-help.txt")"
  else
    nf_ok=1
  fi
  [ -n "$nf_ok" ] || echo "run_edge.sh: SKIPPING newsflow: $nf_why (the ingest command is not built yet?)" >&2
fi

# ---- 2. the broker ----
server_pid="" kafka_started=""
source perf/lib.sh # stop_pid, ticks
cleanup() {
  local rc=$?
  [ -n "$server_pid" ] && stop_pid "$server_pid"
  [ -n "$kafka_started" ] && bash scripts/kafka.sh stop --dir "$kdir" >/dev/null 2>&1
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
kafka_started=1
brokers=$(pin "$broker_cpus" bash scripts/kafka.sh start --dir "$kdir" --port "$kport" --fresh --heap 1024 \
  2>"$out/logs/kafka-start.log" | tail -1) || { cat "$out/logs/kafka-start.log" >&2; exit 1; }
broker_pid=$(bash scripts/kafka.sh pid 1 --dir "$kdir")
topic=read-events
NF_KAFKA_TOOL_LOG="$out/logs/topic-create.log" bash scripts/kafka.sh tool org.apache.kafka.tools.TopicCommand \
  --bootstrap-server "$brokers" --create --topic "$topic" --partitions 6 --replication-factor 1 \
  >"$out/logs/topic-create.out" 2>&1 || { cat "$out/logs/topic-create.out" >&2; exit 1; }
end_offsets() { # the sum of read-events' end offsets (partitions 0..5), or nothing
  local args=() p
  for p in 0 1 2 3 4 5; do args+=(-t "$topic:$p:-1"); done
  kcat -b "$brokers" -Q "${args[@]}" 2>/dev/null | awk '/offset/ {s += $NF; n++} END {if (n == 6) printf "%.0f\n", s}'
}
for _ in $(seq 100); do # the new partitions' leaders
  [ -n "$(end_offsets)" ] && break
  sleep 0.2
done
[ -n "$(end_offsets)" ] || { echo "run_edge.sh: $topic's end offsets cannot be read" >&2; exit 1; }

# Busy ticks (user nice system irq softirq) of the server's CPUs from /proc/stat: less the
# server's own, what other work (the machine is shared) took from them meanwhile.
server_cpu_names=$(python3 -c 'import sys
names = []
for part in sys.argv[1].split(","):
    if not part: continue
    a, _, b = part.partition("-")
    names += ["cpu%d" % i for i in range(int(a), int(b or a) + 1)]
print(" ".join(names) or "cpu")' "$server_cpus")
busy() { awk -v names=" $server_cpu_names " 'index(names, " " $1 " ") {s += $2 + $3 + $4 + $7 + $8} END {printf "%.0f\n", s}' /proc/stat; }
hz=$(getconf CLK_TCK)
emit "$(python3 -c 'import json,sys; print(json.dumps({"bench":"edge_env","date":sys.argv[1],"cpus":int(sys.argv[2]),
  "cpu_model":sys.argv[3],"load1":float(sys.argv[4]),"conns":int(sys.argv[5]),"seconds":int(sys.argv[6]),
  "warmup":int(sys.argv[7]),"batch":int(sys.argv[8]),"server_cpus":sys.argv[9],"load_cpus":sys.argv[10],
  "broker_cpus":sys.argv[11],"node":sys.argv[12],"commit":sys.argv[13],"build":sys.argv[14]}))' \
  "$(date -u +%FT%TZ)" "$ncpu" "$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)" \
  "$(cut -d' ' -f1 /proc/loadavg)" "$conns" "$seconds" "$warmup" "$batch" "${server_cpus:-none}" \
  "${load_cpus:-none}" "$broker_cpus" "$(node --version)" "$(git rev-parse --short HEAD)" "$B")"

# ---- 3. one server ----
post() { # post PORT CONTENT_TYPE BODY: prints "STATUS BODY"
  curl -s -m 15 -o /tmp/nf-edge-post.$$ -w '%{http_code}' -X POST -H "Content-Type: $2" --data-binary "$3" \
    "http://127.0.0.1:$1/v1/events" 2>/dev/null || true
  echo " $(cat /tmp/nf-edge-post.$$ 2>/dev/null)"
  rm -f /tmp/nf-edge-post.$$
}
accepted_of() { python3 -c 'import json,sys
try: print(int(json.loads(sys.argv[1]).get("accepted", -1)))
except Exception: print(-1)' "$1"; }
failed=""
# run_server NAME PORT CMD...: the server's whole measurement; one JSON line to $results.
run_server() {
  local name="$1" port="$2"
  shift 2
  local log="$out/logs/$name.log" now ev a r st body ok="" notes=()
  echo "run_edge.sh: $name: starting $* (pinned to ${server_cpus:-nothing})" >&2
  # Started directly (not through a function, which would fork a subshell): $! is taskset,
  # which execs the server, so /proc/$!/stat is the server's whole process.
  if [ -n "$server_cpus" ]; then
    taskset -c "$server_cpus" "$@" >"$log" 2>&1 &
  else
    "$@" >"$log" 2>&1 &
  fi
  server_pid=$!
  now=$(date +%s%3N)
  ev="{\"user_id\":\"smoke-u1\",\"article_id\":\"0123456789abcdef0123456789abcdef\",\"session_id\":\"s1\",\"kind\":\"read\",\"ts\":$now}"
  for _ in $(seq 600); do # up to 60 s for the broker connection: the first 202 is the readiness
    r=$(post "$port" application/json "[$ev]")
    st=${r%% *} body=${r#* }
    [ "$st" = 202 ] && { ok=1; break; }
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$ok" ]; then
    echo "run_edge.sh: $name: no 202 for one valid event within 60 s (last: $st $body); its log:" >&2
    tail -20 "$log" >&2
    stop_pid "$server_pid"
    server_pid=""
    emit "{\"bench\":\"edge_server\",\"name\":\"$name\",\"error\":\"no 202 for one valid event (last answer $st)\"}"
    failed=1
    return 0
  fi
  [ "$(accepted_of "$body")" = 1 ] || notes+=("one valid event: 202 but accepted is not 1: $body")
  r=$(post "$port" application/x-ndjson "$(printf '%s\n%s\n' "$ev" "${ev/smoke-u1/smoke-u2}")")
  st=${r%% *} body=${r#* }
  { [ "$st" = 202 ] && [ "$(accepted_of "$body")" = 2 ]; } || notes+=("two events as NDJSON: $st $body")
  r=$(post "$port" application/json "[$ev,{\"user_id\":\"smoke-u3\",\"article_id\":\"0123456789abcdef0123456789abcdef\",\"session_id\":\"s1\"}]")
  st=${r%% *} body=${r#* }
  # Rejected: either the batch (4xx) or the event (listed in "rejected", at most 1 accepted).
  if ! { [ "${st:0:1}" = 4 ] || { [ "$st" = 202 ] && [ "$(accepted_of "$body")" -le 1 ] && echo "$body" | grep -q '"rejected":\[{'; }; }; then
    notes+=("an event without ts was not rejected: $st $body")
  fi
  local note
  for note in "${notes[@]}"; do echo "run_edge.sh: $name: SMOKE CHECK FAILED: $note" >&2; done
  local off0 off1 w m c0 c1 k0 k1 q0 q1 wt=0 rss
  off0=$(end_offsets)
  NF_NAME="$name-warmup" pin "$load_cpus" wrk -t1 -c"$conns" -d"${warmup}s" --timeout 10s \
    -s perf/edge/events.lua "http://127.0.0.1:$port" >"$out/logs/$name-wrk-warmup.txt" 2>&1 || true
  w=$(grep '^{"bench"' "$out/logs/$name-wrk-warmup.txt" || true)
  c0=$(ticks "$server_pid") k0=$(ticks "$broker_pid") q0=$(busy)
  (
    NF_NAME="$name" pin "$load_cpus" wrk -t1 -c"$conns" -d"${seconds}s" --timeout 10s --latency \
      -s perf/edge/events.lua "http://127.0.0.1:$port" >"$out/logs/$name-wrk.txt" 2>&1 || true
    # The children's (wrk's) user and system time; into a file, since a pipe or a command
    # substitution would fork and read its own, empty, children's times.
    times >"$out/logs/$name-wrk-times.txt"
  )
  c1=$(ticks "$server_pid") k1=$(ticks "$broker_pid") q1=$(busy)
  wt=$(tail -1 "$out/logs/$name-wrk-times.txt" | python3 -c 'import re,sys
def s(t):
    mm, ss = re.match(r"(\d+)m([\d.]+)s", t).groups(); return int(mm) * 60 + float(ss)
u, y = sys.stdin.read().split(); print(round(s(u) + s(y), 3))')
  m=$(grep '^{"bench"' "$out/logs/$name-wrk.txt" || true)
  if [ -z "$w" ] || [ -z "$m" ]; then
    echo "run_edge.sh: $name: wrk gave no result (see $out/logs/$name-wrk*.txt)" >&2
    stop_pid "$server_pid"
    server_pid=""
    emit "{\"bench\":\"edge_server\",\"name\":\"$name\",\"error\":\"wrk gave no result\"}"
    failed=1
    return 0
  fi
  rss=$(awk '/VmHWM/ {print $2}' "/proc/$server_pid/status" 2>/dev/null || echo 0)
  # What was in flight when wrk stopped is still produced: let it settle, then count.
  local prev="" cur
  for _ in $(seq 50); do
    sleep 0.2
    cur=$(end_offsets)
    [ -n "$cur" ] && [ "$cur" = "$prev" ] && break
    prev=$cur
  done
  off1=$(end_offsets)
  stop_pid "$server_pid"
  server_pid=""
  local line
  line=$(python3 - "$name" "$w" "$m" "$off0" "$off1" "$((c1 - c0))" "$((k1 - k0))" "$hz" "$wt" "$rss" \
    "$conns" "$batch" "$(printf '%s\n' "${notes[@]}")" "$((q1 - q0))" <<'PY'
import json, sys
name, w, m = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
off0, off1 = int(sys.argv[4] or 0), int(sys.argv[5] or 0)
cpu_ticks, broker_ticks, hz, wrk_cpu = int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8]), float(sys.argv[9])
rss_kb, conns, batch = int(sys.argv[10] or 0), int(sys.argv[11]), int(sys.argv[12])
notes = [n for n in sys.argv[13].split("\n") if n]
other_s = max(0, int(sys.argv[14]) - cpu_ticks) / int(sys.argv[8])
secs = m["seconds"]
cpu = cpu_ticks / hz
accepted = w["accepted"] + m["accepted"]
grown = off1 - off0
# At most conns requests were unanswered when each of the two wrk runs stopped.
slack = 2 * conns * batch
topic_ok = grown >= accepted
if not topic_ok:
    notes.append(f"the topic grew by {grown} records, fewer than the {accepted} events accepted")
if grown > accepted + slack:
    notes.append(f"the topic grew by {grown} records, more than the {accepted} accepted plus {slack} in flight (duplicates?)")
r = {"bench": "edge_server", "name": name, "events_per_s": m["events_per_s"], "accepted": m["accepted"],
     "requests_per_s": m["requests_per_s"], "p50_ms": m["p50_ms"], "p90_ms": m["p90_ms"], "p99_ms": m["p99_ms"],
     "max_ms": m["max_ms"], "non_202": m["non_202"], "statuses": m["statuses"], "socket_errors": m["socket_errors"],
     "seconds": secs, "server_cpu_s": round(cpu, 2), "server_cores": round(cpu / secs, 3),
     "other_on_server_cpu_cores": round(other_s / secs, 3),
     "cpu_us_per_event": round(cpu * 1e6 / m["accepted"], 2) if m["accepted"] else None,
     "events_per_core_s": round(m["accepted"] / cpu) if cpu else None,
     "broker_cores": round(broker_ticks / hz / secs, 3), "wrk_cores": round(wrk_cpu / secs, 3),
     "server_rss_peak_mb": round(rss_kb / 1024, 1),
     "accepted_total": accepted, "topic_grown": grown, "topic_ok": topic_ok,
     "warmup_events_per_s": w["events_per_s"], "warmup_non_202": w["non_202"], "notes": notes}
print(json.dumps(r))
PY
  )
  emit "$line"
  echo "$line" >&2
  python3 -c 'import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if r["topic_ok"] and not r["notes"] else 1)' "$line" || failed=1
}

koa=(node "$root/perf/edge/koa/server.js" --listen 127.0.0.1 --brokers "$brokers" --topic "$topic")
wanted koa && run_server koa "$koa_port" "${koa[@]}" --port "$koa_port"
wanted koa-coal && run_server koa-coal "$coal_port" "${koa[@]}" --port "$coal_port" --coalesce
if wanted newsflow; then
  if [ -n "$nf_ok" ]; then
    # shellcheck disable=SC2086 # NF_EDGE_NEWSFLOW_ARGS is split into words on purpose
    # like for like: the Koa peer has no per-client rate limit, and every request here comes
    # from one address (newsflow's default would hold it to limits.events_per_s)
    run_server newsflow "$nf_port" "$B/newsflow" ingest --set kafka.brokers="$brokers" \
      --set admin.listen=127.0.0.1 --set admin.port="$nf_port" --set limits.enabled=false $nf_extra
  else
    emit "$(python3 -c 'import json,sys; print(json.dumps({"bench":"edge_server","name":"newsflow","skipped":sys.argv[1]}))' "$nf_why")"
  fi
fi

# ---- 4. the report ----
python3 perf/edge/report.py "$results" >"$out/report.md"
cat "$out/report.md"
echo "run_edge.sh: $out/report.md, $results, logs in $out/logs/" >&2
[ -z "$failed" ]
