package complexity

// breakdown collects FieldCost entries relative to one selection set. Fragments keep
// theirs in the memo, so a fragment's entries are computed once like its cost; merging
// copies them under the spread's path, scaled by the enclosing list size.
type breakdown struct {
	entries []FieldCost
	index   map[string]int
}

func (b *breakdown) list() []FieldCost {
	if b == nil {
		return []FieldCost{}
	}
	return b.entries
}

// leaf is the entry of one field, before its children.
func (a *analyzer) leaf(key string, weight, cost int64) *breakdown {
	if !a.breakdown {
		return nil
	}
	return &breakdown{
		entries: []FieldCost{{Path: key, DefinedWeight: weight, RequestedTotal: cost}},
		index:   map[string]int{key: 0},
	}
}

// merge adds src's entries to dst, under prefix and multiplied by mult. Repeated paths
// add up; past MaxBreakdown distinct paths, new ones are dropped and counted truncated.
func (a *analyzer) merge(dst, src *breakdown, prefix string, mult int64) *breakdown {
	if src == nil || len(src.entries) == 0 {
		return dst
	}
	if dst == nil {
		dst = &breakdown{index: make(map[string]int, len(src.entries))}
	}
	for _, e := range src.entries {
		path := prefix + e.Path
		total := mul(e.RequestedTotal, mult)
		if i, ok := dst.index[path]; ok {
			dst.entries[i].RequestedTotal = add(dst.entries[i].RequestedTotal, total)
			continue
		}
		if len(dst.entries) >= MaxBreakdown {
			a.truncated = true
			continue
		}
		dst.index[path] = len(dst.entries)
		dst.entries = append(dst.entries, FieldCost{Path: path, DefinedWeight: e.DefinedWeight, RequestedTotal: total})
	}
	return dst
}
