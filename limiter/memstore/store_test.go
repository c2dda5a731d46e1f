package memstore_test

import (
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/memstore"
	"github.com/costgate/costgate/limiter/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock func() time.Time) limiter.Store {
		return memstore.New(&memstore.Options{Clock: clock})
	}, storetest.Options{})
}
