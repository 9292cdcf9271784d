#!/usr/bin/env python3
"""feedparser_extra.py — feeds for what feedparser's own test corpus covers thinly, for
feedparser.py (same layout and Description:/Expect: header, so both are read alike).

Usage: feedparser_extra.py FEEDPARSER_TESTS OUT
  FEEDPARSER_TESTS: the tests/ directory of feedparser's sdist (its runtests.py has the table of
  date strings); OUT: where OUT/wellformed/{dates,extra}/ are written.

dates/: every date string of feedparser's TestDateParsers table (tests/runtests.py), in an RSS
<pubDate> and in an Atom 1.0 <published>, plus more real-world forms; extra/: hand-written
cases (ampersands in attributes, href="", xml:base nesting, iTunes and Media RSS fallbacks,
feed-level people, categories, links, dates, languages)."""
import datetime, os, re, sys, html

if len(sys.argv) != 3:
    sys.exit(__doc__)
TESTS = sys.argv[1]
OUT = os.path.join(sys.argv[2], "wellformed")
os.makedirs(OUT + "/dates", exist_ok=True)
os.makedirs(OUT + "/extra", exist_ok=True)

src = open(os.path.join(TESTS, "runtests.py"), encoding="utf-8").read()
table = src[src.index("date_tests = {"):src.index("def make_date_test")]
pairs = re.findall(r"\('((?:[^'\\]|\\.)*)', (None|\([0-9, ]+\))\)", table)
n = 0
for s, t in pairs:
    s = s.encode().decode("unicode_escape")
    if not s:
        continue
    n += 1
    exp = "None" if t == "None" else t
    esc = html.escape(s, quote=False)
    with open(f"{OUT}/dates/rss_pubdate_{n:02d}.xml", "w", encoding="utf-8") as f:
        f.write(f"<!--\nDescription: date {s!r} in RSS pubDate\n"
                f"Expect:      not bozo and (entries[0].get('published_parsed') or 1)\n"
                f"Parser:      {exp}\n-->\n"
                f"<rss version=\"2.0\"><channel><item><title>t</title>"
                f"<pubDate>{esc}</pubDate></item></channel></rss>\n")
    with open(f"{OUT}/dates/atom_published_{n:02d}.xml", "w", encoding="utf-8") as f:
        f.write(f"<!--\nDescription: date {s!r} in Atom published\n"
                f"Expect:      not bozo and (entries[0].get('published_parsed') or 1)\n"
                f"Parser:      {exp}\n-->\n"
                f"<feed xmlns=\"http://www.w3.org/2005/Atom\"><entry><title>t</title>"
                f"<published>{esc}</published></entry></feed>\n")
# more real-world forms (not from feedparser's table), RSS pubDate only
MORE = ["Mon, 26 January 2004 16:31:00 GMT", "Mon, 26 Jan 2004 16:31:00 PT",
        "Mon, 26 Jan 2004 16:31:00 PST", "26 Jan 2004 16:31 EST",
        "Tue, 10 Jun 2003 04:00:00 +0000 (UTC)", "2004-01-26T16:31:00+0100",
        "Mon, 26 Jan 2004 16:31:00 UT", "Monday, 26-Jan-04 16:31:00 GMT",
        "Mon Jan 26 16:31:00 EST 2004", "2004-01-26T16:31Z", "20040126T163100Z",
        "Mon, 26 Jan 2004 16:31:00", "Mon, 26 Jan 2004 16:31:00 CEST",
        "Mon, 26 Jan 2004 16:31:00 IST", "Mon, 26 Jan 2004 4:31:00 PM GMT",
        "2004/01/26 16:31:00", "Jan 26, 2004", "January 26, 2004 4:31 PM",
        "Mon, 26 Sept 2004 16:31:00 GMT", "Mon, 26 Jan 2004 16:31:00 Etc/UTC",
        "mon, 26 jan 2004 16:31:00 gmt", "2004-01-26 16:31:00Z",
        "2004-01-26T16:31:00.123456789+01:00"]
