"""notify_model.py — an independent model of breaking-news notifications (src/engine/notify.h) over
a job's committed records, for test_breaking.sh.

  python3 notify_model.py settings BASE JOB_STDOUT PLAN KIND N ALL TOPICS...
        posts KIND (subscribe / unsubscribe) for readers notify-0 .. notify-(N-1), reader i
        the topic TOPICS[i % len(TOPICS)], and for readers every-0 .. every-(ALL-1) every topic
        (unsubscribe: the even readers of each group only), waits until the job has applied
        them and three more epochs have committed, and appends the step to PLAN (JSON lines):
        the events, and how many breaking windows were committed before they were posted (A)
        and after (B)
  python3 notify_model.py check JOB_STDOUT PLAN CAP [MIN_SENT [MIN_CAPPED]]

The rule (notify.h, written again here): the breaking-news records, grouped by window in the
order the job committed them, each window's stories ordered by reads descending then story id;
for each reader subscribed to a story's topic: a story sent to them before is not sent again;
else one notification if fewer than CAP were sent to them on the window's day (UTC), counted
and remembered.

When a reader's settings took effect is known only within bounds: windows committed before the
step's events were posted (index < A) came before them; windows committed once they were applied
and three more epochs committed (index >= B) came after; windows between may be either. A
reader's state changes only with a notification, so the model tries, window by window, the
earliest of the reader's settings states still possible that explains the job's notifications
to that reader, never going back to an earlier one. Any window nothing explains fails the check,
as does a (reader, story) sent twice, a record whose fields are not its breaking-news record's, or
fewer than MIN_SENT notifications (the run must exercise the rule).
"""
import json
import sys
import time
from datetime import datetime

import jobout
from jobapi import metrics, post_events

DAY_MS = 86400000


def ms(s):
    return int(datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() * 1000)


def windows_of(path):
    return windows_in([v for _, v in jobout.keyed_records(path).get("breaking-news", [])])


def windows_in(breaking):
    """[(window_end, [breaking records ordered as notify.h judges them])] in the order the
    merger emitted (and committed) the windows: by their end."""
    out, where = [], {}
    for v in sorted(breaking, key=lambda v: ms(v["window_end"])):
        we = v["window_end"]
        if we not in where:
            where[we] = len(out)
            out.append((we, []))
        out[where[we]][1].append(v)
    for _, stories in out:
        stories.sort(key=lambda v: (-v["reads"], v["story_id"]))
    return out


def metric_sum(base, name, label=None):
    return sum(v for k, v in metrics(base, name).items() if label is None or label in k)


def settings(base, path, plan, kind, n, every, topics):
    step_by = 2 if kind == "unsubscribe" else 1
    now = int(time.time() * 1000)
    events = [{"user_id": f"notify-{i}", "kind": kind, "topic": topics[i % len(topics)],
               "ts": now} for i in range(0, n, step_by)]
    events += [{"user_id": f"every-{i}", "kind": kind, "topic": t, "ts": now}
               for i in range(0, every, step_by) for t in topics]
    label = f'kind="{kind}"'
    before = metric_sum(base, "newsflow_reader_settings_total", label)
    a = len(windows_of(path))
    post_events(base, events)
    for _ in range(1200):  # applied: the shards counted them
        if metric_sum(base, "newsflow_reader_settings_total", label) >= before + len(events):
            break
        time.sleep(0.1)
    else:
        sys.exit(f"the job did not apply the {kind} events within 120 s")
    epoch = metric_sum(base, "newsflow_epoch")
    for _ in range(1200):  # their epoch (at most the one after the one in flight) committed
        if metric_sum(base, "newsflow_epoch") >= epoch + 3:
            break
        time.sleep(0.1)
    else:
        sys.exit("three more epochs did not commit within 120 s")
    b = len(windows_of(path))
    with open(plan, "a") as f:
        f.write(json.dumps({"events": events, "A": a, "B": b}) + "\n")


def step(state, stories, topics, day, cap):
    """The rule for one reader and one window: the stories sent, state updated (and the
    stories the cap held back counted in it)."""
    sent = []
    for v in stories:
        if v["topic"] not in topics or v["story_id"] in state["remembered"]:
            continue
        if day > state["day"]:
            state["day"], state["count"] = day, 0
        if state["count"] >= cap:
            state["capped"] += 1
            continue
        state["count"] += 1
        state["remembered"] = (state["remembered"] + [v["story_id"]])[-32:]
        sent.append(v["story_id"])
    return sent


