package redisstore

// RoundTrip is the kind of a round trip to Redis, as Options.OnRoundTrip
// reports it.
type RoundTrip string

const (
	// RoundTripExact carries checks decided in Redis: exact policies, and
	// a local-first key's first check or one past its lease.
	RoundTripExact RoundTrip = "exact"
	// RoundTripSync is a local-first sync: one node's keys that granted or
	// denied since the last one.
	RoundTripSync RoundTrip = "sync"
)

func (s *Store) countRoundTrip(k RoundTrip) {
	if s.onRoundTrip != nil {
		s.onRoundTrip(k)
	}
}
