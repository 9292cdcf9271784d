"""search_api.py — GET /v1/search (src/serve/search.h, search_query.h, route_search in
src/serve/query.c) on a running job; test_search.sh starts, stops and restarts the job and
calls one phase of this script at a time. Python's standard library only.

Phases (the state that phases share is a JSON file, STATE):
  filler FEED                      writes our own feed file (one article, HTML-special title)
  first BASE PID STATE NF FEEDS... the job's first run, on the example feeds and FEED:
      relevance: every article's distinctive title word finds it first; a word in one story's
        title beats the same word in other summaries; every answer's set of stories equals
        what the syntax means (words AND, "phrases" in order within one column, -exclusions),
        evaluated here over the committed articles (GET /v1/articles/{id}); reversed phrases
        find nothing; topic= keeps exactly the stories of articles whose topic vector names
        the topic; since= filters by publication time (the future: nothing); limit=; one
        result per cluster_id; title_html / snippet_html escaped, <mark> only around words
        of the query;
      hostile: ~2,000 generated requests from 8 clients at once (random bytes, %00, invalid
        UTF-8, quotes, FTS5 syntax, 100 KB q, many terms, long words, bad limit/since/topic):
        only 200 or 400 (400 naming the parameter), JSON — or, for a request line over 16 KB,
        libmicrohttpd's own 414 (its connection memory bounds a request's head: a 100 KB q
        never reaches the route) —, each within 2 s, no connection error, no engine error
        (newsflow_search_query_errors_total, newsflow_search_busy_total), resident memory
        (/proc/PID/status) grown by at most 64 MB (+256 MB when ASAN_OPTIONS is set);
      a new job counts no rebuild; saves the reference answers to STATE.
  restart BASE PID STATE           after a clean stop and start: the first answer already has
                                   the same articles, no rebuild, no full re-index
  rebuilt REASON BASE PID STATE ERRLOG
                                   after search.db was corrupted (REASON corrupt) or removed
                                   (missing): rebuilds_total{reason=REASON} == 1, the others
                                   0, the whole index re-indexed, the same answers once
                                   rebuilt (prints what the job logged)
  corrupt pages|all DBFILE         overwrites every page of the index but the first (SQLite
                                   opens it, quick_check fails) or the whole file (not a
                                   database: SQLITE_NOTADB, counted as corrupt too) with
                                   garbage, and removes -wal/-shm
  fresh BASE PID STATE FEED INTERVAL_MS JOB_STDOUT
                                   plants a new article with a unique word in FEED before the
                                   job's next crawl of it (GET /v1/sources), then polls every
                                   20 ms: from the moment the article is committed
                                   (/v1/articles/{id} answers) until /v1/search finds it must
                                   be at most one checkpoint interval + 300 ms, also counted
                                   from the view's committed_at; its `articles` record must be
                                   on the job's stdout
"""
import html
import json
import math
import os
import random
import re
import subprocess
import sys
import threading
import time
import unicodedata
import urllib.error
import urllib.parse
import urllib.request
from email.utils import formatdate

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg, file=sys.stderr)


def done(name, summary):
    print(f"search_api {name}: {summary}")
    if failures:
        print(f"search_api {name}: {len(failures)} failures", file=sys.stderr)
        sys.exit(1)


BASE = None


def get(path, timeout=10):
    """(status, headers, parsed JSON or None, raw body, seconds) of GET BASE+path."""
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(BASE + path, timeout=timeout) as r:
            status, headers, raw = r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        status, headers, raw = e.code, dict(e.headers), e.read()
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = None
    return status, headers, body, raw, time.monotonic() - t0


def qs(params):
    return urllib.parse.urlencode(params, quote_via=urllib.parse.quote)


def search(q, **kw):
    params = {"q": q, "limit": 100}
    params.update(kw)
    return get("/v1/search?" + qs(params))


