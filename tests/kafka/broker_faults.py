"""Broker faults on a 3-node Apache Kafka cluster (docs/ARCHITECTURE.md §4, §9; src/io/kafka.h),
with load running: read events (valid and undecodable) arrive in waves while

  leader       the leader of interest-updates partition 0 is killed with SIGKILL, and started
               again later;
  coordinator  the broker coordinating the job's transactional id is killed with SIGKILL in the
               middle of a commit: the job is held right before commit_transaction
               (NF_FAULT=before_commit:E:stall=MS) with the epoch's records produced, the
               coordinator dies, then the job commits;
  sigstop      that coordinator is frozen (SIGSTOP) for 20 s, then continued (SIGCONT);
  outage       every broker is stopped for 30 s, then all are started again;
  moved        two processes with changelogs in a group: the leadership of a changelog partition
               of p2's moves to another replica (a preferred-leader election), then p2 is
               killed and p1 restores its partitions: the end offsets come from the new leader.

The cluster keeps replication factor 3 and min.insync.replicas 2 for every topic, the consumer
offsets and the transaction state log (scripts/kafka.sh --nodes 3). The job either keeps running
or stops with a clear error, and then a restart resumes (reported either way); each scenario ends
with the same verification: interest-updates hold every (user, version) exactly once and
dead-letters every undecodable input record exactly once (read_committed), the expectation taken
from the input topic itself. What the job showed is reported from its logs and /metrics:
retries, client errors, and the longest time without a committed epoch
(newsflow_epoch_seconds_since_commit), which must show the 30 s outage.

It starts a cluster of its own (kcluster.py): it kills brokers, so it cannot share ctest's.

Usage: python3 broker_faults.py NEWSFLOW SRCDIR [leader|coordinator|sigstop|outage|moved ...]
"""
import os
import re
import signal
import sys
import threading
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "recovery"))
sys.path.insert(0, HERE)
import acclib  # noqa: E402
import kcluster  # noqa: E402
from scale_out import group_setup, log_time, owned_reads  # noqa: E402

SCENARIOS = ["leader", "coordinator", "sigstop", "outage", "moved"]
WAVE, BAD = 200, 2


