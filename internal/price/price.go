// Package price is costgate price: a client's operations, or its manifest
// of trusted documents, priced and checked as the server would, for the
// client's build (docs/trusted-documents.md).
//
//	os.Exit(price.Run(os.Args[2:], os.Stdout, os.Stderr))
package price

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/internal/config"
	"github.com/costgate/costgate/internal/manifest"
	"github.com/costgate/costgate/limiter/gqllimit"
)

// Exit statuses of costgate price.
const (
	ExitOK     = 0 // every operation can run
	ExitFailed = 1 // one cannot: it does not parse or validate, or is over a limit
	ExitUsage  = 2 // the check could not run: a flag, a file, the schema
)

const ExitUsageText = `usage: costgate price -schema schema.graphqls [-costs costs.yaml] [-max-cost 1000] [-json] FILE...

Prices each operation of each FILE as costgate would: a .graphql document
(fragments may be defined in any of the files given), or a manifest of
trusted documents (.json: Apollo's persisted query manifest, or a
{"id": "document"} map of Relay or GraphQL Codegen). It prints each
operation's cost, depth, aliases, fields and costliest paths, and exits 1
naming each operation that does not validate or is over a limit (2 when the
check cannot run). The limits and the pricing default to the server's.

`

// checker is what costgate price checks against.
type checker struct {
	schema     *complexity.Schema
	maxCost    int64
	maxDepth   int
	maxAliases int
	maxFields  int
	maxTokens  int
}

// operation is one line of costgate price's answer.
type operation struct {
	File string `json:"file"`
	Line int    `json:"line,omitempty"`
	// ID is the document's id in a manifest.
	ID   string `json:"id,omitempty"`
	Name string `json:"name"`
	Type string `json:"type,omitempty"`
	// Cost is the price with the variables left out (their defaults, else
	// the list sizes the schema assumes); null when it could not be priced.
	Cost    *int64 `json:"cost"`
	Depth   int    `json:"depth"`
	Aliases int    `json:"aliases"`
	Fields  int    `json:"fields"`
	// CostVariables are the variables the price depends on: each request
	// is priced with its own values.
	CostVariables  []string   `json:"costVariables,omitempty"`
	CostliestPaths []pathCost `json:"costliestPaths"`
	Error          *problem   `json:"error,omitempty"`
}

// pathCost is what one response path adds to the price by itself: its
// weight (and its arguments'), times the lists around it; its children's
// costs are theirs.
type pathCost struct {
	Path string `json:"path"`
	Cost int64  `json:"cost"`
}

// problem is why an operation cannot run, with the code a request for
// it would be answered.
type problem struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// costliestShown is how many paths an operation lists.
const costliestShown = 3

