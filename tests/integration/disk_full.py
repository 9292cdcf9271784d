"""The job on a state.dir whose file system fills up (issue 36; test_disk_full.sh mounts it and
passes its mount point as the third argument).

  run1   read events flow, interest-updates commit (a named checkpoint every 2 epochs); the file
         system is filled (a ballast file, topped up until the job exits): the job must exit 1
         with an error that names the file system (docs/runbooks.md "Disk full on state.dir"),
         not die of SIGABRT (librocksdb 7.8's assertion on a write to its info LOG after one
         failed, which state.rocksdb_log=off keeps from happening).
  run2   started while the file system is still full: refused, exit 1, the file system named.
  run3   the ballast removed, started again: it rolls forward or reads again whatever run1 left,
         consumes every event produced meanwhile, stops cleanly (exit 0).
Then interest-updates (read_committed) and the sink files of the runs hold every (user,
version) exactly once: nothing lost, nothing duplicated.

Usage: python3 disk_full.py NEWSFLOW SRCDIR MOUNTPOINT
"""
import json
import os
import signal
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recovery"))
import acclib  # noqa: E402

MNT = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else None
BALLAST = "ballast"


def fill(mnt):
    """Takes every free block of the file system (what a writer can get: a preallocated ballast,
    then writes of 64 KiB, 4 KiB and 1 byte until ENOSPC: 0 bytes free), appending to the
    ballast file. Bytes taken."""
    taken = 0
    with open(os.path.join(mnt, BALLAST), "ab") as f:
        st = os.statvfs(mnt)
        want = st.f_bavail * st.f_frsize - (8 << 20)  # the rest written below
        if want > 0:
            try:
                os.posix_fallocate(f.fileno(), f.seek(0, os.SEEK_END), want)
                taken += want
            except OSError:
                pass
        f.seek(0, os.SEEK_END)
        for size in (65536, 4096, 1):
            chunk = b"\0" * size
            while True:
                try:
                    n = os.write(f.fileno(), chunk)
                except OSError:
                    break
                if n == 0:
                    break
                taken += n
        try:
            os.fsync(f.fileno())
        except OSError:
            pass
    return taken


def names_fs(job, mnt):
    """The error lines of a job that name the file system at mnt (a field, or in the text)."""
    out = []
    for o in job.lines():
        if o.get("level") != "error":
            continue
        if o.get("file_system") == mnt or ("file system %s " % mnt) in json.dumps(o):
            out.append(o)
    return out


def exit_of(ctx, job, rc, what):
    """Fails on a death by a signal (SIGABRT: issue 36) or an exit code other than 1."""
    if rc is not None and rc < 0:
        sig = -rc
        assertion = ""
        try:
            with open(job.log_path, "rb") as f:
                for l in f.read().decode("utf-8", "replace").split("\n"):
                    if "Assertion" in l:
                        assertion = ": " + l.strip()[:300]
        except FileNotFoundError:
            pass
        ctx.fail("%s: %s died of signal %d (%s)%s" % (what, job.tag, sig,
                                                      signal.Signals(sig).name, assertion), job)
    ctx.check(rc == 1, "%s: %s exited %s, want 1 (a runtime failure)" % (what, job.tag, rc), job)


def sink_records(paths, topic):
    """[(key, value dict)] of one topic in the sink files (jsonl: one object a line)."""
    recs = []
    for p in paths:
        if not os.path.exists(p):
            continue
        with open(p, encoding="utf-8") as f:
            for l in f:
                if not l.strip():
                    continue
                o = json.loads(l)
                if o.get("topic") == topic:
                    recs.append((o.get("key"), o.get("value") or {}))
    return recs


