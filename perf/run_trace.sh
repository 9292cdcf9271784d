#!/usr/bin/env bash
# What tracing costs (issue 44), side by side in rounds, each round once without traces and once
# exporting to a real OpenTelemetry Collector (scripts/otelcol.sh, on loopback, writing to a
# file) at the default sampling (trace.sample_ratio 0.01; errors and slow work always), in turn
# so that a drift of the machine falls on both:
#   the feed route   perf/run_query.sh (the job ingesting read events on its embedded cluster
#                    while wrk asks for readers' feeds): the feed's requests/s and the job's CPU
#                    per feed request;
#   the read path    perf/analytics/bench_readpath (decode, event-id dedup, trending, interest on
#                    2 shards, steady state, epochs every second; --trace to the collector):
#                    events/s and CPU per event.
# Then the medians and the ratios traced / untraced, and the spans the collector took. JSON lines
# to perf/results/trace-<date>-<time>.jsonl. Nothing is judged.
#
#   perf/run_trace.sh [--rounds N] [--ratio R] [--events N] [run_query.sh options, e.g. --quick]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3 ratio=0.01 qargs=() events=2000000
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --ratio) ratio="$2"; shift 2 ;;
    --events) events="$2"; shift 2 ;;
    *) qargs+=("$1"); shift ;;
  esac
done
OC=$(bash scripts/otelcol.sh install)
B="${NF_PERF_BUILD_DIR:-build-perf}"
[ -f "$B/CMakeCache.txt" ] || cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DNF_BENCH=ON >&2
cmake --build "$B" -j "$(nproc)" --target newsflow bench_readpath >&2
tmp=$(mktemp -d)
col=""
cleanup() { [ -n "$col" ] && kill "$col" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
cport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sed -e "s|@PORT@|$cport|; s|@OUT@|$tmp/spans.jsonl|" tests/otelcol/config.yaml.in >"$tmp/otelcol.yaml"
"$OC" --config="$tmp/otelcol.yaml" >"$tmp/otelcol.log" 2>&1 &
col=$!
mkdir -p perf/results
out="perf/results/trace-$(date -u +%Y%m%d-%H%M%S).jsonl"
spans() { [ -s "$tmp/spans.jsonl" ] || { echo 0; return; }; python3 -c '
import json, sys
print(sum(len(s["spans"]) for l in open(sys.argv[1]) for r in json.loads(l)["resourceSpans"] for s in r["scopeSpans"]))' "$tmp/spans.jsonl"; }
for r in $(seq "$rounds"); do
  for mode in off on; do
    set=()
    [ "$mode" = on ] && set=(--set "trace.endpoint=http://127.0.0.1:$cport/v1/traces" --set "trace.sample_ratio=$ratio")
    s0=$(spans)
    perf/run_query.sh "${qargs[@]}" "${set[@]}" >"$tmp/q.out" 2>"$tmp/q.err" ||
      { tail -20 "$tmp/q.err" >&2; exit 1; }
    s1=$(spans)
    python3 - "$tmp/q.out" "$mode" "$r" "$((s1 - s0))" <<'PY' | tee -a "$out"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
get = lambda n: next((x for x in rows if x.get("bench") == n or x.get("name") == n), {})
s, feed, quiet = get("query_summary"), get("feed"), get("query_quiet")
print(json.dumps({"bench": "trace_feed", "round": int(sys.argv[3]), "tracing": sys.argv[2],
                  "feed_requests_per_s": s.get("feed_requests_per_s"),
                  "feed_p99_ms": s.get("feed_p99_ms"),
                  "events_per_s_during_feed": s.get("events_per_s_during_feed"),
                  "job_cpu_us_per_feed": feed.get("job_cpu_us_per_request"),
                  "spans_exported": int(sys.argv[4])}))
PY
    targs=()
    [ "$mode" = on ] && targs=(--trace "http://127.0.0.1:$cport/v1/traces" --trace-ratio "$ratio")
    s0=$(spans)
    "$B/perf/bench_readpath" --events "$events" --warmup "$events" --ttl-s 1.5 --populate \
      --shards 2 --epoch-ms 1000 "${targs[@]}" >"$tmp/r.out" 2>"$tmp/r.err" ||
      { tail -20 "$tmp/r.err" >&2; exit 1; }
    s1=$(spans)
    python3 - "$tmp/r.out" "$mode" "$r" "$((s1 - s0))" <<'PY' | tee -a "$out"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")][-1]
print(json.dumps({"bench": "trace_readpath", "round": int(sys.argv[3]), "tracing": sys.argv[2],
                  "events_per_s": r.get("events_per_s"),
                  "cpu_ns_per_event": r.get("cpu_ns_per_event"),
                  "durable_events_per_s": r.get("durable_events_per_s"),
                  "spans_exported": int(sys.argv[4])}))
PY
  done
done
python3 - "$out" <<'PY' | tee -a "$out"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def med(bench, mode, k):
    v = [r[k] for r in rows if r["bench"] == bench and r["tracing"] == mode and r.get(k) is not None]
    return statistics.median(v) if v else None
summary = {"bench": "trace_summary", "rounds": sum(r["bench"] == "trace_feed" for r in rows) // 2}
for bench, keys in (("trace_feed", ["feed_requests_per_s", "job_cpu_us_per_feed",
                                    "events_per_s_during_feed"]),
                    ("trace_readpath", ["events_per_s", "cpu_ns_per_event",
                                        "durable_events_per_s"])):
    for k in keys:
        off, on = med(bench, "off", k), med(bench, "on", k)
        summary[bench[6:] + ":" + k] = {"off": off, "on": on,
                                        "on_vs_off": round(on / off, 3) if off and on else None}
    summary[bench[6:] + ":spans_exported_per_round"] = med(bench, "on", "spans_exported")
print(json.dumps(summary))
PY
