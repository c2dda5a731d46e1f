-- sliding_window, local-first. Fields: w = current window start, c = cur,
-- p = prev (the leases out included, in the window they were taken in).
local ws = idiv(now, per) * per
local cur, prev = 0, 0
local start = tonumber(st.w)
if start == ws then cur, prev = tonumber(st.c), tonumber(st.p)
elseif start and start + per == ws then prev = tonumber(st.c) end
local function add(win, units)
  if win == ws then cur = cur + units elseif win == ws - per then prev = prev + units end
end
local n = gateways(function(lease, win) add(win, -lease) end)
for _, p in ipairs(pushes) do add(p[2], p[1]) end
cur, prev = math.max(cur, 0), math.max(prev, 0)

local elapsed = now - ws
local function used() return prev * (per - elapsed) + cur * per end
local allowed, exceeds, retry = 0, 0, 0
if take > limit then
  exceeds = 1
elseif take > 0 and used() + take * per <= limit * per then
  cur, allowed = cur + take, 1
elseif take > 0 and cur + take <= limit then
  retry = per - idiv((limit - cur - take) * per, prev) - elapsed
elseif take > 0 then
  retry = per - elapsed + math.max(0, per - idiv((limit - take) * per, cur))
end
local lease = 0
if want and used() < limit * per then lease = idiv(limit * per - used(), per)
  lease = cdiv(lease, n + 1) end
cur = cur + lease
local reset = 2 * per - elapsed
redis.call('HSET', key, 'w', fmt(ws), 'c', fmt(cur), 'p', fmt(prev))
record(lease, ws, reset)
return {allowed, lease, idiv(limit * per - used(), per), n, now, retry, reset, exceeds, ws}
