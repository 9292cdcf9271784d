#!/usr/bin/env bash
# Shutdown and readiness with the Kafka cluster down: /readyz turns 503 naming commit_overdue,
# SIGTERM stops the job within shutdown.timeout_ms (exit 1, saying the final epoch did not
# commit), and a restart after the cluster returns loses and duplicates nothing.
# broker: mock-only
# (it takes the cluster down with the mock's `down 1`; the same test on Apache Kafka, with a broker
# of its own that it stops, is tests/kafka/test_broker_faults_shutdown.sh)
# $1 = newsflow binary, $2 = source dir. The logic is in acc_shutdown.py (helpers: acclib.py).
# NF_KEEP_TMP=1 keeps the logs.
if [ $# -lt 2 ]; then
  echo "usage: bash test_shutdown_deadline.sh <newsflow-binary> <srcdir>" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/run_python.sh" shutdown "$HERE/acc_shutdown.py" "$@"
