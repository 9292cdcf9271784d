# lib.sh — the preamble of the integration tests that run the job: `source "$(dirname
# "${BASH_SOURCE[0]}")/lib.sh" "$@"` right after a test's header comment. It sets
#   NF   the newsflow binary ($1)        SRC  the source directory ($2, may be empty)
#   TMP  a scratch directory, removed at exit together with the job in PID and the Prometheus
#        in PROM_PID (if set)
# and defines fail MSG (prints MSG and the tail of $TMP/err, exits 1), pass MSG, free_port
# (a TCP port free on 127.0.0.1 now), stop_job (SIGTERM to PID, its exit code in RC),
# body_has URL PATTERN (true when a GET of URL answers 2xx and its whole body matches PATTERN),
# dashboard_queries PROMETHEUS_URL (every Grafana dashboard query evaluated there), stop_pids
# PID... (for a cleanup of its own) and prometheus_start TARGET (below). Stray
# NEWSFLOW_* variables, which would be configuration, are unset. A test may redefine fail or
# cleanup after sourcing.
set -euo pipefail
NF="$1"
SRC="${2:-}"
TMP=$(mktemp -d)
PID=""
PROM_PID="" # prometheus_start's
# stop_pids PID...: SIGKILL to each pid given that is not empty. A process already gone is no
# failure: under set -e a failed kill in a cleanup would end the trap before the rest is stopped
# and TMP removed (a test whose job died left its Prometheus running).
stop_pids() {
  local p
  for p in "$@"; do [ -z "$p" ] || kill -9 "$p" 2>/dev/null || true; done
}
cleanup() {
  stop_pids "$PID" "$PROM_PID"
  rm -rf "$TMP"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$TMP/err" ] && tail -5 "$TMP/err" >&2; exit 1; }
pass() { echo "ok   $*"; }
for v in $(env | grep -o '^NEWSFLOW_[A-Z_]*' || true); do unset "$v"; done
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# body_has URL PATTERN: the body goes to a file first, because `curl | grep -q` under pipefail fails
# whenever grep stops reading before curl has written everything (curl exits 23 on SIGPIPE).
body_has() {
  curl -sf "$1" >"$TMP/body_has" || return 1
  grep -q -e "$2" "$TMP/body_has"
}
# stop_job: SIGTERM to the job in PID, then its exit code in RC (PID is cleared).
stop_job() {
  kill -TERM "$PID"
  set +e
  wait "$PID"
  RC=$?
  set -e
  PID=""
}
# dashboard_queries PROMETHEUS_URL: every query of the Grafana dashboards (deploy/grafana/
# dashboards.py --queries; $instance: all, $__rate_interval: 1m) evaluated by that Prometheus;
# fails on the first it refuses or cannot evaluate; their number in DASHBOARD_QUERIES.
dashboard_queries() {
  local expr n=0
  python3 "$SRC/deploy/grafana/dashboards.py" --queries >"$TMP/queries"
  while IFS= read -r expr; do
    expr=${expr//\$__rate_interval/1m}
    expr=${expr//\$instance/.*}
    curl -sf -G "$1/api/v1/query" --data-urlencode "query=$expr" >"$TMP/dq" ||
      fail "dashboard query refused: $expr"
    grep -q '"status":"success"' "$TMP/dq" || fail "dashboard query failed: $expr: $(head -c 300 "$TMP/dq")"
    n=$((n + 1))
  done <"$TMP/queries"
  [ "$n" -ge 40 ] || fail "only $n dashboard queries"
  DASHBOARD_QUERIES=$n
}
# prometheus_start TARGET: Debian's Prometheus on a free loopback port (PPORT, its pid in
# PROM_PID, killed at exit unless prometheus_stop stopped it), scraping TARGET (host:port) every second as job "newsflow", with
# deploy/prometheus's rules (alerts.yml, slo.yml) evaluated every second; prom_q EXPR queries it.
prometheus_start() {
  command -v prometheus >/dev/null || fail "prometheus not found (Debian: apt-get install prometheus)"
  PPORT=$(free_port)
  cat >"$TMP/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $SRC/deploy/prometheus/alerts.yml
  - $SRC/deploy/prometheus/slo.yml
scrape_configs:
  - job_name: newsflow
    static_configs:
      - targets: ['$1']
YML
  prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/tsdb" \
    --web.listen-address="127.0.0.1:$PPORT" >"$TMP/prom.log" 2>&1 &
  PROM_PID=$!
}
prom_q() { curl -sf --get "http://127.0.0.1:$PPORT/api/v1/query" --data-urlencode "query=$1"; }
# prometheus_stop: SIGTERM to prometheus_start's, waited for.
prometheus_stop() {
  kill -TERM "$PROM_PID"
  wait "$PROM_PID" 2>/dev/null || true
  PROM_PID=""
}
