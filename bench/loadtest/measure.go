package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// contender is one thing measured at each rate: a server and the request
// it is sent.
type contender struct {
	id    string // short, for JSON and progress lines
	label string // for the tables
	srv   *server
	// graphql marks a GraphQL contender: a 200 whose body has errors fails.
	graphql bool
	target  vegeta.Targeter

	runs       map[int][]*stepRun // by rate, one per repetition
	clientCPUs int                // the load generator's CPUs in its run
	// failedAt is the first rate it did not sustain (0: every rate run),
	// and why.
	failedAt   int
	failReason string
}

// stepRun is one contender at one rate for one step.
type stepRun struct {
	latencies   []time.Duration
	requests    int
	failures    int
	errSample   string
	first, last time.Time // earliest and latest request sent

	wall                           time.Duration
	serverCPU, redisCPU, clientCPU time.Duration
	allocBytes, mallocs            float64
	allocsKnown                    bool
	checks                         []bucket // the check histogram's delta
	storeErrors                    float64
}

func (r *stepRun) add(res *vegeta.Result, graphql bool) {
	r.requests++
	r.latencies = append(r.latencies, res.Latency)
	if r.first.IsZero() || res.Timestamp.Before(r.first) {
		r.first = res.Timestamp
	}
	if res.Timestamp.After(r.last) {
		r.last = res.Timestamp
	}
	msg := res.Error
	switch {
	case msg != "":
	case res.Code < 200 || res.Code > 299:
		msg = "status " + strconv.Itoa(int(res.Code))
	case graphql && bytes.Contains(res.Body, []byte(`"errors"`)):
		msg = "GraphQL errors: " + string(res.Body[:min(len(res.Body), 200)])
	}
	if msg != "" {
		r.failures++
		if r.errSample == "" {
			r.errSample = msg
		}
	}
}

// snapshot is what is read of a server (and of Redis and of this process)
// before and after a step.
type snapshot struct {
	at                             time.Time
	metrics                        *promText
	serverCPU, redisCPU, clientCPU time.Duration
}

// harness holds what every step needs.
type harness struct {
	redis *redis.Client // nil without Redis
	// scrapeCost is, per server, what two scrapes with nothing in between
	// allocate: the scrape's own share of a step's allocation delta.
	scrapeCost map[*server][2]float64
}

// take reads a snapshot. The scrape comes first before a step and last
// after it, so that the server's CPU time for scraping is outside the
// step; its allocations are not, and are subtracted (see calibrate).
func (h *harness) take(ctx context.Context, s *server, scrapeFirst bool) (snapshot, error) {
	var snap snapshot
	var err error
	if scrapeFirst {
		if snap.metrics, err = s.scrape(); err != nil {
			return snap, err
		}
	}
	snap.at = time.Now()
	if snap.serverCPU, err = processCPU(s.pid); err != nil {
		return snap, err
	}
	snap.clientCPU = selfCPU()
	if h.redis != nil {
		if snap.redisCPU, err = redisCPU(ctx, h.redis); err != nil {
			return snap, err
		}
	}
	if !scrapeFirst {
		if snap.metrics, err = s.scrape(); err != nil {
			return snap, err
		}
	}
	return snap, nil
}

// calibrate measures what a scrape allocates in s: the least of three
// deltas between two scrapes with nothing else sent.
func (h *harness) calibrate(s *server) error {
	cost := [2]float64{math.Inf(1), math.Inf(1)}
	for range 3 {
		a, err := s.scrape()
		if err != nil {
			return err
		}
		b, err := s.scrape()
		if err != nil {
			return err
		}
		bytes, mallocs, ok := allocDelta(a, b)
		if !ok {
			return nil
		}
		cost = [2]float64{min(cost[0], bytes), min(cost[1], mallocs)}
	}
	h.scrapeCost[s] = cost
	return nil
}

// allocDelta is the allocation between two scrapes of the Go runtime's
// counters, which both servers expose through client_golang.
func allocDelta(before, after *promText) (bytes, mallocs float64, ok bool) {
	b0, ok0 := before.value("go_memstats_alloc_bytes_total")
	b1, ok1 := after.value("go_memstats_alloc_bytes_total")
	m0, ok2 := before.value("go_memstats_mallocs_total")
	m1, ok3 := after.value("go_memstats_mallocs_total")
	if !ok0 || !ok1 || !ok2 || !ok3 {
		return 0, 0, false
	}
	return b1 - b0, m1 - m0, true
}

// step sends c's request at rate for d and measures it.
func (h *harness) step(ctx context.Context, c *contender, rate int, d time.Duration) (*stepRun, error) {
	if err := c.srv.alive(); err != nil {
		return nil, err
	}
	before, err := h.take(ctx, c.srv, true)
	if err != nil {
		return nil, err
	}
	run := attack(c, rate, d)
	after, err := h.take(ctx, c.srv, false)
	if err != nil {
		return nil, err
	}
	run.wall = after.at.Sub(before.at)
	run.serverCPU = after.serverCPU - before.serverCPU
	run.redisCPU = after.redisCPU - before.redisCPU
	run.clientCPU = after.clientCPU - before.clientCPU
	if bytes, mallocs, ok := allocDelta(before.metrics, after.metrics); ok {
		cost := h.scrapeCost[c.srv]
		run.allocBytes, run.mallocs, run.allocsKnown = max(bytes-cost[0], 0), max(mallocs-cost[1], 0), true
	}
	run.checks = histogramDelta(before.metrics, after.metrics, c.srv.histogram)
	e0, _ := before.metrics.sum(c.srv.storeErrors)
	e1, _ := after.metrics.sum(c.srv.storeErrors)
	run.storeErrors = e1 - e0
	return run, nil
}

