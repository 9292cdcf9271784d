#!/usr/bin/env bash
# The sources topic, end to end (src/actors/ingest.h): Kafka (a standalone mock cluster, or a real
# broker: see below), a loopback HTTP server with one RSS file, and `newsflow run` with no
# configured sources at all.
#   run 1  a sources record defines src-topic-1 (interval 60 s) -> the feed is crawled and its
#          articles reach the articles topic (read_committed); a malformed record and one with an
#          ftp:// URL land in dead-letters with their reasons.
#   run 2  after a restart the topic source is restored from state (not re-read from the topic):
#          crawled again on its schedule (~60 s after the first fetch, not at start-up); the
#          articles are still there exactly once. Then a tombstone (kcat -Z) removes it.
#   run 3  after another restart nothing is crawled: no fetch past the time it would have been due.
# $1 = newsflow binary, $2 = source dir. NF_KEEP_TMP=1 keeps the temp dir (logs, sink files).
# NF_TEST_BROKER: unset, "" or "mock": a `newsflow mock-kafka` of its own (2 partitions);
# "kafka:HOST:PORT[,HOST:PORT...]": a real cluster (shared with other tests): this run's topics
# are created (`newsflow topics create`, 4 partitions) under a unique kafka.topic_prefix
# "nft-sources-topic-<pid>-<hex>.", with a group and transactional id of their own. The checks are
# the same; dead letters name the topic as the broker does (origin.topic = PREFIXsources).
set -uo pipefail
NF="$1"
# $2 (the source dir) is not needed: the feed and the server are written here.
NAME=sources_topic
if ! command -v kcat >/dev/null 2>&1; then
  echo "FAIL: kcat is not installed (needed to produce and consume the job's topics; scripts/deps.sh installs it)" >&2
  exit 1
fi
command -v python3 >/dev/null 2>&1 || { echo "FAIL: python3 is not installed" >&2; exit 1; }
for v in $(env | grep -o '^NEWSFLOW_[A-Z_]*' || true); do unset "$v"; done
unset NF_FAULT NF_TEST_SLOW_READS_US

T=$(mktemp -d /tmp/nf-sources-topic-XXXXXX)
PIDS=()
cleanup() {
  # Only what this script started, by pid, newest first.
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    kill -TERM "${PIDS[i]}" 2>/dev/null
  done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
  done
  if [ -n "${NF_KEEP_TMP:-}" ]; then echo "keeping $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

T0=$(date +%s)
log() { echo "[$NAME $(($(date +%s) - T0))s] $*"; }
fail() {
  echo "FAIL [$NAME]: $*" >&2
  for f in "$T"/run*.err; do
    [ -f "$f" ] || continue
    echo "---- last lines of $f ----" >&2
    grep -v '"level":"debug"' "$f" | tail -n 15 >&2
  done
  exit 1
}
# wait_for WHAT TIMEOUT_S CMD...: polls CMD until it succeeds (the deadline only turns a hang into
# a message; it is not a measured assertion). What waits on an epoch's commit gets 180 s: the job
# itself retries a flush and a commit for up to 60 s each before it gives up (a broker starved
# by a CPU hog and other suites answers that slowly; the CI's hog pass saw one epoch take > 60 s).
wait_for() {
  local what="$1" t="$2"
  shift 2
  local end=$(($(date +%s) + t))
  until "$@"; do
    [ "$(date +%s)" -lt "$end" ] || fail "timed out after ${t}s waiting for $what"
    sleep 0.3
  done
}

# ---- the feed, served on loopback
mkdir -p "$T/www"
cat >"$T/www/feed.xml" <<'EOF'
<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0"><channel><title>Topic test</title><link>http://news.example/</link>
<item><title>One</title><link>http://news.example/topic-test/1</link><description>first</description></item>
<item><title>Two</title><link>http://news.example/topic-test/2</link><description>second</description></item>
<item><title>Three</title><link>http://news.example/topic-test/3</link><description>third</description></item>
</channel></rss>
EOF
python3 -u - "$T/www" "$T/http.port" >"$T/http.log" 2>&1 <<'EOF' &
import functools, http.server, sys
h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), h)
open(sys.argv[2], "w").write(str(s.server_address[1]))
s.serve_forever()
EOF
PIDS+=($!)
wait_for "the HTTP server's port" 20 test -s "$T/http.port"
URL="http://127.0.0.1:$(cat "$T/http.port")/feed.xml"