// Run runs costgate price with args (what follows "price") and returns
// the exit status.
func Run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("costgate price", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, ExitUsageText)
		fs.PrintDefaults()
	}
	schemaPath := fs.String("schema", "", "the server's schema (SDL), with its @cost and @listSize")
	costsPath := fs.String("costs", "", "cost settings over the schema, as graphql.costs takes them (costs.yaml)")
	asJSON := fs.Bool("json", false, "answer in JSON")
	maxCost := fs.Int64("max-cost", gqllimit.DefaultMaxCost, "graphql.max_cost")
	maxDepth := fs.Int("max-depth", gqllimit.DefaultMaxDepth, "graphql.max_depth")
	maxAliases := fs.Int("max-aliases", gqllimit.DefaultMaxAliases, "graphql.max_aliases")
	maxFields := fs.Int("max-fields", gqllimit.DefaultMaxFields, "graphql.max_fields")
	maxTokens := fs.Int("max-tokens", gqllimit.DefaultMaxTokens, "graphql.max_tokens (manifests: each document as clients send it)")
	listSize := fs.Int("default-list-size", complexity.DefaultListSize, "graphql.default_list_size")
	mutationCost := fs.Int("mutation-cost", complexity.DefaultMutationCost, "graphql.mutation_cost")
	inputObjectCost := fs.Int("input-object-cost", 0, "graphql.input_object_cost")
	introspectionCost := fs.Int("introspection-cost", complexity.DefaultIntrospectionCost, "graphql.introspection_cost")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "costgate price: "+format+"\n", a...)
		return ExitUsage
	}
	switch {
	case *schemaPath == "":
		return usage("-schema is required: the server's SDL, with its @cost and @listSize")
	case fs.NArg() == 0:
		return usage("no FILE: give .graphql documents or a manifest of trusted documents")
	}
	for _, f := range []struct {
		name  string
		value int64
	}{{"max-cost", *maxCost}, {"max-depth", int64(*maxDepth)}, {"max-aliases", int64(*maxAliases)}, {"max-fields", int64(*maxFields)}, {"max-tokens", int64(*maxTokens)}} {
		if f.value < 1 {
			return usage("-%s must be at least 1, got %d: the server has no way to turn it off", f.name, f.value)
		}
	}
	opts := []complexity.Option{complexity.WithDefaultListSize(*listSize), complexity.WithMutationCost(*mutationCost),
		complexity.WithInputObjectCost(*inputObjectCost), complexity.WithIntrospectionCost(*introspectionCost)}
	var costs *config.Config
	if *costsPath != "" {
		var err error
		if costs, err = config.LoadCosts(*costsPath); err != nil {
			return usage("%v", err)
		}
		opts = append(opts, complexity.WithCosts(costs.Costs()))
	}
	sdl, err := os.ReadFile(*schemaPath)
	if err != nil {
		return usage("%v", err)
	}
	schema, err := complexity.LoadSDL(*schemaPath, string(sdl), opts...)
	if err != nil {
		if costs != nil {
			err = costs.SchemaErrors(err, *schemaPath) // a costs entry's refusal, against its line
		}
		return usage("%v", err)
	}
	c := checker{schema: schema, maxCost: *maxCost, maxDepth: *maxDepth, maxAliases: *maxAliases, maxFields: *maxFields, maxTokens: *maxTokens}

	var ops []operation
	var documents []string
	for _, path := range fs.Args() {
		if strings.EqualFold(filepath.Ext(path), ".json") {
			more, err := c.priceManifest(path)
			if err != nil {
				return usage("%v", err)
			}
			ops = append(ops, more...)
			continue
		}
		documents = append(documents, path)
	}
	more, err := c.priceDocuments(documents)
	if err != nil {
		return usage("%v", err)
	}
	ops = append(ops, more...)

	failed := 0
	for i, op := range ops {
		if op.CostliestPaths == nil {
			ops[i].CostliestPaths = []pathCost{} // [] in JSON, for scripts
		}
		if op.Error != nil {
			failed++
		}
	}
	defer func() { // after the answer: the last lines of a build's log say why it failed
		for _, op := range ops {
			if op.Error != nil {
				fmt.Fprintf(stderr, "costgate price: %s: %s: %s\n", op.label(), op.Error.Code, op.Error.Message)
			}
		}
	}()
	if *asJSON {
		out, _ := json.MarshalIndent(struct {
			Operations []operation `json:"operations"`
			Failed     int         `json:"failed"`
		}{ops, failed}, "", "  ")
		fmt.Fprintf(stdout, "%s\n", out)
	} else {
		writeTable(stdout, ops)
	}
	if failed > 0 {
		return ExitFailed
	}
	return ExitOK
}

// label names an operation for a person: its name, and where it is.
func (op *operation) label() string {
	if op.Type == "" && op.Name == "" { // the file as a whole
		if op.Line > 0 {
			return fmt.Sprintf("%s:%d", op.File, op.Line)
		}
		return op.File
	}
	name := op.Name
	if name == "" {
		name = "(anonymous)"
	}
	if op.ID != "" {
		id := op.ID
		if len(id) > 16 {
			id = id[:16] + "…"
		}
		return fmt.Sprintf("%s (%s %s)", name, op.File, id)
	}
	return fmt.Sprintf("%s (%s:%d)", name, op.File, op.Line)
}

func writeTable(w io.Writer, ops []operation) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OPERATION\tCOST\tDEPTH\tALIASES\tFIELDS\tRESULT\tCOSTLIEST PATHS")
	varying := false
	for _, op := range ops {
		cost := "-"
		if op.Cost != nil {
			cost = strconv.FormatInt(*op.Cost, 10)
			if len(op.CostVariables) > 0 {
				cost += "*"
				varying = true
			}
		}
		result := "ok"
		if op.Error != nil {
			result = op.Error.Code
		}
		var paths []string
		for _, p := range op.CostliestPaths {
			paths = append(paths, p.Path+" "+strconv.FormatInt(p.Cost, 10))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\n", op.label(), cost, op.Depth, op.Aliases, op.Fields, result, strings.Join(paths, ", "))
	}
	tw.Flush()
	if varying {
		fmt.Fprintln(w, "* the price depends on variables: priced with them left out (their defaults, else the list sizes the schema assumes); each request is priced with its own")
	}
}

