#!/usr/bin/env bash
# Read events dated far ahead of the wall clock or before 2000 (issue 15, item 2): they go to
# dead-letters (stage event_time) and later events on the same partition still count in
# trending; trending state an older version saved with a watermark beyond the bound is repaired
# at start. The logic is in acc_event_time.py (helpers: acclib.py). $1 = newsflow binary,
# $2 = source dir. NF_KEEP_TMP=1 keeps the logs.
if [ $# -lt 2 ]; then
  echo "usage: bash test_event_time.sh <newsflow-binary> <srcdir>" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/run_python.sh" event_time "$HERE/acc_event_time.py" "$@"
