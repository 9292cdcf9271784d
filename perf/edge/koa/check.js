'use strict'
// Checks the Koa peer's validator and event ids without a broker: `node perf/edge/koa/check.js`
// (perf/run_edge.sh runs it before the benchmark; exit 1 on the first difference).
const assert = require('node:assert/strict')
const { validate, parseBatch, eventId, tsMs } = require('./server.js')

const now = Date.parse('2026-11-25T19:05:54.764Z')
const ok = ev => { const e = validate(ev, now); assert.equal(e, null, JSON.stringify(ev) + ': ' + e); return ev }
const bad = (ev, re) => { const e = validate(ev, now); assert.match(String(e), re, JSON.stringify(ev)) }

// The vector of tests/unit/io/test_events.c (nf_read_event_id over the UTF-8 bytes).
assert.equal(eventId('user-\u00e9\ud83d\ude00', 'art-42', 'sess', 'read'),
  'c736d48599b28ee35ee5d0dc3092aa7477a24be291424f0e1850bab0f467368a')
// Another kind adds "kind \0"; an absent session is the empty string.
const h = s => require('node:crypto').createHash('sha256').update(Buffer.from(s, 'utf8')).digest('hex')
assert.equal(eventId('u1', 'a', '', 'save'), h('u1\0a\0\0save\0'))
assert.equal(ok({ user_id: 'u1', article_id: 'a', ts: now }).event_id, h('u1\0a\0\0'))
assert.equal(ok({ user_id: 'u1', article_id: 'a', session_id: null, kind: 'share', ts: now }).event_id,
  h('u1\0a\0\0share\0'))
assert.equal(ok({ user_id: 'u1', article_id: 'a', event_id: 'given', ts: now }).event_id, 'given')

ok({ user_id: 'u', article_id: 'x'.repeat(128), session_id: '', ts: '2026-11-25T19:05:54Z', extra: { deep: [1] } })
bad({ user_id: 'u', article_id: 'x'.repeat(129), ts: now }, /too long: 129 bytes/)
bad({ user_id: '\u00e9'.repeat(65), article_id: 'a', ts: now }, /too long: 130 bytes/)
bad({ user_id: 'u\0', article_id: 'a', ts: now }, /U\+0000/)
bad({ user_id: 'u\ud800', article_id: 'a', ts: now }, /surrogate/)
bad({ user_id: '', article_id: 'a', ts: now }, /"user_id" is empty/)
bad({ article_id: 'a', ts: now }, /missing required field "user_id"/)
bad({ user_id: 1, article_id: 'a', ts: now }, /expected a string, got number/)
bad({ user_id: 'u', article_id: 'a' }, /missing required field "ts"/)
bad({ user_id: 'u', article_id: 'a', ts: 1.5 }, /not integer epoch/)
bad({ user_id: 'u', article_id: 'a', ts: true }, /got boolean/)
bad({ user_id: 'u', article_id: 'a', ts: 5 }, /before 2000/)
bad({ user_id: 'u', article_id: 'a', ts: now + 300001 }, /ahead of the wall clock/)
ok({ user_id: 'u', article_id: 'a', ts: now + 300000 })
bad({ user_id: 'u', article_id: 'a', kind: 'like', ts: now }, /not one of/)
bad([], /expected a JSON object/)
bad(null, /expected a JSON object/)

assert.equal(tsMs('2026-11-25T19:05:54.7649Z'), Date.parse('2026-11-25T19:05:54.764Z'))
assert.equal(tsMs('2026-11-25t19:05:54.7z'), Date.parse('2026-11-25T19:05:54.700Z'))
assert.equal(tsMs('2026-11-25T20:05:54+01:00'), Date.parse('2026-11-25T19:05:54Z'))
assert.equal(tsMs('2026-12-31T23:59:60Z'), Date.parse('2027-01-01T00:00:00Z'))
assert.match(String(tsMs('2026-11-31T00:00:00Z')), /not an RFC 3339/)
assert.match(String(tsMs('2026-13-01T00:00:00Z')), /not an RFC 3339/)
assert.match(String(tsMs('2026-11-25 19:05:54Z')), /not an RFC 3339/)

assert.equal(parseBatch(' [{"a":1},{"b":2}]', 'application/json').length, 2)
assert.deepEqual(parseBatch('{"a":1}\n\n{"b":2}\r\n', 'application/x-ndjson'), [{ a: 1 }, { b: 2 }])
assert.match(parseBatch('{"a":1}\nnot json\n', '')[1], /line is not JSON/)
assert.throws(() => parseBatch('[{"a":1}', 'application/json'), e => e.status === 400)
console.log('check.js: validator and event ids ok')
