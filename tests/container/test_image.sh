#!/usr/bin/env bash
# test_image.sh — the container image is built and its job run, in CI (issue 21), so the
# Dockerfile cannot rot unseen. There is no Docker engine here; podman builds the same
# Dockerfile: `podman build --isolation chroot` from a debian:12 base that debootstrap makes from
# Debian's archive as apt is configured (cached as a tarball in $NF_CONTAINER_CACHE, default
# /var/cache/newsflow, and imported once as debian:12 and debian:12-slim). `podman run` cannot
# work in this sandbox (crun cannot set RLIMIT_NOFILE or cgroups), so the image's job runs as the
# image's user in a chroot of the container's mounted filesystem, with the image's environment
# and working directory: it must crawl the bundled example feeds, print its articles and stop
# with exit 0. Usage: bash test_image.sh <newsflow binary, unused> <source dir>
set -euo pipefail
SRC=$2
CACHE="${NF_CONTAINER_CACHE:-/var/cache/newsflow}"
IMAGE=localhost/newsflow:ci-test
fail() { echo "FAIL: $*" >&2; exit 1; }
for tool in podman debootstrap chroot; do
  command -v "$tool" >/dev/null || fail "$tool not found (scripts/deps.sh installs podman and debootstrap)"
done
[ "$(id -u)" = 0 ] || fail "needs root (podman build --isolation chroot, chroot)"
TMP=$(mktemp -d)
ctr=""
cleanup() {
  if [ -n "$ctr" ]; then podman umount "$ctr" >/dev/null 2>&1 || true; podman rm -f "$ctr" >/dev/null 2>&1 || true; fi
  podman rmi -f "$IMAGE" >/dev/null 2>&1 || true
  podman image prune -f >/dev/null 2>&1 || true # the untagged build stage (3 GB): not kept
  rm -rf "$TMP"
}
trap cleanup EXIT

# 1. The base images, from Debian's archive.
if ! podman image exists docker.io/library/debian:12; then
  base="$CACHE/debian-12-minbase.tar"
  if [ ! -s "$base" ]; then
    # The Debian mirror apt uses (deb822 or one-line sources), else deb.debian.org.
    mirror=$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null |
      grep -oE 'https?://[^ ]*/debian/?( |$)' | grep -v security | head -1 | tr -d ' ' || true)
    mkdir -p "$CACHE"
    rm -rf "$CACHE/rootfs.tmp"
    echo "test_image: debootstrap --variant=minbase bookworm from ${mirror:-http://deb.debian.org/debian}"
    debootstrap --variant=minbase bookworm "$CACHE/rootfs.tmp" "${mirror:-http://deb.debian.org/debian}" \
      >"$TMP/debootstrap.log" 2>&1 || { tail -20 "$TMP/debootstrap.log"; fail "debootstrap"; }
    tar -C "$CACHE/rootfs.tmp" -cf "$base.tmp" . && mv "$base.tmp" "$base"
    rm -rf "$CACHE/rootfs.tmp"
  fi
  podman import "$base" docker.io/library/debian:12 >/dev/null 2>&1
  podman tag docker.io/library/debian:12 docker.io/library/debian:12-slim
fi

# 2. The repository's Dockerfile, as `docker build` would build it.
echo "test_image: podman build (the Dockerfile's two stages)"
podman build --isolation chroot --pull=never -t "$IMAGE" "$SRC" >"$TMP/build.log" 2>&1 ||
  { tail -40 "$TMP/build.log"; fail "podman build"; }
user=$(podman image inspect --format '{{.Config.User}}' "$IMAGE")
workdir=$(podman image inspect --format '{{.Config.WorkingDir}}' "$IMAGE")
entry=$(podman image inspect --format '{{join .Config.Entrypoint " "}}' "$IMAGE")
mapfile -t envs < <(podman image inspect --format '{{range .Config.Env}}{{println .}}{{end}}' "$IMAGE" | grep .)
[ "$user" = newsflow ] && [ "$entry" = /usr/local/bin/newsflow ] ||
  fail "image config: user '$user', entrypoint '$entry'"
echo "ok   podman build: user $user, workdir $workdir, entrypoint $entry"

