#!/usr/bin/env python3
"""ops_check.py — the static checks of the operator's pack, for test_alert_rules.sh.

  ops_check.py rules SRC        every alert of deploy/prometheus/alerts.yml and slo.yml has a
                                unit test in alerts_test.yml or slo_test.yml and a runbook
                                anchor that docs/runbooks.md has,
                                and every metric a rule reads is one src/ registers
  ops_check.py dashboards SRC   every metric or recording rule a panel of
                                deploy/grafana/newsflow-*.json names exists"""
import glob
import json
import os
import re
import sys


def exported(src):
    """Every metric name src/ registers: what docs/metrics.md is written from."""
    sys.dont_write_bytecode = True  # nothing written into the source tree
    sys.path.insert(0, os.path.join(src, "scripts"))
    import metrics_doc  # noqa: E402  (scripts/metrics_doc.py)
    return set(metrics_doc.from_source(src))


RULES = ("alerts.yml", "slo.yml")
TESTS = ("alerts_test.yml", "slo_test.yml")


def read_all(src, names):
    return "".join(open(os.path.join(src, "deploy/prometheus", n)).read() for n in names)


def check_rules(src):
    text = read_all(src, RULES)
    tests = read_all(src, TESTS)
    alerts = re.findall(r"^\s+- alert: (\w+)", text, re.M)
    records = set(re.findall(r"^\s+- record: ([\w:]+)", text, re.M))
    tested = set(re.findall(r"alertname: (\w+)", tests))
    missing = [a for a in alerts if a not in tested]
    assert not missing, "alerts without a unit test: %s" % missing
    # anchors of docs/runbooks.md as GitHub makes them from "## " headings
    anchors = set()
    for h in re.findall(r"^## (.+)$", open(os.path.join(src, "docs/runbooks.md")).read(), re.M):
        anchors.add(re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-"))
    links = re.findall(r"runbook: \"?docs/runbooks.md#([\w-]+)", text)
    assert len(links) == len(alerts), "every alert names a runbook (%d of %d)" % (
        len(links), len(alerts))
    bad = sorted(set(link for link in links if link not in anchors))
    assert not bad, "runbook anchors not in docs/runbooks.md: %s (have %s)" % (
        bad, sorted(anchors))
    have = exported(src)
    used = set(re.findall(r"\b(newsflow_[a-z0-9_]+?)(?:_bucket|_count|_sum)?\b(?=[\[{( ]|$)",
                          text, re.M))
    unknown = sorted(m for m in used if m not in have)
    assert not unknown, "rules read metrics the job does not export: %s" % unknown
    print("%d alerts, %d recording rules, %d metrics read, all exported" % (
        len(alerts), len(records), len(used)))


def check_dashboards(src):
    have = exported(src)
    rules = read_all(src, RULES)
    records = set(re.findall(r"^\s+- record: ([\w:]+)", rules, re.M))
    n = 0
    for path in sorted(glob.glob(os.path.join(src, "deploy/grafana/newsflow-*.json"))):
        d = json.load(open(path))
        assert d["panels"], path
        for p in d["panels"]:
            for t in p["targets"]:
                n += 1
                names = re.findall(r"\b(newsflow[_:][a-z0-9_:]+)", t["expr"])
                assert names, (path, p["title"], t["expr"])
                for m in names:
                    base = re.sub(r"_(bucket|count|sum)$", "", m)
                    ok = m in records if ":" in m else (m in have or base in have)
                    assert ok, "%s, panel %r: %s is neither exported nor recorded" % (
                        os.path.basename(path), p["title"], m)
    print("%d panel queries, every metric and rule they name exists" % n)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("rules", "dashboards"):
        sys.exit(__doc__)
    (check_rules if sys.argv[1] == "rules" else check_dashboards)(sys.argv[2])
