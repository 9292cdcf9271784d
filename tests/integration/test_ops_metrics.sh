#!/usr/bin/env bash
# What an operator graphs (issue 15, items 7 and 12): `newsflow version` names the libraries the
# job runs on, and /metrics has the same in newsflow_build_info, sources by state, consumer lag
# per input partition and the seconds since the last committed epoch; and every metric the job
# registers was registered (newsflow_metrics_registration_errors_total 0).
# $1 = newsflow binary, $2 = source dir.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

"$NF" version >"$TMP/version" || fail "version exit code"
for lib in rdkafka rocksdb curl xml2 uring cjson microhttpd; do
  grep -Eq "^$lib +[0-9]+\.[0-9]+" "$TMP/version" || fail "version does not name $lib: $(cat "$TMP/version")"
done
pass "version names librdkafka, RocksDB, libcurl, libxml2, liburing, cJSON, libmicrohttpd"

# The job on the embedded Kafka (demo read events), one good feed and one missing local file.
cp "$SRC/examples/feeds/world.xml" "$TMP/world.xml"
printf 'world.xml\nmissing.xml\n' >"$TMP/sources.txt"
PORT=$(free_port)
"$NF" run --set sources.file="$TMP/sources.txt" --set admin.port="$PORT" \
  --set state.dir="$TMP/state" --set checkpoint.interval_ms=300 --set sink.spec=none \
  --set runtime.shards=2 2>"$TMP/err" &
PID=$!
# Wait (not a timing assertion: up to 60 s) for a lag sample and both source states.
for _ in $(seq 600); do
  curl -sf "http://127.0.0.1:$PORT/metrics" >"$TMP/metrics" 2>/dev/null || true
  # both inputs' lags: one sample of them is registered a partition at a time
  if grep -q '^newsflow_kafka_consumer_lag{topic="read-events"' "$TMP/metrics" &&
     grep -q '^newsflow_kafka_consumer_lag{topic="sources"' "$TMP/metrics" &&
     grep -q '^newsflow_sources{state="backoff"} 1$' "$TMP/metrics"; then
    break
  fi
  kill -0 "$PID" 2>/dev/null || fail "the job exited"
  sleep 0.1
done
python3 - "$TMP/metrics" "$TMP/version" <<'PY' || fail "metrics"
import re, sys
text = open(sys.argv[1]).read()
version = {}
for line in open(sys.argv[2]):
    f = line.split()
    version[f[0]] = f[1]
m = re.search(r'^newsflow_build_info\{(.*)\} 1$', text, re.M)
assert m, "no newsflow_build_info"
labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
for k in ("version", "commit", "rdkafka", "rocksdb", "curl", "xml2", "uring", "cjson"):
    want = version["newsflow" if k == "version" else k]
    assert labels.get(k) == want, (k, labels.get(k), want)
states = dict(re.findall(r'^newsflow_sources\{state="(\w+)"\} (\d+)$', text, re.M))
assert states.get("ok") == "1" and states.get("backoff") == "1", states
assert states.get("dead") == "0" and states.get("paused") == "0", states
lags = [(dict(re.findall(r'(\w+)="([^"]*)"', l)), int(v)) for l, v in
        re.findall(r'^newsflow_kafka_consumer_lag\{(.*)\} (\d+)$', text, re.M)]
topics = {l["topic"] for l, _ in lags if l["partition"].isdigit()}
assert "read-events" in topics and "sources" in topics, lags
s = re.search(r'^newsflow_epoch_seconds_since_commit (\S+)$', text, re.M)
assert s and float(s.group(1)) >= 0, "newsflow_epoch_seconds_since_commit"
# Every registration of a whole job succeeded (a failure is logged with component "metrics").
e = re.search(r'^newsflow_metrics_registration_errors_total (\S+)$', text, re.M)
assert e and float(e.group(1)) == 0, "newsflow_metrics_registration_errors_total: %s" % (
    e and e.group(1))
PY
stop_job
[ $RC -eq 0 ] || fail "the job did not stop cleanly (exit $RC)"
pass "build_info (same versions as \`version\`), sources by state, consumer lag per partition, no failed registration"
