package readme

import (
	"os"
	"strings"
	"testing"
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

// goBlocks returns the ```go blocks of the README's section titled heading.
func goBlocks(t *testing.T, readme, heading string) []string {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README has no %q section", heading)
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var blocks []string
	for {
		_, rest, ok := strings.Cut(section, "\n```go\n")
		if !ok {
			return blocks
		}
		block, after, ok := strings.Cut(rest, "\n```\n")
		if !ok {
			t.Fatalf("unclosed go block: %.80q", rest)
		}
		blocks = append(blocks, block)
		section = after
	}
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

// Every Go snippet of the README's Embedding section is compiled code: it
// stands, line for line, in readme.go, which this package builds.
func TestREADMESnippetsCompile(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("readme.go")
	if err != nil {
		t.Fatal(err)
	}
	code := normalized(string(src))
	blocks := goBlocks(t, string(readme), "## Embedding")
	if len(blocks) < 6 {
		t.Fatalf("found %d Go blocks in the Embedding section, want 6 or more", len(blocks))
	}
	for _, b := range blocks {
		if !contains(code, normalized(b)) {
			t.Errorf("README snippet not in readme.go (so never compiled):\n%s", b)
		}
	}
}
