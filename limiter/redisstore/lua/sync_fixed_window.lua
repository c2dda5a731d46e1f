-- fixed_window, local-first. Fields: w = window start, c = count (the
-- leases out included).
local ws = offset + idiv(now - offset, per) * per
local c = 0
if tonumber(st.w) == ws then c = tonumber(st.c) end
local n = gateways(function(lease, win) if win == ws then c = c - lease end end)
for _, p in ipairs(pushes) do if p[2] == ws then c = c + p[1] end end
c = math.max(c, 0)

local allowed, exceeds, retry = 0, 0, 0
if take > limit then
  exceeds = 1
elseif take > 0 and c + take <= limit then
  c, allowed = c + take, 1
elseif take > 0 then
  retry = ws + per - now
end
local lease = 0
if want and c < limit then lease = cdiv(limit - c, n + 1) end
c = c + lease
redis.call('HSET', key, 'w', fmt(ws), 'c', fmt(c))
record(lease, ws, ws + per - now)
return {allowed, lease, limit - c, n, now, retry, ws + per - now, exceeds, ws}
