package complexity

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
)

// The specs whose @link can name the cost directives. Only version v0.1 of the cost spec
// exists; a schema that links another is refused rather than priced without its rules.
const (
	specHost           = "specs.apollo.dev"
	costSpecName       = "cost"
	costSpecVersion    = "v0.1"
	costSpecURL        = "https://" + specHost + "/" + costSpecName + "/" + costSpecVersion
	federationSpecName = "federation"
	linkDirective      = "link"
	namespaceSeparator = "__"
)

// specLink is one @link(url:, as:, import:) applied to the schema.
type specLink struct {
	raw       string // the url as written
	host      string
	prefix    []string // the path before the spec name
	name      string   // the spec name: the path segment before the version
	version   string   // "v0.1"
	namespace string   // as:, or the spec name
	imports   []linkImport
}

// linkImport is one element of import: "@cost", or {name: "@cost", as: "@weight"}.
type linkImport struct {
	element   string // without the @
	alias     string // the name in the schema, without the @; element when not renamed
	directive bool
}

func (s *specLink) is(name string) bool {
	return s.host == specHost && len(s.prefix) == 0 && s.name == name
}

// nameOf is the name the schema gives the spec's directive element, by the link spec's
// rules: the import's alias; else the namespace for the directive named like the spec
// (@cost of the cost spec); else namespace__element.
func (s *specLink) nameOf(element string) string {
	for _, im := range s.imports {
		if im.directive && im.element == element {
			return im.alias
		}
	}
	if element == s.name {
		return s.namespace
	}
	return s.namespace + namespaceSeparator + element
}

// parseLinks reads the @link directives among dirs (the schema's, extensions included).
// A link whose url or import cannot be read is an error only for the specs that matter
// here; others are left to whatever understands them.
func parseLinks(dirs ast.DirectiveList) ([]*specLink, []*SchemaError) {
	var (
		links []*specLink
		errs  []*SchemaError
	)
	for _, d := range dirs {
		if d.Name != linkDirective {
			continue
		}
		arg := d.Arguments.ForName("url")
		if arg == nil || arg.Value == nil || arg.Value.Kind != ast.StringValue {
			continue
		}
		link, ok := parseLinkURL(arg.Value.Raw)
		if !ok {
			if namesCostSpec(arg.Value.Raw) {
				errs = append(errs, linkError(arg.Value.Raw, "the url names no version of the cost spec costgate can read"))
			}
			continue
		}
		if a := d.Arguments.ForName("as"); a != nil && a.Value != nil && a.Value.Kind == ast.StringValue {
			link.namespace = a.Value.Raw
		}
		if a := d.Arguments.ForName("import"); a != nil && a.Value != nil {
			imports, err := parseImports(a.Value)
			if err != "" {
				if link.is(costSpecName) || link.is(federationSpecName) {
					errs = append(errs, linkError(link.raw, "%s", err))
				}
				continue
			}
			link.imports = imports
		}
		links = append(links, link)
	}
	return links, errs
}

func parseLinkURL(raw string) (*specLink, bool) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, false
	}
	segments := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(segments) < 2 || !strings.HasPrefix(segments[len(segments)-1], "v") {
		return nil, false
	}
	n := len(segments)
	return &specLink{
		raw:       raw,
		host:      u.Host,
		prefix:    segments[:n-2],
		name:      segments[n-2],
		version:   segments[n-1],
		namespace: segments[n-2],
	}, true
}

// namesCostSpec reports whether raw, a url parseLinkURL could not read, points at the
// cost spec all the same.
func namesCostSpec(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Host != specHost {
		return false
	}
	first, _, _ := strings.Cut(strings.Trim(u.Path, "/"), "/")
	return first == costSpecName
}

