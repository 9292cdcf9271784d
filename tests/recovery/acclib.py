"""acclib.py — shared helpers of the recovery acceptance tests (test_pending_recovery.sh,
test_restore_checkpoint.sh, test_backpressure.sh, test_analytics.sh, test_mock_broker_faults.sh).

Python 3 standard library only, plus the kcat binary. Everything a test starts (the standalone
mock cluster, the job, kcat) is tracked here and stopped by its own pid at exit, on SIGTERM /
SIGINT and on failure; every child also gets PR_SET_PDEATHSIG so that a SIGKILLed test leaves
nothing behind. The temporary directory is removed at exit unless NF_KEEP_TMP is set.

The broker. A test talks to a Broker (start_broker), chosen by the environment variable
NF_TEST_BROKER:
  unset, "" or "mock"          the test starts its own `newsflow mock-kafka` (librdkafka's mock
                               cluster; topics without a prefix; fault commands on its stdin);
  "kafka:HOST:PORT[,...]"      a real Apache Kafka cluster runs there (shared with other tests):
                               each start_broker makes a unique topic prefix
                               ("nft-<test>[-<name>]-<pid>-<4 hex>."), creates the topics under it
                               (`newsflow topics create`) and hands the job its own group and
                               transactional ids under it (Broker.job_sets).
The kcat helpers take the Broker and a topic's base name ("read-events") and add the prefix.
On a real broker, read_committed readers see neither aborted transactions (the mock shows
them) nor anything after a still-open one: a killed job's transaction stays open until the next
incarnation's init_transactions (or the broker's transaction timeout) aborts it, so read the
output topics back only after the job restarted or stopped cleanly.

Nothing here measures time as an assertion: waits poll for a condition and give up after a
generous deadline, with a message saying what was awaited and what was last seen.
"""
import atexit
import ctypes
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

_libc = None
try:
    _libc = ctypes.CDLL(None, use_errno=True)
except OSError:
    pass


def _pdeathsig():
    # PR_SET_PDEATHSIG = 1: the child gets SIGKILL when the test process dies.
    if _libc is not None:
        _libc.prctl(1, signal.SIGKILL, 0, 0, 0)


class TestFailure(Exception):
    pass


_KEYS = {}


def knows_key(newsflow, key):
    """Whether the binary's configuration has the key (`newsflow config keys`, once per binary):
    a pinned older build (kafka/test_upgrade) is run with the keys it has."""
    if newsflow not in _KEYS:
        try:
            out = subprocess.run([newsflow, "config", "keys"], capture_output=True, text=True,
                                 timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            out = ""
        _KEYS[newsflow] = {l.split()[0] for l in out.split("\n") if l.strip()}
    return key in _KEYS[newsflow]


def thread_cpu(pid):
    """[(thread name, CPU seconds)] of a live process, busiest first: a thread that spins (a
    client library looping) stands out in a dump of a stalled job."""
    out = []
    tick = os.sysconf("SC_CLK_TCK")
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                st = f.read()
        except OSError:
            continue
        name = st[st.index("(") + 1:st.rindex(")")]
        fields = st[st.rindex(")") + 2:].split()
        out.append((name, (int(fields[11]) + int(fields[12])) / tick))
    return sorted(out, key=lambda t: -t[1])


class Ctx:
    """One test run: temp dir, children, logging, failure reporting."""

    def __init__(self, name, newsflow, srcdir):
        self.name = name
        self.nf = os.path.abspath(newsflow)
        self.srcdir = srcdir
        self.tmp = tempfile.mkdtemp(prefix="nf-%s-" % name)
        self.children = []  # Popen objects, in start order
        self.t0 = time.monotonic()
        self.jobs = []
        self._cleaned = False
        atexit.register(self.cleanup)
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, sig, frame):
        self.log("signal %d: cleaning up" % sig)
        self.cleanup()
        os._exit(128 + sig)

    def log(self, msg):
        print("[%s %6.1fs] %s" % (self.name, time.monotonic() - self.t0, msg), flush=True)

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def spawn(self, argv, **kw):
        if self._cleaned:
            raise TestFailure("cleaning up: not starting %s" % argv[0])
        kw.setdefault("preexec_fn", _pdeathsig)
        p = subprocess.Popen(argv, **kw)
        self.children.append(p)
        return p

    def stop_child(self, p, sig=signal.SIGTERM, wait=10.0):
        if p.poll() is None:
            try:
                p.send_signal(sig)
            except ProcessLookupError:
                pass
            try:
                p.wait(wait)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        return p.returncode

    def cleanup(self):
        if self._cleaned:
            return
        self._cleaned = True
        for p in reversed(self.children):
            if p.poll() is None:
                try:
                    p.kill()  # by its own pid only
                except ProcessLookupError:
                    pass
        for p in self.children:
            try:
                p.wait(10)
            except Exception:
                pass
            for f in (p.stdin, p.stdout, p.stderr):
                try:
                    if f:
                        f.close()
                except Exception:
                    pass
        if os.environ.get("NF_KEEP_TMP"):
            print("[%s] keeping %s" % (self.name, self.tmp), flush=True)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def fail(self, msg, job=None):
        print("FAIL [%s]: %s" % (self.name, msg), file=sys.stderr, flush=True)
        for j in ([job] if job else self.jobs[-1:]):
            j.dump_tail(sys.stderr)
        raise TestFailure(msg)

    def check(self, cond, msg, job=None):
        if not cond:
            self.fail(msg, job)

    def dump_others(self, shown):
        """The tails of the other jobs still running: a process waiting on its group (an
        assignment that never comes) is often stuck because of another member."""
        for j in self.jobs:
            if j.proc.poll() is not None:
                continue
            if j not in shown:
                j.dump_tail(sys.stderr, n=12)
            busy = thread_cpu(j.proc.pid)[:4]
            if busy:
                print("---- busiest threads of %s (pid %d): %s" % (
                    j.tag, j.proc.pid, ", ".join("%s %.1fs" % t for t in busy)),
                    file=sys.stderr, flush=True)

    def wait_for(self, what, pred, timeout=60.0, interval=0.2, job=None, last=None):
        """Polls pred() until it returns a truthy value (returned). The deadline only turns a
        hang into a failure message; it is never a measured assertion."""
        deadline = time.monotonic() + timeout
        while True:
            v = pred()
            if v:
                return v
            if job is not None and job.proc.poll() is not None and not job.expect_exit:
                self.fail("job exited (code %s) while waiting for %s" % (job.proc.returncode, what),
                          job)
            if time.monotonic() > deadline:
                msg = "timed out after %.0fs waiting for %s%s" % (
                    timeout, what, ("; last seen: %s" % last()) if last else "")
                # the message and the log's tail first: a CI report keeps only the start of a
                # failed test's output, and the stacks are long
                print("FAIL [%s]: %s" % (self.name, msg), file=sys.stderr, flush=True)
                for j in ([job] if job else self.jobs[-1:]):
                    j.dump_tail(sys.stderr)
                    if hasattr(j, "dump_stacks"):
                        j.dump_stacks(sys.stderr)  # a stall shows where it is stuck
                self.dump_others([job] if job else self.jobs[-1:])
                raise TestFailure(msg)
            time.sleep(interval)


