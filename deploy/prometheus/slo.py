#!/usr/bin/env python3
"""slo.py — writes newsflow's service-level objectives as Prometheus rules (slo.yml) and their
promtool unit tests (slo_test.yml), from the table below: one place says what each objective is.

Usage: python3 deploy/prometheus/slo.py [OUT_DIR]     (default: this directory)

What docs/slo.md explains, in short. Each SLO has an error ratio (the share of events that missed
it: requests slower than the threshold, 5xx answers, articles committed late, samples of a stale
view, sources not crawled in time) and an error budget (1 - objective). Recording rules keep the
ratio over seven windows (newsflow:slo_errors:ratio_rate<W>{slo="..."}); the alerts are the SRE
workbook's multi-window, multi-burn-rate ones:

  page    burn rate over 14.4 in 1 h and 5 m (2 % of a 30-day budget spent in an hour), or over 6
          in 6 h and 30 m (5 % in six hours)
  ticket  burn rate over 3 in 1 d and 2 h, or over 1 in 3 d and 6 h

The long window says the budget is really going; the short one that it still is (the alert ends
soon after the fault does). A window with no events has no ratio (NaN): an idle route burns
nothing. slo_test.yml holds three cases per SLO, made from its budget: a fast burn pages, a slow
burn tickets and does not page, a short blip after six healthy hours does neither; and for a
histogram whose threshold is a whole number, the fast burn again with the bucket's le as
Prometheus 3 stores it ("30.0", where the job writes "30").
tests/integration/test_alert_rules.sh checks that the files are what this script writes."""
import os
import sys

# name, objective, SLI, runbook anchor (docs/runbooks.md), what the SLO promises
#   SLI ("hist", metric, selector, threshold): events are the histogram's observations, an
#       error one above the threshold (a bucket bound of the metric)
#   SLI ("ratio", bad counter selector, all counter selector): errors over all events
#   SLI ("gauge", bad gauge, all gauge): the share of things in a bad state, sampled
FEED = 'route="/v1/feed/{user_id}"'
SEARCH = 'route="/v1/search"'
SLOS = [
    ("feed_latency", 0.99,
     ("hist", "newsflow_http_request_duration_seconds", FEED, "0.5"),
     "slo-feed-latency", "99 % of feed requests answered within 500 ms"),
    ("feed_availability", 0.999,
     ("ratio", 'newsflow_http_responses_total{%s,code="5xx"}' % FEED,
      "newsflow_http_responses_total{%s}" % FEED),
     "slo-feed-latency", "99.9 % of feed requests answered without a 5xx"),
    ("search_latency", 0.99,
     ("hist", "newsflow_http_request_duration_seconds", SEARCH, "1"),
     "slo-feed-latency", "99 % of searches answered within 1 s"),
    ("search_availability", 0.995,
     ("ratio", 'newsflow_http_responses_total{%s,code="5xx"}' % SEARCH,
      "newsflow_http_responses_total{%s}" % SEARCH),
     "slo-feed-latency", "99.5 % of searches answered without a 5xx"),
    ("ingest_latency", 0.99,
     ("hist", "newsflow_ingest_latency_seconds", 'from="fetched"', "30"),
     "slo-ingest-latency", "99 % of new articles committed within 30 s of their fetch"),
    ("trending_freshness", 0.95,
     ("hist", "newsflow_trending_freshness_seconds", "", "30"),
     "slo-trending-stale", "trending within 30 s of the wall clock 95 % of the time"),
    ("search_freshness", 0.99,
     ("hist", "newsflow_search_freshness_seconds", "", "60"),
     "slo-search-divergence", "99 % of committed articles searchable within 60 s"),
    ("crawl_coverage", 0.99,
     ("gauge", 'newsflow_crawl_coverage_sources{state="uncovered"}',
      "newsflow_crawl_coverage_sources"),
     "slo-crawl-coverage", "99 % of sources not paused answered within twice their interval"),
]

WINDOWS = ["5m", "30m", "1h", "2h", "6h", "1d", "3d"]
# (severity, [(burn rate, long window, short window)], for)
ALERTS = [
    ("page", [(14.4, "1h", "5m"), (6, "6h", "30m")], "2m"),
    ("ticket", [(3, "1d", "2h"), (1, "3d", "6h")], "15m"),
]
BY = "instance, job"


def camel(name):
    return "".join(w.capitalize() for w in name.split("_"))


def sel(metric_sel, extra=""):
    """metric{a} + extra matcher -> metric{a,extra}."""
    if not extra:
        return metric_sel
    if metric_sel.endswith("}"):
        return metric_sel[:-1] + "," + extra + "}"
    return metric_sel + "{" + extra + "}"


