-- wrk script: single-token sends. POST /fcm/send, JSON, `to` a random token of the bench set,
-- small data payload. Env: BENCH_TOKENS (file, one token a line), BENCH_SERVER_KEY.
-- Requests are formatted once per thread in init (a shuffled pass over all tokens), so wrk's
-- own per-request work stays as small as possible on a 2-core machine.

local thread_count = 0

function setup(thread)
   thread_count = thread_count + 1
   thread:set("thread_id", thread_count)
end

local requests = {}
local next_index = 0

function init(args)
   local path = assert(os.getenv("BENCH_TOKENS"), "BENCH_TOKENS is not set")
   local key = assert(os.getenv("BENCH_SERVER_KEY"), "BENCH_SERVER_KEY is not set")
   local tokens = {}
   for line in io.lines(path) do
      if #line > 0 then tokens[#tokens + 1] = line end
   end
   assert(#tokens > 0, "no tokens in " .. path)
   math.randomseed(1000 + (thread_id or 0))
   for i = #tokens, 2, -1 do -- Fisher-Yates: a random order, every token once per pass
      local j = math.random(i)
      tokens[i], tokens[j] = tokens[j], tokens[i]
   end
   local headers = {["Content-Type"] = "application/json", ["Authorization"] = "key=" .. key}
   for i, token in ipairs(tokens) do
      local body = '{"to":"' .. token .. '","data":{"score":"5x1","time":"15:10","n":"' .. i .. '"}}'
      requests[i] = wrk.format("POST", "/fcm/send", headers, body)
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
