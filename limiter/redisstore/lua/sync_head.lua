-- Shared head of the local-first (sync) scripts, after prelude.lua.
-- A gateway leases part of a key's shared budget, grants from its lease
-- locally, and every sync interval gives the lease back, pushes what it
-- granted and takes a new lease, in one call of its algorithm's script.
-- KEYS[1]: the state hash. Fields of the algorithm, plus one per gateway,
--   'g:<id>' = "seen lease window" (its last sync, its lease, the lease's window).
-- ARGV: now, per, limit, cap, gateway id, interval (us), take (a cost to charge
--   exactly, all or nothing; 0: none), want lease (1|0), pushed grants and
--   their window twice (current and previous window), window offset.
-- A lease is 1/(n+1) of what is free (rounded up), n the gateways on the key: a gateway
-- that comes next finds a share at once.
-- Reply: {allowed, lease, remaining (shared, after the lease; may be
--   negative: debt), gateways, now, retry_us, reset_us, exceeds, window}.
local key = KEYS[1]
local now = clock(ARGV[1])
local per, limit, cap = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local me, interval = 'g:' .. ARGV[5], tonumber(ARGV[6])
local take, want = tonumber(ARGV[7]), ARGV[8] == '1'
local pushes = {{tonumber(ARGV[9]), tonumber(ARGV[10])}, {tonumber(ARGV[11]), tonumber(ARGV[12])}}
local offset = tonumber(ARGV[13]) or 0
local h = redis.call('HGETALL', key)
local st = {}
for i = 1, #h, 2 do st[h[i]] = h[i + 1] end
if st.t and now < tonumber(st.t) then now = tonumber(st.t) end

-- gateways gives back the lease of this gateway and of those not seen for
-- three intervals (a gateway stops granting from a lease two intervals
-- after it got it), drops the latter, and returns the number of gateways
-- on the key (this one included) and the leases the others hold.
local function gateways(back)
  local n, held = 1, 0
  for f, v in pairs(st) do
    if string.sub(f, 1, 2) == 'g:' then
      local a, b, c = string.match(v, '^(%S+) (%S+) (%S+)$')
      local seen, lease, win = tonumber(a), tonumber(b), tonumber(c)
      if f == me then
        back(lease, win)
        redis.call('HDEL', key, f)
      elseif seen + 3 * interval <= now then
        back(lease, win)
        redis.call('HDEL', key, f)
      else
        n, held = n + 1, held + lease
      end
    end
  end
  return n, held
end

-- record registers this gateway with its new lease, and sets the state's
-- TTL: the state's own, and at least while a lease can be in use.
local function record(lease, win, ttl)
  if want then redis.call('HSET', key, me, fmt(now) .. ' ' .. fmt(lease) .. ' ' .. fmt(win)) end
  redis.call('HSET', key, 't', fmt(now))
  expire(key, math.max(ttl, 4 * interval))
end
