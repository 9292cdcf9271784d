#!/usr/bin/env bash
# Analytics acceptance test (src/actors/analytics.h): crawl -> classify -> cluster and read
# events -> event-id dedup -> trending (exact) -> interest, once uninterrupted and once with
# SIGKILLs during the crawl and during the reads; clusters must be the planted groups, trending
# must equal a batch recomputation over the on-time events, and both runs must agree.
# Broker: NF_TEST_BROKER unset/mock = a mock cluster of its own; kafka:HOST:PORT = that real Kafka
# cluster, on topics under a prefix of its own (acclib.py).
# $1 = newsflow binary, $2 = source dir. The logic is in acc_analytics.py (helpers: acclib.py).
# NF_KEEP_TMP=1 keeps the logs.
if [ $# -lt 2 ]; then
  echo "usage: bash test_analytics.sh <newsflow-binary> <srcdir> [options]" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/run_python.sh" analytics "$HERE/acc_analytics.py" "$@"
