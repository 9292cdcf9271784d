#!/usr/bin/env bash
# `newsflow sources add|pause|resume|remove|crawl-now|import|export` (issue 43, "Sources without
# kcat") against the job on its embedded default: each command writes the sources topic and
# reads back what the job applied (/v1/sources); the feeds are served by a local HTTP server
# whose request log tells what was crawled. Checked: add (title, category, --paused, --id,
# --interval), its refusals (scheme, an id or URL already a source, a bad --id), pause / resume
# (by id and by URL, "already" without writing; resume revives a source the crawl policy
# declared dead), crawl-now (a fetch at once, out of an hourly interval; refused while paused), remove (refused for the configuration's sources and for an
# unknown id, nothing written when one argument of several is bad), an OPML import (an invalid
# entry refuses the whole file; --dry-run; --skip-invalid; entries already there left alone),
# the export (OPML, an --id included, that a second, fresh job imports back to the same
# sources), and a clear error
# when no job runs. $1 = newsflow binary, $2 = source dir.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
HPID=""
cleanup() { stop_pids "$PID"; [ -z "$HPID" ] || kill "$HPID" 2>/dev/null || true; rm -rf "$TMP"; }
fail() { echo "FAIL: $*" >&2; for f in out cerr err; do [ -f "$TMP/$f" ] && tail -5 "$TMP/$f" >&2; done; exit 1; }

mkdir -p "$TMP/www"
cp "$SRC/examples/feeds/world.xml" "$SRC/examples/feeds/wire.rss" "$TMP/www/"
cp "$SRC/examples/feeds/world.xml" "$TMP/www/a.xml"
cp "$SRC/examples/feeds/wire.rss" "$TMP/www/b.rss"
cp "$SRC/examples/feeds/world.xml" "$TMP/www/conf.xml"
HPORT=$(free_port)
(cd "$TMP/www" && exec python3 -u -m http.server "$HPORT" --bind 127.0.0.1) 2>"$TMP/http.log" &
HPID=$!
B="http://127.0.0.1:$HPORT"
fetches() { grep -c "\"GET /$1 HTTP" "$TMP/http.log" || true; }

start_job() { # $1: state dir
  PORT=$(free_port)
  cat >"$TMP/job.json" <<JSON
{"admin": {"port": $PORT}, "state": {"dir": "$1"}, "checkpoint": {"interval_ms": 300},
 "sink": {"spec": "none"}, "runtime": {"shards": 2},
 "crawl": {"interval_s": 3600, "dead_after_failures": 2},
 "fetch": {"allow_private": ["127.0.0.1/32"]}, "sources": {"urls": ["$B/conf.xml"]}}
JSON
  export NEWSFLOW_CONFIG="$TMP/job.json"
  "$NF" run 2>"$TMP/err" &
  PID=$!
  for _ in $(seq 600); do # up to 60 s; not a timing assertion
    if curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 &&
       grep -q embedded_brokers "$1/admin.json" 2>/dev/null; then
      return 0
    fi
    kill -0 "$PID" 2>/dev/null || fail "the job exited"
    sleep 0.1
  done
  fail "the job did not become ready"
}
# run WANT_RC ARGS...: newsflow sources ARGS, stdout in $TMP/out, stderr in $TMP/cerr
run() {
  local want=$1; shift
  set +e; "$NF" sources "$@" >"$TMP/out" 2>"$TMP/cerr"; local rc=$?; set -e
  [ "$rc" -eq "$want" ] || fail "sources $* exited $rc, want $want"
}
listed() { "$NF" sources list --json >"$TMP/list.json" 2>"$TMP/cerr" || fail "sources list"; }
# state_of ID: the job's state of the source (or "absent")
state_of() {
  listed
  python3 -c 'import json,sys; d={s["source_id"]: s for s in json.load(open(sys.argv[1]))["sources"]}; print(d[sys.argv[2]]["state"] if sys.argv[2] in d else "absent")' "$TMP/list.json" "$1"
}

# No job yet: the embedded topic lives inside it.
echo '{}' >"$TMP/none.json"
export NEWSFLOW_CONFIG="$TMP/none.json"
run 1 add "$B/world.xml" --set state.dir="$TMP/state"
grep -q 'no job runs on state.dir.*Start it (`newsflow run`) first' "$TMP/cerr" || fail "no-job message: $(cat "$TMP/cerr")"
run 2 add "ftp://127.0.0.1/x" --set state.dir="$TMP/state"
grep -q 'scheme is not http or https' "$TMP/cerr" || fail "a bad URL is checked before Kafka"
pass "without a running job: a clear refusal; a bad URL is refused before any broker is asked"

