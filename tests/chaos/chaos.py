"""Chaos on Apache Kafka (issue 36): one job of three newsflow processes, faults at random for
T minutes, then every output checked.

Set-up: a 3-broker cluster of the test's own (kcluster.py: replication factor 3,
min.insync.replicas 2), with one extra listener per process whose advertised addresses are that
process's Toxiproxy proxies (faults.py says why); a feed farm on loopback (farm.py: 8 hosts, 4
feeds each, one item URL on two hosts; every feed gains an item every 100 s of the run); three
processes p1..p3 of one consumer group (state.changelog, static membership,
scale.standby_replicas=1: each stands by for what the others own), each with its own state
directory on an ext4 file system of its own (faults.Disk), its own transactional id and
User-Agent, a 10 s group session and newsflow's own 15 s transaction timeout; read events
produced at a steady rate on 6 partitions (20 every 0.2 s plus kcat's own time: 40-100/s here),
an undecodable one every other wave.

Faults, one at a time, each held for a few seconds and then healed (kind: how):

  kill9          a process SIGKILLed, started again after 0.5-6 s
  sigterm        a process SIGTERMed (it must exit 0 within 60 s), started again after 0-4 s
  sigstop        a process SIGSTOPped for 1-14 s (the group's session is 10 s), then SIGCONTed
  broker_kill    a broker SIGKILLed (only when every partition is fully replicated), started
                 again after 3-15 s
  cpu_hog        two busy processes (both cores) for 5-20 s
  disk_full      a process's file system filled (a ballast file) for 3-12 s
  disk_slow      a process's disk throttled to 256 KiB-2 MiB/s and 10-50 IOPS for 5-15 s
  net_delay      100-1500 ms (± a quarter) more each way between a process and every broker,
                 5-15 s
  net_bandwidth  8-64 KiB/s each way between a process and every broker, 5-15 s
  net_partition  a process's connections to every broker (or to one, one time in three) hold
                 every byte, 2-15 s
  net_cut        a process's proxies closed (connections reset, new ones refused), 2-12 s

After a fault is healed the test waits until every process has committed an epoch since (at
most 240 s: longer is a hang, reported with the processes' stacks), then 0.5-4 s before the
next fault; one time in five the next fault comes without that wait (a fault striking a
recovery). A process that exits on its own is recorded and started again (once its fault is
healed): exit 1 with an error logged is the documented runtime failure (docs/runbooks.md "A
process is down"); any other exit, or a death by a signal the test did not send, fails the test
at once, naming the crashing thread's frames from the core dump when there is one.

At the end every fault is healed, the producer stops, the job catches up (every event counted,
every poison record dead-lettered, every feed fetched since its last change and its items in
`articles`), every process is SIGTERMed (exit 0), and, read_committed: interest-updates hold
every (user, version) exactly once over 1..n; every poison record has exactly one dead letter;
no (writer, epoch, seq) appears twice in any output topic; every item URL is in `articles`
once and every article in `story-clusters` once; trending (exact) emits every window once,
equal to an exact recount; the farm saw requests arrive at least crawl.host_spacing_ms apart
on every host (the kernel's receive times, farm.py) and never more than
crawl.host_max_concurrent at once; no process's RSS went over NF_CHAOS_RSS_MB (512).

Seeded: the seed is printed first; the same seed (and options) gives the same faults in the
same order with the same parameters (the machine's timing is not replayed). Prints one JSON
line {"bench":"chaos",...}: faults per kind (injected, recovered, time from the fault to every
process committing again and from the heal, p50/p99/max), records checked, the longest stretch
without a commit (any process, and the job as a whole), RSS per process and over the run, the
exits. On failure the logs are copied to NF_CHAOS_EVIDENCE (default ./chaos-evidence/SEED-PID).

Needs root (loop mounts, blkio throttles), Java (scripts/kafka.sh), Go once (scripts/toxiproxy.sh),
kcat.

Usage: python3 chaos.py NEWSFLOW SRCDIR [--minutes M] [--seed S] [--exclude KIND,...]
"""
import argparse
import glob
import json
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "recovery"))
sys.path.insert(0, os.path.join(HERE, "..", "kafka"))
import faults  # noqa: E402

# A mount namespace of the test's own before any thread starts (acclib's imports start none):
# the kernel takes its mounts down with it.
_NS_ERROR = faults.private_mount_namespace() if os.geteuid() == 0 else "not root"

