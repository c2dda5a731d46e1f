// Package gqlvalidate validates GraphQL documents against a schema with work
// bounded by the document, for costgate's middleware and proxy:
//
//	errs := gqlvalidate.Validate(schema, doc, gqlvalidate.Options{Suggestions: true})
//
// It runs gqlparser's rules, but for two of them, which are not linear in the
// document: OverlappingFieldsCanBeMerged compares every pair of fields with one
// response name (15 KB of them took seconds and gigabytes of errors), and
// NoFragmentCycles looks each spread up in a list. Both are replaced by rules
// of this package whose work is linear in each operation with its fragments
// expanded (see overlap.go). An answer holds at most MaxErrors errors, and then
// one saying that validation stopped, as graphql-js's validate does with
// maxErrors; every message and location list is bounded (Bound).
//
// The rest of the work is gqlparser's walk, which visits each fragment once
// for every operation and fragment that reaches it: bounded by the depth of
// fragment nesting, which callers limit before validating
// (complexity.MeasureDocument reports it).
package gqlvalidate

import (
	"sort"
	"sync"
	"unicode/utf8"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/validator/core"
	"github.com/vektah/gqlparser/v2/validator/rules"
)

// Bounds of an answer.
const (
	// MaxErrors is the most errors Validate reports, the "too many errors"
	// error aside.
	MaxErrors = 100
	// MaxMessageBytes bounds an error's message: it echoes names and values
	// from the document, which may be a megabyte long.
	MaxMessageBytes = 1024
	// MaxLocations bounds the locations of one error.
	MaxLocations = 8
	// MaxPath bounds the path of one error, and MaxPathName each name in it.
	MaxPath     = 32
	MaxPathName = 128
)

// Suggestions ("Did you mean ...?") cost a string distance between the name
// typed and each name of the schema that could stand for it: they are made
// for the first suggestedErrors errors of a document whose names are all at
// most maxSuggestedName bytes long, and the document is validated again
// without them when it has more errors than that.
const (
	suggestedErrors  = 10
	maxSuggestedName = 64
)

// TooManyErrors is the message of the error that ends an answer cut at
// MaxErrors.
const TooManyErrors = "too many validation errors: the first 100 are listed, and validation stopped there"

// Options change what Validate reports.
type Options struct {
	// Suggestions adds "Did you mean ...?" to the messages of unknown fields,
	// arguments, types and enum values, naming the schema's. Leave it off when
	// the schema is not public (introspection disabled).
	Suggestions bool
}

// Validate validates doc against schema and returns at most MaxErrors
// errors, then one with the message TooManyErrors when there were more,
// each bounded (Bound). Like gqlparser's validator it links the document to
// the schema (the Definition of each field and spread), so doc must not be
// read by others while it runs.
func Validate(schema *ast.Schema, doc *ast.QueryDocument, opts Options) gqlerror.List {
	if schema == nil || doc == nil {
		return gqlerror.List{gqlerror.Errorf("cannot validate without a schema and a document")}
	}
	if opts.Suggestions && !hasLongName(doc) {
		if errs, full := run(schema, doc, ruleSet(true), suggestedErrors); !full {
			return errs
		}
	}
	errs, full := run(schema, doc, ruleSet(false), MaxErrors)
	if full {
		errs = append(errs, &gqlerror.Error{Message: TooManyErrors, Rule: "MaxErrors"})
	}
	return errs
}

// errFull stops a walk once the error limit is reached: gqlparser's walk has
// no way to stop, so the error callback panics with it, and run recovers it
// (and nothing else).
type errFull struct{}

// run walks doc with the rules and returns their errors, at most limit;
// full reports that there were more (the walk stopped at the one over).
func run(schema *ast.Schema, doc *ast.QueryDocument, set []core.Rule, limit int) (errs gqlerror.List, full bool) {
	observers := &core.Events{}
	for _, rule := range set {
		name := rule.Name
		rule.RuleFunc(observers, func(options ...core.ErrorOption) {
			if len(errs) == limit {
				panic(errFull{})
			}
			e := &gqlerror.Error{Rule: name}
			for _, o := range options {
				o(e)
			}
			errs = append(errs, Bound(e))
		})
	}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(errFull); !ok {
				panic(r)
			}
			full = true
		}
	}()
	core.Walk(schema, doc, observers)
	return errs, false
}

