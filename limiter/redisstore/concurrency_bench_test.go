package redisstore_test

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/redisstore"
)

// BenchmarkHold is what a concurrency hold costs beside a rate check, on
// the package's redis-server, measured in one run so that they compare:
// a request's whole life in the store, its check and what its end sends
// (a hold's release, a refund_status refund), with the round trips each
// makes (roundtrips/op). serial is one request at a time (latency: the
// round trips); parallel keeps 64 in flight (throughput: the scripts'
// work; requests then share pipelines, so roundtrips/op counts pipelines).
// Keys are spread so that no limit is reached.
//
//	go test -run '^$' -bench BenchmarkHold -count 10 ./limiter/redisstore/ | benchstat -col /policies -
func BenchmarkHold(b *testing.B) {
	rate := &limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 1 << 30, Period: time.Second, Burst: 1 << 30}
	hour := &limiter.Policy{Name: "api_minute", Algorithm: limiter.TokenBucket, Limit: 1 << 20, Period: time.Minute, Burst: 1 << 20}
	conc := &limiter.Policy{Name: "streams", Algorithm: limiter.Concurrency, Limit: 1 << 20}
	loginIP := &limiter.Policy{Name: "login_ip", Algorithm: limiter.SlidingLog, Limit: 1 << 20, Period: time.Minute, RefundStatus: []string{"2xx"}}
	loginUser := &limiter.Policy{Name: "login_user", Algorithm: limiter.SlidingLog, Limit: 1 << 20, Period: time.Minute, RefundStatus: []string{"2xx"}}
	for _, p := range []*limiter.Policy{rate, hour, conc, loginIP, loginUser} {
		if err := p.Validate(); err != nil {
			b.Fatal(err)
		}
	}
	cases := []struct {
		name     string
		policies []*limiter.Policy
		status   int // the response's status at the end
	}{
		{"rate", []*limiter.Policy{rate}, 200},
		{"concurrency", []*limiter.Policy{conc}, 200},
		{"rate+concurrency", []*limiter.Policy{rate, conc}, 200},
		{"rate+rate", []*limiter.Policy{rate, hour}, 200}, // a second rate policy, for the peer of rate+concurrency
		{"login failed", []*limiter.Policy{loginIP, loginUser}, 401},
		{"login refunded", []*limiter.Policy{loginIP, loginUser}, 200},
	}
	for _, mode := range []string{"serial", "parallel"} {
		for _, tc := range cases {
			b.Run("mode="+mode+"/policies="+tc.name, func(b *testing.B) {
				var trips atomic.Int64
				s, err := redisstore.New(standalone.Client(withTimeouts), &redisstore.Options{KeyPrefix: newPrefix(b),
					OnRoundTrip: func(redisstore.RoundTrip) { trips.Add(1) }})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				lim, err := limiter.New(s, limiter.WithTimeout(10*time.Second))
				if err != nil {
					b.Fatal(err)
				}
				var seq atomic.Int64
				request := func() {
					key := strconv.FormatInt(seq.Add(1)%1024, 10)
					reqs := make([]limiter.Request, len(tc.policies))
					for i, p := range tc.policies {
						reqs[i] = limiter.Request{Policy: p, Key: key, Cost: 1}
					}
					ds, ok := lim.AllowAll(context.Background(), reqs)
					if !ok {
						b.Errorf("denied: %+v", ds)
						return
					}
					// What Ticket.End sends from its own goroutine, sent here
					// on the caller's, so that the benchmark counts it.
					for i, d := range ds {
						p := d.Policy
						if p.Algorithm == limiter.Concurrency || p.RefundsStatus(tc.status) {
							if _, err := s.Undo(context.Background(), p, reqs[i].Key, d.Receipt); err != nil {
								b.Error(err)
							}
						}
					}
				}
				request() // scripts loaded, connections warm
				trips.Store(0)
				b.ReportAllocs()
				b.ResetTimer()
				if mode == "serial" {
					for b.Loop() {
						request()
					}
				} else {
					b.SetParallelism(max(64/runtime.GOMAXPROCS(0), 1))
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							request()
						}
					})
				}
				b.StopTimer()
				b.ReportMetric(float64(trips.Load())/float64(b.N), "roundtrips/op")
			})
		}
	}
}