def metrics():
    """{'name{labels}': value} of GET /metrics."""
    with urllib.request.urlopen(BASE + "/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            try:
                out[k] = float(v)
            except ValueError:
                pass
    return out


def rebuilds(m):
    return {r: m.get(f'newsflow_search_rebuilds_total{{reason="{r}"}}', -1)
            for r in ("missing", "corrupt", "behind")}


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def job_age(pid):
    """Seconds since the process started."""
    with open(f"/proc/{pid}/stat") as f:
        start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        up = float(f.read().split()[0])
    return up - start_ticks / os.sysconf("SC_CLK_TCK")


def wait_until(pred, what, seconds, step=0.05):
    """pred()'s first true value within seconds (a connection refused, while the job starts,
    counts as false)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            got = pred()
        except (urllib.error.URLError, ConnectionError):
            got = None
        if got:
            return got
        time.sleep(step)
    fail(f"timed out ({seconds} s) waiting for {what}")
    return None


# ------------------------------------------------------------------ what the syntax means

def tokens(text):
    """FTS5 unicode61 (remove_diacritics 2), approximately: lower-case runs of letters and
    digits, accents removed."""
    text = unicodedata.normalize("NFKD", text or "").lower()
    text = "".join(c for c in text if not unicodedata.combining(c))
    return re.findall(r"[^\W_]+", text)


def parse_q(q):
    """q read as search_query.h says: [(words, phrase, excluded)] (the test's queries are
    simple: no term limits reached)."""
    terms, i, n, after_word = [], 0, len(q), False
    word = re.compile(r"[^\W_]+")
    while i < n:
        excluded = False
        if q[i] == "-" and not after_word and i + 1 < n and (q[i + 1] == '"' or word.match(q, i + 1)):
            excluded, i = True, i + 1
        after_word = False
        if q[i] == '"':
            j = q.find('"', i + 1)
            j = n if j < 0 else j
            ws = word.findall(q[i + 1:j])
            i = j + 1
            if ws:
                terms.append(([w.lower() for w in ws], True, excluded))
            continue
        m = word.match(q, i)
        if not m:
            i += 1
            continue
        terms.append(([m.group(0).lower()], False, excluded))
        i, after_word = m.end(), True
    return terms


def contains(seq, sub):
    return any(seq[k:k + len(sub)] == sub for k in range(len(seq) - len(sub) + 1))


def matches(article, terms):
    cols = [tokens(article["title"]), tokens(article["summary"])]
    def has(words):
        return any(contains(c, words) for c in cols)
    return (all(has(w) for w, _, ex in terms if not ex) and
            not any(has(w) for w, _, ex in terms if ex))


# ------------------------------------------------------------------ feeds

def feed_xml(items):
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<rss version="2.0"><channel><title>Search test desk</title>',
           "<link>https://search-test.example.org/</link><description>test_search.sh</description>"]
    for it in items:
        out.append("<item><title>%s</title><link>%s</link><pubDate>%s</pubDate>"
                   "<description>%s</description></item>" % (
                       html.escape(it["title"], quote=False), html.escape(it["link"]),
                       formatdate(it["published"], usegmt=True),
                       html.escape(it["summary"], quote=False)))
    out.append("</channel></rss>")
    return "\n".join(out) + "\n"


FILLER = {"title": "Tiny gadget fair: 5 < 6 & \"quoted\" O'Neill's marvel",
          "link": "https://search-test.example.org/a/gadget-fair",
          "summary": "Exhibitors show a gadget & more <gizmos> for \"everyone\" at the fair."}


def write_feed(path, items):
    """The feed file of items; the items also beside it (FEED.items.json) for the next write."""
    json.dump(items, open(path + ".items.json", "w"))
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(feed_xml(items))
    os.replace(tmp, path)  # a new file: a new mtime, and never half-written when crawled


def parse_feed(nf, path):
    """The articles of a feed file as the job's own parser reads them."""
    out = subprocess.run([nf, "parse", path], capture_output=True, check=True, text=True).stdout
    return json.loads(out)["articles"]


# ------------------------------------------------------------------ answer checks

DOC = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                                  "openapi.json")))
ANSWER_KEYS = set(DOC["components"]["schemas"]["SearchAnswer"]["required"])
HIT_KEYS = set(DOC["components"]["schemas"]["SearchHit"]["required"])
TERM_RE = re.compile(r"^[^\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]+( [^\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]+)*$")


def check_shape(body, where):
    """The answer has the documented fields, and the query as read holds no syntax."""
    if not isinstance(body, dict) or set(body) != ANSWER_KEYS:
        fail(f"{where}: fields {sorted(body) if isinstance(body, dict) else body!r} != {sorted(ANSWER_KEYS)}")
        return False
    for h in body["results"]:
        if set(h) != HIT_KEYS:
            fail(f"{where}: a result's fields {sorted(h)} != {sorted(HIT_KEYS)}")
            return False
    qr = body["query"]
    for k in ("words", "phrases", "excluded"):
        for t in qr[k]:
            if not TERM_RE.match(t):
                fail(f"{where}: query.{k} term {t!r} holds punctuation (syntax could reach the engine)")
    if len(qr["words"]) + len(qr["phrases"]) > 16 or len(qr["excluded"]) > 16:
        fail(f"{where}: more than 16 terms kept: {qr}")
    if body["matches"] < len(body["results"]):
        fail(f"{where}: {len(body['results'])} results but {body['matches']} matches")
    return True


MARK = re.compile(r"<mark>(.*?)</mark>", re.S)


def check_html(hit, meta, qwords, where):
    """title_html and snippet_html: escaped text, <mark> only around words of the query."""
    for field, text in (("title_html", meta["title"] or ""), ("snippet_html", meta["summary"] or "")):
        h = hit[field]
        plain = h.replace("<mark>", "").replace("</mark>", "")
        if "<" in plain or ">" in plain or '"' in plain or "'" in plain:
            fail(f"{where}: {field} {h!r} has unescaped markup")
        if re.search(r"&(?!(amp|lt|gt|quot|#39);)", plain):
            fail(f"{where}: {field} {h!r} has an unescaped &")
        un = html.unescape(plain)
        if field == "title_html" and un != text:
            fail(f"{where}: title_html {h!r} is not the title {text!r}")
        if field == "snippet_html" and un.strip("…").strip() not in text:
            fail(f"{where}: snippet_html {h!r} is not a fragment of the summary {text!r}")
        for m in MARK.findall(h):
            tw = tokens(html.unescape(m))
            if not tw or any(t not in qwords for t in tw):
                fail(f"{where}: {field} marks {m!r}, not a word of the query {sorted(qwords)}")
    if not MARK.search(hit["title_html"] + hit["snippet_html"]):
        fail(f"{where}: no <mark> in {hit['title_html']!r} / {hit['snippet_html']!r}")