import acclib  # noqa: E402
import kcluster  # noqa: E402
from farm import Farm  # noqa: E402
from scale_out import TRENDING, PoolEvents, check_trending, group_setup, log_time  # noqa: E402

MEMBERS = ("p1", "p2", "p3")
PARTITIONS = 6
FEEDS_PER_HOST = 4
SPACING_MS, MAX_CONCURRENT, SLACK_MS = 1000, 2, 2  # farm.py: kernel arrival times
FARM_CHANGE_S = 100  # every feed gains an item this often
RECOVERY_TIMEOUT = 240
RSS_LIMIT_MB = int(os.environ.get("NF_CHAOS_RSS_MB", "512"))
SAMPLE_S = 0.5
KINDS = ("kill9", "sigterm", "sigstop", "broker_kill", "cpu_hog", "disk_full", "disk_slow",
         "net_delay", "net_bandwidth", "net_partition", "net_cut")
HOLD_S = {"kill9": (0.5, 6), "sigterm": (0, 4), "sigstop": (1, 14), "broker_kill": (3, 15),
          "cpu_hog": (5, 20), "disk_full": (3, 12), "disk_slow": (5, 15), "net_delay": (5, 15),
          "net_bandwidth": (5, 15), "net_partition": (2, 15), "net_cut": (2, 12)}
PROCESS_KINDS = ("kill9", "sigterm", "sigstop")
BACK_TO_BACK = 0.2
GAP_S = (0.5, 4)


