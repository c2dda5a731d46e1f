package gqlproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/costgate/costgate/complexity"
)

// CodeSchemaUnavailable answers (503, with Retry-After) a GraphQL request
// that arrives before the upstream's schema was first read by introspection.
const CodeSchemaUnavailable = "SCHEMA_UNAVAILABLE"

// maxIntrospectionBody bounds the introspection reply read into memory.
const maxIntrospectionBody = 32 << 20

// IntrospectionQuery is the query Introspect sends: the schema's types, fields,
// arguments, input fields, enum values and directive declarations, to the depth of
// type references ([[T!]!]! and deeper) a schema needs.
const IntrospectionQuery = `query CostgateIntrospection {
  __schema {
    queryType { name }
    mutationType { name }
    subscriptionType { name }
    types {
      kind name
      fields(includeDeprecated: true) { name args(includeDeprecated: true) { ...InputValue } type { ...TypeRef } }
      inputFields(includeDeprecated: true) { ...InputValue }
      interfaces { name }
      enumValues(includeDeprecated: true) { name }
      possibleTypes { name }
    }
    directives { name isRepeatable locations args(includeDeprecated: true) { ...InputValue } }
  }
}
fragment InputValue on __InputValue { name type { ...TypeRef } defaultValue }
fragment TypeRef on __Type {
  kind name
  ofType { kind name ofType { kind name ofType { kind name ofType { kind name
    ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } } } } } }
}
`

// Introspect reads the schema of the GraphQL service at url by an introspection query,
// sent with header and nothing else (never a client's headers: a schema that varied
// by caller would let whoever asked first choose it for everyone). The answer is
// turned into SDL (see [IntrospectionSDL]) and loaded with gqlparser. client nil is
// http.DefaultClient; ctx bounds the call.
func Introspect(ctx context.Context, client *http.Client, url string, header http.Header) (*ast.Schema, error) {
	if client == nil {
		client = http.DefaultClient
	}
	body, err := json.Marshal(map[string]string{"query": IntrospectionQuery, "operationName": "CostgateIntrospection"})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, vs := range header {
		req.Header[http.CanonicalHeaderKey(k)] = slices.Clone(vs)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxIntrospectionBody+1))
	if err != nil {
		return nil, fmt.Errorf("reading the introspection reply: %w", err)
	}
	if len(data) > maxIntrospectionBody {
		return nil, fmt.Errorf("the introspection reply is larger than %d bytes", maxIntrospectionBody)
	}
	if res.StatusCode/100 != 2 {
		return nil, fmt.Errorf("introspection: status %d", res.StatusCode)
	}
	sdl, err := IntrospectionSDL(data)
	if err != nil {
		return nil, err
	}
	schema, err := gqlparser.LoadSchema(&ast.Source{Name: "introspection of " + url, Input: sdl})
	if err != nil {
		return nil, fmt.Errorf("introspection: the schema does not load: %w", err)
	}
	return schema, nil
}

