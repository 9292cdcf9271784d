"""`newsflow sink postgres` checked against a reference model (src/sink/, schema
src/sink/migrations/0001_seed_model.sql).

On Apache Kafka (NF_TEST_BROKER=kafka:HOST:PORT) and PostgreSQL (NF_TEST_PG=<conninfo>), each on
a namespace of the test's own: a unique topic prefix (topics made by `newsflow topics create`)
and a database created for the run (dropped at the end unless NF_KEEP_TMP).

Three waves of records are produced with kcat into the job's output topics (articles,
story-clusters, interest-updates, trending, read-events with postgres.read_events=true) while
one sink runs; after each wave the test waits until newsflow_pgsink_records_total and
newsflow_pgsink_dead_letters_total account for every record produced so far. The waves give an
order across batches where the model needs one: a story merge lands before a member of the
absorbed cluster arrives (wave 2 then 3) and after members of another (wave 1 then 2); a chain
X->Y->Z spans waves 2 and 3, another P->Q->R lies in one wave.

Wave 2 interleaves poison records with good ones: an interest version of 1e30 (bigint out of
range), an article whose published_at is "not a date", a value that is not JSON, a JSON value
with \\u0000 in a string, a tombstone on articles, a trending item with a negative score
(a CHECK). Each must come out on <prefix>dead-letters (read_committed) with stage
sink-postgres, its origin and an error naming the problem, be counted in
newsflow_pgsink_dead_letters_total, and the good records after it must land. An undecodable read
event is skipped (newsflow_pgsink_skipped_total), not dead-lettered: the job dead-letters those;
a reader's settings (follow, mute ...) are skipped too (newsflow_pgsink_settings_skipped_total).

Then every table is compared with the model computed here from the records (not by running
the sink's SQL): article (every field, categories as text[], topics jsonb), article_topic,
story_cluster (merged_into = the root), story_member (cluster_id = the root after all merges),
article.cluster_id, user_interest (the latest version per reader), user_interest_version
(every version once), trending_snapshot and trending_item (ranks from 1, scores), read_event
(once per event_id, computed as the job does when absent). The seed's four queries are run on
it: an article by URL, the recent articles of a topic, a reader's interest, a story's members.

Last, the sink is stopped (SIGTERM, exit 0) and started again: it lands nothing (no record, no
duplicate, the tables unchanged) and newsflow_sink_offsets equals the topics' end offsets.

Usage: python3 sink_model.py NEWSFLOW SRCDIR
"""
import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recovery"))
import acclib  # noqa: E402

KINDS = ("articles", "story-clusters", "interest-updates", "trending", "read-events")
PARTITIONS = 4
NOW_MS = int(time.time() * 1000)
DAY_MS = 86400 * 1000


def iso(ms):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + ".%03dZ" % (ms % 1000)


def aid(tag):
    return hashlib.sha256(tag.encode()).hexdigest()[:32]


def dumps(v):
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


# ------------------------------------------------------------------------------ PostgreSQL

class Pg:
    """A database of the test's own on the fixture's server (NF_TEST_PG)."""

    def __init__(self, ctx, name):
        self.ctx = ctx
        base = os.environ.get("NF_TEST_PG", "").strip()
        if not base:
            ctx.fail("NF_TEST_PG is not set: ctest's postgres fixture sets it (the conninfo of "
                     "scripts/postgres.sh's server)")
        self.base = base
        self.db = "nft_%s_%d_%s" % (name, os.getpid(), os.urandom(3).hex())
        self.dsn = self._with_db(self.db)
        self.psql("CREATE DATABASE %s" % self.db, dsn=base)
        ctx.log("database %s created (%s)" % (self.db, self.dsn))

    def _with_db(self, db):
        if re.search(r"\bdbname=\S+", self.base):
            return re.sub(r"\bdbname=\S+", "dbname=%s" % db, self.base)
        return self.base + " dbname=%s" % db

    def psql(self, sql, dsn=None):
        p = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                            "-d", dsn or self.dsn, "-c", sql],
                           capture_output=True, timeout=120)
        if p.returncode != 0:
            self.ctx.fail("psql failed (%d) on %r: %s" % (p.returncode, sql[:300],
                                                          p.stderr.decode()[-600:]))
        return p.stdout.decode()

    def rows(self, sql):
        """The rows of sql as a list of dicts (json_agg)."""
        out = self.psql("SELECT COALESCE(json_agg(q), '[]'::json) FROM (%s) q" % sql).strip()
        return json.loads(out)

    def scalar(self, sql):
        return self.psql(sql).strip()

    def drop(self):
        if os.environ.get("NF_KEEP_TMP"):
            self.ctx.log("keeping database %s" % self.db)
            return
        subprocess.run(["psql", "-X", "-q", "-d", self.base, "-c",
                        "DROP DATABASE IF EXISTS %s WITH (FORCE)" % self.db],
                       capture_output=True, timeout=120)


def lit(s):
    return "'" + s.replace("'", "''") + "'"


# ------------------------------------------------------------------------------ the sink

