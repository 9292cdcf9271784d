#!/usr/bin/env bash
# `newsflow status` and `newsflow sources list [--failing]` (issue 15, item 6): while the job
# runs they read it through its admin server (partitions, epoch, seconds since the last commit,
# restore state, failing sources with their last error); once it is stopped, from the committed
# state in state.dir. $1 = newsflow binary, $2 = source dir.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
fail() { echo "FAIL: $*" >&2; [ -f "$TMP/cerr" ] && cat "$TMP/cerr" >&2; [ -f "$TMP/err" ] && tail -5 "$TMP/err" >&2; exit 1; }

cp "$SRC/examples/feeds/world.xml" "$SRC/examples/feeds/wire.rss" "$TMP/"
printf 'world.xml\nwire.rss\nmissing.xml\n' >"$TMP/sources.txt"
PORT=$(free_port)
# One configuration for the job and for the commands that ask about it.
cat >"$TMP/job.json" <<EOF
{"sources": {"file": "$TMP/sources.txt"}, "admin": {"port": $PORT},
 "state": {"dir": "$TMP/state"}, "checkpoint": {"interval_ms": 300},
 "sink": {"spec": "none"}, "runtime": {"shards": 2}}
EOF
export NEWSFLOW_CONFIG="$TMP/job.json"
"$NF" run 2>"$TMP/err" &
PID=$!
# Wait (up to 60 s; not a timing assertion) until the job is ready, the missing file failed and
# read events (the embedded cluster's demo producer) were consumed.
for _ in $(seq 600); do
  if curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 &&
     curl -sf "http://127.0.0.1:$PORT/metrics" >"$TMP/metrics" 2>/dev/null &&
     grep -q '^newsflow_sources{state="backoff"} 1$' "$TMP/metrics" &&
     grep -q '^newsflow_read_events_total [1-9]' "$TMP/metrics"; then
    break
  fi
  kill -0 "$PID" 2>/dev/null || fail "the job exited"
  sleep 0.1
done

"$NF" status --json >"$TMP/status.json" 2>"$TMP/cerr" || fail "status exited $?"
python3 - "$TMP/status.json" "$TMP" "$PID" <<'PY' || fail "status --json of the running job"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["source"] == "admin" and s["pid"] == int(sys.argv[3]), s
assert s["ready"] is True and s["epoch"] >= 1 and s["seconds_since_commit"] >= 0, s
assert s["restore"]["state"] == "restored", s
parts = {(p["topic"], p["partition"]) for p in s["partitions"]}
assert ("read-events", 0) in parts, s["partitions"]
assert s["sources"] == {"ok": 2, "backoff": 1, "dead": 0, "paused": 0, "throttled": 0}, s["sources"]
[f] = s["failing"]
assert f["url"] == "file://%s/missing.xml" % sys.argv[2] and f["state"] == "backoff", f
assert "missing.xml" in f["last_error"] and f["failures"] == 1, f
PY
"$NF" status >"$TMP/status.txt" 2>"$TMP/cerr" || fail "status (text) exited $?"
grep -q "^job: running, pid $PID" "$TMP/status.txt" || fail "status text: $(cat "$TMP/status.txt")"
grep -q "^failing sources: 1" "$TMP/status.txt" || fail "status text lacks the failing source"
grep -q "last error .*missing.xml" "$TMP/status.txt" || fail "status text lacks the last error"

"$NF" sources list --failing --json >"$TMP/failing.json" 2>"$TMP/cerr" || fail "sources list --failing"
"$NF" sources list --json >"$TMP/all.json" 2>"$TMP/cerr" || fail "sources list"
python3 - "$TMP/failing.json" "$TMP/all.json" <<'PY' || fail "sources list of the running job"
import json, sys
failing = json.load(open(sys.argv[1]))["sources"]
every = json.load(open(sys.argv[2]))["sources"]
assert [s["url"].rsplit("/", 1)[1] for s in failing] == ["missing.xml"], failing
assert sorted(s["state"] for s in every) == ["backoff", "ok", "ok"], every
assert all(s["last_error"] is None for s in every if s["state"] == "ok"), every
PY
"$NF" sources list --failing >"$TMP/failing.txt" 2>"$TMP/cerr" || fail "sources list --failing (text)"
grep -q "^failing sources: 1" "$TMP/failing.txt" || fail "sources list text: $(cat "$TMP/failing.txt")"
pass "status and sources list read the running job through its admin server"

