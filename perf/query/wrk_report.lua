-- wrk script for perf/run_query.sh: PATH_TEMPLATE (env NF_PATH, "{u}" = a random reader
-- NF_USER_PREFIX (default demo-user-) 0 .. NF_USERS-1) per request; at the end one JSON line with requests/s and latency
-- percentiles (wrk's own histogram, microseconds).
local template = os.getenv("NF_PATH") or "/v1/trending"
local users = tonumber(os.getenv("NF_USERS") or "1000")
local name = os.getenv("NF_NAME") or template
local prefix = os.getenv("NF_USER_PREFIX") or "demo-user-"

function init(args)
  math.randomseed(os.time() + math.floor(os.clock() * 1e6))
end

function request()
  local path = template:gsub("{u}", prefix .. math.random(0, users - 1))
  return wrk.format("GET", path)
end

function done(summary, latency, requests)
  local s = summary.duration / 1e6
  io.write(string.format(
    '{"bench":"query_wrk","name":"%s","requests":%d,"seconds":%.3f,"requests_per_s":%.0f,' ..
    '"non_2xx":%d,"socket_errors":%d,"p50_ms":%.3f,"p99_ms":%.3f,"max_ms":%.3f}\n',
    name, summary.requests, s, summary.requests / s, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000))
end
