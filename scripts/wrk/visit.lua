-- GET /{code} as a browser (a human visit for analytics) over a list of
-- codes read from the file named by CODES; prints the rate as one line.
local codes = {}
for line in io.lines(os.getenv("CODES")) do table.insert(codes, line) end
wrk.headers["User-Agent"] = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
wrk.headers["Referer"] = "https://news.example/item"
local i = 0
request = function()
  i = i + 1
  return wrk.format("GET", "/" .. codes[(i % #codes) + 1])
end
done = function(summary, latency, requests)
  io.write(string.format("RESULT rps=%.0f p50_ms=%.2f p99_ms=%.2f errors=%d\n",
    summary.requests / (summary.duration / 1e6), latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
