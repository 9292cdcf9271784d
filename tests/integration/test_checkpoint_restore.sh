#!/usr/bin/env bash
# test_checkpoint_restore.sh — `newsflow run --from-checkpoint` and `newsflow checkpoints` on real
# checkpoints (issue 15, items 3 and 11), with a job that runs without Kafka (kafka.brokers="")
# for a moment, committing an epoch every 50 ms and a named checkpoint every 2:
#   a. a checkpoint with a flipped byte in the middle of an .sst (its size unchanged) is refused
#      before anything moves (exit 1), and a plain run afterwards starts from the old state;
#   b. a checkpoint taken with another runtime.shards is restored and runs (trending state is
#      kept per input partition, so no state depends on the shard count);
#   c. restoring an older checkpoint keeps the newer ones (not one replaced or deleted; epochs
#      continue after the newest, so the job's own checkpoints never take their numbers);
#      `checkpoints list` marks the restored one and the kept ones; the replaced database is
#      named db.replaced-<UTC time>-epoch<N> and its path is logged;
#   d. db.replaced-* beyond checkpoint.retain_count are deleted, and that is logged;
#   e. `checkpoints delete` of the newest checkpoint while the job runs is refused without
#      --force;
#   f. `checkpoints show` and `list` record the shard count;
#   g. a clean stop takes a named checkpoint (checkpoint.on_stop), so a short demo run leaves one;
#      a restart that commits nothing does not.
# Every section runs on a state directory of its own and reports its own failures.
# Usage: bash test_checkpoint_restore.sh <newsflow binary> <source dir>
set -uo pipefail