start_job "$TMP/state"
run 0 add "$B/world.xml" --title "World news" --category "News/World"
grep -q "^[0-9a-f]\{16\} $B/world.xml: active (applied by the job at" "$TMP/out" || fail "add: $(cat "$TMP/out")"
WORLD=$(awk 'NR==2 {print $1}' "$TMP/out")
[ "$(state_of "$WORLD")" != absent ] || fail "the added source is not listed"
run 2 add "$B/world.xml"
grep -q "already a source, $WORLD (in the sources topic)" "$TMP/cerr" || fail "duplicate URL: $(cat "$TMP/cerr")"
run 2 add "$B/other.xml" --id "$WORLD"
grep -q "already a source, $WORLD" "$TMP/cerr" || fail "duplicate id: $(cat "$TMP/cerr")"
run 2 add "$B/other.xml" --id "bad id!"
grep -q 'must be 1 to 128 of' "$TMP/cerr" || fail "bad id: $(cat "$TMP/cerr")"
run 0 add "$B/wire.rss" --id wire --interval 600 --paused
grep -q "^wire $B/wire.rss: paused (applied" "$TMP/out" || fail "add --paused: $(cat "$TMP/out")"
[ "$(state_of wire)" = paused ] || fail "wire is not paused"
pass "add: applied and read back; duplicates (URL, id) and bad input refused"

run 2 crawl-now wire
grep -q "wire is paused: \`newsflow sources resume wire\` first" "$TMP/cerr" || fail "crawl-now of a paused source"
run 0 pause wire
grep -q "already paused, nothing written" "$TMP/out" || fail "pause twice: $(cat "$TMP/out")"
run 0 resume "$B/wire.rss"
grep -q "^wire $B/wire.rss: active (applied" "$TMP/out" || fail "resume by URL: $(cat "$TMP/out")"
[ "$(state_of wire)" != paused ] || fail "wire is still paused"
run 0 pause "$WORLD"
[ "$(state_of "$WORLD")" = paused ] || fail "pause by id"
run 0 resume "$WORLD"
pass "pause and resume, by id and by URL"

# crawl-now: with an hourly interval, a fetch that comes after the first one is the request's.
for _ in $(seq 600); do
  [ "$(fetches wire.rss)" -ge 1 ] && [ "$(fetches world.xml)" -ge 1 ] && break
  sleep 0.1
done
listed
python3 - "$TMP/list.json" <<'PY' || fail "sources not settled after their first crawls"
import json, sys
for s in json.load(open(sys.argv[1]))["sources"]:
    assert not s["in_flight"], s
PY
BEFORE=$(fetches wire.rss)
run 0 crawl-now wire
grep -q "^wire $B/wire.rss: crawled, outcome \(ok\|not_modified\)" "$TMP/out" || fail "crawl-now: $(cat "$TMP/out")"
[ "$(fetches wire.rss)" -eq $((BEFORE + 1)) ] || fail "crawl-now: $(fetches wire.rss) fetches of wire.rss, want $((BEFORE + 1))"
pass "crawl-now: fetched at once, its outcome read back"

# A feed the crawl policy declares dead (here after one 404: 2 points), then served: resume
# revives it (the topic's record says active already: the command sees the job's verdict).
run 0 add "$B/gone.xml" --id gone
for _ in $(seq 600); do [ "$(state_of gone)" = dead ] && break; sleep 0.1; done
[ "$(state_of gone)" = dead ] || fail "gone.xml was not declared dead: $(state_of gone)"
cp "$TMP/www/world.xml" "$TMP/www/gone.xml"
run 0 resume gone
grep -q "^gone $B/gone.xml: active (applied" "$TMP/out" || fail "resume of a dead source: $(cat "$TMP/out")"
[ "$(state_of gone)" != dead ] || fail "gone is still dead"
pass "resume revives a source the crawl policy declared dead"

CONF=$(python3 -c 'import json,sys; print([s["source_id"] for s in json.load(open(sys.argv[1]))["sources"] if s["url"].endswith("/conf.xml")][0])' "$TMP/list.json")
run 2 remove "$CONF"
grep -q "is a source of the configuration" "$TMP/cerr" || fail "remove of a configured source: $(cat "$TMP/cerr")"
run 2 remove wire no-such-source
grep -q "no-such-source: no such source" "$TMP/cerr" || fail "remove unknown: $(cat "$TMP/cerr")"
[ "$(state_of wire)" != absent ] || fail "a refused remove wrote something"
run 0 pause "$CONF"
[ "$(state_of "$CONF")" = paused ] || fail "a configured source cannot be paused"
run 0 remove wire
grep -q "^wire $B/wire.rss: removed (applied" "$TMP/out" || fail "remove: $(cat "$TMP/out")"
[ "$(state_of wire)" = absent ] || fail "wire is still there"
pass "remove: applied; refused for the configuration's and unknown sources, all or nothing"

