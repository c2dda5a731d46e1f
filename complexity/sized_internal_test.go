package complexity

import (
	"slices"
	"strings"
	"testing"
)

func TestParseSizedField(t *testing.T) {
	for _, tc := range []struct {
		entry string
		want  string // the paths, dotted, separated by " | "
	}{
		{"nodes", "nodes"},
		{"edges.node", "edges.node"},
		{"results { page }", "results.page"},
		{"a { b { c } d }", "a.b.c | a.d"},
		{"a.b { c, d }", "a.b.c | a.b.d"},
		{"  a\n{\tb }  ", "a.b"},
		{"a b", "a | b"},
	} {
		paths, err := parseSizedField(tc.entry)
		if err != nil {
			t.Errorf("parseSizedField(%q): %v", tc.entry, err)
			continue
		}
		got := make([]string, len(paths))
		for i, p := range paths {
			got[i] = strings.Join(p, ".")
		}
		if g := strings.Join(got, " | "); g != tc.want {
			t.Errorf("parseSizedField(%q) = %s, want %s", tc.entry, g, tc.want)
		}
	}
	for _, entry := range []string{"", "a {", "a }", "a { }", "a.", ".a", "a..b", "{ a }", "a/b", "1a"} {
		if paths, err := parseSizedField(entry); err == nil {
			t.Errorf("parseSizedField(%q) = %v, want an error", entry, paths)
		}
	}
	var root sizedNode
	root.add([]string{"a", "b"})
	root.add([]string{"a"})
	if s, _ := root.step("a"); !s.sized || s.next == nil || !slices.Contains(keys(s.next), "b") {
		t.Errorf("a path that ends where another goes on: step a = %+v", s)
	}
}

func keys(n *sizedNode) []string {
	var out []string
	for k := range n.steps {
		out = append(out, k)
	}
	return out
}
