package gqllimit

import (
	"context"
	"errors"
	"slices"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/costgate/costgate/complexity"
)

// What ran is charged. Embedded, an operation's actual cost is counted from gqlgen's
// execution, never read back from the reply: the extension wraps the operation's
// resolver middleware (graphql.OperationContext.ResolverMiddleware, which gqlgen calls
// around every field it resolves) and reports to a complexity.ExecCount what each
// resolver returned: the lists and their lengths, the items of interfaces and unions,
// the root fields called. A non-null field that fails and nulls its parent, or a
// client's alias named __typename, changes the reply, not what ran. A root mutation
// field is charged its whole requested cost once it is called, whatever it returns.
//
// The work per field is one lookup in the operation's plan (an array indexed by the
// field's offset in the document, built once per operation), and nothing more for the
// leaves that cost nothing whatever they return, which most are.

// execution counts one admitted operation as gqlgen runs it.
type execution struct {
	plan         *complexity.ExecPlan
	count        *complexity.ExecCount
	prev         graphql.FieldMiddleware // the resolver middleware gqlgen built from its extensions
	subscription bool
	err          error // no plan: nothing is refunded
}

// errNotCounted is the actual cost of an operation that ran without being counted.
var errNotCounted = errors.New("gqllimit: the operation's execution was not counted")

// watch makes gqlgen report st's operation, about to run, to its counter.
func (l *Limiter) watch(st *state, rc *graphql.OperationContext) {
	schema := l.pricing()
	x := &execution{subscription: rc.Operation.Operation == ast.Subscription}
	st.exec = x
	if x.subscription {
		st.events.last = l.cfg.Clock() // its opening charge
	}
	x.plan, x.err = st.doc.execPlan(schema, rc.Operation)
	if x.err != nil {
		l.cfg.Logger.Warn("costgate: the operation runs without its actual cost counted; nothing of its charge is refunded", "err", x.err)
		return
	}
	x.count = schema.NewExecCount(x.plan, rc.Variables)
	x.prev = rc.ResolverMiddleware
	rc.ResolverMiddleware = x.field
}

// field is the operation's resolver middleware: gqlgen's (x.prev), then the count.
func (x *execution) field(ctx context.Context, next graphql.Resolver) (any, error) {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil || fc.Field.Field == nil {
		return x.prev(ctx, next)
	}
	f := x.plan.Field(fc.Field.Field)
	if f == nil {
		return x.prev(ctx, next) // costs nothing whatever it returns
	}
	if f.Mutation() {
		// Charged once called, before it can write anything: whatever it returns,
		// an error or a panic included.
		x.count.Add(f, fc.Object, nil, nil)
		return x.prev(ctx, next)
	}
	res, err := x.prev(ctx, next)
	value := res
	if err != nil {
		value = nil // gqlgen answers null
	}
	var path []complexity.PathStep
	if f.NeedsPath() {
		path = pathOf(fc)
	}
	x.count.Add(f, fc.Object, value, path)
	return res, err
}

// cost is the actual cost counted, or why it was not.
func (x *execution) cost() (int64, error) {
	switch {
	case x == nil:
		return 0, errNotCounted
	case x.err != nil:
		return 0, x.err
	}
	return x.count.Cost()
}

// pathOf is the path of the field fc resolves, from the root: the fields, without
// the list items between them.
func pathOf(fc *graphql.FieldContext) []complexity.PathStep {
	var path []complexity.PathStep
	for it := fc; it != nil; it = it.Parent {
		if it.Field.Field != nil {
			path = append(path, complexity.PathStep{Field: it.Field.Field, Parent: it.Object})
		}
	}
	slices.Reverse(path)
	return path
}

// execPlan returns the plan of op, the operation gqlgen runs for this document, with
// schema: built for the first request that runs op and kept for the next (one op is
// kept: gqlgen runs the same one while its query cache holds the document).
func (d *document) execPlan(schema *complexity.Schema, op *ast.OperationDefinition) (*complexity.ExecPlan, error) {
	if d != nil {
		if p := d.exec.Load(); p != nil && p.schema == schema && p.op == op {
			return p.plan, p.err
		}
	}
	plan, err := schema.NewExecPlan(op)
	if d != nil {
		d.exec.Store(&execPlan{schema: schema, op: op, plan: plan, err: err})
	}
	return plan, err
}

// execPlan is the plan of the operation last run for a document.
type execPlan struct {
	schema *complexity.Schema
	op     *ast.OperationDefinition
	plan   *complexity.ExecPlan
	err    error
}
