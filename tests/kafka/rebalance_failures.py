"""A process that gains partitions but cannot read the group's committed offsets for them stops
cleanly, on Apache Kafka: exit 1 with the reason logged, never a signal, nothing lost (issue 36:
a process died of SIGSEGV after "the group's committed offsets are not readable: Local: Timed
out" in a rebalance that reached it while it stopped).

Two processes of one job (state.changelog=true, kafka.assignment=group, static members, a
6 s session) share 4 read-events partitions while events arrive. p1 runs with
NF_TEST_FAIL_GROUP_OFFSETS=FILE: while FILE exists, its reads of the group's committed offsets
time out, as from a coordinator too slow to answer. Then p2 is SIGKILLed, so that once its
session expires its partitions are assigned to p1, whose assign callback cannot position them:

  running   p1 runs: it must stop on its own with exit 1 and "assigned partitions: their state
            cannot be restored";
  stopping  p1 has been SIGTERMed and its final epoch committed; it waits, polling its
            consumer (NF_FAULT before_close:*:poll_until=FILE), until p2's partitions have been
            assigned to it and failed, then leaves the group: exit 1 with the same reason, and
            no signal;
  leaving   the same without the knob and without polling (NF_FAULT before_close:*:until=FILE):
            the group gives p1 every partition while it waits, and the assignment reaches it
            only in its consumer's close (the SIGSEGV of issue 36: librdkafka names no protocol
            there). The partitions are not taken (the job commits nothing more): exit 0.

And a stop stuck after its final epoch committed (before_close never released) is ended by the
shutdown.timeout_ms watchdog with exit 0: state and outputs are committed.

After each case both start again without the knob and catch up; at the end every
(user, version) of interest-updates is there exactly once (read_committed) and every poison
record has one dead letter: a process that stops this way loses and duplicates nothing.

Needs Apache Kafka (NF_TEST_BROKER=kafka:...).

Usage: python3 rebalance_failures.py NEWSFLOW SRCDIR
"""
import json
import os
import re
import signal
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recovery"))
import acclib  # noqa: E402

PARTITIONS = 4
SESSION_MS = 6000
REASON = "assigned partitions: their state cannot be restored"


class Member:
    def __init__(self, ctx, broker, name, cfg):
        self.ctx, self.broker, self.name, self.cfg = ctx, broker, name, cfg
        self.state = ctx.path("state-%s" % name)
        self.job = None
        self.runs = 0

    def start(self, env=None, sets=()):
        self.job = acclib.Job(
            self.ctx, self.broker, self.state,
            sets=["state.changelog=true", "kafka.assignment=group",
                  "kafka.static_membership=true", "shutdown.timeout_ms=60000"] + list(sets),
            args=["--config", self.cfg], interval_ms=300, txid_suffix="-" + self.name,
            tag="%s-%d" % (self.name, self.runs), env=env)
        self.runs += 1
        return self.job

    def ready(self):
        return bool(self.job.msgs("ready: /readyz answers 200"))

    def stop_into_stall(self):
        """SIGTERM; returns once its final epoch committed and it stalls at before_close."""
        self.job.expect_exit = True
        self.job.proc.send_signal(signal.SIGTERM)
        self.ctx.wait_for("%s's final epoch committed and its stall at before_close" % self.name,
                          lambda: self.job.msgs("fault injection: stalling"), timeout=120,
                          job=self.job)

    def assigned(self):
        """(topic, partition) this process was assigned, from its log (cooperative-sticky may
        give a member partitions of one input only)."""
        return {(m.get("topic"), m.get("partition")) for m in self.job.msgs("partition assigned")}


def assignment_queued_in_stall(job):
    """Whether p1's consumer was handed partitions (librdkafka's cgrp debug line "delegating
    incremental assign of N partition(s) to application", N > 0) after its stall began: the
    assignment then waits in the consumer for whoever polls it next, here its close."""
    stalled = False
    for o in job.lines():
        if o.get("msg") == "fault injection: stalling":
            stalled = True
        m = re.search(r"delegating incremental assign of (\d+) partition", o.get("msg", ""))
        if stalled and m and int(m.group(1)) > 0:
            return True
    return False


