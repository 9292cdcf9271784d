#!/usr/bin/env bash
# The chaos test (tests/chaos/chaos.py) standalone, for as long as you like:
#
#   scripts/chaos.sh [--minutes N] [--seed S] [--exclude KIND,...] [--build DIR]
#
# N minutes of faults (default 5, as in CI: ctest -L chaos); S replays the faults of a run (its
# seed is the first thing it prints); --exclude leaves fault kinds out (for development only).
# Uses the newsflow binary of DIR (default build/; build it first:
# cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build). The 3-broker cluster
# lives in DIR/kafka-private, the logs of a failed run are kept in DIR/chaos-evidence. The
# last line of a run is its JSON figures ({"bench":"chaos",...}). Needs root. Exit: the test's.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
B=build
ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build)
      B="${2:?--build needs a directory}"
      shift 2
      ;;
    --minutes | --seed | --exclude)
      ARGS+=("$1" "${2:?$1 needs a value}")
      shift 2
      ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
      exit 2
      ;;
    *)
      echo "chaos.sh: unknown option $1" >&2
      exit 2
      ;;
  esac
done
B=$(cd "$B" && pwd)
[ -x "$B/newsflow" ] || { echo "chaos.sh: no $B/newsflow: build first" >&2; exit 1; }
bash scripts/toxiproxy.sh install >/dev/null
export NF_TEST_KAFKA_ROOT="$B/kafka-private" NF_CHAOS_EVIDENCE="$B/chaos-evidence"
rc=0
NF_CHAOS_MINUTES=5 bash tests/chaos/test_chaos.sh "$B/newsflow" "$ROOT" "${ARGS[@]}" || rc=$?
for d in "$B"/kafka-private/chaos-*/; do # brokers a killed run left behind, by pid
  if [ -d "$d" ]; then bash scripts/kafka.sh stop --dir "$d" >/dev/null 2>&1 || true; fi
done
exit $rc
