#!/usr/bin/env python3
"""compare_stream.py — checks a stream peer's outputs equal to newsflow's on the same input
(perf/run_stream.sh, issue 22).

    compare_stream.py DIR NEWSFLOW_JSONL PEER_NAME [--interest-only]

DIR holds the workload (meta.json) and the peer's outputs: PEER-interest-*.jsonl (one line per
interest update: {"user_id","version","vector":{topic: weight},"updated_ms"}) and
PEER-trending-*.jsonl ({"window_end_ms","items":[{"article_id","score"}]}). NEWSFLOW_JSONL is
newsflow's sink file ({"topic","key","value"} lines).

Equal means:
  - interest: the same users, and per user the same last version and updated time, and the
    last vectors equal within 1e-9 per topic (newsflow writes 15 decimals; the peer its doubles);
  - trending: every window newsflow emitted is in the peer's output with the same top-K list
    (article ids in order, scores equal), and the peer has no window newsflow's watermark passed
    that newsflow did not emit (an empty window newsflow emits is absent from the peer, which
    has nothing to key it by: that is equal too).

--interest-only: the peer ran without its trending side (Flink's --interest-only, to see where
its time goes): the interest updates alone are compared.

Prints one JSON line {"bench":"stream.check","peer":..,"equal":bool,...}; exit 0 when equal, 1 when
not (the first differences on stderr), 2 on a usage or file error."""
import datetime
import glob
import json
import math
import sys


def iso_ms(s):
    d = datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
    return int(round(d.timestamp() * 1000))


def last_by_user(lines):
    """user -> (version, updated_ms, vector) of the highest version."""
    out = {}
    for u, ver, upd, vec in lines:
        have = out.get(u)
        if have is None or ver > have[0]:
            out[u] = (ver, upd, vec)
    return out


def read_newsflow(path):
    interest, trending = [], {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            v = r["value"]
            if r["topic"] == "interest-updates":
                interest.append((v["user_id"], v["version"], iso_ms(v["updated_at"]), v["vector"]))
            elif r["topic"] == "trending":
                end = iso_ms(v["window_end"])
                if end in trending:
                    raise SystemExit("newsflow emitted window %d twice" % end)
                trending[end] = [(i["article_id"], i["score"]) for i in v["items"]]
    return last_by_user(interest), trending


def read_peer(d, peer):
    interest, trending = [], {}
    for p in sorted(glob.glob("%s/%s-interest-*.jsonl" % (d, peer))):
        with open(p, encoding="utf-8") as f:
            for line in f:
                v = json.loads(line)
                interest.append((v["user_id"], v["version"], v["updated_ms"], v["vector"]))
    for p in sorted(glob.glob("%s/%s-trending-*.jsonl" % (d, peer))):
        with open(p, encoding="utf-8") as f:
            for line in f:
                v = json.loads(line)
                if v["window_end_ms"] in trending:
                    raise SystemExit("%s emitted window %d twice" % (peer, v["window_end_ms"]))
                trending[v["window_end_ms"]] = [(i["article_id"], i["score"]) for i in v["items"]]
    return last_by_user(interest), trending


def main():
    args = [a for a in sys.argv[1:] if a != "--interest-only"]
    interest_only = len(args) != len(sys.argv) - 1
    if len(args) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    d, nf_path, peer = args
    with open(d + "/meta.json", encoding="utf-8") as f:
        meta = json.load(f)
    nf_int, nf_tr = read_newsflow(nf_path)
    p_int, p_tr = read_peer(d, peer)
    diffs = []

    users_only_nf = set(nf_int) - set(p_int)
    users_only_peer = set(p_int) - set(nf_int)
    for u in sorted(users_only_nf)[:3]:
        diffs.append("user %s: only newsflow has it" % u)
    for u in sorted(users_only_peer)[:3]:
        diffs.append("user %s: only %s has it" % (u, peer))
    worst = 0.0
    for u in nf_int.keys() & p_int.keys():
        (v1, t1, x1), (v2, t2, x2) = nf_int[u], p_int[u]
        if v1 != v2 or t1 != t2:
            diffs.append("user %s: version/updated %d/%d vs %d/%d" % (u, v1, t1, v2, t2))
            continue
        for t in x1.keys() | x2.keys():
            e = abs(x1.get(t, 0.0) - x2.get(t, 0.0))
            worst = max(worst, e)
            if not e <= 1e-9:
                diffs.append("user %s topic %s: %r vs %r" % (u, t, x1.get(t), x2.get(t)))
                break

    compared = 0
    if interest_only:
        nf_tr = {}
    for end, items in sorted(nf_tr.items()):
        if end not in p_tr:
            if items:
                diffs.append("window %d: newsflow has %d items, %s none" % (end, len(items), peer))
            continue
        compared += 1
        if p_tr[end] != items:
            at = next(i for i in range(max(len(items), len(p_tr[end])))
                      if i >= len(items) or i >= len(p_tr[end]) or items[i] != p_tr[end][i])
            diffs.append("window %d: first difference at rank %d: %s vs %s" % (
                end, at, items[at] if at < len(items) else None,
                p_tr[end][at] if at < len(p_tr[end]) else None))
    last_nf = max(nf_tr) if nf_tr else -math.inf
    for end in sorted(p_tr):
        if end not in nf_tr and end <= last_nf:
            diffs.append("window %d: only %s emitted it" % (end, peer))

    equal = not diffs and (compared > 0 or interest_only) and len(nf_int) > 0
    print(json.dumps({
        "bench": "stream.check", "peer": peer, "interest_only": interest_only, "equal": equal, "events": meta["events"],
        "users": len(nf_int), "users_differing": len(users_only_nf) + len(users_only_peer),
        "max_vector_diff": worst, "windows_newsflow": len(nf_tr), "windows_peer": len(p_tr),
        "windows_compared": compared, "differences": len(diffs)}))
    for line in diffs[:20]:
        print("compare_stream: " + line, file=sys.stderr)
    if not equal and not diffs:
        print("compare_stream: nothing to compare (no users or no common window)", file=sys.stderr)
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
