package config

import (
	"reflect"
	"testing"

	"github.com/costgate/costgate/internal/mdblock"
)

// Every config snippet of the README and of docs/configuration.md is a
// config file that loads as it is written.
func TestDocsConfigFiles(t *testing.T) {
	for _, page := range []struct {
		path string
		min  int // the blocks the page has: one missing went unchecked
	}{{"README.md", 1}, {"docs/configuration.md", 4}} {
		blocks := mdblock.Fenced(t, mdblock.Page(t, page.path), "yaml")
		if len(blocks) < page.min {
			t.Errorf("%s: found %d yaml blocks, want %d or more", page.path, len(blocks), page.min)
		}
		for _, b := range blocks {
			if _, err := Parse(page.path, []byte(b)); err != nil {
				t.Errorf("%s: a snippet does not load: %v\n%s", page.path, err, b)
			}
		}
	}
}

// The config snippets of docs/redis.md and docs/metrics.md parse (with
// GraphQL off, which they leave out) and set what their section is about.
func TestDocsConfigSnippets(t *testing.T) {
	sets := map[string]func(*Config) bool{
		"Redis, Sentinel and Cluster": func(c *Config) bool { return c.Store.Redis != nil && len(c.Store.Redis.Cluster) > 0 },
		"Local-first limits (`sync`)": func(c *Config) bool {
			for _, p := range c.LimiterPolicies() {
				if p.Sync > 0 {
					return true
				}
			}
			return false
		},
		"maxmemory-policy: noeviction": func(c *Config) bool { return c.Store.Redis != nil && c.Store.Redis.AllowEviction },
		"Who may read /metrics":        func(c *Config) bool { return c.Metrics.Listen != "" },
	}
	seen := map[string]bool{}
	for _, page := range []string{"docs/redis.md", "docs/metrics.md"} {
		for _, b := range mdblock.Blocks(t, mdblock.Page(t, page)) {
			if b.Lang != "yaml" {
				continue
			}
			c, err := Parse(page, []byte(b.Text+noGraphQL))
			if err != nil {
				t.Errorf("%s: %v\n%s", page, err, b.Text)
				continue
			}
			check, ok := sets[b.Heading]
			if !ok {
				t.Errorf("%s: a yaml block under %q, which this test does not know", page, b.Heading)
				continue
			}
			seen[b.Heading] = true
			if !check(c) {
				t.Errorf("%s: the snippet under %q does not set what its section is about:\n%s", page, b.Heading, b.Text)
			}
		}
	}
	for heading := range sets {
		if !seen[heading] {
			t.Errorf("no yaml block under %q", heading)
		}
	}
}

// The demo config docs/configuration.md shows is the one `go run .` runs:
// it loads to the very config of Demo().
func TestDocsDemoConfig(t *testing.T) {
	block := mdblock.After(t, "docs/configuration.md", "<!-- the demo config: internal/config's demoYAML, as go run . loads it -->")
	got, err := parse(DemoName, []byte(block), false)
	if err != nil {
		t.Fatalf("the page's demo config: %v", err)
	}
	want := Demo()
	got.src, want.src = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("docs/configuration.md's demo config differs from demoYAML:\n got %+v\nwant %+v", got, want)
	}
}
