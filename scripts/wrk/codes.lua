-- GET /{code} over the codes in the file named by CODES ("code url" lines,
-- as scripts/benchload writes them, or bare codes): at most MAX_CODES of
-- them (default 1,000,000), spread evenly over the file. DIST=zipf draws the
-- k-th code in proportion to 1/k (s = 1), as real link traffic goes; any
-- other DIST cycles through them in order (uniform). BROWSER=1 sends a
-- browser User-Agent and a Referer, so every request is a human visit for
-- analytics (scripts/bench-analytics.sh). RATE paces the load (below).
-- Prints one RESULT line.
--
-- rps is counted only while every thread is sending. wrk starts each thread
-- as soon as that thread's copy of this script has loaded, and starts its
-- clock after the last one: a thread that loads early sends unmeasured
-- requests with the machine to itself, which wrk then divides by the
-- shorter duration (with 10M codes to read that inflated every system's
-- rps about twofold). Each thread here counts its requests per 100 ms on
-- the monotonic clock; done() adds up the intervals in which all threads
-- were sending, leaving out the first and last of them. wrk's own figure is
-- printed too, as wrk_rps. Latencies are wrk's, over the whole run.
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } codes_lua_timespec;
int clock_gettime(int clock, codes_lua_timespec *ts);
]]
local ts = ffi.new("codes_lua_timespec")
local function tick() -- the current 100 ms interval of CLOCK_MONOTONIC
  ffi.C.clock_gettime(1, ts)
  return tonumber(ts.tv_sec) * 10 + math.floor(tonumber(ts.tv_nsec) / 1e8)
end
local path, max = os.getenv("CODES"), tonumber(os.getenv("MAX_CODES") or "1000000")
local n = 0
for _ in io.lines(path) do n = n + 1 end
local step, codes, i = math.max(1, math.ceil(n / max)), {}, 0
for line in io.lines(path) do
  if i % step == 0 then table.insert(codes, line:match("^(%S+)")) end
  i = i + 1
end
if os.getenv("BROWSER") == "1" then
  wrk.headers["User-Agent"] = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
  wrk.headers["Referer"] = "https://news.example/item"
end
local zipf = os.getenv("DIST") == "zipf"
local cdf, total = {}, 0
if zipf then
  for k = 1, #codes do total = total + 1 / k; cdf[k] = total end
end
local next = 0
-- Per thread (globals, read by done() through thread:get): requests sent
-- per interval, and the first and last interval.
counts, first_tick, last_tick = {}, 0, 0
local threads = {}
setup = function(thread) table.insert(threads, thread) end
request = function()
  local t = tick()
  if first_tick == 0 then first_tick = t end
  last_tick = t
  counts[t] = (counts[t] or 0) + 1
  local k
  if zipf then
    local x, lo, hi = math.random() * total, 1, #codes
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      if cdf[mid] < x then lo = mid + 1 else hi = mid end
    end
    k = lo
  else
    next = next + 1
    k = (next % #codes) + 1
  end
  return wrk.format("GET", "/" .. codes[k])
end
-- RATE=n paces the load at about n requests/s: each of the CONNS
-- connections (default 64; give wrk's -c) waits CONNS/RATE s between
-- requests, so latency is compared at the same offered load, not at
-- whatever a closed loop reaches on this machine. wrk takes whole
-- milliseconds: pick RATE so that CONNS*1000/RATE is one.
local rate = tonumber(os.getenv("RATE") or "0")
if rate > 0 then
  local gap = tonumber(os.getenv("CONNS") or "64") * 1000 / rate
  delay = function() return gap end
end
done = function(summary, latency, requests)
  -- The intervals in which every thread sent, less the first and the last
  -- (partly covered).
  local from, to = 0, math.huge
  for _, th in ipairs(threads) do
    local f, l = th:get("first_tick"), th:get("last_tick")
    if f and f > from then from = f end
    if l and l < to then to = l end
  end
  from, to = from + 1, to - 1
  local sent = 0
  for _, th in ipairs(threads) do
    local c = th:get("counts") or {}
    for t = from, to do sent = sent + (c[t] or 0) end
  end
  local wrk_rps = summary.requests / (summary.duration / 1e6)
  local rps = wrk_rps -- a run too short to have a common interval
  if to >= from then rps = sent / ((to - from + 1) / 10) end
  io.write(string.format("RESULT rps=%.0f p50_ms=%.2f p99_ms=%.2f errors=%d wrk_rps=%.0f window_s=%.1f requests=%d\n",
    rps, latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    wrk_rps, math.max(to - from + 1, 0) / 10, summary.requests))
end
