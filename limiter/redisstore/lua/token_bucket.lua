-- token_bucket: capacity cap, refilled at limit per period, cost taken all
-- or nothing. State (hash): v = tokens x period, t = last time.
local key = KEYS[1]
local full = cap * per
local tokens = full
local st = redis.call('HMGET', key, 'v', 't')
if st[1] then
  tokens = tonumber(st[1])
  local last = tonumber(st[2])
  if now < last then now = last end
  local elapsed = now - last
  if elapsed >= cdiv(full - tokens, limit) then tokens = full else tokens = tokens + elapsed * limit end
end

local allowed, exceeds, retry, write, rcost = 0, 0, 0, false, 0
if undo then
  tokens = math.min(full, tokens + undo_cost * per)
  allowed, write = 1, true
elseif cost == 0 then
  allowed = 1
elseif cost > cap then
  exceeds = 1
elseif tokens >= cost * per then
  tokens = tokens - cost * per
  allowed, write, rcost = 1, true, cost
else
  retry = cdiv(cost * per - tokens, limit)
end

local reset = cdiv(full - tokens, limit)
if write then
  if reset > 0 then redis.call('HSET', key, 'v', fmt(tokens), 't', fmt(now)) end
  expire(key, reset)
end
return {allowed, idiv(tokens, per), retry, reset, 0, exceeds, rcost, 0, ''}
