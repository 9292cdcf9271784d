"""kcluster.py — an Apache Kafka cluster of a test's own (scripts/kafka.sh), for the tests that
kill, stop and freeze brokers (test_broker_faults*.sh) and so cannot share ctest's broker.

The cluster lives in NF_TEST_KAFKA_ROOT/<name>-<pid> (ctest sets that root inside the build
directory, so that .ci/run can stop anything a killed test left behind) or in the test's temp
dir. Its brokers run in their own session (kafka.sh setsid's them), so they are not the test's
children: Cluster stops them by pid (`kafka.sh stop --dir`) when the test ends, on failure and on
SIGTERM/SIGINT too. Python 3 standard library, kcat and scripts/kafka.sh.
"""
import json
import os
import random
import signal
import socket
import subprocess
import time


def _free(port):
    s = socket.socket()
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def _port_base(nodes, extra=()):
    """A base port with base..base+nodes-1 (clients), base+100.. (controllers) and, for each
    offset in `extra` (at most 400), base+offset.. free; below both the ctest fixtures' brokers
    (31092 and up, tests/CMakeLists.txt) and Linux's ephemeral range (32768-), where a client
    socket could take the port before the broker binds it."""
    rng = random.Random()  # not the test's seeded generator: ports are not part of a replay
    for _ in range(200):
        base = rng.randrange(20000, 30500, 10)
        if all(_free(base + off + i) for off in (0, 100) + tuple(extra) for i in range(nodes)):
            return base
    raise RuntimeError("no free ports for a %d-node Kafka cluster" % nodes)


