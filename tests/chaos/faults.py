"""faults.py — the chaos test's means of harm (chaos.py), each with its way back:

  Disk       a process's state directory on an ext4 file system of its own (a sparse image on
             a loop device, mounted by the test): full = a ballast file taking every free block;
             slow = a throttle of the loop device's reads and writes (cgroup v1 blkio, root
             group: every writer's I/O to that device, the kernel's writeback included).
  Proxies    Toxiproxy (scripts/toxiproxy.sh) between each process and each broker: delay
             (latency toxic), a narrow pipe (bandwidth toxic), a partition (a latency of an
             hour: bytes held, none lost, new connections accepted and held the same way) of
             all brokers or one, and a cut (proxies disabled: connections closed, new ones
             refused).
  CpuHog     two busy processes, one per core.

Why a proxy: this kernel has no netem (no tc qdisc to delay or drop), and a Kafka client
learns every broker's address from the metadata. Each broker therefore has one extra listener
per newsflow process (scripts/kafka.sh --listener, kcluster.Cluster(listeners=...)) advertised
at the address of that process's proxy to that broker: a process bootstrapped through its
proxies is told its proxies' addresses for every broker and never reaches a broker any other
way. Everything stays on loopback; the test's own kcat reads use the plain listener.

Why not device-mapper's delay target for the slow disk: this kernel has no device-mapper
(`dmsetup targets`: "/dev/mapper/control: open failed: No such device"). The blkio throttle is
the kernel's own and needs no module; measured here, 20 write IOPS make 64 synced 4 KiB writes
take 20 s instead of 0.8 s.

Every mount lives in the test's own mount namespace (chaos.py unshares one at start), so the
kernel unmounts them, and frees their loop devices (mount -o loop sets autoclear), when the
test's processes are gone, even after a SIGKILL. A throttle rule is removed at heal and at
cleanup; rules left by a killed run on loop devices no longer attached are removed at the next
start (clear_stale_throttles). Python 3 standard library; needs root.
"""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

BLKIO = "/sys/fs/cgroup/blkio"
THROTTLES = ("blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device",
             "blkio.throttle.read_iops_device", "blkio.throttle.write_iops_device")
CLONE_NEWNS = 0x00020000


