#!/usr/bin/env python3
"""fidelity.py — small feeds and what a careful reader of each expects, through `newsflow parse`.

Each case is a pair in tests/data/fidelity/: NAME.xml (or .json), the feed, and NAME.expect.json:

    {"why": "the rule and its source (feedparser's documented behaviour, an RFC...)",
     "expect": {...},            # a partial `newsflow parse` answer, matched as below
     "no_link": "^(javascript|data):",   # optional: no link field of the answer matches this
     "base": "http://...",       # optional: --base
     "warning": "regex"}         # optional: stats.first_warning matches it

`expect` is matched against the answer: an object matches when each of its keys matches that
key of the answer (other keys are not looked at); a list matches a list of the same length
item by item; {"$re": R} matches a string that R searches; anything else must be equal. The
answer is run with --fetched-at 0 --taxonomy none.

Usage: fidelity.py NEWSFLOW CASE_DIR [--verbose]. Prints one line per case; exits 1 on any
failure (and on a case directory without cases: a test that checks nothing fails).
"""
import json
import os
import re
import subprocess
import sys


def match(want, got, path, errs):
    if isinstance(want, dict) and set(want) == {"$re"}:
        if not isinstance(got, str) or not re.search(want["$re"], got):
            errs.append("%s: %r does not match /%s/" % (path, got, want["$re"]))
    elif isinstance(want, dict):
        if not isinstance(got, dict):
            errs.append("%s: want an object, got %r" % (path, got))
            return
        for k, v in want.items():
            if k not in got:
                errs.append("%s.%s: missing" % (path, k))
            else:
                match(v, got[k], "%s.%s" % (path, k), errs)
    elif isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            errs.append("%s: want %s, got %s" % (path, json.dumps(want), json.dumps(got)))
            return
        for i, (w, g) in enumerate(zip(want, got)):
            match(w, g, "%s[%d]" % (path, i), errs)
    elif want != got:
        errs.append("%s: want %s, got %s" % (path, json.dumps(want), json.dumps(got)))


LINK_FIELDS = ("link", "url", "feed_link", "links")


def links_of(obj):
    """Every value of a link field anywhere in the answer."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in LINK_FIELDS:
                for u in v if isinstance(v, list) else [v]:
                    if isinstance(u, str):
                        yield u
            else:
                yield from links_of(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from links_of(v)


def run_case(nf, feed, spec):
    argv = [nf, "parse", feed, "--compact", "--fetched-at", "0", "--taxonomy", "none"]
    if spec.get("base"):
        argv += ["--base", spec["base"]]
    r = subprocess.run(argv, capture_output=True, timeout=60)
    if r.returncode != 0:
        return ["exit %d: %s" % (r.returncode, r.stderr.decode(errors="replace").strip())]
    got = json.loads(r.stdout)
    errs = []
    match(spec["expect"], got, "$", errs)
    if spec.get("no_link"):
        errs += ["a link field holds %r" % u for u in links_of(got)
                 if re.search(spec["no_link"], u, re.I)]
    if spec.get("warning"):
        w = got["stats"].get("first_warning") or ""
        if not re.search(spec["warning"], w):
            errs.append("stats.first_warning %r does not match /%s/" % (w, spec["warning"]))
    return errs


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    nf, cases = sys.argv[1], sys.argv[2]
    verbose = "--verbose" in sys.argv
    names = sorted(f[: -len(".expect.json")] for f in os.listdir(cases)
                   if f.endswith(".expect.json"))
    if not names:
        print("FAIL: no cases in %s" % cases)
        return 1
    failed = 0
    for name in names:
        with open(os.path.join(cases, name + ".expect.json")) as f:
            spec = json.load(f)
        feed = [os.path.join(cases, name + ext) for ext in (".xml", ".json")
                if os.path.exists(os.path.join(cases, name + ext))]
        if len(feed) != 1 or "why" not in spec or "expect" not in spec:
            print("FAIL %s: needs one feed (.xml or .json) and \"why\" and \"expect\"" % name)
            failed += 1
            continue
        errs = run_case(nf, feed[0], spec)
        print("%s %s%s" % ("FAIL" if errs else "ok  ", name,
                           "" if not (errs or verbose) else " — " + spec["why"]))
        for e in errs:
            print("     " + e)
        failed += bool(errs)
    print("%d cases, %d failed" % (len(names), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
