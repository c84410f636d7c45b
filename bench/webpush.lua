-- wrk script: Web Push pushes. POST {BENCH_WP_PATH} (a subscription's /wp/{id}) with one
-- pre-encrypted aes128gcm body (the file BENCH_WP_BODY) and one VAPID Authorization
-- (BENCH_WP_AUTH), the same request every time: the server decrypts each one.

local common = dofile(assert(os.getenv("BENCH_DIR"), "BENCH_DIR is not set") .. "/wrk_common.lua")
setup, done = common.setup, common.done

local formatted

function init(args)
   local path = assert(os.getenv("BENCH_WP_PATH"), "BENCH_WP_PATH is not set")
   local auth = assert(os.getenv("BENCH_WP_AUTH"), "BENCH_WP_AUTH is not set")
   local file = assert(io.open(assert(os.getenv("BENCH_WP_BODY"), "BENCH_WP_BODY is not set"), "rb"))
   local body = file:read("*a")
   file:close()
   local headers = {["TTL"] = "60", ["Content-Encoding"] = "aes128gcm", ["Authorization"] = auth,
                    ["Content-Type"] = "application/octet-stream"}
   formatted = wrk.format("POST", path, headers, body)
end

function request()
   return formatted
end
