package memstore_test

import (
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
