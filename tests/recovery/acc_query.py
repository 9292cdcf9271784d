"""The query API on a running job (src/serve/query.h), against the broker of the run (the mock,
or Apache Kafka itself under kafka-real/):

  1. freshness: one read event of a new reader at a time, produced (kcat returns once the
     broker has it), then GET /v1/users/{user}/interest polled every 5 ms until the reader's
     vector shows: the time from produced to visible, 20 readers, checkpoint.interval_ms 1000.
     The issue's bound is one interval + 200 ms: the median must keep it (on the mock, which
     consumes slowly, 500 ms more: see freshness()); each sample must be
     within two intervals + 1 s (a loaded CI machine delays single epochs, not every one);
  2. exactly once under query load: four threads query the API (feed, interest, trending,
     topics, articles) as fast as they can while 40 readers' events arrive in waves and the job
     is SIGKILLed once and restarted; interest-updates must still hold every (user, version)
     exactly once over 1..reads (acclib.check_interest_updates), every answer must be a 200 or
     a documented 4xx/503 (never another 5xx), and the answers' epochs never go back within one
     process.

Prints one JSON line {"bench":"query_freshness",...} with the samples (perf/README quotes it).
Usage: python3 acc_query.py NEWSFLOW SRCDIR
"""
import json
import os
import random
import socket
import statistics
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import acclib  # noqa: E402

INTERVAL_MS = 1000


def get(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        body = e.read()
        try:
            return e.code, json.loads(body) if body else None
        except ValueError:
            return e.code, None
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return None, None  # the job is down (killed, restarting)


def event(user, article, session, ts_ms):
    ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts_ms / 1000)) + ".%03dZ" % (ts_ms % 1000)
    return (user, json.dumps({"user_id": user, "article_id": article, "session_id": session,
                              "ts": ts}, separators=(",", ":")))


def free_port():
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        return sk.getsockname()[1]


def start_job(ctx, broker, state, port, tag):
    return acclib.Job(ctx, broker, state, tag=tag, interval_ms=INTERVAL_MS, txid_suffix="q",
                      sets=["admin.enabled=true", "admin.port=%d" % port])


def wait_ready(ctx, port, job):
    ctx.wait_for("the query API answering", lambda: get(port, "/v1/trending")[0] == 200,
                 timeout=90, interval=0.1, job=job)


MOCK_FETCH_WAIT_MS = 500


def freshness(ctx, broker, port, job):
    samples = []
    for i in range(21):
        user = "fresh-%d" % i
        now = int(time.time() * 1000)
        acclib.kcat_produce(ctx, broker, "read-events", [event(user, "a%d" % i, "s", now)],
                            tag="fresh%d" % i)
        produced = time.monotonic()
        deadline = produced + 30
        while time.monotonic() < deadline:
            status, body = get(port, "/v1/users/%s/interest" % user)
            if status == 200:
                break
            time.sleep(0.005)
        else:
            ctx.fail("reader %s never visible in the API 30 s after its event" % user, job)
        if i > 0:  # the first one pays for the consumer's first fetch of the topic
            samples.append(round((time.monotonic() - produced) * 1000, 1))
        time.sleep(random.uniform(0, INTERVAL_MS / 1000))  # land anywhere in an epoch
    med = statistics.median(samples)
    print(json.dumps({"bench": "query_freshness", "broker": broker.kind,
                      "checkpoint_interval_ms": INTERVAL_MS, "samples_ms": samples,
                      "median_ms": med, "p90_ms": sorted(samples)[int(0.9 * len(samples)) - 1],
                      "max_ms": max(samples)}), flush=True)
    # The bound, one interval + 200 ms, is asserted on Apache Kafka (kafka-real/test_query
    # runs this same function). librdkafka's mock cluster consumes slowly: on an idle machine its
    # median here is ~1,000 ms against the ~650 an interval's wait predicts, and 1,203 ms failed
    # a loaded CI run; on it the median may take the consumer's fetch wait
    # (fetch.wait.max.ms, librdkafka's default 500 ms) more.
    bound = INTERVAL_MS + 200 + (MOCK_FETCH_WAIT_MS if broker.kind == "mock" else 0)
    ctx.check(med <= bound,
              "freshness: median %.0f ms from produced to visible > %d ms (one interval + 200 ms%s)"
              " (samples %s)" % (med, bound, " + the mock's fetch wait" if bound > INTERVAL_MS + 200
                                 else "", samples))
    ctx.check(max(samples) <= 2 * INTERVAL_MS + 1000,
              "freshness: a read took %.0f ms to show (samples %s)" % (max(samples), samples))
    return med


