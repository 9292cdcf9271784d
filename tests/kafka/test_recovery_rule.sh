#!/usr/bin/env bash
# The roll-forward rule on Apache Kafka (needs a real broker: NF_TEST_BROKER=kafka:HOST:PORT;
# ctest's kafka-real fixture starts one): an interrupted epoch's records are invisible to
# read_committed readers and produced again on restart, exactly once, whether the pending epoch
# is decided by the group's committed offsets or by reading the outputs back. The logic is in
# recovery_rule.py. $1 = newsflow binary, $2 = source dir; more arguments go to it (--points,
# --methods, --sizes). NF_KEEP_TMP=1 keeps the logs.
if [ $# -lt 2 ]; then
  echo "usage: NF_TEST_BROKER=kafka:HOST:PORT bash test_recovery_rule.sh <newsflow-binary> <srcdir>" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/../recovery/run_python.sh" recovery_rule "$HERE/recovery_rule.py" "$@"
