-- token_bucket, local-first. Fields: k = tokens x period (may be negative:
-- debt), l = time of the last refill. The refill never lifts the tokens
-- and the leases out together above the capacity.
local full = cap * per
local tokens, last = full, now
if st.k then tokens, last = tonumber(st.k), math.min(tonumber(st.l), now) end
local n, held = gateways(function(lease) tokens = tokens + lease * per end)
local top = full - held * per
-- What this gateway granted goes first, so that the refill is not lost to
-- the top of a bucket it has drawn from (a refund pushes negative grants).
tokens = tokens - (pushes[1][1] + pushes[2][1]) * per
if tokens < top then tokens = math.min(top, tokens + (now - last) * limit) else tokens = top end

local allowed, exceeds, retry = 0, 0, 0
if take > cap then
  exceeds = 1
elseif take > 0 and tokens >= take * per then
  tokens, allowed = tokens - take * per, 1
elseif take > 0 then
  retry = cdiv(take * per - tokens, limit)
end
local lease = 0
-- Whole tokens only: a fraction of one rounded up would be granted
-- before the refill made it.
if want and tokens >= per then lease = cdiv(idiv(tokens, per), n + 1) end
tokens = tokens - lease * per
local reset = cdiv(full - tokens, limit)
redis.call('HSET', key, 'k', fmt(tokens), 'l', fmt(now))
record(lease, 0, reset)
return {allowed, lease, idiv(tokens, per), n, now, retry, reset, exceeds, 0}
