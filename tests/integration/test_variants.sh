#!/usr/bin/env bash
# test_variants.sh — ranking experiments (issue 45; src/engine/variants.h). A job ranks feeds
# under three served variants and a shadow with the seed's weights; 465 readers' feeds name the
# variant nfhash.py (an independent port of the hash) assigns them. The assignments stay the same
# across a kill -9 and restart and in a second process of its own; feeds served are counted by
# variant, and the shadow's overlap with each served variant is observed once per ranked feed —
# with the seed's weights, 1 for every seed reader (each variant's ranking itself is
# test_query_feed.sh's model's to check). Reads posted through the edge are
# counted once by the variant they name, "none" and "other" included. The second process ranks
# the shadow beside 30 % of the feeds (ranking.shadow_percent). A bad variant list is refused at
# start with the entry at fault.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

variants="seed share=34,fresh share=33 decay=1 trending=0.3,slow share=33 decay=0.3,twin shadow"
chk() { PYTHONPATH="$SRC/tests/integration" python3 "$SRC/tests/integration/variants_check.py" "$@"; }
python3 "$SRC/tests/integration/feed_model.py" gen "$TMP/feeds" 150 "$SRC/config/taxonomy.json"
cd "$SRC"
start() { # start STATE_DIR PORT [--set K=V...]: a job with the variants, its pid in PID
  "$NF" run --config config/newsflow.json --set sources.file="$TMP/feeds/sources.txt" \
    --set state.dir="$1" --set admin.port="$2" --set checkpoint.interval_ms=300 \
    --set demo.read_events_per_s=3000 --set demo.users=500 --set demo.events=3000 \
    --set ranking.variants="$variants" "${@:3}" >>"$TMP/out" 2>>"$TMP/err" &
  PID=$!
}
events() { curl -fs "http://127.0.0.1:$1/metrics" 2>/dev/null |
  awk '/^newsflow_read_event(s|_duplicates)_total[ {]/ {s += $NF} END {printf "%d", s}'; }
# ready PORT [EVENTS]: EVENTS read events counted (default: none) and a reader's vector committed
# (asked of the interest route: a feed asked here would count in newsflow_ranking_feeds_total)
ready() {
  for _ in $(seq 600); do
    kill -0 "$PID" 2>/dev/null || fail "the job exited"
    if [ "$(events "$1")" -ge "${2:-0}" ] &&
      curl -fs "http://127.0.0.1:$1/v1/users/demo-user-1/interest" >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.2
  done
  fail "the job on port $1 never counted ${2:-0} events with a vector committed ($(events "$1"))"
}

# A bad list: refused at start, exit 2, the entry named.
set +e
"$NF" run --config config/newsflow.json --set state.dir="$TMP/bad" \
  --set ranking.variants="seed share=50,fresh share=40" >/dev/null 2>"$TMP/bad.err"
rc=$?
set -e
[ "$rc" = 2 ] || fail "a bad ranking.variants exited $rc, not 2"
grep -q "ranking.variants: the served variants' shares add up to 90, not 100" "$TMP/bad.err" ||
  fail "the refusal does not say why: $(cat "$TMP/bad.err")"

port=$(free_port)
start "$TMP/a" "$port"
ready "$port" 3000 # the demo's: none of them counts as a duplicate of the posted reads then
chk feeds "http://127.0.0.1:$port" "$variants" "$TMP/a1.json" || fail "assignments (first run)"
chk metrics "http://127.0.0.1:$port" "$TMP/a1.json" || fail "metrics (first run)"
chk reads "http://127.0.0.1:$port" "$variants" || fail "reads by variant"

kill -9 "$PID"
wait "$PID" 2>/dev/null || true
start "$TMP/a" "$port"
ready "$port"
chk feeds "http://127.0.0.1:$port" "$variants" "$TMP/a2.json" || fail "assignments (restarted)"
chk same "$TMP/a1.json" "$TMP/a2.json" || fail "a restart moved readers"
chk metrics "http://127.0.0.1:$port" "$TMP/a2.json" || fail "metrics (restarted)"
stop_job
[ "$RC" = 0 ] || fail "the job exited $RC"

port2=$(free_port)
start "$TMP/b" "$port2" --set ranking.shadow_percent=30
ready "$port2" 3000
chk feeds "http://127.0.0.1:$port2" "$variants" "$TMP/b.json" || fail "assignments (another process)"
chk metrics "http://127.0.0.1:$port2" "$TMP/b.json" 30 || fail "the shadow's sample (another process)"
chk same "$TMP/a1.json" "$TMP/b.json" || fail "another process assigned other variants"
stop_job
[ "$RC" = 0 ] || fail "the second job exited $RC"
pass "test_variants"
