#!/usr/bin/env bash
# scripts/cluster.sh, the production shape on loopback (issue 43): `up` starts 3 KRaft brokers,
# the topics, 3 newsflow processes with deploy/docker-compose.yml's environment and Prometheus
# with the repository's rules; feeds are added with `newsflow sources add` (through process 1,
# whatever process holds each feed's partition) and read events produced to the brokers. Then:
# every article of the feeds is in the articles topic exactly once (read_committed), every read
# event is counted once across the processes, each reader's interest updates, each article's
# story placement and each fetch attempt are in their topics once, the three processes are
# scraped, every query of
# the Grafana dashboards evaluates on that Prometheus and the key ones have series; `down`
# stops everything by pid, the processes cleanly. $1 = newsflow binary, $2 = source dir.
source "$(dirname "${BASH_SOURCE[0]}")/../integration/lib.sh" "$@"
HPID=""
cleanup() {
  [ -z "$HPID" ] || kill "$HPID" 2>/dev/null || true
  [ -d "$TMP/cluster" ] && bash "$SRC/scripts/cluster.sh" down --dir "$TMP/cluster" >/dev/null 2>&1
  if [ -n "${NF_KEEP_TMP:-}" ]; then echo "kept $TMP" >&2; else rm -rf "$TMP"; fi
}
fail() {
  echo "FAIL: $*" >&2
  for f in "$TMP"/cluster/newsflow-*.log; do [ -f "$f" ] && { echo "== $f" >&2; tail -3 "$f" >&2; }; done
  exit 1
}
C="$TMP/cluster"

# Ports below Linux's ephemeral range (other tests' free ports come from there) and outside
# kcluster.py's 20000-30999: BASE+10..BASE+90 and BASE+1000..BASE+1102 must all be free.
for _ in $(seq 50); do
  BASE=$((12000 + 200 * (RANDOM % 30)))
  python3 - "$BASE" <<'PY' && break
import socket, sys
b = int(sys.argv[1])
for p in [b + 10 * n + k for n in (1, 2, 3) for k in (0, 1, 2)] + [b + 90] + \
         [b + 1000 + i for i in range(3)] + [b + 1100 + i for i in range(3)]:
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        sys.exit(1)
    finally:
        s.close()
PY
  BASE=""
done
[ -n "$BASE" ] || fail "no free port range"

# The feeds, on a loopback HTTP server.
mkdir -p "$TMP/www"
cp "$SRC"/examples/feeds/{world.xml,wire.rss,science.atom} "$TMP/www/"
HPORT=$(free_port)
(cd "$TMP/www" && exec python3 -m http.server "$HPORT" --bind 127.0.0.1) 2>"$TMP/http.log" &
HPID=$!
FEEDS=(world.xml wire.rss science.atom)

timeout 300 bash "$SRC/scripts/cluster.sh" up --dir "$C" --bin "$NF" --port "$BASE" \
  --env NEWSFLOW_FETCH_ALLOW_PRIVATE=127.0.0.0/8 >"$TMP/up" 2>&1 || { cat "$TMP/up" >&2; fail "cluster.sh up"; }
BOOT=$(cat "$C/bootstrap")
grep -q "^newsflow-3: pid [0-9]*, http://127.0.0.1:$((BASE + 30))" "$TMP/up" || fail "status: $(cat "$TMP/up")"
# The processes run the compose file's environment (bar the loopback values).
grep -qx 'NEWSFLOW_KAFKA_TRANSACTIONAL_ID=newsflow-2' "$C/newsflow-2.env" || fail "process 2's identity"
grep -qx 'NEWSFLOW_SCALE_STANDBY_REPLICAS=1' "$C/newsflow-1.env" || fail "not the compose environment"
pass "cluster.sh up: 3 brokers, topics, 3 processes ready, Prometheus"

