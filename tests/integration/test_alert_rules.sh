#!/usr/bin/env bash
# The operator's alerts (issue 21): deploy/prometheus/alerts.yml passes `promtool check rules`,
# its unit tests (alerts_test.yml: every alert fires on a series that should fire it and stays
# silent on one that should not) pass `promtool test rules`, every alert is tested there and
# names a runbook that exists in docs/runbooks.md, and every metric a rule reads is one the job
# exports (src/ registers it), so a renamed metric cannot leave a rule silently empty; and
# docs/metrics.md lists every metric src/ registers.
# $1 = newsflow binary, $2 = source dir.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
command -v promtool >/dev/null || fail "promtool not found (Debian: apt-get install prometheus)"
D="$SRC/deploy/prometheus"
promtool check rules "$D/alerts.yml" "$D/slo.yml" >"$TMP/check" 2>&1 || { cat "$TMP/check"; fail "promtool check rules"; }
(cd "$D" && promtool test rules alerts_test.yml) >"$TMP/test" 2>&1 || { cat "$TMP/test"; fail "promtool test rules"; }
pass "promtool check rules and test rules"

# The SLOs (issue 44): slo.yml and slo_test.yml are what slo.py writes from its table, and every
# SLO's fast burn pages, slow burn tickets (and does not page), and blip does neither.
python3 "$D/slo.py" "$TMP" >/dev/null
for f in slo.yml slo_test.yml; do
  cmp -s "$D/$f" "$TMP/$f" || fail "deploy/prometheus/$f differs from what slo.py writes"
done
(cd "$D" && promtool test rules slo_test.yml) >"$TMP/slo" 2>&1 || { tail -40 "$TMP/slo"; fail "promtool test rules slo_test.yml"; }
pass "SLO burn-rate alerts: a fast burn pages, a slow burn tickets, a blip does neither (8 SLOs)"
python3 "$SRC/tests/integration/ops_check.py" rules "$SRC" || fail "rules vs runbooks and metrics"
pass "every alert is tested, names a runbook, and reads metrics the job exports"
python3 "$SRC/scripts/metrics_doc.py" "$SRC" --check "$SRC/docs/metrics.md" || fail "docs/metrics.md"
pass "docs/metrics.md lists every metric src/ registers"

# Dashboards: the JSON is what deploy/grafana/dashboards.py writes, and every metric or recording
# rule a panel names exists (the test of the real scrape evaluates every query too).
python3 "$SRC/deploy/grafana/dashboards.py" "$TMP" >/dev/null
for f in "$SRC"/deploy/grafana/newsflow-*.json; do
  cmp -s "$f" "$TMP/$(basename "$f")" || fail "$(basename "$f") differs from what dashboards.py writes"
done
[ "$(ls "$SRC"/deploy/grafana/newsflow-*.json | wc -l)" = 6 ] || fail "six dashboards expected"
python3 "$SRC/tests/integration/ops_check.py" dashboards "$SRC" || fail "dashboard queries"
pass "six Grafana dashboards, generated, naming only metrics and rules that exist"
