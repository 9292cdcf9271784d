#!/usr/bin/env python3
"""Why each failed test failed, in a few lines: printed by scripts/test.sh after ctest's summary.

A failed test's whole output can run to thousands of lines, and a CI log that is shown only in
part (its head and its tail) then hides the one line that matters. This reads ctest's
Testing/Temporary/LastTest.log and prints, for every failed test, its failure lines (FAIL,
Assertion, ERROR, Timeout, a sanitizer's summary) with the few lines of output before the first.

Usage: python3 scripts/ctest_digest.py BUILD_DIR [CONTEXT_LINES]"""
import os
import re
import sys

MARK = re.compile(r"^(FAIL\b|FAIL \[|.*Assertion .* failed|.*: error:|ERROR|.*SUMMARY: "
                  r"(Address|Undefined|Thread)Sanitizer|.*runtime error:|Traceback)")
HEAD = re.compile(r"^\d+/\d+ Test: (\S+)")
END = re.compile(r"^Test (Passed|Failed)\.|^\*\*\*(Timeout|Failed|Exception)|^<end of output>")


def sections(log):
    """(test name, output lines) for every test in ctest's LastTest.log."""
    name, out, inside = None, [], False
    for line in log:
        line = line.rstrip("\n")
        m = HEAD.match(line)
        if m:
            name, out, inside = m.group(1), [], False
        elif name and line == "Output:":
            inside = None  # the dashes line follows
        elif name and inside is None:
            inside = True
        elif name and inside:
            if line == "<end of output>":
                yield name, out
                name, inside = None, False
            else:
                out.append(line)


def main():
    build = sys.argv[1]
    ctx = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    tmp = os.path.join(build, "Testing", "Temporary")
    try:
        with open(os.path.join(tmp, "LastTestsFailed.log")) as f:
            failed = {l.strip().split(":", 1)[-1] for l in f if l.strip()}
        with open(os.path.join(tmp, "LastTest.log"), errors="replace") as f:
            outs = dict(sections(f))
    except OSError as e:
        print("ctest_digest: %s" % e)
        return
    print("\n=== why each failed test failed (first failure lines; the whole output is above)")
    for name in sorted(failed):
        out = outs.get(name)
        print("--- %s" % name)
        if out is None:
            print("    (no output recorded: killed by ctest's timeout?)")
            continue
        hits = [i for i, l in enumerate(out) if MARK.match(l)]
        if not hits:
            for l in out[-ctx * 2:]:
                print("    " + l[:300])
            continue
        first = hits[0]
        shown = set(range(max(0, first - ctx), first + 1)) | set(hits[:8])
        for i in sorted(shown):
            print("    " + out[i][:300])


if __name__ == "__main__":
    main()
