package memstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/memstore"
	"github.com/costgate/costgate/limiter/storetest"
)

// Holds and charges of one request, through the Limiter, all or nothing.
func TestConcurrencyChecks(t *testing.T) {
	storetest.RunConcurrencyChecks(t, func(t *testing.T, clock func() time.Time) limiter.Store {
		return memstore.New(&memstore.Options{Clock: clock})
	})
}

// BenchmarkHold is a concurrency hold taken and released against a token
// bucket's take, in process, measured in one run:
//
//	go test -run '^$' -bench BenchmarkHold -count 10 ./limiter/memstore/ | benchstat -col /policy -
func BenchmarkHold(b *testing.B) {
	ctx := context.Background()
	for _, p := range []*limiter.Policy{
		{Name: "rate", Algorithm: limiter.TokenBucket, Limit: 1 << 30, Period: time.Second},
		{Name: "concurrency", Algorithm: limiter.Concurrency, Limit: 1 << 20},
	} {
		b.Run("policy="+p.Name, func(b *testing.B) {
			s := memstore.New(nil)
			keys := make([]string, 1024)
			for i := range keys {
				keys[i] = strconv.Itoa(i)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				key := keys[i%len(keys)]
				i++
				d, err := s.Take(ctx, p, key, 1)
				if err != nil || !d.Allowed {
					b.Fatal(d, err)
				}
				if p.Algorithm == limiter.Concurrency {
					if _, err := s.Undo(ctx, p, key, d.Receipt); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
