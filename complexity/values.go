package complexity

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/vektah/gqlparser/v2/ast"
)

// add and mul saturate at MaxCost. Operands are in [0, MaxCost], so a+b cannot overflow.
func add(a, b int64) int64 {
	if s := a + b; s < MaxCost {
		return s
	}
	return MaxCost
}

func mul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > MaxCost/b {
		return MaxCost
	}
	return a * b
}

func pow(base int64, exp int) int64 {
	r := int64(1)
	for range exp {
		r = mul(r, base)
	}
	return r
}

// valueState tells a value apart from an explicit null and from no value at all (an
// omitted argument, or a variable with no value and no default).
type valueState int8

const (
	absent valueState = iota
	null
	present
)

// value is an input value resolved against the variables: a literal from the document,
// or a JSON-decoded value from the variables map.
type value struct {
	lit  *ast.Value
	json any
}

// inputs resolves argument values against one operation's variables.
type inputs struct {
	s    *Schema
	op   *ast.OperationDefinition
	vars map[string]any
}

// resolve follows a variable to its value, or to its declared default when the request
// did not give it.
func (in *inputs) resolve(v *ast.Value) (value, valueState) {
	if v == nil {
		return value{}, absent
	}
	switch v.Kind {
	case ast.Variable:
		if x, ok := in.vars[v.Raw]; ok {
			if x == nil {
				return value{}, null
			}
			return value{json: x}, present
		}
		vd := v.VariableDefinition
		if vd == nil && in.op != nil {
			vd = in.op.VariableDefinitions.ForName(v.Raw)
		}
		if vd != nil && vd.DefaultValue != nil && vd.DefaultValue.Kind != ast.Variable {
			return in.resolve(vd.DefaultValue)
		}
		return value{}, absent
	case ast.NullValue:
		return value{}, null
	}
	return value{lit: v}, present
}

// argument resolves a field argument, falling back to the schema default when the
// argument is absent (but not when it is an explicit null, as GraphQL coerces it).
func (in *inputs) argument(f *ast.Field, def *inputValueInfo) (v value, state valueState, explicit bool) {
	if a := f.Arguments.ForName(def.name); a != nil {
		v, state = in.resolve(a.Value)
		if state != absent {
			return v, state, true
		}
	}
	if def.def != nil {
		v, state = in.resolve(def.def)
	}
	return v, state, false
}

// child resolves a field of an input object value, with the field's default when absent.
func (in *inputs) child(v value, field *inputValueInfo) (value, valueState) {
	var (
		c     value
		state = absent
	)
	if v.lit != nil {
		if v.lit.Kind == ast.ObjectValue {
			c, state = in.resolve(v.lit.Children.ForName(field.name))
		}
	} else if m, ok := v.json.(map[string]any); ok {
		if x, ok := m[field.name]; ok {
			if x == nil {
				state = null
			} else {
				c, state = value{json: x}, present
			}
		}
	}
	if state == absent && field.def != nil {
		return in.resolve(field.def)
	}
	return c, state
}

// size reads a slicing argument: negative values clamp to 0, large ones to MaxCost, a
// fraction rounds up. A value that is not a number is no value.
func size(v value) (int64, bool) {
	var f float64
	if v.lit != nil {
		switch v.lit.Kind {
		case ast.IntValue:
			n, err := strconv.ParseInt(v.lit.Raw, 10, 64)
			if err == nil {
				return clamp(n), true
			}
			if len(v.lit.Raw) > 0 && v.lit.Raw[0] == '-' {
				return 0, true
			}
			return MaxCost, true
		case ast.FloatValue:
			var err error
			if f, err = strconv.ParseFloat(v.lit.Raw, 64); err != nil {
				return 0, false
			}
		default:
			return 0, false
		}
	} else {
		switch x := v.json.(type) {
		case int:
			return clamp(int64(x)), true
		case int64:
			return clamp(x), true
		case int32:
			return clamp(int64(x)), true
		case uint64:
			return clamp(int64(min(x, uint64(MaxCost)))), true
		case json.Number:
			if n, err := x.Int64(); err == nil {
				return clamp(n), true
			}
			var err error
			if f, err = x.Float64(); err != nil {
				return 0, false
			}
		case float64:
			f = x
		case float32:
			f = float64(x)
		default:
			return 0, false
		}
	}
	switch {
	case math.IsNaN(f):
		return 0, false
	case f <= 0:
		return 0, true
	case f >= float64(MaxCost):
		return MaxCost, true
	}
	return int64(math.Ceil(f)), true
}

