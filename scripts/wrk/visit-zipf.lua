-- Like visit.lua, but codes are drawn Zipf-like (s = 1): the k-th code is
-- visited in proportion to 1/k, as real link traffic is.
local codes = {}
for line in io.lines(os.getenv("CODES")) do table.insert(codes, line) end
wrk.headers["User-Agent"] = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
wrk.headers["Referer"] = "https://news.example/item"
local cdf, total = {}, 0
for k = 1, #codes do total = total + 1 / k; cdf[k] = total end
local function pick()
  local x, lo, hi = math.random() * total, 1, #codes
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if cdf[mid] < x then lo = mid + 1 else hi = mid end
  end
  return codes[lo]
end
request = function()
  return wrk.format("GET", "/" .. pick())
end
done = function(summary, latency, requests)
  io.write(string.format("RESULT rps=%.0f p50_ms=%.2f p99_ms=%.2f errors=%d\n",
    summary.requests / (summary.duration / 1e6), latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
