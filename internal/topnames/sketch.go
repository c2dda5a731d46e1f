package topnames

import "hash/maphash"

const (
	sketchRows  = 4
	sketchWidth = 8192 // 128 KiB of counters: an estimate is off by about 2·DecayEvery/8192 at worst
)

// sketch is a count-min sketch with conservative update: it estimates how
// often each name was seen, never below the truth, in fixed memory.
type sketch struct {
	seed  maphash.Seed
	cells [sketchRows][sketchWidth]uint32
}

// indexes derives one cell per row from one hash (Kirsch and Mitzenmacher).
func (s *sketch) indexes(name string) [sketchRows]uint32 {
	h := maphash.String(s.seed, name)
	h1, h2 := uint32(h), uint32(h>>32)|1
	var idx [sketchRows]uint32
	for i := range idx {
		idx[i] = (h1 + uint32(i)*h2) % sketchWidth
	}
	return idx
}

// add counts name once and returns its estimate. Only the cells at the
// minimum are raised (conservative update), which keeps the others closer
// to the truth.
func (s *sketch) add(name string) uint32 {
	idx := s.indexes(name)
	est := ^uint32(0)
	for i, j := range idx {
		est = min(est, s.cells[i][j])
	}
	est = saturatingInc(est)
	for i, j := range idx {
		s.cells[i][j] = max(s.cells[i][j], est)
	}
	return est
}

// raise makes name's estimate at least count.
func (s *sketch) raise(name string, count uint32) {
	for i, j := range s.indexes(name) {
		s.cells[i][j] = max(s.cells[i][j], count)
	}
}

func (s *sketch) halve() {
	for i := range s.cells {
		for j := range s.cells[i] {
			s.cells[i][j] /= 2
		}
	}
}
