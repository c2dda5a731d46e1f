// Command benchtable turns benchstat's CSV (benchstat -format csv -col …)
// into markdown tables: one per unit, each contender's median beside the
// base's (the first column), with the ratio contender / base and
// benchstat's verdict on it ("~" when the difference is not significant).
//
//	benchstat -format csv -col /impl -filter .name:Redis new.txt | go run ./benchtable -title BenchmarkRedis
package main

import (
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

func main() {
	title := flag.String("title", "", "heading above the tables")
	flag.Parse()
	if err := run(os.Stdin, os.Stdout, *title); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

// table is one block of benchstat's CSV: one unit, one row per benchmark.
type table struct {
	unit     string
	columns  []column
	rows     [][]string
	rowNames []string
}

// column is one contender's place in a block's rows.
type column struct {
	name  string
	value int // index of its median
	vs    int // index of its "vs base" cell; -1 for the base
	p     int // index of its P cell; -1 for the base
}

func run(in io.Reader, out io.Writer, title string) error {
	r := csv.NewReader(in)
	r.FieldsPerRecord = -1
	records, err := r.ReadAll()
	if err != nil {
		return err
	}
	tables, err := parse(records)
	if err != nil {
		return err
	}
	if len(tables) == 0 {
		return errors.New("no benchstat table in the input")
	}
	if title != "" {
		fmt.Fprintf(out, "#### %s\n\n", title)
	}
	for _, t := range tables {
		t.markdown(out)
	}
	return nil
}

// parse reads benchstat's blocks: a row of contender names, a row of
// units ("sec/op", "CI", "vs base", "P"), then the benchmarks.
func parse(records [][]string) ([]*table, error) {
	var tables []*table
	var cur *table
	var names []string
	for _, rec := range records {
		switch {
		case len(rec) <= 1:
			// goos:, pkg:, cpu: lines. (encoding/csv skips the blank
			// lines between blocks.)
			cur, names = nil, nil
		case rec[0] == "" && (names == nil || cur != nil):
			names, cur = rec, nil
		case rec[0] == "":
			t, err := newTable(names, rec)
			if err != nil {
				return nil, err
			}
			cur = t
			tables = append(tables, cur)
		case cur != nil:
			cur.rowNames = append(cur.rowNames, rec[0])
			cur.rows = append(cur.rows, rec)
		}
	}
	return tables, nil
}

func newTable(names, units []string) (*table, error) {
	t := &table{}
	for i := 1; i < len(units); i++ {
		switch units[i] {
		case "CI", "vs base", "P", "":
			continue
		}
		if t.unit == "" {
			t.unit = units[i]
		}
		c := column{name: at(names, i), value: i, vs: -1, p: -1}
		if c.name == "" {
			return nil, fmt.Errorf("no contender name above column %d", i+1)
		}
		for j := i + 1; j < len(units) && j < i+4; j++ {
			switch units[j] {
			case "vs base":
				c.vs = j
			case "P":
				c.p = j
			}
		}
		t.columns = append(t.columns, c)
	}
	if len(t.columns) == 0 {
		return nil, errors.New("a block with no contender")
	}
	return t, nil
}

func at(rec []string, i int) string {
	if i < len(rec) {
		return rec[i]
	}
	return ""
}

func (t *table) markdown(w io.Writer) {
	base := t.columns[0]
	fmt.Fprintf(w, "%s, median of the runs; ratio = contender / %s\n\n| benchmark | %s |", t.unit, base.name, base.name)
	sep := "|---|---:|"
	for _, c := range t.columns[1:] {
		fmt.Fprintf(w, " %s | %s / %s |", c.name, c.name, base.name)
		sep += "---:|---:|"
	}
	fmt.Fprintf(w, "\n%s\n", sep)
	for i, row := range t.rows {
		b, bok := number(at(row, base.value))
		fmt.Fprintf(w, "| %s | %s |", t.rowNames[i], format(b, bok, t.unit))
		for _, c := range t.columns[1:] {
			v, ok := number(at(row, c.value))
			ratio := "—"
			if ok && bok && b != 0 {
				ratio = fmt.Sprintf("%.2f×", v/b)
				if verdict := at(row, c.vs); verdict == "~" {
					ratio += " ~"
				} else if p := at(row, c.p); p != "" {
					ratio += " (" + strings.Fields(p)[0] + ")"
				}
			}
			fmt.Fprintf(w, " %s | %s |", format(v, ok, t.unit), ratio)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

func number(s string) (float64, bool) {
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil && !math.IsNaN(v)
}

// format writes v in the unit benchstat used: times (sec/op, cpu-sec/op,
// …) in ns, µs or ms, anything else as a plain number.
func format(v float64, ok bool, unit string) string {
	if !ok {
		return "—"
	}
	if strings.Contains(unit, "sec/") {
		switch {
		case v >= 1e-3:
			return fmt.Sprintf("%.3gms", v*1e3)
		case v >= 1e-6:
			return fmt.Sprintf("%.3gµs", v*1e6)
		}
		return fmt.Sprintf("%.3gns", v*1e9)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}
