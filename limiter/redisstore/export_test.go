package redisstore

import "context"

// ManualSync stops s from syncing local-first policies on its own: the test
// calls FlushSync at the moments it chooses. Call it before s's first check.
func ManualSync(s *Store) { s.lf.manual = true }

// FlushSync runs one sync of s's local-first policies.
func FlushSync(s *Store) { s.lf.flush(context.Background()) }

// SyncRoundTrips is the number of calls to Redis s's local-first policies made.
func SyncRoundTrips(s *Store) int64 { return s.lf.roundTrips.Load() }

// SweepSync drops s's local-first entries idle as of now; it returns how many are left.
func SweepSync(s *Store) int {
	s.lf.sweep(s.lf.now())
	s.lf.mu.RLock()
	defer s.lf.mu.RUnlock()
	return len(s.lf.entries)
}
