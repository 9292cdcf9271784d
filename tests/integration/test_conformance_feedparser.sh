#!/usr/bin/env bash
# test_conformance_feedparser.sh — newsflow's parser against feedparser (Universal Feed Parser,
# the reference of issue 20) on feedparser's own test corpus and on feedparser_extra.py's feeds,
# through `newsflow parse` (tests/conformance/feedparser_diff.py; README.md there). Fails on any
# difference that is neither gone nor decided, with its reason, in feedparser_diff.py's CAUSES.
# feedparser $FP_VERSION comes from PyPI into a venv beside the build, with its sdist's tests/
# unpacked there, once (NF_FEEDPARSER_DIR overrides where).
# Usage: bash test_conformance_feedparser.sh <newsflow binary> <source dir>
set -euo pipefail
nf=$1
src=$2
FP_VERSION=6.0.14
cache="${NF_FEEDPARSER_DIR:-$(cd "$(dirname "$nf")" && pwd)/feedparser-$FP_VERSION}"
py="$cache/venv/bin/python"
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$cache"
if ! "$py" -c "import feedparser; assert feedparser.__version__ == '$FP_VERSION'" 2>/dev/null; then
  rm -rf "$cache/venv"
  python3 -m venv "$cache/venv" || fail "python3 -m venv failed (Debian: apt-get install python3-venv)"
  "$cache/venv/bin/pip" install -q --disable-pip-version-check "feedparser==$FP_VERSION" ||
    fail "could not install feedparser $FP_VERSION from PyPI"
fi
tests="$cache/feedparser-$FP_VERSION/tests"
if [ ! -f "$tests/runtests.py" ]; then
  "$cache/venv/bin/pip" download -q --disable-pip-version-check --no-binary :all: --no-deps \
    -d "$cache" "feedparser==$FP_VERSION" || fail "could not download feedparser's sdist from PyPI"
  tar -C "$cache" -xzf "$cache/feedparser-$FP_VERSION.tar.gz"
  [ -f "$tests/runtests.py" ] || fail "feedparser's sdist has no tests/ at $tests"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" "$src/tests/conformance/feedparser_extra.py" "$tests" "$tmp/extra" >/dev/null
rc=0
for corpus in "$tests" "$tmp/extra"; do
  echo "== $corpus"
  "$py" "$src/tests/conformance/feedparser_diff.py" "$nf" "$corpus" --check || rc=1
done
exit $rc
