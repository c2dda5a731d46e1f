-- fixed_window: a counter per window. Windows start at a per-key offset
-- plus multiples of period, so that keys do not all reset at once.
-- State (hash): w = window start, c = count, t = last time.
local function fixed_window(key, _, now, per, limit, _, cost, undo, ref, offset)
  local st = redis.call('HMGET', key, 'w', 'c', 't')
  local start, cur = tonumber(st[1]) or 0, tonumber(st[2]) or 0
  if st[3] and now < tonumber(st[3]) then now = tonumber(st[3]) end

  local ws = offset + idiv(now - offset, per) * per
  if start ~= ws then start, cur = ws, 0 end

  local allowed, exceeds, retry, write, rcost, rwin = 0, 0, 0, false, 0, 0
  if undo then
    if tonumber(ref) == start then cur = math.max(0, cur - cost) end
    allowed, write = 1, true
  elseif cost == 0 then
    allowed = 1
  elseif cost > limit then
    exceeds = 1
  elseif cur + cost <= limit then
    cur = cur + cost
    allowed, write, rcost, rwin = 1, true, cost, ws
  else
    retry = ws + per - now
  end

  local reset = 0
  if cur > 0 then reset = ws + per - now end
  local w
  if write then
    w = function()
      if reset > 0 then redis.call('HSET', key, 'w', fmt(start), 'c', fmt(cur), 't', fmt(now)) end
      expire(key, reset)
    end
  end
  return {allowed, limit - cur, retry, reset, 0, exceeds, rcost, rwin}, w
end
