-- Shared head of every costgate limiter script (prepended at load time).
-- Units: time in microseconds, bucket contents in cost units x period (us).
-- Lua numbers are doubles, exact up to 2^53; policy validation keeps every
-- product below that, and every number goes to Redis through '%d'.
--
-- Each algorithm is a function
--   alg(k1, k2, now, per, limit, cap, cost, undo, ref, offset)
-- that decides without writing and returns its reply and a function that
-- makes its writes (nil when there are none), so that a script applying
-- several policies writes only once all of them granted.
-- cost 0 reads the state; undo gives back what a receipt (ref) charged, or
-- for the buckets refunds cost units.
-- Reply (all integers): {allowed, remaining, retry_us, reset_us, delay_us,
--   exceeds, receipt_cost, receipt_ref}; receipt_ref is the window start of
-- the windows, the entry's sequence number of sliding_log.

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
-- be is n (an integer, 0 <= n < 2^56) as w bytes, most significant first;
-- unbe reads bytes i..j of s back. Binary state is shorter than digits.
local function be(n, w)
  local b = {}
  for i = w, 1, -1 do b[i] = n % 256; n = (n - b[i]) / 256 end
  return string.char(unpack(b))
end
local function unbe(s, i, j)
  local n = 0
  for k = i, j do n = n * 256 + string.byte(s, k) end
  return n
end
-- width is the number of bytes n (>= 0) needs, at least 1.
local function width(n)
  local w, top = 1, 256
  while n >= top do w, top = w + 1, top * 256 end
  return w
end
local function clock(arg)
  local now = tonumber(arg)
  if now then return now end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
