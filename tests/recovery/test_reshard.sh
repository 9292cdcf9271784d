#!/usr/bin/env bash
# Re-shard acceptance test (issue 16: key groups are input partitions): one job run with
# runtime.shards=4, then 1, then 3 over the same state, each run over a third of a read-event
# stream and stopped with SIGTERM, must emit exactly what a job with 2 shards that never
# restarted emits over the whole stream: the same trending lists by window end, the same
# interest-updates per (user, version), the same dead letters; each exactly once.
# Broker: NF_TEST_BROKER unset/mock = mock clusters of its own; kafka:HOST:PORT = that real Kafka
# cluster, on topics under prefixes of its own (acclib.py).
# $1 = newsflow binary, $2 = source dir. The logic is in acc_reshard.py (helpers: acclib.py).
# NF_KEEP_TMP=1 keeps the logs.
if [ $# -lt 2 ]; then
  echo "usage: bash test_reshard.sh <newsflow-binary> <srcdir> [options]" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/run_python.sh" reshard "$HERE/acc_reshard.py" "$@"
