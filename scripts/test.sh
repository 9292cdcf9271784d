#!/usr/bin/env bash
# The README's second command: install what is missing, build everything (benchmarks included,
# so they keep compiling), run the whole test suite. Output ends with ctest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
bash scripts/deps.sh
B="${NF_BUILD_DIR:-build}"
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DNF_BENCH=ON
cmake --build "$B" -j "$(nproc)"
# The recovery tests run against Apache Kafka (label kafka-real: ctest's fixture starts one broker
# with scripts/kafka.sh, Java 17 and the jars from Maven Central), those that drive fault
# injection against librdkafka's mock (label recovery; cmake -DNF_TEST_MOCK_TWINS=ON runs the
# others there too); scale-out tests (several processes of one job) share a 3-node
# cluster that their fixture starts; broker-faults tests start a 3-node cluster of their own.
# Only those: `bash scripts/test.sh -L 'kafka-real|scale-out|broker-faults'`; none of them:
# `-LE recovery`. Tests run NF_TEST_JOBS (default 3) at a time: most of them wait on processes
# and brokers, not on the CPU; NF_TEST_JOBS=1 runs them one by one.
cd "$B"
rc=0
ctest --output-on-failure -j "${NF_TEST_JOBS:-3}" "$@" || rc=$?
# A failed test's output can be long: its first failure lines again, after the summary.
if [ $rc -ne 0 ]; then python3 "$ROOT/scripts/ctest_digest.py" . || true; fi
# Brokers and PostgreSQL run in sessions of their own: stop, by pid, any that a killed test left
# behind.
for d in kafka-test kafka-scale kafka-private/*/; do
  if [ -d "$d" ]; then bash "$ROOT/scripts/kafka.sh" stop --dir "$d" >/dev/null 2>&1 || true; fi
done
if [ -d postgres-test ]; then
  bash "$ROOT/scripts/postgres.sh" stop --dir postgres-test >/dev/null 2>&1 || true
fi
exit $rc
