#!/usr/bin/env python3
"""gen_feed.py — a large, realistic, deterministic feed for the parse benchmark.

Usage: gen_feed.py [--format rss|atom|json] [--mb SIZE | --items N] [--seed S] OUT

RSS 2.0 (default: items until the file reaches 48 MB, ~22.5k items): a channel with the
namespaces news feeds use, then items with a title (some with references: &amp; &quot;
&#8217; &amp;eacute;...), link, guid (isPermaLink="false" for a third), pubDate in RFC 822
with varied zones (GMT, +0000, -0500, EST, PDT, Z...), dc:creator, 1-3 categories, a
description of escaped HTML (~600 bytes) and content:encoded with a CDATA HTML body (~1 KB),
both with links, inline tags, &nbsp; and some non-ASCII words. At ~2.1 KB an item, 48 MB holds
~22.5k items, not the 30k first planned: the size the set-up figures were measured on won.
Atom 1.0 (--format atom, default 12 MB, ~5k entries): the same material as entries (title,
summary and content type="html", escaped). JSON Feed 1.1 (--format json, default 12 MB): the
same material as items (title, url, id, dates, authors, tags, summary, content_html).

The output depends only on the arguments (random.Random(seed), no clock, no locale), so every
run and machine benchmarks the same bytes. The document is well-formed XML (xmllint --noout
accepts it), so libxml2 on its own reads all of it. Standard library only.
"""

import argparse
import random
import sys

WORDS = (
    "government minister said report market shares economy growth election vote council city "
    "police court health hospital school students climate energy prices inflation bank rates "
    "company profits workers union strike talks deal agreement trade border security military "
    "officials president campaign parliament budget tax plan water storm flood fire research "
    "scientists study data technology software users privacy network launch mission space "
    "football season match team coach players league final record crowd festival music film "
    "museum history century village region province coast island river bridge road railway "
    "airport flights passengers travel tourism hotel restaurant food farmers harvest weather"
).split()
# Non-ASCII text news feeds carry as raw UTF-8.
UTF8_WORDS = ["café", "Zürich", "São Paulo", "Müller", "naïve", "résumé", "Kraków", "Dvořák"]
# As written in the XML: predefined and numeric references, and an HTML entity escaped once
# (the feed's title is HTML-ish text; the text layer decodes &eacute; after the XML layer).
TITLE_ENTITIES = ["&amp;", "&quot;", "&#8217;", "&#8220;", "&#8221;", "&amp;eacute;", "&#x2014;"]
ZONES = ["GMT", "+0000", "-0500", "-0400", "+0100", "+0200", "+0530", "EST", "EDT", "PST", "PDT",
         "Z", "+0900", "-0700", "UT"]
DAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
CATEGORIES = ["World", "Politics", "Business", "Technology", "Science", "Health", "Sport",
              "Culture", "Local", "Opinion", "Environment", "Education", "Travel", "Food & Drink"]
# Paragraphs are added until the HTML reaches these sizes: ~600 bytes of description once
# escaped, ~1 KB of content.
DESC_HTML = 450
CONTENT_HTML = 910
AUTHORS = ["Jane Doe", "John Smith", "María García", "Wei Zhang", "Olu Adeyemi", "Anna Kowalska",
           "Liam O'Brien", "Priya Patel", "Sven Eriksson", "Fatima Haddad"]


def words(r, n):
    out = []
    for _ in range(n):
        out.append(r.choice(UTF8_WORDS) if r.random() < 0.03 else r.choice(WORDS))
    return out


def sentence(r, lo, hi):
    w = words(r, r.randint(lo, hi))
    w[0] = w[0].capitalize()
    return " ".join(w) + r.choice([".", ".", ".", "?", "!"])