func parseImports(v *ast.Value) ([]linkImport, string) {
	var values []*ast.Value
	switch v.Kind {
	case ast.ListValue:
		for _, c := range v.Children {
			values = append(values, c.Value)
		}
	case ast.NullValue:
		return nil, ""
	default:
		values = []*ast.Value{v} // a single value coerced to a list of one
	}
	out := make([]linkImport, 0, len(values))
	for _, c := range values {
		var name, alias string
		switch {
		case c == nil:
			return nil, "import: an element is empty"
		case c.Kind == ast.StringValue:
			name = c.Raw
		case c.Kind == ast.ObjectValue:
			n := c.Children.ForName("name")
			if n == nil || n.Kind != ast.StringValue {
				return nil, fmt.Sprintf("import: %s has no name", c.String())
			}
			name = n.Raw
			if a := c.Children.ForName("as"); a != nil && a.Kind == ast.StringValue {
				alias = a.Raw
			}
		default:
			return nil, fmt.Sprintf("import: %s is neither a name nor {name:, as:}", c.String())
		}
		im := linkImport{element: name, alias: alias}
		if rest, ok := strings.CutPrefix(name, "@"); ok {
			im.element, im.directive = rest, true
			if alias != "" {
				if im.alias, ok = strings.CutPrefix(alias, "@"); !ok {
					return nil, fmt.Sprintf("import: %s is renamed to %q, which lacks the @ of a directive", name, alias)
				}
			}
		} else if strings.HasPrefix(alias, "@") {
			return nil, fmt.Sprintf("import: %s is not a directive, but is renamed to the directive %q", name, alias)
		}
		if im.alias == "" {
			im.alias = im.element
		}
		out = append(out, im)
	}
	return out, ""
}

func linkError(rawURL, format string, args ...any) *SchemaError {
	return &SchemaError{
		Coordinate: "schema",
		Message:    fmt.Sprintf("@link(url: %q): ", rawURL) + fmt.Sprintf(format, args...),
	}
}

// resolveNames finds the names of @cost and @listSize from the schema's @link directives:
//
//   - an @link of https://specs.apollo.dev/cost/v0.1 names them, by the link spec's rules:
//     import: ["@listSize"] or [{name: "@cost", as: "@weight"}] name what they import,
//     and what is not imported is @cost (the directive named like the spec, or the as: of
//     the link) and @cost__listSize;
//   - with no cost link, an @link of Apollo Federation can import them, or leaves them
//     namespaced (@federation__cost); the plain names count too, as a schema that
//     declares them itself is read without any link;
//   - with neither, the plain names.
//
// A link of another version of the cost spec, or one that imports from it anything but
// @cost and @listSize, is an error: costgate does not know those rules, and will not
// price the schema as if they were not there.
func resolveNames(dirs ast.DirectiveList) (directiveNames, []*SchemaError) {
	links, errs := parseLinks(dirs)
	var (
		names              directiveNames
		costLinks, fedLink []*specLink
	)
	for _, link := range links {
		switch {
		case link.is(costSpecName):
			costLinks = append(costLinks, link)
		case link.is(federationSpecName):
			fedLink = append(fedLink, link)
		}
	}
	for _, link := range costLinks {
		if link.version != costSpecVersion {
			errs = append(errs, linkError(link.raw, "costgate understands only %s; refusing the schema rather than ignoring its cost rules", costSpecURL))
			continue
		}
		for _, im := range link.imports {
			if !im.directive || (im.element != costDirective && im.element != listSizeDirective) {
				errs = append(errs, linkError(link.raw, "imports %q, which the cost spec %s does not define (only @cost and @listSize)",
					displayImport(im), costSpecVersion))
			}
		}
		cost := link.nameOf(costDirective)
		listSize := link.nameOf(listSizeDirective)
		names.cost = appendNew(names.cost, cost)
		names.listSize = appendNew(names.listSize, listSize)
		names.link = fmt.Sprintf("@link(url: %q)", link.raw)
	}
	if len(costLinks) > 0 {
		return names, errs
	}
	for _, link := range fedLink {
		cost := link.nameOf(costDirective)
		listSize := link.nameOf(listSizeDirective)
		names.cost = appendNew(names.cost, cost)
		names.listSize = appendNew(names.listSize, listSize)
	}
	names.cost = appendNew(names.cost, costDirective)
	names.listSize = appendNew(names.listSize, listSizeDirective)
	return names, errs
}

func displayImport(im linkImport) string {
	if im.directive {
		return "@" + im.element
	}
	return im.element
}

func appendNew(list []string, name string) []string {
	if slices.Contains(list, name) {
		return list
	}
	return append(list, name)
}
