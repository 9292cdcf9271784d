"""Safe state (issue 37, cases 1 and 2; src/state/identity.h, epoch.h nf_epoch_guard_positions,
store.h nf_store_open): an ordinary operator action must not replay or drop data silently. On
Apache Kafka, one job (kafka.assignment=all) consumes a wave of read events and stops; then:

  empty      the same job started on an empty state.dir refuses with exit 2 and a message that
             names the state directory, the consumer group and the ways out; nothing is
             emitted. In a consumer group (kafka.assignment=group) the same refusal comes from
             the assignment. Before this guard the job re-read read-events from the beginning
             and emitted every interest update again.
  writer     the job's state.dir under another kafka.transactional_id: refused (exit 2, "another
             job"), nothing emitted.
  current    db/CURRENT removed: refused (exit 2) and every table file is still there (RocksDB
             used to create a new database and delete them); with CURRENT back the job starts
             and emits nothing again.
  reset      the empty state.dir with --reset=group: the job starts at the group's offsets and
             emits nothing for the first wave; a second wave is emitted once (versions start
             again at 1: the lost state's counts are gone, as the runbook says).
  listener   (case 4) 600 slow connections (a header byte a second) held to a job's admin
             server (admin.max_connections 64): /healthz, /readyz and /metrics answer 200, the
             closes are counted, and the admin component logs a few warn lines, not one per
             socket. Before, 64 of them held every slot for good.
  garbled    (case 3, a job of its own) every live table file garbled in place after a clean
             stop: the checkpoint taken at the stop still verifies (its table files are copies,
             not links to the live ones), `run --from-checkpoint latest` restores it, and a second
             wave goes on from it: interest-updates holds every (user, version) exactly once.

Usage: python3 state_identity.py NEWSFLOW SRCDIR
"""
import os
import shutil
import socket
import sys
import threading
import urllib.request

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recovery"))
import acclib  # noqa: E402

WAVE = 300


def refused(ctx, j, what, needles):
    """j must exit 2 with an error line holding every needle; returns the error text."""
    rc = j.wait_exit(timeout=180, what="the refusal (%s)" % what)
    errs = [o.get("msg", "") + ": " + str(o.get("error", "")) for o in j.lines()
            if o.get("level") == "error"]
    ctx.check(rc == 2, "%s: exit %s, want 2 (errors: %r)" % (what, rc, errs[:3]), j)
    text = " | ".join(errs)
    missing = [n for n in needles if n not in text]
    ctx.check(not missing, "%s: the error does not name %r: %s" % (what, missing, text[:1500]), j)
    ctx.check(not j.msgs("epoch.committed") or all(
        o.get("records", 0) == 0 for o in j.msgs("epoch.committed")),
        "%s: an epoch with outputs committed before the refusal" % what, j)
    ctx.log("%s: refused (exit 2): %s" % (what, errs[0][:240]))
    return text


def empty_dir(ctx, broker, group, mode, out):
    """A new state.dir against the group's progress (kafka.assignment=mode): refused."""
    empty = ctx.path("empty-" + mode)
    j = acclib.Job(ctx, broker, empty, sets=["kafka.assignment=%s" % mode], tag="empty-" + mode)
    refused(ctx, j, "empty state.dir, kafka.assignment=%s" % mode,
            ["stands behind the consumer group", empty, group, "--reset=group",
             "--from-checkpoint", "state.changelog"])
    ctx.check(acclib.count_topic(ctx, broker, "interest-updates") == out,
              "an empty state.dir (%s) emitted interest updates" % mode)


def produce(ctx, broker, ev, n, tag):
    acclib.kcat_produce(ctx, broker, "read-events", ev.make(n), tag=tag)


def garble_live_tables(ctx, state):
    db = os.path.join(state, "db")
    n = 0
    for name in sorted(os.listdir(db)):
        if name.endswith(".sst"):
            with open(os.path.join(db, name), "r+b") as f:
                f.seek(200)
                f.write(b"Z" * 64)
            n += 1
    ctx.check(n > 0, "no live table file to garble in %s: %r" % (db, os.listdir(db)))
    return n