def reader_stages(plan):
    """{user: [(topics, A, B) per settings state]}: state 0 (no topics) from the start."""
    stages = {}
    for p in plan:
        for e in p["events"]:
            st = stages.setdefault(e["user_id"], [(frozenset(), 0, 0)])
            topics = set(st[-1][0])
            (topics.add if e["kind"] == "subscribe" else topics.discard)(e["topic"])
            st.append((frozenset(topics), p["A"], p["B"]))
    return stages


def explain(user, stages, windows, got, cap, fails):
    """Walks the reader through the windows (see the module's doc); the notifications sent."""
    state = {"remembered": [], "day": -1, "count": 0, "capped": 0}
    cur, sent = 0, 0
    for k, (we, stories) in enumerate(windows):
        lo = max([cur] + [i for i, (_, _, b) in enumerate(stages) if b <= k])
        hi = max(i for i, (_, a, _) in enumerate(stages) if a <= k)
        job = got.get((user, we), [])
        for s in range(lo, max(lo, hi) + 1):
            trial = json.loads(json.dumps(state))
            if sorted(step(trial, stories, stages[s][0], ms(we) // DAY_MS, cap)) == sorted(job):
                state, cur = trial, s
                sent += len(job)
                break
        else:
            fails.append(f"{user}, window ending {we}: the job sent {job}; no settings state "
                         f"from {lo} to {hi} explains it")
            break
    return sent, state["capped"]


def check(path, plan_path, cap, min_sent=1, min_capped=0):
    recs = jobout.keyed_records(path)
    plan = [json.loads(line) for line in open(plan_path)]
    fails, summary = check_records([v for _, v in recs.get("breaking-news", [])],
                                   recs.get("notifications", []), plan, int(cap),
                                   int(min_sent), int(min_capped))
    print("notify_model: " + summary)
    for f in fails[:10]:
        print("FAIL: " + f, file=sys.stderr)
    return 1 if fails else 0


def check_records(breaking_values, notifications, plan, cap, min_sent=1, min_capped=0):
    """The check over records: breaking-news values, notifications as (key, value), the plan's
    steps. (failures, a one-line summary)."""
    windows = windows_in(breaking_values)
    stages = reader_stages(plan)
    breaking = {(v["window_end"], v["story_id"]): v for _, ss in windows for v in ss}
    got, pairs, fails = {}, set(), []
    for key, v in notifications:
        b = breaking.get((v["window_end"], v["story_id"]))
        if key != v["user_id"]:
            fails.append(f"a notification keyed {key} is for {v['user_id']}")
        if not b or any(v[f] != b[f] for f in ("article_id", "topic", "reads")):
            fails.append(f"a notification is not its breaking-news record's: {v}")
        if (v["user_id"], v["story_id"]) in pairs:
            fails.append(f"{v['user_id']} was sent {v['story_id']} twice")
        pairs.add((v["user_id"], v["story_id"]))
        got.setdefault((v["user_id"], v["window_end"]), []).append(v["story_id"])
    strangers = {u for u, _ in got} - set(stages)
    if strangers:
        fails.append(f"notifications to readers who never subscribed: {sorted(strangers)[:5]}")
    per = [explain(u, stages[u], windows, got, cap, fails) for u in sorted(stages)]
    sent, capped = sum(s for s, _ in per), sum(c for _, c in per)
    if len({ms(we) // DAY_MS for we, _ in windows}) > 1:
        min_capped = 0  # the run crossed midnight (UTC): the counts started again
    if len(pairs) < min_sent or capped < min_capped:
        fails.append(f"fewer than {min_sent} notifications or {min_capped} capped: the run did "
                     "not exercise the rule")
    return fails, (f"{len(windows)} breaking windows, {len(stages)} readers, {sent} "
                   f"notifications explained, {len(pairs)} committed, {capped} held back by the "
                   "cap")


if __name__ == "__main__":
    if sys.argv[1] == "settings":
        settings(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]),
                 int(sys.argv[7]), sys.argv[8:])
    else:
        sys.exit(check(*sys.argv[2:]))
