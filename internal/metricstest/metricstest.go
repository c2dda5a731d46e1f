// Package metricstest reads a server's /metrics in tests: every sample of
// the Prometheus text format, with its name, labels and value.
package metricstest

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Sample is one line of the text format.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Samples are a scrape.
type Samples []Sample

// Scrape GETs url and parses what it answers; the test fails on any error.
func Scrape(t testing.TB, url string) Samples {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	s, err := Parse(string(body))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// Parse reads the text format (comments skipped).
func Parse(text string) (Samples, error) {
	var out Samples
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		var s Sample
		rest := line
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			s.Name, rest = line[:i], line[j+1:]
			s.Labels = map[string]string{}
			for _, m := range labelPair.FindAllStringSubmatch(line[i+1:j], -1) {
				v, err := strconv.Unquote(`"` + m[2] + `"`)
				if err != nil {
					return nil, err
				}
				s.Labels[m[1]] = v
			}
		} else {
			s.Name, rest, _ = strings.Cut(line, " ")
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, &strconv.NumError{Func: "Parse", Num: line, Err: strconv.ErrSyntax}
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, err
		}
		s.Value = v
		out = append(out, s)
	}
	return out, nil
}

// Value returns the value of the sample named name whose labels include
// labels, and whether there is one.
func (ss Samples) Value(name string, labels map[string]string) (float64, bool) {
	for _, s := range ss {
		if s.Name == name && matches(s.Labels, labels) {
			return s.Value, true
		}
	}
	return 0, false
}

// LabelValues returns the distinct values of label among the samples whose
// name starts with prefix.
func (ss Samples) LabelValues(prefix, label string) map[string]bool {
	out := map[string]bool{}
	for _, s := range ss {
		if v, ok := s.Labels[label]; ok && strings.HasPrefix(s.Name, prefix) {
			out[v] = true
		}
	}
	return out
}

// Families returns the metric family names the samples belong to: each
// name without the _bucket, _sum or _count of a histogram or summary.
func (ss Samples) Families() map[string]bool {
	names := map[string]bool{}
	for _, s := range ss {
		names[s.Name] = true
	}
	out := map[string]bool{}
	for n := range names {
		out[n] = true
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(n, suffix); ok && (names[base+"_count"] || names[base+"_sum"]) {
				out[base] = true
			}
		}
	}
	return out
}

func matches(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
