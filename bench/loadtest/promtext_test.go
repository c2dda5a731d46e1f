package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

const scrapeBefore = `# HELP costgate_check_duration_seconds Time one rate-limit check took, by store.
# TYPE costgate_check_duration_seconds histogram
costgate_check_duration_seconds_bucket{store="redis",le="0.0001"} 10
costgate_check_duration_seconds_bucket{store="redis",le="0.00025"} 20
costgate_check_duration_seconds_bucket{store="redis",le="0.0005"} 20
costgate_check_duration_seconds_bucket{store="redis",le="+Inf"} 20
costgate_check_duration_seconds_sum{store="redis"} 0.002
costgate_check_duration_seconds_count{store="redis"} 20
costgate_store_errors_total{store="redis"} 1
go_memstats_alloc_bytes_total 1.5e+06
go_memstats_mallocs_total 1000
`

const scrapeAfter = `costgate_check_duration_seconds_bucket{store="redis",le="0.0001"} 10
costgate_check_duration_seconds_bucket{store="redis",le="0.00025"} 60
costgate_check_duration_seconds_bucket{store="redis",le="0.0005"} 110
costgate_check_duration_seconds_bucket{store="redis",le="+Inf"} 120
costgate_check_duration_seconds_bucket{store="memory",le="0.0001"} 0
costgate_check_duration_seconds_bucket{store="memory",le="0.00025"} 0
costgate_check_duration_seconds_bucket{store="memory",le="0.0005"} 0
costgate_check_duration_seconds_bucket{store="memory",le="+Inf"} 0
costgate_store_errors_total{store="redis"} 4
costgate_store_errors_total{store="memory"} 2
go_memstats_alloc_bytes_total 2.5e+06
go_memstats_mallocs_total 1500
`

func parse(t *testing.T, text string) *promText {
	t.Helper()
	p, err := parsePromText(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestHistogramDelta(t *testing.T) {
	before, after := parse(t, scrapeBefore), parse(t, scrapeAfter)
	got := histogramDelta(before, after, "costgate_check_duration_seconds")
	want := []bucket{{0.0001, 0}, {0.00025, 40}, {0.0005, 90}, {math.Inf(1), 100}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("bucket %d: got %v, want %v", i, got[i], want[i])
		}
	}
	if b, m, ok := allocDelta(before, after); !ok || b != 1e6 || m != 500 {
		t.Errorf("allocDelta = %v, %v, %v; want 1e6, 500, true", b, m, ok)
	}
	if n, _ := after.sum("costgate_store_errors_total"); n != 6 {
		t.Errorf("store errors: got %v, want 6 (both stores)", n)
	}
	if _, ok := after.sum("costgate_missing_total"); ok {
		t.Error("sum of a missing metric reported found")
	}
}

func TestQuantile(t *testing.T) {
	// 100 observations: 40 in (0.1ms, 0.25ms], 50 in (0.25ms, 0.5ms], 10 above.
	buckets := []bucket{{0.0001, 0}, {0.00025, 40}, {0.0005, 90}, {math.Inf(1), 100}}
	for _, tc := range []struct {
		q    float64
		want bucketQuantile
	}{
		{0.2, bucketQuantile{Seconds: 0.0001 + 0.00015*20/40, Valid: true}},
		{0.5, bucketQuantile{Seconds: 0.00025 + 0.00025*10/50, Valid: true}},
		{0.9, bucketQuantile{Seconds: 0.0005, Valid: true}},
		{0.99, bucketQuantile{Seconds: 0.0005, Above: true, Valid: true}},
	} {
		got := quantile(buckets, tc.q)
		if got.Valid != tc.want.Valid || got.Above != tc.want.Above || got.Below != tc.want.Below || math.Abs(got.Seconds-tc.want.Seconds) > 1e-12 {
			t.Errorf("quantile(%v) = %+v, want %+v", tc.q, got, tc.want)
		}
	}
	first := []bucket{{0.0001, 5}, {0.00025, 5}, {math.Inf(1), 5}}
	if got := quantile(first, 0.99); !got.Below || got.Seconds != 0.0001 {
		t.Errorf("quantile in the first bucket = %+v, want below 0.0001", got)
	}
	if got := quantile([]bucket{{0.0001, 0}, {math.Inf(1), 0}}, 0.5); got.Valid {
		t.Errorf("quantile of nothing = %+v, want invalid", got)
	}
}

func TestExactQuantile(t *testing.T) {
	lat := make([]time.Duration, 1000)
	for i := range lat {
		lat[i] = time.Duration(i+1) * time.Microsecond
	}
	for q, want := range map[float64]time.Duration{0.5: 500 * time.Microsecond, 0.99: 990 * time.Microsecond, 0.999: 999 * time.Microsecond, 1: time.Millisecond} {
		if got := exactQuantile(lat, q); got != want {
			t.Errorf("exactQuantile(%v) = %v, want %v", q, got, want)
		}
	}
}

func TestCPULayout(t *testing.T) {
	for _, tc := range []struct {
		n                      int
		servers, redis, client string
	}{
		{1, "", "", ""},
		{2, "0", "1", "1"},
		{4, "0-1", "2", "3"},
		{8, "0-3", "4", "5-7"},
	} {
		s, r, c := cpuLayout(tc.n)
		if s != tc.servers || r != tc.redis || c != tc.client {
			t.Errorf("cpuLayout(%d) = %q, %q, %q; want %q, %q, %q", tc.n, s, r, c, tc.servers, tc.redis, tc.client)
		}
		if tc.client != "" && cpuCount(c) != tc.n-cpuCount(s)-cpuCount(r) && tc.n >= 4 {
			t.Errorf("cpuLayout(%d): client CPUs %q do not make up the rest", tc.n, c)
		}
	}
}
