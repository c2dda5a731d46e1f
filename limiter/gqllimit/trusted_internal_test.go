package gqllimit

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/costgate/costgate/internal/syncbuf"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/memstore"
)

// A look at the file reports a broken list once, not at every look; once
// the file is put back as it was, the same breakage is news again.
func TestTrustedLookReportsEachBreakage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pq.json")
	good, _ := json.Marshal(map[string]string{"cheap": "{ __typename }"})
	broken := []byte(`{"cheap":`)
	write := func(data []byte) {
		t.Helper()
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(good)
	lim, err := limiter.New(memstore.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := identity.New(identity.Config{HashKey: []byte("trusted-test-hash-key")})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	reports := 0
	l, err := New(Config{Limiter: lim, Identity: ids, Schema: shopSchema(t), Logger: slog.New(slog.NewJSONHandler(logs, nil)),
		Policy: &limiter.Policy{Name: "graphql", Algorithm: limiter.TokenBucket, Limit: 50, Period: time.Second, Burst: 1000, Key: []string{"ip"}},
		TrustedDocuments: &TrustedDocuments{File: path, CheckEvery: -1, OnLoad: func(_ int, err error) {
			if err != nil {
				reports++
			}
		}}})
	if err != nil {
		t.Fatal(err)
	}
	look := func() { _ = l.loadTrusted(l.pricing(), false) } // what a look that found a change does
	for _, step := range []struct {
		data    []byte
		reports int
	}{{broken, 1}, {broken, 1}, {good, 1}, {broken, 2}, {broken, 2}} {
		write(step.data)
		look()
		if reports != step.reports || strings.Count(logs.String(), "the list in effect stays") != step.reports {
			t.Fatalf("after %q: %d failures reported, want %d:\n%s", step.data, reports, step.reports, logs)
		}
	}
	if l.trust.set.Load().byID["cheap"] == nil {
		t.Error("the list in effect was lost")
	}
}
