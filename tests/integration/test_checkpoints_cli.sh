#!/usr/bin/env bash
# test_checkpoints_cli.sh — `newsflow checkpoints`: usage errors, where the state directory comes
# from, unknown ids, and list/show/verify/delete on a hand-made checkpoint directory (a manifest
# over a file that is no database, so verify must fail). Real checkpoints are covered by
# tests/unit/state/test_store.c; this script gets them once `newsflow run` writes some.
# Usage: bash test_checkpoints_cli.sh <newsflow binary> <source dir>
set -euo pipefail

nf=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The job's own variables would be applied; start from a clean slate.
while read -r var; do unset "$var"; done < <(env | sed -n 's/^\(NEWSFLOW_[A-Za-z0-9_]*\)=.*/\1/p')

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# run EXPECTED_RC ARGS... : runs newsflow, keeps stdout/stderr in $work/out, $work/err.
run() {
    local want=$1 rc=0
    shift
    "$nf" "$@" >"$work/out" 2>"$work/err" || rc=$?
    [[ $rc == "$want" ]] || fail "newsflow $* exited $rc, expected $want; stderr: $(cat "$work/err")"
}

# has FILE FIXED_STRING : FILE ($work/out or $work/err) contains the string.
has() {
    grep -qF -- "$2" "$1" || fail "expected '$2' in $1: $(cat "$1")"
}

state=$work/state
mkdir -p "$state"

# ---- usage ----
run 2 checkpoints
has "$work/err" 'missing subcommand'
run 2 checkpoints frobnicate
has "$work/err" "unknown subcommand 'frobnicate'"
run 0 checkpoints --help
has "$work/out" 'A checkpoint is a complete, consistent copy'
has "$work/out" 'verify ID'
run 0 checkpoints list --help
has "$work/out" 'Usage: newsflow checkpoints list'
for sub in show verify delete; do
    run 2 checkpoints "$sub" --state-dir "$state"
    has "$work/err" "$sub needs a checkpoint ID"
done
run 2 checkpoints show 1 2 --state-dir "$state"
has "$work/err" "unexpected argument '2'"
run 2 checkpoints list 1 --state-dir "$state"
has "$work/err" "unexpected argument '1'"
run 2 checkpoints list --bogus --state-dir "$state"
has "$work/err" "unknown option '--bogus'"
run 2 checkpoints verify --json 1 --state-dir "$state"
has "$work/err" "unknown option '--json'"
run 2 checkpoints list --state-dir
has "$work/err" "needs a value"
run 2 checkpoints list --state-dir "$work/nowhere"
has "$work/err" "state directory $work/nowhere does not exist"

# ---- configuration: exactly as run loads it ----
run 2 checkpoints list --set state.dirr=x
has "$work/err" 'newsflow: config error: --set state.dirr=x'
run 2 checkpoints list --config "$work/missing.json"
has "$work/err" "$work/missing.json"

# ---- an empty state directory, named four ways ----
run 0 checkpoints list --state-dir "$state"
has "$work/out" "no checkpoints in $state/checkpoints"
run 0 checkpoints list --set "state.dir=$state"
has "$work/out" "no checkpoints in $state/checkpoints"
NEWSFLOW_STATE_DIR=$state "$nf" checkpoints list >"$work/out"
has "$work/out" "no checkpoints in $state/checkpoints"
printf '{"state": {"dir": "%s"}}\n' "$state" >"$work/cfg.json"
NEWSFLOW_CONFIG=$work/cfg.json "$nf" checkpoints list >"$work/out"
has "$work/out" "no checkpoints in $state/checkpoints"
run 0 checkpoints list --config "$work/cfg.json" --json
[[ $(python3 -c 'import json,sys; print(json.load(sys.stdin))' <"$work/out") == "[]" ]] ||
    fail "list --json on no checkpoints: $(cat "$work/out")"

run 2 checkpoints show 42 --state-dir "$state"
has "$work/err" "no checkpoint '42' in $state/checkpoints; checkpoints there: none"
run 2 checkpoints verify latest --state-dir "$state"
has "$work/err" "no checkpoint to call latest"
run 2 checkpoints delete ../db --state-dir "$state"
has "$work/err" "'../db' is not a checkpoint id"

