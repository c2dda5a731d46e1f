package memstore_test

import (
	"context"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/memstore"
)

// footprint fills a store with n token_bucket keys, each a fresh string
// that only the store holds, and returns the bytes per key held: live heap
// after a GC, and process memory (what the runtime holds from the OS, less
// what it gave back).
func footprint(n int) (heapPerKey, processPerKey float64, held int) {
	p := &limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 1000, Period: time.Minute, Burst: 150}
	var before, after runtime.MemStats
	runtime.GC()
	debug.FreeOSMemory()
	runtime.ReadMemStats(&before)
	now := time.Now()
	s := memstore.New(&memstore.Options{Clock: func() time.Time { return now }}) // nothing refills
	ctx := context.Background()
	for i := range n {
		s.Take(ctx, p, "user:"+strconv.Itoa(i), 1)
	}
	held = s.Len()
	runtime.GC()
	debug.FreeOSMemory()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	heap := float64(after.HeapAlloc - before.HeapAlloc)
	process := float64((after.Sys - after.HeapReleased) - (before.Sys - before.HeapReleased))
	return heap / float64(held), process / float64(held), held
}

// A token_bucket key, its key string included, costs at most 200 bytes of
// process memory at a million keys.
func TestMemoryPerKey(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a million keys")
	}
	heap, process, held := footprint(memstore.DefaultMaxKeys)
	t.Logf("%d keys: %.0f B/key live heap, %.0f B/key process memory", held, heap, process)
	if process > 200 {
		t.Errorf("%.0f B of process memory per key, want at most 200", process)
	}
}
