#!/usr/bin/env bash
# test_help.sh — `newsflow --help` is the whole map: every command, every subcommand and every
# option that a command's own `--help` shows in its Usage lines appears in the top-level text,
# in that command's entry. A command or option added without its line here fails this test.
# Usage: bash test_help.sh <newsflow binary> <source dir>
set -euo pipefail

nf=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

"$nf" --help >"$work/top" || fail "newsflow --help exited non-zero"
# the commands main.c dispatches (and `help`)
commands=(run parse config checkpoints topics mock-kafka version)
for c in "${commands[@]}"; do
    "$nf" "$c" --help >"$work/$c" 2>&1 || true
done
python3 - "$work" "${commands[@]}" <<'PY' || fail "top-level help is incomplete (above)"
import re, sys
work, commands = sys.argv[1], sys.argv[2:]
top = open(f"{work}/top").read().split("\n")
entries, cur = {}, None
for l in top:
    m = re.match(r"^  ([a-z][a-z-]*)(\s|$)", l)
    if m:
        cur = m.group(1)
        entries.setdefault(cur, []).append(l)
    elif cur and l.startswith("    "):
        entries[cur].append(l)
    else:
        cur = None
bad = []
for c in commands:
    if c not in entries:
        bad.append(f"command {c!r} has no entry in `newsflow --help`")
        continue
    entry = "\n".join(entries[c])
    text = open(f"{work}/{c}").read()
    usage = []
    for l in text.split("\n"):  # the Usage block: up to the first blank line
        if not l.strip():
            if usage:
                break
            continue
        usage.append(l)
    for l in usage:
        m = re.match(r"^(?:Usage:)?\s*newsflow\s+" + re.escape(c) + r"\s+([a-z][a-z-]*)\b", l)
        if m and m.group(1) not in entry:
            bad.append(f"{c}: subcommand {m.group(1)!r} (from `newsflow {c} --help`) missing")
        for opt in re.findall(r"--[a-z][a-z-]*", l):
            if opt not in entry:
                bad.append(f"{c}: option {opt} (from `newsflow {c} --help`) missing")
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
PY
echo "test_help: ok"
