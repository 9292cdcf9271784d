#!/usr/bin/env bash
# Crash-recovery acceptance test (docs/ARCHITECTURE.md §4, §9): the job killed (SIGKILL at random
# instants and NF_FAULT at every commit fault point) and restarted against Kafka; exactly-once
# checked on every output topic. See crash.py for what is verified and what differs on a real
# broker. $1 = newsflow binary, $2 = source dir; extra arguments go to crash.py (e.g. --quick,
# --seed N). Environment: NF_TEST_BROKER (read by crash.py): unset, "" or "mock" = a standalone mock
# cluster (`newsflow mock-kafka`) of its own; "kafka:HOST:PORT[,HOST:PORT...]" = a real cluster
# there, on topics of this run's own (unique kafka.topic_prefix). NF_CRASH_ARGS (extra crash.py
# arguments, split on spaces; --broker SPEC there wins over NF_TEST_BROKER).
if [ $# -lt 2 ]; then
  echo "usage: bash test_crash.sh <newsflow-binary> <srcdir> [crash.py options]" >&2
  exit 2
fi
NF="$1"
SRC="$2"
shift 2
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC2086
exec bash "$HERE/run_python.sh" crash "$HERE/crash.py" --newsflow "$NF" --srcdir "$SRC" \
  ${NF_CRASH_ARGS:-} "$@"
