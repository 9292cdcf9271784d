"""breaking_model.py — an independent model of breaking news (src/engine/breaking.h) over the job's
committed records, for test_breaking.sh and tests/recovery/acc_analytics.py.

  python3 breaking_model.py check JOB_STDOUT MULTIPLE MIN_READS MIN_PEERS COOLDOWN_S [MIN_NEWS]
  python3 breaking_model.py burst BASE JOB_STDOUT N [STORY | not:STORY,...]
                                                        N reads of one trending story's lead
                                                        through the edge, from N readers (new
                                                        ones each time); prints the story's id

The rule, from the `trending` records alone (each entry's reads and `topic`, as the merger judged
it): in each window, an entry with a topic breaks when at least MIN_PEERS other entries of its
topic are in the window, its reads are at least MIN_READS and at least MULTIPLE times the median
of theirs, and its story did not break in a window that ended less than COOLDOWN_S before. The
windows are taken in order of their end. `check` compares the `breaking-news` records with the
model's, field for field (by window, then story), and fails on any story announced twice within its cooldown
(and on fewer than MIN_NEWS records: the run must exercise the rule).
"""
import json
import statistics
import sys
import time
from datetime import datetime

import jobout
from jobapi import post_events


def ms(s):
    return int(datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() * 1000)


def order(r):
    """Records compared by window, then story: Kafka keeps no order between partitions."""
    return (ms(r["window_end"]), r["story_id"])


def model(windows, multiple, min_reads, min_peers, cooldown_ms):
    last, news = {}, []
    for w in sorted(windows, key=lambda w: ms(w["window_end"])):
        end = ms(w["window_end"])
        items = w["items"]
        for i, e in enumerate(items):
            t = e.get("topic")
            if t is None or e["score"] < min_reads:
                continue
            peers = [x["score"] for j, x in enumerate(items) if j != i and x.get("topic") == t]
            if len(peers) < min_peers:
                continue
            base = statistics.median(peers)
            story = e["cluster_id"]
            if story in last and end - last[story] < cooldown_ms:
                continue
            if e["score"] >= multiple * base:
                last[story] = end
                news.append({"story_id": story, "article_id": e["article_id"], "topic": t,
                             "reads": e["score"], "baseline": float(base), "peers": len(peers),
                             "articles": e["articles"], "window_start": w["window_start"],
                             "window_end": w["window_end"]})
    return news


def check(path, multiple, min_reads, min_peers, cooldown_s, min_news=1):
    recs = jobout.keyed_records(path)
    windows = [v for _, v in recs.get("trending", [])]
    got = [v for _, v in recs.get("breaking-news", [])]
    for k, v in recs.get("breaking-news", []):
        if k != v["story_id"]:
            print(f"FAIL: breaking-news key {k} is not its story_id", file=sys.stderr)
            return 1
    want = sorted(model(windows, float(multiple), int(min_reads), int(min_peers),
                        int(cooldown_s) * 1000), key=order)
    for g in got:
        g["baseline"] = float(g["baseline"])
    got.sort(key=order)
    fails = []
    if len({json.dumps(g, sort_keys=True) for g in got}) != len(got):
        fails.append("a breaking-news record was committed twice")
    if got != want:
        gk = [(g["story_id"][:8], g["window_end"]) for g in got]
        wk = [(w["story_id"][:8], w["window_end"]) for w in want]
        fails.append(f"breaking-news {gk[:12]} != the model's {wk[:12]}")
        for g, w in zip(got, want):
            if g != w:
                fails.append(f"first difference: job {g}, model {w}")
                break
    topics = {e.get("topic") for w in windows for e in w["items"]}
    print(f"breaking_model: {len(windows)} windows, {len(topics - {None})} topics, "
          f"{len(got)} breaking-news records, the model's {len(want)}")
    if len(want) < int(min_news):
        fails.append(f"fewer than {min_news} stories broke: the run did not exercise the rule")
    for f in fails:
        print("FAIL: " + f, file=sys.stderr)
    return 1 if fails else 0


def burst(base, path, n, story=None):
    """N reads of a story's lead (its latest): the given one, else the last window's entry with
    the fewest reads of the topic with the most entries in it (a baseline that lasts), other
    than the stories "not:A,B" names."""
    windows = sorted(jobout.records(path).get("trending", []), key=lambda w: ms(w["window_end"]))
    skip = set(story[4:].split(",")) if story and story.startswith("not:") else set()
    story = None if skip else story
    if story:
        e = next(e for w in reversed(windows) for e in w["items"] if e["cluster_id"] == story)
    else:
        items = windows[-1]["items"]
        per = {}
        for x in items:
            per[x.get("topic")] = per.get(x.get("topic"), 0) + 1
        per.pop(None, None)
        if not per or max(per.values()) < 3:
            sys.exit("no trending topic with three entries yet")
        top = max(sorted(per), key=lambda t: per[t])
        cands = [x for x in items if x.get("topic") == top and len(x["cluster_id"]) == 32 and
                 x["cluster_id"] not in skip]
        if not cands:
            sys.exit("no other story of the topic to read")
        e = min(cands, key=lambda x: (x["score"], x["cluster_id"]))
    now = int(time.time() * 1000)
    tag = "%x" % now
    for lo in range(0, n, 500):
        evs = [{"user_id": f"burst-{tag}-{i}", "article_id": e["article_id"], "ts": now}
               for i in range(lo, min(n, lo + 500))]
        post_events(base, evs)
    print(e["cluster_id"])


if __name__ == "__main__":
    if sys.argv[1] == "burst":
        burst(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else None)
    else:
        sys.exit(check(*sys.argv[2:]))
