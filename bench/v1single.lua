-- wrk script: HTTP v1 single-token sends. POST /v1/projects/{project}/messages:send with a Bearer
-- access token, `message.token` a random token of the bench set, the same small data payload as
-- single.lua. Env: BENCH_TOKENS (file, one token a line), BENCH_BEARER, BENCH_PROJECT.
-- Requests are formatted once per thread in init, as in single.lua.

local thread_count = 0

function setup(thread)
   thread_count = thread_count + 1
   thread:set("thread_id", thread_count)
end

local requests = {}
local next_index = 0

function init(args)
   local path = assert(os.getenv("BENCH_TOKENS"), "BENCH_TOKENS is not set")
   local bearer = assert(os.getenv("BENCH_BEARER"), "BENCH_BEARER is not set")
   local project = assert(os.getenv("BENCH_PROJECT"), "BENCH_PROJECT is not set")
   local tokens = {}
   for line in io.lines(path) do
      if #line > 0 then tokens[#tokens + 1] = line end
   end
   assert(#tokens > 0, "no tokens in " .. path)
   math.randomseed(2000 + (thread_id or 0))
   for i = #tokens, 2, -1 do
      local j = math.random(i)
      tokens[i], tokens[j] = tokens[j], tokens[i]
   end
   local headers = {["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. bearer}
   local target = "/v1/projects/" .. project .. "/messages:send"
   for i, token in ipairs(tokens) do
      local body = '{"message":{"token":"' .. token .. '","data":{"score":"5x1","time":"15:10","n":"' .. i .. '"}}}'
      requests[i] = wrk.format("POST", target, headers, body)
   end
end

function request()
   next_index = next_index % #requests + 1
   return requests[next_index]
end

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      "WRK requests=%d duration_us=%d status_errors=%d connect=%d read=%d write=%d timeout=%d " ..
      "p50_us=%d p90_us=%d p99_us=%d max_us=%d\n",
      summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
      latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