// length reads a list-typed slicing argument: the number of items, where a single value
// given for a list is a list of one (GraphQL's input coercion).
func length(v value) int64 {
	if v.lit != nil {
		if v.lit.Kind == ast.ListValue {
			return clamp(int64(len(v.lit.Children)))
		}
		return 1
	}
	if list, ok := v.json.([]any); ok {
		return clamp(int64(len(list)))
	}
	return 1
}

func clamp(n int64) int64 {
	return max(0, min(n, MaxCost))
}

// boolean reads the `if:` of @skip/@include.
func (in *inputs) boolean(d *ast.Directive) (bool, bool) {
	a := d.Arguments.ForName("if")
	if a == nil {
		return false, false
	}
	v, state := in.resolve(a.Value)
	if state != present {
		return false, false
	}
	if v.lit != nil {
		if v.lit.Kind != ast.BooleanValue {
			return false, false
		}
		return v.lit.Raw == "true", true
	}
	b, ok := v.json.(bool)
	return b, ok
}

// included applies @skip and @include. An argument that cannot be read leaves the
// selection in (the upper bound).
func (in *inputs) included(dirs ast.DirectiveList) bool {
	for _, d := range dirs {
		switch d.Name {
		case "skip":
			if b, ok := in.boolean(d); ok && b {
				return false
			}
		case "include":
			if b, ok := in.boolean(d); ok && !b {
				return false
			}
		}
	}
	return true
}

// argCost is the @cost of the arguments present on f and of the input fields present
// in their values, and the input object cost of each input object value among them.
func (in *inputs) argCost(f *ast.Field, fi *fieldInfo) int64 {
	var total int64
	for _, a := range f.Arguments {
		def := fi.args[a.Name]
		if def == nil {
			continue
		}
		v, state := in.resolve(a.Value)
		if state != present {
			continue
		}
		total = add(total, def.weight)
		if def.named != nil && def.named.inputCost {
			total = add(total, in.inputCost(def.typ, v))
		}
	}
	return total
}

// inputCost adds the weights of the input fields present in v, a value of type typ. Each
// occurrence counts: a list of three filters with a weighted field pays it three times.
func (in *inputs) inputCost(typ *ast.Type, v value) int64 {
	if typ.Elem == nil {
		return in.inputObjectCost(typ.NamedType, v)
	}
	var total int64
	if v.lit != nil && v.lit.Kind == ast.ListValue {
		for _, c := range v.lit.Children {
			if cv, state := in.resolve(c.Value); state == present {
				total = add(total, in.inputCost(typ.Elem, cv))
			}
		}
		return total
	}
	if list, ok := v.json.([]any); ok && v.lit == nil {
		for _, x := range list {
			if x != nil {
				total = add(total, in.inputCost(typ.Elem, value{json: x}))
			}
		}
		return total
	}
	return in.inputCost(typ.Elem, v) // a single value where a list is expected is a list of one
}

// inputObjectCost is the input object cost of v, an input object value, plus the weights
// of its fields present (and their own input objects').
func (in *inputs) inputObjectCost(typeName string, v value) int64 {
	t := in.s.types[typeName]
	if t == nil || !t.inputCost {
		return 0
	}
	total := in.s.cfg.inputObjectCost
	visit := func(field *inputValueInfo, fv value) {
		total = add(total, field.weight)
		if field.named != nil && field.named.inputCost {
			total = add(total, in.inputCost(field.typ, fv))
		}
	}
	if v.lit != nil {
		if v.lit.Kind != ast.ObjectValue {
			return 0
		}
		for _, c := range v.lit.Children {
			if field := t.inputFields[c.Name]; field != nil {
				if fv, state := in.resolve(c.Value); state == present {
					visit(field, fv)
				}
			}
		}
		return total
	}
	m, ok := v.json.(map[string]any)
	if !ok {
		return 0
	}
	for name, x := range m {
		if field := t.inputFields[name]; field != nil && x != nil {
			visit(field, value{json: x})
		}
	}
	return total
}
