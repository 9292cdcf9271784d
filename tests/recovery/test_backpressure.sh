#!/usr/bin/env bash
# Backpressure acceptance test (src/actors/reads.h): a slow reads actor behind 64-slot rings and
# low water marks works through 30000 waiting events; the partitions must pause and resume,
# held events and RSS stay bounded (sampled from /metrics and /proc), and interest-updates must
# hold every (user,version) exactly once. $1 = newsflow binary, $2 = source dir. The logic is in
# acc_backpressure.py (helpers: acclib.py). NF_KEEP_TMP=1 keeps the logs.
set -uo pipefail
NF="$1"
SRC="$2"
shift 2
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NAME=backpressure
if ! command -v kcat >/dev/null 2>&1; then
  echo "SKIP: kcat is not installed (needed to produce and consume the mock cluster's topics)"
  exit 0
fi
command -v python3 >/dev/null 2>&1 || { echo "FAIL: python3 is not installed" >&2; exit 1; }
for v in $(env | grep -o '^NEWSFLOW_[A-Z_]*' || true); do unset "$v"; done
unset NF_FAULT NF_TEST_SLOW_READS_US
export PYTHONDONTWRITEBYTECODE=1

PY=""
cleanup() {
  # The python driver kills its own children (mock cluster, jobs, kcat; they also carry
  # PR_SET_PDEATHSIG) and removes its temp dir on SIGTERM and at exit; stop only it, by pid.
  if [ -n "$PY" ] && kill -0 "$PY" 2>/dev/null; then
    kill -TERM "$PY" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$PY" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$PY" 2>/dev/null
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

python3 "$HERE/acc_$NAME.py" "$NF" "$SRC" "$@" &
PY=$!
wait "$PY"
rc=$?
PY=""
if [ $rc -eq 0 ]; then echo "test_$NAME: passed"; else echo "test_$NAME: FAILED (exit $rc)" >&2; fi
exit $rc
