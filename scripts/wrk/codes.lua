-- GET /{code} over the codes in the file named by CODES ("code url" lines,
-- as scripts/benchload writes them, or bare codes): at most MAX_CODES of
-- them (default 1,000,000), spread evenly over the file. DIST=zipf draws the
-- k-th code in proportion to 1/k (s = 1), as real link traffic goes; any
-- other DIST cycles through them in order (uniform). BROWSER=1 sends a
-- browser User-Agent and a Referer, so every request is a human visit for
-- analytics (scripts/bench-analytics.sh). RATE paces the load (below).
-- Prints one RESULT line.
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
request = function()
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
  io.write(string.format("RESULT rps=%.0f p50_ms=%.2f p99_ms=%.2f errors=%d\n",
    summary.requests / (summary.duration / 1e6), latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
