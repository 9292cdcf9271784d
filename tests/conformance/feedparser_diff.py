#!/usr/bin/env python3
"""feedparser_diff.py — newsflow's feed parser against Universal Feed Parser (python feedparser).

Usage: feedparser_diff.py NEWSFLOW CORPUS_DIR [CORPUS_DIR...] [--check] [--verbose] [--case SUBSTR]
                     [--dump FILE.json]
  tests/integration/test_conformance_feedparser.sh runs it in CI on feedparser's own test
  corpus (the tests/ directory of its sdist, from PyPI) and on the feeds feedparser_extra.py
  writes, with feedparser from a venv of the same version (tests/conformance/README.md).

CORPUS_DIR is feedparser's tests/ directory (from its sdist), or any directory laid out like it
(wellformed/<group>/*.xml with a Description:/Expect: comment): every XML case under
wellformed/ is run, except wellformed/sanitize (HTML sanitizing) and wellformed/http (HTTP
headers, ETags); cases feedparser flags bozo (not well-formed) are skipped. Cases whose file name contains "http" are served by feedparser's test suite
over HTTP with their "Header:" lines as response headers: here their Content-Location (resolved
against the URL the suite would serve them from) is given to feedparser as a response header
and to newsflow as --base, which is all those headers do to the fields compared.

Each case goes through `NEWSFLOW parse FILE --compact --fetched-at 0 --taxonomy none` and
`feedparser.parse()`; the fields newsflow keeps are mapped (table in REPORT.md / FEED_FIELDS,
ITEM_FIELDS below), feedparser's text is normalised the way newsflow normalises (HTML: tags
stripped, block tags leave a space; entities decoded; whitespace incl. NBSP collapsed and
trimmed; text/plain values: entities decoded and whitespace collapsed only), dates compared as
instants (seconds), URLs as strings (an empty path equals "/").

A field is compared when either side has a value, or when the case's Expect: expression targets
it (its "primary" field: what feedparser documents for that case). Every disagreement is put
under one root cause by classify() (first matching rule); totals are printed by cause. Each
cause has a verdict in CAUSES: KEEP (newsflow's behaviour is decided, with the reason) or SCOPE
(a format or element newsflow does not read) are accepted differences; FIXED names one that
newsflow has fixed. --check exits 1 when a disagreement falls under a FIXED cause (a
regression) or under no cause at all (a difference nobody has decided): so each difference
from feedparser is either gone or decided here, with its reason.
"""
import argparse
import ast
import calendar
import datetime
import html
import html.entities
import io
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse

import feedparser

SKIP_DIRS = {"sanitize", "http"}
SERVED_ROOT = "http://127.0.0.1:8097/tests/"

# ---------------------------------------------------------------------------------------------
# text normalisation (newsflow's text.c rules, as in tests/conformance/gofeed.py)

BLOCK = {
    "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "figcaption",
    "figure", "footer", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "img", "li", "main",
    "nav", "ol", "p", "pre", "section", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul",
}
TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9:_.-]*)(?:\s[^>]*)?/?>|<!--.*?-->|<!\[CDATA\[|\]\]>", re.S)
LEGACY = re.compile(r"&(#[0-9]+;?|#[xX][0-9A-Fa-f]+;?|[A-Za-z][A-Za-z0-9]*;?)")


def _unescape(m):
    ref = m.group(0)
    if ref.endswith(";") or ref.startswith("&#"):
        return html.unescape(ref)
    after = m.string[m.end(): m.end() + 1]
    if ref[1:] in html.entities.html5 and not (after.isalnum() or after == "="):
        return html.unescape(ref)
    return ref


def collapse(s):
    s = "".join(ch for ch in s if ch in "\t\n\r" or (ord(ch) >= 32 and ch != "\ufeff"))
    return " ".join(s.replace("\u00a0", " ").split())


def norm_html(s):
    if s is None:
        return ""

    def tag(m):
        name = (m.group(2) or "").lower()
        return " " if name in BLOCK else ""

    s = re.sub(r"<(script|style|noscript|template|iframe|object)\b.*?</\1\s*>", " ", s,
               flags=re.S | re.I)
    s = TAG.sub(tag, s)
    s = LEGACY.sub(_unescape, s)
    return collapse(s)


def norm_plain(s):
    if s is None:
        return ""
    return collapse(LEGACY.sub(_unescape, s))


def norm_detail(value, detail):
    """feedparser's value normalised according to the type feedparser gave it."""
    if value is None:
        return ""
    t = (detail or {}).get("type") or "text/html"
    return norm_plain(value) if t == "text/plain" else norm_html(value)


def norm_url(u):
    if not isinstance(u, str):
        return u
    u = u.strip()
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*$", u):
        return u + "/"
    return u


# ---------------------------------------------------------------------------------------------
# dates

RFC3339 = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d)(?::(\d\d)(?:\.(\d+))?)?\s*(Z|[+-]\d\d:?\d\d)?$")


