#!/usr/bin/env bash
# Pending-epoch recovery acceptance test (docs/ARCHITECTURE.md §4; src/state/epoch.h): NF_FAULT
# kills the job at after_pending / after_commit / mid_apply / mid_produce / before_commit / after_apply /
# mid_checkpoint of one epoch while read events arrive (and mid_produce / after_pending again while
# a 20000-event backlog is being consumed); the restart must roll the pending record forward
# (found=0 / found=records / partial; on a real broker found=0 after mid_produce and before_commit,
# whose open transaction is aborted) or restart clean, resume from input offsets that cover exactly
# the outputs of epochs <= E, and interest-updates must hold every (user,version) exactly once.
# Broker: NF_TEST_BROKER unset/mock = a mock cluster of its own; kafka:HOST:PORT = that real Kafka
# cluster, on topics under a prefix of its own (acclib.py).
# $1 = newsflow binary, $2 = source dir; extra arguments: scenarios to run (default all:
# after_pending after_commit mid_apply mid_produce mid_produce_burst before_commit after_apply
# mid_checkpoint after_pending_busy). The logic is in acc_pending_recovery.py (helpers: acclib.py).
# NF_KEEP_TMP=1 keeps the logs.
if [ $# -lt 2 ]; then
  echo "usage: bash test_pending_recovery.sh <newsflow-binary> <srcdir> [options]" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/run_python.sh" pending_recovery "$HERE/acc_pending_recovery.py" "$@"
