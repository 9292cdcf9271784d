#!/usr/bin/env bash
# Warm standbys (scale.standby_replicas; src/state/standby.h), on Apache Kafka (needs a real
# broker: NF_TEST_BROKER=kafka:HOST:PORT; ctest's kafka-real fixture starts one): two processes
# of one job with standby_replicas=1, read events arriving; one is SIGKILLed, and the survivor's
# restore of the moved partitions reads only their tail (a count, not a time); every output stays
# exactly once. The logic is in standby.py. $1 = newsflow binary, $2 = source dir.
# NF_TEST_STANDBY_REPLICAS=0 runs it without standbys (the restore assertion then fails: the
# negative check). NF_KEEP_TMP=1 keeps the logs.
if [ $# -lt 2 ]; then
  echo "usage: NF_TEST_BROKER=kafka:HOST:PORT bash test_standby.sh <newsflow-binary> <srcdir>" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/../recovery/run_python.sh" standby "$HERE/standby.py" "$@"
