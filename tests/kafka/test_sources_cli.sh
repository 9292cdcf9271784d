#!/usr/bin/env bash
# `newsflow sources add|pause|crawl-now|remove` on Apache Kafka with two processes of one group
# (src/cli/cli_sources.c): a source whose sources partition this process holds is read back
# from it; one whose partition the other process holds is said to be there and shows up in
# that process. The logic is in sources_cli.py. $1 = newsflow binary, $2 = source dir.
# NF_KEEP_TMP=1 keeps the logs.
if [ $# -lt 2 ]; then
  echo "usage: NF_TEST_BROKER=kafka:HOST:PORT bash test_sources_cli.sh <newsflow-binary> <srcdir>" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$HERE/../recovery/run_python.sh" sources_cli "$HERE/sources_cli.py" "$@"
