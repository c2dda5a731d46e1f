package gqltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
)

// Fixture is a gqlgen executable schema for any schema, whose resolvers return what
// Data holds: gqlgen's own execution (graphql.ResolveField, CollectFields, the
// resolver middleware, null propagation) over data given as a response would be. It
// lets a test run gqlgen's execution over a schema that has no generated server.
//
// Data is keyed by response key, as a response is. A resolver returns what its key
// holds: nil is null, a []any a list, a map an object. An object of an interface or
// union names its type by "__typename", or by "$type" when the operation does not ask
// for it. {"$error": "text"} makes the resolver fail with that error. Objects are
// handed to the executor as the Go value Types makes for their type (its Go type names
// it, as gqlgen's models do), else as an Object.
type Fixture struct {
	AST   *ast.Schema
	Data  map[string]any
	Types map[string]func(Object) any
}

// Object is a fixture object as a resolver returns it.
type Object struct {
	Fields   map[string]any
	TypeName string
}

func (o Object) object() Object { return o }

type fixtureObject interface{ object() Object }

var _ graphql.ExecutableSchema = (*Fixture)(nil)

func (f *Fixture) Schema() *ast.Schema { return f.AST }

func (f *Fixture) Complexity(context.Context, string, string, int, map[string]any) (int, bool) {
	return 0, false
}

// Exec runs the operation once, queries and mutations alike (root fields in order).
func (f *Fixture) Exec(ctx context.Context) graphql.ResponseHandler {
	oc := graphql.GetOperationContext(ctx)
	var root *ast.Definition
	switch oc.Operation.Operation {
	case ast.Mutation:
		root = f.AST.Mutation
	case ast.Subscription:
		return graphql.OneShot(graphql.ErrorResponse(ctx, "the fixture runs no subscriptions"))
	default:
		root = f.AST.Query
	}
	done := false
	return func(ctx context.Context) *graphql.Response {
		if done {
			return nil
		}
		done = true
		data := f.root(ctx, oc, root)
		var buf bytes.Buffer
		data.MarshalGQL(&buf)
		return &graphql.Response{Data: buf.Bytes()}
	}
}

func (f *Fixture) root(ctx context.Context, oc *graphql.OperationContext, root *ast.Definition) graphql.Marshaler {
	fields := graphql.CollectFields(oc, oc.Operation.SelectionSet, []string{root.Name})
	ctx = graphql.WithFieldContext(ctx, &graphql.FieldContext{Object: root.Name})
	out := graphql.NewFieldSet(fields)
	invalid := false
	obj := Object{Fields: f.Data, TypeName: root.Name}
	for i, field := range fields {
		if field.Name == "__typename" {
			out.Values[i] = graphql.MarshalString(root.Name)
			continue
		}
		inner := graphql.WithRootFieldContext(ctx, &graphql.RootFieldContext{Object: field.Name, Field: field})
		out.Values[i] = oc.RootResolverMiddleware(inner, func(ctx context.Context) graphql.Marshaler {
			return f.field(ctx, oc, field, root, obj)
		})
		invalid = invalid || out.Values[i] == graphql.Null && f.fieldType(root, field.Name).NonNull
	}
	out.Dispatch(ctx)
	if invalid {
		return graphql.Null
	}
	return out
}

func (f *Fixture) object(ctx context.Context, oc *graphql.OperationContext, sel ast.SelectionSet, def *ast.Definition, obj Object) graphql.Marshaler {
	fields := graphql.CollectFields(oc, sel, f.implementors(def))
	out := graphql.NewFieldSet(fields)
	var invalid []bool
	for i, field := range fields {
		if field.Name == "__typename" {
			out.Values[i] = graphql.MarshalString(def.Name)
			continue
		}
		nonNull := f.fieldType(def, field.Name).NonNull
		invalid = append(invalid, false)
		at := len(invalid) - 1
		out.Concurrently(i, func(ctx context.Context) graphql.Marshaler {
			m := f.field(ctx, oc, field, def, obj)
			invalid[at] = m == graphql.Null && nonNull
			return m
		})
	}
	out.Dispatch(ctx)
	if slices.Contains(invalid, true) {
		return graphql.Null
	}
	return out
}

