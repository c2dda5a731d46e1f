package config

import (
	"os"
	"strings"
	"testing"
)

// yamlBlocks returns the ```yaml blocks of a docs page.
func yamlBlocks(t *testing.T, page string) []string {
	t.Helper()
	text, err := os.ReadFile("../../docs/" + page)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	rest := string(text)
	for {
		_, after, ok := strings.Cut(rest, "```yaml\n")
		if !ok {
			return blocks
		}
		block, tail, ok := strings.Cut(after, "```")
		if !ok {
			t.Fatalf("%s: unclosed yaml block", page)
		}
		blocks = append(blocks, block)
		rest = tail
	}
}

// Every config snippet of docs/redis.md and docs/metrics.md parses (with
// GraphQL off, which they leave out) and sets what the page says.
func TestDocsConfigSnippets(t *testing.T) {
	for page, check := range map[string]func(*Config) bool{
		"redis.md":   func(c *Config) bool { return c.Store.Redis != nil && c.Store.Redis.AllowEviction },
		"metrics.md": func(c *Config) bool { return c.Metrics.Listen != "" },
	} {
		blocks := yamlBlocks(t, page)
		if len(blocks) == 0 {
			t.Errorf("%s has no yaml block", page)
		}
		for _, b := range blocks {
			c, err := Parse(page, []byte(b+"graphql: {path: \"\"}\n"))
			if err != nil {
				t.Errorf("%s: %v\n%s", page, err, b)
				continue
			}
			if !check(c) {
				t.Errorf("%s: the snippet does not set what the page is about:\n%s", page, b)
			}
		}
	}
}
