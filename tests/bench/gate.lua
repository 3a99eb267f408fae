-- wrk script: the gate's begin + confirm through the real HTTP API.
-- Each wrk thread keeps a queue of operation keys it was told to dispatch and confirms them
-- next, so requests alternate begin, confirm, begin, confirm (strictly with one connection).
-- Env: TOKEN, JOB, FENCE (fencing token), PREFIX (unique per run).
local token = os.getenv("TOKEN")
local job = os.getenv("JOB")
local fence = os.getenv("FENCE")
local prefix = os.getenv("PREFIX")
local counter = 0
local pending = {}
local thread_id = 0
local errors = 0

function setup(thread)
  thread_id = thread_id + 1
  thread:set("tid", thread_id)
end

function init(args)
  wrk.headers["Authorization"] = "Bearer " .. token
  wrk.headers["Content-Type"] = "application/json"
end

local function urlencode(s)
  return (s:gsub("[^%w%-_%.~]", function(c) return string.format("%%%02X", string.byte(c)) end))
end

function request()
  if #pending > 0 then
    local key = table.remove(pending, 1)
    return wrk.format("POST", "/v1/operations/" .. urlencode(key) .. "/confirm", nil,
      '{"fencing_token":' .. fence .. ',"remote_id":"r-' .. counter .. '"}')
  end
  counter = counter + 1
  local action = prefix .. "-" .. tid .. "-" .. counter
  return wrk.format("POST", "/v1/operations/begin", nil,
    '{"job_id":"' .. job .. '","action":"' .. action .. '","fencing_token":' .. fence ..
    ',"payload":{"title":"bench","n":' .. counter .. '}}')
end

function response(status, headers, body)
  if status ~= 200 then
    errors = errors + 1
    return
  end
  if body:find('"decision":"dispatch"', 1, true) then
    local key = body:match('"operation_key":"([^"]+)"')
    if key then table.insert(pending, key) end
  end
end

function done(summary, latency, requests)
  io.write(string.format('WRKJSON {"requests":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,"errors_status":%d,"errors_socket":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
