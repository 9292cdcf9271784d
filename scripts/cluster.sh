#!/usr/bin/env bash
# The production topology on one machine, on loopback (issue 43): three Apache Kafka brokers in
# KRaft mode (scripts/kafka.sh --nodes 3: replication 3, min.insync.replicas 2), the job's topics
# created as the compose file's `topics` step creates them, three newsflow processes of one
# consumer group started with deploy/docker-compose.yml's own environment for newsflow-1..3
# (changelogs, a warm standby, static membership, each its transactional id), and Debian's
# Prometheus scraping them with the repository's rules (deploy/compose/prometheus.yml).
#
#   scripts/cluster.sh up [--dir DIR] [--bin NEWSFLOW] [--port BASE] [--env NAME=VALUE]...
#   scripts/cluster.sh status [--dir DIR]
#   scripts/cluster.sh env N [--dir DIR]      process N's environment, as `up` started it
#   scripts/cluster.sh down [--dir DIR]        stops everything `up` started there, by pid
#
# What the compose file's environment cannot say on one host is replaced, and `up` prints it:
# kafka.brokers (the loopback brokers), admin.listen (127.0.0.1), admin.port, admin.probe_port
# and admin.operator_port (BASE+10*N, +1, +2 for process N), serve.advertised_url (its admin
# address) and state.dir (DIR/newsflow-N); --env adds or replaces a variable of every process
# (e.g. NEWSFLOW_FETCH_ALLOW_PRIVATE=127.0.0.0/8 to crawl feeds served on this machine, which
# production refuses). Everything else is the file's. Ports: the brokers
# at BASE+1000.. (clients) and BASE+1100.. (controllers), Prometheus at BASE+90.
#
# DIR default: ${NF_CLUSTER_DIR:-/tmp/newsflow-cluster}; BASE default 19400; NEWSFLOW default
# build/newsflow (or $NF_BIN). Each process logs to DIR/newsflow-N.log. `up` on a DIR where a
# cluster runs refuses; `down` then `up` starts afresh (the brokers' and processes' data are
# wiped: this is a place to try the shape, not to keep data). Needs: what scripts/kafka.sh
# needs, python3 with PyYAML, prometheus, curl. Exit: 0 ok, 1 failure (the message says which
# log to read), 2 usage.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DIR="${NF_CLUSTER_DIR:-/tmp/newsflow-cluster}"
BIN="${NF_BIN:-$ROOT/build/newsflow}"
BASE=19400
PROCS=3
EXTRA=()

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}
die() {
  echo "cluster.sh: $*" >&2
  exit 1
}

cmd="${1:-}"
[ -n "$cmd" ] || usage
shift
N=""
if [ "$cmd" = env ]; then
  N="${1:-}"
  [[ "$N" =~ ^[1-3]$ ]] || usage
  shift
fi
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR="$2"; shift 2 ;;
    --bin) BIN="$2"; shift 2 ;;
    --port) BASE="$2"; shift 2 ;;
    --env)
      [[ "${2:-}" =~ ^NEWSFLOW_[A-Z0-9_]+= ]] || die "--env wants NEWSFLOW_NAME=VALUE"
      EXTRA+=("$2"); shift 2 ;;
    *) usage ;;
  esac
