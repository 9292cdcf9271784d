'use strict'
// The benchmark peer of newsflow's HTTP ingest edge (perf/README.md, "HTTP edge and
// authentication"): seed 003's design as a Node developer would write it — Koa + @koa/router,
// kafkajs with an idempotent producer, acks=all, the event id set at the source, bounded
// in-flight work and 503 + Retry-After past it.
//
//   node server.js [--port 32480] [--listen 127.0.0.1] [--brokers 127.0.0.1:32092]
//                  [--topic read-events] [--max-inflight-events 20000] [--max-body-bytes 1048576]
//                  [--max-batch 1000] [--max-in-flight-requests 1] [--send-timeout-ms 10000]
//                  [--coalesce]
// Each option also reads an environment variable: EDGE_PORT, EDGE_LISTEN, EDGE_BROKERS,
// EDGE_TOPIC, EDGE_MAX_INFLIGHT_EVENTS, EDGE_MAX_BODY_BYTES, EDGE_MAX_BATCH,
// EDGE_MAX_IN_FLIGHT_REQUESTS, EDGE_SEND_TIMEOUT_MS, EDGE_COALESCE=1 (the option wins).
//
// POST /v1/events: a JSON array of events, or NDJSON (one object per line; chosen by a
// Content-Type containing "ndjson", or by a body that does not start with '['). Each event is
// checked by the hand-written validator below (the rules of nf_read_event_decode in
// src/io/events.h, plus kind and the wall-clock bound of nf_read_event_check_time); the valid ones
// are produced in ONE producer.send({acks: -1}) keyed by user_id, the value being the event's JSON
// with event_id filled in, and the answer is 202 {"accepted":N,"rejected":[{"index":i,"error":"..."}]}
// once the send resolved, i.e. once the broker acknowledged every one of them. A batch with no valid
// event is 400 with the same body; a body that is not JSON 400; over the byte or count bound 413;
// more than --max-inflight-events events in sends not yet acknowledged 503 + Retry-After: 1; a
// send that fails or takes longer than --send-timeout-ms 503 + Retry-After: 1 (the event ids make
// the client's retry safe downstream).
// GET /healthz: 200 once the producer is connected (the server listens only after that).
//
// kafkajs 2.2.4 serializes an idempotent producer's requests per broker behind a lock (its fix
// for out-of-order sequence numbers under concurrent sends), so with one broker one produce request
// is in flight at a time and every HTTP request's send waits its turn. --coalesce (off by default)
// gathers the batches that arrive while a send is in flight into the next send (one produce
// request for many HTTP requests); each request still answers only after its own events were
// acknowledged.
const crypto = require('node:crypto')
const http = require('node:http')
const Koa = require('koa')
const Router = require('@koa/router')
const { Kafka, logLevel, Partitioners } = require('kafkajs')

function options(argv) {
  const env = process.env
  const o = {
    port: Number(env.EDGE_PORT || 32480),
    listen: env.EDGE_LISTEN || '127.0.0.1',
    brokers: env.EDGE_BROKERS || '127.0.0.1:32092',
    topic: env.EDGE_TOPIC || 'read-events',
    maxInflightEvents: Number(env.EDGE_MAX_INFLIGHT_EVENTS || 20000),
    maxBodyBytes: Number(env.EDGE_MAX_BODY_BYTES || 1048576),
    maxBatch: Number(env.EDGE_MAX_BATCH || 1000),
    maxInFlightRequests: Number(env.EDGE_MAX_IN_FLIGHT_REQUESTS || 1),
    sendTimeoutMs: Number(env.EDGE_SEND_TIMEOUT_MS || 10000),
    coalesce: env.EDGE_COALESCE === '1',
  }
  const names = {
    '--port': 'port', '--listen': 'listen', '--brokers': 'brokers', '--topic': 'topic',
    '--max-inflight-events': 'maxInflightEvents', '--max-body-bytes': 'maxBodyBytes',
    '--max-batch': 'maxBatch', '--max-in-flight-requests': 'maxInFlightRequests',
    '--send-timeout-ms': 'sendTimeoutMs',
  }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--coalesce') { o.coalesce = true; continue }
    const k = names[a]
    if (!k || i + 1 >= argv.length) {
      console.error(`server.js: unknown option or missing value: ${a} (see the top of server.js)`)
      process.exit(2)
    }
    const v = argv[++i]
    o[k] = typeof o[k] === 'number' ? Number(v) : v
  }
  for (const k of ['port', 'maxInflightEvents', 'maxBodyBytes', 'maxBatch', 'maxInFlightRequests', 'sendTimeoutMs']) {
    if (!Number.isInteger(o[k]) || o[k] <= 0) {
      console.error(`server.js: ${k} must be a positive integer, got ${o[k]}`)
      process.exit(2)
    }
  }
  return o
}

