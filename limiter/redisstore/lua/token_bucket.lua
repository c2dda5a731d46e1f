-- token_bucket: capacity cap, refilled at limit per period, cost taken all
-- or nothing. State (a string, one GET and one SET PX), binary: the last
-- time (7 bytes) and what the bucket lacked then, tokens x period (1-7
-- bytes, as few as it needs); a full bucket has no key.
local function token_bucket(key, _, now, per, limit, cap, cost, undo)
  local full = cap * per
  local tokens = full
  local st = redis.call('GET', key)
  if st then
    local last = unbe(st, 1, 7)
    tokens = full - unbe(st, 8, #st)
    if now < last then now = last end
    local elapsed = now - last
    if elapsed >= cdiv(full - tokens, limit) then tokens = full else tokens = tokens + elapsed * limit end
  end

  local allowed, exceeds, retry, write, rcost = 0, 0, 0, false, 0
  if undo then
    tokens = math.min(full, tokens + cost * per)
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
  local w
  if write then
    w = function()
      if reset > 0 then
        redis.call('SET', key, be(now, 7) .. be(full - tokens, width(full - tokens)), 'PX', fmt(cdiv(reset, 1000)))
      else
        redis.call('DEL', key)
      end
    end
  end
  return {allowed, idiv(tokens, per), retry, reset, 0, exceeds, rcost, 0}, w
end