class Corpus:
    """The committed articles (GET /v1/articles/{id}) of the ids the feeds hold."""

    def __init__(self, ids):
        self.meta = {}
        for aid in ids:
            st, _, body, raw, _ = get("/v1/articles/" + aid)
            if st != 200:
                fail(f"article {aid} of the feeds: {st} {raw[:200]!r}")
                continue
            self.meta[aid] = body

    def expected(self, q, topic=None, since_ms=None):
        terms = parse_q(q)
        return {a["cluster_id"] for a in self.meta.values()
                if matches(a, terms)
                and (topic is None or (a["topics"] or {}).get(topic, 0) > 0)
                and (since_ms is None or published_ms(a) >= since_ms)}


def date_ms(s):
    if not s:
        return None
    s = s.replace("Z", "+00:00")
    from datetime import datetime
    return int(datetime.fromisoformat(s).timestamp() * 1000)


def published_ms(a):
    """serve_state.h: published_at when within [ingested - 30 days, ingested + 5 min]."""
    ing, pub = date_ms(a["ingested_at"]), date_ms(a["published_at"])
    if pub is not None and ing - 30 * 86400000 <= pub <= ing + 300000:
        return pub
    return ing


def run_query(corpus, q, topic=None, since=None, limit=100, expect_top=None):
    """One search, checked against what q means over the corpus. Returns the answer."""
    params = {"limit": limit}
    if topic:
        params["topic"] = topic
    if since:
        params["since"] = since
    st, _, body, raw, _ = search(q, **params)
    where = f"q={q!r} topic={topic} since={since} limit={limit}"
    if st != 200:
        fail(f"{where}: {st} {raw[:200]!r}")
        return None
    if not check_shape(body, where):
        return None
    res = body["results"]
    clusters = [h["cluster_id"] for h in res]
    if len(set(clusters)) != len(clusters):
        fail(f"{where}: two results of one story: {clusters}")
    want = corpus.expected(q, topic, date_ms(since) if since else None)
    got = set(clusters)
    if limit >= len(want) and got != want:
        fail(f"{where}: stories {sorted(got)} != expected {sorted(want)}")
    if len(res) > limit:
        fail(f"{where}: {len(res)} results > limit")
    qwords = {w for ws, _, ex in parse_q(q) if not ex for w in ws}
    for h in res:
        meta = corpus.meta.get(h["article_id"])
        if meta is None:
            fail(f"{where}: result {h['article_id']} is not an article of the feeds")
            continue
        if h["cluster_id"] != meta["cluster_id"] or h["cluster_size"] != meta["cluster_size"]:
            fail(f"{where}: {h['article_id']} cluster {h['cluster_id']}/{h['cluster_size']} != "
                 f"the article's {meta['cluster_id']}/{meta['cluster_size']}")
        for k in ("url", "title", "summary", "published_at", "source_id"):
            if h[k] != meta[k]:
                fail(f"{where}: {h['article_id']} {k} {h[k]!r} != the article's {meta[k]!r}")
        if topic and (meta["topics"] or {}).get(topic, 0) <= 0:
            fail(f"{where}: {h['article_id']} has topics {meta['topics']}, not {topic}")
        check_html(h, meta, qwords, where)
    scores = [h["score"] for h in res]
    if scores != sorted(scores, reverse=True):
        fail(f"{where}: not best first: {scores}")
    if expect_top is not None and (not res or res[0]["title"] != expect_top):
        fail(f"{where}: first result {res[0]['title'] if res else None!r}, expected {expect_top!r}")
    return body


# ------------------------------------------------------------------ hostile requests

FTS = ["NEAR(", "NEAR(a b, 2)", "*", "a*", "title:", "summary:x", "{title summary}:", "{", "}",
       "(", ")", "^", "^a", "AND", "OR", "NOT", "a AND b", "a OR b", "NOT a", "a NOT b", "+",
       ":", "\"", "\"\"", "\"a", "a\"", "-", "--a", "- a", "-\"", "-\"a b", "'", "\\", "\\\"",
       "rowid", "fts", "' OR 1=1 --", "\"a\" \"b", "(((", ")))", "NEAR(\"a\" \"b\", 0)", "a:b",
       "{a}", "*:", "harbour*", "flood NEAR defences", "\u00e9t\u00e9", "\u6f22\u5b57",
       "\u0301", "\u200b", "\ufeff", "\ud7ff", "\uffff", "\U0010ffff", "\U0001f600"]
BAD = [b"\x00", b"\xff", b"\xc0\xaf", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
       b"\xe2\x82", b"\xf0\x9f\x98", b"\x80", b"\xfe\xfe"]


