-- wrk script: OAuth 2.0 token issuance. POST /token with the jwt-bearer grant and one signed
-- assertion (Google accepts an assertion again while it is valid; so does the mock), so the
-- measure is the endpoint's own cost: parse, RS256 verification, a new access token.
-- Env: BENCH_ASSERTION (the signed JWT).

local req

function init(args)
   local assertion = assert(os.getenv("BENCH_ASSERTION"), "BENCH_ASSERTION is not set")
   local body = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" .. assertion
   req = wrk.format("POST", "/token", {["Content-Type"] = "application/x-www-form-urlencoded"}, body)
end

function request()
   return req
end

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      "WRK requests=%d duration_us=%d status_errors=%d connect=%d read=%d write=%d timeout=%d " ..
      "p50_us=%d p90_us=%d p99_us=%d max_us=%d\n",
      summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
      latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
