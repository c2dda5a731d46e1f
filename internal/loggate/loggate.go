// Package loggate rate-limits log lines: one a second, the rest counted.
package loggate

import (
	"sync"
	"time"
)

// Gate lets one log line a second through and counts the rest, which the
// next line reports: an outage or a flood writes a line a second, not one
// per event. The zero value is ready to use; safe for concurrent use.
type Gate struct {
	mu         sync.Mutex
	next       time.Time
	suppressed int64
}

// Pass reports whether a line may be written at now, and how many were held
// back since the last one that was.
func (g *Gate) Pass(now time.Time) (suppressed int64, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now.Before(g.next) {
		g.suppressed++
		return 0, false
	}
	n := g.suppressed
	g.suppressed, g.next = 0, now.Add(time.Second)
	return n, true
}
