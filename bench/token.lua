-- wrk script: OAuth 2.0 token issuance. POST /token with the jwt-bearer grant and one signed
-- assertion (Google accepts an assertion again while it is valid; so does the mock), so the
-- measure is the endpoint's own cost: parse, RS256 verification, a new access token.
-- Env: BENCH_ASSERTION (the signed JWT).

local common = dofile(assert(os.getenv("BENCH_DIR"), "BENCH_DIR is not set") .. "/wrk_common.lua")
done = common.done

local req

function init(args)
   local assertion = assert(os.getenv("BENCH_ASSERTION"), "BENCH_ASSERTION is not set")
   local body = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" .. assertion
   req = wrk.format("POST", "/token", {["Content-Type"] = "application/x-www-form-urlencoded"}, body)
end

function request()
   return req
end
