// Package redisstore is the limiter.Store shared by every gateway through
// Redis: standalone, Sentinel or Cluster, through any go-redis v9 client.
//
// Each algorithm is one Lua script (lua/*.lua, embedded), so a check is one
// round trip and atomic: there is no check-then-act between gateways. The
// scripts take the time from Redis TIME, one clock for all gateways, unless a
// clock is injected for tests; they compute in integers; every key they write
// carries a TTL no longer than its state needs; and all keys of one identity
// share a hash tag, so one Cluster slot.
//
// A script is never retried by the client library: go-redis resends a command
// whose reply was lost, which would run the script (and charge) twice. Scripts
// go out as commands marked NoRetry; EVALSHA falls back to EVAL on NOSCRIPT.
package redisstore

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/limiter"
)

// DefaultKeyPrefix starts every key unless Options.KeyPrefix says otherwise.
const DefaultKeyPrefix = "rl:"

// Processor is the one method of a go-redis client the store uses:
// *redis.Client, *redis.ClusterClient, *redis.Ring and redis.UniversalClient
// all have it.
type Processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// Options configures a Store. nil is ready to use.
type Options struct {
	// KeyPrefix starts every key (default "rl:").
	KeyPrefix string
	// Clock, when set, replaces Redis TIME (tests). Production leaves it nil so
	// that every gateway shares the server's clock.
	Clock func() time.Time
}

// Store is a limiter.Store backed by Redis.
type Store struct {
	client  Processor
	prefix  string
	clock   func() time.Time
	scripts map[limiter.Algorithm]*script
}

var _ limiter.Store = (*Store)(nil)

//go:embed lua/*.lua
var luaFiles embed.FS

type script struct {
	name, src, sha string
}

// New returns a Store over client. A client whose options leave
// ContextTimeoutEnabled off is refused: go-redis would then ignore the
// context deadline on a hung socket, and a check could wait far longer than
// the store timeout.
func New(client Processor, opts *Options) (*Store, error) {
	if err := checkClient(client); err != nil {
		return nil, err
	}
	s := &Store{client: client, prefix: DefaultKeyPrefix, scripts: make(map[limiter.Algorithm]*script)}
	if opts != nil {
		if strings.ContainsAny(opts.KeyPrefix, "{}") {
			// A brace in the prefix would become every key's hash tag: one Cluster slot for all.
			return nil, fmt.Errorf("redisstore: key prefix %q must not contain { or }", opts.KeyPrefix)
		}
		if opts.KeyPrefix != "" {
			s.prefix = opts.KeyPrefix
		}
		s.clock = opts.Clock
	}
	prelude, err := luaFiles.ReadFile("lua/prelude.lua")
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	for _, alg := range limiter.Algorithms() {
		body, err := luaFiles.ReadFile("lua/" + string(alg) + ".lua")
		if err != nil {
			return nil, fmt.Errorf("redisstore: %w", err)
		}
		src := string(prelude) + "\n" + string(body)
		sum := sha1.Sum([]byte(src))
		s.scripts[alg] = &script{name: string(alg), src: src, sha: hex.EncodeToString(sum[:])}
	}
	return s, nil
}

func checkClient(client Processor) error {
	const msg = "redisstore: the Redis client must set ContextTimeoutEnabled, or a hung Redis blocks checks past the store timeout"
	switch c := client.(type) {
	case nil:
		return errors.New("redisstore: nil client")
	case interface{ Options() *redis.Options }:
		if !c.Options().ContextTimeoutEnabled {
			return errors.New(msg)
		}
	case interface{ Options() *redis.ClusterOptions }:
		if !c.Options().ContextTimeoutEnabled {
			return errors.New(msg)
		}
	}
	return nil
}

// Keys returns the Redis keys holding key's state under p. All share the
// hash tag {name:key}, so one Cluster slot.
func (s *Store) Keys(p *limiter.Policy, key string) []string {
	base := s.prefix + "{" + p.Name + ":" + key + "}:"
	switch p.Algorithm {
	case limiter.TokenBucket:
		return []string{base + "tb"}
	case limiter.LeakyBucket:
		return []string{base + "lb"}
	case limiter.SlidingLog:
		return []string{base + "log", base + "meta"}
	case limiter.SlidingWindow:
		return []string{base + "sw"}
	case limiter.FixedWindow:
		return []string{base + "fw"}
	}
	return nil
}