def percentile(xs, q):
    """Nearest-rank percentile of a non-empty list."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(-(-q * len(s) // 100)) - 1))]


def dist(xs):
    if not xs:
        return None
    return {"n": len(xs), "p50": round(percentile(xs, 50), 2), "p99": round(percentile(xs, 99), 2),
            "max": round(max(xs), 2)}


class Member:
    """One process of the job: its disk, its proxies, its incarnations, what was sampled."""

    def __init__(self, run, name):
        self.run, self.ctx, self.name = run, run.ctx, name
        self.disk = faults.Disk(run.ctx, "disk-" + name)
        self.state = os.path.join(self.disk.mnt, "state")
        self.via = run.broker.via(run.px.bootstrap[name])
        self.ua = "nft-chaos-" + name
        self.jobs = []
        self.job = None
        self.held = False  # a fault has the process: no restart but the fault's own
        self.stopped = False  # SIGSTOPped: no metrics asked
        self.down = False  # exited on its own, to be started again
        self.samples = []  # (wall time, commit time or None, RSS kB)
        self.last_commit = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def start(self):
        self.down = False
        tag = "%s-run%d" % (self.name, len(self.jobs) + 1)
        cwd = self.ctx.path("cwd-" + tag)  # where its core dump lands
        os.makedirs(cwd)
        self.job = acclib.Job(
            self.ctx, self.via, self.state,
            sets=["state.changelog=true", "kafka.assignment=group",
                  "kafka.static_membership=true", "scale.standby_replicas=1",
                  "fetch.allow_private=127.0.0.0/8", "fetch.user_agent=%s" % self.ua,
                  "crawl.interval_s=60", "crawl.interval_floor_s=60", "crawl.jitter_permille=0",
                  "crawl.host_spacing_ms=%d" % SPACING_MS,
                  "crawl.host_max_concurrent=%d" % MAX_CONCURRENT,
                  "admin.enabled=true", "admin.port=0",
                  "shutdown.timeout_ms=10000",  # the product's default, not acclib's test one
                  *TRENDING],
            args=["--config", self.run.cfg], interval_ms=300, txid_suffix="-" + self.name,
            tag=tag, cwd=cwd)
        self.jobs.append(self.job)
        if not self._thread.is_alive():
            self._thread.start()

    def _sample(self):
        while not self._stop.wait(SAMPLE_S):
            j = self.job
            if j is None or not j.alive():
                continue
            rss = j.rss_kb()
            ct = None
            if not self.stopped:
                m = j.metrics(timeout=2)
                now = time.time()
                if m and m.get("newsflow_epochs_committed_total", 0) > 0 and \
                        "newsflow_epoch_seconds_since_commit" in m:
                    ct = now - m["newsflow_epoch_seconds_since_commit"]
                    if ct > self.last_commit:
                        self.last_commit = ct
            self.samples.append((time.time(), ct, rss))

    def stop_sampling(self):
        self._stop.set()
        self._thread.join(10)

    def commit_times(self):
        """Every commit seen: each incarnation's epoch.committed log lines (epochs with records)
        and the sampled /metrics (every epoch, at the sampling's resolution)."""
        ts = {round(c, 3) for _, c, _ in self.samples if c}
        for j in self.jobs:
            for o in j.msgs("epoch.committed"):
                t = log_time(o)
                if t:
                    ts.add(round(t, 3))
        return sorted(ts)


class Run:
    def __init__(self, ctx, opts, seed):
        self.ctx, self.opts, self.seed = ctx, opts, seed
        self.rng = random.Random(seed)
        self.kinds = [k for k in KINDS if k not in opts.exclude]
        self.faults = []
        self.exits = []  # every exit the test did not ask for
        self.problems = []
        self.farm = Farm(ctx, feeds_per_host=FEEDS_PER_HOST)
        srcfile = self.farm.sources_file(ctx.path("sources.txt"))
        self.cl = kcluster.Cluster(ctx, "chaos", nodes=3, listeners=[m.upper() for m in MEMBERS])
        # newsflow's own transaction timeout (15 s with changelogs), not scale_out's 6 s: the
        # faults meet the job as it is configured by default
        self.broker, self.cfg = group_setup(ctx, "chaos", PARTITIONS, srcfile,
                                            bootstrap=self.cl.bootstrap, txn_timeout_ms=None)
        self.px = faults.Proxies(ctx, self.cl, MEMBERS, seed)
        self.ms = {}
        orig = ctx.cleanup
        done = []

        def cleanup():  # heal what the machine keeps (throttles, mounts) whatever happened
            first = not done
            if first:
                done.append(1)
                self.heal_all(quiet=True)
                for m in self.ms.values():  # the processes first: then the disks unmount
                    if m.job:
                        m.job.kill()
                    m.disk.cleanup()
            orig()  # the brokers stop there
            if first and self.passed and not os.environ.get("NF_KEEP_TMP"):
                shutil.rmtree(self.cl.dir, ignore_errors=True)  # a failed run's stays
        ctx.cleanup = cleanup
        self.passed = False
        for n in MEMBERS:
            self.ms[n] = Member(self, n)
        self.hog = None
        self.dead_broker = None
        self.fault_log = open(ctx.path("faults.jsonl"), "w")

    # ------------------------------------------------------------------ processes

    def tick(self):
        """Records processes that exited on their own and starts them again (unless a fault
        holds them); fails at once on an undocumented exit."""
        for m in self.ms.values():
            j = m.job
            if j is None or m.down or j.expect_exit or j.proc.poll() is None:
                if m.down and not m.held:
                    self.ctx.log("%s: starting again after its exit" % m.name)
                    m.start()
                continue
            rc = j.proc.returncode
            lines = [o for o in j.lines() if o.get("level") == "error"]
            errs = ["%s%s" % (o.get("msg"), ": %s" % o["error"] if o.get("error") else "")
                    for o in lines]
            # why, in newsflow's own words (the client library's lines come before)
            own = [o.get("msg") for o in lines if o.get("component") != "kafka"]
            active = self.faults[-1] if self.faults and "t_heal" not in self.faults[-1] else None
            e = {"process": m.name, "run": j.tag, "exit": rc, "t": round(time.time(), 3),
                 "reason": own[0] if own else None, "errors": errs[-3:],
                 "during": "%s of %s" % (active["kind"], active.get("target") or active.get(
                     "node")) if active else "the start" if not self.faults else
                 "no fault (after fault %d, %s)" % (self.faults[-1]["n"],
                                                    self.faults[-1]["kind"])}
            self.exits.append(e)
            documented = rc == 1 and errs
            self.ctx.log("%s exited %s%s: %s" % (j.tag, rc, " (documented: runtime failure)"
                                                  if documented else "", e))
            if not documented:
                self.ctx.fail("%s exited %s (%s) while %s: neither the test's signal nor a "
                              "documented exit (1 with an error logged)%s" % (
                                  j.tag, rc, "signal %d" % -rc if rc < 0 else "code",
                                  e["during"], core_backtrace(self.ctx, j)), j)
            m.down = True
            if not m.held:
                self.ctx.log("%s: starting again after its exit" % m.name)
                m.start()

    def pace(self, seconds):
        """The schedule's own pacing: sleeps, watching the processes."""
        end = time.monotonic() + seconds
        while True:
            self.tick()
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(0.2, left))

    def wait_committing(self, since, what, timeout=RECOVERY_TIMEOUT):
        """Until every process has committed an epoch after `since` (wall time)."""
        deadline = time.monotonic() + timeout
        while True:
            self.tick()
            late = [m for m in self.ms.values() if m.last_commit <= since]
            if not late:
                return
            if time.monotonic() > deadline:
                for m in late:
                    if m.job and m.job.alive():
                        m.job.dump_stacks(sys.stderr)
                    m.job.dump_tail(sys.stderr, 40)
                self.ctx.fail("hang: %s did not commit an epoch within %d s of %s (last commits "
                              "%s)" % ([m.name for m in late], timeout, what,
                                       {m.name: round(since - m.last_commit, 1)
                                        for m in late}))
            time.sleep(0.2)

    # ------------------------------------------------------------------ faults

    def draw(self):
        """The next fault: every choice from the seeded generator, in a fixed order."""
        r = self.rng
        f = {"n": len(self.faults) + 1, "kind": r.choice(self.kinds)}
        target, node = r.choice(MEMBERS), r.randint(1, 3)
        lo, hi = HOLD_S[f["kind"]]
        f["hold_s"] = round(r.uniform(lo, hi), 2)
        x, y = r.random(), r.random()
        f["back_to_back"] = r.random() < BACK_TO_BACK
        f["gap_s"] = round(r.uniform(*GAP_S), 2)
        k = f["kind"]
        if k == "broker_kill":
            f["node"] = node
        elif k != "cpu_hog":
            f["target"] = target
        if k == "disk_slow":
            f["bps"] = int(256 * 1024 + x * (2048 - 256) * 1024)
            f["iops"] = int(10 + y * 40)
        elif k == "net_delay":
            f["latency_ms"] = int(100 + x * 1400)
            f["jitter_ms"] = f["latency_ms"] // 4
        elif k == "net_bandwidth":
            f["rate_kbs"] = int(8 + x * 56)
        elif k == "net_partition":
            f["node"] = node if y < 1 / 3 else None
        return f

    def inject(self, f):
        """Injects f, holds it for its time, heals it. Sets t_inject and t_heal (wall)."""
        k, ctx = f["kind"], self.ctx
        m = self.ms.get(f.get("target"))
        if k == "broker_kill":  # one broker's loss at a time: the cluster must be whole first
            last = [None]

            def whole():
                last[0] = faults.isr_full(self.cl)
                return last[0] is True
            self.wait_pred("every partition fully replicated before killing a broker", whole,
                           lambda: last[0])
        if m is not None:
            m.held = True
        ctx.log("---- fault %d: %s" % (f["n"], json.dumps(f)))
        f["t_inject"] = time.time()
        if k == "kill9":
            m.job.kill()
            self.pace(f["hold_s"])
            m.start()
        elif k == "sigterm":
            rc, hang = m.job.terminate_or_report(60)
            f["exit"] = rc
            if hang or rc != 0:
                self.problems.append("%s: exit %s after SIGTERM %s" % (m.job.tag, rc,
                                                                       hang or ""))
                ctx.fail(self.problems[-1], m.job)
            self.pace(f["hold_s"])
            m.start()
        elif k == "sigstop":
            m.stopped = True
            os.kill(m.job.pid, signal.SIGSTOP)
            try:
                self.pace(f["hold_s"])
            finally:
                os.kill(m.job.pid, signal.SIGCONT)
                m.stopped = False
        elif k == "broker_kill":
            self.dead_broker = f["node"]
            self.cl.kill9(f["node"])
            self.pace(f["hold_s"])
            self.cl.start_node(f["node"])
            self.dead_broker = None
        elif k == "cpu_hog":
            self.hog = faults.CpuHog(ctx)
            self.pace(f["hold_s"])
            self.hog.stop()
            self.hog = None
        elif k == "disk_full":
            f["ballast_mb"] = m.disk.fill() >> 20
            self.pace(f["hold_s"])
            m.disk.unfill()
        elif k == "disk_slow":
            m.disk.slow(f["bps"], f["iops"])
            self.pace(f["hold_s"])
            m.disk.unslow()
        elif k == "net_delay":
            self.px.toxic(m.name, "latency", {"latency": f["latency_ms"],
                                              "jitter": f["jitter_ms"]})
            self.pace(f["hold_s"])
            self.px.reset()
        elif k == "net_bandwidth":
            self.px.toxic(m.name, "bandwidth", {"rate": f["rate_kbs"]})
            self.pace(f["hold_s"])
            self.px.reset()
        elif k == "net_partition":
            self.px.toxic(m.name, "latency", {"latency": 3600000, "jitter": 0}, node=f["node"])
            self.pace(f["hold_s"])
            self.px.reset()
        elif k == "net_cut":
            self.px.enable(m.name, False)
            self.pace(f["hold_s"])
            self.px.enable(m.name, True)
        f["t_heal"] = time.time()
        if m is not None:
            m.held = False
        self.tick()

    def heal_all(self, quiet=False):
        """Every fault undone (the end, and cleanup after a failure)."""
        for m in self.ms.values():
            try:
                if m.stopped and m.job:
                    os.kill(m.job.pid, signal.SIGCONT)
                    m.stopped = False
                m.disk.unfill()
                m.disk.unslow()
            except OSError as e:
                print("chaos: healing %s: %s" % (m.name, e), flush=True)
            m.held = False
        if self.hog:
            self.hog.stop()
            self.hog = None
        try:
            self.px.reset()
        except acclib.TestFailure:
            pass
        if self.dead_broker and not quiet:
            self.cl.start_node(self.dead_broker)
            self.dead_broker = None

    def wait_pred(self, what, pred, last=None, timeout=180):
        deadline = time.monotonic() + timeout
        while not pred():
            self.tick()
            if time.monotonic() > deadline:
                self.ctx.fail("timed out after %d s waiting for %s%s" % (
                    timeout, what, "; last seen: %s" % last() if last else ""))
            time.sleep(0.5)

    def schedule(self, prod):
        """Faults for opts.minutes; the farm's feeds change every FARM_CHANGE_S."""
        t_end = time.monotonic() + self.opts.minutes * 60
        next_change = time.monotonic() + FARM_CHANGE_S
        while time.monotonic() < t_end:
            if time.monotonic() >= next_change:
                self.farm.version += 1
                self.farm_changed = time.monotonic()
                next_change += FARM_CHANGE_S
                self.ctx.log("the farm's feeds gain an item (version %d)" % self.farm.version)
            f = self.draw()
            self.faults.append(f)
            self.inject(f)
            if prod.error is not None:
                self.ctx.fail("producing read events failed: %r" % prod.error)
            if not f["back_to_back"]:
                self.wait_committing(f["t_heal"], "fault %d (%s) healed" % (f["n"], f["kind"]))
                f["t_recovered"] = max(m.last_commit for m in self.ms.values())
            self.fault_log.write(json.dumps(f) + "\n")
            self.fault_log.flush()
            self.ctx.log("fault %d %s: held %.1f s%s" % (
                f["n"], f["kind"], f["t_heal"] - f["t_inject"],
                ", every process committing %.1f s after the heal" % (
                    f["t_recovered"] - f["t_heal"]) if "t_recovered" in f else
                ", the next one at once"))
            self.pace(f["gap_s"])

    # ------------------------------------------------------------------ figures

    def figures(self):
        """Per fault: to_commit_s (from the fault until every process committed again: the
        victim of a process fault by its next incarnation or after SIGCONT), heal_to_commit_s;
        then per kind."""
        commits = {n: m.commit_times() for n, m in self.ms.items()}

        def first_after(n, t):
            for c in commits[n]:
                if c > t:
                    return c
            return None
        for i, f in enumerate(self.faults):
            if "t_heal" not in f:  # the run failed during this one
                continue
            nxt = self.faults[i + 1].get("t_inject") if i + 1 < len(self.faults) else None
            a, b = [], []
            for n in self.ms:
                ref = f["t_heal"] if (f["kind"] in PROCESS_KINDS and f.get("target") == n) \
                    else f["t_inject"]
                a.append(first_after(n, ref))
                b.append(first_after(n, f["t_heal"]))
            if None in a or None in b:
                continue
            f["to_commit_s"] = round(max(a) - f["t_inject"], 2)
            f["heal_to_commit_s"] = round(max(b) - f["t_heal"], 2)
            # a later fault came before this one's recovery: its figure is not its own
            f["overlapped"] = nxt is not None and max(b) > nxt
        kinds = {}
        for k in self.kinds:
            fs = [f for f in self.faults if f["kind"] == k]
            clean = [f for f in fs if "to_commit_s" in f and not f["overlapped"]]
            kinds[k] = {"injected": len(fs),
                        "survived": sum(1 for f in fs if "heal_to_commit_s" in f),
                        "overlapped": sum(1 for f in fs if f.get("overlapped")),
                        "to_commit_s": dist([f["to_commit_s"] for f in clean]),
                        "heal_to_commit_s": dist([f["heal_to_commit_s"] for f in clean])}
        if not any(commits.values()):
            return {"kinds": kinds}
        gaps = {}
        t0 = min(c[0] for c in commits.values() if c)
        t1 = max(c[-1] for c in commits.values() if c)
        for n, cs in commits.items():
            cs = [c for c in cs if c >= t0]
            gaps[n] = round(max((b - a for a, b in zip(cs, cs[1:])), default=0), 2)
        allc = sorted(c for cs in commits.values() for c in cs)
        job_gap = round(max((b - a for a, b in zip(allc, allc[1:])), default=0), 2)
        rss = {}
        series = {}
        s0 = min((m.samples[0][0] for m in self.ms.values() if m.samples), default=t0)
        for n, m in self.ms.items():
            vals = [r for _, _, r in m.samples if r]
            rss[n] = {"p50_mb": round(percentile(vals, 50) / 1024, 1),
                      "max_mb": round(max(vals) / 1024, 1)} if vals else None
            for t, _, r in m.samples:
                if r:
                    b = int((t - s0) // 30) * 30  # seconds since the first sample
                    series.setdefault(b, {})[n] = max(series.get(b, {}).get(n, 0),
                                                      round(r / 1024))
        return {"faults": len(self.faults), "kinds": kinds, "longest_without_commit_s": {"process": max(gaps.values()),
                                                             "per_process": gaps,
                                                             "job": job_gap},
                "commit_span_s": round(t1 - t0, 1), "rss": rss,
                "rss_mb_every_30s": [dict(t=b, **series[b]) for b in sorted(series)]}


def body(ctx):
    ap = argparse.ArgumentParser(prog="chaos.py NEWSFLOW SRCDIR")
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--exclude", default="", help="fault kinds left out, comma-separated "
                    "(development only: the default is every kind)")
    opts = ap.parse_args(sys.argv[3:])
    opts.exclude = [k for k in opts.exclude.split(",") if k]
    bad = [k for k in opts.exclude if k not in KINDS]
    ctx.check(not bad, "unknown fault kinds %s (%s)" % (bad, ", ".join(KINDS)))
    seed = opts.seed if opts.seed is not None else random.SystemRandom().randrange(1, 1 << 31)
    ctx.log("seed %d: replay with scripts/chaos.sh --minutes %g --seed %d%s" % (
        seed, opts.minutes, seed, " --exclude %s" % ",".join(opts.exclude)
        if opts.exclude else ""))
    ctx.check(_NS_ERROR is None, "needs root and a mount namespace of its own (loop mounts, "
              "blkio throttles): %s" % _NS_ERROR)
    if "disk_slow" in opts.exclude:
        ctx.log("disk_slow excluded")
    else:
        why = faults.throttle_available()
        ctx.check(why is None, "disk_slow needs blkio throttles: %s (--exclude disk_slow to "
                  "run without)" % why)
    if not open("/proc/sys/kernel/core_pattern").read().startswith("|"):
        # a crash leaves a core in the process's own directory (Member.start): its stacks
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY,
                                                  resource.RLIM_INFINITY))
    stale = faults.clear_stale_throttles()
    if stale:
        ctx.log("removed blkio throttles a killed run left on loop devices %s" % stale)
    t_start = time.monotonic()
    run = Run(ctx, opts, seed)
    result = {"bench": "chaos", "seed": seed, "minutes": opts.minutes,
              "excluded": opts.exclude, "pass": False}
    try:
        check(ctx, run, result)
        result["pass"] = run.passed = True
    except acclib.TestFailure as e:
        result["failure"] = str(e)[:500]
        save_evidence(ctx, run, seed)
        raise
    finally:
        result["seconds"] = round(time.monotonic() - t_start, 1)
        result["exits"] = run.exits
        reasons = {}
        for e in run.exits:
            reasons[e["reason"]] = reasons.get(e["reason"], 0) + 1
        result["exit_reasons"] = reasons
        try:
            result.update(run.figures())
        except Exception as e:  # the figures must not hide the test's own failure
            result["figures_error"] = repr(e)
        print(json.dumps(result, separators=(",", ":")), flush=True)


