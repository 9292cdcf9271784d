#!/usr/bin/env bash
# The query API's throughput (issue 18; docs/ARCHITECTURE.md §4 "Queries") while the job
# ingests, beside the anchor a cache tier would give, in one run:
#   1. builds newsflow (Release, into build-perf/ or $NF_PERF_BUILD_DIR);
#   2. generates feeds (tests/integration/feed_model.py gen: ARTICLES articles of the last 60 h
#      in the taxonomy's words) and runs the job on the embedded cluster with the demo producer
#      at RATE read events/s from USERS readers (sink none);
#   3. once the readers have vectors: wrk (CONNS connections, 2 threads, SECONDS each) on
#      /v1/feed/{random reader}?limit=20 — computed fresh from committed state, no response
#      cache — then /v1/trending?limit=20; the job's read events counted from /metrics over each
#      run (what it really ingested meanwhile);
#   4. the anchors: redis-server on loopback holding one feed answer as a string value, and
#      redis-benchmark GET of it with the same connection count and requests; nginx (Debian,
#      2 workers for 2 shards) serving one trending answer as a static file, wrk with the same
#      connections and duration (issue 41);
#   5. the feed's readers' inputs found kept and valid, changed since, or not kept
#      (newsflow_query_reader_cache_total: serve/readers.h); each process's CPU over each run (/proc/PID/stat: the job, redis-server, nginx's workers;
#      the client's, wrk or redis-benchmark, from bash's `times`) as microseconds per request, and the job's epoch pause (newsflow_epoch_pause_seconds) and
#      ingest rate over a quiet window of the same length against the feed flood's;
#   6. prints one JSON line per measurement and a summary line with the ratios.
# JSON lines go to perf/results/query-<date>-<time>.jsonl too. Nothing is judged.
#
#   perf/run_query.sh [--quick] [--rate R] [--users U] [--articles N] [--conns C] [--seconds S]
# --quick: 5 s runs (about a minute). Default: 20 s runs. Both at 20,000 events/s: the embedded
# mock cluster keeps a few MB per partition, and at 100,000 events/s it truncates its log faster
# than the job reads it (offset resets, nothing ingested).
# --set K=V: passed to the job (e.g. http.shards=false: libmicrohttpd instead of the shards' loops).
# --follows F: before the runs every reader follows F random topics and mutes one other
# (perf/query/follows.py, through the edge; issue 45), applied before the first run starts.
# --mute-sources M: with --follows, every reader also mutes M random sources of the job's.
# --kafka: the issue's setting instead — Apache Kafka (scripts/kafka.sh, a private directory and
# port, stopped by pid at the end), the job on it (kafka.assignment=all), and the read events
# produced from outside by perf/kafka/bench_e2e at --rate (default then 100,000/s) from readers
# u0 .. u(USERS-1) over the articles the job committed; wrk runs while it produces.
set -euo pipefail
cd "$(dirname "$0")/.."
B="${NF_PERF_BUILD_DIR:-build-perf}"
rate="" users=100000 articles=2000 conns=32 seconds=20 kafka="" jobset=() follows="" msrc=0
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) seconds=5; shift ;;
    --kafka) kafka=1; shift ;;
    --rate) rate="$2"; shift 2 ;;
    --users) users="$2"; shift 2 ;;
    --articles) articles="$2"; shift 2 ;;
    --conns) conns="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --set) jobset+=(--set "$2"); shift 2 ;;
    --follows) follows="$2"; shift 2 ;;
    --mute-sources) msrc="$2"; shift 2 ;;
    *) echo "usage: perf/run_query.sh [--quick] [--kafka] [--rate R] [--users U] [--articles N] [--conns C] [--seconds S] [--set K=V] [--follows F [--mute-sources M]]" >&2; exit 2 ;;
  esac
done
[ -n "$rate" ] || rate=$([ -n "$kafka" ] && echo 100000 || echo 20000)
for tool in wrk redis-server redis-benchmark redis-cli nginx; do
  command -v "$tool" >/dev/null || { echo "run_query.sh: $tool missing (scripts/deps.sh installs it)" >&2; exit 1; }
