-- wrk script for bench/*.sh (run_wrk in bench/lib.sh): POSTs one fixed body, read once per wrk
-- thread from the file named by $RAMPART_BENCH_BODY_FILE, as application/json. When
-- $RAMPART_BENCH_LATENCY_FILE names a file, the run's latency histogram is written there at the
-- end, one `<latency in µs> <samples>` line per distinct value, so a script can count the
-- samples beyond any threshold (bench/lib.sh: latency_over). wrk has corrected the histogram for
-- coordinated omission by then (a stalled request adds samples), as for its own percentiles.
--
-- Only wrk.method/body/headers are set, so wrk's default init() pre-formats the request once and
-- no response() hook is defined: wrk stays on its fast path (responses are not parsed in Lua).
-- done() runs once, after the run, on the merged statistics.

local path = os.getenv("RAMPART_BENCH_BODY_FILE")
if path == nil or path == "" then
  error("RAMPART_BENCH_BODY_FILE is not set")
end
local file = assert(io.open(path, "rb"))
local body = file:read("*a")
file:close()

wrk.method = "POST"
wrk.body = body
-- With $RAMPART_BENCH_HEADER_LENGTH the body is the binary tensor extension's: that many bytes
-- of JSON, then raw tensors.
local header_length = os.getenv("RAMPART_BENCH_HEADER_LENGTH")
if header_length ~= nil and header_length ~= "" then
  wrk.headers["Content-Type"] = "application/octet-stream"
  wrk.headers["Inference-Header-Content-Length"] = header_length
else
  wrk.headers["Content-Type"] = "application/json"
end
-- With $RAMPART_BENCH_API_KEY every request authenticates with that key (bench/access_bench.sh).
local api_key = os.getenv("RAMPART_BENCH_API_KEY")
if api_key ~= nil and api_key ~= "" then
  wrk.headers["x-api-key"] = api_key
end

local latency_path = os.getenv("RAMPART_BENCH_LATENCY_FILE")
if latency_path ~= nil and latency_path ~= "" then
  done = function(summary, latency, requests)
    local out = assert(io.open(latency_path, "w"))
    -- latency(i) is the i-th smallest distinct value and how many samples have it.
    for i = 1, #latency do
      local value, count = latency(i)
      out:write(string.format("%d %d\n", value, count))
    end
    out:close()
  end
end
