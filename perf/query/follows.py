"""follows.py — for perf/run_query.sh --follows F: every reader PREFIX0 .. PREFIX(USERS-1) follows
F random topics of the taxonomy and mutes one other (read-events kinds follow and mute, through
the job's HTTP edge, NDJSON batches of 300: under edge.max_body_bytes), so that every feed the benchmark asks for is ranked
with follows and mutes. Prints the number of events posted.
Usage: python3 follows.py BASE USERS F PREFIX"""
import json
import random
import sys
import time
import urllib.error
import urllib.request


def post(base, lines):
    req = urllib.request.Request(base + "/v1/events", data="".join(lines).encode(), method="POST",
                                 headers={"Content-Type": "application/x-ndjson"})
    for _ in range(300):
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                if r.status == 202:
                    return
        except urllib.error.HTTPError as e:
            if e.code not in (429, 503):
                raise
        time.sleep(0.1)
    raise SystemExit("follows.py: the edge did not take the events")


def main(base, users, f, prefix):
    with urllib.request.urlopen(base + "/v1/topics", timeout=10) as r:
        topics = json.loads(r.read())["topics"]
    rng = random.Random(45)
    ts = int(time.time() * 1000)
    lines, n = [], 0
    for u in range(int(users)):
        chosen = rng.sample(topics, int(f) + 1)
        for i, t in enumerate(chosen):
            kind = "mute" if i == int(f) else "follow"
            lines.append(json.dumps({"user_id": f"{prefix}{u}", "kind": kind, "topic": t,
                                     "ts": ts}) + "\n")
        if len(lines) >= 300:
            post(base, lines)
            n += len(lines)
            lines = []
    if lines:
        post(base, lines)
        n += len(lines)
    print(n)


if __name__ == "__main__":
    main(*sys.argv[1:5])
