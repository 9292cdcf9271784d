#!/usr/bin/env bash
# test_topics_cli.sh — `newsflow topics`: usage and configuration errors (exit 2, naming what is
# wrong), an unreachable cluster (exit 1 with the address and a hint, within its timeout) and a
# cluster without the job's topics (run names every missing topic).
# Creating and listing topics on a real broker is exercised by every kafka-real test
# (tests/recovery/acclib.py real_broker checks each "NAME created PARTITIONS" line).
# Usage: bash test_topics_cli.sh <newsflow binary> <source dir>
set -euo pipefail

nf=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
while read -r var; do unset "$var"; done < <(env | sed -n 's/^\(NEWSFLOW_[A-Za-z0-9_]*\)=.*/\1/p')

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# run EXPECTED_RC FRAGMENT ARGS... : newsflow ARGS exits EXPECTED_RC and says FRAGMENT on stderr
run() {
    local want=$1 fragment=$2 rc=0
    shift 2
    "$nf" "$@" >"$work/out" 2>"$work/err" || rc=$?
    [[ $rc == "$want" ]] || fail "newsflow $* exited $rc, expected $want; stderr: $(tail -3 "$work/err")"
    grep -qF -- "$fragment" "$work/err" || fail "newsflow $*: expected '$fragment' in: $(tail -3 "$work/err")"
}

"$nf" topics --help | grep -q "Usage: newsflow topics create" || fail "topics --help"
run 2 "missing subcommand (create or list)" topics
run 2 "unknown subcommand 'delete'" topics delete
run 2 "--partitions takes 1..1024, not '0'" topics create --partitions 0 --set kafka.brokers=h:1
run 2 "--replication takes a number of replicas, not 'x'" topics create --replication x
run 2 "unknown option '--partitions'" topics list --partitions 3
run 2 'kafka.brokers is "embedded": name a Kafka cluster' topics create
run 2 'kafka.brokers is "": name a Kafka cluster' topics list --set kafka.brokers=
run 2 "unknown key" topics list --set kafka.nope=1
# Nothing listens on port 1: a precise message naming the address, exit 1.
run 1 "no cluster metadata from 127.0.0.1:1 within 10000 ms" topics list --set kafka.brokers=127.0.0.1:1
grep -qF "is a broker listening there?" "$work/err" || fail "no hint for an unreachable cluster"

# A cluster that answers but lacks the job's topics: `run` says the topics are missing (not
# "cannot connect") and names every one of them, with the command that creates them.
coproc MOCK { exec "$nf" mock-kafka --partitions 2 --topic-prefix other.; }
mock_pid=$MOCK_PID
# The exit trap runs under set -e: a kill of a mock already gone must not become the script's status.
trap 'kill "$mock_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
read -r -t 30 line <&"${MOCK[0]}" || fail "mock-kafka printed nothing"
bootstrap=${line#bootstrap=}
rc=0
"$nf" run --set kafka.brokers="$bootstrap" --set kafka.topic_prefix=mine. --set admin.enabled=false \
    --set state.dir="$work/state" --set runtime.stop_after_ms=5000 >"$work/out" 2>"$work/err" || rc=$?
[[ $rc == 1 ]] || fail "run without its topics exited $rc, expected 1: $(tail -3 "$work/err")"
grep -q '"msg":"the job.s Kafka topics are missing"' "$work/err" ||
    fail "missing topics not said so: $(tail -3 "$work/err")"
grep -qF "cannot connect to Kafka" "$work/err" && fail "missing topics reported as a connection failure"
for t in sources read-events articles fetch-log story-clusters trending interest-updates dead-letters breaking-news notifications; do
    grep -qF "mine.$t" "$work/err" || fail "missing topic mine.$t not named: $(tail -3 "$work/err")"
done
grep -qF "newsflow topics create" "$work/err" || fail "no hint to create the topics"
kill "$mock_pid" 2>/dev/null || true
wait "$mock_pid" 2>/dev/null || true
echo "test_topics_cli: passed"
