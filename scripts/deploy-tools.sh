#!/usr/bin/env bash
# The tools that check deploy/ (tests/integration/test_deploy_manifests.sh), built from the Go
# module proxy into a cache once:
#   Helm ($HELM_VERSION, helm.sh/helm/v3, `go install`) renders deploy/helm/newsflow;
#   deploy/check (this repository's Go module) decodes what it renders strictly against the
#   Kubernetes API types and checks deploy/seccomp/newsflow.json.
#
#   scripts/deploy-tools.sh install   builds both when missing (a second call does nothing)
#   scripts/deploy-tools.sh helm      prints Helm's path, building it first if missing
#   scripts/deploy-tools.sh check     prints the checker's path, building it first if missing
#                                     (rebuilt when deploy/check's sources change)
#
# Cache: ${NF_DEPLOY_TOOLS_CACHE:-$HOME/.cache/newsflow}. Needs Go (1.26). scripts/deps.sh
# calls `install` when Go is there, so that the test never waits for a build. Exit: 0 ok,
# 1 failure (the message says why), 2 usage.
set -euo pipefail

HELM_VERSION=v3.22.0
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${NF_DEPLOY_TOOLS_CACHE:-${HOME:-/root}/.cache/newsflow}"
HELM="$CACHE/helm-${HELM_VERSION#v}/helm"

die() {
  echo "deploy-tools.sh: $*" >&2
  exit 1
}

need_go() {
  command -v go >/dev/null || die "Go is not installed: Helm and deploy/check are built with it"
}

helm() {
  [ -x "$HELM" ] && return 0
  need_go
  mkdir -p "$(dirname "$HELM")"
  exec 9>"$(dirname "$HELM")/.install.lock"
  flock 9
  if [ ! -x "$HELM" ]; then
    echo "deploy-tools.sh: building Helm $HELM_VERSION (go install)" >&2
    rm -rf "$(dirname "$HELM")/bin.tmp"
    GOBIN="$(dirname "$HELM")/bin.tmp" go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" \
      >"$(dirname "$HELM")/go.log" 2>&1 ||
      { tail -20 "$(dirname "$HELM")/go.log" >&2; die "go install of Helm failed"; }
    mv "$(dirname "$HELM")/bin.tmp/helm" "$HELM"
    rm -rf "$(dirname "$HELM")/bin.tmp"
  fi
  exec 9>&-
}

# The checker's binary, named by a hash of its sources: an edit builds a new one.
check_bin() {
  local h
  h=$(cat "$ROOT/deploy/check/go.mod" "$ROOT/deploy/check/go.sum" "$ROOT"/deploy/check/*.go |
    sha256sum | cut -c1-16)
  echo "$CACHE/deploy-check/check-$h"
}

check() {
  local bin
  bin=$(check_bin)
  [ -x "$bin" ] && return 0
  need_go
  mkdir -p "$CACHE/deploy-check"
  exec 9>"$CACHE/deploy-check/.install.lock"
  flock 9
  if [ ! -x "$bin" ]; then
    echo "deploy-tools.sh: building deploy/check" >&2
    (cd "$ROOT/deploy/check" && go build -o "$bin.tmp" .) >"$CACHE/deploy-check/go.log" 2>&1 ||
      { tail -20 "$CACHE/deploy-check/go.log" >&2; die "go build of deploy/check failed"; }
    mv "$bin.tmp" "$bin"
  fi
  exec 9>&-
}

case "${1:-}" in
  install) helm; check; echo "$HELM"; check_bin ;;
  helm) helm; echo "$HELM" ;;
  check) check; check_bin ;;
  *)
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