def hostile_case(r):
    """(path, expected statuses, parameter a 400 must name or None)."""
    kind = r.randrange(14)
    if kind == 0:  # random bytes
        b = bytes(r.randrange(256) for _ in range(r.randrange(0, 200)))
        return "/v1/search?q=" + urllib.parse.quote_from_bytes(b, safe=""), None
    if kind == 1:  # FTS5 syntax and quotes, with real words
        parts = [r.choice(FTS + ["harbour", "flood", "central", "twelve", "gadget"])
                 for _ in range(r.randrange(1, 12))]
        q = (" " if r.random() < 0.7 else "").join(parts)
        return "/v1/search?" + qs({"q": q, "limit": r.randint(1, 100)}), None
    if kind == 2:  # just over the limit, and 100 KB (the admin server's request bound, 414)
        n = r.choice([1025, 4096, 100000])
        return "/v1/search?" + qs({"q": r.choice("ab\"-* ") * n}), "q"
    if kind == 3:  # many terms, long phrases, many exclusions (under the limit)
        words = [r.choice(["harbour", "flood", "a", "b", "z9", "\u00e9"]) for _ in range(200)]
        q = r.choice([" ".join(words), '"' + " ".join(words), " -".join(words),
                      " ".join('"%s %s"' % (a, b) for a, b in zip(words[::2], words[1::2]))])
        return "/v1/search?" + qs({"q": q.encode()[:1024].decode("utf-8", "ignore")}), None
    if kind == 4:  # long words
        w = r.choice(["x", "\u00e9", "9", "\u6f22"]) * r.choice([100, 300, 1000])
        return "/v1/search?" + qs({"q": w.encode()[:1024].decode("utf-8", "ignore")}), None
    if kind == 5:  # invalid UTF-8 around a word
        b = r.choice(BAD) + b"harbour" + r.choice(BAD) + r.choice([b"", b" flood", b"\x00flood"])
        return "/v1/search?q=" + urllib.parse.quote_from_bytes(b, safe=""), None
    if kind == 6:  # no word
        q = r.choice(["", "-x", "-\"a b\"", "\"\"", "***", "-", "\"", "(", "-harbour -flood",
                      " ", "\u2014", "%", "&", "=", "+"])
        return "/v1/search?" + qs({"q": q}), "q"
    if kind == 7:  # no q at all (not Q=: libmicrohttpd's argument names ignore case)
        return r.choice(["/v1/search", "/v1/search?", "/v1/search?limit=5", "/v1/search?qq=x",
                         "/v1/search?q", "/v1/search?topic=science"]), "q"
    if kind == 8:  # bad limit
        lim = r.choice(["0", "101", "-1", "abc", "1e2", "", "%205", "5%20", "1.0", "0x10",
                        "99999999999999999999", "%00", "%005"])
        return "/v1/search?q=harbour&limit=" + lim, "limit"
    if kind == 9:  # bad since
        since = r.choice(["yesterday", "2026-13-01T00:00:00Z", "", "x" * 5000, "%00",
                          "2026-11-27T25:00:00Z", "T", "-1", "2026-02-30"])
        return "/v1/search?q=harbour&since=" + since, "since"
    if kind == 10:  # bad topic
        topic = r.choice(["no-such-topic", "Science", "", "x" * 100000, "%00", "%00science",
                          "%FF", "science%20"])
        return "/v1/search?q=harbour&topic=" + topic, "topic"
    if kind == 11:  # random bytes in every parameter
        def junk():
            return urllib.parse.quote_from_bytes(bytes(r.randrange(256) for _ in range(r.randrange(0, 30))), safe="")
        return f"/v1/search?q={junk()}&topic={junk()}&since={junk()}&limit={junk()}", None
    if kind == 12:  # valid, in every combination
        p = {"q": r.choice(["harbour", "central -bank", "\"flood defences\"", "twelve", "gadget fair"])}
        if r.random() < 0.5:
            p["topic"] = r.choice(["science", "economy", "environment", "politics"])
        if r.random() < 0.5:
            p["since"] = r.choice(["2026-11-21T00:00:00Z", "2099-01-01T00:00:00Z", "1970-01-01T00:00:00Z",
                                   "2026-11-21T09:00:00+02:00"])
        if r.random() < 0.5:
            p["limit"] = r.randint(1, 100)
        return "/v1/search?" + qs(p), None
    # duplicate and odd parameters
    return r.choice(["/v1/search?q=a&q=b", "/v1/search?q=harbour&q=", "/v1/search?q=%",
                     "/v1/search?q=%2", "/v1/search?q=%zz", "/v1/search?q=harbour#frag",
                     "/v1/search?&&q=harbour&&", "/v1/search?q=harbour&limit=1&limit=500",
                     "/v1/search?q=" + "%22" * 600, "/v1/search?q=" + "-a%20" * 200]), None


