#!/usr/bin/env bash
# test_parse_cli.sh — `newsflow parse`: usage errors (exit 2), refused documents (exit 1, the
# file and the problem named), the JSON it prints, stdin, --base, --fetched-at, --compact, and
# the documented outcome of every hostile file in tests/data/feeds.
# Usage: bash test_parse_cli.sh <newsflow binary> <source dir>
set -euo pipefail

nf=$1
src=$2
data="$src/tests/data/feeds"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# run EXPECTED_RC ARGS... : keeps stdout/stderr in $work/out, $work/err.
run() {
    local want=$1 rc=0
    shift
    timeout 60 "$nf" "$@" >"$work/out" 2>"$work/err" || rc=$?
    [[ $rc == "$want" ]] || fail "newsflow $* exited $rc, expected $want; stderr: $(cat "$work/err")"
}
err_has() { grep -qF -- "$1" "$work/err" || fail "stderr lacks '$1': $(cat "$work/err")"; }
# jq-like checks with python: jcheck 'PYTHON EXPRESSION over d'
jcheck() {
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' \
        "$work/out" "$1" || fail "output check failed: $1; output: $(head -c 2000 "$work/out")"
}

# --- usage errors: exit 2 -------------------------------------------------------------------
run 0 parse --help
grep -q "Usage: newsflow parse" "$work/out" || fail "parse --help prints no usage"
run 0 help
grep -q "parse FILE" "$work/out" || fail "newsflow help does not list parse"
run 2 parse
err_has "missing FILE"
run 2 parse --bogus "$data/bom_utf8.xml"
err_has "unknown option '--bogus'"
run 2 parse "$data/bom_utf8.xml" "$data/bom_utf8.xml"
err_has "extra argument"
# A URL goes through the job's fetcher and address guard: a private address is refused before
# any connection is made (test_parse_url.sh covers a real fetch from a loopback server).
run 1 parse http://10.255.255.1/feed.xml
err_has "address guard: 10.255.255.1 is private"
run 2 parse "$work/no-such-file.xml"
err_has "cannot read $work/no-such-file.xml"
run 2 parse "$data/bom_utf8.xml" --base /relative
err_has "--base must be an absolute http(s) URL"
run 2 parse "$data/bom_utf8.xml" --fetched-at yesterday
err_has "--fetched-at must be RFC 3339 or epoch milliseconds"
run 2 parse "$data/bom_utf8.xml" --base
err_has "missing value after '--base'"

# --- refused documents: exit 1, naming the file and the problem ------------------------------
run 1 parse "$data/html_page.html"
err_has "$data/html_page.html: not a feed: root element <html>"
run 1 parse "$data/garbage.txt"
err_has "$data/garbage.txt: malformed document: not XML: line 1:1:"
run 1 parse "$data/empty.xml"
err_has "document is empty"
printf '{"version": "https://jsonfeed.org/version/1.1",\n "items": [}' >"$work/bad.json"
run 1 parse "$work/bad.json"
err_has "$work/bad.json: malformed document: JSON syntax error at line 2:"
head -c $((17 * 1024 * 1024)) /dev/zero | tr '\0' ' ' >"$work/big.xml"
run 1 parse "$work/big.xml"
err_has "larger than the limit of 16777216 bytes"
python3 -c 'print("<rss><channel><item>" + "<a>" * 10000 + "</a>" * 10000 + "</item></channel></rss>")' >"$work/deep.xml"
run 1 parse "$work/deep.xml"
err_has "document nested too deeply"

# --- output -----------------------------------------------------------------------------------
cat >"$work/feed.xml" <<'XML'
<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0"><channel>
  <title>CLI &amp; test</title><link>https://site.example/</link><language>en</language>
  <item><title>One</title><link>/a/one?utm_source=x&amp;k=1</link>
    <guid>one</guid><pubDate>Tue, 14 May 2024 08:30:00 GMT</pubDate>
    <author>me@site.example (Me)</author><category>News</category>
    <description>&lt;p&gt;Hello&lt;/p&gt;</description></item>
  <item><title>Two, no date</title><link>https://site.example/two</link></item>
