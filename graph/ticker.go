package graph

import (
	"context"
	"time"

	"github.com/costgate/costgate/graph/model"
)

// minTickInterval bounds how often a ticker emits.
const minTickInterval = 100 * time.Millisecond

// tickInterval is intervalMs as a duration, default 1s, at least minTickInterval.
func tickInterval(intervalMs *int) time.Duration {
	if intervalMs == nil {
		return time.Second
	}
	return max(time.Duration(*intervalMs)*time.Millisecond, minTickInterval)
}

// tick sends a tick at once, then one every interval, until count ticks
// were sent (count ≤ 0: until ctx ends); the channel is closed at the end.
func tick(ctx context.Context, interval time.Duration, count int) <-chan *model.Tick {
	ch := make(chan *model.Tick)
	go func() {
		defer close(ch)
		t := time.NewTicker(interval)
		defer t.Stop()
		for n := 1; count <= 0 || n <= count; n++ {
			if n > 1 {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
			select {
			case ch <- &model.Tick{N: n, At: time.Now().UTC().Format(time.RFC3339)}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}
