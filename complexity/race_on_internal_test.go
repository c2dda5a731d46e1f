//go:build race

package complexity

// raceEnabled: under the race detector sync.Pool drops a quarter of what is
// put back, at random, on purpose.
const raceEnabled = true
