#!/usr/bin/env python3
"""Crash-recovery acceptance test of newsflow (docs/ARCHITECTURE.md §4): exactly-once across
kill -9.

The job runs against Kafka (see "Brokers" below) and a loopback RSS server. While read events
(~4% poison records of 14 kinds) are produced in waves, the job is killed with SIGKILL at random
instants (0.2-3 s after start) and, in other rounds, made to _exit(137) at each fault point of an
epoch's commit (NF_FAULT=<point>:<epoch>, the epoch chosen 3-6 above the last one the job can
have committed: the last epoch.committed in its log + 1; every epoch is logged at log.level=debug,
so no epoch rate is assumed), restarting every time on the same state dir. A final clean run
catches up and stops on SIGTERM (exit 0 required). Only then are the output topics read back
with read_committed consumers (kcat -J) and checked:

  interest-updates  every user has exactly the versions 1..n (n = its valid events in
                    read-events), each once, keyed by user_id; missing, duplicated and
                    unexpected (user, version) reported as exact ranges with the records'
                    partition@offset and nf-writer/nf-epoch/nf-seq headers;
  dead-letters      exactly one per poison record, matched by origin: the (partition, offset)
                    where the poison record sits in read-events (read back from the topic),
                    origin.topic == the broker's read-events (with the topic prefix), key
                    "<that topic>/P/O", and the record's unique
                    marker in the payload excerpt (empty values: empty payload); no dead letter
                    for any other record (a valid event refused is reported as such);
  articles          no article_id twice, no url under two ids, key == article_id ==
                    sha256(url)[:16 bytes] hex, every url one the server served; per feed the
                    items are exactly those of one served response (feeds only grow: a hole is
                    an article lost for good), and not older than the last response served
                    >= 2 s before the final SIGTERM;
  fetch-log         no fetch_id twice; no more committed 200 fetches of a feed than responses
                    the server served.

Then one more event for a few users (the 3 heaviest and 2 random), a short run, and their next
update must be version n+1 (state survived exactly); the whole verification runs again on the
final topics.

Feeds: crawl.interval_s has a floor of 60 s, so feeds cannot usefully grow with wall time in a
2-4 minute test. Instead (1) each feed grows per request: response k of feed f has items
0..base+k*grow-1 (newest first; an item's content never changes); (2) one new feed is added to
sources.urls before every restart, so every run has a first crawl to do; (3) responses are
delayed up to 1.2 s and 30% stall mid-body, so kills land during fetches. The final run waits
until every feed was fetched at least once during it (<= one crawl interval, ~60 s), then stops
in a quiet moment (no fetch in flight, output counts stable, read-events fully processed).

Job settings: checkpoint.interval_ms=300, checkpoint.retain_every=4, crawl intervals 60 s
without jitter, kafka.assignment=all when the job has that key (a restarted process must not
wait out its killed predecessor's consumer-group session), demo producer off, log.level=debug.

Brokers: --broker SPEC, else $NF_TEST_BROKER (tests/CMakeLists.txt sets it for kafka-real/*):
  unset, "" or "mock"  a standalone mock cluster (`newsflow mock-kafka --partitions 4`, a
                       separate process that keeps topic data across job restarts) started here.
                       It shows the records of aborted transactions to read_committed consumers
                       and stores no transactional offset commits.
  kafka:HOST:PORT[,..] a real Apache Kafka cluster, shared with other tests: this run's topics
                       are created (`newsflow topics create --partitions 4`) under a unique
                       kafka.topic_prefix "nft-crash-<pid>-<4 hex>.", and every job run gets
                       that prefix, group id PREFIXgroup and transactional id PREFIXtx (the same
                       across restarts). There, a killed run's open transaction is aborted when
                       the next run's producer initialises the same transactional id, so its
                       records never become visible and the roll-forward produces them again;
                       until then read_committed consumers stop at the last stable offset, which
                       is why the outputs are read back only after the final clean run (the
                       counts logged between rounds are up to that offset). Commits take tens of
                       ms instead of ~1 ms. The checks are the same on both; the summary's
                       roll-forward line says how many records pending epochs found in Kafka
                       and, on a real broker, how many aborted records the topics hold.

Usage: crash.py --newsflow BIN [--srcdir DIR] [--seed N] [--quick] [--keep] [--workdir DIR]
                [--kills N] [--faults P1,P2] [--set KEY=VALUE]... [--sabotage rollback]
  --sabotage rollback  self-test: restores an older copy of the state dir between two rounds;
                       the run must then FAIL with duplicates.
Exit: 0 all checks passed, 1 violations found, 2 the harness could not run.
Only the Python standard library and kcat (subprocess) are used.
"""
import argparse
import atexit
import ctypes
import email.utils
import hashlib
import http.server
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict

FAULT_POINTS = ["after_cut", "after_pending", "mid_produce", "before_commit", "after_commit",
                "mid_apply", "after_apply", "mid_checkpoint"]
OUT_TOPICS = ["interest-updates", "dead-letters", "articles", "fetch-log", "story-clusters"]
RETAIN_EVERY = 4          # checkpoint.retain_every: named checkpoints often (mid_checkpoint)
CRAWL_INTERVAL_S = 60     # the config minimum
CHECKPOINT_MS = 300

T0 = time.time()


def log(msg):
    print("[%6.1fs] %s" % (time.time() - T0, msg), flush=True)


# ---------------------------------------------------------------------------------------------
# Child processes: every one is tracked by pid and killed at exit; PR_SET_PDEATHSIG makes the
# kernel kill them too if this script itself dies without cleaning up.

_children = []
_children_lock = threading.Lock()


def _pdeathsig(sig):
    def f():
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(1, int(sig), 0, 0, 0)  # PR_SET_PDEATHSIG
        except Exception:
            pass
    return f


def spawn(args, sig=signal.SIGKILL, **kw):
    p = subprocess.Popen(args, preexec_fn=_pdeathsig(sig), **kw)
    with _children_lock:
        _children.append(p)
    return p


def reap(p):
    with _children_lock:
        if p in _children:
            _children.remove(p)


def cleanup_children():
    with _children_lock:
        procs = list(_children)
        _children.clear()
    for p in procs:
        if p.poll() is None:
            try:
                p.send_signal(signal.SIGTERM)
            except OSError:
                pass
    deadline = time.time() + 3
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            try:
                p.kill()
                p.wait(2)
            except Exception:
                pass


def _on_signal(signum, _frame):
    cleanup_children()
    sys.exit(128 + signum)


# ---------------------------------------------------------------------------------------------
# kcat helpers

