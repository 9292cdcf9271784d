#!/usr/bin/env bash
# A reader's feed with authentication off and on (issue 38: "feed requests/s with auth on vs
# off"), in one run:
#   1. builds newsflow (Release, build-perf/ or $NF_PERF_BUILD_DIR) unless --build names a build
#      directory, used as it is;
#   2. makes the keys (an HS256 secret file of 48 random characters; an RSA-2048 key with
#      `openssl genpkey`, its public half as PEM) and the tokens, for reader demo-user-1 with exp
#      30 days ahead: one HS256 token, one RS256 token (signed with `openssl dgst -sha256 -sign`)
#      and a pool of POOL HS256 tokens that differ by their jti (perf/serve/make_tokens.py);
#   3. generates feeds (tests/integration/feed_model.py gen) and starts two jobs on the embedded
#      cluster, side by side, each with limits off and the demo producer: EVENTS read events at
#      RATE a second from USERS readers, then no more, so that nothing changes the committed
#      state while wrk runs (a new view each epoch would make each run pay a varying number of
#      view-cache rebuilds; with the demo running on, the "off" runs of one script moved
#      116–162 us of CPU per request); "off" without authentication, "on" with
#      auth.hs256_secret_file and auth.public_key_file both set (each token is checked with the
#      key of its alg);
#   4. once both jobs have read the events (99 %) and demo-user-1 has an interest vector in both:
#      checks that "on" answers 200 with each token, 401 without one or with a forged one, and
#      403 for another reader's feed, and that newsflow_auth_refused_total counted those three;
#      then reads each job's CPU while idle (BASE s): the epochs and crawls, subtracted below;
#   5. ROUNDS rounds of four wrk runs (2 threads, CONNS connections, SECONDS s each; perf/serve/
#      wrk_auth.lua) on GET /v1/feed/demo-user-1?limit=20, alternated:
#        off          "off", no token
#        hs256        "on", the HS256 token on every request (verified once, then from the cache)
#        rs256        "on", the RS256 token on every request (the same)
#        hs256-pool   "on", the POOL tokens cycled: with a 4,096-slot cache, mostly first
#                     verifications (the share the cache still answers is estimated from the
#                     tokens' hashes: pool_cache_hits_expected)
#      and for each: requests/s, p50/p99, non-2xx (must be 0), the job's CPU over the run
#      (utime+stime of its whole process from /proc/PID/stat) per request, gross and net of its
#      idle rate, what other work took of the machine meanwhile (all CPUs' busy time from
#      /proc/stat less both jobs' and wrk's), and the tokens refused (newsflow_auth_refused_total,
#      must not grow);
#   6. one JSON line per run, then a summary line per variant: the medians over the rounds, and
#      the median of its ratio to the same round's "off" (requests/s) and of its difference from
#      it (net CPU us per request: what authentication adds to a request), to stdout and
#      perf/results/auth-<date>-<time>.jsonl ($NF_AUTH_OUT).
# Exit 0, or 1 when a check failed (a wrong status, a non-2xx answer, a refused token).
#
#   perf/run_auth.sh [--quick] [--build DIR] [--rounds N] [--seconds S] [--conns C] [--pool N]
# --quick: one round of 5 s runs (about a minute and a half); default: 5 rounds of 10 s (about
# 4 minutes): on this shared machine short alternated runs, compared within their round, are
# steadier than long ones.
set -euo pipefail
cd "$(dirname "$0")/.."
B="${NF_PERF_BUILD_DIR:-build-perf}" build_given=""
rounds=5 seconds=10 conns=32 pool=10000 rate=2000 events=10000 users=1000 articles=2000 base_s=5
wthreads=2
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) rounds=1 seconds=5 base_s=3; shift ;;
    --build) B="${2:?--build needs a directory}" build_given=1; shift 2 ;;
    --rounds) rounds="${2:?}"; shift 2 ;;
    --seconds) seconds="${2:?}"; shift 2 ;;
    --conns) conns="${2:?}"; shift 2 ;;
    --pool) pool="${2:?}"; shift 2 ;;
    *) echo "usage: perf/run_auth.sh [--quick] [--build DIR] [--rounds N] [--seconds S] [--conns C] [--pool N]" >&2; exit 2 ;;
  esac
done
for n in "$rounds" "$seconds" "$conns" "$pool"; do
  case "$n" in '' | *[!0-9]* | 0) echo "run_auth.sh: --rounds, --seconds, --conns and --pool take positive whole numbers" >&2; exit 2 ;; esac
