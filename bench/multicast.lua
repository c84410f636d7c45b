-- wrk script: 1000-token multicasts. POST /fcm/send, JSON, `registration_ids` = 1000 tokens of
-- the bench set (a window starting at a random offset, wrapping). Env: BENCH_TOKENS,
-- BENCH_SERVER_KEY. A few distinct bodies are formatted once per thread and used in turn.

local common = dofile(assert(os.getenv("BENCH_DIR"), "BENCH_DIR is not set") .. "/wrk_common.lua")
setup, done = common.setup, common.done

local BATCH = 1000
local BODIES = 16
local requests = {}
local next_index = 0

function init(args)
   local key = assert(os.getenv("BENCH_SERVER_KEY"), "BENCH_SERVER_KEY is not set")
   local tokens = common.tokens(BATCH)
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
