#!/usr/bin/env bash
# A real Apache Kafka on loopback, for tests, benchmarks and trying newsflow against the broker it
# will meet in production (docs/ARCHITECTURE.md §9). KRaft mode, every node both broker and
# controller.
#
#   scripts/kafka.sh start [--nodes 1|3] [--dir DIR] [--port BASE] [--heap MB] [--fresh]
#                          [--listener NAME:LISTEN_BASE:ADVERTISED_BASE]...
#   scripts/kafka.sh stop [--dir DIR]               stops what `start` started there, by pid
#   scripts/kafka.sh status [--dir DIR]             nodes, pids, bootstrap, brokers the cluster sees
#   scripts/kafka.sh topics [--dir DIR]             every topic: partitions, leader, replicas, ISR
#   scripts/kafka.sh bootstrap [--dir DIR]          prints HOST:PORT,... (nothing if not started)
#   scripts/kafka.sh pid NODE [--dir DIR]           pid of one node (broker-fault tests)
#   scripts/kafka.sh start-node NODE [--dir DIR]    starts one node of an existing cluster again
#   scripts/kafka.sh fetch                          resolves the jars only (a second call downloads
#                                                   nothing)
#   scripts/kafka.sh tool CLASS [ARGS...]           runs a Kafka tool class with the cached jars,
#                                                   e.g. org.apache.kafka.tools.ProducerPerformance
#
# Jars: resolved by Maven from scripts/kafka/pom.xml into the cache directory
# ${NF_KAFKA_CACHE:-$HOME/.cache/newsflow/kafka-<version>} (Maven's own ~/.m2 underneath); once
# the cache is complete, start downloads nothing.
# Cluster: DIR (default ${NF_KAFKA_DIR:-/tmp/newsflow-kafka}) holds node-N/{server.properties,
# data/, server.log, stdout.log, pid}. Node N listens on 127.0.0.1:BASE+N-1 (clients; BASE
# default 9092) and 127.0.0.1:BASE+100+N-1 (controller quorum). One node: replication factor 1.
# Three nodes: replication factor 3 and min.insync.replicas 2 for every topic, the consumer
# offsets and the transaction state log. Automatic topic creation is off, as newsflow expects
# (`newsflow topics create` makes its topics). `start` on a DIR that holds a cluster restarts it
# with its data (--fresh wipes it first) and waits until every node is in the cluster's metadata.
# --listener (repeatable; read when a new cluster is written) gives every node one more client
# listener NAME on 127.0.0.1:LISTEN_BASE+N-1, advertised as 127.0.0.1:ADVERTISED_BASE+N-1: a
# client that connects through it is told those addresses for every broker, so a TCP proxy
# listening there (tests/chaos/chaos.py puts one per process and broker) carries all its traffic.
# group.initial.rebalance.delay.ms is 0 (a test's first group member is not kept waiting), or
# $NF_KAFKA_INITIAL_REBALANCE_DELAY_MS when a new cluster is written (Kafka's default is 3000:
# members that join a new group within it get one first assignment together).
# Needs: java (17+), mvn, kcat. Exit: 0 ok, 1 failure (the message says which log to read), 2 usage.
set -euo pipefail

KAFKA_VERSION=4.4.0 # also in scripts/kafka/pom.xml
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE="${NF_KAFKA_CACHE:-${HOME:-/root}/.cache/newsflow/kafka-$KAFKA_VERSION}"
DIR="${NF_KAFKA_DIR:-/tmp/newsflow-kafka}"
NODES=1
BASE=9092
HEAP=512
FRESH=0
LISTENERS=() # NAME:LISTEN_BASE:ADVERTISED_BASE

die() {
  echo "kafka.sh: $*" >&2
  exit 1
}
usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}

# Resolves the jars into $CACHE/libs once; the stamp records the pom it came from.
fetch() {
  local stamp="$CACHE/.complete" sum
  sum=$(sha256sum "$HERE/kafka/pom.xml" | cut -c1-16)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ]; then
    return 0
  fi
  command -v mvn >/dev/null || die "mvn is not installed (scripts/deps.sh installs it)"
  # One resolver at a time: ctest starts several brokers at once, and on a machine without the
  # cache their Mavens copied into the same libs.tmp and failed each other.
  mkdir -p "$CACHE"
  exec 9>"$CACHE/.fetch.lock"
  flock 9
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ]; then
    exec 9>&-
    return 0 # another one resolved them while this one waited
  fi
  echo "kafka.sh: resolving Apache Kafka $KAFKA_VERSION from Maven Central into $CACHE" >&2
  rm -rf "$CACHE/libs.tmp"
  if ! mvn -q -B -f "$HERE/kafka/pom.xml" dependency:copy-dependencies \
    -DoutputDirectory="$CACHE/libs.tmp" >"$CACHE/mvn.log" 2>&1; then
    tail -20 "$CACHE/mvn.log" >&2
    die "Maven could not resolve the broker's jars (full log: $CACHE/mvn.log)"
  fi
  rm -rf "$CACHE/libs"
  mv "$CACHE/libs.tmp" "$CACHE/libs"
  echo "$sum" >"$stamp"
  exec 9>&-
}