def hostile_client(seed, n, out, bound_s):
    r = random.Random(seed)
    for _ in range(n):
        path, param = hostile_case(r)
        try:
            st, _, body, raw, dt = get(path, timeout=10)
        except Exception as e:  # noqa: BLE001 - a reset or timeout is what is checked
            out["errors"].append(f"{path[:100]!r}: {type(e).__name__}: {e}")
            continue
        out["n"] += 1
        out["max_s"] = max(out["max_s"], dt)
        out["status"][st] = out["status"].get(st, 0) + 1
        if dt > bound_s:
            out["errors"].append(f"{path[:100]!r}: answered in {dt:.2f} s > {bound_s} s")
        if st == 414 and len(path) > 16384:
            continue  # libmicrohttpd's bound on a request's head (its connection memory)
        if st not in (200, 400):
            out["errors"].append(f"{path[:100]!r}: {st} {raw[:200]!r}")
            continue
        if not isinstance(body, dict):
            out["errors"].append(f"{path[:100]!r}: {st} without a JSON object: {raw[:100]!r}")
            continue
        if st == 400:
            if param is not None and body.get("parameter") != param:
                out["errors"].append(f"{path[:100]!r}: 400 names {body.get('parameter')!r}, expected {param}")
            elif body.get("parameter") not in ("q", "limit", "since", "topic"):
                out["errors"].append(f"{path[:100]!r}: 400 names {body.get('parameter')!r}")
        elif param is not None:
            out["errors"].append(f"{path[:100]!r}: 200, expected a 400 naming {param}")
        else:
            check_shape(body, f"hostile {path[:80]!r}")


