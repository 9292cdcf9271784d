#!/usr/bin/env bash
# Warm standbys (scale.standby_replicas; src/state/standby.h), on Apache Kafka (needs a real
# broker: NF_TEST_BROKER=kafka:HOST:PORT; ctest's kafka-real fixture starts one): two processes
# of one job with standby_replicas=1, read events and a feed farm; the owner of the global key
# group is SIGKILLed, then (if that did not move any) an owner of read-events partitions, and
# each time the survivor's restore of what moved reads only its tail (a count, not a time);
# every output stays exactly once. The logic is in standby.py. $1 = newsflow binary, $2 = source dir.
# NF_TEST_STANDBY_REPLICAS=0 runs it without standbys (the restore assertion then fails: the
# negative check). NF_KEEP_TMP=1 keeps the logs.
if [ $# -lt 2 ]; then
  echo "usage: NF_TEST_BROKER=kafka:HOST:PORT bash test_standby.sh <newsflow-binary> <srcdir>" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/../recovery/run_python.sh" standby "$HERE/standby.py" "$@"
