// Package memstore is the in-process limiter.Store: the same algorithms and
// decisions as limiter/redisstore, for a single instance or as the local
// fallback of a gateway whose Redis is down.
//
// # Memory
//
// A key's state is dropped as soon as its quota is full again (by the next
// call that lands in its shard, or by [Store.Len]), and at most
// [Options.MaxKeys] keys are held (default [DefaultMaxKeys], 1,048,576). A
// token_bucket key costs about 105 bytes of process memory at a million
// keys, its key string included: a 64-byte entry (one cache line: a bucket
// step reads and writes nothing else of the key's), 11 to 21 bytes of key
// table (16 at a million), 4 of heap, and the key. Window and log states
// add 56 bytes, and a sliding log 24 per entry. BenchmarkMemoryPerKey in
// bench/ measures it; TestMemoryPerKey holds it to 200 bytes. A shard never
// grows its entries past its cap, and does not shrink them after a flood.
//
// # Shards
//
// Keys are spread over up to 16 shards by a hash seeded at random per
// store (clients cannot aim keys at one shard), each with its own lock, key
// table and share of the cap: MaxKeys divided by the number of shards. A
// store gets more than one shard only when each holds at least 4096 keys, so
// that shards fill within a few percent of each other. Because the cap is a
// shard's:
//
//   - a shard may be full, and evict, while the store as a whole holds a few
//     percent fewer than MaxKeys;
//   - "least in use" below means least in use within the new key's shard;
//   - a state that is denying is never evicted, in any shard, exactly;
//   - a new key goes to its policy's overflow state (below) when every
//     state of its shard is denying, even if another shard has room.
//
// # Eviction
//
// A new key at the cap evicts the state whose loss grants the least: the
// least quota in use, as a share of its policy's capacity, among the states
// that are not denying. A state is denying when it could not grant a cost
// of 1 at this instant (it holds more than capacity − 1 unit); evicting it
// would hand its owner a fresh quota, so a flood of new identities cannot
// unlock a locked login. When every state is denying, the new key is
// decided by its policy's overflow state: one key's quota, with the
// policy's algorithm and numbers, shared by every key that found no room.
// It is never a store error, so a flood of locked identities cannot make a
// policy that fails open unlimited for newcomers; the charge's receipt
// says where it was taken, so an Undo gives it back there. Each eviction is
// counted ([Options.OnEvict], [Store.Evictions]), and each overflow
// decision counted ([Options.OnOverflow], [Store.Overflows]) and logged, at
// most a line a second per policy. The overflow states are not counted in
// [Store.Len] or the cap (there is one per policy).
//
// Quota in use changes as time passes, so eviction cannot sort states once
// by it. What it relies on instead is the order among the states of one
// policy, which for each algorithm is kept by a key that stays valid as time
// passes or is re-evaluated at known instants:
//
//   - token_bucket and leaky_bucket: every state of a policy refills (drains)
//     at the same rate, so the quota in use at any instant t is
//     (fullAt − t)·rate, where fullAt is when the state is full again. The
//     order by fullAt never changes; it is kept exactly in integers (the µs
//     and the remainder of the division), and it is also the order in which
//     the states expire.
//   - fixed_window: the count in use holds until the window ends, and then
//     the state is gone; the order by count never changes while it lives.
//   - sliding_log: the total in use falls only when the oldest entry leaves
//     the window. Each state is also kept in order of that instant, and
//     before an eviction the states whose instant has passed are trimmed (as
//     their next call would trim them) and re-ranked: each entry leaves
//     once, so this costs O(log n) per request over the log's life.
//   - sliding_window: prev·(P−e)/P + cur decays faster for a larger prev, so
//     the order of two states can flip inside a window. The rank is the
//     quota in use in whole units (as Remaining shows it; in steps of
//     limit/256 above a limit of 511, so the least in use is exact to that
//     step) and each state is kept in order of the instant its rank next
//     falls, solved from its counters; before an eviction the states whose
//     instant has passed are re-ranked. A rank takes at most 512 values, so
//     a state is re-ranked at most that often a window.
//
// Between policies no order holds (their shares fall at different speeds),
// so an eviction compares, at its own instant, the least used state of each
// policy in the shard (there are few policies), by exact shares (128-bit
// products). Whether a state denies is
// monotone in its policy's order, so when a policy's least used state
// denies, all of its states do and the policy is skipped; when every policy
// is skipped, the shard is full of denying states.
//
// The heaps that keep these orders are lazy: a take only ever raises a
// state's key (more in use, full again later), so it leaves the heaps alone,
// and a stale key is raised when it reaches the top. An undo, a refund or a
// fallen rank lowers a key at once. A bucket or fixed_window take therefore
// costs no heap work (a sliding one only when it lowers its rank); creating
// a key costs O(log n), and an eviction O(policies + log n) plus the
// re-ranking above.
//
// # Time
//
// The default clock is the system's wall clock in microseconds (on
// linux/amd64 a gettimeofday vDSO call, half the cost of time.Now);
// [Options.Clock] replaces it in tests. As in Redis, a key's time is
// clamped to the newest it has seen.
package memstore
