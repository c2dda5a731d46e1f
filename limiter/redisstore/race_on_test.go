//go:build race

package redisstore_test

// raceEnabled: the race detector slows the client several times over.
const raceEnabled = true
