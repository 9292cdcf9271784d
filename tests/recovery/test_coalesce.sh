#!/usr/bin/env bash
# Coalesced interest updates (interest.coalesce; src/actors/reads.h): the same reads through a
# reference job and a coalescing one that is SIGKILLed twice; the coalescing job's records must
# each equal the reference's record of the same (user, version), one per user per epoch, and
# every user's last record must be the reference's. The logic is in acc_coalesce.py (helpers:
# acclib.py). $1 = newsflow binary, $2 = source dir. NF_KEEP_TMP=1 keeps the logs.
if [ $# -lt 2 ]; then
  echo "usage: bash test_coalesce.sh <newsflow-binary> <srcdir>" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/run_python.sh" coalesce "$HERE/acc_coalesce.py" "$@"
