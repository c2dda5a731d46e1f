package complexity

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/vektah/gqlparser/v2/ast"
)

// MaxCost is the largest cost, depth or count the package reports: 2^53−1, the largest
// integer a JavaScript client reads exactly. Sums and products saturate here instead of
// overflowing.
const MaxCost int64 = 1<<53 - 1

// Schema is a GraphQL schema with its @cost and @listSize directives read and checked.
// It is immutable and safe for concurrent use.
type Schema struct {
	ast      *ast.Schema
	cfg      config
	types    map[string]*typeInfo
	query    *typeInfo
	mutation *typeInfo
	subscr   *typeInfo
	// concrete caches, by (interface or union, Go type), the possible type a value of
	// the Go type stands for (see concreteIndex).
	concrete sync.Map
}

type typeInfo struct {
	name      string
	kind      ast.DefinitionKind
	weight    int64
	hasWeight bool

	// object and interface
	fields map[string]*fieldInfo
	// interface and union: the object types that can stand in for it
	possible []*typeInfo
	// object: the interfaces and unions it belongs to
	memberOf map[string]bool

	// input object
	inputFields map[string]*inputValueInfo
	// input object: some input field, here or nested, carries @cost
	inputCost bool
}

type fieldInfo struct {
	coordinate string // Type.field
	name       string
	typ        *typeInfo
	listDepth  int // 0 for T, 1 for [T], 2 for [[T]] ...
	weight     int64
	hasWeight  bool // from the field's own @cost, or its interfaces'
	args       map[string]*inputValueInfo
	argCost    bool // some argument, or a nested input field, carries @cost
	listSize   *listSizeInfo
}

// inputValueInfo is an argument or an input field.
type inputValueInfo struct {
	name      string
	typ       *ast.Type
	named     *typeInfo
	def       *ast.Value
	weight    int64
	hasWeight bool
}

type listSizeInfo struct {
	assumedSize    int64
	hasAssumedSize bool
	slicing        []slicingArgument
	sized          *sizedNode // the sizedFields paths; nil when there are none
	requireOne     bool
}

// slicingArgument is "first", or a path into an input object such as "filter.max". list
// is set when the value at its end is a list, whose length is the size ("ids").
type slicingArgument struct {
	name string
	path []string
	list bool
}

