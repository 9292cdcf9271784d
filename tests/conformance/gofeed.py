#!/usr/bin/env python3
"""gofeed.py — gofeed's universal-model test cases through `newsflow parse`.

Usage: gofeed.py NEWSFLOW CORPUS [--verbose] [--differences README]

CORPUS is the directory holding gofeed/{rss,atom,json} (shared/conformance beside the repo).
Each input is parsed by the real binary (`newsflow parse FILE --compact --fetched-at 0`), the
expectation's fields are mapped to ours (tests/conformance/README.md has the table), expected
text is normalised the way newsflow normalises (tags stripped, entities decoded, whitespace
collapsed) and dates are compared as instants. Every field is reported pass, fail or skipped
(out of scope: a field newsflow does not keep). Exit status 1 if a field fails that the
README's table of deliberate differences does not list, 2 if the corpus is missing.
"""
import argparse
import datetime
import html
import html.entities
import json
import os
import re
import subprocess
import sys

# gofeed feed-level fields and what they map to in our "feed" object.
FEED_FIELDS = {
    "title": ("title", "text"),
    "description": ("description", "text"),
    "link": ("link", "url"),
    "links": ("links", "urls"),
    "feedLink": ("feed_link", "url"),
    "language": ("language", "str"),
    "updatedParsed": ("updated_at", "date"),
    "publishedParsed": ("published_at", "date"),
    "authors": ("authors", "people"),
    "author": ("authors", "person0"),
    "feedVersion": ("version", "str"),
    "categories": ("categories", "strs"),
}
ITEM_FIELDS = {
    "title": ("title", "text"),
    "description": ("summary", "text"),
    "content": ("body", "text"),
    "link": ("link", "url"),
    "links": ("links", "urls"),
    "guid": ("guid", "str"),
    "updatedParsed": ("updated_at", "date"),
    "publishedParsed": ("published_at", "date"),
    "authors": ("authors", "people"),
    "author": ("authors", "person0"),
    "categories": ("categories", "strs"),
}
# Raw date strings: what we compare is their parsed instant (the *Parsed field).
COVERED = {"updated", "published"}

BLOCK = {
    "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "figcaption",
    "figure", "footer", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "img", "li", "main",
    "nav", "ol", "p", "pre", "section", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul",
}
TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9:-]*)[^>]*>|<!--.*?-->", re.S)


LEGACY = re.compile(r"&(#[0-9]+;?|#[xX][0-9A-Fa-f]+;?|[A-Za-z][A-Za-z0-9]*;?)")


def unescape(m):
    """One reference, as HTML5 text and newsflow decode it; a legacy one without ';' ("&copy")
    only when no '=' follows, so "?a=1&copy=2" stays (the HTML5 attribute rule, see text.c)."""
    ref = m.group(0)
    if ref.endswith(";") or ref.startswith("&#"):
        return html.unescape(ref)
    after = m.string[m.end() : m.end() + 1]
    if ref[1:] in html.entities.html5 and after != "=":
        return html.unescape(ref)
    return ref


def norm_text(s):
    """Plain text the way newsflow makes it: tags out (block ones leave a space), entities
    decoded, whitespace (NBSP included) collapsed and trimmed."""
    if s is None:
        return ""

    def tag(m):
        name = (m.group(2) or "").lower()
        return " " if name in BLOCK else ""

    s = re.sub(r"<(script|style)\b.*?</\1\s*>", " ", s, flags=re.S | re.I)
    s = TAG.sub(tag, s)
    s = LEGACY.sub(unescape, s)
    return " ".join(s.replace("\u00a0", " ").split())


DATE = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d)(?::(\d\d)(?:\.(\d+))?)?\s*(Z|[+-]\d\d:?\d\d)?$")


def instant(s):
    """Epoch ms of an RFC 3339 string, None if it is not one."""
    if not isinstance(s, str):
        return None
    m = DATE.match(s.strip())
    if not m:
        return None
    y, mo, d, h, mi, sec, frac, zone = m.groups()
    dt = datetime.datetime(int(y), int(mo), int(d), int(h), int(mi), int(sec or 0),
                           tzinfo=datetime.timezone.utc)
    ms = int(dt.timestamp()) * 1000 + (int((frac or "0")[:3].ljust(3, "0")))
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        z = zone[1:].replace(":", "")
        ms -= sign * (int(z[:2]) * 60 + int(z[2:])) * 60000
    return ms


def norm_url(u):
    """Links are compared as published; only an empty path and "/" are the same link."""
    if not isinstance(u, str):
        return u
    u = u.strip()
    m = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*://[^/?#]*)$", u)
    return u + "/" if m else u


def person(p):
    return {"name": norm_text(p.get("name")) or None, "email": (p.get("email") or None)}


