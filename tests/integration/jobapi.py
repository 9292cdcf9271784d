"""jobapi.py — a running job's HTTP API from the tests' side: a GET's status and JSON, one
metric family from /metrics, and events posted through the edge. Shared by feed_model.py,
page_click.py, variants_check.py and breaking_model.py."""
import json
import time
import urllib.error
import urllib.request


def get(base, path, timeout=10):
    """(status, JSON body) of GET base + path; an error status's body too."""
    try:
        with urllib.request.urlopen(base + path, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def metrics(base, name, timeout=10):
    """{frozenset of its labels ('k="v"' strings): value} of one metric family's samples (the
    renderer's label order is no concern)."""
    with urllib.request.urlopen(base + "/metrics", timeout=timeout) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            labels = line[line.index("{") + 1:line.index("}")].split(",") if "{" in line else []
            out[frozenset(labels)] = float(line.split()[-1])
    return out


def post_events(base, events):
    """events through the job's HTTP edge (NDJSON, one request), retried while it is busy."""
    lines = "".join(json.dumps(e) + "\n" for e in events)
    req = urllib.request.Request(f"{base}/v1/events", data=lines.encode(), method="POST",
                                 headers={"Content-Type": "application/x-ndjson"})
    for _ in range(100):
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                if r.status == 202:
                    return
        except urllib.error.HTTPError as e:
            if e.code not in (429, 503):
                raise
        time.sleep(0.2)
    raise SystemExit("the edge did not take the events")