cat >"$TMP/in.opml" <<OPML
<?xml version="1.0" encoding="UTF-8"?>
<opml version="2.0"><head><title>Reader export</title></head><body>
  <outline text="News"><outline text="World"><outline type="rss" text="World again" xmlUrl="$B/world.xml"/></outline></outline>
  <outline text="Local">
    <outline type="rss" text="A &amp; co" xmlUrl="$B/a.xml"/>
    <outline type="rss" title="B" xmlUrl="$B/b.rss"/>
    <outline type="rss" text="Bad" xmlUrl="gopher://127.0.0.1/x"/>
    <outline type="rss" text="A twice" xmlUrl="$B/a.xml"/>
  </outline>
</body></opml>
OPML
listed
BEFORE_IMPORT=$(grep -o '"source_id"' "$TMP/list.json" | wc -l)
run 2 import "$TMP/in.opml"
grep -q "5 feeds: 2 new, 2 already sources, 1 invalid" "$TMP/out" || fail "import counts: $(cat "$TMP/out")"
grep -q "in.opml:7: url: \"gopher://127.0.0.1/x\": scheme is not http or https" "$TMP/cerr" || fail "import: the bad line: $(cat "$TMP/cerr")"
grep -q "nothing written" "$TMP/cerr" || fail "import with an invalid entry wrote"
run 0 import "$TMP/in.opml" --skip-invalid --dry-run
grep -q "dry run: 2 records not written" "$TMP/out" || fail "dry run: $(cat "$TMP/out")"
listed
[ "$(grep -o '"source_id"' "$TMP/list.json" | wc -l)" -eq "$BEFORE_IMPORT" ] || fail "a dry run or refused import wrote"
run 0 import "$TMP/in.opml" --skip-invalid
[ "$(grep -c ': active (applied by the job at' "$TMP/out")" -eq 2 ] || fail "import: $(cat "$TMP/out")"
printf '<opml><body><outline xmlUrl="http://x/"' >"$TMP/cut.opml"
run 2 import "$TMP/cut.opml"
grep -q "not well-formed XML: line 1" "$TMP/cerr" || fail "a cut file: $(cat "$TMP/cerr")"
pass "import: all or nothing, --dry-run, --skip-invalid, duplicates left alone, a cut file refused"

run 0 pause "$B/a.xml"
run 0 export --out "$TMP/out.opml"
python3 - "$TMP/out.opml" "$B" <<'PY' || fail "export"
import sys, xml.etree.ElementTree as ET
NS = "https://github.com/newsflow/newsflow/opml"
root = ET.parse(sys.argv[1]).getroot()
def walk(e, path):
    for o in e.findall("outline"):
        if "xmlUrl" in o.attrib:
            yield o.attrib["xmlUrl"], path, o.attrib.get("text"), o.attrib.get("{%s}status" % NS, "active")
        else:
            yield from walk(o, path + [o.attrib["text"]])
got = {u: (p, t, s) for u, p, t, s in walk(root.find("body"), [])}
b = sys.argv[2]
assert got[b + "/world.xml"] == (["News", "World"], "World news", "active"), got
assert got[b + "/a.xml"] == (["Local"], "A & co", "paused"), got
assert got[b + "/b.rss"] == (["Local"], "B", "active"), got
assert got[b + "/conf.xml"][2] == "paused", got
assert got[b + "/gone.xml"] == ([], "", "active"), got
assert len(got) == 5, got
PY
listed
cp "$TMP/list.json" "$TMP/first.json"
stop_job
[ "$RC" -eq 0 ] || fail "the job did not stop cleanly (exit $RC)"

# A fresh job (new state, new embedded broker) imports the export: the same sources.
start_job "$TMP/state2"
run 0 import "$TMP/out.opml"
grep -q "5 feeds: 4 new, 1 already sources, 0 invalid" "$TMP/out" || fail "import of the export: $(cat "$TMP/out")"
listed
python3 - "$TMP/first.json" "$TMP/list.json" <<'PY' || fail "the export imported again is not the same sources"
import json, sys
a, b = (json.load(open(p))["sources"] for p in sys.argv[1:])
# conf.xml is the second job's configured source already: the import leaves it as it is (the
# first job's operator had paused it)
key = lambda s: (s["source_id"], s["url"], s["interval_s"],
                 s["state"] == "paused" and not s["url"].endswith("/conf.xml"))
assert sorted(map(key, a)) == sorted(map(key, b)), (a, b)
PY
stop_job
[ "$RC" -eq 0 ] || fail "the second job did not stop cleanly (exit $RC)"
pass "export: OPML with categories, titles and status; imported by a fresh job, the same sources"
