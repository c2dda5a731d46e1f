package limiter

import "time"

// SetRenewInterval makes tickets renew their holds every d, for tests
// that cannot wait a third of a lease; the returned func restores it.
func SetRenewInterval(d time.Duration) (restore func()) {
	old := renewInterval
	renewInterval = func(time.Duration) time.Duration { return d }
	return func() { renewInterval = old }
}
