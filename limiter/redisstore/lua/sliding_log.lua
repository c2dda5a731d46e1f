-- sliding_log: at most limit cost units inside any window of length period.
-- log (zset): one entry per request, member "seq:cost", score = its time;
-- an entry counts while now < time + period.
-- meta (hash): n = running total of the costs, s = last seq, t = last time.
local function sliding_log(log, meta, now, per, limit, _, cost, undo, ref)
  local st = redis.call('HMGET', meta, 'n', 's', 't')
  local total, seq = tonumber(st[1]) or 0, tonumber(st[2]) or 0
  if st[3] and now < tonumber(st[3]) then now = tonumber(st[3]) end

  local write, prune = false, false
  local old = redis.call('ZRANGEBYSCORE', log, '-inf', fmt(now - per))
  local count = redis.call('ZCARD', log)
  if #old > 0 then
    for _, m in ipairs(old) do total = total - tonumber(string.match(m, ':(%d+)$')) end
    count = count - #old
    prune, write = true, true
  end
  if count == 0 then total, seq = 0, 0 end

  local allowed, exceeds, retry, rcost, rseq, remove, add = 0, 0, 0, 0, 0, false, nil
  if undo then
    local at = redis.call('ZSCORE', log, ref)
    if at and tonumber(at) > now - per then -- an entry already out is pruned above
      total = total - tonumber(string.match(ref, ':(%d+)$'))
      count = count - 1
      remove, write = true, true
    end
    allowed = 1
  elseif cost == 0 then
    allowed = 1
  elseif cost > limit then
    exceeds = 1
  elseif total + cost <= limit then
    seq = seq + 1
    add = fmt(seq) .. ':' .. fmt(cost)
    total, count = total + cost, count + 1
    allowed, write, rcost, rseq = 1, true, cost, seq
  else
    local need, freed = total + cost - limit, 0
    local entries = redis.call('ZRANGEBYSCORE', log, '(' .. fmt(now - per), '+inf', 'WITHSCORES')
    for i = 1, #entries, 2 do
      freed = freed + tonumber(string.match(entries[i], ':(%d+)$'))
      if freed >= need then
        retry = tonumber(entries[i + 1]) + per - now
        break
      end
    end
  end

  -- reset: when the newest entry left after this step leaves the window
  local reset = 0
  if count > 0 then
    if add then
      reset = per
    else
      local newest = redis.call('ZRANGE', log, -1, -1, 'WITHSCORES')
      if remove and newest[1] == ref then
        local two = redis.call('ZRANGE', log, -2, -2, 'WITHSCORES')
        newest = two
      end
      if newest[2] and tonumber(newest[2]) > now - per then reset = tonumber(newest[2]) + per - now end
    end
  end
  local w
  if write then
    w = function()
      if prune then redis.call('ZREMRANGEBYSCORE', log, '-inf', fmt(now - per)) end
      if remove then redis.call('ZREM', log, ref) end
      if add then redis.call('ZADD', log, fmt(now), add) end
      if reset > 0 then redis.call('HSET', meta, 'n', fmt(total), 's', fmt(seq), 't', fmt(now)) end
      expire(log, reset)
      expire(meta, reset)
    end
  end
  return {allowed, limit - total, retry, reset, 0, exceeds, rcost, rseq}, w
end
