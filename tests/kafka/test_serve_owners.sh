#!/usr/bin/env bash
# The query API of a job in several processes (src/serve/owners.h, src/serve/query.h), on Apache
# Kafka (needs a real broker: NF_TEST_BROKER=kafka:HOST:PORT; ctest's kafka-real fixture starts
# one): two processes, readers spread over 4 read-events partitions by kcat's partitioner; each
# process answers its own readers and redirects (307) the others' to the owner its group's
# description names; both answer trending and articles from the global key group (owner or
# replica); after one leaves, the other answers everyone with the same state. The logic is in
# serve_owners.py. $1 = newsflow binary, $2 = source dir. NF_KEEP_TMP=1 keeps the logs.
if [ $# -lt 2 ]; then
  echo "usage: NF_TEST_BROKER=kafka:HOST:PORT bash test_serve_owners.sh <newsflow-binary> <srcdir>" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/../recovery/run_python.sh" serve_owners "$HERE/serve_owners.py" "$@"
