#!/usr/bin/env bash
# Builds the newsflow binary of an earlier commit (Release, the `newsflow` target only) for the
# upgrade test (tests/kafka/test_upgrade.sh): its sources come from this clone's history
# (git archive), so the deps scripts/deps.sh installed build it. Prints the binary's path.
# A finished build in OUTDIR is reused (the real-broker suites run twice in CI).
#   bash scripts/build_pinned.sh COMMIT OUTDIR
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: bash scripts/build_pinned.sh COMMIT OUTDIR" >&2
  exit 2
fi
commit=$1 out=$2
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -x "$out/build/newsflow" ]; then
  echo "$out/build/newsflow"
  exit 0
fi
if ! git -C "$root" cat-file -e "$commit^{commit}" 2>/dev/null; then
  echo "build_pinned.sh: commit $commit is not in $root's history: the upgrade test needs a" \
       "clone with its history (git fetch --unshallow), not an archive" >&2
  exit 1
fi
rm -rf "$out"
mkdir -p "$out/src"
git -C "$root" archive "$commit" | tar -x -C "$out/src"
cmake -S "$out/src" -B "$out/build" -DCMAKE_BUILD_TYPE=Release >"$out/cmake.log" 2>&1 ||
  { tail -20 "$out/cmake.log" >&2; exit 1; }
cmake --build "$out/build" -j "$(nproc)" --target newsflow >"$out/build.log" 2>&1 ||
  { tail -40 "$out/build.log" >&2; exit 1; }
echo "$out/build/newsflow"
