#!/usr/bin/env bash
# Chaos on Apache Kafka (issue 36): three processes of one job with changelogs and standbys, a
# 3-broker cluster of the test's own, a feed farm, read events and poison records at a steady
# rate, and for NF_CHAOS_MINUTES (default 5) a random fault every few seconds — processes
# killed, stopped and restarted, brokers killed, a CPU hog, a full or slow disk, network delay,
# narrow pipes, partitions and cuts (Toxiproxy) — then every output checked read_committed.
# The logic is in chaos.py (faults in faults.py); scripts/chaos.sh runs it standalone.
# $1 = newsflow binary, $2 = source dir; more arguments go to chaos.py (--minutes, --seed,
# --exclude). NF_KEEP_TMP=1 keeps the temp dir. Needs root.
if [ $# -lt 2 ]; then
  echo "usage: bash test_chaos.sh <newsflow-binary> <srcdir> [--minutes M] [--seed S]" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NF="$1"
SRC="$2"
shift 2
exec bash "$HERE/../recovery/run_python.sh" chaos "$HERE/chaos.py" "$NF" "$SRC" \
  --minutes "${NF_CHAOS_MINUTES:-5}" "$@"
