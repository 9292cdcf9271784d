#!/usr/bin/env bash
# Named-checkpoint restore acceptance test (docs/ARCHITECTURE.md §4; src/state/store.h): two waves
# of read events with a named checkpoint every 2 epochs; checkpoints list/show/verify; then
# `run --from-checkpoint C` (C covers wave 1 only) must roll state and input positions back to C:
# after the restore every user's versions continue from its count at C, each exactly once.
# Broker: NF_TEST_BROKER unset/mock = a mock cluster of its own; kafka:HOST:PORT = that real Kafka
# cluster, on topics under a prefix of its own (acclib.py).
# $1 = newsflow binary, $2 = source dir. The logic is in acc_restore_checkpoint.py (helpers:
# acclib.py). NF_KEEP_TMP=1 keeps the logs.
if [ $# -lt 2 ]; then
  echo "usage: bash test_restore_checkpoint.sh <newsflow-binary> <srcdir> [options]" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/run_python.sh" restore_checkpoint "$HERE/acc_restore_checkpoint.py" "$@"
