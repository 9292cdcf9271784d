#!/usr/bin/env bash
# Toxiproxy (github.com/Shopify/toxiproxy, a TCP proxy whose "toxics" add latency, cap
# bandwidth or stall a connection, driven over an HTTP API) for the chaos test
# (tests/chaos/chaos.py): it stands between each newsflow process and the brokers, since this
# kernel has no netem.
#
#   scripts/toxiproxy.sh install     builds the server into the cache once (a second call does
#                                    nothing); prints its path
#   scripts/toxiproxy.sh path        prints the server's path, building it first if missing
#
# The server is the Go module github.com/Shopify/toxiproxy/v2 at $TOXIPROXY_VERSION, built with
# `go install` (sources from the Go module proxy, checked against sum.golang.org) into
# ${NF_TOXIPROXY_CACHE:-$HOME/.cache/newsflow/toxiproxy-<version>}/toxiproxy-server. Needs Go
# (1.17+). scripts/deps.sh calls `install` when Go is there, so that a test never waits for the
# build. Exit: 0 ok, 1 failure (the message says why), 2 usage.
set -euo pipefail

TOXIPROXY_VERSION=v2.5.0
CACHE="${NF_TOXIPROXY_CACHE:-${HOME:-/root}/.cache/newsflow/toxiproxy-${TOXIPROXY_VERSION#v}}"
BIN="$CACHE/toxiproxy-server"

die() {
  echo "toxiproxy.sh: $*" >&2
  exit 1
}

install() {
  if [ -x "$BIN" ]; then
    return 0
  fi
  command -v go >/dev/null ||
    die "Go is not installed: the chaos test builds Toxiproxy with it (https://go.dev/dl/)"
  mkdir -p "$CACHE"
  # One build at a time (two tests starting together on a fresh machine).
  exec 9>"$CACHE/.install.lock"
  flock 9
  if [ -x "$BIN" ]; then
    exec 9>&-
    return 0
  fi
  echo "toxiproxy.sh: building Toxiproxy $TOXIPROXY_VERSION into $CACHE (go install)" >&2
  rm -rf "$CACHE/bin.tmp"
  if ! GOBIN="$CACHE/bin.tmp" go install \
    "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION" >"$CACHE/go.log" 2>&1; then
    tail -20 "$CACHE/go.log" >&2
    die "go install of Toxiproxy failed (full log: $CACHE/go.log)"
  fi
  mv "$CACHE/bin.tmp/server" "$BIN"
  rm -rf "$CACHE/bin.tmp"
  exec 9>&-
}

case "${1:-}" in
  install | path)
    install
    echo "$BIN"
    ;;
  *)
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
