#!/usr/bin/env bash
# Fails if an #include in src/ breaks the layering (docs/ARCHITECTURE.md §6):
#
#   runtime (0) <- algo, feed (1) <- io (2) <- state, sink (3) <- engine, actors (4) <- serve (5)
#   <- job (6) <- cli (7) <- main.c (8)
#
# A file may include headers of its own level or a lower one, never a higher one. algo and feed
# share level 1 with one direction only: feed may include algo (hashes, sha256), algo may not
# include feed (algo is data structures and hashing that know nothing of feeds). Also fails on
# two headers that include each other (the cycle io/kafka.h <-> state/epoch.h had).
# engine (classify, cluster, interest, trending: the stages' algorithms over state) shares level 4
# with actors one way: an actor may include an engine, an engine never an actor.
# serve (every HTTP route) is below job (the job's assembly), which is below cli (the commands):
# nothing below serve includes it, and serve never includes the job or a command.
# sink (the PostgreSQL sink, its own process) shares level 3 with state, neither including the other.
# Checks `#include "dir/x.h"` lines of src/**/*.c and *.h; prints each violation as
# "file:line: includes X (level) from level Y" and exits 1; else "layers: ok (N includes checked)".
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 - <<'PY'
import os, re, sys

LEVELS = {"runtime": 0, "algo": 1, "feed": 1, "io": 2, "state": 3, "sink": 3, "engine": 4, "actors": 4, "serve": 5,
          "job": 6, "cli": 7}
MAIN_LEVEL = 8
# same level, one direction only (feed -> algo, actors -> engine), or none (sink, state)
FORBIDDEN = {("algo", "feed"), ("engine", "actors"), ("sink", "state"), ("state", "sink")}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')

def area_of(rel):  # rel: path under src/
    if rel == "main.c":
        return "main.c", MAIN_LEVEL
    top = rel.split("/", 1)[0]
    return top, LEVELS.get(top)

bad, checked, edges = [], 0, {}
for root, _, files in os.walk("src"):
    for name in sorted(files):
        if not name.endswith((".c", ".h")):
            continue
        path = os.path.join(root, name)
        rel = os.path.relpath(path, "src")
        area, level = area_of(rel)
        if level is None:
            bad.append(f"{path}:1: directory {area}/ has no level (add it to scripts/check-layers.sh)")
            continue
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                inc = m.group(1)
                if "/" not in inc:
                    continue  # a header beside the file: same directory, same level
                checked += 1
                if rel.endswith(".h"):
                    edges.setdefault(rel, []).append((inc, lineno))
                top = inc.split("/", 1)[0]
                tlevel = LEVELS.get(top)
                if tlevel is None:
                    bad.append(f"{path}:{lineno}: includes {inc} (no level) from level {level}")
                elif tlevel > level or (area, top) in FORBIDDEN:
                    bad.append(f"{path}:{lineno}: includes {inc} ({top}, level {tlevel}) "
                               f"from level {level} ({area})")

for a, incs in edges.items():
    for b, lineno in incs:
        if any(c == a for c, _ in edges.get(b, [])):
            if a < b:
                bad.append(f"src/{a}:{lineno}: includes {b}, which includes {a} (include cycle)")

for b in bad:
    print(b)
if bad:
    print(f"layers: {len(bad)} violation(s) ({checked} includes checked)")
    sys.exit(1)
print(f"layers: ok ({checked} includes checked)")
PY
