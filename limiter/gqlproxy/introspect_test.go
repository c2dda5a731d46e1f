package gqlproxy_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/costgate/costgate/graph"
	"github.com/costgate/costgate/limiter/gqlproxy"
)

func introspectableShop(introspection bool) http.Handler {
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: graph.NewShop()}}))
	srv.AddTransport(transport.POST{})
	if introspection {
		srv.Use(extension.Introspection{})
	}
	return srv
}

// Introspect reads back the example shop's schema: every type, field,
// argument (with its default), input field, enum value, union member and
// interface, and the root types.
func TestIntrospectRoundTrip(t *testing.T) {
	up := httptest.NewServer(introspectableShop(true))
	t.Cleanup(up.Close)
	got, err := gqlproxy.Introspect(context.Background(), up.Client(), up.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := graph.NewExecutableSchema(graph.Config{}).Schema()
	if describeSchema(got) != describeSchema(want) {
		t.Errorf("introspected:\n%s\nwant:\n%s", describeSchema(got), describeSchema(want))
	}
}

// describeSchema writes what pricing and validation read of a schema, one
// line per type, sorted; directive uses are left out (introspection has none).
func describeSchema(s *ast.Schema) string {
	var lines []string
	for name, def := range s.Types {
		if def.BuiltIn {
			continue
		}
		var b strings.Builder
		b.WriteString(string(def.Kind) + " " + name + " " + strings.Join(def.Interfaces, "&") + " " + strings.Join(def.Types, "|"))
		for _, f := range def.Fields {
			b.WriteString(" " + f.Name)
			for _, a := range f.Arguments {
				b.WriteString("(" + a.Name + ":" + a.Type.String())
				if a.DefaultValue != nil {
					b.WriteString("=" + a.DefaultValue.String())
				}
				b.WriteString(")")
			}
			b.WriteString(":" + f.Type.String())
			if f.DefaultValue != nil {
				b.WriteString("=" + f.DefaultValue.String())
			}
		}
		for _, v := range def.EnumValues {
			b.WriteString(" " + v.Name)
		}
		lines = append(lines, b.String())
	}
	slices.Sort(lines)
	root := func(d *ast.Definition) string {
		if d == nil {
			return "-"
		}
		return d.Name
	}
	return "roots " + root(s.Query) + " " + root(s.Mutation) + " " + root(s.Subscription) + "\n" + strings.Join(lines, "\n")
}

func TestIntrospectRefused(t *testing.T) {
	up := httptest.NewServer(introspectableShop(false))
	t.Cleanup(up.Close)
	_, err := gqlproxy.Introspect(context.Background(), up.Client(), up.URL, nil)
	if err == nil || !strings.Contains(err.Error(), "introspection") {
		t.Errorf("err = %v, want the upstream's refusal", err)
	}
}

func TestIntrospectionSDLRefusesWhatIsNotAName(t *testing.T) {
	for _, reply := range []string{
		`{"data":{"__schema":{"queryType":{"name":"Query"},"types":[{"kind":"OBJECT","name":"Query","fields":[{"name":"a } type Evil { b","args":[],"type":{"kind":"SCALAR","name":"Int"}}]}],"directives":[]}}}`,
		`{"data":{"__schema":{"queryType":{"name":"Query"},"types":[{"kind":"OBJECT","name":"Query","fields":[{"name":"a","args":[],"type":{"kind":"LIST","ofType":null}}]}],"directives":[]}}}`,
		`{"data":null}`,
		`not json`,
	} {
		if sdl, err := gqlproxy.IntrospectionSDL([]byte(reply)); err == nil {
			t.Errorf("%s: SDL %s, want an error", reply, sdl)
		}
	}
}
