package complexity

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

// LoadSDL parses an SDL document, such as the upstream's schema in proxy mode, and reads
// its cost directives with [NewSchema]. name names the source in errors.
//
// An SDL often uses directives it does not declare; gqlparser refuses those, so LoadSDL
// declares them first, without touching the ones the SDL declares itself:
//
//   - @cost and @listSize, under the names the schema's @link gives them (see
//     [NewSchema]), as [DirectivesSDL] declares them;
//   - @link itself, with the link__Import and link__Purpose types it refers to;
//   - any other directive or type that an @link brings in (imported, or namespaced as
//     federation__requires): with arguments of any value and allowed everywhere, as
//     costgate reads nothing from them. A federation subgraph's @key, @shareable and
//     the like load this way.
//
// A directive that no @link brings in and that the SDL does not declare is still an
// error, as it is to gqlparser.
func LoadSDL(name, sdl string, opts ...Option) (*Schema, error) {
	doc, err := parser.ParseSchema(&ast.Source{Name: name, Input: sdl})
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	declarations, err := declarationsFor(doc)
	if err != nil {
		return nil, err
	}
	sources := []*ast.Source{{Name: name, Input: sdl}}
	if declarations != "" {
		sources = append([]*ast.Source{{Name: "costgate-declarations.graphql", Input: declarations}}, sources...)
	}
	s, err := gqlparser.LoadSchema(sources...)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	return NewSchema(s, opts...)
}

// anyScalar is the type of every argument of a directive LoadSDL declares in the SDL's
// stead: gqlparser checks a directive's argument names, not the values of its arguments.
const anyScalar = "costgate__Any"

const everyTypeSystemLocation = "SCHEMA | SCALAR | OBJECT | FIELD_DEFINITION | ARGUMENT_DEFINITION | INTERFACE | UNION | ENUM | ENUM_VALUE | INPUT_OBJECT | INPUT_FIELD_DEFINITION"

const linkSpecDeclarations = `directive @link(url: String!, as: String, for: link__Purpose, import: [link__Import]) repeatable on SCHEMA
`

// declarationsFor writes the declarations doc uses and lacks, as LoadSDL describes.
func declarationsFor(doc *ast.SchemaDocument) (string, error) {
	u := collectUses(doc)
	var schemaDirectives ast.DirectiveList
	for _, sd := range doc.Schema {
		schemaDirectives = append(schemaDirectives, sd.Directives...)
	}
	for _, sd := range doc.SchemaExtension {
		schemaDirectives = append(schemaDirectives, sd.Directives...)
	}
	names, errs := resolveNames(schemaDirectives)
	if len(errs) > 0 {
		all := make([]error, len(errs))
		for i, e := range errs {
			all[i] = e
		}
		return "", errors.Join(all...)
	}

	var b strings.Builder
	missing := func(directive string) bool {
		return u.directives[directive] != nil && !u.declaredDirectives[directive]
	}
	if missing(linkDirective) {
		b.WriteString(linkSpecDeclarations)
		u.typeRefs["link__Import"], u.typeRefs["link__Purpose"] = true, true
	}
	if !u.declaredTypes["link__Import"] && u.typeRefs["link__Import"] {
		b.WriteString("scalar link__Import\n")
	}
	if !u.declaredTypes["link__Purpose"] && u.typeRefs["link__Purpose"] {
		b.WriteString("enum link__Purpose { SECURITY EXECUTION }\n")
	}
	declared := map[string]bool{}
	for _, name := range names.cost {
		if missing(name) {
			b.WriteString(costDeclaration(name))
			declared[name] = true
		}
	}
	for _, name := range names.listSize {
		if missing(name) {
			b.WriteString(listSizeDeclaration(name))
			declared[name] = true
		}
	}

	// What the other links bring in.
	links, _ := parseLinks(schemaDirectives)
	var (
		stubs    []string
		needsAny bool
	)
	for _, name := range sortedKeys(u.directives) {
		if !missing(name) || declared[name] || !broughtIn(links, name, true) {
			continue
		}
		args := sortedKeys(u.directives[name])
		var d strings.Builder
		d.WriteString("directive @" + name)
		if len(args) > 0 {
			d.WriteString("(")
			for i, a := range args {
				if i > 0 {
					d.WriteString(", ")
				}
				d.WriteString(a + ": " + anyScalar)
			}
			d.WriteString(")")
			needsAny = true
		}
		d.WriteString(" repeatable on " + everyTypeSystemLocation + "\n")
		stubs = append(stubs, d.String())
	}
	for _, name := range sortedKeys(u.typeRefs) {
		if !u.declaredTypes[name] && !strings.HasPrefix(name, "link__") && broughtIn(links, name, false) {
			stubs = append(stubs, "scalar "+name+"\n")
		}
	}
	if needsAny && !u.declaredTypes[anyScalar] {
		b.WriteString("scalar " + anyScalar + "\n")
	}
	for _, s := range stubs {
		b.WriteString(s)
	}
	return b.String(), nil
}

