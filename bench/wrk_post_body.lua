-- wrk script for bench/*.sh (run_wrk in bench/lib.sh): POSTs one fixed body, read once per wrk
-- thread from the file named by $RAMPART_BENCH_BODY_FILE, as application/json.
--
-- Only wrk.method/body/headers are set, so wrk's default init() pre-formats the request once and
-- no response() hook is defined: wrk stays on its fast path (responses are not parsed in Lua).

local path = os.getenv("RAMPART_BENCH_BODY_FILE")
if path == nil or path == "" then
  error("RAMPART_BENCH_BODY_FILE is not set")
end
local file = assert(io.open(path, "rb"))
local body = file:read("*a")
file:close()

wrk.method = "POST"
wrk.body = body
wrk.headers["Content-Type"] = "application/json"
