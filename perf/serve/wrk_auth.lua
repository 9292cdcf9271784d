-- wrk script for perf/run_auth.sh: GET NF_PATH (one reader's feed) with, per request,
--   NF_TOKENS  a file of tokens (one a line, without "Bearer "): cycled, each wrk thread from its
--              own offset (thread k of NF_WRK_THREADS starts k/NF_WRK_THREADS of the way in);
--   NF_TOKEN   else one token, the same on every request;
--   neither    no Authorization header.
-- Every request is formatted once, in init, so a request costs wrk the same Lua work (a table
-- index) whichever the variant: the variants differ only on the server's side.
-- At the end one JSON line: {"bench":"auth_wrk","name":NF_NAME,"requests":..,"seconds":..,
-- "requests_per_s":..,"non_2xx":..,"socket_errors":..,"p50_ms":..,"p90_ms":..,"p99_ms":..,
-- "max_ms":..} (non_2xx is wrk's count of statuses above 399; latency from wrk's histogram).
local path = os.getenv("NF_PATH") or "/v1/feed/demo-user-1?limit=20"
local name = os.getenv("NF_NAME") or path
local nthreads = tonumber(os.getenv("NF_WRK_THREADS") or "1")

function setup(thread)
  setup_count = (setup_count or 0) + 1
  thread:set("auth_thread", setup_count)
end

local reqs, n, i = {}, 0, 0

function init(args)
  local file, tok = os.getenv("NF_TOKENS"), os.getenv("NF_TOKEN")
  if file and file ~= "" then
    for line in io.lines(file) do
      if #line > 0 then
        n = n + 1
        reqs[n] = wrk.format("GET", path, { Authorization = "Bearer " .. line })
      end
    end
  elseif tok and tok ~= "" then
    n = 1
    reqs[1] = wrk.format("GET", path, { Authorization = "Bearer " .. tok })
  else
    n = 1
    reqs[1] = wrk.format("GET", path)
  end
  i = math.floor(((auth_thread or 1) - 1) * n / nthreads)
end

function request()
  i = i % n + 1
  return reqs[i]
end

function done(summary, latency, requests)
  local s = summary.duration / 1e6
  io.write(string.format(
    '{"bench":"auth_wrk","name":"%s","requests":%d,"seconds":%.3f,"requests_per_s":%.0f,' ..
    '"non_2xx":%d,"socket_errors":%d,"p50_ms":%.3f,"p90_ms":%.3f,"p99_ms":%.3f,"max_ms":%.3f}\n',
    name, summary.requests, s, summary.requests / s, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000,
    latency.max / 1000))
end
