#!/usr/bin/env bash
# The HTTP edge on Apache Kafka (issue 38): 202 means durable (`newsflow ingest` killed -9 right
# after each 202), a broker down gets 503 with Retry-After and the same events are taken once it
# is back, a repeat counts once in the job. A 1-node cluster of the test's own (kcluster.py).
# The logic is in edge.py. $1 = newsflow binary, $2 = source dir. NF_KEEP_TMP=1 keeps the logs.
if [ $# -lt 2 ]; then
  echo "usage: bash test_broker_faults_edge.sh <newsflow-binary> <srcdir>" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/../recovery/run_python.sh" edge "$HERE/edge.py" "$@"
