#!/usr/bin/env python3
"""metrics_doc.py — writes docs/metrics.md, the table of every metric newsflow exports: name,
type, labels and meaning, from the registrations in src/ (name, type and help text, which is
what /metrics prints) and, for the labels, from /metrics dumps of running jobs.

Usage: scripts/metrics_doc.py SRC_DIR OUT.md [METRICS_DUMP...]
       scripts/metrics_doc.py SRC_DIR --check DOC.md   (exit 1 if DOC.md misses a metric of src/)
tests/integration/test_alert_rules.sh runs --check, so the table cannot fall behind the code."""
import os
import re
import sys

CALL = re.compile(r'nf_metrics_(counters|counter|gauge|gauge_fn|histogram)\s*\(\s*"(newsflow_[a-z0-9_]+)"\s*,'
                  r'\s*((?:"(?:[^"\\]|\\.)*"\s*)+)', re.S)
LABELS = re.compile(r'"newsflow_[a-z0-9_]+"[^;]*?"([a-z_]+)=\\"', re.S)


def from_source(src):
    found = {}
    for root, _, files in os.walk(os.path.join(src, "src")):
        for f in sorted(files):
            if not f.endswith(".c"):
                continue
            text = open(os.path.join(root, f)).read()
            for kind, name, helps in CALL.findall(text):
                help_text = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', helps))
                kind = {"gauge_fn": "gauge", "counters": "counter"}.get(kind, kind)
                found.setdefault(name, (kind, help_text.replace('\\"', '"'),
                                        os.path.relpath(os.path.join(root, f), src)))
            # names registered through a helper (a table of names): any literal counts
            for name in re.findall(r'"(newsflow_[a-z0-9_]+)"', text):
                found.setdefault(name, ("", "", os.path.relpath(os.path.join(root, f), src)))
    return found


def labels_from_dumps(paths):
    labels = {}
    helps = {}
    for p in paths:
        for line in open(p):
            m = re.match(r"# HELP (\S+) (.*)", line)
            if m:
                helps[m.group(1)] = m.group(2)
                continue
            m = re.match(r"# TYPE (\S+) (\S+)", line)
            if m:
                helps.setdefault(m.group(1) + "#type", m.group(2))
                continue
            m = re.match(r"([a-z_:0-9]+)(?:\{([^}]*)\})? ", line)
            if not m:
                continue
            name = re.sub(r"_(bucket|sum|count)$", "", m.group(1))
            keys = [k for k in re.findall(r'(\w+)="', m.group(2) or "") if k != "le"]
            labels.setdefault(name, set()).update(keys)
    return labels, helps


