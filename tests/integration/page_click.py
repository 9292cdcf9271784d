"""page_click.py — a reader clicks an article on the page (GET /, src/serve/page.html) in a
headless Chromium driven over the DevTools protocol (cdp.py), and the job learns of it: the
steps of test_page_click.sh once the job runs and Chromium listens.
  1. the reader (one the demo producer never reads for) has no interest vector (404) and a
     feed from trending;
  2. /?user=READER loads (body data-loaded="1") with the reader chosen and their feed shown;
  3. the first trending article's link is scrolled into view and clicked where it is on the
     screen (Input.dispatchMouseEvent: pressed, released), after checking that the point hits
     that link; a link that opens in a new tab (target=_blank, rel=noopener);
  4. the page says "read recorded for READER" and is still the page; a tab with the article
     opened beside it;
  5. the job counted the read: the reader's interest vector is version 1 and holds exactly the
     clicked article's topics (GET /v1/articles/{id}), its top topics led by the article's;
     the feed is ranked by it ("source": "interest");
  6. the page shows the reader's feed again, now ranked by their interests;
  7. the reader clicks a topic of a trending article that is none of their interests' (a real
     click on its chip): the page says the follow was recorded and shows the feed again
     "following" it; the job's feed names it in followed_topics and now holds more articles of
     it than before (a followed topic is drawn into the feed and ranks up: engine/follows.h);
  8. the feed names its ranking variant (ranking.variants, engine/variants.h) and the page shows
     it; the reader clicks a feed article (another than the first): the read carries the
     variant, and the job counts it once under it (newsflow_ranking_reads_total);
  9. the reader clicks "mute SOURCE" beside a feed article: the page says the mute was recorded
     and shows the feed again naming the muted source; the job's feed names it in
     muted_sources and holds no article of it any more (engine/follows.h, mute_source).
Every wait is on a condition, with a bound far above what it takes on an idle machine.
Usage: python3 page_click.py ADMIN_PORT DEVTOOLS_PORT READER"""
import json
import sys
import time
import urllib.parse

import cdp
from jobapi import get, metrics


def fail(msg):
    raise SystemExit(f"FAIL: {msg}")


def wait(what, probe, timeout):
    """probe()'s first true value, asked every 0.2 s; a failure naming what after timeout s."""
    deadline = time.monotonic() + timeout
    while True:
        v = probe()
        if v:
            return v
        if time.monotonic() > deadline:
            fail(f"{what}: not within {timeout} s")
        time.sleep(0.2)


# The first trending link with an address, scrolled to the middle of the view: the middle of its
# first line box (a long title wraps), and whether that point hits the link itself.
FIND_LINK = """(() => {
  const a = document.querySelector("#trending li[data-article] a.title[href]");
  if (!a) return null;
  a.scrollIntoView({block: "center"});
  const r = a.getClientRects()[0];
  const x = r.left + r.width / 2, y = r.top + r.height / 2;
  const hit = document.elementFromPoint(x, y);
  return {article: a.closest("li").dataset.article, href: a.href, target: a.target, rel: a.rel,
          title: a.textContent, x: x, y: y, hits: !!hit && hit.closest("a") === a};
})()"""


# A topic chip of a trending article whose topic is none of `avoid`, scrolled into view: its
# topic, the middle of its box, and whether that point hits it.
FIND_CHIP = """((avoid) => {
  for (const c of document.querySelectorAll("#trending span.topic[data-topic]")) {
    if (avoid.includes(c.dataset.topic)) continue;
    c.scrollIntoView({block: "center"});
    const r = c.getBoundingClientRect();
    const x = r.left + r.width / 2, y = r.top + r.height / 2;
    const hit = document.elementFromPoint(x, y);
    return {topic: c.dataset.topic, x: x, y: y, hits: !!hit && hit.closest("span.topic") === c};
  }
  return null;
})(%s)"""


def click(page, x, y):
    page.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
    page.call("Input.dispatchMouseEvent", {"type": "mousePressed", "x": x, "y": y,
                                           "button": "left", "buttons": 1, "clickCount": 1})
    page.call("Input.dispatchMouseEvent", {"type": "mouseReleased", "x": x, "y": y,
                                           "button": "left", "buttons": 0, "clickCount": 1})


def with_topic(feed, topic):
    return sum(1 for i in feed["items"] if (i.get("topics") or {}).get(topic, 0) > 0)


def click_setting(page, at, note, feed_note):
    """Clicks a setting's control at (at["x"], at["y"]); waits for the page's note to say it was
    recorded (note) and for its feed, asked again, to show it (feed_note in the feed's note)."""
    click(page, at["x"], at["y"])
    wait(f"the page's note {note!r}",
         lambda: page.evaluate("document.getElementById('read-note').textContent") == note, 30)
    wait(f"the page's feed note showing {feed_note!r}",
         lambda: feed_note in page.evaluate("document.getElementById('feed-note').textContent"),
         60)


