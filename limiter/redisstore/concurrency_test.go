package redisstore_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/memstore"
	"github.com/costgate/costgate/limiter/redistest"
	"github.com/costgate/costgate/limiter/storetest"
)

// Holds and charges of one request, through the Limiter: one script on
// standalone; on a Cluster the hold and the charge are in two slots, sent
// at once, and a denial in one undoes the other.
func TestConcurrencyChecks(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			client := b.client()
			storetest.RunConcurrencyChecks(t, func(t *testing.T, clock func() time.Time) limiter.Store {
				return newStore(t, client, newPrefix(t), clock)
			})
		})
	}
}

// A release sent while Redis is down is retried until it gets through: the
// place is free again as soon as Redis is back (with its data: an
// append-only file here), not a lease later. Meanwhile the policy's
// on_store_error decides what new requests get.
func TestConcurrencyReleaseOutlivesAnOutage(t *testing.T) {
	srv := redistest.StartServer(t, redistest.WithConfig("appendonly", "yes"), redistest.WithConfig("appendfsync", "always"))
	store := newStore(t, srv.Client(withTimeouts), newPrefix(t), nil)
	lim, err := limiter.New(store, limiter.WithTimeout(time.Second), limiter.WithLogger(slog.New(slog.DiscardHandler)),
		limiter.WithLocalFallback(memstore.New(nil), 1))
	if err != nil {
		t.Fatal(err)
	}
	p := &limiter.Policy{Name: "conc", Algorithm: limiter.Concurrency, Limit: 1, Lease: time.Hour}
	ctx := context.Background()
	reqs := []limiter.Request{{Policy: p, Key: "k", Cost: 1}}
	ds, ok := lim.AllowAll(ctx, reqs)
	if !ok {
		t.Fatalf("denied: %+v", ds)
	}
	tk := lim.Ticket(reqs, ds)
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	tk.End(200) // fails: Redis is down

	for mode, want := range map[limiter.FailMode]limiter.Outcome{
		limiter.FailAllow: limiter.ErrorAllowed, limiter.FailDeny: limiter.ErrorDenied, limiter.FailLocal: limiter.ErrorLocal,
	} {
		q := *p
		q.OnStoreError = mode
		r := []limiter.Request{{Policy: &q, Key: "k", Cost: 1}}
		ds, _ := lim.AllowAll(ctx, r)
		if ds[0].Outcome != want {
			t.Errorf("on_store_error %s during the outage: %s, want %s", mode, ds[0].Outcome, want)
		}
		lim.Ticket(r, ds).End(200) // the local hold, if any, released
	}

	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := lim.Drain(dctx); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	d, err := lim.Peek(ctx, p, "k")
	if err != nil || d.Remaining != 1 {
		t.Errorf("after Redis came back: %+v %v, want the place free (the release retried)", d, err)
	}
}
