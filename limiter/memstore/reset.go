package memstore

import (
	"context"
	"hash/maphash"

	"github.com/costgate/costgate/limiter"
)

var _ limiter.Resetter = (*Store)(nil)

// Reset implements limiter.Resetter: key's state under p (a policy of p's
// name and algorithm, whatever its limits) is dropped, so that its next
// check finds the quota full.
func (s *Store) Reset(_ context.Context, p *limiter.Policy, key string) error {
	pr := paramsOf(p)
	h := maphash.String(s.seed, key)
	sh := &s.shards[h>>s.shift]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if idx := sh.lookup(p, pr, key, uint32(h)); idx >= 0 {
		sh.drop(idx)
	}
	return nil
}
