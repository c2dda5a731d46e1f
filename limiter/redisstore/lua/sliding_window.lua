-- sliding_window: two counters, prev x (period - elapsed)/period + cur <= limit,
-- compared in units x period. Windows are aligned to multiples of period.
-- State (hash): w = current window start, c = cur, p = prev, t = last time.
local function sliding_window(key, _, now, per, limit, _, cost, undo, ref)
  local st = redis.call('HMGET', key, 'w', 'c', 'p', 't')
  local start, cur, prev = tonumber(st[1]) or 0, tonumber(st[2]) or 0, tonumber(st[3]) or 0
  if st[4] and now < tonumber(st[4]) then now = tonumber(st[4]) end

  local ws = idiv(now, per) * per
  if start ~= ws then
    if start + per == ws then prev, cur = cur, 0 else prev, cur = 0, 0 end
    start = ws
  end
  local elapsed = now - ws
  local used = prev * (per - elapsed) + cur * per

  local allowed, exceeds, retry, write, rcost, rwin = 0, 0, 0, false, 0, 0
  if undo then
    local wref = tonumber(ref) or -1
    if wref == start then cur = math.max(0, cur - cost)
    elseif wref + per == start then prev = math.max(0, prev - cost) end
    allowed, write = 1, true
  elseif cost == 0 then
    allowed = 1
  elseif cost > limit then
    exceeds = 1
  elseif used + cost * per <= limit * per then
    cur = cur + cost
    allowed, write, rcost, rwin = 1, true, cost, ws
  elseif cur + cost <= limit then
    retry = per - idiv((limit - cur - cost) * per, prev) - elapsed
  else
    retry = per - elapsed + math.max(0, per - idiv((limit - cost) * per, cur))
  end

  used = prev * (per - elapsed) + cur * per
  local reset = 0
  if cur > 0 then reset = 2 * per - elapsed elseif prev > 0 then reset = per - elapsed end
  local w
  if write then
    w = function()
      if reset > 0 then
        redis.call('HSET', key, 'w', fmt(start), 'c', fmt(cur), 'p', fmt(prev), 't', fmt(now))
      end
      expire(key, reset)
    end
  end
  return {allowed, math.max(0, idiv(limit * per - used, per)), retry, reset, 0, exceeds, rcost, rwin}, w
end
