"""Analytics end to end, and a kill -9 in the middle (src/actors/analytics.h).

A loopback feed server serves three RSS feeds whose articles include planted near-duplicate
groups (one member per feed, the same story with one word changed) and unrelated singles. Two
runs of the whole job, each against its own standalone mock Kafka cluster (on a real broker,
NF_TEST_BROKER: its own topic prefix, group and transactional id) and state directory:

  A  uninterrupted: crawl -> classify -> dedup -> cluster; then a fixed list of read events
     (out of order within the allowed lateness, some late beyond it, repeated event ids,
     repeated (user, article, session)) -> event-id dedup -> trending (exact mode) -> interest;
  B  the same, SIGKILLed twice: once while articles are being crawled and clustered, once while
     the read events are being consumed; each time restarted on the same state. B runs with
     state.budget_mb=1, so that its dedup sets keep most keys on disk (state/keyset.h: a ring
     of 2,048 keys, the rest in runs behind a filter) and its restarts load them there.

Checked, from the read_committed topics:
  - articles carry category_labels and a unit-norm topics vector; story-clusters has one record
    per article and its clusters are exactly the planted groups (and singles);
  - interest-updates: one record per counted event, the count a model of the two dedup rules
    predicts, every (user, version) exactly once; the same records in A and B, byte for byte
    after JSON parsing (vectors, versions, updated_at);
  - trending: the windows equal a batch recomputation (the model below) over the events that
    were on time per partition, one entry per story (a recount over its members: the articles
    are all clustered and committed before the first read), and A and B emitted the same
    records (stories named by their members);
  - breaking-news: the records a model of the rule (breaking_model.py) gives over the committed
    trending windows, each once (B: across its kills);
  - story-clusters: B's clusters equal A's (as sets of articles: cluster ids are the earliest
    article by fetch time, which differs between runs);
  - B's dedup sets did keep keys on disk and answered lookups from there (its metrics);
  - readers' settings (follow, unfollow, mute, unmute a topic: engine/follows.h) mixed into the
    read events, some consumed before B's second kill and some after: each settings reader's
    feed (GET /v1/feed) names the followed and muted topics a model of the rule leaves, in A
    and in B;
  - notifications (engine/notify.h): readers subscribed to topics at the head of the read
    events (one unsubscribes later) get what notify_model.py explains from the breaking-news
    records, each (reader, story) once — B's across its kills — and A's and B's are the same
    (reader, window, lead article).

Usage: python3 acc_analytics.py NEWSFLOW SRCDIR
"""
import email.utils
import http.server
import json
import math
import os
import random
import re
import socketserver
import sys
import threading
import urllib.request
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import acclib  # noqa: E402
import breaking_model  # noqa: E402
import notify_model  # noqa: E402

FEEDS = 3
GROUPS = 5  # planted groups, one member per feed
SINGLES = 4  # per feed
USERS = 25
EVENTS = 6000
PARTITIONS = 4
LATENESS_MS = 5000
SLIDE_MS = 30000
WINDOW_MS = 600000
# breaking news (multiple, min_reads, min_peers, cooldown ms): low enough that the planted
# events' skew makes stories break, and a cooldown of a few slides so that some break again
BREAKING = (1.5, 3, 1, 4 * SLIDE_MS)
T0 = 1767225600000  # 2026-01-01T00:00:00Z

TOPIC_WORDS = [
    "election parliament minister vote campaign government senate policy coalition",
    "football match league goal championship coach season striker tournament",
    "bank inflation market economy interest rates investors shares profit",
    "vaccine hospital patients doctors disease health treatment virus clinical",
    "software technology startup chip artificial intelligence data cloud computing",
    "climate emissions carbon warming drought renewable energy environment",
]
FILLER = ("the a of on in at with from after before while during report said new year week "
          "city people group officials national local statement according").split()


def story(rng, n):
    theme = rng.choice(TOPIC_WORDS).split()
    return [rng.choice(theme) if rng.random() < 0.3 else rng.choice(FILLER + theme) +
            ("" if rng.random() < 0.7 else str(rng.randrange(100))) for _ in range(n)]


