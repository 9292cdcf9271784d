#!/usr/bin/env bash
# `newsflow sink postgres` against Apache Kafka and PostgreSQL (ctest's kafka and postgres
# fixtures: NF_TEST_BROKER=kafka:HOST:PORT, NF_TEST_PG=<conninfo>): a few hundred records of
# every output kind, poison records among them, produced with kcat under a topic prefix of the
# test's own; every table compared with a reference model computed in Python from the records,
# the dead letters checked, then a restart that must land nothing twice. The logic is in
# sink_model.py. $1 = newsflow binary, $2 = source dir. NF_KEEP_TMP=1 keeps the logs and the
# database.
if [ $# -lt 2 ]; then
  echo "usage: NF_TEST_BROKER=kafka:HOST:PORT NF_TEST_PG='<conninfo>' bash test_sink_model.sh <newsflow-binary> <srcdir>" >&2
  exit 2
fi
command -v psql >/dev/null 2>&1 || { echo "FAIL: psql is not installed (scripts/deps.sh installs PostgreSQL 15)" >&2; exit 1; }
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/../recovery/run_python.sh" sink_model "$HERE/sink_model.py" "$@"
