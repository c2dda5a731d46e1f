package ratefields_test

import (
	"testing"
	"time"

	"github.com/costgate/costgate/internal/ratefields"
	"github.com/costgate/costgate/limiter"
)

func TestWindow(t *testing.T) {
	tests := []struct {
		p    limiter.Policy
		q, w int64
	}{
		// 150 at once, 16.67/s sustained: a whole bucket refills in 9s
		{limiter.Policy{Algorithm: limiter.TokenBucket, Limit: 1000, Period: time.Minute, Burst: 150}, 150, 9},
		{limiter.Policy{Algorithm: limiter.TokenBucket, Limit: 50, Period: time.Second, Burst: 1000}, 1000, 20},
		{limiter.Policy{Algorithm: limiter.TokenBucket, Limit: 7, Period: time.Second}, 7, 1},
		{limiter.Policy{Algorithm: limiter.TokenBucket, Limit: 3, Period: time.Second, Burst: 10}, 10, 4}, // 3.33s
		{limiter.Policy{Algorithm: limiter.LeakyBucket, Limit: 10, Period: time.Second, Burst: 3}, 3, 1},
		{limiter.Policy{Algorithm: limiter.SlidingLog, Limit: 10, Period: 5 * time.Minute}, 10, 300},
		{limiter.Policy{Algorithm: limiter.SlidingWindow, Limit: 100, Period: time.Hour}, 100, 3600},
		{limiter.Policy{Algorithm: limiter.FixedWindow, Limit: 5, Period: 500 * time.Millisecond}, 5, 1},
	}
	for _, tc := range tests {
		q, w := ratefields.Window(&tc.p)
		if q != tc.q || w != tc.w {
			t.Errorf("%s %d/%s burst %d: q=%d w=%d, want q=%d w=%d", tc.p.Algorithm, tc.p.Limit, tc.p.Period, tc.p.Burst, q, w, tc.q, tc.w)
		}
	}
}