// priceManifest prices each document of a manifest as the server does when
// the list loads: each body on its own, exactly as clients send it.
func (c checker) priceManifest(path string) ([]operation, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	docs, err := manifest.Parse(data)
	if err != nil {
		// The list itself is what the build must fix.
		return []operation{{File: path, Error: &problem{Code: "BAD_MANIFEST", Message: err.Error()}}}, nil
	}
	var ops []operation
	for _, d := range docs {
		base := operation{File: path, ID: d.ID, Name: d.Name, Type: d.Type}
		doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: d.Body}, c.maxTokens)
		if err != nil {
			base.Error = &problem{Code: gqllimit.CodeParseFailed, Message: describe(err, "")}
			if strings.Contains(err.Error(), "exceeded token limit") {
				base.Error = &problem{Code: gqllimit.CodeMaxTokensExceeded, Message: fmt.Sprintf("the document has more than %d tokens", c.maxTokens)}
			}
			ops = append(ops, base)
			continue
		}
		ops = append(ops, c.priceDocument(base, doc)...)
	}
	return ops, nil
}

// priceDocuments prices every operation of .graphql files, each with the
// fragments it spreads, from whichever file defines them (as a client
// sends an operation and its fragments).
func (c checker) priceDocuments(paths []string) ([]operation, error) {
	type located struct {
		op   *ast.OperationDefinition
		file string
	}
	var ops []located
	fragments := map[string]*ast.FragmentDefinition{}
	fragmentFile := map[string]string{}
	var out []operation
	for _, path := range paths {
		text, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		doc, err := parser.ParseQuery(&ast.Source{Name: path, Input: string(text)})
		if err != nil {
			out = append(out, operation{File: path, Line: line(err), Error: &problem{Code: gqllimit.CodeParseFailed, Message: describe(err, path)}})
			continue
		}
		for _, op := range doc.Operations {
			ops = append(ops, located{op, path})
		}
		for _, f := range doc.Fragments {
			if other, ok := fragmentFile[f.Name]; ok {
				out = append(out, operation{File: path, Line: f.Position.Line, Name: f.Name, Error: &problem{Code: gqllimit.CodeValidationFailed,
					Message: fmt.Sprintf("fragment %s is defined twice, here and in %s", f.Name, other)}})
				continue
			}
			fragments[f.Name], fragmentFile[f.Name] = f, path
		}
	}
	for _, l := range ops {
		doc := &ast.QueryDocument{Operations: ast.OperationList{l.op}, Fragments: spreadFragments(l.op.SelectionSet, fragments)}
		base := operation{File: l.file, Line: l.op.Position.Line, Name: l.op.Name, Type: string(l.op.Operation)}
		out = append(out, c.priceDocument(base, doc)...)
	}
	return out, nil
}

// spreadFragments lists the fragments set spreads, directly or not, in the
// order first met; one the files do not define is left for validation to
// report.
func spreadFragments(set ast.SelectionSet, fragments map[string]*ast.FragmentDefinition) ast.FragmentDefinitionList {
	var out ast.FragmentDefinitionList
	seen := map[string]bool{}
	var walk func(ast.SelectionSet)
	walk = func(set ast.SelectionSet) {
		for _, sel := range set {
			switch s := sel.(type) {
			case *ast.Field:
				walk(s.SelectionSet)
			case *ast.InlineFragment:
				walk(s.SelectionSet)
			case *ast.FragmentSpread:
				if f := fragments[s.Name]; f != nil && !seen[s.Name] {
					seen[s.Name] = true
					out = append(out, f)
					walk(f.SelectionSet)
				}
			}
		}
	}
	walk(set)
	return out
}