def le_matcher(le):
    """The bucket's le as the job writes it ("30") and as Prometheus 3 stores a classic
    histogram's ("30.0": it normalizes le to a float on ingestion); "0.5" is both."""
    return 'le=~"%s|%s\\\\.0"' % (le, le) if "." not in le else 'le="%s"' % le


def error_ratio(sli, w):
    kind = sli[0]
    if kind == "hist":
        _, m, s, le = sli
        count = "%s_count{%s}" % (m, s)
        bucket = "%s_bucket{%s}" % (m, (s + "," if s else "") + le_matcher(le))
        return ("(sum by (%s) (rate(%s[%s])) - sum by (%s) (rate(%s[%s])))\n"
                "/ sum by (%s) (rate(%s[%s]))" % (BY, count, w, BY, bucket, w, BY, count, w))
    if kind == "ratio":
        _, bad, total = sli
        return ("sum by (%s) (rate(%s[%s]))\n/ sum by (%s) (rate(%s[%s]))"
                % (BY, bad, w, BY, total, w))
    return "avg_over_time(newsflow:slo_errors:ratio{slo=\"%s\"}[%s])" % (sli[1], w)


def annotations(name, sev, budget, runbook):
    """An alert's annotations: the value-free text the tests expect too."""
    speed = "fast (page: 14.4x in 1h and 5m, or 6x in 6h and 30m)" if sev == "page" else \
        "steadily (ticket: 3x in 1d and 2h, or 1x in 3d and 6h)"
    return [("summary", "newsflow {{ $labels.instance }}: the %s SLO's error budget (%g %%) is "
             "burning %s" % (name.replace("_", " "), budget * 100, speed)),
            ("runbook", "docs/runbooks.md#%s" % runbook)]


def rules():
    out = ["# GENERATED by deploy/prometheus/slo.py from its SLO table: edit that, not this file.",
           "# newsflow's service-level objectives (docs/slo.md): each SLO's error ratio over seven",
           "# windows and the multi-window, multi-burn-rate alerts on its error budget.",
           "groups:", "  - name: newsflow-slo", "    rules:"]

    def rec(name, expr, labels):
        out.append("      - record: %s" % name)
        out.append("        expr: |")
        out.extend("          " + line for line in expr.split("\n"))
        out.append("        labels: {%s}" % ", ".join("%s: %s" % kv for kv in labels))

    for name, obj, sli, _, _ in SLOS:
        if sli[0] == "gauge":  # the instant share, averaged over each window below
            _, bad, total = sli
            rec("newsflow:slo_errors:ratio",
                "sum by (%s) (%s)\n/ sum by (%s) (%s)" % (BY, bad, BY, total), [("slo", name)])
            sli = ("gauge", name)
        for w in WINDOWS:
            rec("newsflow:slo_errors:ratio_rate" + w, error_ratio(sli, w), [("slo", name)])
    for name, obj, sli, runbook, what in SLOS:
        budget = round(1 - obj, 6)
        for sev, pairs, hold in ALERTS:
            alert = "Newsflow%sBudgetBurn%s" % (camel(name), "" if sev == "page" else "Slow")
            cond = []
            for burn, lw, sw in pairs:
                t = "%g * %g" % (burn, budget)
                cond.append(
                    "(\n  newsflow:slo_errors:ratio_rate%s{slo=\"%s\"} > %s\n  and\n"
                    "  newsflow:slo_errors:ratio_rate%s{slo=\"%s\"} > %s\n)" % (
                        lw, name, t, sw, name, t))
            out.append("      - alert: %s" % alert)
            out.append("        # SLO: %s (budget %g). %s." % (what, budget, "Fast burn: page"
                       if sev == "page" else "Slow burn: ticket"))
            out.append("        expr: |")
            out.extend("          " + line for line in "\nor\n".join(cond).split("\n"))
            out.append("        for: %s" % hold)
            out.append("        labels: {severity: %s, slo: %s}" % (sev, name))
            out.append("        annotations:")
            for k, v in annotations(name, sev, budget, runbook):
                out.append("          %s: \"%s\"" % (k, v))
    return "\n".join(out) + "\n"


# ---- the tests: series at one sample a minute, instance "x" ----

HEALTHY = 360  # minutes of history before a blip: its errors are 0.07 % of them, under every
#               budget (the least is 0.1 %), so the 3 d and 1 d windows stay under their rates
LAB = 'job="newsflow", instance="x"'


def counter(steps):
    """A counter from 0, in promtool's expanding notation ("a+bxn": n+1 values from a, b
    apart): steps is [(per-minute increase, minutes)]."""
    parts, v = ["0"], 0
    for inc, n in steps:
        parts.append("%g+%gx%d" % (v + inc, inc, n - 1))
        v += inc * n
    return " ".join(parts)


