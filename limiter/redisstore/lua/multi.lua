-- Several policies of one request, all or nothing, in one script.
-- KEYS: each request's keys in order (two for sliding_log, else one).
-- ARGV: now (us; empty: Redis TIME), then seven per request: algorithm
--   (1 token_bucket, 2 leaky_bucket, 3 sliding_log, 4 sliding_window,
--   5 fixed_window), period, limit, capacity, cost, enforce (1; 0 for a
--   shadow policy, whose denial denies nothing), window offset.
-- Reply: the replies of the requests decided, eight integers each, up to
-- and including the first enforced denial; then nothing was written, and
-- the grants before it tell their state uncharged.
local algs = {token_bucket, leaky_bucket, sliding_log, sliding_window, fixed_window}
local now = clock(ARGV[1])
local n = (#ARGV - 1) / 7
local calls, replies, writes = {}, {}, {}
local ki, denied = 1, 0
for i = 1, n do
  local b = 2 + (i - 1) * 7
  local a = tonumber(ARGV[b])
  local c = {f = algs[a], k1 = KEYS[ki], per = tonumber(ARGV[b + 1]), limit = tonumber(ARGV[b + 2]),
    cap = tonumber(ARGV[b + 3]), offset = tonumber(ARGV[b + 6])}
  if a == 3 then c.k2 = KEYS[ki + 1]; ki = ki + 2 else ki = ki + 1 end
  local r, w = c.f(c.k1, c.k2, now, c.per, c.limit, c.cap, tonumber(ARGV[b + 4]), false, '', c.offset)
  calls[i], replies[i], writes[i] = c, r, w
  if r[1] == 0 and ARGV[b + 5] == '1' then denied = i break end
end
local last = n
if denied > 0 then
  last = denied
  for i = 1, denied - 1 do
    local c = calls[i]
    if replies[i][1] == 1 then -- granted, but not charged after all: its state as it stays
      replies[i] = c.f(c.k1, c.k2, now, c.per, c.limit, c.cap, 0, false, '', c.offset)
    end
  end
else
  for i = 1, n do if writes[i] then writes[i]() end end
end
local out = {}
for i = 1, last do
  for j = 1, 8 do out[#out + 1] = replies[i][j] end
end
return out