def consumer_steady(job):
    """Whether p1's consumer has served every rebalance so far (its last cgrp join state is
    "steady"): a rebalance it has not served yet would hold the next one back until it polls."""
    states = re.findall(r"changed join state \S+ -> (\S+)",
                        " ".join(o.get("msg", "") for o in job.lines()
                                 if o.get("facility") == "CGRPJOINSTATE"))
    return bool(states) and states[-1] == "steady"


def failed_assignment(job):
    return any(REASON in o.get("error", "") and o.get("level") == "error" for o in job.lines())


def check_clean_failure(ctx, job, what):
    rc = job.wait_exit(180, what)
    ctx.check(rc == 1, "%s: exit %s, want 1 (a negative code is a signal)" % (what, rc), job)
    ctx.check(failed_assignment(job), "%s: no error line says %r" % (what, REASON), job)
    ctx.check(job.msgs("the job failed (see the first error above); stopped without committing "
                       "what it did after its last epoch: those inputs are read again after a "
                       "restart") or job.msgs("newsflow stopped"),
              "%s: the process did not stop through its own path" % what, job)
    ctx.log("%s: exit 1, %r logged" % (what, REASON))


def write_config(path, extra=(), level=None):
    """The group's configuration: a 6 s session; extra librdkafka properties, a log level."""
    props = ["session.timeout.ms=%d" % SESSION_MS, "heartbeat.interval.ms=1000",
             "transaction.timeout.ms=6000"] + list(extra)
    cfg = {"kafka": {"properties": props}}
    if level:
        cfg["log"] = {"level": level}
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