// priceDocument checks each operation of doc as a request for it would be
// checked, in the server's order: its depth, aliases and fields, then
// validation, then its price.
func (c checker) priceDocument(base operation, doc *ast.QueryDocument) []operation {
	if len(doc.Operations) == 0 {
		base.Error = &problem{Code: gqllimit.CodeValidationFailed, Message: "no operation in the document"}
		return []operation{base}
	}
	out := make([]operation, len(doc.Operations))
	for i, op := range doc.Operations {
		out[i] = base
		if out[i].Name == "" || len(doc.Operations) > 1 {
			out[i].Name = op.Name
		}
		out[i].Type = string(op.Operation)
		if out[i].Line == 0 && base.ID == "" {
			out[i].Line = op.Position.Line
		}
		m, err := complexity.Measure(doc, op.Name)
		if err != nil {
			out[i].Error = &problem{Code: gqllimit.CodeValidationFailed, Message: err.Error()}
			continue
		}
		out[i].Depth, out[i].Aliases, out[i].Fields = m.Depth, m.Aliases, m.Fields
		out[i].Error = c.shape(m)
	}
	if errs := validator.ValidateWithRules(c.schema.AST(), doc, nil); len(errs) > 0 {
		file := base.File
		if base.ID != "" {
			file = "" // a manifest's document: its lines are the document's
		}
		msg := describe(errs[0], file)
		if len(errs) > 1 {
			msg += fmt.Sprintf(", and %d more errors", len(errs)-1)
		}
		for i := range out {
			if out[i].Error == nil {
				out[i].Error = &problem{Code: gqllimit.CodeValidationFailed, Message: msg}
			}
		}
		return out
	}
	for i, op := range doc.Operations {
		if out[i].Error != nil {
			continue
		}
		out[i].CostVariables = c.schema.CostVariables(op)
		res, err := c.schema.AnalyzeOperation(op, nil, complexity.WithBreakdown())
		if err != nil {
			var oe *complexity.OperationError
			switch {
			case len(out[i].CostVariables) > 0 && errors.As(err, &oe):
				// With the variables left out it cannot be priced; each
				// request is, with its own.
			case errors.As(err, &oe):
				out[i].Error = &problem{Code: oe.Code, Message: oe.Error()}
			default:
				out[i].Error = &problem{Code: gqllimit.CodeValidationFailed, Message: err.Error()}
			}
			continue
		}
		cost := max(res.Cost, 1)
		out[i].Cost = &cost
		out[i].CostliestPaths = costliest(res.Breakdown, costliestShown)
		if cost > c.maxCost {
			out[i].Error = &problem{Code: gqllimit.CodeMaxCostExceeded, Message: fmt.Sprintf("the operation costs %d, more than the maximum of %d", cost, c.maxCost)}
		}
	}
	return out
}

// shape checks depth, aliases and fields against the limits.
func (c checker) shape(m complexity.Limits) *problem {
	switch {
	case m.Depth > c.maxDepth:
		return &problem{Code: gqllimit.CodeMaxDepthExceeded, Message: fmt.Sprintf("the operation is %d fields deep, more than the maximum of %d", m.Depth, c.maxDepth)}
	case m.Aliases > c.maxAliases:
		return &problem{Code: gqllimit.CodeMaxAliasesExceeded, Message: fmt.Sprintf("the operation has %d aliases, more than the maximum of %d", m.Aliases, c.maxAliases)}
	case m.Fields > c.maxFields:
		return &problem{Code: gqllimit.CodeMaxFieldsExceeded, Message: fmt.Sprintf("the operation selects %d fields, more than the maximum of %d", m.Fields, c.maxFields)}
	}
	return nil
}

// costliest are the n paths of a breakdown that add the most by
// themselves: each entry's total less its children's.
func costliest(breakdown []complexity.FieldCost, n int) []pathCost {
	children := make(map[string]int64, len(breakdown))
	for _, f := range breakdown {
		if i := strings.LastIndexByte(f.Path, '.'); i >= 0 {
			children[f.Path[:i]] += f.RequestedTotal
		}
	}
	paths := make([]pathCost, 0, len(breakdown))
	for _, f := range breakdown {
		if own := f.RequestedTotal - children[f.Path]; own > 0 {
			paths = append(paths, pathCost{f.Path, own})
		}
	}
	slices.SortStableFunc(paths, func(a, b pathCost) int { return int(min(max(b.Cost-a.Cost, -1), 1)) })
	return paths[:min(n, len(paths))]
}

// describe is a gqlparser error's message and where: file:line:column in a
// .graphql file, the line and column of the document in a manifest (file "").
func describe(err error, file string) string {
	var ge *gqlerror.Error
	if !errors.As(err, &ge) {
		return err.Error()
	}
	if len(ge.Locations) == 0 {
		return ge.Message
	}
	at := ge.Locations[0]
	if file != "" {
		return fmt.Sprintf("%s:%d:%d: %s", file, at.Line, at.Column, ge.Message)
	}
	return fmt.Sprintf("%s (line %d, column %d of the document)", ge.Message, at.Line, at.Column)
}

// line is the line of a gqlparser error, or 0.
func line(err error) int {
	var ge *gqlerror.Error
	if errors.As(err, &ge) && len(ge.Locations) > 0 {
		return ge.Locations[0].Line
	}
	return 0
}