class Kcat:
    def __init__(self, boot, prefix="", dump_dir=None):
        self.boot = boot
        self.prefix = prefix      # kafka.topic_prefix of the job's topics ("" on the mock)
        self.dump_dir = dump_dir  # the last full read of each topic is kept there (post-mortem)

    def topic(self, name):
        """The broker's name of one of the job's topics (name: read-events, articles, ...)."""
        return self.prefix + name

    def produce(self, lines, partition=None):
        """Produces key<TAB>value lines (value only when no tab). Returns (ok, stderr)."""
        args = ["kcat", "-b", self.boot, "-P", "-t", self.topic("read-events"), "-K", "\t",
                "-X", "enable.idempotence=true", "-m", "10"]
        if partition is not None:
            args += ["-p", str(partition)]
        # surrogateescape: a poison line may carry raw non-UTF-8 bytes.
        data = "".join(l + "\n" for l in lines).encode("utf-8", "surrogateescape")
        p = spawn(args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                  stderr=subprocess.PIPE)
        try:
            _, err = p.communicate(data, timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
        reap(p)
        return p.returncode == 0, err.decode(errors="replace")

    def consume(self, topic, timeout=60):
        """Every record of topic (read_committed) as kcat -J envelopes."""
        args = ["kcat", "-b", self.boot, "-C", "-t", self.topic(topic), "-o", "beginning", "-e",
                "-J", "-q", "-X", "isolation.level=read_committed", "-m", "10"]
        p = spawn(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            reap(p)
            raise HarnessError("kcat consume %s timed out: %s" % (topic, err.decode()[-300:]))
        reap(p)
        if p.returncode != 0:
            raise HarnessError("kcat consume %s: exit %d: %s"
                               % (topic, p.returncode, err.decode()[-300:]))
        if self.dump_dir:
            with open(os.path.join(self.dump_dir, topic + ".jsonl"), "wb") as f:
                f.write(out)
        recs = []
        for line in out.decode("utf-8", errors="replace").splitlines():
            if not line.strip():
                continue
            env = json.loads(line)
            recs.append(env)
        return recs

    def count(self, topic, committed=True):
        args = ["kcat", "-b", self.boot, "-C", "-t", self.topic(topic), "-o", "beginning", "-e",
                "-q", "-f", "%o\n", "-X", "isolation.level=read_%scommitted"
                % ("" if committed else "un"), "-m", "10"]
        p = spawn(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            out, _ = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            reap(p)
            return -1
        reap(p)
        return out.count(b"\n") if p.returncode == 0 else -1


class HarnessError(Exception):
    pass


def env_value(env):
    """The payload of a kcat -J envelope as a parsed JSON object (or None) and as raw text."""
    pl = env.get("payload")
    if isinstance(pl, str):
        try:
            return json.loads(pl), pl
        except ValueError:
            return None, pl
    if pl is None:
        return None, ""
    return pl, json.dumps(pl)


def env_headers(env):
    h = env.get("headers") or {}
    if isinstance(h, list):  # some kcat versions: ["k", "v", ...]
        h = dict(zip(h[0::2], h[1::2]))
    return {k: h[k] for k in ("nf-writer", "nf-epoch", "nf-seq") if k in h}


def where(env):
    return "p%s@%s%s" % (env.get("partition"), env.get("offset"),
                         (" " + json.dumps(env_headers(env))) if env_headers(env) else "")


# ---------------------------------------------------------------------------------------------
# Loopback RSS feeds, growing per request.

class Feeds:
    def __init__(self, nfeeds, base, grow, rnd):
        # Feeds 0..active-1 are in the job's sources.urls; a new one is added before each
        # restart so that every run has a first crawl to do (the interval is >= 60 s).
        self.active, self.base, self.grow = nfeeds, base, grow
        self.lock = threading.Lock()
        self.responses = defaultdict(list)   # feed -> [(time_written, n_items, ok)]
        self.requests = Counter()
        self.t_pub = int(time.time()) - 86400
        self.words = ["market", "storm", "election", "river", "vaccine", "orbit", "festival",
                      "harbour", "league", "glacier", "tariff", "museum", "drought", "reactor",
                      "bridge", "court", "satellite", "vineyard", "summit", "railway"]
        self.salt = rnd.randrange(1 << 30)
        self.rnd = random.Random(rnd.randrange(1 << 30))
        self.max_delay = 1.2
        self.in_flight = 0
        self.port = None
        self.server = None

    def link(self, f, i):
        return "http://127.0.0.1:%d/story/f%d/%d" % (self.port, f, i)

    def feed_url(self, f):
        return "http://127.0.0.1:%d/feed/f%d.xml" % (self.port, f)

    def item_text(self, f, i):
        r = random.Random(self.salt * 1000003 + f * 100003 + i)
        words = [r.choice(self.words) for _ in range(12)]
        title = "Feed %d story %d: %s" % (f, i, " ".join(words[:4]))
        body = "Report %d/%d. %s." % (f, i, " ".join(words))
        return title, body

    def render(self, f, n):
        items = []
        for i in range(n - 1, -1, -1):
            title, body = self.item_text(f, i)
            items.append(
                "<item><title>%s</title><link>%s</link><guid isPermaLink=\"true\">%s</guid>"
                "<pubDate>%s</pubDate><description>%s</description></item>"
                % (title, self.link(f, i), self.link(f, i),
                   email.utils.formatdate(self.t_pub + f * 7 + i * 60, usegmt=True), body))
        return ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<rss version=\"2.0\"><channel>"
                "<title>Crash test feed %d</title><link>http://127.0.0.1:%d/</link>"
                "<description>feed %d</description>%s</channel></rss>\n"
                % (f, self.port, f, "".join(items))).encode()

    def items(self, f, n):
        return {self.link(f, i) for i in range(n)}

    def start(self):
        feeds = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                m = re.match(r"^/feed/f(\d+)\.xml$", self.path)
                if m:
                    f = int(m.group(1))
                    with feeds.lock:
                        k = feeds.requests[f]
                        feeds.requests[f] += 1
                        feeds.in_flight += 1
                    n = feeds.base + k * feeds.grow
                    body = feeds.render(f, n)
                    with feeds.lock:
                        delay = feeds.rnd.uniform(0, feeds.max_delay)
                        split = feeds.rnd.random() < 0.3
                        pause = feeds.rnd.uniform(0.2, 0.8)
                    ok = True
                    try:
                        # Slow responses, sometimes stalled mid-body: kills land during fetches.
                        time.sleep(delay)
                        self.send_response(200)
                        self.send_header("Content-Type", "application/rss+xml; charset=utf-8")
                        self.send_header("Content-Length", str(len(body)))
                        self.end_headers()
                        if split:
                            self.wfile.write(body[:len(body) // 2])
                            self.wfile.flush()
                            time.sleep(pause)
                            self.wfile.write(body[len(body) // 2:])
                        else:
                            self.wfile.write(body)
                        self.wfile.flush()
                    except OSError:
                        ok = False
                    with feeds.lock:
                        feeds.responses[f].append((time.time(), n, ok))
                        feeds.in_flight -= 1
                    return
                body = b"<html><body>story</body></html>"
                try:
                    self.send_response(200 if self.path.startswith("/story/") else 404)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def snapshot(self):
        with self.lock:
            return {f: list(v) for f, v in self.responses.items()}


# ---------------------------------------------------------------------------------------------
# Read events: waves of valid events and poison records; every record carries a unique token
# (session_id "S<run>-<seq>" for valid events, marker "PZ<run>-<seq>Q" for poison) so that the
# truth is read back from the read-events topic itself (partition and offset included).

class Events:
    # Every kind is refused by the read-events decoder (src/io/events.h).
    KINDS = ["bad_json", "missing_user", "missing_article", "missing_ts", "bad_ts", "non_object",
             "non_object_str", "null_user", "user_not_string", "dup_field", "bad_utf8",
             "long_user", "empty_value", "oversize"]

    def __init__(self, kc, rnd, nusers, run_tag):
        self.kc, self.rnd, self.run_tag = kc, rnd, run_tag
        self.seq = 0
        self.users = ["u%03d" % i for i in range(nusers)]
        # Zipf-ish weights: a few users read a lot.
        self.weights = [1.0 / (i + 1) ** 1.1 for i in range(nusers)]
        self.sent_valid = Counter()   # user -> events whose kcat run succeeded
        self.sent_poison = {}         # marker -> kind
        self.produce_errors = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = None
        self.oversize_left = 3

    def now_ts(self):
        if self.rnd.random() < 0.5:
            return int(time.time() * 1000)
        t = time.time()
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % (int(t * 1000) % 1000)

    def valid(self, user):
        self.seq += 1
        ev = {}
        if self.rnd.random() < 0.5:
            ev["event_id"] = "E%s-%d" % (self.run_tag, self.seq)
        ev.update({"user_id": user, "article_id": "a%05d" % self.rnd.randrange(100000),
                   "session_id": "S%s-%d" % (self.run_tag, self.seq), "ts": self.now_ts()})
        return "%s\t%s" % (user, json.dumps(ev, separators=(",", ":")))

    def poison(self):
        """One poison record: (marker, kind, line). The marker is in the payload (early, so
        that the dead-letter excerpt has it), or for an empty value in the key."""
        self.seq += 1
        mk = "PZ%s-%dQ" % (self.run_tag, self.seq)
        kinds = self.KINDS if self.oversize_left > 0 else self.KINDS[:-1]
        kind = self.rnd.choice(kinds)
        user = self.rnd.choice(self.users)
        ts = self.now_ts()
        sess = "x%d" % self.seq
        base = {"marker": mk, "user_id": user, "article_id": "a1", "session_id": sess, "ts": ts}

        def without(k):
            d = dict(base)
            del d[k]
            return json.dumps(d)

        def with_(k, v):
            d = dict(base)
            d[k] = v
            return json.dumps(d)
        if kind == "bad_json":
            v = '{"marker":"%s","user_id":"%s","article_id":"a1","ts":' % (mk, user)
        elif kind == "missing_user":
            v = without("user_id")
        elif kind == "missing_article":
            v = without("article_id")
        elif kind == "missing_ts":
            v = without("ts")
        elif kind == "bad_ts":
            v = with_("ts", self.rnd.choice(["garbage", "2026-13-45T25:61:00Z",
                                             "1700000000000xyz", True, "yesterday", {"t": 1},
                                             1.5e12, "0001-01-01T00:00:00Z"]))
        elif kind == "non_object":
            v = json.dumps([mk, user, 1, 2])
        elif kind == "non_object_str":
            v = json.dumps(mk)
        elif kind == "null_user":
            v = with_("user_id", None)
        elif kind == "user_not_string":
            v = with_("user_id", 12345)
        elif kind == "dup_field":
            v = without("ts")[:-1] + ', "user_id": "%s", "ts": %d}' % (user, int(time.time() * 1000))
        elif kind == "bad_utf8":
            v = with_("user_id", "U\udcff\udcfe")  # raw bytes 0xff 0xfe
            v = v.replace("\\udcff\\udcfe", "\udcff\udcfe")
        elif kind == "long_user":
            v = with_("user_id", "u" * 200)
        elif kind == "empty_value":
            return mk, kind, "%s\t" % mk
        else:  # oversize: above kafka.max_event_bytes (64 KiB)
            self.oversize_left -= 1
            v = with_("pad", "x" * 70000)
        v = v.replace("\t", " ").replace("\n", " ")
        # Most keyed by a real user (the key must not stand in for a missing user_id), some
        # without a key at all.
        line = v if self.rnd.random() < 0.2 else "%s\t%s" % (user, v)
        return mk, kind, line

    def wave(self, size, poison_rate=0.04):
        lines, valid, poison = [], Counter(), {}
        for _ in range(size):
            if self.rnd.random() < poison_rate:
                mk, kind, line = self.poison()
                poison[mk] = kind
            else:
                u = self.rnd.choices(self.users, self.weights)[0]
                line = self.valid(u)
                valid[u] += 1
            lines.append(line)
        ok, err = self.kc.produce(lines)
        with self.lock:
            if ok:
                self.sent_valid.update(valid)
                self.sent_poison.update(poison)
            else:
                self.produce_errors.append(err.strip()[-300:])
        return ok

    def run_waves(self, min_size, max_size, pause):
        while not self.stop.is_set():
            self.wave(self.rnd.randint(min_size, max_size))
            self.stop.wait(self.rnd.uniform(*pause))

    def start(self, min_size, max_size, pause):
        self.stop.clear()
        self.thread = threading.Thread(target=self.run_waves, args=(min_size, max_size, pause),
                                       daemon=True)
        self.thread.start()

    def halt(self):
        self.stop.set()
        if self.thread:
            self.thread.join()
            self.thread = None


# ---------------------------------------------------------------------------------------------
# The job.

class Job:
    def __init__(self, args, boot, state_dir, feeds, logdir, kafka_set=()):
        self.args, self.boot, self.state_dir, self.feeds, self.logdir = \
            args, boot, state_dir, feeds, logdir
        # Real broker: kafka.topic_prefix, group_id and transactional_id of this test run (the
        # same in every run of the job: a restart fences its killed predecessor).
        self.kafka_set = list(kafka_set)
        self.max_epoch = 0
        self.runs = 0
        self.proc = None
        self.errors = []          # (run label, error log line)
        # Pending epochs rolled forward at start: (epoch, records, found already in Kafka).
        # Informational: on a real broker an interrupted transaction was aborted, so its
        # records are not found and are produced again; the mock shows them.
        self.rollforwards = []

    def cmd(self):
        s = ["kafka.brokers=" + self.boot] + self.kafka_set + [
             "state.dir=" + self.state_dir,
             "checkpoint.interval_ms=%d" % CHECKPOINT_MS,
             "checkpoint.retain_every=%d" % RETAIN_EVERY,
             "checkpoint.retain_count=3",
             "admin.enabled=false",
             # debug: every committed epoch is logged, with records or not (next_epoch_bound)
             "log.level=debug",
             "log.progress_interval_ms=0",
             "sink.spec=none",
             "sources.urls=" + ",".join(self.feeds.feed_url(f) for f in range(self.feeds.active)),
             "fetch.allow_private=127.0.0.0/8",
             "crawl.interval_s=%d" % CRAWL_INTERVAL_S,
             "crawl.interval_floor_s=%d" % CRAWL_INTERVAL_S,
             "crawl.interval_ceiling_s=%d" % CRAWL_INTERVAL_S,
             "crawl.backoff_cap_s=%d" % CRAWL_INTERVAL_S,
             "crawl.jitter_permille=0",
             "crawl.host_max_concurrent=16",
             "crawl.host_spacing_ms=0",
             "shutdown.timeout_ms=20000",
             # synthetic article ids (no crawled article has them): every read still counts
             "interest.unknown_articles=empty"]
        if self.args.assignment:
            s.append("kafka.assignment=" + self.args.assignment)
        if "demo.read_events_per_s" in self.args.job_keys:
            s.append("demo.read_events_per_s=0")  # only our events in read-events
        if self.args.shards:
            s.append("runtime.shards=%d" % self.args.shards)
        if "state.ingest_min_bytes" in self.args.job_keys:
            # every other run applies each epoch's state as table files, kind by kind (kill -9
            # between them), the others through the memtable, as epochs this small would be
            s.append("state.ingest_min_bytes=%d" % (1 if self.runs % 2 else 16 << 20))
        c = [self.args.newsflow, "run", "--config", self.args.config]
        for x in s + self.args.set:
            c += ["--set", x]
        return c

    def start(self, label, fault=None):
        self.runs += 1
        env = {k: v for k, v in os.environ.items() if not k.startswith("NEWSFLOW_")}
        env.pop("NF_FAULT", None)
        if fault:
            env["NF_FAULT"] = fault
        self.label = "%02d-%s" % (self.runs, label)
        self.logpath = os.path.join(self.logdir, "job-%s.log" % self.label)
        self.proc = spawn(self.cmd(), env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.started = time.time()
        self.run_epochs = []
        self.restored = None
        self.ended = None
        self.stopped_line = None
        self.reader = threading.Thread(target=self._read, args=(self.proc, self.logpath,
                                                                self.label), daemon=True)
        self.reader.start()

    def _read(self, proc, path, label):
        with open(path, "w") as out:
            for raw in proc.stderr:
                line = raw.decode("utf-8", errors="replace")
                out.write(line)
                if not line.startswith("{"):
                    continue
                try:
                    o = json.loads(line)
                except ValueError:
                    continue
                # epoch.committed is logged for every epoch (at debug for those without
                # records); "state restored", "checkpoint.created" and "newsflow stopped"
                # carry epochs too.
                e = o.get("epoch")
                if isinstance(e, int) and o.get("msg") in (
                        "epoch.committed", "state restored", "checkpoint.created",
                        "newsflow stopped", "newsflow started"):
                    self.max_epoch = max(self.max_epoch, e)
                    if o.get("msg") == "state restored":
                        self.restored = e
                    else:
                        self.run_epochs.append(e)
                if o.get("level") == "error":
                    self.errors.append((label, line.strip()[:400]))
                if o.get("msg") == "pending epoch: its outputs counted in Kafka" and \
                        isinstance(o.get("records"), int) and isinstance(o.get("found"), int):
                    self.rollforwards.append((o.get("epoch"), o["records"], o["found"]))
                if o.get("msg") == "newsflow stopped":
                    self.stopped_line = o

    def wait(self, timeout):
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self.ended = time.time()
        self.reader.join(5)
        reap(self.proc)
        return rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        rc = self.proc.wait()
        self.ended = time.time()
        self.reader.join(5)
        reap(self.proc)
        return rc

    def next_epoch_bound(self):
        """The last epoch the job can have committed, read from its logs (no rate assumed: a
        real broker's commits are slower than the mock's): every committed epoch is logged
        (log.level=debug), and epochs run one after another, so a killed run can have
        committed (or left pending, rolled forward by the next run) at most the one epoch
        after its last logged one."""
        return self.max_epoch + 1

    def term(self, timeout=40):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.wait(timeout)
        if rc is None:
            self.kill()
            return "timeout"
        return rc

    def tail(self, n=6):
        """The last n lines of the run's log above debug (empty epochs' commits are noise)."""
        try:
            with open(self.logpath) as f:
                lines = [l for l in f.readlines() if '"level":"debug"' not in l]
                return [l.rstrip()[:300] for l in lines[-n:]]
        except OSError:
            return []


# ---------------------------------------------------------------------------------------------
# Verification.

def read_truth(kc, ev_tag):
    """What reached read-events: valid events per user, and every poison record's origin
    (partition, offset) -> its marker, plus the origins of valid events."""
    recs = kc.consume("read-events")
    valid_ids = defaultdict(set)      # user -> unique event identities
    poison = {}                       # (partition, offset) -> marker
    valid_at = {}                     # (partition, offset) -> user
    unknown = []
    mk_re = re.compile(r"PZ%s-\d+Q" % re.escape(ev_tag))
    for env in recs:
        obj, raw = env_value(env)
        po = (env["partition"], env["offset"])
        m = mk_re.search(raw) or mk_re.search(env.get("key") or "")
        if m:
            poison[po] = m.group(0)
        elif isinstance(obj, dict) and str(obj.get("session_id", "")).startswith("S" + ev_tag + "-"):
            valid_ids[obj["user_id"]].add(obj.get("event_id") or obj["session_id"])
            valid_at[po] = obj["user_id"]
        else:
            unknown.append(po)
    return len(recs), {u: len(s) for u, s in valid_ids.items()}, poison, valid_at, unknown


def verify(kc, feeds, expected_n, poison_at, valid_at, kinds, r_req, problems, phase):
    """Checks the committed outputs; appends problem strings; returns a stats dict."""
    def prob(cat, msg):
        problems.append((phase, cat, msg))

    stats = {}
    # --- interest-updates
    iu = kc.consume("interest-updates")
    stats["interest-updates"] = len(iu)
    seen = defaultdict(lambda: defaultdict(list))  # user -> version -> [env]
    order = defaultdict(list)
    for env in iu:
        obj, raw = env_value(env)
        if not isinstance(obj, dict) or not isinstance(obj.get("user_id"), str) \
                or not isinstance(obj.get("version"), int):
            prob("iu-malformed", "interest-update %s not {user_id, version}: %s"
                 % (where(env), raw[:120]))
            continue
        u, v = obj["user_id"], obj["version"]
        if env.get("key") != u:
            prob("iu-key", "interest-update %s key %r != user_id %r" % (where(env), env.get("key"), u))
        seen[u][v].append(env)
        order[(u, env["partition"])].append((env["offset"], v))
    missing = dup = unexpected = 0
    for u in sorted(set(expected_n) | set(seen)):
        n = expected_n.get(u, 0)
        vs = seen.get(u, {})
        miss = [v for v in range(1, n + 1) if v not in vs]
        if miss:
            missing += len(miss)
            # A version is the user's count: when the top versions are missing, events were
            # consumed without being counted (input positions ran ahead of state); holes below
            # the highest emitted version are outputs lost while the state counted them.
            top = max(vs) if vs else 0
            kind = ("the top %d: events consumed but never counted" % len(miss)
                    if miss[0] > top else "holes: updates lost although counted")
            prob("iu-missing", "user %s: %d of versions 1..%d missing (%s): %s"
                 % (u, len(miss), n, kind, compress(miss)))
        # One line per user: the exact versions (as ranges), the first one's records as
        # evidence (partition@offset and the writer/epoch/seq headers).
        dups = [v for v in sorted(vs) if len(vs[v]) > 1 and 1 <= v <= n]
        if dups:
            extra = sum(len(vs[v]) - 1 for v in dups)
            dup += extra
            prob("iu-duplicate", "user %s (n=%d): %d version(s) emitted more than once "
                 "(%d extra records): %s; e.g. version %d x%d at %s"
                 % (u, n, len(dups), extra, compress(dups), dups[0], len(vs[dups[0]]),
                    ", ".join(where(e) for e in vs[dups[0]])))
        bad = [v for v in sorted(vs) if v < 1 or v > n]
        if bad:
            unexpected += sum(len(vs[v]) for v in bad)
            prob("iu-unexpected", "user %s: versions %s beyond the expected 1..%d; e.g. "
                 "version %d at %s" % (u, compress(bad), n, bad[0],
                                       ", ".join(where(e) for e in vs[bad[0]])))
    disorder = 0
    for (u, p), lst in order.items():
        vs = [v for _, v in sorted(lst)]
        if any(b < a for a, b in zip(vs, vs[1:])):
            disorder += 1
    parts = defaultdict(set)
    for (u, p) in order:
        parts[u].add(p)
    spread = sorted(u for u, ps in parts.items() if len(ps) > 1)
    if spread:
        prob("iu-partition", "users %s have updates in several partitions" % spread[:10])
    stats["iu_missing"], stats["iu_duplicates"], stats["iu_unexpected"] = missing, dup, unexpected
    stats["iu_out_of_order_users"] = disorder  # informational: versions not ascending by offset

    # --- dead-letters: matched by origin; the poison's marker must be in the payload excerpt
    # (or, for an empty value, the payload empty).
    dl = kc.consume("dead-letters")
    stats["dead-letters"] = len(dl)
    mk_re = re.compile(r"PZ[0-9a-z]+-\d+Q")
    got = defaultdict(list)   # (partition, offset) -> [(env, value)]
    for env in dl:
        obj, raw = env_value(env)
        if not isinstance(obj, dict) or not isinstance(obj.get("origin"), dict):
            prob("dl-malformed", "dead-letter %s without origin: %s" % (where(env), raw[:160]))
            continue
        o = obj["origin"]
        if o.get("topic") != kc.topic("read-events"):  # the broker's name (topic prefix)
            prob("dl-origin", "dead-letter %s origin.topic %r (want %s): %s"
                 % (where(env), o.get("topic"), kc.topic("read-events"), raw[:160]))
            continue
        po = (o.get("partition"), o.get("offset"))
        if env.get("key") != "%s/%s/%s" % ((kc.topic("read-events"),) + po):
            prob("dl-key", "dead-letter %s key %r does not name its origin %s"
                 % (where(env), env.get("key"), json.dumps(o)))
        got[po].append((env, obj))
    dl_missing = dl_dup = 0
    for po, mk in sorted(poison_at.items()):
        g = got.get(po, [])
        kind = kinds.get(mk, "?")
        if not g:
            dl_missing += 1
            prob("dl-missing", "poison %s (%s) at read-events p%d@%d: no dead-letter"
                 % (mk, kind, po[0], po[1]))
            continue
        if len(g) > 1:
            dl_dup += len(g) - 1
            prob("dl-duplicate", "poison %s (%s) at p%d@%d: %d dead-letters at %s"
                 % (mk, kind, po[0], po[1], len(g), ", ".join(where(e) for e, _ in g)))
        pl = g[0][1].get("payload")
        pls = pl if isinstance(pl, str) else json.dumps(pl)
        if kind == "empty_value":
            if pl not in ("", None):
                prob("dl-payload", "poison %s (empty value) at p%d@%d: payload %r"
                     % (mk, po[0], po[1], pls[:80]))
        elif mk not in pls:
            m = mk_re.search(pls)
            prob("dl-origin", "poison %s (%s) at p%d@%d: its dead-letter %s carries %s"
                 % (mk, kind, po[0], po[1], where(g[0][0]),
                    ("the payload of " + m.group(0)) if m else "payload %r" % pls[:80]))
    for po, g in sorted(got.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1] or 0)):
        if po in poison_at:
            continue
        v = g[0][1]
        what = ("the VALID event of user %s" % valid_at[po]) if po in valid_at else "no record we know"
        pl = v.get("payload")
        m = mk_re.search(pl if isinstance(pl, str) else json.dumps(pl))
        if m:
            at = [k for k, mk in poison_at.items() if mk == m.group(0)]
            what += "; its payload is poison %s%s" % (m.group(0), (" at p%d@%d" % at[0]) if at else "")
        prob("dl-unexpected", "dead-letter(s) %s with origin p%s@%s, which is %s: stage %s, "
             "error %s" % (", ".join(where(e) for e, _ in g), po[0], po[1], what,
                           v.get("stage"), v.get("error")))
    stats["dl_missing"], stats["dl_duplicates"] = dl_missing, dl_dup

    # --- articles
    arts = kc.consume("articles")
    stats["articles"] = len(arts)
    by_id, by_url = defaultdict(list), defaultdict(list)
    per_feed = defaultdict(set)
    url_re = re.compile(r"^http://127\.0\.0\.1:%d/story/f(\d+)/(\d+)$" % feeds.port)
    for env in arts:
        obj, raw = env_value(env)
        if not isinstance(obj, dict) or not isinstance(obj.get("url"), str) \
                or not isinstance(obj.get("article_id"), str):
            prob("art-malformed", "article %s without url/article_id: %s" % (where(env), raw[:120]))
            continue
        url, aid = obj["url"], obj["article_id"]
        by_id[aid].append(env)
        by_url[url].append(env)
        if env.get("key") != aid:
            prob("art-key", "article %s key %r != article_id %s" % (where(env), env.get("key"), aid))
        if hashlib.sha256(url.encode()).hexdigest()[:32] != aid:
            prob("art-id", "article %s article_id %s is not sha256(%s)[:16]" % (where(env), aid, url))
        m = url_re.match(url)
        if not m:
            prob("art-phantom", "article %s url %s was never served" % (where(env), url))
            continue
        per_feed[int(m.group(1))].add(int(m.group(2)))
    art_dup = 0
    for aid, envs in by_id.items():
        if len(envs) > 1:
            art_dup += len(envs) - 1
            prob("art-duplicate", "article_id %s x%d at %s"
                 % (aid, len(envs), ", ".join(where(e) for e in envs)))
    for url, envs in by_url.items():
        ids = {env_value(e)[0]["article_id"] for e in envs}
        if len(envs) > 1 and len(ids) > 1:
            art_dup += len(envs) - 1
            prob("art-duplicate", "url %s under %d article_ids" % (url, len(ids)))
    # story-clusters: exactly one record per committed article, none for anything else (the
    # cluster assignment commits in the epoch that emits the article).
    sc = defaultdict(list)
    for env in kc.consume("story-clusters"):
        obj, raw = env_value(env)
        aid = obj.get("article_id") if isinstance(obj, dict) else None
        if not isinstance(aid, str) or env.get("key") != aid:
            prob("sc-malformed", "story-clusters %s: %s" % (where(env), raw[:120]))
            continue
        sc[aid].append(env)
    for aid, envs in sc.items():
        if len(envs) > 1:
            prob("sc-duplicate", "story-clusters for %s x%d at %s"
                 % (aid, len(envs), ", ".join(where(e) for e in envs)))
        if aid not in by_id:
            prob("sc-phantom", "story-clusters for %s, which is no committed article" % aid)
    sc_missing = [aid for aid in by_id if aid not in sc]
    if sc_missing:
        prob("sc-missing", "%d committed articles without a story-clusters record, e.g. %s"
             % (len(sc_missing), sc_missing[:3]))
    served = feeds.snapshot()
    art_missing = 0
    for f in range(feeds.active):
        have = per_feed.get(f, set())
        sizes = sorted({n for _, n, _ in served.get(f, [])})
        nmax = max(have) + 1 if have else 0
        holes = [i for i in range(nmax) if i not in have]
        if holes:
            art_missing += len(holes)
            prob("art-missing", "feed %d: items %s missing below item %d (lost, never re-emitted)"
                 % (f, compress(holes), nmax - 1))
        if have and nmax not in sizes:
            prob("art-phantom", "feed %d: %d items is no served response size %s"
                 % (f, nmax, sizes[:10]))
        need = r_req.get(f, 0)
        if nmax < need:
            art_missing += need - nmax
            prob("art-missing", "feed %d: items %s of a response served >=2 s before the "
                 "end missing (have %d items, the response had %d)"
                 % (f, compress(list(range(nmax, need))), nmax, need))
    stats["art_missing"], stats["art_duplicates"] = art_missing, art_dup

    # --- fetch-log
    fl = kc.consume("fetch-log")
    stats["fetch-log"] = len(fl)
    fids = defaultdict(list)
    ok200 = Counter()
    feed_re = re.compile(r"/feed/f(\d+)\.xml$")
    for env in fl:
        obj, raw = env_value(env)
        if not isinstance(obj, dict) or "fetch_id" not in obj:
            prob("fl-malformed", "fetch-log %s without fetch_id: %s" % (where(env), raw[:120]))
            continue
        fids[str(obj["fetch_id"])].append(env)
        m = feed_re.search(str(obj.get("url", "")))
        if m and obj.get("http_status") == 200:
            ok200[int(m.group(1))] += 1
    fl_dup = 0
    for fid, envs in fids.items():
        if len(envs) > 1:
            fl_dup += len(envs) - 1
            prob("fl-duplicate", "fetch_id %s x%d at %s"
                 % (fid, len(envs), ", ".join(where(e) for e in envs)))
    for f, c in ok200.items():
        nserved = len(served.get(f, []))
        if c > nserved:
            prob("fl-duplicate", "feed %d: %d committed 200 fetches, only %d responses served"
                 % (f, c, nserved))
    stats["fl_duplicates"] = fl_dup
    try:
        stats["story-clusters"] = len(kc.consume("story-clusters", timeout=30))
    except HarnessError:
        stats["story-clusters"] = "n/a"
    return stats


def compress(xs):
    """[1,2,3,7,9,10] -> '1-3,7,9-10' (first 12 ranges)."""
    xs = sorted(xs)
    out, i = [], 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(str(xs[i]) if i == j else "%d-%d" % (xs[i], xs[j]))
        i = j + 1
    s = ",".join(out[:12])
    return s + (",..." if len(out) > 12 else "")


# ---------------------------------------------------------------------------------------------
# The broker: NF_TEST_BROKER (or --broker), as tests/CMakeLists.txt sets it.

def parse_broker(spec):
    """unset, "" or "mock" -> ("mock", None): a `newsflow mock-kafka` of our own;
    "kafka:HOST:PORT[,HOST:PORT...]" -> ("kafka", "HOST:PORT,..."): a real cluster runs there.
    ValueError for anything else."""
    spec = (spec or "").strip()
    if spec in ("", "mock"):
        return "mock", None
    if spec.startswith("kafka:"):
        boot = spec[len("kafka:"):]
        if boot and all(re.match(r"^[A-Za-z0-9._-]+:\d{1,5}$", h) for h in boot.split(",")):
            return "kafka", boot
    raise ValueError("broker %r: want mock or kafka:HOST:PORT[,HOST:PORT...]" % spec)


def create_topics(newsflow, boot, prefix, logdir):
    """`newsflow topics create` for this run's prefix: every topic must then exist."""
    args = [newsflow, "topics", "create", "--set", "kafka.brokers=" + boot,
            "--set", "kafka.topic_prefix=" + prefix, "--partitions", "4"]
    try:
        p = subprocess.run(args, capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise HarnessError("`newsflow topics create` (%s) did not finish in 120 s" % boot)
    out = p.stdout.decode(errors="replace")
    with open(os.path.join(logdir, "topics-create.log"), "w") as f:
        f.write(out + p.stderr.decode(errors="replace"))
    if p.returncode != 0:
        raise HarnessError("`newsflow topics create` on %s exited %d: %s"
                           % (boot, p.returncode, (out + p.stderr.decode(errors="replace"))
                              .strip()[-400:]))
    log("topics: %s" % "; ".join(l.strip() for l in out.splitlines() if l.strip()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--newsflow", required=True, help="the newsflow binary")
    ap.add_argument("--broker", default=None,
                    help="mock (default) or kafka:HOST:PORT[,HOST:PORT...]; wins over "
                    "$NF_TEST_BROKER")
    ap.add_argument("--srcdir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                     "..", ".."))
    ap.add_argument("--config", default=None, help="default: SRCDIR/config/newsflow.json")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--quick", action="store_true", help="fewer rounds and events")
    ap.add_argument("--kills", type=int, default=None, help="SIGKILL rounds (default 12, quick 4)")
    ap.add_argument("--faults", default=",".join(FAULT_POINTS),
                    help="fault points, one round each (comma-separated; '' = none)")
    ap.add_argument("--feeds", type=int, default=None)
    ap.add_argument("--users", type=int, default=60)
    ap.add_argument("--static-sources", action="store_true",
                    help="do not add a feed to sources.urls before each restart")
    ap.add_argument("--shards", type=int, default=0, help="runtime.shards (0: job default)")
    ap.add_argument("--assignment", default=None,
                    help="kafka.assignment (default: all when the job has the key: a restarted "
                    "job must not wait out its killed predecessor's group session)")
    ap.add_argument("--set", action="append", default=[], help="extra --set for the job")
    ap.add_argument("--sabotage", choices=["rollback"], default=None,
                    help="self-test of this harness: roll the state dir back to an older copy "
                    "between two rounds (as a lost disk would); the checks must fail")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the work dir")
    ap.add_argument("--final-timeout", type=float, default=CRAWL_INTERVAL_S + 45)
    args = ap.parse_args()

    try:
        broker_kind, boot = parse_broker(args.broker if args.broker is not None
                                         else os.environ.get("NF_TEST_BROKER", ""))
    except ValueError as e:
        print("crash.py: %s (--broker or NF_TEST_BROKER)" % e, file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    rnd = random.Random(seed)
    args.newsflow = os.path.abspath(args.newsflow)
    if args.config is None:
        args.config = os.path.join(args.srcdir, "config", "newsflow.json")
    kills = args.kills if args.kills is not None else (4 if args.quick else 12)
    faults = [f for f in args.faults.split(",") if f]
    for f in faults:
        if f not in FAULT_POINTS:
            print("unknown fault point %s" % f, file=sys.stderr)
            return 2
    nfeeds = args.feeds or (3 if args.quick else 5)
    try:
        keys = subprocess.run([args.newsflow, "config", "keys"], capture_output=True,
                              timeout=30).stdout.decode()
    except (OSError, subprocess.TimeoutExpired):
        keys = ""
    args.job_keys = set(re.findall(r"^([a-z_]+\.[a-z_.]+)\s", keys, re.M))
    if args.assignment is None:
        args.assignment = "all" if "kafka.assignment" in args.job_keys else ""
    print("crash.py: broker=%s seed=%d quick=%s kills=%d faults=%s feeds=%d"
          % ("mock" if broker_kind == "mock" else "kafka:" + boot, seed, args.quick, kills,
             ",".join(faults) or "-", nfeeds), flush=True)
    if not shutil.which("kcat"):
        print("crash.py: kcat not found", file=sys.stderr)
        return 2

    workdir = args.workdir or tempfile.mkdtemp(prefix="nf-crash-")
    os.makedirs(workdir, exist_ok=True)
    state_dir = os.path.join(workdir, "state")
    logdir = os.path.join(workdir, "logs")
    os.makedirs(logdir, exist_ok=True)
    atexit.register(cleanup_children)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    log("work dir %s" % workdir)

    kafka_set = []
    if broker_kind == "mock":
        # --- mock Kafka: started here, stopped at exit
        mock_err = open(os.path.join(logdir, "mock-kafka.log"), "w")
        mock = spawn([args.newsflow, "mock-kafka", "--partitions", "4"], sig=signal.SIGTERM,
                     stdout=subprocess.PIPE, stderr=mock_err, stdin=subprocess.DEVNULL)
        mock_boot = [None]

        def read_mock():
            for raw in mock.stdout:
                line = raw.decode(errors="replace").strip()
                if line.startswith("bootstrap=") and mock_boot[0] is None:
                    mock_boot[0] = line.split("=", 1)[1]
        threading.Thread(target=read_mock, daemon=True).start()
        deadline = time.time() + 30
        while mock_boot[0] is None and time.time() < deadline and mock.poll() is None:
            time.sleep(0.05)
        if mock_boot[0] is None:
            mock_err.flush()
            print("crash.py: `newsflow mock-kafka` printed no bootstrap line (exit %s); see %s"
                  % (mock.poll(), mock_err.name), file=sys.stderr)
            return 2
        boot, prefix = mock_boot[0], ""
        log("broker: mock kafka (`newsflow mock-kafka`, pid %d) at %s" % (mock.pid, boot))

        def check_broker():
            """The mock cluster must outlive every job run: its death is the harness's
            failure."""
            rc = mock.poll()
            if rc is not None:
                how = ("killed by signal %d" % -rc) if rc < 0 else ("exit %d" % rc)
                raise HarnessError("`newsflow mock-kafka` (pid %d) died (%s) before %.1fs; the "
                                   "job runs after that could not reach Kafka; see %s"
                                   % (mock.pid, how, time.time() - T0, mock_err.name))
    else:
        # --- a real Kafka cluster (not ours): topics of this run only, under a unique prefix
        prefix = "nft-crash-%d-%s." % (os.getpid(), os.urandom(2).hex())
        log("broker: real kafka at %s, topic prefix %s" % (boot, prefix))
        kafka_set = ["kafka.topic_prefix=" + prefix, "kafka.group_id=%sgroup" % prefix,
                     "kafka.transactional_id=%stx" % prefix]
        create_topics(args.newsflow, boot, prefix, logdir)

        def check_broker():
            pass  # a dead broker shows as kcat and job failures

    os.makedirs(os.path.join(workdir, "topics"), exist_ok=True)
    kc = Kcat(boot, prefix, os.path.join(workdir, "topics"))

    feeds = Feeds(nfeeds, base=30, grow=3, rnd=rnd)
    feeds.start()
    log("feed server at 127.0.0.1:%d (%d feeds to start with, one more per round)"
        % (feeds.port, nfeeds))

    tag = "%x" % (seed & 0xfffff)
    events = Events(kc, rnd, args.users, tag)
    # A first wave before the job ever starts: it must be processed from offset 0.
    if not events.wave(200):
        print("crash.py: cannot produce to read-events: %s" % events.produce_errors[-1],
              file=sys.stderr)
        return 2

    job = Job(args, boot, state_dir, feeds, logdir, kafka_set)
    problems = []        # (phase, category, message)
    notes = []

    def prob(cat, msg):
        problems.append(("rounds", cat, msg))

    rounds = [("kill", None)] * kills + [("fault", fp) for fp in faults]
    rnd.shuffle(rounds)
    # Start with a kill round so that state exists before the first fault round.
    if rounds and rounds[0][0] == "fault":
        k = next((i for i, r in enumerate(rounds) if r[0] == "kill"), None)
        if k is not None:
            rounds[0], rounds[k] = rounds[k], rounds[0]

    # Small waves back to back (each is one kcat run, ~0.1 s): nearly every 300 ms epoch gets
    # input, so that fault points that need records (mid_produce) are reached.
    if args.quick:
        events.start(6, 20, (0.05, 0.15))
    else:
        events.start(8, 25, (0.03, 0.12))

    kill_n = fault_n = fault_fired = 0
    for i, (kind, fp) in enumerate(rounds):
        if i > 0 and not args.static_sources:
            feeds.active += 1
        if kind == "kill":
            delay = rnd.uniform(0.2, 3.0)
            job.start("kill")
            time.sleep(delay)
            rc = job.proc.poll()
            if rc is not None:
                prob("job-exit", "run %s exited by itself with %s before the kill at %.2fs: %s"
                     % (job.label, rc, delay, " | ".join(job.tail(4))))
                job.wait(5)
            else:
                job.kill()
                kill_n += 1
            log("round %s: SIGKILL after %.2fs (restored epoch %s, epochs logged %s; "
                "interest-updates now %d)" % (job.label, delay, job.restored,
                                              span(job.run_epochs), kc.count("interest-updates")))
        else:
            # A few epochs into the run, so that input is flowing. A fault point can be passed
            # legitimately (mid_produce in an epoch without records): when the run logs a later
            # epoch than the target without having fired, it is killed (one more SIGKILL
            # round) and the fault retried with a later epoch: up to 8 attempts for mid_produce
            # (about half the epochs carry no records: input arrives in bursts), 5 for others.
            fault_n += 1
            attempts = 8 if fp == "mid_produce" else 5
            for attempt in range(1, attempts + 1):
                # Epochs with records tend to alternate with empty ones: retries alternate the
                # parity of the offset from the bound.
                target = job.next_epoch_bound() + rnd.choice((3, 5) if attempt % 2 else (4, 6))
                if fp == "mid_checkpoint":
                    target = ((target + RETAIN_EVERY - 1) // RETAIN_EVERY) * RETAIN_EVERY
                job.start("fault-" + fp, fault="%s:%d" % (fp, target))
                deadline = time.time() + 30
                rc = None
                while time.time() < deadline:
                    rc = job.wait(0.1)
                    if rc is not None or max(job.run_epochs, default=0) > target:
                        break
                if rc is None:
                    job.kill()
                    passed = max(job.run_epochs, default=0) > target
                    msg = ("NF_FAULT=%s:%d did not fire (restored epoch %s, epochs logged in "
                           "the run: %s%s)" % (fp, target, job.restored, span(job.run_epochs),
                                               "" if passed else ", waited 30 s"))
                    log("round %s: %s; killed" % (job.label, msg))
                    if not passed:  # the job is stuck, not skipping: no point retrying
                        prob("fault-not-fired", msg + " (run %s: %s)"
                             % (job.label, " | ".join(job.tail(3))))
                    elif attempt < attempts:
                        notes.append("attempt %d: %s" % (attempt, msg))
                        continue
                    else:
                        prob("fault-not-fired", msg + " in %d attempts" % attempts)
                elif rc != 137:
                    prob("job-exit", "run %s (NF_FAULT=%s:%d) exited %s, want 137: %s"
                         % (job.label, fp, target, rc, " | ".join(job.tail(4))))
                    log("round %s: NF_FAULT=%s:%d exit %s" % (job.label, fp, target, rc))
                else:
                    fault_fired += 1
                    log("round %s: NF_FAULT=%s:%d fired after %.1fs (restored epoch %s, epochs "
                        "logged %s; interest-updates now %d)"
                        % (job.label, fp, target, job.ended - job.started, job.restored,
                           span(job.run_epochs), kc.count("interest-updates")))
                break
        check_broker()
        if args.sabotage == "rollback" and i == len(rounds) // 3:
            shutil.copytree(state_dir, state_dir + ".snap", symlinks=True)
            log("sabotage: state dir saved")
        if args.sabotage == "rollback" and i == 2 * len(rounds) // 3:
            shutil.rmtree(state_dir)
            shutil.copytree(state_dir + ".snap", state_dir, symlinks=True)
            log("sabotage: state dir rolled back to the saved copy")
        time.sleep(rnd.uniform(0.0, 0.4))

    # A last few waves while nothing runs, then the final clean run catches up.
    events.halt()
    for _ in range(3):
        events.wave(rnd.randint(20, 60))
    if events.produce_errors:
        notes.append("%d kcat produce runs failed (their records are judged by what reached "
                     "read-events): %s" % (len(events.produce_errors), events.produce_errors[0]))

    check_broker()
    n_in, expected_n, poison_at, valid_at, unknown = read_truth(kc, tag)
    kinds = dict(events.sent_poison)
    total_valid = sum(expected_n.values())
    sent_valid = sum(events.sent_valid.values())
    if total_valid != sent_valid or len(set(poison_at.values())) != len(events.sent_poison):
        notes.append("read-events holds %d valid / %d poison, kcat reported %d / %d"
                     % (total_valid, len(poison_at), sent_valid, len(events.sent_poison)))
    if unknown:
        notes.append("%d read-events records not recognised, e.g. at %s" % (len(unknown), unknown[:3]))
    n_poison = len(poison_at)
    if n_poison != len(set(poison_at.values())):
        notes.append("some poison records reached read-events twice (kcat retry)")
    log("read-events: %d records, %d valid events of %d users, %d poison"
        % (n_in, total_valid, len(expected_n), n_poison))

    final_start = time.time()
    job.start("final")
    stable, last_counts = 0, None
    reason = "timeout"
    while time.time() - final_start < args.final_timeout:
        time.sleep(1.0)
        if job.proc.poll() is not None:
            reason = "job exited"
            prob("job-exit", "final run exited by itself with %s: %s"
                 % (job.proc.returncode, " | ".join(job.tail(4))))
            break
        counts = tuple(kc.count(t) for t in OUT_TOPICS[:4])
        stable = stable + 1 if counts == last_counts else 0
        last_counts = counts
        snap = feeds.snapshot()
        fetched = all(any(t >= final_start for t, _, _ in snap.get(f, [])) for f in range(feeds.active))
        last_serve = max((t for v in snap.values() for t, _, _ in v), default=0)
        # Feeds keep coming due (60 s each), so stop in a quiet moment: no fetch in flight,
        # none finished in the last 1.5 s, output counts unchanged over two polls.
        if counts[0] >= total_valid and counts[1] >= n_poison and fetched and stable >= 2 \
                and feeds.in_flight == 0 and time.time() - last_serve >= 1.5:
            reason = "caught up"
            break
    log("final run: %s after %.1fs, counts iu/dl/articles/fetch-log = %s"
        % (reason, time.time() - final_start, last_counts))
    end_time = time.time()
    rc = job.term()
    if rc != 0:
        prob("sigterm", "final run: SIGTERM gave exit %s, want 0: %s"
             % (rc, " | ".join(job.tail(4))))
    snap = feeds.snapshot()
    r_req = {}
    for f in range(feeds.active):
        sizes = [n for t, n, _ in snap.get(f, []) if t <= end_time - 2]
        r_req[f] = max(sizes) if sizes else 0

    check_broker()
    stats = verify(kc, feeds, expected_n, poison_at, valid_at, kinds, r_req, problems, "main")
    log("verified: %s" % json.dumps(stats))

    # --- final state: one more event for a few users; their next version is n+1.
    heavy = sorted(expected_n, key=lambda u: -expected_n[u])[:3]
    others = [u for u in sorted(expected_n) if u not in heavy]
    chosen = heavy + rnd.sample(others, min(2, len(others)))
    lines = []
    for u in chosen:
        lines.append(events.valid(u))
    ok, err = kc.produce(lines)
    if not ok:
        raise HarnessError("cannot produce the final-state events: " + err)
    expected2 = dict(expected_n)
    for u in chosen:
        expected2[u] = expected_n[u] + 1
    job.start("final-state")
    t1 = time.time()
    got_all = False
    while time.time() - t1 < 30 and job.proc.poll() is None:
        time.sleep(0.7)
        vers = defaultdict(set)
        for env in kc.consume("interest-updates"):
            obj, _ = env_value(env)
            if isinstance(obj, dict) and obj.get("user_id") in expected2:
                vers[obj["user_id"]].add(obj.get("version"))
        if all(expected2[u] in vers[u] for u in chosen):
            got_all = True
            break
    time.sleep(0.7)  # let another epoch pass: nothing more may come
    rc = job.term()
    if rc != 0:
        problems.append(("final-state", "sigterm", "final-state run: SIGTERM gave exit %s: %s"
                         % (rc, " | ".join(job.tail(4)))))
    if not got_all:
        problems.append(("final-state", "state", "users %s: version n+1 not seen within 30 s"
                         % ", ".join("%s(n=%d)" % (u, expected_n[u]) for u in chosen)))
    stats2 = verify(kc, feeds, expected2, poison_at, valid_at, kinds, r_req, problems, "final-state")
    log("final-state run: users %s -> versions %s; verified: %s"
        % (",".join(chosen), ",".join(str(expected2[u]) for u in chosen), json.dumps(stats2)))

    # --- summary
    # Identical findings of both phases are reported once.
    uniq, seenmsg = [], set()
    for ph, cat, msg in problems:
        if (cat, msg) in seenmsg:
            continue
        seenmsg.add((cat, msg))
        uniq.append((ph, cat, msg))
    cats = Counter(cat for _, cat, _ in uniq)
    dups = stats["iu_duplicates"] + stats["dl_duplicates"] + stats["art_duplicates"] + \
        stats["fl_duplicates"]
    miss = stats["iu_missing"] + stats["dl_missing"] + stats["art_missing"]
    print()
    print("summary: broker=%s seed=%d kills=%d faults=%d/%d fired (%s) job-runs=%d last-epoch=%d"
          % ("mock" if broker_kind == "mock" else "kafka:" + boot, seed, kill_n, fault_fired, fault_n, ",".join(faults) or "-", job.runs, job.max_epoch))
    print("  input: %d read-events = %d valid events of %d users + %d poison (%s)"
          % (n_in, total_valid, len(expected_n), n_poison,
             ", ".join("%s=%d" % kv for kv in sorted(Counter(kinds.get(m, "?") for m in poison_at.values()).items()))))
    print("  outputs: interest-updates=%s dead-letters=%s articles=%s fetch-log=%s "
          "story-clusters=%s" % (stats["interest-updates"], stats["dead-letters"],
                                 stats["articles"], stats["fetch-log"], stats["story-clusters"]))
    reqs = [len(snap.get(f, [])) for f in range(feeds.active)]
    print("  feeds: %d, %d requests (%d..%d per feed), %d items in their last responses"
          % (feeds.active, sum(reqs), min(reqs), max(reqs),
             sum(max([n for _, n, _ in snap.get(f, [])] or [0]) for f in range(feeds.active))))
    print("  duplicates=%d missing=%d (main phase); iu out-of-order users=%d"
          % (dups, miss, stats["iu_out_of_order_users"]))
    rf = job.rollforwards
    print("  roll-forward: %d pending epochs, %d of their %d records found in Kafka, %d produced "
          "again%s" % (len(rf), sum(f for _, _, f in rf), sum(r for _, r, _ in rf),
                       sum(r - f for _, r, f in rf),
                       "" if broker_kind == "mock" else
                       "; records of aborted transactions (read_uncommitted - read_committed): "
                       + ", ".join("%s=%d" % (t, kc.count(t, committed=False) - kc.count(t))
                                   for t in OUT_TOPICS[:4])))
    if stats["iu_out_of_order_users"]:
        notes.append("%d (user, partition) sequences of interest-updates are not in ascending "
                     "version order by offset" % stats["iu_out_of_order_users"])
    for n in notes:
        print("  note: %s" % n)
    errs = job.errors
    if errs:
        print("  job error log lines: %d (first: %s %s)" % (len(errs), errs[0][0], errs[0][1][:200]))
    if uniq:
        print("FAIL: %d problems (%s); first 20:" % (len(uniq), ", ".join(
            "%s=%d" % kv for kv in sorted(cats.items()))))
        # The first 20, but at most 6 of a category while others wait.
        pick, per = [], Counter()
        for idx, (ph, cat, msg) in enumerate(uniq):
            if per[cat] < 6:
                pick.append(idx)
                per[cat] += 1
        pick = sorted(pick[:20] + [i for i in range(len(uniq)) if i not in pick][:max(0, 20 - len(pick))])
        for idx in pick[:20]:
            ph, cat, msg = uniq[idx]
            print("  [%s/%s] %s" % (ph, cat, msg))
        with open(os.path.join(workdir, "problems.txt"), "w") as f:
            for ph, cat, msg in uniq:
                f.write("[%s/%s] %s\n" % (ph, cat, msg))
        print("all problems: %s" % os.path.join(workdir, "problems.txt"))
        print("logs: %s; topic contents: %s" % (logdir, os.path.join(workdir, "topics")))
        return 1
    print("PASS")
    if not args.keep and not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def span(xs):
    return "%d..%d" % (min(xs), max(xs)) if xs else "none"


if __name__ == "__main__":
    try:
        rc = main()
    except HarnessError as e:
        print("crash.py: harness error: %s" % e, file=sys.stderr)
        rc = 2
    cleanup_children()
    sys.exit(rc)
