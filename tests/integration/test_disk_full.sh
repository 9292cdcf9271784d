#!/usr/bin/env bash
# test_disk_full.sh — state.dir's file system fills up while the job runs (issue 36): the job
# stops with an error naming the full file system and exit 1 (docs/runbooks.md "Disk full on
# state.dir"), never SIGABRT (librocksdb 7.8 asserts on a write to its info LOG after one
# failed: state.rocksdb_log); a start while it is still full is refused the same way; after the
# space is freed a restart loses and duplicates nothing (interest-updates in Kafka and the sink
# file: every (user, version) exactly once). The logic is in disk_full.py (helpers:
# tests/recovery/acclib.py, with a `newsflow mock-kafka` of its own unless NF_TEST_BROKER names
# a real cluster).
# The file system is an ext4 image of 128 MiB loop-mounted here, unmounted (and its loop device
# detached) at exit whatever happens. Needs root, mkfs.ext4 and loop devices: without them the
# test is skipped (exit 77, the reason on stderr). Needs kcat and python3 (scripts/deps.sh).
# $1 = newsflow binary, $2 = source dir. NF_KEEP_TMP=1 keeps the logs.
set -uo pipefail
if [ $# -lt 2 ]; then
  echo "usage: bash test_disk_full.sh <newsflow-binary> <srcdir>" >&2
  exit 2
fi
NF="$1"
SRC="$2"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
skip() {
  echo "SKIP: test_disk_full: $*" >&2
  exit 77
}
[ "$(id -u)" = 0 ] || skip "mounting a small file system needs root (CI runs as root)"
command -v mkfs.ext4 >/dev/null 2>&1 || skip "mkfs.ext4 is not installed (e2fsprogs)"
command -v findmnt >/dev/null 2>&1 || skip "findmnt is not installed (util-linux)"
T=$(mktemp -d /tmp/nf-disk-full-XXXXXX)
MNT="$T/mnt"
IMG="$T/disk.img"
DEV=""
PY=""
cleanup() {
  if [ -n "$PY" ] && kill -0 "$PY" 2>/dev/null; then
    kill -TERM "$PY" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$PY" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$PY" 2>/dev/null
  fi
  if mountpoint -q "$MNT" 2>/dev/null; then
    # The driver stopped its processes by pid; a moment for the kernel to let go of the files.
    for _ in $(seq 50); do umount "$MNT" 2>/dev/null && break; sleep 0.1; done
    mountpoint -q "$MNT" 2>/dev/null && umount -l "$MNT"
  fi
  # mount -o loop sets autoclear (the device goes with the mount); detach it if it is still ours.
  if [ -n "$DEV" ] && losetup -n -O BACK-FILE "$DEV" 2>/dev/null | grep -qF "$IMG"; then
    losetup -d "$DEV" 2>/dev/null
  fi
  if [ -n "${NF_KEEP_TMP:-}" ]; then echo "keeping $T (image removed)"; rm -f "$IMG"; else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$MNT"
truncate -s 128M "$IMG" || skip "cannot make a 128 MiB image in $T"
mkfs.ext4 -q -F -m 0 "$IMG" >"$T/mkfs.log" 2>&1 || skip "mkfs.ext4 failed: $(tail -n 3 "$T/mkfs.log")"
mount -o loop "$IMG" "$MNT" >"$T/mount.log" 2>&1 ||
  skip "cannot loop-mount an image here (no loop devices in this container?): $(tail -n 3 "$T/mount.log")"
DEV=$(findmnt -n -o SOURCE "$MNT")
echo "test_disk_full: ext4 of 128 MiB on $DEV at $MNT"

# run_python.sh checks kcat, clears the job's environment and stops the driver on a signal; this
# script's trap then unmounts.
bash "$SRC/tests/recovery/run_python.sh" disk_full "$HERE/disk_full.py" "$NF" "$SRC" "$MNT" &
PY=$!
wait "$PY"
rc=$?
PY=""
exit $rc
