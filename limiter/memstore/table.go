package memstore

// table maps a key's hash to its entry: open addressing with linear probing
// over one word per slot, the low 32 bits of the hash (the tag, which also
// gives the home slot) beside the entry index plus one (0: an empty slot).
// Only a slot whose tag matches costs a look at the entry, deletion shifts
// the probe run back (no tombstones), and the load stays under 3/4, so a
// slot holds about 10 to 21 bytes per key.
type table struct {
	slots []uint64
	mask  uint64
	n     int
}

const minTableSize = 8

func slotOf(tag uint32, idx int32) uint64 { return uint64(tag)<<32 | uint64(uint32(idx)+1) }

func (t *table) home(tag uint32) uint64 { return uint64(tag) & t.mask }

// insert adds idx under tag; the caller checked that it is not there.
func (t *table) insert(tag uint32, idx int32) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	t.place(slotOf(tag, idx))
	t.n++
}

func (t *table) place(v uint64) {
	i := t.home(uint32(v >> 32))
	for t.slots[i] != 0 {
		i = (i + 1) & t.mask
	}
	t.slots[i] = v
}

func (t *table) grow() {
	old := t.slots
	size := max(minTableSize, 2*len(old))
	t.slots, t.mask = make([]uint64, size), uint64(size-1)
	for _, v := range old {
		if v != 0 {
			t.place(v)
		}
	}
}

// delete removes idx, held under tag.
func (t *table) delete(tag uint32, idx int32) {
	v := slotOf(tag, idx)
	i := t.home(tag)
	for t.slots[i] != v {
		i = (i + 1) & t.mask
	}
	// Shift back every later slot of the run that may sit at i: one whose
	// home is not cyclically within (i, j].
	for j := (i + 1) & t.mask; t.slots[j] != 0; j = (j + 1) & t.mask {
		h := t.home(uint32(t.slots[j] >> 32))
		if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = 0
	t.n--
}
