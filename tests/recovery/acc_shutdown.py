"""Shutdown and readiness with the Kafka cluster down (issue 15, items 1 and 4).

  1. A job (shutdown.timeout_ms 4000, checkpoint.interval_ms 300, the admin server on) consumes a
     first wave of read events; /readyz answers 200 with {"ready":true,...}.
  2. The cluster goes down (the mock: `down 1`; Apache Kafka: its one broker is stopped) while a
     second wave is still being consumed. Within a few intervals /readyz answers 503 and its
     JSON body names "commit_overdue" (no epoch committed for 3 intervals) with the epoch and the
     seconds since the last commit; the log says "not ready" with the same reason.
  3. SIGTERM while the cluster is down: the job must exit within shutdown.timeout_ms (plus a
     slack for process start-up costs, far below the 96 s it took before), with exit code 1 and
     a log line saying the deadline passed before the final epoch committed.
  4. The cluster comes back; the job restarts on the same state and consumes everything; every
     (user, version) of interest-updates exactly once, as read_committed readers see it.

Usage: python3 acc_shutdown.py NEWSFLOW SRCDIR [--own-cluster]
  --own-cluster  start a 1-node Apache Kafka cluster of the test's own (tests/kafka/kcluster.py)
                 and stop that broker for the outage; otherwise a mock cluster (`down 1`).
"""
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request

sys.dont_write_bytecode = True  # nothing written into the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "kafka"))
import acclib  # noqa: E402

TIMEOUT_MS = 4000
SLACK_S = 8.0  # process teardown and scheduling on a loaded 2-core machine; the bug was 96 s


def readyz(job):
    """(status, parsed JSON body) of the job's /readyz, or (None, None) if it does not answer."""
    port = job.admin_port()
    if not port:
        return None, None
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % port, timeout=5) as r:
            return r.status, json.loads(r.read().decode())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read().decode())
    except (OSError, ValueError):
        return None, None


class Outage:
    """Takes the cluster down and up: the mock's fault command, or a real broker stopped."""

    def __init__(self, ctx, own_cluster):
        self.ctx = ctx
        self.cluster = None
        if own_cluster:
            import kcluster
            self.cluster = kcluster.Cluster(ctx, "shutdown", nodes=1)
            self.broker = acclib.real_broker(ctx, self.cluster.bootstrap, name="shutdown",
                                             partitions=4)
        else:
            self.broker = acclib.mock_broker(ctx, partitions=4)

    def down(self):
        if self.cluster:
            # SIGKILL, not a graceful stop: a controlled shutdown of a 1-node cluster first takes
            # every partition's leadership away, and Kafka's transaction coordinator then skips
            # the markers of a commit in flight ("Couldn't find leader endpoint for partitions
            # ... likely deleted already and hence can be skipped") yet records it complete: the
            # partitions keep a hanging transaction, read_committed readers stop at it for good
            # and the group's stable offsets never answer (seen here: the job's epoch 7 committed
            # 130 ms before the stop, its interest-updates never became visible). That is a Kafka
            # defect, not the job's (docs/runbooks.md "Broker outage"); a killed broker instead
            # finishes the commit from its transaction log when it comes back.
            self.cluster.kill9(1)
        else:
            ans = self.broker.command("down 1")
            self.ctx.check(ans == "ok", "mock refused 'down 1': %r" % ans)

    def up(self):
        if self.cluster:
            self.cluster.start_node(1)
        else:
            ans = self.broker.command("up 1")
            self.ctx.check(ans == "ok", "mock refused 'up 1': %r" % ans)


