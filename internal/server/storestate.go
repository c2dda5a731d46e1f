package server

import (
	"context"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/redisstore"
)

// storeStates are the values of costgate_store_state{state}, one series each.
var storeStates = []redisstore.State{redisstore.StateUp, redisstore.StateDown, redisstore.StateBreakerOpen, redisstore.StateOutOfMemory}

// storeStateCollector reports the store's health, as readiness sees it, at
// each scrape: 1 for the state it is in, 0 for the others; and, from the
// same reading of each Redis node's INFO, the keys it evicted.
type storeStateCollector struct {
	s               *Server
	desc, evictions *prometheus.Desc
}

func newStoreStateCollector(s *Server) storeStateCollector {
	return storeStateCollector{s: s,
		desc: prometheus.NewDesc("costgate_store_state",
			"The store's health at scrape time, as /readyz reports it: 1 for its state (up, down, breaker_open: a circuit breaker skips the store or a node of it, out_of_memory), 0 for the others.",
			[]string{"store", "state"}, nil),
		evictions: prometheus.NewDesc("costgate_store_evictions_total",
			"Keys each Redis node evicted at maxmemory (INFO evicted_keys) since this gateway opened the store, any key, not only costgate's: each evicted costgate key is a limit reset. Anything but maxmemory-policy noeviction evicts them.",
			[]string{"store", "node"}, nil)}
}

func (c storeStateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc; ch <- c.evictions }

func (c storeStateCollector) Collect(ch chan<- prometheus.Metric) {
	c.s.mu.Lock()
	st := c.s.state
	c.s.mu.Unlock()
	if st == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*limiter.DefaultTimeout)
	defer cancel()
	h := st.health(ctx)
	for _, state := range storeStates {
		v := 0.0
		if h.State == state {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, st.name, strings.ReplaceAll(string(state), " ", "_"))
	}
	for _, n := range h.Nodes {
		ch <- prometheus.MustNewConstMetric(c.evictions, prometheus.CounterValue, float64(n.Evictions), st.name, n.Addr)
	}
}
