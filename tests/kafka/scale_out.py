"""One job in several processes (DESIGN.md §9; src/state/changelog.h, src/state/epoch.h), on
Apache Kafka: the read path's key groups (event ids, interest vectors, seen keys, trending
counters) follow their read-events partitions from process to process through the changelog
topics, and every output stays exactly once.

Processes p1..p4 run one job: one consumer group (kafka.assignment=group, cooperative-sticky,
static members), each its own state directory and transactional id, state.changelog=true,
checkpoint.interval_ms=300. While read events (with poison records) arrive on 6 partitions:

  1. p1, p2, p3 start and each commits epochs with input;
  2. p2 is SIGKILLed and started again on its directory (it gets its partitions back);
  3. p4 joins: partitions move to it (their owners commit and let go; p4 restores them from the
     changelog and takes their positions from the group);
  4. rolling restart: each process in turn SIGTERMed (exit 0) and started again;
  5. p3 is SIGKILLed for good: its partitions move to the others once its session expires;
     the time from the kill to their first epoch committed elsewhere is reported.

Then the producer stops, the last events are consumed, every process stops (exit 0), and the
outputs are read back read_committed: interest-updates hold every (user, version) exactly once
over 1..n (a vector that did not follow its partition would start again at 1, an event taken
twice would exceed n), every poison record has exactly one dead letter, and no (writer, epoch,
seq) appears twice. Prints {"bench":"scale_out_failover",...}.

Needs Apache Kafka (NF_TEST_BROKER=kafka:...).

Usage: python3 scale_out.py NEWSFLOW SRCDIR
"""
import datetime
import json
import os
import sys
import threading
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recovery"))
import acclib  # noqa: E402

PARTITIONS = 6
SESSION_MS = 10000


class Producer(threading.Thread):
    def __init__(self, ctx, broker, ev):
        super().__init__(daemon=True)
        self.ctx, self.broker, self.ev = ctx, broker, ev
        self.stop_flag = threading.Event()
        self.error = None
        self.waves = 0

    def run(self):
        try:
            while not self.stop_flag.is_set():
                recs = self.ev.make(30)
                if self.waves % 5 == 0:
                    recs += self.ev.make_bad(1)
                acclib.kcat_produce(self.ctx, self.broker, "read-events", recs,
                                    tag="w%d" % self.waves)
                self.waves += 1
                time.sleep(0.15)
        except Exception as e:
            self.error = e

    def stop(self):
        self.stop_flag.set()
        self.join(120)


class Member:
    """One process of the job: its txid suffix, state directory and the runs so far."""

    def __init__(self, ctx, broker, name, cfg):
        self.ctx, self.broker, self.name, self.cfg = ctx, broker, name, cfg
        self.state = ctx.path("state-%s" % name)
        self.runs = 0
        self.job = None

    def start(self):
        self.runs += 1
        self.job = acclib.Job(
            self.ctx, self.broker, self.state,
            sets=["state.changelog=true", "kafka.assignment=group",
                  "kafka.static_membership=true"],
            args=["--config", self.cfg], interval_ms=300, txid_suffix="-" + self.name,
            tag="%s-run%d" % (self.name, self.runs))
        return self.job

    def ready(self):
        return bool(self.job.msgs("ready: /readyz answers 200"))


def log_time(o):
    """The wall-clock time of a log line (its "ts": RFC 3339 UTC with milliseconds)."""
    ts = o.get("ts", "")
    try:
        return datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
    except ValueError:
        return None


def gained_after(members, t0):
    """(member, time) of the first "partitions assigned" a live member logged after t0, or
    None."""
    best = None
    for m in members:
        for o in m.job.msgs("partitions assigned: their key groups loaded"):
            if not o.get("read_events_partitions"):
                continue  # only sources partitions
            t = log_time(o)
            if t is not None and t >= t0 and (best is None or t < best[1]):
                best = (m, t)
    return best