def main(name, body):
    """Runs body(ctx) with argv = [newsflow, srcdir]; exit 0 on success, 1 on failure."""
    if len(sys.argv) < 3:
        print("usage: %s NEWSFLOW SRCDIR" % sys.argv[0], file=sys.stderr)
        sys.exit(2)
    ctx = Ctx(name, sys.argv[1], sys.argv[2])
    rc = 0
    try:
        body(ctx)
        ctx.log("PASS (%.1fs)" % (time.monotonic() - ctx.t0))
    except TestFailure:
        rc = 1
    except Exception:
        import traceback
        traceback.print_exc()
        print("FAIL [%s]: unexpected exception (above)" % name, file=sys.stderr)
        rc = 1
    finally:
        ctx.cleanup()
    sys.exit(rc)


# ------------------------------------------------------------------------------ brokers

class Mock:
    """`newsflow mock-kafka`: bootstrap address and the fault-command channel."""

    def __init__(self, ctx, partitions=4, brokers=1):
        self.ctx = ctx
        self.err_path = ctx.path("mock.err")
        self.errf = open(self.err_path, "wb")
        self.proc = ctx.spawn([ctx.nf, "mock-kafka", "--partitions", str(partitions),
                               "--brokers", str(brokers)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errf)
        line = self._readline(30.0)
        m = re.match(r"bootstrap=(\S+)", line or "")
        if not m:
            ctx.fail("mock-kafka did not print bootstrap=HOST:PORT (got %r; stderr in %s)" %
                     (line, self.err_path))
        self.bootstrap = m.group(1)
        ctx.log("mock cluster at %s (%d partitions, %d brokers)" %
                (self.bootstrap, partitions, brokers))

    def _readline(self, timeout):
        buf = b""
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                return None
            c = os.read(fd, 1)
            if not c:
                return None
            buf += c
        return buf.decode().strip()

    def command(self, cmd):
        """Sends one fault command; returns the answer line ("ok" or "error: ...")."""
        self.proc.stdin.write((cmd + "\n").encode())
        self.proc.stdin.flush()
        ans = self._readline(10.0)
        self.ctx.log("mock <- %-45s -> %s" % (cmd, ans))
        return ans


# the keys Broker.job_sets sets on a real broker: a test's own --set must not name them
BROKER_KEYS = ("kafka.brokers", "kafka.topic_prefix", "kafka.group_id", "kafka.transactional_id")


class Broker:
    """What a test talks to: a mock cluster of its own (kind "mock", prefix "") or topics of
    its own under a unique prefix on a real Kafka cluster (kind "kafka")."""

    def __init__(self, ctx, kind, bootstrap, prefix="", mock=None):
        self.ctx = ctx
        self.kind = kind
        self.bootstrap = bootstrap
        self.prefix = prefix
        self.mock = mock  # the Mock (kind "mock")

    def __repr__(self):
        return "Broker(%s %s%s)" % (self.kind, self.bootstrap,
                                    " prefix %s" % self.prefix if self.prefix else "")

    @property
    def proc(self):
        """The mock cluster's process (None on a real broker)."""
        return self.mock.proc if self.mock else None

    def topic(self, name):
        """The topic's name on this broker: topic("interest-updates")."""
        return self.prefix + name

    def txid(self, txid_suffix=""):
        """The transactional id job_sets(txid_suffix) gives the job; None on the mock, where
        job_sets leaves it to the test (or the job's default) unless a suffix is given."""
        if self.kind == "kafka":
            return "%stx%s" % (self.prefix, txid_suffix)
        return "tx%s" % txid_suffix if txid_suffix else None

    def job_sets(self, txid_suffix=""):
        """["key=value", ...] for the job's --set: on a real broker kafka.brokers,
        kafka.topic_prefix, kafka.group_id (PREFIXgroup) and kafka.transactional_id
        (PREFIXtx + txid_suffix: the same across the restarts of one logical job, another
        suffix for another independent job); on the mock only kafka.brokers (the other keys
        keep the job's defaults or the test's own --set), plus kafka.transactional_id=tx+suffix
        when a suffix is given (two jobs on one mock must not fence each other)."""
        out = ["kafka.brokers=%s" % self.bootstrap]
        if self.kind == "kafka":
            out += ["kafka.topic_prefix=%s" % self.prefix,
                    "kafka.group_id=%sgroup" % self.prefix,
                    "kafka.transactional_id=%s" % self.txid(txid_suffix)]
        elif txid_suffix:
            out.append("kafka.transactional_id=%s" % self.txid(txid_suffix))
        return out

    def via(self, bootstrap):
        """The same topics, group and ids reached through another bootstrap address (a TCP
        proxy in front of the brokers, tests/chaos): a job given it connects there."""
        return Broker(self.ctx, self.kind, bootstrap, prefix=self.prefix, mock=self.mock)

    def command(self, cmd):
        """A mock fault command (Mock.command); a real broker has no such channel."""
        if self.kind != "mock":
            self.ctx.fail("mock-only: fault command %r needs the mock cluster (NF_TEST_BROKER "
                          "names a real one)" % cmd)
        return self.mock.command(cmd)

    def stop(self):
        """Stops the mock cluster (by its pid); nothing on a real broker (the topics stay,
        under a prefix nothing else uses)."""
        if self.mock:
            self.ctx.stop_child(self.mock.proc)


def broker_spec(ctx):
    """("mock", None) or ("kafka", "HOST:PORT[,...]") from NF_TEST_BROKER."""
    v = os.environ.get("NF_TEST_BROKER", "").strip()
    if v in ("", "mock"):
        return "mock", None
    m = re.match(r"^kafka:(\S+)$", v)
    if not m or not all(re.match(r"^\S+:\d+$", hp) for hp in m.group(1).split(",")):
        ctx.fail("NF_TEST_BROKER=%r: want unset, \"\", \"mock\" or kafka:HOST:PORT[,HOST:PORT...]"
                 % v)
    return "kafka", m.group(1)


def mock_broker(ctx, partitions=4, brokers=1):
    """A mock cluster of the test's own, whatever NF_TEST_BROKER says (tests that drive the
    mock's fault injection)."""
    m = Mock(ctx, partitions, brokers)
    return Broker(ctx, "mock", m.bootstrap, mock=m)


def _safe(name):
    return re.sub(r"[^A-Za-z0-9-]+", "-", name).strip("-") or "t"


def real_broker(ctx, bootstrap, name=None, partitions=4):
    """Topics of the test's own on the real Kafka cluster at `bootstrap`: a fresh unique
    prefix "nft-<test>[-<name>]-<pid>-<4 hex>." (name: which of the test's independent
    clusters), and every newsflow topic created under it with `partitions` partitions (the
    broker's default replication)."""
    prefix = "nft-%s-%d-%s." % (_safe(ctx.name + ("-" + name if name else "")), os.getpid(),
                                os.urandom(2).hex())
    out = run_cli(ctx, ["topics", "create", "--set", "kafka.brokers=%s" % bootstrap,
                        "--set", "kafka.topic_prefix=%s" % prefix,
                        "--partitions", str(partitions)], ok_codes=(0, 1))
    got = {}
    for l in out.split("\n"):
        w = l.split()
        if len(w) == 3:
            got[w[0]] = (w[1], w[2])
    want = [prefix + t for t in ALL_TOPICS]
    bad = [(t, got.get(t)) for t in want if got.get(t) != ("created", str(partitions))]
    if bad:
        ctx.fail("newsflow topics create on %s (prefix %s) did not create every topic with %d "
                 "partitions: %r (output: %r)" % (bootstrap, prefix, partitions, bad, out[-800:]))
    # CreateTopics answers before the partitions' leaders serve them ("Not leader for
    # partition" for a moment): wait until every partition's end offset can be read.
    qargs = []
    for t in want:
        for p in range(partitions):
            qargs += ["-t", "%s:%d:-1" % (t, p)]
    last = [""]

    def ready():
        p = ctx.spawn(["kcat", "-b", bootstrap, "-Q", *qargs], stdout=subprocess.PIPE,
                      stderr=subprocess.STDOUT)
        try:
            out, _ = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            last[0] = "kcat -Q hung"
            return False
        last[0] = out.decode("utf-8", "replace").strip()[-300:]
        return p.returncode == 0
    ctx.wait_for("the leaders of the new topics' partitions (prefix %s)" % prefix, ready,
                 timeout=60, interval=0.2, last=lambda: last[0])
    ctx.log("real Kafka at %s: topics created under prefix %s (%d partitions)" %
            (bootstrap, prefix, partitions))
    return Broker(ctx, "kafka", bootstrap, prefix=prefix)


def start_broker(ctx, name=None, partitions=4, brokers=1):
    """The broker NF_TEST_BROKER selects: a fresh mock cluster (`brokers` mock brokers, every
    topic with `partitions` partitions), or a fresh prefix with the topics created on the real
    cluster (`brokers` is the mock's notion: a real cluster has what it has)."""
    kind, boot = broker_spec(ctx)
    if kind == "mock":
        return mock_broker(ctx, partitions, brokers)
    return real_broker(ctx, boot, name=name, partitions=partitions)


def broker_kind(ctx):
    """"mock" or "kafka": what start_broker would start (for a test's own choices)."""
    return broker_spec(ctx)[0]


# ------------------------------------------------------------------------------ kcat

def _endpoint(broker, topic):
    """(bootstrap, topic name, extra kcat -X args) for a Broker or a bare bootstrap string."""
    if isinstance(broker, Broker):
        extra = []
        if broker.kind == "kafka":
            # quicker end-of-partition answers (the default waits 500 ms per empty fetch)
            extra = ["-X", "fetch.wait.max.ms=50"]
        return broker.bootstrap, broker.topic(topic), extra
    return broker, topic, []


def kcat_produce(ctx, broker, topic, lines, tag="p", empty_is_null=False, partition=None):
    """lines: (key, value) pairs; produced with kcat -K '\\t' -l to the topic (base name) of
    the broker (a Broker, or a bare bootstrap string: no prefix). empty_is_null: an empty value
    is produced as a null one (a tombstone; kcat -Z). partition: all of them to that one
    (kcat -p) rather than by key."""
    bootstrap, name, _ = _endpoint(broker, topic)
    extra = ["-Z"] if empty_is_null else []
    if partition is not None:
        extra += ["-p", str(partition)]
    if isinstance(broker, Broker) and broker.kind == "kafka":
        extra += ["-X", "enable.idempotence=true"]  # a retried request cannot duplicate input
    path = ctx.path("produce-%s-%d.tsv" % (tag, int(time.monotonic() * 1e6)))
    with open(path, "w") as f:
        for k, v in lines:
            assert "\t" not in k and "\n" not in k and "\n" not in v
            f.write("%s\t%s\n" % (k, v))
    p = ctx.spawn(["kcat", "-b", bootstrap, "-P", "-t", name, "-K", "\t", *extra, "-l", path],
                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        ctx.fail("kcat produce to %s hung" % name)
    if p.returncode != 0:
        ctx.fail("kcat produce to %s failed (%d): %s" % (name, p.returncode, err.decode()[-500:]))
    os.unlink(path)


def kcat_consume(ctx, broker, topic, fmt="%k\t%h\t%s\n", timeout=120,
                 isolation="read_committed"):
    """The whole topic as text lines, read_committed (on a real broker: up to the last stable
    offset) unless isolation="read_uncommitted" (aborted and open transactions' records too)."""
    bootstrap, name, extra = _endpoint(broker, topic)
    p = ctx.spawn(["kcat", "-b", bootstrap, "-C", "-t", name, "-e", "-q",
                   "-X", "isolation.level=%s" % isolation, *extra, "-f", fmt],
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        ctx.fail("kcat consume of %s did not reach the end in %ds" % (name, timeout))
    if p.returncode != 0:
        ctx.fail("kcat consume of %s failed (%d): %s" % (name, p.returncode, err.decode()[-500:]))
    return [l for l in out.decode("utf-8", "replace").split("\n") if l]


def parse_headers(h):
    out = {}
    for part in h.split(","):
        if "=" in part:
            k, v = part.split("=", 1)
            out[k] = v
    return out


def read_outputs(ctx, broker, topic, isolation="read_committed"):
    """[(key, headers dict, value dict)] of a whole output topic."""
    recs = []
    for line in kcat_consume(ctx, broker, topic, isolation=isolation):
        parts = line.split("\t", 2)
        if len(parts) != 3:
            ctx.fail("unparseable kcat line on %s: %r" % (topic, line[:200]))
        k, h, v = parts
        try:
            val = json.loads(v)
        except ValueError:
            ctx.fail("record on %s is not JSON: %r" % (topic, v[:200]))
        recs.append((k, parse_headers(h), val))
    return recs


OUTPUT_TOPICS = ("articles", "fetch-log", "story-clusters", "trending", "interest-updates",
                 "dead-letters", "breaking-news", "notifications")
INPUT_TOPICS = ("read-events", "sources")
ALL_TOPICS = OUTPUT_TOPICS + INPUT_TOPICS


def read_all_outputs(ctx, broker, isolation="read_committed"):
    """[(key, headers dict, value dict)] of every output topic: an epoch's records (and their
    nf-seq numbers) span all of them."""
    recs = []
    for t in OUTPUT_TOPICS:
        recs += read_outputs(ctx, broker, t, isolation=isolation)
    return recs


def count_topic(ctx, broker, topic, isolation="read_committed"):
    return len(kcat_consume(ctx, broker, topic, fmt="%o\n", isolation=isolation))


# ------------------------------------------------------------------------------ events

class Events:
    """Generates unique read events (distinct article and session per event, so no event-id
    dedup can merge two), some with RFC 3339 ts, and keeps the expected per-user counts."""

    def __init__(self, users=40, prefix="u"):
        self.users = ["%s%03d" % (prefix, i) for i in range(users)]
        self.n = 0
        self.counts = {}
        self.bad = 0

    def make(self, n):
        out = []
        for _ in range(n):
            i = self.n
            self.n += 1
            u = self.users[(i * 7 + i // len(self.users)) % len(self.users)]
            ts = 1700000000000 + i * 1000
            if i % 5 == 0:
                t = time.gmtime(ts // 1000)
                tsv = time.strftime("%Y-%m-%dT%H:%M:%S", t) + ".%03dZ" % (ts % 1000)
            else:
                tsv = ts
            v = {"user_id": u, "article_id": "art-%d" % i, "session_id": "s-%d" % i, "ts": tsv}
            out.append((u, json.dumps(v, separators=(",", ":"))))
            self.counts[u] = self.counts.get(u, 0) + 1
        return out

    def make_bad(self, n):
        """Undecodable records (dead-letters); not counted."""
        out = []
        for _ in range(n):
            self.bad += 1
            out.append(("bad%d" % self.bad, '{"user_id":"bad%d","oops":' % self.bad))
        return out

    @property
    def valid(self):
        return sum(self.counts.values())


class Producer(threading.Thread):
    """Produces read events in waves on a thread of its own until stop(): each wave `per_wave`
    events of ev.make (and one undecodable record every `bad_every` waves, 0 = none), `pause`
    seconds apart. sent keeps every (key, value) produced; error the exception that ended it."""

    def __init__(self, ctx, broker, ev, per_wave=30, pause=0.1, bad_every=0, tag="w"):
        super().__init__(daemon=True)
        self.ctx, self.broker, self.ev = ctx, broker, ev
        self.per_wave, self.pause, self.bad_every, self.tag = per_wave, pause, bad_every, tag
        self.stop_flag = threading.Event()
        self.error = None
        self.waves = 0
        self.sent = []

    def run(self):
        try:
            while not self.stop_flag.is_set():
                recs = self.ev.make(self.per_wave)
                if self.bad_every and self.waves % self.bad_every == 0:
                    recs += self.ev.make_bad(1)
                kcat_produce(self.ctx, self.broker, "read-events", recs,
                             tag="%s%d" % (self.tag, self.waves))
                self.sent.extend(recs)
                self.waves += 1
                time.sleep(self.pause)
        except Exception as e:
            self.error = e

    def stop(self):
        self.stop_flag.set()
        self.join(120)


def expected_from_input(ctx, broker):
    """(valid counts per user, set of "TOPIC/P/O" of the undecodable records) from read-events
    itself (Events.make_bad keys start with "bad"): the expectation when a retried produce may
    have written an input twice."""
    counts, bad_pos = {}, set()
    for line in kcat_consume(ctx, broker, "read-events", fmt="%p\t%o\t%k\n"):
        p, o, k = line.split("\t", 2)
        if k.startswith("bad"):
            bad_pos.add("%s/%s/%s" % (broker.topic("read-events"), p, o))
        else:
            counts[k] = counts.get(k, 0) + 1
    return counts, bad_pos


def check_dead_letters(ctx, broker, bad_pos):
    """dead-letters holds one record per undecodable input (bad_pos: "TOPIC/P/O"), keyed by its
    origin, and nothing else. Returns a short summary."""
    keys = {}
    for k, h, v in read_outputs(ctx, broker, "dead-letters"):
        o = v.get("origin", {})
        want = "%s/%s/%s" % (o.get("topic"), o.get("partition"), o.get("offset"))
        ctx.check(k == want, "dead-letter key %r != its origin %r" % (k, want))
        keys[k] = keys.get(k, 0) + 1
    dup = sorted(k for k, n in keys.items() if n > 1)
    missing, extra = sorted(bad_pos - set(keys)), sorted(set(keys) - bad_pos)
    ctx.check(not dup and not missing and not extra,
              "dead-letters not exactly once: %d duplicated %s, %d missing %s, %d unexpected %s" %
              (len(dup), dup[:5], len(missing), missing[:5], len(extra), extra[:5]))
    return "dead-letters: %d records, every undecodable input exactly once" % len(keys)


def check_interest_updates(ctx, recs, counts, what="interest-updates"):
    """Every (user, version) exactly once over 1..counts[user]; nothing else; every record's
    (nf-writer, nf-epoch, nf-seq) unique. Returns a short summary."""
    seen = {}
    dup = []
    triples = {}
    bad_hdr = []
    for k, h, v in recs:
        u, ver = v.get("user_id"), v.get("version")
        if k != u:
            ctx.fail("%s: key %r != user_id %r" % (what, k, u))
        if not isinstance(ver, int):
            ctx.fail("%s: version is not an int: %r" % (what, v))
        if (u, ver) in seen:
            dup.append((u, ver))
        seen[(u, ver)] = seen.get((u, ver), 0) + 1
        t = (h.get("nf-writer"), h.get("nf-epoch"), h.get("nf-seq"))
        if None in t:
            bad_hdr.append(h)
        triples.setdefault(t, []).append((u, ver))
    if bad_hdr:
        ctx.fail("%s: %d records lack nf-writer/nf-epoch/nf-seq headers, e.g. %r" %
                 (what, len(bad_hdr), bad_hdr[:3]))
    tdup = {t: v for t, v in triples.items() if len(v) > 1}
    missing = [(u, n) for u, c in counts.items() for n in range(1, c + 1) if (u, n) not in seen]
    extra = [(u, ver) for (u, ver) in seen if ver < 1 or ver > counts.get(u, 0)]
    msgs = []
    if dup:
        msgs.append("%d duplicated (user,version), e.g. %s" % (len(dup), sorted(dup)[:8]))
    if tdup:
        msgs.append("%d duplicated (writer,epoch,seq), e.g. %s" %
                    (len(tdup), list(tdup.items())[:4]))
    if missing:
        msgs.append("%d missing (user,version), e.g. %s" % (len(missing), sorted(missing)[:8]))
    if extra:
        msgs.append("%d unexpected (user,version) beyond the events produced, e.g. %s" %
                    (len(extra), sorted(extra)[:8]))
    if msgs:
        ctx.fail("%s not exactly once (%d records, %d expected): %s" %
                 (what, len(recs), sum(counts.values()), "; ".join(msgs)))
    return "%s: %d records, every (user,version) exactly once over %d users" % (
        what, len(recs), len(counts))


# ------------------------------------------------------------------------------ the job

class Job:
    """One `newsflow run` process; its JSON-lines stderr goes to a file and is parsed on
    demand. broker: a Broker (its job_sets(txid_suffix) come first; on a real broker the test's
    own sets must not name those keys) or, as before, a bare bootstrap string. txid: the
    transactional id the job runs with (the nf-writer header of its records)."""

    def __init__(self, ctx, broker, state_dir, sets=(), env=None, args=(), tag="job",
                 interval_ms=200, txid_suffix="", cwd=None):
        self.ctx = ctx
        self.tag = tag
        self.cwd = cwd  # the process's working directory (where a core dump lands), else ours
        self.broker = broker
        self.log_path = ctx.path("%s.err" % tag)
        self.out_path = ctx.path("%s.out" % tag)
        self.expect_exit = False
        if isinstance(broker, Broker):
            bsets = broker.job_sets(txid_suffix)
        else:
            bsets = ["kafka.brokers=%s" % broker]
        if isinstance(broker, Broker) and broker.kind == "kafka":
            clash = [s for s in sets if s.split("=", 1)[0] in BROKER_KEYS]
            if clash:
                ctx.fail("%s: --set %s on a real broker: Broker.job_sets names these (use "
                         "txid_suffix for another transactional id)" % (tag, clash))
        argv = [ctx.nf, "run", *args]
        for s in bsets:
            argv += ["--set", s]
        argv += ["--set", "kafka.assignment=all",
                 "--set", "state.dir=%s" % state_dir,
                 "--set", "checkpoint.interval_ms=%d" % interval_ms,
                 "--set", "sink.spec=none"]
        sets = list(sets)
        if not any(s.startswith("admin.") for s in sets):
            sets.append("admin.enabled=false")
        if not any(s.startswith("interest.unknown_articles") for s in sets):
            # the tests' read events name synthetic articles: every read still counts
            sets.append("interest.unknown_articles=empty")
        if (not any(s.startswith("trending.backfill") for s in sets) and
                knows_key(ctx.nf, "trending.backfill")):  # an older build (test_upgrade) lacks it
            # Events are dated November 2023 (a replay of history): without it, trending would
            # leave them all out as older than its window when written to Kafka
            sets.append("trending.backfill=true")
        if not any(s.startswith("shutdown.timeout_ms") for s in sets):
            # a final epoch may take longer than the default 10 s on a starved machine (11.2 s
            # seen beside stress-ng: exit 1, documented, and the test's SIGTERM wanted 0); the
            # tests of the deadline itself set theirs. Below terminate()'s 60 s.
            sets.append("shutdown.timeout_ms=50000")
        for s in sets:
            argv += ["--set", s]
        e = {k: v for k, v in os.environ.items()
             if not k.startswith("NEWSFLOW_") and k not in ("NF_FAULT", "NF_TEST_SLOW_READS_US")}
        e.update(env or {})
        self.env_desc = " ".join("%s=%s" % kv for kv in (env or {}).items())
        self.argv = argv
        # the last --set wins; "newsflow-0" is the built-in default
        self.txid = "newsflow-0"
        for s in bsets + list(sets):
            if s.startswith("kafka.transactional_id="):
                self.txid = s.split("=", 1)[1]
        self._errf = open(self.log_path, "wb")
        self._outf = open(self.out_path, "wb")
        self.proc = ctx.spawn(argv, env=e, stdin=subprocess.DEVNULL, stdout=self._outf,
                              stderr=self._errf, cwd=cwd)
        self.pid = self.proc.pid
        ctx.jobs.append(self)
        ctx.log("%s started (pid %d) %s %s%s" % (
            tag, self.pid, self.env_desc, " ".join(a for a in args),
            " txid=%s" % self.txid if isinstance(broker, Broker) and broker.kind == "kafka"
            else ""))

    def lines(self):
        out = []
        try:
            with open(self.log_path, "rb") as f:
                data = f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return out
        for l in data.split("\n"):
            if not l.startswith("{"):
                continue
            try:
                out.append(json.loads(l))
            except ValueError:
                pass  # a line being written
        return out

    def msgs(self, msg):
        return [o for o in self.lines() if o.get("msg") == msg]

    def msgs_matching(self, pattern):
        r = re.compile(pattern)
        return [o for o in self.lines() if r.search(o.get("msg", ""))]

    def committed_records(self):
        return sum(o.get("records", 0) for o in self.msgs("epoch.committed"))

    def last_epoch(self):
        e = [o.get("epoch", 0) for o in self.msgs("epoch.committed")]
        return max(e) if e else 0

    def admin_port(self):
        if getattr(self, "_admin_port", None):
            return self._admin_port  # an incarnation keeps its port: its log is read once
        for o in self.msgs("newsflow started"):
            if "admin_port" in o:
                self._admin_port = int(o["admin_port"])
                return self._admin_port
        return None

    def metrics(self, timeout=5):
        port = self.admin_port()
        if not port:
            return None
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port,
                                        timeout=timeout) as r:
                text = r.read().decode()
        except Exception:
            return None
        vals = {}
        for l in text.split("\n"):
            if not l or l.startswith("#"):
                continue
            m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)", l)
            if m:
                name = m.group(1)
                try:
                    vals[name] = vals.get(name, 0.0) + float(m.group(3))
                except ValueError:
                    pass
        return vals

    def rss_kb(self):
        try:
            with open("/proc/%d/status" % self.pid) as f:
                for l in f:
                    if l.startswith("VmRSS:"):
                        return int(l.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            return None
        return None

    def alive(self):
        return self.proc.poll() is None

    def wait_exit(self, timeout=60.0, what="exit"):
        self.expect_exit = True
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.ctx.fail("%s: %s did not happen within %.0fs" % (self.tag, what, timeout), self)

    def terminate(self, timeout=60.0):
        """SIGTERM (final epoch, drain) and the exit code."""
        self.expect_exit = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait_exit(timeout, "exit after SIGTERM")

    def terminate_or_report(self, timeout=30.0):
        """SIGTERM; if the process has not exited after `timeout`, a second SIGTERM (documented:
        "a second signal exits at once"), then SIGKILL. Returns (exit code, problem or None) so
        a test can go on checking the outputs and fail with the hang afterwards."""
        self.expect_exit = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout), None
        except subprocess.TimeoutExpired:
            pass
        stack = ""
        out = self.gdb_stacks(16)
        if out:
            try:
                # every thread's, beside the log: which client or thread a hang waits on
                with open(self.log_path + ".stacks", "w") as sf:
                    sf.write(out)
                main = out.split("\nThread ")[-1]  # gdb lists the main thread (LWP = pid) last
                stack = " | main thread: " + " <- ".join(
                    re.findall(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(\S+)", main, re.M)[:9])
                stack += " | every thread's stack: " + self.log_path + ".stacks"
            except OSError:
                pass
        last = [o.get("msg") for o in self.lines()[-3:]]
        problem = ("%s did not exit within %.0fs of SIGTERM (last log messages: %r)%s" %
                   (self.tag, timeout, last, stack))
        self.ctx.log("HANG: " + problem)
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(15)
            self.ctx.log("a second SIGTERM ended it (exit %s)" % rc)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
            problem += "; a second SIGTERM did not end it either (SIGKILLed)"
        return rc, problem

    def kill(self):
        self.expect_exit = True
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    # lines a stalled job repeats: only the last of them is kept in a tail
    ROUTINE = ('"msg":"progress"', '"msg":"checkpoint.created"')

    def dump_tail(self, f, n=25):
        try:
            with open(self.log_path, "rb") as lf:
                lines = lf.read().decode("utf-8", "replace").split("\n")
        except FileNotFoundError:
            return
        # the last n lines that say something, and the last routine (progress) line
        tail, routine = [], None
        for l in reversed(lines):
            if any(r in l for r in self.ROUTINE):
                routine = routine or l
            elif l.strip():
                tail.append(l)
            if len(tail) >= n:
                break
        tail.reverse()
        if routine:
            tail.append(routine)
        # a start's recovery decides what the run can show: its lines even when not in the tail
        early = [l for l in lines[:-n - 1] if '"msg":"pending epoch' in l][:10]
        if early:
            print("---- recovery lines of %s ----" % self.tag, file=f)
            for l in early:
                print("  " + l[:400], file=f)
        print("---- last lines of %s (%s) ----" % (self.tag, self.log_path), file=f)
        for l in tail:
            print("  " + l[:400], file=f)
        f.flush()

    def gdb_stacks(self, depth):
        """gdb's 'thread apply all bt DEPTH' of the live job, or "" (no gdb, or it failed)."""
        if not shutil.which("gdb"):
            return ""
        try:
            return subprocess.run(["gdb", "-p", str(self.proc.pid), "-batch", "-nx",
                                   "-ex", "thread apply all bt %d" % depth],
                                  capture_output=True, text=True, timeout=60).stdout
        except (subprocess.TimeoutExpired, OSError):
            return ""

    def dump_stacks(self, f):
        """Where every thread of a live job is (gdb, when installed): what a test that timed out
        waiting on a job needs to tell a stall from a slow run."""
        if self.proc.poll() is not None:
            return
        out = self.gdb_stacks(12)
        if not out:
            return
        frames = [l for l in out.split("\n") if l.startswith(("Thread ", "#"))]
        print("---- threads of %s (pid %d), innermost frames ----" % (self.tag, self.proc.pid),
              file=f)
        for l in frames[:400]:
            print("  " + l[:200], file=f)
        f.flush()


def wait_all_consumed(ctx, job, broker, expected, timeout=120.0, topic="interest-updates"):
    """Waits until `topic` (base name) holds at least `expected` committed records."""
    seen = [0]

    def pred():
        seen[0] = count_topic(ctx, broker, topic)
        return seen[0] >= expected

    ctx.wait_for("%d records on %s" % (expected, topic), pred, timeout=timeout, interval=0.5,
                 job=job, last=lambda: "%d records" % seen[0])
    return seen[0]


def drain_and_check(ctx, prod, job, broker, ev, timeout=240.0, what="job", dead_letters=True):
    """The end of a test with a Producer: stops it, waits until `job` has consumed every valid
    event, stops the job (SIGTERM, exit 0), then checks interest-updates exactly once (and
    dead-letters, one per undecodable input). Logs the summaries."""
    prod.stop()
    ctx.check(prod.error is None, "producing read events failed: %r" % prod.error)
    wait_all_consumed(ctx, job, broker, ev.valid, timeout=timeout)
    rc, hang = job.terminate_or_report(60)
    ctx.check(not hang and rc == 0, "%s: exit %s after SIGTERM %s" % (what, rc, hang or ""), job)
    recs = read_outputs(ctx, broker, "interest-updates")
    ctx.log(check_interest_updates(ctx, recs, ev.counts))
    if dead_letters:
        _, bad_pos = expected_from_input(ctx, broker)
        ctx.log(check_dead_letters(ctx, broker, bad_pos))


def run_cli(ctx, args, ok_codes=(0,)):
    """`newsflow ARGS`; stdout text (fails on an exit code not in ok_codes)."""
    p = ctx.spawn([ctx.nf] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        ctx.fail("newsflow %s hung" % " ".join(args))
    if p.returncode not in ok_codes:
        ctx.fail("newsflow %s exited %d: %s" % (" ".join(args), p.returncode,
                                                 (err or out).decode()[-800:]))
    return out.decode()


def read_input_positions(ctx, broker, topic="read-events"):
    """[(partition, offset, key)] of an input topic."""
    out = []
    for line in kcat_consume(ctx, broker, topic, fmt="%p\t%o\t%k\n"):
        p, o, k = line.split("\t", 2)
        out.append((int(p), int(o), k))
    return out


def read_outputs_pos(ctx, broker, topic):
    """[(partition, offset, key, headers, value dict)] of a whole output topic (on a real
    broker, offsets also count the transaction markers kcat does not show)."""
    recs = []
    for line in kcat_consume(ctx, broker, topic, fmt="%p\t%o\t%k\t%h\t%s\n"):
        parts = line.split("\t", 4)
        if len(parts) != 5:
            ctx.fail("unparseable kcat line on %s: %r" % (topic, line[:200]))
        p, o, k, h, v = parts
        try:
            val = json.loads(v)
        except ValueError:
            ctx.fail("record on %s is not JSON: %r" % (topic, v[:200]))
        recs.append((int(p), int(o), k, parse_headers(h), val))
    return recs