done
[[ "$BASE" =~ ^[0-9]+$ ]] && [ "$BASE" -ge 1024 ] && [ "$BASE" -le 60000 ] || die "--port wants 1024..60000"

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# The compose file's environment of a service, as NAME=VALUE lines, with the loopback values.
service_env() { # service, process number (0: not a process)
  python3 - "$ROOT/deploy/docker-compose.yml" "$1" "$2" "$DIR" "$BASE" "$(cat "$DIR/bootstrap")" <<'PY'
import sys, yaml
path, svc, n, d, base, boot = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6]
env = {k: str(v) for k, v in yaml.safe_load(open(path))["services"][svc]["environment"].items()}
env["NEWSFLOW_KAFKA_BROKERS"] = boot
if n:
    admin, probe = base + 10 * n, base + 10 * n + 1
    env.update(NEWSFLOW_ADMIN_LISTEN="127.0.0.1", NEWSFLOW_ADMIN_PORT=str(admin),
               NEWSFLOW_ADMIN_PROBE_PORT=str(probe))
    if "NEWSFLOW_ADMIN_OPERATOR_PORT" in env:
        env["NEWSFLOW_ADMIN_OPERATOR_PORT"] = str(base + 10 * n + 2)
    env.update(
               NEWSFLOW_SERVE_ADVERTISED_URL="http://127.0.0.1:%d" % admin,
               NEWSFLOW_STATE_DIR="%s/newsflow-%d" % (d, n))
for k, v in sorted(env.items()):
    print("%s=%s" % (k, v))
PY
}

compose_args() { # service: its command
  python3 - "$ROOT/deploy/docker-compose.yml" "$1" <<'PY'
import sys, yaml
print("\n".join(yaml.safe_load(open(sys.argv[1]))["services"][sys.argv[2]]["command"]))
PY
}

up() {
  [ -x "$BIN" ] || die "no newsflow binary at $BIN (build it, or pass --bin)"
  command -v prometheus >/dev/null || die "prometheus not found (scripts/deps.sh installs it)"
  python3 -c 'import yaml' 2>/dev/null || die "python3 lacks PyYAML (apt-get install python3-yaml)"
  for i in $(seq "$PROCS"); do
    alive "$DIR/newsflow-$i.pid" && die "a cluster runs in $DIR (process $i): scripts/cluster.sh down --dir $DIR"
  done
  rm -rf "$DIR"
  mkdir -p "$DIR"
  echo "cluster.sh: 3 brokers (scripts/kafka.sh --nodes 3)"
  bash "$ROOT/scripts/kafka.sh" start --nodes 3 --fresh --dir "$DIR/kafka" --port $((BASE + 1000)) \
    >"$DIR/kafka.log" 2>&1 || die "the brokers did not start: $DIR/kafka.log"
  bash "$ROOT/scripts/kafka.sh" bootstrap --dir "$DIR/kafka" >"$DIR/bootstrap"
  echo "cluster.sh: topics, as the compose file's topics step: newsflow $(compose_args topics | tr '\n' ' ')"
  mapfile -t args < <(compose_args topics)
  mapfile -t tenv < <(service_env topics 0)
  env -i PATH="$PATH" HOME="${HOME:-/root}" "${tenv[@]}" "$BIN" "${args[@]}" >"$DIR/topics.log" 2>&1 ||
    die "topics create failed: $DIR/topics.log"
  for i in $(seq "$PROCS"); do
    mapfile -t penv < <(service_env "newsflow-$i" "$i")
    penv+=("${EXTRA[@]}")
    printf '%s\n' "${penv[@]}" >"$DIR/newsflow-$i.env"
    env -i PATH="$PATH" HOME="${HOME:-/root}" "${penv[@]}" setsid "$BIN" run >"$DIR/newsflow-$i.out" \
      2>"$DIR/newsflow-$i.log" </dev/null &
    echo $! >"$DIR/newsflow-$i.pid"
  done
  # Prometheus: the compose file's configuration, its targets moved to loopback.
  mkdir -p "$DIR/prometheus"
  cp "$ROOT/deploy/prometheus/alerts.yml" "$ROOT/deploy/prometheus/slo.yml" "$DIR/prometheus/"
  python3 - "$ROOT/deploy/compose/prometheus.yml" "$DIR/prometheus/prometheus.yml" "$BASE" "$PROCS" <<'PY'
import sys, yaml
src, dst, base, procs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
c = yaml.safe_load(open(src))
for j in c["scrape_configs"]:
    if j["job_name"] == "newsflow":
        j["static_configs"] = [{"targets": ["127.0.0.1:%d" % (base + 10 * n + 1) for n in range(1, procs + 1)]}]
c["scrape_configs"] = [j for j in c["scrape_configs"] if j["job_name"] == "newsflow"]
c["global"]["scrape_interval"] = c["global"]["evaluation_interval"] = "5s"
yaml.safe_dump(c, open(dst, "w"), sort_keys=False)
PY
  setsid prometheus --config.file="$DIR/prometheus/prometheus.yml" \
    --storage.tsdb.path="$DIR/prometheus/data" --web.listen-address=127.0.0.1:$((BASE + 90)) \
    >"$DIR/prometheus.log" 2>&1 </dev/null &
  echo $! >"$DIR/prometheus.pid"
  for i in $(seq "$PROCS"); do
    local probe=$((BASE + 10 * i + 1)) t=0
    until curl -sf "http://127.0.0.1:$probe/readyz" >/dev/null 2>&1; do
      alive "$DIR/newsflow-$i.pid" || die "process $i exited: $DIR/newsflow-$i.log"
      t=$((t + 1))
      [ $t -lt 1800 ] || die "process $i not ready after 180 s: $DIR/newsflow-$i.log"
      sleep 0.1
    done
  done
  status
  cat <<EOF
Replaced from the compose file's environment: kafka.brokers, admin.listen, admin.port,
admin.probe_port, admin.operator_port, serve.advertised_url, state.dir${EXTRA[*]:+, and }${EXTRA[*]:-} (scripts/cluster.sh env N shows the rest).
Try it:
  $BIN sources add URL --set kafka.brokers=$(cat "$DIR/bootstrap") --set state.dir=$DIR/newsflow-1
  kcat -P -b $(cat "$DIR/bootstrap") -t read-events -k USER <<< '{"user_id":"USER","article_id":"ID","ts":MS}'
  curl http://127.0.0.1:$((BASE + 10))/v1/trending
Stop: scripts/cluster.sh down --dir $DIR
EOF
}

