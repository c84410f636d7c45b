-- What the wrk scripts share (each loads it with dofile from BENCH_DIR, which bench.py sets):
-- numbering the threads, reading and shuffling the bench tokens, and the one summary line
-- bench.py parses.

local common = {}
local thread_count = 0

-- wrk's setup(thread): each thread learns its number as the global `thread_id`.
function common.setup(thread)
   thread_count = thread_count + 1
   thread:set("thread_id", thread_count)
end

-- The tokens of BENCH_TOKENS (one a line); at least `min` of them.
function common.tokens(min)
   local path = assert(os.getenv("BENCH_TOKENS"), "BENCH_TOKENS is not set")
   local tokens = {}
   for line in io.lines(path) do
      if #line > 0 then tokens[#tokens + 1] = line end
   end
   assert(#tokens >= (min or 1), "need at least " .. (min or 1) .. " tokens in " .. path)
   return tokens
end

-- Fisher-Yates in place: a random order, every token once per pass.
function common.shuffle(tokens)
   for i = #tokens, 2, -1 do
      local j = math.random(i)
      tokens[i], tokens[j] = tokens[j], tokens[i]
   end
   return tokens
end

-- wrk's done(): one `WRK key=value …` line.
function common.done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      "WRK requests=%d duration_us=%d status_errors=%d connect=%d read=%d write=%d timeout=%d " ..
      "p50_us=%d p90_us=%d p99_us=%d max_us=%d\n",
      summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
      latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end

return common