def body(ctx):
    if acclib.broker_kind(ctx) != "kafka":
        ctx.fail("needs Apache Kafka: set NF_TEST_BROKER=kafka:HOST:PORT (ctest's kafka-real "
                 "tests do)")
    broker = acclib.start_broker(ctx, name="so", partitions=PARTITIONS)
    cfg = ctx.path("group.json")
    with open(cfg, "w") as f:  # a list value: --set would split it on commas
        f.write('{"kafka": {"properties": ["session.timeout.ms=%d", "heartbeat.interval.ms=1000"'
                ']}}' % SESSION_MS)
    ev = acclib.Events(users=60, prefix="s")
    prod = Producer(ctx, broker, ev)
    prod.start()
    ms = {n: Member(ctx, broker, n, cfg) for n in ("p1", "p2", "p3", "p4")}

    seen = [0]

    def progress(what, job, more=150):
        """The group's interest-updates grow by `more` (whoever owns the partitions)."""
        mark = acclib.count_topic(ctx, broker, "interest-updates")

        def pred():
            seen[0] = acclib.count_topic(ctx, broker, "interest-updates")
            return seen[0] >= mark + more

        ctx.wait_for(what, pred, timeout=180, interval=0.5, job=job,
                     last=lambda: "%d records (from %d)" % (seen[0], mark))

    def start(n):
        ms[n].start()
        ctx.wait_for("%s ready" % n, ms[n].ready, timeout=180, job=ms[n].job)

    ctx.log("---- 1. three processes")
    for n in ("p1", "p2", "p3"):
        start(n)
    progress("the group committing input", ms["p1"].job)

    ctx.log("---- 2. kill -9 p2, start it again")
    ms["p2"].job.kill()
    time.sleep(1)
    start("p2")
    progress("the group committing input after p2's restart", ms["p2"].job)

    ctx.log("---- 3. p4 joins")
    start("p4")
    progress("the group committing input with p4", ms["p4"].job)
    revoked = sum(len(ms[n].job.msgs("partitions revoked: their epoch committed, their key "
                                     "groups let go")) for n in ("p1", "p2", "p3"))
    ctx.check(revoked > 0, "p4 joined but no process let partitions go")

    ctx.log("---- 4. rolling restart")
    for n in ("p1", "p2", "p3", "p4"):
        rc, hang = ms[n].job.terminate_or_report(60)
        ctx.check(not hang and rc == 0, "%s: exit %s after SIGTERM %s" % (n, rc, hang or ""),
                  ms[n].job)
        start(n)
        progress("the group committing input after %s's restart" % n, ms[n].job, more=60)

    ctx.log("---- 5. kill -9 p3 for good")
    time.sleep(2)
    t_kill = time.time()
    ms["p3"].job.kill()
    live = [ms[n] for n in ("p1", "p2", "p4")]
    got = ctx.wait_for("p3's partitions taken by the others", lambda: gained_after(live, t_kill),
                       timeout=SESSION_MS / 1000 + 120)
    m, t_gain = got
    def committed_after():
        for o in m.job.msgs("epoch.committed"):
            t = log_time(o)
            if o.get("records", 0) > 0 and t is not None and t > t_gain:
                return t
        return None

    t_commit = ctx.wait_for("%s committing input after the failover" % m.name, committed_after,
                            timeout=120, job=m.job)
    print(json.dumps({"bench": "scale_out_failover", "session_timeout_ms": SESSION_MS,
                      "kill_to_assigned_s": round(t_gain - t_kill, 2),
                      "kill_to_commit_s": round(t_commit - t_kill, 2), "standby": False}),
          flush=True)
    ctx.log("failover: kill -> assigned elsewhere %.1f s, -> committing there %.1f s" %
            (t_gain - t_kill, t_commit - t_kill))

    prod.stop()
    ctx.check(prod.error is None, "producing read events failed: %r" % prod.error)
    acclib.wait_all_consumed(ctx, live[0].job, broker, ev.valid, timeout=240)
    for m in live:
        rc, hang = m.job.terminate_or_report(60)
        ctx.check(not hang and rc == 0, "%s: exit %s after SIGTERM %s" % (m.name, rc, hang or ""),
                  m.job)
    recs = acclib.read_outputs(ctx, broker, "interest-updates")
    ctx.log(acclib.check_interest_updates(ctx, recs, ev.counts))
    counts, bad_pos = acclib.expected_from_input(ctx, broker)
    ctx.check(counts == ev.counts, "read-events holds other counts than were produced")
    ctx.log(acclib.check_dead_letters(ctx, broker, bad_pos))


if __name__ == "__main__":
    acclib.main("scale_out", body)