cli=(--set kafka.brokers="$BOOT" --set state.dir="$C/newsflow-1") # its admin.json: the ports
want="$TMP/want"
: >"$want"
for f in "${FEEDS[@]}"; do
  "$NF" sources add "http://127.0.0.1:$HPORT/$f" "${cli[@]}" >"$TMP/add" 2>&1 || { cat "$TMP/add" >&2; fail "sources add $f"; }
  grep -q "applied by the job at\|another process of the group holds" "$TMP/add" || fail "sources add: $(cat "$TMP/add")"
  NEWSFLOW_FETCH_ALLOW_PRIVATE=127.0.0.0/8 "$NF" parse "http://127.0.0.1:$HPORT/$f" --compact >"$TMP/parsed" ||
    fail "newsflow parse $f"
  python3 -c 'import json,sys; [print(a["article_id"]) for a in json.load(open(sys.argv[1]))["articles"]]' \
    "$TMP/parsed" >>"$want"
done
sort -u "$want" -o "$want"
NW=$(wc -l <"$want")
[ "$NW" -ge 5 ] || fail "only $NW articles in the feeds"

# Every article once, read_committed.
articles() {
  kcat -C -b "$BOOT" -t articles -X isolation.level=read_committed -e -q -f '%s\n' 2>/dev/null |
    python3 -c 'import json,sys; [print(json.loads(l)["article_id"]) for l in sys.stdin if l.strip()]'
}
wait_until() { # SECONDS COMMAND...: until COMMAND succeeds (a condition, not a clock) or time is up
  local end=$((SECONDS + $1))
  shift
  until "$@"; do
    [ $SECONDS -lt $end ] || return 1
    sleep 0.2
  done
}
all_articles() { [ "$(articles | sort -u | wc -l)" -ge "$NW" ]; }
wait_until 180 all_articles || true
articles >"$TMP/got"
sort "$TMP/got" | uniq -d >"$TMP/dups"
[ ! -s "$TMP/dups" ] || fail "articles more than once: $(head -3 "$TMP/dups")"
sort -u "$TMP/got" | cmp -s - "$want" || fail "the articles topic holds $(sort -u "$TMP/got" | wc -l) articles, the feeds $NW"
pass "every article of the $NW in the feeds is in the articles topic exactly once"

# Read events: each counted once across the processes.
M=300
python3 - "$want" "$M" >"$TMP/reads" <<'PY'
import json, sys, time
ids = [l.strip() for l in open(sys.argv[1])]
ms = int(time.time() * 1000)
for i in range(int(sys.argv[2])):
    u = "cu%d" % (i % 37)
    print("%s\t%s" % (u, json.dumps({"event_id": "ce-%d" % i, "user_id": u,
                                       "article_id": ids[i % len(ids)], "ts": ms})))
PY
kcat -P -b "$BOOT" -t read-events -K '\t' -l "$TMP/reads" || fail "kcat produce"
# A repeat of the first 50 (a producer's retry): counted once, by event_id.
head -50 "$TMP/reads" >"$TMP/again"
kcat -P -b "$BOOT" -t read-events -K '\t' -l "$TMP/again" || fail "kcat produce again"
counted() {
  local sum=0 v
  for n in 1 2 3; do
    v=$(curl -sf "http://127.0.0.1:$((BASE + 10 * n + 1))/metrics" |
      awk '$1 == "newsflow_read_events_total" {print $2}') || return 1
    sum=$((sum + ${v:-0}))
  done
  echo "$sum"
}
dups() {
  local sum=0 v
  for n in 1 2 3; do
    v=$(curl -sf "http://127.0.0.1:$((BASE + 10 * n + 1))/metrics" |
      awk '$1 == "newsflow_read_event_duplicates_total" {s += $2} END {print s + 0}') || return 1
    sum=$((sum + v))
  done
  echo "$sum"
}
all_counted() { [ "$(counted)" -ge "$M" ] && [ "$(dups)" -ge 50 ]; }
wait_until 180 all_counted || true
[ "$(counted)" -eq "$M" ] || fail "read events counted: $(counted), want $M"
[ "$(dups)" -eq 50 ] || fail "repeated read events counted as duplicates: $(dups), want 50"
pass "$M read events counted once across the processes; 50 repeats counted as duplicates"