class Feeds:
    def __init__(self):
        rng = random.Random(7)
        self.items = {f: [] for f in range(FEEDS)}  # feed -> [(slug, title, body)]
        self.groups = []  # [[slug per feed]]
        for g in range(GROUPS):
            words = story(rng, 260)
            title = "Story %d: %s" % (g, " ".join(words[:6]))
            members = []
            for f in range(FEEDS):
                w = list(words)
                w[rng.randrange(20, 240)] = "changed%d" % f
                slug = "f%d-g%d" % (f, g)
                self.items[f].append((slug, title, " ".join(w)))
                members.append(slug)
            self.groups.append(members)
        for f in range(FEEDS):
            for s in range(SINGLES):
                words = story(rng, 220)
                slug = "f%d-s%d" % (f, s)
                self.items[f].append((slug, "Single %d/%d: %s" % (f, s, " ".join(words[:6])),
                                      " ".join(words)))
        self.port = None
        self.rng = random.Random(3)

    def render(self, f):
        out = []
        for i, (slug, title, body) in enumerate(self.items[f]):
            link = "http://127.0.0.1:%d/a/%s" % (self.port, slug)
            out.append("<item><title>%s</title><link>%s</link><guid>%s</guid><pubDate>%s</pubDate>"
                       "<description>%s</description></item>" % (
                           title, link, link,
                           email.utils.formatdate(1767000000 + f * 100 + i * 60, usegmt=True),
                           body))
        return ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<rss version=\"2.0\"><channel>"
                "<title>feed %d</title><link>http://127.0.0.1:%d/</link><description>d"
                "</description>%s</channel></rss>\n" % (f, self.port, "".join(out))).encode()

    def start(self, ctx):
        feeds = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                m = re.match(r"^/feed/f(\d+)\.xml$", self.path)
                if not m or int(m.group(1)) not in feeds.items:
                    self.send_error(404)
                    return
                body = feeds.render(int(m.group(1)))
                time.sleep(1.5 * int(m.group(1)))  # feed f answers after 1.5*f s: kills land mid-crawl
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/rss+xml")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the job was killed mid-response

        class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        self.srv = S(("127.0.0.1", 0), H)
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        ctx.log("feed server on port %d" % self.port)

    def urls(self):
        return ["http://127.0.0.1:%d/feed/f%d.xml" % (self.port, f) for f in range(FEEDS)]

    def narticles(self):
        return sum(len(v) for v in self.items.values())


def make_events(article_ids):
    """The fixed read-event list: [(key, value dict)], in produce order."""
    rng = random.Random(11)
    users = ["user%02d" % i for i in range(USERS)]
    out = []
    for i in range(EVENTS):
        u = users[rng.randrange(USERS)]
        a = article_ids[min(int(rng.expovariate(0.25)), len(article_ids) - 1)]
        s = "s%d" % rng.randrange(40)
        ts = T0 + i * 400
        r = rng.random()
        if r < 0.10:
            ts -= rng.randrange(0, 3000)  # out of order, within the lateness
        elif r < 0.13:
            ts -= rng.randrange(40000, 120000)  # late
        v = {"event_id": "e%d" % i, "user_id": u, "article_id": a, "session_id": s, "ts": ts}
        r = rng.random()
        if out and r < 0.04:
            k, prev = out[rng.randrange(len(out))]
            out.append((k, dict(prev)))  # the same event again
            continue
        out.append((u, v))
    return out


SETTINGS = ("follow", "unfollow", "mute", "unmute")
SETTINGS_USERS = 6
SETTING_KINDS = SETTINGS + ("subscribe", "unsubscribe")  # no reads: interest and trending skip


