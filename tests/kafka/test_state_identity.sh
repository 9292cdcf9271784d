#!/usr/bin/env bash
# Safe state on Apache Kafka (issue 37 cases 1-2; src/state/identity.h): an empty or another
# writer's state.dir, or a database without CURRENT, is refused with exit 2 and nothing emitted;
# --reset=group starts over at the group's offsets; a checkpoint survives garbled live table
# files; the admin server answers probes beside 600 slow connections. The logic is in
# state_identity.py.
# $1 = newsflow binary, $2 = source dir. NF_TEST_BROKER=kafka:HOST:PORT. NF_KEEP_TMP=1 keeps logs.
if [ $# -lt 2 ]; then
  echo "usage: NF_TEST_BROKER=kafka:HOST:PORT bash test_state_identity.sh <newsflow-binary> <srcdir>" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/../recovery/run_python.sh" state_identity "$HERE/state_identity.py" "$@"
