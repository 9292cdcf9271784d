#!/usr/bin/env bash
# A process that gains partitions in a rebalance but cannot read the group's committed offsets
# for them, while it runs and while it stops, exits 1 with the reason, never by a signal, and
# nothing is lost (needs a real broker: NF_TEST_BROKER=kafka:HOST:PORT; ctest's kafka-real
# fixture starts one). The logic is in rebalance_failures.py. $1 = newsflow binary, $2 = source
# dir. NF_KEEP_TMP=1 keeps the logs.
if [ $# -lt 2 ]; then
  echo "usage: NF_TEST_BROKER=kafka:HOST:PORT bash test_rebalance_failures.sh <newsflow-binary> <srcdir>" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/../recovery/run_python.sh" rebalance_failures "$HERE/rebalance_failures.py" "$@"
