"""jobout.py — the job's committed output records as its default sink prints them on stdout
(one {"topic", "key", "value"} JSON object per line; log lines and a half-written last line are
skipped). Shared by query_api.py and feed_model.py."""
import json


def records(path):
    """{topic: [value, ...]} in the order the job committed them."""
    out = {}
    with open(path) as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                out.setdefault(rec.get("topic"), []).append(rec.get("value"))
    return out
