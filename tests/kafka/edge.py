"""The HTTP edge on Apache Kafka (issue 38): 202 means durable, and a repeat counts once.

A 1-node cluster of the test's own (kcluster.py: the broker is killed).

  durable   `newsflow ingest` is killed with SIGKILL right after each 202, five times over: every
            event of every 202 is in read-events (read back with kcat), in canonical form.
  outage    the broker is killed: a batch is answered 503 with Retry-After within the delivery
            timeout (a bounded wait, no hang); the broker restarts and the same batch, sent
            again until it is answered 202, is in the topic.
  once      a job (`newsflow run` with its own edge) takes the same event posted twice, and a
            save of the same article: interest-updates holds one update per distinct event.

Usage: python3 edge.py NEWSFLOW SRCDIR
"""
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.dont_write_bytecode = True  # nothing written into the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "recovery"))
sys.path.insert(0, HERE)
import acclib  # noqa: E402
import kcluster  # noqa: E402


def post(port, path, body, timeout=60):
    """(status, headers, parsed JSON body) of one POST."""
    data = body.encode() if isinstance(body, str) else body
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=data,
                                 method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read() or b"null")


class Ingest:
    """One `newsflow ingest` process on an ephemeral port, learnt from its "taking events" line."""

    def __init__(self, ctx, broker, tag, sets=()):
        self.ctx = ctx
        self.log_path = ctx.path("%s.err" % tag)
        argv = [ctx.nf, "ingest"]
        for s in broker.job_sets()[:2] + ["admin.port=0"] + list(sets):
            argv += ["--set", s]
        self._errf = open(self.log_path, "wb")
        self.proc = ctx.spawn(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=self._errf)
        self.port = None

        def started():
            for line in open(self.log_path, errors="replace"):
                m = re.search(r'"msg":"taking events".*"port":(\d+)', line)
                if m:
                    self.port = int(m.group(1))
            return self.port is not None or self.proc.poll() is not None
        ctx.wait_for("%s's server" % tag, started, timeout=60,
                     last=lambda: open(self.log_path, errors="replace").read()[-600:])
        ctx.check(self.proc.poll() is None, "%s exited at start (%s)" % (tag, self.log_path))

    def kill9(self):
        self.proc.kill()
        self.proc.wait()


def events(tag, n, ts_ms, kind=None):
    out = []
    for i in range(n):
        e = {"user_id": "%s-u%d" % (tag, i % 7), "article_id": "%032x" % (i * 7919 + 13),
             "session_id": "%s-s%d" % (tag, i), "ts": ts_ms}
        if kind:
            e["kind"] = kind
        out.append(e)
    return out


def event_ids(ctx, broker, users_prefix=""):
    """{event_id: count} of read-events (of the users whose id starts with users_prefix), and
    every value decodes to a canonical event."""
    got = {}
    for k, h, v in acclib.read_outputs(ctx, broker, "read-events", isolation="read_uncommitted"):
        ctx.check(k == v["user_id"], "a record keyed %r holds user %r" % (k, v["user_id"]))
        ctx.check(len(v.get("event_id", "")) == 64, "a record without a computed event_id: %r" % v)
        if v["user_id"].startswith(users_prefix):
            got[v["event_id"]] = got.get(v["event_id"], 0) + 1
    return got


def durable(ctx, broker):
    acked = []
    for round_ in range(5):
        ing = Ingest(ctx, broker, "ingest-%d" % round_, sets=["edge.delivery_timeout_ms=30000"])
        batch = events("d%d" % round_, 100, int(time.time() * 1000))
        status, _, body = post(ing.port, "/v1/events", json.dumps(batch))
        ing.kill9()  # right after the 202: nothing may still be on its way
        ctx.check(status == 202 and body["accepted"] == 100,
                  "round %d: %d %r" % (round_, status, body))
        acked.append(body)
    got = event_ids(ctx, broker)
    ctx.check(len(got) == 500, "read-events holds %d distinct events, want the 500 answered 202"
              % len(got))
    ctx.log("5 x 100 events answered 202, each process killed -9 at once: all 500 in Kafka")


def outage(ctx, cluster, broker):
    ing = Ingest(ctx, broker, "ingest-outage", sets=["edge.delivery_timeout_ms=3000",
                                                      "edge.retry_after_s=2"])
    batch = json.dumps(events("o", 50, int(time.time() * 1000)))
    cluster.kill9(1)
    t0 = time.monotonic()
    status, headers, body = post(ing.port, "/v1/events", batch)
    took = time.monotonic() - t0
    ctx.check(status == 503, "broker down: %d %r, want 503" % (status, body))
    ctx.check(headers.get("Retry-After") == "2", "503 without Retry-After 2: %r" % headers)
    ctx.log("broker down: 503 %r after %.1f s" % (body.get("error"), took))
    cluster.start_node(1)
    last = [None]

    def taken():
        last[0] = post(ing.port, "/v1/events", batch)
        return last[0][0] == 202
    ctx.wait_for("the same batch answered 202 once the broker is back", taken, timeout=180,
                 interval=1.0, last=lambda: repr(last[0]))
    got = event_ids(ctx, broker, users_prefix="o-")
    ctx.check(len(got) == 50, "after the outage %d distinct events of the batch in the topic, "
              "want its 50" % len(got))
    ing.kill9()


def once(ctx, broker):
    """Each event of one reader carries its own whole-second ts, so that the interest update it
    makes says which it was (updated_at): once the last one's update is out, every earlier one
    has been counted or dropped (one reader, one partition, in order)."""
    j = acclib.Job(ctx, broker, ctx.path("state-once"), tag="job-once",
                   sets=["admin.enabled=true", "admin.port=0"])
    ctx.wait_for("the job's admin port", lambda: j.admin_port() is not None, timeout=60, job=j)
    base = (int(time.time()) - 60) * 1000
    read = {"user_id": "once-u", "article_id": "%032x" % 42, "session_id": "s1", "ts": base}
    sent = [read, read, dict(read, kind="save", ts=base + 1000),
            dict(read, kind="share", ts=base + 2000),
            dict(read, article_id="%032x" % 43, ts=base + 3000)]
    for ev in sent:
        status, _, ans = post(j.admin_port(), "/v1/events", json.dumps([ev]))
        ctx.check(status == 202, "job's edge: %d %r" % (status, ans), j)
    last_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime((base + 3000) // 1000))
    recs = []

    def last_counted():
        recs[:] = [v for k, h, v in acclib.read_outputs(ctx, broker, "interest-updates")
                   if k == "once-u"]
        return any(r["updated_at"] == last_at for r in recs)
    ctx.wait_for("the interest update of the last event", last_counted, timeout=120,
                 interval=0.5, job=j, last=lambda: "%d updates" % len(recs))
    versions = sorted(r["version"] for r in recs)
    ctx.check(versions == [1, 2, 3, 4], "interest versions of once-u %r, want [1, 2, 3, 4]: the "
              "read posted twice counted once, the save and share of it apart" % versions, j)
    ctx.check(j.terminate() == 0, "exit after SIGTERM != 0", j)
    ctx.log("the same read posted twice counted once; the save and share of it apart")


def body(ctx):
    cluster = kcluster.Cluster(ctx, "edge", nodes=1)
    broker = acclib.real_broker(ctx, cluster.bootstrap, partitions=4)
    durable(ctx, broker)
    outage(ctx, cluster, broker)
    once(ctx, broker)


if __name__ == "__main__":
    acclib.main("edge", body)
