#!/usr/bin/env bash
# A failing source is visible at log.level=warn (issue 15, item 8): a local feed file that is
# missing, a host that refuses the connection and a document that is not a feed each give one
# warn line naming the source, its URL and the reason; the feed that works gives none. The
# rate limit itself (one warning per change of state, then at most one per 10 minutes with the
# number suppressed) runs on a fake clock in tests/unit/actors/test_crawl_policy.c.
# $1 = newsflow binary, $2 = source dir.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

# A port nothing listens on: bound, then closed.
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cp "$SRC/examples/feeds/world.xml" "$TMP/world.xml"
printf '<html><body>not a feed</body></html>\n' >"$TMP/page.xml"
cat >"$TMP/sources.txt" <<EOF
world.xml
missing.xml
page.xml
http://127.0.0.1:$PORT/feed.xml
EOF
set +e
"$NF" run --set sources.file="$TMP/sources.txt" --set kafka.brokers= --set log.level=warn \
  --set fetch.allow_private=127.0.0.1/32 --set state.dir="$TMP/state" --set admin.enabled=false \
  --set runtime.stop_after_ms=3000 --set checkpoint.interval_ms=500 --set sink.spec=none \
  >"$TMP/out" 2>"$TMP/err"
rc=$?
set -e
[ $rc -eq 0 ] || fail "run exited $rc"
python3 - "$TMP/err" "$TMP" "$PORT" <<'PY' || fail "warn lines for failing sources"
import json, sys
err, tmp, port = sys.argv[1], sys.argv[2], sys.argv[3]
want = {
    "file://%s/missing.xml" % tmp: "open file",
    "file://%s/page.xml" % tmp: "parse: ",
    "http://127.0.0.1:%s/feed.xml" % port: "connect",
}
seen = {}
for line in open(err):
    if not line.startswith("{"):
        continue
    o = json.loads(line)
    assert o["level"] in ("warn", "error"), "log.level=warn let through: " + line
    if o.get("component") == "crawl" and "url" in o:
        assert len(o["source_id"]) == 16, o
        seen.setdefault(o["url"], []).append(o)
for url, reason in want.items():
    lines = seen.get(url)
    assert lines, "no warn line for the failing source %s; got %s" % (url, list(seen))
    assert len(lines) == 1, "more than one warn line for one failure: %s" % lines
    o = lines[0]
    assert reason in o["error"], (reason, o)
    assert o["state"] == "backoff" and o["failures"] == 1, o
assert "file://%s/world.xml" % tmp not in seen, "the working feed was reported failing"
PY
pass "each failing source (missing file, refused connection, not a feed) has one warn line with its reason"
