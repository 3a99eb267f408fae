-- Shared by gate.lua and gate_batch.lua (loaded with dofile in every wrk Lua state).
-- A monotonic clock (LuaJIT FFI), the per-thread counters, the throughput window and the
-- begin+confirm pair latencies, and done(), which prints one WRKJSON line for run_bench.py.
--
-- Throughput is measured over a window per thread: from the response that completes the
-- thread's first round (one answer per connection) to the thread's last answer. The first
-- round only begins (no confirms yet) and a round of 16 x 100 batch items takes seconds, so
-- work / wrk's duration would undercount; answers still in flight at the end do not count.
local ffi = require("ffi")
pcall(ffi.cdef, [[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clk_id, bench_timespec *tp);
]])
local ts = ffi.new("bench_timespec")
function bench_now()
  ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local conns = tonumber(os.getenv("CONNS") or "1")
local nthreads = tonumber(os.getenv("THREADS") or "1")
per_thread = math.max(1, math.floor(conns / nthreads))
local thread_id = 0
local threads = {}

-- per-thread state: globals, so that done() can read them with thread:get()
dispatched, confirmed, anomalies, bad_status, responses = 0, 0, 0, 0, 0
win_t0, win_w0, win_t1, win_w1 = 0, 0, 0, 0
pairs_us = {}

function setup(thread)
  thread_id = thread_id + 1
  thread:set("tid", thread_id)
  table.insert(threads, thread)
end

function bench_seen_response()
  local t, w = bench_now(), dispatched + confirmed
  responses = responses + 1
  if responses == per_thread then win_t0, win_w0 = t, w end
  win_t1, win_w1 = t, w
end

local function pct(sorted, p)
  if #sorted == 0 then return 0 end
  return sorted[math.max(1, math.ceil(#sorted * p / 100))]
end

function done(summary, latency, requests)
  local d, c, a, b, ops, win, windowed, all = 0, 0, 0, 0, 0, 0, 0, {}
  for _, t in ipairs(threads) do
    d = d + t:get("dispatched")
    c = c + t:get("confirmed")
    a = a + t:get("anomalies")
    b = b + t:get("bad_status")
    local t0, w0, t1, w1 = t:get("win_t0"), t:get("win_w0"), t:get("win_t1"), t:get("win_w1")
    if t1 > t0 then
      ops = ops + (w1 - w0) / 2 / (t1 - t0)
      win = win + (t1 - t0) / #threads
      windowed = windowed + 1
    end
    for _, v in ipairs(t:get("pairs_us")) do all[#all + 1] = v end
  end
  table.sort(all)
  io.write(string.format('WRKJSON {"requests":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,' ..
    '"errors_status":%d,"errors_socket":%d,"dispatched":%d,"confirmed":%d,"anomalies":%d,"non_200":%d,' ..
    '"ops_per_s_window":%.3f,"window_s":%.3f,"threads":%d,"windowed_threads":%d,"pairs":%d,"pair_p50_us":%d,"pair_p99_us":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    d, c, a, b, ops, win, #threads, windowed, #all, pct(all, 50), pct(all, 99)))
end
