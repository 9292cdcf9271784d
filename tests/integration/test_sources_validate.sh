#!/usr/bin/env bash
# The operator's source list (issue 15, item 9): `config check` and `run` validate it alike and
# name every bad line at once (FILE:LINE: reason), and a local feed file that does not exist is
# that source's failure (it is crawled, fails and backs off), not a reason to stop the job.
# $1 = newsflow binary, $2 = source dir.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

cp "$SRC/examples/feeds/world.xml" "$TMP/world.xml"
cat >"$TMP/bad.txt" <<'EOF'
# four bad lines, one good feed, one local file that is not there
world.xml
ftp://example.com/feed.xml
http://exa mple.com/rss
gopher://example.org/x
https://[::1/feed
missing.xml
EOF
echo '{"sources": {"file": "'"$TMP/bad.txt"'"}, "kafka": {"brokers": ""}}' >"$TMP/bad.json"

# config check: exit 2 and all four bad lines, each as FILE:LINE.
set +e
"$NF" config check "$TMP/bad.json" >"$TMP/out" 2>"$TMP/err"
rc=$?
set -e
[ $rc -eq 2 ] || fail "config check on a list with 4 bad lines exited $rc, want 2"
for line in 3 4 5 6; do
  grep -qF "$TMP/bad.txt:$line: " "$TMP/err" || fail "config check does not report bad.txt:$line"
done
grep -qF "4 bad lines" "$TMP/err" || fail "config check does not count the bad lines"
grep -qF "$TMP/bad.txt:7: " "$TMP/err" || fail "config check does not warn about the missing file"
grep "bad.txt:7: " "$TMP/err" | grep -q warning || fail "the missing local file is not a warning"
pass "config check reports all 4 bad lines at once, the missing file as a warning"

# run: the same verdict, the same lines, before anything starts.
set +e
"$NF" run --config "$TMP/bad.json" --set state.dir="$TMP/state0" --set admin.enabled=false \
  --set runtime.stop_after_ms=2000 >"$TMP/out" 2>"$TMP/err"
rc=$?
set -e
[ $rc -eq 2 ] || fail "run on a list with 4 bad lines exited $rc, want 2"
for line in 3 4 5 6; do
  grep -qF "$TMP/bad.txt:$line: " "$TMP/err" || fail "run does not report bad.txt:$line"
done
pass "run refuses the same list naming the same 4 lines"

# Without the bad lines, the missing file does not stop the job: the good feed is crawled and
# the missing one is recorded as a failed fetch.
grep -v -e '^ftp' -e '^http' -e '^gopher' "$TMP/bad.txt" >"$TMP/good.txt"
echo '{"sources": {"file": "'"$TMP/good.txt"'"}, "kafka": {"brokers": ""}}' >"$TMP/good.json"
"$NF" config check "$TMP/good.json" >"$TMP/out" 2>"$TMP/err" || fail "config check: missing file is an error"
grep -qF "$TMP/good.json: ok" "$TMP/out" || fail "config check did not say ok"
set +e
"$NF" run --config "$TMP/good.json" --set state.dir="$TMP/state1" --set admin.enabled=false \
  --set runtime.stop_after_ms=3000 --set checkpoint.interval_ms=500 \
  >"$TMP/out" 2>"$TMP/err"
rc=$?
set -e
[ $rc -eq 0 ] || fail "run with a missing local source exited $rc, want 0"
python3 - "$TMP/out" "$TMP/missing.xml" <<'PY' || fail "outputs with a missing local source"
import json, sys
articles, errors = 0, []
for line in open(sys.argv[1]):
    o = json.loads(line)
    if o["topic"] == "articles":
        articles += 1
    elif o["topic"] == "fetch-log" and o["value"]["error"]:
        errors.append(o["value"])
assert articles > 0, "the good feed was not crawled"
assert len(errors) == 1 and errors[0]["url"] == "file://" + sys.argv[2], errors
PY
pass "a missing local file is a failing source; the job runs and crawls the rest"

# `sources partition`: where a consumer group wants a feed's record — Kafka's murmur2 of the
# host (the Python reference of tests/kafka/farm.py), for URLs and bare hosts alike.
out=$("$NF" sources partition --partitions 6 http://127.0.0.2:8080/f.xml 127.0.0.3 \
  'https://Example.COM/rss' news.example.org) || fail "sources partition exited $?"
python3 - "$SRC" "$out" <<'PY' || fail "sources partition disagrees with the reference"
import os, sys
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(sys.argv[1], "tests", "kafka"))
from farm import host_partition
rows = [l.split("\t") for l in sys.argv[2].strip().split("\n")]
assert [r[1] for r in rows] == ["127.0.0.2", "127.0.0.3", "example.com", "news.example.org"], rows
for arg, host, part in rows:
    assert int(part) == host_partition(host, 6), (arg, host, part, host_partition(host, 6))
PY
set +e
"$NF" sources partition --partitions 0 example.com >/dev/null 2>&1
[ $? -eq 2 ] || fail "sources partition --partitions 0 should be a usage error"
"$NF" sources partition --partitions 4 'ftp://example.com/x' >/dev/null 2>&1
[ $? -eq 2 ] || fail "sources partition of a non-http URL should be a usage error"
set -e
pass "sources partition: murmur2(host) % N for URLs and hosts, bad input refused"