// ---- validation (hand-written: the same checks as ajv would make from a schema, minus the
// tree walk; one pass per event over its known fields, unknown fields kept and not looked at) ----

const FIELD_MAX = 128 // bytes of UTF-8, as NF_EVENT_FIELD_MAX
const TS_FLOOR = 946684800000 // 2000-01-01T00:00:00Z, as NF_EVENT_TS_FLOOR
const MAX_FUTURE_MS = 300000 // trending.max_future_ms's default
const KINDS = new Set(['read', 'save', 'share', 'dislike', 'hide'])
const ASCII_ID = /^[\x01-\x7f]*$/
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/

// null when the id field is acceptable, else the reason.
function idError(name, v, required) {
  if (v === undefined || v === null) return required ? `missing required field "${name}"` : null
  if (typeof v !== 'string') return `field "${name}": expected a string, got ${v === null ? 'null' : typeof v}`
  if (v.length === 0) return name === 'session_id' ? null : `field "${name}" is empty`
  if (v.length <= FIELD_MAX && ASCII_ID.test(v)) return null // the common case: ASCII, short
  if (v.includes('\0')) return `field "${name}" contains U+0000`
  if (!v.isWellFormed()) return `field "${name}": unpaired surrogate`
  const bytes = Buffer.byteLength(v, 'utf8')
  if (bytes > FIELD_MAX) return `field "${name}" is too long: ${bytes} bytes, max ${FIELD_MAX}`
  return null
}

// Epoch ms of a ts field, or a string saying why not.
function tsMs(v) {
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) return `field "ts": ${v} is not integer epoch milliseconds`
    return v
  }
  if (typeof v !== 'string') {
    return `field "ts": expected an RFC 3339 date-time string or integer epoch milliseconds, got ${v === null ? 'null' : typeof v}`
  }
  const m = RFC3339.exec(v)
  if (m === null) return `field "ts": "${v.slice(0, 40)}" is not an RFC 3339 date-time`
  const mo = +m[2], d = +m[3], h = +m[4], mi = +m[5], s = +m[6]
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60) {
    return `field "ts": "${v.slice(0, 40)}" is not an RFC 3339 date-time`
  }
  // Date.UTC rolls a day 31 of a 30-day month over: compare the day back.
  let ms = Date.UTC(+m[1], mo - 1, d, h, mi, 0) + s * 1000
  if (new Date(Date.UTC(+m[1], mo - 1, d)).getUTCDate() !== d) {
    return `field "ts": "${v.slice(0, 40)}" is not an RFC 3339 date-time`
  }
  if (m[7]) ms += Number((m[7].slice(1) + '00').slice(0, 3)) // the first three digits count
  const z = m[8]
  if (z !== 'Z' && z !== 'z') {
    const off = (+z.slice(1, 3) * 60 + +z.slice(4, 6)) * 60000
    ms += z[0] === '+' ? -off : off
  }
  return ms
}

function eventId(user, article, session, kind) {
  const h = crypto.createHash('sha256')
  h.update(user).update('\0').update(article).update('\0').update(session).update('\0')
  if (kind !== 'read') h.update(kind).update('\0')
  return h.digest('hex')
}

