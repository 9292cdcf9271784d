#!/usr/bin/env bash
# test_parse_robustness.sh — every input of gofeed's parser corpus (shared/conformance/
# gofeed-parser: RSS, Atom, JSON and format-detection files, including real breakage reported
# by users) through `newsflow parse`: exit 0 (parsed) or 1 (refused: not a feed, malformed),
# never a signal or anything else; and where gofeed's expectation lists items, at least that
# many articles; and the fields of gofeed's per-format expectations that map cleanly onto ours
# (titles, descriptions, content, links, ids) agree, compared as tests/conformance/gofeed.py
# compares. Under the ASan/UBSan build this is also the leak and memory-error check.
# Usage: bash test_parse_robustness.sh <newsflow binary> <source dir>
set -euo pipefail

nf=$1
src=$2
corpus="$src/../shared/conformance/gofeed-parser"
if [[ ! -d "$corpus" ]]; then
    # A clone on its own has no shared/ beside it: skipped (ctest's SKIP_RETURN_CODE), not failed.
    echo "SKIP: gofeed's parser corpus is not at $corpus (the project's shared/conformance," \
        "checked out beside the repository in CI); nothing to run it on" >&2
    exit 77
fi
exec python3 - "$nf" "$corpus" "$src/tests/conformance" <<'PY'
import json, os, subprocess, sys

nf, corpus = sys.argv[1], sys.argv[2]
sys.path.insert(0, sys.argv[3])
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import gofeed  # noqa: E402  (compare(): the conformance suite's normalisation)

# gofeed's per-format field -> ours, where the meaning is the same.
FEED = (("title", "title", "text"), ("description", "description", "text"),
        ("subtitle", "description", "text"), ("link", "link", "url"),
        ("home_page_url", "link", "url"), ("language", "language", "str"))
ITEM = (("title", "title", "text"), ("description", "summary", "text"),
        ("summary", "summary", "text"), ("content", "body", "text"),
        ("content_html", "body", "text"), ("link", "link", "url"), ("url", "link", "url"),
        ("guid", "guid", "str"), ("id", "guid", "str"))

def expectation(path):
    """gofeed's expectation for an input, or None: NAME.json beside NAME.xml, or
    NAME_expected.json beside NAME.json."""
    base, ext = os.path.splitext(path)
    exp = base + (".json" if ext != ".json" else "_expected.json")
    return exp if os.path.exists(exp) else None

inputs = []
for root, _, files in os.walk(corpus):
    for name in sorted(files):
        path = os.path.join(root, name)
        base, ext = os.path.splitext(name)
        if ext not in (".xml", ".json", ".rss", ".atom", ".rdf"):
            continue
        # A .json that is another file's expectation is not an input.
        if ext == ".json" and (name.endswith("_expected.json") or
                               os.path.exists(os.path.join(root, base + ".xml"))):
            continue
        inputs.append(path)

bad, counts = [], {0: 0, 1: 0}
checked = fields = 0
for path in sorted(inputs):
    rel = os.path.relpath(path, corpus)
    r = subprocess.run([nf, "parse", path, "--compact", "--fetched-at", "0"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode not in (0, 1):
        bad.append(f"{rel}: exit {r.returncode} (signal {-r.returncode} if negative); "
                   f"stderr: {r.stderr.strip()[-500:]}")
        continue
    counts[r.returncode] += 1
    if r.returncode == 0:
        try:
            out = json.loads(r.stdout)
        except ValueError as e:
            bad.append(f"{rel}: output is not JSON: {e}")
            continue
    exp = expectation(path)
    if not exp:
        continue
    try:
        with open(exp, encoding="utf-8") as f:
            want = json.load(f)
    except ValueError:
        continue
    if not isinstance(want, dict):
        continue
    if r.returncode == 0:
        pairs = [(k, kind, want[k], out["feed"].get(ours)) for k, ours, kind in FEED
                 if isinstance(want.get(k), str)]
        for i, (wi, gi) in enumerate(zip(want.get("items") or [], out["articles"])):
            if isinstance(wi, dict):
                pairs += [(f"items[{i}].{k}", kind, wi[k], gi.get(ours)) for k, ours, kind in ITEM
                          if isinstance(wi.get(k), str)]
        for name, kind, w, g in pairs:
            fields += 1
            ok, ws, gs = gofeed.compare(kind, w, g)
            if not ok:
                bad.append(f"{rel}: {name}: expected {ws!r}, got {gs!r}")
    items = want.get("items")
    if not isinstance(items, list) or not items:
        continue
    checked += 1
    got = len(out["articles"]) if r.returncode == 0 else 0
    if got < len(items):
        bad.append(f"{rel}: {got} articles, gofeed finds {len(items)} items"
                   + (f" (stderr: {r.stderr.strip()})" if r.returncode else ""))

for b in bad:
    print("FAIL", b)
print(f"{len(inputs)} inputs: {counts[0]} parsed, {counts[1]} refused (exit 1), "
      f"{len(bad)} failures; item counts checked on {checked}, {fields} mapped fields compared")
sys.exit(1 if bad else 0)
PY