def body(ctx):
    if acclib.broker_kind(ctx) != "kafka":
        ctx.fail("needs Apache Kafka: set NF_TEST_BROKER=kafka:HOST:PORT (ctest's kafka-real "
                 "tests do)")
    broker = acclib.start_broker(ctx, name="rbf", partitions=PARTITIONS)
    cfg = write_config(ctx.path("group.json"))
    knob = ctx.path("offsets-time-out")
    go = ctx.path("leave-the-group")
    ev = acclib.Events(users=40, prefix="rb")
    prod = acclib.Producer(ctx, broker, ev, per_wave=20, pause=0.2, bad_every=17, tag="rb")
    ms = {n: Member(ctx, broker, n, cfg) for n in ("p1", "p2")}
    ms["p1"].start(env={"NF_TEST_FAIL_GROUP_OFFSETS": knob})
    prod.start()

    def both_ready(what):
        for n in ("p1", "p2"):
            ctx.wait_for("%s ready (%s)" % (n, what), ms[n].ready, timeout=120, job=ms[n].job)
        ctx.wait_for("the partitions shared (%s)" % what,
                     lambda: all(ms[n].assigned() for n in ms), timeout=120, interval=0.5)

    ms["p2"].start()
    both_ready("running case")

    ctx.log("---- 1. p2 killed while p1 runs: p1 cannot position p2's partitions")
    open(knob, "w").close()
    ms["p2"].job.kill()
    check_clean_failure(ctx, ms["p1"].job, "running")
    os.unlink(knob)

    ctx.log("---- 2. p2 killed while p1 stops: the assignment reaches p1 as it leaves")
    ms["p1"].start(env={"NF_TEST_FAIL_GROUP_OFFSETS": knob,
                        "NF_FAULT": "before_close:*:poll_until=%s" % go})
    ms["p2"].start()
    both_ready("stopping case")
    open(knob, "w").close()
    ms["p1"].stop_into_stall()
    ms["p2"].job.kill()
    # p2's session expires and the group gives p2's partitions to p1, still a member (its stall
    # polls the consumer): their assignment fails while p1 stops; only then does p1 go on.
    ctx.wait_for("p2's partitions assigned to p1 while it stops",
                 lambda: failed_assignment(ms["p1"].job), timeout=120, job=ms["p1"].job)
    open(go, "w").close()
    check_clean_failure(ctx, ms["p1"].job, "stopping")
    ctx.check(ms["p1"].job.msgs("fault injection: stall over"),
              "stopping: p1 did not go on after its stall", ms["p1"].job)
    os.unlink(knob)

    ctx.log("---- 3. p2 killed while p1 leaves the group: the assignment reaches p1's close")
    os.unlink(go)
    # librdkafka's cgrp debug lines say when p1's consumer is handed an assignment
    ms["p1"].cfg = write_config(ctx.path("group-debug.json"), ["debug=cgrp"], "debug")
    ms["p1"].start(env={"NF_FAULT": "before_close:*:until=%s" % go})
    ms["p1"].cfg = cfg
    ms["p2"].start()
    both_ready("leaving case")
    ctx.wait_for("p1's consumer steady in the group", lambda: consumer_steady(ms["p1"].job),
                 timeout=120, interval=0.5, job=ms["p1"].job)
    ms["p1"].stop_into_stall()
    ms["p2"].job.kill()
    # p1 does not poll: once p2's session expires the coordinator gives p1 p2's partitions, and
    # the assignment waits in p1's consumer until its close serves it.
    ctx.wait_for("p2's partitions handed to p1's consumer while p1 stalls",
                 lambda: assignment_queued_in_stall(ms["p1"].job), timeout=120, interval=0.5,
                 job=ms["p1"].job)
    open(go, "w").close()
    rc = ms["p1"].job.wait_exit(120, "p1's exit")
    ctx.check(rc == 0, "leaving: exit %s, want 0 (a negative code is a signal)" % rc, ms["p1"].job)
    ctx.check(ms["p1"].job.msgs("partitions assigned while leaving the group: not taken"),
              "leaving: the assignment did not reach p1's close", ms["p1"].job)
    ctx.log("leaving: the assignment served by the close, not taken; exit 0")

    ctx.log("---- 4. both again without the knob: nothing lost, nothing twice")
    prod.stop()
    ms["p1"].start()
    ms["p2"].start()
    both_ready("catching up")
    acclib.wait_all_consumed(ctx, ms["p1"].job, broker, ev.valid, timeout=180)
    for n in ("p2", "p1"):
        rc, hang = ms[n].job.terminate_or_report(60)
        ctx.check(not hang and rc == 0, "%s: exit %s after SIGTERM %s" % (n, rc, hang or ""),
                  ms[n].job)
    ctx.log("---- 5. a stop that overruns shutdown.timeout_ms after its final epoch committed")
    never = ctx.path("never-created")
    j = ms["p1"].start(env={"NF_FAULT": "before_close:*:until=%s" % never},
                       sets=["shutdown.timeout_ms=3000"])
    ctx.wait_for("p1 ready", ms["p1"].ready, timeout=120, job=j)
    rc = j.terminate(120)
    ctx.check(rc == 0 and j.msgs("fault injection: stalling") and j.msgs(
              "shutdown.timeout_ms passed after the final epoch committed; exiting now (state "
              "and outputs are committed)"),
              "a stop stuck after its final epoch committed: exit %s, want 0 and the watchdog's "
              "warning" % rc, j)
    ctx.log("stuck after the final epoch: the watchdog exits 0 (nothing is left uncommitted)")

    counts, bad_pos = acclib.expected_from_input(ctx, broker)
    ctx.check(counts == ev.counts, "read-events holds other events than were produced")
    ctx.log(acclib.check_interest_updates(
        ctx, acclib.read_outputs(ctx, broker, "interest-updates"), ev.counts))
    ctx.log(acclib.check_dead_letters(ctx, broker, bad_pos))


if __name__ == "__main__":
    acclib.main("rebalance_failures", body)
