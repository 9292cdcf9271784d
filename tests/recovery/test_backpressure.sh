#!/usr/bin/env bash
# Backpressure acceptance test (src/actors/reads.h): a slow reads actor behind 64-slot rings and
# low water marks works through 30000 waiting events; the partitions must pause and resume,
# held events and RSS stay bounded (sampled from /metrics and /proc), and interest-updates must
# hold every (user,version) exactly once.
# Broker: NF_TEST_BROKER unset/mock = a mock cluster of its own; kafka:HOST:PORT = that real Kafka
# cluster, on topics under a prefix of its own (acclib.py).
# $1 = newsflow binary, $2 = source dir. The logic is in acc_backpressure.py (helpers:
# acclib.py). NF_KEEP_TMP=1 keeps the logs.
if [ $# -lt 2 ]; then
  echo "usage: bash test_backpressure.sh <newsflow-binary> <srcdir> [options]" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/run_python.sh" backpressure "$HERE/acc_backpressure.py" "$@"
