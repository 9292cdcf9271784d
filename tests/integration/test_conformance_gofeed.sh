#!/usr/bin/env bash
# test_conformance_gofeed.sh — gofeed's universal-model cases through `newsflow parse`
# (tests/conformance/gofeed.py; field mapping and deliberate differences in
# tests/conformance/README.md). The corpus lives in shared/conformance beside the repository.
# Usage: bash test_conformance_gofeed.sh <newsflow binary> <source dir>
set -euo pipefail

nf=$1
src=$2
corpus="$src/../shared/conformance"
if [[ ! -d "$corpus/gofeed" ]]; then
    echo "FAIL: gofeed corpus not found at $corpus/gofeed (CI clones shared/ beside the repo)" >&2
    exit 1
fi
exec python3 "$src/tests/conformance/gofeed.py" "$nf" "$corpus" \
    --differences "$src/tests/conformance/README.md"
