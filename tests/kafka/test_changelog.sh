#!/usr/bin/env bash
# State follows Kafka (docs/ARCHITECTURE.md §4; src/state/changelog.h), on Apache Kafka (needs a
# real broker: NF_TEST_BROKER=kafka:HOST:PORT; ctest's kafka-real fixture starts one): with
# state.changelog=true a process on an empty state directory (the old one deleted after kill -9)
# restores every key group from the changelog topics and its input positions from the consumer
# group, and carries on exactly once (interest versions 1..n, replayed event ids dropped); a clean
# restart restores nothing. The logic is in changelog.py. $1 = newsflow binary, $2 = source dir.
# NF_KEEP_TMP=1 keeps the logs.
if [ $# -lt 2 ]; then
  echo "usage: NF_TEST_BROKER=kafka:HOST:PORT bash test_changelog.sh <newsflow-binary> <srcdir>" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/../recovery/run_python.sh" changelog "$HERE/changelog.py" "$@"
