#!/usr/bin/env bash
# The OpenTelemetry Collector that the tests of issue 44 send spans to over OTLP/HTTP: a
# minimal distribution (tests/otelcol: receiver otlp, exporters file and debug), built from
# the Go module proxy into a cache once. tests/otelcol/config.yaml.in is its example config.
#
#   scripts/otelcol.sh install   builds the collector when missing (a second call does
#                                nothing) and prints its path
#   scripts/otelcol.sh path      prints its path; exit 1 if it is not built yet
#
# Cache: ${XDG_CACHE_HOME:-$HOME/.cache}/newsflow/otelcol-<hash>/otelcol, the hash of
# tests/otelcol's go.mod, go.sum and main.go: an edit builds a new one. Needs Go (1.26); the
# first build downloads the modules (into Go's module cache) and takes a minute or two.
# Exit: 0 ok, 1 failure (the message says why), 2 usage.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SRC="$ROOT/tests/otelcol"
CACHE="${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/newsflow"

die() {
  echo "otelcol.sh: $*" >&2
  exit 1
}

# The binary, named by a hash of its sources.
bin_path() {
  local h
  h=$(cat "$SRC/go.mod" "$SRC/go.sum" "$SRC/main.go" | sha256sum | cut -c1-16)
  echo "$CACHE/otelcol-$h/otelcol"
}

install() {
  local bin dir
  bin=$(bin_path)
  dir=$(dirname "$bin")
  [ -x "$bin" ] && return 0
  command -v go >/dev/null || die "Go is not installed: the test collector is built with it"
  mkdir -p "$dir"
  exec 9>"$dir/.install.lock"
  flock 9
  if [ ! -x "$bin" ]; then
    echo "otelcol.sh: building the test collector (tests/otelcol, go build)" >&2
    # go.mod and go.sum are complete, so the default -mod=readonly only downloads what they
    # name; GOWORK=off keeps any go.work above out of it.
    (cd "$SRC" && CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags='-s -w' \
      -o "$bin.tmp" .) >"$dir/go.log" 2>&1 ||
      { tail -20 "$dir/go.log" >&2; rm -f "$bin.tmp"; die "go build of tests/otelcol failed"; }
    mv "$bin.tmp" "$bin"
  fi
  exec 9>&-
}

case "${1:-}" in
  install) install; bin_path ;;
  path)
    bin=$(bin_path)
    [ -x "$bin" ] || die "the test collector is not built: run scripts/otelcol.sh install"
    echo "$bin"
    ;;
  *)
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
