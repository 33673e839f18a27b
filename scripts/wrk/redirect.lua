-- GET /{code} over a list of codes read from the file named by CODES.
local codes = {}
for line in io.lines(os.getenv("CODES")) do table.insert(codes, line) end
local i = 0
request = function()
  i = i + 1
  return wrk.format("GET", "/" .. codes[(i % #codes) + 1])
end
done = function(summary, latency, requests)
  io.write(string.format("non-2xx/3xx responses: %d, socket errors: connect %d read %d write %d timeout %d\n",
    summary.errors.status, summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.timeout))
end
