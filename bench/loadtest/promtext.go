package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// promText is one scrape of a Prometheus text exposition: every sample's
// value by series (name plus labels as written), and the cumulative buckets
// of each histogram summed over its label sets.
type promText struct {
	samples map[string]float64
	// buckets maps a histogram name (without _bucket) to its upper bounds
	// and their cumulative counts, summed over every other label.
	buckets map[string]map[float64]float64
}

// parsePromText reads the lines it needs of the text format: comments are
// skipped, each sample is "name{labels} value [timestamp]".
func parsePromText(r io.Reader) (*promText, error) {
	p := &promText{samples: map[string]float64{}, buckets: map[string]map[float64]float64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		series, rest, labels := line, "", ""
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				return nil, fmt.Errorf("metrics: unterminated labels: %q", line)
			}
			series, labels, rest = line[:i], line[i+1:j], line[j+1:]
		} else if i := strings.IndexByte(line, ' '); i >= 0 {
			series, rest = line[:i], line[i:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("metrics: no value: %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics: %q: %w", line, err)
		}
		if labels == "" {
			p.samples[series] = v
		} else {
			p.samples[series+"{"+labels+"}"] = v
		}
		if name, ok := strings.CutSuffix(series, "_bucket"); ok {
			le, ok := labelValue(labels, "le")
			if !ok {
				continue
			}
			bound, err := strconv.ParseFloat(le, 64)
			if err != nil {
				return nil, fmt.Errorf("metrics: %q: le: %w", line, err)
			}
			if p.buckets[name] == nil {
				p.buckets[name] = map[float64]float64{}
			}
			p.buckets[name][bound] += v
		}
	}
	return p, sc.Err()
}

// labelValue returns the value of label name in labels (a="x",b="y").
// Values here are numbers and short words: escapes are not needed.
func labelValue(labels, name string) (string, bool) {
	for _, kv := range strings.Split(labels, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if ok && k == name {
			return strings.Trim(v, `"`), true
		}
	}
	return "", false
}

// value returns a sample without labels, and whether the scrape had it.
func (p *promText) value(name string) (float64, bool) {
	v, ok := p.samples[name]
	return v, ok
}

// sum is the total of every series of the metric name, whatever its
// labels, and whether there was any.
func (p *promText) sum(name string) (float64, bool) {
	var total float64
	found := false
	for series, v := range p.samples {
		if series == name || strings.HasPrefix(series, name+"{") {
			total += v
			found = true
		}
	}
	return total, found
}

// bucket is one histogram bucket: the count of observations ≤ upper
// (cumulative, as exposed).
type bucket struct {
	upper float64
	count float64
}

// histogramDelta returns the histogram name's buckets of after less those
// of before, ordered by bound: the observations made between the scrapes.
// It is nil when after has no such histogram.
func histogramDelta(before, after *promText, name string) []bucket {
	a := after.buckets[name]
	if a == nil {
		return nil
	}
	var b map[float64]float64
	if before != nil {
		b = before.buckets[name]
	}
	out := make([]bucket, 0, len(a))
	for upper, n := range a {
		out = append(out, bucket{upper: upper, count: n - b[upper]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].upper < out[j].upper })
	return out
}

// bucketQuantile is a quantile estimated from cumulative buckets.
type bucketQuantile struct {
	// Seconds is interpolated linearly inside the bucket the quantile falls
	// in, as Prometheus's histogram_quantile does.
	Seconds float64
	// Below is set when the quantile falls in the first bucket: the value
	// is then only known to be at most Seconds (the first bound).
	Below bool
	// Above is set when it falls in the +Inf bucket: the value is only
	// known to exceed Seconds (the highest finite bound).
	Above bool
	// Valid is false when there were no observations.
	Valid bool
}

// quantile estimates the q-quantile of the observations in buckets
// (cumulative counts, sorted by bound, the last one +Inf).
func quantile(buckets []bucket, q float64) bucketQuantile {
	if len(buckets) == 0 {
		return bucketQuantile{}
	}
	total := buckets[len(buckets)-1].count
	if total <= 0 {
		return bucketQuantile{}
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for i, b := range buckets {
		if b.count < rank {
			lower, below = b.upper, b.count
			continue
		}
		if math.IsInf(b.upper, 1) {
			return bucketQuantile{Seconds: lower, Above: true, Valid: true}
		}
		if i == 0 {
			return bucketQuantile{Seconds: b.upper, Below: true, Valid: true}
		}
		in := b.count - below
		if in <= 0 {
			return bucketQuantile{Seconds: b.upper, Valid: true}
		}
		return bucketQuantile{Seconds: lower + (b.upper-lower)*(rank-below)/in, Valid: true}
	}
	return bucketQuantile{Seconds: lower, Above: true, Valid: true}
}
