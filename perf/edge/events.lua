-- wrk script for perf/run_edge.sh: POSTs batches of read events to /v1/events as a JSON array
-- (Content-Type application/json) and, at the end, prints one JSON line with what the servers
-- answered.
--
-- Each batch holds NF_EDGE_BATCH (100) events of random readers u0 .. u(NF_EDGE_USERS-1) (10,000)
-- over a fixed pool of NF_EDGE_ARTICLES (1,000) 32-hex article ids (the same pool in every thread
-- and run: it is drawn from a fixed seed), session "s<user>-<n>", kind read 9 times in 10 and
-- save/share/dislike/hide otherwise, ts = the wall clock in integer epoch ms when the request is
-- made. No event_id: the server computes it.
--
-- Cost on the generator's side: each thread builds NF_EDGE_BODIES (256) batches at start, each
-- cut at its ts fields, so a request is one table.concat with the current time between the pieces
-- (no per-event Lua work while measuring). The users and articles of a body repeat after
-- NF_EDGE_BODIES requests per thread, which costs the servers nothing less: neither deduplicates.
--
-- response() counts, per thread, the events the 202 bodies say were accepted
-- ({"accepted":N,...}) and the answers that were not 202, by status; done() sums the threads.
-- The line: {"bench":"edge_wrk","name":NF_NAME,"requests":..,"seconds":..,"requests_per_s":..,
-- "accepted":..,"events_per_s":..,"status_202":..,"non_202":..,"statuses":{"503":..},
-- "socket_errors":..,"timeouts":..,"p50_ms":..,"p90_ms":..,"p99_ms":..,"max_ms":..}
-- (latency from wrk's own histogram of every request, microseconds converted to ms).
local batch = tonumber(os.getenv("NF_EDGE_BATCH") or "100")
local users = tonumber(os.getenv("NF_EDGE_USERS") or "10000")
local narticles = tonumber(os.getenv("NF_EDGE_ARTICLES") or "1000")
local nbodies = tonumber(os.getenv("NF_EDGE_BODIES") or "256")
local path = os.getenv("NF_EDGE_PATH") or "/v1/events"
local name = os.getenv("NF_NAME") or "edge"

local now_ms
do
  local ok, ffi = pcall(require, "ffi")
  if ok then
    ffi.cdef [[
      typedef struct { long tv_sec; long tv_usec; } nf_edge_timeval;
      int gettimeofday(nf_edge_timeval *tv, void *tz);
    ]]
    local tv = ffi.new("nf_edge_timeval")
    now_ms = function()
      ffi.C.gettimeofday(tv, nil)
      return string.format("%d", tonumber(tv.tv_sec) * 1000 + math.floor(tonumber(tv.tv_usec) / 1000))
    end
  else -- a wrk without LuaJIT's ffi: whole seconds are still a valid, current ts
    now_ms = function() return string.format("%d", os.time() * 1000) end
  end
end

local threads = {}

function setup(thread) -- in wrk's main Lua state; each thread's own state sees edge_thread
  table.insert(threads, thread)
  thread:set("edge_thread", #threads)
end

local bodies = {}
local next_body = 0
local headers = { ["Content-Type"] = "application/json" }
accepted = 0
status_202 = 0
non_202 = 0
statuses = {}

function init(args)
  math.randomseed(20261125) -- the article pool: the same in every thread and run
  local articles = {}
  for i = 1, narticles do
    local hex = {}
    for j = 1, 8 do hex[j] = string.format("%04x", math.random(0, 0xffff)) end
    articles[i] = table.concat(hex)
  end
  math.randomseed(os.time() * 1000 + (edge_thread or 0))
  local kinds = { "save", "share", "dislike", "hide" }
  for b = 1, nbodies do
    local pieces = {}
    for e = 1, batch do
      local u = math.random(0, users - 1)
      local kind = math.random(10) == 1 and kinds[math.random(4)] or "read"
      pieces[e] = string.format('%s{"user_id":"u%d","article_id":"%s","session_id":"s%d-%d","kind":"%s","ts":',
        e == 1 and "[" or "},", u, articles[math.random(narticles)], u, math.random(0, 9), kind)
    end
    pieces[batch + 1] = "}]"
    bodies[b] = pieces
  end
end

function request()
  next_body = next_body % nbodies + 1
  return wrk.format("POST", path, headers, table.concat(bodies[next_body], now_ms()))
end

function response(status, hdrs, body)
  if status == 202 then
    status_202 = status_202 + 1
    accepted = accepted + (tonumber(body:match('"accepted"%s*:%s*(%d+)')) or 0)
  else
    non_202 = non_202 + 1
    local k = tostring(status)
    statuses[k] = (statuses[k] or 0) + 1
  end
end

function done(summary, latency, requests)
  local acc, s202, n202, st = 0, 0, 0, {}
  for _, t in ipairs(threads) do
    acc = acc + (t:get("accepted") or 0)
    s202 = s202 + (t:get("status_202") or 0)
    n202 = n202 + (t:get("non_202") or 0)
    local ts = t:get("statuses")
    if ts then
      for k, v in pairs(ts) do st[k] = (st[k] or 0) + v end
    end
  end
  local parts = {}
  for k, v in pairs(st) do table.insert(parts, string.format('"%s":%d', k, v)) end
  local s = summary.duration / 1e6
  io.write(string.format(
    '{"bench":"edge_wrk","name":"%s","requests":%d,"seconds":%.3f,"requests_per_s":%.1f,' ..
    '"accepted":%d,"events_per_s":%.0f,"status_202":%d,"non_202":%d,"statuses":{%s},' ..
    '"socket_errors":%d,"timeouts":%d,"p50_ms":%.3f,"p90_ms":%.3f,"p99_ms":%.3f,"max_ms":%.3f}\n',
    name, summary.requests, s, summary.requests / s, acc, acc / s, s202, n202, table.concat(parts, ","),
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.errors.timeout, latency:percentile(50) / 1000, latency:percentile(90) / 1000,
    latency:percentile(99) / 1000, latency.max / 1000))
end
