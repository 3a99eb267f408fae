-- wrk script: the gate through POST /v1/operations/batch. Each request confirms the operations
-- the previous answer dispatched and begins BATCH new ones, so one request = BATCH gated steps
-- (the way an n8n node execution with BATCH items would use it).
-- Env: TOKEN, JOB, FENCE, PREFIX, BATCH.
local token = os.getenv("TOKEN")
local job = os.getenv("JOB")
local fence = os.getenv("FENCE")
local prefix = os.getenv("PREFIX")
local batch = tonumber(os.getenv("BATCH") or "10")
local counter = 0
local pending = {}
local thread_id = 0

function setup(thread)
  thread_id = thread_id + 1
  thread:set("tid", thread_id)
end

function init(args)
  wrk.headers["Authorization"] = "Bearer " .. token
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  local confirms = {}
  for i = 1, math.min(#pending, batch) do
    local key = table.remove(pending, 1)
    confirms[#confirms + 1] = '{"operation_key":"' .. key .. '","fencing_token":' .. fence .. ',"remote_id":"r"}'
  end
  local begins = {}
  for i = 1, batch do
    counter = counter + 1
    begins[#begins + 1] = '{"job_id":"' .. job .. '","action":"' .. prefix .. "-" .. tid .. "-" .. counter ..
      '","fencing_token":' .. fence .. ',"payload":{"n":' .. counter .. '}}'
  end
  return wrk.format("POST", "/v1/operations/batch", nil,
    '{"confirm":[' .. table.concat(confirms, ",") .. '],"begin":[' .. table.concat(begins, ",") .. ']}')
end

function response(status, headers, body)
  if status ~= 200 then return end
  for key in body:gmatch('"decision":"dispatch","operation":{"operation_key":"([^"]+)"') do
    table.insert(pending, key)
  end
end

function done(summary, latency, requests)
  io.write(string.format('WRKJSON {"requests":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,"errors_status":%d,"errors_socket":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
