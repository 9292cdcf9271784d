#!/usr/bin/env bash
# Upgrade on Apache Kafka (issue 37): the job of a pinned earlier commit (UPGRADE_FROM, built by
# scripts/build_pinned.sh next to the binary under test, reused between runs) consumes read
# events and crawls feeds, stops; this build goes on with the same state.dir and broker; every
# output exactly once, no article emitted again, the old articles still searchable. The logic is
# in upgrade.py. $1 = newsflow binary, $2 = source dir. NF_TEST_BROKER=kafka:HOST:PORT.
# UPGRADE_FROM: the last version before state identities (state format 1); move it forward as
# versions land.
UPGRADE_FROM=c3cd708
if [ $# -lt 2 ]; then
  echo "usage: NF_TEST_BROKER=kafka:HOST:PORT bash test_upgrade.sh <newsflow-binary> <srcdir>" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
old=$(bash "$2/scripts/build_pinned.sh" "$UPGRADE_FROM" "$(dirname "$1")/upgrade-$UPGRADE_FROM") ||
  { echo "test_upgrade: cannot build $UPGRADE_FROM (above)" >&2; exit 1; }
NF_UPGRADE_OLD=$old NF_UPGRADE_FROM=$UPGRADE_FROM \
  exec bash "$HERE/../recovery/run_python.sh" upgrade "$HERE/upgrade.py" "$@"