done
[ -f "$B/CMakeCache.txt" ] || cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DNF_BENCH=ON >&2
cmake --build "$B" -j "$(nproc)" --target newsflow $([ -n "$kafka" ] && echo bench_e2e) >&2
tmp=$(mktemp -d)
job="" redis="" e2e="" kdir="" nginx=""
# SIGTERM, 15 s, then SIGKILL: an overloaded job's final epoch can take minutes (a benchmark's
# state is thrown away anyway).
source perf/lib.sh # stop_pid, cpu_s
cleanup() {
  [ -n "$e2e" ] && stop_pid "$e2e"
  [ -n "$job" ] && stop_pid "$job"
  [ -n "$redis" ] && stop_pid "$redis"
  [ -n "$nginx" ] && stop_pid "$nginx"
  [ -n "$kdir" ] && bash scripts/kafka.sh stop --dir "$kdir" >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
rport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
nport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# the epoch pause so far: "SUM COUNT" of newsflow_epoch_pause_seconds
pauses() { curl -fs "$base/metrics" | awk '/^newsflow_epoch_pause_seconds_sum/ {s=$2} /^newsflow_epoch_pause_seconds_count/ {c=$2} END {print s + 0, c + 0}'; }
# adds fields to the JSON object in $LINE: python expressions over r (that object) and env vars
with_fields() { LINE="$1" python3 -c "import json, os; e = os.environ; r = json.loads(e['LINE']); r.update($2); print(json.dumps(r))"; }
mkdir -p perf/results
out="perf/results/query-$(date -u +%Y%m%d-%H%M%S).jsonl"
emit() { echo "$1" | tee -a "$out"; }

python3 tests/integration/feed_model.py gen "$tmp/feeds" "$articles" config/taxonomy.json
kset=(--set demo.read_events_per_s="$rate" --set demo.users="$users")
reader=demo-user-
if [ -n "$kafka" ]; then
  kdir="$tmp/kafka"
  kport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  brokers=$(bash scripts/kafka.sh start --fresh --dir "$kdir" --port "$kport" --heap 1024 \
    2>"$tmp/kafka-start.log" | tail -1) || { cat "$tmp/kafka-start.log" >&2; exit 1; }
  prefix="query$$."
  "$B/newsflow" topics create --set kafka.brokers="$brokers" --set kafka.topic_prefix="$prefix" \
    --partitions 4 >"$tmp/topics.log" 2>&1 || { cat "$tmp/topics.log" >&2; exit 1; }
  sleep 3 # the new topics' leaders
  kset=(--set kafka.brokers="$brokers" --set kafka.topic_prefix="$prefix" --set kafka.assignment=all
    --set demo.read_events_per_s=0)
  reader=u
fi
"$B/newsflow" run --config config/newsflow.json --set sources.file="$tmp/feeds/sources.txt" \
  --set state.dir="$tmp/state" --set admin.port="$port" --set sink.spec=none "${kset[@]}" \
  --set limits.enabled=false --set log.level=warn "${jobset[@]}" 2>"$tmp/job.err" &
job=$!
base="http://127.0.0.1:$port"
if [ -n "$kafka" ]; then # the producer: it reads back the articles the job committed first
  "$B/perf/bench_e2e" --brokers "$brokers" --prefix "$prefix" --rate "$rate" --users "$users" \
    --warmup 10 --duration $((2 * seconds + 40)) --job-pid "$job" >"$tmp/e2e.json" 2>"$tmp/e2e.err" &
  e2e=$!
fi
interested=""
for _ in $(seq 300); do
  if curl -fs "$base/v1/feed/${reader}0" 2>/dev/null | grep '"source":"interest"' >/dev/null; then
    interested=1
    break
  fi
  kill -0 "$job" 2>/dev/null || { tail -5 "$tmp/job.err" >&2; exit 1; }
  sleep 0.2
done
if [ -z "$interested" ]; then
  echo "run_query.sh: after 60 s ${reader}0 still has no interest vector: the job is not ingesting" \
    "(the embedded mock truncates its log under too high a --rate: see $tmp/job.err)" >&2
  grep -m3 'Offset out of range' "$tmp/job.err" >&2 || true
  exit 1
fi
sleep 3 # past the first epochs
if [ -n "$follows" ]; then # every reader's settings, applied (counted) before the runs
  nset=$(python3 perf/query/follows.py "$base" "$users" "$follows" "$reader" "$msrc")
  applied() { curl -fs "$base/metrics" | awk '/^newsflow_reader_settings_total[ {]/ {s += $NF} END {printf "%d", s}'; }
  for _ in $(seq 600); do [ "$(applied)" -ge "$nset" ] && break; sleep 0.2; done
  [ "$(applied)" -ge "$nset" ] || { echo "run_query.sh: $(applied) of $nset settings applied" >&2; exit 1; }
  sleep 2 # their epoch committed
fi
events() { curl -fs "$base/metrics" | awk '/^newsflow_read_events_total[ {]/ {s += $NF} END {printf "%d", s}'; }
# the readers' kept feed inputs so far (serve/readers.h): "HIT CHANGED MISS"
kept() { curl -fs "$base/metrics" | awk '/^newsflow_query_reader_cache_total/ {
  v[$1 ~ /"hit"/ ? 0 : $1 ~ /"changed"/ ? 1 : 2] = $2 } END {print v[0] + 0, v[1] + 0, v[2] + 0}'; }
ncpu=$(nproc)
emit "{\"bench\":\"query_env\",\"follows\":${follows:-0},\"mute_sources\":$msrc,\"date\":\"$(date -u +%FT%TZ)\",\"cpus\":$ncpu,\"broker\":\"$([ -n "$kafka" ] && echo kafka || echo embedded)\",\"rate\":$rate,\"users\":$users,\"articles\":$articles,\"conns\":$conns,\"seconds\":$seconds,\"build\":\"$B\"}"
# A quiet window first: the epoch pause and the ingest rate without queries.
read -r ps0 pc0 < <(pauses); e0=$(events); t0=$(date +%s.%N)
sleep "$seconds"
read -r ps1 pc1 < <(pauses); e1=$(events); t1=$(date +%s.%N)
emit "$(with_fields '{"bench":"query_quiet"}' "{'events_per_s': round(($e1 - $e0) / ($t1 - $t0)), 'epochs': $pc1 - $pc0, 'epoch_pause_mean_ms': round(($ps1 - $ps0) / max(1, $pc1 - $pc0) * 1000, 2)}")"
for spec in "feed:/v1/feed/{u}?limit=20" "trending:/v1/trending?limit=20"; do
  name=${spec%%:*} path=${spec#*:}
  read -r ps0 pc0 < <(pauses); c0=$(cpu_s "$job"); e0=$(events); t0=$(date +%s.%N); children_s; w0=$CHILDREN_S
  read -r kh0 kc0 km0 < <(kept)
  NF_PATH="$path" NF_USERS="$users" NF_NAME="$name" NF_USER_PREFIX="$reader" wrk -t2 -c"$conns" -d"${seconds}s" \
    -s perf/query/wrk_report.lua "$base" >"$tmp/wrk.out"
  children_s; w1=$CHILDREN_S; line=$(grep '^{"bench"' "$tmp/wrk.out")
  e1=$(events); t1=$(date +%s.%N); c1=$(cpu_s "$job"); read -r ps1 pc1 < <(pauses)
  read -r kh1 kc1 km1 < <(kept)
  emit "$(with_fields "$line" "{'reader_inputs_kept': {'hit': $kh1 - $kh0, 'changed': $kc1 - $kc0, 'miss': $km1 - $km0}, 'events_per_s_meanwhile': round(($e1 - $e0) / ($t1 - $t0)), 'job_cpu_us_per_request': round(($c1 - $c0) / max(1, r['requests']) * 1e6, 2), 'client_cpu_us_per_request': round(($w1 - $w0) / max(1, r['requests']) * 1e6, 2), 'epochs': $pc1 - $pc0, 'epoch_pause_mean_ms': round(($ps1 - $ps0) / max(1, $pc1 - $pc0) * 1000, 2)}")"
done
# One feed answer as the cached value (its size is what a cache would hold).
curl -fs "$base/v1/feed/${reader}1?limit=20" >"$tmp/feed.json"
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no >/dev/null &
redis=$!
for _ in $(seq 50); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$rport" -x set feed <"$tmp/feed.json" >/dev/null
n=$(python3 -c "import json; print(max(200000, next(int(r['requests']) for r in map(json.loads, open('$out')) if r.get('name') == 'feed')))")
rc0=$(cpu_s "$redis"); children_s; w0=$CHILDREN_S
redis-benchmark -p "$rport" -c "$conns" -n "$n" --csv GET feed >"$tmp/rb.out"
rc1=$(cpu_s "$redis"); children_s; w1=$CHILDREN_S; rb=$(tail -1 "$tmp/rb.out")
emit "$(python3 - "$rb" "$(wc -c <"$tmp/feed.json")" "$conns" "$n" "$rc0" "$rc1" "$w0" "$w1" <<'PY'
import json, sys
f = [x.strip('"') for x in sys.argv[1].split('","')]
n, c0, c1, w0, w1 = int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7]), float(sys.argv[8])
print(json.dumps({"bench": "query_redis_get", "value_bytes": int(sys.argv[2]), "conns": int(sys.argv[3]),
                  "requests_per_s": float(f[1]), "p50_ms": float(f[4]), "p99_ms": float(f[6]),
                  "max_ms": float(f[7]), "redis_cpu_us_per_request": round((c1 - c0) / n * 1e6, 2),
                  "client_cpu_us_per_request": round((w1 - w0) / n * 1e6, 2)}))