java_cmd() { # java_cmd LOGFILE HEAP_MB CLASS ARGS...
  local log="$1" heap="$2"
  shift 2
  command -v java >/dev/null || die "java is not installed (scripts/deps.sh installs it)"
  java -Xms"${heap}m" -Xmx"${heap}m" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -Djava.awt.headless=true -Dnf.kafka.log="$log" \
    -Dlog4j2.configurationFile="$HERE/kafka/log4j2.properties" \
    -cp "$CACHE/libs/*" "$@"
}

node_count() { # nodes of the cluster in $DIR (0 if none)
  local n=0
  while [ -f "$DIR/node-$((n + 1))/server.properties" ]; do n=$((n + 1)); done
  echo "$n"
}

node_pid() { # the live pid of node $1, or nothing: checked against its command line
  local f="$DIR/node-$1/pid" pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if [ -r "/proc/$pid/cmdline" ] &&
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "kafka.Kafka $DIR/node-$1/server.properties"; then
    echo "$pid"
  fi
}

bootstrap() {
  [ -f "$DIR/bootstrap" ] && cat "$DIR/bootstrap"
  return 0
}

write_config() { # write_config NODE NODES BASE
  local n="$1" nodes="$2" base="$3" voters="" i rf min l name lb ab
  local lis="" adv="" map=""
  for ((i = 1; i <= nodes; i++)); do
    voters="${voters:+$voters,}$i@127.0.0.1:$((base + 100 + i - 1))"
  done
  for l in "${LISTENERS[@]}"; do
    IFS=: read -r name lb ab <<<"$l"
    lis="$lis,$name://127.0.0.1:$((lb + n - 1))"
    adv="$adv,$name://127.0.0.1:$((ab + n - 1))"
    map="$map,$name:PLAINTEXT"
  done
  if [ "$nodes" -ge 3 ]; then rf=3 min=2; else rf=1 min=1; fi
  mkdir -p "$DIR/node-$n/data"
  cat >"$DIR/node-$n/server.properties" <<EOF
# written by scripts/kafka.sh: node $n of $nodes
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$((base + n - 1)),CONTROLLER://127.0.0.1:$((base + 100 + n - 1))$lis
advertised.listeners=PLAINTEXT://127.0.0.1:$((base + n - 1))$adv
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT$map
log.dirs=$DIR/node-$n/data
num.partitions=4
default.replication.factor=$rf
min.insync.replicas=$min
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$min
transaction.state.log.num.partitions=10
auto.create.topics.enable=false
unclean.leader.election.enable=false
group.initial.rebalance.delay.ms=${NF_KAFKA_INITIAL_REBALANCE_DELAY_MS:-0}
# a test broker's log: small segments so compaction and retention can be seen in minutes
log.segment.bytes=67108864
EOF
}

start_node() { # start_node N: launches it in the background (does not wait)
  local n="$1" pid
  pid=$(node_pid "$n")
  if [ -n "$pid" ]; then
    echo "kafka.sh: node $n already running (pid $pid)" >&2
    return 0
  fi
  (
    cd "$DIR/node-$n"
    exec setsid java -Xms"${HEAP}m" -Xmx"${HEAP}m" -XX:+UseG1GC \
      -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true -Dnf.kafka.log="$DIR/node-$n/server.log" \
      -Dlog4j2.configurationFile="$HERE/kafka/log4j2.properties" -cp "$CACHE/libs/*" \
      kafka.Kafka "$DIR/node-$n/server.properties" >"$DIR/node-$n/stdout.log" 2>&1 </dev/null
  ) &
  echo $! >"$DIR/node-$n/pid"
}

# Waits until every node of the cluster answers and is in the metadata (brokers registered).
wait_ready() {
  local nodes="$1" boot seen i
  boot=$(bootstrap)
  command -v kcat >/dev/null || die "kcat is not installed (scripts/deps.sh installs it)"
  for ((i = 0; i < 600; i++)); do
    for ((n = 1; n <= nodes; n++)); do
      # The pid file names the launching subshell until it has exec'd java: check the process
      # exists, not yet its command line.
      [ -d "/proc/$(cat "$DIR/node-$n/pid" 2>/dev/null || echo none)" ] ||
        die "node $n exited during start-up; see $DIR/node-$n/server.log and stdout.log"
    done
    seen=$(kcat -b "$boot" -L -m 3 2>/dev/null | grep -c '^  broker [0-9]* at' || true)
    if [ "$seen" -ge "$nodes" ]; then
      return 0
    fi
    sleep 0.2
  done
  die "the cluster in $DIR did not become ready within 120 s ($seen of $nodes brokers seen); see $DIR/node-*/server.log"
}

