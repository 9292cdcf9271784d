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
    # A clone on its own has no shared/ beside it: skipped (ctest's SKIP_RETURN_CODE), not failed.
    echo "SKIP: gofeed's conformance corpus is not at $corpus/gofeed (the project's" \
        "shared/conformance, checked out beside the repository in CI); nothing to compare" >&2
    exit 77
fi
exec python3 "$src/tests/conformance/gofeed.py" "$nf" "$corpus" \
    --differences "$src/tests/conformance/README.md"
