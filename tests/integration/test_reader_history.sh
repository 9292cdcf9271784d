#!/usr/bin/env bash
# GET /v1/users/{user}/reads (issue 38): a reader's counted events from the committed state,
# newest first, each kind apart and a repeat once; limit= bounds it; another reader has none.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

port=$(free_port)
python3 "$SRC/tests/integration/feed_model.py" gen "$TMP/feeds" 200 "$SRC/config/taxonomy.json"
cd "$SRC"
"$NF" run --config config/newsflow.json --set state.dir="$TMP/state" --set admin.port="$port" \
  --set sources.file="$TMP/feeds/sources.txt" --set demo.read_events_per_s=0 \
  --set interest.unknown_articles=empty --set interest.history=all \
  --set checkpoint.interval_ms=300 >"$TMP/out" 2>"$TMP/err" &
PID=$!
url="http://127.0.0.1:$port"
for _ in $(seq 200); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/v1/topics")" = 200 ] && break
  kill -0 "$PID" 2>/dev/null || fail "the job exited"
  sleep 0.2
done
t=$(( ($(date +%s) - 60) * 1000 ))
ev() { printf '{"user_id":"%s","article_id":"%s","session_id":"s1","kind":"%s","ts":%d}\n' "$@"; }
{ ev hist a1 read "$t"; ev hist a1 save $((t + 1000)); ev hist a2 read $((t + 2000))
  ev hist a1 read "$t"; } >"$TMP/batch"
c=$(curl -s -o "$TMP/post" -w '%{http_code}' -X POST \
  -H 'Content-Type: application/x-ndjson' --data-binary @"$TMP/batch" "$url/v1/events")
[ "$c" = 202 ] || fail "POST /v1/events: $c $(cat "$TMP/post")"
for _ in $(seq 150); do
  curl -s "$url/v1/users/hist/reads" >"$TMP/reads" 2>/dev/null
  python3 -c 'import json,sys; sys.exit(0 if len(json.load(open(sys.argv[1])).get("items",[])) >= 3 else 1)' \
    "$TMP/reads" 2>/dev/null && break
  kill -0 "$PID" 2>/dev/null || fail "the job exited"
  sleep 0.2
done
python3 - "$TMP/reads" "$t" <<'PY' || fail "the history: $(cat "$TMP/reads")"
import json, sys, time
d = json.load(open(sys.argv[1]))
t = int(sys.argv[2])
iso = lambda ms: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms // 1000))
want = [("a2", "read", iso(t + 2000)), ("a1", "save", iso(t + 1000)), ("a1", "read", iso(t))]
got = [(i["article_id"], i["kind"], i["ts"]) for i in d["items"]]
assert got == want, "got %r, want %r" % (got, want)
assert d["user_id"] == "hist" and "epoch" in d, d
PY
n=$(curl -s "$url/v1/users/hist/reads?limit=2" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))')
[ "$n" = 2 ] || fail "limit=2 gave $n items"
n=$(curl -s "$url/v1/users/nobody/reads" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))')
[ "$n" = 0 ] || fail "a reader without reads has $n items"
c=$(curl -s -o /dev/null -w '%{http_code}' "$url/v1/users/hist/reads?limit=0")
[ "$c" = 400 ] || fail "limit=0: $c, want 400"
# A hidden article leaves the reader's feed: five reads of one topic make it the reader's, a
# sixth article of that topic is in the feed, hidden it is not (the vector still favours the
# topic: 5 reads against one hide), the others still are.
python3 - "$url" "$PID" <<'PY' || fail "hide: see above"
import json, os, sys, time, urllib.request
url, pid = sys.argv[1], int(sys.argv[2])
def get(path):
    with urllib.request.urlopen(url + path, timeout=10) as r:
        return json.load(r)
def post(events):
    body = "\n".join(json.dumps(e) for e in events).encode()
    req = urllib.request.Request(url + "/v1/events", data=body, method="POST",
                                 headers={"Content-Type": "application/x-ndjson"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 202, r.status
def wait(what, pred, seconds=90):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        os.kill(pid, 0)
        got = pred()
        if got:
            return got
        time.sleep(0.3)
    sys.exit("timed out waiting for " + what)
def topic_with(n):
    for t in get("/v1/topics")["topics"]:
        items = [i["article_id"] for i in get("/v1/topics/%s/recent?limit=20" % t)["items"]]
        if len(items) >= n:
            return t, items
    return None
topic, arts = wait("a topic with 7 recent articles", lambda: topic_with(7))
now = int(time.time() * 1000) - 30000
post([{"user_id": "hider", "article_id": a, "session_id": "s", "ts": now + i}
      for i, a in enumerate(arts[:5])])
y = arts[5]
feed = lambda: [i["article_id"] for i in get("/v1/feed/hider?limit=100")["items"]]
wait("article %s in hider's feed" % y, lambda: y in feed())
post([{"user_id": "hider", "article_id": y, "kind": "hide", "ts": now + 10}])
wait("hider's history to show the hide",
     lambda: any(i["kind"] == "hide" for i in get("/v1/users/hider/reads")["items"]))
f = feed()
assert y not in f, "the hidden article %s is still in the feed" % y
assert f and get("/v1/feed/hider")["source"] == "interest", f
print("hide: %s left hider's feed of %d articles (topic %s)" % (y, len(f), topic))
PY
stop_job
[ "$RC" = 0 ] || fail "the job exited $RC"
pass "a reader's history: newest first, each kind apart, a repeat once, limit bounds it; a hidden article leaves the feed"
