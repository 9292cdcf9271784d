#!/usr/bin/env bash
# Crash-recovery acceptance test (DESIGN.md §3): the job killed (SIGKILL at random instants and
# NF_FAULT at every commit fault point) and restarted against a standalone mock Kafka cluster;
# exactly-once checked on every output topic. See crash.py for what is verified.
# $1 = newsflow binary, $2 = source dir; extra arguments go to crash.py (e.g. --quick, --seed N).
# Environment: NF_CRASH_ARGS (extra crash.py arguments, split on spaces).
set -uo pipefail
if ! command -v kcat >/dev/null 2>&1; then
  echo "SKIP: kcat is not installed (needed to produce and consume the mock cluster's topics)"
  exit 0
fi
if [ $# -lt 2 ]; then
  echo "usage: bash test_crash.sh <newsflow-binary> <srcdir> [crash.py options]" >&2
  exit 2
fi
NF="$1"
SRC="$2"
shift 2
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if ! command -v python3 >/dev/null 2>&1; then
  echo "FAIL: python3 is not installed" >&2
  exit 1
fi
# Stray NEWSFLOW_* variables would change the job's configuration.
for v in $(env | grep -o '^NEWSFLOW_[A-Z_]*' || true); do unset "$v"; done
unset NF_FAULT

PY=""
cleanup() {
  # crash.py kills its own children (mock cluster, job, kcat) on SIGTERM and at exit, and they
  # carry PR_SET_PDEATHSIG; this only stops crash.py itself, by its pid.
  if [ -n "$PY" ] && kill -0 "$PY" 2>/dev/null; then
    kill -TERM "$PY" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$PY" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$PY" 2>/dev/null
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# shellcheck disable=SC2086
python3 "$HERE/crash.py" --newsflow "$NF" --srcdir "$SRC" ${NF_CRASH_ARGS:-} "$@" &
PY=$!
wait "$PY"
rc=$?
PY=""
if [ $rc -eq 0 ]; then
  echo "test_crash: passed"
else
  echo "test_crash: FAILED (crash.py exit $rc)" >&2
fi
exit $rc