def body(ctx):
    own = "--own-cluster" in sys.argv[3:]
    out = Outage(ctx, own)
    B = out.broker
    ev = acclib.Events(users=30, prefix="sd")
    state = ctx.path("state")
    sets = ["admin.enabled=true", "admin.port=0", "shutdown.timeout_ms=%d" % TIMEOUT_MS,
            "log.progress_interval_ms=1000"]
    job = acclib.Job(ctx, B, state, sets=sets, interval_ms=300, tag="job-1")

    wave1 = ev.make(300)
    acclib.kcat_produce(ctx, B, "read-events", wave1, tag="w1")
    acclib.wait_all_consumed(ctx, job, B, len(wave1), timeout=120)
    last = [None]

    def is_ready():
        last[0] = readyz(job)
        return last[0][0] == 200
    ctx.wait_for("/readyz 200 while the cluster is up", is_ready, timeout=60, job=job,
                 last=lambda: repr(last[0]))
    status, doc = last[0]
    ctx.check(doc.get("ready") is True and doc.get("waiting_for") == [],
              "/readyz 200 body: %r" % doc, job)

    acclib.kcat_produce(ctx, B, "read-events", ev.make(300), tag="w2")
    out.down()
    t_down = time.monotonic()

    def overdue():
        last[0] = readyz(job)
        return last[0][0] == 503 and "commit_overdue" in (last[0][1] or {}).get("waiting_for", [])
    ctx.wait_for("/readyz 503 naming commit_overdue with the cluster down", overdue, timeout=60,
                 job=job, last=lambda: repr(last[0]))
    status, doc = last[0]
    ctx.log("/readyz %.1fs after the outage began: %d %s" %
            (time.monotonic() - t_down, status, json.dumps(doc)))
    ctx.check(doc.get("ready") is False and isinstance(doc.get("epoch"), int) and
              doc.get("seconds_since_commit", -1) >= doc.get("commit_overdue_after_s", 1e9),
              "/readyz 503 body lacks the epoch or the overdue seconds: %r" % doc, job)
    # the main loop logs each change of readiness (it looks every 50 ms)
    ctx.wait_for("a 'not ready' log line naming commit_overdue",
                 lambda: any("commit_overdue" in (o.get("waiting_for") or "")
                             for o in job.msgs("not ready: /readyz answers 503")),
                 timeout=30, job=job)

    time.sleep(max(0.0, 4.0 - (time.monotonic() - t_down)))
    t0 = time.monotonic()
    job.proc.send_signal(signal.SIGTERM)
    rc = job.wait_exit(TIMEOUT_MS / 1000.0 + 60, "exit after SIGTERM with the cluster down")
    took = time.monotonic() - t0
    ctx.log("SIGTERM with the cluster down: exit %d after %.1fs (shutdown.timeout_ms %d)" %
            (rc, took, TIMEOUT_MS))
    ctx.check(took <= TIMEOUT_MS / 1000.0 + SLACK_S,
              "the job took %.1fs to stop with the cluster down; shutdown.timeout_ms is %d ms" %
              (took, TIMEOUT_MS), job)
    ctx.check(rc == 1, "exit code %r after a shutdown that could not commit (want 1)" % rc, job)
    said = job.msgs("stopped at shutdown.timeout_ms without committing the final epoch (is the "
                    "Kafka cluster reachable?); the next start settles it") + \
        job.msgs("shutdown.timeout_ms passed before the final epoch committed; exiting now with "
                 "what is committed (the next start rolls a pending epoch forward or reads its "
                 "inputs again)")
    ctx.check(said, "no log line says the shutdown deadline passed before the final commit", job)

    out.up()
    job2 = acclib.Job(ctx, B, state, sets=["log.progress_interval_ms=1000"], interval_ms=300,
                      tag="job-2")
    acclib.wait_all_consumed(ctx, job2, B, ev.valid, timeout=240)
    # job-1's outputs may all be committed already, so the wait above can return at once: a
    # SIGTERM before job-2 has installed its handlers would kill it (exit -15, an empty log;
    # seen in CI). It must have started (and recovered) first.
    ctx.wait_for("job-2 started", lambda: job2.msgs("newsflow started"), timeout=120, job=job2)
    ctx.check(job2.terminate(60) == 0, "job-2: exit after SIGTERM", job2)
    counts, _ = acclib.expected_from_input(ctx, B)
    recs = acclib.read_outputs(ctx, B, "interest-updates")
    ctx.log(acclib.check_interest_updates(ctx, recs, counts))


if __name__ == "__main__":
    acclib.main("shutdown", body)
