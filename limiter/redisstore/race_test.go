package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/redisstore"
)

// The classic check-then-act race: with 99 of 100 used, 20 concurrent
// requests must let exactly one through.
func TestCheckThenActRace(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := newStore(t, b.client(), newPrefix(t), nil)
			p := mustValidate(t, &limiter.Policy{Name: "login", Algorithm: limiter.SlidingLog, Limit: 100, Period: time.Minute})
			ctx := context.Background()
			for i := range 99 {
				if d, err := s.Take(ctx, p, "k", 1); err != nil || !d.Allowed {
					t.Fatalf("take %d: %+v %v", i, d, err)
				}
			}
			if got := fire(t, []limiter.Store{s}, p, "k", 20); got != 1 {
				t.Errorf("allowed %d of 20 with one unit left, want exactly 1", got)
			}
		})
	}
}

// Six gateways (six Limiters, each with its own Redis client and
// connections) fire 600 concurrent requests at one key with limit 100:
// exactly 100 pass, for every algorithm, 20 times over. Refill is negligible:
// 100 per day.
func TestGatewaysShareOneLimit(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			stores := make([]limiter.Store, 6)
			prefix := newPrefix(t)
			for i := range stores {
				stores[i] = newStore(t, b.client(), prefix, nil)
			}
			for _, alg := range limiter.Algorithms() {
				p := mustValidate(t, &limiter.Policy{Name: string(alg), Algorithm: alg, Limit: 100, Period: 24 * time.Hour})
				for round := range 20 {
					key := quietWindowKey(p, fmt.Sprintf("round%d", round))
					if got := fire(t, stores, p, key, 600); got != 100 {
						t.Errorf("%s round %d: allowed %d of 600, want exactly 100", alg, round, got)
					}
				}
			}
		})
	}
}

// fire sends n concurrent requests of cost 1, spread over the stores (one
// Limiter each), released together, and returns how many were allowed.
func fire(t *testing.T, stores []limiter.Store, p *limiter.Policy, key string, n int) int {
	t.Helper()
	limiters := make([]*limiter.Limiter, len(stores))
	for i, s := range stores {
		lim, err := limiter.New(s, limiter.WithTimeout(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		limiters[i] = lim
	}
	var (
		allowed atomic.Int64
		errs    atomic.Int64
		lastErr atomic.Value
		wg      sync.WaitGroup
		start   = make(chan struct{})
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			d := limiters[i%len(limiters)].Allow(context.Background(), p, key, 1)
			if d.Err != nil {
				errs.Add(1)
				lastErr.Store(d.Err.Error())
			} else if d.Allowed {
				allowed.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	if e := errs.Load(); e > 0 {
		t.Fatalf("%d store errors, the last: %v", e, lastErr.Load())
	}
	return int(allowed.Load())
}

// quietWindowKey returns a key derived from base whose fixed_window window
// has at least an hour left, so that a burst does not straddle a boundary.
func quietWindowKey(p *limiter.Policy, base string) string {
	if p.Algorithm != limiter.FixedWindow {
		return base
	}
	per := p.PeriodMicros()
	now := time.Now().UnixMicro()
	for i := 0; ; i++ {
		key := fmt.Sprintf("%s-%d", base, i)
		into := ((now-p.WindowOffset(key))%per + per) % per
		if into < per-time.Hour.Microseconds() {
			return key
		}
	}
}

// Six gateway processes, each with its own client, fire 100 concurrent
// requests each at one key with limit 100: exactly 100 pass in all.
func TestGatewayProcessesShareOneLimit(t *testing.T) {
	for _, alg := range []limiter.Algorithm{limiter.SlidingLog, limiter.TokenBucket} {
		t.Run(string(alg), func(t *testing.T) {
			prefix := newPrefix(t)
			release := time.Now().Add(2 * time.Second).UnixMicro()
			type result struct {
				out []byte
				err error
			}
			results := make([]result, 6)
			var wg sync.WaitGroup
			for i := range results {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cmd := exec.Command(os.Args[0], "-test.run=^$")
					cmd.Env = append(os.Environ(),
						childEnv+"=1",
						"CHILD_ADDR="+standalone.Addr(),
						"CHILD_PREFIX="+prefix,
						"CHILD_ALG="+string(alg),
						"CHILD_REQUESTS=100",
						"CHILD_RELEASE="+strconv.FormatInt(release, 10),
					)
					out, err := cmd.CombinedOutput()
					results[i] = result{out, err}
				}()
			}
			wg.Wait()
			total := 0
			for i, r := range results {
				if r.err != nil {
					t.Fatalf("gateway process %d: %v\n%s", i, r.err, r.out)
				}
				var n int
				if _, err := fmt.Sscanf(lastLine(string(r.out)), "allowed=%d", &n); err != nil {
					t.Fatalf("gateway process %d printed %q", i, r.out)
				}
				total += n
			}
			if total != 100 {
				t.Errorf("allowed %d of 600 across 6 processes, want exactly 100", total)
			}
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

const childEnv = "COSTGATE_REDISSTORE_CHILD"

// runChild is one gateway process of TestGatewayProcessesShareOneLimit.
func runChild() int {
	client := redis.NewClient(&redis.Options{Addr: os.Getenv("CHILD_ADDR"), ContextTimeoutEnabled: true, PoolSize: 100})
	defer client.Close()
	s, err := redisstore.New(client, &redisstore.Options{KeyPrefix: os.Getenv("CHILD_PREFIX")})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	alg := limiter.Algorithm(os.Getenv("CHILD_ALG"))
	p := &limiter.Policy{Name: string(alg), Algorithm: alg, Limit: 100, Period: 24 * time.Hour}
	if err := p.Validate(); err != nil {
		fmt.Println(err)
		return 1
	}
	n, _ := strconv.Atoi(os.Getenv("CHILD_REQUESTS"))
	release, _ := strconv.ParseInt(os.Getenv("CHILD_RELEASE"), 10, 64)
	lim, err := limiter.New(s, limiter.WithTimeout(10*time.Second))
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	// Warm the pool so the burst is not serialized behind connection setup.
	if err := client.Ping(context.Background()).Err(); err != nil {
		fmt.Println(err)
		return 1
	}
	time.Sleep(time.Until(time.UnixMicro(release)))
	var allowed, failed atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := lim.Allow(context.Background(), p, "shared", 1)
			switch {
			case d.Err != nil:
				failed.Add(1)
			case d.Allowed:
				allowed.Add(1)
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		fmt.Printf("%d store errors\n", f)
		return 1
	}
	fmt.Printf("allowed=%d\n", allowed.Load())
	return 0
}