// Validates ev in place (event_id filled in) and returns null, or returns the reason.
function validate(ev, nowMs) {
  if (ev === null || typeof ev !== 'object' || Array.isArray(ev)) return 'expected a JSON object'
  let e = idError('user_id', ev.user_id, true) ||
    idError('article_id', ev.article_id, true) ||
    idError('session_id', ev.session_id, false) ||
    idError('event_id', ev.event_id, false)
  if (e) return e
  let kind = ev.kind
  if (kind === undefined || kind === null) kind = 'read'
  else if (!KINDS.has(kind)) return `field "kind": ${JSON.stringify(kind).slice(0, 40)} is not one of read, save, share, dislike, hide`
  if (ev.ts === undefined) return 'missing required field "ts"'
  const ts = tsMs(ev.ts)
  if (typeof ts === 'string') return ts
  if (ts < TS_FLOOR) return `field "ts": ${ts} is before 2000-01-01T00:00:00Z`
  if (ts > nowMs + MAX_FUTURE_MS) return `field "ts": ${ts} is more than ${MAX_FUTURE_MS} ms ahead of the wall clock`
  if (ev.event_id === undefined || ev.event_id === null) {
    ev.event_id = eventId(ev.user_id, ev.article_id, ev.session_id || '', kind)
  }
  return null
}

// The batch as an array of parsed events; an NDJSON line that is not JSON is a string (its
// error), rejected by index like an invalid event. Throws a 400 when an array body is not JSON.
function parseBatch(text, contentType) {
  let i = 0
  while (i < text.length && (text[i] === ' ' || text[i] === '\n' || text[i] === '\r' || text[i] === '\t')) i++
  if (!(contentType && contentType.includes('ndjson')) && text[i] === '[') {
    let arr
    try {
      arr = JSON.parse(text)
    } catch (err) {
      throw Object.assign(new Error(`body is not JSON: ${err.message}`), { status: 400 })
    }
    if (!Array.isArray(arr)) throw Object.assign(new Error('body is not a JSON array'), { status: 400 })
    return arr
  }
  const out = []
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue
    try {
      out.push(JSON.parse(line))
    } catch (err) {
      out.push(`line is not JSON: ${err.message}`)
    }
  }
  return out
}

function readBody(req, limit) {
  const declared = Number(req.headers['content-length'])
  if (declared > limit) {
    return Promise.reject(Object.assign(new Error(`body of ${declared} bytes is over the limit of ${limit}`), { status: 413 }))
  }
  return new Promise((resolve, reject) => {
    const chunks = []
    let size = 0
    req.on('data', c => {
      size += c.length
      if (size > limit) {
        req.removeAllListeners('data')
        req.resume()
        reject(Object.assign(new Error(`body is over the limit of ${limit} bytes`), { status: 413 }))
        return
      }
      chunks.push(c)
    })
    req.on('end', () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size)))
    req.on('error', reject)
  })
}

// ---- producing ----

function makeSender(producer, o) {
  const plain = messages => producer.send({ topic: o.topic, acks: -1, messages })
  if (!o.coalesce) return plain
  // One send in flight; the batches that arrive meanwhile go together in the next one.
  let queue = [], busy = false
  const pump = () => {
    if (busy || queue.length === 0) return
    const group = queue
    queue = []
    busy = true
    const messages = group.length === 1 ? group[0].messages : group.flatMap(g => g.messages)
    plain(messages).then(
      () => { for (const g of group) g.resolve() },
      err => { for (const g of group) g.reject(err) },
    ).finally(() => { busy = false; pump() })
  }
  return messages => new Promise((resolve, reject) => {
    queue.push({ messages, resolve, reject })
    pump()
  })
}

function withTimeout(p, ms) {
  let t
  const timer = new Promise((_, reject) => {
    t = setTimeout(() => reject(new Error(`the broker did not acknowledge within ${ms} ms`)), ms)
  })
  return Promise.race([p, timer]).finally(() => clearTimeout(t))
}