func (f *Fixture) field(ctx context.Context, oc *graphql.OperationContext, field graphql.CollectedField, parent *ast.Definition, obj Object) graphql.Marshaler {
	typ := f.fieldType(parent, field.Name)
	return graphql.ResolveField(ctx, oc, field,
		func(ctx context.Context, field graphql.CollectedField) (*graphql.FieldContext, error) {
			return &graphql.FieldContext{Object: parent.Name, Field: field, Args: field.ArgumentMap(oc.Variables), IsResolver: true}, nil
		},
		func(ctx context.Context) (any, error) {
			raw := obj.Fields[field.Alias]
			if m, ok := raw.(map[string]any); ok {
				if msg, ok := m["$error"].(string); ok {
					return nil, errors.New(msg)
				}
			}
			return f.wrap(typ, raw), nil
		},
		nil,
		func(ctx context.Context, sel ast.SelectionSet, v any) graphql.Marshaler {
			return f.marshal(ctx, oc, sel, typ, v)
		},
		true, typ.NonNull)
}

// wrap turns the fixture's objects into what resolvers hand the executor.
func (f *Fixture) wrap(typ *ast.Type, raw any) any {
	switch v := raw.(type) {
	case []any:
		if typ.Elem == nil {
			return v
		}
		items := make([]any, len(v))
		for i, item := range v {
			items[i] = f.wrap(typ.Elem, item)
		}
		return items
	case map[string]any:
		def := f.AST.Types[typ.Name()]
		if def == nil || (def.Kind != ast.Object && !def.IsAbstractType()) {
			return v
		}
		name := def.Name
		if def.IsAbstractType() {
			name, _ = v["__typename"].(string)
			if t, ok := v["$type"].(string); ok {
				name = t
			}
		}
		o := Object{Fields: v, TypeName: name}
		if newObject := f.Types[name]; newObject != nil {
			return newObject(o)
		}
		return o
	}
	return raw
}

func (f *Fixture) marshal(ctx context.Context, oc *graphql.OperationContext, sel ast.SelectionSet, typ *ast.Type, v any) graphql.Marshaler {
	if v == nil {
		if typ.NonNull {
			graphql.AddInvalidNullError(ctx, typ.String())
		}
		return graphql.Null
	}
	if typ.Elem != nil {
		items, ok := v.([]any)
		if !ok {
			graphql.AddErrorf(ctx, "the fixture holds %T for a list", v)
			return graphql.Null
		}
		ret := graphql.MarshalSliceConcurrently(ctx, len(items), 0, false, func(ctx context.Context, i int) graphql.Marshaler {
			graphql.GetFieldContext(ctx).Result = &items[i]
			return f.marshal(ctx, oc, sel, typ.Elem, items[i])
		})
		for _, m := range ret {
			if m == graphql.Null && typ.Elem.NonNull {
				return graphql.Null
			}
		}
		return ret
	}
	def := f.AST.Types[typ.Name()]
	o, isObject := v.(fixtureObject)
	if def == nil || !isObject {
		return graphql.MarshalAny(v)
	}
	obj := o.object()
	if def.IsAbstractType() {
		if def = f.AST.Types[obj.TypeName]; def == nil || def.Kind != ast.Object {
			graphql.AddErrorf(ctx, "the fixture names no object type for an item of %s: %q", typ.Name(), obj.TypeName)
			return graphql.Null
		}
	}
	return f.object(ctx, oc, sel, def, obj)
}

// fieldType is the type of parent's field name; __schema and __type are the
// introspection fields of the query type.
func (f *Fixture) fieldType(parent *ast.Definition, name string) *ast.Type {
	switch name {
	case "__schema":
		return ast.NonNullNamedType("__Schema", nil)
	case "__type":
		return ast.NamedType("__Type", nil)
	}
	if fd := parent.Fields.ForName(name); fd != nil {
		return fd.Type
	}
	panic(fmt.Sprintf("gqltest: %s has no field %q", parent.Name, name))
}

// implementors are the type conditions an object of def satisfies.
func (f *Fixture) implementors(def *ast.Definition) []string {
	names := append([]string{def.Name}, def.Interfaces...)
	for _, t := range f.AST.Types {
		if t.Kind == ast.Union && slices.Contains(t.Types, def.Name) {
			names = append(names, t.Name)
		}
	}
	return names
}
