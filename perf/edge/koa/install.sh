#!/usr/bin/env bash
# Installs the Koa peer's dependencies (perf/edge/koa/package-lock.json, exact versions from the
# npm registry) into perf/edge/koa/node_modules (gitignored). A second run with an unchanged lock
# file does nothing. Needs node (>= 20) and npm.
set -euo pipefail
cd "$(dirname "$0")"
command -v node >/dev/null && command -v npm >/dev/null ||
  { echo "install.sh: node and npm are needed (Debian: apt-get install nodejs npm)" >&2; exit 1; }
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 20 ] || { echo "install.sh: node $(node --version) is too old; @koa/router 15 needs >= 20" >&2; exit 1; }
stamp=node_modules/.nf-lock-sha256
sum=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ]; then
  exit 0
fi
npm ci --no-audit --no-fund --loglevel=error >&2
echo "$sum" >"$stamp"