stop_job
[ $RC -eq 0 ] || fail "the job did not stop cleanly (exit $RC)"
"$NF" status --json >"$TMP/status.json" 2>"$TMP/cerr" || fail "status of a stopped job exited $?"
python3 - "$TMP/status.json" "$TMP" <<'PY' || fail "status --json from the state"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["source"] == "state" and s["held_by_pid"] is None, s
assert s["epoch"] >= 1 and s["seconds_since_commit"] >= 0, s
assert any(p["topic"] == "read-events" for p in s["partitions"]), s["partitions"]
assert s["sources"] == {"ok": 2, "backoff": 1, "dead": 0, "paused": 0, "throttled": 0}, s["sources"]
[f] = s["failing"]
assert f["url"] == "file://%s/missing.xml" % sys.argv[2] and f["last_outcome"] == "failed", f
PY
"$NF" status >"$TMP/status.txt" 2>"$TMP/cerr" || fail "status (text) of a stopped job"
grep -q "^job: not running" "$TMP/status.txt" || fail "stopped status text: $(cat "$TMP/status.txt")"
"$NF" sources list --failing --json >"$TMP/failing.json" 2>"$TMP/cerr" || fail "sources list of a stopped job"
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["source"]=="state" and [x["state"] for x in s["sources"]]==["backoff"], s' \
  "$TMP/failing.json" || fail "sources list --failing from the state"
pass "status and sources list read a stopped job's committed state"

# A running job whose admin server does not answer (here: disabled) is named, and its committed
# state is shown (RocksDB read-only beside the job that holds the database).
"$NF" run --set admin.enabled=false 2>"$TMP/err" &
PID=$!
for _ in $(seq 600); do
  grep -q '"msg":"newsflow started"' "$TMP/err" && break
  kill -0 "$PID" 2>/dev/null || fail "the job exited"
  sleep 0.1
done
"$NF" status --json --set admin.enabled=false >"$TMP/status.json" 2>"$TMP/cerr" || fail "status beside a running job without admin"
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["source"]=="state" and s["held_by_pid"]==int(sys.argv[2]) and s["epoch"]>=1, s' \
  "$TMP/status.json" "$PID" || fail "status names the job that holds the state"
"$NF" status --set admin.enabled=false >"$TMP/status.txt" 2>"$TMP/cerr" || fail "status text beside a running job"
grep -q "^job: running (pid $PID holds the state)" "$TMP/status.txt" || fail "status text: $(cat "$TMP/status.txt")"
stop_job
[ $RC -eq 0 ] || fail "the job did not stop cleanly (exit $RC)"
pass "status beside a running job whose admin server does not answer reads its state and names it"

# A running job on another admin port (here: any free port) is found through the address it
# wrote to state.dir/admin.json, by status and by sources list alike (issue 37); the file goes
# with the job.
"$NF" run --set admin.port=0 2>"$TMP/err" &
PID=$!
for _ in $(seq 600); do
  [ -f "$TMP/state/admin.json" ] && grep -q '"msg":"newsflow started"' "$TMP/err" && break
  kill -0 "$PID" 2>/dev/null || fail "the job exited"
  sleep 0.1
done
"$NF" status --json >"$TMP/status.json" 2>"$TMP/cerr" || fail "status of a job on another port"
"$NF" sources list --json >"$TMP/all.json" 2>"$TMP/cerr" || fail "sources list of a job on another port"
python3 - "$TMP/status.json" "$TMP/all.json" "$PID" <<'PY' || fail "a job on another admin port not found"
import json, sys
s, a = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert s["source"] == "admin" and s["pid"] == int(sys.argv[3]), s
assert a.get("source") != "state" and len(a["sources"]) == 3, a  # from the job
PY
stop_job
[ $RC -eq 0 ] || fail "the job did not stop cleanly (exit $RC)"
[ ! -e "$TMP/state/admin.json" ] || fail "state.dir/admin.json left behind by a clean stop"
pass "status and sources list find a running job on another admin port (state.dir/admin.json)"

# Neither a job nor a state: exit 1 with a message naming both.
set +e
"$NF" status --set state.dir="$TMP/nothing" >/dev/null 2>"$TMP/cerr"
rc=$?
set -e
[ $rc -eq 1 ] || fail "status with no job and no state exited $rc, want 1"
grep -q "no state in $TMP/nothing" "$TMP/cerr" || fail "no-state message: $(cat "$TMP/cerr")"
pass "status without a job or a state says so (exit 1)"
