#!/usr/bin/env bash
# Shutdown and readiness with Apache Kafka down: a 1-node cluster of the test's own
# (kcluster.py) is stopped while the job runs; /readyz turns 503 naming commit_overdue, SIGTERM
# stops the job within shutdown.timeout_ms, and a restart after the broker returns loses and
# duplicates nothing. The logic is in ../recovery/acc_shutdown.py. $1 = newsflow binary,
# $2 = source dir. NF_KEEP_TMP=1 keeps the logs.
if [ $# -lt 2 ]; then
  echo "usage: bash test_broker_faults_shutdown.sh <newsflow-binary> <srcdir>" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/../recovery/run_python.sh" shutdown_kafka "$HERE/../recovery/acc_shutdown.py" \
  "$@" --own-cluster
