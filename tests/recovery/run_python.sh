#!/usr/bin/env bash
# The shared runner of the Python-driven recovery tests (test_*.sh here call it):
#   bash run_python.sh NAME SCRIPT [ARGS...]
# Skips (exit 0, "SKIP: ...") when kcat is missing, clears NEWSFLOW_* and NF_* test variables
# that would change the job, runs `python3 SCRIPT ARGS...` and, on exit or a signal, stops that
# driver by its pid. The driver kills its own children (mock cluster, jobs, kcat; they also carry
# PR_SET_PDEATHSIG) and removes its temp dir on SIGTERM and at exit. Exit code: the driver's.
set -uo pipefail
NAME="$1"
shift
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
  if [ -n "$PY" ] && kill -0 "$PY" 2>/dev/null; then
    kill -TERM "$PY" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$PY" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$PY" 2>/dev/null
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

python3 "$@" &
PY=$!
wait "$PY"
rc=$?
PY=""
if [ $rc -eq 0 ]; then echo "test_$NAME: passed"; else echo "test_$NAME: FAILED (exit $rc)" >&2; fi
exit $rc
