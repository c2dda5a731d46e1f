// Package topnames bounds a metric label that clients choose, such as a
// GraphQL operation name, to the names seen most often.
//
// # Policy
//
// At most Capacity names hold a slot and are their own label; every other
// name is labelled Other, and the empty name Anonymous. Holders are the most
// frequent names, counted with decay:
//
//   - A name that holds no slot is counted in a count-min sketch (a fixed
//     table of counters, conservative update), so invented names cost a few
//     counters, never memory of their own.
//   - While a slot is free, the next name takes it. Once all are taken, a
//     name takes the slot of the least frequent holder only when its count
//     is higher than that holder's by more than a sixteenth (so two names of
//     about the same rate do not swap slots back and forth). The first names
//     seen therefore keep their slots only while they stay frequent.
//   - Every DecayEvery names counted, all counts are halved, so a name that
//     was frequent once and is no longer loses its slot to one that is now.
//   - A name that loses its slot is labelled Other from then on, until it
//     is again frequent enough to take a slot. Its series are dropped (the
//     drop function given to New), so the number of series stays bounded
//     whatever names clients invent.
//
// A name that is not a GraphQL name ([_A-Za-z][_0-9A-Za-z]*), is longer than
// MaxNameLength, or is spelled Other or Anonymous, is labelled Other.
package topnames

import (
	"hash/maphash"
	"strings"
	"sync"
)

// Labels of the names without a slot of their own.
const (
	Other     = "other"
	Anonymous = "anonymous"
)

// Defaults of Config.
const (
	DefaultCapacity   = 100
	DefaultDecayEvery = 1 << 16
	// MaxNameLength is the longest name that may be a label.
	MaxNameLength = 128
)

// Config configures a Top; the zero value of each field takes its default.
type Config struct {
	Capacity   int    // names holding a slot (default 100)
	DecayEvery uint64 // names counted between two halvings (default 65536)
}

// Top keeps the most frequent names and a value of the caller's for each
// label (the metric series of that name, say).
type Top[V any] struct {
	newValue func(label string) V
	drop     func(label string, v V)

	mu         sync.Mutex
	capacity   int
	decayEvery uint64
	counted    uint64 // names counted since the last decay
	holders    map[string]*holder[V]
	sketch     sketch
	other      V
	anonymous  V
}

type holder[V any] struct {
	label string
	count uint32
	value V
}

// New returns a Top. newValue makes the value of a label when it first
// appears (Other and Anonymous at once); drop releases the value of a name
// that lost its slot. Both are called with the Top locked: they must not
// call it.
func New[V any](cfg Config, newValue func(label string) V, drop func(label string, v V)) *Top[V] {
	t := &Top[V]{newValue: newValue, drop: drop, holders: map[string]*holder[V]{}}
	t.sketch.seed = maphash.MakeSeed()
	t.configure(cfg)
	t.other, t.anonymous = newValue(Other), newValue(Anonymous)
	return t
}

// Configure applies a new capacity and decay; names over the new capacity
// lose their slots, the least frequent first.
func (t *Top[V]) Configure(cfg Config) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.configure(cfg)
	for len(t.holders) > t.capacity {
		t.demote(t.leastFrequent())
	}
}

func (t *Top[V]) configure(cfg Config) {
	t.capacity = cfg.Capacity
	if t.capacity <= 0 {
		t.capacity = DefaultCapacity
	}
	t.decayEvery = cfg.DecayEvery
	if t.decayEvery == 0 {
		t.decayEvery = DefaultDecayEvery
	}
}

// Do counts name and calls f with the value of its label, the Top locked
// (so that f never writes to the series of a name that just lost its slot).
func (t *Top[V]) Do(name string, f func(V)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(t.count(name))
}

// Label returns the label name has now, without counting it.
func (t *Top[V]) Label(name string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch h, ok := t.holders[name]; {
	case name == "":
		return Anonymous
	case ok:
		return h.label
	}
	return Other
}

// Labels returns the names holding a slot.
func (t *Top[V]) Labels() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	labels := make([]string, 0, len(t.holders))
	for _, h := range t.holders {
		labels = append(labels, h.label)
	}
	return labels
}

func (t *Top[V]) count(name string) V {
	if name == "" {
		return t.anonymous
	}
	if t.counted++; t.counted >= t.decayEvery {
		t.decay()
	}
	if h, ok := t.holders[name]; ok {
		h.count = saturatingInc(h.count)
		return h.value
	}
	if !isLabel(name) {
		return t.other
	}
	est := t.sketch.add(name)
	if len(t.holders) < t.capacity {
		return t.promote(name, est).value
	}
	least := t.leastFrequent()
	if est <= least.count+least.count/16 {
		return t.other
	}
	t.demote(least)
	return t.promote(name, est).value
}

func (t *Top[V]) promote(name string, count uint32) *holder[V] {
	label := strings.Clone(name) // name may point into a large request
	h := &holder[V]{label: label, count: count, value: t.newValue(label)}
	t.holders[label] = h
	return h
}

// demote takes h's slot away; its count goes back to the sketch, so that it
// can win a slot again once it is frequent again.
func (t *Top[V]) demote(h *holder[V]) {
	delete(t.holders, h.label)
	t.sketch.raise(h.label, h.count)
	t.drop(h.label, h.value)
}

// leastFrequent is the holder with the lowest count: a scan of the slots,
// paid only by names that hold none.
func (t *Top[V]) leastFrequent() *holder[V] {
	var least *holder[V]
	for _, h := range t.holders {
		if least == nil || h.count < least.count {
			least = h
		}
	}
	return least
}

func (t *Top[V]) decay() {
	t.counted = 0
	for _, h := range t.holders {
		h.count /= 2
	}
	t.sketch.halve()
}

// isLabel reports a GraphQL name no longer than MaxNameLength, other than
// the reserved labels.
func isLabel(name string) bool {
	if len(name) > MaxNameLength || name == Other || name == Anonymous {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		letter := c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

func saturatingInc(n uint32) uint32 {
	if n == ^uint32(0) {
		return n
	}
	return n + 1
}
