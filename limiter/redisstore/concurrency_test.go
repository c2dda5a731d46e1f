package redisstore_test

import (
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
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
