package mdblock

import (
	"os"
	"reflect"
	"testing"
)

const page = "# Title\n\n## One\n\n```sh\n# a comment, not a heading\nls\n```\n\n- item:\n\n  ```yaml\n  a: 1\n  ```\n\n### Deeper\n\n```\nplain\n```\n\n## Two\n\n```go\nx := 1\n```\n"

func TestBlocks(t *testing.T) {
	got := Blocks(t, page)
	want := []Block{
		{Lang: "sh", Text: "# a comment, not a heading\nls\n", Heading: "One"},
		{Lang: "yaml", Text: "a: 1\n", Heading: "One"}, // inside a list item: its indentation goes
		{Lang: "", Text: "plain\n", Heading: "Deeper"},
		{Lang: "go", Text: "x := 1\n", Heading: "Two"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Blocks:\n got %q\nwant %q", got, want)
	}
	if got := Fenced(t, page, ""); !reflect.DeepEqual(got, []string{"plain\n"}) {
		t.Errorf(`Fenced(""): %q`, got)
	}
}

func TestSection(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeFile(t, dir+"/go.mod", module+"\n")
	writeFile(t, dir+"/p.md", page)
	// "## One" runs past its "###" and its code's "#" line, to "## Two".
	one := Section(t, "p.md", "## One")
	if got := Fenced(t, one, "sh"); len(got) != 1 {
		t.Errorf("## One's sh blocks: %q", got)
	}
	if got := Fenced(t, one, "go"); len(got) != 0 {
		t.Errorf("## One reaches into ## Two: %q", got)
	}
	if got := Fenced(t, Section(t, "p.md", "### Deeper"), ""); !reflect.DeepEqual(got, []string{"plain\n"}) {
		t.Errorf("### Deeper: %q", got)
	}
	if got := After(t, "p.md", "- item:"); got != "a: 1\n" {
		t.Errorf("After: %q", got)
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}
