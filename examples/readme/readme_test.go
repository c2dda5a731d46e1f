package readme

import (
	"os"
	"strings"
	"testing"

	"github.com/costgate/costgate/internal/mdblock"
)

// normalized is text as lines with runs of blanks folded (gofmt aligns
// comments in code, the README need not), blank lines left out.
func normalized(text string) []string {
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			lines = append(lines, strings.Join(f, " "))
		}
	}
	return lines
}

func contains(haystack, needle []string) bool {
	for i := 0; i+len(needle) <= len(haystack); i++ {
		match := true
		for j := range needle {
			if haystack[i+j] != needle[j] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// Every Go snippet of the README's "Embedding in one line" and of
// docs/embedding.md is compiled code: it stands, line for line, in
// readme.go, which this package builds.
func TestSnippetsCompile(t *testing.T) {
	src, err := os.ReadFile("readme.go")
	if err != nil {
		t.Fatal(err)
	}
	code := normalized(string(src))
	for _, page := range []struct {
		name, text string
		min        int // the blocks the page has: one missing means it went unchecked
	}{
		{`README.md "Embedding in one line"`, mdblock.Section(t, "README.md", "## Embedding in one line"), 4},
		{"docs/embedding.md", mdblock.Page(t, "docs/embedding.md"), 8},
	} {
		blocks := mdblock.Fenced(t, page.text, "go")
		if len(blocks) < page.min {
			t.Errorf("%s: found %d Go blocks, want %d or more", page.name, len(blocks), page.min)
		}
		for _, b := range blocks {
			if !contains(code, normalized(b)) {
				t.Errorf("%s: a snippet not in readme.go (so never compiled):\n%s", page.name, b)
			}
		}
	}
}

// The Apollo Client link of docs/graphql.md is the one
// examples/apollo/costlink.mjs runs: its code, less comments and imports
// (the program imports more), stands there line for line.
func TestApolloLinkSnippet(t *testing.T) {
	blocks := mdblock.Fenced(t, mdblock.Section(t, "docs/graphql.md", "## Reading the cost in a client"), "js")
	if len(blocks) != 1 {
		t.Fatalf("found %d js blocks, want 1", len(blocks))
	}
	src, err := os.ReadFile("../apollo/costlink.mjs")
	if err != nil {
		t.Fatal(err)
	}
	var link []string
	for _, l := range normalized(blocks[0]) {
		if !strings.HasPrefix(l, "//") && !strings.HasPrefix(l, "import ") {
			link = append(link, l)
		}
	}
	if len(link) < 5 || !contains(normalized(string(src)), link) {
		t.Errorf("docs/graphql.md's costLink is not the one examples/apollo/costlink.mjs runs:\n%s", strings.Join(link, "\n"))
	}
}

// The schema and gqlgen.yml of docs/embedding.md are the example API's: its
// directive definitions stand in graph/schema.graphqls, and its gqlgen.yml
// lines in the repository's gqlgen.yml, which generates graph/.
func TestGqlgenSnippets(t *testing.T) {
	section := mdblock.Section(t, "docs/embedding.md", "## The full configuration: gqlgen")
	for _, c := range []struct{ lang, file, only string }{
		{"graphql", "../../graph/schema.graphqls", "directive "},
		{"yaml", "../../gqlgen.yml", ""},
	} {
		blocks := mdblock.Fenced(t, section, c.lang)
		if len(blocks) != 1 {
			t.Fatalf("found %d %s blocks, want 1", len(blocks), c.lang)
		}
		src, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, l := range normalized(blocks[0]) {
			if strings.HasPrefix(l, c.only) {
				lines = append(lines, l)
			}
		}
		if len(lines) < 2 || !contains(normalized(string(src)), lines) {
			t.Errorf("the page's %s is not in %s:\n%s", c.lang, c.file, strings.Join(lines, "\n"))
		}
	}
}