def first_run(ctx, name, users):
    """A job on topics of its own consumes a first wave and stops cleanly (a checkpoint at the
    stop): (broker, events, state dir, the job)."""
    broker = acclib.start_broker(ctx, name=name)
    ev = acclib.Events(users=users, prefix=name[:2])
    state = ctx.path("state-" + name)
    produce(ctx, broker, ev, WAVE, name + "-w1")
    j1 = acclib.Job(ctx, broker, state, tag=name + "-1")
    acclib.wait_all_consumed(ctx, j1, broker, ev.valid)
    ctx.check(j1.terminate() == 0, "%s-1: exit after SIGTERM != 0" % name, j1)
    return broker, ev, state, j1


def garbled(ctx):
    broker, ev, state, _ = first_run(ctx, "garbled", 15)
    n = garble_live_tables(ctx, state)
    out = acclib.run_cli(ctx, ["checkpoints", "verify", "latest", "--state-dir", state])
    ctx.log("%d live table files garbled; checkpoints verify latest: %s" % (n, out.strip()[:160]))
    j2 = acclib.Job(ctx, broker, state, args=["--from-checkpoint", "latest"], tag="garbled-2")
    ctx.wait_for("'newsflow started' after the restore", lambda: j2.msgs("newsflow started"),
                 timeout=180, job=j2)
    produce(ctx, broker, ev, WAVE, "g2")
    acclib.wait_all_consumed(ctx, j2, broker, ev.valid)
    ctx.check(j2.terminate() == 0, "garbled-2: exit after SIGTERM != 0", j2)
    ctx.log("garbled: " + acclib.check_interest_updates(
        ctx, acclib.read_outputs(ctx, broker, "interest-updates"), ev.counts))


def listener(ctx):
    """Case 4: idle connections held open (far more than the cap) must not take /healthz,
    /readyz and /metrics down; the closes are counted and logged a few times, not per socket."""
    broker = acclib.start_broker(ctx, name="listener")
    j = acclib.Job(ctx, broker, ctx.path("state-listener"), tag="listener",
                   sets=["admin.enabled=true", "admin.port=0", "admin.max_connections=64"])
    ctx.wait_for("'newsflow started' (listener)", lambda: j.admin_port(), timeout=180, job=j)
    port = j.admin_port()
    held = []
    stop = threading.Event()

    def trickle():
        """A slowloris: each held connection sends a header byte a second (a byte resets
        libmicrohttpd's own idle timeout, which alone let them hold every slot for good)."""
        while not stop.wait(1.0):
            for c in list(held):
                try:
                    c.send(b"X")
                except OSError:
                    pass
    t = threading.Thread(target=trickle, daemon=True)
    try:
        for _ in range(600):
            try:
                c = socket.create_connection(("127.0.0.1", port), timeout=5)
                c.send(b"GET /healthz HTTP/1.1\r\nX-Slow: ")
                held.append(c)
            except OSError:
                pass  # refused past the server's own cap: counted below
        t.start()
        for path in ("/healthz", "/readyz", "/metrics"):
            def answers():
                try:
                    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path),
                                                timeout=5) as r:
                        return r.status == 200
                except Exception:
                    return False
            ctx.wait_for("%s answering beside %d held connections" % (path, len(held)),
                         answers, timeout=60, interval=0.5, job=j)
        m = j.metrics() or {}
        # admin.port is the shards' once they run (runtime/httpd.h): its closes are counted
        # there; libmicrohttpd's before the hand-over
        closed = (m.get("newsflow_admin_connections_closed_total", 0) +
                  m.get("newsflow_http_connections_closed_total", 0))
        ctx.check(closed > 0, "no connection closed of %d held over a cap of 64" % len(held))
    finally:
        stop.set()
        for c in held:
            c.close()
    warns = [o for o in j.lines() if o.get("level") == "warn" and o.get("component") == "admin"]
    ctx.check(len(warns) <= 10, "%d admin warn lines for %d held connections" %
              (len(warns), len(held)))
    ctx.check(j.terminate() == 0, "listener: exit after SIGTERM != 0", j)
    ctx.log("listener: %d idle connections held, probes answered, %d closed, %d warn lines" %
            (len(held), closed, len(warns)))


