-- POST /api/v1/links with a distinct URL per request (generated codes).
local counter = 0
local thread_id = 0
local threads = {}
function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end
function init(args)
  thread_id = tid
end
request = function()
  counter = counter + 1
  local body = string.format('{"url":"https://example.com/bench/%d/%d"}', thread_id, counter)
  return wrk.format("POST", "/api/v1/links", {["Content-Type"] = "application/json"}, body)
end
local created, other = 0, 0
response = function(status, headers, body)
  if status == 201 then created = created + 1 else other = other + 1 end
end
done = function(summary, latency, requests)
  local non2xx = summary.errors.status
  io.write(string.format("non-2xx responses: %d, socket errors: connect %d read %d write %d timeout %d\n",
    non2xx, summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.timeout))
end
