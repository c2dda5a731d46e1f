-- leaky_bucket: a queue of at most cap units draining limit per period; an
-- admitted request waits for the queue ahead of it (delay).
-- State (a string, one GET and one SET PX): "queue x period, last time".
local function leaky_bucket(key, _, now, per, limit, cap, cost, undo)
  local full = cap * per
  local level = 0
  local st = redis.call('GET', key)
  if st then
    local sp = string.find(st, ' ', 1, true)
    level = tonumber(string.sub(st, 1, sp - 1))
    local last = tonumber(string.sub(st, sp + 1))
    if now < last then now = last end
    local elapsed = now - last
    if elapsed >= cdiv(level, limit) then level = 0 else level = level - elapsed * limit end
  end

  local allowed, exceeds, retry, delay, write, rcost = 0, 0, 0, 0, false, 0
  if undo then
    level = math.max(0, level - cost * per)
    allowed, write = 1, true
  elseif cost == 0 then
    allowed, delay = 1, cdiv(level, limit)
  elseif cost > cap then
    exceeds = 1
  elseif level + cost * per <= full then
    delay = cdiv(level, limit)
    level = level + cost * per
    allowed, write, rcost = 1, true, cost
  else
    retry = cdiv(level + cost * per - full, limit)
  end

  local reset = cdiv(level, limit)
  local w
  if write then
    w = function()
      if reset > 0 then
        redis.call('SET', key, fmt(level) .. ' ' .. fmt(now), 'PX', fmt(cdiv(reset, 1000)))
      else
        redis.call('DEL', key)
      end
    end
  end
  return {allowed, idiv(full - level, per), retry, reset, delay, exceeds, rcost, 0}, w
end
