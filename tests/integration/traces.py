#!/usr/bin/env python3
"""traces.py — checks the spans a real OpenTelemetry Collector wrote (its file exporter: one
ExportTraceServiceRequest as OTLP JSON per line), for tests/integration/test_traces.sh.

  traces.py names SPANS.jsonl              the names of the spans, once each
  traces.py sampled SPANS.jsonl JOB.log    every trace sampled: the shapes below, and the log
                                           events' trace ids
  traces.py forced SPANS.jsonl             nothing sampled: only a failing fetch and a slow feed
"""
import collections
import json
import re
import sys

HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")


def load(path):
    spans = []
    try:
        lines = open(path).read().splitlines()
    except FileNotFoundError:
        return spans
    for line in lines:
        req = json.loads(line)
        for rs in req["resourceSpans"]:
            res = {a["key"]: a["value"].get("stringValue") for a in rs["resource"]["attributes"]}
            assert res.get("service.name") == "newsflow", res
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    sp["attrs"] = {a["key"]: next(iter(a["value"].values()))
                                   for a in sp.get("attributes", [])}
                    spans.append(sp)
    for sp in spans:  # the collector keeps a zero id out: the key must be there
        assert HEX32.match(sp.get("traceId", "")), sp
        assert HEX16.match(sp.get("spanId", "")), sp
        assert int(sp["endTimeUnixNano"]) >= int(sp["startTimeUnixNano"]) > 0, sp
    return spans


def index(spans):
    by_id = {(s["traceId"], s["spanId"]): s for s in spans}
    by_name = collections.defaultdict(list)
    for s in spans:
        by_name[s["name"]].append(s)
    return by_id, by_name


def parent(by_id, s):
    p = s.get("parentSpanId")
    assert p, "%s has no parent" % s["name"]
    got = by_id.get((s["traceId"], p))
    assert got, "%s: its parent %s is not in its trace" % (s["name"], p)
    return got


def check_sampled(path, log):
    spans = load(path)
    by_id, by = index(spans)
    # A feed request: the server span and its answer.
    assert len(by["feed.request"]) >= 3, {k: len(v) for k, v in by.items()}
    for s in by["feed.request"]:
        assert s["kind"] == 2 and not s.get("parentSpanId"), s
        assert s["attrs"]["http.route"] == "/v1/feed/{user_id}", s["attrs"]
        assert s["attrs"]["http.response.status_code"] == "200", s["attrs"]
    for s in by["query.answer"]:
        p = parent(by_id, s)
        assert p["name"] in ("feed.request", "search.request"), p["name"]
        assert int(p["startTimeUnixNano"]) <= int(s["startTimeUnixNano"]), (p, s)
    assert len(by["query.answer"]) >= len(by["feed.request"])
    # An article: crawl.fetch is the root; parse, classify, dedup and cluster hang from it.
    for s in by["crawl.fetch"]:
        assert not s.get("parentSpanId") and s["kind"] == 3, s
        assert s["attrs"]["newsflow.source_id"], s["attrs"]
    for name in ("feed.parse", "classify", "dedup", "cluster"):
        assert by[name], "no %s span" % name
        for s in by[name]:
            assert parent(by_id, s)["name"] == "crawl.fetch", (name, s)
    # ... and its commit: a child of its dedup span, linked to its epoch's trace.
    epochs = {s["attrs"]["newsflow.epoch"]: s for s in by["epoch"]}
    assert by["article.commit"], "no article.commit span"
    for s in by["article.commit"]:
        d = parent(by_id, s)
        assert d["name"] == "dedup" and d["attrs"]["newsflow.result"] == "new", d
        assert d["attrs"]["newsflow.article_id"] == s["attrs"]["newsflow.article_id"]
        e = epochs.get(s["attrs"]["newsflow.epoch"])
        assert e, "article.commit of epoch %s: no epoch trace" % s["attrs"]["newsflow.epoch"]
        [link] = s["links"]
        assert (link["traceId"], link["spanId"]) == (e["traceId"], e["spanId"]), (link, e)
        assert int(s["endTimeUnixNano"]) >= int(e["startTimeUnixNano"]), (s, e)
    # An epoch: its steps, in order, inside it.
    steps = ["epoch.cut", "epoch.write", "epoch.pending", "epoch.kafka_transaction",
             "epoch.apply"]
    for e in by["epoch"]:
        assert not e.get("parentSpanId"), e
        kids = sorted((s for s in spans if s["traceId"] == e["traceId"] and s is not e),
                      key=lambda s: int(s["startTimeUnixNano"]))
        assert [k["name"] for k in kids] == steps, [k["name"] for k in kids]
        for k in kids:
            assert k["parentSpanId"] == e["spanId"], k
            assert int(e["startTimeUnixNano"]) <= int(k["startTimeUnixNano"]), (e, k)
            assert int(k["endTimeUnixNano"]) <= int(e["endTimeUnixNano"]), (e, k)
    # The log events of the same work carry its trace id.
    fetches = {s["traceId"] for s in by["crawl.fetch"]}
    feeds = {s["traceId"] for s in by["feed.request"]}
    events = collections.Counter()
    for line in open(log):
        if not line.startswith("{"):
            continue
        j = json.loads(line)
        msg = j.get("msg")
        if msg in ("article.ingested", "cluster.assigned"):
            assert j["trace_id"] in fetches, j
        elif msg == "feed.cache_miss":
            assert j["trace_id"] in feeds, j
        else:
            continue
        events[msg] += 1
    assert events["article.ingested"] >= 1 and events["cluster.assigned"] >= 1 and \
        events["feed.cache_miss"] >= 1, events
    print("%d spans: %s; log events %s" % (
        len(spans), dict(sorted((k, len(v)) for k, v in by.items())), dict(events)))


def check_forced(path):
    spans = load(path)
    by_id, by = index(spans)
    failed = [s for s in by["crawl.fetch"] if s["status"].get("code") == 2]
    assert failed, "the failing fetch was not exported: %s" % {k: len(v) for k, v in by.items()}
    ordinary = [s for s in by["crawl.fetch"] if "missing.xml" not in s["attrs"]["url.full"]]
    assert not ordinary, "an ordinary fetch was exported unsampled: %s" % ordinary
    for name in ("dedup", "classify", "article.commit", "cluster"):
        assert not by[name], "%s exported with nothing sampled" % name
    slow = [s for s in by["feed.request"]
            if int(s["endTimeUnixNano"]) - int(s["startTimeUnixNano"]) >= 600e6]
    assert slow, "the slow feed was not exported"
    for s in slow:
        kids = [k for k in by["query.answer"] if k.get("parentSpanId") == s["spanId"]]
        assert len(kids) == 1, "the slow feed's answer span is missing"
    print("%d spans exported unsampled: %d failing fetches, %d slow feeds" % (
        len(spans), len(failed), len(slow)))


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "names":
        print(" ".join(sorted({s["name"] for s in load(sys.argv[2])})))
    elif len(sys.argv) == 4 and sys.argv[1] == "sampled":
        check_sampled(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "forced":
        check_forced(sys.argv[2])
    else:
        sys.exit(__doc__)
