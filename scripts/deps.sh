#!/usr/bin/env bash
# Installs every Debian 12 package newsflow's build, tests and benchmarks need.
# Idempotent: when everything is present it installs nothing and does not touch apt.
# Run as root (or with sudo available). The Dockerfile and CI call exactly this script.
#   scripts/deps.sh            everything to build, test and benchmark
#   scripts/deps.sh --build    only what compiling the newsflow binary needs (the container
#                              image's build stage: no test, benchmark or CI tools)
#   scripts/deps.sh --runtime  only the shared libraries the newsflow binary loads (container image)
set -euo pipefail

RUNTIME_PACKAGES=(
  liburing2 libcjson1 libmicrohttpd12 libxml2 libcurl4 libidn2-0 librocksdb7.8 librdkafka1
  libstemmer0d libsqlite3-0 libjwt0 libhttp-parser2.9 ca-certificates curl
  # `newsflow sink postgres` (src/sink/): libpq
  libpq5
)

BUILD_PACKAGES=(
  # toolchain
  build-essential cmake pkgconf
  # the job's libraries
  liburing-dev libcurl4-openssl-dev libxml2-dev librocksdb-dev librdkafka-dev
  libcjson-dev libmicrohttpd-dev libidn2-dev
  # the shards' HTTP server (src/runtime/httpd.c): Node's http_parser 2.9
  libhttp-parser-dev
  # classify: the Snowball stemmer
  libstemmer-dev
  # search: SQLite's FTS5 full-text index (src/serve/search.h)
  libsqlite3-dev
  # reader routes' JWTs (src/serve/auth.h): libjwt 1.10 (1.10.2-1+deb12u1 compares HMACs in
  # constant time, CVE-2024-25189) and OpenSSL 3's libcrypto for the keys and JWKS
  libjwt-dev libssl-dev
  # `newsflow sink postgres` (src/sink/): libpq
  libpq-dev
)

DEV_PACKAGES=(
  # checks, the fuzz build (clang's libFuzzer) and the upgrade test (an earlier commit, built)
  git clang libclang-rt-14-dev clang-format cppcheck
  # tests: promtool validates /metrics; curl talks to the admin server
  prometheus curl
  # benchmarks: perf/run_auth.sh signs RS256 tokens with the openssl command
  openssl
  # tests: kcat reads and writes Kafka topics (read_committed checks); JSON Schema validation
  kcat python3-jsonschema
  # tests and benchmarks against Apache Kafka itself: scripts/kafka.sh resolves the broker's jars
  # with Maven (from Maven Central) and runs them on Java 17
  openjdk-17-jre-headless maven
  # the PostgreSQL 15 the sink writes to in scripts/postgres.sh, the tests (ctest label postgres)
  # and perf/run_pgsink.sh; the client for psql and pg_isready
  postgresql-15 postgresql-client-15
  # benchmark peers: xmllint --stream, python3-feedparser
  libxml2-utils python3 python3-feedparser
  # benchmark report (perf/run_all.sh): plots as PNG
  gnuplot-nox
  # tests: a venv for feedparser from PyPI, the parser's reference (integration/test_conformance_feedparser)
  python3-venv
  # benchmark peer: the seed design's trending store (Redis ZINCRBY), driven by a pipelined hiredis client
  redis-server libhiredis-dev
  # benchmark: the query API's requests/s (perf/run_query.sh), beside redis-benchmark's GET and
  # nginx serving the same bytes as a static file (issue 41)
  wrk nginx-light
  # benchmark peers of search (perf/run_search.sh): SQLite FTS5 from Python, Xapian
  python3-xapian sqlite3
  # tests: the query API's page, loaded in a headless browser (integration/test_page)
  chromium
  # tests: a job's thread stacks when a test times out waiting on it (acclib.py dump_stacks)
  gdb
  # CI: the README test command runs beside a CPU hog on every core (.ci/run)
  stress-ng
  # tests: the seccomp profile of deploy/seccomp applied to the job (tests/tools/seccomp_run.c)
  libseccomp-dev
  # tests: the container image built from the Dockerfile with podman, on a Debian base made by
  # debootstrap (container/test_image; there is no Docker engine)
  podman debootstrap
)

case "${1:-}" in
  --runtime) PACKAGES=("${RUNTIME_PACKAGES[@]}") ;;
  --build) PACKAGES=("${BUILD_PACKAGES[@]}") ;;
  "") PACKAGES=("${BUILD_PACKAGES[@]}" "${DEV_PACKAGES[@]}") ;;
  *) echo "usage: deps.sh [--build|--runtime]" >&2; exit 2 ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps.sh: all ${#PACKAGES[@]} packages present"
else
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "deps.sh: run as root (missing: ${missing[*]})" >&2; exit 1; }
    SUDO=sudo
  fi
  echo "deps.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The chaos test's TCP proxy (tests/chaos: Toxiproxy, a Go module, not a Debian package) built
# into its cache once, so that the test does not wait for it; needs Go, which the container
# image's build (where this script comes alone) does not have.
TOXIPROXY="$(dirname "$0")/toxiproxy.sh"
if [ -z "${1:-}" ] && [ -f "$TOXIPROXY" ]; then
  if command -v go >/dev/null; then
    echo "deps.sh: Toxiproxy at $(bash "$TOXIPROXY" install)"
  else
    echo "deps.sh: no Go: the chaos test (ctest -L chaos) cannot build Toxiproxy" >&2
  fi
fi

# The deployment checks' tools (tests/integration/test_deploy_manifests.sh): Helm and
# deploy/check, Go builds from the module proxy, into their cache once.
DEPLOY_TOOLS="$(dirname "$0")/deploy-tools.sh"
if [ -z "${1:-}" ] && [ -f "$DEPLOY_TOOLS" ]; then
  if command -v go >/dev/null; then
    bash "$DEPLOY_TOOLS" install | sed 's/^/deps.sh: deploy tool at /'
  else
    echo "deps.sh: no Go: the deployment checks (integration/test_deploy_manifests) cannot build Helm" >&2
  fi
fi

# The OpenTelemetry Collector the traces test sends spans to (tests/integration/test_traces.sh):
# a minimal distribution, a Go build from the module proxy, into its cache once.
OTELCOL="$(dirname "$0")/otelcol.sh"
if [ -z "${1:-}" ] && [ -f "$OTELCOL" ]; then
  if command -v go >/dev/null; then
    echo "deps.sh: test collector at $(bash "$OTELCOL" install)"
  else
    echo "deps.sh: no Go: the traces test (integration/test_traces) cannot build its collector" >&2
  fi
fi