var (
	rulesOnce            sync.Once
	withSugg, withoutSug []core.Rule
)

// ruleSet returns gqlparser's rules with this package's in place of the two
// that are not linear, sorted by name (the order gqlparser runs them in), with
// or without suggestions.
func ruleSet(suggestions bool) []core.Rule {
	rulesOnce.Do(func() {
		withSugg = build(true)
		withoutSug = build(false)
	})
	if suggestions {
		return withSugg
	}
	return withoutSug
}

// Rules returns the same rule set for gqlgen's
// handler.Server.SetValidationRulesFn, should gqlgen validate a document
// itself: without suggestions when suggestions is false. gqlgen's
// SetDisableSuggestion(true) must say the same: it swaps two rules of its own.
func Rules(suggestions bool) *rules.Rules {
	return rules.NewRules(ruleSet(suggestions)...)
}

func build(suggestions bool) []core.Rule {
	replaced := map[string]bool{
		rules.OverlappingFieldsCanBeMergedRule.Name: true,
		rules.NoFragmentCyclesRule.Name:             true,
	}
	// gqlparser names each variant without suggestions after its rule.
	without := map[string]core.Rule{
		rules.FieldsOnCorrectTypeRule.Name: rules.FieldsOnCorrectTypeRuleWithoutSuggestions,
		rules.KnownArgumentNamesRule.Name:  rules.KnownArgumentNamesRuleWithoutSuggestions,
		rules.KnownTypeNamesRule.Name:      rules.KnownTypeNamesRuleWithoutSuggestions,
		rules.ScalarLeafsRule.Name:         rules.ScalarLeafsRuleWithoutSuggestions,
		rules.ValuesOfCorrectTypeRule.Name: rules.ValuesOfCorrectTypeRuleWithoutSuggestions,
	}
	var set []core.Rule
	for name, f := range rules.NewDefaultRules().GetInner() {
		switch {
		case replaced[name]:
			continue
		case !suggestions && without[name].RuleFunc != nil:
			set = append(set, without[name])
		default:
			set = append(set, core.Rule{Name: name, RuleFunc: f})
		}
	}
	set = append(set, overlapRule, fragmentCyclesRule)
	sort.Sort(core.NameSorter(set))
	return set
}

// hasLongName reports a name in the document's source longer than
// maxSuggestedName bytes (or text that looks like one, in a string):
// suggesting a name for it would cost its length times the schema's names.
func hasLongName(doc *ast.QueryDocument) bool {
	var src *ast.Source
	switch {
	case len(doc.Operations) > 0 && doc.Operations[0].Position != nil:
		src = doc.Operations[0].Position.Src
	case len(doc.Fragments) > 0 && doc.Fragments[0].Position != nil:
		src = doc.Fragments[0].Position.Src
	}
	if src == nil {
		return true // no source to look at: suggest nothing
	}
	run := 0
	for i := 0; i < len(src.Input); i++ {
		c := src.Input[i]
		if c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			if run++; run > maxSuggestedName {
				return true
			}
			continue
		}
		run = 0
	}
	return false
}

// Bound cuts an error's message to MaxMessageBytes (on a UTF-8 boundary, with
// "…" after it), its locations to MaxLocations and its path to MaxPath
// elements of at most MaxPathName bytes, and returns it.
func Bound(e *gqlerror.Error) *gqlerror.Error {
	if e == nil {
		return nil
	}
	e.Message = Truncate(e.Message, MaxMessageBytes)
	if len(e.Locations) > MaxLocations {
		e.Locations = e.Locations[:MaxLocations]
	}
	if len(e.Path) > MaxPath {
		e.Path = e.Path[:MaxPath]
	}
	for i, p := range e.Path {
		if name, ok := p.(ast.PathName); ok && len(name) > MaxPathName {
			e.Path[i] = ast.PathName(Truncate(string(name), MaxPathName))
		}
	}
	return e
}

// Truncate returns s cut to at most max bytes on a UTF-8 boundary, with "…"
// in place of what was cut.
func Truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const ellipsis = "…"
	cut := max - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}