</channel></rss>
XML
run 0 parse "$work/feed.xml" --base https://feeds.example/rss/main.xml --fetched-at 2024-01-01T00:00:00Z
jcheck 'set(d) == {"feed", "articles", "stats"}'
jcheck 'd["feed"]["format"] == "rss" and d["feed"]["version"] == "2.0" and d["feed"]["title"] == "CLI & test"'
jcheck 'd["stats"] == {"items": 2, "truncated_items": 0, "skipped_items": 0, "warnings": 0, "first_warning": None, "encoding": "UTF-8"}'
jcheck 'len(d["articles"]) == 2'
jcheck 'set(d["articles"][0]) >= {"article_id", "url", "link", "guid", "title", "summary", "body", "authors", "categories", "language", "published_at", "updated_at", "date_fallback", "content_hash"}'
jcheck 'd["articles"][0]["link"] == "https://feeds.example/a/one?utm_source=x&k=1"'
jcheck 'd["articles"][0]["url"] == "https://feeds.example/a/one?k=1" and len(d["articles"][0]["article_id"]) == 32'
jcheck 'd["articles"][0]["published_at"] == "2024-05-14T08:30:00Z" and d["articles"][0]["summary"] == "Hello"'
jcheck 'd["articles"][0]["authors"] == [{"name": "Me", "email": "me@site.example"}] and d["articles"][0]["language"] == "en"'
jcheck 'd["articles"][1]["date_fallback"] is True and d["articles"][1]["published_at"] == "2024-01-01T00:00:00Z"'
[[ $(wc -l <"$work/out") -gt 10 ]] || fail "default output is not indented"

run 0 parse "$work/feed.xml" --compact --fetched-at=1704067200000
[[ $(wc -l <"$work/out") == 1 ]] || fail "--compact output is not one line"
jcheck 'd["articles"][1]["published_at"] == "2024-01-01T00:00:00Z"'
# No --base: relative links resolve against the channel's own link.
jcheck 'd["articles"][0]["url"] == "https://site.example/a/one?k=1"'

"$nf" parse - --compact <"$work/feed.xml" >"$work/out" 2>"$work/err" || fail "parse - (stdin) failed: $(cat "$work/err")"
jcheck 'len(d["articles"]) == 2'

# --- hostile files: the outcomes of tests/data/feeds/README.md ---------------------------------
for f in billion_laughs.xml quadratic_blowup.xml xxe_file.xml external_dtd.xml bare_amp_nbsp.xml \
    declared_latin1_is_utf8.xml declared_utf8_is_cp1252.xml latin1_declared.xml \
    unknown_encoding_latin1.xml unknown_encoding_utf8.xml bom_utf8.xml bom_utf16le.xml \
    bom_utf16be.xml utf16le_no_bom.xml json_wrong_types.json mismatched_tags.xml truncated.xml \
    control_chars.xml; do
    run 0 parse "$data/$f" --compact
    jcheck 'len(d["articles"]) >= 1'
done
run 0 parse "$data/xxe_file.xml" --compact
jcheck '"root:" not in json.dumps(d) and d["articles"][0]["title"] == "&xxe;"'
run 0 parse "$data/billion_laughs.xml" --compact
jcheck 'len(json.dumps(d)) < 10000'
for f in html_page.html json_not_feed.json json_array.json; do
    run 1 parse "$data/$f"
    err_has "not a feed"
done
for f in garbage.bin garbage.txt empty.xml whitespace_only.xml; do
    run 1 parse "$data/$f"
    err_has "malformed document"
done
# --taxonomy: classified as the job does (builtin by default), none, a file, a bad file
run 0 parse "$src/examples/feeds/world.xml" --compact
jcheck 'all(abs(sum(w * w for w in a["topics"].values()) - 1) < 1e-6 for a in d["articles"] if a["topics"])'
jcheck 'any(l["category"] == "economy" for a in d["articles"] for l in a["category_labels"])'
run 0 parse "$src/examples/feeds/world.xml" --compact --taxonomy none
jcheck 'all("topics" not in a for a in d["articles"])'
run 0 parse "$src/examples/feeds/world.xml" --compact --taxonomy "$src/config/taxonomy.json"
jcheck 'any(a["topics"] for a in d["articles"])'
printf '{"version": 1, "language": "english", "topics": [{"name": "x", "keywords": {"vote": -1}}]}' >"$work/bad-taxonomy.json"
run 2 parse "$src/examples/feeds/world.xml" --taxonomy "$work/bad-taxonomy.json"
err_has 'bad-taxonomy.json: topics[0].keywords."vote"'
echo "ok: newsflow parse CLI"
