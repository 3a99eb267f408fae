-- wrk script: the gate's begin + confirm through the real HTTP API.
-- Each wrk thread keeps a queue of operation keys it was told to dispatch and confirms them
-- next, so requests alternate begin, confirm, begin, confirm (strictly with one connection per
-- thread: then the pair's latency, begin sent -> confirm answered, is measured directly).
-- Env: TOKEN, JOB, FENCE (fencing token), PREFIX (unique per run), CONNS, THREADS, BENCH_LUA_DIR,
-- CLOSE (1: `Connection: close` on every request).
-- Every answer is checked: a begin must say "dispatch" (the keys are fresh), a confirm must
-- answer the operation CONFIRMED; anything else is counted as an anomaly and reported.
dofile((os.getenv("BENCH_LUA_DIR") or ".") .. "/common.lua")
local token = os.getenv("TOKEN")
local job = os.getenv("JOB")
local fence = os.getenv("FENCE")
local prefix = os.getenv("PREFIX")
local counter = 0
local pending = {}
local begin_at = nil

function init(args)
  wrk.headers["Authorization"] = "Bearer " .. token
  wrk.headers["Content-Type"] = "application/json"
  -- CLOSE=1: a new connection per request, as the n8n node calls (wrk reconnects after each answer)
  if os.getenv("CLOSE") == "1" then wrk.headers["Connection"] = "close" end
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
  begin_at = bench_now()
  local action = prefix .. "-" .. tid .. "-" .. counter
  return wrk.format("POST", "/v1/operations/begin", nil,
    '{"job_id":"' .. job .. '","action":"' .. action .. '","fencing_token":' .. fence ..
    ',"payload":{"title":"bench","n":' .. counter .. '}}')
end

function response(status, headers, body)
  if status ~= 200 then
    bad_status = bad_status + 1
  elseif body:find('"decision":"dispatch"', 1, true) then
    local key = body:match('"operation_key":"([^"]+)"')
    if key then
      table.insert(pending, key)
      dispatched = dispatched + 1
    else
      anomalies = anomalies + 1
    end
  elseif body:find('"decision":', 1, true) == nil and body:find('"state":"CONFIRMED"', 1, true) then
    confirmed = confirmed + 1
    if per_thread == 1 and begin_at then
      pairs_us[#pairs_us + 1] = math.floor((bench_now() - begin_at) * 1e6)
    end
  else
    anomalies = anomalies + 1 -- a begin that did not dispatch a fresh key, or an odd confirm answer
  end
  bench_seen_response()
end
