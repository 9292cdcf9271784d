#!/usr/bin/env bash
# Sources follow the sources topic's partitions (docs/ARCHITECTURE.md §3;
# src/actors/sources_publish.h), on Apache Kafka (NF_TEST_BROKER=kafka:HOST:PORT; ctest's kafka-real
# fixture starts one): two processes with one sources file publish it once, each host's feeds are
# crawled by one process at a time with the job-wide politeness, and a killed process's crawl
# schedules move with its partitions (the survivor's first requests carry the validators). The logic
# is in sources_group.py. $1 = newsflow binary, $2 = source dir. NF_KEEP_TMP=1 keeps the logs.
if [ $# -lt 2 ]; then
  echo "usage: NF_TEST_BROKER=kafka:HOST:PORT bash test_sources_group.sh <newsflow-binary> <srcdir>" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/../recovery/run_python.sh" sources_group "$HERE/sources_group.py" "$@"
