#!/usr/bin/env bash
# test_fidelity.sh — the small feeds of tests/data/fidelity, each with what a careful reader
# expects of it (feedparser's documented behaviour where gofeed's corpus is silent), through
# `newsflow parse` (tests/conformance/fidelity.py says how a case is written and matched).
# Usage: bash test_fidelity.sh <newsflow binary> <source dir>
set -euo pipefail
exec python3 "$2/tests/conformance/fidelity.py" "$1" "$2/tests/data/fidelity"