class Sink:
    """One `newsflow sink postgres` process; its JSON-lines log in a file. Quacks like
    acclib.Job for ctx.wait_for and the failure dumps (proc, tag, expect_exit, dump_tail)."""

    def __init__(self, ctx, broker, dsn, group, tag):
        self.ctx, self.tag = ctx, tag
        self.log_path = ctx.path("%s.err" % tag)
        self.expect_exit = False
        self._port = None
        argv = [ctx.nf, "sink", "postgres",
                "--set", "kafka.brokers=%s" % broker.bootstrap,
                "--set", "kafka.topic_prefix=%s" % broker.prefix,
                "--set", "postgres.dsn=%s" % dsn,
                "--set", "postgres.group_id=%s" % group,
                "--set", "postgres.read_events=true",
                "--set", "admin.port=0"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("NEWSFLOW_")}
        self._errf = open(self.log_path, "wb")
        self.proc = ctx.spawn(argv, env=env, stdin=subprocess.DEVNULL,
                              stdout=self._errf, stderr=self._errf)
        self.pid = self.proc.pid
        ctx.jobs.append(self)
        ctx.log("%s started (pid %d), group %s" % (tag, self.pid, group))

    def lines(self):
        return acclib.Job.lines(self)

    def msgs(self, msg):
        return [o for o in self.lines() if o.get("msg") == msg]

    ROUTINE = ()

    def dump_tail(self, f, n=25):
        acclib.Job.dump_tail(self, f, n)

    def gdb_stacks(self, depth):
        return acclib.Job.gdb_stacks(self, depth)

    def dump_stacks(self, f):
        acclib.Job.dump_stacks(self, f)

    def port(self):
        if not self._port:
            for o in self.msgs("landing the job's outputs in PostgreSQL"):
                if o.get("port"):
                    self._port = int(o["port"])
        return self._port

    def get(self, path):
        """(status, body) of GET path on the admin port, or (None, why)."""
        port = self.port()
        if not port:
            return None, "admin port not logged yet"
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except Exception as e:  # not listening yet, a reset
            return None, repr(e)

    def metrics(self):
        """{(name, topic label or ""): value}, or None."""
        st, body = self.get("/metrics")
        if st != 200:
            return None
        vals = {}
        for l in body.split("\n"):
            m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)", l)
            if not m or l.startswith("#"):
                continue
            t = re.search(r'topic="([^"]*)"', m.group(2) or "")
            key = (m.group(1), t.group(1) if t else "")
            try:
                vals[key] = vals.get(key, 0.0) + float(m.group(3))
            except ValueError:
                pass
        return vals

    def terminate(self, timeout=60.0):
        self.expect_exit = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.ctx.fail("%s did not exit within %.0fs of SIGTERM" % (self.tag, timeout), self)


# ------------------------------------------------------------------------------ the records

class Item:
    """One record to produce: key, value text (None: a tombstone), the parsed value for the
    model (None for a poison), and for a poison what its dead letter's error must name."""

    def __init__(self, topic, key, value, poison=None, obj=None):
        self.topic, self.key, self.value, self.poison = topic, key, value, poison
        self.obj = obj
        self.pos = None  # (partition, offset), read back after producing


def good(topic, key, obj):
    return Item(topic, key, dumps(obj), obj=obj)


