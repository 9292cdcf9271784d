"""page_check.py — the page (GET /, src/serve/page.html) as a browser shows it, against the
job's committed records: test_page.sh dumps the DOM headless Chromium built after running the
page's scripts, and this checks it.
  - the scripts ran to the end (body data-loaded="1") with no error shown;
  - "Trending stories" lists, in order, the first articles of a committed trending window
    (the job's `trending` records on its stdout), each titled as its committed `articles`
    record says;
  - the reader's feed (demo-user-1) lists articles, each one a committed article;
  - opened as /?story=ID, the story's view lists at least two of its articles, each a
    committed member of that story (the story-clusters records' union-find), titled as
    committed and with its source_id;
  - opened as /?q=WORD, the search results list committed articles whose title or summary
    has the word, the title's matches marked (<mark>);
  - "This process, recent history" shows a card per series of /v1/ops/history (new articles,
    read events, dead letters, failed fetches, epochs, lag, seconds since commit, CPU, memory),
    each with a line drawn from at least two samples, and new articles above zero.
Usage: python3 page_check.py DOM_HTML JOB_STDOUT [WORD [STORY]]
"""
import sys
from html.parser import HTMLParser

import jobout


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.loaded = False
        self.lists = {}  # ol id -> [(article id, title)]
        self.errors = []
        self._ol = None
        self._li = None
        self._title = None
        self._error = None
        self.marked = []  # text inside <mark> in the search results' titles
        self._mark = None
        self.ops = {}  # series name -> [latest value text, polyline points]
        self.ops_samples = 0
        self._card = None
        self._now = None
        self.sources = []  # the story view's source labels, in order
        self._source = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "div" and a.get("id") == "ops":
            self.ops_samples = int(a.get("data-samples") or 0)
        if tag == "div" and a.get("data-series"):
            self._card = a["data-series"]
            self.ops[self._card] = ["", ""]
        if tag == "div" and a.get("class") == "now" and self._card:
            self._now = ""
        if tag == "polyline" and self._card:
            self.ops[self._card][1] = a.get("points") or ""
        if tag == "mark" and self._title is not None and self._ol == "results":
            self._mark = ""
        if tag == "body" and a.get("data-loaded") == "1":
            self.loaded = True
        if tag == "ol" and a.get("id"):
            self._ol = a["id"]
            self.lists[self._ol] = []
        if tag == "li" and self._ol:
            self._li = a.get("data-article")
            if "error" in (a.get("class") or ""):
                self._error = ""
        if tag == "span" and a.get("class") == "source" and self._ol == "story":
            self._source = ""
        if tag == "a" and "title" in (a.get("class") or "") and self._li:
            self._title = ""

    def handle_data(self, data):
        if self._source is not None:
            self._source += data
        if self._now is not None:
            self._now += data
        if self._mark is not None:
            self._mark += data
        if self._title is not None:
            self._title += data
        if self._error is not None:
            self._error += data

    def handle_endtag(self, tag):
        if tag == "span" and self._source is not None:
            self.sources.append(self._source)
            self._source = None
        if tag == "div" and self._now is not None:
            self.ops[self._card][0] = self._now
            self._now = None
        if tag == "svg":
            self._card = None
        if tag == "mark" and self._mark is not None:
            self.marked.append(self._mark)
            self._mark = None
        if tag == "a" and self._title is not None:
            self.lists[self._ol].append((self._li, self._title))
            self._title = None
        if tag == "li":
            if self._error is not None:
                self.errors.append(self._error)
                self._error = None
            self._li = None
        if tag == "ol":
            self._ol = None


def story_members(recs, story):
    """The articles the story-clusters records put in story (merges followed)."""
    find = jobout.story_find(recs)
    return {c["article_id"] for c in recs.get("story-clusters", []) if find(c["article_id"]) == find(story)}


