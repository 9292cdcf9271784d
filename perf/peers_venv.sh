#!/usr/bin/env bash
# perf/peers_venv.sh DIR — makes (once) a Python venv in DIR with the benchmark peers from PyPI:
# datasketch (perf/run_similarity.sh) and the current feedparser (perf/run_parse.sh through
# $NF_FEEDPARSER_PYTHON). Prints the venv's python. Versions are pinned here.
set -euo pipefail
dir=$1
DATASKETCH=2.0.0 FEEDPARSER=6.0.14
py="$dir/bin/python"
if ! "$py" -c "import datasketch, feedparser; assert datasketch.__version__ == '$DATASKETCH' and feedparser.__version__ == '$FEEDPARSER'" 2>/dev/null; then
  rm -rf "$dir"
  python3 -m venv "$dir" >&2 || { echo "peers_venv.sh: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
  "$dir/bin/pip" install -q --disable-pip-version-check "datasketch==$DATASKETCH" "feedparser==$FEEDPARSER" >&2 ||
    { echo "peers_venv.sh: could not install datasketch $DATASKETCH and feedparser $FEEDPARSER from PyPI" >&2; exit 1; }
fi
echo "$py"