def private_mount_namespace():
    """Moves this (still single-threaded) process into a mount namespace of its own whose mounts
    do not propagate to the machine's. Returns an error message, or None."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        return "unshare(CLONE_NEWNS): %s" % os.strerror(ctypes.get_errno())
    p = subprocess.run(["mount", "--make-rprivate", "/"], capture_output=True, text=True)
    if p.returncode != 0:
        return "mount --make-rprivate /: %s" % p.stderr.strip()
    return None


def _run(ctx, argv, what):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        ctx.fail("%s: %s exited %d: %s" % (what, " ".join(argv), p.returncode,
                                            (p.stderr or p.stdout).strip()[-400:]))
    return p.stdout


def throttle_available():
    """None if blkio throttles can be set, else why not."""
    if not all(os.path.exists(os.path.join(BLKIO, f)) for f in THROTTLES):
        return "no cgroup v1 blkio throttle files in %s" % BLKIO
    return None


def _set_throttle(devno, values):
    for f, v in zip(THROTTLES, values):
        with open(os.path.join(BLKIO, f), "w") as fh:
            fh.write("%s %d\n" % (devno, v))


def clear_stale_throttles():
    """Removes throttle rules of loop devices that no longer back anything (a killed run's)."""
    if throttle_available():
        return []
    attached = set()
    for l in subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout.split("\n"):
        if l.startswith("/dev/loop"):
            st = os.stat(l.split(":", 1)[0])
            attached.add("%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev)))
    stale = set()
    for f in THROTTLES:
        with open(os.path.join(BLKIO, f)) as fh:
            for l in fh:
                w = l.split()
                if len(w) == 2 and w[0].startswith("7:") and w[0] not in attached:
                    stale.add(w[0])
    for d in stale:
        _set_throttle(d, (0, 0, 0, 0))
    return sorted(stale)


class Disk:
    """An ext4 file system of `size_mb` (sparse image, no reserved blocks) mounted on
    ctx.path(name): fill()/unfill(), slow()/unslow(), cleanup() (at the test's end)."""

    def __init__(self, ctx, name, size_mb=1024):
        self.ctx, self.name = ctx, name
        self.img = ctx.path("%s.img" % name)
        self.mnt = ctx.path(name)
        os.makedirs(self.mnt)
        with open(self.img, "wb") as f:
            f.truncate(size_mb << 20)
        _run(ctx, ["mkfs.ext4", "-q", "-F", "-m", "0", self.img], "mkfs %s" % name)
        _run(ctx, ["mount", "-o", "loop", self.img, self.mnt], "mount %s" % name)
        self.dev = _run(ctx, ["findmnt", "-n", "-o", "SOURCE", self.mnt], "findmnt").strip()
        st = os.stat(self.dev)
        self.devno = "%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))
        self.ballast = os.path.join(self.mnt, "chaos-ballast")
        self.throttled = False
        ctx.log("%s: ext4 of %d MiB on %s (%s) at %s" % (name, size_mb, self.dev, self.devno,
                                                         self.mnt))

    def free_bytes(self):
        st = os.statvfs(self.mnt)
        return st.f_bavail * st.f_frsize

    def fill(self):
        """Takes every free block: a preallocated ballast, then 64 KiB writes until ENOSPC (the
        allocation leaves a little for its own metadata). Returns the bytes taken."""
        taken = 0
        with open(self.ballast, "ab") as f:
            want = self.free_bytes() - (8 << 20)  # the rest is written
            if want > 0:
                try:
                    os.posix_fallocate(f.fileno(), 0, want)
                    taken = want
                    f.seek(0, os.SEEK_END)
                except OSError:
                    pass
            chunk = b"\0" * 65536
            while True:
                try:
                    n = os.write(f.fileno(), chunk)
                    taken += n
                    if n == 0:
                        break
                except OSError:
                    break
            try:
                os.fsync(f.fileno())
            except OSError:
                pass
        return taken

    def unfill(self):
        try:
            os.unlink(self.ballast)
        except FileNotFoundError:
            pass

    def slow(self, bps, iops):
        _set_throttle(self.devno, (bps, bps, iops, iops))
        self.throttled = True

    def unslow(self):
        if self.throttled:
            _set_throttle(self.devno, (0, 0, 0, 0))
            self.throttled = False

    def cleanup(self):
        """Heals and unmounts (the loop device goes with the mount)."""
        try:
            self.unslow()
        except OSError as e:
            print("faults: removing the throttle of %s: %s" % (self.dev, e), flush=True)
        self.unfill()
        p = subprocess.run(["umount", self.mnt], capture_output=True, text=True)
        if p.returncode != 0:  # still busy: detach it, the kernel finishes when it can
            subprocess.run(["umount", "-l", self.mnt], capture_output=True)


class Proxies:
    """One Toxiproxy server: a proxy per (process, broker) listening at the address that
    process's listener advertises for the broker and forwarding to the broker's listener."""

    def __init__(self, ctx, cluster, members, seed):
        self.ctx = ctx
        self.members = list(members)
        self.api = "http://127.0.0.1:%d" % cluster.proxy_api_port()
        bin_ = _run(ctx, ["bash", os.path.join(ctx.srcdir, "scripts", "toxiproxy.sh"), "path"],
                    "toxiproxy").strip().split("\n")[-1]
        self.bootstrap = {}
        self.names = {}
        conf = []
        for m in self.members:
            listen, adv = cluster.listener_ports(m.upper())
            self.names[m] = []
            for node, (up, at) in enumerate(zip(listen, adv), 1):
                n = "%s-b%d" % (m, node)
                conf.append({"name": n, "listen": "127.0.0.1:%d" % at,
                             "upstream": "127.0.0.1:%d" % up, "enabled": True})
                self.names[m].append(n)
            self.bootstrap[m] = ",".join("127.0.0.1:%d" % p for p in adv)
        cfg = ctx.path("toxiproxy.json")
        with open(cfg, "w") as f:
            json.dump(conf, f)
        self.log_path = ctx.path("toxiproxy.log")
        self._logf = open(self.log_path, "wb")
        self.argv = [bin_, "-host", "127.0.0.1", "-port", self.api.rsplit(":", 1)[1], "-config",
                     cfg, "-seed", str(seed)]
        self.nproxies = len(conf)
        self.restarts = 0
        self._start()
        ctx.log("Toxiproxy at %s: %d proxies (%s)" % (self.api, len(conf), ", ".join(
            "%s via %s" % (m, self.bootstrap[m]) for m in self.members)))

    def _start(self):
        self.proc = self.ctx.spawn(self.argv, stdout=self._logf, stderr=subprocess.STDOUT)
        self.ctx.wait_for("Toxiproxy's API and its %d proxies" % self.nproxies,
                          lambda: len(self._call("GET", "/proxies") or {}) == self.nproxies,
                          timeout=60)

    def _call(self, method, path, body=None, fail=True):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.api + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                txt = r.read().decode()
                return json.loads(txt) if txt.strip() else {}
        except (urllib.error.URLError, OSError, ValueError) as e:
            if method == "GET" or not fail:
                return None
            self.ctx.fail("Toxiproxy %s %s: %s" % (method, path, e))

    def proxies(self, member, node=None):
        """The proxies of a member (to every broker, or to broker `node` alone)."""
        return [n for i, n in enumerate(self.names[member], 1) if node in (None, i)]

    def toxic(self, member, kind, attributes, node=None):
        """Adds a toxic of `kind` both ways on the member's proxies."""
        for n in self.proxies(member, node):
            for stream in ("upstream", "downstream"):
                self._call("POST", "/proxies/%s/toxics" % n,
                           {"name": "chaos-%s-%s" % (kind, stream), "type": kind,
                            "stream": stream, "toxicity": 1.0, "attributes": attributes})

    def enable(self, member, on):
        for n in self.proxies(member):
            self._call("POST", "/proxies/%s" % n, {"enabled": on})

    def reset(self):
        """Every proxy enabled, every toxic removed. Toxiproxy 2.5 can hang removing a toxic from
        a link whose client went away (RemoveToxic waits on the broken link): then the server is
        restarted, which drops every proxied connection at once, as a cut does (the processes
        reconnect; the faults the test counts are unchanged)."""
        if self._call("POST", "/reset", {}, fail=False) is not None:
            return
        self.restarts += 1
        self.ctx.log("Toxiproxy's reset hung: restarting it (connections through it drop)")
        self.ctx.stop_child(self.proc, sig=signal.SIGKILL, wait=10)
        self._start()


class CpuHog:
    """Two busy processes (one per core of this machine), at the job's own priority."""

    def __init__(self, ctx, n=2):
        self.ctx = ctx
        self.procs = [ctx.spawn([sys.executable, "-c", "while True: pass"],
                                stdin=subprocess.DEVNULL) for _ in range(n)]

    def stop(self):
        for p in self.procs:
            self.ctx.stop_child(p, wait=10)


def isr_full(cluster):
    """True when every partition of every topic has all its replicas in sync (a broker killed
    then may only cost one replica of min.insync.replicas' two), else a description."""
    md = cluster.metadata()
    if not md:
        return "no metadata"
    short = []
    for t in md.get("topics", []):
        for p in t.get("partitions", []):
            if len(p.get("isrs", [])) < len(p.get("replicas", [])) or p.get("leader", -1) < 0:
                short.append("%s[%s]" % (t.get("topic"), p.get("partition")))
    return True if not short else "%d partitions short of replicas, e.g. %s" % (
        len(short), short[:3])


def wait_gone(pid, timeout=30.0):
    t = time.monotonic() + timeout
    while os.path.exists("/proc/%d" % pid) and time.monotonic() < t:
        time.sleep(0.05)
    return not os.path.exists("/proc/%d" % pid)