PY
)"
# nginx serving one trending answer as a static file, two workers (the job's two shards).
mkdir -p "$tmp/www" "$tmp/nginx"
chmod a+rx "$tmp" "$tmp/www" # nginx's workers run as www-data
curl -fs "$base/v1/trending?limit=20" >"$tmp/www/trending.json"
cat >"$tmp/nginx/nginx.conf" <<NGINX
worker_processes 2;
daemon off;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 100000000;
  default_type application/json;
  server { listen 127.0.0.1:$nport; root $tmp/www; }
}
NGINX
nginx -c "$tmp/nginx/nginx.conf" -p "$tmp/nginx" &
nginx=$!
for _ in $(seq 50); do curl -fs "http://127.0.0.1:$nport/trending.json" >/dev/null 2>&1 && break; sleep 0.1; done
nworkers=$(pgrep -P "$nginx" | tr '\n' ' ')
nc0=$(cpu_s $nworkers); children_s; w0=$CHILDREN_S
NF_PATH="/trending.json" NF_NAME="nginx_trending" wrk -t2 -c"$conns" -d"${seconds}s" \
  -s perf/query/wrk_report.lua "http://127.0.0.1:$nport" >"$tmp/wrk.out"
nc1=$(cpu_s $nworkers); children_s; w1=$CHILDREN_S; nline=$(grep '^{"bench"' "$tmp/wrk.out")
emit "$(with_fields "$nline" "{'bench': 'query_nginx_static', 'value_bytes': $(wc -c <"$tmp/www/trending.json"), 'nginx_cpu_us_per_request': round(($nc1 - $nc0) / max(1, r['requests']) * 1e6, 2), 'client_cpu_us_per_request': round(($w1 - $w0) / max(1, r['requests']) * 1e6, 2)}")"
python3 - "$out" <<'PY' | tee -a "$out"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
get = lambda n: next((r for r in rows if r.get("name") == n or r.get("bench") == n), {})
feed, trend, redis = get("feed"), get("trending"), get("query_redis_get")
nginx, quiet = get("query_nginx_static"), get("query_quiet")
print(json.dumps({"bench": "query_summary",
                  "feed_requests_per_s": feed.get("requests_per_s"), "feed_p99_ms": feed.get("p99_ms"),
                  "trending_requests_per_s": trend.get("requests_per_s"), "trending_p99_ms": trend.get("p99_ms"),
                  "redis_get_requests_per_s": redis.get("requests_per_s"),
                  "feed_vs_redis_get": round(feed["requests_per_s"] / redis["requests_per_s"], 3) if feed and redis else None,
                  "nginx_static_requests_per_s": nginx.get("requests_per_s"),
                  "trending_vs_nginx": round(trend["requests_per_s"] / nginx["requests_per_s"], 3) if trend and nginx else None,
                  "epoch_pause_mean_ms_quiet": quiet.get("epoch_pause_mean_ms"),
                  "epoch_pause_mean_ms_feed_flood": feed.get("epoch_pause_mean_ms"),
                  "events_per_s_quiet": quiet.get("events_per_s"),
                  "events_per_s_during_feed": feed.get("events_per_s_meanwhile"),
                  "cpu_us_per_feed_job_wrk": [feed.get("job_cpu_us_per_request"), feed.get("client_cpu_us_per_request")],
                  "cpu_us_per_get_redis_client": [redis.get("redis_cpu_us_per_request"), redis.get("client_cpu_us_per_request")]}))
PY