class Data:
    """The records of the three waves and the model they imply."""

    def __init__(self):
        self.rnd = random.Random(20261129)
        self.waves = [[], [], []]  # lists of Items, in produce order per topic
        self.articles()
        self.stories()
        self.interests()
        self.trending()
        self.read_events()

    def add(self, wave, item):
        self.waves[wave].append(item)

    # ---- articles: 280 of them; 40 updated (a second record, later); 20 only in wave 3
    TOPIC_NAMES = ("politics", "science", "sports", "tech", "health", "climate")
    CATS = ("World", "Economy", "Science & Tech", "O'Brien's \"desk\"", "a,b", "{braces}",
            "back\\slash", "tab\there", "Économie", "")

    def article(self, i, version):
        r = random.Random(i * 31 + version)
        pub = NOW_MS - 2 * DAY_MS + i * 61000 + (version - 1) * 13000  # unique per article
        upd = pub + version * 60000
        topics = {}
        if i % 17 != 0:  # some articles have no topic
            for t in r.sample(self.TOPIC_NAMES, r.randint(1, 3)):
                topics[t] = round(r.uniform(0.05, 1.0), 4)
        cats = r.sample(self.CATS, r.randint(0, 3))
        return {
            "article_id": aid("article-%d" % i),
            "url": "https://news.example.org/%d/story-%d" % (i % 7, i),
            "link": None if i % 11 == 0 else "https://news.example.org/%d/story-%d?ref=feed" %
            (i % 7, i),
            "guid": None if i % 5 == 0 else "guid-%d" % i,
            "source_id": "src-%d" % (i % 9),
            "feed_url": "https://news.example.org/feed-%d.xml" % (i % 9),
            "title": "Story %d v%d: \"quoted\" \\ back-slashed, ünïcode ✓" % (i, version),
            "summary": "Summary of %d\nsecond line\twith a tab" % i,
            "body": "Body %d v%d " % (i, version) + "lorem ipsum " * r.randint(1, 30),
            "authors": [{"name": "Author %d" % (i % 13), "email": None}] if i % 3 else [],
            "categories": cats,
            "language": None if i % 10 == 0 else "en",
            "published_at": iso(pub),
            "updated_at": iso(upd),
            "date_fallback": i % 23 == 0,
            "ingested_at": iso(upd + 5000),
            "content_hash": hashlib.sha256(b"%d-%d" % (i, version)).hexdigest(),
            "category_labels": [{"category": c, "confidence": 0.75} for c in cats[:1]],
            "topics": topics,
        }

    def articles(self):
        for i in range(260):
            self.add(0, good("articles", aid("article-%d" % i), self.article(i, 1)))
        v2 = list(range(0, 260, 6))[:40]
        # wave 2: half of the updates, the poisons between them, then more; wave 3 the rest
        bad_date = self.article(9001, 1)
        bad_date["article_id"] = aid("poison-date")
        bad_date["published_at"] = "not a date"
        nul = self.article(9002, 1)
        nul["article_id"] = aid("poison-nul")
        nul["title"] = "a\u0000b"
        w2 = [good("articles", aid("article-%d" % i), self.article(i, 2)) for i in v2[:20]]
        w2.insert(3, Item("articles", bad_date["article_id"], dumps(bad_date),
                          poison='invalid input syntax for type timestamp with time zone: '
                                 '"not a date"'))
        w2.insert(8, Item("articles", nul["article_id"], json.dumps(nul),  # \u0000 escaped
                          poison="unsupported Unicode escape sequence"))
        # a tombstone of an article that exists: the sink keeps the row, dead-letters the null
        w2.insert(12, Item("articles", aid("article-5"), None, poison="tombstone"))
        for it in w2:
            self.add(1, it)
        for i in range(260, 270):
            self.add(1, good("articles", aid("article-%d" % i), self.article(i, 1)))
        for i in v2[20:]:
            self.add(2, good("articles", aid("article-%d" % i), self.article(i, 2)))
        for i in range(270, 280):
            self.add(2, good("articles", aid("article-%d" % i), self.article(i, 1)))

    # ---- story-clusters
    def story(self, i, cluster, action, merged_from=(), ts=None):
        art = aid("article-%d" % i)
        return good("story-clusters", art, {
            "article_id": art, "cluster_id": cluster, "action": action,
            "similarity": 1 if action == "new" else round(self.rnd.uniform(0.5, 0.99), 3),
            "merged_from": list(merged_from),
            "ts": iso(ts if ts is not None else NOW_MS - DAY_MS + i * 7000)})

    def stories(self):
        heads = []
        i = 0
        while i < 200:  # wave 1: clusters of 1..6 among articles 0..199
            size = self.rnd.randint(1, 6)
            head = aid("article-%d" % i)
            heads.append(head)
            self.add(0, self.story(i, head, "new"))
            for j in range(i + 1, min(i + size, 200)):
                self.add(0, self.story(j, head, "joined"))
            i += size
        self.heads = heads
        A, B, D, E = heads[1], heads[0], heads[2], heads[3]
        X, Y, Z = heads[4], heads[5], heads[6]
        P, Q, R = heads[7], heads[8], heads[9]
        late = aid("article-250")  # a cluster merged before its own "new" record arrives
        # wave 2: B and D, E into A (their members arrived in wave 1: the merge comes after
        # them); X into Y (the chain's first step); a member of D joining in the same wave; a
        # merge of the cluster of article 250 before that cluster's record
        self.add(1, self.story(200, A, "merged", [B]))
        self.add(1, self.story(201, A, "merged", [D, E]))
        self.add(1, self.story(202, D, "joined"))
        self.add(1, self.story(203, Y, "merged", [X]))
        self.add(1, self.story(204, A, "merged", [late]))
        for j in range(205, 215):  # plain joins of wave-1 clusters
            self.add(1, self.story(j, heads[10 + j - 205], "joined"))
        # wave 3: a member of B arrives after B went into A; Y into Z (X -> Y -> Z); a member
        # of X after both; the chain P -> Q -> R within one wave; 250's own record
        self.add(2, self.story(215, B, "joined"))
        self.add(2, self.story(216, Z, "merged", [Y]))
        self.add(2, self.story(217, X, "joined"))
        self.add(2, self.story(218, Q, "merged", [P]))
        self.add(2, self.story(219, R, "merged", [Q]))
        self.add(2, self.story(250, late, "new"))
        self.add(2, self.story(251, late, "joined"))
        # story records of articles the articles topic never had
        for j in range(300, 306):
            self.add(2, self.story(j, heads[20], "joined"))
        # a second record of an article: it moves from its cluster to another (last wins)
        self.add(2, self.story(30, heads[30], "joined"))
        # the non-JSON poison
        self.add(1, Item("story-clusters", aid("poison-json"), "{not json: at all",
                         poison="invalid input syntax for type json"))
        self.chains = {"A": A, "B": B, "D": D, "E": E, "X": X, "Y": Y, "Z": Z,
                       "P": P, "Q": Q, "R": R, "late": late}

    # ---- interest-updates: 20 readers, versions 1..k over the waves
    def interests(self):
        self.dup_versions = 0
        for u in range(20):
            uid = "u-%02d" % u if u != 7 else "ü-\"7\""
            k = 3 + (u * 7) % 10
            cuts = (k // 3, 2 * k // 3)
            for v in range(1, k + 1):
                wave = 0 if v <= cuts[0] else 1 if v <= cuts[1] else 2
                r = random.Random(u * 1000 + v)
                vec = {t: round(r.uniform(0, 1), 5) for t in r.sample(self.TOPIC_NAMES, 2)} \
                    if v > 1 else {}
                rec = {"user_id": uid, "version": v, "vector": vec,
                       "updated_at": iso(NOW_MS - DAY_MS + u * 60000 + v * 1000)}
                self.add(wave, good("interest-updates", uid, rec))
                if u == 1 and v == cuts[0] + 1:
                    # an exact copy of an earlier version: stored once, counted a duplicate
                    first = dict(rec, version=1, vector={},
                                 updated_at=iso(NOW_MS - DAY_MS + u * 60000 + 1000))
                    self.add(1, good("interest-updates", uid, first))
                    self.dup_versions += 1
                if u == 2 and v == k:
                    # a stale copy after the latest version (a replayed record): stored once,
                    # and the reader's latest interest stays version k
                    old = random.Random(u * 1000 + v - 1)
                    self.add(wave, good("interest-updates", uid, {
                        "user_id": uid, "version": v - 1,
                        "vector": {t: round(old.uniform(0, 1), 5)
                                   for t in old.sample(self.TOPIC_NAMES, 2)},
                        "updated_at": iso(NOW_MS - DAY_MS + u * 60000 + (v - 1) * 1000)}))
                    self.dup_versions += 1
                if u == 3 and v == cuts[0] + 1:
                    self.add(1, Item("interest-updates", uid,
                                     '{"user_id":"u-03","version":1e30,"vector":{},'
                                     '"updated_at":"%s"}' % iso(NOW_MS),
                                     poison="out of range for type bigint"))

    # ---- trending: 45 windows, 30 s apart
    def trending(self):
        end0 = (NOW_MS // 30000) * 30000 - 50 * 30000
        for w in range(45):
            end = end0 + w * 30000
            r = random.Random(w)
            n = 0 if w == 10 else r.randint(1, 8)
            scores = sorted((round(r.uniform(0, 500), 3) for _ in range(n)), reverse=True)
            items = [{"article_id": aid("article-%d" % r.randrange(280)), "score": s}
                     for s in scores]
            if w >= 5:  # by story (a job of version 2); the first windows as an older job's
                for x in items:
                    x["cluster_id"] = aid("story-%d" % r.randrange(40))
                    x["articles"] = r.randint(1, 5)
            rec = {"window_start": iso(end - 3600000), "window_end": iso(end), "items": items}
            self.add(0 if w < 15 else 1 if w < 30 else 2, good("trending", iso(end), rec))
            if w == 20:  # a negative score: the CHECK on trending_item refuses it
                bad_end = end0 + 46 * 30000 + 7
                bad = {"window_start": iso(bad_end - 3600000), "window_end": iso(bad_end),
                       "items": [{"article_id": aid("article-1"), "score": 3},
                                 {"article_id": aid("article-2"), "score": -1}]}
                self.add(1, Item("trending", iso(bad_end), dumps(bad),
                                 poison='violates check constraint "trending_item_score_check"'))

    # ---- read-events: 240, some with event ids, some re-sent
    def read_events(self):
        sent = []
        self.dup_events = 0
        self.bad_events = 0
        for n in range(240):
            r = random.Random(7000 + n)
            ev = {"user_id": "u-%02d" % r.randrange(20),
                  "article_id": aid("article-%d" % r.randrange(280))}
            if n % 4:
                ev["session_id"] = "s-%d" % n
            if n % 9 == 0:
                ev["kind"] = r.choice(["save", "share", "dislike", "hide"])
            if n % 5 == 0:
                ev["event_id"] = "ev-%d" % n
            ts = NOW_MS - DAY_MS // 2 + n * 1001
            ev["ts"] = ts if n % 3 else iso(ts)  # epoch ms or RFC 3339: the same instant
            if n % 4 == 0 and "event_id" not in ev:
                # no session: the event id is of user, article and "" (a resend is the same)
                ev["session_id"] = "s0-%d" % n
            wave = 0 if n < 80 else 1 if n < 160 else 2
            self.add(wave, good("read-events", ev["user_id"], ev))
            sent.append((wave, ev, ts))
        # resends: the same event later (an id given or computed; ts re-encoded)
        for wave, ev, ts in sent[::10]:
            again = dict(ev)
            again["ts"] = iso(ts) if isinstance(ev["ts"], int) else ts
            self.add(min(wave + 1, 2), good("read-events", ev["user_id"], again))
            self.dup_events += 1
        # undecodable for the sink: skipped (the job dead-letters such input itself)
        self.add(1, Item("read-events", "u-01", '{"user_id":"u-01","ts":1}', poison="skip"))
        self.bad_events += 1
        # a reader's settings (follow, mute ...: issue 45): not read_event rows, skipped and
        # counted apart
        self.settings_events = 0
        for w, kind in enumerate(("follow", "mute", "unfollow")):
            rec = {"user_id": "u-02", "kind": kind, "topic": "science", "ts": NOW_MS - 1000 + w}
            self.add(w, Item("read-events", "u-02", dumps(rec), poison="skip"))
            self.settings_events += 1

    # ------------------------------------------------------------------ the model

    def all_items(self):
        return [it for w in self.waves for it in w]

    def good_items(self, topic):
        return [it for it in self.all_items() if it.topic == topic and it.poison is None]

    def model(self):
        m = {}
        # articles: the last record of each id wins
        arts = {}
        for it in self.good_items("articles"):
            arts[it.obj["article_id"]] = it.obj
        m["articles"] = arts
        m["article_topic"] = sorted((t, a["article_id"], w, a["published_at"])
                                    for a in arts.values() for t, w in a["topics"].items())
        # stories: merged_from -> cluster_id edges; a cluster's root follows them
        parent = {}
        clusters = set()
        last = {}
        for it in self.good_items("story-clusters"):
            o = it.obj
            clusters.add(o["cluster_id"])
            for f in o["merged_from"]:
                parent[f] = o["cluster_id"]
                clusters.add(f)
            last[o["article_id"]] = o

        def root(c):
            seen = set()
            while c in parent and c not in seen:
                seen.add(c)
                c = parent[c]
            return c
        m["root"] = root
        m["story_cluster"] = {c: (root(c) if root(c) != c else None) for c in clusters}
        m["story_member"] = {a: {"cluster_id": root(o["cluster_id"]), "action": o["action"],
                                 "similarity": float(o["similarity"]), "joined_at": o["ts"]}
                             for a, o in last.items()}
        m["article_cluster"] = {a: (m["story_member"][a]["cluster_id"]
                                    if a in m["story_member"] else None) for a in arts}
        # interest: the highest version per reader; every (user, version, updated_at) once
        latest, versions = {}, {}
        for it in self.good_items("interest-updates"):
            o = it.obj
            versions[(o["user_id"], o["version"], o["updated_at"])] = o["vector"]
            if o["user_id"] not in latest or o["version"] > latest[o["user_id"]]["version"]:
                latest[o["user_id"]] = o
        m["user_interest"], m["user_interest_version"] = latest, versions
        # trending
        snaps, items = {}, []
        for it in self.good_items("trending"):
            o = it.obj
            snaps[o["window_end"]] = o["window_start"]
            for rank, x in enumerate(o["items"], 1):
                items.append((o["window_end"], rank, x["article_id"], float(x["score"]),
                              x.get("cluster_id"), x.get("articles")))
        m["trending_snapshot"], m["trending_item"] = snaps, sorted(items)
        # read events: once per event id (the job's: sha256 of user, article, session[, kind])
        evs = {}
        for it in self.good_items("read-events"):
            o = it.obj
            kind = o.get("kind") or "read"
            sess = o.get("session_id") or ""
            eid = o.get("event_id")
            if not eid:
                h = hashlib.sha256()
                for f in (o["user_id"], o["article_id"], sess) + ((kind,) if kind != "read"
                                                                  else ()):
                    h.update(f.encode() + b"\0")
                eid = h.hexdigest()
            ts = o["ts"] if isinstance(o["ts"], int) else ms_of(o["ts"])
            evs.setdefault(eid, {"user_id": o["user_id"], "article_id": o["article_id"],
                                 "session_id": sess, "kind": kind, "ts": ts})
        m["read_event"] = evs
        return m


def ms_of(s):
    """Epoch ms of the iso() strings this test writes."""
    mm = re.match(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)\.(\d{3})Z$", s)
    import calendar
    secs = calendar.timegm(tuple(int(x) for x in mm.groups()[:6]))
    return secs * 1000 + int(mm.group(7))


# ------------------------------------------------------------------------------ kcat

def produce(ctx, broker, topic, items, tag):
    """items of one topic (an item without a value is a tombstone)."""
    acclib.kcat_produce(ctx, broker, topic,
                        [(it.key, "" if it.value is None else it.value) for it in items],
                        tag="%s-%s" % (topic, tag), empty_is_null=True)


def read_positions(ctx, broker, topic):
    """[(partition, offset, key, value or None)] of a whole topic, read_committed."""
    out = []
    for line in acclib.kcat_consume(ctx, broker, topic, fmt="%p\t%o\t%k\t%S\t%s\n"):
        p, o, k, n, v = (line.split("\t", 4) + [""])[:5]
        out.append((int(p), int(o), k, None if n == "-1" else v))
    return out


def end_offsets(ctx, broker, topic):
    """{partition: high watermark} (kcat -Q with offset -1)."""
    args = []
    for p in range(PARTITIONS):
        args += ["-t", "%s:%d:-1" % (broker.topic(topic), p)]
    out = subprocess.run(["kcat", "-b", broker.bootstrap, "-Q", *args], capture_output=True,
                         text=True, timeout=60)
    if out.returncode != 0:
        ctx.fail("kcat -Q on %s failed: %s" % (topic, out.stderr[-400:]))
    ends = {}
    for l in out.stdout.split("\n"):
        mm = re.match(r"^(\S+) \[(\d+)\] offset (-?\d+)", l.strip())
        if mm:
            ends[int(mm.group(2))] = int(mm.group(3))
    if sorted(ends) != list(range(PARTITIONS)):
        ctx.fail("kcat -Q on %s: no end offset of every partition in %r" % (topic, out.stdout))
    return ends


# ------------------------------------------------------------------------------ checks

def expected_counts(data, upto):
    """{topic: (good records, dead letters)} of waves 0..upto."""
    out = {k: [0, 0] for k in KINDS}
    for w in data.waves[:upto + 1]:
        for it in w:
            if it.poison == "skip":
                continue
            out[it.topic][1 if it.poison else 0] += 1
    return out


def wait_landed(ctx, sink, data, wave):
    want = expected_counts(data, wave)
    seen = [None]

    def pred():
        m = sink.metrics()
        if m is None:
            return False
        got = {k: [int(m.get(("newsflow_pgsink_records_total", k), 0)),
                   int(m.get(("newsflow_pgsink_dead_letters_total", k), 0))] for k in KINDS}
        seen[0] = got
        over = {k: (got[k], want[k]) for k in KINDS
                if got[k][0] > want[k][0] or got[k][1] > want[k][1]}
        if over:
            ctx.fail("after wave %d the sink counts more than was produced ({topic: "
                     "([landed, dead], [produced good, poison])}): %r" % (wave + 1, over), sink)
        return got == want
    ctx.wait_for("newsflow_pgsink_records_total and _dead_letters_total to account for wave %d "
                 "(want {topic: [landed, dead letters]} %r)" % (wave + 1, want), pred,
                 timeout=120, interval=0.3, job=sink,
                 last=lambda: "%r; /v1/status %s" % (seen[0], sink.get("/v1/status")[1][:2500]))
    ctx.log("wave %d landed: %r" % (wave + 1, seen[0]))


def diff(ctx, what, got, want, sink):
    if got == want:
        return
    if isinstance(got, dict) and isinstance(want, dict):
        missing = [k for k in want if k not in got][:5]
        extra = [k for k in got if k not in want][:5]
        wrong = [(k, got[k], want[k]) for k in want if k in got and got[k] != want[k]][:3]
        ctx.fail("%s differs from the model: %d rows, model %d; missing %r; not in the model "
                 "%r; different (got, want) %r" % (what, len(got), len(want), missing, extra,
                                                   wrong), sink)
    gs, ws = set(map(repr, got)), set(map(repr, want))
    ctx.fail("%s differs from the model: %d rows, model %d; missing %r; not in the model %r" %
             (what, len(got), len(want), sorted(ws - gs)[:5], sorted(gs - ws)[:5]), sink)


def ms(col):
    return "(extract(epoch FROM %s) * 1000)::bigint AS %s" % (col, col)


def check_tables(ctx, pg, data, m, sink):
    # article: every field
    want = {}
    for a, o in m["articles"].items():
        w = dict(o)
        for k in ("published_at", "updated_at", "ingested_at"):
            w[k] = ms_of(o[k])
        w["cluster_id"] = m["article_cluster"][a]
        want[a] = w
    got = {r["article_id"]: r for r in pg.rows(
        "SELECT article_id, url, link, guid, source_id, feed_url, title, summary, body, authors, "
        "categories, category_labels, topics, language, %s, %s, date_fallback, %s, "
        "content_hash, cluster_id FROM article" % (ms("published_at"), ms("updated_at"),
                                                   ms("ingested_at")))}
    diff(ctx, "article", got, want, sink)
    ctx.log("article: %d rows equal to the model (%d with cluster_id, %d with no topic)" % (
        len(got), sum(1 for r in got.values() if r["cluster_id"]),
        sum(1 for r in got.values() if not r["topics"])))
    # categories really are a text[] (not a JSON string): the array operators work
    with_ab = sorted(a for a, o in m["articles"].items() if "a,b" in o["categories"])
    got_ab = sorted(r["article_id"] for r in pg.rows(
        "SELECT article_id FROM article WHERE 'a,b' = ANY(categories)"))
    ctx.check(got_ab == with_ab and with_ab, "article.categories @> 'a,b': %d rows, model %d" %
              (len(got_ab), len(with_ab)), sink)

    got = sorted((r["topic"], r["article_id"], r["weight"], r["published_at"]) for r in pg.rows(
        "SELECT topic, article_id, weight, %s FROM article_topic" % ms("published_at")))
    want = sorted((t, a, w, ms_of(p)) for t, a, w, p in m["article_topic"])
    diff(ctx, "article_topic", got, want, sink)
    ctx.log("article_topic: %d rows equal to the model" % len(got))

    got = {r["cluster_id"]: r["merged_into"] for r in pg.rows(
        "SELECT cluster_id, merged_into FROM story_cluster")}
    diff(ctx, "story_cluster (cluster_id -> merged_into)", got, m["story_cluster"], sink)
    got = {r["article_id"]: {"cluster_id": r["cluster_id"], "action": r["action"],
                             "similarity": r["similarity"], "joined_at": r["joined_at"]}
           for r in pg.rows("SELECT article_id, cluster_id, action, similarity, %s "
                            "FROM story_member" % ms("joined_at"))}
    want = {a: dict(v, joined_at=ms_of(v["joined_at"])) for a, v in m["story_member"].items()}
    diff(ctx, "story_member", got, want, sink)
    c = data.chains
    root = m["root"]
    ctx.check(root(c["B"]) == c["A"] and root(c["X"]) == c["Z"] and root(c["P"]) == c["R"] and
              root(c["late"]) == c["A"], "the test's data lost its merges (model roots)")
    ctx.log("story_cluster: %d clusters, %d merged; story_member: %d rows equal to the model "
            "(B, D, E and 250's cluster in A; X->Y->Z; P->Q->R)" % (
                len(m["story_cluster"]), sum(1 for v in m["story_cluster"].values() if v),
                len(got)))

    got = {r["user_id"]: r for r in pg.rows(
        "SELECT user_id, version, vector, %s FROM user_interest" % ms("updated_at"))}
    want = {u: {"user_id": u, "version": o["version"], "vector": o["vector"],
                "updated_at": ms_of(o["updated_at"])} for u, o in m["user_interest"].items()}
    diff(ctx, "user_interest", got, want, sink)
    got = {(r["user_id"], r["version"], r["updated_at"]): r["vector"] for r in pg.rows(
        "SELECT user_id, version, %s, vector FROM user_interest_version" % ms("updated_at"))}
    want = {(u, v, ms_of(t)): vec for (u, v, t), vec in m["user_interest_version"].items()}
    diff(ctx, "user_interest_version", got, want, sink)
    ctx.log("user_interest: %d readers; user_interest_version: %d versions, each once" %
            (len(m["user_interest"]), len(got)))

    got = {r["window_end"]: r["window_start"] for r in pg.rows(
        "SELECT %s, %s FROM trending_snapshot" % (ms("window_end"), ms("window_start")))}
    want = {ms_of(e): ms_of(s) for e, s in m["trending_snapshot"].items()}
    diff(ctx, "trending_snapshot", got, want, sink)
    got = sorted((r["window_end"], r["rank"], r["article_id"], r["score"], r["cluster_id"],
                  r["articles"]) for r in pg.rows(
        "SELECT %s, rank, article_id, score, cluster_id, articles FROM trending_item" %
        ms("window_end")))
    want = sorted((ms_of(e), k, a, s, c, n) for e, k, a, s, c, n in m["trending_item"])
    diff(ctx, "trending_item", got, want, sink)
    ctx.log("trending: %d snapshots, %d items ranked as the model" % (len(m["trending_snapshot"]),
                                                                      len(got)))

    got = {r["event_id"]: {"user_id": r["user_id"], "article_id": r["article_id"],
                           "session_id": r["session_id"], "kind": r["kind"], "ts": r["ts"]}
           for r in pg.rows("SELECT event_id, user_id, article_id, session_id, kind, %s "
                            "FROM read_event" % ms("ts"))}
    diff(ctx, "read_event", got, m["read_event"], sink)
    ctx.log("read_event: %d rows (once per event id) equal to the model" % len(got))


def check_queries(ctx, pg, data, m, sink):
    """The seed's four queries, answered from the tables and from the model."""
    arts = m["articles"]
    # 1. an article by URL (one that was updated, one in a merged story, one without cluster)
    for i in (0, 6, 200, 275):
        a = arts[aid("article-%d" % i)]
        got = pg.rows("SELECT article_id, title, cluster_id FROM article WHERE url = %s" %
                      lit(a["url"]))
        want = [{"article_id": a["article_id"], "title": a["title"],
                 "cluster_id": m["article_cluster"][a["article_id"]]}]
        ctx.check(got == want, "the article by URL %s: %r, model %r" % (a["url"], got, want),
                  sink)
    # 2. the recent articles of a topic
    for t in Data.TOPIC_NAMES:
        got = [r["article_id"] for r in pg.rows(
            "SELECT article_id FROM article_topic WHERE topic = %s ORDER BY published_at DESC "
            "LIMIT 15" % lit(t))]
        want = [a for _, a in sorted(((ms_of(o["published_at"]), o["article_id"])
                                      for o in arts.values() if t in o["topics"]),
                                     reverse=True)][:15]
        ctx.check(got == want and want, "recent articles of topic %s: %r, model %r" %
                  (t, got, want), sink)
    # 3. a reader's interest
    for u, o in m["user_interest"].items():
        got = pg.rows("SELECT version, vector FROM user_interest WHERE user_id = %s" % lit(u))
        ctx.check(got == [{"version": o["version"], "vector": o["vector"]}],
                  "the interest of %s: %r, model version %d %r" % (u, got, o["version"],
                                                                   o["vector"]), sink)
    # 4. the members of a story (newest first), and its size from the view
    c = m["root"]
    for name in ("A", "Z", "R"):
        cid = c(data.chains[name])
        got = [r["article_id"] for r in pg.rows(
            "SELECT article_id FROM story_member WHERE cluster_id = %s "
            "ORDER BY joined_at DESC, article_id" % lit(cid))]
        want = [a for _, a in sorted(((-ms_of(v["joined_at"]), a)
                                      for a, v in m["story_member"].items()
                                      if v["cluster_id"] == cid))]
        ctx.check(got == want and want, "members of story %s (%s): %r, model %r" %
                  (name, cid, got, want), sink)
        size = pg.scalar("SELECT size FROM story WHERE cluster_id = %s" % lit(cid))
        ctx.check(size == str(len(want)), "story %s: size %s in the view, %d members" %
                  (name, size, len(want)), sink)
    ctx.log("the seed's four queries answer as the model: articles by URL, recent articles of "
            "%d topics, %d readers' interests, 3 stories' members" %
            (len(Data.TOPIC_NAMES), len(m["user_interest"])))


def check_dead_letters(ctx, broker, data, positions, sink):
    poisons = [it for it in data.all_items() if it.poison and it.poison != "skip"]
    dls = acclib.kcat_consume(ctx, broker, "dead-letters", fmt="%k\t%s\n")
    got = {}
    for line in dls:
        k, v = line.split("\t", 1)
        try:
            o = json.loads(v)
        except ValueError:
            ctx.fail("a dead letter that is not JSON: %r" % v[:300], sink)
        got.setdefault(k, []).append(o)
    for it in poisons:
        p, off = it.pos
        key = "%s/%d/%d" % (broker.topic(it.topic), p, off)
        ctx.check(key in got, "no dead letter for the poison at %s (%s, %r); dead letters: %r" %
                  (key, it.poison, (it.value or "null")[:80], sorted(got)), sink)
        o = got[key][0]
        ctx.check(o.get("origin") == {"topic": broker.topic(it.topic), "partition": p,
                                      "offset": off},
                  "dead letter %s: origin %r" % (key, o.get("origin")), sink)
        ctx.check(o.get("stage") == "sink-postgres", "dead letter %s: stage %r" %
                  (key, o.get("stage")), sink)
        ctx.check(it.poison in (o.get("error") or ""), "dead letter %s: error %r does not name "
                  "%r" % (key, o.get("error"), it.poison), sink)
        # the first 1024 bytes of the value, cut on a UTF-8 boundary; null for a tombstone
        want = None if it.value is None else \
            it.value.encode()[:1024].decode("utf-8", "ignore")
        ctx.check(o.get("payload") == want, "dead letter %s: payload %r, produced %r" %
                  (key, o.get("payload"), it.value), sink)
        ctx.check(isinstance(o.get("ts"), str) and o["ts"][:2] == "20",
                  "dead letter %s: ts %r" % (key, o.get("ts")), sink)
        # what came after it in its partition was produced later and must have landed: the
        # model comparison shows every good record there; here only that there were some
        after = [x for x in positions[it.topic] if x[0] == p and x[1] > off]
        ctx.check(after, "the data put no record after the poison %s: the test shows nothing "
                  "about a stall" % key)
        ctx.log("dead letter %s: %s (%d records after it in its partition)" %
                (key, o["error"][:110], len(after)))
    extra = sorted(set(got) - {"%s/%d/%d" % (broker.topic(it.topic), *it.pos) for it in poisons})
    ctx.check(not extra, "dead letters of records that are not poison: %r" %
              [(k, got[k][0].get("error")) for k in extra[:5]], sink)
    ctx.check(all(len(v) == 1 for v in got.values()),
              "a poison dead-lettered more than once in a run without a crash: %r" %
              {k: len(v) for k, v in got.items() if len(v) > 1}, sink)


def body(ctx):
    if acclib.broker_kind(ctx) != "kafka":
        ctx.fail("needs Apache Kafka: set NF_TEST_BROKER=kafka:HOST:PORT (ctest's kafka-real "
                 "tests do)")
    broker = acclib.start_broker(ctx, partitions=PARTITIONS)
    pg = Pg(ctx, "sink_model")
    try:
        run(ctx, broker, pg)
    finally:
        for j in ctx.jobs:
            if j.proc.poll() is None:
                ctx.stop_child(j.proc, wait=30)
        pg.drop()


def run(ctx, broker, pg):
    data = Data()
    acclib.run_cli(ctx, ["sink", "postgres", "--migrate", "--set", "postgres.dsn=%s" % pg.dsn])
    group = broker.prefix + "sink"
    sink = Sink(ctx, broker, pg.dsn, group, "sink-1")
    ctx.wait_for("the sink's /readyz to answer 200 (PostgreSQL connected, group assigned)",
                 lambda: sink.get("/readyz")[0] == 200, timeout=90, job=sink,
                 last=lambda: repr(sink.get("/readyz")))
    for w, items in enumerate(data.waves):
        for topic in KINDS:
            its = [it for it in items if it.topic == topic]
            if its:
                produce(ctx, broker, topic, its, "w%d" % w)
        ctx.log("wave %d produced: %s" % (w + 1, {t: sum(1 for it in items if it.topic == t)
                                                   for t in KINDS}))
        wait_landed(ctx, sink, data, w)

    # where each record went (poison origins; records after a poison)
    positions = {}
    for topic in KINDS:
        positions[topic] = read_positions(ctx, broker, topic)
        mine = [it for it in data.all_items() if it.topic == topic]
        ctx.check(len(positions[topic]) == len(mine), "%s holds %d records, %d produced" %
                  (topic, len(positions[topic]), len(mine)))
        # per key, the records in produce order are the key's records in offset order
        by_key = {}
        for p, o, k, v in sorted(positions[topic], key=lambda x: (x[0], x[1])):
            by_key.setdefault(k, []).append((p, o, v))
        for it in mine:
            p, o, v = by_key[it.key].pop(0)
            ctx.check(v == it.value, "%s: record of key %s at %d/%d is %r, produced %r" %
                      (topic, it.key, p, o, (v or "")[:80], (it.value or "")[:80]))
            it.pos = (p, o)

    m = sink.metrics()
    model = data.model()
    check_tables(ctx, pg, data, model, sink)
    check_queries(ctx, pg, data, model, sink)
    check_dead_letters(ctx, broker, data, positions, sink)
    dups = {k: int(m.get(("newsflow_pgsink_duplicates_total", k), 0)) for k in KINDS}
    want_dups = {"articles": 0, "story-clusters": 0, "interest-updates": data.dup_versions,
                 "trending": 0, "read-events": data.dup_events}
    ctx.check(dups == want_dups, "newsflow_pgsink_duplicates_total %r, the data holds %r" %
              (dups, want_dups), sink)
    skipped = int(m.get(("newsflow_pgsink_skipped_total", ""), 0))
    ctx.check(skipped == data.bad_events, "newsflow_pgsink_skipped_total %d, %d undecodable read "
              "events produced" % (skipped, data.bad_events), sink)
    settings = int(m.get(("newsflow_pgsink_settings_skipped_total", ""), 0))
    ctx.check(settings == data.settings_events, "newsflow_pgsink_settings_skipped_total %d, %d "
              "settings events produced" % (settings, data.settings_events), sink)
    ctx.log("metrics: duplicates %r, skipped %d, settings %d" % (dups, skipped, settings))

    # a restart lands nothing twice; the offsets are the topics' ends
    counts_sql = ("SELECT json_build_object(" + ", ".join(
        "'%s', (SELECT count(*) FROM %s)" % (t, t) for t in (
            "article", "article_topic", "story_cluster", "story_member", "user_interest",
            "user_interest_version", "trending_snapshot", "trending_item", "read_event")) + ")")
    before = json.loads(pg.scalar(counts_sql))
    rc = sink.terminate()
    ctx.check(rc == 0, "sink-1 exited %s after SIGTERM, want 0" % rc, sink)
    sink2 = Sink(ctx, broker, pg.dsn, group, "sink-2")
    want_parts = len(KINDS) * PARTITIONS
    st = [None]

    def caught_up():
        code, body = sink2.get("/v1/status")
        if code != 200:
            st[0] = (code, body[:200])
            return False
        parts = json.loads(body).get("partitions", [])
        st[0] = parts
        return (sink2.get("/readyz")[0] == 200 and len(parts) == want_parts and
                all(p["lag"] == 0 for p in parts))
    ctx.wait_for("sink-2 ready with its %d partitions at lag 0 (/v1/status)" % want_parts,
                 caught_up, timeout=90, interval=0.3, job=sink2, last=lambda: repr(st[0]))
    m2 = sink2.metrics()
    landed2 = {k: int(m2.get(("newsflow_pgsink_records_total", k), 0)) for k in KINDS}
    dups2 = {k: int(m2.get(("newsflow_pgsink_duplicates_total", k), 0)) for k in KINDS}
    dead2 = {k: int(m2.get(("newsflow_pgsink_dead_letters_total", k), 0)) for k in KINDS}
    ctx.check(not any(landed2.values()) and not any(dups2.values()) and not any(dead2.values()),
              "sink-2 landed again what sink-1 had landed: records %r, duplicates %r, dead "
              "letters %r" % (landed2, dups2, dead2), sink2)
    after = json.loads(pg.scalar(counts_sql))
    ctx.check(after == before, "the tables changed across the restart: %r, then %r" %
              (before, after), sink2)
    offs = {(r["topic"], r["partition"]): r["next_offset"] for r in pg.rows(
        "SELECT topic, partition, next_offset FROM newsflow_sink_offsets WHERE group_id = %s" %
        lit(group))}
    want = {}
    for t in KINDS:
        for p, e in end_offsets(ctx, broker, t).items():
            want[(broker.topic(t), p)] = e
    diff(ctx, "newsflow_sink_offsets", offs, want, sink2)
    ctx.log("restart: nothing landed twice (%r rows kept), newsflow_sink_offsets = the "
            "topics' end offsets (%d partitions, %d records)" % (
                before, len(offs), sum(offs.values())))
    rc = sink2.terminate()
    ctx.check(rc == 0, "sink-2 exited %s after SIGTERM, want 0" % rc, sink2)
    final = len(acclib.kcat_consume(ctx, broker, "dead-letters", fmt="%o\n"))
    want_dead = sum(1 for it in data.all_items() if it.poison and it.poison != "skip")
    ctx.check(final == want_dead, "dead-letters holds %d records after the restart, %d poisons" %
              (final, want_dead))


if __name__ == "__main__":
    acclib.main("sink_model", body)