def gauge(first, steps):
    """A gauge: first, then [(value, minutes)] ("axn": n+1 values of a)."""
    return " ".join(["%g" % first] + ["%gx%d" % (v, n - 1) for v, n in steps])


def series(sli, phases, prom3=False):
    """Input series for phases [(error share, minutes)], 100 events a minute; prom3: the bucket's
    le as Prometheus 3 stores it ("30.0")."""
    kind = sli[0]
    total = [(100, n) for _, n in phases]
    good = [(100 * (1 - e), n) for e, n in phases]
    bad = [(100 * e, n) for e, n in phases]
    if kind == "hist":
        _, m, s, le = sli
        base = LAB + (", " + s if s else "")
        le = le + ".0" if prom3 and "." not in le else le
        return [("%s_count{%s}" % (m, base), counter(total)),
                ("%s_bucket{%s, le=\"%s\"}" % (m, base, le), counter(good))]
    if kind == "ratio":
        badsel = sli[1]
        route = badsel[badsel.index("{") + 1:badsel.index(",code")]
        m = badsel[:badsel.index("{")]
        return [("%s{%s, %s, code=\"5xx\"}" % (m, LAB, route), counter(bad)),
                ("%s{%s, %s, code=\"2xx\"}" % (m, LAB, route), counter(good))]
    # gauge: 1000 sources, the bad share as given
    m = sli[1][:sli[1].index("{")]
    return [("%s{%s, state=\"uncovered\"}" % (m, LAB),
             gauge(0, [(1000 * e, n) for e, n in phases])),
            ("%s{%s, state=\"covered\"}" % (m, LAB),
             gauge(1000, [(1000 * (1 - e), n) for e, n in phases]))]


def tests():
    out = ["# GENERATED by deploy/prometheus/slo.py: the SLO alerts' promtool tests",
           "# (`promtool test rules slo_test.yml`, run by tests/integration/test_alert_rules.sh).",
           "# Per SLO: a fast burn pages; a slow burn tickets and does not page; a one-minute",
           "# blip after six healthy hours does neither.",
           "rule_files:", "  - slo.yml", "", "evaluation_interval: 1m", "", "tests:"]

    def case(title, sli, phases, evals, prom3=False):
        out.append("  - name: \"%s\"" % title)
        out.append("    interval: 1m")
        out.append("    input_series:")
        for s, v in series(sli, phases, prom3):
            out.append("      - series: '%s'" % s)
            out.append("        values: '%s'" % v)
        out.append("    alert_rule_test:")
        for t, alert, labels in evals:
            out.append("      - eval_time: %s" % t)
            out.append("        alertname: %s" % alert)
            if labels:
                out.append("        exp_alerts:")
                out.append("          - exp_labels: {%s}" % labels[0])
                out.append("            exp_annotations:")
                for k, v in labels[1]:
                    out.append("              %s: \"%s\"" % (k, v.replace(
                        "{{ $labels.instance }}", "x")))
            else:
                out.append("        exp_alerts: []")

    for name, obj, sli, runbook, _ in SLOS:
        budget = 1 - obj
        page = "Newsflow%sBudgetBurn" % camel(name)
        ticket = page + "Slow"
        def lab(sev):
            return ("severity: %s, slo: %s, job: newsflow, instance: x" % (sev, name),
                    annotations(name, sev, round(budget, 6), runbook))
        fast = min(1.0, 20 * budget)
        case("%s: a fast burn (%g %% errors) pages" % (name, fast * 100), sli,
             [(fast, 30)], [("20m", page, lab("page"))])
        if sli[0] == "hist" and "." not in sli[3]:
            case("%s: a fast burn pages with le as Prometheus 3 stores it (%s.0)" % (
                name, sli[3]), sli, [(fast, 30)], [("20m", page, lab("page"))], prom3=True)
        case("%s: a slow burn (%g %% errors, twice the budget) tickets, does not page" % (
            name, 2 * budget * 100), sli, [(2 * budget, 120)],
            [("100m", ticket, lab("ticket")), ("100m", page, None)])
        case("%s: a one-minute blip of 25 %% errors after six healthy hours: neither" % name,
             sli, [(0, HEALTHY), (0.25, 1), (0, 30)],
             [("%dm" % (HEALTHY + 3), page, None), ("%dm" % (HEALTHY + 20), page, None),
              ("%dm" % (HEALTHY + 20), ticket, None)])
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(d, "slo.yml"), "w") as f:
        f.write(rules())
    with open(os.path.join(d, "slo_test.yml"), "w") as f:
        f.write(tests())
    print("slo.yml: %d SLOs, %d recording rules, %d alerts; slo_test.yml written" % (
        len(SLOS), len(SLOS) * len(WINDOWS) + 1, 2 * len(SLOS)))
