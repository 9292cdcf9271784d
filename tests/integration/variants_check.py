"""variants_check.py — ranking experiments (src/engine/variants.h) seen from outside, for
test_variants.sh.

  python3 variants_check.py feeds BASE SPEC OUT      every reader's feed once: its `variant` must be
                                                     the one nfhash.py assigns from the reader's id;
                                                     writes {user: variant} and the tally to OUT
  python3 variants_check.py same A.json B.json       two processes' (or runs') assignments agree
  python3 variants_check.py metrics BASE OUT.json [PERCENT]
                                                     newsflow_ranking_feeds_total by variant equals
                                                     the tally (the process's feeds since it started),
                                                     and the shadow's overlap is observed once per
                                                     feed ranked by interest or follows, always 1
                                                     against the seed (the shadow has its weights);
                                                     with ranking.shadow_percent PERCENT, for feed k
                                                     of those when k % 100 < PERCENT
  python3 variants_check.py reads BASE SPEC          reads posted through the edge naming each
                                                     reader's variant, an unknown one and none: each
                                                     counted once under its label
"""
import json
import sys
import time
import urllib.parse

import nfhash
from jobapi import get, metrics, post_events

# Readers: demo readers (most with vectors), readers who never read (cold: trending), and ids
# whose bytes exercise the hash's tail loads and the path's escapes.
USERS = [f"demo-user-{i}" for i in range(400)] + [f"cold-{i}" for i in range(60)] + [
    "zoë", "a", "user with spaces", "x" * 128, "ünïcødé-reader-0123456789"]


def fail(msg):
    raise SystemExit(f"FAIL: {msg}")


def feeds(base, spec, out):
    variants = nfhash.parse_spec(spec)
    got, tally, ranked = {}, {}, {}
    for user in USERS:
        status, f = get(base, "/v1/feed/" + urllib.parse.quote(user, safe="") + "?limit=10", 30)
        if status != 200:
            fail(f"{user}: {status} {f}")
        want, _ = nfhash.assign(variants, "default", user)
        if f.get("variant") != want:
            fail(f"{user}: variant {f.get('variant')}, the model's {want}")
        got[user] = want
        tally[want] = tally.get(want, 0) + 1
        ranked[want] = ranked.get(want, 0) + (f["source"] != "trending")
    served = [n for n, share, _, shadow in variants if share and not shadow]
    if any(tally.get(n, 0) < len(USERS) // (2 * len(served)) for n in served):
        fail(f"a variant got far less than its share: {tally}")
    json.dump({"users": got, "tally": tally, "ranked": ranked}, open(out, "w"))
    print(f"variants_check: {len(got)} readers, by variant {tally}, ranked by interest or "
          f"follows {ranked}")


def same(a, b):
    x, y = json.load(open(a))["users"], json.load(open(b))["users"]
    diff = [u for u in x if x[u] != y.get(u)]
    if diff or set(x) != set(y):
        fail(f"{len(diff)} readers changed variant, e.g. {diff[:3]}")
    print(f"variants_check: {len(x)} readers, the same variants in {a} and {b}")


def check_metrics(base, path, percent=100):
    run = json.load(open(path))
    percent = int(percent)
    fed = metrics(base, "newsflow_ranking_feeds_total")
    for name, n in run["tally"].items():
        v = fed.get(frozenset({f'variant="{name}"'}), -1)
        if v != n:
            fail(f"newsflow_ranking_feeds_total{{variant={name}}} is {v}, {n} feeds were served")
    count = metrics(base, "newsflow_ranking_shadow_overlap_count")
    total = metrics(base, "newsflow_ranking_shadow_overlap_sum")
    if percent < 100:  # a sample: only the total is known (which reader fell on which k is not)
        ranked = sum(run["ranked"].values())
        want = sum(1 for k in range(ranked) if k % 100 < percent)
        got = sum(count.values())
        if got != want:
            fail(f"ranking.shadow_percent={percent}: {got} shadow rankings of {ranked} feeds, "
                 f"want {want}")
        print(f"variants_check: {got} shadow rankings of {ranked} feeds at {percent} %")
        return
    for name, n in run["ranked"].items():
        k = frozenset({'variant="twin"', f'served="{name}"'})
        c, s = count.get(k, -1), total.get(k, -1)
        # the shadow has the seed's weights: a seed reader's lists are the same stories
        if c != n or (name == "seed" and s != c) or not 0 <= s <= c:
            fail(f"shadow overlap against {name}: {c} observations summing to {s}; want {n}" +
                 (", each 1" if name == "seed" else ""))
    other = {n: round(total[frozenset({'variant="twin"', f'served="{n}"'})] / c, 3)
             for n, c in run["ranked"].items() if c}
    print(f"variants_check: feeds by variant as served; shadow rankings {run['ranked']}, mean "
          f"overlap {other}")


def reads(base, spec):
    variants = nfhash.parse_spec(spec)
    key = lambda v: frozenset({f'variant="{v}"', 'kind="read"'})
    before = metrics(base, "newsflow_ranking_reads_total")
    dups0_ = sum(metrics(base, "newsflow_read_event_duplicates_total").values())
    events, want = [], {}
    now = int(time.time() * 1000)
    for i, user in enumerate(USERS[:40]):
        v, _ = nfhash.assign(variants, "default", user)
        label = v if i % 10 else "none" if i % 20 else "other"
        ev = {"user_id": user, "article_id": f"variant-check-{i}", "ts": now}
        if label != "none":
            ev["variant"] = v if label != "other" else "not-configured"
        events.append(ev)
        want[label] = want.get(label, 0) + 1
    events.append(dict(events[1]))  # a repeat of an event counts once
    post_events(base, events)
    # Done when the repeat has been dropped: it follows its original in the reader's partition,
    # so every event before it has been counted too.
    dups = lambda: sum(metrics(base, "newsflow_read_event_duplicates_total").values())
    dups0, deadline = dups0_, time.monotonic() + 120
    while dups() == dups0:
        if time.monotonic() > deadline:
            fail("the repeated event was never dropped as a duplicate")
        time.sleep(0.2)
    now_m = metrics(base, "newsflow_ranking_reads_total")
    got = {v: int(now_m.get(key(v), 0) - before.get(key(v), 0)) for v in want}
    if got != want:
        fail(f"reads counted by variant {got}, posted {want}")
    print(f"variants_check: reads counted once by the variant they named: {want}")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "feeds":
        feeds(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "same":
        same(sys.argv[2], sys.argv[3])
    elif cmd == "metrics":
        check_metrics(*sys.argv[2:5])
    else:
        reads(sys.argv[2], sys.argv[3])
