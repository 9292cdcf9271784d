#!/usr/bin/env bash
# Zombie fencing on Apache Kafka (needs a real broker: NF_TEST_BROKER=kafka:HOST:PORT; ctest's
# kafka-real fixture starts one): two processes with the same kafka.transactional_id over copies
# of one state; the older is fenced by the broker and exits 1 saying so, outputs stay exactly
# once. The logic is in zombie.py. $1 = newsflow binary, $2 = source dir. NF_KEEP_TMP=1 keeps
# the logs.
if [ $# -lt 2 ]; then
  echo "usage: NF_TEST_BROKER=kafka:HOST:PORT bash test_zombie.sh <newsflow-binary> <srcdir>" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/../recovery/run_python.sh" zombie "$HERE/zombie.py" "$@"
