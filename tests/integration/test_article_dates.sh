#!/usr/bin/env bash
# Article dates far in the future or at/before 1970 (issue 15, item 2): `newsflow run` on a
# local feed whose items are dated 9999-12-31, 1970-01-01 and 1900, next to a sound one. The
# articles records must never carry a date after ingested_at + trending.max_future_ms nor at or
# before 1970: such a date takes the item's other date, else the fetch time (date_fallback true),
# counted in newsflow_parse_dates_replaced_total and logged once per fetch. The sound item keeps
# its dates. $1 = newsflow binary, $2 = source dir.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

cat >"$TMP/feed.rss" <<'EOF'
<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0"><channel><title>Dates</title><link>https://example.com/</link>
<item><title>Sound</title><link>https://example.com/sound</link>
  <pubDate>Mon, 02 Mar 2026 10:00:00 GMT</pubDate></item>
<item><title>Far future</title><link>https://example.com/future</link>
  <pubDate>Fri, 31 Dec 9999 23:59:59 GMT</pubDate></item>
<item><title>Future published, sound updated</title><link>https://example.com/future-upd</link>
  <pubDate>Fri, 31 Dec 9999 23:59:59 GMT</pubDate>
  <atom:updated xmlns:atom="http://www.w3.org/2005/Atom">2026-03-02T09:00:00Z</atom:updated></item>
<item><title>Epoch</title><link>https://example.com/epoch</link>
  <pubDate>Thu, 01 Jan 1970 00:00:00 GMT</pubDate></item>
<item><title>1900</title><link>https://example.com/1900</link>
  <pubDate>Mon, 01 Jan 1900 00:00:00 GMT</pubDate></item>
</channel></rss>
EOF

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
"$NF" run --set kafka.brokers= --set admin.port="$PORT" --set sink.spec="jsonl:$TMP/out.jsonl" \
  --set sources.urls="$TMP/feed.rss" --set state.dir="$TMP/state" --set checkpoint.interval_ms=200 \
  >/dev/null 2>"$TMP/err" &
PID=$!
# Wait for the five articles (the sink is flushed as it goes).
for _ in $(seq 300); do
  [ -f "$TMP/out.jsonl" ] && [ "$(grep -c '"topic":"articles"' "$TMP/out.jsonl" || true)" -ge 5 ] && break
  kill -0 "$PID" 2>/dev/null || fail "the job exited early"
  sleep 0.1
done
curl -sf "http://127.0.0.1:$PORT/metrics" >"$TMP/metrics" || fail "no /metrics"
stop_job
[ $RC -eq 0 ] || fail "exit $RC after SIGTERM"

python3 - "$TMP/out.jsonl" "$TMP/metrics" "$TMP/err" <<'PY' || fail "article dates"
import datetime, json, re, sys

def ms(s):
    return int(datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() * 1000)

arts = {}
for line in open(sys.argv[1]):
    o = json.loads(line)
    if o["topic"] == "articles":
        arts[o["value"]["url"]] = o["value"]
assert len(arts) == 5, sorted(arts)
for url, a in arts.items():
    ing = ms(a["ingested_at"])
    for k in ("published_at", "updated_at"):
        t = ms(a[k])
        assert 0 < t <= ing + 300000, (url, k, a[k], a["ingested_at"])
sound = arts["https://example.com/sound"]
assert sound["published_at"] == "2026-03-02T10:00:00Z" and not sound["date_fallback"], sound
upd = arts["https://example.com/future-upd"]
assert upd["published_at"] == upd["updated_at"] == "2026-03-02T09:00:00Z", upd
assert not upd["date_fallback"], upd
for u in ("future", "epoch", "1900"):
    a = arts["https://example.com/" + u]
    assert a["date_fallback"] and a["published_at"] == a["ingested_at"], a
# 3 items with no usable date (2 dates each) + 1 with one: 7 dates replaced
m = re.search(r"^newsflow_parse_dates_replaced_total (\d+)", open(sys.argv[2]).read(), re.M)
assert m and int(m.group(1)) == 7, m and m.group(0)
logs = [json.loads(l) for l in open(sys.argv[3]) if l.startswith("{")]
w = [o for o in logs if o["level"] == "warn" and "dates" in o["msg"] and o.get("articles") == 4]
assert len(w) == 1 and w[0]["first_date"] == "9999-12-31T23:59:59Z", w
PY
echo "test_article_dates: ok"
