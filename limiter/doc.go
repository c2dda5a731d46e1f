// Package limiter is costgate's rate-limiting core: named policies, the
// decisions they make, the Store interface behind them, and a Limiter that
// applies a policy's mode and fail mode.
//
// # Stores
//
// A Store applies one algorithm step atomically. [memstore] keeps state in
// process for a single instance; [redisstore] shares it between gateways
// through Redis (standalone, Sentinel or Cluster), one Lua script per
// algorithm. Both give identical decisions for the same calls; the
// conformance suite in [storetest] holds them to it.
//
// # Algorithms
//
// Every rate algorithm takes a weighted cost and is exact at its own definition.
// P is the period, L the limit, B the burst (capacity of the buckets; it
// defaults to L), c the cost, now the store's clock (Redis TIME, one clock
// for every gateway), clamped to the newest time the key has seen.
//
//   - token_bucket: a bucket of B tokens refilled at L per P; a request takes
//     c tokens all or nothing. Refundable. State: tokens and a time.
//   - leaky_bucket: shaping. With T = P/L a request is admitted when
//     max(TAT, now) − now + c·T ≤ B·T, and should wait
//     Delay = max(TAT, now) − now before it is served. State: the queue and a time.
//   - sliding_log: at most L cost units in any window of length P; a request
//     made at t counts while now < t+P. State: one entry per granted request
//     (its cost beside it) and a running total.
//   - sliding_window: the two-counter approximation
//     prev·(P − elapsed)/P + cur ≤ L, with windows aligned to multiples of P.
//   - fixed_window: one counter per window. Windows start at a per-key offset
//     (from a hash of the key), so that clients do not all reset at once. Its
//     known weakness is the boundary burst: L at the end of one window and L
//     at the start of the next pass within moments, 2·L in all.
//   - concurrency: at most L requests of one key in flight, not a rate
//     (no period). A granted Take is a hold, counted while now is before
//     its lease's end (Policy.Lease, 30s by default); a hold counts one
//     request whatever the cost. See "Requests that end" below.
//
// Arithmetic is exact in integers: time in microseconds and bucket contents
// in cost units × P in microseconds, so Decision.Remaining is never off by
// one from float rounding. Because Redis Lua numbers are doubles, exact to
// 2^53, [Policy.Validate] rejects a policy whose scaled state could pass that.
//
// # Decisions
//
// A denied request consumes nothing. Every request costs at least 1. A cost
// larger than the policy can ever grant sets [Decision.ExceedsCapacity] and
// no RetryAfter: retrying cannot cure it. [Limiter.AllowAll] applies several
// policies all or nothing, undoing earlier charges when a later policy
// denies. They are applied in order, each seeing the charges before it: two
// requests of 100 on one key of a 150 bucket are one granted and one denied
// (then undone), in every store.
//
// A store that implements [BatchStore] charges all of a request's policies
// in one step: redisstore sends them as one script (one round trip), all or
// nothing inside it.
//
// A store error never fails a check: the policy's on_store_error decides
// (allow, deny, or local: an in-process store granting limit/gateways; the
// decision then carries that local policy, so headers built from it agree),
// the decision carries the error, and a store call never takes longer than
// the Limiter's timeout (50ms by default). A call that timed out may have
// charged. Store errors are logged at most once a second per policy, each
// line with the number of lines it stands for (suppressed=N).
//
// A policy with LocalCache remembers in process a key the store denied,
// until the retry-after the store gave, and denies it again without asking:
// a hot abusive key stops loading Redis. It denies only a cost at least the
// denied one, and forgets the key on a refund or undo made here; a refund
// made by another gateway is not seen, so the cache may deny for at most
// that key's retry-after what the store would by then grant.
//
// # Requests that end
//
// Two kinds of policy act when a request's response has ended
// ([Policy.EndsWithResponse]): a concurrency policy releases its hold, and
// a policy with RefundStatus gives its charge back when the status matches
// (a login limit with [2xx] counts failed attempts only). A door takes the
// request's [Ticket] from [Limiter.Ticket] once AllowAll granted, and calls
// [Ticket.End] with the status once the response has ended, whatever ended
// it; until then the ticket renews its holds every lease/3. With a store out
// of process, End sends from a goroutine of its own, retries a failed
// release until the lease would have freed the hold anyway, and
// [Limiter.Drain] waits for what is on its way. A gateway that dies leaves
// its holds for at most one lease.
//
// # Operators
//
// An [Override] changes what a policy does for one key, or for every key
// of a tenant, until it expires: new limits (or a multiplier), an
// exemption, or a block. [Overrides] is the table every check consults
// (identity.Resolver.Request applies it); with none in effect a check pays
// one atomic load. [Limiter.Reset] clears a key's state in a store that is
// a [Resetter], and in this process's deny cache; redisstore tells the
// other gateways.
//
// [memstore]: https://pkg.go.dev/github.com/costgate/costgate/limiter/memstore
// [redisstore]: https://pkg.go.dev/github.com/costgate/costgate/limiter/redisstore
// [storetest]: https://pkg.go.dev/github.com/costgate/costgate/limiter/storetest
package limiter
