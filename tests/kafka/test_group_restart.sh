#!/usr/bin/env bash
# A consumer-group member SIGKILLed and restarted on Apache Kafka (needs a real broker:
# NF_TEST_BROKER=kafka:HOST:PORT; ctest's kafka-real fixture starts one): with static membership
# the restarted process gets its partitions back without waiting out its predecessor's session;
# time from restart to the first committed epoch is reported (static and dynamic membership);
# outputs exactly once. The logic is in group_restart.py. $1 = newsflow binary, $2 = source dir.
# NF_KEEP_TMP=1 keeps the logs.
if [ $# -lt 2 ]; then
  echo "usage: NF_TEST_BROKER=kafka:HOST:PORT bash test_group_restart.sh <newsflow-binary> <srcdir>" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/../recovery/run_python.sh" group_restart "$HERE/group_restart.py" "$@"