# ---- the broker
PREFIX=""
case "${NF_TEST_BROKER:-}" in
  "" | mock)
    "$NF" mock-kafka --partitions 2 </dev/null >"$T/mock.out" 2>"$T/mock.err" &
    PIDS+=($!)
    wait_for "mock-kafka's bootstrap line" 30 grep -q '^bootstrap=' "$T/mock.out"
    B=$(sed -n 's/^bootstrap=//p' "$T/mock.out" | head -n 1)
    log "broker: mock cluster (newsflow mock-kafka) at $B; feed at $URL"
    ;;
  kafka:*)
    B="${NF_TEST_BROKER#kafka:}"
    HP='[A-Za-z0-9._-]+:[0-9]{1,5}'
    [[ "$B" =~ ^$HP(,$HP)*$ ]] ||
      fail "NF_TEST_BROKER=$NF_TEST_BROKER: want kafka:HOST:PORT[,HOST:PORT...]"
    PREFIX="nft-sources-topic-$$-$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')."
    log "broker: real Kafka at $B, topic prefix $PREFIX; feed at $URL"
    "$NF" topics create --set kafka.brokers="$B" --set kafka.topic_prefix="$PREFIX" \
      --partitions 4 </dev/null >"$T/topics.out" 2>"$T/topics.err" ||
      fail "newsflow topics create failed: $(cat "$T/topics.out" "$T/topics.err" | tail -n 12)"
    log "topics: $(tr '\n' ';' <"$T/topics.out")"
    ;;
  *)
    fail "NF_TEST_BROKER=$NF_TEST_BROKER: want mock or kafka:HOST:PORT[,HOST:PORT...]"
    ;;
esac
# The job's Kafka settings: on a real broker also the run's prefix, group and transactional id
# (the same in every run: a restart fences its predecessor).
KSET=(--set kafka.brokers="$B")
if [ -n "$PREFIX" ]; then
  KSET+=(--set kafka.topic_prefix="$PREFIX" --set kafka.group_id="${PREFIX}group"
    --set kafka.transactional_id="${PREFIX}tx")
fi

produce() { # produce TSVFILE [extra kcat args]: key<TAB>value lines
  local f="$1"
  shift
  kcat -b "$B" -P -t "${PREFIX}sources" -K '\t' -l "$@" "$f" 2>>"$T/kcat.err" ||
    fail "kcat produce $f failed"
}
consume() { # consume TOPIC: every record, read_committed, as key<TAB>value lines
  timeout 120 kcat -b "$B" -C -t "$PREFIX$1" -e -q -X isolation.level=read_committed \
    -f '%k\t%s\n' 2>>"$T/kcat.err"
}

JOB=""
start_job() { # start_job TAG: runs the job (log TAG.err, sink TAG.jsonl)
  "$NF" run "${KSET[@]}" --set kafka.assignment=all --set state.dir="$T/state" \
    --set sink.spec="jsonl:$T/$1.jsonl" --set fetch.allow_private=127.0.0.0/8 \
    --set checkpoint.interval_ms=300 --set runtime.shards=2 --set admin.enabled=false \
    --set crawl.interval_floor_s=60 --set crawl.jitter_permille=0 --set log.level=debug \
    --set kafka.properties=fetch.wait.max.ms=10 \
    </dev/null >"$T/$1.out" 2>"$T/$1.err" &
  JOB=$!
  PIDS+=("$JOB")
  log "$1 started (pid $JOB)"
}
stop_job() { # stop_job TAG: SIGTERM (final epoch) and a clean exit
  kill -TERM "$JOB" 2>/dev/null
  local rc=0
  wait "$JOB" || rc=$?
  [ "$rc" -eq 0 ] || fail "$1 exited with $rc after SIGTERM"
  log "$1 stopped"
}
job_alive() { kill -0 "$JOB" 2>/dev/null || fail "the job exited unexpectedly"; }