def check_story(page, recs, story, titles):
    fails = []
    sources = {a["article_id"]: a.get("source_id") for a in recs.get("articles", [])}
    members = story_members(recs, story)
    shown = page.lists.get("story", [])
    if len(shown) < 2:
        fails.append(f"story {story}: {len(shown)} articles shown, want >= 2 of {len(members)}")
    for (aid, title), src in zip(shown, page.sources):
        if aid not in members:
            fails.append(f"story {story}: {aid} shown is not one of its articles {sorted(members)}")
        if titles.get(aid) != title.strip():
            fails.append(f"story {aid}: title {title!r} != the committed {titles.get(aid)!r}")
        if sources.get(aid) != src.strip():
            fails.append(f"story {aid}: source {src!r} != the committed {sources.get(aid)!r}")
    if len(page.sources) != len(shown):
        fails.append(f"story {story}: {len(page.sources)} sources for {len(shown)} articles")
    return fails


def main(dom_path, out_path, word=None, story=None):
    page = Page()
    page.feed(open(dom_path, encoding="utf-8").read())
    recs = jobout.records(out_path)
    titles = {a["article_id"]: a["title"] for a in recs.get("articles", [])}
    windows = [[i["article_id"] for i in w["items"]] for w in recs.get("trending", [])]
    fails = []
    if not page.loaded:
        fails.append("the page's scripts did not finish (no data-loaded)")
    if page.errors:
        fails.append(f"the page shows errors: {page.errors}")
    shown = page.lists.get("trending", [])
    ids = [i for i, _ in shown]
    if not shown:
        fails.append("no trending stories shown")
    elif not any(w[:len(ids)] == ids for w in windows):
        fails.append(f"trending shown {ids[:5]}... is no committed window's list")
    for aid, title in shown:
        if titles.get(aid) != title.strip():
            fails.append(f"trending {aid}: title {title!r} != the committed {titles.get(aid)!r}")
    feed = page.lists.get("feed", [])
    if not feed:
        fails.append("no feed shown for demo-user-1")
    for aid, title in feed:
        if titles.get(aid) != title.strip():
            fails.append(f"feed {aid}: title {title!r} != the committed {titles.get(aid)!r}")
    results = page.lists.get("results", [])
    if word:
        arts = {a["article_id"]: a for a in recs.get("articles", [])}
        if not results:
            fails.append(f"no search results shown for {word!r}")
        for aid, title in results:
            a = arts.get(aid)
            if not a or a["title"] != title.strip():
                fails.append(f"search {aid}: title {title!r} is no committed article's")
            elif word.lower() not in (a["title"] + " " + (a.get("summary") or "")).lower():
                fails.append(f"search {aid}: {word!r} is in neither title nor summary")
        if results and not any(m.lower() == word.lower() for m in page.marked):
            fails.append(f"no title marks {word!r}: marked {page.marked[:5]}")
    if story:
        fails += check_story(page, recs, story, titles)
    want = {"articles_per_s", "read_events_per_s", "dead_letters_per_s", "fetch_errors_per_s",
            "epochs_per_s", "consumer_lag", "seconds_since_commit", "cpu_cores", "rss_mb"}
    if set(page.ops) != want:
        fails.append(f"history cards {sorted(page.ops)} != {sorted(want)}")
    if page.ops_samples < 2:
        fails.append(f"history: {page.ops_samples} samples shown, want >= 2")
    for name, (now, points) in page.ops.items():
        if name != "articles_per_s" and len(points.split()) < 1:
            fails.append(f"history {name}: no line drawn ({points!r})")
    if len(page.ops.get("articles_per_s", ["", ""])[1].split()) < 1:
        fails.append("history: no line of new articles")
    for f in fails:
        print("FAIL: " + f, file=sys.stderr)
    print(f"page_check: {len(shown)} trending stories, {len(feed)} feed items and "
          f"{len(results)} search results and {len(page.lists.get('story', []))} articles of a "
          f"story shown, {len(windows)} committed windows; "
          f"{len(page.ops)} history cards over {page.ops_samples} samples")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
