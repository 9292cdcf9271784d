"""follows.py — for perf/run_query.sh --follows F: every reader PREFIX0 .. PREFIX(USERS-1) follows
F random topics of the taxonomy and mutes one other (read-events kinds follow and mute, through
the job's HTTP edge, NDJSON batches of 300: under edge.max_body_bytes), and with M (--mute-sources)
mutes M random sources of the job's (GET /v1/sources; kind mute_source), so that every feed the
benchmark asks for is ranked with follows and mutes. Prints the number of events posted.
Usage: python3 follows.py BASE USERS F PREFIX [M]"""
import json
import os
import random
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "integration"))
from feed_model import post_events  # noqa: E402


def main(base, users, f, prefix, m="0"):
    with urllib.request.urlopen(base + "/v1/topics", timeout=10) as r:
        topics = json.loads(r.read())["topics"]
    sources = []
    if int(m):
        with urllib.request.urlopen(base + "/v1/sources", timeout=10) as r:
            sources = [s["source_id"] for s in json.loads(r.read())["sources"]]
    rng = random.Random(45)
    ts = int(time.time() * 1000)
    lines, n = [], 0
    for u in range(int(users)):
        chosen = rng.sample(topics, int(f) + 1)
        for i, t in enumerate(chosen):
            kind = "mute" if i == int(f) else "follow"
            lines.append({"user_id": f"{prefix}{u}", "kind": kind, "topic": t, "ts": ts})
        for s in rng.sample(sources, min(int(m), len(sources))):
            lines.append({"user_id": f"{prefix}{u}", "kind": "mute_source", "source": s, "ts": ts})
        if len(lines) >= 300:
            post_events(base, lines)
            n += len(lines)
            lines = []
    if lines:
        post_events(base, lines)
        n += len(lines)
    print(n)


if __name__ == "__main__":
    main(*sys.argv[1:6])
