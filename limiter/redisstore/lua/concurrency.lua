-- concurrency: at most limit requests of one key in flight at once.
-- holds (zset): one member per hold, its id (the time it was taken, us,
-- made unique within the key), scored by the instant its lease ends; a
-- hold counts while now < that instant. The lease comes in the period's
-- place. A hold is one request, whatever the cost.
-- op, in undo's place: false or 0 takes a hold (cost 0 reads the count),
-- true or 1 releases the hold ref names, 2 renews it: its lease starts
-- again, or, gone, it is taken again when the key has a place.
-- Reply: receipt_cost 1 and receipt_ref the hold's id for a hold taken or
-- renewed; a denial's retry is 1s (a place frees whenever a request ends).
local function concurrency(key, _, now, lease, limit, _, cost, op, ref)
  if op == true then op = 1 elseif not op then op = 0 end
  local live = redis.call('ZCOUNT', key, '(' .. fmt(now), '+inf')
  local allowed, retry, rcost, rid = 0, 0, 0, 0
  local write, add, drop = false, nil, nil -- the member added (or re-scored), the one whose score no longer counts
  if op == 0 then
    if cost == 0 then
      allowed = 1
    elseif live < limit then
      local id = now
      while redis.call('ZSCORE', key, fmt(id)) do id = id + 1 end
      add, live = fmt(id), live + 1
      allowed, write, rcost, rid = 1, true, 1, id
    else
      retry = 1000000
    end
  else
    local at = redis.call('ZSCORE', key, ref)
    local held = at and tonumber(at) > now
    if op == 1 then
      if held then live = live - 1 end
      allowed, write, drop = 1, true, ref
    elseif held or live < limit then
      if not held then live = live + 1 end
      allowed, write, rcost, rid, add, drop = 1, true, 1, tonumber(ref), ref, ref
    else
      retry = 1000000
    end
  end

  -- reset: when the newest lease left after this step ends
  local newest = 0
  local top = redis.call('ZRANGE', key, -2, -1, 'WITHSCORES')
  for i = 1, #top, 2 do
    if top[i] ~= drop and tonumber(top[i + 1]) > newest then newest = tonumber(top[i + 1]) end
  end
  if add and now + lease > newest then newest = now + lease end
  local reset = 0
  if newest > now then reset = newest - now end
  local w
  if write then
    w = function()
      redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(now))
      if op == 1 then redis.call('ZREM', key, ref) end
      if add then redis.call('ZADD', key, fmt(now + lease), add) end
      expire(key, reset)
    end
  end
  return {allowed, math.max(0, limit - live), retry, reset, 0, 0, rcost, rid}, w
end