class Run:
    """One scenario's job (restarted if it stops), its input waves and a metrics sampler."""

    def __init__(self, ctx, cluster, name, env=None):
        self.ctx, self.cluster, self.name = ctx, cluster, name
        self.broker = acclib.real_broker(ctx, cluster.bootstrap, name=name, partitions=4)
        self.ev = acclib.Events(users=30, prefix=name[:2])
        self.state = ctx.path("state-" + name)
        self.jobs, self.restarts = [], []
        self.waves = 0
        self.max_since_commit = 0.0
        self.by_job = {}  # job tag -> its last /metrics sample (counters restart with a job)
        self._stop = threading.Event()
        self.start_job(env)
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def start_job(self, env=None):
        j = acclib.Job(self.ctx, self.broker, self.state, interval_ms=500, env=env,
                       sets=["admin.enabled=true", "admin.port=0", "runtime.shards=2"],
                       tag="%s-job%d" % (self.name, len(self.jobs) + 1))
        self.jobs.append(j)
        self.ctx.wait_for("'newsflow started'", lambda: j.msgs("newsflow started") or
                          not j.alive(), timeout=180)
        return j

    def current(self):
        """The running job; if it stopped, records why and starts it again."""
        j = self.jobs[-1]
        if not j.alive():
            rc = j.proc.returncode
            why = [o.get("msg") + (": " + str(o.get("error")) if o.get("error") else "")
                   for o in j.lines() if o.get("level") == "error"][-3:]
            self.restarts.append((j.tag, rc, why))
            self.ctx.log("%s exited %s (errors: %r): restarting" % (j.tag, rc, why))
            self.ctx.check(rc != 0 and why, "%s stopped with exit %s and no error logged" %
                           (j.tag, rc), j)
            self.ctx.check(len(self.restarts) <= 3, "the job keeps stopping: %r" % self.restarts)
            j = self.start_job()
        return j

    def _sample(self):
        while not self._stop.is_set():
            j = self.jobs[-1]
            m = j.metrics() if j.alive() else None
            if m:
                v = m.get("newsflow_epoch_seconds_since_commit", 0.0)
                self.max_since_commit = max(self.max_since_commit, v)
                self.by_job[j.tag] = m
            time.sleep(0.5)

    def wave(self):
        self.waves += 1
        acclib.kcat_produce(self.ctx, self.broker, "read-events",
                            self.ev.make(WAVE) + self.ev.make_bad(BAD),
                            tag="%s-w%d" % (self.name, self.waves))

    def waves_for(self, seconds):
        t = time.monotonic()
        while time.monotonic() - t < seconds:
            self.current()
            self.wave()
            time.sleep(0.3)

    def wait_outputs(self, what):
        n = [0]

        def pred():
            self.current()
            n[0] = acclib.count_topic(self.ctx, self.broker, "interest-updates")
            return n[0] >= self.ev.valid
        self.ctx.wait_for("%d interest-updates (%s)" % (self.ev.valid, what), pred, timeout=300,
                          interval=0.5, last=lambda: "%d" % n[0])

    def finish(self):
        """Every input's output, a clean stop, and the exactly-once verification."""
        ctx, broker = self.ctx, self.broker
        counts, bad_pos = acclib.expected_from_input(ctx, broker)
        valid = sum(counts.values())

        def all_out():
            self.current()
            return (acclib.count_topic(ctx, broker, "interest-updates") >= valid and
                    acclib.count_topic(ctx, broker, "dead-letters") >= len(bad_pos))
        ctx.wait_for("all outputs (%d interest-updates, %d dead-letters)" % (valid, len(bad_pos)),
                     all_out, timeout=300, interval=0.5)
        self._stop.set()
        self._sampler.join(10)
        j = self.current()
        rc, hang = j.terminate_or_report(60)
        ctx.check(not hang and rc == 0, "%s: exit %s after SIGTERM %s" % (j.tag, rc, hang or ""),
                  j)
        recs = acclib.read_outputs(ctx, broker, "interest-updates")
        ctx.log(acclib.check_interest_updates(ctx, recs, counts))
        ctx.log(acclib.check_dead_letters(ctx, broker, bad_pos))
        self.report()

    def counter(self, name):
        """A counter summed over the job's incarnations (their last samples)."""
        return sum(m.get(name, 0) for m in self.by_job.values())

    def report(self):
        lines = [o for jb in self.jobs for o in jb.lines()]
        visible = {}
        for o in lines:
            if o.get("level") in ("warn", "error") and o.get("msg") != "record sent to dead-letters":
                m = re.sub(r"\d+ms", "Nms", re.sub(r"127\.0\.0\.1:\d+", "HOST", o.get("msg", "")))
                visible[m[:110]] = visible.get(m[:110], 0) + 1
        self.ctx.log("%s: warn/error lines, count x message:" % self.name)
        for m, n in sorted(visible.items(), key=lambda x: -x[1])[:12]:
            self.ctx.log("  %4d x %s" % (n, m))
        c = self.counter
        self.ctx.log("%s: longest time without a commit %.1f s; commit retries %d; epoch "
                     "failures %d; client errors %d; restarts %r" % (
                         self.name, self.max_since_commit,
                         c("newsflow_kafka_commit_retries_total"),
                         c("newsflow_epoch_failures_total"),
                         c("newsflow_kafka_client_errors_total"), self.restarts))
        print('{"bench":"broker_faults","scenario":"%s","max_seconds_without_commit":%.1f,'
              '"commit_retries":%d,"epoch_failures":%d,"client_errors":%d,"restarts":%d}' % (
                  self.name, self.max_since_commit, c("newsflow_kafka_commit_retries_total"),
                  c("newsflow_epoch_failures_total"), c("newsflow_kafka_client_errors_total"),
                  len(self.restarts)),
              flush=True)


def leader(ctx, cl):
    r = Run(ctx, cl, "leader")
    r.waves_for(3)
    r.wait_outputs("before the fault")
    node = cl.leader(r.broker.topic("interest-updates"), 0)
    cl.kill9(node)
    r.waves_for(12)
    r.wait_outputs("with broker %d dead" % node)
    cl.start_node(node)
    r.waves_for(3)
    r.finish()
    ctx.check(r.counter("newsflow_kafka_client_errors_total") > 0,
              "leader: /metrics show no client error although broker %d died" % node)