# ---- a hand-made checkpoint: a manifest over one file that is not a database ----
chk=$state/checkpoints/chk-000000000007
mkdir -p "$chk"
printf 'abcd\n' >"$chk/CURRENT"
cat >"$chk/manifest.json" <<'EOF'
{
  "id": "chk-000000000007",
  "epoch": 7,
  "created_at": "2024-01-02T03:04:05Z",
  "header": {"offsets": {}},
  "files": 1,
  "bytes": 5,
  "file_list": [{"name": "CURRENT", "bytes": 5}]
}
EOF

run 0 checkpoints list --state-dir "$state"
has "$work/out" 'CREATED_AT'
grep -Eq '^chk-000000000007 +7 +2024-01-02T03:04:05Z +1 +5 +unknown$' "$work/out" ||
    fail "list row: $(cat "$work/out")"
run 0 checkpoints list --json --state-dir "$state"
python3 - "$work/out" <<'EOF' || fail "list --json: $(cat "$work/out")"
import json, sys
rows = json.load(open(sys.argv[1]))
assert rows == [{"id": "chk-000000000007", "epoch": 7, "created_at": "2024-01-02T03:04:05Z",
                 "files": 1, "bytes": 5, "shards": None}], rows
EOF

for id in latest 7 chk-7 chk-000000000007 0007; do
    run 0 checkpoints show "$id" --state-dir "$state"
    cmp -s "$work/out" "$chk/manifest.json" || fail "show $id printed: $(cat "$work/out")"
done
run 2 checkpoints show 8 --state-dir "$state"
has "$work/err" "no checkpoint '8' in $state/checkpoints; checkpoints there: chk-000000000007"

# verify: the files match the manifest, but RocksDB cannot open it
run 1 checkpoints verify 7 --state-dir "$state"
has "$work/err" 'verify failed: chk-000000000007:'
[[ ! -s $work/out ]] || fail "a failed verify printed on stdout: $(cat "$work/out")"
# a file shorter than the manifest says
printf 'ab' >"$chk/CURRENT"
run 1 checkpoints verify latest --state-dir "$state"
has "$work/err" "$chk/CURRENT is 2 bytes, the manifest says 5 (truncated or overwritten)"
# a file the manifest lists, gone
rm "$chk/CURRENT"
run 1 checkpoints verify latest --state-dir "$state"
has "$work/err" "$chk/CURRENT is missing"

# a checkpoint directory without a manifest: not listed, but said; verify fails
mkdir -p "$state/checkpoints/chk-000000000009"
run 0 checkpoints list --state-dir "$state"
has "$work/err" "chk-000000000009 has no readable manifest.json"
if grep -F chk-000000000009 "$work/out"; then fail "listed a checkpoint without a manifest"; fi
run 1 checkpoints verify 9 --state-dir "$state"
has "$work/err" 'manifest.json'
run 1 checkpoints show latest --state-dir "$state"
has "$work/err" "chk-000000000009"

# delete
run 0 checkpoints delete 9 --state-dir "$state"
has "$work/out" 'deleted chk-000000000009'
run 0 checkpoints delete chk-000000000007 --state-dir "$state"
has "$work/out" 'deleted chk-000000000007'
[[ ! -e $chk ]] || fail "$chk still exists after delete"
run 2 checkpoints delete 7 --state-dir "$state"
has "$work/err" "checkpoints there: none"
run 0 checkpoints list --state-dir "$state"
has "$work/out" "no checkpoints in $state/checkpoints"
if find "$state/checkpoints" -mindepth 1 | grep .; then fail "delete left files behind"; fi

# --force belongs to delete only
run 2 checkpoints list --force --state-dir "$state"
has "$work/err" "unknown option '--force'"

# the top-level help names the command
run 0 --help
has "$work/out" 'checkpoints list [--json] | show ID | verify ID | delete ID [--force]'

echo "ok: checkpoints CLI"
