-- sliding_log: at most limit cost units inside any window of length period.
-- KEYS[1] (zset): one entry per request, member "seq:cost", score = its time;
-- an entry counts while now < time + period.
-- KEYS[2] (hash): n = running total of the costs, s = last seq, t = last time.
local log, meta = KEYS[1], KEYS[2]
local st = redis.call('HMGET', meta, 'n', 's', 't')
local total, seq = tonumber(st[1]) or 0, tonumber(st[2]) or 0
if st[3] and now < tonumber(st[3]) then now = tonumber(st[3]) end

local write = false
local old = redis.call('ZRANGEBYSCORE', log, '-inf', fmt(now - per))
if #old > 0 then
  for _, m in ipairs(old) do total = total - tonumber(string.match(m, ':(%d+)$')) end
  redis.call('ZREMRANGEBYSCORE', log, '-inf', fmt(now - per))
  write = true
end
local count = redis.call('ZCARD', log)
if count == 0 then total, seq = 0, 0 end

local allowed, exceeds, retry, rcost, rentry = 0, 0, 0, 0, ''
if undo then
  if redis.call('ZREM', log, undo_ref) == 1 then
    total = total - tonumber(string.match(undo_ref, ':(%d+)$'))
    count = count - 1
    write = true
  end
  allowed = 1
elseif cost == 0 then
  allowed = 1
elseif cost > limit then
  exceeds = 1
elseif total + cost <= limit then
  seq = seq + 1
  rentry = fmt(seq) .. ':' .. fmt(cost)
  redis.call('ZADD', log, fmt(now), rentry)
  total, count = total + cost, count + 1
  allowed, write, rcost = 1, true, cost
else
  local need, freed = total + cost - limit, 0
  local entries = redis.call('ZRANGE', log, 0, -1, 'WITHSCORES')
  for i = 1, #entries, 2 do
    freed = freed + tonumber(string.match(entries[i], ':(%d+)$'))
    if freed >= need then
      retry = tonumber(entries[i + 1]) + per - now
      break
    end
  end
end

local reset = 0
if count > 0 then
  local newest = redis.call('ZRANGE', log, -1, -1, 'WITHSCORES')
  reset = tonumber(newest[2]) + per - now
end
if write then
  if reset > 0 then redis.call('HSET', meta, 'n', fmt(total), 's', fmt(seq), 't', fmt(now)) end
  expire(log, reset)
  expire(meta, reset)
end
return {allowed, limit - total, retry, reset, 0, exceeds, rcost, 0, rentry}
