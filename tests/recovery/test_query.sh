#!/usr/bin/env bash
# The query API under the broker of the run: freshness (a read's effect visible within one
# checkpoint interval + 200 ms, median of 20; 500 ms more on the mock, which consumes slowly:
# the bound itself is kafka-real/test_query's) and exactly-once interest updates with the API
# under query load through a SIGKILL and restart. The logic is in acc_query.py (helpers:
# acclib.py). $1 = newsflow binary, $2 = source dir. NF_KEEP_TMP=1 keeps the logs.
if [ $# -lt 2 ]; then
  echo "usage: bash test_query.sh <newsflow-binary> <srcdir>" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/run_python.sh" query "$HERE/acc_query.py" "$@"