def add_settings(out, rng):
    """Settings events of SETTINGS_USERS readers spread through the read events (in produce
    order), and what the rule leaves per reader: {user: (followed, muted)}."""
    names = ["politics", "science", "business", "sports", "health", "technology"]
    want = {}
    for u in range(SETTINGS_USERS):
        user = "user%02d" % u
        follow, mute = set(), set()
        for j in range(8):
            kind, topic = rng.choice(SETTINGS), rng.choice(names)
            if kind == "follow":
                follow.add(topic)
                mute.discard(topic)
            elif kind == "unfollow":
                follow.discard(topic)
            elif kind == "mute":
                mute.add(topic)
                follow.discard(topic)
            else:
                mute.discard(topic)
            at = (u * 8 + j + 1) * len(out) // (SETTINGS_USERS * 8 + 2)
            v = {"event_id": "set-%d-%d" % (u, j), "user_id": user, "kind": kind,
                 "topic": topic, "ts": T0 + at * 400}
            out.insert(at, (user, v))
        want[user] = (sorted(follow), sorted(mute))
    return want


NOTIFY_USERS = 5
NOTIFY_CAP = 2


def add_subscriptions(out, rng):
    """Subscriptions of NOTIFY_USERS readers to three topics each at the head of the read events,
    and one unsubscribe half-way through: the plan notify_model.py checks against (when each
    took effect is not known: any window may come before or after it)."""
    names = ["politics", "science", "business", "sports", "health", "technology"]
    head, events = [], []
    for u in range(NOTIFY_USERS):
        user = "notify%02d" % u
        for j, topic in enumerate(sorted(rng.sample(names, 3))):
            v = {"event_id": "sub-%d-%d" % (u, j), "user_id": user, "kind": "subscribe",
                 "topic": topic, "ts": T0}
            head.append((user, v))
            events.append(v)
    out[:0] = head
    gone = dict(head[0][1], event_id="unsub-0", kind="unsubscribe", ts=T0 + 1)
    out.insert(len(out) // 2, (gone["user_id"], gone))
    return [{"events": events + [gone], "A": 0, "B": 1 << 30}]


def check_notifications(ctx, r, tag):
    """notifications: explained by the model, each (reader, story) once."""
    fails, summary = notify_model.check_records(
        [v for k, h, v in r["breaking"]], [(k, v) for k, h, v in r["notifications"]],
        r["plan"], NOTIFY_CAP, min_sent=NOTIFY_USERS)
    for f in fails[:5]:
        ctx.check(False, "%s: notifications: %s" % (tag, f), r["job"])
    ctx.log("%s: notifications: %s" % (tag, summary))
    return sorted((v["user_id"], v["window_end"], v["article_id"]) for k, h, v in r["notifications"])


def check_settings(ctx, job, want, tag):
    """Each settings reader's feed names what the model of the rule leaves (asked until the
    epoch that consumed the last of them is the view the query API answers from)."""
    port = job.admin_port()

    def settings_of(user):
        with urllib.request.urlopen("http://127.0.0.1:%d/v1/feed/%s" % (port, user),
                                    timeout=30) as r:
            feed = json.loads(r.read())
        return sorted(feed["followed_topics"]), sorted(feed["muted_topics"])

    ctx.wait_for("%s: the settings readers' feeds" % tag,
                 lambda: all(settings_of(u) == tuple(w) for u, w in want.items()),
                 timeout=60, interval=0.2, job=job)
    for user, w in want.items():
        ctx.check(settings_of(user) == tuple(w), "%s: %s follows and mutes %s, the events leave %s"
                  % (tag, user, settings_of(user), w), job)


def model_interest_count(events):
    seen_ids, seen_uas, n = set(), set(), 0
    for k, v in events:
        if v["event_id"] in seen_ids or v.get("kind") in SETTING_KINDS:
            continue
        seen_ids.add(v["event_id"])
        t = (v["user_id"], v["article_id"], v["session_id"])
        if t in seen_uas:
            continue
        seen_uas.add(t)
        n += 1
    return n


def model_trending(events, positions):
    """Exact-mode windows from a batch recomputation: per partition in offset order, an event is
    on time iff ts >= max ts before it on that partition - lateness (every partition is held
    back until its first event, so no pane is taken early); the watermark at the end is the min
    over partitions of max ts - lateness; every window end W (multiple of the slide) with
    W <= that watermark whose window [W - WINDOW_MS, W) holds an on-time event, with its count
    per article (rank_by_story ranks them)."""
    by_part = {}
    seen = set()
    for (k, v), (p, o, key) in zip(events, positions):
        if v.get("kind") not in SETTING_KINDS:  # a setting is no read: trending never sees it
            by_part.setdefault(p, []).append((o, v))
    ontime = []
    maxts = {}
    for p, lst in by_part.items():
        lst.sort(key=lambda x: x[0])
        for _, v in lst:
            eid = v["event_id"]
            if (p, eid) in seen:
                continue
            seen.add((p, eid))
            m = maxts.get(p)
            if m is None or v["ts"] >= m - LATENESS_MS:
                ontime.append(v)
            maxts[p] = v["ts"] if m is None else max(m, v["ts"])
    wm = min(m - LATENESS_MS for m in maxts.values())
    first = min(v["ts"] for v in ontime)
    windows = {}
    w = (first // SLIDE_MS + 1) * SLIDE_MS
    while w <= wm:
        counts = {}
        for v in ontime:
            if w - WINDOW_MS <= v["ts"] < w:
                counts[v["article_id"]] = counts.get(v["article_id"], 0) + 1
        if counts:
            windows[w] = counts
        w += SLIDE_MS
    return windows


def rank_by_story(counts, story_of, top_k=50):
    """A window's ranked list, one entry per story: its score the sum of its members' counts
    (a recount over the members), its lead the member read most (then the smaller id), ranked
    by score desc then lead (as articles rank)."""
    stories = {}
    for a, c in counts.items():
        s = stories.setdefault(story_of.get(a, a), {"score": 0, "lead": None, "articles": 0})
        s["score"] += c
        s["articles"] += 1
        if s["lead"] is None or (-c, a) < (-counts[s["lead"]], s["lead"]):
            s["lead"] = a
    ranked = sorted(stories.items(), key=lambda kv: (-kv[1]["score"], kv[1]["lead"]))[:top_k]
    return [{"article_id": s["lead"], "score": s["score"], "cluster_id": cid,
             "articles": s["articles"]} for cid, s in ranked]


def iso_ms(s):
    t = time.strptime(s[:19], "%Y-%m-%dT%H:%M:%S")
    ms = int(s[20:23]) if len(s) > 20 and s[19] == "." else 0
    import calendar
    return calendar.timegm(t) * 1000 + ms


def run(ctx, feeds, tag, kills, budget_mb=None):
    B = acclib.start_broker(ctx, name=tag, partitions=PARTITIONS)
    state = ctx.path("state-" + tag)
    sets = ["runtime.shards=2",
            "sources.urls=" + ",".join(feeds.urls()), "fetch.allow_private=127.0.0.0/8",
            "crawl.host_spacing_ms=0", "crawl.host_max_concurrent=8",
            "classify.taxonomy=" + os.path.join(ctx.srcdir, "config", "taxonomy.json"),
            "trending.exact=true", "trending.window_s=%d" % (WINDOW_MS // 1000),
            "trending.idle_ms=3600000", "trending.lateness_ms=%d" % LATENESS_MS,
            "demo.read_events_per_s=0", "interest.unknown_articles=skip",
            "breaking.multiple=%g" % BREAKING[0], "breaking.min_reads=%d" % BREAKING[1],
            "breaking.min_peers=%d" % BREAKING[2],
            "breaking.cooldown_s=%d" % (BREAKING[3] // 1000),
            "notifications.daily_cap=%d" % NOTIFY_CAP,
            "admin.enabled=true", "admin.port=0", "admin.listen=127.0.0.1"]
    if budget_mb:  # and the metrics, to see where the dedup keys are
        sets += ["state.budget_mb=%d" % budget_mb]
    if B.kind == "mock":
        # on a real broker Broker.job_sets names the transactional id (under the prefix)
        sets.insert(0, "kafka.transactional_id=acc-analytics-" + tag)
    n_articles = feeds.narticles()
    slow = {"NF_TEST_SLOW_READS_US": "4000"} if kills else {}
    job = acclib.Job(ctx, B, state, sets=sets, tag=tag + "1")
    if kills:
        # Kill while feeds are being fetched and articles clustered (feed f answers after
        # 1.5*f s, so some feeds' articles are committed and others are not).
        time.sleep(2.4)
        job.kill()
        ctx.log("%s: SIGKILL during the crawl (%d articles committed)" %
                (tag, acclib.count_topic(ctx, B, "articles")))
        job = acclib.Job(ctx, B, state, sets=sets, tag=tag + "2")
    acclib.wait_all_consumed(ctx, job, B, n_articles, topic="articles")
    acclib.wait_all_consumed(ctx, job, B, n_articles, topic="story-clusters")
    arts = acclib.read_outputs(ctx, B, "articles")
    by_slug = {}
    for k, h, v in arts:
        slug = v["url"].rsplit("/", 1)[1]
        by_slug[slug] = v
    ids = sorted(v["article_id"] for v in by_slug.values())
    events = make_events(ids)
    settings = add_settings(events, random.Random(45))
    plan = add_subscriptions(events, random.Random(46))
    if kills:
        job.terminate()
        job = acclib.Job(ctx, B, state, sets=sets, env=slow, tag=tag + "3")
    acclib.kcat_produce(ctx, B, "read-events", [(k, json.dumps(v)) for k, v in events])
    want = model_interest_count(events)
    if kills:
        # Kill once windows were emitted (the merger has state) and reads are still going on.
        ctx.wait_for("trending windows on %s" % tag,
                     lambda: (acclib.count_topic(ctx, B, "trending") >= 3 or
                              acclib.count_topic(ctx, B, "interest-updates") > want // 2),
                     timeout=180, interval=0.1, job=job)
        job.kill()
        ctx.log("%s: SIGKILL while reading (%d interest-updates committed of %d, %d windows)" %
                (tag, acclib.count_topic(ctx, B, "interest-updates"), want,
                 acclib.count_topic(ctx, B, "trending")))
        job = acclib.Job(ctx, B, state, sets=sets, tag=tag + "4")
    acclib.wait_all_consumed(ctx, job, B, want, timeout=240)
    positions = acclib.read_input_positions(ctx, B)
    positions.sort(key=lambda x: (x[0], x[1]))
    # kcat produced in file order; match each record to its position by (key, order per key).
    order = {}
    for p, o, key in positions:
        order.setdefault(key, []).append((p, o))
    pos_of = []
    used = {}
    for k, v in events:
        i = used.get(k, 0)
        used[k] = i + 1
        pos_of.append(order[k][i] + (k,))
    twant = model_trending(events, pos_of)
    ctx.wait_for("%d trending windows on %s" % (len(twant), tag),
                 lambda: acclib.count_topic(ctx, B, "trending") >= len(twant), timeout=120,
                 job=job)
    metrics = job.metrics() or {}
    check_settings(ctx, job, settings, tag)
    rc = job.terminate()
    ctx.check(rc == 0, "%s: exit %s after SIGTERM" % (tag, rc), job)
    return {
        "metrics": metrics,
        "articles": by_slug,
        "clusters": acclib.read_outputs(ctx, B, "story-clusters"),
        "interest": acclib.read_outputs(ctx, B, "interest-updates"),
        "trending": acclib.read_outputs(ctx, B, "trending"),
        "breaking": acclib.read_outputs(ctx, B, "breaking-news"),
        "notifications": acclib.read_outputs(ctx, B, "notifications"),
        "plan": plan,
        "events": events,
        "want_interest": want,
        "want_trending": twant,
        "job": job,
    }


def check_run(ctx, feeds, r, tag):
    job = r["job"]
    arts = r["articles"]
    ctx.check(len(arts) == feeds.narticles(), "%s: %d articles, want %d" %
              (tag, len(arts), feeds.narticles()), job)
    unlabelled = 0
    for slug, v in arts.items():
        norm = math.sqrt(sum(w * w for w in v["topics"].values()))
        ctx.check(not v["topics"] or abs(norm - 1) < 1e-6, "%s: %s topics norm %f" %
                  (tag, slug, norm), job)
        unlabelled += not v["category_labels"]
    ctx.check(unlabelled < len(arts) // 2, "%s: %d of %d articles without a category label" %
              (tag, unlabelled, len(arts)), job)
    # clusters: one record per article; groups recovered
    slug_of = {v["article_id"]: s for s, v in arts.items()}
    per_article = {}
    for k, h, v in r["clusters"]:
        ctx.check(k == v["article_id"], "%s: story-clusters key %s != article_id" % (tag, k), job)
        ctx.check(v["article_id"] not in per_article, "%s: two story-clusters records for %s" %
                  (tag, v["article_id"]), job)
        per_article[v["article_id"]] = v
    ctx.check(len(per_article) == len(arts), "%s: %d story-clusters records for %d articles" %
              (tag, len(per_article), len(arts)), job)
    # resolve merges: union of article -> cluster_id and merged_from -> cluster_id
    parent = {}

    def find(x):
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for a, v in per_article.items():
        parent.setdefault(a, a)
        ra, rc = find(a), find(v["cluster_id"])
        if ra != rc:
            parent[ra] = rc
        for m in v["merged_from"]:
            rm, rc = find(m), find(v["cluster_id"])
            if rm != rc:
                parent[rm] = rc
    got = {}
    for a in per_article:
        got.setdefault(find(a), set()).add(slug_of.get(a, a))
    # each story's id, as the job names it: the member that is its own cluster and was never
    # merged into another (cluster ids are earliest articles; a merge names the ones it ends)
    merged = {m for v in per_article.values() for m in v["merged_from"]}
    story_of = {}
    for root in {find(a) for a in per_article}:
        members = [a for a in per_article if find(a) == root]
        heads = [a for a in members
                 if per_article[a]["cluster_id"] == a and a not in merged]
        ctx.check(len(heads) == 1, "%s: story %s has %d heads %r" % (tag, root, len(heads), heads),
                  job)
        for a in members:
            story_of[a] = heads[0] if heads else a
    got_sets = sorted(sorted(s) for s in got.values())
    want_sets = sorted([sorted(g) for g in feeds.groups] +
                       [[s] for f in range(FEEDS) for s in
                        ("f%d-s%d" % (f, i) for i in range(SINGLES))])
    ctx.check(got_sets == want_sets, "%s: clusters %r, want the planted groups %r" %
              (tag, got_sets, want_sets), job)
    # interest
    counts = {}
    for k, v in r["events"]:
        counts[v["user_id"]] = 0
    recs = r["interest"]
    ctx.check(len(recs) == r["want_interest"], "%s: %d interest-updates, the model wants %d" %
              (tag, len(recs), r["want_interest"]), job)
    last = {}
    for k, h, v in recs:
        last[v["user_id"]] = max(last.get(v["user_id"], 0), v["version"])
    ctx.log(acclib.check_interest_updates(ctx, recs, last))
    for k, h, v in recs:
        norm = math.sqrt(sum(w * w for w in v["vector"].values()))
        if v["vector"] and abs(norm - 1) > 1e-9:
            ctx.fail("%s: interest vector of %s v%d has norm %r" %
                     (tag, v["user_id"], v["version"], norm), job)
    # trending vs the batch model
    got_t = {}
    for k, h, v in r["trending"]:
        we = iso_ms(v["window_end"])
        ctx.check(we not in got_t, "%s: window %s emitted twice" % (tag, v["window_end"]), job)
        ctx.check(iso_ms(v["window_start"]) == we - WINDOW_MS, "%s: window_start %s" %
                  (tag, v["window_start"]), job)
        # the lead's topic (what breaking news judged it by) is no part of the recount
        got_t[we] = [{k: x for k, x in it.items() if k != "topic"} for it in v["items"]]
    want_t = {w: rank_by_story(c, story_of) for w, c in r["want_trending"].items()}
    missing = sorted(set(want_t) - set(got_t))
    extra = sorted(set(got_t) - set(want_t))
    wrong = [w for w in want_t if w in got_t and got_t[w] != want_t[w]]
    ctx.check(not missing and not wrong and all(w > max(want_t) for w in extra),
              "%s: trending differs from the batch recomputation: %d missing (%s), %d wrong "
              "(first %s: got %s want %s), extra %s" % (
                  tag, len(missing), missing[:3], len(wrong), wrong[:1],
                  got_t.get(wrong[0]) if wrong else None, want_t.get(wrong[0]) if wrong else None,
                  extra[:3]), job)
    check_breaking(ctx, r, tag)
    r["notes"] = check_notifications(ctx, r, tag)
    # what A and B must agree on: cluster ids are earliest articles by fetch time, which differ
    # between runs; a story is named here by its members
    members = {}
    for a, sid in story_of.items():
        members.setdefault(sid, []).append(a)
    return {w: [dict(it, cluster_id=sorted(members.get(it["cluster_id"], [it["cluster_id"]])))
                for it in items] for w, items in got_t.items()}


def check_breaking(ctx, r, tag):
    """breaking-news: the model's over the committed trending windows (breaking_model.py), each
    record once — B's across its kills."""
    got = [v for k, h, v in r["breaking"]]
    for k, h, v in r["breaking"]:
        ctx.check(k == v["story_id"], "%s: breaking-news key %s != story_id" % (tag, k), r["job"])
    for g in got:
        g["baseline"] = float(g["baseline"])
    # a topic's partitions hold no order between them: compared by window, then story
    got.sort(key=breaking_model.order)
    want = sorted(breaking_model.model([v for k, h, v in r["trending"]], *BREAKING),
                  key=breaking_model.order)
    ctx.check(got == want, "%s: breaking-news %s differs from the model's %s" % (
        tag, [(g["story_id"][:8], g["window_end"]) for g in got][:8],
        [(w["story_id"][:8], w["window_end"]) for w in want][:8]), r["job"])
    ctx.check(len(want) >= 2, "%s: %d stories broke: the run did not exercise breaking news" %
              (tag, len(want)), r["job"])
    ctx.log("%s: %d breaking-news records, the model's over %d windows" %
            (tag, len(got), len(r["trending"])))


def body(ctx):
    feeds = Feeds()
    feeds.start(ctx)
    a = run(ctx, feeds, "A", kills=False)
    ta = check_run(ctx, feeds, a, "A")
    b = run(ctx, feeds, "B", kills=True, budget_mb=1)
    tb = check_run(ctx, feeds, b, "B")
    m = b["metrics"]
    disk = (m.get("newsflow_read_dedup_disk_keys", 0), m.get("newsflow_read_dedup_keys", 0),
            m.get("newsflow_read_dedup_disk_lookups_total", 0),
            m.get("newsflow_read_dedup_disk_hits_total", 0))
    ctx.log("B: dedup keys on disk %d of %d, disk lookups %d, found there %d" % disk)
    ctx.check(disk[0] > 0 and disk[2] > 0,
              "B: the dedup sets kept no keys on disk under state.budget_mb=1 (%r)" % (disk,))
    ctx.check("newsflow_cluster_index_loads_total" in m and
              "newsflow_cluster_index_evictions_total" in m,
              "B: /metrics lacks the cluster index's loads and evictions")
    ctx.log("B: cluster index loads %d, evictions %d" % (
        m.get("newsflow_cluster_index_loads_total", 0),
        m.get("newsflow_cluster_index_evictions_total", 0)))
    # A and B: the same interest records and the same trending windows.
    ia = sorted(json.dumps(v, sort_keys=True) for k, h, v in a["interest"])
    ib = sorted(json.dumps(v, sort_keys=True) for k, h, v in b["interest"])
    ctx.check(ia == ib, "interest-updates of the killed run differ from the uninterrupted one "
              "(%d vs %d records; first difference %r)" % (
                  len(ia), len(ib), next(((x, y) for x, y in zip(ia, ib) if x != y), None)))
    common = sorted(set(ta) & set(tb))
    ctx.check(all(ta[w] == tb[w] for w in common) and len(common) >= len(a["want_trending"]),
              "trending of the killed run differs from the uninterrupted one")
    ctx.check(a["notes"] == b["notes"], "notifications of the killed run differ from the "
              "uninterrupted one (%d vs %d)" % (len(a["notes"]), len(b["notes"])))
    ctx.log("A and B agree: %d interest-updates, %d trending windows, %d clusters, "
            "%d notifications" % (len(ia), len(common), len(feeds.groups), len(a["notes"])))


if __name__ == "__main__":
    acclib.main("analytics", body)
