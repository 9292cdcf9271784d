"""An upgrade on Apache Kafka (issue 37): the job of a pinned earlier commit (NF_UPGRADE_OLD, the
binary test_upgrade.sh built) runs on topics of its own with the example feeds (file:// URLs)
and a first wave of read events, and stops cleanly; then this build starts on the same
state.dir and broker. Checked:
  - it starts (the old state has no identity record: it is adopted, "state identity recorded"),
    rolls nothing forward, and reads no input twice;
  - the feeds, crawled again, emit no article a second time (articles: one record per URL);
  - a second wave of read events: interest-updates holds every (user, version) of both runs
    exactly once (versions go on from the old state's);
  - every article the old build indexed is found by GET /v1/search with a word of its title.

Usage: NF_UPGRADE_OLD=BINARY python3 upgrade.py NEWSFLOW SRCDIR
"""
import json
import os
import sys
import time
import urllib.parse
import urllib.request

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recovery"))
import acclib  # noqa: E402

WAVE = 300
FEEDS = ("upgrade-a.rss", "upgrade-b.rss")
WORDS = ["harbour", "glacier", "orchard", "lantern", "meadow", "citadel"]


def write_feeds(ctx):
    """Two RSS feeds of three items each, dated an hour ago (inside search.retention_s and the
    48 h feed), each title with a word no other item has. file:// URLs."""
    when = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() - 3600))
    urls = []
    for f, name in enumerate(FEEDS):
        items = "".join(
            "<item><title>Upgrade %s report %d</title><link>https://upgrade.test/%s/%d</link>"
            "<description>Notes on the %s.</description><pubDate>%s</pubDate></item>" %
            (WORDS[f * 3 + i], i, name, i, WORDS[f * 3 + i], when) for i in range(3))
        path = ctx.path(name)
        with open(path, "w") as out:
            out.write('<?xml version="1.0"?><rss version="2.0"><channel><title>%s</title>'
                      "<link>https://upgrade.test/</link><description>d</description>%s"
                      "</channel></rss>" % (name, items))
        urls.append("file://" + path)
    return urls


def job(ctx, broker, state, binary, tag, feeds):
    """A Job run by `binary` (the pinned build or this one) with the admin server, search and
    the example feeds."""
    saved, ctx.nf = ctx.nf, binary
    try:
        return acclib.Job(ctx, broker, state, tag=tag, interval_ms=300,
                          sets=["admin.enabled=true", "admin.port=0", "search.enabled=true",
                                "fetch.allow_private=127.0.0.0/8", "crawl.interval_s=60",
                                "crawl.interval_floor_s=60", "crawl.host_spacing_ms=0",
                                "sources.urls=" + ",".join(feeds)])
    finally:
        ctx.nf = saved


def articles(ctx, broker):
    """{url: count} of the articles topic (read_committed)."""
    out = {}
    for _, _, v in acclib.read_outputs(ctx, broker, "articles"):
        out[v.get("url")] = out.get(v.get("url"), 0) + 1
    return out


def search(port, q):
    url = "http://127.0.0.1:%d/v1/search?%s" % (port, urllib.parse.urlencode({"q": q}))
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)


def body(ctx):
    if acclib.broker_kind(ctx) != "kafka":
        ctx.fail("needs Apache Kafka: set NF_TEST_BROKER=kafka:HOST:PORT")
    old = os.environ.get("NF_UPGRADE_OLD")
    ctx.check(old and os.access(old, os.X_OK), "NF_UPGRADE_OLD names no binary: %r" % old)
    frm = os.environ.get("NF_UPGRADE_FROM", "?")
    broker = acclib.start_broker(ctx, name="upgrade")
    feeds = write_feeds(ctx)
    ev = acclib.Events(users=20, prefix="up")
    state = ctx.path("state")
    acclib.kcat_produce(ctx, broker, "read-events", ev.make(WAVE), tag="w1")

    j1 = job(ctx, broker, state, old, "old-" + frm, feeds)
    acclib.wait_all_consumed(ctx, j1, broker, ev.valid)
    def crawled(j):
        """Both feeds fetched and every new article the job counted committed to the topic."""
        m, p = j.metrics(), j.msgs("progress")
        n = p[-1].get("articles", 0) if p else 0
        return (m and m.get("newsflow_fetch_requests_total", 0) >= len(FEEDS) and n > 0 and
                len(articles(ctx, broker)) >= n)
    ctx.wait_for("the old build's crawl of the feeds", lambda: crawled(j1), timeout=240,
                 interval=0.5, job=j1)
    ctx.check(j1.terminate() == 0, "the old build (%s): exit after SIGTERM != 0" % frm, j1)
    arts = articles(ctx, broker)
    ctx.log("old build %s: %d interest updates, %d articles" % (frm, ev.valid, len(arts)))

    j2 = job(ctx, broker, state, ctx.nf, "new", feeds)
    ctx.wait_for("'newsflow started' (this build)", lambda: j2.msgs("newsflow started"),
                 timeout=180, job=j2)
    ctx.check(j2.msgs("state identity recorded"), "the old state's identity was not recorded", j2)
    ctx.check(not j2.msgs("pending epoch found at start: rolling it forward"),
              "a clean stop left a pending epoch", j2)
    acclib.kcat_produce(ctx, broker, "read-events", ev.make(WAVE), tag="w2")
    acclib.wait_all_consumed(ctx, j2, broker, ev.valid)
    # the feeds (crawl.interval_s 60) are crawled again by this build: their items are known
    def fetches():
        m = j2.metrics()
        return m and m.get("newsflow_fetch_requests_total", 0) >= len(FEEDS)
    ctx.wait_for("this build's crawl of the feeds", fetches, timeout=240, interval=0.5, job=j2)
    port = j2.admin_port()
    ctx.check(port, "no admin port in this build's 'newsflow started'", j2)
    missing = []
    meta = {}
    for _, _, v in acclib.read_outputs(ctx, broker, "articles"):
        meta[v.get("article_id")] = v
    for aid, v in sorted(meta.items()):
        w = next((x for x in WORDS if x in (v.get("title") or "").lower()), None)
        ctx.check(w, "an article of neither feed: %r" % v)
        hits = ctx.wait_for("search %r finds %s" % (w, aid), lambda: [
            h for h in search(port, w).get("results", []) if h.get("article_id") == aid] or
            None, timeout=60, interval=0.5, job=j2)
        if not hits:
            missing.append(aid)
    ctx.check(not missing, "articles of the old build not found by search: %r" % missing)
    ctx.check(j2.terminate() == 0, "this build: exit after SIGTERM != 0", j2)
    again = {u: n for u, n in articles(ctx, broker).items() if n > 1}
    ctx.check(not again, "articles emitted again after the upgrade: %r" % again)
    ctx.log(acclib.check_interest_updates(
        ctx, acclib.read_outputs(ctx, broker, "interest-updates"), ev.counts))
    ctx.log("upgrade from %s: %d articles once each, all found by search" % (frm, len(meta)))


if __name__ == "__main__":
    acclib.main("upgrade", body)