class Cluster:
    """listeners: names (capitals) of extra client listeners per node (kafka.sh --listener):
    listener i (from 1) of node n listens on base+10*i+n-1 and is advertised as
    base+200+10*i+n-1, where a proxy of the test's may listen (listener_ports). Ports base+300..
    are free for the test's own use (proxy_api_port)."""

    def __init__(self, ctx, name, nodes=3, listeners=()):
        self.ctx = ctx
        self.nodes = nodes
        self.listeners = list(listeners)
        self.script = os.path.join(os.path.abspath(ctx.srcdir), "scripts", "kafka.sh")
        root = os.environ.get("NF_TEST_KAFKA_ROOT") or ctx.tmp
        os.makedirs(root, exist_ok=True)
        self.dir = os.path.join(root, "%s-%d" % (name, os.getpid()))
        extra = [off for i in range(1, len(self.listeners) + 1) for off in (10 * i, 200 + 10 * i)]
        self.port = _port_base(nodes, extra + [300])
        self._stopped = False
        orig = ctx.cleanup

        def cleanup():  # brokers first: the test's temp dir may hold their data
            self.stop()
            orig()
        ctx.cleanup = cleanup
        t0 = time.monotonic()
        largs = []
        for l in self.listeners:
            listen, adv = self.listener_ports(l)
            largs += ["--listener", "%s:%d:%d" % (l, listen[0], adv[0])]
        out = self._run("start", "--nodes", str(nodes), "--port", str(self.port), "--fresh",
                        *largs, timeout=600)
        self.bootstrap = out.strip().split("\n")[-1]
        ctx.log("Kafka cluster: %d nodes at %s (%s), ready in %.1fs" %
                (nodes, self.bootstrap, self.dir, time.monotonic() - t0))

    def listener_ports(self, name):
        """([port of node 1, 2, ...] the extra listener `name` listens on, [ports it is
        advertised at])."""
        i = self.listeners.index(name) + 1
        return ([self.port + 10 * i + n for n in range(self.nodes)],
                [self.port + 200 + 10 * i + n for n in range(self.nodes)])

    def proxy_api_port(self):
        """A port kept free next to the cluster's (a proxy's control API)."""
        return self.port + 300

    def _run(self, cmd, *args, timeout=120):
        """`kafka.sh CMD ARGS --dir DIR`; its stdout (fails the test on an error)."""
        argv = ["bash", self.script, cmd] + list(args) + ["--dir", self.dir]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            self.ctx.fail("kafka.sh %s %s failed (%d): %s" % (cmd, " ".join(args), p.returncode,
                                                              (p.stderr or p.stdout)[-800:]))
        return p.stdout

    def stop(self):
        """Every node, by pid (SIGTERM, then SIGKILL after 30 s). Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        try:
            subprocess.run(["bash", self.script, "stop", "--dir", self.dir], timeout=120,
                           capture_output=True)
        except Exception as e:  # cleanup must go on
            print("kcluster: stopping %s: %s" % (self.dir, e), flush=True)

    def pid(self, node):
        return int(self._run("pid", str(node)).strip())

    def signal(self, node, sig):
        pid = self.pid(node)
        os.kill(pid, sig)
        self.ctx.log("broker %d (pid %d) <- %s" % (node, pid, signal.Signals(sig).name))
        return pid

    def kill9(self, node):
        """SIGKILL one node and wait until it is gone."""
        pid = self.signal(node, signal.SIGKILL)
        self.ctx.wait_for("broker %d to die" % node, lambda: not os.path.exists("/proc/%d" % pid),
                          timeout=30)

    def start_node(self, node):
        self._run("start-node", str(node))
        self.wait_brokers(self.nodes, "broker %d back" % node)

    def stop_all(self):
        self._run("stop", timeout=180)

    def start_all(self):
        self._stopped = False
        self._run("start", timeout=600)

    def metadata(self, topic=None):
        argv = ["kcat", "-b", self.bootstrap, "-L", "-J", "-m", "5"] + (["-t", topic] if topic
                                                                       else [])
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            return None
        try:
            return json.loads(p.stdout)
        except ValueError:
            return None

    def wait_brokers(self, n, what):
        seen = [0]

        def pred():
            md = self.metadata()
            seen[0] = len(md["brokers"]) if md else 0
            return seen[0] >= n
        self.ctx.wait_for(what, pred, timeout=180, interval=0.5,
                          last=lambda: "%d brokers in the metadata" % seen[0])

    def _partition(self, topic, partition):
        """The partition's metadata (kcat -L -J: leader, replicas), or None."""
        md = self.metadata(topic)
        for t in (md or {}).get("topics", []):
            for p in t.get("partitions", []):
                if t.get("topic") == topic and p.get("partition") == partition:
                    return p
        return None

    def leader(self, topic, partition):
        p = self._partition(topic, partition)
        if p is None:
            self.ctx.fail("no leader known for %s [%d]" % (topic, partition))
        return p.get("leader")

    def _tool(self, cls, *args, ok=lambda out: True):
        """A Kafka tool class run against the cluster (kafka.sh tool); its stdout. Fails the
        test on an error or when ok(stdout) is false."""
        env = dict(os.environ, NF_KAFKA_TOOL_HEAP="256")
        p = subprocess.run(["bash", self.script, "tool", cls, "--bootstrap-server",
                            self.bootstrap] + list(args), capture_output=True, text=True,
                           timeout=120, env=env)
        if p.returncode != 0 or not ok(p.stdout):
            self.ctx.fail("%s %s: %s" % (cls.rsplit(".", 1)[-1], " ".join(args),
                                         (p.stderr or p.stdout)[-500:]))
        return p.stdout

    def move_leader(self, topic, partition):
        """Moves the partition's leadership to another of its replicas without stopping any
        broker (replicas reordered, then a preferred-leader election); (old, new) leader."""
        p = self._partition(topic, partition)
        if p is None:
            self.ctx.fail("no metadata for %s [%d]" % (topic, partition))
        old = p.get("leader")
        ids = [r.get("id") for r in p.get("replicas", [])]
        order = [i for i in ids if i != old] + [old]
        plan = self.ctx.path("move-%s-%d.json" % (topic, partition))
        with open(plan, "w") as f:
            json.dump({"version": 1, "partitions": [
                {"topic": topic, "partition": partition, "replicas": order}]}, f)
        self._tool("org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
                   "--reassignment-json-file", plan, "--execute")
        seen = [old]

        def moved():
            self._tool("org.apache.kafka.tools.LeaderElectionCommand", "--election-type",
                       "PREFERRED", "--topic", topic, "--partition", str(partition))
            seen[0] = self.leader(topic, partition)
            return seen[0] == order[0]
        self.ctx.wait_for("%s [%d] led by broker %d" % (topic, partition, order[0]), moved,
                          timeout=300, interval=1, last=lambda: "leader %s" % seen[0])
        return old, order[0]

    def txn_coordinator(self, txid):
        """The broker coordinating transactional id txid (kafka-transactions describe)."""
        def rows(out):
            return [l.split() for l in out.strip().split("\n") if l.strip()]
        out = self._tool("org.apache.kafka.tools.TransactionsCommand", "describe",
                         "--transactional-id", txid,
                         ok=lambda o: len(rows(o)) >= 2 and rows(o)[0][0] == "CoordinatorId")
        return int(rows(out)[1][0])
