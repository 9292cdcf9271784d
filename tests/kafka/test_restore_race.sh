#!/usr/bin/env bash
# A restore racing the previous owner's last commit, on Apache Kafka (needs a real broker:
# NF_TEST_BROKER=kafka:HOST:PORT; ctest's kafka-real fixture starts one): the owner is frozen
# between its produce and its commit, another process restores its partitions, then the owner
# resumes; every interest update stays exactly once. The logic is in restore_race.py.
# $1 = newsflow binary, $2 = source dir. NF_KEEP_TMP=1 keeps the logs.
if [ $# -lt 2 ]; then
  echo "usage: NF_TEST_BROKER=kafka:HOST:PORT bash test_restore_race.sh <newsflow-binary> <srcdir>" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/../recovery/run_python.sh" restore_race "$HERE/restore_race.py" "$@"
