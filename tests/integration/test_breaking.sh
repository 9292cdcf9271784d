#!/usr/bin/env bash
# test_breaking.sh — breaking news (issue 45; src/engine/breaking.h) against an independent model
# (breaking_model.py) over the job's committed records: the job ingests generated feeds and a
# steady stream of demo reads, ranks 20 s trending windows every 2 s, and three bursts of reads
# of one story go through the edge — the first makes it break, the second comes within its
# cooldown (30 s of windows: no second record), the third after it (announced again). The
# breaking-news records must be the model's exactly (story, lead, topic, reads, baseline, peers,
# window), every output record must match its schema (schemas/, validate.py), and
# newsflow_breaking_news_total must count them. Crashes: tests/recovery/acc_analytics.py.
# Notifications (src/engine/notify.h): before the first burst 38 readers subscribe to one topic
# each (every topic of the taxonomy twice) and 8 to every topic; the even ones of each group
# unsubscribe after the first announcement; two more bursts of other stories follow the third.
# With notifications.daily_cap=2 the notifications records must be what notify_model.py explains
# from the breaking-news records (once per reader and story, the cap — the third story is held
# back from the readers of every topic —, the settings), and
# newsflow_notifications_total{outcome="sent"} must count them.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

port=$(free_port)
base="http://127.0.0.1:$port"
model() { python3 "$SRC/tests/integration/breaking_model.py" "$@"; }
python3 "$SRC/tests/integration/feed_model.py" gen "$TMP/feeds" 150 "$SRC/config/taxonomy.json"
cd "$SRC"
"$NF" run --config config/newsflow.json --set sources.file="$TMP/feeds/sources.txt" \
  --set state.dir="$TMP/state" --set admin.port="$port" --set checkpoint.interval_ms=300 \
  --set demo.read_events_per_s=600 --set demo.users=300 --set trending.window_s=20 \
  --set trending.slide_s=2 --set trending.lateness_ms=200 --set trending.exact=true \
  --set breaking.min_reads=5 --set breaking.min_peers=1 --set breaking.cooldown_s=30 \
  --set notifications.daily_cap=2 >"$TMP/out" 2>"$TMP/err" &
PID=$!
windows() { grep -c '"topic":"trending"' "$TMP/out" || true; }
news() { grep -c "\"topic\":\"breaking-news\",\"key\":\"$1\"" "$TMP/out" || true; }
end_of_last() { grep '"topic":"trending"' "$TMP/out" | tail -1 | sed 's/.*"window_end":"\([^"]*\)".*/\1/'; }
# wait_for WHAT CMD...: CMD true within 120 s (asked every 0.2 s), the job alive
wait_for() {
  local what="$1"
  shift
  for _ in $(seq 600); do
    kill -0 "$PID" 2>/dev/null || fail "the job exited"
    "$@" && return 0
    sleep 0.2
  done
  fail "$what: not within 120 s"
}
has_topics() { [ "$(windows)" -ge 5 ] && grep '"topic":"trending"' "$TMP/out" | tail -1 | grep -q '"topic":"[a-z]'; }
# the first burst waits for a topic with three entries in the last window (a baseline)
burst_one() { story=$(model burst "$base" "$TMP/out" 2000 2>/dev/null); }
notify() { python3 "$SRC/tests/integration/notify_model.py" "$@"; }
mapfile -t topics < <(python3 -c 'import json, sys; print("\n".join(t["name"] for t in json.load(open(sys.argv[1]))["topics"]))' config/taxonomy.json)
wait_for "the job's API" curl -fs "$base/healthz" -o /dev/null
notify settings "$base" "$TMP/out" "$TMP/plan" subscribe $((2 * ${#topics[@]})) 8 "${topics[@]}" ||
  fail "subscribing"
wait_for "trending windows with topics" has_topics
wait_for "a trending topic with three entries" burst_one
announced() { [ "$(news "$story")" -ge "$1" ]; } # asked anew at each try
wait_for "the story $story announced" announced 1
notify settings "$base" "$TMP/out" "$TMP/plan" unsubscribe $((2 * ${#topics[@]})) 8 "${topics[@]}" ||
  fail "unsubscribing"
# Within the cooldown: the story, still far ahead, is not announced again.
first_end=$(grep "\"topic\":\"breaking-news\",\"key\":\"$story\"" "$TMP/out" | head -1 |
  sed 's/.*"window_end":"\([^"]*\)".*/\1/')
model burst "$base" "$TMP/out" 2000 "$story" >/dev/null || fail "the second burst"
past() { python3 -c "import sys; from datetime import datetime as d; f=lambda s: d.fromisoformat(s.replace('Z','+00:00')); sys.exit(0 if (f(sys.argv[2]) - f(sys.argv[1])).total_seconds() >= float(sys.argv[3]) else 1)" "$first_end" "$(end_of_last)" "$1"; }
wait_for "windows 20 s past the first announcement" past 20
[ "$(news "$story")" = 1 ] || fail "the story was announced again within its cooldown"
# After the cooldown (30 s of windows): announced again when it still breaks.
wait_for "windows 32 s past the first announcement" past 32
model burst "$base" "$TMP/out" 2000 "$story" >/dev/null || fail "the third burst"
wait_for "the story $story announced again after its cooldown" announced 2
# Two other stories: the readers of every topic get the first, the cap holds back the second.
told() { [ "$(news "$1")" -ge 1 ]; }
story2=$(model burst "$base" "$TMP/out" 2000 "not:$story") || fail "a burst of another story"
wait_for "the story $story2 announced" told "$story2"
story3=$(model burst "$base" "$TMP/out" 2000 "not:$story,$story2") || fail "a burst of a third"
wait_for "the story $story3 announced" told "$story3"
counted=$(curl -fs "$base/metrics" | awk '$1 == "newsflow_breaking_news_total" {print $2}')
sent=$(curl -fs "$base/metrics" | awk '$1 == "newsflow_notifications_total{outcome=\"sent\"}" {print $2}')
stop_job
[ "$RC" = 0 ] || fail "the job exited $RC"
n=$(grep -c '"topic":"breaking-news"' "$TMP/out")
[ "${counted:-0}" -le "$n" ] && [ "${counted:-0}" -ge 2 ] ||
  fail "newsflow_breaking_news_total ${counted:-none}, $n records committed"
model check "$TMP/out" 3 5 1 30 2 || fail "breaking_model.py"
notify check "$TMP/out" "$TMP/plan" 2 10 4 || fail "notify_model.py"
notes=$(grep -c '"topic":"notifications"' "$TMP/out")
[ "${sent:-0}" -le "$notes" ] && [ "${sent:-0}" -ge 4 ] ||
  fail "newsflow_notifications_total{outcome=\"sent\"} ${sent:-none}, $notes records committed"
python3 "$SRC/tests/schemas/validate.py" --schemas "$SRC/schemas" "$TMP/out" >"$TMP/validate" 2>&1 ||
  fail "the output does not match the schemas: $(head -5 "$TMP/validate")"
pass "test_breaking ($n breaking-news records, the model's; the story $story twice, 30 s apart;" \
  "$notes notifications, the model's)"