# Every output once (read_committed): each reader's interest-updates versions are 1..n for its
# n distinct events (an update per counted event, none twice, none lost); each article has one
# story-clusters record, which placed it (new, joined, or merged clusters); every fetch-log
# fetch_id is one attempt.
out() { kcat -C -b "$BOOT" -t "$1" -X isolation.level=read_committed -e -q -f '%s\n' 2>/dev/null; }
# A reader's read of an article counts once per session (the interest engine's seen set): the
# reads here carry no session, so one update per distinct (reader, article).
NIU=$(python3 -c 'import json,sys; print(len({(json.loads(l.split("\t",1)[1])["user_id"], json.loads(l.split("\t",1)[1])["article_id"]) for l in open(sys.argv[1])}))' "$TMP/reads")
all_updates() { [ "$(out interest-updates | grep -c '"user_id":"cu')" -ge "$NIU" ]; }
wait_until 180 all_updates || true
out interest-updates >"$TMP/iu"
out story-clusters >"$TMP/sc"
out fetch-log >"$TMP/fl"
python3 - "$TMP/reads" "$TMP/iu" "$TMP/sc" "$TMP/fl" "$want" <<'PY' || fail "outputs not exactly once"
import collections, json, sys
reads, iu, sc, fl, want = sys.argv[1:]
events = collections.defaultdict(set)  # reader -> the articles it read (no sessions here)
for line in open(reads):
    v = json.loads(line.split("\t", 1)[1])
    events[v["user_id"]].add(v["article_id"])
versions = collections.defaultdict(list)
for line in open(iu):
    v = json.loads(line)
    if v["user_id"] in events:
        versions[v["user_id"]].append(v["version"])
for u, ev in events.items():
    assert sorted(versions[u]) == list(range(1, len(ev) + 1)), (u, len(ev), sorted(versions[u]))
placed = collections.Counter(json.loads(l)["article_id"] for l in open(sc))
arts = {l.strip() for l in open(want)}
assert set(placed) == arts and all(n == 1 for n in placed.values()), placed
ids = [json.loads(l)["fetch_id"] for l in open(fl)]
assert ids and len(ids) == len(set(ids)), (len(ids), len(set(ids)))
print("%d readers' updates, %d articles placed once, %d fetch attempts" %
      (len(events), len(placed), len(ids)))
PY
pass "interest-updates, story-clusters and fetch-log: every record once"

# Prometheus: three targets up, every dashboard query evaluates, the key series exist.
PROM="http://127.0.0.1:$((BASE + 90))"
q() { curl -sf -G "$PROM/api/v1/query" --data-urlencode "query=$1"; }
three_up() { q 'count(up{job="newsflow"} == 1)' 2>/dev/null | grep -q '"value":\[[0-9.]*,"3"\]'; }
wait_until 120 three_up || true
q 'count(up{job="newsflow"} == 1)' | grep -q '"value":\[[0-9.]*,"3"\]' || fail "Prometheus does not scrape the 3 processes"
rated() { q 'sum(increase(newsflow_read_events_total[1m]))' | grep -q '"value":\[[0-9.]*,"[1-9]'; }
wait_until 120 rated || true # two scrapes of each after the reads (rates need two samples)
dashboard_queries "$PROM"
for expr in 'sum(newsflow_read_events_total)' 'sum(increase(newsflow_read_events_total[1m]))' \
  'newsflow:kafka_consumer_lag:sum' 'sum(newsflow_epoch_outputs_total)'; do
  q "$expr" | grep -q '"result":\[{' || fail "no series for $expr"
done
pass "Prometheus scrapes the 3 processes; all $DASHBOARD_QUERIES dashboard queries evaluate, the key series are there"

pids=$(cat "$C"/newsflow-*.pid "$C/prometheus.pid")
bash "$SRC/scripts/cluster.sh" down --dir "$C" >"$TMP/down" 2>&1 || fail "cluster.sh down: $(cat "$TMP/down")"
for p in $pids; do
  ! kill -0 "$p" 2>/dev/null || fail "pid $p still runs after down"
done
for n in 1 2 3; do
  grep -q '"msg":"newsflow stopped".*"exit_code":0' "$C/newsflow-$n.log" || fail "process $n did not stop cleanly"
done
for f in "$C"/kafka/node-*/pid; do
  if [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null; then
    fail "broker $(dirname "$f") still runs after down"
  fi
done
pass "cluster.sh down: every process stopped by its pid, the job's cleanly"