def nf_instant(s):
    """newsflow's RFC 3339 output to epoch seconds (floor)."""
    if not isinstance(s, str):
        return None
    m = RFC3339.match(s.strip())
    if not m:
        return None
    y, mo, d, h, mi, sec, frac, zone = m.groups()
    try:
        dt = datetime.datetime(int(y), int(mo), int(d), int(h), int(mi), int(sec or 0),
                               tzinfo=datetime.timezone.utc)
    except ValueError:
        return None
    t = int(dt.timestamp())
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        z = zone[1:].replace(":", "")
        t -= sign * (int(z[:2]) * 60 + int(z[2:])) * 60
    return t


def fp_instant(st):
    if st is None:
        return None
    try:
        return calendar.timegm(st)
    except Exception:
        return None


def show_instant(t):
    if t is None:
        return None
    try:
        return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return str(t)


# ---------------------------------------------------------------------------------------------
# feedparser side: the values newsflow's fields should hold

FP_VERSIONS = {
    "rss090": ("rdf", "0.90"), "rss091n": ("rss", "0.91"), "rss091u": ("rss", "0.91"),
    "rss092": ("rss", "0.92"), "rss093": ("rss", "0.93"), "rss094": ("rss", "0.94"),
    "rss20": ("rss", "2.0"), "rss10": ("rdf", "1.0"), "rss": ("rss", None),
    "atom01": ("atom", "0.3"), "atom02": ("atom", "0.3"), "atom03": ("atom", "0.3"),
    "atom10": ("atom", "1.0"), "atom": ("atom", None), "cdf": ("cdf", None),
}


def fp_people(d):
    out = []
    if d.get("authors"):
        src = d["authors"]
    elif d.get("author_detail"):
        src = [d["author_detail"]]
    elif d.get("author"):
        src = [{"name": d["author"]}]
    else:
        src = []
    for p in src:
        name = norm_plain(p.get("name")) or None
        email = (p.get("email") or "").strip() or None
        if name or email:
            out.append({"name": name, "email": email})
    return out


def fp_tags(d):
    """feedparser's tags as (term, label, scheme), empty parts None, duplicates dropped."""
    out = []
    for t in d.get("tags") or []:
        v = tuple((norm_plain(t.get(k) or "") or None) for k in ("term", "label", "scheme"))
        if (v[0] or v[1]) and v not in out:
            out.append(v)
    return out


def fp_categories(d):
    """newsflow's categories: the label, else the term (plain text), duplicates dropped."""
    out = []
    for term, label, _ in fp_tags(d):
        v = label or term
        if v and v not in out:
            out.append(v)
    return out


def nf_tags(lst):
    out = []
    for t in lst or []:
        v = tuple((norm_plain(t.get(k) or "") or None) for k in ("term", "label", "scheme"))
        if v not in out:
            out.append(v)
    return out


def raw(d, k):
    """d[k] without FeedParserDict's fallbacks (updated -> published...)."""
    return dict.get(d, k)


def fp_links(d):
    return [norm_url(l.get("href")) for l in d.get("links") or []
            if l.get("href") and l.get("rel") != "enclosure"]


def fp_feed(r):
    f = r.feed
    out = {}
    fmt = FP_VERSIONS.get(r.get("version") or "", (None, None))
    out["format"] = fmt[0]
    out["version"] = fmt[1]
    out["title"] = norm_detail(f.get("title"), f.get("title_detail"))
    if "subtitle" in f:
        out["description"] = norm_detail(f.get("subtitle"), f.get("subtitle_detail"))
    else:
        out["description"] = norm_detail(f.get("summary"), f.get("summary_detail"))
    out["link"] = norm_url(f.get("link")) or None
    out["links"] = fp_links(f)
    out["language"] = (f.get("language") or "").strip() or None
    out["authors"] = fp_people(f)
    out["published_at"] = fp_instant(raw(f, "published_parsed"))
    out["updated_at"] = fp_instant(raw(f, "updated_parsed"))
    out["categories"] = fp_categories(f)
    out["tags"] = fp_tags(f)
    return out


def fp_entry(e, feed_lang):
    out = {}
    out["title"] = norm_detail(e.get("title"), e.get("title_detail"))
    out["summary"] = norm_detail(e.get("summary"), e.get("summary_detail"))
    if e.get("content"):
        c = e["content"][0]
        out["body"] = norm_detail(c.get("value"), c)
    else:
        out["body"] = out["summary"]  # newsflow: body falls back to the summary
    out["link"] = norm_url(e.get("link")) or None
    out["links"] = fp_links(e)
    g = e.get("id")
    out["guid"] = g.strip() if isinstance(g, str) and g.strip() else None
    pub = fp_instant(raw(e, "published_parsed"))
    upd = fp_instant(raw(e, "updated_parsed"))
    # newsflow: published_at = published else updated; updated_at = updated else published
    out["published_at"] = pub if pub is not None else upd
    out["updated_at"] = upd if upd is not None else pub
    out["authors"] = fp_people(e)
    out["categories"] = fp_categories(e)
    out["tags"] = fp_tags(e)
    langs = [x.get("language") for x in
             [raw(e, "title_detail"), raw(e, "summary_detail")] + list(raw(e, "content") or [])
             if x and x.get("language")]
    # feedparser has no item language: its entry-level dc:language, else the xml:lang of the
    # item's text elements when they all agree (several differing: not compared), else the feed's
    if raw(e, "language"):
        out["language"] = raw(e, "language")
    elif len(set(langs)) > 1:
        out["language"] = "(mixed)"
    else:
        out["language"] = langs[0] if langs else (feed_lang or None)
    return out


