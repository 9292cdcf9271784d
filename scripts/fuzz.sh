#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz; clang, ASan+UBSan, nfcore instrumented) and runs
# each on a scratch copy of its seed corpus for its share of SECONDS (default 60), so the
# repository is never written. Exits non-zero on any crash, leak, sanitizer report, timeout or
# broken invariant; the input that did it is kept in $B/fuzz-artifacts/ and its path printed.
# Reproduce one with: $B/tests/fuzz/fuzz_<name> <file>
#   scripts/fuzz.sh [SECONDS]        NF_FUZZ_BUILD_DIR=dir (default build-fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."
total="${1:-60}"
B="${NF_FUZZ_BUILD_DIR:-build-fuzz}"
case "$total" in
  '' | *[!0-9]*) echo "usage: fuzz.sh [SECONDS]" >&2; exit 2 ;;
esac

CC=clang cmake -S . -B "$B" -DNF_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build "$B" -j "$(nproc)" --target fuzz

names=()
for src in tests/fuzz/fuzz_*.c; do
  [ -e "$src" ] && names+=("$(basename "$src" .c)")
done
[ ${#names[@]} -gt 0 ] || { echo "fuzz.sh: no tests/fuzz/fuzz_*.c" >&2; exit 1; }
each=$((total / ${#names[@]}))
[ "$each" -ge 1 ] || each=1

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
artifacts="$B/fuzz-artifacts"
mkdir -p "$artifacts"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"

for name in "${names[@]}"; do
  seeds="tests/fuzz/corpus/${name#fuzz_}"
  corpus="$work/$name"
  mkdir -p "$corpus"
  [ -d "$seeds" ] && cp -r "$seeds/." "$corpus/"
  log="$work/$name.log"
  echo "fuzz.sh: $name for ${each} s ($(find "$corpus" -type f | wc -l) seeds)"
  if ! "$B/tests/fuzz/$name" -max_total_time="$each" -max_len=65536 -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/$name-" \
      "$corpus" >"$log" 2>&1; then
    tail -n 60 "$log"
    input=$(sed -n 's/.*Test unit written to //p' "$log" | tail -n 1)
    echo "fuzz.sh: $name FAILED; input: ${input:-(none written)}" >&2
    exit 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -n 1)
  echo "fuzz.sh: $name ok: $runs runs, $speed/s, $cov"
done
