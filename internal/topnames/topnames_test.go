package topnames_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/costgate/costgate/internal/topnames"
)

// series tracks the values a Top made and dropped, as the metrics do.
type series struct {
	live    map[string]bool
	dropped []string
}

func newTop(t testing.TB, cfg topnames.Config) (*topnames.Top[string], *series) {
	t.Helper()
	s := &series{live: map[string]bool{}}
	top := topnames.New(cfg,
		func(label string) string {
			if s.live[label] {
				t.Errorf("value of %q made twice", label)
			}
			s.live[label] = true
			return label
		},
		func(label, v string) {
			if label != v || !s.live[label] {
				t.Errorf("dropped %q (value %q) that is not live", label, v)
			}
			delete(s.live, label)
			s.dropped = append(s.dropped, label)
		})
	return top, s
}

// see counts name n times and returns the label of the last.
func see(top *topnames.Top[string], name string, n int) string {
	var label string
	for range n {
		top.Do(name, func(v string) { label = v })
	}
	return label
}

// A name that becomes frequent after the slots were taken takes the slot of
// the least frequent holder, which is labelled other from then on.
func TestLaterFrequentNameTakesASlot(t *testing.T) {
	top, s := newTop(t, topnames.Config{Capacity: 2})
	see(top, "First", 60)
	see(top, "Second", 50)
	if got := see(top, "Later", 50); got != topnames.Other {
		t.Fatalf("Later, seen 50 times, as often as the least frequent holder: label %q, want other", got)
	}
	got := ""
	for i := 0; i < 20 && got != "Later"; i++ {
		got = see(top, "Later", 1)
	}
	if got != "Later" {
		t.Fatalf("Later, seen 70 times, more than Second (50): label %q, want Later", got)
	}
	if l := top.Label("Second"); l != topnames.Other {
		t.Errorf("Second after it lost its slot: label %q, want other", l)
	}
	if l := top.Label("First"); l != "First" {
		t.Errorf("First, the most frequent: label %q, want First", l)
	}
	if !slices.Equal(s.dropped, []string{"Second"}) {
		t.Errorf("dropped %v, want [Second]", s.dropped)
	}
	// Second is other from then on, until it is again more frequent.
	if got := see(top, "Second", 5); got != topnames.Other {
		t.Errorf("Second seen again: label %q, want other", got)
	}
}

// Counts decay: names that were very frequent once and are no longer give
// their slots up to the names frequent now, long before these catch up
// with the old totals.
func TestOldNamesDecay(t *testing.T) {
	top, _ := newTop(t, topnames.Config{Capacity: 2, DecayEvery: 64})
	see(top, "Old1", 10_000)
	see(top, "Old2", 10_000)
	seen := 0
	for ; seen < 1000 && top.Label("New") != "New"; seen++ {
		see(top, "New", 1)
	}
	if top.Label("New") != "New" {
		t.Fatalf("New, seen %d times after Old1 and Old2 stopped: no slot", seen)
	}
	if seen > 200 {
		t.Errorf("New needed %d sightings to take a slot, want at most 200 (DecayEvery 64)", seen)
	}
}

// Clients inventing names cannot grow the labels, nor push a frequent name
// out of its slot.
func TestInventedNamesAreBounded(t *testing.T) {
	top, s := newTop(t, topnames.Config{Capacity: 5})
	see(top, "Hot", 100)
	for i := range 10_000 {
		see(top, fmt.Sprintf("Invented%d", i), 1)
		if i%10 == 0 {
			if got := see(top, "Hot", 1); got != "Hot" {
				t.Fatalf("after %d invented names, Hot is labelled %q", i, got)
			}
		}
		if len(s.live) > 5+2 {
			t.Fatalf("after %d invented names, %d labels live: %v", i, len(s.live), s.live)
		}
	}
	if n := len(top.Labels()); n > 5 {
		t.Errorf("%d names hold slots, capacity 5", n)
	}
}

func TestLabels(t *testing.T) {
	top, _ := newTop(t, topnames.Config{Capacity: 10})
	for _, tc := range []struct{ name, want string }{
		{"", topnames.Anonymous},
		{"GetProducts", "GetProducts"},
		{"_private2", "_private2"},
		{"other", topnames.Other},
		{"anonymous", topnames.Other},
		{"2fast", topnames.Other},
		{"has space", topnames.Other},
		{"naïve", topnames.Other},
		{"\xff\xfe", topnames.Other},
		{string(make([]byte, topnames.MaxNameLength+1)), topnames.Other},
	} {
		if got := see(top, tc.name, 1); got != tc.want {
			t.Errorf("%q: label %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A smaller capacity takes the slots of the least frequent names.
func TestConfigureShrinks(t *testing.T) {
	top, s := newTop(t, topnames.Config{Capacity: 3})
	see(top, "A", 30)
	see(top, "B", 20)
	see(top, "C", 10)
	top.Configure(topnames.Config{Capacity: 1})
	if got := top.Labels(); !slices.Equal(got, []string{"A"}) {
		t.Errorf("holders %v, want [A]", got)
	}
	slices.Sort(s.dropped)
	if !slices.Equal(s.dropped, []string{"B", "C"}) {
		t.Errorf("dropped %v, want [B C]", s.dropped)
	}
}

func BenchmarkDo(b *testing.B) {
	b.Run("known name", func(b *testing.B) {
		top, _ := newTop(b, topnames.Config{})
		see(top, "GetProducts", 1)
		b.ReportAllocs()
		for b.Loop() {
			top.Do("GetProducts", func(string) {})
		}
	})
	b.Run("invented names", func(b *testing.B) {
		top, _ := newTop(b, topnames.Config{})
		for i := range 100 {
			see(top, fmt.Sprintf("Known%d", i), 1000)
		}
		names := make([]string, 4096)
		for i := range names {
			names[i] = fmt.Sprintf("Invented%d", i)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			top.Do(names[i%len(names)], func(string) {})
			i++
		}
	})
}