// The shapes of an introspection reply, as IntrospectionQuery asks for them.
type (
	introspectionReply struct {
		Data *struct {
			Schema *introspectionSchema `json:"__schema"`
		} `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	introspectionSchema struct {
		QueryType        *typeName          `json:"queryType"`
		MutationType     *typeName          `json:"mutationType"`
		SubscriptionType *typeName          `json:"subscriptionType"`
		Types            []introspectedType `json:"types"`
		Directives       []struct {
			Name         string       `json:"name"`
			IsRepeatable bool         `json:"isRepeatable"`
			Locations    []string     `json:"locations"`
			Args         []inputValue `json:"args"`
		} `json:"directives"`
	}
	typeName         struct{ Name string }
	introspectedType struct {
		Kind   string `json:"kind"`
		Name   string `json:"name"`
		Fields []struct {
			Name string       `json:"name"`
			Args []inputValue `json:"args"`
			Type *typeRef     `json:"type"`
		} `json:"fields"`
		InputFields   []inputValue `json:"inputFields"`
		Interfaces    []typeName   `json:"interfaces"`
		EnumValues    []typeName   `json:"enumValues"`
		PossibleTypes []typeName   `json:"possibleTypes"`
	}
	inputValue struct {
		Name         string   `json:"name"`
		Type         *typeRef `json:"type"`
		DefaultValue *string  `json:"defaultValue"`
	}
	typeRef struct {
		Kind   string   `json:"kind"`
		Name   string   `json:"name"`
		OfType *typeRef `json:"ofType"`
	}
)

// builtIn are the types and directives every schema has, which gqlparser declares itself.
var (
	builtInTypes      = []string{"Int", "Float", "String", "Boolean", "ID"}
	builtInDirectives = []string{"skip", "include", "deprecated", "specifiedBy", "oneOf", "defer"}
)

// IntrospectionSDL writes the schema of an introspection reply (the JSON of
// IntrospectionQuery's answer) as SDL: types, fields, arguments with their defaults,
// input fields, enum values, unions, interfaces, the root types and the directive
// declarations. Introspection does not say where directives are used, so the SDL has
// no @cost or @listSize: those come from a cost overlay (complexity.WithCosts).
func IntrospectionSDL(reply []byte) (string, error) {
	var r introspectionReply
	if err := json.Unmarshal(reply, &r); err != nil {
		return "", fmt.Errorf("introspection: not a GraphQL response: %w", err)
	}
	if r.Data == nil || r.Data.Schema == nil {
		if len(r.Errors) > 0 {
			return "", fmt.Errorf("introspection refused: %s", r.Errors[0].Message)
		}
		return "", errors.New("introspection: the reply has no data.__schema")
	}
	s := r.Data.Schema
	if s.QueryType == nil || s.QueryType.Name == "" {
		return "", errors.New("introspection: the schema has no query type")
	}
	w := &sdlWriter{}
	w.schema(s)
	for _, d := range s.Directives {
		if !slices.Contains(builtInDirectives, d.Name) {
			w.line("directive @%s%s%s on %s", w.name(d.Name), w.args(d.Args), map[bool]string{true: " repeatable"}[d.IsRepeatable], w.names(d.Locations, " | "))
		}
	}
	for _, t := range s.Types {
		if strings.HasPrefix(t.Name, "__") || slices.Contains(builtInTypes, t.Name) {
			continue
		}
		w.typ(t)
	}
	if w.err != nil {
		return "", w.err
	}
	return w.b.String(), nil
}

type sdlWriter struct {
	b   strings.Builder
	err error
}

func (w *sdlWriter) line(format string, args ...any) {
	fmt.Fprintf(&w.b, format+"\n", args...)
}

func (w *sdlWriter) fail(format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf("introspection: "+format, args...)
	}
}

func (w *sdlWriter) schema(s *introspectionSchema) {
	w.line("schema {")
	w.line("  query: %s", w.name(s.QueryType.Name))
	if s.MutationType != nil && s.MutationType.Name != "" {
		w.line("  mutation: %s", w.name(s.MutationType.Name))
	}
	if s.SubscriptionType != nil && s.SubscriptionType.Name != "" {
		w.line("  subscription: %s", w.name(s.SubscriptionType.Name))
	}
	w.line("}")
}

func (w *sdlWriter) typ(t introspectedType) {
	w.name(t.Name)
	switch t.Kind {
	case "SCALAR":
		w.line("scalar %s", t.Name)
	case "ENUM":
		names := make([]string, len(t.EnumValues))
		for i, v := range t.EnumValues {
			names[i] = w.name(v.Name)
		}
		w.line("enum %s { %s }", t.Name, strings.Join(names, " "))
	case "UNION":
		names := make([]string, len(t.PossibleTypes))
		for i, v := range t.PossibleTypes {
			names[i] = w.name(v.Name)
		}
		w.line("union %s = %s", t.Name, strings.Join(names, " | "))
	case "INPUT_OBJECT":
		w.line("input %s {", t.Name)
		for _, f := range t.InputFields {
			w.line("  %s", w.inputValue(f))
		}
		w.line("}")
	case "OBJECT", "INTERFACE":
		keyword := map[string]string{"OBJECT": "type", "INTERFACE": "interface"}[t.Kind]
		implements := ""
		if len(t.Interfaces) > 0 {
			names := make([]string, len(t.Interfaces))
			for i, v := range t.Interfaces {
				names[i] = w.name(v.Name)
			}
			implements = " implements " + strings.Join(names, " & ")
		}
		w.line("%s %s%s {", keyword, t.Name, implements)
		for _, f := range t.Fields {
			w.line("  %s%s: %s", w.name(f.Name), w.args(f.Args), w.ref(f.Type))
		}
		w.line("}")
	default:
		w.fail("type %s has an unknown kind %q", t.Name, t.Kind)
	}
}

func (w *sdlWriter) args(args []inputValue) string {
	if len(args) == 0 {
		return ""
	}
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = w.inputValue(a)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func (w *sdlWriter) inputValue(v inputValue) string {
	s := w.name(v.Name) + ": " + w.ref(v.Type)
	if v.DefaultValue != nil {
		s += " = " + *v.DefaultValue // a GraphQL literal, as introspection writes it
	}
	return s
}

// ref writes a type reference: Name, [T], T!.
func (w *sdlWriter) ref(t *typeRef) string { return w.refAt(t, 0) }

func (w *sdlWriter) refAt(t *typeRef, depth int) string {
	switch {
	case t == nil || depth > 32:
	case t.Kind == "NON_NULL":
		return w.refAt(t.OfType, depth+1) + "!"
	case t.Kind == "LIST":
		return "[" + w.refAt(t.OfType, depth+1) + "]"
	case t.Name != "":
		return w.name(t.Name)
	}
	w.fail("a type reference without a name")
	return "Unknown"
}

// name returns s when it is a GraphQL name: the SDL is written from the reply, and
// only names and default values (GraphQL literals, parsed again) go into it.
func (w *sdlWriter) name(s string) string {
	if _, err := complexity.ParseCoordinate(s); err != nil || strings.Contains(s, ".") {
		w.fail("%q is not a GraphQL name", s)
		return "Invalid"
	}
	return s
}

func (w *sdlWriter) names(names []string, sep string) string {
	for _, n := range names {
		w.name(n)
	}
	return strings.Join(names, sep)
}
