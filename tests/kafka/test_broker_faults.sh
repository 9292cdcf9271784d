#!/usr/bin/env bash
# Broker faults on a 3-node Apache Kafka cluster of the test's own (scripts/kafka.sh): the
# partition leader killed, the transaction coordinator killed mid-commit, a broker frozen for 20 s,
# every broker stopped for 30 s; each ends with the exactly-once verification. The logic is in
# broker_faults.py. $1 = newsflow binary, $2 = source dir; more arguments name scenarios.
# NF_KEEP_TMP=1 keeps the logs.
if [ $# -lt 2 ]; then
  echo "usage: bash test_broker_faults.sh <newsflow-binary> <srcdir>" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/../recovery/run_python.sh" broker_faults "$HERE/broker_faults.py" "$@"