// NewSchema reads the cost directives of schema and checks them. Every problem is
// reported, each as a [*SchemaError] naming its place, joined with [errors.Join] in the
// order of their coordinates:
//
//   - a @cost weight that is not a non-negative integer (5, "5" and "5.0" are accepted);
//   - @listSize on a field that is not a list and names no sizedFields;
//   - a sizedFields path ("nodes", "edges.node", "results { page }") through a field
//     the type lacks, or ending at a field that is not a list;
//   - a slicing argument that is neither an Int nor a list argument (nor, for a path
//     into an input object such as "filter.max", an Int or list input field);
//   - a negative assumedSize, or a negative option;
//   - an @link of a version of the cost spec costgate does not understand, or one that
//     imports from it anything but @cost and @listSize; a plain @cost or @listSize in a
//     schema whose @link of the cost spec names the directive otherwise.
//
// The directives are found by name, @cost and @listSize, unless the schema links the
// cost spec, `schema @link(url: "https://specs.apollo.dev/cost/v0.1", import: [...])` or
// the same in `extend schema`. Then they have the names the link gives them, by the link
// spec's rules: an import names what it imports, renamed or not
// (`{name: "@cost", as: "@weight"}`, `"@listSize"`); what is not imported is @cost (the
// directive named like the spec, or the link's as:) and @cost__listSize. An @link of
// Apollo Federation (https://specs.apollo.dev/federation/v2.x) may import them too, or
// leave them namespaced as @federation__cost. A schema that links a cost spec costgate
// does not understand is refused (above), never priced without its rules.
//
// @cost and @listSize on an interface field apply to each implementing type's field that
// declares none of its own (and @cost on an interface field's argument to the same
// argument of the implementations).
func NewSchema(schema *ast.Schema, opts ...Option) (*Schema, error) {
	if schema == nil {
		return nil, errors.New("complexity: nil schema")
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	l := loader{s: &Schema{ast: schema, cfg: cfg, types: make(map[string]*typeInfo, len(schema.Types))}}
	l.checkConfig()
	l.load()
	l.checkCosts()
	if len(l.errs) > 0 {
		slices.SortStableFunc(l.errs, func(a, b *SchemaError) int { return strings.Compare(a.Coordinate, b.Coordinate) })
		errs := make([]error, len(l.errs))
		for i, e := range l.errs {
			errs[i] = e
		}
		return nil, errors.Join(errs...)
	}
	return l.s, nil
}

// AST returns the schema NewSchema was given.
func (s *Schema) AST() *ast.Schema { return s.ast }

type loader struct {
	s     *Schema
	names directiveNames
	errs  []*SchemaError
	// overlaid is set while a directive of the WithCosts overlay is read: its errors
	// are the overlay entry's.
	overlaid bool
}

func (l *loader) fail(coordinate, format string, args ...any) {
	l.errs = append(l.errs, &SchemaError{Coordinate: coordinate, Message: fmt.Sprintf(format, args...), InCosts: l.overlaid})
}

// directiveAt is the @cost (listSize false) or @listSize directive in effect at
// coordinate: the overlay's, else the one dirs holds. It sets l.overlaid accordingly.
func (l *loader) directiveAt(coordinate string, dirs ast.DirectiveList, listSize bool) *ast.Directive {
	if d := l.overlay(coordinate, listSize); d != nil {
		l.overlaid = true
		return d
	}
	l.overlaid = false
	if listSize {
		return l.directive(coordinate, dirs, l.names.listSize, listSizeDirective)
	}
	return l.directive(coordinate, dirs, l.names.cost, costDirective)
}

func (l *loader) checkConfig() {
	c := l.s.cfg
	for _, o := range []struct {
		name  string
		value int64
	}{
		{"default_list_size", c.defaultListSize},
		{"mutation_cost", c.mutationCost},
		{"introspection_cost", c.introspectionCost},
		{"input_object_cost", c.inputObjectCost},
	} {
		if o.value < 0 || o.value > MaxCost {
			l.fail("options", "%s must be between 0 and 2^53-1, got %d", o.name, o.value)
		}
	}
}

func (l *loader) load() {
	s := l.s
	var linkErrs []*SchemaError
	l.names, linkErrs = resolveNames(s.ast.SchemaDirectives)
	l.errs = append(l.errs, linkErrs...)
	names := make([]string, 0, len(s.ast.Types))
	for name := range s.ast.Types {
		names = append(names, name)
	}
	slices.Sort(names) // errors come out in a stable order

	for _, name := range names {
		def := s.ast.Types[name]
		t := &typeInfo{name: name, kind: def.Kind}
		t.weight, t.hasWeight = l.costOf(name, def.Directives)
		s.types[name] = t
	}
	for _, name := range names {
		def, t := s.ast.Types[name], s.types[name]
		if !def.IsAbstractType() {
			continue
		}
		for _, p := range s.ast.PossibleTypes[name] {
			o := s.types[p.Name]
			if o == nil || o.kind != ast.Object || slices.Contains(t.possible, o) {
				continue
			}
			t.possible = append(t.possible, o)
			if o.memberOf == nil {
				o.memberOf = map[string]bool{}
			}
			o.memberOf[name] = true
		}
	}
	for _, name := range names {
		def, t := s.ast.Types[name], s.types[name]
		switch def.Kind {
		case ast.InputObject:
			t.inputFields = make(map[string]*inputValueInfo, len(def.Fields))
			for _, f := range def.Fields {
				in := l.inputValue(name+"."+f.Name, f.Name, f.Type, f.DefaultValue, f.Directives)
				t.inputFields[f.Name] = in
			}
		case ast.Object, ast.Interface:
			t.fields = make(map[string]*fieldInfo, len(def.Fields))
			for _, f := range def.Fields {
				t.fields[f.Name] = l.field(t, f)
			}
		}
	}
	order := l.implementationOrder(names)
	l.inheritWeights(order)
	l.markInputCost(names)
	for _, name := range names {
		def, t := s.ast.Types[name], s.types[name]
		for _, f := range def.Fields {
			if fi := t.fields[f.Name]; fi != nil {
				l.listSize(fi, f)
			}
		}
	}
	l.inheritListSizes(order)
	root := func(d *ast.Definition) *typeInfo {
		if d == nil {
			return nil
		}
		return s.types[d.Name]
	}
	s.query, s.mutation, s.subscr = root(s.ast.Query), root(s.ast.Mutation), root(s.ast.Subscription)
}

func (l *loader) field(parent *typeInfo, f *ast.FieldDefinition) *fieldInfo {
	fi := &fieldInfo{
		coordinate: parent.name + "." + f.Name,
		name:       f.Name,
		typ:        l.s.types[f.Type.Name()],
	}
	if fi.typ == nil { // an ast.Schema built by hand may name a type it lacks
		fi.typ = &typeInfo{name: f.Type.Name(), kind: ast.Scalar}
	}
	for t := f.Type; t.Elem != nil; t = t.Elem {
		fi.listDepth++
	}
	fi.weight, fi.hasWeight = l.costOf(fi.coordinate, f.Directives)
	if len(f.Arguments) > 0 {
		fi.args = make(map[string]*inputValueInfo, len(f.Arguments))
		for _, a := range f.Arguments {
			coordinate := fi.coordinate + "(" + a.Name + ":)"
			fi.args[a.Name] = l.inputValue(coordinate, a.Name, a.Type, a.DefaultValue, a.Directives)
		}
	}
	return fi
}

func (l *loader) inputValue(coordinate, name string, typ *ast.Type, def *ast.Value, dirs ast.DirectiveList) *inputValueInfo {
	in := &inputValueInfo{name: name, typ: typ, named: l.s.types[typ.Name()], def: def}
	in.weight, in.hasWeight = l.costOf(coordinate, dirs)
	return in
}

// implementationOrder lists the object and interface types that implement an interface,
// each after the interfaces it implements, so that inheritance flows down a chain of
// interfaces (interface Node, interface Product implements Node, type Shoe implements
// Product & Node).
func (l *loader) implementationOrder(names []string) []*typeInfo {
	var (
		order []*typeInfo
		seen  = map[string]bool{}
		visit func(name string)
	)
	visit = func(name string) {
		def := l.s.ast.Types[name]
		if seen[name] || def == nil || (def.Kind != ast.Object && def.Kind != ast.Interface) {
			return
		}
		seen[name] = true // before the interfaces: a cycle (an invalid schema) stops here
		for _, i := range def.Interfaces {
			visit(i)
		}
		if len(def.Interfaces) > 0 {
			order = append(order, l.s.types[name])
		}
	}
	for _, name := range names {
		visit(name)
	}
	return order
}

// interfaces are the interface types t declares it implements.
func (l *loader) interfaces(t *typeInfo) []*typeInfo {
	var out []*typeInfo
	for _, name := range l.s.ast.Types[t.name].Interfaces {
		if i := l.s.types[name]; i != nil && i.kind == ast.Interface {
			out = append(out, i)
		}
	}
	return out
}

// inheritWeights gives a field (and each argument) that has no @cost of its own the
// largest @cost among the same field (argument) of the interfaces its type implements.
func (l *loader) inheritWeights(order []*typeInfo) {
	for _, t := range order {
		interfaces := l.interfaces(t)
		for name, fi := range t.fields {
			ownField := fi.hasWeight
			ownArgs := make(map[string]bool, len(fi.args))
			for an, a := range fi.args {
				ownArgs[an] = a.hasWeight
			}
			for _, i := range interfaces {
				ifi := i.fields[name]
				if ifi == nil {
					continue
				}
				if !ownField && ifi.hasWeight && (!fi.hasWeight || ifi.weight > fi.weight) {
					fi.weight, fi.hasWeight = ifi.weight, true
				}
				for an, a := range fi.args {
					ia := ifi.args[an]
					if !ownArgs[an] && ia != nil && ia.hasWeight && (!a.hasWeight || ia.weight > a.weight) {
						a.weight, a.hasWeight = ia.weight, true
					}
				}
			}
		}
	}
}

// inheritListSizes gives a field with no @listSize of its own the @listSize of the same
// field of the first interface (in the order the type names them) that has one. The
// implementing field has the interface field's arguments, and sizedFields are looked up
// by name, so the directive reads the same on either.
func (l *loader) inheritListSizes(order []*typeInfo) {
	for _, t := range order {
		interfaces := l.interfaces(t)
		for name, fi := range t.fields {
			if fi.listSize != nil {
				continue
			}
			for _, i := range interfaces {
				if ifi := i.fields[name]; ifi != nil && ifi.listSize != nil {
					fi.listSize = ifi.listSize
					break
				}
			}
		}
	}
}

// markInputCost finds, to a fixed point (input types may be recursive), the input types
// that hold a weighted input field (all of them, with an input object cost), and the
// fields whose arguments can cost anything.
func (l *loader) markInputCost(names []string) {
	if l.s.cfg.inputObjectCost > 0 { // every input object value costs
		for _, name := range names {
			if t := l.s.types[name]; t.kind == ast.InputObject {
				t.inputCost = true
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for _, name := range names {
			t := l.s.types[name]
			if t.kind != ast.InputObject || t.inputCost {
				continue
			}
			for _, in := range t.inputFields {
				if in.hasWeight || (in.named != nil && in.named.inputCost) {
					t.inputCost, changed = true, true
					break
				}
			}
		}
	}
	for _, name := range names {
		for _, fi := range l.s.types[name].fields {
			for _, a := range fi.args {
				if a.hasWeight || (a.named != nil && a.named.inputCost) {
					fi.argCost = true
				}
			}
		}
	}
}

// directive finds the directive of one of names in dirs. A directive with the plain name
// (canonical) that the schema's @link renamed is an error: costgate will not guess
// whether it carries cost rules. No names at all means the link was refused already.
func (l *loader) directive(coordinate string, dirs ast.DirectiveList, names []string, canonical string) *ast.Directive {
	for _, d := range dirs {
		if slices.Contains(names, d.Name) {
			return d
		}
	}
	if len(names) > 0 && !slices.Contains(names, canonical) && dirs.ForName(canonical) != nil {
		l.fail(coordinate, "@%s is not the cost spec's directive in this schema: %s names it @%s; import it under its own name or write @%s",
			canonical, l.names.link, names[0], names[0])
	}
	return nil
}

// costOf reads @cost(weight:) from dirs.
func (l *loader) costOf(coordinate string, dirs ast.DirectiveList) (int64, bool) {
	d := l.directiveAt(coordinate, dirs, false)
	defer func() { l.overlaid = false }()
	if d == nil {
		return 0, false
	}
	arg := d.Arguments.ForName("weight")
	if arg == nil || arg.Value == nil {
		l.fail(coordinate, "@cost has no weight")
		return 0, false
	}
	w, ok := parseWeight(arg.Value)
	if !ok {
		l.fail(coordinate, "@cost(weight: %s): weight must be a non-negative integer", arg.Value.String())
		return 0, false
	}
	return w, true
}

// parseWeight accepts an Int (Apollo), an integer in a String (IBM), or either written
// with a zero fraction ("2.0", as the IBM spec's own examples do).
func parseWeight(v *ast.Value) (int64, bool) {
	switch v.Kind {
	case ast.IntValue, ast.FloatValue, ast.StringValue, ast.BlockValue:
	default:
		return 0, false
	}
	s := strings.TrimSpace(v.Raw)
	if whole, frac, ok := strings.Cut(s, "."); ok {
		if frac == "" || strings.Trim(frac, "0") != "" {
			return 0, false
		}
		s = whole
	}
	if s == "" || s[0] == '-' || s[0] == '+' {
		return 0, false
	}
	w, err := strconv.ParseInt(s, 10, 64)
	if err != nil || w > MaxCost {
		return 0, false
	}
	return w, true
}

func (l *loader) listSize(fi *fieldInfo, f *ast.FieldDefinition) {
	d := l.directiveAt(fi.coordinate, f.Directives, true)
	defer func() { l.overlaid = false }()
	if d == nil {
		return
	}
	ls := &listSizeInfo{requireOne: l.requireOneDefault(d)}
	var sizedFields []string
	for _, arg := range d.Arguments {
		v := arg.Value
		if v == nil || v.Kind == ast.NullValue {
			continue
		}
		switch arg.Name {
		case "assumedSize":
			n, err := strconv.ParseInt(v.Raw, 10, 64)
			if v.Kind != ast.IntValue || err != nil || n < 0 {
				l.fail(fi.coordinate, "@listSize(assumedSize: %s): must be a non-negative Int", v.String())
				continue
			}
			ls.assumedSize, ls.hasAssumedSize = min(n, MaxCost), true
		case "slicingArguments":
			names, ok := stringList(v)
			if !ok {
				l.fail(fi.coordinate, "@listSize(slicingArguments: %s): must be a list of strings", v.String())
			}
			for _, name := range names {
				ls.slicing = append(ls.slicing, slicingArgument{name: name, path: strings.Split(name, ".")})
			}
		case "sizedFields":
			names, ok := stringList(v)
			if !ok {
				l.fail(fi.coordinate, "@listSize(sizedFields: %s): must be a list of strings", v.String())
			}
			sizedFields = names
		case "requireOneSlicingArgument":
			if v.Kind != ast.BooleanValue {
				l.fail(fi.coordinate, "@listSize(requireOneSlicingArgument: %s): must be a Boolean", v.String())
				continue
			}
			ls.requireOne = v.Raw == "true"
		}
	}
	if fi.listDepth == 0 && len(sizedFields) == 0 {
		l.fail(fi.coordinate, "@listSize on a non-list field (%s); a connection field names its lists in sizedFields", f.Type.String())
	}
	for _, entry := range sizedFields {
		l.sizedField(fi, ls, entry)
	}
	for i := range ls.slicing {
		l.checkSlicingArgument(fi, f, &ls.slicing[i])
	}
	fi.listSize = ls
}

// sizedField checks one sizedFields entry against the types it walks and adds its paths
// to ls. Each field on a path must exist; the last must be a list.
func (l *loader) sizedField(fi *fieldInfo, ls *listSizeInfo, entry string) {
	paths, err := parseSizedField(entry)
	if err != nil {
		l.fail(fi.coordinate, "@listSize(sizedFields:): %q: %v", entry, err)
		return
	}
	where := ""
	if len(paths) > 1 || len(paths[0]) > 1 {
		where = strconv.Quote(entry) + ": "
	}
	ok := true
	for _, path := range paths {
		t := fi.typ
		for i, name := range path {
			field := t.fields[name]
			if field == nil {
				l.fail(fi.coordinate, "@listSize(sizedFields:): %s%s has no field %q", where, t.name, name)
				ok = false
				break
			}
			if i == len(path)-1 && field.listDepth == 0 {
				l.fail(fi.coordinate, "@listSize(sizedFields:): %s%s is not a list", where, field.coordinate)
				ok = false
			}
			t = field.typ
		}
	}
	if !ok {
		return
	}
	if ls.sized == nil {
		ls.sized = &sizedNode{}
	}
	for _, path := range paths {
		ls.sized.add(path)
	}
}

// requireOneDefault is the declared default of requireOneSlicingArgument, or true (the
// IBM spec's) when the declaration gives none.
func (l *loader) requireOneDefault(d *ast.Directive) bool {
	def := d.Definition
	if def == nil {
		def = l.s.ast.Directives[d.Name]
	}
	if def != nil {
		if a := def.Arguments.ForName("requireOneSlicingArgument"); a != nil && a.DefaultValue != nil &&
			a.DefaultValue.Kind == ast.BooleanValue {
			return a.DefaultValue.Raw == "true"
		}
	}
	return true
}

func (l *loader) checkSlicingArgument(fi *fieldInfo, f *ast.FieldDefinition, sa *slicingArgument) {
	arg := f.Arguments.ForName(sa.path[0])
	if arg == nil {
		l.fail(fi.coordinate, "@listSize(slicingArguments:): %q is not an argument of the field", sa.name)
		return
	}
	typ := arg.Type
	for _, step := range sa.path[1:] {
		in := l.s.types[typ.Name()]
		if typ.Elem != nil || in == nil || in.kind != ast.InputObject {
			l.fail(fi.coordinate, "@listSize(slicingArguments:): %q: %s is not an input object", sa.name, typ.String())
			return
		}
		field := in.inputFields[step]
		if field == nil {
			l.fail(fi.coordinate, "@listSize(slicingArguments:): %q: %s has no field %q", sa.name, in.name, step)
			return
		}
		typ = field.typ
	}
	switch {
	case typ.Elem != nil:
		sa.list = true // its length is the size
	case typ.NamedType != "Int":
		l.fail(fi.coordinate, "@listSize(slicingArguments:): %q is neither an Int nor a list argument (it is %s)", sa.name, typ.String())
	}
}

// stringList reads ["a", "b"], or "a" alone (input coercion of a single value to a list).
func stringList(v *ast.Value) ([]string, bool) {
	switch v.Kind {
	case ast.StringValue, ast.BlockValue:
		return []string{v.Raw}, true
	case ast.ListValue:
		out := make([]string, 0, len(v.Children))
		for _, c := range v.Children {
			if c.Value == nil || (c.Value.Kind != ast.StringValue && c.Value.Kind != ast.BlockValue) {
				return out, false
			}
			out = append(out, c.Value.Raw)
		}
		return out, true
	}
	return nil, false
}

func (s *Schema) rootType(op ast.Operation) *typeInfo {
	switch op {
	case ast.Mutation:
		return s.mutation
	case ast.Subscription:
		return s.subscr
	}
	return s.query
}

// satisfies reports whether object type o matches a fragment's type condition.
func (o *typeInfo) satisfies(condition string) bool {
	return condition == "" || condition == o.name || o.memberOf[condition]
}