func costDeclaration(name string) string {
	line, _, _ := strings.Cut(DirectivesSDL, "\n")
	return strings.Replace(line, "@"+costDirective+"(", "@"+name+"(", 1) + "\n"
}

func listSizeDeclaration(name string) string {
	for line := range strings.Lines(DirectivesSDL) {
		if strings.HasPrefix(line, "directive @"+listSizeDirective+"(") {
			return strings.Replace(line, "@"+listSizeDirective+"(", "@"+name+"(", 1)
		}
	}
	return ""
}

// broughtIn reports whether some link other than the cost spec's brings in the element
// (a directive, or a type): by importing it, or by its namespace prefix.
func broughtIn(links []*specLink, name string, directive bool) bool {
	for _, link := range links {
		if link.is(costSpecName) {
			continue
		}
		for _, im := range link.imports {
			if im.directive == directive && im.alias == name {
				return true
			}
		}
		if strings.HasPrefix(name, link.namespace+namespaceSeparator) {
			return true
		}
	}
	return false
}

// uses are the directives and types an SDL document refers to, and those it declares.
type uses struct {
	directives         map[string]map[string]bool // directive name -> argument names used
	declaredDirectives map[string]bool
	typeRefs           map[string]bool // named types of fields, arguments and input fields
	declaredTypes      map[string]bool
}

func collectUses(doc *ast.SchemaDocument) *uses {
	u := &uses{
		directives:         map[string]map[string]bool{},
		declaredDirectives: map[string]bool{},
		typeRefs:           map[string]bool{},
		declaredTypes:      map[string]bool{},
	}
	use := func(dirs ast.DirectiveList) {
		for _, d := range dirs {
			args := u.directives[d.Name]
			if args == nil {
				args = map[string]bool{}
				u.directives[d.Name] = args
			}
			for _, a := range d.Arguments {
				args[a.Name] = true
			}
		}
	}
	ref := func(t *ast.Type) {
		if t != nil {
			u.typeRefs[t.Name()] = true
		}
	}
	for _, sd := range slices.Concat(doc.Schema, doc.SchemaExtension) {
		use(sd.Directives)
	}
	for _, dd := range doc.Directives {
		u.declaredDirectives[dd.Name] = true
		for _, a := range dd.Arguments {
			use(a.Directives)
			ref(a.Type)
		}
	}
	for _, def := range slices.Concat(doc.Definitions, doc.Extensions) {
		use(def.Directives)
		for _, f := range def.Fields {
			use(f.Directives)
			ref(f.Type)
			for _, a := range f.Arguments {
				use(a.Directives)
				ref(a.Type)
			}
		}
		for _, v := range def.EnumValues {
			use(v.Directives)
		}
	}
	for _, def := range doc.Definitions {
		u.declaredTypes[def.Name] = true
	}
	return u
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
