#!/usr/bin/env bash
# The read path against Apache Flink and Kafka Streams on the same input, in one run (issues 22
# and 42; perf/README, "Stream peer"). Three pairs, each the same work on both sides (issue 42,
# "Peers like for like"), the two sides at the same core count (shards / parallelism / stream
# threads: 1 and 2), so that a pair's ratio of events/s is also its ratio per core:
#   memory      newsflow's read path in memory (bench_readpath: no store, no epochs; the figure
#               is drain_events_per_s, all events until the last is done) against Flink with its
#               heap backend (HashMapStateBackend) and no checkpoints. Neither side can recover.
#   durable     newsflow with keyed state over its RocksDB store and an epoch every 10 s
#               (bench_readpath --store --epoch-ms 10000: each cut writes the dirty state and
#               commits the outputs, synced; no Kafka) against Flink with RocksDB
#               (EmbeddedRocksDBStateBackend) and a checkpoint every 10 s (to local files). Both
#               clocks include the final epoch / checkpoint that makes the last event durable:
#               newsflow's runs to the end of nf_epoch_stop (durable_events_per_s), Flink's to the
#               end of the job, which waits for a checkpoint after its tasks finished (Flink 2.3
#               triggers it at once; an idle wait before that checkpoint, if any, is taken out of
#               its durable_events_per_s, as bench_readpath takes out its own wait for trending's
#               last windows when no epoch ran in it: both see ReadPath.java and bench_readpath.c).
#               Not quite the same work: an epoch also writes its outputs into the synced pending
#               record with the state (exactly-once outputs), where Flink's file sink is outside
#               its checkpoints (outputs at least once).
#   broker_eos  end to end through the same Apache Kafka broker (scripts/kafka.sh, one node on
#               this machine) with exactly-once, catching up on the events produced to a topic
#               beforehand (not timed): the newsflow job (`newsflow run`, kafka.assignment=all,
#               an epoch = one Kafka transaction every second, state in RocksDB;
#               perf/stream/run_job.py) against Kafka Streams (exactly_once_v2, commits every
#               second, RocksDB stores with changelog topics). The job's articles are never
#               crawled: their topic vectors are seeded into its state directory (bench_readpath
#               --seed-topics), where its interest engine reads a vector it has not been sent
#               (engine/interest.h), with the topic names of perf/stream/taxonomy.json. newsflow's
#               clock runs until every output is committed (including the last epoch's commit
#               and the wait for it, up to 1 s); Kafka Streams' until its last end marker went
#               through its trending task (before that task's last commit): against newsflow.
#               CPU per event is each side's own process (the broker's is in neither).
# The existing figures stay as they were: stream.summary's "rows" compare newsflow in memory
# with Flink on RocksDB with checkpoints ("ratio", read by perf/report.py) and with Kafka
# Streams through the broker ("ratio_vs_kstreams"): not the same work, kept for continuity.
# Steps:
#   1. builds bench_readpath (Release, NF_BENCH=ON, into build-perf/ or $NF_PERF_BUILD_DIR) and
#      the Flink job perf/stream/flink (Maven; Flink 2.3 from Maven Central, jars cached in
#      $B/perf/flink-libs); with Kafka Streams also the newsflow binary;
#   2. bench_readpath --dump: generates the workload (Zipf users and articles, 1 in 50 events
#      delivered twice, event time in order over --span-min minutes) into the work directory,
#      runs newsflow's read path on it at 1 and 2 shards (in-process, exact trending counts) and
#      writes each run's outputs through the job's jsonl sink (stream.newsflow: memory); then
#      again with --store and --epoch-ms 10000, its outputs through the epochs' tee
#      (stream.newsflow_durable: durable);
#   3. the Flink job (local MiniCluster, RocksDB state backend, checkpoints every 10 s) on the same
#      events.jsonl at parallelism 1 and 2 (stream.flink: durable), and with the heap backend
#      without checkpoints (stream.flink_hashmap: memory);
#   3b. Kafka Streams 4.4 (perf/stream/kstreams) through a broker of its own (scripts/kafka.sh),
#      at 1 and 2 stream threads (exactly_once_v2, RocksDB stores; stream.kstreams), then the
#      newsflow job through the same broker at 1 and 2 shards (stream.newsflow_job): broker_eos;
#   4. perf/stream/compare_stream.py: each peer run's outputs against newsflow's at the same
#      parallelism and in the same pair — interest vectors within 1e-9, versions equal, every
#      trending window's top 50 equal. A difference fails the script (exit 1): the figures of
#      unequal jobs mean nothing.
# Prints JSON lines (stream.newsflow, stream.newsflow_durable, stream.flink, stream.flink_hashmap,
# stream.kstreams, stream.newsflow_job, stream.check (with "pair"), then stream.summary with the
# ratios per core and, in "pairs", the three pairs) and tees them to
# perf/results/stream-<date>-<time>.jsonl (or $NF_STREAM_OUT).
#   perf/run_stream.sh [--quick] [--events N] [--users U] [--articles A] [--span-min M]
#                      [--shards 1,2] [--dir WORKDIR] [--no-kstreams]
# --quick: 100,000 events (a few minutes in all: most of it is the JVMs starting). Default
# 1,000,000.
# --no-kstreams: no broker, so neither side of broker_eos.
# $NF_STREAM_KAFKA_PORT: the broker's port (default 49720; its controller listens 100 above);
# the job's admin server (its /metrics, polled by run_job.py) listens on that port + 10 + shards.
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
cmake --build "$B" -j "$(nproc)" --target bench_readpath $([ "$kstreams" = 1 ] && echo newsflow) >&2
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
wl=(--events "$events" --users "$users" --articles "$articles" --span-min "$span" --redeliver-every 50)
"$B/perf/bench_readpath" "${wl[@]}" --shards "$shards" --dump "$work" |
  sed 's/^{"bench":"readpath"/{"bench":"stream.newsflow"/' | emit