def hostile(pid, clients=8, per_client=250):
    m0 = metrics()
    rss0 = rss_bytes(pid)
    out = {"n": 0, "errors": [], "status": {}, "max_s": 0.0}
    t0 = time.monotonic()
    th = [threading.Thread(target=hostile_client, args=(1000 + i, per_client, out, 2.0))
          for i in range(clients)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    wall = time.monotonic() - t0
    for e in out["errors"][:15]:
        fail("hostile: " + e)
    if len(out["errors"]) > 15:
        fail(f"hostile: {len(out['errors'])} problems in all")
    rss1 = rss_bytes(pid)
    slack = (64 + (256 if "ASAN_OPTIONS" in os.environ else 0)) * 2**20
    if rss1 - rss0 > slack:
        fail(f"hostile: resident memory grew by {(rss1 - rss0) / 2**20:.0f} MB "
             f"({rss0 / 2**20:.0f} -> {rss1 / 2**20:.0f} MB)")
    m1 = metrics()
    for k in ("newsflow_search_query_errors_total", "newsflow_search_busy_total"):
        if m1.get(k, 0) != m0.get(k, 0):
            fail(f"hostile: {k} went from {m0.get(k)} to {m1.get(k)}")
    try:
        os.kill(pid, 0)
    except OSError:
        fail("hostile: the job died")
    st, _, _, _, _ = search("harbour")
    if st != 200:
        fail(f"hostile: after them, a search answers {st}")
    return (f"{out['n']} hostile requests in {wall:.1f} s ({out['status']}), slowest "
            f"{out['max_s'] * 1000:.0f} ms, RSS {rss0 / 2**20:.0f} -> {rss1 / 2**20:.0f} MB")


# ------------------------------------------------------------------ phases

def ref_queries(corpus):
    return ["harbour", "twelve", "central", "central -bank", '"flood defences"', "gadget",
            "prices", "rail", "library hours", "cobalt", "coral species"]


def answer_ids(body):
    return [h["article_id"] for h in body["results"]] if body else None


def phase_first(pid, state_path, nf, feeds):
    t0 = time.monotonic()
    ids, titles = [], {}
    for f in feeds:
        for a in parse_feed(nf, f):
            if a["article_id"] not in titles:
                ids.append(a["article_id"])
                titles[a["article_id"]] = a["title"]
    n = len(ids)
    # Every article of the feeds committed and indexed.
    def indexed():
        st, _, body, _, _ = search("harbour")
        return st == 200 and body["articles_indexed"] >= n and body
    if not wait_until(indexed, f"{n} articles in the search index", 30):
        done("first", "the articles were never indexed")
    wait_until(lambda: all(get("/v1/articles/" + a)[0] == 200 for a in ids),
               "every article of the feeds committed", 10)
    corpus = Corpus(ids)
    if len(corpus.meta) != n:
        done("first", "articles missing")
    # A new job's first articles are no rebuild (the file is new, but so is the state).
    rb0 = rebuilds(metrics())
    if any(v != 0 for v in rb0.values()):
        fail(f"a new job on an empty state.dir: rebuilds_total {rb0}, expected 0 for every reason")
    queries = 0

    # The first result: each article's distinctive title word (in no other story's title or
    # summary), derived from the feeds as the job's parser reads them.
    tops = 0
    for aid in ids:
        title = titles[aid]
        others = [a for a in corpus.meta.values() if a["cluster_id"] != corpus.meta[aid]["cluster_id"]]
        for w in tokens(title):
            if len(w) >= 4 and not any(w in tokens(o["title"]) + tokens(o["summary"]) for o in others):
                run_query(corpus, w, expect_top=title)
                tops += 1
                queries += 1
                break
    if tops < n - 2:
        fail(f"only {tops} of {n} articles have a distinctive title word")

    # A word in one story's title beats it in others' summaries (title weight 4).
    title_wins = 0
    # Only where BM25 weighs the word (in at most a third of the articles: FTS5's idf of a word
    # in half of them is 0) and the recency factors are alike (published within a day).
    words = sorted({w for a in corpus.meta.values() for w in tokens(a["title"]) + tokens(a["summary"])
                    if len(w) >= 3})
    now_ms = time.time() * 1000
    def recency(a):
        return 0.5 + 0.5 * math.exp(-max(now_ms - published_ms(a), 0) / 3.6e6 / 24)
    for w in words:
        having = [a for a in corpus.meta.values() if w in tokens(a["title"]) + tokens(a["summary"])]
        in_title = {a["cluster_id"] for a in having if w in tokens(a["title"])}
        in_summary = {a["cluster_id"] for a in having if w in tokens(a["summary"])}
        body = run_query(corpus, w)
        queries += 1
        alike = max(map(recency, having)) / min(map(recency, having)) < 1.1
        if len(in_title) == 1 and in_summary - in_title and body and alike and \
                len(having) <= len(corpus.meta) // 3:
            title_wins += 1
            if body["results"][0]["cluster_id"] not in in_title:
                fail(f"q={w}: {body['results'][0]['title']!r} first, but only "
                     f"{sorted(in_title)} has the word in its title")
    if title_wins == 0:
        fail("no word is in one title and in other summaries: the title weight is not checked")

    # Phrases: the words in order (within one column); reversed, nothing (unless the reverse
    # is in some text too, which the expectation covers).
    phrases = 0
    for a in corpus.meta.values():
        for col in ("title", "summary"):
            tw = tokens(a[col])
            for i in range(len(tw) - 1):
                fwd = f'"{tw[i]} {tw[i + 1]}"'
                rev = f'"{tw[i + 1]} {tw[i]}"'
                b = run_query(corpus, fwd)
                if b and a["cluster_id"] not in {h["cluster_id"] for h in b["results"]}:
                    fail(f"q={fwd}: {a['title']!r} not found")
                run_query(corpus, rev)
                phrases += 2
    queries += phrases
    for q, want in (('"flood defences"', 1), ('"defences flood"', 0), ('"central bank"', 1),
                    ('"bank central"', 0), ('"twelve port cities"', 1), ('"cities port twelve"', 0),
                    ('"gadget fair', 1), ('"fair gadget', 0)):
        b = run_query(corpus, q)
        queries += 1
        if b and len(b["results"]) != want:
            fail(f"q={q}: {len(b['results'])} results, expected {want}")

    # Exclusions.
    for q, want in (("central -bank", ["Central library extends evening hours"]),
                    ("twelve -flood", ["Twelve kilometres of protected bike lanes approved"]),
                    ('twelve -"port cities"', ["Twelve kilometres of protected bike lanes approved"]),
                    ("cities -harbour -twelve", []), ("harbour -Harbour", [])):
        b = run_query(corpus, q)
        queries += 1
        if b and [h["title"] for h in b["results"]] != want:
            fail(f"q={q}: {[h['title'] for h in b['results']]} != {want}")
    for w in words[:40]:  # a word and its own exclusion: nothing
        run_query(corpus, f"{w} -{w}")
        queries += 1

    # topic= keeps exactly the stories whose articles' vectors name the topic.
    st, _, tb, _, _ = get("/v1/topics")
    all_topics = tb["topics"] if st == 200 else []
    used = sorted({t for a in corpus.meta.values() for t in (a["topics"] or {})})
    unused = [t for t in all_topics if t not in used][:2]
    topic_checks = 0
    for q in ["twelve", "central", "cities", "harbour", "prices", "gadget", "rates", "species"]:
        for t in used + unused:
            run_query(corpus, q, topic=t)
            topic_checks += 1
    queries += topic_checks

    # since=: by publication time; the future finds nothing.
    pubs = sorted(published_ms(a) for a in corpus.meta.values())
    mid = pubs[len(pubs) // 2]
    mid_s = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(mid / 1000)) + ".%03dZ" % (mid % 1000)
    for q in ["twelve", "central", "cities", "harbour", "gadget"]:
        for since in (mid_s, "1970-01-01T00:00:00Z"):
            run_query(corpus, q, since=since)
        b = run_query(corpus, q, since="2099-01-01T00:00:00Z")
        if b and b["results"]:
            fail(f"q={q} since=2099: {len(b['results'])} results")
        queries += 3

    # limit=: the best ones.
    full = run_query(corpus, "twelve")
    one = run_query(corpus, "twelve", limit=1)
    if full and one and answer_ids(one) != answer_ids(full)[:1]:
        fail(f"q=twelve limit=1: {answer_ids(one)} != the first of {answer_ids(full)}")

    # One result per story where two articles of a story match.
    b = run_query(corpus, "harbour")
    if b and (b["matches"] < 2 or len(b["results"]) != 1 or b["results"][0]["cluster_size"] < 2):
        fail(f"q=harbour: {b['matches']} matches, {len(b['results'])} results: the two articles "
             "of the harbour story should be one result")

    # Escaping, exactly (our own feed's title holds < & " ').
    b = run_query(corpus, "gadget")
    if b and b["results"]:
        want = "Tiny <mark>gadget</mark> fair: 5 &lt; 6 &amp; &quot;quoted&quot; O&#39;Neill&#39;s marvel"
        if b["results"][0]["title_html"] != want:
            fail(f"q=gadget: title_html {b['results'][0]['title_html']!r} != {want!r}")
    b = run_query(corpus, "freight")
    if b and b["results"] and "&amp; <mark>freight</mark>" not in b["results"][0]["snippet_html"]:
        fail(f"q=freight: snippet_html {b['results'][0]['snippet_html']!r}")
    relevance_s = time.monotonic() - t0

    hostile_summary = hostile(pid)

    refs = {}
    for q in ref_queries(corpus):
        st, _, body, raw, _ = search(q)
        refs[q] = answer_ids(body) if st == 200 else None
        if not refs[q]:
            fail(f"reference q={q}: {st} {raw[:200]!r}: no results")
    json.dump({"ids": ids, "n": n, "refs": refs, "nf": nf}, open(state_path, "w"))
    done("first", f"{n} articles; {queries} relevance queries ({tops} first results by "
         f"distinctive words, {title_wins} title-over-summary, {phrases} phrase, {topic_checks} "
         f"topic) in {relevance_s:.1f} s; {hostile_summary}")


def same_answers(refs, seconds):
    """Polls the reference queries until they give the reference answers. The time it took."""
    t0 = time.monotonic()
    while True:
        diff = []
        for q, want in refs.items():
            st, _, body, raw, _ = search(q)
            if st != 200:
                diff.append(f"q={q}: {st}")
                continue
            got = answer_ids(body)
            if sorted(got) != sorted(want) or got[:1] != want[:1]:
                diff.append(f"q={q}: {got} != {want}")
        if not diff:
            return time.monotonic() - t0
        if time.monotonic() - t0 > seconds:
            for d in diff[:5]:
                fail("answers after the rebuild: " + d)
            return None
        time.sleep(0.05)


def first_answer(pid, seconds=30):
    """Polls until search answers 200 (the index open): the answer, and the job's age then."""
    got = wait_until(lambda: (lambda r: r[0] == 200 and r[2])(search("harbour")),
                     "search to answer after the start", seconds, 0.02)
    return got, job_age(pid)


def settle(body0):
    """Waits until the index followed two views past the first answer's."""
    e0 = body0["epoch"] if body0 else 0
    wait_until(lambda: (lambda r: r[0] == 200 and r[2]["indexed_epoch"] >= e0 + 2)(search("harbour")),
               "the index to follow new views", 15)


def phase_restart(pid, state_path):
    st = json.load(open(state_path))
    body0, t_open = first_answer(pid)
    # Right after the restart: the first answers already have every article (no rebuild).
    bad = []
    for q, want in st["refs"].items():
        s, _, body, raw, _ = search(q)
        got = answer_ids(body) if s == 200 else None
        if got is None or sorted(got) != sorted(want) or got[:1] != want[:1]:
            bad.append(f"q={q}: {s} {got} != {want}")
    for b in bad[:5]:
        fail("right after the restart: " + b)
    if body0 and body0["articles_indexed"] != st["n"]:
        fail(f"right after the restart: {body0['articles_indexed']} articles indexed, not {st['n']}")
    settle(body0)
    m = metrics()
    rb = rebuilds(m)
    if any(v != 0 for v in rb.values()):
        fail(f"after a clean restart: rebuilds_total {rb}, expected 0 for every reason")
    idx = m.get("newsflow_search_indexed_total", -1)
    if not 0 <= idx < st["n"]:
        fail(f"after a clean restart: newsflow_search_indexed_total {idx}, expected < {st['n']}")
    done("restart", f"search answered {t_open:.2f} s after the job started, the same "
         f"{len(st['refs'])} answers at once; rebuilds {rb}; indexed_total {idx:.0f} (of {st['n']})")


def search_log_lines(errlog, pid):
    """This run's log lines of component search (the log holds every run's)."""
    since = time.time() - job_age(pid) - 1
    out = []
    for line in open(errlog, errors="replace"):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("component") == "search" and \
                date_ms(rec.get("ts")) / 1000 >= since:
            out.append(rec)
    return out


def phase_rebuilt(reason, pid, state_path, errlog):
    st = json.load(open(state_path))
    body0, t_open = first_answer(pid)
    took = same_answers(st["refs"], 15)
    wait_until(lambda: rebuilds(metrics())[reason] >= 1, f"rebuilds_total{{reason={reason}}}", 10)
    settle(body0)
    m = metrics()
    rb = rebuilds(m)
    want = {r: (1 if r == reason else 0) for r in rb}
    if rb != want:
        fail(f"after the index was {reason}: rebuilds_total {rb} != {want}")
    idx = m.get("newsflow_search_indexed_total", -1)
    if idx < st["n"]:
        fail(f"after the index was {reason}: indexed_total {idx} < {st['n']}: not rebuilt whole")
    logs = search_log_lines(errlog, pid)
    said = " ".join(str(logs[0].get("error", logs[0].get("msg"))).split())[:160] if logs else "nothing logged"
    done(f"rebuilt {reason}", f"search answered {t_open:.2f} s after the job started, the "
         f"same answers after {took if took is None else round(took, 2)} s more; rebuilds {rb}; "
         f"indexed_total {idx:.0f}; the log: {said}")


def phase_corrupt(how, db):
    """pages: every page but the first (the schema, the header) garbage, so SQLite opens the
    file and quick_check finds every table broken (overwriting only some pages could hit free
    ones: no corruption to find); all: the whole file, header included (not a database)."""
    size = os.path.getsize(db)
    with open(db, "r+b") as f:
        hdr = f.read(100)
        page = int.from_bytes(hdr[16:18], "big")
        page = 65536 if page == 1 else page
        page = 0 if how == "all" else page
        r = random.Random(3)
        f.seek(page)
        f.write(bytes(r.randrange(256) for _ in range(max(size - page, 0))))
    removed = []
    for ext in ("-wal", "-shm"):
        if os.path.exists(db + ext):
            removed.append(ext)
            os.unlink(db + ext)
    print(f"search_api corrupt: {db}: {size} bytes, pages {page}..{size} overwritten, removed {removed or 'no -wal/-shm'}")


def phase_fresh(pid, state_path, feed, interval_ms, out_path):
    st = json.load(open(state_path))
    word = "plantedq%06d" % random.randrange(10**6)
    item = {"title": f"Observatory logs {word} signal over the bay",
            "link": f"https://search-test.example.org/a/{word}",
            "summary": f"The {word} reading arrived overnight and was confirmed twice.",
            "published": time.time() - 60}
    # The crawl's next fetch of our feed: the article must be written before it, at least a
    # second before (else the fetch after, a crawl interval later).
    def next_fetch():
        s, _, b, _, _ = get("/v1/sources")
        srcs = [x for x in (b or {}).get("sources", []) if x["url"].endswith("/" + os.path.basename(feed))]
        return srcs[0]["next_crawl_at_ms"] if s == 200 and srcs else None
    due = wait_until(lambda: (lambda d: d and d - time.time() * 1000 > 1500 and d)(next_fetch()),
                     "a crawl of our feed more than 1.5 s away", 75, 0.2)
    if not due:
        done("fresh", "no crawl to wait for")
    write_feed(feed, json.load(open(feed + ".items.json")) + [item])
    nf = st["nf"]
    planted = [a for a in parse_feed(nf, feed) if word in a["title"]]
    aid = planted[0]["article_id"]
    wait_s = due / 1000 - time.time()
    time.sleep(max(wait_s - 1.0, 0))
    # Poll both: the article in the committed state, and in the search answers.
    t_commit = t_found = None
    commit_epoch = committed_at = found_body = None
    end = time.monotonic() + 30
    polls = 0
    while time.monotonic() < end and t_found is None:
        t = time.time()
        if t_commit is None:
            s, _, b, _, _ = get("/v1/articles/" + aid)
            if s == 200:
                t_commit, commit_epoch, committed_at = t, b["epoch"], date_ms(b["committed_at"]) / 1000
        s, _, b, _, _ = search(word)
        if s == 200 and any(h["article_id"] == aid for h in b["results"]):
            t_found, found_body = time.time(), b
            break
        polls += 1
        time.sleep(0.02)
    if t_found is None:
        done("fresh", f"the planted article ({word}) was never found (committed: {t_commit is not None})")
    if t_commit is None:  # found by search before /v1/articles answered: it is committed
        t_commit = t_found
    delay = t_found - t_commit
    delay_job = t_found - committed_at if committed_at else delay
    bound = interval_ms / 1000 + 0.3
    if max(delay, delay_job) > bound:
        fail(f"fresh: the article was found {delay * 1000:.0f} ms after /v1/articles showed it "
             f"({delay_job * 1000:.0f} ms after its view was published): > {bound * 1000:.0f} ms")
    h = [x for x in found_body["results"] if x["article_id"] == aid][0]
    if f"<mark>{word}</mark>" not in h["title_html"]:
        fail(f"fresh: title_html {h['title_html']!r}")
    # The sink's line for the epoch may reach stdout a moment after the view that search reads
    # is published: wait for it rather than look once.
    def planted_on_stdout():
        return any(json.loads(l).get("topic") == "articles" for l in open(out_path) if word in l)
    end = time.monotonic() + 10
    while not planted_on_stdout() and time.monotonic() < end:
        time.sleep(0.1)
    if not planted_on_stdout():
        fail("fresh: no committed `articles` record of the planted article on stdout")
    done("fresh", f"planted '{word}' ({aid}) crawled {t_commit - due / 1000:+.2f} s from its "
         f"due time; committed at epoch {commit_epoch}; found by search {delay * 1000:.0f} ms "
         f"after /v1/articles showed it, {delay_job * 1000:.0f} ms after its view was "
         f"published (bound {bound * 1000:.0f} ms; {polls} polls of 20 ms)")


def main():
    global BASE
    phase = sys.argv[1]
    if phase == "filler":
        write_feed(sys.argv[2], [dict(FILLER, published=time.time() - 3600)])
        return
    if phase == "corrupt":
        phase_corrupt(sys.argv[2], sys.argv[3])
        return
    if phase == "rebuilt":
        reason, BASE, pid, state = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
        phase_rebuilt(reason, pid, state, sys.argv[6])
        return
    BASE, pid, state = sys.argv[2], int(sys.argv[3]), sys.argv[4]
    if phase == "first":
        nf, feeds = sys.argv[5], sys.argv[6:]
        phase_first(pid, state, nf, feeds)
    elif phase == "restart":
        phase_restart(pid, state)
    elif phase == "fresh":
        phase_fresh(pid, state, sys.argv[5], int(sys.argv[6]), sys.argv[7])
    else:
        sys.exit(f"unknown phase {phase}")


if __name__ == "__main__":
    main()
