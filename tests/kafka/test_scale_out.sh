#!/usr/bin/env bash
# One job in several processes on Apache Kafka (needs a real broker: NF_TEST_BROKER=kafka:HOST:PORT;
# ctest's kafka-real fixture starts one): three, then four processes of one consumer group with
# state.changelog=true; kill -9 and restart, a member joining, a rolling restart, a member lost
# for good; the read path's state follows its partitions and every output stays exactly once.
# The logic is in scale_out.py. $1 = newsflow binary, $2 = source dir. NF_KEEP_TMP=1 keeps the logs.
if [ $# -lt 2 ]; then
  echo "usage: NF_TEST_BROKER=kafka:HOST:PORT bash test_scale_out.sh <newsflow-binary> <srcdir>" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/../recovery/run_python.sh" scale_out "$HERE/scale_out.py" "$@"
