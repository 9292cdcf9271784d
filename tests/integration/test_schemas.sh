#!/usr/bin/env bash
# test_schemas.sh — the topic schemas in schemas/: each is a valid JSON Schema (2020-12), every
# topic of docs/topics.md has one, the hand-written good examples validate and every bad example
# is rejected, and what `newsflow run` really emits on the bundled example feeds validates
# (keys included) with tests/schemas/validate.py.
# Usage: bash test_schemas.sh <newsflow binary> <source dir>
set -euo pipefail

nf=$(realpath "$1") # absolute: the run below starts in the scratch directory
src=$(realpath "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
while read -r var; do unset "$var"; done < <(env | sed -n 's/^\(NEWSFLOW_[A-Za-z0-9_]*\)=.*/\1/p')

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

validate=("python3" "$src/tests/schemas/validate.py" --schemas "$src/schemas")
topics=(sources read-events articles fetch-log story-clusters trending interest-updates dead-letters breaking-news notifications)

# 1. Every schema is itself valid, declares draft 2020-12, and there is one per topic (no more).
python3 - "$src/schemas" "${topics[@]}" <<'EOF' || fail "schema check failed"
import glob, json, os, sys
from jsonschema import Draft202012Validator
d, topics = sys.argv[1], sys.argv[2:]
found = sorted(os.path.basename(p)[:-len(".schema.json")] for p in glob.glob(f"{d}/*.schema.json"))
if found != sorted(topics):
    sys.exit(f"schemas present {found}, expected one per topic {sorted(topics)}")
for t in topics:
    with open(f"{d}/{t}.schema.json", encoding="utf-8") as f:
        s = json.load(f)
    if s.get("$schema") != "https://json-schema.org/draft/2020-12/schema":
        sys.exit(f"{t}: $schema is not draft 2020-12")
    Draft202012Validator.check_schema(s)
    if s.get("type") != "object" or "required" not in s:
        sys.exit(f"{t}: expected an object schema with required fields")
    # Inputs are forward compatible (the decoders skip unknown fields, and producers may add
    # fields before the job knows them); outputs are exactly what the job writes.
    want = t in ("sources", "read-events")
    if s.get("additionalProperties") is not want:
        sys.exit(f"{t}: additionalProperties must be {want} ({'an input' if want else 'an output'})")
EOF

# 2. Hand-written examples: good ones validate, each bad one is rejected (and there are some).
for t in "${topics[@]}"; do
    good="$src/schemas/examples/$t.good.jsonl"
    bad="$src/schemas/examples/$t.bad.jsonl"
    [[ -s $good && -s $bad ]] || fail "missing examples for $t: $good, $bad"
    "${validate[@]}" --topic "$t" "$good" >"$work/out" 2>&1 || fail "$t good examples: $(cat "$work/out")"
    "${validate[@]}" --topic "$t" --expect-invalid "$bad" >"$work/out" 2>&1 ||
        fail "$t bad examples not rejected: $(cat "$work/out")"
done

# 3. The validator itself: failures are listed as FILE:LINE and exit 1; usage errors exit 2.
printf '%s\n' '{"url":"https://example.com/"}' '{"url":""}' '' '{"url":"x","type":"xml"}' >"$work/mixed.jsonl"
rc=0
"${validate[@]}" --topic sources "$work/mixed.jsonl" >"$work/out" 2>&1 || rc=$?
[[ $rc == 1 ]] || fail "validate.py on a bad file exited $rc: $(cat "$work/out")"
grep -qF "$work/mixed.jsonl:2: sources: url: '' should be non-empty" "$work/out" ||
    fail "no FILE:LINE for the empty url: $(cat "$work/out")"
grep -qF "$work/mixed.jsonl:4: sources: type: 'xml' is not one of" "$work/out" ||
    fail "no FILE:LINE for the bad type: $(cat "$work/out")"
grep -qF "$work/mixed.jsonl:1:" "$work/out" && fail "line 1 is valid but was reported: $(cat "$work/out")"
rc=0
"${validate[@]}" --topic no-such-topic "$work/mixed.jsonl" >"$work/out" 2>&1 || rc=$?
[[ $rc == 2 ]] || fail "unknown topic: exit $rc, expected 2"

# Sink format: the topic comes from the record, the key must match the value, and only the
# sources topic has tombstones.
cat >"$work/sink-good.jsonl" <<'EOF'
{"topic":"sources","key":"src-1","value":{"url":"https://example.com/feed"}}
{"topic":"sources","key":"src-1","value":null}
{"topic":"interest-updates","key":"u-1","value":{"user_id":"u-1","version":1,"vector":{},"updated_at":"2026-11-22T05:00:00Z"}}
{"topic":"dead-letters","key":"read-events/3/12345","value":{"origin":{"topic":"read-events","partition":3,"offset":12345},"stage":"decode","error":"missing required field \"ts\"","payload":"{}","ts":"2026-11-22T05:00:00Z"}}
EOF
"${validate[@]}" "$work/sink-good.jsonl" >"$work/out" 2>&1 || fail "sink records: $(cat "$work/out")"
cat >"$work/sink-bad.jsonl" <<'EOF'
{"topic":"interest-updates","key":"u-2","value":{"user_id":"u-1","version":1,"vector":{},"updated_at":"2026-11-22T05:00:00Z"}}
{"topic":"interest-updates","key":"u-1","value":null}
{"topic":"dead-letters","key":"read-events/3/1","value":{"origin":{"topic":"read-events","partition":3,"offset":12345},"stage":"decode","error":"e","payload":"{}","ts":"2026-11-22T05:00:00Z"}}
{"topic":"sources","key":7,"value":{"url":"https://example.com/feed"}}
{"topic":"no-such-topic","key":"k","value":{}}
{"key":"k","value":{}}
EOF
"${validate[@]}" --expect-invalid "$work/sink-bad.jsonl" >"$work/out" 2>&1 ||
    fail "bad sink records accepted: $(cat "$work/out")"
rc=0
"${validate[@]}" "$work/sink-bad.jsonl" >"$work/out" 2>&1 || rc=$?
[[ $rc == 1 ]] || fail "bad sink records: exit $rc"
grep -qF "sink-bad.jsonl:1: interest-updates: key 'u-2' does not match the value ('u-1')" "$work/out" ||
    fail "key mismatch not reported: $(cat "$work/out")"

# 4. What the job really emits on the example feeds (file:// sources, no Kafka, no admin port),
# with fresh state in the scratch directory: restored dedup state would emit no articles.
state=()
"$nf" config defaults >"$work/defaults.json"
grep -qF '"state": {' "$work/defaults.json" && state=(--set "state.dir=$work/state")
rc=0
(cd "$work" && "$nf" run --config "$src/config/newsflow.json" \
    --set "sources.file=$src/examples/feeds/sources.txt" --set runtime.stop_after_ms=2000 \
    --set kafka.brokers= --set admin.enabled=false "${state[@]}" \
    >"$work/run.jsonl" 2>"$work/run.err") || rc=$?
[[ $rc == 0 ]] || fail "newsflow run exited $rc: $(tail -n 5 "$work/run.err")"
grep -qF '"topic":"articles"' "$work/run.jsonl" || fail "newsflow run emitted no articles"
grep -qF '"topic":"fetch-log"' "$work/run.jsonl" || fail "newsflow run emitted no fetch-log records"
"${validate[@]}" "$work/run.jsonl" >"$work/out" 2>&1 ||
    fail "newsflow run output does not match the schemas: $(cat "$work/out")"

echo "test_schemas: ok"