def follow_step(page, base, reader, quser, interest):
    """Step 7: a click on a topic chip follows it, and the feed changes with it."""
    status, before = get(base, f"/v1/feed/{quser}?limit=15")
    if status != 200 or before.get("followed_topics") != []:
        fail(f"the feed before the follow: {status} {before}")
    chip = page.evaluate(FIND_CHIP % json.dumps(sorted(interest["vector"])))
    if not chip:
        fail("no trending article with a topic the reader has no interest in")
    if not chip["hits"]:
        fail(f"the point ({chip['x']:.0f}, {chip['y']:.0f}) does not hit the topic {chip['topic']}")
    topic = chip["topic"]
    click_setting(page, chip, f"follow {topic} recorded for {reader}", f"following {topic}")
    status, after = get(base, f"/v1/feed/{quser}?limit=15")
    if status != 200 or after.get("followed_topics") != [topic]:
        fail(f"the feed after the follow does not follow {topic}: {status} {after}")
    if with_topic(after, topic) <= with_topic(before, topic):
        fail(f"following {topic} did not bring more of its articles into the feed: "
             f"{with_topic(before, topic)} before, {with_topic(after, topic)} after")
    print(f"page_click: followed {topic} by a click; the feed holds {with_topic(after, topic)} of "
          f"its articles (before: {with_topic(before, topic)})")


FIND_MUTE = """(() => {
  const m = document.querySelector("#feed li[data-article] span.mute-source[data-source]");
  if (!m) return null;
  m.scrollIntoView({block: "center"});
  const r = m.getClientRects()[0];
  const x = r.left + r.width / 2, y = r.top + r.height / 2;
  const hit = document.elementFromPoint(x, y);
  return {source: m.dataset.source, x: x, y: y, hits: !!hit && hit.closest("span") === m};
})()"""


def of_source(feed, src):
    return sum(1 for i in feed["items"] if i.get("source_id") == src)


def mute_step(page, base, reader, quser):
    """Step 9: a click on a feed article's "mute SOURCE" leaves that source out of the feed."""
    status, before = get(base, f"/v1/feed/{quser}?limit=15")
    if status != 200 or before.get("muted_sources") != []:
        fail(f"the feed before the mute: {status} {before}")
    m = page.evaluate(FIND_MUTE)
    if not m:
        fail("no feed article with a source to mute")
    if not m["hits"]:
        fail(f"the point ({m['x']:.0f}, {m['y']:.0f}) does not hit the mute of {m['source']}")
    src = m["source"]
    if of_source(before, src) == 0:
        fail(f"the page offers to mute {src}, which no article of the job's feed has: {before}")
    click_setting(page, m, f"mute_source {src} recorded for {reader}", f"muted sources {src}")
    status, after = get(base, f"/v1/feed/{quser}?limit=15")
    if status != 200 or after.get("muted_sources") != [src]:
        fail(f"the feed after the mute does not name {src}: {status} {after}")
    if of_source(after, src):
        fail(f"the feed still holds {of_source(after, src)} articles of the muted {src}")
    shown = page.evaluate("[...document.querySelectorAll('#feed span.mute-source')]"
                          ".map((m) => m.dataset.source)")
    if src in shown:
        fail(f"the page's feed still shows an article of the muted {src}")
    print(f"page_click: muted {src} by a click; the feed held {of_source(before, src)} of its "
          f"articles, now none ({len(after['items'])} items)")


FIND_FEED_LINK = """((skip) => {
  for (const a of document.querySelectorAll("#feed li[data-article] a.title[href]")) {
    const li = a.closest("li");
    if (li.dataset.article === skip) continue;
    a.scrollIntoView({block: "center"});
    const r = a.getClientRects()[0];
    const x = r.left + r.width / 2, y = r.top + r.height / 2;
    const hit = document.elementFromPoint(x, y);
    return {article: li.dataset.article, variant: li.dataset.variant, x: x, y: y,
            hits: !!hit && hit.closest("a") === a};
  }
  return null;
})(%s)"""


def reads_of(base, variant):
    """newsflow_ranking_reads_total{kind="read",variant=...} from /metrics."""
    reads = metrics(base, "newsflow_ranking_reads_total")
    return int(reads.get(frozenset({'kind="read"', f'variant="{variant}"'}), 0))


def variant_step(page, base, reader, quser, first_article):
    """Step 8: a read from the feed carries the feed's ranking variant."""
    status, feed = get(base, f"/v1/feed/{quser}?limit=15")
    variant = feed.get("variant") if status == 200 else None
    if not variant:
        fail(f"the feed names no ranking variant: {status} {feed}")
    wait(f"the page's note naming the ranking {variant}",
         lambda: f"ranking {variant}" in page.evaluate(
             "document.getElementById('feed-note').textContent"), 30)
    link = page.evaluate(FIND_FEED_LINK % json.dumps(first_article))
    if not link or not link["hits"] or link["variant"] != variant:
        fail(f"no feed article to click marked with the variant {variant}: {link}")
    before = reads_of(base, variant)
    click(page, link["x"], link["y"])
    wait(f"the read counted under the variant {variant}",
         lambda: reads_of(base, variant) == before + 1, 60)
    print(f"page_click: a feed read counted under the ranking variant {variant}")