last_end=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['last_window_end'])" "$work/meta.json")
# check WORK NEWSFLOW_JSONL PEER PAIR P [--interest-only]: compare_stream.py's line, labelled with
# the pair and the parallelism; fails the script on a difference.
check() {
  python3 perf/stream/compare_stream.py "$1" "$2" "$3" ${6:+"$6"} |
    sed "s/^{\"bench\": \"stream.check\"/{\"bench\": \"stream.check\", \"pair\": \"$4\", \"parallelism\": $5/" |
    emit || die "$3's outputs differ from newsflow's ($2) at parallelism $5 (pair $4; see above)"
}

# The durable pair's newsflow side: the same workload (written again, checked to be the same
# bytes), keyed state over RocksDB (a fresh store per shard count) and an epoch every 10 s.
echo "run_stream.sh: newsflow with its store and epochs every 10 s, shards $shards" >&2
dur="$work/durable" && mkdir -p "$dur"
"$B/perf/bench_readpath" "${wl[@]}" --shards "$shards" --dump "$dur" --store "$dur/store" \
  --epoch-ms 10000 | sed 's/^{"bench":"readpath"/{"bench":"stream.newsflow_durable"/' | emit
cmp -s "$dur/events.jsonl" "$work/events.jsonl" && cmp -s "$dur/topics.jsonl" "$work/topics.jsonl" ||
  die "bench_readpath wrote another workload for the durable run"
rm -rf "$dur/events.jsonl" "$dur/topics.jsonl" "$dur/store"