# Helpers over the outputs (python: JSON).
count_articles() { consume articles | python3 -c '
import json, sys
n = 0
for l in sys.stdin:
    k, v = l.rstrip("\n").split("\t", 1)
    if json.loads(v).get("source_id") == "src-topic-1":
        n += 1
print(n)'; }
articles_at_least() { job_alive; [ "$(count_articles)" -ge "$1" ]; }
fetches() { # fetches SINKFILE...: fetched_at (ms) of each fetch-log record for $URL
  python3 - "$URL" "$@" <<'EOF'
import calendar, json, sys, time
url = sys.argv[1]
for path in sys.argv[2:]:
    try:
        lines = open(path).read().split("\n")
    except FileNotFoundError:
        continue
    for l in lines:
        try:
            o = json.loads(l)
        except ValueError:
            continue
        v = o.get("value") or {}
        if o.get("topic") == "fetch-log" and v.get("url") == url:
            t = v["fetched_at"]  # 2026-01-02T03:04:05.678Z
            ms = calendar.timegm(time.strptime(t[:19], "%Y-%m-%dT%H:%M:%S")) * 1000 + int(t[20:23])
            print(ms)
EOF
}
nfetches() { fetches "$@" | wc -l; }
fetches_at_least() { # fetches_at_least N SINKFILE...
  local n="$1"
  shift
  job_alive
  [ "$(nfetches "$@")" -ge "$n" ]
}
logged() { grep -q "$2" "$T/$1.err"; }

# ---- records: one valid source, two that must be dead-lettered
printf 'src-topic-1\t{"url":"%s","type":"rss","interval_s":60,"status":"active"}\n' "$URL" >"$T/p1.tsv"
printf 'bad-json\t{"url": "http://127.0.0.1/x", oops\n' >>"$T/p1.tsv"
printf 'bad-url\t{"url":"ftp://example.com/feed.xml"}\n' >>"$T/p1.tsv"
produce "$T/p1.tsv"

# ---- run 1
start_job run1
wait_for "3 articles of src-topic-1 in the articles topic" 180 articles_at_least 3
wait_for "the first fetch in run1's sink" 30 fetches_at_least 1 "$T/run1.jsonl"
dead_letters_ok() {
  job_alive
  consume dead-letters | python3 -c '
import json, sys
topic = sys.argv[1]  # the sources topic as the broker names it (with the prefix)
seen = {"invalid JSON": 0, "scheme is not http or https": 0}  # bad-json, bad-url
for l in sys.stdin:
    k, v = l.rstrip("\n").split("\t", 1)
    o = json.loads(v)
    if o["origin"]["topic"] != topic or o["stage"] != "decode":
        continue
    for reason in seen:
        if reason in o["error"]:
            seen[reason] += 1
sys.exit(0 if all(n == 1 for n in seen.values()) else 1)' "${PREFIX}sources"
}
wait_for "both bad sources records in dead-letters (stage decode, with their reasons)" 180 \
  dead_letters_ok
stop_job run1
[ "$(count_articles)" -eq 3 ] || fail "run1: $(count_articles) articles of src-topic-1, want 3"
FIRST=$(fetches "$T/run1.jsonl" | head -n 1)
[ "$(nfetches "$T/run1.jsonl")" -eq 1 ] || fail "run1 fetched the feed $(nfetches "$T/run1.jsonl") times, want 1"
log "run1: 3 articles, 1 fetch, 2 dead letters"

# ---- run 2: restored from state, crawled again on schedule
start_job run2
wait_for "run2 to restore the topic source from state" 30 logged run2 '"msg":"sources assigned".*"from_topic":1'
wait_for "the second fetch (~60 s after the first)" 120 fetches_at_least 1 "$T/run2.jsonl"
SECOND=$(fetches "$T/run2.jsonl" | head -n 1)
GAP=$((SECOND - FIRST))
[ "$GAP" -ge 55000 ] || fail "second fetch ${GAP} ms after the first: the restart did not keep the schedule (interval 60 s)"
log "run2: fetched again ${GAP} ms after the first fetch"
sleep 2 # the fetch's epoch commits
[ "$(count_articles)" -eq 3 ] || fail "run2: $(count_articles) articles of src-topic-1, want exactly 3"

printf 'src-topic-1\t\n' >"$T/p2.tsv"
produce "$T/p2.tsv" -Z
wait_for "run2 to apply the tombstone" 30 logged run2 '"msg":"source removed".*src-topic-1'
stop_job run2

# ---- run 3: the removal survived the restart; nothing is crawled when it would have been due
start_job run3
wait_for "run3 to start" 30 logged run3 '"msg":"newsflow started"'
! logged run3 '"msg":"sources assigned"' || fail "run3 restored sources after the tombstone"
DUE_MS=$((SECOND + 60000 + 15000))
while [ "$(($(date +%s%3N)))" -lt "$DUE_MS" ]; do
  job_alive
  sleep 1
done
N2=$(nfetches "$T/run2.jsonl")
N3=$(nfetches "$T/run3.jsonl")
if [ "$N2" -ne 1 ] || [ "$N3" -ne 0 ]; then
  fail "fetches after the tombstone: run2 $N2 (want 1), run3 $N3 (want 0)"
fi
stop_job run3

[ "$(count_articles)" -eq 3 ] || fail "at the end: $(count_articles) articles of src-topic-1, want 3"
python3 - <<EOF || fail "articles not exactly once"
import json, subprocess
out = subprocess.run(["kcat", "-b", "$B", "-C", "-t", "${PREFIX}articles", "-e", "-q", "-X",
                      "isolation.level=read_committed", "-f", "%s\n"],
                     capture_output=True, text=True, timeout=120).stdout
urls = [json.loads(l)["url"] for l in out.split("\n") if l]
want = ["http://news.example/topic-test/%d" % i for i in (1, 2, 3)]
assert sorted(urls) == want, urls
EOF
log "passed: 3 articles exactly once, crawled across a restart, stopped by the tombstone"
echo "test_$NAME: passed"
