package main

import (
	"strings"
	"testing"
)

// csvSample is benchstat -format csv -col /impl output: the blank line
// between blocks is skipped by encoding/csv, so the blocks run together.
const csvSample = `goos: linux
goarch: amd64
pkg: github.com/costgate/costgate/bench
cpu: Intel(R) Xeon(R) Processor
,redis_rate,,costgate,,,
,sec/op,CI,sec/op,CI,vs base,P
Redis/keys=1/conc=serial-2,4e-05,1%,2e-05,2%,-50.00%,p=0.002 n=6
geomean,4e-05,,2e-05,,-50.00%,

,redis_rate,,costgate,,,
,B/op,CI,B/op,CI,vs base,P
Redis/keys=1/conc=serial-2,679,0%,744,0%,~,p=0.333 n=2
geomean,679,,744,,+9.57%,
`

func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(strings.NewReader(csvSample), &out, "BenchmarkRedis"); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"#### BenchmarkRedis\n",
		"sec/op, median of the runs; ratio = contender / redis_rate",
		"| benchmark | redis_rate | costgate | costgate / redis_rate |",
		"| Redis/keys=1/conc=serial-2 | 40µs | 20µs | 0.50× (p=0.002) |",
		"| geomean | 40µs | 20µs | 0.50× |",
		"B/op, median of the runs",
		"| Redis/keys=1/conc=serial-2 | 679 | 744 | 1.10× ~ |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q; got:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "| benchmark |"); n != 2 {
		t.Errorf("got %d tables, want 2:\n%s", n, got)
	}
}

func TestRunNoTable(t *testing.T) {
	if err := run(strings.NewReader("goos: linux\n"), &strings.Builder{}, ""); err == nil {
		t.Error("no error for an input with no table")
	}
}