for p in ${shards//,/ }; do
  echo "run_stream.sh: Flink, parallelism $p" >&2
  rm -rf "$work/flink-state" "$work"/flink-*.jsonl && mkdir -p "$work/flink-state"
  java -Xmx4g -cp "$cp" newsflow.peer.ReadPath --events "$work/events.jsonl" \
    --topics "$work/topics.jsonl" --out "$work" --state "$work/flink-state" \
    --last-window-end "$last_end" --parallelism "$p" 2>"$work/flink-$p.log" | emit ||
    { tail -20 "$work/flink-$p.log" >&2; die "the Flink job failed (log: $work/flink-$p.log)"; }
  check "$work" "$work/newsflow-$p.jsonl" flink rows "$p"  # the rows' ratio: against memory
  check "$work" "$dur/newsflow-$p.jsonl" flink durable "$p"
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
  check "$io" "$work/newsflow-$p.jsonl" flink interest_only "$p" --interest-only
done
rm -rf "$work/interest-only"
# The memory pair's peer: Flink with its heap backend and no checkpoints.
for p in ${shards//,/ }; do
  echo "run_stream.sh: Flink (HashMapStateBackend, no checkpoints), parallelism $p" >&2
  hm="$work/hashmap" && rm -rf "$hm" && mkdir -p "$hm/flink-state" && cp "$work/meta.json" "$hm/"
  java -Xmx4g -cp "$cp" newsflow.peer.ReadPath --events "$work/events.jsonl" \
    --topics "$work/topics.jsonl" --out "$hm" --state "$hm/flink-state" \
    --last-window-end "$last_end" --parallelism "$p" --backend hashmap --checkpoint-ms 0 \
    2>"$work/flink-hashmap-$p.log" |
    sed 's/^{"bench":"stream.flink"/{"bench":"stream.flink_hashmap"/' | emit ||
    { tail -20 "$work/flink-hashmap-$p.log" >&2; die "the Flink job failed (log: $work/flink-hashmap-$p.log)"; }
  check "$hm" "$work/newsflow-$p.jsonl" flink memory "$p"
done
rm -rf "$work/hashmap"

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
# The broker_eos pair's newsflow side, after Kafka Streams at the same parallelism:
# newsflow_job P KS_DIR. Its own topics (prefix nfjob-P-, `newsflow topics create`, 4 partitions
# as Kafka Streams' input), the same events produced to its read-events (the same loader, keyed by
# user_id, the record timestamp the event's; not timed), the articles' vectors seeded into a fresh
# state directory, then the job at P shards until every output is committed
# (perf/stream/run_job.py). Its committed outputs (the epochs' tee, sink.spec jsonl) are checked
# equal to Kafka Streams' outputs at the same parallelism, which were checked equal to
# bench_readpath's above.
newsflow_job() {
  local p=$1 ks=$2 jd="$work/job-$p" pre="nfjob-$1-"
  echo "run_stream.sh: the newsflow job through the broker, $p shard(s)" >&2
  rm -rf "$jd" && mkdir -p "$jd"
  "$B/newsflow" topics create --set kafka.brokers="127.0.0.1:$port" --set kafka.topic_prefix="$pre" \
    --partitions 4 >"$jd/topics.log" 2>&1 || { cat "$jd/topics.log" >&2; die "cannot create the job's topics"; }
  java -cp "$kscp" newsflow.peer.ReadPathStreams load --id "job$p" --bootstrap "127.0.0.1:$port" \
    --events "$work/events.jsonl" --partitions 4 --topic "${pre}read-events" 2>"$jd/load.log" >&2 ||
    { tail -20 "$jd/load.log" >&2; die "could not produce the events to the job's topic (log: $jd/load.log)"; }
  "$B/perf/bench_readpath" --events 1 --articles "$articles" --shards 0 --seed-topics "$jd/state" \
    2>"$jd/seed.log" || { cat "$jd/seed.log" >&2; die "cannot seed the job's topic vectors"; }
  python3 perf/stream/run_job.py --newsflow "$B/newsflow" --bootstrap "127.0.0.1:$port" \
    --prefix "$pre" --shards "$p" --state "$jd/state" --sink "$jd/newsflow-job.jsonl" \
    --taxonomy perf/stream/taxonomy.json --admin-port "$((port + 10 + p))" \
    --events "$(wc -l <"$work/events.jsonl")" --expect-outputs "$(wc -l <"$work/newsflow-$p.jsonl")" \
    --interval-ms 1000 --log "$jd/job.log" | emit ||
    { tail -5 "$jd/job.log" >&2; die "the newsflow job failed (log: $jd/job.log)"; }
  check "$ks" "$jd/newsflow-job.jsonl" kstreams broker_eos "$p"
  rm -rf "$jd/state"
}
if [ "$kstreams" = 1 ]; then
  kscp=$(java_peer kstreams "the Kafka Streams application")
  kdir="$work/kafka"
  port="${NF_STREAM_KAFKA_PORT:-49720}"
  # kafka.sh's readiness check would take another broker on the port for ours (perf/run_all.sh
  # runs brokers on 49740 and 49760, tests on others): refuse a port, or its controller's, in use
  for q in "$port" "$((port + 100))" "$((port + 11))" "$((port + 12))"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$q") 2>/dev/null; then
      die "port $q is in use (the broker takes NF_STREAM_KAFKA_PORT and 100 above, the job 11 and 12 above)"
    fi
  done
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
    check "$ks" "$work/newsflow-$p.jsonl" kstreams rows "$p"
    rm -rf "$ks/state"
    newsflow_job "$p" "$ks"
  done
  bash scripts/kafka.sh stop --dir "$kdir" >&2
  trap - EXIT
fi

# The summary. "rows" as before (newsflow in memory against Flink on RocksDB with checkpoints,
# Kafka Streams through the broker, Flink without trending: not the same work, kept for the
# readers of these keys, perf/report.py); "pairs" the three like-for-like pairs (header).
python3 - "$out" <<'EOF' | emit
import json, sys
by = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    key = r.get("shards", r.get("parallelism", r.get("threads")))
    by.setdefault(r["bench"], {})[key] = r
nf, fl, io, ks = (by.get(b, {}) for b in ("stream.newsflow", "stream.flink",
                                          "stream.flink_interest_only", "stream.kstreams"))
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

# pair: (newsflow's line, its events/s and CPU keys, the peer's line, its events/s key, what
# each side is); a pair's two sides run at the same core count, so its ratio is per core too
PAIRS = {
    "memory": ("stream.newsflow", "drain_events_per_s", "cpu_ns_per_event",
               "stream.flink_hashmap", "events_per_s",
               "newsflow in memory (bench_readpath: no store, no epochs)",
               "Flink, HashMapStateBackend, no checkpoints"),
    "durable": ("stream.newsflow_durable", "durable_events_per_s", "durable_cpu_ns_per_event",
                "stream.flink", "durable_events_per_s",
                "newsflow, keyed state over RocksDB, an epoch every 10 s, to the final epoch's "
                "commit (bench_readpath --store --epoch-ms 10000)",
                "Flink, EmbeddedRocksDBStateBackend, a checkpoint every 10 s, to the job's end "
                "(its final checkpoint included)"),
    "broker_eos": ("stream.newsflow_job", "events_per_s", "cpu_ns_per_event",
                   "stream.kstreams", "events_per_s",
                   "the newsflow job through the broker, exactly-once (an epoch = a Kafka "
                   "transaction every 1 s), until every output is committed",
                   "Kafka Streams, exactly_once_v2, commits every 1 s, until its last end marker "
                   "is processed"),
}
pairs = {}
for name, (nb, nk, nc, pb, pk, nwhat, pwhat) in PAIRS.items():
    a, b = by.get(nb, {}), by.get(pb, {})
    prs = []
    for p in sorted(a.keys() & b.keys()):
        ne, pe = a[p][nk], b[p].get(pk, b[p]["events_per_s"])
        prs.append({"cores": p, "newsflow_events_per_s": ne, "peer_events_per_s": pe,
                    "ratio": ne / pe, "newsflow_cpu_ns_per_event": a[p][nc],
                    "peer_cpu_ns_per_event": b[p]["cpu_ns_per_event"],
                    "cpu_ratio": b[p]["cpu_ns_per_event"] / a[p][nc]})
    if prs:
        pairs[name] = {"newsflow": nwhat, "peer": pwhat, "rows": prs}
print(json.dumps({"bench": "stream.summary", "peer": "flink " + next(iter(fl.values()))["flink"],
                  "events": next(iter(fl.values()))["events"], "rows": rows, "pairs": pairs,
                  "target": "newsflow >= 10x Flink's events/s per core",
                  "met": all(r["ratio"] >= 10 for r in rows)}, separators=(",", ":")))
EOF
echo "run_stream.sh: results in $out" >&2