# 3. The image's job, as its user (uid 10001), on the bundled feeds, for 8 s.
ctr=$(podman create "$IMAGE")
mnt=$(podman mount "$ctr")
uid=$(chroot "$mnt" id -u "$user")
set +e
env -i "${envs[@]}" chroot --userspec="$uid:$uid" "$mnt" /bin/sh -c \
  "cd '$workdir' && exec $entry run --set runtime.stop_after_ms=8000 --sink jsonl:-" \
  >"$TMP/out" 2>"$TMP/err"
rc=$?
set -e
[ $rc = 0 ] || { tail -20 "$TMP/err"; fail "the image's job exited $rc"; }
python3 - "$TMP/out" <<'PY' || { tail -5 "$TMP/err"; fail "the image's job output"; }
import json, sys
count = {}
for line in open(sys.argv[1]):
    o = json.loads(line)
    count[o["topic"]] = count.get(o["topic"], 0) + 1
assert count.get("articles", 0) >= 8 and count.get("story-clusters", 0) >= 1, count
print("the image's job: " + ", ".join("%d %s" % (n, t) for t, n in sorted(count.items())))
PY
grep -q '"msg":"newsflow stopped"' "$TMP/err" || fail "no stop line"
echo "ok   the image's job ran as $user: crawled the bundled feeds and stopped with exit 0"

# 4. The image's entrypoint with deploy/docker-compose.yml's environment for newsflow-1 (a
# process of a consumer group, changelogs, a standby, static membership), against a real
# Apache Kafka on loopback instead of the compose file's three brokers (kafka.brokers replaced;
# the admin and probe ports moved to free ones, as this host is shared): the image's own
# `topics create` with the topics step's environment, then the job, which must join the group,
# commit epochs and stop with exit 0.
KDIR="$TMP/kafka"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
KPORT=$(free_port)
bash "$SRC/scripts/kafka.sh" start --fresh --dir "$KDIR" --port "$KPORT" >"$TMP/kafka.log" 2>&1 ||
  { tail -20 "$TMP/kafka.log"; fail "scripts/kafka.sh start"; }
trap 'bash "$SRC/scripts/kafka.sh" stop --dir "$KDIR" >/dev/null 2>&1 || true; cleanup' EXIT
BOOT=$(bash "$SRC/scripts/kafka.sh" bootstrap --dir "$KDIR")
compose_env() { # service: its environment as NAME=VALUE lines
  python3 - "$SRC/deploy/docker-compose.yml" "$1" <<'PY'
import sys, yaml
for k, v in yaml.safe_load(open(sys.argv[1]))["services"][sys.argv[2]]["environment"].items():
    print("%s=%s" % (k, v))
PY
}
mapfile -t topics_env < <(compose_env topics)
mapfile -t job_env < <(compose_env newsflow-1)
APORT=$(free_port)
PPORT=$(free_port)
over=(NEWSFLOW_KAFKA_BROKERS="$BOOT" NEWSFLOW_ADMIN_PORT="$APORT" NEWSFLOW_ADMIN_PROBE_PORT="$PPORT")
set +e
env -i "${envs[@]}" "${topics_env[@]}" NEWSFLOW_KAFKA_BROKERS="$BOOT" \
  chroot --userspec="$uid:$uid" "$mnt" /bin/sh -c \
  "cd '$workdir' && exec $entry topics create --partitions 4 --replication 1" >"$TMP/topics" 2>&1
rc=$?
set -e
[ $rc = 0 ] || { cat "$TMP/topics"; fail "the image's topics create exited $rc"; }
set +e
env -i "${envs[@]}" "${job_env[@]}" "${over[@]}" chroot --userspec="$uid:$uid" "$mnt" /bin/sh -c \
  "cd '$workdir' && exec $entry run --set runtime.stop_after_ms=20000" >"$TMP/out2" 2>"$TMP/err2"
rc=$?
set -e
[ $rc = 0 ] || { tail -20 "$TMP/err2"; fail "the image's job with the compose environment exited $rc"; }
grep -q '"msg":"ready: /readyz answers 200"' "$TMP/err2" || { tail -20 "$TMP/err2"; fail "never ready"; }
grep -q '"msg":"epoch.committed"' "$TMP/err2" || fail "no epoch committed with the compose environment"
grep -q '"msg":"newsflow stopped"' "$TMP/err2" || fail "no stop line (compose environment)"
echo "ok   the image's entrypoint with newsflow-1's compose environment: joined the group, committed, stopped"
