#!/usr/bin/env bash
# The trending watermark-lag gauge once every partition is idle (issue 37): 0, not the age of the
# last old event. The logic is in trending_lag.py. $1 = newsflow binary, $2 = source dir.
# NF_TEST_BROKER=kafka:HOST:PORT.
if [ $# -lt 2 ]; then
  echo "usage: NF_TEST_BROKER=kafka:HOST:PORT bash test_trending_lag.sh <newsflow-binary> <srcdir>" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/../recovery/run_python.sh" trending_lag "$HERE/trending_lag.py" "$@"
