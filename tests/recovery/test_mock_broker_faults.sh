#!/usr/bin/env bash
# Broker-fault acceptance test against the mock cluster (docs/ARCHITECTURE.md §4; src/io/kafka.h):
# while read events arrive in waves the mock cluster fails produce and end_txn requests and takes
# broker 1 down for ~3 s; the job must retry (or recover on restart), and interest-updates and
# dead-letters must end up exactly once.
# broker: mock-only
# (it drives the mock's own fault injection, which a real broker does not have; broker faults on
# a real 3-node Kafka cluster are tested by tests/kafka/test_broker_faults*.sh)
# $1 = newsflow binary, $2 = source dir. The logic is in acc_broker_faults.py (helpers:
# acclib.py). NF_KEEP_TMP=1 keeps the logs.
if [ $# -lt 2 ]; then
  echo "usage: bash test_mock_broker_faults.sh <newsflow-binary> <srcdir> [options]" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/run_python.sh" mock_broker_faults "$HERE/acc_broker_faults.py" "$@"
