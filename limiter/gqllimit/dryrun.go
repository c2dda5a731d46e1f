package gqllimit

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/vektah/gqlparser/v2/ast"
)

// rootFields calls fn with each root field of op that runs with vars, as
// gqlgen collects them: through inline fragments and fragment spreads (of a
// validated document), @skip and @include applied.
func rootFields(op *ast.OperationDefinition, vars map[string]any, fn func(*ast.Field)) {
	var walk func(set ast.SelectionSet, depth int)
	walk = func(set ast.SelectionSet, depth int) {
		if depth > 100 { // validation refuses fragment cycles; this only bounds the walk
			return
		}
		for _, sel := range set {
			switch s := sel.(type) {
			case *ast.Field:
				if included(s.Directives, vars) {
					fn(s)
				}
			case *ast.InlineFragment:
				if included(s.Directives, vars) {
					walk(s.SelectionSet, depth+1)
				}
			case *ast.FragmentSpread:
				if s.Definition != nil && included(s.Directives, vars) {
					walk(s.Definition.SelectionSet, depth+1)
				}
			}
		}
	}
	walk(op.SelectionSet, 0)
}

// included applies @skip and @include.
func included(dirs ast.DirectiveList, vars map[string]any) bool {
	for _, d := range dirs {
		if d.Name != "skip" && d.Name != "include" {
			continue
		}
		a := d.Arguments.ForName("if")
		if a == nil || a.Value == nil {
			continue
		}
		v, err := a.Value.Value(vars)
		if b, ok := v.(bool); err == nil && ok && b == (d.Name == "skip") {
			return false
		}
	}
	return true
}

// isDryRunField reports a root rateLimit(dryRun: true) field, GitHub's way
// of asking what a query would cost.
func isDryRunField(op *ast.OperationDefinition, vars map[string]any) bool {
	if op.Operation != ast.Query {
		return false
	}
	dry := false
	rootFields(op, vars, func(f *ast.Field) {
		if f.Name != "rateLimit" {
			return
		}
		if a := f.Arguments.ForName("dryRun"); a != nil && a.Value != nil {
			if v, err := a.Value.Value(vars); err == nil && v == true {
				dry = true
			}
		}
	})
	return dry
}

// dryRunOperation is op reduced to its rateLimit (and __typename) root
// fields: what a rateLimit(dryRun: true) query runs. The other root fields
// are left out of the answer (not answered null: a null in a non-null root
// field would make the whole of data null). op itself is not changed: it
// may be shared through gqlgen's query cache.
func dryRunOperation(op *ast.OperationDefinition, vars map[string]any) *ast.OperationDefinition {
	reduced := *op
	reduced.SelectionSet = nil
	rootFields(op, vars, func(f *ast.Field) {
		if f.Name == "rateLimit" || f.Name == "__typename" {
			reduced.SelectionSet = append(reduced.SelectionSet, f)
		}
	})
	return &reduced
}

// introspects reports a root __schema or __type field, also through fragments.
func introspects(op *ast.OperationDefinition, vars map[string]any) bool {
	found := false
	rootFields(op, vars, func(f *ast.Field) {
		if f.Name == "__schema" || f.Name == "__type" {
			found = true
		}
	})
	return found
}

// dryRunData is the "data" of a dry run, for an executor that answers it
// itself (gqlproxy): null for the Costgate-Dry-Run header; for
// rateLimit(dryRun: true), each root rateLimit field under its response key,
// in GitHub's shape, with what costgate knows (cost, limit, remaining,
// resetAt, used, __typename) and null for any other field it selects. The
// other root fields are left out, as the embedded example API leaves them.
func dryRunData(st *state, op *ast.OperationDefinition, vars map[string]any) json.RawMessage {
	if !st.dryRunData {
		return json.RawMessage("null")
	}
	s := st.stats
	known := map[string]any{
		"cost":      s.Requested,
		"limit":     s.Limit,
		"remaining": max(s.Remaining, 0),
		"resetAt":   s.ResetAt.UTC().Format(time.RFC3339),
		"used":      s.Limit - max(s.Remaining, 0),
	}
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	member := func(key string, value any) {
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		k, _ := json.Marshal(key)
		v, _ := json.Marshal(value)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	rootFields(op, vars, func(f *ast.Field) {
		if f.Name == "__typename" {
			member(f.Alias, rootTypename(op))
			return
		}
		if f.Name != "rateLimit" {
			return
		}
		obj := map[string]any{}
		var order []string
		selections(f.SelectionSet, vars, func(sub *ast.Field) {
			if _, seen := obj[sub.Alias]; !seen {
				order = append(order, sub.Alias)
			}
			switch {
			case sub.Name == "__typename" && f.Definition != nil:
				obj[sub.Alias] = f.Definition.Type.Name()
			default:
				obj[sub.Alias] = known[sub.Name] // nil for a field costgate does not know
			}
		})
		var o bytes.Buffer
		o.WriteByte('{')
		for i, k := range order {
			if i > 0 {
				o.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			vb, _ := json.Marshal(obj[k])
			o.Write(kb)
			o.WriteByte(':')
			o.Write(vb)
		}
		o.WriteByte('}')
		member(f.Alias, json.RawMessage(o.Bytes()))
	})
	b.WriteByte('}')
	return b.Bytes()
}

// selections calls fn with each field of set that runs with vars, through
// fragments, @skip and @include applied.
func selections(set ast.SelectionSet, vars map[string]any, fn func(*ast.Field)) {
	rootFields(&ast.OperationDefinition{SelectionSet: set}, vars, fn)
}

func rootTypename(op *ast.OperationDefinition) string {
	for _, sel := range op.SelectionSet {
		if f, ok := sel.(*ast.Field); ok && f.ObjectDefinition != nil {
			return f.ObjectDefinition.Name
		}
	}
	return "Query"
}