# ---------------------------------------------------------------------------------------------
# newsflow side

def nf_feed(j):
    f = j["feed"]
    return {
        "format": f.get("format"),
        "version": f.get("version"),
        "title": f.get("title") or "",
        "description": f.get("description") or "",
        "link": norm_url(f.get("link")),
        "links": [norm_url(u) for u in f.get("links") or []],
        "language": f.get("language"),
        "authors": [{"name": p.get("name"), "email": p.get("email")} for p in f.get("authors") or []],
        "published_at": nf_instant(f.get("published_at")),
        "updated_at": nf_instant(f.get("updated_at")),
        # older builds keep no feed-level categories: None = "not in the output"
        "categories": list(f["categories"]) if "categories" in f else None,
        "tags": nf_tags(f["tags"]) if "tags" in f else None,
    }


def nf_entry(a):
    fb = a.get("date_fallback")
    return {
        "title": a.get("title") or "",
        "summary": a.get("summary") or "",
        "body": a.get("body") or "",
        "link": norm_url(a.get("link")),
        "links": [norm_url(u) for u in a.get("links") or []],
        "guid": a.get("guid"),
        "published_at": None if fb else nf_instant(a.get("published_at")),
        "updated_at": None if fb else nf_instant(a.get("updated_at")),
        "authors": [{"name": p.get("name"), "email": p.get("email")} for p in a.get("authors") or []],
        "categories": list(a.get("categories") or []),
        "tags": nf_tags(a["tags"]) if "tags" in a else None,
        "language": a.get("language"),
    }


FEED_FIELDS = ["format", "version", "title", "description", "link", "links", "language",
               "authors", "published_at", "updated_at", "categories", "tags"]
ITEM_FIELDS = ["title", "summary", "body", "link", "links", "guid", "published_at",
               "updated_at", "authors", "categories", "tags", "language"]
DATE_FIELDS = {"published_at", "updated_at"}

# feedparser keys (as an Expect: expression names them) -> our field
FEED_KEYS = {
    "title": "title", "title_detail": "title",
    "subtitle": "description", "subtitle_detail": "description", "tagline": "description",
    "tagline_detail": "description", "description": "description", "info": None,
    "link": "link", "links": "links", "language": "language",
    "author": "authors", "author_detail": "authors", "authors": "authors",
    "published": "published_at", "published_parsed": "published_at",
    "updated": "updated_at", "updated_parsed": "updated_at", "modified": "updated_at",
    "modified_parsed": "updated_at", "date": "updated_at", "date_parsed": "updated_at",
    "issued": "published_at", "issued_parsed": "published_at",
    "tags": "categories", "category": "categories",
}
ITEM_KEYS = {
    "title": "title", "title_detail": "title",
    "summary": "summary", "summary_detail": "summary", "description": "summary",
    "content": "body",
    "link": "link", "links": "links",
    "id": "guid", "guid": "guid",
    "published": "published_at", "published_parsed": "published_at",
    "issued": "published_at", "issued_parsed": "published_at",
    "updated": "updated_at", "updated_parsed": "updated_at", "modified": "updated_at",
    "modified_parsed": "updated_at", "date": "updated_at", "date_parsed": "updated_at",
    "author": "authors", "author_detail": "authors", "authors": "authors",
    "tags": "categories", "category": "categories",
}
# sub-keys of a *_detail that are not the value (base, language, type): out of scope
DETAIL_OUT = {"base", "language", "type", "href"}