def check_sink(ctx, recs, counts):
    """Every (user, version) over 1..counts[user] exactly once, nothing else."""
    seen = {}
    for k, v in recs:
        u, ver = v.get("user_id"), v.get("version")
        ctx.check(k == u, "sink: key %r != user_id %r" % (k, u))
        seen[(u, ver)] = seen.get((u, ver), 0) + 1
    want = {(u, n) for u, c in counts.items() for n in range(1, c + 1)}
    dup = sorted(x for x, n in seen.items() if n > 1)
    missing = sorted(want - set(seen))
    extra = sorted(set(seen) - want)
    ctx.check(not dup and not missing and not extra,
              "sink interest-updates not exactly once (%d records, %d expected): %d duplicated "
              "%s, %d missing %s, %d unexpected %s" % (len(recs), len(want), len(dup), dup[:6],
                                                       len(missing), missing[:6], len(extra),
                                                       extra[:6]))
    return "sink: %d interest-updates, every (user,version) exactly once" % len(recs)


def body(ctx):
    ctx.check(MNT and os.path.ismount(MNT), "usage: disk_full.py NEWSFLOW SRCDIR MOUNTPOINT "
              "(a mounted file system of the test's own)")
    state = os.path.join(MNT, "state")
    broker = acclib.start_broker(ctx)
    ev = acclib.Events(users=20)
    prod = acclib.Producer(ctx, broker, ev, per_wave=20, pause=0.1)
    prod.start()
    sinks = []

    def job(tag):
        sinks.append(ctx.path("sink-%s.jsonl" % tag))
        return acclib.Job(ctx, broker, state, tag=tag,
                          sets=["checkpoint.retain_every=2", "sink.spec=jsonl:%s" % sinks[-1]])

    # run1: outputs commit, then the disk fills.
    j1 = job("run1")
    ctx.wait_for("run1's first 200 committed interest-updates",
                 lambda: j1.committed_records() >= 200 and j1.msgs("checkpoint.created"),
                 timeout=120, job=j1, last=lambda: "%d records" % j1.committed_records())
    taken = fill(MNT)
    ctx.log("filled %s: %d MiB taken, %d bytes left; run1 at epoch %d" % (
        MNT, taken >> 20, os.statvfs(MNT).f_bavail * os.statvfs(MNT).f_frsize, j1.last_epoch()))
    j1.expect_exit = True
    for _ in range(1200):  # kept full (the job frees a little: pruned checkpoints) until it exits
        if not j1.alive():
            break
        fill(MNT)
        time.sleep(0.1)
    rc = j1.wait_exit(60, "exit after its state.dir filled up")
    exit_of(ctx, j1, rc, "disk full while running")
    named = names_fs(j1, MNT)
    ctx.check(named, "run1: no error line names the full file system %s" % MNT, j1)
    ctx.log("run1 exited 1: %s" % named[0].get("msg"))

    # run2: a start while it is still full.
    fill(MNT)
    j2 = job("run2")
    rc = j2.wait_exit(120, "exit of a start on a full state.dir")
    exit_of(ctx, j2, rc, "start on a full disk")
    named = names_fs(j2, MNT)
    ctx.check(named, "run2: no error line names the full file system %s" % MNT, j2)
    ctx.log("run2 refused to start: %s" % named[0].get("error", named[0].get("msg")))

    # run3: space freed; a restart brings everything, once.
    os.unlink(os.path.join(MNT, BALLAST))
    j3 = job("run3")
    ctx.wait_for("run3 to commit", lambda: j3.last_epoch() > 0, timeout=120, job=j3)
    prod.stop()
    ctx.check(prod.error is None, "producer failed: %r" % prod.error)
    counts, _ = acclib.expected_from_input(ctx, broker)
    expected = sum(counts.values())
    acclib.wait_all_consumed(ctx, j3, broker, expected, timeout=180)
    rc = j3.terminate(60)
    ctx.check(rc == 0, "run3: exit %s after SIGTERM, want 0" % rc, j3)
    rolled = j3.msgs("pending epoch rolled forward")
    ctx.log("run3: %d events in all; %s" % (
        expected, "rolled epoch %d forward" % rolled[0]["epoch"] if rolled else "nothing pending"))
    recs = acclib.read_outputs(ctx, broker, "interest-updates")
    ctx.log(acclib.check_interest_updates(ctx, recs, counts))
    ctx.log(check_sink(ctx, sink_records(sinks, "interest-updates"), counts))


if __name__ == "__main__":
    acclib.main("disk_full", body)