// Take implements limiter.Store.
func (s *Store) Take(ctx context.Context, p *limiter.Policy, key string, cost int64) (limiter.Decision, error) {
	if cost < 0 {
		return limiter.Decision{}, fmt.Errorf("redisstore: negative cost %d", cost)
	}
	return s.run(ctx, p, key, cost, "take", limiter.Receipt{})
}

// Undo implements limiter.Store.
func (s *Store) Undo(ctx context.Context, p *limiter.Policy, key string, r limiter.Receipt) (limiter.Decision, error) {
	if r.Cost < 0 {
		return limiter.Decision{}, fmt.Errorf("redisstore: negative undo cost %d", r.Cost)
	}
	return s.run(ctx, p, key, 0, "undo", r)
}

func (s *Store) run(ctx context.Context, p *limiter.Policy, key string, cost int64, op string, r limiter.Receipt) (limiter.Decision, error) {
	sc := s.scripts[p.Algorithm]
	if sc == nil {
		return limiter.Decision{}, &limiter.PolicyError{Policy: p.Name, Field: "algorithm", Reason: fmt.Sprintf("unknown algorithm %q", p.Algorithm)}
	}
	now := ""
	if s.clock != nil {
		now = strconv.FormatInt(s.clock().UnixMicro(), 10)
	}
	ref := r.Entry
	if p.Algorithm == limiter.SlidingWindow || p.Algorithm == limiter.FixedWindow {
		ref = strconv.FormatInt(r.Window, 10)
	}
	var offset int64
	if p.Algorithm == limiter.FixedWindow {
		offset = p.WindowOffset(key)
	}
	keys := s.Keys(p, key)
	args := []any{now, p.PeriodMicros(), p.Limit, p.Capacity(), cost, op, r.Cost, ref, offset}
	reply, err := sc.run(ctx, s.client, keys, args)
	if err != nil {
		return limiter.Decision{}, fmt.Errorf("redisstore: %s: %w", sc.name, err)
	}
	d, err := decode(reply)
	if err != nil {
		return limiter.Decision{}, fmt.Errorf("redisstore: %s: %w", sc.name, err)
	}
	d.Limit = p.Capacity()
	return d, nil
}

// noRetryCmd is a command go-redis must not resend after a lost reply: the
// script may have run, and running it again would charge twice.
type noRetryCmd struct{ *redis.Cmd }

func (noRetryCmd) NoRetry() bool { return true }

func (sc *script) run(ctx context.Context, c Processor, keys []string, args []any) (any, error) {
	eval := func(name, body string) (any, error) {
		cmdArgs := make([]any, 0, 3+len(keys)+len(args))
		cmdArgs = append(cmdArgs, name, body, len(keys))
		for _, k := range keys {
			cmdArgs = append(cmdArgs, k)
		}
		cmdArgs = append(cmdArgs, args...)
		cmd := noRetryCmd{redis.NewCmd(ctx, cmdArgs...)}
		err := c.Process(ctx, cmd)
		return cmd.Val(), err
	}
	reply, err := eval("evalsha", sc.sha)
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		// The server lost its script cache (restart, failover, SCRIPT FLUSH).
		// EVALSHA did not run, so sending the script itself is not a retry.
		reply, err = eval("eval", sc.src)
	}
	return reply, err
}

func decode(reply any) (limiter.Decision, error) {
	vals, ok := reply.([]any)
	if !ok || len(vals) != 9 {
		return limiter.Decision{}, fmt.Errorf("unexpected reply %v", reply)
	}
	var n [8]int64
	for i := range n {
		v, ok := vals[i].(int64)
		if !ok {
			return limiter.Decision{}, fmt.Errorf("unexpected reply field %d: %v", i, vals[i])
		}
		n[i] = v
	}
	entry, _ := vals[8].(string)
	d := limiter.Decision{
		Allowed:         n[0] == 1,
		Remaining:       n[1],
		RetryAfter:      time.Duration(n[2]) * time.Microsecond,
		ResetAfter:      time.Duration(n[3]) * time.Microsecond,
		Delay:           time.Duration(n[4]) * time.Microsecond,
		ExceedsCapacity: n[5] == 1,
	}
	if n[6] > 0 {
		d.Receipt = limiter.Receipt{Cost: n[6], Window: n[7], Entry: entry}
	}
	return d, nil
}
