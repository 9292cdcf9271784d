#!/usr/bin/env bash
# The shared runner of the Python-driven recovery tests (test_*.sh here call it):
#   bash run_python.sh NAME SCRIPT [ARGS...]
# Fails when kcat is missing (scripts/deps.sh installs it), clears NEWSFLOW_* and NF_* test variables
# that would change the job (NF_TEST_BROKER stays: it picks the broker, see acclib.py), runs
# `python3 SCRIPT ARGS...` and, on exit or a signal, stops that driver by its pid. The driver
# kills its own children (mock cluster, jobs, kcat; they also carry PR_SET_PDEATHSIG) and
# removes its temp dir on SIGTERM and at exit. Exit code: the driver's.
set -uo pipefail
NAME="$1"
shift
if ! command -v kcat >/dev/null 2>&1; then
  echo "FAIL: kcat is not installed (needed to produce and consume the test's topics; scripts/deps.sh installs it)" >&2
  exit 1
fi
command -v python3 >/dev/null 2>&1 || { echo "FAIL: python3 is not installed" >&2; exit 1; }
for v in $(env | grep -o '^NEWSFLOW_[A-Z_]*' || true); do unset "$v"; done
unset NF_FAULT NF_TEST_SLOW_READS_US NF_TEST_FORCE_SCAN
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
BROKER="NF_TEST_BROKER=${NF_TEST_BROKER:-mock}"
if [ $rc -eq 0 ]; then
  echo "test_$NAME: passed ($BROKER)"
else
  echo "test_$NAME: FAILED (exit $rc; $BROKER)" >&2
fi
exit $rc
