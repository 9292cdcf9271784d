#!/usr/bin/env bash
# The PostgreSQL sink exactly once under kill -9, a PostgreSQL crash and a 60 s outage (issue 39),
# with a PostgreSQL of its own (scripts/postgres.sh). The logic is in sink_eos.py.
# $1 = newsflow binary, $2 = source dir. NF_TEST_BROKER=kafka:HOST:PORT.
if [ $# -lt 2 ]; then
  echo "usage: NF_TEST_BROKER=kafka:HOST:PORT bash test_sink_eos.sh <newsflow-binary> <srcdir>" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/../recovery/run_python.sh" sink_eos "$HERE/sink_eos.py" "$@"