def check(ctx, run, result):
    ev = PoolEvents(users=60, prefix="c")
    prod = acclib.Producer(ctx, run.broker, ev, per_wave=20, pause=0.2, bad_every=2)
    prod.start()
    try:
        run_and_check(ctx, run, result, ev, prod)
    finally:
        prod.stop_flag.set()


def run_and_check(ctx, run, result, ev, prod):
    t = time.time()
    for m in run.ms.values():
        m.start()
    run.wait_committing(t, "the start")
    run.farm_changed = 0.0  # the feeds' first version is there from the start
    ctx.log("==== %g minutes of faults (%s)" % (run.opts.minutes, ", ".join(run.kinds)))
    run.schedule(prod)

    ctx.log("==== every fault healed; catching up")
    run.heal_all()
    run.pace(0)
    prod.stop()
    ctx.check(prod.error is None, "producing read events failed: %r" % prod.error)
    counts, bad_pos = acclib.expected_from_input(ctx, run.broker)
    ctx.check(counts == ev.counts, "read-events holds other counts than were produced")
    valid, seen = sum(counts.values()), [0, 0]

    def caught_up():
        seen[0] = acclib.count_topic(ctx, run.broker, "interest-updates")
        seen[1] = acclib.count_topic(ctx, run.broker, "dead-letters")
        return seen[0] >= valid and seen[1] >= len(bad_pos)
    run.wait_pred("%d interest-updates and %d dead-letters" % (valid, len(bad_pos)), caught_up,
                  lambda: "%d and %d" % tuple(seen), timeout=300)
    t_v = run.farm_changed
    urls = len(run.farm.urls())
    run.wait_pred("every feed fetched since its last change",
                  lambda: len({(r[1], r[2]) for r in run.farm.requests()
                               if r[0] > t_v and r[5] == 200}) == urls, timeout=180)
    run.wait_pred("the farm's items in articles",
                  lambda: len(acclib.read_outputs(ctx, run.broker, "articles")) >=
                  len(run.farm.items()), timeout=120)
    for m in run.ms.values():
        rc, hang = m.job.terminate_or_report(60)
        ctx.check(not hang and rc == 0, "%s: exit %s after SIGTERM %s" % (m.job.tag, rc,
                                                                          hang or ""), m.job)
        m.stop_sampling()

    ctx.log("==== checks, read_committed")
    n = {}
    recs = acclib.read_outputs(ctx, run.broker, "interest-updates")
    ctx.log(acclib.check_interest_updates(ctx, recs, ev.counts))
    n["interest_updates"] = len(recs)
    ctx.log(acclib.check_dead_letters(ctx, run.broker, bad_pos))
    n["dead_letters"] = len(bad_pos)
    allrecs = acclib.read_all_outputs(ctx, run.broker)
    seqs = {}
    for k, h, v in allrecs:
        t = (h.get("nf-writer"), h.get("nf-epoch"), h.get("nf-seq"))
        seqs[t] = seqs.get(t, 0) + 1
    twice = [t for t, c in seqs.items() if c > 1]
    ctx.check(not twice, "%d (writer, epoch, seq) appear more than once in the outputs, e.g. %s"
              % (len(twice), twice[:5]))
    ctx.log("outputs: %d records, no (writer, epoch, seq) twice" % len(allrecs))
    ctx.log(run.farm.check_articles(ctx, run.broker))
    n["articles"] = len(acclib.read_outputs(ctx, run.broker, "articles"))
    n["story_clusters"] = n["articles"]
    ctx.log(check_trending(ctx, run.broker, ev))
    n["trending_windows"] = acclib.count_topic(ctx, run.broker, "trending")
    n["total"] = sum(n.values())
    result["records_checked"] = n
    bad, pol = run.farm.politeness(SPACING_MS, MAX_CONCURRENT, SLACK_MS, t0=ctx.t0)
    result["politeness"] = pol
    if bad:
        with open(ctx.path("politeness.txt"), "w") as f:
            f.write("\n".join(bad) + "\n")
    ctx.check(not bad, "politeness violated %d times (times in this log's seconds; all in "
              "politeness.txt): %s" % (len(bad), bad[:6]))
    ctx.log("politeness: %d requests, arrivals at a host at least %.3f s apart (the "
            "closest: %s), at most %d at once" % (pol["requests"], pol["min_gap_s"] or 0,
                                                  "; ".join(pol["closest"]),
                                                  pol["max_in_flight"]))
    top = max((r for m in run.ms.values() for _, _, r in m.samples if r), default=0) / 1024
    ctx.check(top <= RSS_LIMIT_MB, "RSS reached %.0f MB (limit %d MB)" % (top, RSS_LIMIT_MB))
    ctx.log("RSS at most %.0f MB (limit %d); %d faults, %d exits on their own (each documented)"
            % (top, RSS_LIMIT_MB, len(run.faults), len(run.exits)))


