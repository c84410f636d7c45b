-- wrk script: single-token sends. POST /fcm/send, JSON, `to` a random token of the bench set,
-- small data payload. Env: BENCH_TOKENS (file, one token a line), BENCH_SERVER_KEY.
-- Requests are formatted once per thread in init (a shuffled pass over all tokens), so wrk's
-- own per-request work stays as small as possible on a 2-core machine.

local common = dofile(assert(os.getenv("BENCH_DIR"), "BENCH_DIR is not set") .. "/wrk_common.lua")
setup, done = common.setup, common.done

local requests = {}
local next_index = 0

function init(args)
   local key = assert(os.getenv("BENCH_SERVER_KEY"), "BENCH_SERVER_KEY is not set")
   math.randomseed(1000 + (thread_id or 0))
   local tokens = common.shuffle(common.tokens())
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
