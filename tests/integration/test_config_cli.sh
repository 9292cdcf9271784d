#!/usr/bin/env bash
# test_config_cli.sh — `newsflow config`: defaults, check, and the file:line in its errors.
# Usage: bash test_config_cli.sh <newsflow binary> <source dir>
set -euo pipefail

nf=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The job's own variables would be applied by `config check`; start from a clean slate.
while read -r var; do unset "$var"; done < <(env | sed -n 's/^\(NEWSFLOW_[A-Za-z0-9_]*\)=.*/\1/p')

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

normalise() { python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin), indent=2, sort_keys=True))'; }

# run EXPECTED_RC ARGS... : runs newsflow, keeps stdout/stderr in $work/out, $work/err.
run() {
    local want=$1 rc=0
    shift
    "$nf" "$@" >"$work/out" 2>"$work/err" || rc=$?
    [[ $rc == "$want" ]] || fail "newsflow $* exited $rc, expected $want; stderr: $(cat "$work/err")"
}

# expect_error FILE_TEXT FRAGMENT : `config check` on a file holding FILE_TEXT exits 2 and says
# FRAGMENT (which starts with the file's name and line).
expect_error() {
    local name=$1 text=$2 fragment=$3
    printf '%s' "$text" >"$work/$name"
    run 2 config check "$work/$name"
    grep -qF "newsflow: config error: $work/$fragment" "$work/err" ||
        fail "config check $name: expected '$work/$fragment' in: $(cat "$work/err")"
}

# defaults == config/newsflow.json (as JSON values, and byte for byte)
run 0 config defaults
cmp -s "$work/out" "$src/config/newsflow.json" || fail "config defaults differs from config/newsflow.json byte for byte"
diff <(normalise <"$work/out") <(normalise <"$src/config/newsflow.json") >/dev/null ||
    fail "config defaults differs from config/newsflow.json"

# the shipped file is valid; --print shows the effective config with --set applied
run 0 config check "$src/config/newsflow.json"
[[ $(cat "$work/out") == "$src/config/newsflow.json: ok" ]] || fail "unexpected output: $(cat "$work/out")"
run 0 config check "$src/config/newsflow.json" --set runtime.shards=3 --print
[[ $(python3 -c 'import json,sys; sys.stdin.readline(); print(json.load(sys.stdin)["runtime"]["shards"])' <"$work/out") == 3 ]] ||
    fail "--print did not show runtime.shards=3: $(cat "$work/out")"

# environment layer
NEWSFLOW_LOG_LEVEL=debug "$nf" config check "$src/config/newsflow.json" --print >"$work/out"
grep -q '"level": "debug"' "$work/out" || fail "NEWSFLOW_LOG_LEVEL was not applied"
rc=0
NEWSFLOW_RUNTIME_SHARDZ=1 "$nf" config check "$src/config/newsflow.json" 2>"$work/err" >/dev/null || rc=$?
[[ $rc == 2 ]] && grep -q 'unknown environment variable NEWSFLOW_RUNTIME_SHARDZ' "$work/err" ||
    fail "unknown NEWSFLOW_ variable: rc $rc, $(cat "$work/err")"

# errors: exit 2, file name and line (and column for syntax errors)
expect_error unknown.json $'{\n  "runtime": {\n    "shards": 2,\n    "shardz": 4\n  }\n}\n' \
    'unknown.json:4: unknown key "runtime.shardz" (keys in "runtime": shards, pin,'
expect_error section.json $'{\n  "runtme": {}\n}\n' 'section.json:2: unknown section "runtme"'
expect_error type.json $'{\n  "log": {\n    "level": "info",\n    "progress_interval_ms": "5s"\n  }\n}\n' \
    'type.json:4: log.progress_interval_ms: expected an unsigned integer, got a string'
expect_error range.json $'{\n  "runtime": {\n\n    "shards": 5000\n  }\n}\n' \
    'range.json:4: runtime.shards: 5000 is out of range [0, 256]'
expect_error pow2.json $'{"runtime": {\n"ring_capacity": 1000}}\n' \
    'pow2.json:2: runtime.ring_capacity: 1000 is not a power of two'
expect_error enum.json $'{"log": {"level": "loud"}}\n' \
    'enum.json:1: log.level: "loud" is not one of debug, info, warn, error'
expect_error dup.json $'{\n  "admin": {"port": 1,\n  "port": 2}\n}\n' \
    'dup.json:3: duplicate key "admin.port" (first at line 2)'
expect_error syntax.json $'{\n  "runtime": {\n    "shards": 2\n    "pin": true\n  }\n}\n' \
    "syntax.json:4:5: invalid JSON near '\"pin\": true'"
expect_error top.json $'[]\n' 'top.json:1: expected a JSON object at the top level, got an array'

# --set errors
run 2 config check "$src/config/newsflow.json" --set runtime.shards=abc
grep -qF 'newsflow: config error: --set runtime.shards=abc: runtime.shards: expected an unsigned integer, got "abc"' "$work/err" ||
    fail "--set runtime.shards=abc: $(cat "$work/err")"
run 2 config check "$src/config/newsflow.json" --set runtime.shards
grep -qF 'expected SECTION.KEY=VALUE' "$work/err" || fail "--set without '=': $(cat "$work/err")"

# usage
run 2 config check "$work/missing.json"
grep -qF "$work/missing.json: cannot read: No such file or directory" "$work/err" || fail "missing file: $(cat "$work/err")"
run 2 config
run 2 config check
run 2 config check a.json b.json
run 2 config check "$src/config/newsflow.json" --bogus
run 2 config frobnicate
run 0 config keys
grep -q '^runtime.ring_capacity  *uint32  *1024 ' "$work/out" || fail "config keys lacks the key table"
run 0 config --help

echo "ok: config CLI"