def coordinator(ctx, cl):
    # Epoch 12: a few epochs into the load; the stall holds the commit for 8 s.
    r = Run(ctx, cl, "coordinator", env={"NF_FAULT": "before_commit:12:stall=8000"})
    j = r.jobs[-1]
    while not j.msgs("fault injection: stalling"):
        ctx.check(j.alive(), "the job exited before its stall", j)
        r.wave()
        time.sleep(0.2)
    node = cl.txn_coordinator(j.txid)
    ctx.log("epoch 12 held before commit_transaction; its coordinator is broker %d" % node)
    cl.kill9(node)
    ctx.wait_for("the job to go on after the stall", lambda: j.msgs("fault injection: stall over")
                 or not j.alive(), timeout=60)
    r.waves_for(10)
    r.wait_outputs("with the coordinator dead")
    ctx.check(any(o.get("epoch", 0) >= 12 for jb in r.jobs for o in jb.msgs("epoch.committed")),
              "epoch 12 (held while its coordinator died) never committed")
    new = cl.txn_coordinator(j.txid if j.alive() else r.jobs[-1].txid)
    ctx.log("the transactional id's coordinator is now broker %d" % new)
    ctx.check(new != node, "the coordinator did not move off the dead broker %d" % node)
    cl.start_node(node)
    r.waves_for(3)
    r.finish()


def sigstop(ctx, cl):
    r = Run(ctx, cl, "sigstop")
    r.waves_for(3)
    r.wait_outputs("before the fault")
    node = cl.txn_coordinator(r.jobs[-1].txid)
    cl.signal(node, signal.SIGSTOP)
    try:
        r.waves_for(20)
    finally:
        cl.signal(node, signal.SIGCONT)
    r.waves_for(5)
    r.finish()


def outage(ctx, cl):
    r = Run(ctx, cl, "outage")
    r.waves_for(3)
    r.wait_outputs("before the outage")
    t = time.monotonic()
    cl.stop_all()
    ctx.log("every broker stopped (%.1f s to stop them)" % (time.monotonic() - t))
    while time.monotonic() - t < 30:
        r.current()
        time.sleep(0.5)
    cl.start_all()
    ctx.log("every broker started again after %.1f s" % (time.monotonic() - t))
    r.waves_for(5)
    r.finish()
    ctx.check(r.max_since_commit >= 20 or r.restarts,
              "outage: the longest time without a commit /metrics showed is %.1f s, yet no "
              "broker answered for 30 s" % r.max_since_commit)


def moved(ctx, cl):
    """A changelog partition's leader moves while a process runs, then that process restores it:
    its end offset must be asked of the new leader. Two processes with changelogs in a group;
    the leadership of changelog-interest at one of p2's partitions moves to another replica (no
    broker stops), then p2 is killed and p1 restores p2's partitions."""
    broker, cfg = group_setup(ctx, "moved", 4, bootstrap=cl.bootstrap)
    ev = acclib.Events(users=30, prefix="mv")
    prod = acclib.Producer(ctx, broker, ev, per_wave=20, pause=0.1, bad_every=5)
    prod.start()
    sets = ["state.changelog=true", "kafka.assignment=group", "scale.standby_replicas=0"]

    def start(n):
        return acclib.Job(ctx, broker, ctx.path("state-moved-" + n), sets=sets,
                          args=["--config", cfg], interval_ms=300, txid_suffix="-" + n,
                          tag="moved-" + n)
    p1 = start("p1")
    ctx.wait_for("p1 to own every read-events partition", lambda: len(owned_reads(p1)) == 4,
                 timeout=180, job=p1)
    p2 = start("p2")
    ctx.wait_for("p2 to own read-events partitions", lambda: owned_reads(p2), timeout=180,
                 job=p2)
    part = min(owned_reads(p2))
    topic = broker.topic("changelog-interest")
    old, new = cl.move_leader(topic, part)
    ctx.log("%s [%d]: leader %d, now %d" % (topic, part, old, new))
    t_kill = time.time()
    p2.kill()
    ctx.wait_for("p1 to restore p2's partitions", lambda: [
        o for o in p1.msgs("gained partitions restored from the changelog")
        if (log_time(o) or 0) >= t_kill], timeout=180, job=p1)
    acclib.drain_and_check(ctx, prod, p1, broker, ev, what="p1")


def body(ctx):
    names = sys.argv[3:] or SCENARIOS
    for n in names:
        ctx.check(n in SCENARIOS, "unknown scenario %r (%s)" % (n, ", ".join(SCENARIOS)))
    cl = kcluster.Cluster(ctx, "faults", nodes=3)
    for n in names:
        ctx.log("==== %s ====" % n)
        globals()[n](ctx, cl)


if __name__ == "__main__":
    acclib.main("broker_faults", body)
