#!/usr/bin/env bash
# An actor's init that fails stops the job before it starts (issue 40): `newsflow run` exits 1,
# the error names the actor, the shard and the reason, and nothing is committed, so the next
# run starts from the same state. The failure is the drill hook NEWSFLOW_FAILPOINTS
# (src/runtime/failpoint.h), which fails dedup's init in the runtime, on every shard, the way a
# real failure unwinds. $1 = newsflow binary, $2 = source dir.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

common=(--set admin.port=0 --set runtime.shards=2 --set state.dir="$TMP/state")

# 1. The failing run: exit 1 (the timeout only guards against a hang), and the reason logged.
set +e
NEWSFLOW_FAILPOINTS=actor-init:dedup timeout 300 "$NF" run "${common[@]}" >"$TMP/out" 2>"$TMP/err"
rc=$?
set -e
[ $rc -eq 1 ] || fail "dedup's init failing: exit $rc, want 1"
python3 - "$TMP/err" <<'PY' || fail "no error line from main naming the actor, shard and reason"
import json, sys
want = "actor dedup on shard 0: failpoint actor-init:dedup"
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
assert any(o["level"] == "error" and o["component"] == "main" and o.get("error") == want
           for o in lines), [o for o in lines if o["level"] == "error"]
PY
! grep -q '"msg":"newsflow started"' "$TMP/err" || fail "the job said it started"
! grep -q '"msg":"epoch.committed"' "$TMP/err" || fail "an epoch committed"
pass "a failing init: exit 1, the error names actor dedup, shard 0 and the failpoint"

# 2. Nothing committed, and the state is not held: status reads it offline (nothing answers on
# the free port it is pointed at) as epoch 0.
"$NF" status --json --set state.dir="$TMP/state" --set admin.port="$(free_port)" \
  >"$TMP/status" 2>"$TMP/err2" || fail "status of the failed run's state: exit $?"
python3 - "$TMP/status" <<'PY' || fail "status after the failed run: $(cat "$TMP/status")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["source"] == "state" and s["epoch"] == 0 and s["held_by_pid"] is None, s
PY
pass "nothing committed: the state is at epoch 0 and not held"

# 3. The same state without the failpoint: the job starts clean (from epoch 0) and stops with
# exit 0 on SIGTERM. The loop waits for the start line; its bound only guards against a hang.
"$NF" run "${common[@]}" >"$TMP/out3" 2>"$TMP/err3" &
PID=$!
for _ in $(seq 3000); do
  grep -q '"msg":"newsflow started"' "$TMP/err3" 2>/dev/null && break
  kill -0 "$PID" 2>/dev/null || break
  sleep 0.1
done
grep '"msg":"newsflow started"' "$TMP/err3" >"$TMP/started" || fail "no start line without it"
grep -q '"epoch":0[,}]' "$TMP/started" || fail "started from another epoch: $(cat "$TMP/started")"
stop_job
[ $RC -eq 0 ] || fail "run after the failed one: exit $RC after SIGTERM, want 0"
pass "the next run starts clean from epoch 0"
echo "test_init_failure: all passed"
