package complexity

import (
	"slices"
	"strconv"
	"strings"
)

// CostSettings describes the cost settings in effect, by schema coordinate: the
// weights (declared, inherited from an interface, or from an overlay) and the list
// sizes. Two schemas price alike where their descriptions agree, so a schema read again
// (by introspection) can be logged with the costs that changed.
func (s *Schema) CostSettings() map[string]string {
	out := map[string]string{}
	for name, t := range s.types {
		if t.hasWeight {
			out[name] = "cost " + strconv.FormatInt(t.weight, 10)
		}
		for _, f := range t.fields {
			var parts []string
			if f.hasWeight {
				parts = append(parts, "cost "+strconv.FormatInt(f.weight, 10))
			}
			if f.listSize != nil {
				parts = append(parts, f.listSize.String())
			}
			if len(parts) > 0 {
				out[f.coordinate] = strings.Join(parts, ", ")
			}
			for an, a := range f.args {
				if a.hasWeight {
					out[f.coordinate+"("+an+":)"] = "cost " + strconv.FormatInt(a.weight, 10)
				}
			}
		}
		for fn, in := range t.inputFields {
			if in.hasWeight {
				out[name+"."+fn] = "cost " + strconv.FormatInt(in.weight, 10)
			}
		}
	}
	return out
}

func (ls *listSizeInfo) String() string {
	var parts []string
	if ls.hasAssumedSize {
		parts = append(parts, "assumedSize: "+strconv.FormatInt(ls.assumedSize, 10))
	}
	if len(ls.slicing) > 0 {
		names := make([]string, len(ls.slicing))
		for i, sa := range ls.slicing {
			names[i] = sa.name
		}
		parts = append(parts, "slicingArguments: ["+strings.Join(names, ", ")+"]")
	}
	if ls.sized != nil {
		parts = append(parts, "sizedFields: ["+strings.Join(ls.sized.paths(""), ", ")+"]")
	}
	parts = append(parts, "requireOneSlicingArgument: "+strconv.FormatBool(ls.requireOne))
	return "listSize(" + strings.Join(parts, ", ") + ")"
}

// paths lists the sizedFields paths under n, dotted and sorted.
func (n *sizedNode) paths(prefix string) []string {
	var out []string
	for name, step := range n.steps {
		if step.sized {
			out = append(out, prefix+name)
		}
		if step.next != nil {
			out = append(out, step.next.paths(prefix+name+".")...)
		}
	}
	slices.Sort(out)
	return out
}