def core_file(job):
    """Where the kernel wrote the job's core dump (kernel.core_pattern: relative to the
    process's directory unless absolute; %p its pid, %e its name), or None."""
    pat = open("/proc/sys/kernel/core_pattern").read().strip()
    if not pat or pat.startswith("|"):
        return None
    name = pat.replace("%%", "\0").replace("%p", str(job.pid)).replace("%e", "newsflow")
    name = re.sub(r"%.", "*", name).replace("\0", "%")
    if "%p" not in pat and open("/proc/sys/kernel/core_uses_pid").read().strip() == "1":
        name += ".%d" % job.pid
    found = sorted(glob.glob(os.path.join(job.cwd or ".", name)), key=os.path.getmtime)
    return found[-1] if found else None


def core_backtrace(ctx, job):
    """The crashed process's threads from its core dump (gdb), written beside its log; a
    summary of the crashing thread for the failure message."""
    core = core_file(job)
    if not core or not shutil.which("gdb"):
        return " (no core dump: %s)" % ("gdb missing" if core else "core_pattern %s" % open(
            "/proc/sys/kernel/core_pattern").read().strip())
    out = subprocess.run(["gdb", "-q", "-batch", "-nx", "-ex", "bt 30", "-ex",
                          "thread apply all bt 30", ctx.nf, core], capture_output=True, text=True,
                         timeout=300).stdout
    path = ctx.path("%s.core-bt.txt" % job.tag)
    with open(path, "w") as f:
        f.write("core: %s\n%s" % (core, out))
    stacks = []  # gdb prints the crashing frame alone, then each backtrace from #0
    for l in out.split("\n"):
        m = re.match(r"#(\d+)\s+(?:0x[0-9a-f]+ in )?(\S+?)(?:\(| \(|$)", l)
        if m:
            if m.group(1) == "0":
                stacks.append([])
            stacks[-1].append(m.group(2))
    crashed = next((st for st in stacks if len(st) > 1), stacks[0] if stacks else [])
    names = []
    for name in crashed:  # without the C library's abort machinery
        if not re.match(r"(__pthread_kill|__GI_|__assert|raise$|abort$)", name):
            names.append(name)
    return "; crashing thread: %s (all threads in %s)" % (" <- ".join(names[:10]),
                                                           os.path.basename(path))


