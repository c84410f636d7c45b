-- wrk script: 1000-token multicasts. POST /fcm/send, JSON, `registration_ids` = 1000 tokens of
-- the bench set (a window starting at a random offset, wrapping). Env: BENCH_TOKENS,
-- BENCH_SERVER_KEY. A few distinct bodies are formatted once per thread and used in turn.

local thread_count = 0

function setup(thread)
   thread_count = thread_count + 1
   thread:set("thread_id", thread_count)
end

local BATCH = 1000
local BODIES = 16
local requests = {}
local next_index = 0

function init(args)
   local path = assert(os.getenv("BENCH_TOKENS"), "BENCH_TOKENS is not set")
   local key = assert(os.getenv("BENCH_SERVER_KEY"), "BENCH_SERVER_KEY is not set")
   local tokens = {}
   for line in io.lines(path) do
      if #line > 0 then tokens[#tokens + 1] = line end
   end
   assert(#tokens >= BATCH, "need at least " .. BATCH .. " tokens in " .. path)
   math.randomseed(2000 + (thread_id or 0))
   local headers = {["Content-Type"] = "application/json", ["Authorization"] = "key=" .. key}
   for b = 1, BODIES do
      local start = math.random(#tokens)
      local ids = {}
      for k = 0, BATCH - 1 do
         ids[#ids + 1] = '"' .. tokens[(start + k - 1) % #tokens + 1] .. '"'
      end
      local body = '{"registration_ids":[' .. table.concat(ids, ",") ..
                   '],"data":{"score":"5x1","batch":"' .. b .. '"}}'
      requests[b] = wrk.format("POST", "/fcm/send", headers, body)
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
