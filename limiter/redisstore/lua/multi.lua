-- Several policies of one request, all or nothing, in one script, in order.
-- KEYS: each request's keys in order (two for sliding_log, else one).
-- ARGV: now (us; empty: Redis TIME), then seven per request: algorithm
--   (1 token_bucket, 2 leaky_bucket, 3 sliding_log, 4 sliding_window,
--   5 fixed_window, 6 concurrency), period (concurrency: its lease),
--   limit, capacity, cost, enforce (1; 0 for a shadow policy, whose denial
--   denies nothing), window offset.
-- Each request sees the state the ones before it left: a grant's writes wait
-- for the end, unless a later request names one of its keys; then they are
-- made first, the keys saved beforehand (DUMP, PTTL) so that a denial can
-- put them back.
-- Reply: the replies of the requests decided, eight integers each, up to
-- and including the first enforced denial; then every key is as it was, and
-- the grants before it tell their state uncharged.
local algs = {token_bucket, leaky_bucket, sliding_log, sliding_window, fixed_window, concurrency}
local now = clock(ARGV[1])
local n = (#ARGV - 1) / 7
local calls, replies, writes, done = {}, {}, {}, {}
local pending = {} -- key -> the request whose writes on it are still to be made
local saved, order = {}, {} -- key -> {DUMP, PTTL} before this script first wrote it

local function save(k)
  if k and not saved[k] then
    saved[k] = {redis.call('DUMP', k), redis.call('PTTL', k)}
    order[#order + 1] = k
  end
end

-- flush makes the pending writes on key now, having saved the keys they touch.
local function flush(key)
  local i = pending[key]
  if not i then return end
  local c = calls[i]
  save(c.k1)
  save(c.k2)
  pending[c.k1] = nil
  if c.k2 then pending[c.k2] = nil end
  done[i] = true
  writes[i]()
end

-- restore puts every saved key back as it was.
local function restore()
  for _, k in ipairs(order) do
    local dump, ttl = saved[k][1], saved[k][2]
    if dump then
      -- PTTL -1: no TTL (RESTORE 0); 0: expiring this millisecond, not never
      if ttl == 0 then ttl = 1 elseif ttl < 0 then ttl = 0 end
      redis.call('RESTORE', k, ttl, dump, 'REPLACE')
    else
      redis.call('DEL', k)
    end
  end
end

local ki, denied = 1, 0
for i = 1, n do
  local b = 2 + (i - 1) * 7
  local a = tonumber(ARGV[b])
  local c = {f = algs[a], k1 = KEYS[ki], per = tonumber(ARGV[b + 1]), limit = tonumber(ARGV[b + 2]),
    cap = tonumber(ARGV[b + 3]), offset = tonumber(ARGV[b + 6])}
  if a == 3 then c.k2 = KEYS[ki + 1]; ki = ki + 2 else ki = ki + 1 end
  flush(c.k1)
  if c.k2 then flush(c.k2) end
  local r, w = c.f(c.k1, c.k2, now, c.per, c.limit, c.cap, tonumber(ARGV[b + 4]), false, '', c.offset)
  calls[i], replies[i], writes[i] = c, r, w
  if w then
    pending[c.k1] = i
    if c.k2 then pending[c.k2] = i end
  end
  if r[1] == 0 and ARGV[b + 5] == '1' then denied = i break end
end
local last = n
if denied > 0 then
  last = denied
  restore()
  for i = 1, denied - 1 do
    local c = calls[i]
    if replies[i][1] == 1 then -- granted, but not charged after all: its state as it stays
      local delay = replies[i][5] -- the wait its take had, as an undo elsewhere keeps it
      replies[i] = c.f(c.k1, c.k2, now, c.per, c.limit, c.cap, 0, false, '', c.offset)
      replies[i][5] = delay
    end
  end
else
  for i = 1, n do
    if writes[i] and not done[i] then writes[i]() end
  end
end
local out = {}
for i = 1, last do
  for j = 1, 8 do out[#out + 1] = replies[i][j] end
end
return out