status() {
  [ -f "$DIR/bootstrap" ] || die "no cluster in $DIR"
  echo "brokers: $(cat "$DIR/bootstrap")"
  for i in $(seq "$PROCS"); do
    local a=$((BASE + 10 * i)) s="stopped"
    alive "$DIR/newsflow-$i.pid" && s="pid $(cat "$DIR/newsflow-$i.pid")"
    echo "newsflow-$i: $s, http://127.0.0.1:$a (probe $((a + 1))), log $DIR/newsflow-$i.log"
  done
  local p="stopped"
  alive "$DIR/prometheus.pid" && p="pid $(cat "$DIR/prometheus.pid")"
  echo "prometheus: $p, http://127.0.0.1:$((BASE + 90))"
}

down() {
  [ -d "$DIR" ] || die "no cluster in $DIR"
  local pids=()
  for f in "$DIR"/newsflow-*.pid "$DIR/prometheus.pid"; do
    [ -f "$f" ] || continue
    if alive "$f"; then
      kill -TERM "$(cat "$f")"
      pids+=("$(cat "$f")")
    fi
  done
  # The processes commit a final epoch on SIGTERM (shutdown.timeout_ms): wait for them, by pid.
  for p in "${pids[@]}"; do
    for _ in $(seq 600); do
      kill -0 "$p" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$p" 2>/dev/null && { echo "cluster.sh: pid $p did not stop in 60 s: SIGKILL" >&2; kill -KILL "$p"; }
  done
  rm -f "$DIR"/newsflow-*.pid "$DIR/prometheus.pid"
  bash "$ROOT/scripts/kafka.sh" stop --dir "$DIR/kafka" >/dev/null 2>&1 || true
  echo "cluster.sh: stopped (data left in $DIR)"
}

case "$cmd" in
  up) up ;;
  status) status ;;
  env) sed 's/^/export /' "$DIR/newsflow-$N.env" 2>/dev/null || die "no process $N in $DIR" ;;
  down) down ;;
  *) usage ;;
esac