class Load:
    """Threads querying the API until stopped; counts answers by status."""

    def __init__(self, port, users, threads=4):
        self.port, self.users = port, users
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.status = {}
        self.bad = []
        self.epoch_back = []
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True)
                        for i in range(threads)]
        for t in self.threads:
            t.start()

    def run(self, i):
        rng = random.Random(i)
        last_epoch, last_pid = -1, None
        while not self.stop.is_set():
            u = urllib.parse.quote(rng.choice(self.users))
            path = rng.choice(["/v1/feed/%s?limit=10" % u, "/v1/users/%s/interest" % u,
                               "/v1/trending?limit=20", "/v1/topics/science/recent",
                               "/v1/articles/" + "%032x" % rng.getrandbits(128)])
            status, body = get(self.port, path)
            with self.lock:
                self.status[status] = self.status.get(status, 0) + 1
                if status is not None and status >= 500 and status != 503:
                    self.bad.append((path, status, body))
            if status == 200 and isinstance(body, dict) and "epoch" in body:
                # a restart starts a new process: epochs go on from the committed one
                if body["epoch"] < last_epoch:
                    with self.lock:
                        self.epoch_back.append((path, last_epoch, body["epoch"]))
                last_epoch = body["epoch"]
            elif status is None:
                last_epoch = -1  # the job is down: the next process may answer older at first
            time.sleep(0)

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(30)
        return self.status


def body(ctx):
    broker = acclib.start_broker(ctx, name="query", partitions=4)
    port = free_port()
    state = ctx.path("state")
    job = start_job(ctx, broker, state, port, "query-1")
    wait_ready(ctx, port, job)
    med = freshness(ctx, broker, port, job)
    ctx.log("freshness: median %.0f ms (interval %d ms)" % (med, INTERVAL_MS))

    users = ["reader-%d" % i for i in range(40)]
    counts = {u: 0 for u in users}
    load = Load(port, users)
    waves = 16
    kill_at = random.randint(4, waves - 5)
    for w in range(waves):
        lines = []
        now = int(time.time() * 1000)
        for k in range(60):  # each read distinct (user, article, session, ts): each counts
            u = random.choice(users)
            counts[u] += 1
            lines.append(event(u, "art-%d" % random.randint(0, 30), "s%d-%d" % (w, k), now + k))
        acclib.kcat_produce(ctx, broker, "read-events", lines, tag="w%d" % w)
        time.sleep(0.25)
        if w == kill_at:
            time.sleep(random.uniform(0, INTERVAL_MS / 1000))
            job.kill()
            ctx.log("query-1 SIGKILLed under query load after wave %d" % w)
            job = start_job(ctx, broker, state, port, "query-2")
    # What read-events holds (a retried produce may have written an event twice: it counts).
    want, _ = acclib.expected_from_input(ctx, broker)
    acclib.wait_all_consumed(ctx, job, broker, sum(want.values()), timeout=240)
    status = load.finish()
    ctx.check(job.terminate(60) == 0, "exit after SIGTERM", job)
    ctx.log("query load: answers by status %s" % status)
    ctx.check(not load.bad, "answers with a 5xx other than 503: %s" % load.bad[:5])
    ctx.check(not load.epoch_back, "answers' epochs went back: %s" % load.epoch_back[:5])
    ctx.check(status.get(200, 0) > 100, "too few answers under load: %s" % status)
    ctx.check(all(want.get(u, 0) >= c for u, c in counts.items()), "read-events lacks events")
    recs = acclib.read_outputs(ctx, broker, "interest-updates")
    ctx.log(acclib.check_interest_updates(ctx, recs, want))


acclib.main("query", body)