# The metrics the seed design's operations chapter names, and where newsflow has each.
DESIGN = [
    ("articles ingested, by status", "`newsflow_dedup_articles_total{result}` (new, duplicate); "
     "`newsflow_parse_articles_total`; recording rule `newsflow:articles_ingested:rate5m`"),
    ("crawl fetch error rate", "`newsflow_fetch_requests_total{result}`; "
     "`newsflow:fetch_errors:ratio_rate5m`"),
    ("sources overdue ratio", "`newsflow_crawl_lateness_seconds` (start after next_crawl_at); "
     "`newsflow:crawl_overdue:ratio_rate5m` (over 60 s late)"),
    ("Kafka consumer lag", "`newsflow_kafka_consumer_lag{topic,partition}`; "
     "`newsflow:kafka_consumer_lag:sum`"),
    ("trending freshness", "`newsflow_trending_freshness_seconds` (the SLO's samples), "
     "`newsflow_trending_watermark_lag_seconds`, "
     "`newsflow_trending_windows_total`"),
    ("interest update lag", "`newsflow_epoch_seconds_since_commit` (updates are visible at "
     "commit), `newsflow_interest_updates_total`, `newsflow_kafka_consumer_lag` of read-events"),
    ("cluster assignments by action", "`newsflow_cluster_assignments_total{action}`"),
    ("read-event dedup rate", "`newsflow_read_event_duplicates_total` / "
     "`newsflow_read_events_total`; `newsflow:read_event_dedup:ratio_rate5m`"),
    ("circuit breaker opens", "`newsflow_crawl_breaker_transitions_total{to=\"open\"}`"),
    ("parse latency", "`newsflow_parse_duration_seconds`; `newsflow:parse_seconds:p99_5m`"),
    ("classify latency", "`newsflow_classify_duration_seconds` (one article)"),
    ("epoch pause and commit", "`newsflow_epoch_pause_seconds`, `newsflow_epoch_commit_seconds`; "
     "p99 rules `newsflow:epoch_pause_seconds:p99_5m`, `newsflow:epoch_commit_seconds:p99_5m`"),
    ("time since last committed epoch", "`newsflow_epoch_seconds_since_commit` against "
     "`newsflow_epoch_interval_seconds`"),
    ("restore progress", "`newsflow_restore_remaining_records`, `newsflow_restore_records_total`, "
     "`newsflow_restore_seconds`"),
    ("dead letters by stage", "`newsflow_dead_letters_total{stage}`; "
     "`newsflow:dead_letters:rate5m`"),
    ("RocksDB sizes", "`newsflow_rocksdb_sst_bytes` (on disk), `newsflow_rocksdb_memtable_bytes`; "
     "keyed state in memory: `newsflow_state_bytes{kind}`, `newsflow_state_entries{kind}`; "
     "allocated against in use per kind: `newsflow_state_allocated_bytes{kind}`, "
     "`newsflow_state_used_bytes{kind}`"),
]


def main():
    a = sys.argv[1:]
    if len(a) < 2:
        sys.exit(__doc__)
    src = a[0]
    found = from_source(src)
    if a[1] == "--check":
        doc = open(a[2]).read()
        missing = sorted(n for n in found if "`%s`" % n not in doc)
        if missing:
            print("docs/metrics.md misses %d metrics of src/: %s (regenerate with "
                  "scripts/metrics_doc.py)" % (len(missing), ", ".join(missing)))
            return 1
        print("docs/metrics.md lists all %d metrics of src/" % len(found))
        return 0
    labels, helps = labels_from_dumps(a[2:])
    groups = {}
    for name in sorted(found):
        kind, help_text, where = found[name]
        kind = kind or helps.get(name + "#type", "")
        help_text = helps.get(name, help_text) or "(see %s)" % where
        part = name[len("newsflow_"):].split("_")[0]
        groups.setdefault(part, []).append((name, kind, help_text, where))
    out = ["# Metrics", "",
           "Every metric newsflow exports on `/metrics` (Prometheus text format, admin server),",
           "generated by `scripts/metrics_doc.py` from the registrations in `src/` and the labels",
           "seen on running jobs; `tests/integration/test_alert_rules.sh` fails when a metric of",
           "`src/` is missing here. Histograms also export `_bucket{le}`, `_sum` and `_count`.",
           "Alert and recording rules: `deploy/prometheus/alerts.yml` and, for the SLOs",
           "(`docs/slo.md`), `slo.yml`; what to do:",
           "`docs/runbooks.md`. Some metrics appear only when their feature is on (search,",
           "changelogs, standbys, the query API's owners) or once their first sample exists",
           "(consumer lag per partition).", "",
           "## The design's operations metrics", "",
           "| what the design names | newsflow |", "|---|---|"]
    out += ["| %s | %s |" % row for row in DESIGN]
    out.append("")
    for part in sorted(groups):
        out += ["## %s" % part, "", "| metric | type | labels | meaning | registered in |",
                "|---|---|---|---|---|"]
        for name, kind, help_text, where in groups[part]:
            lab = ", ".join("`%s`" % k for k in sorted(labels.get(name, ()))) or "—"
            out.append("| `%s` | %s | %s | %s | `%s` |" % (name, kind or "?", lab,
                                                            help_text.replace("|", "\\|"), where))
        out.append("")
    with open(a[1], "w") as f:
        f.write("\n".join(out))
    print("%s: %d metrics" % (a[1], len(found)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