done
for tool in wrk curl python3 openssl; do
  command -v "$tool" >/dev/null || { echo "run_auth.sh: $tool missing (scripts/deps.sh installs it)" >&2; exit 1; }
done
if [ -z "$build_given" ]; then
  [ -f "$B/CMakeCache.txt" ] || cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DNF_BENCH=ON >&2
  cmake --build "$B" -j "$(nproc)" --target newsflow >&2
fi
[ -x "$B/newsflow" ] || { echo "run_auth.sh: $B/newsflow does not exist" >&2; exit 1; }

tmp=$(mktemp -d)
job_off="" job_on=""
source perf/lib.sh # stop_pid, ticks
cleanup() {
  [ -n "$job_off" ] && stop_pid "$job_off"
  [ -n "$job_on" ] && stop_pid "$job_on"
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
mkdir -p perf/results
out="${NF_AUTH_OUT:-perf/results/auth-$(date -u +%Y%m%d-%H%M%S).jsonl}"
: >"$out"
emit() { echo "$1" | tee -a "$out"; }
failed=""
fail() { echo "run_auth.sh: CHECK FAILED: $*" >&2; failed=1; }

# ---- 2. keys and tokens ----
reader=demo-user-1
python3 -c 'import secrets, string; print("".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(48)))' \
  >"$tmp/secret"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$tmp/rsa.key" 2>/dev/null
openssl pkey -in "$tmp/rsa.key" -pubout -out "$tmp/rsa.pub"
python3 perf/serve/make_tokens.py --secret "$tmp/secret" --rsa-key "$tmp/rsa.key" --sub "$reader" \
  --pool "$pool" --out "$tmp" >"$tmp/cache-estimate.json"
tok_hs=$(cat "$tmp/hs256.txt") tok_rs=$(cat "$tmp/rs256.txt") tok_forged=$(cat "$tmp/forged.txt")

# ---- 3. the two jobs ----
python3 tests/integration/feed_model.py gen "$tmp/feeds" "$articles" config/taxonomy.json >/dev/null
port_off=$(free_port) port_on=$(free_port)
start_job() { # start_job NAME PORT EXTRA...: the job in the background; its pid in $started
  local name="$1" port="$2"
  shift 2
  "$B/newsflow" run --config config/newsflow.json --set sources.file="$tmp/feeds/sources.txt" \
    --set state.dir="$tmp/state-$name" --set admin.port="$port" --set sink.spec=none \
    --set demo.read_events_per_s="$rate" --set demo.users="$users" --set demo.events="$events" \
    --set limits.enabled=false \
    --set log.level=warn "$@" 2>"$tmp/job-$name.err" &
  started=$!
}
start_job off "$port_off"
job_off=$started
start_job on "$port_on" --set auth.hs256_secret_file="$tmp/secret" --set auth.public_key_file="$tmp/rsa.pub"
job_on=$started
feed_path="/v1/feed/$reader?limit=20"
status() { # status PORT PATH [TOKEN]: the HTTP status
  local h=()
  [ -n "${3:-}" ] && h=(-H "Authorization: Bearer $3")
  curl -s -o /dev/null -w '%{http_code}' "${h[@]}" "http://127.0.0.1:$1$2" 2>/dev/null || true
}
interested() { # interested PORT [TOKEN]: the reader's feed is ranked by its interest vector
  local h=()
  [ -n "${2:-}" ] && h=(-H "Authorization: Bearer $2")
  curl -fs "${h[@]}" "http://127.0.0.1:$1$feed_path" 2>/dev/null | grep -q '"source":"interest"'
}
read_events() { # newsflow_read_events_total of the job on PORT
  curl -fs "http://127.0.0.1:$1/metrics" 2>/dev/null | awk '/^newsflow_read_events_total[ {]/ {s += $NF} END {printf "%d\n", s}'
}
ready=""
for _ in $(seq 300); do
  # the demo's events less the few it sends twice or invalid on purpose: 99 % of them
  if [ "$(read_events "$port_off")" -ge $((events * 99 / 100)) ] &&
    [ "$(read_events "$port_on")" -ge $((events * 99 / 100)) ] &&
    interested "$port_off" && interested "$port_on" "$tok_hs"; then
    ready=1
    break
  fi
  for p in "$job_off" "$job_on"; do
    kill -0 "$p" 2>/dev/null || { tail -n 5 "$tmp"/job-*.err >&2; exit 1; }
  done
  sleep 0.2
done
[ -n "$ready" ] || { echo "run_auth.sh: after 60 s the jobs have not read the demo's $events events, or $reader has no interest vector in both" >&2; tail -n 5 "$tmp"/job-*.err >&2; exit 1; }
sleep 8 # the last events' epoch committed, and its view published

# ---- 4. checks, and the jobs' idle CPU ----
expect() { # expect WHAT WANT GOT
  if [ "$2" = "$3" ]; then echo "run_auth.sh: ok: $1: $3" >&2; else fail "$1: $3, not $2"; fi
}
expect "off, no token" 200 "$(status "$port_off" "$feed_path")"
expect "on, HS256 token" 200 "$(status "$port_on" "$feed_path" "$tok_hs")"
expect "on, RS256 token" 200 "$(status "$port_on" "$feed_path" "$tok_rs")"
expect "on, a token of the pool" 200 "$(status "$port_on" "$feed_path" "$(head -1 "$tmp/pool.txt")")"
expect "on, no token" 401 "$(status "$port_on" "$feed_path")"
expect "on, a forged HS256 signature" 401 "$(status "$port_on" "$feed_path" "$tok_forged")"
expect "on, another reader's feed" 403 "$(status "$port_on" "/v1/feed/demo-user-2?limit=20" "$tok_hs")"
hz=$(getconf CLK_TCK)
busy() { awk '$1 == "cpu" {printf "%.0f\n", $2 + $3 + $4 + $7 + $8}' /proc/stat; } # all CPUs
refused() { # newsflow_auth_refused_total of the "on" job, all reasons (-1: not read)
  curl -fs "http://127.0.0.1:$port_on/metrics" 2>/dev/null |
    awk '/^newsflow_auth_refused_total[ {]/ {s += $NF; n++} END {printf "%d\n", n ? s : -1}'
}
expect "on, tokens refused by the checks (newsflow_auth_refused_total)" 3 "$(refused)"
o0=$(ticks "$job_off") n0=$(ticks "$job_on") t0=$(date +%s.%N)
sleep "$base_s"
o1=$(ticks "$job_off") n1=$(ticks "$job_on") t1=$(date +%s.%N)
idle=$(python3 -c 'import sys; o0, o1, n0, n1, hz = map(int, sys.argv[1:6]); dt = float(sys.argv[7]) - float(sys.argv[6])
print(round((o1 - o0) / hz / dt, 4), round((n1 - n0) / hz / dt, 4))' "$o0" "$o1" "$n0" "$n1" "$hz" "$t0" "$t1")
idle_off=${idle% *} idle_on=${idle#* }
emit "$(python3 -c 'import json,sys; print(json.dumps({"bench":"auth_env","date":sys.argv[1],"cpus":int(sys.argv[2]),
  "load1":float(sys.argv[3]),"commit":sys.argv[4],"build":sys.argv[5],"rounds":int(sys.argv[6]),"seconds":int(sys.argv[7]),
  "conns":int(sys.argv[8]),"wrk_threads":int(sys.argv[9]),"pool":int(sys.argv[10]),"demo_events":int(sys.argv[11]),
  "users":int(sys.argv[12]),"path":sys.argv[13],"idle_cores_off":float(sys.argv[14]),"idle_cores_on":float(sys.argv[15]),
  **json.loads(sys.argv[16])}))' "$(date -u +%FT%TZ)" "$(nproc)" "$(cut -d' ' -f1 /proc/loadavg)" \
  "$(git rev-parse --short HEAD)" "$B" "$rounds" "$seconds" "$conns" "$wthreads" "$pool" "$events" "$users" \
  "$feed_path" "$idle_off" "$idle_on" "$(cat "$tmp/cache-estimate.json")")"

