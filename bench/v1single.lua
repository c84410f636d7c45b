-- wrk script: HTTP v1 single-token sends. POST /v1/projects/{project}/messages:send with a Bearer
-- access token, `message.token` a random token of the bench set, the same small data payload as
-- single.lua. Env: BENCH_TOKENS (file, one token a line), BENCH_BEARER, BENCH_PROJECT.
-- Requests are formatted once per thread in init, as in single.lua.

local common = dofile(assert(os.getenv("BENCH_DIR"), "BENCH_DIR is not set") .. "/wrk_common.lua")
setup, done = common.setup, common.done

local requests = {}
local next_index = 0

function init(args)
   local bearer = assert(os.getenv("BENCH_BEARER"), "BENCH_BEARER is not set")
   local project = assert(os.getenv("BENCH_PROJECT"), "BENCH_PROJECT is not set")
   math.randomseed(2000 + (thread_id or 0))
   local tokens = common.shuffle(common.tokens())
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
