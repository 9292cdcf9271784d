#!/usr/bin/env python3
"""dashboards.py — writes newsflow's six Grafana dashboards (deploy/grafana/newsflow-*.json)
from the panel lists below, so that their queries live in one readable place.

Usage: python3 deploy/grafana/dashboards.py [OUT_DIR]      (default: this directory)
       python3 deploy/grafana/dashboards.py --queries     (every panel query, one per line)

Import the JSON files in Grafana (Dashboards > Import) and pick the Prometheus data source that
scrapes newsflow (deploy/prometheus/prometheus.yml). Every query filters on the dashboard's
`instance` variable. tests/integration/test_prometheus_scrape.sh checks every query: each
metric or recording rule it names exists (src/ registers it, or alerts.yml records it), and
each evaluates without error on a real Prometheus scraping a live job."""
import json
import os
import sys

I = '{instance=~"$instance"}'


def sel(extra=""):
    """A label selector with the instance filter (and more matchers)."""
    return '{instance=~"$instance"%s}' % ("," + extra if extra else "")


RATE = "$__rate_interval"

# dashboard uid -> (title, description, [(panel title, unit, [(expr, legend)])])
DASHBOARDS = {
    "newsflow-ingestion": (
        "newsflow / Ingestion health",
        "Is it taking in feeds and read events, and what is it setting aside?",
        [
            ("Articles ingested /s by result", "ops",
             [('sum by (result) (rate(newsflow_dedup_articles_total%s[%s]))' % (sel(), RATE),
               "{{result}}")]),
            ("Documents parsed /s by result", "ops",
             [('sum by (result) (rate(newsflow_parse_documents_total%s[%s]))' % (sel(), RATE),
               "{{result}}")]),
            ("Read events /s", "ops",
             [('sum(rate(newsflow_read_events_total%s[%s]))' % (sel(), RATE), "read events"),
              ('sum(rate(newsflow_read_event_duplicates_total%s[%s]))' % (sel(), RATE),
               "duplicates")]),
            ("Dead letters /s by stage", "ops",
             [('sum by (stage) (rate(newsflow_dead_letters_total%s[%s]))' % (sel(), RATE),
               "{{stage}}")]),
            ("Epochs committed /s and failures", "ops",
             [('sum(rate(newsflow_epochs_committed_total%s[%s]))' % (sel(), RATE), "committed"),
              ('sum(rate(newsflow_epoch_failures_total%s[%s]))' % (sel(), RATE), "failed")]),
            ("Output records committed /s", "ops",
             [('sum(rate(newsflow_epoch_outputs_total%s[%s]))' % (sel(), RATE), "outputs")]),
            ("Parse warnings /s", "ops",
             [('sum(rate(newsflow_parse_warnings_total%s[%s]))' % (sel(), RATE), "warnings")]),
            ("State: RocksDB on disk and in memtables", "bytes",
             [('newsflow_rocksdb_sst_bytes%s' % I, "SST files {{instance}}"),
              ('newsflow_rocksdb_memtable_bytes%s' % I, "memtables {{instance}}")]),
            ("Process CPU (cores) and memory", "short",
             [('rate(newsflow_process_cpu_seconds_total%s[%s])' % (I, RATE), "CPU {{instance}}"),
              ('newsflow_process_resident_memory_bytes%s / 2^30' % I, "RSS GiB {{instance}}")]),
        ]),
    "newsflow-lag": (
        "newsflow / Pipeline lag",
        "Is it behind, and where?",
        [
            ("Consumer lag by topic", "short",
             [('newsflow:kafka_consumer_lag:sum%s' % I, "{{instance}} {{topic}}")]),
            ("Seconds since the last committed epoch (alert at 3 intervals)", "s",
             [('newsflow_epoch_seconds_since_commit%s' % I, "{{instance}}"),
              ('3 * newsflow_epoch_interval_seconds%s' % I, "alert threshold")]),
            ("Epoch pause and commit, p99", "s",
             [('newsflow:epoch_pause_seconds:p99_5m%s' % I, "pause {{instance}}"),
              ('newsflow:epoch_commit_seconds:p99_5m%s' % I, "commit {{instance}}")]),
            ("Trending watermark lag", "s",
             [('newsflow_trending_watermark_lag_seconds%s' % I, "{{instance}}")]),
            ("Restore: records left", "short",
             [('newsflow_restore_remaining_records%s' % I, "{{instance}}")]),
            ("Back-pressure: paused shards and held events", "short",
             [('newsflow_kafka_paused_shards%s' % I, "paused shards {{instance}}"),
              ('newsflow_kafka_held_events%s' % I, "held events {{instance}}")]),
            ("Search index behind the committed state", "s",
             [('newsflow_search_behind_seconds%s' % I, "{{instance}}")]),
            ("Standby lag (records)", "short",
             [('sum by (instance) (newsflow_standby_lag_records%s)' % I, "{{instance}}")]),
        ]),
    "newsflow-experience": (
        "newsflow / Reader experience",
        "What readers get from the query API: answers, their speed, their freshness.",
        [
            ("Query API requests /s by path", "reqps",
             [('sum by (path) (rate(newsflow_admin_requests_total%s[%s]))' % (sel(), RATE),
               "{{path}}")]),
            ("Search latency p50 / p99", "s",
             [('histogram_quantile(0.5, sum by (le) (rate(newsflow_search_query_seconds_bucket%s[%s])))'
               % (sel(), RATE), "p50"),
              ('histogram_quantile(0.99, sum by (le) (rate(newsflow_search_query_seconds_bucket%s[%s])))'
               % (sel(), RATE), "p99")]),
            ("Search queries and refusals /s", "ops",
             [('sum(rate(newsflow_search_queries_total%s[%s]))' % (sel(), RATE), "queries"),
              ('sum(rate(newsflow_search_query_errors_total%s[%s]))' % (sel(), RATE), "errors"),
              ('sum(rate(newsflow_search_busy_total%s[%s]))' % (sel(), RATE), "busy (503)")]),
            ("Redirects to the owning process /s", "ops",
             [('sum(rate(newsflow_query_redirects_total%s[%s]))' % (sel(), RATE), "redirects")]),
            ("Interest updates /s", "ops",
             [('sum(rate(newsflow_interest_updates_total%s[%s]))' % (sel(), RATE), "updates")]),
            ("Trending windows emitted /s", "ops",
             [('sum(rate(newsflow_trending_windows_total%s[%s]))' % (sel(), RATE), "windows")]),
            ("Freshness: seconds since commit (what readers see is committed)", "s",
             [('max(newsflow_epoch_seconds_since_commit%s)' % I, "worst process")]),
            ("Ranking experiments: feeds served /s by variant", "ops",
             [('sum by (variant) (rate(newsflow_ranking_feeds_total%s[%s]))' % (sel(), RATE),
               "{{variant}}")]),
            ("Ranking experiments: reads per feed served (1 h)", "short",
             [('newsflow:ranking_reads_per_feed:ratio_rate1h', "{{variant}}")]),
            ("Shadow variant: mean overlap with the served feed", "percentunit",
             [('sum by (served) (rate(newsflow_ranking_shadow_overlap_sum%s[%s])) / '
               'clamp_min(sum by (served) (rate(newsflow_ranking_shadow_overlap_count%s[%s])), 1e-9)'
               % (sel(), RATE, sel(), RATE), "against {{served}}")]),
        ]),
    "newsflow-crawl": (
        "newsflow / Crawl coverage",
        "Are the feeds fetched on time, and which fail?",
        [
            ("Sources by state", "short",
             [('sum by (state) (newsflow_sources%s)' % I, "{{state}}")]),
            ("Fetches overdue (over 60 s late)", "percentunit",
             [('newsflow:crawl_overdue:ratio_rate5m%s' % I, "{{instance}}")]),
            ("Crawl lateness p99", "s",
             [('histogram_quantile(0.99, sum by (le) (rate(newsflow_crawl_lateness_seconds_bucket%s[%s])))'
               % (sel(), RATE), "p99")]),
            ("Fetches /s by result", "ops",
             [('sum by (result) (rate(newsflow_fetch_requests_total%s[%s]))' % (sel(), RATE),
               "{{result}}")]),
            ("Fetch error ratio", "percentunit",
             [('newsflow:fetch_errors:ratio_rate5m%s' % I, "{{instance}}")]),
            ("Fetch duration p99", "s",
             [('histogram_quantile(0.99, sum by (le) (rate(newsflow_fetch_duration_seconds_bucket%s[%s])))'
               % (sel(), RATE), "p99")]),
            ("Circuit breakers opened /s", "ops",
             [('sum(rate(newsflow_crawl_breaker_transitions_total%s[%s]))'
               % (sel('to="open"'), RATE), "opened")]),
            ("Fetches deferred /s by reason", "ops",
             [('sum by (reason) (rate(newsflow_crawl_deferred_total%s[%s]))' % (sel(), RATE),
               "{{reason}}")]),
            ("In flight", "short",
             [('sum(newsflow_crawl_in_flight%s)' % I, "in flight")]),
        ]),
    "newsflow-content": (
        "newsflow / Content quality",
        "What the articles are like: duplicates, stories, dates, links, topics.",
        [
            ("Duplicate share of crawled articles", "percentunit",
             [('sum(rate(newsflow_dedup_articles_total%s[%s])) / clamp_min(sum(rate(newsflow_dedup_articles_total%s[%s])), 1e-9)'
               % (sel('result="duplicate"'), RATE, sel(), RATE), "duplicates")]),
            ("Story cluster assignments /s by action", "ops",
             [('sum by (action) (rate(newsflow_cluster_assignments_total%s[%s]))' % (sel(), RATE),
               "{{action}}")]),
            ("Items without a usable link /s", "ops",
             [('sum(rate(newsflow_parse_items_without_link_total%s[%s]))' % (sel(), RATE),
               "without link")]),
            ("Dates replaced (future or missing) /s", "ops",
             [('sum(rate(newsflow_parse_dates_replaced_total%s[%s]))' % (sel(), RATE),
               "replaced")]),
            ("Articles without a topic /s", "ops",
             [('sum(rate(newsflow_articles_unclassified_total%s[%s]))' % (sel(), RATE),
               "unclassified")]),
            ("Read-event duplicate ratio", "percentunit",
             [('newsflow:read_event_dedup:ratio_rate5m%s' % I, "{{instance}}")]),
            ("Parse and classify p99", "s",
             [('newsflow:parse_seconds:p99_5m%s' % I, "parse {{instance}}"),
              ('newsflow:classify_seconds:p99_5m%s' % I, "classify {{instance}}")]),
        ]),
}