def save_evidence(ctx, run, seed):
    """The logs of a failed run, kept for the report: every incarnation's stderr, the faults,
    the farm's requests, Toxiproxy's log (the brokers' logs stay in the cluster's directory)."""
    d = os.path.join(os.environ.get("NF_CHAOS_EVIDENCE", os.path.join(os.getcwd(),
                                                                       "chaos-evidence")),
                     "%d-%d" % (seed, os.getpid()))
    try:
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(ctx.tmp):
            if f.endswith((".err", ".out", ".jsonl", ".log", ".json", ".txt")):
                shutil.copy(ctx.path(f), d)
        with open(os.path.join(d, "farm-requests.tsv"), "w") as fh:
            for r in run.farm.requests():
                fh.write("\t".join(str(x) for x in r) + "\n")
        with open(os.path.join(d, "faults-all.json"), "w") as fh:
            json.dump(run.faults, fh, indent=1)
        for node in range(1, run.cl.nodes + 1):  # the brokers' side: the last 4 MiB each
            src = os.path.join(run.cl.dir, "node-%d" % node, "server.log")
            if os.path.exists(src):
                with open(src, "rb") as fi, open(os.path.join(d, "broker-%d.log" % node),
                                                 "wb") as fo:
                    fi.seek(max(0, os.path.getsize(src) - (4 << 20)))
                    fo.write(fi.read())
        ctx.log("evidence kept in %s (brokers' logs in %s)" % (d, run.cl.dir))
    except OSError as e:
        ctx.log("could not keep the evidence: %s" % e)


if __name__ == "__main__":
    acclib.main("chaos", body)
