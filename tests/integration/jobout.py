"""jobout.py — the job's committed output records as its default sink prints them on stdout
(one {"topic", "key", "value"} JSON object per line; log lines and a half-written last line are
skipped). Shared by query_api.py, feed_model.py, page_check.py and breaking_model.py."""
import json


def keyed_records(path):
    """{topic: [(key, value), ...]} in the order the job committed them."""
    out = {}
    with open(path) as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                out.setdefault(rec.get("topic"), []).append((rec.get("key"), rec.get("value")))
    return out


def records(path):
    """{topic: [value, ...]} in the order the job committed them."""
    return {t: [v for _, v in kv] for t, kv in keyed_records(path).items()}


def story_find(recs):
    """The story of each article as the committed story-clusters records leave it: a function
    article id -> its story's id (union-find over new / joined / merged, the root being the
    cluster id; an id of no record is its own story)."""
    parent = {}

    def find(x):
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for c in recs.get("story-clusters", []):
        root, art = c["cluster_id"], c["article_id"]
        parent.setdefault(root, root)
        for m in c.get("merged_from", []):  # the clusters that disappear under root
            r = find(m)
            if r != root:
                parent[r] = root
        if art != root:
            parent[art] = root
    return find