nf=$1
src=$(realpath "$2")
work=$(mktemp -d)
bgpid=
cleanup() {
    [[ -n $bgpid ]] && kill -KILL "$bgpid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
while read -r var; do unset "$var"; done < <(env | sed -n 's/^\(NEWSFLOW_[A-Za-z0-9_]*\)=.*/\1/p')

failures=0
section=
fail() {
    echo "FAIL [$section]: $*" >&2
    failures=$((failures + 1))
}

# job STATE OUT_PREFIX [ARGS...]: runs the job for 1.2 s (2 shards, an epoch every 50 ms, a named
# checkpoint every 2 epochs); stdout/stderr in OUT_PREFIX.out/.err; returns its exit code. Later
# --set options win.
job() {
    local state=$1 out=$2
    shift 2
    "$nf" run --sink none --set kafka.brokers= --set admin.port=0 --set "state.dir=$state" \
        --set runtime.shards=2 --set checkpoint.interval_ms=50 --set checkpoint.retain_every=2 \
        --set checkpoint.retain_count=100 --set runtime.stop_after_ms=1200 --set log.level=info \
        "$@" >"$out.out" 2>"$out.err"
}

# logval FILE MSG FIELD: FIELD of the first JSON log line of FILE whose msg is MSG ("" if none).
logval() {
    python3 - "$@" <<'EOF'
import json, sys
for line in open(sys.argv[1], errors="replace"):
    try:
        o = json.loads(line)
    except ValueError:
        continue
    if o.get("msg") == sys.argv[2] and sys.argv[3] in o:
        print(o[sys.argv[3]])
        break
EOF
}

# ids STATE: the checkpoint ids, one a line.
ids() { ls "$1/checkpoints" 2>/dev/null | grep '^chk-' || true; }
# stamps STATE: "id created_at_ms" for every checkpoint (what tells a replaced one apart).
stamps() {
    local c
    for c in $(ids "$1"); do
        echo "$c $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["created_at_ms"])' \
            "$1/checkpoints/$c/manifest.json")"
    done
}
replaced() { ls "$1" | grep '^db\.replaced-' || true; }

# fresh STATE: a state directory with checkpoints chk-2 .. chk-E and db at epoch E; prints E.
fresh() {
    job "$1" "$1.mk" || {
        echo "making $1: run exited $?: $(tail -3 "$1.mk.err")" >&2
        return 1
    }
    logval "$1.mk.err" "newsflow stopped" epoch
}

# refused STATE OUT EPOCH WHAT: the restore in OUT exited 1 naming WHAT, and left STATE as it was:
# no db.replaced-*, the same checkpoints, and a plain run starts from epoch EPOCH.
refused() {
    local state=$1 out=$2 epoch=$3 what=$4 rc=$5 before=$6
    [[ $rc == 1 ]] || fail "run --from-checkpoint exited $rc, want 1 (refused); $(tail -2 "$out.err")"
    grep -qF -- "$what" "$out.err" || fail "the refusal does not say '$what': $(tail -2 "$out.err")"
    [[ -z $(replaced "$state") ]] || fail "the live db was moved aside: $(replaced "$state")"
    [[ $(stamps "$state") == "$before" ]] || fail "the checkpoints changed: $(stamps "$state")"
    local prc=0
    job "$state" "$out.after" || prc=$?
    [[ $prc == 0 ]] || fail "a plain run after the refusal exited $prc: $(tail -2 "$out.after.err")"
    local got
    got=$(logval "$out.after.err" "state restored" epoch)
    [[ $got == "$epoch" ]] || fail "a plain run after the refusal started at epoch '$got', want $epoch"
}

# ---- a. a flipped byte in an .sst: verify fails, restore is refused before anything moves ----
section=checksum
s=$work/a
if e=$(fresh "$s"); then
    chk=$s/checkpoints/chk-000000000010
    sst=$(ls -S "$chk"/*.sst | head -1)
    # a copy of its own (the .sst is a hard link shared with the live db and other checkpoints),
    # one byte flipped in the middle, the size unchanged
    python3 - "$sst" <<'EOF'
import os, sys
p = sys.argv[1]
data = bytearray(open(p, "rb").read())
data[len(data) // 2] ^= 0xFF
open(p + ".tmp", "wb").write(data)
os.rename(p + ".tmp", p)
EOF
    before=$(stamps "$s")
    "$nf" checkpoints verify 10 --state-dir "$s" >/dev/null 2>"$s.verify" &&
        fail "checkpoints verify passed a corrupt .sst"
    rc=0
    job "$s" "$s.restore" --from-checkpoint 10 || rc=$?
    refused "$s" "$s.restore" "$e" "refusing to restore the checkpoint" "$rc" "$before"
    grep -qiE 'corrupt|checksum|does not match the hash' "$s.restore.err" ||
        fail "the refusal does not name the corruption: $(tail -2 "$s.restore.err")"
else
    fail "cannot make $s"
fi

# ---- b. another runtime.shards: restored (state is kept per input partition, not per shard) ----
section=shards
s=$work/b
if e=$(fresh "$s"); then
    rc=0
    job "$s" "$s.r1" --set runtime.shards=3 --from-checkpoint 10 || rc=$?
    [[ $rc == 0 ]] || fail "restoring a 2-shard checkpoint with 3 shards exited $rc: $(tail -2 "$s.r1.err")"
    grep -q '"msg":"restored a named checkpoint' "$s.r1.err" || fail "no restore logged"
    [[ -n $(replaced "$s") ]] || fail "the live db was not replaced"
    got=$(logval "$s.r1.err" "restored a named checkpoint: state and input positions roll back to it" epoch)
    [[ $got == 10 ]] || fail "the 3-shard run restored epoch '$got', want 10"
    grep -q '"msg":"newsflow stopped"' "$s.r1.err" || fail "the 3-shard run did not stop cleanly"
else
    fail "cannot make $s"
fi

# ---- c. newer checkpoints survive the restore of an older one ----
section=newer
s=$work/c
if e=$(fresh "$s"); then
    before=$(stamps "$s")
    newest=$(ids "$s" | tail -1)
    rc=0
    job "$s" "$s.r" --from-checkpoint 10 || rc=$?
    [[ $rc == 0 ]] || fail "run --from-checkpoint 10 exited $rc: $(tail -2 "$s.r.err")"
    # every checkpoint from before is still there, not one replaced by a new one of its number
    missing=$(LC_ALL=C comm -23 <(echo "$before" | LC_ALL=C sort) <(stamps "$s" | LC_ALL=C sort))
    [[ -z $missing ]] || fail "checkpoints deleted or replaced by the restore: $missing"
    got=$(logval "$s.r.err" "state restored" epoch)
    # after every epoch the directory used: the newest kept checkpoint's, or the replaced db's
    # when its last epoch took no checkpoint (a final epoch without outputs takes none)
    want=$((10#${newest#chk-}))
    ((e > want)) && want=$e
    [[ $got == "$want" ]] ||
        fail "epochs continue from '$got', want $want (after the newest kept checkpoint ${newest#chk-} and the replaced db's epoch $e)"
    grep -qF 'checkpoints newer than the restored one are kept' "$s.r.err" ||
        fail "no log line about the kept newer checkpoints"
    path=$(logval "$s.r.err" "the replaced state is kept" path)
    [[ $path =~ /db\.replaced-[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{6}Z-epoch${e}$ ]] ||
        fail "replaced state logged as '$path', want STATE/db.replaced-<UTC time>-epoch$e"
    [[ -n $path && -d $path ]] || fail "the logged replaced state '$path' does not exist"
    "$nf" checkpoints list --state-dir "$s" >"$s.list" 2>&1
    grep -Eq '^chk-000000000010 .* restored$' "$s.list" || fail "list does not mark the restored base: $(cat "$s.list")"
    grep -Eq "^$newest .* newer than the restore$" "$s.list" || fail "list does not mark $newest as kept: $(cat "$s.list")"
    # the job's own checkpoints after the restore: numbered after the kept ones, and sound
    last=$(ids "$s" | tail -1)
    [[ $last > $newest ]] || fail "no checkpoint taken after the restore (newest is $last)"
    "$nf" checkpoints verify "$last" --state-dir "$s" >/dev/null 2>"$s.v" ||
        fail "verify $last after the restore: $(cat "$s.v")"
else
    fail "cannot make $s"
fi

# ---- d. db.replaced-* beyond checkpoint.retain_count are deleted, and that is logged ----
section=prune
if [[ -d $s ]]; then
    for i in 1 2; do
        job "$s" "$s.p$i" --from-checkpoint 10 --set checkpoint.retain_count=2 \
            --set checkpoint.retain_every=0 || fail "restore $i exited $?: $(tail -2 "$s.p$i.err")"
    done
    n=$(replaced "$s" | wc -l)
    [[ $n == 2 ]] || fail "$n db.replaced-* after 3 restores with checkpoint.retain_count=2, want 2: $(replaced "$s")"
    grep -qF 'deleted older replaced states beyond checkpoint.retain_count' "$s.p2.err" ||
        fail "the pruning is not logged"
    # no checkpoint since the last restore: latest is the restored one, not a newer kept one of
    # the timeline it left
    "$nf" checkpoints show latest --state-dir "$s" >"$s.latest" 2>&1
    python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["epoch"] == 10' "$s.latest" \
        2>/dev/null || fail "latest after restoring chk-10 is not chk-10: $(head -c 200 "$s.latest")"
fi

# ---- e. delete the newest checkpoint while the job runs ----
section=delete
s=$work/e
if e=$(fresh "$s"); then
    "$nf" run --sink none --set kafka.brokers= --set admin.port=0 --set "state.dir=$s" \
        --set runtime.shards=2 --set checkpoint.interval_ms=50 --set checkpoint.retain_every=0 \
        >/dev/null 2>"$s.bg.err" &
    bgpid=$!
    for _ in $(seq 100); do
        grep -qF '"newsflow started"' "$s.bg.err" && break
        sleep 0.1
    done
    newest=$(ids "$s" | tail -1)
    rc=0
    "$nf" checkpoints delete latest --state-dir "$s" >/dev/null 2>"$s.d1" || rc=$?
    [[ $rc == 1 ]] || fail "delete latest while the job runs exited $rc, want 1"
    grep -qF "refusing to delete $newest" "$s.d1" || fail "no refusal message: $(cat "$s.d1")"
    [[ -d $s/checkpoints/$newest ]] || fail "$newest was deleted without --force"
    "$nf" checkpoints delete 2 --state-dir "$s" >/dev/null 2>"$s.d2" ||
        fail "deleting an older checkpoint while the job runs: $(cat "$s.d2")"
    "$nf" checkpoints delete latest --force --state-dir "$s" >/dev/null 2>"$s.d3" ||
        fail "delete latest --force: $(cat "$s.d3")"
    [[ ! -d $s/checkpoints/$newest ]] || fail "$newest still there after --force"
    kill -TERM "$bgpid"
    wait "$bgpid" || fail "the job exited $? after SIGTERM"
    bgpid=
    # stopped: no confirmation needed
    "$nf" checkpoints delete latest --state-dir "$s" >/dev/null 2>"$s.d4" ||
        fail "delete latest with the job stopped: $(cat "$s.d4")"
else
    fail "cannot make $s"
fi

# ---- f. the shard count is recorded ----
section=shards-recorded
s=$work/f
if e=$(fresh "$s"); then
    "$nf" checkpoints show latest --state-dir "$s" >"$s.show"
    python3 -c 'import json,sys; assert json.load(open(sys.argv[1])).get("shards") == 2' \
        "$s.show" 2>/dev/null || fail "show does not record shards=2: $(head -c 300 "$s.show")"
    "$nf" checkpoints list --json --state-dir "$s" >"$s.json"
    python3 -c 'import json,sys; assert all(r.get("shards") == 2 for r in json.load(open(sys.argv[1])))' \
        "$s.json" 2>/dev/null || fail "list --json does not record shards=2"
    "$nf" checkpoints list --state-dir "$s" >"$s.list"
    grep -Eq '^ID .* SHARDS' "$s.list" || fail "list has no SHARDS column: $(head -2 "$s.list")"
else
    fail "cannot make $s"
fi

# ---- g. a clean stop leaves a named checkpoint (a short run with the default cadence) when it
# committed outputs, and none when nothing was committed since the last one ----
section=on-stop
s=$work/g
rc=0
job "$s" "$s.r" --set checkpoint.interval_ms=5000 --set checkpoint.retain_every=12 \
    --set runtime.stop_after_ms=1500 --set "sources.file=$src/examples/feeds/sources.txt" || rc=$?
[[ $rc == 0 ]] || fail "run exited $rc"
out=$(logval "$s.r.err" "newsflow stopped" outputs_committed)
[[ ${out:-0} -gt 0 ]] || fail "the short run committed no outputs (the example feeds): $(tail -2 "$s.r.err")"
[[ -n $(ids "$s") ]] || fail "a clean stop after 1.5 s with outputs left no named checkpoint"
before=$(ids "$s")
rc=0
job "$s" "$s.r2" --set checkpoint.interval_ms=5000 --set checkpoint.retain_every=12 \
    --set runtime.stop_after_ms=300 || rc=$?
[[ $rc == 0 ]] || fail "second run exited $rc"
[[ $(ids "$s") == "$before" ]] ||
    fail "a restart without traffic took a checkpoint at its stop: $before -> $(ids "$s")"

if ((failures)); then
    echo "FAIL: $failures checks failed" >&2
    exit 1
fi
echo "ok: checkpoint restore"
