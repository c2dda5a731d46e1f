package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/limiter"
)

var _ limiter.BatchStore = (*Store)(nil)

// TakeAll implements limiter.BatchStore: one round trip for all of a
// request's policies. Keys that share a node and a slot (every key of a
// standalone or Sentinel Redis) go in one script, all or nothing inside it.
// A Cluster spreads the policies' keys over slots: each slot's script is
// sent at once, in parallel, and when one denies, the charges the others
// made are undone (a second round trip, only then). The policies apply in
// order: a request on a key an earlier one charged sees that charge (the
// script makes it first, and on a denial puts the key back as it was, DUMP
// and RESTORE).
func (s *Store) TakeAll(ctx context.Context, reqs []limiter.Request) ([]limiter.Decision, error) {
	for _, r := range reqs {
		if s.scripts[r.Policy.Algorithm] == nil {
			return nil, &limiter.PolicyError{Policy: r.Policy.Name, Field: "algorithm", Reason: fmt.Sprintf("unknown algorithm %q", r.Policy.Algorithm)}
		}
		if r.Cost < 0 {
			return nil, fmt.Errorf("redisstore: negative cost %d", r.Cost)
		}
	}
	if anySync(reqs) {
		return s.takeAllSync(ctx, reqs)
	}
	if s.single != nil {
		if _, ring := s.client.(*redis.Ring); !ring {
			return s.takeGroup(ctx, s.single, reqs)
		}
	}
	// Group by slot: one script per group.
	type group struct {
		node *node
		idx  []int
	}
	var groups []*group
	bySlot := map[int]*group{}
	for i, r := range reqs {
		keys := s.Keys(r.Policy, r.Key)
		slot := hashSlot(keys[0])
		g := bySlot[slot]
		if g == nil {
			n, err := s.nodeFor(ctx, keys[0])
			if err != nil {
				return nil, fmt.Errorf("redisstore: multi: %w", err)
			}
			g = &group{node: n}
			bySlot[slot] = g
			groups = append(groups, g)
		}
		g.idx = append(g.idx, i)
	}
	if len(groups) == 1 {
		return s.takeGroup(ctx, groups[0].node, reqs)
	}
	got := make([][]limiter.Decision, len(groups))
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for gi, g := range groups {
		sub := make([]limiter.Request, len(g.idx))
		for j, i := range g.idx {
			sub[j] = reqs[i]
		}
		wg.Go(func() { got[gi], errs[gi] = s.takeGroup(ctx, g.node, sub) })
	}
	wg.Wait()
	all := make([]limiter.Decision, len(reqs))
	decided := make([]bool, len(reqs))
	for gi, g := range groups {
		for j, d := range got[gi] {
			all[g.idx[j]], decided[g.idx[j]] = d, true
		}
	}
	// The first enforced denial, in request order, decides for all.
	first := -1
	for i, r := range reqs {
		if decided[i] && !all[i].Allowed && r.Policy.EffectiveMode() == limiter.Enforce {
			first = i
			break
		}
	}
	failed := errors.Join(errs...)
	if first < 0 && failed == nil {
		return all, nil
	}
	// Give back what the groups that granted charged, newest first: none of
	// it stands.
	undone := make([]bool, len(reqs))
	for i := len(all) - 1; i >= 0; i-- {
		d := all[i]
		if !decided[i] || d.Receipt.Cost == 0 {
			continue
		}
		after, err := s.Undo(ctx, reqs[i].Policy, reqs[i].Key, d.Receipt)
		if err != nil {
			failed = errors.Join(failed, fmt.Errorf("undo %s: %w", reqs[i].Policy.Name, err))
			continue
		}
		all[i].Remaining, all[i].ResetAfter, all[i].Receipt = after.Remaining, after.ResetAfter, limiter.Receipt{}
		undone[i] = true
	}
	if failed != nil {
		return nil, failed
	}
	// Requests on one key share a slot and were undone newest first: the
	// oldest one's state is the one that stays, for all of them.
	for j := range all {
		for i := j + 1; undone[j] && i < len(all); i++ {
			if undone[i] && s.sameKey(reqs[i], reqs[j]) {
				all[i].Remaining, all[i].ResetAfter = all[j].Remaining, all[j].ResetAfter
			}
		}
	}
	for i := range first {
		if !decided[i] { // its group stopped at an earlier denial of its own
			d, err := s.Take(ctx, reqs[i].Policy, reqs[i].Key, 0)
			if err != nil {
				return nil, err
			}
			all[i] = d
		}
	}
	return all[:first+1], nil
}

// sameKey reports whether a and b charge the same Redis keys.
func (s *Store) sameKey(a, b limiter.Request) bool {
	return s.Keys(a.Policy, a.Key)[0] == s.Keys(b.Policy, b.Key)[0]
}

// takeGroup runs the multi-policy script for requests whose keys share a
// slot on node n.
func (s *Store) takeGroup(ctx context.Context, n *node, reqs []limiter.Request) ([]limiter.Decision, error) {
	nkeys := 0
	for _, r := range reqs {
		nkeys++
		if r.Policy.Algorithm == limiter.SlidingLog {
			nkeys++
		}
	}
	args := s.multi.args(nkeys, nkeys+1+7*len(reqs))
	for _, r := range reqs {
		for _, k := range s.Keys(r.Policy, r.Key) {
			args = append(args, k)
		}
	}
	if s.clock != nil {
		args = append(args, s.clock().UnixMicro())
	} else {
		args = append(args, "")
	}
	for _, r := range reqs {
		p := r.Policy
		enforce := 0
		if p.EffectiveMode() == limiter.Enforce {
			enforce = 1
		}
		var offset int64
		if p.Algorithm == limiter.FixedWindow {
			offset = p.WindowOffset(r.Key)
		}
		args = append(args, algCodes[p.Algorithm])
		args = append(args, s.policyConsts(p)...)
		args = append(args, r.Cost, enforce, offset)
	}
	reply, err := n.do(ctx, s.multi, args)
	if err != nil {
		return nil, fmt.Errorf("redisstore: multi: %w", err)
	}
	if len(reply) == 0 || len(reply)%replyLen != 0 || len(reply)/replyLen > len(reqs) {
		return nil, fmt.Errorf("redisstore: multi: unexpected reply %v", reply)
	}
	ds := make([]limiter.Decision, len(reply)/replyLen)
	for i := range ds {
		ds[i] = decode(reqs[i].Policy, reply[i*replyLen:(i+1)*replyLen])
	}
	return ds, nil
}

// hashSlot is Redis Cluster's HASH_SLOT: CRC16 of the hash tag (or key) mod 16384.
func hashSlot(key string) int {
	for i := 0; i < len(key); i++ {
		if key[i] == '{' {
			for j := i + 1; j < len(key); j++ {
				if key[j] == '}' {
					if j > i+1 {
						key = key[i+1 : j]
					}
					break
				}
			}
			break
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}
