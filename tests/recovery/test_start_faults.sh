#!/usr/bin/env bash
# A job started while partitions have no leader: its start-up's end-offset queries are retried
# (src/io/kafka.c watermarks), the job starts and every output is exactly once.
# broker: mock-only (the mock cluster's fault injection; acc_start_faults.py starts its own)
# The logic is in acc_start_faults.py (helpers: acclib.py). $1 = newsflow binary, $2 = source
# dir. NF_KEEP_TMP=1 keeps the logs.
if [ $# -lt 2 ]; then
  echo "usage: bash test_start_faults.sh <newsflow-binary> <srcdir>" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/run_python.sh" start_faults "$HERE/acc_start_faults.py" "$@"
