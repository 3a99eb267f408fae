-- wrk script: the gate through POST /v1/operations/batch. Each request confirms the operations
-- the previous answer dispatched and begins BATCH new ones, so one request = BATCH gated steps
-- (the way an n8n node execution with BATCH items would use it). Body: BatchSchema
-- ({"confirm": [{operation_key, fencing_token, remote_id}], "begin": [{job_id, action,
-- fencing_token, payload}]}, at most 100 of each).
-- Env: TOKEN, JOB, FENCE, PREFIX, BATCH, CONNS, THREADS, BENCH_LUA_DIR.
-- Every slot of every answer is checked: "dispatch" begins and CONFIRMED confirms are counted,
-- error slots and any other decision are counted as anomalies.
dofile((os.getenv("BENCH_LUA_DIR") or ".") .. "/common.lua")
local token = os.getenv("TOKEN")
local job = os.getenv("JOB")
local fence = os.getenv("FENCE")
local prefix = os.getenv("PREFIX")
local batch = tonumber(os.getenv("BATCH") or "10")
local counter = 0
local pending = {}

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

local function count(s, needle)
  local n, from = 0, 1
  while true do
    local i = s:find(needle, from, true)
    if not i then return n end
    n, from = n + 1, i + #needle
  end
end

function response(status, headers, body)
  if status ~= 200 then
    bad_status = bad_status + 1
  else
    local split = body:find('"begin":[', 1, true) or (#body + 1)
    local confirm_part, begin_part = body:sub(1, split - 1), body:sub(split)
    local got = 0
    for key in begin_part:gmatch('"decision":"dispatch","operation":{"operation_key":"([^"]+)"') do
      table.insert(pending, key)
      got = got + 1
    end
    dispatched = dispatched + got
    confirmed = confirmed + count(confirm_part, '"state":"CONFIRMED"')
    -- begin slots that did not dispatch, and error slots on either side
    anomalies = anomalies + (count(begin_part, '"decision":') - got) + count(confirm_part, '{"error":{')
      + count(begin_part, '{"error":{')
  end
  bench_seen_response()
end
