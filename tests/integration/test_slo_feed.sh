#!/usr/bin/env bash
# The feed latency SLO moves on a real slow feed route (issue 44): the job runs with the drill
# NEWSFLOW_FAILPOINTS=slow-route:feed=700 (every feed answered 700 ms late, docs/runbooks.md
# "Failure drills"), Debian's Prometheus scrapes it every second with deploy/prometheus/alerts.yml
# and slo.yml loaded, and readers ask for their feeds. The route's histogram must count the slow
# answers above its 0.5 s bucket, the SLO's recording rule must show the error ratio, and the
# fast-burn alert NewsflowFeedLatencyBudgetBurn must go pending (it fires after 2 minutes of it);
# the feed's availability SLO, with no 5xx, must not burn, and another route stays fast.
# $1 = newsflow binary, $2 = source dir.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

PORT=$(free_port)
NEWSFLOW_FAILPOINTS=slow-route:feed=700 "$NF" run --config "$SRC/config/newsflow.json" \
  --set sources.file="$SRC/examples/feeds/sources.txt" --set admin.port="$PORT" \
  --set state.dir="$TMP/state" --set checkpoint.interval_ms=500 --set sink.spec=none \
  >/dev/null 2>"$TMP/err" &
PID=$!

prometheus_start "127.0.0.1:$PORT"
q() { prom_q "$1"; }
has() { q "$1" >"$TMP/q" 2>/dev/null && grep -q '"value"' "$TMP/q"; }
FEED='route="/v1/feed/{user_id}"'
# The value of a series line of the job's /metrics (0 when absent).
metric() {
  curl -sf "http://127.0.0.1:$PORT/metrics" >"$TMP/m" || { echo 0; return; }
  awk -v s="$1" 'index($0, s " ") == 1 {v = $2} END {print v + 0}' "$TMP/m"
}

# Readers come once the job is ready and answers from committed state (before, the feed is a
# fast 503, which the availability SLO counts: a readiness probe keeps readers away until then).
for _ in $(seq 600); do
  kill -0 "$PID" 2>/dev/null || fail "the job exited"
  curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 &&
    curl -sf "http://127.0.0.1:$PORT/v1/trending" >/dev/null 2>&1 && break
  sleep 0.1
done
# They ask for their feeds until the alert is pending: a condition, not a clock.
slow=0 pending=""
for i in $(seq 400); do
  kill -0 "$PID" 2>/dev/null || fail "the job exited"
  kill -0 "$PROM_PID" 2>/dev/null || { tail -5 "$TMP/prom.log" >&2; fail "prometheus exited"; }
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/v1/feed/reader-$((i % 7))" || true)
  [ "$code" = 200 ] || fail "a feed answered $code once the job was ready"
  slow=$((slow + 1))
  if [ "$slow" -ge 5 ] && has "ALERTS{alertname=\"NewsflowFeedLatencyBudgetBurn\",alertstate=~\"pending|firing\"}"; then
    pending=1
    break
  fi
done
[ "$slow" -ge 5 ] || fail "the feed never answered 200 ($code)"
[ -n "$pending" ] || { head -c 600 "$TMP/q"; q ALERTS; q 'newsflow:slo_errors:ratio_rate5m'; fail "NewsflowFeedLatencyBudgetBurn never went pending after $slow slow feeds"; }
pass "$slow feeds answered 700 ms late: NewsflowFeedLatencyBudgetBurn is pending"

# The histogram: every 200 was slower than 0.5 s (the 503s before the first view were fast).
count=$(metric "newsflow_http_request_duration_seconds_count{$FEED}")
fast=$(metric "newsflow_http_request_duration_seconds_bucket{$FEED,le=\"0.5\"}")
over=$(metric "newsflow_http_request_duration_seconds_bucket{$FEED,le=\"1\"}")
ok=$(metric "newsflow_http_responses_total{code=\"2xx\",$FEED}")
echo "feed route: $count answers, $fast within 0.5 s, $over within 1 s, $ok 2xx"
[ "$((count - fast))" -ge "$slow" ] || fail "the histogram counts $((count - fast)) answers over 0.5 s, $slow were slow"
[ "$((over - fast))" -ge "$slow" ] || fail "the slow answers are not in the 1 s bucket"
[ "$ok" -ge "$slow" ] || fail "newsflow_http_responses_total counted $ok 2xx of $slow"
pass "the route's histogram puts every slow answer above its 0.5 s bucket"

# The recording rule: the 5-minute error ratio is the share of slow answers, the burn rate far
# over 14.4; availability does not burn (no 5xx); another route answered in the same run is fast.
q "newsflow:slo_errors:ratio_rate5m{slo=\"feed_latency\"}" >"$TMP/r" || fail "query"
python3 - "$TMP/r" <<'PY' || fail "feed_latency error ratio"
import json, sys
r = json.load(open(sys.argv[1]))["data"]["result"]
v = float(r[0]["value"][1])
assert v > 0.144, "the 5m error ratio %s is not a fast burn (> 14.4 x 1 %%)" % v
print("feed_latency 5m error ratio %.2f: burn rate %.0f" % (v, v / 0.01))
PY
q "newsflow:slo_errors:ratio_rate5m{slo=\"feed_availability\"} > 0" >"$TMP/a" || fail "query"
grep -q '"result":\[\]' "$TMP/a" || fail "the availability SLO burns with no 5xx: $(cat "$TMP/a")"
has 'ALERTS{alertname="NewsflowFeedAvailabilityBudgetBurn"}' && fail "availability alert without a 5xx"
# /v1/trending has no drill: its answer lands in its own route's series, under 1 s (the
# readiness loop's earlier ones, while the job started, are left out of the comparison).
tr0=$(metric 'newsflow_http_request_duration_seconds_count{route="/v1/trending"}')
fast0=$(metric 'newsflow_http_request_duration_seconds_bucket{route="/v1/trending",le="1"}')
curl -sf "http://127.0.0.1:$PORT/v1/trending" >/dev/null || fail "GET /v1/trending"
tr=$(metric 'newsflow_http_request_duration_seconds_count{route="/v1/trending"}')
fast=$(metric 'newsflow_http_request_duration_seconds_bucket{route="/v1/trending",le="1"}')
[ "$((tr - tr0))" = 1 ] && [ "$((fast - fast0))" = 1 ] ||
  fail "/v1/trending: $((fast - fast0)) of $((tr - tr0)) answers within 1 s"
pass "the recording rule shows the burn; availability does not burn; /v1/trending stays fast"

prometheus_stop
stop_job
[ "$RC" = 0 ] || fail "job exit $RC after SIGTERM"