# ---- 5. the runs ----
run_one() { # run_one ROUND NAME PORT PID IDLE_CORES OTHER_PID [ENV=VALUE]...
  local round="$1" name="$2" port="$3" pid="$4" idle_cores="$5" other="$6"
  shift 6
  local c0 c1 x0 x1 r0 r1 b0 b1 line wt
  c0=$(ticks "$pid") x0=$(ticks "$other") r0=$(refused) b0=$(busy)
  (
    env NF_NAME="$name" NF_PATH="$feed_path" NF_WRK_THREADS="$wthreads" "$@" \
      wrk -t"$wthreads" -c"$conns" -d"${seconds}s" --latency -s perf/serve/wrk_auth.lua \
      "http://127.0.0.1:$port" >"$tmp/wrk-$name.txt" 2>&1 || true
    times >"$tmp/wrk-$name-times.txt" # wrk's CPU: this subshell's children's
  )
  c1=$(ticks "$pid") x1=$(ticks "$other") b1=$(busy) r1=$(refused)
  line=$(grep '^{"bench"' "$tmp/wrk-$name.txt" || true)
  if [ -z "$line" ]; then
    fail "$name: wrk gave no result: $(tail -3 "$tmp/wrk-$name.txt")"
    return 0
  fi
  wt=$(tail -1 "$tmp/wrk-$name-times.txt")
  line=$(python3 - "$line" "$round" "$((c1 - c0))" "$((x1 - x0))" "$hz" "$idle_cores" "$((r1 - r0))" "$wt" "$((b1 - b0))" <<'PY'
import json, re, sys
r = json.loads(sys.argv[1])
ticks, other, hz, idle, refused = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7])
def s(t):
    mm, ss = re.match(r"(\d+)m([\d.]+)s", t).groups()
    return int(mm) * 60 + float(ss)