def expect_targets(expr):
    """In-scope fields an Expect: expression tests: {("feed", field)} / {(i, field)}."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        return set(), set()
    targets, others = set(), set()

    def chain(node):
        keys = []
        while True:
            if isinstance(node, ast.Subscript):
                sl = node.slice
                if isinstance(sl, ast.Index):  # py < 3.9
                    sl = sl.value
                keys.append(sl.value if isinstance(sl, ast.Constant) else None)
                node = node.value
            elif isinstance(node, ast.Attribute):
                keys.append(node.attr)
                node = node.value
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("has_key", "get") and node.args \
                    and isinstance(node.args[0], ast.Constant):
                keys.append(node.args[0].value)
                node = node.func.value
            else:
                break
        keys.reverse()
        return node, keys

    seen = set()
    for node in ast.walk(tree):
        if id(node) in seen:
            continue
        if isinstance(node, (ast.Subscript, ast.Attribute, ast.Call)):
            root, keys = chain(node)
            for sub in ast.walk(node):
                seen.add(id(sub))
            if not isinstance(root, ast.Name):
                continue
            if root.id == "feed" and keys:
                k = keys[0]
                f = FEED_KEYS.get(k)
                if k == "tags" and len(keys) > 2 and keys[-1] in ("term", "label", "scheme"):
                    f = "tags"
                if f and not (len(keys) > 1 and keys[1] in DETAIL_OUT) and \
                        not (k == "links" and len(keys) > 2 and keys[2] not in ("href",)):
                    targets.add(("feed", f))
                else:
                    others.add("feed." + str(k))
            elif root.id == "entries" and len(keys) >= 2 and isinstance(keys[0], int):
                k = keys[1]
                f = ITEM_KEYS.get(k)
                sub = keys[2:]
                if k == "content":
                    sub = keys[3:]  # content[0]['value']
                if k == "tags" and sub and sub[-1] in ("term", "label", "scheme"):
                    f = "tags"
                if k == "links" and sub and sub[-1] not in ("href",):
                    f = None
                if f and not (sub and sub[0] in DETAIL_OUT and k != "links"):
                    targets.add((keys[0], f))
                else:
                    others.add("entries." + str(k))
            elif root.id in ("version",):
                others.add("version")
    return targets, others


# ---------------------------------------------------------------------------------------------

def header_block(data):
    m = re.search(rb"<!--(.*?)-->", data, re.S)
    text = m.group(1).decode("utf-8", "replace") if m else ""
    desc = re.search(r"Description:\s*(.*?)\s*(?:Expect:|$)", text, re.S)
    exp = re.search(r"Expect:\s*(.*)", text)
    headers = dict((k.strip().lower(), v.strip()) for k, v in
                   re.findall(r"^\s*Header:\s*([^:]+):(.+)$", text, re.M))
    skip = re.search(r"SkipUnless:\s*(.*?)\n", text)
    return (desc.group(1).strip() if desc else "", exp.group(1).strip() if exp else "1",
            headers, skip.group(1).strip() if skip else None)


def cases(corpus):
    wf = os.path.join(corpus, "wellformed")
    for d in sorted(os.listdir(wf)):
        if d in SKIP_DIRS or not os.path.isdir(os.path.join(wf, d)):
            continue
        for name in sorted(os.listdir(os.path.join(wf, d))):
            if name.endswith(".xml"):
                yield d + "/" + name[:-4], os.path.join(wf, d, name)


def run_newsflow(binary, path, base):
    cmd = [binary, "parse", path, "--compact", "--fetched-at", "0", "--taxonomy", "none"]
    if base:
        cmd += ["--base", base]
    for attempt in range(6):
        if os.path.exists(binary):
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            except OSError:
                r = None
            if r is not None and r.returncode != 126 and r.returncode != 127:
                return r
        time.sleep(30)  # binary being rebuilt
    raise SystemExit(f"diff.py: {binary} missing or not runnable for 3 minutes")


def same(field, fv, nv):
    if field in DATE_FIELDS:
        return fv == nv
    if field in ("link",):
        return (fv or None) == (nv or None)
    if field == "guid":
        return (fv or None) == ((nv or "").strip() or None)
    if field == "language":
        return fv == "(mixed)" or (fv or "").lower() == (nv or "").lower()
    return fv == nv


def empty(v):
    return v is None or v == "" or v == []


def compare_case(case, path, binary):
    with open(path, "rb") as fh:
        data = fh.read()
    desc, expect, headers, skip_unless = header_block(data)
    if "http" in os.path.basename(path) and set(headers) - {"content-location", "content-type"}:
        return None  # about other HTTP headers (Content-Language...): `parse` sees no headers
    base = None
    rh = {}
    if "http" in os.path.basename(path):
        served = SERVED_ROOT + "wellformed/" + case + ".xml"
        base = served
        if "content-location" in headers:
            base = urllib.parse.urljoin(served, headers["content-location"])
        rh["content-location"] = base
        # the test server sends the file's Content-type header, else one guessed from ".xml"
        rh["content-type"] = headers.get("content-type", "application/xml")
    fp = feedparser.parse(io.BytesIO(data), response_headers=rh or None)
    try:
        expect_ok = bool(eval(expect, {"datetime": datetime, "time": time}, fp))
    except Exception:
        expect_ok = False
    targets, others = expect_targets(expect)
    res = {"case": case, "path": path, "description": desc, "expect": expect,
           "expect_ok_fp": expect_ok, "bozo": bool(fp.get("bozo")),
           "bozo_exception": str(fp.get("bozo_exception") or ""),
           "targets": sorted(str(t) for t in targets), "others": sorted(others), "fields": []}
    r = run_newsflow(binary, path, base)
    if r.returncode != 0:
        res["nf_error"] = r.stderr.strip()
        res["fields"].append({"field": "(parse)", "scope": "feed", "primary": True, "ok": False,
                              "fp": fp.get("version"), "nf": r.stderr.strip()})
        return res
    nj = json.loads(r.stdout)
    res["nf_raw"] = nj

    def add(scope, field, fv, nv, primary):
        if field in ("categories", "tags") and nv is None:
            # not in this build's output at all
            if fv:
                res["fields"].append({"field": field, "scope": scope, "primary": primary,
                                      "ok": False, "fp": fv, "nf": None})
            return
        if not primary and empty(fv) and empty(nv):
            return
        ok = same(field, fv, nv)
        if field in DATE_FIELDS:
            fv, nv = show_instant(fv), show_instant(nv)
        res["fields"].append({"field": field, "scope": scope, "primary": primary, "ok": ok,
                              "fp": fv, "nf": nv})

    fpf, nff = fp_feed(fp), nf_feed(nj)
    res["fp_rec"], res["nf_rec"] = {"feed": fpf}, {"feed": nff}
    for field in FEED_FIELDS:
        if field == "version":
            # only when feedparser names a version number
            if fpf["version"] is None:
                continue
        if field == "format" and fpf["format"] is None:
            continue
        add("feed", field, fpf[field], nff[field], ("feed", field) in targets)
    fents, nents = fp.entries, nj["articles"]
    if len(fents) != len(nents):
        res["fields"].append({"field": "entries", "scope": "feed", "primary": False, "ok": False,
                              "fp": len(fents), "nf": len(nents)})
    for i, (fe, ne) in enumerate(zip(fents, nents)):
        a, b = fp_entry(fe, fpf["language"]), nf_entry(ne)
        res["fp_rec"][i], res["nf_rec"][i] = a, b
        for field in ITEM_FIELDS:
            add(i, field, a[field], b[field], (i, field) in targets)
    return res


# ---------------------------------------------------------------------------------------------
# root causes

# ---------------------------------------------------------------------------------------------
# root causes: id -> (verdict, title). verdict: KEEP (newsflow's behaviour is right or
# deliberate, the title says why), SCOPE (a format or field newsflow does not read at all),
# FIXED (newsflow was changed to agree: seeing it again is a regression).

CAUSES = {
    "attr-amp-as-charref": ("FIXED", "'&amp;' in an attribute value (atom:link href, xml:base) "
                            "reaches the link as '&#38;' (libxml2 SAX2 without entity "
                            "substitution); url is then cut at the '#'"),
    "href-empty-not-base": ("FIXED", "href=\"\" (same-document reference) is dropped instead of "
                            "resolving to xml:base / the document URI"),
    "category-nested-text": ("FIXED", "RSS <category> with child elements: their text is glued "
                             "into the category"),
    "media-category": ("FIXED", "media:category not read as a category"),
    "lang-underscore": ("KEEP", "a POSIX locale as language ('en_US'): newsflow writes every "
                        "language as BCP 47 does ('en-US'); feedparser does so for xml:lang but "
                        "leaves RSS <language> as written"),
    "date-zone-names": ("FIXED", "dates with zone 'Etc/GMT' / 'Etc/UTC' or the US zones without "
                        "S/D ('ET', 'CT', 'MT', 'PT', 'AT') are rejected"),
    "version-090": ("FIXED", "RSS 0.90 (my.netscape.com/rdf/simple/0.9/) reported as RDF version "
                    "'1.0'"),
    "date-slash-ymd": ("FIXED", "'YYYY/MM/DD hh:mm:ss' dates (also Perforce's 'Fri, 2006/09/15 "
                       "08:19:53 EDT') are not parsed (feedparser misreads the bare form as "
                       "2004-11-01)"),
    "date-obsolete-forms": ("KEEP", "date forms newsflow does not parse: ISO 8601 2-digit-year / "
                            "ordinal / truncated ('031231', '-0312', '03335', '22013'), Google's "
                            "'2003-012-31', Greek/Hungarian/Korean month names (feedparser "
                            "itself gets half of these wrong end to end)"),
    "date-invalid-repaired": ("KEEP", "invalid dates feedparser 'repairs' (hour 25, minute 61, "
                              "'2013-xx-27', '22013', trailing junk): newsflow rejects them"),
    "date-fp-fails": ("KEEP", "dates feedparser misses or misreads and newsflow gets right "
                      "(RFC 850, 'Jan 26, 2004', '4:31 PM', CEST/IST, no zone, basic ISO)"),
    "date-created": ("KEEP", "dcterms:created / Atom 0.3 <created> used as published when "
                     "nothing better exists (feedparser keeps it apart as 'created')"),
    "date-element-precedence": ("KEEP", "several date elements: newsflow prefers the core "
                                "element (pubDate, lastBuildDate), feedparser takes the last one "
                                "in document order (dcterms:issued/modified)"),
    "summary-copied-from-content": ("KEEP", "item without a summary: feedparser copies the "
                                    "content into summary; newsflow leaves summary empty (body "
                                    "has the text)"),
    "second-summary-element": ("KEEP", "two summary-like elements (description + <summary> / "
                               "itunes:summary): feedparser keeps the first as summary and turns "
                               "the second into content; newsflow ranks by element"),
    "itunes-subtitle-summary": ("KEEP", "itunes:subtitle used as the summary fallback "
                                "(documented chain; feedparser keeps it as 'subtitle')"),
    "base64-as-html": ("KEEP", "Atom 0.3 mode=\"base64\" text without an HTML type: newsflow reads "
                       "the decoded text as HTML (deliberate); feedparser keeps it as text/plain "
                       "with its tags"),
    "rss-fullitem-body": ("SCOPE", "non-standard RSS <fullitem> / bare <body> (no XHTML "
                          "namespace) not read as content"),
    "atom-id-as-link": ("KEEP", "feedparser copies any Atom <id> (feed or entry, even 'right') "
                        "into link when there is no link; newsflow only uses an absolute "
                        "http(s) id, and not at feed level"),
    "relative-id-resolved": ("KEEP", "relative atom:id: feedparser resolves it against the base "
                             "(id and link); newsflow keeps the id as written"),
    "lang-child-element": ("KEEP", "item language: feedparser only has per-element xml:lang "
                           "(title/summary/content); newsflow reads xml:lang on the item, "
                           "channel and root and dc:language: a language on one child says "
                           "what that element is in, the item's own (else the feed's) what the "
                           "article is in"),
    "webmaster-author": ("KEEP", "RSS <webMaster> used as an author (gofeed's rule; feedparser "
                         "calls it publisher)"),
    "itunes-owner-author": ("KEEP", "itunes:owner (podcast contact) taken as author by "
                            "feedparser"),
    "atom-author-inherit": ("KEEP", "Atom entry without author inherits the feed's "
                            "(RFC 4287 4.2.1); feedparser does not"),
    "authors-one-source": ("KEEP", "several author sources (author + dc:creator, managingEditor "
                           "+ webMaster): feedparser lists all, with duplicates; newsflow takes "
                           "the best source, without duplicates"),
    "links-dedup-license": ("KEEP", "links: feedparser keeps duplicates and rel=license "
                            "(creativeCommons) links; newsflow keeps distinct article links"),
    "feedburner-origlink": ("KEEP", "feedburner:origLink preferred as the item link "
                            "(documented)"),
    "relative-link-channel-base": ("KEEP", "relative item link with no xml:base or feed URL: "
                                   "newsflow resolves it against the channel <link>"),
    "itunes-scheme": ("KEEP", "itunes:category/keywords: feedparser invents the scheme "
                      "'http://www.itunes.com/'"),
    "markup-inline-svg-math": ("KEEP", "inline SVG/MathML in XHTML content: svg <title>/<desc> "
                               "dropped, MathML tokens spaced"),
    "html-bogus-comment": ("KEEP", "HTML text starting '<!' (not a comment or DOCTYPE): "
                           "newsflow drops it as a browser would (bogus comment)"),
    "fp-oddity": ("KEEP", "feedparser oddities: title taken from an <image> nested in a "
                  "<category>; non-standard <tags> element read as categories"),
    "atom-item-element": ("SCOPE", "<item> (not <entry>) inside an Atom <feed> is not an entry"),
    "rss-atom-unprefixed": ("SCOPE", "Atom elements without a namespace inside RSS (<updated>, "
                            "<id>, <link href>, <summary>, <author><name>)"),
    "case-insensitive-names": ("KEEP", "element names matched case-insensitively by feedparser "
                               "(<TiTlE>)"),
    "version-verbatim": ("KEEP", "RSS version reported as written ('2.01', '2.1'); feedparser "
                         "maps them to rss20"),
    "cdf": ("SCOPE", "CDF (Channel Definition Format) is not a format newsflow reads"),
    "invalid-url-guid": ("KEEP", "guid with an invalid URL: feedparser drops id and link; "
                         "newsflow keeps the guid and the link as published (url NULL, warning)"),
    "known-rdf-about": ("KEEP", "RSS 1.0 rdf:about is the item's id, and its link when it has "
                        "no <link> (as an RSS 2.0 permalink guid is); feedparser has no link"),
    "known-several-updated": ("FIXED", "several <updated>: the last wins"),
    "known-feed-authors-categories": ("FIXED", "feed-level authors/categories missing"),
    "known-category-term-label": ("FIXED", "Atom category term vs label"),
    "known-foreign-root": ("FIXED", "<feed>/<rss> root in a foreign namespace"),
    "known-doctype-entities": ("FIXED", "DOCTYPE internal entities left unexpanded"),
    "known-empty-type": ("FIXED", "Atom type=\"\" treated as base64"),
    "known-link-alternate": ("FIXED", "Atom rel=alternate precedence / <link> with text"),
    "known-description-content": ("FIXED", "description vs content:encoded mapping"),
}

ZONE_RE = re.compile(r"\b(Etc/\w+|[ECMPA]T)\s*$")
OBSOLETE_RE = re.compile(r"^(-?\d{2}-?\d{2}(-?\d{2})?|\d{5,6}|-\d{4}|\d{4}-0\d\d-\d\d.*|"
                         r"\w+, \d{4}/\d\d/\d\d.*|.*[^\x00-\x7f].*)$")
DATE_TAG_RE = re.compile(r"<((?:\w+:)?(?:pubDate|published|updated|issued|modified|created|date|"
                         r"lastBuildDate))\b[^>]*>([^<]*)</\1>", re.S)


def _date_string(res, xml):
    m = re.search(r"date '(.*)' in", res["description"]) or \
        re.search(r'date "(.*)" in', res["description"])
    if m:
        return m.group(1)
    m = DATE_TAG_RE.search(xml)
    return html.unescape(m.group(2).strip()) if m else ""


def _classify(res, fd, xml):
    case, field, fv, nv = res["case"], fd["field"], fd["fp"], fd["nf"]
    scope = fd["scope"]
    fprec = res.get("fp_rec", {}).get(scope, {})
    low = xml.lower()
    if field == "(parse)":
        return "cdf" if "<channel" in low and "CHANNEL" in (nv or "") else "unclassified"
    if re.search(r"<!ENTITY", xml):
        return "known-doctype-entities"
    # links
    if field in ("link", "links", "guid") and "&#38;" in json.dumps(nv):
        return "attr-amp-as-charref"
    if field in ("link", "links") and 'href=""' in xml and not nv:
        return "href-empty-not-base"
    if field in ("link", "links") and "origlink" in low:
        return "feedburner-origlink"
    if field == "guid" and fv and nv and fv.endswith(nv) and nv.startswith("/"):
        return "relative-id-resolved"
    if field == "link" and not nv and fv and (fv == fprec.get("guid") or "<id" in xml):
        if "base/http_" in case and "_id_" in case:
            return "relative-id-resolved"
        return "atom-id-as-link"
    if field in ("link", "guid") and nv and not fv and "[" in nv:
        return "invalid-url-guid"
    if field in ("guid", "link") and "rdf:about" in xml and (not nv or not fv):
        return "known-rdf-about"
    if field == "links" and isinstance(fv, list) and isinstance(nv, list) and \
            set(nv) <= set(fv) and ("license" in low or len(set(fv)) < len(fv)):
        return "links-dedup-license"
    if field in ("link", "links") and nv and fv and isinstance(fv, (str, list)) and \
            re.search(r"<channel>\s*<link>", xml) and "/p/" in json.dumps(fv):
        return "relative-link-channel-base"
    # element not understood at all
    if field == "entries" and re.search(r"<feed[^>]*>", xml) and "<item" in xml and "<entry" not in xml:
        return "atom-item-element"
    if re.search(r"<rss[^>]*>", xml) and re.search(r"<updated>|<link href=", xml):
        return "rss-atom-unprefixed"
    if re.search(r"<(TiTlE|Title|TITLE)>", xml):
        return "case-insensitive-names"
    # text
    if field == "summary" and fv and not nv and fprec.get("body") and \
            not re.search(r"<(summary|description)\b", xml):
        return "summary-copied-from-content"
    if field in ("title", "summary", "body", "description") and 'mode="base64"' in xml:
        return "base64-as-html"
    if field == "body" and re.search(r"<(fullitem|body)\b", xml) and \
            not re.search(r"<\w+:body|<body xmlns=", xml):
        return "rss-fullitem-body"
    if field in ("summary", "body") and ("<svg" in xml or "math" in low):
        return "markup-inline-svg-math"
    if field in ("summary", "body") and re.search(r"(&lt;|<)!(?!\[CDATA|--)", xml.split("-->", 1)[-1]):
        return "html-bogus-comment"
    if field in ("summary", "body") and (
            re.search(r"<description>.*<summary>|<summary>.*<description>", xml, re.S) or
            (re.search(r"<itunes:summary>", xml) and "<description>" in xml)):
        return "second-summary-element"
    if field in ("summary", "body") and "itunes:subtitle" in xml and nv and not fv:
        return "itunes-subtitle-summary"
    if field == "summary" and fv and not nv and fprec.get("body") == fv:
        return "summary-copied-from-content"
    if field == "title" and "<category>" in xml and "<image>" in xml:
        return "fp-oddity"
    if field in ("title", "description") and re.search(r"<feed[^>]*xmlns=\"http://example", xml):
        return "known-foreign-root"
    if field in ("summary", "body") and "content:encoded" in xml:
        return "known-description-content"
    # categories
    if field in ("categories", "tags"):
        if scope == "feed" and nv is None:
            return "known-feed-authors-categories"
        if "media:category" in xml:
            return "media-category"
        if "<tags>" in xml:
            return "fp-oddity"
        if isinstance(nv, list) and isinstance(fv, list) and len(nv) == len(fv) and nv and \
                all(isinstance(n, (list, tuple)) for n in nv):
            if all(tuple(n)[:2] == tuple(f)[:2] for n, f in zip(nv, fv)) and \
                    any(f[2] == "http://www.itunes.com/" for f in fv):
                return "itunes-scheme"
        if nv and fv and json.dumps(nv[0], ensure_ascii=False).strip('"[]').startswith(
                json.dumps(fv[0], ensure_ascii=False).strip('"[]').split('"')[0]):
            return "category-nested-text"
        if 'label="' in xml:
            return "known-category-term-label"
    # people
    if field == "authors":
        if "webmaster" in low and not fv:
            return "webmaster-author"
        if "itunes:owner" in low:
            return "itunes-owner-author"
        if scope != "feed" and nv and not fv and re.search(r"<feed", xml):
            return "atom-author-inherit"
        if scope == "feed" and fv and not nv:
            return "known-feed-authors-categories"
        if fv and nv and len(fv) > len(nv):
            return "authors-one-source"
    # language
    if field == "language":
        if fv and nv and fv.replace("_", "-").lower() == nv.replace("_", "-").lower():
            return "lang-underscore"
        return "lang-child-element"
    if field == "version":
        return "version-090" if fv == "0.90" else "version-verbatim"
    # dates
    if field in DATE_FIELDS:
        if re.search(r"<updated>[^<]*</updated>\s*<updated>", xml):
            return "known-several-updated"
        if fv is None and nv is not None and "created" in low:
            return "date-created"
        if fv and nv and fv != nv:
            s = _date_string(res, xml)
            if re.search(r"(issued|modified|dc:date)", xml) and re.search(r"pubDate|lastBuildDate", xml):
                return "date-element-precedence"
            return "date-fp-fails"
        s = _date_string(res, xml)
        if nv is None and fv is not None:
            if re.search(r"\d{4}/\d\d/\d\d", s):
                return "date-slash-ymd"
            if ZONE_RE.search(s):
                return "date-zone-names"
            if re.search(r"(T2[4-9]|:6\d|xx|extra|^\d{4}-\d\d-\d\d-\d\d$)", s):
                return "date-invalid-repaired"
            if OBSOLETE_RE.match(s):
                return "date-obsolete-forms"
        if fv is None and nv is not None:
            return "date-fp-fails"
    return "unclassified"


def classify(res, fd, xml):
    c = _classify(res, fd, xml)
    return c if c != "unclassified" else "unclassified: " + fd["field"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("newsflow")
    ap.add_argument("corpus", nargs="+", help="feedparser's tests/ directory (more may follow: "
                    "any directory with a wellformed/<group>/*.xml layout)")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--case", help="only cases whose name contains this")
    ap.add_argument("--dump", help="write every result as JSON here")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 on a disagreement under a FIXED cause or under no cause")
    a = ap.parse_args()
    for c in a.corpus:
        if not os.path.isdir(os.path.join(c, "wellformed")):
            print(f"diff.py: {c} has no wellformed/ directory (feedparser's tests/)",
                  file=sys.stderr)
            return 2
    results = []
    ncases = agreed = disagreed = 0
    by_cause = {}
    not_wellformed = []
    skipped_http = []
    per_dir = {}
    fp_self_fail = []
    for case, path in [cp for c in a.corpus for cp in cases(c)]:
        if a.case and a.case not in case:
            continue
        res = compare_case(case, path, a.newsflow)
        if res is None:
            skipped_http.append(case)
            continue
        if res["bozo"]:
            not_wellformed.append(case)  # not well-formed after all: not compared
            continue
        results.append(res)
        ncases += 1
        if not res["expect_ok_fp"]:
            fp_self_fail.append(case)
        grp = case.split("/")[0]
        st = per_dir.setdefault(grp, [0, 0])
        st[0] += 1
        st[1] += any(not f["ok"] for f in res["fields"])
        with open(path, "rb") as fh:
            xml = fh.read().decode("utf-8", "replace")
        for fd in res["fields"]:
            if fd["ok"]:
                agreed += 1
                continue
            disagreed += 1
            cause = classify(res, fd, xml)
            fd["cause"] = cause
            by_cause.setdefault(cause, []).append((case, fd))
            if a.verbose:
                print(f"DIFF {case} [{fd['scope']}] {fd['field']}{' (primary)' if fd['primary'] else ''}"
                      f": fp={fd['fp']!r} nf={fd['nf']!r} -> {cause}")
    if a.dump:
        with open(a.dump, "w") as fh:
            json.dump(results, fh, indent=1, default=str)
    print(f"{ncases} cases compared; {agreed + disagreed} fields: {agreed} agreed, "
          f"{disagreed} disagreed ({sum(1 for c in by_cause.values() for x in c if x[1]['primary'])}"
          f" on a field the case's Expect: targets)")
    if not_wellformed:
        print(f"{len(not_wellformed)} cases skipped, not well-formed (feedparser: bozo): "
              + ", ".join(not_wellformed[:8]) + (" ..." if len(not_wellformed) > 8 else ""))
    if fp_self_fail:
        print(f"{len(fp_self_fail)} cases whose Expect: feedparser {feedparser.__version__} itself "
              "fails: " + ", ".join(fp_self_fail[:8]) + (" ..." if len(fp_self_fail) > 8 else ""))
    print("cases with a disagreement, by directory: " + ", ".join(
        f"{g} {d}/{n}" for g, (n, d) in sorted(per_dir.items())))
    if skipped_http:
        print(f"{len(skipped_http)} cases skipped, about HTTP headers `parse` cannot see: "
              + ", ".join(skipped_http))
    print("\nby cause (fields / cases / primary fields):")
    order = sorted(by_cause.items(), key=lambda kv: (-len({c for c, _ in kv[1]}), kv[0]))
    for cause, items in order:
        ncase = len({c for c, _ in items})
        nprim = sum(1 for _, fd in items if fd["primary"])
        verdict = CAUSES.get(cause, ("?", ""))[0]
        print(f"  {len(items):4} / {ncase:4} / {nprim:4}  [{verdict}] {cause}")
        if a.verbose:
            print("        e.g. " + ", ".join(sorted({c for c, _ in items})[:3]))
    if not a.check:
        return 0
    bad = {c: items for c, items in by_cause.items()
           if CAUSES.get(c, ("?",))[0] not in ("KEEP", "SCOPE")}
    for cause, items in sorted(bad.items()):
        why = "a regression: newsflow had been changed to agree" \
            if CAUSES.get(cause, ("?",))[0] == "FIXED" else "a difference no rule decides"
        print(f"FAIL {cause}: {why}")
        for case, fd in items[:5]:
            print(f"     {case} [{fd['scope']}] {fd['field']}: feedparser {fd['fp']!r}, "
                  f"newsflow {fd['nf']!r}")
    if ncases == 0:
        print("FAIL: no case compared")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