def compare(kind, want, got):
    """(ok, shown expected, shown got)."""
    if kind == "text":
        w, g = norm_text(want), got or ""
        return w == g, w, g
    if kind == "str":
        w = want.strip() if isinstance(want, str) else want
        return w == got, w, got
    if kind == "url":
        return norm_url(want) == norm_url(got), want, got
    if kind == "urls":
        w = [norm_url(u) for u in want or []]
        g = [norm_url(u) for u in got or []]
        return w == g, w, g
    if kind == "strs":
        w = [norm_text(c) for c in want or []]
        return w == (got or []), w, got
    if kind == "date":
        w, g = instant(want), instant(got)
        return w is not None and w == g, want, got
    if kind in ("people", "person0"):
        ws = [want] if kind == "person0" else (want or [])
        w = [person(p) for p in ws]
        g = [{"name": p.get("name"), "email": p.get("email")} for p in got or []]
        if kind == "person0":
            g = g[:1]
        return w == g, w, g
    raise ValueError(kind)


def load_differences(path):
    """Rows `| case | field | reason |` of the README's deliberate-differences table."""
    diffs = {}
    if not path or not os.path.exists(path):
        return diffs
    inside = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("<!-- differences:begin"):
                inside = True
                continue
            if line.startswith("<!-- differences:end"):
                inside = False
            if not inside or not line.startswith("|") or line.startswith("|--") or "---" in line:
                continue
            cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
            if len(cells) >= 3 and cells[0] != "case":
                diffs[(cells[0], cells[1])] = cells[2]
    return diffs


def cases(corpus):
    for fmt in ("rss", "atom", "json"):
        d = os.path.join(corpus, "gofeed", fmt)
        for name in sorted(os.listdir(d)):
            path = os.path.join(d, name)
            if fmt == "json":
                if name.endswith("_expected.json"):
                    continue
                exp = path[: -len(".json")] + "_expected.json"
            else:
                if not name.endswith(".xml"):
                    continue
                exp = path[: -len(".xml")] + ".json"
            if os.path.exists(exp):
                yield fmt + "/" + os.path.splitext(name)[0], path, exp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("newsflow")
    ap.add_argument("corpus")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--differences", default=os.path.join(os.path.dirname(__file__), "README.md"))
    a = ap.parse_args()
    if not os.path.isdir(os.path.join(a.corpus, "gofeed", "rss")):
        print(f"gofeed.py: no gofeed corpus under {a.corpus} (expected {a.corpus}/gofeed/rss, "
              "atom, json: clone the shared/ directory beside the repository)", file=sys.stderr)
        return 2
    diffs = load_differences(a.differences)
    totals = {"pass": 0, "fail": 0, "skipped": 0, "deliberate": 0}
    failed = []
    used = set()
    ncases = 0
    for case, path, exp in cases(a.corpus):
        ncases += 1
        with open(exp, encoding="utf-8") as f:
            want = json.load(f)
        r = subprocess.run([a.newsflow, "parse", path, "--compact", "--fetched-at", "0"],
                           capture_output=True, text=True)
        results = []  # (field, status, detail)
        if r.returncode != 0:
            results.append(("(parse)", "fail", f"exit {r.returncode}: {r.stderr.strip()}"))
            got = None
        else:
            got = json.loads(r.stdout)

        def check(field, table, w, g_obj, prefix=""):
            if field in COVERED or field not in table:
                results.append((prefix + field, "skipped", "not kept" if field not in COVERED
                                else "raw string; compared as " + field + "Parsed"))
                return
            ours, kind = table[field]
            ok, ws, gs = compare(kind, w, g_obj.get(ours))
            results.append((prefix + field, "pass" if ok else "fail",
                            "" if ok else f"expected {ws!r}, got {gs!r}"))

        if got is not None:
            for field, w in want.items():
                if field == "items":
                    continue
                check(field, FEED_FIELDS, w, got["feed"])
            witems = want.get("items") or []
            gitems = got["articles"]
            ok = len(witems) == len(gitems)
            results.append(("items", "pass" if ok else "fail", "" if ok else
                            f"expected {len(witems)} items, got {len(gitems)}"))
            for i, (wi, gi) in enumerate(zip(witems, gitems)):
                for field, w in wi.items():
                    check(field, ITEM_FIELDS, w, gi, prefix=f"items[{i}].")
        for field, status, detail in results:
            key = (case, field)
            if status == "fail" and key in diffs:
                status = "deliberate"
                used.add(key)
                detail += f" (deliberate: {diffs[key]})"
            totals[status] += 1
            if status == "fail":
                failed.append((case, field, detail))
            if a.verbose or status in ("fail", "deliberate"):
                print(f"{status.upper():10} {case}: {field}{' — ' + detail if detail else ''}")
        if not a.verbose and all(s != "fail" for _, s, _ in results):
            n = sum(1 for _, s, _ in results if s == "pass")
            print(f"ok         {case}: {n} fields pass, "
                  f"{sum(1 for _, s, _ in results if s == 'skipped')} skipped")
    for key in sorted(set(diffs) - used):
        print(f"note: deliberate difference {key[0]}: {key[1]} is not observed any more; "
              "remove it from the README", file=sys.stderr)
    print(f"\n{ncases} cases: {totals['pass']} fields pass, {totals['fail']} fail, "
          f"{totals['deliberate']} deliberate differences, {totals['skipped']} skipped "
          "(out of scope)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