// attack sends c's request at rate for d: open loop (vegeta's constant
// pacer starts more workers when all are busy), over the server's client,
// whose connections stay warm from step to step.
func attack(c *contender, rate int, d time.Duration) *stepRun {
	atk := vegeta.NewAttacker(vegeta.Client(c.srv.client))
	run := &stepRun{latencies: make([]time.Duration, 0, int(float64(rate)*d.Seconds())+16)}
	for res := range atk.Attack(c.target, vegeta.ConstantPacer{Freq: rate, Per: time.Second}, d, "") {
		run.add(res, c.graphql)
	}
	return run
}

// selfCPU is the user plus system time of this process, all threads.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPU is redis-server's user plus system time from INFO cpu
// (microsecond resolution).
func redisCPU(ctx context.Context, c *redis.Client) (time.Duration, error) {
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("redis INFO cpu: %w", err)
	}
	var total float64
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("redis INFO cpu: %s: %w", k, err)
			}
			total += f
		}
	}
	return time.Duration(total * float64(time.Second)), nil
}

// redisPID is redis-server's process id, from INFO server.
func redisPID(ctx context.Context, c *redis.Client) (int, error) {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, fmt.Errorf("redis INFO server: no process_id")
}

// summary is one contender at one rate, over every repetition.
type summary struct {
	Rate     int `json:"rate"`
	Requests int `json:"requests"`
	Failures int `json:"failures"`
	// StoreErrors counts checks the store did not answer: the server
	// served them anyway (on_store_error: allow), but the step fails.
	StoreErrors float64 `json:"store_errors"`
	Error       string  `json:"error,omitempty"`
	SentRate    float64 `json:"sent_rate"`
	P50         float64 `json:"p50_ms"`
	P99         float64 `json:"p99_ms"`
	P999        float64 `json:"p999_ms"`
	// Check holds the check histogram's p50, p99 and p99.9.
	Check        [3]bucketQuantile `json:"check"`
	ChecksPerReq float64           `json:"checks_per_request"`
	// CPU times per request, in microseconds; ClientCPU is the share of
	// the client's CPUs the load generator used.
	ServerCPU   float64 `json:"server_cpu_us"`
	RedisCPU    float64 `json:"redis_cpu_us"`
	ClientCPU   float64 `json:"client_cpu_share"`
	AllocsKnown bool    `json:"-"`
	Allocs      float64 `json:"allocs_per_request"`
	AllocBytes  float64 `json:"bytes_per_request"`
}

// checkQuantiles are the quantiles reported, of the latency and of the check.
var checkQuantiles = [3]float64{0.50, 0.99, 0.999}

func summarize(rate int, runs []*stepRun, clientCPUs int) summary {
	s := summary{Rate: rate}
	var lat []time.Duration
	var sent float64
	var wall, serverCPU, redisCPU, clientCPU time.Duration
	var checks []bucket
	s.AllocsKnown = len(runs) > 0
	for _, r := range runs {
		s.Requests += r.requests
		s.Failures += r.failures
		s.StoreErrors += r.storeErrors
		if s.Error == "" {
			s.Error = r.errSample
		}
		lat = append(lat, r.latencies...)
		if span := r.last.Sub(r.first).Seconds(); span > 0 {
			sent += float64(r.requests-1) / span
		}
		wall += r.wall
		serverCPU += r.serverCPU
		redisCPU += r.redisCPU
		clientCPU += r.clientCPU
		s.AllocsKnown = s.AllocsKnown && r.allocsKnown
		s.Allocs += r.mallocs
		s.AllocBytes += r.allocBytes
		checks = addBuckets(checks, r.checks)
	}
	if s.Requests == 0 {
		return s
	}
	n := float64(s.Requests)
	s.SentRate = sent / float64(len(runs))
	slices.Sort(lat)
	ms := func(q float64) float64 { return float64(exactQuantile(lat, q)) / float64(time.Millisecond) }
	s.P50, s.P99, s.P999 = ms(0.50), ms(0.99), ms(0.999)
	for i, q := range checkQuantiles {
		s.Check[i] = quantile(checks, q)
	}
	if len(checks) > 0 {
		s.ChecksPerReq = checks[len(checks)-1].count / n
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / n }
	s.ServerCPU, s.RedisCPU = us(serverCPU), us(redisCPU)
	if wall > 0 && clientCPUs > 0 {
		s.ClientCPU = clientCPU.Seconds() / wall.Seconds() / float64(clientCPUs)
	}
	s.Allocs /= n
	s.AllocBytes /= n
	return s
}

// exactQuantile is the q-quantile of sorted (nearest rank).
func exactQuantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// addBuckets sums two deltas of one histogram (same bounds).
func addBuckets(a, b []bucket) []bucket {
	if a == nil {
		return slices.Clone(b)
	}
	for i := range a {
		if i < len(b) && b[i].upper == a[i].upper {
			a[i].count += b[i].count
		}
	}
	return a
}