for k, s2 in enumerate(MORE, 1):
    esc = html.escape(s2, quote=False)
    with open(f"{OUT}/dates/more_rss_pubdate_{k:02d}.xml", "w", encoding="utf-8") as f:
        f.write(f"<!--\nDescription: date {s2!r} in RSS pubDate\n"
                f"Expect:      not bozo and (entries[0].get('published_parsed') or 1)\n-->\n"
                f"<rss version=\"2.0\"><channel><item><title>t</title>"
                f"<pubDate>{esc}</pubDate></item></channel></rss>\n")
print(n, "+", len(MORE), "date strings")

ATOM = 'xmlns="http://www.w3.org/2005/Atom"'
NS = ('xmlns:dc="http://purl.org/dc/elements/1.1/" '
      'xmlns:content="http://purl.org/rss/1.0/modules/content/" '
      'xmlns:media="http://search.yahoo.com/mrss/" '
      'xmlns:itunes="http://www.itunes.com/dtds/podcast-1.0.dtd" '
      'xmlns:atom="http://www.w3.org/2005/Atom"')
CASES = {
 # name: (description, expect, xml)
 "atom_link_href_amp": ("&amp; in an Atom link href", "entries[0]['link'] == 'http://example.com/p?a=1&b=2'",
   f'<feed {ATOM}><entry><title>t</title><link href="http://example.com/p?a=1&amp;b=2"/></entry></feed>'),
 "atom_feed_link_href_amp": ("&amp; in the feed's alternate link href", "feed['link'] == 'http://example.com/?a=1&b=2'",
   f'<feed {ATOM}><link rel="alternate" href="http://example.com/?a=1&amp;b=2"/></feed>'),
 "rss_atom_link_href_amp": ("&amp; in atom:link href inside RSS", "feed['links'][0]['href'] == 'http://example.com/feed?a=1&b=2'",
   f'<rss version="2.0" {NS}><channel><atom:link rel="self" href="http://example.com/feed?a=1&amp;b=2"/></channel></rss>'),
 "xml_base_amp": ("&amp; in xml:base", "entries[0]['link'] == 'http://example.com/d/x?a=1&b=2'",
   f'<feed {ATOM} xml:base="http://example.com/d/?a=1&amp;b=2"><entry><link href="x?a=1&amp;b=2"/></entry></feed>'),
 "atom_link_href_empty_base": ("href=\"\" resolves to xml:base", "entries[0]['link'] == 'http://example.com/a/b'",
   f'<feed {ATOM}><entry xml:base="http://example.com/a/b"><link href=""/></entry></feed>'),
 "xml_base_on_link": ("xml:base on the link element itself", "entries[0]['link'] == 'http://example.com/x/y'",
   f'<feed {ATOM}><entry><link xml:base="http://example.com/x/" href="y"/></entry></feed>'),
 "xml_base_entry_relative_to_feed": ("relative xml:base on entry, resolved against the feed's", "entries[0]['link'] == 'http://example.com/a/b/c'",
   f'<feed {ATOM} xml:base="http://example.com/a/"><entry xml:base="b/"><link href="c"/></entry></feed>'),
 "rss_item_xml_base_link": ("xml:base on an RSS item applies to its link", "entries[0]['link'] == 'http://example.com/a/c'",
   f'<rss version="2.0"><channel><item xml:base="http://example.com/a/"><link>c</link></item></channel></rss>'),
 "http_rss_relative_link_docuri": ("relative RSS link, document URI as base", "entries[0]['link'] == 'http://127.0.0.1:8097/p/1'",
   f'<rss version="2.0"><channel><link>http://other.example/</link><item><link>/p/1</link></item></channel></rss>'),
 "rss_relative_link_channel_link": ("relative RSS link, no base at all", "entries[0]['link'] == '/p/1'",
   f'<rss version="2.0"><channel><link>http://other.example/</link><item><link>/p/1</link></item></channel></rss>'),
 "itunes_summary_only": ("itunes:summary only", "entries[0]['summary'] == 'S'",
   f'<rss version="2.0" {NS}><channel><item><itunes:summary>S</itunes:summary></item></channel></rss>'),
 "itunes_summary_then_description": ("itunes:summary before description", "entries[0]['summary'] == 'S'",
   f'<rss version="2.0" {NS}><channel><item><itunes:summary>S</itunes:summary><description>D</description></item></channel></rss>'),
 "description_then_itunes_summary": ("description before itunes:summary", "entries[0]['summary'] == 'D'",
   f'<rss version="2.0" {NS}><channel><item><description>D</description><itunes:summary>S</itunes:summary></item></channel></rss>'),
 "media_description_only": ("media:description only", "1",
   f'<rss version="2.0" {NS}><channel><item><media:description>M</media:description></item></channel></rss>'),
 "media_group_description": ("media:group/media:description only", "1",
   f'<rss version="2.0" {NS}><channel><item><media:group><media:description>M</media:description></media:group></item></channel></rss>'),
 "media_title_only": ("media:title only", "entries[0]['title'] == 'M'",
   f'<rss version="2.0" {NS}><channel><item><media:title>M</media:title></item></channel></rss>'),
 "media_content_url": ("media:content url", "1",
   f'<rss version="2.0" {NS}><channel><item><link>http://example.com/a</link><media:content url="http://example.com/v.mp4" medium="video"/></item></channel></rss>'),
 "channel_dc_creator": ("channel dc:creator", "feed['author'] == 'Jane'",
   f'<rss version="2.0" {NS}><channel><dc:creator>Jane</dc:creator></channel></rss>'),
 "channel_itunes_author": ("channel itunes:author", "feed['author'] == 'Jane'",
   f'<rss version="2.0" {NS}><channel><itunes:author>Jane</itunes:author></channel></rss>'),
 "channel_atom_author": ("atom:author in an RSS channel", "feed['author'] == 'Jane'",
   f'<rss version="2.0" {NS}><channel><atom:author><atom:name>Jane</atom:name></atom:author></channel></rss>'),
 "item_author_name_angle_email": ("item author 'Name <email>'", "entries[0]['author_detail']['email'] == 'j@example.com'",
   f'<rss version="2.0"><channel><item><author>Jane Doe &lt;j@example.com&gt;</author></item></channel></rss>'),
 "item_dc_creator_two": ("two dc:creator", "len(entries[0]['authors']) == 2",
   f'<rss version="2.0" {NS}><channel><item><dc:creator>A</dc:creator><dc:creator>B</dc:creator></item></channel></rss>'),
 "item_author_and_dc_creator": ("author and dc:creator", "1",
   f'<rss version="2.0" {NS}><channel><item><author>a@example.com (A)</author><dc:creator>B</dc:creator></item></channel></rss>'),
 "item_category_nested_markup": ("category with a nested element", "entries[0]['tags'][0]['term'] == 'News'",
   f'<rss version="2.0"><channel><item><category>News<x>junk</x></category></item></channel></rss>'),
 "item_category_empty": ("empty category", "1",
   f'<rss version="2.0"><channel><item><category/><category>A</category></item></channel></rss>'),
 "item_dc_subject_multiple": ("two dc:subject", "len(entries[0]['tags']) == 2",
   f'<rss version="2.0" {NS}><channel><item><dc:subject>A</dc:subject><dc:subject>B</dc:subject></item></channel></rss>'),
 "item_guid_not_permalink": ("guid isPermaLink=false, no link", "not entries[0].has_key('link')",
   f'<rss version="2.0"><channel><item><guid isPermaLink="false">http://example.com/1</guid></item></channel></rss>'),
 "item_guid_permalink_default": ("guid URL, no link", "entries[0]['link'] == 'http://example.com/1'",
   f'<rss version="2.0"><channel><item><guid>http://example.com/1</guid></item></channel></rss>'),
 "atom_entry_related_only": ("entry with only rel=related", "1",
   f'<feed {ATOM}><entry><link rel="related" href="http://example.com/r"/></entry></feed>'),
 "atom_entry_enclosure_only": ("entry with only rel=enclosure", "1",
   f'<feed {ATOM}><entry><link rel="enclosure" href="http://example.com/e.mp3"/></entry></feed>'),
 "atom_entry_source": ("entry with a source element", "entries[0]['title'] == 'E'",
   f'<feed {ATOM}><entry><title>E</title><source><title>S</title><author><name>SA</name></author><updated>2001-01-01T00:00:00Z</updated><link href="http://s.example/"/></source><updated>2005-01-01T00:00:00Z</updated></entry></feed>'),
 "rss_item_source": ("RSS item source", "entries[0]['title'] == 'E'",
   f'<rss version="2.0"><channel><item><title>E</title><source url="http://s.example/rss">S</source></item></channel></rss>'),
 "item_xml_lang": ("xml:lang on an item", "1",
   f'<rss version="2.0"><channel><language>en</language><item xml:lang="de"><title>t</title></item></channel></rss>'),
 "channel_language_underscore": ("language en_US", "feed['language'] == 'en_US'",
   f'<rss version="2.0"><channel><language>en_US</language></channel></rss>'),
 "title_double_escaped": ("RSS title &amp;amp;", "entries[0]['title'] == 'A &amp; B'",
   f'<rss version="2.0"><channel><item><title>A &amp;amp; B</title></item></channel></rss>'),
 "title_cdata_markup": ("RSS title with CDATA markup", "entries[0]['title'] == 'A <b>B</b>'",
   f'<rss version="2.0"><channel><item><title><![CDATA[A <b>B</b>]]></title></item></channel></rss>'),
 "title_lt_text": ("RSS title with a literal less-than", "1",
   f'<rss version="2.0"><channel><item><title>1 &lt; 2 and 3 &gt; 2</title></item></channel></rss>'),
 "atom_title_text_lt": ("Atom text title with &lt;b&gt;", "entries[0]['title'] == 'a <b> b'",
   f'<feed {ATOM}><entry><title type="text">a &lt;b&gt; b</title></entry></feed>'),
 "atom_title_html_entity": ("Atom html title with &amp;eacute;", "entries[0]['title'] == 'caf&eacute;'",
   f'<feed {ATOM}><entry><title type="html">caf&amp;eacute;</title></entry></feed>'),
 "atom_summary_xhtml_br": ("xhtml summary with br", "1",
   f'<feed {ATOM}><entry><summary type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml">a<br/>b</div></summary></entry></feed>'),
 "content_encoded_and_description": ("description and content:encoded", "entries[0]['summary'] == 'D' and entries[0]['content'][0]['value'] == 'C'",
   f'<rss version="2.0" {NS}><channel><item><description>D</description><content:encoded>C</content:encoded></item></channel></rss>'),
 "rss_pubdate_and_dc_date": ("pubDate and dc:date", "1",
   f'<rss version="2.0" {NS}><channel><item><pubDate>Thu, 01 Jan 2004 19:48:21 GMT</pubDate><dc:date>2005-01-01T00:00:00Z</dc:date></item></channel></rss>'),
 "atom_updated_only": ("Atom entry updated only", "1",
   f'<feed {ATOM}><entry><updated>2005-01-01T00:00:00Z</updated></entry></feed>'),
 "rss_dc_date_only": ("dc:date only", "entries[0]['updated_parsed'][:3] == (2005, 1, 1)",
   f'<rss version="2.0" {NS}><channel><item><dc:date>2005-01-01T00:00:00Z</dc:date></item></channel></rss>'),
 "rss_channel_lastbuilddate": ("lastBuildDate", "feed['updated_parsed'][:3] == (2004, 1, 1)",
   f'<rss version="2.0"><channel><lastBuildDate>Thu, 01 Jan 2004 19:48:21 GMT</lastBuildDate></channel></rss>'),
 "atom_author_uri_only": ("author with uri only", "1",
   f'<feed {ATOM}><entry><author><uri>http://example.com/j</uri></author></entry></feed>'),
 "atom_entry_inherits_feed_author": ("entry without author, feed has one", "1",
   f'<feed {ATOM}><author><name>F</name></author><entry><title>t</title></entry></feed>'),
 "atom_entry_contributor_only": ("entry with contributor only", "1",
   f'<feed {ATOM}><entry><contributor><name>C</name></contributor></entry></feed>'),
 "rss_enclosure_only": ("RSS item with enclosure only", "1",
   f'<rss version="2.0"><channel><item><enclosure url="http://example.com/a.mp3" type="audio/mpeg" length="1"/></item></channel></rss>'),
 "rss_comments": ("RSS item comments", "1",
   f'<rss version="2.0"><channel><item><link>http://example.com/a</link><comments>http://example.com/a#c</comments></item></channel></rss>'),
 "feedburner_origlink": ("feedburner:origLink", "1",
   f'<rss version="2.0" xmlns:feedburner="http://rssnamespace.org/feedburner/ext/1.0"><channel><item><link>http://feeds.example/~r/x</link><feedburner:origLink>http://example.com/a</feedburner:origLink></item></channel></rss>'),
 "rss_two_links": ("RSS item with two links", "1",
   f'<rss version="2.0"><channel><item><link>http://example.com/1</link><link>http://example.com/2</link></item></channel></rss>'),
 "rss_link_whitespace": ("RSS link with surrounding whitespace", "entries[0]['link'] == 'http://example.com/1'",
   f'<rss version="2.0"><channel><item><link>\n   http://example.com/1\n  </link></item></channel></rss>'),
 "rss_title_whitespace_newlines": ("RSS title with newlines", "1",
   f'<rss version="2.0"><channel><item><title>\n  A\n  B  </title></item></channel></rss>'),
 "rdf_item_dc_fields": ("RSS 1.0 item with dc fields", "1",
   f'<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/" {NS}><channel rdf:about="http://example.com/"><title>F</title><link>http://example.com/</link><description>d</description></channel><item rdf:about="http://example.com/1"><title>T</title><link>http://example.com/1</link><dc:creator>A</dc:creator><dc:date>2004-01-01T00:00:00Z</dc:date><dc:subject>S</dc:subject></item></rdf:RDF>'),
 "atom03_issued_modified": ("Atom 0.3 issued/modified", "1",
   '<feed version="0.3" xmlns="http://purl.org/atom/ns#"><entry><issued>2004-01-01T00:00:00Z</issued><modified>2004-02-01T00:00:00Z</modified></entry></feed>'),
 "atom_summary_html_cdata": ("Atom html summary in CDATA", "1",
   f'<feed {ATOM}><entry><summary type="html"><![CDATA[<p>a &amp; b</p>]]></summary></entry></feed>'),
 "atom_content_src": ("Atom content with src", "1",
   f'<feed {ATOM}><entry><content src="http://example.com/c" type="text/html"/></entry></feed>'),
 "itunes_keywords_item": ("item itunes:keywords", "len(entries[0]['tags']) == 2",
   f'<rss version="2.0" {NS}><channel><item><itunes:keywords>a, b</itunes:keywords></item></channel></rss>'),
 "media_keywords_item": ("item media:keywords", "1",
   f'<rss version="2.0" {NS}><channel><item><media:keywords>a, b</media:keywords></item></channel></rss>'),
}
for name, (desc, exp, xml) in CASES.items():
    with open(f"{OUT}/extra/{name}.xml", "w", encoding="utf-8") as f:
        f.write(f"<!--\nDescription: {desc}\nExpect:      not bozo and {exp}\n-->\n{xml}\n")
print(len(CASES), "hand-written cases")