def xml_escape(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def title(r):
    w = words(r, r.randint(6, 12))
    w[0] = w[0].capitalize()
    if r.random() < 0.4:  # some titles carry entities, as escaped text in the XML
        w.insert(r.randint(1, len(w) - 1), r.choice(TITLE_ENTITIES))
    return " ".join(w)


def html_paragraphs(r, target, n_id):
    """HTML of about `target` bytes: paragraphs with inline markup, links, an image."""
    parts = []
    size = 0
    k = 0
    while size < target:
        s = sentence(r, 8, 20)
        roll = r.random()
        if roll < 0.25:
            ws = s.split(" ")
            i = r.randint(0, len(ws) - 1)
            ws[i] = '<a href="https://news.example.com/topics/%s?ref=%d&amp;utm_source=rss">%s</a>' % (
                r.choice(WORDS), n_id, ws[i])
            s = " ".join(ws)
        elif roll < 0.45:
            ws = s.split(" ")
            i = r.randint(0, len(ws) - 1)
            tag = r.choice(["em", "strong", "b", "i"])
            ws[i] = "<%s>%s</%s>" % (tag, ws[i], tag)
            s = " ".join(ws)
        elif roll < 0.55:
            s = s.replace(" ", " &nbsp;", 1) if "&" not in s else s
        p = "<p>%s</p>" % s
        if k == 1 and r.random() < 0.5:
            p += ('<figure><img src="https://img.example.com/%d/%d.jpg" alt="Photo: %s" '
                  'width="640" height="360"/><figcaption>%s</figcaption></figure>') % (
                n_id, k, r.choice(WORDS), sentence(r, 4, 8))
        parts.append(p)
        size += len(p)
        k += 1
    return "".join(parts)


def rfc822(r):
    d = r.randint(1, 28)
    mo = r.randint(0, 11)
    y = r.choice([2025, 2026])
    return "%s, %02d %s %d %02d:%02d:%02d %s" % (
        DAYS[(d + mo) % 7], d, MONTHS[mo], y, r.randint(0, 23), r.randint(0, 59),
        r.randint(0, 59), r.choice(ZONES))


def rfc3339(r):
    z = r.choice(["Z", "+00:00", "-05:00", "+01:00", "+05:30", "-08:00"])
    return "%d-%02d-%02dT%02d:%02d:%02d%s" % (
        r.choice([2025, 2026]), r.randint(1, 12), r.randint(1, 28), r.randint(0, 23),
        r.randint(0, 59), r.randint(0, 59), z)


def gen_rss(r, more, w):
    w('<?xml version="1.0" encoding="UTF-8"?>\n'
      '<rss version="2.0" xmlns:content="http://purl.org/rss/1.0/modules/content/" '
      'xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:atom="http://www.w3.org/2005/Atom" '
      'xmlns:media="http://search.yahoo.com/mrss/">\n<channel>\n'
      '<title>The Example Times &amp; Chronicle</title>\n'
      '<link>https://news.example.com/</link>\n'
      '<description>Latest news from the Example Times &#8212; generated for benchmarks'
      '</description>\n<language>en-gb</language>\n'
      '<lastBuildDate>Sat, 21 Nov 2026 10:00:00 GMT</lastBuildDate>\n'
      '<atom:link href="https://news.example.com/rss.xml" rel="self" '
      'type="application/rss+xml"/>\n')
    i = 0
    while more(i):
        slug = "-".join(words(r, 5)).replace(" ", "-")
        section = r.choice(CATEGORIES).lower().replace(" & ", "-")
        link = "https://news.example.com/%s/%d/%s" % (section, 100000 + i, slug)
        w("<item>\n")
        w("<title>%s</title>\n" % title(r))
        w("<link>%s?utm_source=rss&amp;utm_medium=feed</link>\n" % link)
        if r.random() < 0.33:
            w('<guid isPermaLink="false">urn:uuid:%08x-%04x-4%03x-a%03x-%012x</guid>\n' % (
                r.getrandbits(32), r.getrandbits(16), r.getrandbits(12), r.getrandbits(12),
                r.getrandbits(48)))
        else:
            w('<guid isPermaLink="true">%s</guid>\n' % link)
        w("<pubDate>%s</pubDate>\n" % rfc822(r))
        w("<dc:creator>%s</dc:creator>\n" % xml_escape(r.choice(AUTHORS)))
        for c in r.sample(CATEGORIES, r.randint(1, 3)):
            w("<category>%s</category>\n" % xml_escape(c))
        w("<description>%s</description>\n" % xml_escape(html_paragraphs(r, DESC_HTML, i)))
        w("<content:encoded><![CDATA[%s]]></content:encoded>\n" % html_paragraphs(r, CONTENT_HTML, i))
        w("</item>\n")
        i += 1
    w("</channel>\n</rss>\n")


def gen_atom(r, more, w):
    w('<?xml version="1.0" encoding="utf-8"?>\n'
      '<feed xmlns="http://www.w3.org/2005/Atom" xml:lang="en">\n'
      '<title>The Example Times &amp; Chronicle</title>\n'
      '<link rel="alternate" href="https://news.example.com/"/>\n'
      '<link rel="self" href="https://news.example.com/atom.xml"/>\n'
      '<id>tag:news.example.com,2026:feed</id>\n<updated>2026-11-21T10:00:00Z</updated>\n'
      '<author><name>Newsroom</name></author>\n')
    i = 0
    while more(i):
        slug = "-".join(words(r, 5)).replace(" ", "-")
        link = "https://news.example.com/a/%d/%s" % (100000 + i, slug)
        w("<entry>\n")
        w('<title type="html">%s</title>\n' % xml_escape(title(r)))
        w('<link rel="alternate" type="text/html" href="%s?utm_source=atom&amp;x=1"/>\n' % link)
        w("<id>tag:news.example.com,2026:%d</id>\n" % (100000 + i))
        w("<published>%s</published>\n<updated>%s</updated>\n" % (rfc3339(r), rfc3339(r)))
        w("<author><name>%s</name></author>\n" % xml_escape(r.choice(AUTHORS)))
        for c in r.sample(CATEGORIES, r.randint(1, 3)):
            w('<category term="%s"/>\n' % xml_escape(c).replace('"', "&quot;"))
        w('<summary type="html">%s</summary>\n' % xml_escape(html_paragraphs(r, DESC_HTML, i)))
        w('<content type="html">%s</content>\n' % xml_escape(html_paragraphs(r, CONTENT_HTML, i)))
        w("</entry>\n")
        i += 1
    w("</feed>\n")


def gen_json(r, more, w):
    import json
    w('{"version": "https://jsonfeed.org/version/1.1", "title": "The Example Times & Chronicle",\n'
      ' "home_page_url": "https://news.example.com/", "feed_url": "https://news.example.com/feed.json",\n'
      ' "language": "en", "items": [\n')
    i = 0
    while more(i):
        slug = "-".join(words(r, 5)).replace(" ", "-")
        item = {
            "id": "tag:news.example.com,2026:%d" % (100000 + i),
            "url": "https://news.example.com/a/%d/%s?utm_source=json&x=1" % (100000 + i, slug),
            "title": title(r).replace("&amp;", "&"),
            "date_published": rfc3339(r),
            "date_modified": rfc3339(r),
            "authors": [{"name": r.choice(AUTHORS)}],
            "tags": r.sample(CATEGORIES, r.randint(1, 3)),
            "summary": html_paragraphs(r, DESC_HTML, i),
            "content_html": html_paragraphs(r, CONTENT_HTML, i),
        }
        w(("" if i == 0 else ",\n") + json.dumps(item, ensure_ascii=False))
        i += 1
    w("\n]}\n")


class Writer:
    """Collects the document and counts its UTF-8 bytes as it grows."""

    def __init__(self):
        self.chunks = []
        self.size = 0

    def __call__(self, text):
        b = text.encode("utf-8")
        self.chunks.append(b)
        self.size += len(b)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--format", choices=["rss", "atom", "json"], default="rss")
    ap.add_argument("--items", type=int, default=None,
                    help="exact item count (default: items until the file reaches --mb)")
    ap.add_argument("--mb", type=float, default=None,
                    help="approximate size in 10^6 bytes (default 48 for rss, 12 for atom)")
    ap.add_argument("--seed", type=int, default=20261122)
    a = ap.parse_args()
    mb = a.mb if a.mb is not None else (48 if a.format == "rss" else 12)
    w = Writer()
    if a.items is not None:
        def more(i):
            return i < a.items
    else:
        def more(i):
            return w.size < mb * 1e6
    r = random.Random(a.seed)
    {"rss": gen_rss, "atom": gen_atom, "json": gen_json}[a.format](r, more, w)
    with open(a.out, "wb") as f:
        for c in w.chunks:
            f.write(c)
    items = sum(c.startswith(b"<item>") or c.startswith(b"<entry>") or b'"id": "tag:' in c[:40]
                for c in w.chunks)
    print("gen_feed.py: %s: %s, %d items, %d bytes" % (a.out, a.format, items, w.size),
          file=sys.stderr)


if __name__ == "__main__":
    main()
