#!/usr/bin/env bash
# The read path against Apache Flink on the same input, in one run (issue 22; perf/README,
# "Stream peer"). Steps:
#   1. builds bench_readpath (Release, NF_BENCH=ON, into build-perf/ or $NF_PERF_BUILD_DIR) and
#      the Flink job perf/stream/flink (Maven; Flink 2.3 from Maven Central, jars cached in
#      $B/perf/flink-libs);
#   2. bench_readpath --dump: generates the workload (Zipf users and articles, 1 in 50 events
#      delivered twice, event time in order over --span-min minutes) into the work directory,
#      runs newsflow's read path on it at 1 and 2 shards (in-process, exact trending counts) and
#      writes each run's outputs through the job's jsonl sink;
#   3. the Flink job (local MiniCluster, RocksDB state backend, checkpoints every 10 s) on the same
#      events.jsonl at parallelism 1 and 2;
#   3b. Kafka Streams 4.4 (perf/stream/kstreams) through a broker of its own (scripts/kafka.sh),
#      at 1 and 2 stream threads (exactly_once_v2, RocksDB stores);
#   4. perf/stream/compare_stream.py: each Flink run's outputs against newsflow's at the same
#      parallelism — interest vectors within 1e-9, versions equal, every trending window's top 50
#      equal. A difference fails the script (exit 1): the figures of unequal jobs mean nothing.
# Prints JSON lines (stream.newsflow, stream.flink, stream.kstreams, stream.check, then stream.summary with the
# ratios per core) and tees them to perf/results/stream-<date>-<time>.jsonl (or $NF_STREAM_OUT).
#   perf/run_stream.sh [--quick] [--events N] [--users U] [--articles A] [--span-min M]
#                      [--shards 1,2] [--dir WORKDIR] [--no-kstreams]
# --quick: 100,000 events (about a minute in all). Default 1,000,000.
set -euo pipefail
cd "$(dirname "$0")/.."
B="${NF_PERF_BUILD_DIR:-build-perf}"
events=1000000 users=200000 articles=20000 span=90 shards=1,2 dir="" kstreams=1
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) events=100000 users=50000 ;;
    --events) events=$2; shift ;;
    --users) users=$2; shift ;;
    --articles) articles=$2; shift ;;
    --span-min) span=$2; shift ;;
    --shards) shards=$2; shift ;;
    --dir) dir=$2; shift ;;
    --no-kstreams) kstreams=0 ;;
    *) echo "usage: perf/run_stream.sh [--quick] [--events N] [--users U] [--articles A] [--span-min M] [--shards 1,2] [--dir WORKDIR] [--no-kstreams]" >&2; exit 2 ;;
  esac
  shift
done
die() { echo "run_stream.sh: $*" >&2; exit 1; }
command -v java >/dev/null || die "java is not installed (scripts/deps.sh installs it)"
command -v mvn >/dev/null || die "mvn is not installed (scripts/deps.sh installs it)"

cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DNF_BENCH=ON >&2
cmake --build "$B" -j "$(nproc)" --target bench_readpath >&2
B=$(cd "$B" && pwd)
# java_peer DIR NAME: resolves (once) and builds the Maven project perf/stream/DIR into
# $B/perf/DIR (its jars in $B/perf/DIR-libs) and prints its classpath. NAME is for messages.
java_peer() {
  local d=$1 name=$2 libs="$B/perf/$1-libs" jar
  if [ ! -s "$libs/.complete" ] || [ "perf/stream/$d/pom.xml" -nt "$libs/.complete" ]; then
    rm -rf "$libs" && mkdir -p "$libs"
    mvn -q -B -f "perf/stream/$d/pom.xml" dependency:copy-dependencies -DoutputDirectory="$libs" \
      >"$B/perf/$d-mvn.log" 2>&1 ||
      { tail -20 "$B/perf/$d-mvn.log" >&2; die "Maven could not resolve $name's jars (log: $B/perf/$d-mvn.log)"; }
    touch "$libs/.complete"
  fi
  mvn -q -B -f "perf/stream/$d/pom.xml" package -DskipTests -Dpeer.build.dir="$B/perf/$d" \
    >"$B/perf/$d-build.log" 2>&1 ||
    { tail -20 "$B/perf/$d-build.log" >&2; die "$name did not build (log: $B/perf/$d-build.log)"; }
  jar=$(ls "$B/perf/$d"/*.jar 2>/dev/null | head -1)
  [ -s "$jar" ] || die "no jar in $B/perf/$d after the build"
  echo "$jar:$(ls "$libs"/*.jar | tr '\n' ':')"
}
cp=$(java_peer flink "the Flink job")

work="${dir:-$B/perf/stream-work}"
rm -rf "$work" && mkdir -p "$work"
mkdir -p perf/results
out="${NF_STREAM_OUT:-perf/results/stream-$(date +%Y%m%d-%H%M%S).jsonl}"
: >"$out"
emit() { tee -a "$out"; }

echo "run_stream.sh: newsflow, $events events, shards $shards" >&2
"$B/perf/bench_readpath" --events "$events" --users "$users" --articles "$articles" \
  --span-min "$span" --shards "$shards" --redeliver-every 50 --dump "$work" |
  sed 's/^{"bench":"readpath"/{"bench":"stream.newsflow"/' | emit
last_end=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['last_window_end'])" "$work/meta.json")

for p in ${shards//,/ }; do
  echo "run_stream.sh: Flink, parallelism $p" >&2
  rm -rf "$work/flink-state" "$work"/flink-*.jsonl && mkdir -p "$work/flink-state"
  java -Xmx4g -cp "$cp" newsflow.peer.ReadPath --events "$work/events.jsonl" \
    --topics "$work/topics.jsonl" --out "$work" --state "$work/flink-state" \
    --last-window-end "$last_end" --parallelism "$p" 2>"$work/flink-$p.log" | emit ||
    { tail -20 "$work/flink-$p.log" >&2; die "the Flink job failed (log: $work/flink-$p.log)"; }
  python3 perf/stream/compare_stream.py "$work" "$work/newsflow-$p.jsonl" flink |
    sed "s/^{\"bench\": \"stream.check\"/{\"bench\": \"stream.check\", \"parallelism\": $p/" | emit ||
    die "Flink's outputs differ from newsflow's at parallelism $p (see above)"
done
# Where Flink's time goes: the same job without its trending side (event-id dedup and interest
# only; the interest updates checked equal again). A bound that does not depend on how the
# trending side is written: newsflow's whole read path against Flink's part of it.
for p in ${shards//,/ }; do
  echo "run_stream.sh: Flink without trending, parallelism $p" >&2
  io="$work/interest-only" && rm -rf "$io" && mkdir -p "$io/flink-state" && cp "$work/meta.json" "$io/"
  java -Xmx4g -cp "$cp" newsflow.peer.ReadPath --events "$work/events.jsonl" \
    --topics "$work/topics.jsonl" --out "$io" --state "$io/flink-state" \
    --last-window-end "$last_end" --parallelism "$p" --interest-only 2>"$work/flink-io-$p.log" |
    sed 's/^{"bench":"stream.flink"/{"bench":"stream.flink_interest_only"/' | emit ||
    { tail -20 "$work/flink-io-$p.log" >&2; die "the Flink job failed (log: $work/flink-io-$p.log)"; }
  python3 perf/stream/compare_stream.py "$io" "$work/newsflow-$p.jsonl" flink --interest-only |
    sed "s/^{\"bench\": \"stream.check\"/{\"bench\": \"stream.check\", \"parallelism\": $p/" | emit ||
    die "Flink's interest updates (without trending) differ from newsflow's at parallelism $p"
done
rm -rf "$work/interest-only"

# The check can fail: the last run's outputs with one trending score and one interest weight
# changed must be found unequal (each alone), or the equality above meant nothing.
for what in trending interest; do
  bad="$work/bad-$what" && rm -rf "$bad" && mkdir -p "$bad" && cp "$work/meta.json" "$bad/"
  cp "$work"/flink-*.jsonl "$bad/"
  python3 - "$bad" "$what" <<'PY'
import glob, json, sys
d, what = sys.argv[1], sys.argv[2]
f = sorted(glob.glob("%s/flink-%s-*.jsonl" % (d, what)))[0]
rows = [json.loads(x) for x in open(f)]
r = next(r for r in rows if (r.get("items") if what == "trending" else r.get("vector")))
if what == "trending":
    r["items"][-1]["score"] += 1
else:
    k = next(iter(r["vector"]))
    r["vector"][k] += 1e-6
    for o in rows:  # the user's last update, so the change is what the check compares
        if o["user_id"] == r["user_id"] and o["version"] > r["version"]:
            o["vector"][k] = o["vector"].get(k, 0) + 1e-6
open(f, "w").write("".join(json.dumps(x) + "\n" for x in rows))
PY
  if python3 perf/stream/compare_stream.py "$bad" "$work/newsflow-$p.jsonl" flink >/dev/null 2>&1; then
    die "compare_stream.py found a changed $what output equal: the check is broken"
  fi
  rm -rf "$bad"
done

# Kafka Streams (perf/stream/kstreams), through a real broker of its own (scripts/kafka.sh: a
# private directory and port, stopped by pid at the end): the same events produced to a topic
# (not timed), then the application at 1 and 2 stream threads, its outputs read back
# read_committed and checked equal like Flink's. --no-kstreams skips it.
if [ "$kstreams" = 1 ]; then
  kscp=$(java_peer kstreams "the Kafka Streams application")
  kdir="$work/kafka"
  port="${NF_STREAM_KAFKA_PORT:-49720}"
  trap 'bash scripts/kafka.sh stop --dir "$kdir" >/dev/null 2>&1 || true' EXIT
  bash scripts/kafka.sh start --fresh --dir "$kdir" --port "$port" >&2
  for p in ${shards//,/ }; do
    echo "run_stream.sh: Kafka Streams, $p stream thread(s)" >&2
    ks="$work/kstreams-$p" && rm -rf "$ks" && mkdir -p "$ks/state" && cp "$work/meta.json" "$ks/"
    java -cp "$kscp" newsflow.peer.ReadPathStreams load --id "$p" --bootstrap "127.0.0.1:$port" \
      --events "$work/events.jsonl" --partitions 4 2>"$ks/load.log" >&2 ||
      { tail -20 "$ks/load.log" >&2; die "could not produce the events to the broker (log: $ks/load.log)"; }
    java -Xmx4g -cp "$kscp" newsflow.peer.ReadPathStreams run --id "$p" --bootstrap "127.0.0.1:$port" \
      --topics "$work/topics.jsonl" --out "$ks" --state "$ks/state" --threads "$p" --partitions 4 \
      --last-window-end "$last_end" 2>"$ks/run.log" | emit ||
      { tail -20 "$ks/run.log" >&2; die "the Kafka Streams application failed (log: $ks/run.log)"; }
    python3 perf/stream/compare_stream.py "$ks" "$work/newsflow-$p.jsonl" kstreams |
      sed "s/^{\"bench\": \"stream.check\"/{\"bench\": \"stream.check\", \"parallelism\": $p/" | emit ||
      die "Kafka Streams' outputs differ from newsflow's at $p thread(s) (see above)"
    rm -rf "$ks/state"
  done
  bash scripts/kafka.sh stop --dir "$kdir" >&2
  trap - EXIT
fi

python3 - "$out" <<'EOF' | emit
import json, sys
nf, fl, io, ks = {}, {}, {}, {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["bench"] == "stream.newsflow":
        nf[r["shards"]] = r
    elif r["bench"] == "stream.flink":
        fl[r["parallelism"]] = r
    elif r["bench"] == "stream.flink_interest_only":
        io[r["parallelism"]] = r
    elif r["bench"] == "stream.kstreams":
        ks[r["threads"]] = r
rows = []
for p in sorted(nf.keys() & fl.keys()):
    # newsflow: every event until the last one is done (drain), as Flink's clock runs to the end
    n_eps = nf[p]["drain_events_per_s"]
    rows.append({"cores": p, "newsflow_events_per_s": n_eps, "flink_events_per_s": fl[p]["events_per_s"],
                 "ratio": n_eps / fl[p]["events_per_s"],
                 "newsflow_cpu_ns_per_event": nf[p]["cpu_ns_per_event"],
                 "flink_cpu_ns_per_event": fl[p]["cpu_ns_per_event"],
                 "cpu_ratio": fl[p]["cpu_ns_per_event"] / nf[p]["cpu_ns_per_event"]})
    if p in ks:
        rows[-1].update({"kstreams_events_per_s": ks[p]["events_per_s"],
                         "ratio_vs_kstreams": n_eps / ks[p]["events_per_s"],
                         "kstreams_cpu_ns_per_event": ks[p]["cpu_ns_per_event"]})
    if p in io:
        rows[-1].update({"flink_interest_only_events_per_s": io[p]["events_per_s"],
                         "ratio_vs_interest_only": n_eps / io[p]["events_per_s"],
                         "flink_interest_only_cpu_ns_per_event": io[p]["cpu_ns_per_event"]})
print(json.dumps({"bench": "stream.summary", "peer": "flink " + next(iter(fl.values()))["flink"],
                  "events": next(iter(fl.values()))["events"], "rows": rows,
                  "target": "newsflow >= 10x Flink's events/s per core",
                  "met": all(r["ratio"] >= 10 for r in rows)}, separators=(",", ":")))
EOF
echo "run_stream.sh: results in $out" >&2