def slo_dashboard():
    """Budget left and burn rates per SLO, from deploy/prometheus/slo.py's table."""
    sys.dont_write_bytecode = True  # nothing written into the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                    "prometheus"))
    import slo  # noqa: E402
    left = [('1 - newsflow:slo_errors:ratio_rate3d%s / %g'
             % (sel('slo="%s"' % name), round(1 - obj, 6)), "%s {{instance}}" % name)
            for name, obj, _, _, _ in slo.SLOS]
    panels = [("Error budget left at the 3-day error rate (1 = untouched, < 0 = overspent)",
               "percentunit", left)]
    for name, obj, _, _, what in slo.SLOS:
        b = round(1 - obj, 6)
        panels.append(("%s: burn rate (page over 14.4 in 1h and 5m; %s)" % (name, what), "short",
                       [('newsflow:slo_errors:ratio_rate%s%s / %g' % (w, sel('slo="%s"' % name), b),
                         "%s {{instance}}" % w) for w in ("5m", "1h", "6h", "3d")]))
    return ("newsflow / Service levels",
            "Each SLO's error budget and how fast it burns (docs/slo.md; the alerts: "
            "deploy/prometheus/slo.yml)", panels)


DASHBOARDS["newsflow-slo"] = slo_dashboard()


def dashboard(uid, title, description, panels):
    out = []
    for n, (ptitle, unit, targets) in enumerate(panels):
        out.append({
            "id": n + 1,
            "type": "timeseries",
            "title": ptitle,
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "gridPos": {"x": (n % 2) * 12, "y": (n // 2) * 8, "w": 12, "h": 8},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": {"legend": {"displayMode": "list", "placement": "bottom"},
                        "tooltip": {"mode": "multi"}},
            "targets": [{"refId": chr(ord("A") + k), "expr": expr, "legendFormat": legend,
                         "datasource": {"type": "prometheus", "uid": "${datasource}"}}
                        for k, (expr, legend) in enumerate(targets)],
        })
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["newsflow"],
        "timezone": "utc",
        "schemaVersion": 38,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus",
             "label": "Prometheus"},
            {"name": "instance", "type": "query", "label": "process",
             "datasource": {"type": "prometheus", "uid": "${datasource}"},
             "query": {"query": "label_values(newsflow_build_info, instance)",
                       "refId": "instance"},
             "definition": "label_values(newsflow_build_info, instance)",
             "includeAll": True, "multi": True, "allValue": ".*", "refresh": 2,
             "current": {"text": "All", "value": "$__all"}},
        ]},
        "links": [{"title": "Runbooks", "type": "link", "url": "../docs/runbooks.md"}],
        "panels": out,
    }


def main():
    if "--queries" in sys.argv:
        for uid, (_, _, panels) in DASHBOARDS.items():
            for ptitle, _, targets in panels:
                for expr, _ in targets:
                    print(expr)
        return 0
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for uid, (title, description, panels) in DASHBOARDS.items():
        with open(os.path.join(out, uid + ".json"), "w") as f:
            json.dump(dashboard(uid, title, description, panels), f, indent=2)
            f.write("\n")
    print("%d dashboards in %s" % (len(DASHBOARDS), out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