def body(ctx):
    if acclib.broker_kind(ctx) != "kafka":
        ctx.fail("needs Apache Kafka: set NF_TEST_BROKER=kafka:HOST:PORT (ctest's kafka-real "
                 "tests do)")
    broker, ev, state, j1 = first_run(ctx, "identity", 20)
    ctx.check(j1.msgs("state identity recorded"), "no 'state identity recorded' line", j1)
    out1 = acclib.count_topic(ctx, broker, "interest-updates")
    group = broker.prefix + "group"

    empty_dir(ctx, broker, group, "all", out1)

    # writer: the job's own directory under another transactional id
    j = acclib.Job(ctx, broker, state, txid_suffix="-other", tag="writer")
    refused(ctx, j, "another writer's state.dir", ["another job", "writer", state])

    # current: CURRENT removed from a copy of the directory
    copy = ctx.path("state-copy")
    shutil.copytree(state, copy)
    db = os.path.join(copy, "db")
    ssts = sorted(n for n in os.listdir(db) if n.endswith(".sst"))
    ctx.check(ssts, "job1's database has no table file to lose: %r" % os.listdir(db))
    os.rename(os.path.join(db, "CURRENT"), ctx.path("CURRENT.saved"))
    j = acclib.Job(ctx, broker, copy, tag="no-current")
    refused(ctx, j, "db/CURRENT missing", ["CURRENT file is missing", db, "--from-checkpoint"])
    left = sorted(n for n in os.listdir(db) if n.endswith(".sst"))
    ctx.check(left == ssts, "table files changed by a refused start: %r -> %r" % (ssts, left))
    ctx.check(not os.path.exists(os.path.join(db, "CURRENT")), "a refused start wrote CURRENT")
    os.rename(ctx.path("CURRENT.saved"), os.path.join(db, "CURRENT"))
    shutil.rmtree(copy)  # the original goes on below; two copies of one writer must not

    # reset: an empty directory started over at the group's offsets
    fresh = ctx.path("state-reset")
    before = acclib.count_topic(ctx, broker, "interest-updates")
    jr = acclib.Job(ctx, broker, fresh, args=["--reset=group"], tag="reset")
    ctx.wait_for("'newsflow started' (reset)", lambda: jr.msgs("newsflow started"), timeout=180,
                 job=jr)
    ctx.check(jr.msgs_matching("--reset=group"), "no --reset=group warning", jr)
    # Wave 1 precedes wave 2 in every partition: had the reset job read it again, its updates
    # would be counted below, before or with wave 2's.
    ev2 = acclib.Events(users=5, prefix="rs")
    produce(ctx, broker, ev2, 50, "w2")
    acclib.wait_all_consumed(ctx, jr, broker, before + ev2.valid)
    ctx.check(jr.terminate() == 0, "reset: exit after SIGTERM != 0", jr)
    ctx.check(acclib.count_topic(ctx, broker, "interest-updates") == before + ev2.valid,
              "the reset job emitted more than the second wave")
    # The reset job committed under the same writer: the original directory now stands behind
    # the group in turn and must refuse as well (no silent replay of wave 2).
    j = acclib.Job(ctx, broker, state, tag="behind")
    refused(ctx, j, "the original state.dir after the reset", ["stands behind the consumer group"])
    # Last: a refused static member stays in the group until its session ends.
    empty_dir(ctx, broker, group, "group", before + ev2.valid)
    ctx.log("empty, writer, current, reset: every refusal exit 2 with nothing emitted")
    garbled(ctx)
    listener(ctx)


if __name__ == "__main__":
    acclib.main("state_identity", body)
