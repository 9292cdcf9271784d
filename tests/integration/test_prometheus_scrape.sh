#!/usr/bin/env bash
# A real scrape (issue 21): Debian's Prometheus, with deploy/prometheus/alerts.yml and slo.yml,
# scrapes a running job every second; after two scrapes its HTTP API must return the key
# series, the recording rules must have values, and no rule may report an evaluation error.
# $1 = newsflow binary, $2 = source dir.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

# The job on its embedded broker with the bundled feeds (as scripts/run.sh runs it).
PORT=$(free_port)
"$NF" run --config "$SRC/config/newsflow.json" --set sources.file="$SRC/examples/feeds/sources.txt" \
  --set admin.port="$PORT" --set state.dir="$TMP/state" --set checkpoint.interval_ms=500 \
  --set sink.spec=none >/dev/null 2>"$TMP/err" &
PID=$!

prometheus_start "127.0.0.1:$PORT"
q() { prom_q "$1"; }
# Wait (up to 90 s; not a timing assertion) for two successful scrapes and a rule evaluation,
# and for a scrape after the job's consumer got its partitions (the lag series exist only then:
# a CI run once scraped a job still waiting for its assignment).
for _ in $(seq 900); do
  if q 'count_over_time(up{job="newsflow"}[1m]) >= 2 and up{job="newsflow"} == 1' 2>/dev/null |
       grep -q '"value"' && q 'newsflow:articles_ingested:rate5m' 2>/dev/null | grep -q '"value"' &&
     q 'newsflow_kafka_consumer_lag' 2>/dev/null | grep -q '"value"'; then
    break
  fi
  kill -0 "$PID" 2>/dev/null || fail "the job exited"
  kill -0 "$PROM_PID" 2>/dev/null || { tail -5 "$TMP/prom.log" >&2; fail "prometheus exited"; }
  sleep 0.1
done
for expr in 'up{job="newsflow"}' newsflow_build_info newsflow_epochs_committed_total \
  newsflow_epoch_interval_seconds newsflow_epoch_seconds_since_commit \
  newsflow_fetch_requests_total newsflow_dedup_articles_total newsflow_kafka_consumer_lag \
  newsflow_epoch_pause_seconds_bucket newsflow_dead_letters_total \
  newsflow:fetch_errors:ratio_rate5m newsflow:articles_ingested:rate5m \
  newsflow:kafka_consumer_lag:sum newsflow:dead_letters:rate5m; do
  q "$expr" >"$TMP/q" || fail "query $expr"
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["status"]=="success" and r["data"]["result"], r' \
    "$TMP/q" || fail "no series for $expr: $(head -c 300 "$TMP/q")"
done
pass "two scrapes: the key series and the recording rules have values"

curl -sf "http://127.0.0.1:$PPORT/api/v1/rules" >"$TMP/rules" || fail "rules API"
python3 - "$TMP/rules" <<'PY' || fail "rule health"
import json, sys
groups = json.load(open(sys.argv[1]))["data"]["groups"]
rules = [r for g in groups for r in g["rules"]]
bad = [(r["name"], r.get("lastError")) for r in rules if r.get("health") != "ok"]
assert len(rules) >= 20 and not bad, (len(rules), bad)
firing = [r["name"] for r in rules if r.get("type") == "alerting" and r.get("state") == "firing"]
assert not firing, "a healthy demo job fires %s" % firing
print("%d rules loaded, all healthy, none firing" % len(rules))
PY
pass "every rule evaluates without error on the real series, and none fires on a healthy job"

# Every query of the Grafana dashboards evaluates on the real Prometheus ($instance: all).
dashboard_queries "http://127.0.0.1:$PPORT"
pass "all $DASHBOARD_QUERIES dashboard queries evaluate on Prometheus"
prometheus_stop
stop_job
[ "$RC" = 0 ] || fail "job exit $RC after SIGTERM"
