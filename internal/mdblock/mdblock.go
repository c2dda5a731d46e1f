// Package mdblock finds the fenced code blocks of the repository's Markdown
// pages for the tests that run or compile them, so that a snippet of the
// README or of docs/ and the code it shows cannot drift apart:
//
//	conf := mdblock.After(t, "docs/gateways.md", "<!-- the nginx config of TestNginxInFront -->")
//	for _, b := range mdblock.Fenced(mdblock.Section(t, "docs/proxy.md", "## Failures"), "sh") { ... }
//
// A page is named by its path from the repository root, whatever the
// directory of the test that reads it.
package mdblock

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// module is the first line of the repository root's go.mod.
const module = "module github.com/costgate/costgate"

// Root is the repository's root directory: the nearest directory at or
// above the working directory whose go.mod declares the costgate module.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			if first, _, _ := strings.Cut(string(data), "\n"); strings.TrimSpace(first) == module {
				return dir
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("no go.mod of %q at or above the working directory", module)
		}
		dir = parent
	}
}

// Page is the text of the Markdown file at path ("docs/redis.md"), from
// the repository root.
func Page(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(Root(t), path))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// Block is one fenced code block.
type Block struct {
	// Lang is the fence's info string: "yaml", "go", "" for none.
	Lang string
	// Text is the block's lines, each ending in a newline, less the
	// indentation of its fence (a block inside a list item).
	Text string
	// Heading is the text of the last heading above the block ("Configure"
	// for "## Configure"), "" before the first.
	Heading string
}

// Blocks returns the fenced blocks of text (a page, or a Section of one)
// in order. A block left open fails the test.
func Blocks(t testing.TB, text string) []Block {
	t.Helper()
	var (
		blocks  []Block
		heading string
		cur     *Block
		body    strings.Builder
		indent  string
	)
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &Block{Lang: strings.TrimSpace(strings.TrimPrefix(trimmed, "```")), Heading: heading}
			indent = line[:len(line)-len(trimmed)]
			body.Reset()
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.Text = body.String()
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(strings.TrimPrefix(line, indent) + "\n")
		case strings.HasPrefix(line, "#"):
			heading = strings.TrimSpace(strings.TrimLeft(line, "#"))
		}
	}
	if cur != nil {
		t.Fatalf("a %q block under %q is never closed", cur.Lang, cur.Heading)
	}
	return blocks
}

// Fenced returns the text of text's blocks whose language is lang ("" for
// blocks without one).
func Fenced(t testing.TB, text, lang string) []string {
	t.Helper()
	var texts []string
	for _, b := range Blocks(t, text) {
		if b.Lang == lang {
			texts = append(texts, b.Text)
		}
	}
	return texts
}

// Section returns the part of page under heading (its whole line, "##
// Configure") up to the next heading of its level or above. A "#" line
// inside a fenced block (a shell comment) is not a heading.
func Section(t testing.TB, page, heading string) string {
	t.Helper()
	text := Page(t, page)
	_, section, ok := strings.Cut(text, "\n"+heading+"\n")
	if !ok && strings.HasPrefix(text, heading+"\n") {
		section, ok = text[len(heading)+1:], true
	}
	if !ok {
		t.Fatalf("%s has no heading %q", page, heading)
	}
	level := len(heading) - len(strings.TrimLeft(heading, "#"))
	lines := strings.Split(section, "\n")
	code := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimLeft(l, " "), "```") {
			code = !code
		}
		if n := len(l) - len(strings.TrimLeft(l, "#")); !code && n > 0 && n <= level && strings.HasPrefix(l[n:], " ") {
			return strings.Join(lines[:i], "\n")
		}
	}
	return section
}

// After returns the text of the first fenced block of page that follows
// marker (a line such as "<!-- the nginx config of TestNginxInFront -->"),
// which must occur once.
func After(t testing.TB, page, marker string) string {
	t.Helper()
	text := Page(t, page)
	if n := strings.Count(text, marker); n != 1 {
		t.Fatalf("%s has %q %d times, want once", page, marker, n)
	}
	_, rest, _ := strings.Cut(text, marker)
	blocks := Blocks(t, rest)
	if len(blocks) == 0 {
		t.Fatalf("no fenced block after %q in %s", marker, page)
	}
	return blocks[0].Text
}