u, y = sys.argv[8].split()
secs, n = r["seconds"], r["requests"]
cpu, wrk = ticks / hz, s(u) + s(y)
busy = int(sys.argv[9]) / hz
r.update({"bench": "auth_run", "round": int(sys.argv[2]), "server_cores": round(cpu / secs, 3),
          "cpu_us_per_request": round(cpu * 1e6 / n, 2) if n else None,
          "net_cpu_us_per_request": round((cpu - idle * secs) * 1e6 / n, 2) if n else None,
          "other_job_cores": round(other / hz / secs, 3), "wrk_cores": round(wrk / secs, 3),
          "other_work_cores": round(max(0.0, busy - cpu - other / hz - wrk) / secs, 3),
          "tokens_refused": refused})
print(json.dumps(r))
PY
  )
  emit "$line"
  python3 -c 'import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if r["non_2xx"] == 0 and r["socket_errors"] == 0 and r["tokens_refused"] == 0 and r["requests"] > 0 else 1)' "$line" ||
    fail "$name (round $2): non-2xx answers, socket errors or refused tokens (see the line above)"
}
for round in $(seq "$rounds"); do
  echo "run_auth.sh: round $round of $rounds" >&2
  run_one "$round" off "$port_off" "$job_off" "$idle_off" "$job_on"
  run_one "$round" hs256 "$port_on" "$job_on" "$idle_on" "$job_off" NF_TOKEN="$tok_hs"
  run_one "$round" rs256 "$port_on" "$job_on" "$idle_on" "$job_off" NF_TOKEN="$tok_rs"
  run_one "$round" hs256-pool "$port_on" "$job_on" "$idle_on" "$job_off" NF_TOKENS="$tmp/pool.txt"
done
for p in "$job_off" "$job_on"; do
  kill -0 "$p" 2>/dev/null || fail "a job exited during the runs (see its log)"
done

# ---- 6. the summary ----
python3 - "$out" <<'PY' | tee -a "$out"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
runs = [r for r in rows if r.get("bench") == "auth_run"]
off = {r["round"]: r for r in runs if r["name"] == "off"}
med = lambda xs: round(statistics.median(xs), 3) if xs else None
for name in ("off", "hs256", "rs256", "hs256-pool"):
    mine = [r for r in runs if r["name"] == name]
    if not mine:
        continue
    paired = [(r, off[r["round"]]) for r in mine if r["round"] in off and off[r["round"]]["requests_per_s"]]
    print(json.dumps({"bench": "auth_summary", "name": name, "runs": len(mine),
                      "requests_per_s": round(statistics.median(r["requests_per_s"] for r in mine)),
                      "p50_ms": med([r["p50_ms"] for r in mine]), "p99_ms": med([r["p99_ms"] for r in mine]),
                      "cpu_us_per_request": med([r["cpu_us_per_request"] for r in mine]),
                      "net_cpu_us_per_request": med([r["net_cpu_us_per_request"] for r in mine]),
                      "vs_off": med([r["requests_per_s"] / o["requests_per_s"] for r, o in paired]),
                      "vs_off_each_round": [round(r["requests_per_s"] / o["requests_per_s"], 3) for r, o in paired],
                      "net_cpu_us_more_than_off": med([r["net_cpu_us_per_request"] - o["net_cpu_us_per_request"] for r, o in paired]),
                      "other_work_cores": med([r["other_work_cores"] for r in mine])}))
PY
echo "run_auth.sh: $out" >&2
[ -z "$failed" ]