cmd_start() {
  fetch
  if [ "$FRESH" = 1 ]; then
    cmd_stop
    rm -rf "$DIR"
  fi
  local have
  have=$(node_count)
  if [ "$have" -gt 0 ]; then
    NODES=$have # a cluster exists here: restart it with its data
  else
    mkdir -p "$DIR"
    local id i boot=""
    id=$(java_cmd "$DIR/format.log" 128 kafka.tools.StorageTool random-uuid 2>/dev/null | tail -1)
    [ -n "$id" ] || die "could not generate a cluster id (see $DIR/format.log)"
    for ((i = 1; i <= NODES; i++)); do
      write_config "$i" "$NODES" "$BASE"
      java_cmd "$DIR/format.log" 128 kafka.tools.StorageTool format -t "$id" \
        -c "$DIR/node-$i/server.properties" >>"$DIR/format.log" 2>&1 ||
        die "formatting node $i failed; see $DIR/format.log"
      boot="${boot:+$boot,}127.0.0.1:$((BASE + i - 1))"
    done
    echo "$id" >"$DIR/cluster.id"
    echo "$boot" >"$DIR/bootstrap"
  fi
  local n
  for ((n = 1; n <= NODES; n++)); do start_node "$n"; done
  wait_ready "$NODES"
  echo "kafka.sh: Apache Kafka $KAFKA_VERSION ready: $NODES node(s) at $(bootstrap) (dir $DIR)" >&2
  bootstrap
}

cmd_stop() {
  local nodes n pid i
  nodes=$(node_count)
  for ((n = 1; n <= nodes; n++)); do
    pid=$(node_pid "$n")
    [ -n "$pid" ] || continue
    kill -CONT "$pid" 2>/dev/null || true # a SIGSTOPped node cannot act on SIGTERM
    kill -TERM "$pid" 2>/dev/null || true
  done
  for ((n = 1; n <= nodes; n++)); do
    pid=$(node_pid "$n")
    [ -n "$pid" ] || continue
    for ((i = 0; i < 300; i++)); do
      [ -d "/proc/$pid" ] || break
      sleep 0.1
    done
    if [ -d "/proc/$pid" ]; then
      echo "kafka.sh: node $n (pid $pid) did not stop within 30 s of SIGTERM; killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$DIR/node-$n/pid"
  done
}

cmd_status() {
  local nodes n pid boot rc=0
  nodes=$(node_count)
  if [ "$nodes" -eq 0 ]; then
    echo "no cluster in $DIR"
    return 1
  fi
  boot=$(bootstrap)
  echo "cluster $(cat "$DIR/cluster.id" 2>/dev/null) in $DIR: $nodes node(s), bootstrap $boot"
  for ((n = 1; n <= nodes; n++)); do
    pid=$(node_pid "$n")
    if [ -n "$pid" ]; then
      echo "  node $n: running (pid $pid)"
    else
      echo "  node $n: stopped"
      rc=1
    fi
  done
  kcat -b "$boot" -L -m 3 2>/dev/null | grep '^  broker' | sed 's/^  /  metadata: /' || rc=1
  return $rc
}

cmd_topics() {
  local boot
  boot=$(bootstrap)
  [ -n "$boot" ] || die "no cluster in $DIR"
  kcat -b "$boot" -L -m 10 | sed -n '/ topics:/,$p'
}

[ $# -ge 1 ] || usage
CMD="$1"
shift
ARG=""
case "$CMD" in pid | start-node | tool)
  [ $# -ge 1 ] || usage
  ARG="$1"
  shift
  ;;
esac
if [ "$CMD" = tool ]; then
  fetch
  java_cmd "${NF_KAFKA_TOOL_LOG:-/dev/null}" "${NF_KAFKA_TOOL_HEAP:-512}" "$ARG" "$@"
  exit $?
fi
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes)
      NODES="${2:-}"
      [ "$NODES" = 1 ] || [ "$NODES" = 3 ] || die "--nodes takes 1 or 3"
      shift 2
      ;;
    --dir)
      DIR="${2:?--dir needs a directory}"
      shift 2
      ;;
    --port)
      BASE="${2:?--port needs a number}"
      shift 2
      ;;
    --heap)
      HEAP="${2:?--heap needs megabytes}"
      shift 2
      ;;
    --fresh)
      FRESH=1
      shift
      ;;
    --listener)
      [[ "${2:-}" =~ ^[A-Z][A-Z0-9_]*:[0-9]+:[0-9]+$ ]] ||
        die "--listener takes NAME:LISTEN_BASE:ADVERTISED_BASE (NAME in capitals)"
      LISTENERS+=("$2")
      shift 2
      ;;
    -h | --help) usage ;;
    *)
      echo "kafka.sh: unknown option $1" >&2
      usage
      ;;
  esac
done
case "$BASE" in '' | *[!0-9]*) die "--port takes a number" ;; esac
DIR=$(mkdir -p "$DIR" && cd "$DIR" && pwd)

case "$CMD" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  topics) cmd_topics ;;
  bootstrap) bootstrap ;;
  fetch) fetch ;;
  pid)
    p=$(node_pid "$ARG")
    [ -n "$p" ] || die "node $ARG is not running in $DIR"
    echo "$p"
    ;;
  start-node)
    [ -f "$DIR/node-$ARG/server.properties" ] || die "no node $ARG in $DIR"
    start_node "$ARG"
    ;;
  -h | --help | help) usage ;;
  *)
    echo "kafka.sh: unknown command $CMD" >&2
    usage
    ;;
esac
