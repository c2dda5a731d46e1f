-- Shared head of every costgate limiter script (prepended at load time).
-- Units: time in microseconds, bucket contents in cost units x period (us).
-- Lua numbers are doubles, exact up to 2^53; policy validation keeps every
-- product below that, and every number goes to Redis through '%d'.
--
-- ARGV: 1 now (us; empty: Redis TIME)  2 period (us)  3 limit  4 capacity
--       5 cost (0: read only)  6 op ('take' or 'undo')  7 undo cost
--       8 undo window (us) or entry  9 window offset (us, fixed_window)
-- Reply: {allowed, remaining, retry_us, reset_us, delay_us, exceeds,
--         receipt_cost, receipt_window, receipt_entry}

local function idiv(a, b) -- floor(a / b), exact for integers below 2^53
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end
local function cdiv(a, b) return -idiv(-a, b) end
local function fmt(n) return string.format('%d', n) end
local function expire(key, us) -- PEXPIRE rounds up to whole milliseconds
  if us <= 0 then redis.call('DEL', key) else redis.call('PEXPIRE', key, fmt(cdiv(us, 1000))) end
end

local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local per = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local cap = tonumber(ARGV[4])
local cost = tonumber(ARGV[5])
local undo = ARGV[6] == 'undo'
local undo_cost = tonumber(ARGV[7]) or 0
local undo_ref = ARGV[8] or ''
