#!/usr/bin/env python3
"""run_job.py — the newsflow job (`newsflow run`) end to end through a broker, catching up on read
events produced to its read-events topic beforehand: newsflow's side of perf/run_stream.sh's
broker_eos pair, against Kafka Streams (exactly_once_v2) on the same events and broker.

    run_job.py --newsflow BIN --bootstrap HOST:PORT --prefix P --shards S --state DIR
               --sink FILE --taxonomy FILE --admin-port N --events N --expect-outputs M
               [--interval-ms MS] [--log FILE] [--timeout S] [--set K=V]...

The job runs as in production (kafka.assignment=all, exactly-once: each epoch's outputs and input
offsets in one Kafka transaction, its state in RocksDB under --state), with what makes its
outputs those of bench_readpath --dump (perf/README "Stream peer"): the topic names of
--taxonomy, exact trending counts, trending.backfill (the events are dated months ago), and its
committed outputs also written to --sink (sink.spec jsonl, the epoch's tee) for
compare_stream.py. The articles' topic vectors must be in --state already (bench_readpath
--seed-topics): nothing is crawled.

The clock: from the first /metrics poll (every 10 ms until then, then every 100 ms) that shows E0 > 0 read events taken
(newsflow_read_events_total, which counts those the event-id dedup passed, plus
newsflow_read_event_duplicates_total; the N - E0 events after that poll are the timed ones) to
the first poll that shows all N taken and --expect-outputs outputs committed
(newsflow_epoch_outputs_total: committed = durable, and visible read_committed).
It therefore includes the final epoch's commit, and the wait for it: up to one --interval-ms after
the last output. "processed_seconds" stops instead at the first poll that shows all N taken and
--expect-outputs outputs made (committed or not), as Kafka Streams' clock stops (at its last end
marker through its trending task, before that task's commit). CPU: the job process's (user + system, /proc/PID/stat) over the same polls.
Start-up (connecting, recovering the state) is outside; then the job is stopped (SIGTERM).

Prints one JSON line {"bench":"stream.newsflow_job","shards":S,"events":N,"seconds":T,
"events_per_s":R,"cpu_ns_per_event":C,...}; exit 1 if the job failed or did not finish."""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request


def opts(argv):
    o = {"interval-ms": "1000", "log": "/dev/null", "timeout": "1800", "set": []}
    i = 0
    while i < len(argv):
        k = argv[i][2:] if argv[i].startswith("--") else None
        if k is None or i + 1 >= len(argv):
            raise SystemExit(__doc__)
        if k == "set":
            o["set"].append(argv[i + 1])
        else:
            o[k] = argv[i + 1]
        i += 2
    for k in ("newsflow", "bootstrap", "prefix", "shards", "state", "sink", "taxonomy",
              "admin-port", "events", "expect-outputs"):
        if k not in o:
            raise SystemExit("run_job.py: --%s is required\n%s" % (k, __doc__))
    return o


def metrics(port):
    """{name: value} of the job's counters (summed over labels); None if not answering."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port, timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    out = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        name, _, value = line.rpartition(" ")
        name = name.split("{", 1)[0]
        try:
            out[name] = out.get(name, 0.0) + float(value)
        except ValueError:
            pass
    return out


def taken(m):
    """Read events the job has taken: valid ones decoded (newsflow_read_events_total counts
    those the event-id dedup passed) and the repeats it dropped."""
    return m.get("newsflow_read_events_total", 0) + m.get("newsflow_read_event_duplicates_total", 0)


def emitted(m):
    """Outputs the job has made (committed or not): interest updates and trending lists."""
    return m.get("newsflow_interest_updates_total", 0) + m.get("newsflow_trending_windows_total", 0)


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def command(o):
    sets = ["kafka.brokers=" + o["bootstrap"], "kafka.topic_prefix=" + o["prefix"],
            "kafka.group_id=%sgroup" % o["prefix"], "kafka.transactional_id=%stx" % o["prefix"],
            "kafka.assignment=all", "kafka.exactly_once=true", "runtime.shards=" + o["shards"],
            "state.dir=" + o["state"], "sink.spec=jsonl:" + o["sink"],
            "checkpoint.interval_ms=" + o["interval-ms"], "classify.taxonomy=" + o["taxonomy"],
            "trending.exact=true", "trending.backfill=true", "admin.enabled=true",
            "admin.port=" + o["admin-port"], "search.enabled=false", "edge.enabled=false",
            "demo.read_events_per_s=0"] + o["set"]
    cmd = [o["newsflow"], "run"]
    for s in sets:
        cmd += ["--set", s]
    return cmd


def main():
    o = opts(sys.argv[1:])
    n, want = int(o["events"]), int(o["expect-outputs"])
    log = open(o["log"], "w")
    t_launch = time.monotonic()
    job = subprocess.Popen(command(o), stdout=log, stderr=log)
    deadline = t_launch + float(o["timeout"])
    t0 = c0 = t1 = c1 = tp = None
    m = {}
    while time.monotonic() < deadline and job.poll() is None:
        m = metrics(o["admin-port"]) or {}
        now = time.monotonic()
        if t0 is None and taken(m) > 0:
            t0, c0, e0 = now, cpu_s(job.pid), taken(m)
        if t0 is not None and tp is None and taken(m) >= n and emitted(m) >= want:
            tp = now
        if (t0 is not None and taken(m) >= n
                and m.get("newsflow_epoch_outputs_total", 0) >= want):
            t1, c1 = now, cpu_s(job.pid)
            break
        time.sleep(0.1 if t0 is not None else 0.01)  # the start to 10 ms
    if job.poll() is None:
        job.send_signal(signal.SIGTERM)
        try:
            job.wait(120)
        except subprocess.TimeoutExpired:
            job.kill()
            job.wait()
    if t1 is None:
        print("run_job.py: the job did not finish (exit %s; %d of %d events, %d of %d outputs "
              "committed; log %s)" % (job.returncode, taken(m), n,
                                     m.get("newsflow_epoch_outputs_total", 0), want, o["log"]),
              file=sys.stderr)
        return 1
    if n - e0 <= 0 or t1 <= t0:
        print("run_job.py: every event was taken before the first poll: too few to time",
              file=sys.stderr)
        return 1
    if job.returncode != 0:
        print("run_job.py: the job exited %d after the run (log %s)" % (job.returncode, o["log"]),
              file=sys.stderr)
        return 1
    secs, timed = t1 - t0, n - e0  # the events taken before the first poll are not timed
    print(json.dumps({
        "bench": "stream.newsflow_job", "shards": int(o["shards"]), "events": n,
        "timed_events": int(timed), "seconds": round(secs, 3), "events_per_s": round(timed / secs),
        "cpu_ns_per_event": round((c1 - c0) * 1e9 / timed), "startup_s": round(t0 - t_launch, 3),
        "processed_seconds": round((tp or t1) - t0, 3),
        "outputs": int(m.get("newsflow_epoch_outputs_total", 0)),
        "epochs": int(m.get("newsflow_epochs_committed_total", 0)),
        "interval_ms": int(o["interval-ms"]), "guarantee": "exactly_once (Kafka transactions)",
        "state": "rocksdb", "sets": o["set"]}, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