def main(admin_port, devtools_port, reader):
    t0 = time.monotonic()
    base = f"http://127.0.0.1:{admin_port}"
    quser = urllib.parse.quote(reader)
    status, body = get(base, f"/v1/users/{quser}/interest")
    if status != 404:
        fail(f"{reader} has an interest vector before any click: {status} {body}")
    status, body = get(base, f"/v1/feed/{quser}")
    if status != 200 or body.get("source") != "trending":
        fail(f"{reader}'s feed before any click is not from trending: {status} {body}")

    page = cdp.Session(cdp.page_ws_url(devtools_port))
    url = f"{base}/?user={quser}"
    page.call("Page.navigate", {"url": url})
    wait("the page's scripts ran to the end (data-loaded)",
         lambda: page.evaluate("document.body && document.body.dataset.loaded") == "1", 60)
    chosen = page.evaluate("document.getElementById('user').value")
    if chosen != reader:
        fail(f"/?user={reader} chose the reader {chosen!r}")
    note = page.evaluate("document.getElementById('feed-note').textContent")
    if "no interest vector yet" not in note:
        fail(f"the page's feed note before the click: {note!r}")

    link = page.evaluate(FIND_LINK)
    if not link:
        fail("no trending article with a link on the page")
    if link["target"] != "_blank" or "noopener" not in link["rel"].split():
        fail(f"the article's link does not open a new tab: target={link['target']!r} rel={link['rel']!r}")
    if not link["hits"]:
        fail(f"the point ({link['x']:.0f}, {link['y']:.0f}) does not hit the link")
    x, y = link["x"], link["y"]
    page.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
    page.call("Input.dispatchMouseEvent", {"type": "mousePressed", "x": x, "y": y,
                                           "button": "left", "buttons": 1, "clickCount": 1})
    page.call("Input.dispatchMouseEvent", {"type": "mouseReleased", "x": x, "y": y,
                                           "button": "left", "buttons": 0, "clickCount": 1})
    t_click = time.monotonic()
    print(f"page_click: clicked {link['article']} ({link['title'].strip()!r}) at ({x:.0f}, {y:.0f})")

    note = wait("the page's note of the read",
                lambda: page.evaluate("document.getElementById('read-note').textContent"), 30)
    if note != f"read recorded for {reader}":
        fail(f"the page's note after the click: {note!r}")
    if page.evaluate("location.href") != url:
        fail(f"the page navigated away to {page.evaluate('location.href')}")
    wait(f"a tab with the article ({link['href']})",
         lambda: any(t.get("type") == "page" and t.get("url") == link["href"]
                     for t in cdp.targets(devtools_port)), 30)

    status, art = get(base, f"/v1/articles/{link['article']}")
    if status != 200 or not art.get("topics"):
        fail(f"GET /v1/articles/{link['article']}: {status} {art}")
    art_topics = sorted(art["topics"], key=lambda t: -art["topics"][t])
    def interest_now():
        status, body = get(base, f"/v1/users/{quser}/interest")
        return body if status == 200 else None

    def feed_from_interest():
        status, body = get(base, f"/v1/feed/{quser}")
        return body if status == 200 and body.get("source") == "interest" else None

    interest = wait("the reader's interest vector (GET /v1/users/READER/interest)", interest_now, 60)
    t_interest = time.monotonic()
    if interest["version"] != 1:
        fail(f"interest version {interest['version']} after one click (want 1): {interest}")
    if set(interest["vector"]) != set(art_topics):
        fail(f"interest topics {sorted(interest['vector'])} != the article's {sorted(art_topics)}")
    top = interest["top_topics"]
    leaders = {t for t in art_topics if art["topics"][t] == art["topics"][art_topics[0]]}
    if len(top) != min(5, len(art_topics)) or not set(top) <= set(art_topics) or top[0] not in leaders:
        fail(f"interest top topics {top} are not the article's {art_topics} led by one of {sorted(leaders)}")
    feed = wait("the reader's feed ranked by interest (GET /v1/feed/READER)", feed_from_interest, 60)
    want = f"ranked by {reader}'s interests"
    wait("the page's feed refreshed, ranked by the reader's interests",
         lambda: want in page.evaluate("document.getElementById('feed-note').textContent"), 60)
    items = page.evaluate("document.querySelectorAll('#feed li[data-article]').length")
    follow_step(page, base, reader, quser, interest)
    variant_step(page, base, reader, quser, link["article"])
    mute_step(page, base, reader, quser)
    page.close()
    print(f"page_click: read recorded, interest v1 {interest['top_topics']} after "
          f"{t_interest - t_click:.1f} s, feed from interest ({len(feed['items'])} items; the page "
          f"shows {items}), {time.monotonic() - t0:.1f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