async function main() {
  const o = options(process.argv.slice(2))
  const kafka = new Kafka({
    clientId: 'newsflow-edge-koa',
    brokers: o.brokers.split(','),
    logLevel: logLevel.WARN,
  })
  const producer = kafka.producer({
    idempotent: true,
    maxInFlightRequests: o.maxInFlightRequests,
    allowAutoTopicCreation: false,
    createPartitioner: Partitioners.DefaultPartitioner, // murmur2 on the key, as the Java client
  })
  await producer.connect()
  const send = makeSender(producer, o)
  let inflight = 0 // events in sends not yet settled
  let ready = true

  const app = new Koa()
  const router = new Router()
  router.get('/healthz', ctx => {
    ctx.status = ready ? 200 : 503
    ctx.body = { ready }
  })
  router.post('/v1/events', async ctx => {
    if (inflight >= o.maxInflightEvents) {
      ctx.set('Retry-After', '1')
      ctx.status = 503
      ctx.body = { error: `${inflight} events waiting for the broker, the limit is ${o.maxInflightEvents}` }
      return
    }
    const body = await readBody(ctx.req, o.maxBodyBytes)
    const batch = parseBatch(body.toString('utf8'), ctx.get('Content-Type'))
    if (batch.length === 0) ctx.throw(400, 'empty batch')
    if (batch.length > o.maxBatch) ctx.throw(413, `${batch.length} events, over the limit of ${o.maxBatch}`)
    const now = Date.now()
    const messages = []
    const rejected = []
    for (let i = 0; i < batch.length; i++) {
      const ev = batch[i]
      const err = typeof ev === 'string' ? ev : validate(ev, now)
      if (err) rejected.push({ index: i, error: err })
      else messages.push({ key: ev.user_id, value: JSON.stringify(ev) })
    }
    if (messages.length === 0) {
      ctx.status = 400
      ctx.body = { accepted: 0, rejected }
      return
    }
    if (inflight + messages.length > o.maxInflightEvents) {
      ctx.set('Retry-After', '1')
      ctx.status = 503
      ctx.body = { error: `${inflight} events waiting for the broker, the limit is ${o.maxInflightEvents}` }
      return
    }
    inflight += messages.length
    const sent = send(messages)
    // The bound counts the events until their send settles, even after a timeout answered.
    sent.then(() => { inflight -= messages.length }, () => { inflight -= messages.length })
    try {
      await withTimeout(sent, o.sendTimeoutMs)
    } catch (err) {
      ctx.set('Retry-After', '1')
      ctx.status = 503
      ctx.body = { error: `not produced: ${err.message}` }
      return
    }
    ctx.status = 202
    ctx.body = { accepted: messages.length, rejected }
  })
  app.use(async (ctx, next) => {
    try {
      await next()
    } catch (err) {
      ctx.status = err.status || 500
      ctx.body = { error: err.message }
      if (ctx.status >= 500) console.error(err)
    }
  })
  app.use(router.routes()).use(router.allowedMethods())

  const server = http.createServer(app.callback())
  server.keepAliveTimeout = 65000
  server.listen(o.port, o.listen, () => {
    console.error(`server.js: listening on ${o.listen}:${o.port}, producing to ${o.topic} at ${o.brokers}` +
      ` (idempotent, acks=all, maxInFlightRequests ${o.maxInFlightRequests}${o.coalesce ? ', coalescing' : ''})`)
  })
  const stop = async () => {
    ready = false
    server.close()
    server.closeAllConnections()
    await producer.disconnect().catch(() => {})
    process.exit(0)
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
}

if (require.main === module) {
  main().catch(err => {
    console.error(`server.js: ${err.stack || err}`)
    process.exit(1)
  })
} else {
  module.exports = { validate, parseBatch, eventId, tsMs } // for perf/edge/koa/check.js
}
